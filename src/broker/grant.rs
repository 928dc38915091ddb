//! Grants: choose the providers (pure), mint their tokens, open the route, register. A grant's
//! tokens are in each provider's shape; its route is a socket of its own or the shared TCP port.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::Semaphore;

use super::egress::{EGRESS_SOCKET, EgressSocket, Scope, basic_credentials, serve_egress};
use super::git;
use super::limits::PER_GRANT_CONNECTIONS;
use super::request::TokenIndex;
use super::routes::{self, ProviderRoute};
use super::secret::Secret;
use super::server::{Broker, GrantState, TokenEntry, hash};
use super::socket::{bind_socket, file_identity};
use crate::error::{Error, Result};
use crate::host::UserIds;
use crate::lock::{Locked, ReadWriteLocked};
use crate::names::vars::{DISABLE_VAR, EGRESS_PROXY_VAR, EGRESS_SOCKET_VAR};

/// How a container on a VM engine reaches the host.
pub const CONTAINER_HOST: &str = "host.docker.internal";

/// How a container reaches the broker: the one route kind every layer shares (a grant's
/// request, the grant's route, the container's `PO_BROKER_SOCKET` / `PO_BROKER_ADDRESS`).
#[napi_derive::napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// A Unix socket of its own, in a 0700 folder, bind-mounted (Linux, native engines).
    Socket,
    /// The broker's loopback TCP port, reached as `host.docker.internal` (VM engines).
    Tcp,
}

impl RouteKind {
    /// `socket` or `tcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteKind::Socket => "socket",
            RouteKind::Tcp => "tcp",
        }
    }

    /// Parses a grant's route option (`transport` in JS): absent is `socket`.
    pub fn parse(value: Option<&str>, option: &str) -> Result<RouteKind> {
        match value {
            None | Some("socket") => Ok(RouteKind::Socket),
            Some("tcp") => Ok(RouteKind::Tcp),
            Some(other) => Err(Error::OptionsInvalid {
                option: option.into(),
                reason: format!("{other:?} is neither 'socket' nor 'tcp'"),
            }),
        }
    }
}

/// The route the container provider gives its containers on `os` with an engine that runs
/// them in a VM (`vm`) or natively: TCP when in a VM (a socket cannot cross into it) and on
/// Windows (which has no Unix sockets to bind-mount), a socket of its own otherwise.
pub fn route_for(os: crate::host::HostOs, vm: bool) -> RouteKind {
    if vm || os == crate::host::HostOs::Windows {
        RouteKind::Tcp
    } else {
        RouteKind::Socket
    }
}

/// What a grant is for.
#[derive(Debug, Clone)]
pub struct GrantRequest {
    /// The workspace id (for audit).
    pub workspace: String,
    /// Providers to broker; `None`: every carried provider with a key on the host.
    pub providers: Option<Vec<String>>,
    /// The route.
    pub route: RouteKind,
    /// `uid:gid` that must own the socket and its folder (the container's user).
    pub owner: Option<(u32, u32)>,
    /// The socket path inside the container, for `PO_BROKER_SOCKET` (the workspace service uses
    /// `/run/po-broker/broker.sock`); default: the host path, for a process on the host.
    pub container_socket: Option<String>,
    /// The host name a TCP route is reached by (default [`CONTAINER_HOST`]).
    pub container_host: Option<String>,
    /// Derive tokens from this secret (a container's token file) instead of at random, so a
    /// hub that adopts the container after a restart can honour them again.
    pub secret: Option<Secret>,
    /// A stable folder for the socket instead of a fresh one (its path must not change for an
    /// adopted container).
    pub socket_folder: Option<PathBuf>,
    /// The URLs of the workspace's git remotes (its pushes may go to those repositories).
    pub git_remotes: Vec<String>,
}

impl GrantRequest {
    /// A caller's request (`grant()` in JS): `transport` parsed as [`RouteKind::parse`] and
    /// `user` as `uid:gid`, both `OPTIONS_INVALID` naming the option when bad; the rest default.
    pub fn given(
        workspace: String,
        providers: Option<Vec<String>>,
        transport: Option<&str>,
        user: Option<&str>,
    ) -> Result<GrantRequest> {
        let route = RouteKind::parse(transport, "transport")?;
        let owner = user.map(|u| UserIds::parse(u, "user")).transpose()?;
        Ok(GrantRequest {
            workspace,
            providers,
            route,
            owner: owner.map(|ids| (ids.uid, ids.gid)),
            container_socket: None,
            container_host: None,
            secret: None,
            socket_folder: None,
            git_remotes: Vec::new(),
        })
    }
}

/// A grant's route, as set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantRoute {
    /// The grant's own socket: bind-mount `host_dir` so `container_socket` is the socket.
    Socket {
        host_socket: PathBuf,
        host_dir: PathBuf,
        container_socket: String,
    },
    /// The broker's TCP port.
    Tcp {
        address: SocketAddr,
        container_address: String,
    },
}

/// What a container gets.
#[derive(Clone)]
pub struct Grant {
    /// The grant id (not a secret).
    pub id: String,
    /// The workspace.
    pub workspace: String,
    /// The providers brokered.
    pub providers: Vec<String>,
    /// The environment to hand the container: `PO_BROKER_PROVIDERS`, one route variable, and
    /// each provider's key variable set to its token.
    pub env: BTreeMap<String, Secret>,
    /// The route (`None` when the broker is off).
    pub route: Option<GrantRoute>,
    /// Host credentials that stay on the host, with reasons.
    pub withheld: Vec<(String, String)>,
}

impl GrantRoute {
    /// Which kind of route this is.
    pub fn kind(&self) -> RouteKind {
        match self {
            GrantRoute::Socket { .. } => RouteKind::Socket,
            GrantRoute::Tcp { .. } => RouteKind::Tcp,
        }
    }

    /// A socket route's socket on the host.
    pub fn host_socket(&self) -> Option<String> {
        match self {
            GrantRoute::Socket { host_socket, .. } => Some(host_socket.display().to_string()),
            GrantRoute::Tcp { .. } => None,
        }
    }

    /// A socket route's folder on the host, to bind-mount.
    pub fn host_dir(&self) -> Option<String> {
        match self {
            GrantRoute::Socket { host_dir, .. } => Some(host_dir.display().to_string()),
            GrantRoute::Tcp { .. } => None,
        }
    }

    /// A socket route's socket path inside the container.
    pub fn container_socket(&self) -> Option<String> {
        match self {
            GrantRoute::Socket {
                container_socket, ..
            } => Some(container_socket.clone()),
            GrantRoute::Tcp { .. } => None,
        }
    }

    /// A TCP route's `127.0.0.1:<port>`.
    pub fn address(&self) -> Option<String> {
        match self {
            GrantRoute::Tcp { address, .. } => Some(address.to_string()),
            GrantRoute::Socket { .. } => None,
        }
    }

    /// What a container on a TCP route dials.
    pub fn container_address(&self) -> Option<String> {
        match self {
            GrantRoute::Tcp {
                container_address, ..
            } => Some(container_address.clone()),
            GrantRoute::Socket { .. } => None,
        }
    }
}

impl Grant {
    /// The environment to hand the container, its tokens in the clear.
    pub fn exposed_env(&self) -> HashMap<String, String> {
        let env = self.env.iter();
        env.map(|(k, v)| (k.clone(), v.expose().to_string()))
            .collect()
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("id", &self.id)
            .field("workspace", &self.workspace)
            .field("providers", &self.providers)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("route", &self.route)
            .finish()
    }
}

/// A provider chosen for a grant: its route, the host variable its key came from, the key.
pub struct Chosen {
    pub route: &'static ProviderRoute,
    pub var: &'static str,
    pub key: Secret,
}

/// Host credentials kept on the host: (variable, reason).
pub type Withheld = Vec<(String, String)>;

/// Which providers a grant carries: the asked ones (each must be carried; one without a key
/// here is withheld with its reason), or every carried one with a key; each once. Every
/// upstream must be valid host configuration. Also returns the withheld credentials.
pub fn choose(
    asked: Option<&[String]>,
    env: &HashMap<String, String>,
) -> Result<(Vec<Chosen>, Withheld)> {
    let mut withheld = routes::withheld(env);
    let mut chosen: Vec<Chosen> = Vec::new();
    let candidates: Vec<&'static ProviderRoute> = match asked {
        Some(list) => list
            .iter()
            .map(|name| {
                routes::find(name).ok_or_else(|| Error::OptionsInvalid {
                    option: "providers".into(),
                    reason: format!(
                        "{name:?} is not a provider the broker carries (see docs/security.md, Providers)"
                    ),
                })
            })
            .collect::<Result<_>>()?,
        None => routes::providers().iter().collect(),
    };
    for route in candidates {
        if chosen.iter().any(|c| c.route.id == route.id) {
            continue;
        }
        match routes::host_key(route, env) {
            Some((var, key)) => chosen.push(Chosen {
                route,
                var,
                key: Secret::new(key),
            }),
            None if asked.is_some() => withheld.push((
                route.key_vars[0].to_string(),
                format!("no {} key is set on the host", route.id),
            )),
            None => {}
        }
    }
    for c in &chosen {
        routes::upstream(c.route, env)?;
    }
    withheld.sort();
    withheld.dedup();
    Ok((chosen, withheld))
}

/// With the broker off every host key is withheld, with the reason.
pub fn withheld_when_off(env: &HashMap<String, String>) -> Withheld {
    let mut withheld = routes::withheld(env);
    for r in routes::providers() {
        if let Some((var, _)) = routes::host_key(r, env) {
            withheld.push((
                var.to_string(),
                format!("{DISABLE_VAR}=0 turns the credential broker off"),
            ));
        }
    }
    withheld.sort();
    withheld.dedup();
    withheld
}

/// A grant with the broker off: nothing reaches the container, every host key stays here.
fn grant_when_off(id: String, workspace: String, env: &HashMap<String, String>) -> Grant {
    Grant {
        id,
        workspace,
        providers: vec![],
        env: BTreeMap::new(),
        route: None,
        withheld: withheld_when_off(env),
    }
}

/// The chosen providers' tokens (derived from `secret`, or random), the container's
/// environment (`<KEY_VAR>` = token, `PO_BROKER_PROVIDERS`) and the token entries to register.
/// Providers sharing one key variable share one token, good for each of them.
pub fn mint(
    grant: &str,
    chosen: &[Chosen],
    secret: Option<&Secret>,
) -> Result<(BTreeMap<String, Secret>, Vec<TokenEntry>)> {
    let mut env: BTreeMap<String, Secret> = BTreeMap::new();
    let mut entries: Vec<TokenEntry> = Vec::new();
    for c in chosen {
        if let Some(token) = env.get(c.var) {
            let entry = entries
                .iter_mut()
                .find(|e| e.token == *token)
                .expect("every token in the env has its entry");
            entry.providers.push(c.route);
            continue;
        }
        let token = match secret {
            Some(secret) => derived_token(c.route, c.key.expose(), secret, c.route.id),
            None => Secret::new(routes::mint_token(c.route, c.key.expose())?),
        };
        env.insert(c.var.to_string(), token.clone());
        entries.push(TokenEntry {
            grant: grant.to_string(),
            providers: vec![c.route],
            token,
            git: false,
            registry: false,
        });
    }
    let providers: Vec<&str> = chosen.iter().map(|c| c.route.id).collect();
    env.insert(
        "PO_BROKER_PROVIDERS".into(),
        Secret::new(providers.join(",")),
    );
    Ok((env, entries))
}

/// A token derived from a container's secret: the provider's prefix, then
/// HMAC-SHA256(secret, provider) as hex. Stable for the container's life, unguessable without
/// the secret (which stays in the host's 0600 token file and the container).
pub fn derived_token(
    route: &ProviderRoute,
    real_key: &str,
    secret: &Secret,
    provider: &str,
) -> Secret {
    let label = [b"po-broker-token/1/", provider.as_bytes()].concat();
    Secret::new(format!(
        "{}{}",
        route.token_shape.prefix(real_key),
        keyed_hex(secret, &label)
    ))
}

/// HMAC-SHA256(secret, label) as 64 hex digits: what the container's secret derives under
/// `label`.
fn keyed_hex(secret: &Secret, label: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes any key length");
    mac.update(label);
    hex::encode(mac.finalize().into_bytes())
}

/// A route as opened: what the container is told, and what the broker keeps.
struct OpenRoute {
    route: GrantRoute,
    /// The container's route variable and its value.
    var: (&'static str, String),
    socket_dir: Option<PathBuf>,
    owns_dir: bool,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The egress socket: its container path, listener task and file identity.
    egress: Option<EgressSocket>,
    /// The TCP route's egress proxy URL for the container, and the hash of its credentials.
    egress_tcp: Option<(String, [u8; 32])>,
}

impl Broker {
    /// Grants a container its credentials. Must run inside a Tokio runtime (the socket route
    /// starts a listener). With the broker off, the grant carries nothing.
    pub fn grant(&self, request: GrantRequest) -> Result<Grant> {
        crate::names::ids::check_id(&request.workspace)?;
        let env = &self.inner.host_env;
        let id = format!(
            "g{}-{}",
            self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            &hex::encode(super::server::random_bytes()?)[..8]
        );
        if !self.inner.enabled {
            return Ok(grant_when_off(id, request.workspace, env));
        }
        let (chosen, withheld) = choose(request.providers.as_deref(), env)?;
        let (mut grant_env, entries) = mint(&id, &chosen, request.secret.as_ref())?;
        let connections = Arc::new(Semaphore::new(PER_GRANT_CONNECTIONS));
        let open = self.open_route(&request, &id, &connections)?;
        grant_env.insert(open.var.0.into(), Secret::new(open.var.1.clone()));
        if let Some((url, _)) = &open.egress_tcp {
            grant_env.insert(EGRESS_PROXY_VAR.into(), Secret::new(url.clone()));
        }
        if let Some(egress) = &open.egress {
            grant_env.insert(
                EGRESS_SOCKET_VAR.into(),
                Secret::new(egress.container.clone()),
            );
        }
        let remotes = match &self.inner.git {
            Some(git) => git::remotes_on(&request.git_remotes, &git.policy().hosts),
            None => Vec::new(),
        };
        let route = self.register(&id, &request.workspace, entries, open, connections.clone());
        // The service routes once the grant is recorded, so a failure (or a close meanwhile)
        // revokes all of it.
        let services = self.service_grant(&request, &id, &route, &connections, &mut grant_env);
        let (extra, sockets) = match services {
            Ok(s) => s,
            Err(e) => {
                self.revoke(&id);
                return Err(e);
            }
        };
        if !self.add_tokens(&id, extra, (remotes, sockets)) {
            return Err(Error::broker("the broker closed while the grant was made"));
        }
        Ok(Grant {
            id,
            workspace: request.workspace,
            providers: chosen.iter().map(|c| c.route.id.to_string()).collect(),
            env: grant_env,
            route: Some(route),
            withheld,
        })
    }

    /// What a grant would hand the container (its tokens, derived from `request.secret` or
    /// random, `PO_BROKER_PROVIDERS` and the socket route variable), without opening a route
    /// or making the tokens live here: for a container whose socket another hub serves.
    pub fn unbound_grant(&self, request: GrantRequest) -> Result<Grant> {
        crate::names::ids::check_id(&request.workspace)?;
        let env = &self.inner.host_env;
        if !self.inner.enabled {
            return Ok(grant_when_off("unbound".into(), request.workspace, env));
        }
        let (chosen, withheld) = choose(request.providers.as_deref(), env)?;
        let (mut grant_env, _) = mint("unbound", &chosen, request.secret.as_ref())?;
        if let Some(socket) = &request.container_socket {
            grant_env.insert("PO_BROKER_SOCKET".into(), Secret::new(socket.clone()));
            let route = GrantRoute::Socket {
                host_socket: PathBuf::new(),
                host_dir: PathBuf::new(),
                container_socket: socket.clone(),
            };
            self.git_grant(&request, "unbound", &route, &mut grant_env)?;
            let none = Arc::new(Semaphore::new(0));
            self.registry_grant(&request, "unbound", &route, &none, &mut grant_env)?;
            if self.inner.egress.is_some()
                && let Some((folder, _)) = socket.rsplit_once('/')
            {
                grant_env.insert(
                    EGRESS_SOCKET_VAR.into(),
                    Secret::new(format!("{folder}/{EGRESS_SOCKET}")),
                );
            }
        }
        Ok(Grant {
            id: "unbound".into(),
            workspace: request.workspace,
            providers: chosen.iter().map(|c| c.route.id.to_string()).collect(),
            env: grant_env,
            route: None,
            withheld,
        })
    }

    /// The TCP port (shared), or the grant's own socket with its listener.
    fn open_route(
        &self,
        request: &GrantRequest,
        id: &str,
        connections: &Arc<Semaphore>,
    ) -> Result<OpenRoute> {
        match request.route {
            RouteKind::Tcp => {
                let address = self.tcp_address().ok_or_else(|| {
                    Error::broker("TCP grants need a broker started with tcp: true")
                })?;
                let host = request.container_host.as_deref().unwrap_or(CONTAINER_HOST);
                let container_address = format!("{host}:{}", address.port());
                let egress_tcp = self.open_egress_tcp(request, id, host)?;
                Ok(OpenRoute {
                    var: ("PO_BROKER_ADDRESS", container_address.clone()),
                    route: GrantRoute::Tcp {
                        address,
                        container_address,
                    },
                    socket_dir: None,
                    owns_dir: false,
                    task: None,
                    egress: None,
                    egress_tcp,
                })
            }
            RouteKind::Socket => {
                let (dir, owns_dir) = match &request.socket_folder {
                    Some(d) => (d.clone(), false),
                    None => (self.inner.socket_dir.join(id), true),
                };
                let socket = dir.join("broker.sock");
                let listener = bind_socket(&dir, &socket, request.owner)?;
                // Without a container path the env is for a process on this host.
                let container_socket = request
                    .container_socket
                    .clone()
                    .unwrap_or_else(|| socket.display().to_string());
                let this = self.clone();
                let grant_id = id.to_string();
                let connections = connections.clone();
                let task = tokio::spawn(async move {
                    this.serve_unix(listener, (grant_id, None), connections)
                        .await
                });
                let egress = match self.open_egress(request, id, &dir, &container_socket) {
                    Ok(egress) => egress,
                    Err(e) => {
                        task.abort();
                        return Err(e);
                    }
                };
                Ok(OpenRoute {
                    var: ("PO_BROKER_SOCKET", container_socket.clone()),
                    route: GrantRoute::Socket {
                        host_socket: socket,
                        host_dir: dir.clone(),
                        container_socket,
                    },
                    socket_dir: Some(dir),
                    owns_dir,
                    task: Some(task),
                    egress,
                    egress_tcp: None,
                })
            }
        }
    }

    /// The grant's egress socket beside its broker socket, when the broker has an egress
    /// policy: bound, served, and named for the container.
    fn open_egress(
        &self,
        request: &GrantRequest,
        id: &str,
        dir: &std::path::Path,
        container_socket: &str,
    ) -> Result<Option<EgressSocket>> {
        let Some(policy) = self.inner.egress.clone() else {
            return Ok(None);
        };
        let socket = dir.join(EGRESS_SOCKET);
        let listener = bind_socket(dir, &socket, request.owner)?;
        let bound = file_identity(&socket);
        let container = match container_socket.rsplit_once('/') {
            Some((folder, _)) => format!("{folder}/{EGRESS_SOCKET}"),
            None => socket.display().to_string(),
        };
        let audit = self.inner.audit.clone();
        let scope = Arc::new(Scope::new(audit, policy, id, &request.workspace));
        let task = tokio::spawn(serve_egress(listener, scope));
        Ok(Some(EgressSocket {
            container,
            task,
            bound,
        }))
    }

    /// The TCP route's egress credentials for a grant, when the broker has an egress policy:
    /// registered, and the proxy URL the container uses (`http://po:<token>@host:port`). The
    /// token derives from the container's secret when there is one, like its broker tokens.
    fn open_egress_tcp(
        &self,
        request: &GrantRequest,
        id: &str,
        host: &str,
    ) -> Result<Option<(String, [u8; 32])>> {
        let (Some(policy), Some(address)) = (self.inner.egress.clone(), self.egress_tcp_address())
        else {
            return Ok(None);
        };
        let token = match &request.secret {
            Some(secret) => keyed_hex(secret, b"po-egress-token/1"),
            None => hex::encode(super::server::random_bytes()?),
        };
        let h = hash(&basic_credentials(&token));
        let scope = Scope::new(self.inner.audit.clone(), policy, id, &request.workspace);
        self.inner
            .egress_auth
            .write_locked()
            .insert(h, Arc::new(scope));
        Ok(Some((
            format!("http://po:{token}@{host}:{}", address.port()),
            h,
        )))
    }

    /// Makes the grant's tokens live and records the grant; hands back its route.
    fn register(
        &self,
        id: &str,
        workspace: &str,
        entries: Vec<TokenEntry>,
        open: OpenRoute,
        connections: Arc<Semaphore>,
    ) -> GrantRoute {
        let socket_file = match &open.route {
            GrantRoute::Socket { host_socket, .. } => file_identity(host_socket),
            GrantRoute::Tcp { .. } => None,
        };
        let hashes: Vec<[u8; 32]> = {
            let mut tokens = self.inner.tokens.write_locked();
            entries.into_iter().map(|e| tokens.insert(e)).collect()
        };
        self.inner.grants.locked().insert(
            id.to_string(),
            GrantState {
                workspace: workspace.to_string(),
                hashes,
                socket_dir: open.socket_dir,
                socket_file,
                owns_dir: open.owns_dir,
                task: open.task,
                connections,
                egress: open.egress,
                egress_auth: open.egress_tcp.map(|(_, h)| h),
                git_remotes: Vec::new(),
                registry_sockets: Vec::new(),
            },
        );
        open.route
    }
}

impl super::server::Tokens {
    /// Makes `entry` live (the placement check knows its token too); its hash.
    fn insert(&mut self, entry: TokenEntry) -> [u8; 32] {
        let h = hash(entry.token.expose());
        if let Some(key) = TokenIndex::key(entry.token.expose()) {
            self.index.insert(key);
        }
        self.by_hash.insert(h, entry);
        h
    }
}

impl Broker {
    /// The git and registry routes' part of a grant: their token entries and the registry
    /// sockets (the container's variables go to `env`).
    fn service_grant(
        &self,
        request: &GrantRequest,
        id: &str,
        route: &GrantRoute,
        connections: &Arc<Semaphore>,
        env: &mut BTreeMap<String, Secret>,
    ) -> Result<(Vec<TokenEntry>, super::registry::Sockets)> {
        let mut entries: Vec<TokenEntry> = self
            .git_grant(request, id, route, env)?
            .into_iter()
            .collect();
        let (entry, sockets) = self.registry_grant(request, id, route, connections, env)?;
        entries.extend(entry);
        Ok((entries, sockets))
    }

    /// Makes a recorded grant's service tokens live and gives it its remotes and registry
    /// sockets; `false` (the sockets closed) when the grant is gone already.
    fn add_tokens(
        &self,
        id: &str,
        entries: Vec<TokenEntry>,
        (remotes, sockets): (Vec<String>, super::registry::Sockets),
    ) -> bool {
        let mut grants = self.inner.grants.locked();
        let Some(g) = grants.get_mut(id) else {
            super::registry::close_sockets(None, sockets);
            return false;
        };
        let mut tokens = self.inner.tokens.write_locked();
        g.hashes
            .extend(entries.into_iter().map(|e| tokens.insert(e)));
        g.git_remotes = remotes;
        g.registry_sockets = sockets;
        true
    }

    /// The grant's git placeholder and the container's git configuration for the route, when
    /// the broker serves the git route: the token entry to register.
    fn git_grant(
        &self,
        request: &GrantRequest,
        id: &str,
        route: &GrantRoute,
        env: &mut BTreeMap<String, Secret>,
    ) -> Result<Option<TokenEntry>> {
        let Some(state) = &self.inner.git else {
            return Ok(None);
        };
        let hosts = state.policy().hosts.clone();
        if hosts.is_empty() {
            return Ok(None);
        }
        let token = service_token(
            request.secret.as_ref(),
            b"po-git-token/1",
            git::TOKEN_PREFIX,
        )?;
        let base = match route {
            GrantRoute::Socket { .. } => {
                env.insert(
                    git::PORT_VAR.into(),
                    Secret::new(git::BRIDGE_PORT.to_string()),
                );
                format!("http://127.0.0.1:{}", git::BRIDGE_PORT)
            }
            GrantRoute::Tcp {
                container_address, ..
            } => format!("http://{container_address}"),
        };
        for (k, v) in git::container_env(&base, &hosts) {
            env.insert(k, Secret::new(v));
        }
        env.insert(git::TOKEN_VAR.into(), token.clone());
        Ok(Some(TokenEntry {
            grant: id.to_string(),
            providers: vec![],
            token,
            git: true,
            registry: false,
        }))
    }
}

/// A service placeholder: `prefix` and 64 hex digits, derived from the container's secret
/// under `label` (so an adopting hub honours it again) or random.
pub fn service_token(secret: Option<&Secret>, label: &[u8], prefix: &str) -> Result<Secret> {
    let tail = match secret {
        Some(secret) => keyed_hex(secret, label),
        None => {
            let random = super::server::random_bytes;
            hex::encode([random()?, random()?].concat())
        }
    };
    Ok(Secret::new(format!("{prefix}{tail}")))
}

mod view;
pub use view::BrokerGrant;

#[cfg(test)]
mod tests;
