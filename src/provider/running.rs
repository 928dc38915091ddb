//! A folder's running sandbox without the provider's start-up: what `po-sandbox exec` and `up`
//! on a sandbox that runs need. The workspace's container is read by its deterministic name
//! while the engine check runs (see [`read_ahead`](super::read_ahead)) and adopted when it is
//! that workspace's, runs and satisfies the posture; nothing is built, swept or followed.
//! Anything else goes the provider's usual way (listed by labels, drift removed,
//! `SANDBOX_NOT_RUNNING`).

use super::read_ahead::ReadAhead;
use super::{Provider, ProviderOptions};
use crate::engine::Connector;
use crate::engine::{self, EngineReport};
use crate::error::Result;
use crate::image::ImageRecipe;
use crate::runtime_bundle::RuntimeBundle;
use crate::sandbox::blueprint;
use crate::sandbox::blueprint::EngineMode;
use crate::sandbox::on_engine::{LiveContainer, PortForward, inspect_workspace};
use crate::sandbox::service::{
    BrokerWiring, ContainerService, ServiceConfig, WorkspaceContainer, is_workspace_container,
};

use crate::sandbox::folder::Workspace;

/// The service's configuration from the options `o`, the runtime `bundle`, the engine's
/// `report` and the broker's `wiring`.
pub(super) fn service_config(
    o: &ProviderOptions,
    recipe: &ImageRecipe,
    bundle: RuntimeBundle,
    report: &EngineReport,
    wiring: Option<BrokerWiring>,
) -> Result<ServiceConfig> {
    let podman = report.engine.as_deref() == Some("podman");
    let mode = EngineMode::decide(
        podman,
        report.rootless,
        report.vm,
        report.cgroup_version.as_deref().unwrap_or_default(),
        wiring.as_ref().map(|w| w.transport),
    );
    let local = !report.vm && !report.remote;
    Ok(ServiceConfig {
        container: o.container_settings(recipe, bundle, report, mode),
        health_timeout: o.health_timeout,
        podman,
        broker: wiring,
        bounds: engine::bounds(&o.host)?,
        // The host's own addresses and resolvers matter when the engine runs here; a VM
        // engine's containers reach the host only through its gateway.
        host_addresses: local
            .then(crate::host::interface_addresses)
            .unwrap_or_default(),
        dns_servers: local.then(crate::host::resolvers).unwrap_or_default(),
    })
}

impl<C: Connector> Provider<C> {
    /// Runs `command` in the workspace's running container (`po-sandbox exec`), checked against
    /// the spec of the image recipe and run flags it was made with (its labels; these options'
    /// recipe when they name an image), with this process serving its broker grant.
    pub(super) async fn exec_running(
        &self,
        ws: Workspace,
        command: Vec<String>,
        tty: bool,
    ) -> Result<i64> {
        let (service, live) = self.open_running(&ws, true).await?;
        let health = live.as_ref().and_then(|l| l.health.clone());
        let adopted = match live {
            Some(live) => service.adopt_read(&ws, live, true).await?,
            None => None,
        };
        match adopted {
            Some(container) => {
                service
                    .exec_adopted(&container, health.as_deref(), command, tty)
                    .await
            }
            None => {
                let path = ws.path.to_string_lossy();
                service.exec(&ws.id, Some(&path), command, tty).await
            }
        }
    }

    /// The workspace's running container adopted as [`exec_running`](Self::exec_running)
    /// adopts it, and the service over it; `None` when none runs.
    pub(super) async fn running_for_exec(
        &self,
        ws: Workspace,
    ) -> Result<Option<(ContainerService<C::Engine>, WorkspaceContainer)>> {
        let (service, live) = self.open_running(&ws, true).await?;
        let adopted = match live {
            Some(live) => service.adopt_read(&ws, live, true).await?,
            None => None,
        };
        if let Some(c) = adopted {
            return Ok(Some((service, c)));
        }
        let path = ws.path.to_string_lossy();
        Ok(service
            .adopt(&ws.id, Some(&path))
            .await?
            .map(|c| (service, c)))
    }

    /// Forwards `port` of the workspace's running container (`po-sandbox port`), read by its
    /// name and checked as an exec's is (labels, then the posture of the recipe and run flags
    /// it was made with); anything else goes the service's way (listed by labels).
    pub(super) async fn forward_running(
        &self,
        ws: Workspace,
        port: u16,
        host_port: u16,
    ) -> Result<PortForward> {
        let (service, live) = self.open_running(&ws, true).await?;
        let owner = &self.options.owner;
        match live.filter(|l| l.running() && is_workspace_container(&l.labels, owner, &ws)) {
            Some(live) => service.forward_live(&ws, &live, port, host_port).await,
            None => {
                let path = ws.path.to_string_lossy();
                (service.forward_port(&ws.id, Some(&path), port, host_port)).await
            }
        }
    }

    /// `up` on a running sandbox: its container adopted when it runs as these options' spec
    /// says and its server answers; `None` when it needs the full start (none runs, it
    /// drifted).
    pub(super) async fn adopt_running(&self, ws: &Workspace) -> Result<Option<WorkspaceContainer>> {
        let (service, live) = self.open_running(ws, false).await?;
        match live {
            Some(live) => service.adopt_read(ws, live, false).await,
            None => Ok(None),
        }
    }

    /// The engine check, the runtime bundle and the broker, and the workspace's container read
    /// by name alongside; a service over them, for these options or, `recipe_of_container`,
    /// with the container's own run flags and (unless these options name an image) recipe.
    async fn open_running(
        &self,
        ws: &Workspace,
        recipe_of_container: bool,
    ) -> Result<(ContainerService<C::Engine>, Option<LiveContainer>)> {
        self.options.policy_good()?;
        let (o, name) = (
            &self.options,
            blueprint::container_name(&self.options.owner, &ws.id),
        );
        // Nothing is written before the engine answers (the demo bundle is materialised by the
        // runtime check after it, as at start-up): the read ahead takes the port as it is.
        let port = crate::runtime_bundle::demo::server_port(
            &o.po_home,
            o.runtime_version.as_deref(),
            o.demo_runtime,
        );
        let ahead = port.and_then(|port| {
            let name = name.clone();
            ReadAhead::on_first_candidate(&self.connector, o, move |engine| async move {
                inspect_workspace(&engine, &name, port).await.ok()
            })
        });
        let (report, engine) = self.check_engine().await?;
        let bundle = self.check_runtime()?;
        let read = match ahead {
            Some(ahead) if port == Some(bundle.server.port) => ahead.take(&report).await,
            _ => None,
        };
        let live = match read {
            Some(live) => live,
            None => inspect_workspace(&engine, &name, bundle.server.port).await?,
        };
        let options = match &live {
            Some(l) if recipe_of_container => self.options.with_recipe_of(&l.labels)?,
            _ => self.options.clone(),
        };
        // The recipe is the container's own (its labels) unless these options name an image;
        // one that names the container's base and variant takes the base's ID it was built
        // on: a base pulled again is built on at the next start, not by a one-shot command.
        let of_container = live.is_some() && recipe_of_container && !self.options.image_given;
        let kept = live
            .as_ref()
            .and_then(|l| options.recipe.on_base_of(&l.labels))
            .filter(|_| !of_container);
        if report.engine.as_deref() == Some("podman") {
            crate::sandbox::blueprint::refuse_run_flags_on_podman(&options.run_flags)?;
        }
        // Its TLS roots load at the first request that needs them: an exec may make none. The
        // recipe's base as the engine has it now, unless it is the container's own.
        let pin = async {
            match (kept, &options.recipe) {
                (Some(kept), _) => Ok(kept),
                (None, r) if of_container || r.base_id.is_some() => Ok(r.clone()),
                (None, r) => crate::image::pin(&engine, r).await,
            }
        };
        let (wiring, recipe) = tokio::join!(self.start_broker(&report, false), pin);
        let (wiring, recipe) = (wiring?, recipe?);
        let config = service_config(&options, &recipe, bundle, &report, wiring)?;
        let service = ContainerService::new(engine, config, self.events.clone());
        Ok((service, live))
    }
}
