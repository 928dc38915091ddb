//! Review baselines: taken when a workspace's container is made (or first adopted), removed
//! with the stop as token files are (`forget_token`); `review` compares with them.

use std::path::PathBuf;

use super::ContainerService;
use crate::engine::api::EngineApi;
use crate::sandbox::folder::review;
use crate::sandbox::folder::workspace::Workspace;

impl<E: EngineApi> ContainerService<E> {
    /// Takes the workspace's review baseline unless it has one (off the async threads: the walk
    /// reads the disk). Its path when this call took it.
    pub(super) async fn ensure_baseline(&self, ws: &Workspace) -> std::io::Result<Option<PathBuf>> {
        let c = &self.inner.config.container;
        let path = review::baseline_path(&c.po_home, &c.owner, &ws.id);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let (at, ws) = (path.clone(), ws.clone());
        let taken = tokio::task::spawn_blocking(move || review::ensure_baseline(&at, &ws, now))
            .await
            .map_err(std::io::Error::other)??;
        if taken {
            tracing::debug!(path = %path.display(), "review baseline taken");
        }
        Ok(taken.then_some(path))
    }

    /// At adoption: a baseline when the workspace has none (made by an older version, or its
    /// baseline was lost); what the agent wrote before now cannot be told apart, so a failure
    /// only warns.
    pub(super) async fn adopted_baseline(&self, ws: &Workspace) {
        if let Err(e) = self.ensure_baseline(ws).await {
            tracing::warn!(workspace = %ws.id, error = %e, "no review baseline");
        }
    }
}
