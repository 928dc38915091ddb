//! What this owner has on the engine now: its containers, as the service reports them.

use std::collections::HashMap;

use super::{ContainerService, KnownContainers, WorkspaceContainer, known_containers};
use crate::engine::api::EngineApi;
use crate::error::Result;
use crate::sandbox::blueprint::spec::{LABEL_OWNER, LABEL_WORKSPACE};
use crate::sandbox::on_engine::container::{self, LiveContainer};
use crate::sandbox::on_engine::inspect_workspace;

impl<E: EngineApi> ContainerService<E> {
    /// Inspects a workspace container and the namespace holder it joined (see
    /// [`inspect_workspace`]).
    pub(super) async fn inspect_ws(&self, id: &str) -> Result<Option<LiveContainer>> {
        let port = self.inner.config.container.bundle.server.port;
        inspect_workspace(&self.inner.engine, id, port).await
    }

    /// Ids of this owner's containers for one workspace (any state).
    pub(super) async fn ids_of(&self, id: &str) -> Result<Vec<String>> {
        container::list_ids(
            &self.inner.engine,
            &[
                (LABEL_OWNER, &self.inner.config.container.owner),
                (LABEL_WORKSPACE, id),
            ],
        )
        .await
    }

    /// A container of this owner as it is now (by id or name); `None` when it is gone.
    pub async fn current(&self, id: &str) -> Result<Option<WorkspaceContainer>> {
        let live = self.inspect_ws(id).await?;
        Ok(live.map(|l| self.report(&l, false, None)))
    }

    /// This owner's containers, any state.
    pub async fn list(&self) -> Result<Vec<WorkspaceContainer>> {
        // Namespace holders are part of a workspace, never one.
        let ids: Vec<String> = self
            .known_containers()
            .await?
            .ids
            .into_values()
            .flatten()
            .collect();
        let found =
            futures_util::future::join_all(ids.iter().map(|cid| self.inspect_ws(cid))).await;
        let mut out = Vec::new();
        for live in found {
            if let Some(live) = live? {
                out.push(self.report(&live, false, None));
            }
        }
        out.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
        Ok(out)
    }

    /// One list call: this owner's container ids grouped by workspace.
    pub async fn ids_by_workspace(&self) -> Result<HashMap<String, Vec<String>>> {
        Ok(self.known_containers().await?.ids)
    }

    /// One list call for this owner: the container ids of each workspace, and which
    /// workspaces have exactly one container and it runs (likely adopted, not created).
    pub async fn known_containers(&self) -> Result<KnownContainers> {
        known_containers(&self.inner.engine, &self.inner.config.container.owner).await
    }
}
