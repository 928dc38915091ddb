//! `doctor`.

use std::collections::HashMap;

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;

use super::errors::{coded, env_vars, object_arg, promise};
use crate::doctor::DoctorReport;
use crate::host::HostEnv;
use crate::provider::{ProviderOptions, RawOptions};

/// What `doctor` checks.
#[napi(object)]
pub struct DoctorOptions {
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
    let o: Option<DoctorOptions> = object_arg(env, options, "options")?;
    let (raw, vars) = match o {
        Some(o) => (
            RawOptions {
                po_home: o.po_home,
                runtime_version: o.runtime_version,
                base_image: o.base_image,
                image_variant: o.image_variant,
                engine: o.engine,
                engine_timeout_ms: o.timeout_ms,
                demo_runtime: o.demo_runtime,
                run_flags: o.run_flags,
                network: o.network,
                ..Default::default()
            },
            o.env,
        ),
        None => (RawOptions::default(), None),
    };
    let host = HostEnv::from_vars(env_vars(vars));
    let resolved = ProviderOptions::resolve(raw, host.clone()).map_err(|e| coded(env, &e))?;
    let options = crate::doctor::DoctorOptions::of(resolved);
    promise(env, async move {
        crate::doctor::doctor(&host, &node_version, options).await
    })
}
