//! What detection found, in words a person can act on.

use napi_derive::napi;

use super::candidates::{Candidate, EngineKind};
use super::endpoint::Endpoint;
use super::probe::{EngineFacts, Outcome};
use crate::host::HostEnv;

/// One place an engine was looked for, and what answered there.
#[napi(object, js_name = "EngineCandidate", object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateReport {
    /// `docker`, `podman`, `nerdctl` or `finch`.
    pub engine: String,
    /// The endpoint URI (`unix:///var/run/docker.sock`, `tcp://127.0.0.1:2375`).
    pub endpoint: String,
    /// Why it was tried: `DOCKER_HOST`, `CONTAINER_HOST`, `rootful`, `rootless`,
    /// `Docker Desktop`, `Colima`, `Podman machine`…
    pub source: String,
    /// What answered there; `untried` from `engineCandidates`.
    pub outcome: CandidateOutcome,
    /// What was found, in words.
    pub detail: String,
    /// The Docker context the place comes from (source `DOCKER_CONTEXT` or `currentContext`).
    pub context: Option<String>,
}

/// What answered at a place an engine was looked for (the code of its probe's outcome).
#[napi(string_enum = "kebab-case")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CandidateOutcome {
    /// A usable Engine API answered.
    Available,
    /// Nothing there.
    NotFound,
    /// Something other than a socket is there.
    NotASocket,
    /// A socket, but nothing listens.
    Stopped,
    /// This user may not use the socket.
    PermissionDenied,
    /// No answer within the bound.
    Timeout,
    /// An Engine API older than the layer needs.
    ApiTooOld,
    /// An engine without a Docker-compatible API.
    NoDockerApi,
    /// An endpoint this layer cannot use.
    Unsupported,
    /// The connection was refused for a reason to fix (an SSH host key, a TLS certificate).
    Refused,
    /// It answered, but not usefully.
    Failed,
    /// Not probed: `engineCandidates` only lists places.
    Untried,
}

impl From<&Outcome> for CandidateOutcome {
    fn from(o: &Outcome) -> CandidateOutcome {
        match o {
            Outcome::Available(_) => CandidateOutcome::Available,
            Outcome::NotFound => CandidateOutcome::NotFound,
            Outcome::NotASocket(_) => CandidateOutcome::NotASocket,
            Outcome::Stopped(_) => CandidateOutcome::Stopped,
            Outcome::PermissionDenied(_) => CandidateOutcome::PermissionDenied,
            Outcome::Timeout { .. } => CandidateOutcome::Timeout,
            Outcome::ApiTooOld { .. } => CandidateOutcome::ApiTooOld,
            Outcome::NoDockerApi(_) => CandidateOutcome::NoDockerApi,
            Outcome::Unsupported(_) => CandidateOutcome::Unsupported,
            Outcome::Refused { .. } => CandidateOutcome::Refused,
            Outcome::Failed(_) => CandidateOutcome::Failed,
        }
    }
}

impl CandidateReport {
    /// A place as `engineCandidates` lists it: not probed.
    pub fn untried(c: Candidate) -> CandidateReport {
        CandidateReport {
            engine: c.engine.as_str().into(),
            endpoint: c.endpoint.to_string(),
            source: c.source.into(),
            outcome: CandidateOutcome::Untried,
            detail: String::new(),
            context: c.context,
        }
    }
}

/// The result of engine detection.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct EngineReport {
    /// A usable engine answered.
    pub available: bool,
    /// `docker` or `podman`: the engine that answered (a Podman socket behind a Docker path
    /// reports `podman`).
    pub engine: Option<String>,
    /// Its endpoint URI.
    pub endpoint: Option<String>,
    /// How it is reached: `unix`, `npipe`, `tcp`, `tls` or `ssh`.
    pub transport: Option<String>,
    /// The folder of the certificates TLS uses (`ca.pem`, `cert.pem`, `key.pem`), for `tls`.
    pub tls_certs: Option<String>,
    /// Why that endpoint was tried.
    pub source: Option<String>,
    /// The Docker context whose endpoint answered (`DOCKER_CONTEXT`, else `currentContext` in
    /// the docker CLI's config.json); absent for `DOCKER_HOST` and the built-in places.
    pub context: Option<String>,
    /// The engine's version.
    pub engine_version: Option<String>,
    /// The negotiated Engine API version.
    pub api_version: Option<String>,
    /// The engine host's operating system.
    pub os: Option<String>,
    /// `linux` or `windows` containers.
    pub os_type: Option<String>,
    /// The engine host's architecture.
    pub arch: Option<String>,
    /// Containers run in a VM (Docker Desktop, Podman machine, Colima…).
    pub vm: bool,
    /// The engine is rootless.
    pub rootless: bool,
    /// The cgroup version of the engine's host (`1` or `2`), when it says: a rootless engine on
    /// cgroup v1 cannot enforce the containers' pid, memory and CPU limits.
    pub cgroup_version: Option<String>,
    /// The name of the machine the engine runs on.
    pub host_name: Option<String>,
    /// The memory of the engine's machine in bytes (`MemTotal` in its info): the default
    /// memory limit of the containers is derived from it.
    pub mem_total: Option<i64>,
    /// The CPUs of the engine's machine (`NCPU` in its info): the default CPU limit of the
    /// containers is derived from it.
    pub ncpu: Option<i64>,
    /// The engine runs on another machine: reached over SSH, over TCP to an address that is
    /// not loopback (unless it names this machine), or naming a host other than this one (an
    /// engine in another VM, container or mount namespace behind a local socket or port; not
    /// a desktop VM that shares this machine's folders); `engineRemote` or
    /// `PO_SANDBOX_ENGINE_REMOTE` decide instead when set. Its containers cannot see this
    /// machine's paths, so the container provider refuses it.
    pub remote: bool,
    /// Why no engine is usable, and what to do (only when not available).
    pub reason: Option<String>,
    /// A stable code for `reason`: `ENGINE_NOT_INSTALLED`, `ENGINE_STOPPED`,
    /// `ENGINE_NOT_A_SOCKET`, `ENGINE_PERMISSION_DENIED`, `ENGINE_TIMEOUT`, `ENGINE_API_TOO_OLD`,
    /// `ENGINE_NO_DOCKER_API`, `ENGINE_UNSUPPORTED_ENDPOINT` or `ENGINE_NOT_AN_ENGINE`.
    pub reason_code: Option<String>,
    /// Every candidate probed, in order.
    pub candidates: Vec<CandidateReport>,
}

fn pretty(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::Docker => "Docker",
        EngineKind::Podman => "Podman",
        EngineKind::Nerdctl => "nerdctl",
        EngineKind::Finch => "Finch",
    }
}

fn detail(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Available(f) => format!(
            "{} {} answers (API {}, {}{}{})",
            pretty(f.engine),
            f.engine_version,
            f.api_version,
            f.os,
            if f.vm { ", VM" } else { "" },
            if f.rootless { ", rootless" } else { "" }
        ),
        Outcome::NotFound => "no socket".into(),
        Outcome::NotASocket(kind) => format!("{kind}, not a socket"),
        Outcome::Stopped(d) => format!("socket present, nothing answering ({d})"),
        Outcome::PermissionDenied(d) => format!("permission denied ({d})"),
        Outcome::Timeout { stage, ms } => format!("no answer to {stage} within {ms} ms"),
        Outcome::ApiTooOld {
            api,
            engine_version,
        } => format!("version {engine_version} serves API {api}, too old"),
        Outcome::NoDockerApi(d) | Outcome::Unsupported(d) | Outcome::Failed(d) => d.clone(),
        Outcome::Refused { why, .. } => why.clone(),
    }
}

/// How to start an engine found at this kind of place.
fn start_hint(c: &Candidate) -> String {
    match (c.engine, c.source) {
        (_, "DOCKER_HOST") => "start the engine DOCKER_HOST points at, or unset DOCKER_HOST".into(),
        (_, "DOCKER_CONTEXT" | "currentContext") => {
            "start the engine the Docker context points at (docker context inspect), or pick another with 'docker context use NAME'".into()
        }
        (_, "CONTAINER_HOST") => {
            "start the engine CONTAINER_HOST points at, or unset CONTAINER_HOST".into()
        }
        (EngineKind::Docker, "rootful") => {
            "start it: sudo systemctl start docker (without systemd: sudo dockerd &)".into()
        }
        (EngineKind::Docker, "rootless") => "start it: systemctl --user start docker".into(),
        (EngineKind::Docker, "Colima") => "start it: colima start".into(),
        (EngineKind::Podman, "rootful") => {
            "start its API: sudo systemctl start podman.socket".into()
        }
        (EngineKind::Podman, "rootless") => {
            "start its API: systemctl --user start podman.socket".into()
        }
        (EngineKind::Podman, "Podman machine") => "start it: podman machine start".into(),
        (_, app) => format!("start {app}"),
    }
}

/// Lower is closer to working, so its reason is the one to show.
fn rank(o: &Outcome) -> u8 {
    match o {
        Outcome::Available(_) => 0,
        Outcome::ApiTooOld { .. } => 1,
        Outcome::Timeout { .. } => 2,
        Outcome::Refused { .. } => 3,
        Outcome::PermissionDenied(_) => 4,
        Outcome::Unsupported(_) => 5,
        Outcome::Failed(_) => 6,
        Outcome::Stopped(_) => 7,
        Outcome::NotASocket(_) => 8,
        Outcome::NoDockerApi(_) => 9,
        Outcome::NotFound => 10,
    }
}

/// The code and the words for the reason no engine is usable, from the closest-to-working
/// candidate `c` and its outcome `o`; `all` lists every place looked at.
fn reason(
    host: &HostEnv,
    c: &Candidate,
    o: &Outcome,
    all: &[(Candidate, Outcome)],
) -> (&'static str, String) {
    match o {
        Outcome::Available(_) => ("", String::new()),
        Outcome::ApiTooOld {
            api,
            engine_version,
        } => ("ENGINE_API_TOO_OLD", api_too_old(c, engine_version, api)),
        Outcome::Timeout { stage, ms } => ("ENGINE_TIMEOUT", hung(c, stage, *ms)),
        Outcome::PermissionDenied(_) => ("ENGINE_PERMISSION_DENIED", permission_denied(host, c)),
        Outcome::Refused { code, why } => (code, format!("{} = {}: {why}.", c.source, c.endpoint)),
        Outcome::Unsupported(why) => (
            "ENGINE_UNSUPPORTED_ENDPOINT",
            format!("{} = {} cannot be used: {why}.", c.source, c.endpoint),
        ),
        Outcome::Failed(d) => ("ENGINE_NOT_AN_ENGINE", not_an_engine(c, d)),
        Outcome::Stopped(_) => ("ENGINE_STOPPED", stopped(c)),
        Outcome::NotASocket(kind) => ("ENGINE_NOT_A_SOCKET", not_a_socket(c, kind)),
        Outcome::NoDockerApi(d) => ("ENGINE_NO_DOCKER_API", format!("{d}.")),
        Outcome::NotFound => ("ENGINE_NOT_INSTALLED", not_installed(host, all)),
    }
}

fn api_too_old(c: &Candidate, engine_version: &str, api: &str) -> String {
    format!(
        "{} {engine_version} at {} serves Engine API {api}; po-sandbox needs {}.{} or newer. Upgrade to Docker 20.10+ or Podman 3+.",
        pretty(c.engine),
        c.endpoint,
        super::MIN_API_VERSION.0,
        super::MIN_API_VERSION.1
    )
}

fn hung(c: &Candidate, stage: &str, ms: u128) -> String {
    format!(
        "{} at {} accepted a connection but did not answer {stage} within {ms} ms: the engine is hung. Restart it, or raise {} if it is only slow.",
        pretty(c.engine),
        c.endpoint,
        super::TIMEOUT_VAR
    )
}

fn permission_denied(host: &HostEnv, c: &Candidate) -> String {
    format!(
        "{}'s socket {} exists but this user (uid {}) may not use it. Add the user to the socket's group (sudo usermod -aG docker $USER, then log in again), or run a rootless engine.",
        pretty(c.engine),
        c.endpoint,
        host.uid
    )
}

fn not_an_engine(c: &Candidate, d: &str) -> String {
    format!(
        "{} ({}) does not behave like a Docker or Podman engine: {d}. Point {} at an engine's socket.",
        c.endpoint,
        c.source,
        if c.engine == EngineKind::Podman {
            "CONTAINER_HOST"
        } else {
            "DOCKER_HOST"
        }
    )
}

fn stopped(c: &Candidate) -> String {
    format!(
        "{}'s socket {} exists but nothing answers: the engine is stopped. To fix, {}.",
        pretty(c.engine),
        c.endpoint,
        start_hint(c)
    )
}

fn not_a_socket(c: &Candidate, kind: &str) -> String {
    format!(
        "{} is {kind}, not the engine's socket. Remove it and restart the engine ({}).",
        c.endpoint,
        start_hint(c)
    )
}

/// Names every Docker-API place looked at, and any engine CLI found without an engine.
fn not_installed(host: &HostEnv, all: &[(Candidate, Outcome)]) -> String {
    let looked: Vec<String> = all
        .iter()
        .filter(|(c, _)| c.engine.has_docker_api())
        .map(|(c, _)| c.endpoint.to_string())
        .collect();
    let mut msg = format!(
        "No container engine is running here: no engine socket at {}. Install Docker (Debian: sudo apt-get install docker.io) or Podman and start it, or set DOCKER_HOST to a running engine.",
        looked.join(", ")
    );
    for cli in ["docker", "podman"] {
        if let Some(path) = host.which(cli) {
            msg.push_str(&format!(
                " ({cli} CLI found at {}, but no engine answers.)",
                path.display()
            ));
        }
    }
    msg
}

/// Turns probed candidates into the report: the first available one wins; otherwise the
/// closest-to-working outcome gives the reason.
pub fn summarise(
    host: &HostEnv,
    probed: Vec<(Candidate, Outcome)>,
    remote: Option<bool>,
) -> EngineReport {
    let candidates = probed
        .iter()
        .map(|(c, o)| CandidateReport {
            engine: c.engine.as_str().into(),
            endpoint: c.endpoint.to_string(),
            source: c.source.into(),
            outcome: o.into(),
            detail: detail(o),
            context: c.context.clone(),
        })
        .collect();
    if let Some((c, Outcome::Available(f))) = probed
        .iter()
        .find(|(_, o)| matches!(o, Outcome::Available(_)))
    {
        return EngineReport {
            available: true,
            engine: Some(f.engine.as_str().into()),
            endpoint: Some(c.endpoint.to_string()),
            transport: Some(c.endpoint.transport().into()),
            tls_certs: match &c.endpoint {
                Endpoint::Tls { certs, .. } => Some(certs.display().to_string()),
                _ => None,
            },
            source: Some(c.source.into()),
            context: c.context.clone(),
            engine_version: Some(f.engine_version.clone()),
            api_version: Some(f.api_version.clone()),
            os: Some(f.os.clone()),
            os_type: Some(f.os_type.clone()),
            arch: Some(f.arch.clone()),
            vm: f.vm,
            rootless: f.rootless,
            cgroup_version: Some(f.cgroup_version.clone()).filter(|v| !v.is_empty()),
            host_name: Some(f.host_name.clone()),
            mem_total: f.mem_total,
            ncpu: f.ncpu,
            remote: remote
                .unwrap_or_else(|| is_remote(&c.endpoint, f, local_host_name(host).as_deref())),
            reason: None,
            reason_code: None,
            candidates,
        };
    }
    let best = probed.iter().min_by_key(|(_, o)| rank(o));
    let (code, text) = match best {
        Some((c, o)) => reason(host, c, o, &probed),
        None => (
            "ENGINE_NOT_INSTALLED",
            "No engine candidates to try.".to_string(),
        ),
    };
    EngineReport {
        reason: Some(text),
        reason_code: Some(code.into()),
        candidates,
        ..Default::default()
    }
}

/// Whether an engine that answered at `endpoint`, saying `facts` of itself, runs on another
/// machine than this one (`local_host`, when known): over SSH always; over TCP to an address
/// that is not loopback unless it names this machine; at a Unix socket, a named pipe or a
/// loopback port when it names another machine, unless it runs in a desktop VM (those share
/// this machine's folders: Docker Desktop, Podman machine, Colima, OrbStack).
pub fn is_remote(endpoint: &Endpoint, facts: &EngineFacts, local_host: Option<&str>) -> bool {
    let short = |n: &str| n.split('.').next().unwrap_or(n).to_ascii_lowercase();
    let engine_host = facts.host_name.as_str();
    let named_elsewhere = match local_host {
        Some(local) if !engine_host.is_empty() => short(local) != short(engine_host),
        _ => false,
    };
    let h = match endpoint {
        Endpoint::Ssh(_) => return true,
        Endpoint::Tcp { host, .. } | Endpoint::Tls { host, .. } => host,
        _ => return named_elsewhere && !facts.vm,
    };
    let h = h.trim_start_matches('[').trim_end_matches(']');
    let loopback = h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match (loopback, local_host) {
        (true, _) => named_elsewhere && !facts.vm,
        (false, Some(_)) if !engine_host.is_empty() => named_elsewhere,
        (false, _) => true,
    }
}

/// Why a remote engine cannot be used by the container provider, and what to do.
pub fn remote_reason(report: &EngineReport) -> String {
    let name = report.host_name.as_deref().filter(|n| !n.is_empty());
    format!(
        "The engine at {} runs on another machine ({}): its containers cannot see this machine's workspace, runtime bundle or Po home paths, and a hub on Windows cannot carry them through the engine yet (the broker's carrier ends in a Unix socket). Use an engine on this machine, or run the hub on {}; if the engine does see this machine's folders at the same paths (a VM sharing them), set {}=0",
        report.endpoint.as_deref().unwrap_or("?"),
        name.unwrap_or("unnamed"),
        name.unwrap_or("that machine"),
        crate::names::vars::REMOTE_VAR,
    )
}

/// This machine's name: the kernel's, else `/etc/hostname`, else `HOSTNAME`.
pub fn local_host_name(host: &HostEnv) -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .or_else(|| host.var("HOSTNAME").map(str::to_string))
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests;
