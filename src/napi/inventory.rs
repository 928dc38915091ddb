//! `listSandboxContainers`, `stopSandboxContainers`, `pruneSandboxLeftovers` and
//! `reviewSandboxWorkspace`: what the CLI's `ls`, `stop`, `prune` and `review` use.

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;

use super::errors::{coded, object_arg, promise};
use crate::policy::command::{PolicyAnswer, PolicyRequest};
use crate::provider::inventory::{Query, QueryOptions};
use crate::sandbox::folder::WorkspaceReview;
use crate::sandbox::on_engine::PruneReport;
use crate::sandbox::on_engine::SandboxRow;

/// The query `q` names, checked (`OPTIONS_INVALID`, `WORKSPACE_INVALID` throw).
fn query(env: &Env, q: Option<Unknown>) -> napi::Result<Query> {
    let q: QueryOptions = object_arg(env, q, "options")?.unwrap_or_default();
    Query::new(q).map_err(|e| coded(env, &e))
}

/// Lists sandbox containers (any state): this owner's, or every owner's with `allOwners`.
/// Rejects with `ENGINE_UNAVAILABLE` when no engine answers.
#[napi(
    ts_args_type = "options?: SandboxQuery | undefined | null",
    ts_return_type = "Promise<SandboxContainerRow[]>"
)]
pub fn list_sandbox_containers<'env>(
    env: &'env Env,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, Vec<SandboxRow>>> {
    let q = query(env, options)?;
    promise(env, q.list())
}

/// Stops and removes this owner's container for `workspace`, or all of them with `all: true`;
/// volumes are kept unless `removeVolumes`. Resolves with the workspace ids stopped. Throws `OPTIONS_INVALID` when
/// neither is given.
#[napi(
    ts_args_type = "options: SandboxQuery",
    ts_return_type = "Promise<string[]>"
)]
pub fn stop_sandbox_containers<'env>(
    env: &'env Env,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
    let q = query(env, options)?;
    q.check_stop().map_err(|e| coded(env, &e))?;
    promise(env, q.stop())
}

/// Removes the per-hub networks no container uses (every owner's, or `owner`'s) and, with
/// `removeVolumes`, the volumes of workspaces whose container and folder are both gone;
/// `dryRun` only lists them. Networks younger than `PO_SANDBOX_PRUNE_GRACE_MS` stay.
#[napi(
    ts_args_type = "options?: SandboxQuery | undefined | null",
    ts_return_type = "Promise<PruneReport>"
)]
pub fn prune_sandbox_leftovers<'env>(
    env: &'env Env,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, PruneReport>> {
    promise(env, query(env, options)?.prune())
}

/// As `WorkspaceContainers.review`, without a hub (what `po-sandbox review` uses): the baseline
/// of `options`' owner (`poHome`, `owner`). Rejects with `REVIEW_UNAVAILABLE` when the workspace
/// has none, `WORKSPACE_INVALID` for a bad id.
#[napi(
    ts_args_type = "workspaceId: string, options?: SandboxQuery | undefined | null",
    ts_return_type = "Promise<WorkspaceReview>"
)]
pub fn review_sandbox_workspace<'env>(
    env: &'env Env,
    workspace_id: String,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, WorkspaceReview>> {
    let q = query(env, options)?;
    promise(env, q.review(workspace_id))
}

/// The policy file of a Po home (`<poHome>/sandbox-policy.yaml`): `show` the values in force
/// and their sources, `check` it (or a destination), `allow`/`deny` a destination (the file
/// edited, its comments kept), `init` it from a preset. Throws `POLICY_INVALID` naming the
/// line and field when `allow`/`deny` meet a bad file, `OPTIONS_INVALID` for a bad request.
#[napi(
    ts_args_type = "request: PolicyRequest",
    ts_return_type = "PolicyAnswer"
)]
pub fn sandbox_policy(env: &Env, request: Unknown) -> napi::Result<PolicyAnswer> {
    let request: PolicyRequest = object_arg(env, Some(request), "request")?.unwrap_or_default();
    crate::policy::command::answer(request).map_err(|e| coded(env, &e))
}
