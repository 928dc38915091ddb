//! `ls` and `stop` without a hub: which sandbox containers of a Po home (or of every owner),
//! checked without I/O, then one engine connection for the list or the stops.

use napi_derive::napi;

use crate::engine;
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::sandbox::folder;
use crate::sandbox::folder::WorkspaceReview;
use crate::sandbox::on_engine;
use crate::sandbox::on_engine::SandboxRow;
use crate::sandbox::on_engine::{PruneAsk, PruneReport};

use super::{GivenOptions, ProviderOptions, refuse_nesting};

/// Which sandbox containers (`listSandboxContainers`, `stopSandboxContainers`,
/// `pruneSandboxLeftovers`, `reviewSandboxWorkspace`; the CLI's `ls`, `stop`, `prune` and
/// `review`).
#[napi(object, js_name = "SandboxQuery")]
#[derive(Debug, Default)]
pub struct QueryOptions {
    /// The Po home whose owner to use (default `~/.po`).
    pub po_home: Option<String>,
    /// The owner id (default: the Po home's, as the provider takes it).
    pub owner: Option<String>,
    /// Only this engine.
    pub engine: Option<String>,
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
    /// The environment to read instead of `process.env`.
    pub env: Option<std::collections::HashMap<String, Option<String>>>,
}

/// A checked query.
pub struct Query {
    host: HostEnv,
    options: ProviderOptions,
    all_owners: bool,
    workspace: Option<String>,
    all: bool,
    remove_volumes: bool,
    discard: bool,
    dry_run: bool,
    forwards: bool,
    /// The owner as given (`prune` scopes to it; every owner's otherwise).
    given_owner: Option<String>,
}

impl Query {
    /// Refuses nesting, resolves the Po home, owner and engine as the provider does (its
    /// environment `q.env`, else this process's), and checks the workspace id.
    pub fn new(mut q: QueryOptions) -> Result<Query> {
        let host = HostEnv::given(q.env.take());
        refuse_nesting(&host)?;
        let given_owner = q.owner.clone();
        let raw = GivenOptions {
            po_home: q.po_home,
            owner: q.owner,
            engine: q.engine,
            ..Default::default()
        };
        let options = ProviderOptions::resolve(raw, host.clone())?;
        if let Some(w) = &q.workspace {
            folder::check_workspace_id(w)?;
        }
        Ok(Query {
            host,
            options,
            all_owners: q.all_owners.unwrap_or(false),
            workspace: q.workspace,
            all: q.all.unwrap_or(false),
            remove_volumes: q.remove_volumes.unwrap_or(false),
            discard: q.discard.unwrap_or(false),
            dry_run: q.dry_run.unwrap_or(false),
            forwards: q.forwards.unwrap_or(false),
            given_owner,
        })
    }

    /// A stop must name a workspace or say `all`.
    pub fn check_stop(&self) -> Result<()> {
        if self.workspace.is_none() && !self.all {
            return Err(Error::OptionsInvalid {
                option: "workspace".into(),
                reason: "name a workspace, or pass all: true to stop every container of this owner"
                    .into(),
            });
        }
        Ok(())
    }

    /// The containers, any state: this owner's, or every owner's.
    pub async fn list(self) -> Result<Vec<SandboxRow>> {
        let (engine, _) = engine::connect(&self.host, &self.options.detect).await?;
        let owner = (!self.all_owners).then_some(self.options.owner.as_str());
        let mut rows = on_engine::list_sandboxes(&engine, owner).await?;
        if self.forwards {
            on_engine::add_forwards(&engine, &mut rows).await;
        }
        Ok(rows)
    }

    /// The workspace's host-executed files changed since its container was made (the
    /// baseline is on this host: no engine is asked).
    pub async fn review(self, workspace_id: String) -> Result<WorkspaceReview> {
        let (home, owner) = (self.options.po_home, self.options.owner);
        folder::review_off_thread(home, owner, workspace_id).await
    }

    /// Stops and removes the workspace's container, or every container of this owner;
    /// volumes are kept unless `remove_volumes`, copy volumes unless `discard`. The workspace
    /// ids stopped.
    pub async fn stop(self) -> Result<Vec<String>> {
        self.check_stop()?;
        let (engine, _) = engine::connect(&self.host, &self.options.detect).await?;
        on_engine::stop_sandboxes(
            &engine::for_changes(&engine, &engine::bounds(&self.host)?),
            self.host.vars(),
            &self.options.po_home,
            &self.options.owner,
            self.workspace.as_deref(),
            self.remove_volumes,
            self.discard,
        )
        .await
    }

    /// Removes the per-hub networks no container uses (older than the grace,
    /// `PO_SANDBOX_PRUNE_GRACE_MS`) and, with `remove_volumes`, the volumes of workspaces whose
    /// container and folder are both gone: every owner's, or the given owner's only. With
    /// `dry_run`, only lists them.
    pub async fn prune(self) -> Result<PruneReport> {
        let grace = on_engine::prune_grace(self.host.var(crate::names::vars::PRUNE_GRACE_VAR))?;
        let (engine, _) = engine::connect(&self.host, &self.options.detect).await?;
        let ask = PruneAsk {
            owner: self.given_owner.as_deref(),
            volumes: self.remove_volumes,
            dry_run: self.dry_run,
            grace,
        };
        on_engine::prune(
            &engine::for_changes(&engine, &engine::bounds(&self.host)?),
            ask,
        )
        .await
    }
}
