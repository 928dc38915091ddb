//! Visits one candidate and classifies what answers there.

use std::io::ErrorKind;
use std::time::Duration;

use bollard::{ClientVersion, Docker};

use super::candidates::{Candidate, EngineKind, HostEnv};
use super::endpoint::Endpoint;

/// What a usable engine said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineFacts {
    /// The engine that answered (a Podman socket behind a Docker path reports Podman).
    pub engine: EngineKind,
    /// The engine's own version.
    pub engine_version: String,
    /// The Engine API version it serves (negotiated down to ours when newer).
    pub api_version: String,
    /// The engine host's operating system, as the engine reports it.
    pub os: String,
    /// `linux` or `windows`: the kind of containers it runs.
    pub os_type: String,
    /// The engine host's architecture.
    pub arch: String,
    /// Its containers run in a VM (Docker Desktop, Podman machine, Colima...).
    pub vm: bool,
    /// The engine runs rootless.
    pub rootless: bool,
    /// The name of the machine the engine runs on (`Name` in its info).
    pub host_name: String,
}

/// What was found at one candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A usable Engine API answered.
    Available(EngineFacts),
    /// Nothing there.
    NotFound,
    /// Something other than a socket is there.
    NotASocket(String),
    /// A socket is there but nothing listens: the engine is stopped.
    Stopped(String),
    /// The socket exists but this user may not use it.
    PermissionDenied(String),
    /// Connected, but no answer within the bound at this stage.
    Timeout { stage: &'static str, ms: u128 },
    /// It answered with an Engine API older than the layer needs.
    ApiTooOld { api: String, engine_version: String },
    /// The engine is present but has no Docker-compatible API.
    NoDockerApi(String),
    /// The endpoint cannot be used by this layer.
    Unsupported(String),
    /// It answered, but not usefully.
    Failed(String),
}

impl Outcome {
    /// A stable short code for the outcome (`available`, `not-found`, `stopped`…).
    pub fn code(&self) -> &'static str {
        match self {
            Outcome::Available(_) => "available",
            Outcome::NotFound => "not-found",
            Outcome::NotASocket(_) => "not-a-socket",
            Outcome::Stopped(_) => "stopped",
            Outcome::PermissionDenied(_) => "permission-denied",
            Outcome::Timeout { .. } => "timeout",
            Outcome::ApiTooOld { .. } => "api-too-old",
            Outcome::NoDockerApi(_) => "no-docker-api",
            Outcome::Unsupported(_) => "unsupported",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// Probes one candidate: existence and kind of the socket, connect, then ping, version and info,
/// each bounded by `timeout`.
pub async fn probe(candidate: &Candidate, host: &HostEnv, timeout: Duration) -> Outcome {
    if !candidate.engine.has_docker_api() {
        return probe_without_api(candidate, host).await;
    }
    match &candidate.endpoint {
        Endpoint::Unsupported { why, .. } => Outcome::Unsupported(why.clone()),
        Endpoint::Unix(path) => {
            if let Some(outcome) = check_socket_file(path).await {
                return outcome;
            }
            match tokio::time::timeout(timeout, tokio::net::UnixStream::connect(path)).await {
                Err(_) => {
                    return Outcome::Timeout {
                        stage: "connect",
                        ms: timeout.as_millis(),
                    };
                }
                Ok(Err(e)) => return classify_connect_error(&e),
                Ok(Ok(_)) => {}
            }
            probe_api(candidate, host, timeout).await
        }
        Endpoint::Tcp { host: h, port } => {
            match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((h.as_str(), *port)))
                .await
            {
                Err(_) => {
                    return Outcome::Timeout {
                        stage: "connect",
                        ms: timeout.as_millis(),
                    };
                }
                Ok(Err(e)) => return classify_connect_error(&e),
                Ok(Ok(_)) => {}
            }
            probe_api(candidate, host, timeout).await
        }
    }
}

async fn check_socket_file(path: &std::path::Path) -> Option<Outcome> {
    match tokio::fs::metadata(path).await {
        Ok(meta) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::FileTypeExt;
                let ft = meta.file_type();
                if !ft.is_socket() {
                    let kind = if ft.is_dir() {
                        "a folder"
                    } else if ft.is_file() {
                        "a regular file"
                    } else {
                        "not a socket"
                    };
                    return Some(Outcome::NotASocket(kind.to_string()));
                }
            }
            #[cfg(not(unix))]
            let _ = meta;
            None
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            Some(Outcome::PermissionDenied(e.to_string()))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            match tokio::fs::symlink_metadata(path).await {
                Ok(_) => Some(Outcome::Stopped(
                    "the socket path is a link to a socket that no longer exists".into(),
                )),
                Err(_) => Some(Outcome::NotFound),
            }
        }
        Err(e) => Some(Outcome::Failed(e.to_string())),
    }
}

fn classify_connect_error(e: &std::io::Error) -> Outcome {
    match e.kind() {
        ErrorKind::ConnectionRefused => Outcome::Stopped(e.to_string()),
        ErrorKind::PermissionDenied => Outcome::PermissionDenied(e.to_string()),
        ErrorKind::NotFound => Outcome::NotFound,
        _ => Outcome::Failed(format!("could not connect: {e}")),
    }
}

/// nerdctl and Finch: present or not, but never usable.
async fn probe_without_api(candidate: &Candidate, host: &HostEnv) -> Outcome {
    let name = candidate.engine.as_str();
    let socket = candidate.endpoint.socket_path().filter(|p| p.exists());
    let binary = host.which(name);
    match (socket, binary) {
        (None, None) => Outcome::NotFound,
        (socket, binary) => {
            let found = match (socket, binary) {
                (Some(s), _) => format!("{} is there", s.display()),
                (None, Some(b)) => format!("{} is installed", b.display()),
                (None, None) => unreachable!(),
            };
            Outcome::NoDockerApi(format!(
                "{found}, but {name} serves no Docker-compatible Engine API, which po-sandbox needs. Install Docker or Podman"
            ))
        }
    }
}

/// Connects a bollard client to an endpoint, speaking `version` of the Engine API.
pub fn connect(
    endpoint: &Endpoint,
    timeout: Duration,
    version: &ClientVersion,
) -> Result<Docker, String> {
    // bollard's own per-request bound is in whole seconds; ours (tokio) is tighter and fires first.
    let secs = timeout.as_secs() + 2;
    match endpoint {
        Endpoint::Unix(path) => Docker::connect_with_unix(&path.to_string_lossy(), secs, version)
            .map_err(|e| e.to_string()),
        Endpoint::Tcp { .. } => Docker::connect_with_http(&endpoint.to_string(), secs, version)
            .map_err(|e| e.to_string()),
        Endpoint::Unsupported { why, .. } => Err(why.clone()),
    }
}

/// Parses `"1.41"` into `(1, 41)`.
pub fn parse_api_version(v: &str) -> Option<(u32, u32)> {
    let (major, minor) = v.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

async fn probe_api(candidate: &Candidate, host: &HostEnv, timeout: Duration) -> Outcome {
    let docker = match connect(&candidate.endpoint, timeout, bollard::API_DEFAULT_VERSION) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e),
    };
    let ms = timeout.as_millis();
    let not_api = |stage: &str, e: bollard::errors::Error| {
        Outcome::Failed(format!(
            "it accepted a connection but did not answer {stage} as a Docker Engine API: {e}"
        ))
    };
    match tokio::time::timeout(timeout, docker.ping()).await {
        Err(_) => return Outcome::Timeout { stage: "ping", ms },
        Ok(Err(e)) => return not_api("ping", e),
        Ok(Ok(_)) => {}
    }
    let version = match tokio::time::timeout(timeout, docker.version()).await {
        Err(_) => {
            return Outcome::Timeout {
                stage: "version",
                ms,
            };
        }
        Ok(Err(e)) => return not_api("version", e),
        Ok(Ok(v)) => v,
    };
    let engine_version = version.version.clone().unwrap_or_default();
    let api = version.api_version.clone().unwrap_or_default();
    let Some(server_api) = parse_api_version(&api) else {
        return Outcome::Failed(format!("it reported an unreadable API version '{api}'"));
    };
    if server_api < super::MIN_API_VERSION {
        return Outcome::ApiTooOld {
            api,
            engine_version,
        };
    }
    // Negotiate: speak the older of the server's API and bollard's.
    let ours = bollard::API_DEFAULT_VERSION;
    let negotiated = if (server_api.0 as usize, server_api.1 as usize)
        < (ours.major_version, ours.minor_version)
    {
        ClientVersion {
            major_version: server_api.0 as usize,
            minor_version: server_api.1 as usize,
        }
    } else {
        ClientVersion {
            major_version: ours.major_version,
            minor_version: ours.minor_version,
        }
    };
    let docker = match connect(&candidate.endpoint, timeout, &negotiated) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e),
    };
    let info = match tokio::time::timeout(timeout, docker.info()).await {
        Err(_) => return Outcome::Timeout { stage: "info", ms },
        Ok(Err(e)) => return not_api("info", e),
        Ok(Ok(i)) => i,
    };
    let is_podman = version
        .components
        .iter()
        .flatten()
        .any(|c| c.name.to_ascii_lowercase().contains("podman"))
        || version
            .platform
            .as_ref()
            .is_some_and(|p| p.name.to_ascii_lowercase().contains("podman"));
    let os = info.operating_system.clone().unwrap_or_default();
    let host_name = info.name.clone().unwrap_or_default();
    let name = host_name.to_ascii_lowercase();
    let vm = candidate.vm
        || os.contains("Docker Desktop")
        || [
            "docker-desktop",
            "colima",
            "orbstack",
            "lima-rancher-desktop",
        ]
        .iter()
        .any(|n| name == *n)
        || host.os != super::candidates::HostOs::Linux;
    let rootless = candidate.rootless
        || info
            .security_options
            .iter()
            .flatten()
            .any(|o| o.contains("name=rootless"));
    Outcome::Available(EngineFacts {
        engine: if is_podman {
            EngineKind::Podman
        } else {
            EngineKind::Docker
        },
        engine_version,
        api_version: format!("{}.{}", negotiated.major_version, negotiated.minor_version),
        os,
        os_type: info.os_type.unwrap_or_default(),
        arch: info.architecture.unwrap_or_default(),
        vm,
        rootless,
        host_name,
    })
}

#[cfg(test)]
mod tests {
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
}
