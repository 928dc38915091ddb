//! `listSandboxContainers`, `stopSandboxContainers`, `pruneSandboxLeftovers` and
//! `reviewSandboxWorkspace`: what the CLI's `ls`, `stop`, `prune` and `review` use.

use std::collections::HashMap;

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;

use super::errors::{coded, object_arg, promise};
use crate::host::HostEnv;
use crate::provider::inventory::{Query, QueryOptions};
use crate::sandbox::folder::WorkspaceReview;
use crate::sandbox::on_engine::PruneReport;
use crate::sandbox::on_engine::SandboxRow;

/// Which sandbox containers.
#[napi(object, js_name = "SandboxQuery")]
#[derive(Default)]
pub struct JsSandboxQuery {
    /// The Po home whose owner to use (default `~/.po`).
    pub po_home: Option<String>,
    /// The owner id (default: the Po home's, as the provider takes it).
    pub owner: Option<String>,
    /// `listSandboxContainers`: every owner's containers, not only this owner's.
    pub all_owners: Option<bool>,
    /// `stopSandboxContainers`: only this workspace.
    pub workspace: Option<String>,
    /// `stopSandboxContainers`: every container of this owner (required when no workspace).
    pub all: Option<bool>,
    /// `stopSandboxContainers`: also remove the volumes (home, caches, git) of what it stops,
    /// and those of the workspace when its container was already gone (default false: kept).
    /// `pruneSandboxLeftovers`: also the volumes of workspaces whose container and folder are gone.
    pub remove_volumes: Option<bool>,
    /// `stopSandboxContainers`: also remove the workspace's copy (clone mode), which nothing else removes.
    pub discard: Option<bool>,
    /// `pruneSandboxLeftovers`: only list what it would remove.
    pub dry_run: Option<bool>,
    /// `listSandboxContainers`: each running container's forwarded ports too (`forwards`).
    pub forwards: Option<bool>,
    /// Only this engine.
    pub engine: Option<String>,
    /// The environment to read instead of `process.env`.
    pub env: Option<HashMap<String, Option<String>>>,
}

/// The query `q` names, checked (`OPTIONS_INVALID`, `WORKSPACE_INVALID` throw).
fn query(env: &Env, q: Option<Unknown>) -> napi::Result<Query> {
    let q: JsSandboxQuery = object_arg(env, q, "options")?.unwrap_or_default();
    let host = HostEnv::given(q.env);
    let options = QueryOptions {
        po_home: q.po_home,
        owner: q.owner,
        engine: q.engine,
        all_owners: q.all_owners.unwrap_or(false),
        workspace: q.workspace,
        all: q.all.unwrap_or(false),
        remove_volumes: q.remove_volumes.unwrap_or(false),
        discard: q.discard.unwrap_or(false),
        dry_run: q.dry_run.unwrap_or(false),
        forwards: q.forwards.unwrap_or(false),
    };
    Query::new(host, options).map_err(|e| coded(env, &e))
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
