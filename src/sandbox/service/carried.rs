//! A workspace on an engine on another machine ([`ContainerSettings::carried`]): its volumes are
//! filled through the engine at create (`on_engine::carried`), and while its container runs
//! the hub keeps two links to it over engine execs, re-opened when they end (the container
//! restarted, the connection to the engine came back):
//! - its server's port, forwarded to this host's loopback: the URL the hub reports, on the
//!   same port again after a re-open when it is free;
//! - the broker's sockets, carried the other way: the container's processes connect to
//!   `/run/po-broker/broker.sock` (and `egress.sock`, and each registry route's `reg-<n>.sock`)
//!   as on a local engine, and each connection reaches this host's broker socket of that name.
//!   Nothing listens on the remote machine.
//!
//! [`ContainerSettings::carried`]: crate::sandbox::blueprint::spec::ContainerSettings::carried

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::{ContainerService, Inner};
use crate::broker::egress::EGRESS_SOCKET;
use crate::engine::api::EngineApi;
use crate::error::{Error, Result};
use crate::lock::Locked;
use crate::names::paths::BROKER_MOUNT;
use crate::relay::mux::Relay;
use crate::sandbox::blueprint::spec::{self, CARRIED_BUNDLE, ContainerSpec};
use crate::sandbox::folder::workspace::Workspace;
use crate::sandbox::on_engine::LiveContainer;
use crate::sandbox::on_engine::carried::{self as fill, Carried};
use crate::sandbox::on_engine::forward::{self, PortForward, Target};

/// How often a keeper looks at its links.
const KEEP_EVERY: Duration = Duration::from_secs(1);

/// The links of each carried workspace this hub keeps, and the remote machine's addresses.
#[derive(Default)]
pub(super) struct CarriedLinks {
    links: Mutex<HashMap<String, Links>>,
    /// The engine's machine's own addresses, once learned (see [`fill::machine_addresses`]),
    /// learned by one call at a time.
    machine: tokio::sync::Mutex<Option<Vec<std::net::IpAddr>>>,
    /// Held while links are opened: two calls at once (a keeper's, an exec's) would each bind
    /// the container's broker sockets, and the later close the earlier's.
    carrying: tokio::sync::Mutex<()>,
}

/// One workspace's links to its container.
struct Links {
    container: String,
    /// Its server's forward (a hub's; an exec's links have none).
    server: Option<PortForward>,
    broker: Option<Relay>,
    keeper: tokio::task::JoinHandle<()>,
}

impl Drop for Links {
    fn drop(&mut self) {
        self.keeper.abort();
        if let Some(server) = &self.server {
            server.end();
        }
        if let Some(b) = &self.broker {
            b.close("the workspace's links were let go");
        }
    }
}

impl<E: EngineApi> ContainerService<E> {
    /// The engine sees none of this host's files.
    pub(super) fn carried(&self) -> bool {
        self.inner.config.container.carried.is_some()
    }

    /// Whether the spec's bundle volume is new (to be filled at this create).
    pub(super) async fn bundle_is_new(&self, spec: &ContainerSpec) -> Result<bool> {
        let Some(volume) = fill::volume(spec, CARRIED_BUNDLE) else {
            return Ok(false);
        };
        let c = &self.inner.config.container;
        let ws = spec
            .labels
            .get(spec::LABEL_WORKSPACE)
            .cloned()
            .unwrap_or_default();
        Ok(!fill::volume_exists(&self.inner.engine, &c.owner, &ws, &volume.name).await?)
    }

    /// Fills the carried volumes of a container about to be created: its token file (written
    /// on this host just before), P with the seed files, and the bundle when `bundle_new`.
    pub(super) async fn fill_carried(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
        bundle_new: bool,
    ) -> Result<()> {
        let c = &self.inner.config.container;
        let token = spec::token_file(&c.po_home, &c.owner, &ws.id);
        let seeds = spec::SEED_FILES
            .iter()
            .map(|f| (*f, c.po_home.join(f)))
            .filter(|(_, p)| p.is_file())
            .collect();
        let carried = Carried {
            workspace: &ws.id,
            token: &token,
            bundle: bundle_new.then_some(c.bundle.dir.as_path()),
            seeds,
            user: c.user,
        };
        let engine = self.changes();
        fill::fill(&engine, spec, &carried).await?;
        if bundle_new {
            fill::remove_other_bundles(&engine, &c.owner, spec).await;
        }
        Ok(())
    }

    /// A bind-mode workspace cannot run where the engine sees no folder of this host's.
    pub(super) fn check_carried_mode(&self, ws: &Workspace) -> Result<()> {
        if !self.carried() || self.is_clone(ws) {
            return Ok(());
        }
        Err(Error::WorkspaceInvalid {
            what: format!("'{}'", ws.id),
            reason: format!(
                "its mode is bind, but the engine runs on another machine and cannot see {}: \
                 use workspaceMode 'clone' (or PO_SANDBOX_WORKSPACE_MODE=clone), the default \
                 with a remote engine",
                ws.path.display()
            ),
        })
    }

    /// The remote machine's own addresses, which every holder's rules refuse: learned once per
    /// hub (one call at a time) through a helper container in the engine's host network
    /// (`image`). A failure is not kept: the holder is not made, and the next start asks again.
    pub(super) async fn machine_addresses(&self, image: &str) -> Result<Vec<std::net::IpAddr>> {
        let mut known = self.inner.carried.machine.lock().await;
        if let Some(known) = known.as_ref() {
            return Ok(known.clone());
        }
        let owner = &self.inner.config.container.owner;
        let found = fill::machine_addresses(&self.changes(), image, owner).await?;
        *known = Some(found.clone());
        Ok(found)
    }

    /// The links of a carried workspace's running container `container`, opened where they are
    /// not live: the broker's carrier (when this hub holds the workspace's grant) and, with
    /// `server` (a hub's start or adoption; not an exec, which needs no URL), the server's
    /// forward. The server's port here, when it is forwarded.
    pub(super) async fn carry(
        &self,
        ws: &str,
        container: &str,
        server: bool,
    ) -> Result<Option<u16>> {
        let _one = self.inner.carried.carrying.lock().await;
        let (forward, broker) = {
            let links = self.inner.carried.links.locked();
            let l = links.get(ws).filter(|l| l.container == container);
            let forward = l.and_then(|l| l.server.as_ref());
            (
                forward.map(|f| (f.live(), f.info.host_port)),
                l.is_some_and(|l| l.broker.as_ref().is_some_and(|b| !b.is_ended())),
            )
        };
        // The broker's first: a server forward that fails leaves it carried.
        let broker = match broker {
            true => None,
            false => self.carry_broker(ws, container).await,
        };
        let server = match forward {
            Some((true, _)) => Ok(None),
            Some((false, port)) => self.forward_server(ws, container, port).await.map(Some),
            None if server => self.forward_server(ws, container, 0).await.map(Some),
            None => Ok(None),
        };
        let mut links = self.inner.carried.links.locked();
        let mut l = match links.remove(ws).filter(|l| l.container == container) {
            Some(l) => l,
            None => Links {
                container: container.to_string(),
                server: None,
                broker: None,
                keeper: self.spawn_keeper(ws, container),
            },
        };
        if let Some(b) = broker
            && let Some(old) = l.broker.replace(b)
        {
            old.close("replaced");
        }
        let server = server.map(|s| {
            if let Some(old) = s.and_then(|s| l.server.replace(s)) {
                old.end();
            }
            l.server.as_ref().map(|f| f.info.host_port)
        });
        links.insert(ws.to_string(), l);
        server
    }

    /// The keeper of a workspace's links (a plain function: `carry`'s future does not hold the
    /// keeper's, which holds `carry`'s).
    fn spawn_keeper(&self, ws: &str, container: &str) -> tokio::task::JoinHandle<()> {
        let inner = std::sync::Arc::downgrade(&self.inner);
        tokio::spawn(keep(inner, ws.to_string(), container.to_string()))
    }

    /// The container's server port forwarded to this host's `127.0.0.1:<port>` (0: any; a
    /// port taken meanwhile: any).
    async fn forward_server(&self, ws: &str, container: &str, port: u16) -> Result<PortForward> {
        let server_port = self.inner.config.container.bundle.server.port;
        let engine = &self.inner.engine;
        match forward::open(engine, self.target(ws, container), server_port, port).await {
            Err(Error::PortInUse { .. }) if port != 0 => {
                forward::open(engine, self.target(ws, container), server_port, 0).await
            }
            other => other,
        }
    }

    /// The broker's sockets carried into the container, when the broker is on and the hub
    /// holds the workspace's grant; `None` otherwise (said in the log).
    async fn carry_broker(&self, ws: &str, container: &str) -> Option<Relay> {
        let w = self.inner.config.broker.as_ref()?;
        self.granted_now(ws)?;
        let c = &self.inner.config.container;
        let folder = w.socket_folder(&c.owner, ws);
        let mut targets = HashMap::from([("broker.sock".to_string(), folder.join("broker.sock"))]);
        if w.broker.egress_on() {
            targets.insert(EGRESS_SOCKET.to_string(), folder.join(EGRESS_SOCKET));
        }
        for index in 0..w.broker.registry_count() {
            let name = crate::broker::registry::socket_name(index);
            targets.insert(name.clone(), folder.join(name));
        }
        let target = self.target(ws, container);
        match forward::open_reverse(&self.inner.engine, &target, BROKER_MOUNT, targets).await {
            Ok(relay) => Some(relay),
            Err(e) => {
                tracing::warn!(workspace = ws, error = %e, "the broker's carrier did not open");
                None
            }
        }
    }

    /// Where the server of `ws`'s container `live` answers on this host: its published port,
    /// or on an engine on another machine (whose published port is that machine's) the hub's
    /// forward of it, while linked.
    pub(super) fn server_port(&self, ws: &str, live: &LiveContainer) -> Option<u16> {
        if !self.carried() {
            return live.host_port;
        }
        let links = self.inner.carried.links.locked();
        let l = links.get(ws).filter(|l| l.container == live.id)?;
        l.server.as_ref().map(|f| f.info.host_port)
    }

    /// What a forward or the broker's carrier needs of a carried workspace's container.
    fn target<'a>(&'a self, ws: &'a str, container: &'a str) -> Target<'a> {
        Target {
            workspace: ws,
            container_id: container,
            interpreter: self.inner.config.container.bundle.interpreter(),
            socket: None,
            holder: None,
        }
    }

    /// Lets a workspace's links go (it was stopped here).
    pub(super) fn drop_carried(&self, ws: &str) {
        let gone = self.inner.carried.links.locked().remove(ws);
        drop(gone);
    }
}

/// Keeps one workspace's links while its container `container` is the one linked: re-opens
/// what ended every [`KEEP_EVERY`] while the container runs; ends when the links were let go or
/// replaced, or the container is gone.
async fn keep<E: EngineApi>(inner: std::sync::Weak<Inner<E>>, ws: String, container: String) {
    loop {
        tokio::time::sleep(KEEP_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        let this = ContainerService { inner };
        let whole = {
            let links = this.inner.carried.links.locked();
            match links.get(&ws).filter(|l| l.container == container) {
                None => return,
                // The broker's carrier is wanted only while this hub holds the grant.
                Some(l) => {
                    l.server.as_ref().is_none_or(PortForward::live)
                        && (this.granted_now(&ws).is_none()
                            || l.broker.as_ref().is_some_and(|b| !b.is_ended()))
                }
            }
        };
        if whole {
            continue;
        }
        match this.inner.engine.inspect_container(&container).await {
            Ok(c) if c.state.as_ref().and_then(|s| s.running) == Some(true) => {
                if let Err(e) = this.carry(&ws, &container, false).await {
                    tracing::debug!(workspace = %ws, error = %e, "links not re-opened yet");
                }
            }
            Err(crate::engine::EngineError::NotFound(_)) => {
                let mut links = this.inner.carried.links.locked();
                if links.get(&ws).is_some_and(|l| l.container == container) {
                    let gone = links.remove(&ws);
                    drop(links);
                    drop(gone);
                }
                return;
            }
            _ => {}
        }
    }
}
