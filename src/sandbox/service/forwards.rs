//! Forwarded ports into this hub's running workspace containers (see [`forward`]).

use super::ContainerService;
use crate::broker::server::RouteKind;
use crate::engine::api::EngineApi;
use crate::error::{Error, Result};
use crate::names::paths::BROKER_MOUNT;
use crate::sandbox::blueprint::spec::{self, LABEL_WORKSPACE_PATH};
use crate::sandbox::folder::clone::WorkspaceMode;
use crate::sandbox::folder::workspace::{self, Workspace};
use crate::sandbox::on_engine::container::LiveContainer;
use crate::sandbox::on_engine::forward::{self, ForwardInfo, PortForward, SocketRoute, Target};

impl<E: EngineApi> ContainerService<E> {
    /// Forwards `port` on the 127.0.0.1 of the workspace's running container to the host's
    /// `127.0.0.1:<host_port>` (0: a free port). The container must run and still be the
    /// sandbox the spec describes (its posture checked; nothing is replaced or adopted).
    /// `SANDBOX_NOT_RUNNING` when it has none, `PORT_IN_USE` when the host port is taken.
    pub async fn forward_port(
        &self,
        id: &str,
        path: Option<&str>,
        port: u16,
        host_port: u16,
    ) -> Result<PortForward> {
        workspace::check_id(id)?;
        let not_running = || Error::SandboxNotRunning {
            workspace: id.to_string(),
            folder: path.unwrap_or("<folder>").to_string(),
        };
        let mut running = None;
        for cid in self.ids_of(id).await? {
            if let Some(live) = self.inspect_ws(&cid).await?.filter(|l| l.running()) {
                running = Some(live);
                break;
            }
        }
        let live = running.ok_or_else(not_running)?;
        let ws_path = path
            .map(str::to_string)
            .or_else(|| live.labels.get(LABEL_WORKSPACE_PATH).cloned())
            .unwrap_or_default();
        let ws = workspace::resolve(id, &ws_path)?;
        self.forward_live(&ws, &live, port, host_port).await
    }

    /// Forwards `port` of `live`, the workspace's running container found by its labels or
    /// read by its name (see [`forward_port`](Self::forward_port)), once its posture is
    /// checked against the spec of the mode it was made in.
    pub async fn forward_live(
        &self,
        ws: &Workspace,
        live: &LiveContainer,
        port: u16,
        host_port: u16,
    ) -> Result<PortForward> {
        let id = &ws.id;
        let ws = &Workspace {
            mode: Some(WorkspaceMode::of_labels(&live.labels)),
            ..ws.clone()
        };
        if let Err(reason) = spec::check_posture(&self.spec_for(ws), &live.posture) {
            let why = format!(
                "its container is not the sandbox it should be ({reason}): run `po-sandbox up {}` to replace it",
                ws.path.display()
            );
            return Err(Error::container(id, why));
        }
        let c = &self.inner.config;
        // The broker's socket folder, where the spec mounts it (its posture was just checked).
        let socket = (c.broker.as_ref())
            .filter(|w| w.transport == RouteKind::Socket && c.container.carried.is_none())
            .map(|w| SocketRoute {
                host_dir: w.socket_folder(&c.container.owner, id),
                container_dir: BROKER_MOUNT.into(),
                owner: Some((c.container.user.uid, c.container.user.gid)),
            });
        let target = Target {
            workspace: id,
            container_id: &live.id,
            interpreter: c.container.bundle.interpreter(),
            socket,
            holder: live
                .network_mode()
                .and_then(|m| m.strip_prefix("container:")),
        };
        let fwd = forward::open(&self.inner.engine, target, port, host_port).await?;
        self.inner.forwards.add(&fwd);
        Ok(fwd)
    }

    /// The forwards this hub holds now.
    pub fn forwards(&self) -> Vec<ForwardInfo> {
        self.inner.forwards.list()
    }
}
