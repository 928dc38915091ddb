//! `doctor`.

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;

use super::engine::{EngineReport, split};
use super::errors::promise;

/// The Node.js check.
#[napi(object)]
pub struct NodeCheck {
    /// The version checked.
    pub version: String,
    /// It is new enough.
    pub ok: bool,
    /// The requirement, in words.
    pub required: String,
}

/// Everything `po-sandbox doctor` found.
#[napi(object)]
pub struct DoctorReport {
    /// The layer can run here.
    pub ok: bool,
    /// The Node.js check.
    pub node: NodeCheck,
    /// Engine detection, every candidate probed.
    pub engine: EngineReport,
    /// The report as a person reads it.
    pub text: String,
}

/// Checks whether the layer can run here: the Node.js version (`nodeVersion`, e.g.
/// `process.version`) and every engine candidate. Resolves with the report, also when not ready.
#[napi(
    ts_args_type = "nodeVersion: string, options?: EngineCheckOptions | undefined | null",
    ts_return_type = "Promise<DoctorReport>"
)]
pub fn doctor<'env>(
    env: &'env Env,
    node_version: String,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, DoctorReport>> {
    let (host, detect) = split(env, options)?;
    promise(
        env,
        async move { crate::doctor::doctor(&host, &node_version, detect).await },
        |r| DoctorReport {
            ok: r.ok,
            node: NodeCheck {
                version: r.node.version,
                ok: r.node.ok,
                required: r.node.required,
            },
            engine: r.engine.into(),
            text: r.text,
        },
    )
}
