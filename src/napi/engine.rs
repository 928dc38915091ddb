//! `checkEngine` and `engineCandidates`.

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;
use std::collections::HashMap;

use super::errors::{coded, env_vars, object_arg, promise};
use crate::engine::{self as core, CandidateReport, DetectOptions, EngineReport};
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
/// `PO_SANDBOX_ENGINE` names), each at its usual sockets, `DOCKER_HOST`, Docker contexts and
/// `CONTAINER_HOST` honoured. Resolves with a report, also when no engine is usable
/// (`available: false` and a `reason`). Rejects with `ENGINE_UNKNOWN` for an unknown engine
/// name, `ENGINE_CONTEXT_INVALID` for a Docker context that cannot be used and
/// `OPTIONS_INVALID` for a bad `PO_SANDBOX_ENGINE_TIMEOUT_MS`; throws `OPTIONS_INVALID` for
/// malformed options.
#[napi(
    ts_args_type = "options?: EngineCheckOptions | undefined | null",
    ts_return_type = "Promise<EngineReport>"
)]
pub fn check_engine<'env>(
    env: &'env Env,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, EngineReport>> {
    let (host, detect) = split(env, options)?;
    promise(env, async move { core::detect(&host, &detect).await })
}

/// Lists the places engine detection would try, in order, without probing (it reads only the
/// docker CLI's context files). Throws `ENGINE_UNKNOWN` for an unknown engine name and
/// `ENGINE_CONTEXT_INVALID` for a Docker context that cannot be used.
#[napi(
    ts_args_type = "options?: EngineCheckOptions | undefined | null",
    ts_return_type = "Array<EngineCandidate>"
)]
pub fn engine_candidates(
    env: &Env,
    options: Option<Unknown>,
) -> napi::Result<Vec<CandidateReport>> {
    let (host, detect) = split(env, options)?;
    let list = core::candidates(&host, detect.engine.as_deref()).map_err(|e| coded(env, &e))?;
    Ok(list
        .into_iter()
        .map(|c| CandidateReport {
            engine: c.engine.as_str().into(),
            endpoint: c.endpoint.to_string(),
            source: c.source.into(),
            outcome: "untried".into(),
            detail: String::new(),
            context: c.context,
        })
        .collect())
}
