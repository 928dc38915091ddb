//! `diff` and `apply` of a clone-mode workspace: its running container found as `exec` finds
//! it, git run inside through the engine, and (for `apply`) the work put on a host branch.

use std::path::PathBuf;
use std::sync::Arc;

use super::Provider;
use crate::error::{Error, Result};
use crate::sandbox::clone::{self, CloneApplied, CloneApplyOptions, CloneDiff};
use crate::sandbox::service::{ContainerService, WorkspaceContainer};

impl Provider {
    /// The workspace's running container, adopted, and the service over it; `NOT_A_CLONE`
    /// when it works on the folder itself, `SANDBOX_NOT_RUNNING` when none runs.
    async fn running_clone(
        self: &Arc<Self>,
        id: &str,
        path: Option<&str>,
    ) -> Result<(ContainerService, WorkspaceContainer)> {
        crate::sandbox::workspace::check_id(id)?;
        let found = if let (true, Some(path)) = (self.options.one_shot, path) {
            let ws = crate::sandbox::workspace::resolve(id, path)?;
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
    fn changes_deadline(&self) -> Result<crate::sandbox::exec::Deadline> {
        let bound = crate::engine::bounds(&self.options.host)?.changes;
        Ok(crate::sandbox::exec::Deadline::after(bound))
    }

    /// What the agent did in the workspace's copy since it was made.
    pub async fn clone_diff(self: &Arc<Self>, id: &str, path: Option<&str>) -> Result<CloneDiff> {
        let (service, c) = self.running_clone(id, path).await?;
        let deadline = self.changes_deadline()?;
        let folder = c.workspace_path.clone().or(path.map(String::from));
        let folder = folder.unwrap_or_default();
        if let Some(manifest) = self.copy_manifest(id, &folder) {
            return self.folder_diff(&service, &c, manifest, deadline).await;
        }
        let out = service
            .capture_adopted(&c, clone::diff_command(), deadline)
            .await?;
        let parts = clone::answers(id, out.code, &out.stdout, &out.stderr, clone::DIFF_ANSWERS)?;
        Ok(clone::parse_diff(id, &folder, parts))
    }

    /// Puts the agent's work on a host branch (see [`clone::apply_work`]).
    pub async fn clone_apply(
        self: &Arc<Self>,
        id: &str,
        options: CloneApplyOptions,
    ) -> Result<CloneApplied> {
        let branch = options.branch.clone();
        let branch = branch.unwrap_or_else(|| clone::default_branch(id));
        clone::check_branch(&branch)?;
        let path = options.path.as_deref();
        let (service, c) = self.running_clone(id, path).await?;
        let deadline = self.changes_deadline()?;
        let folder = c.workspace_path.clone().or(options.path.clone());
        let folder = PathBuf::from(folder.unwrap_or_default());
        if let Some(manifest) = self.copy_manifest(id, &folder.to_string_lossy()) {
            return self
                .folder_apply(&service, &c, manifest, &options, deadline)
                .await;
        }
        let command = clone::apply_command(options.patch.is_some());
        let out = service.capture_adopted(&c, command, deadline).await?;
        let parts = clone::answers(id, out.code, &out.stdout, &out.stderr, clone::APPLY_ANSWERS)?;
        let work = clone::parse_work(parts);
        let (id, patch) = (id.to_string(), options.patch.map(PathBuf::from));
        tokio::task::spawn_blocking(move || {
            clone::apply_work(&id, &folder, &branch, work, patch.as_deref())
        })
        .await
        .map_err(|e| Error::container_caused("apply", "cannot apply", e))?
    }
}
