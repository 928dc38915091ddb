use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::build::{
    EGRESS_BRIDGE, EGRESS_BRIDGE_VAR, EGRESS_PORT, EGRESS_PORT_VAR, binds, layer_env,
};
use super::posture::{
    DEFAULT_CAPABILITIES, check_devices, check_network, check_pids_limit, mount_allowed,
};
use super::*;
use crate::host::UserIds;
use crate::names::paths::{GIT_DIR, HOME_DIR, TOKEN_PATH};
use crate::runtime_bundle::RuntimeBundle;
use crate::sandbox::blueprint::engine_mode::EngineMode;
use crate::sandbox::blueprint::firewall::NetworkMode;
use crate::sandbox::blueprint::run_flags::RunFlags;
use crate::sandbox::folder::workspace::Workspace;

fn bundle() -> RuntimeBundle {
    RuntimeBundle {
        version: "1.0.0".into(),
        dir: "/home/u/.po/container-runtime/1.0.0".into(),
        json_path: "/home/u/.po/container-runtime/1.0.0/container-runtime.json".into(),
        server: crate::runtime_bundle::ParsedRuntime {
            entry: "/opt/po/server.js".into(),
            port: 7300,
            args: vec!["--serve".into()],
            env: BTreeMap::from([("NODE_ENV".to_string(), "production".to_string())]),
            health_path: "/api/health".into(),
            interpreter: None,
        },
    }
}

fn ws() -> Workspace {
    Workspace {
        id: "acme".into(),
        path: "/src/acme".into(),
        mode: None,
    }
}

fn spec_with(host_env: &[(&str, &str)], seeds: &[&str]) -> ContainerSpec {
    with_input(host_env, seeds, &[], build)
}

/// The test spec with these run flags (checked against the default pid limit).
fn spec_with_flags(flags: &[&str]) -> ContainerSpec {
    let list: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    let run_flags = crate::sandbox::blueprint::run_flags::parse(&list, DEFAULT_PIDS_LIMIT).unwrap();
    RUN_FLAGS.with(|f| *f.borrow_mut() = run_flags);
    let spec = spec_with(&[], &[]);
    RUN_FLAGS.with(|f| *f.borrow_mut() = RunFlags::default());
    spec
}

thread_local! {
    /// The run flags [`with_input`] passes (none unless [`spec_with_flags`] sets them).
    static RUN_FLAGS: std::cell::RefCell<RunFlags> = std::cell::RefCell::new(RunFlags::default());
    /// The engine mode [`with_input`] passes (rootful unless [`spec_in_mode`] sets it).
    static MODE: std::cell::Cell<EngineMode> = std::cell::Cell::new(EngineMode::default());
    /// The egress mode [`with_input`] passes (open unless [`spec_in_mode`] sets it).
    static NETWORK_MODE: std::cell::RefCell<NetworkMode> = const { std::cell::RefCell::new(NetworkMode::Open) };
}

/// The test spec for an engine in `mode`.
fn spec_in_mode(mode: EngineMode) -> ContainerSpec {
    MODE.with(|m| m.set(mode));
    let spec = spec_with(&[], &[]);
    MODE.with(|m| m.set(EngineMode::default()));
    spec
}

/// The test spec in this egress mode.
fn spec_in_egress_mode(mode: NetworkMode) -> ContainerSpec {
    NETWORK_MODE.with(|m| *m.borrow_mut() = mode);
    let spec = spec_with(&[], &[]);
    NETWORK_MODE.with(|m| *m.borrow_mut() = NetworkMode::Open);
    spec
}

/// Runs `f` on a spec input over the test bundle and workspace, with `extra_env` as the grant.
fn with_input<T>(
    host_env: &[(&str, &str)],
    seeds: &[&str],
    extra_env: &[(&str, &str)],
    f: impl FnOnce(&SpecInput) -> T,
) -> T {
    let w = ws();
    let pairs = |vars: &[(&str, &str)]| {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    let host: HashMap<String, String> = pairs(host_env).into_iter().collect();
    let extra: BTreeMap<String, String> = pairs(extra_env).into_iter().collect();
    let settings = ContainerSettings {
        run_flags: RUN_FLAGS.with(|f| f.borrow().clone()),
        host_env: host,
        network_mode: NETWORK_MODE.with(|m| *m.borrow()),
        mode: MODE.with(|m| m.get()),
        ..settings("/home/u/.po")
    };
    f(&SpecInput {
        settings: &settings,
        os: crate::host::HostOs::Linux,
        workspace: &w,
        seed_files: seeds,
        extra_env: &extra,
        extra_binds: &[],
        extra_hosts: &[],
    })
}

/// The test hub's settings, its Po home at `po_home`.
fn settings(po_home: &str) -> ContainerSettings {
    ContainerSettings {
        owner: "hub1".into(),
        po_home: po_home.into(),
        bundle: bundle(),
        image: "po-sandbox:abc".into(),
        image_digest: "abc".into(),
        user: UserIds {
            uid: 1000,
            gid: 1000,
        },
        pids_limit: DEFAULT_PIDS_LIMIT,
        run_flags: RunFlags::default(),
        guarded_paths: vec![],
        limits: test_limits(),
        health_interval: std::time::Duration::from_secs(15),
        host_env: HashMap::new(),
        mode: EngineMode::default(),
        network_mode: NetworkMode::Open,
        workspace_mode: Default::default(),
        carried: None,
    }
}

/// The limits the test inputs carry (what a 8 GiB, 4-CPU engine derives).
fn test_limits() -> Limits {
    Limits {
        memory: 4 << 30,
        nano_cpus: 2_000_000_000,
        cpu_shares: DEFAULT_CPU_SHARES,
    }
}

#[test]
fn names_labels_and_command() {
    let s = spec_with(&[], &[]);
    assert_eq!(s.name, "po-hub1-acme");
    assert_eq!(s.labels["po.owner"], "hub1");
    assert_eq!(s.labels["po.workspace"], "acme");
    assert_eq!(s.labels["po.sandbox"], "1");
    assert_eq!(s.labels["po.image-digest"], "abc");
    assert_eq!(s.labels["po.spec-hash"], s.spec_hash);
    // The bundle's command, behind the gate that waits for the namespace's rules.
    assert_eq!(&s.cmd[..4], ["/bin/sh", "-c", GATE, "po-net-gate"]);
    assert_eq!(
        s.cmd[4],
        crate::sandbox::blueprint::firewall::mark_probe(true)
    );
    assert_eq!(&s.cmd[5..], ["node", "/opt/po/server.js", "--serve"]);
    assert_eq!(s.working_dir, "/src/acme");
    assert_eq!(s.user, "1000:1000");
    assert_eq!(s.container_port, 7300);
}

#[test]
fn mounts_are_exactly_the_allowed_set() {
    let s = spec_with(&[], &["modes.yaml", "config.yaml"]);
    let binds: Vec<(String, &str, bool)> = s
        .binds
        .iter()
        .map(|b| {
            (
                b.source.display().to_string(),
                b.target.as_str(),
                b.read_only,
            )
        })
        .collect();
    assert_eq!(
        binds,
        [
            ("/src/acme".to_string(), "/src/acme", false),
            (
                "/home/u/.po/container-runtime/1.0.0".to_string(),
                "/opt/po",
                true
            ),
            (
                "/home/u/.po/sandboxes/acme".to_string(),
                "/home/u/.po/sandboxes/acme",
                false
            ),
            (
                "/home/u/.po/sandbox-tokens/hub1/acme.token".to_string(),
                TOKEN_PATH,
                true
            ),
            (
                "/home/u/.po/modes.yaml".to_string(),
                "/home/u/.po/sandboxes/acme/modes.yaml",
                true
            ),
            (
                "/home/u/.po/config.yaml".to_string(),
                "/home/u/.po/sandboxes/acme/config.yaml",
                true
            ),
        ]
    );
    assert!(
        !s.binds
            .iter()
            .any(|b| b.source.to_string_lossy().contains("docker.sock"))
    );
    let vols: Vec<&str> = s.volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        vols,
        [
            "po-hub1-acme-home",
            "po-hub1-acme-cache",
            "po-hub1-acme-git"
        ]
    );
    // The token file is outside P.
    assert!(
        !token_file(Path::new("/home/u/.po"), "hub1", "acme")
            .starts_with("/home/u/.po/sandboxes/acme")
    );
}

#[test]
fn environment_is_an_allowlist_plus_fixed_variables() {
    let s = spec_with(
        &[
            ("TERM", "xterm"),
            ("LC_ALL", "C.UTF-8"),
            ("TZ", "UTC"),
            ("PO_PRESET", "fast"),
            ("FAKE_API_KEY", "secret"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("DOCKER_HOST", "unix:///var/run/docker.sock"),
            ("PO_HUB_TOKEN", "hub"),
            ("PATH", "/usr/bin"),
            ("PO_SANDBOX", "0"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("NO_PROXY", "corp.example"),
        ],
        &[],
    );
    for absent in [
        "FAKE_API_KEY",
        "OPENAI_API_KEY",
        "DOCKER_HOST",
        "PO_HUB_TOKEN",
        "PATH",
    ] {
        assert!(!s.env.contains_key(absent), "{absent}");
    }
    assert_eq!(s.env["TERM"], "xterm");
    assert_eq!(s.env["LC_ALL"], "C.UTF-8");
    assert_eq!(s.env["PO_PRESET"], "fast");
    assert_eq!(s.env["PO_SANDBOX"], "1");
    assert_eq!(s.env["PO_HOME"], "/home/u/.po/sandboxes/acme");
    assert_eq!(s.env["PO_WORKSPACE"], "acme");
    assert_eq!(s.env["HOME"], HOME_DIR);
    assert_eq!(s.env["NODE_ENV"], "production");
    assert_eq!(s.env["HTTPS_PROXY"], "http://proxy:3128");
    assert_eq!(s.env["NO_PROXY"], "corp.example,localhost,127.0.0.1,::1");
    assert_eq!(s.env["no_proxy"], s.env["NO_PROXY"]);
}

#[test]
fn proxy_variables_enter_without_credentials_or_not_at_all() {
    let s = spec_with(
        &[
            ("HTTPS_PROXY", "http://user:secret@proxy:3128"),
            ("http_proxy", "HTTP://us%40er:secret@[2001:db8::1]:8080"),
            ("ALL_PROXY", "socks5://user:se/cret@proxy:1080"),
        ],
        &[],
    );
    assert_eq!(s.env["HTTPS_PROXY"], "http://proxy:3128");
    assert_eq!(s.env["http_proxy"], "HTTP://[2001:db8::1]:8080");
    assert!(!s.env.contains_key("ALL_PROXY"));
    assert!(s.env.values().all(|v| !v.contains("secret")), "{:?}", s.env);
    let withheld_only = spec_with(&[("ALL_PROXY", "http://u:p@x/@"), ("NO_PROXY", "x")], &[]);
    assert!(!withheld_only.env.contains_key("NO_PROXY"));
}

#[test]
fn no_proxy_untouched_without_a_proxy() {
    let s = spec_with(&[("NO_PROXY", "x")], &[]);
    assert!(!s.env.contains_key("NO_PROXY"));
}

#[test]
fn hash_ignores_host_terminal_but_not_layer_decisions() {
    let a = spec_with(&[("TERM", "xterm")], &[]);
    let b = spec_with(&[("TERM", "dumb")], &[]);
    assert_eq!(a.spec_hash, b.spec_hash);
    let c = spec_with(&[], &["modes.yaml"]);
    assert_ne!(a.spec_hash, c.spec_hash);
}

fn live_of(s: &ContainerSpec) -> LivePosture {
    LivePosture {
        cap_drop: vec!["ALL".into()],
        cap_add: vec![],
        privileged: false,
        security_opt: vec![
            "no-new-privileges".into(),
            crate::sandbox::blueprint::spec::seccomp::security_opt(&s.seccomp_file, false),
        ],
        pids_limit: Some(s.pids_limit),
        user: s.user.clone(),
        namespaces: vec![("network".into(), "container:h1".into())],
        mounts: s
            .binds
            .iter()
            .map(|b| {
                (
                    "bind".to_string(),
                    b.source.display().to_string(),
                    b.target.clone(),
                    !b.read_only,
                )
            })
            .chain(s.volumes.iter().map(|v| {
                (
                    "volume".to_string(),
                    v.name.clone(),
                    v.target.clone(),
                    !v.read_only,
                )
            }))
            .collect(),
        ports: vec![],
        devices: 0,
        spec_hash: Some(s.spec_hash.clone()),
        runtime: s.run_flags.runtime.clone().unwrap_or_else(|| "runc".into()),
        tmpfs: s.tmpfs.keys().cloned().collect(),
        run_flags: s.run_flags.given.clone(),
        memory: s.limits.memory,
        memory_swap: s.limits.memory * 2,
        nano_cpus: s.limits.nano_cpus,
        cpu_shares: s.limits.cpu_shares,
        read_only_root: true,
        health_test: s.health.test.clone(),
        networks: vec![],
        holder: Some(HolderPosture {
            id: "h1".into(),
            running: true,
            host_port: Some(32768),
            networks: vec![s.network.clone()],
            ports: vec![("7300/tcp".into(), "127.0.0.1".into())],
            mode: Some(s.network_mode),
            rules_hash: Some("0123456789abcdef".into()),
            rules_shape: Some(crate::sandbox::blueprint::firewall::shape(s.network_mode)),
            rules: Some("table inet po_sandbox {}".into()),
            broker_host: None,
            started_at: "2026-12-01T10:00:00.000000000Z".into(),
            health: Some("healthy".into()),
            cap_add: vec![],
            privileged: false,
        }),
        brokered: brokered_of(
            &s.env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
        ),
    }
}

#[test]
fn podman_lists_each_dropped_capability_instead_of_all() {
    let s = spec_with(&[], &[]);
    let mut live = live_of(&s);
    live.cap_drop = DEFAULT_CAPABILITIES.iter().map(|c| c.to_string()).collect();
    check_posture(&s, &live).unwrap();
    live.cap_drop = DEFAULT_CAPABILITIES
        .iter()
        .map(|c| format!("CAP_{c}"))
        .collect();
    check_posture(&s, &live).unwrap();
    live.cap_drop.retain(|c| c != "CAP_NET_RAW");
    assert!(
        check_posture(&s, &live)
            .unwrap_err()
            .message
            .contains("drop all capabilities")
    );
}

#[test]
fn a_faithful_container_passes() {
    let s = spec_with(&[], &["modes.yaml"]);
    check_posture(&s, &live_of(&s)).unwrap();
}

#[test]
fn every_drift_is_named() {
    let s = spec_with(&[], &[]);
    type Mutate = fn(&mut LivePosture);
    use PostureCheckKind as K;
    let cases: Vec<(Mutate, PostureCheckKind, &str)> = vec![
        (
            |l| l.cap_drop.clear(),
            K::Capabilities,
            "drop all capabilities",
        ),
        (
            |l| l.cap_add.push("NET_ADMIN".into()),
            K::Capabilities,
            "adds capabilities",
        ),
        (|l| l.privileged = true, K::Privileges, "privileged"),
        (|l| l.security_opt.clear(), K::Privileges, "new privileges"),
        (
            |l| l.security_opt.truncate(1),
            K::Privileges,
            "system-call filter",
        ),
        (
            |l| l.security_opt[1] = "seccomp=unconfined".into(),
            K::Privileges,
            "system-call filter",
        ),
        (
            |l| l.security_opt[1] = "seccomp={\"defaultAction\":\"SCMP_ACT_ALLOW\"}".into(),
            K::Privileges,
            "system-call filter",
        ),
        (
            |l| l.security_opt[1] = "seccomp=/elsewhere/profile.json".into(),
            K::Privileges,
            "system-call filter",
        ),
        (|l| l.pids_limit = None, K::PidsLimit, "pid limit"),
        (
            |l| l.pids_limit = Some(1_000_000),
            K::PidsLimit,
            "pid limit",
        ),
        (|l| l.user = "0:0".into(), K::User, "runs as user"),
        (
            |l| l.namespaces.push(("pid".into(), "host".into())),
            K::Namespaces,
            "host's pid",
        ),
        (|l| l.devices = 1, K::Devices, "devices"),
        (
            |l| {
                l.mounts.push((
                    "bind".into(),
                    "/var/run/docker.sock".into(),
                    "/var/run/docker.sock".into(),
                    true,
                ))
            },
            K::Mounts,
            "/var/run/docker.sock",
        ),
        (|l| l.mounts[1].3 = true, K::Mounts, "/opt/po"),
        (
            |l| {
                l.mounts.push((
                    "bind".into(),
                    "/home/u/.po".into(),
                    "/home/u/.po".into(),
                    false,
                ))
            },
            K::Mounts,
            "/home/u/.po at",
        ),
        (
            |l| l.holder.as_mut().unwrap().ports[0].1 = "0.0.0.0".into(),
            K::Ports,
            "not on 127.0.0.1",
        ),
        (
            |l| {
                let h = l.holder.as_mut().unwrap();
                h.ports.push(("22/tcp".into(), "127.0.0.1".into()))
            },
            K::Ports,
            "22/tcp",
        ),
        (
            |l| l.holder.as_mut().unwrap().ports.clear(),
            K::Ports,
            "no port",
        ),
        (|l| l.memory = 0, K::Limits, "memory limit"),
        (|l| l.memory = 8 << 30, K::Limits, "memory limit"),
        (|l| l.nano_cpus = 0, K::Limits, "CPU limit"),
        (|l| l.nano_cpus = 4_000_000_000, K::Limits, "CPU limit"),
        (|l| l.cpu_shares = 0, K::Limits, "CPU shares"),
        // A `docker update` lowering a limit is drift too: the spec's values, exactly.
        (|l| l.memory -= 1 << 20, K::Limits, "memory limit"),
        (|l| l.nano_cpus /= 2, K::Limits, "CPU limit"),
        (|l| l.cpu_shares = 1024, K::Limits, "CPU shares"),
        (|l| l.cpu_shares = 2, K::Limits, "CPU shares"),
        (|l| l.pids_limit = Some(64), K::PidsLimit, "pid limit"),
        (|l| l.memory_swap = -1, K::Limits, "memory and swap"),
        (
            |l| l.memory_swap = l.memory * 3,
            K::Limits,
            "memory and swap",
        ),
        (
            |l| l.read_only_root = false,
            K::ReadOnlyRoot,
            "root file system is writable",
        ),
        (|l| l.health_test.clear(), K::Health, "no health check"),
        (
            |l| l.health_test = vec!["CMD".into(), "true".into()],
            K::Health,
            "health check is not the spec's",
        ),
        (
            |l| l.networks = vec!["bridge".into()],
            K::Network,
            "network",
        ),
        (
            |l| l.holder.as_mut().unwrap().networks.push("bridge".into()),
            K::Network,
            "not only po-net-hub1",
        ),
        (
            |l| l.tmpfs.retain(|t| t != "/tmp"),
            K::Tmpfs,
            "no tmpfs at /tmp",
        ),
        (
            |l| l.tmpfs.push("/elsewhere".into()),
            K::Tmpfs,
            "tmpfs at /elsewhere",
        ),
        (
            |l| l.spec_hash = Some("other".into()),
            K::SpecHash,
            "spec changed",
        ),
    ];
    for (mutate, kind, needle) in cases {
        let mut live = live_of(&s);
        mutate(&mut live);
        let drift = check_posture(&s, &live).unwrap_err();
        assert!(drift.message.contains(needle), "{needle}: {drift}");
        assert_eq!(drift.check, kind, "{needle}");
    }
}

#[test]
fn binds_come_in_a_fixed_order() {
    let p = Path::new("/home/u/.po/sandboxes/acme");
    let binds = with_input(&[], &["config.yaml"], &[], |input| binds(input, p));
    let targets: Vec<(&str, bool)> = binds
        .iter()
        .map(|b| (b.target.as_str(), b.read_only))
        .collect();
    assert_eq!(
        targets,
        [
            ("/src/acme", false),
            ("/opt/po", true),
            ("/home/u/.po/sandboxes/acme", false),
            (TOKEN_PATH, true),
            ("/home/u/.po/sandboxes/acme/config.yaml", true),
        ]
    );
    assert_eq!(binds[4].source, Path::new("/home/u/.po/config.yaml"));
}

#[test]
fn layer_env_lets_the_grant_but_not_the_bundle_override_fixed_variables() {
    let env = with_input(
        &[],
        &[],
        &[("PO_BROKER_SOCKET", "/s"), ("HOME", "/g")],
        |input| layer_env(input, "/p"),
    );
    assert_eq!(env["NODE_ENV"], "production");
    assert_eq!(env["PO_HOME"], "/p");
    assert_eq!(env["PO_WORKSPACE"], "acme");
    assert_eq!(env["PO_BROKER_SOCKET"], "/s");
    assert_eq!(env["HOME"], "/g");
}

#[test]
fn per_grant_variables_stay_out_of_the_hash_but_reach_the_container() {
    let a = with_input(&[], &[], &[("PO_BROKER_TOKEN", "one")], build);
    let b = with_input(&[], &[], &[("PO_BROKER_TOKEN", "two")], build);
    assert_eq!(a.spec_hash, b.spec_hash);
    assert_eq!(b.env["PO_BROKER_TOKEN"], "two");
    let c = with_input(&[], &[], &[("PO_MODE", "x")], build);
    assert_ne!(a.spec_hash, c.spec_hash);
    assert_eq!(c.labels[LABEL_SPEC_HASH], c.spec_hash);
    assert_eq!(c.labels[LABEL_WORKSPACE_PATH], "/src/acme");
    assert_eq!(c.labels[LABEL_IMAGE_DIGEST], "abc");
}

#[test]
fn mount_allowed_matches_kind_source_target_and_write_access() {
    let s = spec_with(&[], &[]);
    let vol = &s.volumes[0];
    assert!(mount_allowed(&s, "volume", &vol.name, &vol.target, true));
    assert!(!mount_allowed(&s, "volume", &vol.name, GIT_DIR, true));
    assert!(!mount_allowed(&s, "bind", &vol.name, &vol.target, true));
    let ro = s.binds.iter().find(|b| b.read_only).unwrap();
    let src = ro.source.to_string_lossy();
    assert!(mount_allowed(&s, "bind", &src, &ro.target, false));
    assert!(!mount_allowed(&s, "bind", &src, &ro.target, true));
    assert!(mount_allowed(&s, "tmpfs", "", "/tmp", true));
    assert!(!mount_allowed(&s, "tmpfs", "", "/scratch", true));
}

#[test]
fn the_first_posture_check_that_fails_is_reported() {
    let s = spec_with(&[], &[]);
    let mut live = live_of(&s);
    live.spec_hash = None;
    live.holder.as_mut().unwrap().ports.clear();
    live.devices = 1;
    live.privileged = true;
    let first = |live: &LivePosture| check_posture(&s, live).unwrap_err();
    assert_eq!(first(&live).to_string(), "it runs privileged");
    assert_eq!(first(&live).check, PostureCheckKind::Privileges);
    live.privileged = false;
    assert_eq!(
        check_devices(&s, &live).unwrap_err().to_string(),
        "it has host devices"
    );
    assert_eq!(first(&live).to_string(), "it has host devices");
    live.devices = 0;
    assert_eq!(first(&live).to_string(), "it publishes no port");
    assert_eq!(first(&live).check, PostureCheckKind::Ports);
    assert_eq!(
        check_pids_limit(&s, &live_of(&s)),
        Ok(()),
        "the spec's own limit passes"
    );
}

#[test]
fn the_posture_summary_reads_the_live_data() {
    let s = spec_with(&[], &[]);
    let base = live_of(&s);
    let summary = ContainerPosture::from(&base);
    assert!(summary.no_capabilities && summary.no_new_privileges && !summary.privileged);
    assert_eq!(summary.user, s.user);
    assert_eq!(summary.pids_limit, Some(s.pids_limit));
    assert_eq!(summary.network_mode, "container:h1");
    assert_eq!(summary.published, ["127.0.0.1 -> 7300/tcp"]);
    assert_eq!(summary.mounts.len(), base.mounts.len());
    let bundle = summary
        .mounts
        .iter()
        .find(|m| m.target == "/opt/po")
        .expect("the bundle mount");
    assert!(bundle.read_only);
    type Drift = (fn(&mut LivePosture), fn(&ContainerPosture) -> bool);
    let drifts: [Drift; 5] = [
        (|l| l.cap_drop.clear(), |p| !p.no_capabilities),
        (
            |l| l.cap_add = vec!["NET_ADMIN".into()],
            |p| !p.no_capabilities,
        ),
        (|l| l.security_opt.clear(), |p| !p.no_new_privileges),
        (|l| l.privileged = true, |p| p.privileged),
        (|l| l.pids_limit = None, |p| p.pids_limit.is_none()),
    ];
    for (i, (drift, shows)) in drifts.into_iter().enumerate() {
        let mut live = base.clone();
        drift(&mut live);
        assert!(shows(&ContainerPosture::from(&live)), "drift {i}");
    }
}

#[test]
fn run_flags_are_part_of_the_hash_and_labelled() {
    let none = spec_with(&[], &[]);
    assert!(!none.labels.contains_key(LABEL_RUN_FLAGS));
    let runsc = spec_with_flags(&["--runtime=runsc", "--memory=1g", "--label=team=x"]);
    assert_ne!(none.spec_hash, runsc.spec_hash);
    assert_eq!(
        runsc.labels[LABEL_RUN_FLAGS],
        "--runtime=runsc --memory=1g --label=team=x"
    );
    assert_eq!(runsc.labels["team"], "x");
    assert_eq!(runsc.labels[LABEL_OWNER], "hub1");
    // The same flags hash the same; a changed one does not.
    let again = spec_with_flags(&["--runtime=runsc", "--memory=1g", "--label=team=x"]);
    assert_eq!(runsc.spec_hash, again.spec_hash);
    let changed = spec_with_flags(&["--runtime=runsc", "--memory=2g", "--label=team=x"]);
    assert_ne!(runsc.spec_hash, changed.spec_hash);
    // No flags hash as before run flags existed: an empty list adds nothing.
    assert_eq!(spec_with_flags(&[]).spec_hash, none.spec_hash);
}

#[test]
fn a_pid_limit_flag_lowers_the_specs() {
    assert_eq!(spec_with_flags(&[]).pids_limit, DEFAULT_PIDS_LIMIT);
    assert_eq!(spec_with_flags(&["--pids-limit=100"]).pids_limit, 100);
}

#[test]
fn the_flags_effects_are_not_drift_but_a_missing_runtime_or_stray_tmpfs_is() {
    let s = spec_with_flags(&[
        "--runtime=runsc",
        "--pids-limit=100",
        "--tmpfs=/scratch:size=1m",
        "--security-opt=label=level:s0",
        "--ulimit=nofile=64",
    ]);
    let mut live = live_of(&s);
    live.security_opt.push("label=level:s0".into());
    check_posture(&s, &live).unwrap();
    // Engines that list a --tmpfs among the mounts.
    live.mounts
        .push(("tmpfs".into(), String::new(), "/scratch".into(), true));
    check_posture(&s, &live).unwrap();
    let mut other_runtime = live.clone();
    other_runtime.runtime = "runc".into();
    let reason = check_posture(&s, &other_runtime).unwrap_err();
    assert!(
        reason.message.contains("runtime \"runc\", not runsc"),
        "{reason}"
    );
    assert_eq!(reason.check, PostureCheckKind::Runtime);
    let mut stray = live.clone();
    stray.tmpfs.push("/elsewhere".into());
    stray.tmpfs.sort();
    assert!(
        check_posture(&s, &stray)
            .unwrap_err()
            .message
            .contains("tmpfs at /elsewhere")
    );
    let mut stray_mount = live_of(&spec_with(&[], &[]));
    stray_mount
        .mounts
        .push(("tmpfs".into(), String::new(), "/scratch".into(), true));
    let plain = spec_with(&[], &[]);
    assert!(
        check_posture(&plain, &stray_mount)
            .unwrap_err()
            .message
            .contains("/scratch")
    );
    let mut higher = live;
    higher.pids_limit = Some(2048);
    assert!(
        check_posture(&s, &higher)
            .unwrap_err()
            .message
            .contains("pid limit")
    );
    // Without a runtime flag, any runtime the engine defaults to is fine.
    let mut plain_live = live_of(&plain);
    plain_live.runtime = "runsc".into();
    check_posture(&plain, &plain_live).unwrap();
}

#[test]
fn a_tmpfs_over_the_workspace_or_p_is_refused_per_container() {
    for (flag, target) in [
        ("--tmpfs=/src", "/src/acme"),
        ("--tmpfs=/src/acme", "/src/acme"),
        ("--tmpfs=/src/acme/build", "/src/acme"),
        ("--tmpfs=/home/u/.po", "/home/u/.po/sandboxes/acme"),
    ] {
        let e = spec_with_flags(&[flag]).check_run_flags().unwrap_err();
        assert_eq!(e.code(), "RUN_FLAGS_INVALID");
        assert!(e.to_string().contains(target), "{flag}: {e}");
    }
    spec_with_flags(&["--tmpfs=/scratch"])
        .check_run_flags()
        .unwrap();
    spec_with(&[], &[]).check_run_flags().unwrap();
}

#[test]
fn the_posture_summary_shows_the_runtime_and_flags() {
    let s = spec_with_flags(&["--runtime=runsc"]);
    let summary = ContainerPosture::from(&live_of(&s));
    assert_eq!(summary.runtime, "runsc");
    assert_eq!(summary.run_flags, ["--runtime=runsc"]);
}

#[test]
fn windows_host_paths_map_to_linux_paths_inside() {
    let (settings, extra) = (settings(r"C:\Users\me\.po"), BTreeMap::new());
    let w = Workspace {
        id: "acme".into(),
        path: r"C:\src\acme".into(),
        mode: None,
    };
    let input = |os| SpecInput {
        settings: &settings,
        os,
        workspace: &w,
        seed_files: &[],
        extra_env: &extra,
        extra_binds: &[],
        extra_hosts: &[],
    };
    let s = build(&input(crate::host::HostOs::Windows));
    assert_eq!(s.working_dir, "/mnt/c/src/acme");
    assert_eq!(s.binds[0].source, PathBuf::from(r"C:\src\acme"));
    assert_eq!(s.binds[0].target, "/mnt/c/src/acme");
    assert!(
        s.binds[2].target.starts_with("/mnt/c/Users/me/.po/"),
        "{:?}",
        s.binds[2]
    );
    assert_eq!(s.env["PO_HOME"], s.binds[2].target);
    // The label keeps the host's own path, for `po-sandbox ls`.
    assert_eq!(s.labels[LABEL_WORKSPACE_PATH], r"C:\src\acme");
    // Elsewhere the path is the same inside.
    for os in [crate::host::HostOs::Linux, crate::host::HostOs::MacOs] {
        assert_eq!(build(&input(os)).working_dir, r"C:\src\acme");
    }
}

#[test]
fn limits_derive_from_the_engine_and_yield_to_options_and_flags() {
    let gib = 1i64 << 30;
    let d = Limits::derive(Some(8 * gib), Some(4), None, None);
    assert_eq!(
        (d.memory, d.nano_cpus, d.cpu_shares),
        (4 * gib, 2_000_000_000, DEFAULT_CPU_SHARES)
    );
    // Small engines: at least 512 MiB and one CPU; whole MiB; unknown: the fallbacks.
    let small = Limits::derive(Some(600 << 20), Some(1), None, None);
    assert_eq!((small.memory, small.nano_cpus), (512 << 20, 1_000_000_000));
    assert_eq!(
        Limits::derive(Some((3 << 30) + 12345), None, None, None).memory,
        (((3 << 30) / 2) >> 20) << 20
    );
    let unknown = Limits::derive(None, None, None, None);
    assert_eq!(
        (unknown.memory, unknown.nano_cpus),
        (FALLBACK_MEMORY, 1_000_000_000)
    );
    let given = Limits::derive(Some(8 * gib), Some(4), Some(gib), Some(500_000_000));
    assert_eq!((given.memory, given.nano_cpus), (gib, 500_000_000));
    // A run flag naming a limit wins over the option and the default.
    let s = spec_with_flags(&["--memory=256m", "--cpus=0.5", "--cpu-shares=100"]);
    assert_eq!(
        (s.limits.memory, s.limits.nano_cpus, s.limits.cpu_shares),
        (256 << 20, 500_000_000, 100)
    );
    let plain = spec_with(&[], &[]);
    assert_eq!(plain.limits.memory, 4 << 30);
    assert_ne!(plain.spec_hash, s.spec_hash);
}

#[test]
fn the_root_is_read_only_with_tmpfs_where_writes_go_and_a_flag_tmpfs_joins_them() {
    let s = spec_with(&[], &[]);
    assert!(s.read_only_root);
    let paths: Vec<&str> = s.tmpfs.keys().map(String::as_str).collect();
    assert_eq!(paths, ["/run", "/tmp", "/var/tmp"]);
    let f = spec_with_flags(&["--tmpfs=/tmp:size=64m", "--tmpfs=/scratch"]);
    assert_eq!(f.tmpfs["/tmp"], "size=64m");
    assert!(f.tmpfs.contains_key("/scratch") && f.tmpfs.contains_key("/run"));
}

#[test]
fn the_health_check_probes_the_bundles_health_path_with_its_interpreter() {
    let s = spec_with(&[], &[]);
    let t = &s.health.test;
    assert_eq!(t[..3], ["CMD", "node", "-e"]);
    assert_eq!(s.interpreter, "node");
    assert!(
        t[3].contains("port:7300") && t[3].contains("path:\"/api/health\""),
        "{}",
        t[3]
    );
    assert_eq!(s.health.interval_ns, 15_000_000_000);
    let mut b = bundle();
    b.server.interpreter = Some("/opt/po/node/bin/node".into());
    b.server.health_path = "/h?x=\"'".into();
    let probe = health_probe(&b, std::time::Duration::from_secs(1));
    assert_eq!(probe.test[1], "/opt/po/node/bin/node");
    // The path is a JSON string inside the script: quotes cannot end it.
    assert!(
        probe.test[3].contains(r#"path:"/h?x=\"'""#),
        "{}",
        probe.test[3]
    );
    assert_eq!(probe.interval_ns, 1_000_000_000);
    // No whitespace in the probe (Podman re-splits on it), and a re-split one is still the spec's.
    assert!(!t[3].contains(char::is_whitespace), "{}", t[3]);
    let mut live = live_of(&s);
    live.health_test = s
        .health
        .test
        .join(" ")
        .split(' ')
        .map(str::to_string)
        .collect();
    check_posture(&s, &live).unwrap();
}

#[test]
fn the_network_is_the_owners() {
    let s = spec_with(&[], &[]);
    assert_eq!(s.network, "po-net-hub1");
    assert_eq!(network_name("abc"), "po-net-abc");
}

/// Rootless Podman on cgroup v1, with the socket route.
fn rootless_v1() -> EngineMode {
    EngineMode::decide(
        true,
        true,
        false,
        "1",
        Some(crate::broker::server::RouteKind::Socket),
    )
}

#[test]
fn keep_id_and_unenforced_limits_are_in_the_spec_and_its_hash() {
    let rootful = spec_with(&[], &[]);
    assert!(!rootful.keep_id && rootful.limits_enforced && rootful.per_hub_network);
    let rootless = spec_in_mode(rootless_v1());
    assert!(rootless.keep_id);
    assert!(!rootless.limits_enforced);
    assert!(rootless.per_hub_network);
    assert_eq!(rootless.network, "po-net-hub1");
    assert_ne!(rootless.spec_hash, rootful.spec_hash);
    // Each part alone changes the hash.
    let keep_id_only = spec_in_mode(EngineMode::decide(true, true, false, "2", None));
    assert!(keep_id_only.keep_id && keep_id_only.limits_enforced);
    assert_ne!(keep_id_only.spec_hash, rootful.spec_hash);
    assert_ne!(keep_id_only.spec_hash, rootless.spec_hash);
    // The same mode, the same hash (a second hub adopts).
    assert_eq!(spec_in_mode(rootless_v1()).spec_hash, rootless.spec_hash);
}

#[test]
fn the_create_body_asks_for_keep_id_and_no_limits_the_engine_cannot_enforce() {
    let rootless = spec_in_mode(rootless_v1());
    let hc = crate::sandbox::on_engine::container::create_body(&rootless, true)
        .host_config
        .unwrap();
    assert_eq!(hc.userns_mode.as_deref(), Some("keep-id"));
    assert_eq!(
        (hc.pids_limit, hc.memory, hc.nano_cpus, hc.cpu_shares),
        (None, None, None, None)
    );
    let rootful = spec_with(&[], &[]);
    let hc = crate::sandbox::on_engine::container::create_body(&rootful, true)
        .host_config
        .unwrap();
    assert_eq!(hc.userns_mode, None);
    assert_eq!(hc.pids_limit, Some(DEFAULT_PIDS_LIMIT));
    assert_eq!(hc.memory, Some(test_limits().memory));
}

#[test]
fn unenforced_limits_are_no_drift_but_enforced_ones_still_are() {
    let rootless = spec_in_mode(rootless_v1());
    let mut live = live_of(&rootless);
    // What rootless Podman on cgroup v1 reports: no limits, the user namespace `private`.
    live.pids_limit = Some(0);
    live.memory = 0;
    live.nano_cpus = 0;
    live.cpu_shares = 0;
    live.namespaces.push(("user".into(), "private".into()));
    assert_eq!(check_posture(&rootless, &live), Ok(()));
    let rootful = spec_with(&[], &[]);
    let mut live = live_of(&rootful);
    live.pids_limit = Some(0);
    assert!(
        check_posture(&rootful, &live)
            .unwrap_err()
            .message
            .contains("pid limit")
    );
    let mut live = live_of(&rootful);
    live.memory = 0;
    assert!(
        check_posture(&rootful, &live)
            .unwrap_err()
            .message
            .contains("memory limit")
    );
}

#[test]
fn the_tcp_route_on_rootless_podman_uses_slirp4netns_with_host_loopback() {
    let mode = EngineMode::decide(
        true,
        true,
        false,
        "2",
        Some(crate::broker::server::RouteKind::Tcp),
    );
    let s = spec_in_mode(mode);
    assert_eq!(s.network, "slirp4netns:allow_host_loopback=true");
    assert!(!s.per_hub_network);
    assert_ne!(
        s.spec_hash,
        spec_in_mode(EngineMode::decide(true, true, false, "2", None)).spec_hash
    );
    // Its namespace holder is in that mode (the container joins the holder): adopted there,
    // not on the per-hub network; refused on any other.
    let mut live = live_of(&s);
    live.holder.as_mut().unwrap().networks = vec![];
    assert_eq!(check_network(&s, &live), Ok(()));
    live.holder.as_mut().unwrap().networks = vec!["slirp4netns".into()];
    assert_eq!(check_network(&s, &live), Ok(()));
    live.holder.as_mut().unwrap().networks = vec!["po-net-hub1".into()];
    let why = check_network(&s, &live).unwrap_err();
    assert_eq!(why.check, PostureCheckKind::Network);
    assert!(
        why.message.contains("slirp4netns:allow_host_loopback=true"),
        "{why}"
    );
}

#[test]
fn the_egress_mode_is_in_the_hash_and_the_environment() {
    let open = spec_in_egress_mode(NetworkMode::Open);
    let none = spec_in_egress_mode(NetworkMode::None);
    let allow = spec_in_egress_mode(NetworkMode::Allowlist);
    assert_ne!(open.spec_hash, none.spec_hash);
    assert_ne!(none.spec_hash, allow.spec_hash);
    assert_eq!(open.env["PO_SANDBOX_NETWORK"], "open");
    assert_eq!(allow.env["PO_SANDBOX_NETWORK"], "allowlist");
    assert_eq!(none.network_mode, NetworkMode::None);
}

#[test]
fn adoption_needs_a_running_holder_without_capabilities_on_the_network_in_the_specs_mode() {
    let s = spec_with(&[], &[]);
    assert_eq!(check_posture(&s, &live_of(&s)), Ok(()));
    let drift = |change: &dyn Fn(&mut LivePosture)| {
        let mut live = live_of(&s);
        change(&mut live);
        check_posture(&s, &live).unwrap_err().message
    };
    let holder =
        |f: fn(&mut HolderPosture)| move |l: &mut LivePosture| f(l.holder.as_mut().unwrap());
    assert!(drift(&|l| l.holder = None).contains("no network namespace holder"));
    assert!(drift(&holder(|h| h.running = false)).contains("not running"));
    assert!(drift(&holder(|h| h.rules = None)).contains("carries no network rules"));
    assert!(drift(&holder(|h| h.rules_hash = None)).contains("carries no network rules"));
    // A holder made before the shape label, or by a version whose rules differ.
    let older = "network rules of another version";
    assert!(drift(&holder(|h| h.rules_shape = None)).contains(older));
    assert!(drift(&holder(|h| h.rules_shape = Some("0123456789abcdef".into()))).contains(older));
    assert!(
        drift(&holder(|h| h.mode = Some(NetworkMode::None)))
            .contains("network mode is none, not open")
    );
    assert!(drift(&holder(|h| h.mode = None)).contains("network mode is unknown"));
    assert!(
        drift(&holder(|h| h.networks = vec!["bridge".into()])).contains("not only po-net-hub1")
    );
    for cap in ["NET_ADMIN", "SETUID", "SYS_ADMIN"] {
        let with = |l: &mut LivePosture| l.holder.as_mut().unwrap().cap_add.push(cap.into());
        assert!(drift(&with).contains(&format!("capabilities ({cap})")));
    }
    assert!(drift(&holder(|h| h.privileged = true)).contains("capabilities ()"));
    assert!(drift(&holder(|h| h.ports.clear())).contains("publishes no port"));
    assert!(
        drift(&|l| l.namespaces = vec![("network".into(), "po-net-hub1".into())])
            .contains("not its holder's namespace")
    );
    assert!(drift(&|l| l.ports = vec![("7300/tcp".into(), "127.0.0.1".into())]).contains("itself"));
    // Rules not loaded (unhealthy, or restarted since) are loaded again, not drift.
    let mut unloaded = live_of(&s);
    unloaded.holder.as_mut().unwrap().health = Some("unhealthy".into());
    assert_eq!(check_posture(&s, &unloaded), Ok(()));
}

#[test]
fn the_posture_summary_shows_the_egress_mode_and_the_holders_network() {
    let s = spec_in_egress_mode(NetworkMode::None);
    let summary = ContainerPosture::from(&live_of(&s));
    assert_eq!(summary.egress.as_deref(), Some("none"));
    assert_eq!(summary.network_holder.as_deref(), Some("h1"));
    assert_eq!(summary.networks, ["po-net-hub1"]);
}

#[test]
fn spec_hashes_are_pinned() {
    // A change here re-creates every running container: only on purpose (the last: the start
    // gate runs the egress bridge of an allowlist container).
    let flags = spec_with_flags(&["--runtime=runsc", "--tmpfs=/scratch"]);
    let hashes = [
        spec_with(&[("TERM", "xterm")], &["modes.yaml"]).spec_hash,
        flags.spec_hash,
        spec_in_mode(rootless_v1()).spec_hash,
        spec_in_egress_mode(NetworkMode::None).spec_hash,
    ];
    assert_eq!(
        hashes,
        [
            "4c297f92982de7a1e011a7e0d3103224",
            "efbee9cd9cf592bd904494b871a89519",
            "046771372fd20ce8a9e58675c0ea004c",
            "3f56df769e9998a6d682ecb7b7986788",
        ]
    );
}

#[test]
fn limits_above_the_spec_read_as_before_and_lower_ones_are_named() {
    let s = spec_with(&[], &[]);
    let said = |change: fn(&mut LivePosture)| {
        let mut live = live_of(&s);
        change(&mut live);
        check_posture(&s, &live).unwrap_err().message
    };
    let (m, c, p) = (s.limits.memory, s.limits.nano_cpus, s.pids_limit);
    assert_eq!(
        said(|l| l.memory *= 2),
        format!("its memory limit is {}, not at most {m} bytes", m * 2)
    );
    assert_eq!(
        said(|l| l.memory /= 2),
        format!(
            "its memory limit is {}, lower than the spec's {m} bytes",
            m / 2
        )
    );
    assert_eq!(
        said(|l| l.nano_cpus /= 2),
        format!(
            "its CPU limit is {} billionths, lower than the spec's {c}",
            c / 2
        )
    );
    assert_eq!(
        said(|l| l.cpu_shares = 1024),
        format!(
            "its CPU shares are 1024, not the spec's {}",
            s.limits.cpu_shares
        )
    );
    assert_eq!(
        said(|l| l.pids_limit = Some(64)),
        format!("its pid limit is 64, lower than the spec's {p}")
    );
    assert_eq!(
        said(|l| l.pids_limit = Some(1_000_000)),
        format!("its pid limit is Some(1000000), not at most {p}")
    );
}

#[test]
fn a_clone_mounts_its_copy_volume_where_the_folder_was_and_hashes_apart() {
    use crate::sandbox::folder::clone::{LABEL_WORKSPACE_MODE, WorkspaceMode};
    let bind = spec_with(&[], &[]);
    let w = Workspace {
        mode: Some(WorkspaceMode::Clone),
        ..ws()
    };
    let s = settings("/home/u/.po");
    let clone = build(&SpecInput {
        settings: &s,
        os: crate::host::HostOs::Linux,
        workspace: &w,
        seed_files: &[],
        extra_env: &BTreeMap::new(),
        extra_binds: &[],
        extra_hosts: &[],
    });
    assert!(bind.binds.iter().any(|b| b.target == "/src/acme"));
    assert!(
        !clone
            .binds
            .iter()
            .any(|b| b.source == Path::new("/src/acme"))
    );
    let copy = clone.copy_volume().unwrap();
    assert_eq!(
        (copy.name.as_str(), copy.target.as_str()),
        ("po-hub1-acme-copy", "/src/acme")
    );
    assert_eq!(bind.copy_volume(), None);
    assert_eq!(clone.labels[LABEL_WORKSPACE_MODE], "clone");
    assert!(!bind.labels.contains_key(LABEL_WORKSPACE_MODE));
    assert_eq!(clone.env["PO_SANDBOX_WORKSPACE_MODE"], "clone");
    assert_ne!(clone.spec_hash, bind.spec_hash);
    // Each is not the other's: adoption replaces a container of the other mode.
    let live = |spec: &ContainerSpec| -> Vec<(String, String, String, bool)> {
        let mut m: Vec<_> = spec
            .binds
            .iter()
            .map(|b| {
                (
                    "bind".into(),
                    b.source.to_string_lossy().into(),
                    b.target.clone(),
                    !b.read_only,
                )
            })
            .collect();
        m.extend(
            spec.volumes
                .iter()
                .map(|v| ("volume".into(), v.name.clone(), v.target.clone(), true)),
        );
        m
    };
    for (mine, other) in [(&bind, &clone), (&clone, &bind)] {
        let allowed = live(other)
            .iter()
            .all(|(k, s, d, rw)| mount_allowed(mine, k, s, d, *rw));
        assert!(!allowed);
    }
}

#[test]
fn exec_runs_as_asked_only_in_a_healthy_container_and_otherwise_behind_the_gate() {
    let cmd = || vec!["sh".to_string(), "-c".into(), "echo x".into()];
    assert_eq!(exec_gated(Some("healthy"), "node", cmd()), cmd());
    for health in [
        None,
        Some("starting"),
        Some("unhealthy"),
        Some("none"),
        Some(""),
    ] {
        let gated = exec_gated(health, "/opt/po/node", cmd());
        assert_eq!(
            &gated[..4],
            ["/bin/sh", "-c", EXEC_GATE, "po-net-gate"],
            "{health:?}"
        );
        assert_eq!(
            gated[4],
            crate::sandbox::blueprint::firewall::mark_probe(true)
        );
        assert_eq!(gated[5], "/opt/po/node");
        assert_eq!(&gated[6..], cmd(), "{health:?}");
    }
}

/// The exec gate as the container's shell runs it, with `true` or `false` standing for the
/// interpreter's probe: the command runs with its arguments as given (spaces, empty ones) and
/// its own exit code only when the probe passes; otherwise nothing runs.
#[cfg(unix)]
#[test]
fn the_exec_gate_runs_the_command_only_after_the_probe_passes() {
    let run = |probe_passes: bool| {
        let interpreter = if probe_passes { "true" } else { "false" };
        let mut argv = exec_gated(None, interpreter, vec![]);
        argv.extend(
            [
                "sh",
                "-c",
                "printf '%s|' \"$@\"; exit 7",
                "sh",
                "a b",
                "",
                "c",
            ]
            .map(String::from),
        );
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .unwrap()
    };
    let passed = run(true);
    assert_eq!(String::from_utf8_lossy(&passed.stdout), "a b||c|");
    assert_eq!(passed.status.code(), Some(7));
    let held = run(false);
    assert_eq!(held.stdout, b"");
    assert_eq!(held.status.code(), Some(1));
}

#[test]
fn a_carried_spec_binds_nothing_and_carries_its_parts_in_volumes() {
    let carried = |digest: &str| ContainerSettings {
        carried: Some(digest.into()),
        workspace_mode: crate::sandbox::folder::WorkspaceMode::Clone,
        ..settings("/home/u/.po")
    };
    let (w, extra) = (ws(), BTreeMap::new());
    let spec_of = |settings: &ContainerSettings| {
        build(&SpecInput {
            settings,
            os: crate::host::HostOs::Linux,
            workspace: &w,
            seed_files: &["modes.yaml"],
            extra_env: &extra,
            extra_binds: &[],
            extra_hosts: &[],
        })
    };
    let s = spec_of(&carried("0123456789ab"));
    assert_eq!(s.binds, [], "nothing of this host's is bound");
    let volumes: Vec<(&str, &str, bool)> = s
        .volumes
        .iter()
        .map(|v| (v.name.as_str(), v.target.as_str(), v.read_only))
        .collect();
    assert_eq!(
        volumes,
        [
            ("po-hub1-acme-home", HOME_DIR, false),
            ("po-hub1-acme-cache", "/po-runtime", false),
            ("po-hub1-acme-git", GIT_DIR, false),
            ("po-hub1-acme-bundle-0123456789ab", "/opt/po", true),
            // P's parent: P itself is a folder the fill makes the container user's.
            ("po-hub1-acme-po", "/home/u/.po/sandboxes", false),
            ("po-hub1-acme-token", "/run/po-sandbox", true),
            ("po-hub1-acme-copy", "/src/acme", false),
        ]
    );
    assert_eq!(
        s.copy_volume().map(|v| v.name.as_str()),
        Some("po-hub1-acme-copy")
    );
    assert_eq!(s.env["PO_HOME"], "/home/u/.po/sandboxes/acme");
    assert_eq!(s.env["PO_SANDBOX_TOKEN_FILE"], TOKEN_PATH);
    assert!(TOKEN_PATH.starts_with("/run/po-sandbox/"));
    check_posture(&s, &live_of(&s)).expect("a faithful carried container passes");
    // The bundle or the token writable, or either missing, is drift.
    for target in ["/opt/po", "/run/po-sandbox"] {
        let mut live = live_of(&s);
        live.mounts
            .iter_mut()
            .filter(|m| m.2 == target)
            .for_each(|m| m.3 = true);
        assert!(check_posture(&s, &live).is_err(), "{target} writable");
        let mut live = live_of(&s);
        live.mounts.retain(|m| m.2 != target);
        assert!(check_posture(&s, &live).is_err(), "{target} missing");
    }
    // Another bundle is another volume and another spec; a local spec is another still.
    let other = spec_of(&carried("ba9876543210"));
    assert_ne!(other.spec_hash, s.spec_hash);
    let local = spec_of(&ContainerSettings {
        workspace_mode: crate::sandbox::folder::WorkspaceMode::Clone,
        ..settings("/home/u/.po")
    });
    assert_ne!(local.spec_hash, s.spec_hash);
    assert!(local.binds.iter().any(|b| b.target == "/opt/po"));
}

/// An allowlist grant's egress route gives every process of the container the proxy
/// variables: the bridge's loopback port (and the bridge for the start gate) on the socket
/// route, the proxy's URL on the TCP route; loopback stays direct; a host's own proxy gives
/// way; none of it is in the hash.
#[test]
fn every_process_of_an_allowlist_container_gets_the_egress_proxy() {
    let socket = [("PO_BROKER_EGRESS_SOCKET", "/run/po-broker/egress.sock")];
    let s = with_input(
        &[("HTTPS_PROXY", "http://corp.test:3128")],
        &[],
        &socket,
        build,
    );
    let bridge = format!("http://127.0.0.1:{EGRESS_PORT}");
    for name in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
    ] {
        assert_eq!(s.env[name], bridge, "{name}");
    }
    assert_eq!(s.env["NO_PROXY"], "localhost,127.0.0.1,::1");
    assert_eq!(s.env[EGRESS_BRIDGE_VAR], EGRESS_BRIDGE);
    assert_eq!(s.env[EGRESS_PORT_VAR], EGRESS_PORT.to_string());
    let url = "http://po:tok@host.docker.internal:40123";
    let tcp = with_input(&[], &[], &[("PO_BROKER_EGRESS_PROXY", url)], build);
    assert_eq!(tcp.env["HTTPS_PROXY"], url);
    assert!(!tcp.env.contains_key(EGRESS_BRIDGE_VAR));
    let plain = with_input(&[], &[], &[], build);
    assert!(!plain.env.contains_key("HTTPS_PROXY"));
    assert_eq!(s.spec_hash, tcp.spec_hash);
    assert_eq!(s.spec_hash, plain.spec_hash);
    // The gate runs the bridge only where its source is set, and still execs the server.
    assert!(GATE.contains("[ -z \"$PO_SANDBOX_EGRESS_BRIDGE\" ] ||"));
    assert!(GATE.ends_with("& exec \"$@\""));
}

#[test]
fn a_later_hubs_exec_on_the_tcp_route_gets_its_own_routes() {
    let npmrc = "registry=http://host.docker.internal:40002/\n//host.docker.internal:40002/:_authToken=${PO_BROKER_REGISTRY_TOKEN}\n";
    let grant: BTreeMap<String, String> = [
        ("PO_BROKER_ADDRESS", "host.docker.internal:40000"),
        (
            "PO_BROKER_EGRESS_PROXY",
            "http://po:e@host.docker.internal:40001",
        ),
        ("PO_SANDBOX_NPMRC", npmrc),
        ("npm_config_userconfig", "/tmp/po-sandbox-npmrc"),
        ("GIT_CONFIG_COUNT", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let env = exec_route_env(grant.clone());
    let has = |kv: &str| env.iter().any(|e| e == kv);
    for kv in [
        "PO_BROKER_ADDRESS=host.docker.internal:40000",
        "HTTPS_PROXY=http://po:e@host.docker.internal:40001",
        "http_proxy=http://po:e@host.docker.internal:40001",
        "NO_PROXY=localhost,127.0.0.1,::1,host.docker.internal",
        "GIT_CONFIG_COUNT=1",
        "npm_config_userconfig=/tmp/po-sandbox-npmrc-40000",
        &format!("PO_SANDBOX_NPMRC={npmrc}"),
    ] {
        assert!(has(kv), "{kv} not in {env:?}");
    }
    assert!(
        !env.iter().any(|e| e.starts_with(EGRESS_BRIDGE_VAR)),
        "{env:?}"
    );
    // The command runs behind the writer of that config; without registry routes as it is.
    let cmd = exec_route_command(&env, vec!["npm".into(), "ci".into()]);
    assert_eq!(cmd[..2], ["/bin/sh".to_string(), "-c".into()]);
    assert_eq!(cmd[4..], ["npm".to_string(), "ci".into()]);
    let mut plain = grant;
    plain.remove("PO_SANDBOX_NPMRC");
    let plain = exec_route_env(plain);
    assert!(plain.contains(&"npm_config_userconfig=/tmp/po-sandbox-npmrc".to_string()));
    assert_eq!(exec_route_command(&plain, vec!["npm".into()]), ["npm"]);
}

#[cfg(unix)]
#[test]
fn the_exec_writer_puts_the_whole_config_in_its_file_then_runs_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("npmrc-40000");
    std::fs::write(&file, "stale\n").unwrap();
    let config = "@acme:registry=http://h:1/\n//h:1/:_authToken=${PO_BROKER_REGISTRY_TOKEN}\n";
    let env = vec![format!("PO_SANDBOX_NPMRC={config}")];
    let cmd = exec_route_command(&env, vec!["cat".into(), file.display().to_string()]);
    let out = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("PO_SANDBOX_NPMRC", config)
        .env("npm_config_userconfig", &file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), config);
    // Nothing aside is left.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // A config it cannot write: the command does not run, and stderr says why.
    let nowhere = dir.path().join("missing").join("npmrc-40000");
    let ran = dir.path().join("ran");
    let cmd = exec_route_command(&env, vec!["touch".into(), ran.display().to_string()]);
    let out = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("PO_SANDBOX_NPMRC", config)
        .env("npm_config_userconfig", &nowhere)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    assert!(!ran.exists());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("po-sandbox: cannot write npm's user config"),
        "{said}"
    );
}

#[test]
fn the_tcp_routes_broker_host_is_direct_past_a_proxy_the_host_passed_on_and_registries_get_the_bridge()
 {
    let host = [
        ("HTTPS_PROXY", "http://proxy.corp:3128"),
        ("NO_PROXY", "corp.internal"),
    ];
    let grant = [
        ("PO_BROKER_ADDRESS", "host.docker.internal:40000"),
        (
            "PO_SANDBOX_NPMRC",
            "registry=http://host.docker.internal:40002/\n",
        ),
    ];
    let s = with_input(&host, &[], &grant, build);
    assert_eq!(s.env["HTTPS_PROXY"], "http://proxy.corp:3128");
    for name in ["NO_PROXY", "no_proxy"] {
        assert_eq!(
            s.env[name], "corp.internal,localhost,127.0.0.1,::1,host.docker.internal",
            "{name}"
        );
    }
    // The bridge runs to write npm's user config (no port to carry on this route).
    assert_eq!(s.env[EGRESS_BRIDGE_VAR], EGRESS_BRIDGE);
    assert!(!s.env.contains_key(EGRESS_PORT_VAR));
    // With no proxy from the host, none is made up.
    let plain = with_input(&[], &[], &grant, build);
    assert!(!plain.env.contains_key("NO_PROXY") && !plain.env.contains_key("HTTPS_PROXY"));
}

#[test]
fn the_posture_names_what_the_broker_carries_from_the_containers_environment() {
    let hosts = crate::broker::git::parse_hosts(["github.com"]).unwrap();
    let mut env: Vec<String> = crate::broker::git::container_env("http://127.0.0.1:47390", &hosts)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    env.extend([
        "PO_BROKER_PROVIDERS=anthropic,openai".to_string(),
        "PO_BROKER_GIT_TOKEN=po-git-00".to_string(),
        "PO_BROKER_REGISTRY_TOKEN=po-reg-00".to_string(),
        "PO_SANDBOX_NPMRC=registry=http://127.0.0.1:47400/\n@acme:registry=http://127.0.0.1:47401/\n".to_string(),
        "PIP_INDEX_URL=http://po:po-reg-00@127.0.0.1:47402/simple/".to_string(),
    ]);
    assert_eq!(
        brokered_of(&env),
        [
            "providers anthropic, openai",
            "git github.com",
            "registries npm, npm @acme, pip"
        ]
    );
    assert!(brokered_of(&["PATH=/bin".to_string()]).is_empty());
}
