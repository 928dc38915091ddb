//! `po/workspace-containers`: one hardened container per workspace — adopt the one that
//! survived, replace one that drifted, create one otherwise; stop them on request only.
//!
//! The service is one handle over parts of one concern each: [`lifecycle`] (start, adopt,
//! create with its rollback), [`holders`] (the namespace holder, its rules and the per-hub
//! network), [`grants`] (token files and broker grants), [`baselines`] (what `review`
//! compares with), [`forwards`] (ports forwarded into running containers), [`changes`]
//! (`diff` and `apply` of a clone-mode copy), [`stopping`], [`queries`], [`leftovers`] (what
//! killed hubs left, swept at start-up), [`feed`] (the engine's event stream, followed) and
//! [`carried`] (a remote engine's containers: their volumes filled, their links kept).

mod baselines;
mod carried;
mod changes;
pub(in crate::sandbox) mod feed;
pub(crate) use feed::{OnChange, follow as follow_feed};
mod forwards;
mod grants;
mod holders;
mod leftovers;
mod lifecycle;
pub(crate) use lifecycle::{is_workspace_container, start_lock_now};
mod queries;
mod rollback;
mod stopping;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::broker::server::{Broker, RouteKind};
use crate::engine::api::EngineApi;
use crate::error::{Error, Result};
use crate::events::EventBus;
use crate::host::HostOs;
use crate::names::paths::BROKER_MOUNT;
use crate::sandbox::blueprint::spec::{
    self, ContainerPosture, ContainerSettings, ContainerSpec, LABEL_WORKSPACE,
    LABEL_WORKSPACE_PATH, SpecInput,
};
use crate::sandbox::folder::guards;
use crate::sandbox::folder::locks::HostLock;
use crate::sandbox::folder::workspace::Workspace;
use crate::sandbox::on_engine::container::LiveContainer;
use crate::sandbox::on_engine::exec::spawner;
pub use crate::sandbox::on_engine::known::{Asked, KnownContainers, known_containers};
use crate::single_flight::SingleFlight;

/// What a hub's start-up read before one workspace's start, each part used where it still
/// holds (see [`ContainerService::start_with`]).
#[derive(Debug, Default)]
pub struct ReadBefore {
    /// The ids of its containers, from one list call for the whole hub.
    pub ids: Option<Vec<String>>,
    /// That list's reads of its one container: its inspect and its server's health ask (used
    /// only with `lock`: what was read holds only when nobody else started it meanwhile).
    pub asked: Option<Asked>,
    /// Its guarded paths resolved against its folder, off the async threads, while the engine
    /// was checked (bind mode; a snapshot of the folder as a start's own resolution is).
    pub guards: Option<guards::Resolved>,
    /// Its start lock, taken before anything was read ahead.
    pub lock: Option<HostLock>,
}

/// What the service needs to make containers.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// What every workspace's container shares (the spec's per-hub inputs).
    pub container: ContainerSettings,
    /// How long to wait for the server's health answer.
    pub health_timeout: Duration,
    /// The engine is Podman (which needs explicit ulimits).
    pub podman: bool,
    /// The credential broker, when it is on.
    pub broker: Option<BrokerWiring>,
    /// How long engine calls may take, by kind (the service's client carries the read bound).
    pub bounds: crate::engine::Bounds,
    /// The host's own addresses (an engine on this host), refused from every container.
    pub host_addresses: Vec<std::net::IpAddr>,
    /// The DNS servers the engine's resolver forwards to from inside a container's namespace
    /// (Docker: the host's), allowed on port 53 in `open` mode; Podman's is the gateway.
    pub dns_servers: Vec<std::net::IpAddr>,
}

/// How containers reach the host's credential broker.
#[derive(Clone)]
pub struct BrokerWiring {
    /// The broker.
    pub broker: Broker,
    /// A socket per container (native Linux engines) or the broker's TCP port (VM engines).
    pub transport: RouteKind,
    /// Where the per-container socket folders are (short: socket paths are limited).
    pub socket_root: PathBuf,
}

impl std::fmt::Debug for BrokerWiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerWiring")
            .field("transport", &self.transport)
            .field("socket_root", &self.socket_root)
            .finish()
    }
}

impl BrokerWiring {
    /// The stable socket folder of one workspace (its path is part of the spec, so it must not
    /// change across hub restarts): `<root>/<owner>-<12 hex of the id's sha256>`.
    pub fn socket_folder(&self, owner: &str, workspace_id: &str) -> PathBuf {
        use sha2::{Digest, Sha256};
        let h = hex::encode(&Sha256::digest(workspace_id.as_bytes())[..6]);
        self.socket_root.join(format!("{owner}-{h}"))
    }
}

/// One workspace's container.
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceContainer {
    pub workspace_id: String,
    /// The workspace folder, when known.
    pub workspace_path: Option<String>,
    /// Where the workspace folder is inside the container: the same path, except on Windows
    /// (`C:\Users\me\proj` is `/mnt/c/Users/me/proj`).
    pub container_path: Option<String>,
    pub container_id: String,
    pub name: String,
    pub image: String,
    /// The engine's state word: Docker's set (`created`, `running`, `paused`, `restarting`,
    /// `removing`, `exited`, `dead`); open, as Podman and later engines may say more.
    #[napi(
        ts_type = "'created' | 'running' | 'paused' | 'restarting' | 'removing' | 'exited' | 'dead' | (string & {})"
    )]
    pub state: String,
    /// Host port, on 127.0.0.1.
    pub host_port: Option<u16>,
    /// `http://127.0.0.1:<hostPort>`.
    pub url: Option<String>,
    /// The host path of the container's token file.
    pub token_file: String,
    /// Adopted (it was already running) rather than created by this call.
    pub adopted: bool,
    /// Why an earlier container was replaced instead of adopted.
    pub replaced_reason: Option<String>,
    pub created: Option<String>,
    /// Its security posture, as the engine reports it.
    pub posture: ContainerPosture,
    /// `bind` (the folder is mounted) or `clone` (it works on a copy in a volume of its own).
    #[napi(ts_type = "'bind' | 'clone'")]
    pub workspace_mode: String,
}

struct Inner<E> {
    engine: E,
    config: ServiceConfig,
    events: EventBus,
    /// Start operations in flight, by workspace id.
    inflight: SingleFlight<String, Result<WorkspaceContainer, Arc<Error>>>,
    /// Broker grants and who serves each workspace's socket.
    grants: grants::BrokerGrants,
    /// Containers this hub stopped on request.
    stops: stopping::StopRequests,
    /// The per-hub network and the holders being made.
    holders: holders::HolderState,
    /// The folder of each workspace this hub started (none may overlap another).
    folders: std::sync::Mutex<BTreeMap<String, PathBuf>>,
    /// The ports forwarded into this hub's containers.
    forwards: crate::sandbox::on_engine::forward::Forwards,
    /// The links to containers on an engine on another machine.
    carried: carried::CarriedLinks,
}

/// The workspace containers of one hub (owner). Cheap to clone.
pub struct ContainerService<E = crate::engine::Client> {
    inner: Arc<Inner<E>>,
}

impl<E> Clone for ContainerService<E> {
    fn clone(&self) -> Self {
        ContainerService {
            inner: self.inner.clone(),
        }
    }
}

impl<E: EngineApi> ContainerService<E> {
    /// The client for calls that change something: the service's, with the change bound.
    pub(super) fn changes(&self) -> E {
        crate::engine::for_changes(&self.inner.engine, &self.inner.config.bounds)
    }

    /// A service over one engine and configuration.
    pub fn new(engine: E, config: ServiceConfig, events: EventBus) -> Self {
        ContainerService {
            inner: Arc::new(Inner {
                engine,
                config,
                events,
                inflight: SingleFlight::default(),
                grants: grants::BrokerGrants::default(),
                stops: stopping::StopRequests::default(),
                holders: holders::HolderState::default(),
                folders: Default::default(),
                forwards: Default::default(),
                carried: Default::default(),
            }),
        }
    }

    /// The spec of a workspace's container, without a grant's environment.
    pub(super) fn spec_for(&self, ws: &Workspace) -> ContainerSpec {
        self.spec_with(ws, &BTreeMap::new())
    }

    /// The spec, with a grant's environment (which stays out of the spec hash).
    pub(super) fn spec_with(
        &self,
        ws: &Workspace,
        extra_env: &BTreeMap<String, String>,
    ) -> ContainerSpec {
        self.spec_of(ws, extra_env, None)
    }

    /// The spec, with a grant's environment and the workspace's guards when they were resolved
    /// already (else resolved now).
    pub(super) fn spec_of(
        &self,
        ws: &Workspace,
        extra_env: &BTreeMap<String, String>,
        guards: Option<guards::Resolved>,
    ) -> ContainerSpec {
        let (s, broker) = (&self.inner.config.container, &self.inner.config.broker);
        let seeds: Vec<&str> = spec::SEED_FILES
            .iter()
            .copied()
            .filter(|f| s.po_home.join(f).is_file())
            .collect();
        let (binds, hosts) = match broker {
            // Carried: the container's broker sockets are its own, in its /run.
            Some(_) if s.carried.is_some() => (vec![], vec![]),
            Some(w) if w.transport == RouteKind::Socket => (
                vec![spec::Bind {
                    source: w.socket_folder(&s.owner, &ws.id),
                    target: BROKER_MOUNT.into(),
                    read_only: false,
                }],
                vec![],
            ),
            Some(_) => (vec![], vec![s.mode.broker_host_entry()]),
            None => (vec![], vec![]),
        };
        let mut binds = binds;
        let os = HostOs::current();
        let mut extra_env = extra_env.clone();
        // A copy guards nothing of the host's: the host folder is not mounted at all.
        if !self.is_clone(ws) {
            let guards = guards.unwrap_or_else(|| guards::resolve(&ws.path, &s.guarded_paths));
            let copies = spec::guard_copies(&s.po_home, &s.owner, &ws.id);
            binds.extend(guards::binds(&ws.path, &guards, os, &copies));
            extra_env.insert(
                guards::GUARDED_PATHS_VAR.into(),
                guards::listing(&ws.path, &guards, os),
            );
        }
        spec::build(&SpecInput {
            settings: s,
            os,
            workspace: ws,
            seed_files: &seeds,
            extra_env: &extra_env,
            extra_binds: &binds,
            extra_hosts: &hosts,
        })
    }

    /// The workspace works on a copy (its own mode, else the hub's default).
    pub(super) fn is_clone(&self, ws: &Workspace) -> bool {
        let default = self.inner.config.container.workspace_mode;
        ws.mode.unwrap_or(default) == crate::sandbox::folder::clone::WorkspaceMode::Clone
    }

    /// What the service reports of a live container.
    pub(super) fn report(
        &self,
        live: &LiveContainer,
        adopted: bool,
        replaced_reason: Option<String>,
    ) -> WorkspaceContainer {
        let c = &self.inner.config.container;
        let id = live
            .labels
            .get(LABEL_WORKSPACE)
            .cloned()
            .unwrap_or_default();
        let token_file = spec::token_file(&c.po_home, &c.owner, &id);
        let exec_spawner = spawner::read_record(&spawner::record_path(&token_file))
            .filter(|r| r.container_id == live.id)
            .and_then(|r| r.failed);
        let host_port = self.server_port(&id, live);
        WorkspaceContainer {
            token_file: token_file.to_string_lossy().into_owned(),
            workspace_id: id,
            workspace_path: live.labels.get(LABEL_WORKSPACE_PATH).cloned(),
            container_path: live
                .labels
                .get(LABEL_WORKSPACE_PATH)
                .map(|p| crate::platform::container_path(HostOs::current(), p)),
            container_id: live.id.clone(),
            name: live.name.clone(),
            image: live.image.clone(),
            state: live.state.clone(),
            host_port,
            url: host_port.map(|p| format!("http://127.0.0.1:{p}")),
            adopted,
            replaced_reason,
            created: live.created.clone(),
            posture: ContainerPosture {
                forwarded: self.inner.forwards.posture_lines(&live.id),
                exec_spawner,
                ..ContainerPosture::from(&live.posture)
            },
            workspace_mode: crate::sandbox::folder::clone::WorkspaceMode::of_labels(&live.labels)
                .as_str()
                .into(),
        }
    }

    /// This hub's owner id.
    pub fn owner(&self) -> &str {
        &self.inner.config.container.owner
    }

    /// The engine client.
    pub fn engine(&self) -> &E {
        &self.inner.engine
    }

    /// The event bus.
    pub fn events(&self) -> &EventBus {
        &self.inner.events
    }

    /// Whether the engine answers a ping (within the call bound).
    pub async fn ping(&self) -> bool {
        self.inner.engine.ping().await.is_ok()
    }
}

#[cfg(test)]
mod tests;

/// The short form of a container id, as the engine's CLI shows it.
fn short_id(id: &str) -> &str {
    &id[..12.min(id.len())]
}
