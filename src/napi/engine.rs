//! `checkEngine`, `engineCandidates` and `doctor`: can the layer run here.

use std::collections::HashMap;

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;

use super::errors::{coded, object_arg, promise};
use super::options::given;
use crate::doctor::DoctorReport;
use crate::engine::{self as core, CandidateReport, DetectOptions, EngineReport};
use crate::host::HostEnv;
use crate::provider::{GivenOptions, ProviderOptions};

/// Options for engine detection.
#[napi(object, js_name = "EngineCheckOptions")]
#[derive(Default)]
pub struct JsEngineCheckOptions {
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
    /// The engine is on another machine (`true`) or not, whatever it says (`PO_SANDBOX_ENGINE_REMOTE`).
    pub engine_remote: Option<bool>,
}

/// The host environment and detection options `options` name.
fn split(env: &Env, options: Option<Unknown>) -> napi::Result<(HostEnv, DetectOptions)> {
    let o: JsEngineCheckOptions = object_arg(env, options, "options")?.unwrap_or_default();
    let detect = DetectOptions::given(o.engine, o.timeout_ms, o.probe_all).map(|d| DetectOptions {
        remote: o.engine_remote,
        ..d
    });
    Ok((HostEnv::given(o.env), detect.map_err(|e| coded(env, &e))?))
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
    core::candidate_reports(&host, detect.engine.as_deref()).map_err(|e| coded(env, &e))
}

/// What `doctor` checks.
#[napi(object, js_name = "DoctorOptions")]
#[derive(Default)]
pub struct JsDoctorOptions {
    /// Only this engine (as `PO_SANDBOX_ENGINE`).
    pub engine: Option<String>,
    /// Bound on each engine step (ms).
    pub timeout_ms: Option<f64>,
    /// The environment to read instead of `process.env`.
    pub env: Option<HashMap<String, Option<String>>>,
    /// The Po home (default `~/.po`).
    pub po_home: Option<String>,
    /// The runtime bundle version folder (default: the highest).
    pub runtime_version: Option<String>,
    /// The image base (default `PO_SANDBOX_BASE_IMAGE`, else `node:24-bookworm-slim`).
    pub base_image: Option<String>,
    /// `full` or `minimal` (default `PO_SANDBOX_IMAGE_VARIANT`, else `full`).
    #[napi(ts_type = "'full' | 'minimal'")]
    pub image_variant: Option<String>,
    /// A missing runtime bundle is fine: the embedded demo bundle stands in (as for
    /// `po-sandbox up`; default false).
    pub demo_runtime: Option<bool>,
    /// Run flags to check and show (default `PO_SANDBOX_RUN_FLAGS`), as the provider's
    /// `runFlags`.
    pub run_flags: Option<Vec<String>>,
    /// The egress mode to check and show (default `PO_SANDBOX_NETWORK`, else `open`), as the
    /// provider's `network`.
    pub network: Option<String>,
}

/// Checks whether the layer can run here: the Node.js version (`nodeVersion`, e.g.
/// `process.version`), every engine candidate, the runtime bundle and the image. Resolves with
/// the report, also when not ready; throws `OPTIONS_INVALID` / `ENGINE_UNKNOWN` on bad options
/// and `ENGINE_CONTEXT_INVALID` for a Docker context that cannot be used.
#[napi(
    ts_args_type = "nodeVersion: string, options?: DoctorOptions | undefined | null",
    ts_return_type = "Promise<DoctorReport>"
)]
pub fn doctor<'env>(
    env: &'env Env,
    node_version: String,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, DoctorReport>> {
    let o: JsDoctorOptions = object_arg(env, options, "options")?.unwrap_or_default();
    let host = HostEnv::given(o.env);
    #[rustfmt::skip]
    let given = given!(o {
        po_home, runtime_version, base_image, image_variant, engine, demo_runtime, run_flags,
        network,
    } engine_timeout_ms: o.timeout_ms);
    let resolved = ProviderOptions::resolve(given, host.clone()).map_err(|e| coded(env, &e))?;
    let options = crate::doctor::DoctorOptions::of(resolved);
    promise(env, async move {
        crate::doctor::doctor(&host, &node_version, options).await
    })
}
