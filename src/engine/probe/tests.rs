use super::*;
use std::collections::HashMap;

fn candidate(endpoint: Endpoint) -> Candidate {
    Candidate {
        engine: EngineKind::Docker,
        endpoint,
        source: "test",
        vm: false,
        rootless: false,
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

#[tokio::test]
async fn old_api_is_too_old() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docker.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
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
                        r#"{"Version":"18.09.0","ApiVersion":"1.39"}"#
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
async fn nerdctl_without_anything_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let c = Candidate {
        engine: EngineKind::Nerdctl,
        endpoint: Endpoint::Unix(dir.path().join("containerd.sock")),
        source: "containerd",
        vm: false,
        rootless: false,
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
