//! `diff` and `apply` of a clone-mode workspace: its running container found as `exec` finds
//! it, then the service's own `copy_diff` and `copy_apply` on it.

use std::path::PathBuf;
use std::sync::Arc;

use super::Provider;
use crate::engine::Connector;
use crate::error::{Error, Result};
use crate::sandbox::folder::{
    CloneApplied, CloneApplyOptions, CloneDiff, check_clone_branch, clone_branch,
};
use crate::sandbox::service::{ContainerService, WorkspaceContainer};

impl<C: Connector> Provider<C> {
    /// The workspace's running container, adopted, and the service over it; `NOT_A_CLONE`
    /// when it works on the folder itself, `SANDBOX_NOT_RUNNING` when none runs.
    async fn running_clone(
        self: &Arc<Self>,
        id: &str,
        path: Option<&str>,
    ) -> Result<(ContainerService<C::Engine>, WorkspaceContainer)> {
        crate::sandbox::folder::check_workspace_id(id)?;
        let found = if let (true, Some(path)) = (self.options.one_shot, path) {
            let ws = crate::sandbox::folder::resolve_workspace(id, path)?;
            self.watched(self.running_for_exec(ws)).await?
        } else {
            let service = self.service_for_start().await?;
            let c = service.adopt(id, path).await?;
            c.map(|c| (service, c))
        };
        let (service, container) = found.ok_or_else(|| Error::SandboxNotRunning {
            workspace: id.to_string(),
            folder: path.unwrap_or("<folder>").to_string(),
        })?;
        if container.workspace_mode != "clone" {
            return Err(Error::NotAClone {
                workspace: id.into(),
                reason: "works on the folder itself (bind mode): its changes are in the folder \
                         already (see them with git there, and `po-sandbox review`). diff and \
                         apply are for a sandbox brought up with `po-sandbox up --clone`"
                    .into(),
            });
        }
        Ok((service, container))
    }

    /// The one deadline of a `diff` or `apply`'s reading of the copy, from now
    /// ([`crate::engine::Bounds::changes`]).
    fn changes_deadline(&self) -> Result<crate::sandbox::on_engine::Deadline> {
        let bound = crate::engine::bounds(&self.options.host)?.changes;
        Ok(crate::sandbox::on_engine::Deadline::after(bound))
    }

    /// What the agent did in the workspace's copy since it was made.
    pub async fn clone_diff(self: &Arc<Self>, id: &str, path: Option<&str>) -> Result<CloneDiff> {
        let (service, c) = self.running_clone(id, path).await?;
        let deadline = self.changes_deadline()?;
        let folder = c.workspace_path.clone().or(path.map(String::from));
        service
            .copy_diff(&c, &folder.unwrap_or_default(), deadline)
            .await
    }

    /// Puts the agent's work on a host branch, or a folder copy's changed files into the
    /// folder ([`ContainerService::copy_apply`]).
    pub async fn clone_apply(
        self: &Arc<Self>,
        id: &str,
        options: CloneApplyOptions,
    ) -> Result<CloneApplied> {
        let branch = options.branch.clone();
        let branch = branch.unwrap_or_else(|| clone_branch(id));
        check_clone_branch(&branch)?;
        let path = options.path.as_deref();
        let (service, c) = self.running_clone(id, path).await?;
        let deadline = self.changes_deadline()?;
        let folder = c.workspace_path.clone().or(options.path.clone());
        let folder = PathBuf::from(folder.unwrap_or_default());
        service
            .copy_apply(&c, &options, folder, branch, deadline)
            .await
    }
}
