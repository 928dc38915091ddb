use std::path::Path;

use super::*;
use crate::names::vars::{NETWORK_ALLOW_VAR, NETWORK_RESOLVE_VAR};

/// A home folder of the tests' own: resolving options without an `owner` keeps the Po home's
/// owner id in it (never in a made-up `/h`).
fn home() -> &'static str {
    static HOME: std::sync::LazyLock<tempfile::TempDir> =
        std::sync::LazyLock::new(|| tempfile::tempdir().unwrap());
    HOME.path().to_str().unwrap()
}

fn code_and_message<T: std::fmt::Debug>(r: Result<T>) -> (&'static str, String) {
    let e = r.unwrap_err();
    (e.code(), e.to_string())
}

#[test]
fn defaults_from_a_plain_host() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_str().unwrap();
    let h = HostEnv::with_vars(&[("HOME", home), ("XDG_RUNTIME_DIR", "/run/user/5")]);
    let o = ProviderOptions::resolve(GivenOptions::default(), h.clone()).unwrap();
    assert_eq!(o.po_home, dir.path().join(".po"));
    // The Po home's own id, kept in its file.
    assert_eq!(o.owner, default_owner(&dir.path().join(".po")));
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".po/sandbox-owner")).unwrap(),
        format!("{}\n", o.owner)
    );
    assert_eq!(o.owner.len(), 12);
    // Bad options make no owner file.
    let other = tempfile::tempdir().unwrap();
    let bad = GivenOptions {
        po_home: Some(other.path().join("po").to_string_lossy().into()),
        pids_limit: Some(-1.0),
        ..GivenOptions::default()
    };
    assert!(ProviderOptions::resolve(bad, h.clone()).is_err());
    assert!(!other.path().join("po").exists());
    assert!(o.workspaces.is_empty());
    assert_eq!(o.runtime_version, None);
    assert_eq!(o.pids_limit, DEFAULT_PIDS_LIMIT);
    assert_eq!(o.health_timeout, DEFAULT_HEALTH_TIMEOUT);
    assert_eq!(o.concurrency, DEFAULT_CONCURRENCY);
    assert!(o.broker);
    assert_eq!(o.broker_socket_dir, Path::new("/run/user/5/po-broker"));
    assert_eq!(o.broker_route, RouteChoice::Auto);
    assert_eq!(o.detect.engine, None);
    assert_eq!(o.detect.timeout, None);
    if h.os == HostOs::Linux {
        assert_eq!((o.user.uid, o.user.gid), (h.uid, h.gid));
    }
}

#[test]
fn po_home_must_be_given_or_derivable_and_absolute() {
    assert_eq!(
        code_and_message(po_home(None, &HostEnv::with_vars(&[]))),
        (
            "OPTIONS_INVALID",
            "Invalid option poHome: not given and HOME is not set; pass the Po home folder".into()
        )
    );
    assert_eq!(
        po_home(Some(String::new()), &HostEnv::with_vars(&[("HOME", "/h")])).unwrap(),
        Path::new("/h/.po")
    );
    assert_eq!(
        code_and_message(po_home(Some("rel/po".into()), &HostEnv::with_vars(&[]))).0,
        "OPTIONS_INVALID"
    );
    assert_eq!(
        code_and_message(po_home(Some("/a/../b".into()), &HostEnv::with_vars(&[]))).0,
        "OPTIONS_INVALID"
    );
}

#[test]
fn owner_rules() {
    // Not given (or empty): the Po home's, read or made once the other options are good.
    assert_eq!(given_owner(None).unwrap(), None);
    assert_eq!(given_owner(Some(String::new())).unwrap(), None);
    assert_eq!(
        given_owner(Some("abc123".into())).unwrap().as_deref(),
        Some("abc123")
    );
    assert_eq!(
        given_owner(Some("a".repeat(32))).unwrap().unwrap().len(),
        32
    );
    for bad in ["ABC", "a-b", "a b", "é", &"a".repeat(33)] {
        let (code, msg) = code_and_message(given_owner(Some(bad.to_string())));
        assert_eq!(code, "OPTIONS_INVALID", "{bad}");
        assert!(
            msg.contains("must be 1-32 lowercase letters or digits"),
            "{msg}"
        );
    }
}

#[test]
fn workspaces_rules() {
    let w = |id: &str, sandbox: Option<&str>| GivenWorkspace {
        id: id.to_string(),
        path: "/w".to_string(),
        sandbox: sandbox.map(str::to_string),
        mode: None,
    };
    let ok = workspaces(vec![
        w("a", None),
        w("b", Some("container")),
        w("c", Some("none")),
        w("d", Some("host")),
    ])
    .unwrap();
    assert_eq!(
        ok.iter()
            .map(|r| (r.id.as_str(), r.container))
            .collect::<Vec<_>>(),
        [("a", true), ("b", true), ("c", false), ("d", false)]
    );
    let (code, msg) = code_and_message(workspaces(vec![w("a", None), w("a", None)]));
    assert_eq!(code, "WORKSPACE_INVALID");
    assert!(msg.contains("listed twice"), "{msg}");
    assert_eq!(
        code_and_message(workspaces(vec![w("../x", None)])).0,
        "WORKSPACE_INVALID"
    );
    let (code, msg) = code_and_message(workspaces(vec![w("a", Some("vm"))]));
    assert_eq!(code, "OPTIONS_INVALID");
    assert!(
        msg.starts_with("Invalid option workspaces[].sandbox: \"vm\""),
        "{msg}"
    );
    let moded = |mode: &str| GivenWorkspace {
        mode: Some(mode.into()),
        ..w("m", None)
    };
    use crate::sandbox::folder::WorkspaceMode;
    let ok = workspaces(vec![moded("clone")]).unwrap();
    assert_eq!(ok[0].mode, Some(WorkspaceMode::Clone));
    assert_eq!(workspaces(vec![w("m", None)]).unwrap()[0].mode, None);
    let (code, msg) = code_and_message(workspaces(vec![moded("copy")]));
    assert_eq!(code, "OPTIONS_INVALID");
    assert!(
        msg.contains("workspaces[].mode") && msg.contains("'clone'"),
        "{msg}"
    );
}

#[test]
fn runtime_version_is_a_plain_folder_name() {
    assert_eq!(runtime_version(None).unwrap(), None);
    assert_eq!(
        runtime_version(Some("1.2.3".into())).unwrap().as_deref(),
        Some("1.2.3")
    );
    for bad in ["..", "a/b", "", "../1"] {
        assert_eq!(
            code_and_message(runtime_version(Some(bad.into()))).0,
            "OPTIONS_INVALID",
            "{bad}"
        );
    }
}

#[test]
fn user_default_depends_on_the_os() {
    let mut h = HostEnv::with_vars(&[]);
    h.os = HostOs::MacOs;
    assert_eq!(
        user(None, &h).unwrap(),
        UserIds {
            uid: 1000,
            gid: 1000
        }
    );
    h.os = HostOs::Windows;
    assert_eq!(
        user(Some(String::new()), &h).unwrap(),
        UserIds {
            uid: 1000,
            gid: 1000
        }
    );
    h.os = HostOs::Linux;
    h.uid = 501;
    h.gid = 20;
    assert_eq!(user(None, &h).unwrap(), UserIds { uid: 501, gid: 20 });
    assert_eq!(
        user(Some("0:0".into()), &h).unwrap(),
        UserIds { uid: 0, gid: 0 }
    );
    let (code, msg) = code_and_message(user(Some("root".into()), &h));
    assert_eq!(code, "OPTIONS_INVALID");
    assert_eq!(
        msg,
        "Invalid option user: \"root\" must be numeric uid:gid, like 1000:1000"
    );
}

#[test]
fn whole_numbers_in_range() {
    assert_eq!(whole(None, "x", 1.0..=4.0, 2.0).unwrap(), 2.0);
    assert_eq!(whole(Some(4.0), "x", 1.0..=4.0, 2.0).unwrap(), 4.0);
    for bad in [0.0, 5.0, 1.5, f64::NAN, f64::INFINITY, -1.0] {
        let (code, msg) = code_and_message(whole(Some(bad), "concurrency", 1.0..=4.0, 2.0));
        assert_eq!(code, "OPTIONS_INVALID", "{bad}");
        assert!(msg.starts_with("Invalid option concurrency: "), "{msg}");
        assert!(msg.ends_with("is not a whole number from 1 to 4"), "{msg}");
    }
}

#[test]
fn resolve_reports_the_first_bad_option_by_name() {
    let h = HostEnv::with_vars(&[("HOME", home())]);
    let bad = |raw: GivenOptions| code_and_message(ProviderOptions::resolve(raw, h.clone())).1;
    assert!(
        bad(GivenOptions {
            pids_limit: Some(15.0),
            ..Default::default()
        })
        .contains("pidsLimit")
    );
    assert!(
        bad(GivenOptions {
            health_timeout_ms: Some(99.0),
            ..Default::default()
        })
        .contains("healthTimeoutMs")
    );
    assert!(
        bad(GivenOptions {
            concurrency: Some(65.0),
            ..Default::default()
        })
        .contains("concurrency")
    );
    assert!(
        bad(GivenOptions {
            engine: Some("lxc".into()),
            ..Default::default()
        })
        .contains("lxc")
    );
    assert!(
        bad(GivenOptions {
            broker_socket_dir: Some("rel".into()),
            ..Default::default()
        })
        .contains("brokerSocketDir")
    );
    assert!(
        bad(GivenOptions {
            image_variant: Some("huge".into()),
            ..Default::default()
        })
        .contains("huge")
    );
    // Two bad options: the earlier in the table is reported.
    let msg = bad(GivenOptions {
        owner: Some("UP".into()),
        pids_limit: Some(1.0),
        ..Default::default()
    });
    assert!(msg.contains("owner"), "{msg}");
}

#[test]
fn registration_only_on_an_uncontained_global_scope() {
    let plain = HostEnv::with_vars(&[]);
    let contained = HostEnv::with_vars(&[("PO_SANDBOX", "1")]);
    assert!(registers(Some("global"), false, &plain));
    assert!(!registers(Some("workspace"), false, &plain));
    assert!(!registers(Some("session"), false, &plain));
    assert!(!registers(None, false, &plain));
    assert!(!registers(Some("global"), true, &plain));
    assert!(!registers(Some("global"), false, &contained));
    assert_eq!(
        refuse_nesting(&contained).unwrap_err().code(),
        "NESTING_REFUSED"
    );
    assert!(refuse_nesting(&plain).is_ok());
}

#[test]
fn run_flags_come_from_the_option_else_the_variable_and_bad_ones_are_coded() {
    let h = HostEnv::with_vars(&[
        ("HOME", home()),
        ("PO_SANDBOX_RUN_FLAGS", "--runtime=runsc  --memory=1g"),
    ]);
    let o = ProviderOptions::resolve(GivenOptions::default(), h.clone()).unwrap();
    assert_eq!(o.run_flags.given, ["--runtime=runsc", "--memory=1g"]);
    let raw = GivenOptions {
        run_flags: Some(vec!["--cpus=1".into()]),
        ..Default::default()
    };
    let o = ProviderOptions::resolve(raw, h.clone()).unwrap();
    assert_eq!(o.run_flags.given, ["--cpus=1"]);
    let bad_var = HostEnv::with_vars(&[("HOME", home()), ("PO_SANDBOX_RUN_FLAGS", "--privileged")]);
    let (code, msg) = code_and_message(ProviderOptions::resolve(GivenOptions::default(), bad_var));
    assert_eq!(code, "RUN_FLAGS_INVALID");
    assert!(msg.starts_with("Run flag '--privileged'"), "{msg}");
    // A --pids-limit is checked against the pidsLimit option.
    let raw = GivenOptions {
        pids_limit: Some(100.0),
        run_flags: Some(vec!["--pids-limit=200".into()]),
        ..Default::default()
    };
    let (code, msg) = code_and_message(ProviderOptions::resolve(raw, h));
    assert_eq!(code, "RUN_FLAGS_INVALID");
    assert!(msg.contains("above the layer's pid limit 100"), "{msg}");
}

#[test]
fn a_runtime_flag_is_refused_on_podman_only() {
    use crate::sandbox::blueprint::{parse_run_flags, refuse_run_flags_on_podman};
    let runsc = parse_run_flags(&["--runtime=runsc".to_string()], 2048).unwrap();
    let e = refuse_run_flags_on_podman(&runsc).unwrap_err();
    assert_eq!(e.code(), "RUN_FLAGS_INVALID");
    assert!(e.to_string().contains("containers.conf"), "{e}");
    assert!(!e.to_string().contains("  "), "{e}");
    let memory = parse_run_flags(&["--memory=1g".to_string()], 2048).unwrap();
    refuse_run_flags_on_podman(&memory).unwrap();
}

#[test]
fn memory_and_cpus_from_the_option_else_the_variable_else_derived_later() {
    let h = |vars: &[(&str, &str)]| {
        let mut all = vec![("HOME", home())];
        all.extend_from_slice(vars);
        HostEnv::with_vars(&all)
    };
    let resolve = |raw: GivenOptions, host: HostEnv| ProviderOptions::resolve(raw, host);
    let none = resolve(GivenOptions::default(), h(&[])).unwrap();
    assert_eq!((none.memory, none.nano_cpus), (None, None));
    assert_eq!(none.health_interval, Duration::from_secs(15));
    let vars = resolve(
        GivenOptions::default(),
        h(&[(MEMORY_VAR, "1.5g"), (CPUS_VAR, "0.5")]),
    )
    .unwrap();
    assert_eq!(
        (vars.memory, vars.nano_cpus),
        (Some(3 << 29), Some(500_000_000))
    );
    let both = resolve(
        GivenOptions {
            memory: Some("512m".into()),
            cpus: Some(2.25),
            health_interval_ms: Some(1000.0),
            ..Default::default()
        },
        h(&[(MEMORY_VAR, "1g"), (CPUS_VAR, "1")]),
    )
    .unwrap();
    assert_eq!(
        (both.memory, both.nano_cpus),
        (Some(512 << 20), Some(2_250_000_000))
    );
    assert_eq!(both.health_interval, Duration::from_secs(1));
    let bad = |raw: GivenOptions, vars: &[(&str, &str)]| code_and_message(resolve(raw, h(vars)));
    for (raw, vars, needle) in [
        (
            GivenOptions {
                memory: Some("2x".into()),
                ..Default::default()
            },
            vec![],
            "memory: \"2x\" is not a size",
        ),
        (
            GivenOptions {
                memory: Some("5m".into()),
                ..Default::default()
            },
            vec![],
            "minimum memory limit, 6m",
        ),
        (
            GivenOptions::default(),
            vec![(MEMORY_VAR, "-1")],
            MEMORY_VAR,
        ),
        (
            GivenOptions {
                cpus: Some(0.0),
                ..Default::default()
            },
            vec![],
            "cpus",
        ),
        (
            GivenOptions {
                cpus: Some(f64::NAN),
                ..Default::default()
            },
            vec![],
            "cpus",
        ),
        (GivenOptions::default(), vec![(CPUS_VAR, "1.")], CPUS_VAR),
        (
            GivenOptions {
                health_interval_ms: Some(999.0),
                ..Default::default()
            },
            vec![],
            "healthIntervalMs",
        ),
    ] {
        let (code, msg) = bad(raw, &vars);
        assert_eq!(code, "OPTIONS_INVALID");
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
}

#[test]
fn broker_route_from_the_option_else_the_variable() {
    let resolve = |option: Option<&str>, var: Option<&str>| {
        let mut vars = vec![("HOME", home())];
        if let Some(v) = var {
            vars.push((ROUTE_VAR, v));
        }
        let raw = GivenOptions {
            broker_route: option.map(str::to_string),
            ..Default::default()
        };
        ProviderOptions::resolve(raw, HostEnv::with_vars(&vars)).map(|o| o.broker_route)
    };
    assert_eq!(resolve(None, None).unwrap(), RouteChoice::Auto);
    assert_eq!(resolve(None, Some("tcp")).unwrap(), RouteChoice::Tcp);
    assert_eq!(resolve(None, Some("")).unwrap(), RouteChoice::Auto);
    assert_eq!(
        resolve(Some("socket"), Some("tcp")).unwrap(),
        RouteChoice::Socket
    );
    assert_eq!(
        resolve(Some("auto"), Some("tcp")).unwrap(),
        RouteChoice::Auto
    );
    let (code, message) = code_and_message(resolve(Some("udp"), None));
    assert_eq!(code, "OPTIONS_INVALID");
    assert!(
        message.contains("brokerTransport") && message.contains("\"udp\""),
        "{message}"
    );
    let (code, message) = code_and_message(resolve(None, Some("Tcp")));
    assert_eq!(code, "OPTIONS_INVALID");
    assert!(
        message.contains(ROUTE_VAR) && message.contains("'auto', 'socket' or 'tcp'"),
        "{message}"
    );
}

#[test]
fn network_allow_and_resolve_from_options_or_variables() {
    let h = HostEnv::with_vars(&[("HOME", home())]);
    let resolve = |raw: GivenOptions, h: &HostEnv| ProviderOptions::resolve(raw, h.clone());
    // Not given: the proxy is off.
    let o = resolve(GivenOptions::default(), &h).unwrap();
    assert!(o.network_allow.is_none() && o.egress_policy().is_none());
    // A list alone does not turn it on: only the `allowlist` mode does.
    let listed = |network: Option<&str>, list: Option<Vec<String>>| GivenOptions {
        network: network.map(str::to_string),
        network_allow: list,
        network_resolve: Some(vec!["registry.test=127.0.0.1".into()]),
        ..Default::default()
    };
    let two = || Some(vec!["Registry.Test:443".into(), "*.crates.io:443".into()]);
    assert!(
        resolve(listed(None, two()), &h)
            .unwrap()
            .egress_policy()
            .is_none()
    );
    assert!(
        resolve(listed(Some("none"), two()), &h)
            .unwrap()
            .egress_policy()
            .is_none()
    );
    // The `allowlist` mode: the list checked and canonical.
    let p = resolve(listed(Some("allowlist"), two()), &h)
        .unwrap()
        .egress_policy()
        .unwrap();
    assert_eq!(p.allow.len(), 2);
    assert_eq!(p.resolve.len(), 1);
    // Without a list, the default one; an empty list allows nothing.
    let p = resolve(listed(Some("allowlist"), None), &h)
        .unwrap()
        .egress_policy()
        .unwrap();
    assert_eq!(p.allow, rules::default_allow());
    let p = resolve(listed(Some("allowlist"), Some(vec![])), &h)
        .unwrap()
        .egress_policy()
        .unwrap();
    assert!(p.allow.is_empty());
    // The variables, comma-separated; the option wins.
    let hv = HostEnv::with_vars(&[
        ("HOME", home()),
        (NETWORK_ALLOW_VAR, " a.test:443 , b.test:80,"),
        (NETWORK_RESOLVE_VAR, "a.test=10.0.0.1"),
    ]);
    let o = resolve(GivenOptions::default(), &hv).unwrap();
    assert_eq!(o.network_allow.as_ref().unwrap().len(), 2);
    assert_eq!(o.network_resolve.len(), 1);
    // Bad entries: OPTIONS_INVALID naming the option or variable, the entry and the form.
    for (raw, h, name, entry) in [
        (
            GivenOptions {
                network_allow: Some(vec!["github.com".into()]),
                ..Default::default()
            },
            &h,
            "networkAllow",
            "\"github.com\"",
        ),
        (
            GivenOptions {
                network_resolve: Some(vec!["a.test:1.2.3.4".into()]),
                ..Default::default()
            },
            &h,
            "networkResolve",
            "\"a.test:1.2.3.4\"",
        ),
        (
            GivenOptions::default(),
            &HostEnv::with_vars(&[("HOME", home()), (NETWORK_ALLOW_VAR, "a.test:99999")]),
            NETWORK_ALLOW_VAR,
            "\"a.test:99999\"",
        ),
    ] {
        let (code, msg) = code_and_message(resolve(raw, h));
        assert_eq!(code, "OPTIONS_INVALID");
        assert!(
            msg.contains(name) && msg.contains(entry) && msg.contains("expected"),
            "{msg}"
        );
    }
    let (_, msg) = code_and_message(resolve(
        GivenOptions {
            network_resolve: Some(vec!["a.test=1.1.1.1".into(), "a.test=2.2.2.2".into()]),
            ..Default::default()
        },
        &h,
    ));
    assert!(msg.contains("a second time"), "{msg}");
}

#[test]
fn container_settings_carry_the_options_and_the_engines_limits() {
    let h = HostEnv::with_vars(&[("HOME", "/home/u"), ("TERM", "xterm")]);
    let given = GivenOptions {
        owner: Some("hub1".into()),
        memory: Some("1g".into()),
        run_flags: Some(vec!["--runtime=runsc".into()]),
        guarded_paths: Some(vec![".envrc".into()]),
        ..GivenOptions::default()
    };
    let o = ProviderOptions::resolve(given, h).unwrap();
    let json = Path::new("/b/container-runtime.json");
    let server = runtime_bundle::parse(json, br#"{"entry": "/opt/po/server.js", "port": 7300}"#);
    let bundle = RuntimeBundle::new("1.0.0".into(), "/b".into(), json.into(), server.unwrap());
    let report = EngineReport {
        mem_total: Some(8 << 30),
        ncpu: Some(4),
        ..EngineReport::default()
    };
    let s = o.container_settings(&o.recipe, bundle, &report, EngineMode::default());
    assert_eq!(
        (s.owner.as_str(), s.po_home.as_path()),
        ("hub1", Path::new("/home/u/.po"))
    );
    assert_eq!(
        (s.image.clone(), s.image_digest.clone()),
        (o.recipe.tag(), o.recipe.digest())
    );
    assert_eq!(s.run_flags, o.run_flags);
    assert_eq!(s.guarded_paths, [".envrc"]);
    assert_eq!(s.host_env["TERM"], "xterm");
    // The option's memory; half the engine's CPUs.
    assert_eq!(
        (s.limits.memory, s.limits.nano_cpus),
        (1 << 30, 2_000_000_000)
    );
    assert_eq!(s.bundle.server.port, 7300);
}

#[test]
fn an_exec_takes_the_recipe_and_run_flags_of_the_container_unless_an_image_is_named() {
    let h = HostEnv::with_vars(&[("HOME", home())]);
    let labels: std::collections::HashMap<String, String> = [
        (blueprint::LABEL_IMAGE_BASE, "example/base:1"),
        (blueprint::LABEL_IMAGE_VARIANT, "minimal"),
        (blueprint::LABEL_RUN_FLAGS, "--memory=1g --cpus=2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let flags = ["--memory=1g".to_string(), "--cpus=2".to_string()];
    let plain = ProviderOptions::resolve(GivenOptions::default(), h.clone()).unwrap();
    assert!(!plain.image_given);
    let o = plain.with_recipe_of(&labels).unwrap();
    assert_eq!(o.recipe.base, "example/base:1");
    assert_eq!(o.recipe.variant.as_str(), "minimal");
    assert_eq!(
        o.run_flags,
        blueprint::resolve_run_flags(Some(&flags), None, o.pids_limit).unwrap()
    );
    // An image named on the command line wins; the run flags are still the container's.
    let given = GivenOptions {
        base_image: Some("other/base:2".into()),
        ..Default::default()
    };
    let named = ProviderOptions::resolve(given, h.clone()).unwrap();
    assert!(named.image_given);
    let o = named.with_recipe_of(&labels).unwrap();
    assert_eq!(o.recipe.base, "other/base:2");
    assert_eq!(
        o.run_flags,
        blueprint::resolve_run_flags(Some(&flags), None, o.pids_limit).unwrap()
    );
    // No labels: the default recipe and no run flags, as for a container made before labels.
    let o = plain.with_recipe_of(&Default::default()).unwrap();
    assert_eq!(o.recipe, plain.recipe);
    assert_eq!(
        o.run_flags,
        blueprint::resolve_run_flags(Some(&[]), None, o.pids_limit).unwrap()
    );
}

/// The policy file gives the container-side values where no option or variable does; a
/// variable beats it, an option beats both; a bad file is kept as the problem, its values
/// unused, and what would start a container is refused with it.
#[test]
fn the_policy_file_sits_between_the_variables_and_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let po = dir.path().join("po");
    std::fs::create_dir_all(&po).unwrap();
    std::fs::write(
        po.join(crate::policy::FILE),
        "network: none\nworkspaceMode: clone\nguardedPaths: [.envrc]\nrunFlags: [--memory=2g]\n",
    )
    .unwrap();
    let given = || GivenOptions {
        po_home: Some(po.to_string_lossy().into()),
        owner: Some("t1".into()),
        ..GivenOptions::default()
    };
    let plain = HostEnv::with_vars(&[("HOME", home())]);
    let o = ProviderOptions::resolve(given(), plain).unwrap();
    assert_eq!(o.network_mode, NetworkMode::None);
    // The file's mode is not "given": on a remote engine the remote default stands.
    assert_eq!(
        (o.workspace_mode, o.workspace_mode_given),
        (WorkspaceMode::Clone, false)
    );
    assert_eq!(o.guarded_paths, vec![".envrc".to_string()]);
    assert_eq!(o.run_flags.given, vec!["--memory=2g".to_string()]);
    o.policy_good().unwrap();
    let vars = HostEnv::with_vars(&[
        ("HOME", home()),
        ("PO_SANDBOX_WORKSPACE_MODE", "bind"),
        ("PO_SANDBOX_RUN_FLAGS", "--cpus=1"),
        ("PO_SANDBOX_GUARDED_PATHS", ".git/hooks"),
    ]);
    let o = ProviderOptions::resolve(given(), vars.clone()).unwrap();
    assert_eq!(o.workspace_mode, WorkspaceMode::Bind);
    assert_eq!(o.run_flags.given, vec!["--cpus=1".to_string()]);
    assert_eq!(o.guarded_paths, vec![".git/hooks".to_string()]);
    let opt = GivenOptions {
        workspace_mode: Some("clone".into()),
        guarded_paths: Some(vec![]),
        ..given()
    };
    let o = ProviderOptions::resolve(opt, vars).unwrap();
    assert_eq!(o.workspace_mode, WorkspaceMode::Clone);
    assert!(o.guarded_paths.is_empty());
    // An empty flags variable means no flags, over the file's.
    let empty = HostEnv::with_vars(&[("HOME", home()), ("PO_SANDBOX_RUN_FLAGS", "")]);
    let o = ProviderOptions::resolve(given(), empty).unwrap();
    assert!(o.run_flags.given.is_empty());
    std::fs::write(po.join(crate::policy::FILE), "network: closed\n").unwrap();
    let o = ProviderOptions::resolve(given(), HostEnv::with_vars(&[("HOME", home())])).unwrap();
    assert_eq!(
        o.network_mode,
        NetworkMode::Open,
        "a bad file's values are not used"
    );
    let e = o.policy_good().unwrap_err();
    assert_eq!(e.code(), "POLICY_INVALID");
    assert!(e.to_string().contains("line 1, network"), "{e}");
}
