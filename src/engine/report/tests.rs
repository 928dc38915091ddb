use super::*;

fn facts_of(host_name: &str, vm: bool) -> EngineFacts {
    EngineFacts {
        engine: EngineKind::Docker,
        engine_version: "20.10.24".into(),
        api_version: "1.41".into(),
        os: "Debian GNU/Linux 12 (bookworm)".into(),
        os_type: "linux".into(),
        arch: "x86_64".into(),
        vm,
        rootless: false,
        cgroup_version: "2".into(),
        host_name: host_name.into(),
        mem_total: None,
        ncpu: None,
    }
}

#[test]
fn remote_is_ssh_a_far_tcp_engine_or_one_naming_another_machine_outside_a_desktop_vm() {
    let tcp = |h: &str| Endpoint::Tcp {
        host: h.into(),
        port: 2375,
    };
    let tls = |h: &str| Endpoint::Tls {
        host: h.into(),
        port: 2376,
        certs: "/c".into(),
    };
    let named = |n: &str| facts_of(n, false);
    let unix = Endpoint::Unix("/var/run/docker.sock".into());
    let laptop = Some("laptop");
    // Local places: remote only when the engine names another machine outside a desktop VM
    // (an engine in another mount and UTS namespace, a VM behind a forwarded socket).
    assert!(!is_remote(&unix, &named("laptop"), laptop));
    assert!(!is_remote(&unix, &named("Laptop.lan"), laptop));
    assert!(!is_remote(&unix, &facts_of("docker-desktop", true), laptop));
    assert!(!is_remote(&unix, &named(""), laptop));
    assert!(!is_remote(&unix, &named("other"), None));
    assert!(is_remote(&unix, &named("po-remote-engine"), laptop));
    assert!(is_remote(&tcp("127.0.0.1"), &named("other"), laptop));
    assert!(!is_remote(&tcp("localhost"), &named("laptop"), laptop));
    assert!(!is_remote(&tcp("[::1]"), &facts_of("colima", true), laptop));
    assert!(is_remote(&tls("127.0.0.1"), &named("other"), laptop));
    assert!(!is_remote(&tls("127.0.0.1"), &named("laptop"), laptop));
    // Far addresses: remote unless the engine names this machine.
    assert!(!is_remote(&tcp("10.0.0.5"), &named("laptop"), laptop));
    assert!(!is_remote(&tcp("10.0.0.5"), &named("Laptop.lan"), laptop));
    assert!(is_remote(&tcp("10.0.0.5"), &named("buildbox"), laptop));
    assert!(is_remote(&tls("10.0.0.5"), &named("buildbox"), laptop));
    assert!(is_remote(
        &tcp("docker"),
        &named("dind-7f3a"),
        Some("runner")
    ));
    assert!(is_remote(&tcp("10.0.0.5"), &named(""), laptop));
    assert!(is_remote(&tcp("10.0.0.5"), &named("buildbox"), None));
    // SSH: always another machine's.
    let ssh = Endpoint::parse("ssh://me@laptop");
    assert!(is_remote(&ssh, &named("laptop"), laptop));
}

#[test]
fn the_person_decides_remote_when_they_say() {
    let probed = |name: &str| {
        vec![(
            c(EngineKind::Docker, "/var/run/docker.sock", "rootful"),
            Outcome::Available(facts_of(name, false)),
        )]
    };
    let here = local_host_name(&host()).unwrap_or_default();
    assert!(!summarise(&host(), probed(&here), None).remote);
    assert!(summarise(&host(), probed(&here), Some(true)).remote);
    assert!(!summarise(&host(), probed("elsewhere-7f3a"), Some(false)).remote);
    let r = summarise(&host(), probed(&here), None);
    assert_eq!(r.transport.as_deref(), Some("unix"));
    assert_eq!(r.tls_certs, None);
    let forced = |v: &str| {
        crate::engine::remote_forced(
            &HostEnv::with_vars(&[(crate::names::vars::REMOTE_VAR, v)]),
            None,
        )
    };
    assert_eq!(forced("1").unwrap(), Some(true));
    assert_eq!(forced("0").unwrap(), Some(false));
    assert_eq!(forced("").unwrap(), None);
    let e = forced("yes").unwrap_err();
    assert_eq!(e.code(), "OPTIONS_INVALID");
    assert!(e.to_string().contains("PO_SANDBOX_ENGINE_REMOTE"), "{e}");
    let option_wins = crate::engine::remote_forced(
        &HostEnv::with_vars(&[(crate::names::vars::REMOTE_VAR, "bad")]),
        Some(false),
    );
    assert_eq!(option_wins.unwrap(), Some(false));
}
use crate::engine::probe::EngineFacts;
use std::collections::HashMap;

fn c(engine: EngineKind, path: &str, source: &'static str) -> Candidate {
    Candidate {
        engine,
        endpoint: Endpoint::Unix(path.into()),
        source,
        vm: false,
        rootless: false,
        context: None,
    }
}

fn host() -> HostEnv {
    HostEnv::from_vars(HashMap::from([(
        "PATH".to_string(),
        "/nonexistent".to_string(),
    )]))
}

fn summ(probed: Vec<(Candidate, Outcome)>) -> EngineReport {
    summarise(&host(), probed, None)
}

#[test]
fn first_available_wins_and_is_described() {
    let facts = EngineFacts {
        engine: EngineKind::Podman,
        engine_version: "4.3.1".into(),
        api_version: "1.41".into(),
        os: "debian".into(),
        os_type: "linux".into(),
        arch: "amd64".into(),
        vm: false,
        rootless: true,
        cgroup_version: "2".into(),
        host_name: "box".into(),
        mem_total: Some(1 << 30),
        ncpu: Some(2),
    };
    let r = summ(vec![
        (
            c(EngineKind::Docker, "/var/run/docker.sock", "rootful"),
            Outcome::Stopped("refused".into()),
        ),
        (
            c(
                EngineKind::Podman,
                "/run/user/1/podman/podman.sock",
                "rootless",
            ),
            Outcome::Available(facts),
        ),
    ]);
    assert!(r.available && r.rootless && !r.vm);
    assert_eq!(r.cgroup_version.as_deref(), Some("2"));
    assert_eq!(r.engine.as_deref(), Some("podman"));
    assert_eq!(
        r.endpoint.as_deref(),
        Some("unix:///run/user/1/podman/podman.sock")
    );
    assert_eq!(r.candidates.len(), 2);
    assert_eq!(r.candidates[0].outcome, CandidateOutcome::Stopped);
    assert!(r.reason.is_none() && r.reason_code.is_none());
}

#[test]
fn nothing_anywhere_is_not_installed_and_lists_places() {
    let r = summ(vec![
        (
            c(EngineKind::Docker, "/var/run/docker.sock", "rootful"),
            Outcome::NotFound,
        ),
        (
            c(EngineKind::Podman, "/run/podman/podman.sock", "rootful"),
            Outcome::NotFound,
        ),
        (
            c(
                EngineKind::Nerdctl,
                "/run/containerd/containerd.sock",
                "containerd",
            ),
            Outcome::NotFound,
        ),
    ]);
    assert!(!r.available);
    assert_eq!(r.reason_code.as_deref(), Some("ENGINE_NOT_INSTALLED"));
    let reason = r.reason.unwrap();
    assert!(
        reason.contains("/var/run/docker.sock") && reason.contains("/run/podman/podman.sock"),
        "{reason}"
    );
    assert!(!reason.contains("containerd"), "{reason}");
    assert!(reason.contains("apt-get install docker.io"), "{reason}");
}

#[test]
fn each_failure_has_its_code_and_a_fix() {
    let cases = [
        (
            Outcome::Stopped("refused".into()),
            "ENGINE_STOPPED",
            "systemctl start docker",
        ),
        (
            Outcome::NotASocket("a regular file".into()),
            "ENGINE_NOT_A_SOCKET",
            "is a regular file",
        ),
        (
            Outcome::PermissionDenied("EACCES".into()),
            "ENGINE_PERMISSION_DENIED",
            "usermod -aG docker",
        ),
        (
            Outcome::Timeout {
                stage: "ping",
                ms: 500,
            },
            "ENGINE_TIMEOUT",
            "within 500 ms",
        ),
        (
            Outcome::ApiTooOld {
                api: "1.39".into(),
                engine_version: "18.09".into(),
            },
            "ENGINE_API_TOO_OLD",
            "1.41 or newer",
        ),
        (
            Outcome::Failed("404".into()),
            "ENGINE_NOT_AN_ENGINE",
            "DOCKER_HOST",
        ),
        (
            Outcome::Unsupported("ssh is not supported".into()),
            "ENGINE_UNSUPPORTED_ENDPOINT",
            "ssh is not supported",
        ),
    ];
    for (outcome, code, needle) in cases {
        let r = summ(vec![
            (
                c(EngineKind::Docker, "/var/run/docker.sock", "rootful"),
                outcome,
            ),
            (
                c(EngineKind::Podman, "/run/podman/podman.sock", "rootful"),
                Outcome::NotFound,
            ),
        ]);
        assert_eq!(r.reason_code.as_deref(), Some(code));
        let reason = r.reason.unwrap();
        assert!(reason.contains(needle), "{code}: {reason}");
    }
}

#[test]
fn the_closest_to_working_reason_wins() {
    let r = summ(vec![
        (
            c(EngineKind::Docker, "/var/run/docker.sock", "rootful"),
            Outcome::NotFound,
        ),
        (
            c(EngineKind::Docker, "/run/user/1/docker.sock", "rootless"),
            Outcome::Stopped("refused".into()),
        ),
        (
            c(EngineKind::Podman, "/run/podman/podman.sock", "rootful"),
            Outcome::Timeout {
                stage: "info",
                ms: 10,
            },
        ),
    ]);
    assert_eq!(r.reason_code.as_deref(), Some("ENGINE_TIMEOUT"));
    let r = summ(vec![
        (
            c(EngineKind::Docker, "/var/run/docker.sock", "rootful"),
            Outcome::NotFound,
        ),
        (
            c(EngineKind::Docker, "/run/user/1/docker.sock", "rootless"),
            Outcome::Stopped("refused".into()),
        ),
    ]);
    assert_eq!(r.reason_code.as_deref(), Some("ENGINE_STOPPED"));
    assert!(r.reason.unwrap().contains("systemctl --user start docker"));
}

#[test]
fn a_stopped_context_engine_says_how_to_pick_another() {
    let mut cand = c(
        EngineKind::Docker,
        "/home/u/.colima/default/docker.sock",
        "currentContext",
    );
    cand.context = Some("colima".into());
    let r = summ(vec![(cand, Outcome::Stopped("refused".into()))]);
    assert_eq!(r.reason_code.as_deref(), Some("ENGINE_STOPPED"));
    let reason = r.reason.unwrap();
    assert!(reason.contains("docker context use NAME"), "{reason}");
    assert_eq!(r.candidates[0].context.as_deref(), Some("colima"));
}

#[test]
fn report_serialises_in_camel_case() {
    let r = summ(vec![(
        c(EngineKind::Docker, "/x.sock", "DOCKER_HOST"),
        Outcome::NotFound,
    )]);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["reasonCode"], "ENGINE_NOT_INSTALLED");
    assert_eq!(json["candidates"][0]["outcome"], "not-found");
}

#[test]
fn reason_texts_are_exact() {
    let docker = c(EngineKind::Docker, "/var/run/docker.sock", "rootful");
    let podman = c(EngineKind::Podman, "/p.sock", "Podman machine");
    assert_eq!(
        api_too_old(&docker, "9", "1.2"),
        "Docker 9 at unix:///var/run/docker.sock serves Engine API 1.2; po-sandbox needs 1.41 or newer. Upgrade to Docker 20.10+ or Podman 3+."
    );
    assert_eq!(
        hung(&podman, "info", 7),
        "Podman at unix:///p.sock accepted a connection but did not answer info within 7 ms: the engine is hung. Restart it, or raise PO_SANDBOX_ENGINE_TIMEOUT_MS if it is only slow."
    );
    let mut h = host();
    h.uid = 42;
    assert!(permission_denied(&h, &docker).starts_with(
        "Docker's socket unix:///var/run/docker.sock exists but this user (uid 42) may not use it."
    ));
    assert_eq!(
        not_an_engine(&podman, "d"),
        "unix:///p.sock (Podman machine) does not behave like a Docker or Podman engine: d. Point CONTAINER_HOST at an engine's socket."
    );
    assert_eq!(
        stopped(&podman),
        "Podman's socket unix:///p.sock exists but nothing answers: the engine is stopped. To fix, start it: podman machine start."
    );
    assert_eq!(
        not_a_socket(&podman, "a folder"),
        "unix:///p.sock is a folder, not the engine's socket. Remove it and restart the engine (start it: podman machine start)."
    );
}

#[test]
fn not_installed_lists_only_docker_api_places() {
    let all = vec![
        (
            c(EngineKind::Docker, "/var/run/docker.sock", "rootful"),
            Outcome::NotFound,
        ),
        (c(EngineKind::Finch, "/f.sock", "Finch"), Outcome::NotFound),
        (
            c(EngineKind::Podman, "/p.sock", "rootful"),
            Outcome::NotFound,
        ),
    ];
    assert_eq!(
        not_installed(&host(), &all),
        "No container engine is running here: no engine socket at unix:///var/run/docker.sock, unix:///p.sock. Install Docker (Debian: sudo apt-get install docker.io) or Podman and start it, or set DOCKER_HOST to a running engine."
    );
}
