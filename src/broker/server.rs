//! The broker itself: its state (live tokens, grants, listeners), the connections it serves
//! (each grant's socket, the shared TCP port; bounded per grant) and the request path, which
//! runs the rules of [`super::request`] in order, then has a [`Forwarder`] forward it. Keys
//! and tokens live only in [`Secret`]s.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::audit::{Audit, AuditListener, EgressListener};
use super::egress::{
    EGRESS_SOCKET, EgressPolicy, EgressSocket, LiveEgress, Scope, serve_egress_tcp,
};
use super::forward::{Admitted, Forwarder, UpstreamClient};
use super::framing::{FaultFlag, MAX_HEAD_BYTES, Watched};
use super::git::{GitPolicy, GitState};
use super::limits::{HEAD_TIMEOUT, MAX_TCP_CONNECTIONS};
use super::policy::ForwardPolicy;
use super::registry::Registry;
use super::reply::{Failure, ResponseBody, plain};
use super::request::{self, Refusal, TokenIndex};
use super::routes::{self, ProviderRoute};
use super::secret::Secret;
use super::socket::file_identity;
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::lock::{Locked, ReadWriteLocked};
use crate::names::vars::DISABLE_VAR;

pub use super::audit::AuditEvent;
pub use super::grant::{CONTAINER_HOST, Grant, GrantRequest, RouteKind};

/// How the broker starts.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// The host environment: provider keys, `<PROVIDER>_BASE_URL` overrides, `PO_SANDBOX_BROKER`.
    pub host_env: HashMap<String, String>,
    /// Where per-grant socket folders are made.
    pub socket_dir: PathBuf,
    /// Also listen on `127.0.0.1:<ephemeral>` for TCP grants (VM engines).
    pub tcp: bool,
    /// Serve each socket grant an egress proxy with this policy (allowlist mode).
    pub egress: Option<EgressPolicy>,
    /// Screen request bodies for URLs a provider would fetch (the `none` and `allowlist`
    /// modes; see [`super::screen`]).
    pub fetch_screen: bool,
    /// Serve the git route with this policy ([`super::git`]).
    pub git: Option<GitPolicy>,
    /// Serve these registry routes ([`super::registry`]).
    pub registries: Vec<Registry>,
}

impl BrokerOptions {
    /// What a `startCredentialBroker` caller gives: its environment record (as
    /// [`crate::host::given_vars`] reads it), `socketDir` (checked, defaulted as
    /// [`HostEnv::broker_socket_dir`]) and `tcp` (default off); no egress proxy; the body
    /// screen on when the record's `PO_SANDBOX_NETWORK` is `none` or `allowlist` (a bad value
    /// is `OPTIONS_INVALID`).
    pub fn given(
        env: Option<HashMap<String, Option<String>>>,
        socket_dir: Option<&str>,
        tcp: Option<bool>,
    ) -> Result<BrokerOptions> {
        let host = HostEnv::given(env);
        let mode = host.vars().get(crate::names::vars::NETWORK_VAR);
        let mode = crate::names::network::NetworkMode::resolve(None, mode.map(String::as_str))?;
        Ok(BrokerOptions {
            socket_dir: host.broker_socket_dir(socket_dir, "socketDir")?,
            host_env: host.vars().clone(),
            tcp: tcp.unwrap_or(false),
            egress: None,
            fetch_screen: mode != crate::names::network::NetworkMode::Open,
            git: None,
            registries: Vec::new(),
        })
    }
}

/// A live token: its grant and the providers it is good for (more than one where providers
/// share a key variable).
pub struct TokenEntry {
    pub grant: String,
    pub providers: Vec<&'static ProviderRoute>,
    pub token: Secret,
    /// A git placeholder ([`super::git`]), good for the git route only.
    pub git: bool,
    /// A registry placeholder ([`super::registry`]), good for the registry routes only.
    pub registry: bool,
}

/// The live tokens: by the SHA-256 of the whole token (lookup), and indexed by tail (search).
#[derive(Default)]
pub struct Tokens {
    pub by_hash: HashMap<[u8; 32], TokenEntry>,
    pub index: TokenIndex,
}

pub struct GrantState {
    pub workspace: String,
    pub hashes: Vec<[u8; 32]>,
    pub socket_dir: Option<PathBuf>,
    /// (device, inode) of the socket file this grant bound.
    pub socket_file: Option<(u64, u64)>,
    pub owns_dir: bool,
    pub task: Option<tokio::task::JoinHandle<()>>,
    /// This grant's share of connections.
    pub connections: Arc<Semaphore>,
    /// The egress socket's listener and (device, inode), when the grant has one.
    pub egress: Option<EgressSocket>,
    /// The hash of its egress credentials on the TCP route, when it has them.
    pub egress_auth: Option<[u8; 32]>,
    /// The repositories of the workspace's remotes on the git hosts (`host/path`).
    pub git_remotes: Vec<String>,
    /// Its registry routes' socket listeners and the (device, inode) of each socket.
    pub registry_sockets: super::registry::Sockets,
}

pub struct Inner {
    pub enabled: bool,
    pub host_env: HashMap<String, String>,
    /// What is forwarded beyond the request rules (the paths).
    pub policy: ForwardPolicy,
    pub socket_dir: PathBuf,
    pub tokens: RwLock<Tokens>,
    pub grants: Mutex<HashMap<String, GrantState>>,
    tcp: Mutex<Option<(SocketAddr, tokio::task::JoinHandle<()>)>>,
    /// The upstream client: its TLS roots load in the background from the start, so the
    /// broker is up at once and the first forwarded request waits for them if need be.
    pub client: UpstreamClient,
    /// The listeners of requests and of egress connections.
    pub audit: Arc<Audit>,
    /// The egress proxy's policy in force (`None`: no egress socket).
    pub egress: Option<Arc<LiveEgress>>,
    /// The TCP route's egress port and its listener.
    egress_tcp: Mutex<Option<(SocketAddr, tokio::task::JoinHandle<()>)>>,
    /// The TCP route's grants by the hash of their `Proxy-Authorization` value.
    pub(super) egress_auth: RwLock<HashMap<[u8; 32], Arc<Scope>>>,
    tcp_connections: Arc<Semaphore>,
    pub next_id: AtomicU64,
    /// The git route's policy, credentials and record (`None`: no git route).
    pub git: Option<GitState>,
    /// The registry routes, and on the TCP route their ports.
    pub registries: Vec<Registry>,
    pub(super) registry_tcp: Mutex<Vec<(SocketAddr, tokio::task::JoinHandle<()>)>>,
}

impl Inner {
    /// What forwarding a request takes from the broker.
    fn forwarder(&self) -> Forwarder<'_> {
        Forwarder {
            host_env: &self.host_env,
            policy: &self.policy,
            client: &self.client,
            audit: &self.audit,
        }
    }
}

/// The broker of one hub. Cheap to clone.
#[derive(Clone)]
pub struct Broker {
    pub(super) inner: Arc<Inner>,
}

/// A broker handle that does not keep it alive (a watcher's).
#[derive(Clone)]
pub struct WeakBroker(std::sync::Weak<Inner>);

impl WeakBroker {
    /// The broker, while it runs.
    pub fn upgrade(&self) -> Option<Broker> {
        self.0.upgrade().map(|inner| Broker { inner })
    }
}

/// One connection: the grant whose socket it came in on (none on the TCP port), the framing
/// fault its bytes showed, and the grant's connection permit it holds.
pub(super) struct Connection {
    pub(super) scope: Option<String>,
    /// The registry route it came in on, if any.
    pub(super) registry: Option<usize>,
    pub(super) fault: FaultFlag,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

pub fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

pub fn random_bytes() -> Result<[u8; 16]> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::broker_caused("no randomness", e))?;
    Ok(b)
}

impl Broker {
    /// Starts a broker (and its TCP listener when asked). Must run inside a Tokio runtime. A
    /// bad `PO_SANDBOX_BROKER_ALLOW_PATHS` or `PO_SANDBOX_BROKER_ALLOW_FETCH` is
    /// `OPTIONS_INVALID`.
    pub async fn start(options: BrokerOptions) -> Result<Broker> {
        Broker::start_warm(options, true).await
    }

    /// As [`start`](Self::start); `warm`: load the system's root certificates now, in the
    /// background, rather than at the first request that needs them (a one-shot command,
    /// whose container may never ask, leaves its CPU to the command).
    pub async fn start_warm(options: BrokerOptions, warm: bool) -> Result<Broker> {
        let policy = ForwardPolicy::from_env(&options.host_env, options.fetch_screen)?;
        let enabled = options
            .host_env
            .get(DISABLE_VAR)
            .is_none_or(|v| v.trim() != "0");
        let host_env = options.host_env.clone();
        let inner = Arc::new(Inner {
            enabled,
            policy,
            host_env: options.host_env.clone(),
            socket_dir: options.socket_dir,
            tokens: RwLock::new(Tokens::default()),
            grants: Mutex::new(HashMap::new()),
            tcp: Mutex::new(None),
            client: UpstreamClient::default(),
            audit: Arc::new(Audit::default()),
            egress: options.egress.map(|p| Arc::new(LiveEgress::new(p))),
            egress_tcp: Mutex::new(None),
            egress_auth: RwLock::new(HashMap::new()),
            tcp_connections: Arc::new(Semaphore::new(MAX_TCP_CONNECTIONS)),
            next_id: AtomicU64::new(1),
            git: options
                .git
                .map(|policy| GitState::new(policy, host_env.clone())),
            registries: options.registries,
            registry_tcp: Mutex::new(Vec::new()),
        });
        let broker = Broker { inner };
        if warm {
            broker.warm();
        }
        if options.tcp && enabled {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| Error::broker_caused("cannot listen on 127.0.0.1", e))?;
            let addr = listener
                .local_addr()
                .map_err(|e| Error::broker_caused("cannot read the TCP listener's address", e))?;
            let this = broker.clone();
            let task = tokio::spawn(async move { this.serve_tcp(listener, None).await });
            *broker.inner.tcp.locked() = Some((addr, task));
            if broker.inner.egress.is_some() {
                broker.listen_egress_tcp().await?;
            }
            broker.listen_registries_tcp().await?;
        }
        Ok(broker)
    }

    /// Loads the system's root certificates now, in the background (once; a later call, or
    /// the first request that needs them, finds them loaded or waits for this load).
    pub fn warm(&self) {
        if !self.inner.enabled {
            return;
        }
        // Blocking file work and CPU: off the async threads ([`UpstreamClient`]).
        let inner = self.inner.clone();
        tokio::spawn(async move {
            if let Err(e) = inner.client.get().await {
                tracing::warn!(error = %e, "the broker's TLS set-up failed");
            }
        });
    }

    /// The broker is on (`PO_SANDBOX_BROKER` is not `0`).
    pub fn enabled(&self) -> bool {
        self.inner.enabled
    }

    /// The egress policy in force, when the broker has an egress proxy.
    pub fn egress_policy(&self) -> Option<Arc<EgressPolicy>> {
        self.inner.egress.as_ref().map(|live| live.now())
    }

    /// Puts `policy` in force for every grant's egress proxy at once: new connections are
    /// checked against it, open ones it does not allow end. `false` when the broker has no
    /// egress proxy (nothing changed).
    pub fn set_egress_policy(&self, policy: EgressPolicy) -> bool {
        match &self.inner.egress {
            Some(live) => {
                live.replace(policy);
                true
            }
            None => false,
        }
    }

    /// A handle that does not keep the broker alive.
    pub fn downgrade(&self) -> WeakBroker {
        WeakBroker(Arc::downgrade(&self.inner))
    }

    /// Socket grants get an egress proxy (the broker has an egress policy).
    pub fn egress_on(&self) -> bool {
        self.inner.enabled && self.inner.egress.is_some()
    }

    /// The TCP route's egress port on 127.0.0.1, shared by the TCP grants.
    async fn listen_egress_tcp(&self) -> Result<()> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| Error::broker_caused("cannot listen on 127.0.0.1 for egress", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::broker_caused("cannot read the egress listener's address", e))?;
        let this = self.clone();
        let connections = Arc::new(Semaphore::new(MAX_TCP_CONNECTIONS));
        let scope_of = move |value: &[u8]| this.egress_scope(value);
        let task = tokio::spawn(serve_egress_tcp(listener, connections, scope_of));
        *self.inner.egress_tcp.locked() = Some((addr, task));
        Ok(())
    }

    /// The TCP route's egress port, when listening.
    pub fn egress_tcp_address(&self) -> Option<SocketAddr> {
        self.inner.egress_tcp.locked().as_ref().map(|(a, _)| *a)
    }

    /// The grant a `Proxy-Authorization` value names on the TCP route's egress port.
    fn egress_scope(&self, value: &[u8]) -> Option<Arc<Scope>> {
        let h: [u8; 32] = Sha256::digest(value).into();
        self.inner.egress_auth.read_locked().get(&h).cloned()
    }

    /// The loopback TCP address, when listening.
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.inner.tcp.locked().as_ref().map(|(a, _)| *a)
    }

    /// Adds an audit listener.
    pub fn on_audit(&self, listener: AuditListener) {
        self.inner.audit.on_request(listener);
    }

    /// Adds an egress audit listener.
    pub fn on_egress(&self, listener: EgressListener) {
        self.inner.audit.on_egress(listener);
    }

    /// Ends a grant at once: its tokens stop working (also on open keep-alive connections)
    /// and its socket is closed and removed. `false` when there was no such grant.
    pub fn revoke(&self, grant_id: &str) -> bool {
        self.revoke_inner(grant_id).is_some()
    }

    /// Revokes a grant; hands back its aborted listener tasks, so that `close` can wait for the
    /// listener to be dropped. The socket file is gone when this returns.
    fn revoke_inner(&self, grant_id: &str) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let state = self.inner.grants.locked().remove(grant_id)?;
        {
            // A later grant from the same token file carries the same tokens: those entries are
            // its own now and stay.
            let mut tokens = self.inner.tokens.write_locked();
            for h in &state.hashes {
                if tokens.by_hash.get(h).is_some_and(|e| e.grant == grant_id)
                    && let Some(e) = tokens.by_hash.remove(h)
                    && let Some(key) = TokenIndex::key(e.token.expose())
                {
                    tokens.index.remove(&key);
                }
            }
        }
        if let Some(task) = &state.task {
            task.abort();
        }
        let mut egress_task = None;
        if let Some(EgressSocket { task, bound, .. }) = state.egress {
            task.abort();
            if let (Some(dir), Some(bound)) = (&state.socket_dir, bound) {
                let socket = dir.join(EGRESS_SOCKET);
                if file_identity(&socket) == Some(bound) {
                    let _ = std::fs::remove_file(&socket);
                }
            }
            egress_task = Some(task);
        }
        if let Some(h) = state.egress_auth {
            self.inner.egress_auth.write_locked().remove(&h);
        }
        let registry_tasks =
            super::registry::close_sockets(state.socket_dir.as_deref(), state.registry_sockets);
        if let (Some(dir), Some(bound)) = (state.socket_dir, state.socket_file) {
            // Only the socket this grant bound: a later grant on the same folder replaced it.
            let socket = dir.join("broker.sock");
            if file_identity(&socket) == Some(bound) {
                let _ = std::fs::remove_file(&socket);
                if state.owns_dir {
                    let _ = std::fs::remove_dir(&dir);
                }
            }
        }
        tracing::debug!(grant = grant_id, workspace = %state.workspace, "grant revoked");
        Some(
            state
                .task
                .into_iter()
                .chain(egress_task)
                .chain(registry_tasks)
                .collect(),
        )
    }

    /// Whether a grant is still in force and, for a socket route, its socket is still the
    /// one it bound (nobody removed or replaced it).
    pub fn grant_live(&self, grant_id: &str) -> bool {
        let grants = self.inner.grants.locked();
        let Some(state) = grants.get(grant_id) else {
            return false;
        };
        match (&state.socket_dir, state.socket_file) {
            (Some(dir), Some(bound)) => file_identity(&dir.join("broker.sock")) == Some(bound),
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// The grants alive now.
    pub fn grant_ids(&self) -> Vec<String> {
        self.inner.grants.locked().keys().cloned().collect()
    }

    /// Revokes every grant and stops listening. Returns once every listener is dropped: a
    /// connection attempt after this is refused.
    pub async fn close(&self) {
        let mut tasks: Vec<_> = self
            .grant_ids()
            .iter()
            .filter_map(|id| self.revoke_inner(id))
            .flatten()
            .collect();
        for listener in [&self.inner.tcp, &self.inner.egress_tcp] {
            if let Some((_, task)) = listener.locked().take() {
                task.abort();
                tasks.push(task);
            }
        }
        for (_, task) in self.inner.registry_tcp.locked().drain(..) {
            task.abort();
            tasks.push(task);
        }
        // An aborted task's future (and with it its listener) is dropped before its handle
        // completes, so awaiting the handles is what makes "closed" true.
        for task in tasks {
            let _ = task.await;
        }
    }

    pub(super) async fn serve_tcp(
        self,
        listener: tokio::net::TcpListener,
        registry: Option<usize>,
    ) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // EMFILE and the like: let connections drain instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Ok(permit) = self.inner.tcp_connections.clone().try_acquire_owned() else {
                tracing::debug!("broker TCP connection refused: {MAX_TCP_CONNECTIONS} open");
                continue;
            };
            let _ = stream.set_nodelay(true);
            self.serve_connection(stream, (None, registry), permit);
        }
    }

    pub(super) async fn serve_unix(
        self,
        listener: super::socket::SocketListener,
        (grant, registry): (String, Option<usize>),
        connections: Arc<Semaphore>,
    ) {
        #[cfg(not(unix))]
        {
            let _ = (grant, registry, connections);
            match listener {}
        }
        #[cfg(unix)]
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // EMFILE and the like: let connections drain instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // Over its share, a grant's new connection is closed unanswered.
            let Ok(permit) = connections.clone().try_acquire_owned() else {
                tracing::debug!(
                    grant = %grant,
                    "broker connection refused: {} open on this grant",
                    super::limits::PER_GRANT_CONNECTIONS
                );
                continue;
            };
            self.serve_connection(stream, (Some(grant.clone()), registry), permit);
        }
    }

    /// Serves one connection, holding `permit` (the grant's, or the TCP port's) until it ends.
    fn serve_connection<S>(
        &self,
        stream: S,
        (scope, registry): (Option<String>, Option<usize>),
        permit: OwnedSemaphorePermit,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (stream, fault) = Watched::new(stream);
        let connection = Arc::new(Connection {
            scope,
            registry,
            fault,
            permit: Mutex::new(None),
        });
        let this = self.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let this = this.clone();
                let connection = connection.clone();
                async move { Ok::<_, std::convert::Infallible>(this.handle(req, &connection).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .without_shutdown();
            match conn.await {
                Ok(parts) => {
                    drop(permit);
                    linger(parts.io.into_inner()).await;
                }
                Err(e) => tracing::debug!(error = %e, "broker connection ended"),
            }
        });
    }

    /// One request: the rules, then forward; every outcome is audited.
    async fn handle(
        &self,
        req: Request<Incoming>,
        connection: &Connection,
    ) -> Response<ResponseBody> {
        if let Some(index) = connection.registry {
            return self.serve_registry(req, connection, index).await;
        }
        if let Some(git) = &self.inner.git
            && req.uri().path().starts_with(super::git::path::PREFIX)
        {
            return self.serve_git(req, connection, git).await;
        }
        let started = Instant::now();
        let mut event = AuditEvent {
            grant: None,
            workspace: None,
            provider: None,
            method: request::audited_method(req.method().as_str()).to_string(),
            path: request::audited_path(req.uri().path(), None, false),
            status: 0,
            bytes: 0,
            duration_ms: 0,
            error: None,
        };
        let admitted = match self.admit(&req, connection, &mut event) {
            Ok(a) => a,
            Err(refusal) => {
                let status = refusal.status();
                let mut response = self.refuse(event, started, Failure(status, refusal.message()));
                if refusal.closes() {
                    response
                        .headers_mut()
                        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                }
                return response;
            }
        };
        let upstream = super::routes::upstream(admitted.route, &self.inner.host_env);
        let prefix = upstream.map(|u| u.path_prefix).unwrap_or_default();
        let policy = &self.inner.policy;
        let grammar = match policy.check_path(admitted.route, &admitted.rest, &prefix) {
            Ok(grammar) => grammar,
            Err(failure) => return self.refuse(event, started, failure),
        };
        let forwarder = self.inner.forwarder();
        match forwarder
            .forward(req, (admitted, grammar), event, started)
            .await
        {
            Ok(response) => response,
            Err((event, failure)) => self.refuse(event, started, failure),
        }
    }

    /// Audits a refusal or failure and answers it.
    fn refuse(
        &self,
        mut event: AuditEvent,
        started: Instant,
        failure: Failure,
    ) -> Response<ResponseBody> {
        let Failure(status, why) = failure;
        event.status = status.as_u16();
        event.duration_ms = started.elapsed().as_millis() as u64;
        event.error = Some(why.clone());
        self.inner.audit.request(event);
        plain(status, &why)
    }

    /// The rules, in order; fills in the audit as each one vouches for more of the request.
    fn admit(
        &self,
        req: &Request<Incoming>,
        connection: &Connection,
        event: &mut AuditEvent,
    ) -> std::result::Result<Admitted, Refusal> {
        let path = req.uri().path();
        // The provider segment is one of a fixed set of names: the audit may show it at once.
        let named = path.strip_prefix('/').and_then(|p| p.split('/').next());
        if let Some(route) = named.and_then(routes::find) {
            event.provider = Some(route.id.to_string());
            event.path = request::audited_path(path, Some(route.id), false);
        }
        if let Some(fault) = connection.fault.get() {
            return Err(Refusal::Framing(fault));
        }
        request::method(req.method().as_str())?;
        request::target(req.uri())?;
        let headers = req.headers();
        request::framing_headers(headers)?;
        let (route, rest) = routes::route_path(path).ok_or(Refusal::UnknownProvider)?;
        let auth = request::auth_header(headers)?;
        let target = req.uri().path_and_query().map_or(path, |pq| pq.as_str());
        {
            let tokens = self.inner.tokens.read_locked();
            request::token_placement(&tokens.index, req.method().as_str(), target, headers, auth)?;
        }
        event.path = request::audited_path(path, Some(route.id), true);
        let (scheme, token) = request::credentials(route, headers, auth)?;
        let grant = self.live_grant(route, &token, connection.scope.as_deref())?;
        event.workspace = self
            .inner
            .grants
            .locked()
            .get(&grant)
            .map(|g| g.workspace.clone());
        event.grant = Some(grant.clone());
        if connection.scope.is_none() {
            self.attribute(connection, &grant)?;
        }
        Ok(Admitted {
            route,
            rest: rest.to_string(),
            query: req
                .uri()
                .query()
                .map(|q| format!("?{q}"))
                .unwrap_or_default(),
            scheme,
            token,
        })
    }

    /// The grant `token` is live for, for this provider (and, on a grant's own socket, that
    /// grant).
    fn live_grant(
        &self,
        route: &'static ProviderRoute,
        token: &Secret,
        scope: Option<&str>,
    ) -> std::result::Result<String, Refusal> {
        let tokens = self.inner.tokens.read_locked();
        match tokens.by_hash.get(&hash(token.expose())) {
            Some(e)
                if bool::from(e.token.ct_eq(token))
                    && e.providers.iter().any(|p| p.id == route.id)
                    && scope.is_none_or(|s| s == e.grant) =>
            {
                Ok(e.grant.clone())
            }
            _ => Err(Refusal::NotLive(route.id)),
        }
    }

    /// A TCP connection counts against the first grant that authenticates on it.
    pub(super) fn attribute(
        &self,
        connection: &Connection,
        grant: &str,
    ) -> std::result::Result<(), Refusal> {
        let mut held = connection.permit.locked();
        if held.is_some() {
            return Ok(());
        }
        let pool = self
            .inner
            .grants
            .locked()
            .get(grant)
            .map(|g| g.connections.clone());
        if let Some(pool) = pool {
            let permit = pool
                .try_acquire_owned()
                .map_err(|_| Refusal::TooManyConnections)?;
            *held = Some(permit);
        }
        Ok(())
    }
}

/// How long a closed connection's late bytes are read and dropped.
const LINGER: Duration = Duration::from_secs(2);
/// The most of them read.
const LINGER_BYTES: usize = 1 << 20;

/// The end of a connection after its last answer: the write side shut (the answer, then the
/// end), then whatever the client still sends read and dropped for a moment (at most [`LINGER`]
/// and [`LINGER_BYTES`]). Closed at once with a body half sent (an early refusal), the client's
/// next write would fail and it could lose the answer before reading it.
async fn linger<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut io: S) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if io.shutdown().await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    let mut left = LINGER_BYTES;
    let drain = async {
        while left > 0 {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

#[cfg(all(test, unix))]
mod tests;
