use super::*;

#[test]
fn only_a_non_loopback_tcp_engine_naming_another_host_is_remote() {
    let tcp = |h: &str| Endpoint::Tcp {
        host: h.into(),
        port: 2375,
    };
    let unix = Endpoint::Unix("/var/run/docker.sock".into());
    assert!(!is_remote(&unix, "docker-desktop", Some("laptop")));
    assert!(!is_remote(&tcp("127.0.0.1"), "other", Some("laptop")));
    assert!(!is_remote(&tcp("localhost"), "other", Some("laptop")));
    assert!(!is_remote(&tcp("[::1]"), "other", Some("laptop")));
    assert!(!is_remote(&tcp("10.0.0.5"), "laptop", Some("laptop")));
    assert!(!is_remote(&tcp("10.0.0.5"), "Laptop.lan", Some("laptop")));
    assert!(is_remote(&tcp("10.0.0.5"), "buildbox", Some("laptop")));
    assert!(is_remote(&tcp("docker"), "dind-7f3a", Some("runner")));
    assert!(is_remote(&tcp("10.0.0.5"), "", Some("laptop")));
    assert!(is_remote(&tcp("10.0.0.5"), "buildbox", None));
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
    summarise(&host(), probed, Duration::from_secs(1))
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
