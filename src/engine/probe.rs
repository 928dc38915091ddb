//! Visits one candidate and classifies what answers there.

use std::io::ErrorKind;
use std::time::{Duration, SystemTime};

use bollard::models::{SystemInfo, SystemVersion};
use bollard::{ClientVersion, Docker};

use super::candidates::{Candidate, EngineKind};
use super::endpoint::Endpoint;
use super::facts_cache;
pub use super::facts_cache::EngineFacts;
use crate::host::{HostEnv, HostOs};

/// What was found at one candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A usable Engine API answered.
    Available(EngineFacts),
    /// Nothing there.
    NotFound,
    /// Something other than a socket is there.
    #[cfg_attr(not(unix), allow(dead_code))]
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
    /// The connection was refused for a reason the person must fix (a host key that does not
    /// match, a certificate from another CA): `code` is the report's reason code.
    Refused { code: &'static str, why: String },
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
            Outcome::Refused { .. } => "refused",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// Probes one candidate: existence and kind of the socket, connect, then ping, version and info,
/// each bounded by `timeout`.
#[cfg(test)]
pub async fn probe(candidate: &Candidate, host: &HostEnv, timeout: Duration) -> Outcome {
    probe_keeping(candidate, host, timeout, None).await
}

/// [`probe`], with the engine's facts kept in `facts_file` (see [`facts_cache`]) when given:
/// a fresh entry for this start of the engine stands for the version and info answers.
pub async fn probe_keeping(
    candidate: &Candidate,
    host: &HostEnv,
    timeout: Duration,
    facts: Option<facts_cache::Keep<'_>>,
) -> Outcome {
    if !candidate.engine.has_docker_api() {
        return probe_without_api(candidate, host).await;
    }
    if let Err(why) = candidate.endpoint.usable_on(host.os) {
        return Outcome::Unsupported(why.to_string());
    }
    match &candidate.endpoint {
        Endpoint::Unsupported { why, .. } => Outcome::Unsupported(why.clone()),
        Endpoint::NamedPipe(pipe) => match open_pipe(pipe) {
            Ok(()) => probe_api(candidate, host, timeout, facts).await,
            Err(e) => classify_connect_error(&e),
        },
        Endpoint::Unix(path) => {
            if let Some(outcome) = check_socket_file(path).await {
                return outcome;
            }
            match tokio::time::timeout(timeout, unix_connect(path)).await {
                Err(_) => {
                    return Outcome::Timeout {
                        stage: "connect",
                        ms: timeout.as_millis(),
                    };
                }
                Ok(Err(e)) => return classify_connect_error(&e),
                Ok(Ok(_)) => {}
            }
            probe_api(candidate, host, timeout, facts).await
        }
        Endpoint::Ssh(_) => probe_api(candidate, host, timeout, facts).await,
        Endpoint::Tcp { host: h, port } | Endpoint::Tls { host: h, port, .. } => {
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
            probe_api(candidate, host, timeout, facts).await
        }
    }
}

#[cfg(unix)]
async fn unix_connect(path: &std::path::Path) -> std::io::Result<()> {
    tokio::net::UnixStream::connect(path).await.map(drop)
}

#[cfg(not(unix))]
async fn unix_connect(path: &std::path::Path) -> std::io::Result<()> {
    let _ = path;
    Err(ErrorKind::Unsupported.into())
}

/// Opens (and closes) a named pipe: a missing pipe is `NotFound`, a busy one still exists.
#[cfg(windows)]
fn open_pipe(pipe: &str) -> std::io::Result<()> {
    let name = pipe.replace('/', "\\");
    match tokio::net::windows::named_pipe::ClientOptions::new().open(&name) {
        Ok(_) => Ok(()),
        // ERROR_PIPE_BUSY: the engine is there, every instance is in use right now.
        Err(e) if e.raw_os_error() == Some(231) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(not(windows))]
fn open_pipe(pipe: &str) -> std::io::Result<()> {
    let _ = pipe;
    Err(ErrorKind::Unsupported.into())
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

/// Why no client could be made for an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The engine client refused the endpoint.
    #[error(transparent)]
    Engine(#[from] bollard::errors::Error),
    /// A kind of endpoint this build cannot reach: `why` follows the endpoint.
    #[error("{endpoint}: {why}")]
    NotOnThisPlatform { endpoint: String, why: &'static str },
    /// A URI the layer cannot use; the text says what to do instead.
    #[error("{0}")]
    Unsupported(String),
    /// What the transport needs is not there (a certificate file).
    #[error(transparent)]
    Refused(#[from] super::transport::Failure),
}

/// A bollard client for an endpoint, speaking `version` of the Engine API, each request
/// bounded by `timeout` (whole seconds, at least one).
pub fn client(
    endpoint: &Endpoint,
    timeout: Duration,
    version: &ClientVersion,
) -> Result<Docker, ClientError> {
    let secs = timeout.as_secs().max(1);
    let elsewhere = |why| ClientError::NotOnThisPlatform {
        endpoint: endpoint.to_string(),
        why,
    };
    match endpoint {
        #[cfg(unix)]
        Endpoint::Unix(path) => Ok(Docker::connect_with_unix(
            &path.to_string_lossy(),
            secs,
            version,
        )?),
        #[cfg(windows)]
        Endpoint::NamedPipe(pipe) => Ok(Docker::connect_with_named_pipe(pipe, secs, version)?),
        #[cfg(not(unix))]
        Endpoint::Unix(_) => Err(elsewhere("Unix sockets cannot be used on Windows")),
        #[cfg(not(windows))]
        Endpoint::NamedPipe(_) => Err(elsewhere("named pipes exist only on Windows")),
        Endpoint::Tcp { .. } => Ok(Docker::connect_with_http(
            &endpoint.to_string(),
            secs,
            version,
        )?),
        Endpoint::Tls { host, port, certs } => {
            let dial = super::transport::tls::TlsDial::new(host, *port, certs)?;
            Ok(super::transport::client(dial, secs, version)?)
        }
        Endpoint::Ssh(target) => {
            let dial = super::transport::ssh::SshDial::new(target.clone());
            Ok(super::transport::client(dial, secs, version)?)
        }
        Endpoint::Unsupported { why, .. } => Err(ClientError::Unsupported(why.clone())),
    }
}

/// Connects a bollard client for probing: bollard's own per-request bound (whole seconds) is
/// looser than the probe's tokio bound, which fires first.
pub fn connect(
    endpoint: &Endpoint,
    timeout: Duration,
    version: &ClientVersion,
) -> Result<Docker, ClientError> {
    client(
        endpoint,
        Duration::from_secs(timeout.as_secs() + 2),
        version,
    )
}

/// Parses `"1.41"` into `(1, 41)`.
pub fn parse_api_version(v: &str) -> Option<(u32, u32)> {
    let (major, minor) = v.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

async fn probe_api(
    candidate: &Candidate,
    host: &HostEnv,
    timeout: Duration,
    facts: Option<facts_cache::Keep<'_>>,
) -> Outcome {
    let docker = match connect(&candidate.endpoint, timeout, bollard::API_DEFAULT_VERSION) {
        Ok(d) => d,
        Err(ClientError::Refused(f)) => {
            return Outcome::Refused {
                code: f.code,
                why: f.text,
            };
        }
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let kept = facts.zip(facts_cache::key_of(candidate));
    if let Some((keep, key)) = &kept
        && !keep.ask_anyway
        && let Some(facts) = facts_cache::read(keep.file, key, SystemTime::now())
    {
        // This start of the engine said them: it still answers.
        return match ask("ping", timeout, docker.ping()).await {
            Ok(_) => Outcome::Available(facts),
            Err(outcome) => outcome,
        };
    }
    let outcome = ask_engine(candidate, host, timeout, docker).await;
    if let (Some((keep, key)), Outcome::Available(facts)) = (&kept, &outcome) {
        facts_cache::write(keep.file, key, facts, SystemTime::now());
    }
    outcome
}

/// Ping, version and info (and libpod's info on Podman): the engine's facts.
async fn ask_engine(
    candidate: &Candidate,
    host: &HostEnv,
    timeout: Duration,
    docker: Docker,
) -> Outcome {
    // Ping, version and info at once (one round trip instead of two): info is asked at the
    // oldest API this layer accepts, which every engine it accepts speaks, so it need not wait
    // for the negotiation. A failed ping still decides the outcome first.
    let oldest = ClientVersion {
        major_version: super::MIN_API_VERSION.0 as usize,
        minor_version: super::MIN_API_VERSION.1 as usize,
    };
    let for_info = match connect(&candidate.endpoint, timeout, &oldest) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let (ping, version, info) = tokio::join!(
        ask("ping", timeout, docker.ping()),
        ask("version", timeout, docker.version()),
        ask("info", timeout, for_info.info())
    );
    if let Err(outcome) = ping {
        return outcome;
    }
    let version = match version {
        Ok(v) => v,
        Err(outcome) => return outcome,
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
    let negotiated = negotiate(server_api);
    let info = match info {
        Ok(i) => i,
        Err(outcome) => return outcome,
    };
    let mut facts = engine_facts(candidate, host, &version, info, engine_version, &negotiated);
    if facts.engine == EngineKind::Podman
        && let Some(libpod) = super::libpod::ask(&candidate.endpoint, timeout).await
    {
        facts.rootless |= libpod.rootless;
        if facts.cgroup_version.is_empty() {
            facts.cgroup_version = libpod.cgroup_version.trim_start_matches('v').to_string();
        }
    }
    Outcome::Available(facts)
}

/// Awaits one Engine API request within `timeout`: no answer is a timeout at `stage`, an error
/// answer means it is no Docker Engine API.
async fn ask<T>(
    stage: &'static str,
    timeout: Duration,
    request: impl Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, Outcome> {
    match tokio::time::timeout(timeout, request).await {
        Err(_) => Err(Outcome::Timeout {
            stage,
            ms: timeout.as_millis(),
        }),
        Ok(Err(e)) => Err(not_api(stage, e)),
        Ok(Ok(v)) => Ok(v),
    }
}

fn not_api(stage: &str, e: bollard::errors::Error) -> Outcome {
    if let Some(f) = super::transport::failure_in(&e) {
        return Outcome::Refused {
            code: f.code,
            why: f.text.clone(),
        };
    }
    Outcome::Failed(format!(
        "it accepted a connection but did not answer {stage} as a Docker Engine API: {e}"
    ))
}

/// Speak the older of the server's API and bollard's.
fn negotiate(server_api: (u32, u32)) -> ClientVersion {
    let ours = bollard::API_DEFAULT_VERSION;
    if (server_api.0 as usize, server_api.1 as usize) < (ours.major_version, ours.minor_version) {
        ClientVersion {
            major_version: server_api.0 as usize,
            minor_version: server_api.1 as usize,
        }
    } else {
        ClientVersion {
            major_version: ours.major_version,
            minor_version: ours.minor_version,
        }
    }
}

/// What a usable engine said about itself, in its version and info answers.
fn engine_facts(
    candidate: &Candidate,
    host: &HostEnv,
    version: &SystemVersion,
    info: SystemInfo,
    engine_version: String,
    negotiated: &ClientVersion,
) -> EngineFacts {
    let os = info.operating_system.clone().unwrap_or_default();
    let host_name = info.name.clone().unwrap_or_default();
    EngineFacts {
        engine: if is_podman(version) {
            EngineKind::Podman
        } else {
            EngineKind::Docker
        },
        engine_version,
        api_version: format!("{}.{}", negotiated.major_version, negotiated.minor_version),
        vm: runs_in_vm(candidate, host, &os, &host_name),
        rootless: runs_rootless(candidate, &info),
        cgroup_version: info
            .cgroup_version
            .map(|v| v.to_string())
            .unwrap_or_default(),
        os,
        os_type: info.os_type.unwrap_or_default(),
        arch: info.architecture.unwrap_or_default(),
        host_name,
        mem_total: info.mem_total.filter(|m| *m > 0),
        ncpu: info.ncpu.filter(|n| *n > 0),
    }
}

/// Podman names itself in a version component or the platform name.
fn is_podman(version: &SystemVersion) -> bool {
    version
        .components
        .iter()
        .flatten()
        .any(|c| c.name.to_ascii_lowercase().contains("podman"))
        || version
            .platform
            .as_ref()
            .is_some_and(|p| p.name.to_ascii_lowercase().contains("podman"))
}

/// The candidate's place says so, the engine's OS or host name is a desktop VM's, or the host
/// is not Linux.
fn runs_in_vm(candidate: &Candidate, host: &HostEnv, os: &str, host_name: &str) -> bool {
    let name = host_name.to_ascii_lowercase();
    candidate.vm
        || os.contains("Docker Desktop")
        || [
            "docker-desktop",
            "colima",
            "orbstack",
            "lima-rancher-desktop",
        ]
        .iter()
        .any(|n| name == *n)
        || host.os != HostOs::Linux
}

/// The candidate's place says so, or the engine lists the rootless security option.
fn runs_rootless(candidate: &Candidate, info: &SystemInfo) -> bool {
    candidate.rootless
        || info
            .security_options
            .iter()
            .flatten()
            .any(|o| o.contains("name=rootless"))
}

#[cfg(all(test, unix))]
mod tests;
