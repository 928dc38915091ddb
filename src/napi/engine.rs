//! `checkEngine` and `engineCandidates`.

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;
use std::collections::HashMap;

use super::errors::{coded, env_vars, object_arg, promise};
use crate::engine::{self as core, DetectOptions};
use crate::host::HostEnv;

/// Options for engine detection.
#[napi(object)]
pub struct EngineCheckOptions {
    /// Use only this engine: `docker`, `podman`, `nerdctl` or `finch` (overrides
    /// `PO_SANDBOX_ENGINE`).
    pub engine: Option<String>,
    /// Bound in milliseconds on each of connect, ping, version and info against one endpoint
    /// (default: `PO_SANDBOX_ENGINE_TIMEOUT_MS`, else 3000).
    pub timeout_ms: Option<f64>,
    /// The environment to read (`DOCKER_HOST`, `CONTAINER_HOST`, `PO_SANDBOX_ENGINE`, `HOME`,
    /// `XDG_RUNTIME_DIR`…). Defaults to the process environment.
    pub env: Option<HashMap<String, Option<String>>>,
    /// Probe every candidate even after one answered (as `po-sandbox doctor` does).
    pub probe_all: Option<bool>,
}

/// One place an engine was looked for, and what answered there.
#[napi(object)]
pub struct EngineCandidate {
    /// `docker`, `podman`, `nerdctl` or `finch`.
    pub engine: String,
    /// The endpoint URI (`unix:///var/run/docker.sock`, `tcp://127.0.0.1:2375`).
    pub endpoint: String,
    /// Why it was tried: `DOCKER_HOST`, `CONTAINER_HOST`, `rootful`, `rootless`,
    /// `Docker Desktop`, `Colima`, `Podman machine`…
    pub source: String,
    /// `available`, `not-found`, `not-a-socket`, `stopped`, `permission-denied`, `timeout`,
    /// `api-too-old`, `no-docker-api`, `unsupported` or `failed`; `untried` from
    /// `engineCandidates`.
    pub outcome: String,
    /// What was found, in words.
    pub detail: String,
}

/// The result of engine detection.
#[napi(object)]
pub struct EngineReport {
    /// A usable engine answered.
    pub available: bool,
    /// `docker` or `podman`: the engine that answered (a Podman socket behind a Docker path
    /// reports `podman`).
    pub engine: Option<String>,
    /// Its endpoint URI.
    pub endpoint: Option<String>,
    /// Why that endpoint was tried.
    pub source: Option<String>,
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
    /// The name of the machine the engine runs on.
    pub host_name: Option<String>,
    /// It runs on another machine (a non-loopback `tcp://` endpoint naming another host): the
    /// container provider refuses it, since its containers cannot see this machine's paths.
    pub remote: bool,
    /// Why no engine is usable, and the fix (only when unavailable).
    pub reason: Option<String>,
    /// Stable code of `reason`: `ENGINE_NOT_INSTALLED`, `ENGINE_STOPPED`, `ENGINE_NOT_A_SOCKET`,
    /// `ENGINE_PERMISSION_DENIED`, `ENGINE_TIMEOUT`, `ENGINE_API_TOO_OLD`,
    /// `ENGINE_NO_DOCKER_API`, `ENGINE_UNSUPPORTED_ENDPOINT` or `ENGINE_NOT_AN_ENGINE`.
    pub reason_code: Option<String>,
    /// Every candidate probed, in order.
    pub candidates: Vec<EngineCandidate>,
}

impl From<core::CandidateReport> for EngineCandidate {
    fn from(c: core::CandidateReport) -> Self {
        EngineCandidate {
            engine: c.engine,
            endpoint: c.endpoint,
            source: c.source,
            outcome: c.outcome,
            detail: c.detail,
        }
    }
}

impl From<core::EngineReport> for EngineReport {
    fn from(r: core::EngineReport) -> Self {
        EngineReport {
            available: r.available,
            engine: r.engine,
            endpoint: r.endpoint,
            source: r.source,
            engine_version: r.engine_version,
            api_version: r.api_version,
            os: r.os,
            os_type: r.os_type,
            arch: r.arch,
            vm: r.vm,
            rootless: r.rootless,
            host_name: r.host_name,
            remote: r.remote,
            reason: r.reason,
            reason_code: r.reason_code,
            candidates: r.candidates.into_iter().map(Into::into).collect(),
        }
    }
}

pub(super) fn split(env: &Env, options: Option<Unknown>) -> napi::Result<(HostEnv, DetectOptions)> {
    let options: EngineCheckOptions =
        object_arg(env, options, "options")?.unwrap_or(EngineCheckOptions {
            engine: None,
            timeout_ms: None,
            env: None,
            probe_all: None,
        });
    let timeout = match options.timeout_ms {
        None => None,
        Some(ms) => Some(core::timeout_from_ms(ms, "timeoutMs").map_err(|e| coded(env, &e))?),
    };
    let host = HostEnv::from_vars(env_vars(options.env));
    let detect = DetectOptions {
        engine: options.engine,
        timeout,
        probe_all: options.probe_all.unwrap_or(false),
    };
    Ok((host, detect))
}

/// Finds the container engine: docker, podman, nerdctl, finch in that order (or the one
/// `PO_SANDBOX_ENGINE` names), each at its usual sockets, `DOCKER_HOST` / `CONTAINER_HOST`
/// honoured. Resolves with a report, also when no engine is usable (`available: false` and a
/// `reason`). Rejects with `ENGINE_UNKNOWN` for an unknown engine name and `OPTIONS_INVALID`
/// for a bad `PO_SANDBOX_ENGINE_TIMEOUT_MS`; throws `OPTIONS_INVALID` for malformed options.
#[napi(
    ts_args_type = "options?: EngineCheckOptions | undefined | null",
    ts_return_type = "Promise<EngineReport>"
)]
pub fn check_engine<'env>(
    env: &'env Env,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, EngineReport>> {
    let (host, detect) = split(env, options)?;
    promise(
        env,
        async move { core::detect(&host, &detect).await },
        EngineReport::from,
    )
}

/// Lists the places engine detection would try, in order, without any I/O. Throws
/// `ENGINE_UNKNOWN` for an unknown engine name.
#[napi(ts_args_type = "options?: EngineCheckOptions | undefined | null")]
pub fn engine_candidates(
    env: &Env,
    options: Option<Unknown>,
) -> napi::Result<Vec<EngineCandidate>> {
    let (host, detect) = split(env, options)?;
    let list = core::candidates(&host, detect.engine.as_deref()).map_err(|e| coded(env, &e))?;
    Ok(list
        .into_iter()
        .map(|c| EngineCandidate {
            engine: c.engine.as_str().into(),
            endpoint: c.endpoint.to_string(),
            source: c.source.into(),
            outcome: "untried".into(),
            detail: String::new(),
        })
        .collect())
}
