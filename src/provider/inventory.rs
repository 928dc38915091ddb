//! `ls` and `stop` without a hub: which sandbox containers of a Po home (or of every owner),
//! checked without I/O, then one engine connection for the list or the stops.

use crate::engine;
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::sandbox::folder;
use crate::sandbox::folder::WorkspaceReview;
use crate::sandbox::on_engine;
use crate::sandbox::on_engine::SandboxRow;
use crate::sandbox::on_engine::{PruneAsk, PruneReport};

use super::{GivenOptions, ProviderOptions, refuse_nesting};

/// Which sandbox containers, as `listSandboxContainers` / `stopSandboxContainers` and the CLI
/// ask.
#[derive(Debug, Default)]
pub struct QueryOptions {
    pub po_home: Option<String>,
    pub owner: Option<String>,
    pub engine: Option<String>,
    /// Every owner's containers, not only this owner's (`ls`).
    pub all_owners: bool,
    /// Only this workspace (`stop`).
    pub workspace: Option<String>,
    /// Every container of this owner (`stop`; required when no workspace).
    pub all: bool,
    /// Also remove the volumes (`stop`; `prune`: of workspaces whose container and folder
    /// are gone).
    pub remove_volumes: bool,
    /// `stop`: also remove the copy volumes (clone mode).
    pub discard: bool,
    /// `prune`: list only.
    pub dry_run: bool,
    /// `ls`: each running container's forwarded ports too (one more engine call each).
    pub forwards: bool,
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
    /// Refuses nesting, resolves the Po home, owner and engine as the provider does, and
    /// checks the workspace id.
    pub fn new(host: HostEnv, q: QueryOptions) -> Result<Query> {
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
            all_owners: q.all_owners,
            workspace: q.workspace,
            all: q.all,
            remove_volumes: q.remove_volumes,
            discard: q.discard,
            dry_run: q.dry_run,
            forwards: q.forwards,
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
