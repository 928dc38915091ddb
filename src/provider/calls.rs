//! The calls of the `po/workspace-containers` service as the hub makes them: each on the
//! service (a start retries a failed start-up first) and watched for the engine answering.

use std::sync::Arc;

use super::Provider;
use crate::engine::Connector;
use crate::error::Result;
use crate::sandbox::folder;
use crate::sandbox::folder::Workspace;
use crate::sandbox::folder::WorkspaceReview;
use crate::sandbox::on_engine::{ForwardInfo, PortForward};
use crate::sandbox::service::WorkspaceContainer;

impl<C: Connector> Provider<C> {
    /// Adopts the workspace's running container or creates one (see `ContainerService::start`).
    /// A one-shot provider adopts a container that runs as asked without a start-up (unless
    /// it pulls the base first).
    pub async fn start_workspace(self: &Arc<Self>, ws: Workspace) -> Result<WorkspaceContainer> {
        if self.options.one_shot
            && !self.options.pull_base
            && let Some(c) = self.watched(self.adopt_running(&ws)).await?
        {
            return Ok(c);
        }
        let call = async { self.service_for_start().await?.start(ws).await };
        self.watched(call).await
    }

    /// Adopts the workspace's running container; `None` when there is none (or it drifted).
    pub async fn adopt_workspace(
        self: &Arc<Self>,
        id: &str,
        path: Option<&str>,
    ) -> Result<Option<WorkspaceContainer>> {
        let call = async { self.service_for_start().await?.adopt(id, path).await };
        self.watched(call).await
    }

    /// Switches one workspace's sandbox off (see [`stop`](Provider::stop)), watched.
    pub async fn stop_workspace(self: &Arc<Self>, id: &str) -> Result<bool> {
        self.watched(self.stop(id)).await
    }

    /// Stops every container of this owner (see [`stop_all`](Provider::stop_all)), watched.
    pub async fn stop_every_workspace(self: &Arc<Self>) -> Result<Vec<String>> {
        self.watched(self.stop_all()).await
    }

    /// Runs `command` in the workspace's running container, attached to this process's stdio;
    /// a one-shot provider given the folder does it without a start-up.
    pub async fn exec_in(
        self: &Arc<Self>,
        id: &str,
        path: Option<&str>,
        command: Vec<String>,
        tty: bool,
    ) -> Result<i64> {
        if self.options.one_shot
            && let Some(path) = path
        {
            let ws = crate::sandbox::folder::resolve_workspace(id, path)?;
            return self.watched(self.exec_running(ws, command, tty)).await;
        }
        let service = self.service_for_start().await?;
        service.exec(id, path, command, tty).await
    }

    /// Forwards `port` in the workspace's running container to the host's loopback; a
    /// one-shot provider given the folder does it without a start-up.
    pub async fn forward_port(
        self: &Arc<Self>,
        id: &str,
        path: Option<&str>,
        port: u16,
        host_port: u16,
    ) -> Result<PortForward> {
        if self.options.one_shot
            && let Some(path) = path
        {
            let ws = crate::sandbox::folder::resolve_workspace(id, path)?;
            return self
                .watched(self.forward_running(ws, port, host_port))
                .await;
        }
        let service = self.service_for_start().await?;
        service.forward_port(id, path, port, host_port).await
    }

    /// The ports this hub forwards now (none before its service is up).
    pub async fn forwards(self: &Arc<Self>) -> Result<Vec<ForwardInfo>> {
        Ok(self
            .service()
            .await
            .map(|s| s.forwards())
            .unwrap_or_default())
    }

    /// The workspace's host-executed files changed since its container was made (no engine
    /// needed: the baseline is on this host).
    pub async fn review_workspace(&self, id: &str) -> Result<WorkspaceReview> {
        let (home, owner) = (self.options.po_home.clone(), self.options.owner.clone());
        folder::review_off_thread(home, owner, id.to_string()).await
    }

    /// This hub's containers, any state.
    pub async fn containers(self: &Arc<Self>) -> Result<Vec<WorkspaceContainer>> {
        self.watched(async { self.service().await?.list().await })
            .await
    }
}
