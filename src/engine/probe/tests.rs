use super::*;
use std::collections::HashMap;

fn candidate(endpoint: Endpoint) -> Candidate {
    Candidate {
        engine: EngineKind::Docker,
        endpoint,
        source: "test",
        vm: false,
        rootless: false,
        context: None,
    }
}

fn host() -> HostEnv {
    HostEnv::from_vars(HashMap::new())
}

const T: Duration = Duration::from_millis(300);
/// For probes that must get an answer: generous, so a loaded test machine is no failure.
const ANSWER: Duration = Duration::from_secs(10);

#[test]
fn api_versions_parse() {
    assert_eq!(parse_api_version("1.41"), Some((1, 41)));
    assert_eq!(parse_api_version(" 1.9 "), Some((1, 9)));
    assert!(parse_api_version("1.40") < Some(super::super::MIN_API_VERSION));
    assert_eq!(parse_api_version("one"), None);
    assert_eq!(parse_api_version("1"), None);
}

#[tokio::test]
async fn missing_socket_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let c = candidate(Endpoint::Unix(dir.path().join("docker.sock")));
    assert_eq!(probe(&c, &host(), T).await, Outcome::NotFound);
}

#[tokio::test]
async fn regular_file_is_not_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    std::fs::write(&path, b"").unwrap();
    let c = candidate(Endpoint::Unix(path));
    assert_eq!(
        probe(&c, &host(), T).await,
        Outcome::NotASocket("a regular file".into())
    );
}

#[tokio::test]
async fn socket_nobody_listens_on_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let c = candidate(Endpoint::Unix(path));
    assert_eq!(probe(&c, &host(), T).await.code(), "stopped");
}

#[tokio::test]
async fn dangling_link_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    std::os::unix::fs::symlink(dir.path().join("gone.sock"), &path).unwrap();
    let c = candidate(Endpoint::Unix(path));
    assert_eq!(probe(&c, &host(), T).await.code(), "stopped");
}

#[tokio::test]
async fn silent_socket_times_out_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let c = candidate(Endpoint::Unix(path));
    let started = std::time::Instant::now();
    let outcome = probe(&c, &host(), T).await;
    assert_eq!(
        outcome,
        Outcome::Timeout {
            stage: "ping",
            ms: 300
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn closed_tcp_port_is_stopped() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let c = candidate(Endpoint::Tcp {
        host: "127.0.0.1".into(),
        port,
    });
    assert_eq!(probe(&c, &host(), T).await.code(), "stopped");
}

#[tokio::test]
async fn http_server_that_is_not_an_engine_fails_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let outcome = probe(&candidate(Endpoint::Unix(path)), &host(), ANSWER).await;
    assert_eq!(outcome.code(), "failed", "{outcome:?}");
}

/// A socket at `path` that answers every HTTP request with 200: `version` to `/version`, `info`
/// to `/info`, and `OK` to anything else (the ping).
fn fake_engine(path: &std::path::Path, version: &'static str, info: &'static str) {
    let listener = tokio::net::UnixListener::bind(path).unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    let Ok(n) = s.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    let body = if req.contains("/version") {
                        version
                    } else if req.contains("/info") {
                        info
                    } else {
                        "OK"
                    };
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/json\r\n\r\n{body}",
                        body.len()
                    );
                    if s.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

#[tokio::test]
async fn old_api_is_too_old() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    fake_engine(&path, r#"{"Version":"18.09.0","ApiVersion":"1.39"}"#, "{}");
    let outcome = probe(&candidate(Endpoint::Unix(path)), &host(), ANSWER).await;
    assert_eq!(
        outcome,
        Outcome::ApiTooOld {
            api: "1.39".into(),
            engine_version: "18.09.0".into()
        }
    );
}

#[tokio::test]
async fn a_podman_engine_answers_with_its_facts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("podman.sock");
    fake_engine(
        &path,
        r#"{"Version":"4.3.1","ApiVersion":"1.41","Components":[{"Name":"Podman Engine","Version":"4.3.1"}]}"#,
        r#"{"OperatingSystem":"debian","OSType":"linux","Architecture":"x86_64","Name":"Colima","SecurityOptions":["name=seccomp","name=rootless"],"CgroupVersion":"1","MemTotal":8589934592,"NCPU":4}"#,
    );
    let mut h = host();
    h.os = HostOs::Linux;
    let outcome = probe(&candidate(Endpoint::Unix(path)), &h, ANSWER).await;
    assert_eq!(
        outcome,
        Outcome::Available(EngineFacts {
            engine: EngineKind::Podman,
            engine_version: "4.3.1".into(),
            api_version: "1.41".into(),
            os: "debian".into(),
            os_type: "linux".into(),
            arch: "x86_64".into(),
            vm: true,
            rootless: true,
            cgroup_version: "1".into(),
            host_name: "Colima".into(),
            mem_total: Some(8 << 30),
            ncpu: Some(4),
        })
    );
}

#[test]
fn the_older_api_of_server_and_client_is_spoken() {
    let ours = bollard::API_DEFAULT_VERSION;
    let spoken = |v: ClientVersion| (v.major_version, v.minor_version);
    assert_eq!(spoken(negotiate((1, 41))), (1, 41));
    assert_eq!(
        spoken(negotiate((1, 999))),
        (ours.major_version, ours.minor_version)
    );
    assert_eq!(
        spoken(negotiate((2, 0))),
        (ours.major_version, ours.minor_version)
    );
}

#[test]
fn podman_vm_and_rootless_are_read_from_the_answers() {
    let version = |json: &str| -> SystemVersion { serde_json::from_str(json).unwrap() };
    assert!(!is_podman(&version(r#"{"Version":"28.0.1"}"#)));
    assert!(is_podman(&version(
        r#"{"Platform":{"Name":"linux/amd64/debian-12 PODMAN"}}"#
    )));
    let mut h = host();
    h.os = HostOs::Linux;
    let c = candidate(Endpoint::Unix("/s".into()));
    assert!(!runs_in_vm(&c, &h, "Debian GNU/Linux 12", "box"));
    assert!(runs_in_vm(&c, &h, "Docker Desktop", "box"));
    assert!(runs_in_vm(&c, &h, "", "OrbStack"));
    assert!(!runs_in_vm(&c, &h, "", "orbstack-2"));
    h.os = HostOs::MacOs;
    assert!(runs_in_vm(&c, &h, "", "box"));
    let info = |json: &str| -> SystemInfo { serde_json::from_str(json).unwrap() };
    assert!(!runs_rootless(
        &c,
        &info(r#"{"SecurityOptions":["name=seccomp"]}"#)
    ));
    assert!(runs_rootless(
        &c,
        &info(r#"{"SecurityOptions":["name=rootless"]}"#)
    ));
    let rootless_place = Candidate {
        rootless: true,
        ..c
    };
    assert!(runs_rootless(&rootless_place, &info("{}")));
}

#[tokio::test]
async fn nerdctl_without_anything_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let c = Candidate {
        engine: EngineKind::Nerdctl,
        endpoint: Endpoint::Unix(dir.path().join("containerd.sock")),
        source: "containerd",
        vm: false,
        rootless: false,
        context: None,
    };
    let h = HostEnv::from_vars([("PATH".to_string(), dir.path().display().to_string())].into());
    assert_eq!(probe(&c, &h, T).await, Outcome::NotFound);
    // A nerdctl binary on PATH: present, but without a Docker API.
    let bin = dir.path().join("nerdctl");
    std::fs::write(&bin, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(probe(&c, &h, T).await.code(), "no-docker-api");
}

#[tokio::test]
async fn kept_facts_stand_for_version_and_info_unless_asked_anyway() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    fake_engine(
        &path,
        r#"{"Version":"20.10.24","ApiVersion":"1.41"}"#,
        r#"{"OperatingSystem":"debian","OSType":"linux","Architecture":"x86_64","Name":"h"}"#,
    );
    let c = candidate(Endpoint::Unix(path));
    let file = dir.path().join(facts_cache::FILE);
    let keep = |ask_anyway| {
        Some(facts_cache::Keep {
            file: &file,
            ask_anyway,
        })
    };
    let version = |o: Outcome| match o {
        Outcome::Available(f) => f.engine_version,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        version(probe_keeping(&c, &host(), ANSWER, keep(false)).await),
        "20.10.24"
    );
    // What is kept stands for the answers (the engine is only pinged) ...
    let kept = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, kept.replace("20.10.24", "kept")).unwrap();
    assert_eq!(
        version(probe_keeping(&c, &host(), ANSWER, keep(false)).await),
        "kept"
    );
    // ... unless the engine is asked anyway: its answers are kept again.
    assert_eq!(
        version(probe_keeping(&c, &host(), ANSWER, keep(true)).await),
        "20.10.24"
    );
    assert!(std::fs::read_to_string(&file).unwrap().contains("20.10.24"));
}
