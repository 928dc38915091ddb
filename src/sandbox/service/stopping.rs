//! Stopping: one workspace's container, or all of this owner's, and remembering which stops
//! were asked for (the event feed does not report those as deaths).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ContainerService;
use crate::engine::api::EngineApi;
use crate::error::Result;
use crate::events::WorkspaceChange;
use crate::lock::Locked;
use crate::sandbox::folder::workspace;
use crate::sandbox::on_engine::container;

/// How long a stop on request is remembered for the event feed (its `die` comes within the
/// stop's own 10 s grace).
const STOP_REQUEST_KEPT: Duration = Duration::from_secs(300);

/// Containers this hub stopped on request, with when: the engine event feed does not report
/// their exit as a death (see [`ContainerService::stop_requested`]).
#[derive(Default)]
pub(super) struct StopRequests(Mutex<HashMap<String, Instant>>);

impl<E: EngineApi> ContainerService<E> {
    /// Stops and removes a container, first noting that the stop is on request, so the event
    /// feed does not report its exit as a death.
    /// Its workspace's namespace holder goes with it.
    pub(super) async fn stop_and_remove(&self, id: &str, workspace_id: &str) -> Result<()> {
        {
            let mut requested = self.inner.stops.0.locked();
            let now = Instant::now();
            requested.retain(|_, at| now.duration_since(*at) < STOP_REQUEST_KEPT);
            requested.insert(id.to_string(), now);
        }
        container::stop_and_remove(&self.changes(), id).await?;
        self.remove_holder(workspace_id).await
    }

    /// Whether this hub stopped the container on request (within [`STOP_REQUEST_KEPT`]).
    pub fn stop_requested(&self, id: &str) -> bool {
        self.inner.stops.0.locked().contains_key(id)
    }

    /// Switches the sandbox off for one workspace: stops and removes its container, keeps its
    /// volumes. `false` when it had none.
    pub async fn stop(&self, id: &str) -> Result<bool> {
        workspace::check_id(id)?;
        let ids = self.ids_of(id).await?;
        for cid in &ids {
            self.stop_and_remove(cid, id).await?;
            self.inner
                .events
                .workspace(id, WorkspaceChange::Stopped, Some(cid), None);
        }
        self.forget_token(id);
        self.release_folder(id);
        if !ids.is_empty() {
            self.remove_network_if_unused().await?;
        }
        self.undo_git_safety_when_last().await;
        Ok(!ids.is_empty())
    }

    /// Stops and removes every container of this owner (and no other). Returns the workspace
    /// ids stopped.
    pub async fn stop_all(&self) -> Result<Vec<String>> {
        // One list call gives every container with its workspace label.
        let by_workspace = self.ids_by_workspace().await?;
        let this = self;
        let pairs: Vec<(String, String)> = by_workspace
            .into_iter()
            .flat_map(|(ws, ids)| ids.into_iter().map(move |cid| (cid, ws.clone())))
            .collect();
        let results =
            futures_util::future::join_all(pairs.into_iter().map(|(cid, ws)| async move {
                this.stop_and_remove(&cid, &ws).await.map(|()| (cid, ws))
            }))
            .await;
        let mut stopped = Vec::new();
        let mut first_error = None;
        for r in results {
            match r {
                Ok((cid, ws)) => {
                    self.forget_token(&ws);
                    self.release_folder(&ws);
                    self.inner
                        .events
                        .workspace(&ws, WorkspaceChange::Stopped, Some(&cid), None);
                    stopped.push(ws);
                }
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        // The per-hub network goes with the last container (never while one uses it).
        self.remove_network_if_unused().await?;
        self.undo_git_safety_when_last().await;
        stopped.sort();
        stopped.dedup();
        Ok(stopped)
    }

    /// The person's `safe.bareRepository` back as it was, when the layer set it for this owner
    /// and no container of the owner is left.
    async fn undo_git_safety_when_last(&self) {
        let c = &self.inner.config.container;
        crate::sandbox::on_engine::inventory::undo_git_safety_when_last(
            &self.changes(),
            &c.host_env,
            &c.po_home,
            &c.owner,
        )
        .await;
    }
}
