//! `po/workspace-containers`: one hardened container per workspace — adopt the one that
//! survived, replace one that drifted, create one otherwise; stop them on request only.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;

use crate::broker::secret::Secret;
use crate::broker::server::{Broker, GrantRequest, RouteKind};
use crate::error::{Error, Result};
use crate::events::{EventBus, WorkspaceChange};
use crate::host::{HostOs, UserIds};
use crate::runtime_bundle::RuntimeBundle;
use crate::sandbox::container::{self, Created, LiveContainer};
use crate::sandbox::exec;
use crate::sandbox::firewall::{NetworkMode, RulesInput};
use crate::sandbox::guards;
use crate::sandbox::holder;
pub use crate::sandbox::known::{Asked, KnownContainers, known_containers};
use crate::sandbox::network;
use crate::sandbox::run_flags::RunFlags;
use crate::sandbox::spec::{
    self, ContainerPosture, ContainerSpec, LABEL_OWNER, LABEL_WORKSPACE, LABEL_WORKSPACE_PATH,
    SpecInput,
};
use crate::sandbox::workspace::{self, Workspace};
use crate::single_flight::SingleFlight;

/// What the service needs to make containers.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The Po home on the host.
    pub po_home: PathBuf,
    /// This hub's owner id.
    pub owner: String,
    /// The validated runtime bundle.
    pub bundle: RuntimeBundle,
    /// The image tag.
    pub image: String,
    /// The image digest.
    pub image_digest: String,
    /// `uid:gid`.
    pub user: UserIds,
    /// Pid limit.
    pub pids_limit: i64,
    /// Guarded paths, relative to each workspace (mounted read-only).
    pub guarded_paths: Vec<String>,
    /// Extra engine options (`runFlags`), checked.
    pub run_flags: RunFlags,
    /// Memory and CPU limits (before the run flags, which win).
    pub limits: spec::Limits,
    /// The interval of the engine health check.
    pub health_interval: Duration,
    /// How long to wait for the server's health answer.
    pub health_timeout: Duration,
    /// The host environment (for the allowlist).
    pub host_env: HashMap<String, String>,
    /// The engine is Podman (which needs explicit ulimits).
    pub podman: bool,
    /// What the engine changes about every container (keep-id, unenforced limits, network).
    pub mode: crate::sandbox::engine_mode::EngineMode,
    /// The credential broker, when it is on.
    pub broker: Option<BrokerWiring>,
    /// How long engine calls may take, by kind (the service's client carries the read bound).
    pub bounds: crate::engine::Bounds,
    /// The egress mode (`network`, `PO_SANDBOX_NETWORK`).
    pub network_mode: NetworkMode,
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

/// Where a container's broker socket is mounted.
pub const BROKER_MOUNT: &str = "/run/po-broker";

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
}

struct Inner {
    docker: Docker,
    config: ServiceConfig,
    events: EventBus,
    /// Start operations in flight, by workspace id.
    inflight: SingleFlight<String, Result<WorkspaceContainer, Arc<Error>>>,
    /// Live broker grants by workspace, with the token-file content each was derived from.
    grants: Mutex<HashMap<String, (crate::broker::server::Grant, Secret)>>,
    /// Socket routes: per workspace, the lock that makes this hub the one serving the
    /// container's broker socket among hubs sharing the socket folder (when held), and the
    /// watch that takes over when the holder exits and re-grants when the token file changes.
    broker_owners: Mutex<HashMap<String, BrokerOwner>>,
    /// Containers this hub stopped on request, with when: the engine event feed does not
    /// report their exit as a death (see [`ContainerService::stop_requested`]).
    stops_requested: Mutex<HashMap<String, std::time::Instant>>,
    /// The id of the per-hub network, once this hub found or made it (one at a time).
    network: tokio::sync::Mutex<Option<String>>,
    /// Holders this hub is making: their create path loads their rules, not the event feed.
    readying: Mutex<std::collections::HashSet<String>>,
}

/// This hub's part in serving one workspace's broker socket.
struct BrokerOwner {
    lock: Option<crate::sandbox::locks::HostLock>,
    watch: tokio::task::JoinHandle<()>,
}

/// How often a hub that does not serve a workspace's broker socket checks whether the one that
/// does is gone, and the one that does whether the token file changed.
const BROKER_WATCH_EVERY: Duration = Duration::from_secs(1);

/// How long a stop on request is remembered for the event feed (its `die` comes within the
/// stop's own 10 s grace).
const STOP_REQUEST_KEPT: Duration = Duration::from_secs(300);

/// The workspace containers of one hub (owner). Cheap to clone.
#[derive(Clone)]
pub struct ContainerService {
    inner: Arc<Inner>,
}

/// A 256-bit random token, hex.
pub fn random_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::container_caused("", "no randomness for a token", e))?;
    Ok(hex::encode(bytes))
}

/// Writes a fresh token file with mode 0600 (folder 0700), replacing any earlier one.
fn write_token_file(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().expect("token files live in a folder");
    crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true)).create(dir)?;
    let token = random_token().map_err(std::io::Error::other)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f =
        crate::platform::private_files(std::fs::OpenOptions::new().write(true).create_new(true))
            .open(&tmp)?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Keeps one workspace's broker socket served while this hub has it: every
/// [`BROKER_WATCH_EVERY`], re-runs the grant, which takes the socket over when the hub that
/// served it is gone (its lock is free), and re-grants when the token file changed (another hub
/// made a new container). Ends when the token file is gone (the workspace was stopped), when
/// the workspace is revoked here, or when the service is gone.
async fn watch_broker(inner: std::sync::Weak<Inner>, workspace_id: String) {
    loop {
        tokio::time::sleep(BROKER_WATCH_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        let this = ContainerService { inner };
        let token = spec::token_file(
            &this.inner.config.po_home,
            &this.inner.config.owner,
            &workspace_id,
        );
        if !token.exists() {
            // The workspace was stopped (by any hub): this hub's part ends, and the socket it
            // served goes with it.
            this.revoke_for(&workspace_id);
            return;
        }
        if let Err(e) = this.grant_for(&workspace_id) {
            tracing::debug!(workspace = %workspace_id, error = %e, "broker watch: no grant");
        }
    }
}

impl ContainerService {
    /// The client for calls that change something: the service's, with the change bound.
    fn changes(&self) -> Docker {
        crate::engine::for_changes(&self.inner.docker, &self.inner.config.bounds)
    }

    /// A service over one engine and configuration.
    pub fn new(docker: Docker, config: ServiceConfig, events: EventBus) -> Self {
        ContainerService {
            inner: Arc::new(Inner {
                docker,
                config,
                events,
                inflight: SingleFlight::default(),
                grants: Mutex::new(HashMap::new()),
                broker_owners: Mutex::new(HashMap::new()),
                stops_requested: Mutex::new(HashMap::new()),
                network: tokio::sync::Mutex::new(None),
                readying: Mutex::new(std::collections::HashSet::new()),
            }),
        }
    }

    /// Stops and removes a container, first noting that the stop is on request, so the event
    /// feed does not report its exit as a death.
    /// Its workspace's namespace holder goes with it.
    async fn stop_and_remove(&self, id: &str, workspace_id: &str) -> Result<()> {
        {
            let mut requested = self
                .inner
                .stops_requested
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let now = std::time::Instant::now();
            requested.retain(|_, at| now.duration_since(*at) < STOP_REQUEST_KEPT);
            requested.insert(id.to_string(), now);
        }
        container::stop_and_remove(&self.changes(), id).await?;
        self.remove_holder(workspace_id).await
    }

    /// Whether this hub stopped the container on request (within [`STOP_REQUEST_KEPT`]).
    pub fn stop_requested(&self, id: &str) -> bool {
        self.inner
            .stops_requested
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(id)
    }

    fn spec_for(&self, ws: &Workspace) -> ContainerSpec {
        self.spec_with(ws, &BTreeMap::new())
    }

    /// The spec, with a grant's environment (which stays out of the spec hash).
    fn spec_with(&self, ws: &Workspace, extra_env: &BTreeMap<String, String>) -> ContainerSpec {
        let c = &self.inner.config;
        let seeds: Vec<&str> = spec::SEED_FILES
            .iter()
            .copied()
            .filter(|f| c.po_home.join(f).is_file())
            .collect();
        let (binds, hosts) = match &c.broker {
            Some(w) if w.transport == RouteKind::Socket => (
                vec![spec::Bind {
                    source: w.socket_folder(&c.owner, &ws.id),
                    target: BROKER_MOUNT.into(),
                    read_only: false,
                }],
                vec![],
            ),
            Some(_) => (vec![], vec![c.mode.broker_host_entry()]),
            None => (vec![], vec![]),
        };
        let guards = guards::resolve(&ws.path, &c.guarded_paths);
        let mut binds = binds;
        let os = HostOs::current();
        binds.extend(guards::binds(&ws.path, &guards, os));
        let mut extra_env = extra_env.clone();
        extra_env.insert(
            guards::GUARDED_PATHS_VAR.into(),
            guards::listing(&ws.path, &guards, os),
        );
        spec::build(&SpecInput {
            os,
            owner: &c.owner,
            workspace: ws,
            po_home: &c.po_home,
            bundle: &c.bundle,
            image: &c.image,
            image_digest: &c.image_digest,
            user: c.user,
            pids_limit: c.pids_limit,
            run_flags: &c.run_flags,
            seed_files: &seeds,
            host_env: &c.host_env,
            extra_env: &extra_env,
            extra_binds: &binds,
            extra_hosts: &hosts,
            limits: c.limits,
            health_interval: c.health_interval,
            mode: c.mode,
            network_mode: c.network_mode,
        })
    }

    /// Inspects a workspace container and the namespace holder it joined (its published port is
    /// the holder's).
    async fn inspect_ws(&self, id: &str) -> Result<Option<LiveContainer>> {
        let docker = &self.inner.docker;
        let port = self.inner.config.bundle.server.port;
        let Some(mut live) = container::inspect(docker, id, Some(port)).await? else {
            return Ok(None);
        };
        let mode = live
            .posture
            .namespaces
            .iter()
            .find(|(k, _)| k == "network")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        if let Some(h) = holder::posture(docker, &mode, port).await? {
            live.host_port = h.host_port;
            live.posture.holder = Some(h);
        }
        Ok(Some(live))
    }

    /// Removes a workspace's namespace holder (after its container).
    async fn remove_holder(&self, workspace_id: &str) -> Result<()> {
        let owner = &self.inner.config.owner;
        holder::remove_of(&self.changes(), owner, Some(workspace_id))
            .await
            .map(|_| ())
    }

    /// This hub's TCP broker route ports (broker and egress proxy), which a holder's rules let
    /// through; none on a socket route.
    fn route_ports(&self) -> Vec<u16> {
        let Some(w) = self
            .inner
            .config
            .broker
            .as_ref()
            .filter(|w| w.transport == RouteKind::Tcp)
        else {
            return vec![];
        };
        [w.broker.tcp_address(), w.broker.egress_tcp_address()]
            .into_iter()
            .flatten()
            .map(|a| a.port())
            .collect()
    }

    /// How this hub makes a workspace's rules helper.
    fn helper<'a>(&'a self, workspace_id: &'a str) -> holder::Helper<'a> {
        let c = &self.inner.config;
        holder::Helper {
            image: &c.image,
            owner: &c.owner,
            workspace: workspace_id,
            keep_id: c.mode.keep_id,
            podman: c.podman,
            limits_enforced: c.mode.limits_enforced,
        }
    }

    /// Where this Po home records the rules loaded into a workspace's holder.
    fn rules_record(&self, workspace_id: &str) -> PathBuf {
        let c = &self.inner.config;
        holder::record_path(&spec::token_file(&c.po_home, &c.owner, workspace_id))
    }

    /// Sees to it that an adopted container's holder has its rules loaded, with this hub's TCP
    /// broker ports let through (the holder carries the ports of the hub that made it): after
    /// an engine restart the holder came back without them, and the container's process waits
    /// at its start gate until they are loaded.
    async fn ensure_rules(&self, id: &str, live: &LiveContainer) -> Result<()> {
        let Some(h) = live.posture.holder.as_ref() else {
            return Ok(());
        };
        let ran = holder::ensure_rules(
            &self.changes(),
            self.helper(id),
            h,
            &self.rules_record(id),
            &self.route_ports(),
        )
        .await?;
        if ran {
            tracing::info!(workspace = %id, holder = %h.id, "network rules loaded into the holder");
        }
        Ok(())
    }

    /// A holder of this owner started (its own restart, or the engine's): loads its rules (its
    /// workspace's process waits at its start gate until then), and restarts its workspace's
    /// container when that one still runs in the namespace of the holder's previous start.
    pub async fn holder_started(&self, workspace_id: &str, holder_id: &str) -> Result<()> {
        if self.readying(holder_id) {
            return Ok(());
        }
        let docker = &self.changes();
        let port = self.inner.config.bundle.server.port;
        let joined = format!("container:{holder_id}");
        let Some(h) = holder::posture(docker, &joined, port).await? else {
            return Ok(());
        };
        if !h.running {
            return Ok(());
        }
        holder::ensure_rules(
            docker,
            self.helper(workspace_id),
            &h,
            &self.rules_record(workspace_id),
            &self.route_ports(),
        )
        .await?;
        for cid in self.ids_of(workspace_id).await? {
            let Some(c) = container::inspect(docker, &cid, None).await? else {
                continue;
            };
            // Started before the holder's current start: in the namespace of its previous one.
            let in_old = c.network_mode() == Some(joined.as_str())
                && c.running()
                && container::rfc3339(&c.started_at) < container::rfc3339(&h.started_at);
            if in_old {
                docker
                    .restart_container(
                        &c.id,
                        None::<bollard::query_parameters::RestartContainerOptions>,
                    )
                    .await
                    .map_err(container::engine_err(
                        docker,
                        format!("restart container {}", c.id),
                    ))?;
                self.inner.events.workspace(
                    workspace_id,
                    WorkspaceChange::Restarted,
                    Some(&c.id),
                    Some(
                        "its network namespace holder restarted: restarted into the new namespace"
                            .into(),
                    ),
                );
            }
        }
        Ok(())
    }

    /// The running holders of this owner, with their workspaces.
    pub async fn running_holders(&self) -> Result<Vec<(String, String)>> {
        let labels = vec![
            format!("{}={}", spec::LABEL_OWNER, self.inner.config.owner),
            spec::LABEL_HOLDER_OF.to_string(),
        ];
        let list = container::list_labelled(&self.inner.docker, labels).await?;
        Ok(list
            .into_iter()
            .filter(|c| c.state.as_ref().map(|s| s.to_string()).as_deref() == Some("running"))
            .filter_map(|c| {
                let ws = c.labels.as_ref()?.get(spec::LABEL_HOLDER_OF)?.clone();
                Some((ws, c.id?))
            })
            .collect())
    }

    /// Marks a holder as being made by this hub, or no longer.
    fn set_readying(&self, holder_id: &str, on: bool) {
        let mut set = self
            .inner
            .readying
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match on {
            true => set.insert(holder_id.to_string()),
            false => set.remove(holder_id),
        };
    }

    /// Whether this hub is making the holder now (its create path loads the rules itself).
    fn readying(&self, holder_id: &str) -> bool {
        self.inner
            .readying
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(holder_id)
    }

    /// Makes (does not start) the workspace's namespace holder on the network `network`;
    /// returns its id and the rules it carries.
    async fn create_holder(
        &self,
        spec: &ContainerSpec,
        network: &str,
    ) -> Result<(String, holder::Rules)> {
        let c = &self.inner.config;
        let docker = &self.changes();
        // An engine network mode (slirp4netns) has no network to inspect: its host side is
        // reached only as host.docker.internal, allowed below for the broker alone.
        let gateway = match spec.per_hub_network {
            true => network::gateway(docker, network).await?,
            false => None,
        };
        let tcp_broker = c.broker.as_ref().filter(|w| w.transport == RouteKind::Tcp);
        let broker_port = tcp_broker.and_then(|w| w.broker.tcp_address().map(|a| a.port()));
        let egress_port = tcp_broker.and_then(|w| w.broker.egress_tcp_address().map(|a| a.port()));
        let mut dns = c.dns_servers.clone();
        if c.podman {
            // aardvark-dns answers on the gateway.
            dns.extend(gateway);
        }
        let input = RulesInput {
            mode: c.network_mode,
            gateway,
            dns,
            host_addresses: c.host_addresses.clone(),
            broker_port,
            egress_port,
        };
        let broker_host = broker_port.map(|_| crate::broker::server::CONTAINER_HOST);
        let rules = holder::Rules::of(&input, broker_host);
        let id = holder::create(docker, spec, &rules, c.podman, network).await?;
        Ok((id, rules))
    }

    /// The per-hub network's id: found or made once, again after `fresh` (it was gone).
    async fn network(&self, fresh: bool) -> Result<String> {
        let mut cached = self.inner.network.lock().await;
        if let (Some(id), false) = (cached.as_ref(), fresh) {
            return Ok(id.clone());
        }
        let id = network::ensure(&self.changes(), &self.inner.config.owner).await?;
        *cached = Some(id.clone());
        Ok(id)
    }

    /// Creates the container on the per-hub network; when another hub of the owner removed
    /// the network meanwhile, makes it again and tries once more.
    async fn create_on_network(&self, spec: &ContainerSpec) -> Result<Created> {
        let docker = &self.changes();
        let podman = self.inner.config.podman;
        // Looked up afresh for every create: another hub of the owner may have removed it, and
        // the engine only notices a missing network at start. An engine network mode
        // (slirp4netns for the TCP route on rootless Podman) is the holder's network instead.
        let network = match spec.per_hub_network {
            true => self.network(true).await?,
            false => spec.network.clone(),
        };
        if container::inspect(&self.inner.docker, &spec.name, None)
            .await?
            .is_some()
        {
            return Ok(Created::NameTaken);
        }
        let (holder, rules) = match self.create_holder(spec, &network).await {
            // The network went meanwhile (another hub of the owner removed it): made again.
            Err(e) if e.to_string().contains("network") && e.to_string().contains("not found") => {
                let network = self.network(true).await?;
                self.create_holder(spec, &network).await?
            }
            other => other?,
        };
        // The container is created while the holder starts and its helper loads the rules; it
        // starts only after both (`create_steps`), and its process waits at its start gate
        // for them besides.
        let joined = format!("container:{holder}");
        let workspace = spec
            .labels
            .get(spec::LABEL_WORKSPACE)
            .cloned()
            .unwrap_or_default();
        let ports = self.route_ports();
        self.set_readying(&holder, true);
        let (ready, created) = tokio::join!(
            holder::ready(docker, self.helper(&workspace), &holder, &rules, &ports),
            container::create(docker, spec, podman, &joined)
        );
        if let Ok(Some(started_at)) = &ready {
            holder::write_record(
                &self.rules_record(&workspace),
                &holder::record_with("", &holder, started_at, &ports),
            );
        }
        self.set_readying(&holder, false);
        match (ready, created) {
            (Ok(_), Ok(Created::New(id))) => Ok(Created::New(id)),
            (ready, created) => {
                if let Ok(Created::New(id)) = &created {
                    let _ = container::stop_and_remove(docker, id).await;
                }
                let _ = holder::remove(docker, &holder).await;
                ready?;
                created
            }
        }
    }

    /// Grants a container its broker route and tokens, derived from its token file so a hub
    /// that adopts it later can honour them again. `None` when the broker is off.
    fn grant_for(&self, workspace_id: &str) -> Result<Option<crate::broker::server::Grant>> {
        let c = &self.inner.config;
        let Some(w) = &c.broker else { return Ok(None) };
        let token_path = spec::token_file(&c.po_home, &c.owner, workspace_id);
        let secret = std::fs::read_to_string(&token_path).map_err(|e| {
            let doing = format!(
                "cannot read its token file {} for the broker grant",
                token_path.display()
            );
            Error::container_caused(workspace_id, doing, e)
        })?;
        let secret = Secret::new(secret.trim());
        // The same token file and a grant still in force: keep it. A new grant would replace
        // the socket under the container's keep-alive connections to the old one.
        if let Some((grant, from)) = self
            .inner
            .grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(workspace_id)
            && from.expose() == secret.expose()
            && w.broker.grant_live(&grant.id)
        {
            return Ok(Some(grant.clone()));
        }
        let owner = Some((c.user.uid, c.user.gid));
        let request = GrantRequest {
            workspace: workspace_id.to_string(),
            providers: None,
            route: w.transport,
            owner,
            container_socket: Some(format!("{BROKER_MOUNT}/broker.sock")),
            container_host: None,
            secret: Some(secret.clone()),
            socket_folder: Some(w.socket_folder(&c.owner, workspace_id)),
        };
        if w.transport == RouteKind::Socket && !self.serves_broker(workspace_id)? {
            // Another hub on this socket folder serves the container: its tokens are the same
            // (from the same token file); this hub takes over when that one is gone.
            let grant = w.broker.unbound_grant(request)?;
            return Ok((!grant.providers.is_empty() || w.broker.egress_on()).then_some(grant));
        }
        let grant = w.broker.grant(request)?;
        if grant.providers.is_empty() && !w.broker.egress_on() {
            // No key on the host that the broker carries and no egress proxy: nothing to hand
            // the container.
            w.broker.revoke(&grant.id);
            return Ok(None);
        }
        let previous = self
            .inner
            .grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(workspace_id.to_string(), (grant.clone(), secret));
        if let Some((old, _)) = previous
            && old.id != grant.id
        {
            w.broker.revoke(&old.id);
        }
        Ok(Some(grant))
    }

    /// Removes a container that holds the workspace's deterministic name without being one to
    /// adopt, with a `removed` event saying why.
    async fn remove_name_holder(
        &self,
        workspace_id: &str,
        spec: &ContainerSpec,
        live: &LiveContainer,
        why: &str,
    ) -> Result<()> {
        self.stop_and_remove(&live.id, workspace_id).await?;
        let reason = format!(
            "container {} held the name {} and {why}",
            short_id(&live.id),
            spec.name
        );
        self.inner.events.workspace(
            workspace_id,
            WorkspaceChange::Removed,
            Some(&live.id),
            Some(reason),
        );
        Ok(())
    }

    /// Whether this hub serves the workspace's broker socket: it holds the workspace's broker
    /// lock, or takes it now. Either way a watch runs from then on (see [`BrokerOwner`]).
    fn serves_broker(&self, workspace_id: &str) -> Result<bool> {
        let Some(w) = &self.inner.config.broker else {
            return Ok(false);
        };
        let mut owners = self
            .inner
            .broker_owners
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(o) = owners.get(workspace_id)
            && o.lock.is_some()
        {
            return Ok(true);
        }
        let folder = w.socket_folder(&self.inner.config.owner, workspace_id);
        let path = folder.with_extension("lock");
        let lock = crate::sandbox::locks::HostLock::try_acquire(&path).map_err(|e| {
            let doing = format!("cannot open its broker lock {}", path.display());
            Error::container_caused(workspace_id, doing, e)
        })?;
        let serves = lock.is_some();
        match owners.get_mut(workspace_id) {
            Some(o) => o.lock = lock,
            None => {
                let watch = tokio::spawn(watch_broker(
                    Arc::downgrade(&self.inner),
                    workspace_id.to_string(),
                ));
                owners.insert(workspace_id.to_string(), BrokerOwner { lock, watch });
            }
        }
        Ok(serves)
    }

    /// Ends a workspace's broker grant and removes its socket folder.
    fn revoke_for(&self, workspace_id: &str) {
        let id = self
            .inner
            .grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(workspace_id);
        let Some(w) = &self.inner.config.broker else {
            return;
        };
        if let Some((grant, _)) = id {
            w.broker.revoke(&grant.id);
        }
        let mut owners = self
            .inner
            .broker_owners
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let served = owners.get(workspace_id).is_some_and(|o| o.lock.is_some());
        let folder = w.socket_folder(&self.inner.config.owner, workspace_id);
        // A socket another hub serves is that hub's to remove; this hub's goes before its lock
        // does, so a hub taking over never loses its fresh socket.
        if served || !folder.with_extension("lock").exists() {
            let _ = std::fs::remove_file(folder.join("broker.sock"));
            let _ = std::fs::remove_dir(&folder);
        }
        if let Some(o) = owners.remove(workspace_id) {
            o.watch.abort();
        }
    }

    fn report(
        &self,
        live: &LiveContainer,
        adopted: bool,
        replaced_reason: Option<String>,
    ) -> WorkspaceContainer {
        let c = &self.inner.config;
        let id = live
            .labels
            .get(LABEL_WORKSPACE)
            .cloned()
            .unwrap_or_default();
        WorkspaceContainer {
            token_file: spec::token_file(&c.po_home, &c.owner, &id)
                .to_string_lossy()
                .into_owned(),
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
            host_port: live.host_port,
            url: live.host_port.map(|p| format!("http://127.0.0.1:{p}")),
            adopted,
            replaced_reason,
            created: live.created.clone(),
            posture: ContainerPosture::from(&live.posture),
        }
    }

    /// Ids of this owner's containers for one workspace (any state).
    async fn ids_of(&self, id: &str) -> Result<Vec<String>> {
        container::list_ids(
            &self.inner.docker,
            &[
                (LABEL_OWNER, &self.inner.config.owner),
                (LABEL_WORKSPACE, id),
            ],
        )
        .await
    }

    /// Adopts or creates the workspace's container and waits until its server answers.
    /// Concurrent calls for one workspace share one operation.
    pub async fn start(&self, ws: Workspace) -> Result<WorkspaceContainer> {
        self.start_with(ws, None, None).await
    }

    /// As [`start`](Self::start), with the ids of its containers already listed (one list
    /// call serves a whole hub start) and, when that read asked its one container's server its
    /// health path, that ask (awaited after the inspect; see [`Asked`]).
    pub async fn start_with(
        &self,
        ws: Workspace,
        known_ids: Option<Vec<String>>,
        asked: Option<Asked>,
    ) -> Result<WorkspaceContainer> {
        let key = ws.id.clone();
        let this = self.clone();
        let start = move || async move {
            let id = ws.id.clone();
            let result = this.start_uncached(ws, known_ids, asked).await;
            if let Err(e) = &result {
                this.inner.events.workspace(
                    &id,
                    WorkspaceChange::Failed,
                    None,
                    Some(e.to_string()),
                );
            }
            result.map_err(Arc::new)
        };
        let outcome = self.inner.inflight.run(key, start).await;
        outcome.map_err(Error::from_shared)
    }

    async fn start_uncached(
        &self,
        ws: Workspace,
        known_ids: Option<Vec<String>>,
        asked: Option<Asked>,
    ) -> Result<WorkspaceContainer> {
        let events = &self.inner.events;
        events.workspace(&ws.id, WorkspaceChange::Starting, None, None);
        // Processes of one hub on this host take turns per workspace, so a second one adopts
        // what the first made instead of racing it (the container name still arbitrates
        // between hosts).
        let c = &self.inner.config;
        // A tmpfs run flag over this workspace's own mounts is refused before anything is made.
        let spec = self.spec_for(&ws);
        spec.check_run_flags()?;
        let lock_path = spec::token_file(&c.po_home, &c.owner, &ws.id).with_extension("lock");
        let (_lock, uncontended) = self.start_lock(&ws.id, &lock_path).await?;
        // What was read before the lock holds only when nobody else held it meanwhile.
        let asked = asked.filter(|_| uncontended);
        let ids = match known_ids {
            Some(ids) => ids,
            None => self.ids_of(&ws.id).await?,
        };
        let mut replaced_reason = None;
        for cid in ids {
            let Some(live) = self.inspect_ws(&cid).await? else {
                continue;
            };
            if !live.running() {
                // A stopped leftover: it would block the deterministic name.
                self.stop_and_remove(&live.id, &ws.id).await?;
                events.workspace(
                    &ws.id,
                    WorkspaceChange::Removed,
                    Some(&live.id),
                    Some(format!("a leftover container was {}", live.state)),
                );
                continue;
            }
            match spec::check_posture(&spec, &live.posture) {
                Ok(()) => {
                    let answered = match asked {
                        Some(asked) => asked.answered_on(live.host_port).await,
                        None => false,
                    };
                    return self.adopt_live(&ws.id, &spec, live, None, answered).await;
                }
                Err(reason) => {
                    let reason =
                        format!("container {} was not adopted: {reason}", short_id(&live.id));
                    events.workspace(
                        &ws.id,
                        WorkspaceChange::Replaced,
                        Some(&live.id),
                        Some(reason.clone()),
                    );
                    self.stop_and_remove(&live.id, &ws.id).await?;
                    replaced_reason = Some(reason);
                }
            }
        }
        self.create(&ws, &spec, replaced_reason).await
    }

    /// Takes the workspace's start lock; says whether it was free at once.
    async fn start_lock(
        &self,
        id: &str,
        lock_path: &Path,
    ) -> Result<(crate::sandbox::locks::HostLock, bool)> {
        use crate::sandbox::locks::HostLock;
        if let Ok(Some(lock)) = HostLock::try_acquire(lock_path) {
            return Ok((lock, true));
        }
        let wait = self.inner.config.health_timeout + Duration::from_secs(120);
        let lock = HostLock::acquire(lock_path, wait).await.map_err(|e| {
            let doing = format!("cannot take the start lock {}", lock_path.display());
            Error::container_caused(id, doing, e)
        })?;
        Ok((lock, false))
    }

    /// Adopts a running container whose posture matched: its broker grant restored, then its
    /// server's answer awaited (not again when it `answered` just now on its current port).
    async fn adopt_live(
        &self,
        id: &str,
        spec: &ContainerSpec,
        live: LiveContainer,
        replaced: Option<String>,
        answered: bool,
    ) -> Result<WorkspaceContainer> {
        // The adopted container keeps the tokens it was made with: re-derive them.
        if let Err(e) = self.grant_for(id) {
            self.inner.events.workspace(
                id,
                WorkspaceChange::Adopted,
                Some(&live.id),
                Some(format!("its broker grant could not be restored: {e}")),
            );
        }
        self.ensure_rules(id, &live).await?;
        if !answered {
            self.wait_ready(id, spec, &live).await?;
        }
        self.inner
            .events
            .workspace(id, WorkspaceChange::Adopted, Some(&live.id), None);
        Ok(self.report(&live, true, replaced))
    }

    async fn wait_ready(&self, id: &str, spec: &ContainerSpec, live: &LiveContainer) -> Result<()> {
        let c = &self.inner.config;
        let Some(port) = live.host_port else {
            return Err(Error::container(
                id,
                format!("container {} publishes no host port", live.name),
            ));
        };
        if let Err(why) = container::wait_healthy(
            &self.inner.docker,
            &live.id,
            port,
            &c.bundle.server.health_path,
            c.health_timeout,
        )
        .await
        {
            let logs = container::logs_tail(&self.inner.docker, &live.id, 30).await;
            tracing::debug!(workspace = id, %why, "container unhealthy");
            return Err(Error::ContainerUnhealthy {
                workspace: id.into(),
                url: format!("http://127.0.0.1:{port}{}", c.bundle.server.health_path),
                waited_ms: c.health_timeout.as_millis() as u64,
                logs: format!("({why})\n{logs}"),
            });
        }
        let _ = spec;
        Ok(())
    }

    async fn create(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
        replaced_reason: Option<String>,
    ) -> Result<WorkspaceContainer> {
        self.prepare_sandbox_dir(ws)?;
        container::ensure_volumes(&self.changes(), spec).await?;
        let mut made = Rollback::new(self, &ws.id);
        let result = self
            .create_steps(ws, spec, replaced_reason, &mut made)
            .await;
        if result.is_err() {
            made.undo().await;
        }
        result
    }

    /// P exists and holds no stale lock files.
    fn prepare_sandbox_dir(&self, ws: &Workspace) -> Result<()> {
        let p = workspace::sandbox_dir(&self.inner.config.po_home, &ws.id);
        std::fs::create_dir_all(&p).map_err(|e| {
            Error::container_caused(
                &ws.id,
                format_args!("cannot create its sandbox folder {}", p.display()),
                e,
            )
        })?;
        let removed = crate::sandbox::locks::remove_stale_locks(&p).map_err(|e| {
            Error::container_caused(
                &ws.id,
                format_args!("cannot clear stale locks in {}", p.display()),
                e,
            )
        })?;
        if !removed.is_empty() {
            tracing::debug!(workspace = %ws.id, count = removed.len(), "stale locks removed");
        }
        let guards = guards::resolve(&ws.path, &self.inner.config.guarded_paths);
        let made = guards::prepare(&ws.id, &ws.path, &guards)?;
        if !made.is_empty() {
            tracing::info!(workspace = %ws.id, placeholders = ?made, "guarded paths given empty placeholders");
        }
        Ok(())
    }

    /// Token file, broker grant, container (or the winner of a name race, adopted), start,
    /// health; each thing made is recorded in `made` so a failure undoes it.
    async fn create_steps(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
        replaced_reason: Option<String>,
        made: &mut Rollback<'_>,
    ) -> Result<WorkspaceContainer> {
        let c = &self.inner.config;
        let token = spec::token_file(&c.po_home, &c.owner, &ws.id);
        // A fresh token per container; written before create so the mount source exists.
        write_token_file(&token).map_err(|e| {
            Error::container_caused(
                &ws.id,
                format_args!("cannot write its token file {}", token.display()),
                e,
            )
        })?;
        made.token = Some(token);
        made.granted = true;
        let granted_spec = match self.grant_for(&ws.id)? {
            Some(g) => {
                let env: BTreeMap<String, String> = g
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_string()))
                    .collect();
                Some(self.spec_with(ws, &env))
            }
            None => None,
        };
        let spec = granted_spec.as_ref().unwrap_or(spec);
        let id = match self.create_or_adopt(ws, spec).await? {
            Creation::New(id) => id,
            Creation::Adopt(live) => {
                made.disarm();
                return self
                    .adopt_live(&ws.id, spec, *live, replaced_reason, false)
                    .await;
            }
        };
        made.container = Some(id.clone());
        self.start_and_wait(ws, spec, &id, replaced_reason).await
    }

    /// Creates the container; when another process holds its name, waits for that one to
    /// start and hands it back for adoption when it satisfies the spec, or removes it (a
    /// leftover, or drifted) and tries again, at most three times.
    async fn create_or_adopt(&self, ws: &Workspace, spec: &ContainerSpec) -> Result<Creation> {
        let network_gone = || {
            Error::container(
                &ws.id,
                format!(
                    "its network {} was removed while the container was made; start it again",
                    spec.network
                ),
            )
        };
        for _ in 0..2 {
            match self.create_on_network(spec).await? {
                Created::New(id) => return Ok(Creation::New(id)),
                Created::NameTaken => {
                    if let Some(live) = self.settle_name_holder(ws, spec).await? {
                        return Ok(Creation::Adopt(Box::new(live)));
                    }
                }
                Created::NetworkGone => return Err(network_gone()),
            }
        }
        match self.create_on_network(spec).await? {
            Created::New(id) => Ok(Creation::New(id)),
            Created::NetworkGone => Err(network_gone()),
            Created::NameTaken => Err(Error::container(
                &ws.id,
                format!(
                    "the name {} stays taken by another container; remove it (docker rm -f {})",
                    spec.name, spec.name
                ),
            )),
        }
    }

    /// Another process created the container first. Gives it time to start, then returns it
    /// when it runs as it should; removes it when it is a leftover or drifted (`None`).
    async fn settle_name_holder(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
    ) -> Result<Option<LiveContainer>> {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let (holder, why) = match self.inspect_ws(&spec.name).await? {
                None => return Ok(None),
                Some(live) if live.running() => match spec::check_posture(spec, &live.posture) {
                    Ok(()) => return Ok(Some(live)),
                    Err(drift) => (live, format!("was not adopted: {drift}")),
                },
                Some(live) if live.state == "created" && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                Some(live) => {
                    let why = format!("was {}", live.state);
                    (live, why)
                }
            };
            self.remove_name_holder(&ws.id, spec, &holder, &why).await?;
            return Ok(None);
        }
    }

    /// Starts a created container. The engine resolves its network by name at start: while
    /// two hubs race to make the network a duplicate can exist for a moment ("ambiguous"), so
    /// the start is tried again (a few times) while the hub that made the duplicate removes it.
    async fn start_container(&self, id: &str) -> Result<()> {
        let mut tries = 0;
        loop {
            match container::start(&self.changes(), id).await {
                Err(e) if tries < 5 && e.to_string().contains("is ambiguous") => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100 * tries)).await;
                    self.network(true).await?;
                }
                other => return other,
            }
        }
    }

    /// Starts the created container, says so, and waits until its server answers.
    async fn start_and_wait(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
        id: &str,
        replaced_reason: Option<String>,
    ) -> Result<WorkspaceContainer> {
        self.start_container(id).await.map_err(|e| match e {
            e @ Error::EngineTimeout { .. } => e,
            e => Error::container(&ws.id, e.to_string()),
        })?;
        let live = self
            .inspect_ws(id)
            .await?
            .ok_or_else(|| Error::container(&ws.id, "it vanished right after it started"))?;
        self.inner.events.workspace(
            &ws.id,
            WorkspaceChange::Created,
            Some(id),
            replaced_reason.clone(),
        );
        // Unhealthy: the error carries its logs, and the rollback removes it.
        self.wait_ready(&ws.id, spec, &live).await?;
        // It answers: a failed re-read (for the port) keeps the first one rather than undo it.
        let live = match self.inspect_ws(id).await {
            Ok(Some(newer)) => newer,
            _ => live,
        };
        self.inner
            .events
            .workspace(&ws.id, WorkspaceChange::Ready, Some(id), None);
        Ok(self.report(&live, false, replaced_reason))
    }

    /// Adopts the workspace's running container when it still satisfies the spec's security
    /// posture; `None` when there is none. One that drifted is stopped and removed (with an
    /// event saying why) and `None` returned. Never creates.
    pub async fn adopt(&self, id: &str, path: Option<&str>) -> Result<Option<WorkspaceContainer>> {
        workspace::check_id(id)?;
        let ids = self.ids_of(id).await?;
        for cid in ids {
            let Some(live) = self.inspect_ws(&cid).await? else {
                continue;
            };
            if !live.running() {
                continue;
            }
            let ws_path = path
                .map(str::to_string)
                .or_else(|| live.labels.get(LABEL_WORKSPACE_PATH).cloned())
                .unwrap_or_default();
            let ws = workspace::resolve(id, &ws_path)?;
            let spec = self.spec_for(&ws);
            match spec::check_posture(&spec, &live.posture) {
                Ok(()) => {
                    return self
                        .adopt_live(id, &spec, live, None, false)
                        .await
                        .map(Some);
                }
                Err(reason) => {
                    self.stop_and_remove(&live.id, id).await?;
                    // As a stop: its token file and broker grant go with it.
                    self.forget_token(id);
                    self.inner.events.workspace(
                        id,
                        WorkspaceChange::Removed,
                        Some(&live.id),
                        Some(format!("not adopted: {reason}")),
                    );
                }
            }
        }
        Ok(None)
    }

    /// Runs a command in the workspace's running container, attached to this process's standard
    /// streams, in the workspace folder, as the container's user, with its environment. The
    /// container is adopted first (posture checked, its broker grant served by this process
    /// while the command runs). `SANDBOX_NOT_RUNNING` when it has none. Resolves with the exit
    /// code.
    pub async fn exec(
        &self,
        id: &str,
        path: Option<&str>,
        command: Vec<String>,
        tty: bool,
    ) -> Result<i64> {
        workspace::check_id(id)?;
        exec::check_command(&command)?;
        let not_running = || Error::SandboxNotRunning {
            workspace: id.to_string(),
            folder: path.unwrap_or("<folder>").to_string(),
        };
        let container = self.adopt(id, path).await?.ok_or_else(not_running)?;
        let working_dir = container.container_path.clone().ok_or_else(not_running)?;
        let request = exec::ExecRequest {
            command,
            tty,
            working_dir,
            env: self.current_broker_address(id),
        };
        exec::run(&self.inner.docker, &container.container_id, id, request).await
    }

    /// On the TCP route, `PO_BROKER_ADDRESS` of this hub's grant: the port is this hub's, and
    /// an adopted container's environment holds the port of the hub that created it.
    fn current_broker_address(&self, id: &str) -> Vec<String> {
        let grants = self.inner.grants.lock().unwrap_or_else(|e| e.into_inner());
        let Some((grant, _)) = grants.get(id) else {
            return vec![];
        };
        grant
            .env
            .iter()
            .filter(|(k, _)| k.as_str() == "PO_BROKER_ADDRESS")
            .map(|(k, v)| format!("{k}={}", v.expose()))
            .collect()
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
        if !ids.is_empty() {
            self.remove_network_if_unused().await?;
        }
        Ok(!ids.is_empty())
    }

    /// Removes the per-hub network when no container uses it any more (it is made again on the
    /// next need): the owner's last container gone leaves nothing on the engine but volumes.
    async fn remove_network_if_unused(&self) -> Result<()> {
        let mut cached = self.inner.network.lock().await;
        let removed = network::remove_unused(&self.changes(), &self.inner.config.owner).await?;
        if !removed.is_empty() {
            *cached = None;
            tracing::debug!(networks = ?removed, "per-hub network removed");
        }
        Ok(())
    }

    /// After its container is gone: removes the workspace's token file and ends its broker
    /// grant (and the socket, when this hub serves it).
    fn forget_token(&self, id: &str) {
        let c = &self.inner.config;
        let _ = std::fs::remove_file(spec::token_file(&c.po_home, &c.owner, id));
        self.revoke_for(id);
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
        stopped.sort();
        stopped.dedup();
        Ok(stopped)
    }

    /// This hub's owner id.
    pub fn owner(&self) -> &str {
        &self.inner.config.owner
    }

    /// The engine client.
    pub fn docker(&self) -> &Docker {
        &self.inner.docker
    }

    /// The event bus.
    pub fn events(&self) -> &EventBus {
        &self.inner.events
    }

    /// A container of this owner as it is now (by id or name); `None` when it is gone.
    pub async fn current(&self, id: &str) -> Result<Option<WorkspaceContainer>> {
        let live = self.inspect_ws(id).await?;
        Ok(live.map(|l| self.report(&l, false, None)))
    }

    /// Whether the engine answers a ping (within the call bound).
    pub async fn ping(&self) -> bool {
        self.inner.docker.ping().await.is_ok()
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
        known_containers(&self.inner.docker, &self.inner.config.owner).await
    }
}

/// What `create` made so far, undone together when a later step fails: nothing half-done
/// (no container, token file or broker grant of a container that does not run).
struct Rollback<'a> {
    service: &'a ContainerService,
    workspace: &'a str,
    token: Option<PathBuf>,
    granted: bool,
    container: Option<String>,
}

impl<'a> Rollback<'a> {
    fn new(service: &'a ContainerService, workspace: &'a str) -> Self {
        Rollback {
            service,
            workspace,
            token: None,
            granted: false,
            container: None,
        }
    }

    /// Keeps everything: the work was handed to a container that is adopted instead.
    fn disarm(&mut self) {
        self.token = None;
        self.granted = false;
        self.container = None;
    }

    async fn undo(self) {
        if let Some(id) = &self.container {
            let _ = self.service.stop_and_remove(id, self.workspace).await;
        }
        if let Some(token) = &self.token {
            let _ = std::fs::remove_file(token);
        }
        if self.granted {
            self.service.revoke_for(self.workspace);
        }
    }
}

/// What `create_or_adopt` ended with.
enum Creation {
    /// A container this call created (not started yet).
    New(String),
    /// Another process's container that satisfies the spec.
    Adopt(Box<LiveContainer>),
}

/// The short form of a container id, as the engine's CLI shows it.
fn short_id(id: &str) -> &str {
    &id[..12.min(id.len())]
}
