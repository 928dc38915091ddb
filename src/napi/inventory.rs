//! `listSandboxContainers` and `stopSandboxContainers`: what the CLI's `ls` and `stop` use.

use std::collections::HashMap;

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi_derive::napi;

use super::errors::{coded, env_vars, object_arg, promise};
use crate::error::Error;
use crate::host::HostEnv;
use crate::provider::{ProviderOptions, RawOptions};

/// Which sandbox containers.
#[napi(object)]
pub struct SandboxQuery {
    /// The Po home whose owner to use (default `~/.po`).
    pub po_home: Option<String>,
    /// The owner id (default: derived from poHome, as the provider does).
    pub owner: Option<String>,
    /// `listSandboxContainers`: every owner's containers, not only this owner's.
    pub all_owners: Option<bool>,
    /// `stopSandboxContainers`: only this workspace.
    pub workspace: Option<String>,
    /// `stopSandboxContainers`: every container of this owner (required when no workspace).
    pub all: Option<bool>,
    /// Only this engine.
    pub engine: Option<String>,
    /// The environment to read instead of `process.env`.
    pub env: Option<HashMap<String, Option<String>>>,
}

/// One sandbox container.
#[napi(object)]
pub struct SandboxContainerRow {
    pub owner: String,
    pub workspace_id: String,
    pub workspace_path: Option<String>,
    pub name: String,
    pub container_id: String,
    pub state: String,
    /// The engine's words (`Up 5 minutes`).
    pub status: String,
    pub host_port: Option<u32>,
    pub image: String,
    /// Unix seconds.
    pub created: i64,
}

struct Query {
    host: HostEnv,
    options: ProviderOptions,
    all_owners: bool,
    workspace: Option<String>,
    all: bool,
}

fn query(env: &Env, q: Option<Unknown>) -> napi::Result<Query> {
    let q: Option<SandboxQuery> = object_arg(env, q, "options")?;
    let q = q.unwrap_or(SandboxQuery {
        po_home: None,
        owner: None,
        all_owners: None,
        workspace: None,
        all: None,
        engine: None,
        env: None,
    });
    let host = HostEnv::from_vars(env_vars(q.env));
    crate::provider::refuse_nesting(&host).map_err(|e| coded(env, &e))?;
    let raw = RawOptions {
        po_home: q.po_home,
        owner: q.owner,
        engine: q.engine,
        ..Default::default()
    };
    let options = ProviderOptions::resolve(raw, host.clone()).map_err(|e| coded(env, &e))?;
    if let Some(w) = &q.workspace {
        crate::sandbox::workspace::check_id(w).map_err(|e| coded(env, &e))?;
    }
    Ok(Query {
        host,
        options,
        all_owners: q.all_owners.unwrap_or(false),
        workspace: q.workspace,
        all: q.all.unwrap_or(false),
    })
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
) -> napi::Result<PromiseRaw<'env, Vec<SandboxContainerRow>>> {
    let q = query(env, options)?;
    promise(
        env,
        async move {
            let (docker, _) = crate::engine::connect(&q.host, &q.options.detect).await?;
            let owner = (!q.all_owners).then_some(q.options.owner.as_str());
            crate::sandbox::inventory::list(&docker, owner).await
        },
        |rows| {
            rows.into_iter()
                .map(|r| SandboxContainerRow {
                    owner: r.owner,
                    workspace_id: r.workspace_id,
                    workspace_path: r.workspace_path,
                    name: r.name,
                    container_id: r.container_id,
                    state: r.state,
                    status: r.status,
                    host_port: r.host_port.map(u32::from),
                    image: r.image,
                    created: r.created,
                })
                .collect::<Vec<_>>()
        },
    )
}

/// Stops and removes this owner's container for `workspace`, or all of them with `all: true`;
/// volumes are kept. Resolves with the workspace ids stopped. Throws `OPTIONS_INVALID` when
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
    if q.workspace.is_none() && !q.all {
        let e = Error::OptionsInvalid {
            option: "workspace".into(),
            reason: "name a workspace, or pass all: true to stop every container of this owner"
                .into(),
        };
        return Err(coded(env, &e));
    }
    promise(
        env,
        async move {
            let (docker, _) = crate::engine::connect(&q.host, &q.options.detect).await?;
            crate::sandbox::inventory::stop(
                &docker,
                &q.options.po_home,
                &q.options.owner,
                q.workspace.as_deref(),
            )
            .await
        },
        |v| v,
    )
}
