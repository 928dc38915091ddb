//! The broker itself: grants (per-grant tokens in each provider's shape, one route each) and the
//! request path — check the token, swap in the real key, forward to the provider's fixed
//! upstream, stream the answer back. Keys and tokens live only in [`Secret`]s.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use super::routes::{self, ProviderRoute};
use super::secret::Secret;
use crate::error::{Error, Result};

/// `PO_SANDBOX_BROKER=0` turns the broker off: grants carry no credentials and no route.
pub const DISABLE_VAR: &str = "PO_SANDBOX_BROKER";
/// How a container on a VM engine reaches the host.
pub const CONTAINER_HOST: &str = "host.docker.internal";
/// Longer than pi's 300 s request timeout, so a slow stream is never cut by the broker.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(330);
/// Bound on a request's header block.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Bound on connections served at once.
pub const MAX_CONNECTIONS: usize = 512;

/// Every header any provider's key may travel in.
const AUTH_HEADERS: [&str; 4] = ["authorization", "x-api-key", "x-goog-api-key", "api-key"];
/// Never forwarded either way.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, BoxBody<Bytes, BoxError>>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ResponseBody = BoxBody<Bytes, BoxError>;

/// How the broker starts.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// The host environment: provider keys, `<PROVIDER>_BASE_URL` overrides, `PO_SANDBOX_BROKER`.
    pub host_env: HashMap<String, String>,
    /// Where per-grant socket folders are made.
    pub socket_dir: PathBuf,
    /// Also listen on `127.0.0.1:<ephemeral>` for TCP grants (VM engines).
    pub tcp: bool,
}

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

    /// Parses the `transport` option: absent is `socket`.
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

/// What a grant is for.
#[derive(Debug, Clone)]
pub struct GrantRequest {
    /// The workspace id (for audit).
    pub workspace: String,
    /// Providers to broker; `None`: every carried provider with a key on the host.
    pub providers: Option<Vec<String>>,
    /// The route.
    pub transport: RouteKind,
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

/// One request, for audit: never a key, a token or a query string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    pub grant: Option<String>,
    pub workspace: Option<String>,
    pub provider: Option<String>,
    pub method: String,
    /// The path without its query.
    pub path: String,
    pub status: u16,
    /// Response body bytes sent to the client.
    pub bytes: u64,
    pub duration_ms: u64,
    /// Why the broker refused or failed, when it did.
    pub error: Option<String>,
}

/// An audit listener.
pub type AuditListener = Arc<dyn Fn(&AuditEvent) + Send + Sync>;

struct TokenEntry {
    grant: String,
    provider: &'static ProviderRoute,
    token: Secret,
}

struct GrantState {
    workspace: String,
    hashes: Vec<[u8; 32]>,
    socket_dir: Option<PathBuf>,
    /// (device, inode) of the socket file this grant bound.
    socket_file: Option<(u64, u64)>,
    owns_dir: bool,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// (device, inode) of a path itself (links not followed).
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

struct Inner {
    enabled: bool,
    host_env: HashMap<String, String>,
    socket_dir: PathBuf,
    tokens: RwLock<HashMap<[u8; 32], TokenEntry>>,
    grants: Mutex<HashMap<String, GrantState>>,
    tcp: Mutex<Option<(SocketAddr, tokio::task::JoinHandle<()>)>>,
    client: HttpsClient,
    listeners: Mutex<Vec<AuditListener>>,
    connections: Arc<Semaphore>,
    next_id: AtomicU64,
}

/// The broker of one hub. Cheap to clone.
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn failed(reason: impl Into<String>) -> Error {
    Error::broker(reason)
}

fn https_client() -> Result<HttpsClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(30)));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let tls = match builder.with_provider_and_native_roots(provider.clone()) {
        Ok(b) => b,
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(provider)
            .map_err(|e| Error::broker_caused("no TLS set-up", e))?,
    };
    let connector = tls.https_or_http().enable_http1().wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector))
}

impl Broker {
    /// Starts a broker (and its TCP listener when asked). Must run inside a Tokio runtime.
    pub async fn start(options: BrokerOptions) -> Result<Broker> {
        let enabled = options
            .host_env
            .get(DISABLE_VAR)
            .is_none_or(|v| v.trim() != "0");
        let inner = Arc::new(Inner {
            enabled,
            host_env: options.host_env,
            socket_dir: options.socket_dir,
            tokens: RwLock::new(HashMap::new()),
            grants: Mutex::new(HashMap::new()),
            tcp: Mutex::new(None),
            client: https_client()?,
            listeners: Mutex::new(Vec::new()),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            next_id: AtomicU64::new(1),
        });
        let broker = Broker { inner };
        if options.tcp && enabled {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| Error::broker_caused("cannot listen on 127.0.0.1", e))?;
            let addr = listener.local_addr().map_err(|e| Error::BrokerFailed {
                reason: e.to_string(),
                source: Some(e.into()),
            })?;
            let this = broker.clone();
            let task = tokio::spawn(async move { this.serve_tcp(listener).await });
            *broker.inner.tcp.lock().unwrap_or_else(|e| e.into_inner()) = Some((addr, task));
        }
        Ok(broker)
    }

    /// The broker is on (`PO_SANDBOX_BROKER` is not `0`).
    pub fn enabled(&self) -> bool {
        self.inner.enabled
    }

    /// The loopback TCP address, when listening.
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.inner
            .tcp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(a, _)| *a)
    }

    /// Adds an audit listener.
    pub fn on_audit(&self, listener: AuditListener) {
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(listener);
    }

    fn audit(&self, event: AuditEvent) {
        tracing::info!(
            grant = event.grant.as_deref().unwrap_or("-"),
            provider = event.provider.as_deref().unwrap_or("-"),
            method = %event.method,
            path = %event.path,
            status = event.status,
            bytes = event.bytes,
            duration_ms = event.duration_ms,
            error = event.error.as_deref().unwrap_or(""),
            "broker request"
        );
        let listeners = self
            .inner
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for l in listeners {
            l(&event);
        }
    }

    /// Grants a container its credentials. Must run inside a Tokio runtime (the socket route
    /// starts a listener). With the broker off, the grant carries nothing.
    pub fn grant(&self, request: GrantRequest) -> Result<Grant> {
        crate::sandbox::workspace::check_id(&request.workspace)?;
        let env = &self.inner.host_env;
        let mut withheld = routes::withheld(env);
        let id = format!(
            "g{}-{}",
            self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            &hex::encode(random_bytes()?)[..8]
        );
        if !self.inner.enabled {
            // Off: nothing reaches the container, and every host key stays here.
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
            return Ok(Grant {
                id,
                workspace: request.workspace,
                providers: vec![],
                env: BTreeMap::new(),
                route: None,
                withheld,
            });
        }
        // Which providers: the asked ones (each must be carried and have a key here), or every
        // carried one with a key.
        let mut chosen: Vec<(&'static ProviderRoute, &'static str, Secret)> = Vec::new();
        match &request.providers {
            Some(list) => {
                for name in list {
                    let route = routes::find(name).ok_or_else(|| Error::OptionsInvalid {
                        option: "providers".into(),
                        reason: format!(
                            "{name:?} is not a provider the broker carries (see the README's list)"
                        ),
                    })?;
                    match routes::host_key(route, env) {
                        Some((var, key)) => chosen.push((route, var, Secret::new(key))),
                        None => withheld.push((
                            route.key_vars[0].to_string(),
                            format!("no {} key is set on the host", route.id),
                        )),
                    }
                }
            }
            None => {
                for route in routes::providers() {
                    if let Some((var, key)) = routes::host_key(route, env) {
                        chosen.push((route, var, Secret::new(key)));
                    }
                }
            }
        }
        chosen.dedup_by(|a, b| a.0.id == b.0.id);
        // Every upstream must be valid host configuration before anything is handed out.
        for (route, _, _) in &chosen {
            routes::upstream(route, env)?;
        }
        let mut grant_env: BTreeMap<String, Secret> = BTreeMap::new();
        let mut entries = Vec::new();
        for (route, var, key) in &chosen {
            let token = match &request.secret {
                Some(secret) => derived_token(route, key.expose(), secret, route.id),
                None => Secret::new(routes::mint_token(route, key.expose())?),
            };
            // Providers sharing one key variable share one token.
            let token = match grant_env.get(*var) {
                Some(existing) => existing.clone(),
                None => token,
            };
            grant_env.insert(var.to_string(), token.clone());
            entries.push((
                hash(token.expose()),
                TokenEntry {
                    grant: id.clone(),
                    provider: route,
                    token,
                },
            ));
        }
        let providers: Vec<String> = chosen.iter().map(|(r, _, _)| r.id.to_string()).collect();
        grant_env.insert(
            "PO_BROKER_PROVIDERS".into(),
            Secret::new(providers.join(",")),
        );
        let (route, socket_dir, owns_dir, task) = match request.transport {
            RouteKind::Tcp => {
                let addr = self
                    .tcp_address()
                    .ok_or_else(|| failed("TCP grants need a broker started with tcp: true"))?;
                let host = request
                    .container_host
                    .clone()
                    .unwrap_or_else(|| CONTAINER_HOST.to_string());
                let container_address = format!("{host}:{}", addr.port());
                grant_env.insert(
                    "PO_BROKER_ADDRESS".into(),
                    Secret::new(container_address.clone()),
                );
                (
                    GrantRoute::Tcp {
                        address: addr,
                        container_address,
                    },
                    None,
                    false,
                    None,
                )
            }
            RouteKind::Socket => {
                let (dir, owns) = match &request.socket_folder {
                    Some(d) => (d.clone(), false),
                    None => (self.inner.socket_dir.join(&id), true),
                };
                let socket = dir.join("broker.sock");
                let listener = bind_socket(&dir, &socket, request.owner)?;
                // Without a container path the env is for a process on this host.
                let container_socket = request
                    .container_socket
                    .clone()
                    .unwrap_or_else(|| socket.display().to_string());
                grant_env.insert(
                    "PO_BROKER_SOCKET".into(),
                    Secret::new(container_socket.clone()),
                );
                let this = self.clone();
                let grant_id = id.clone();
                let task = tokio::spawn(async move { this.serve_unix(listener, grant_id).await });
                (
                    GrantRoute::Socket {
                        host_socket: socket,
                        host_dir: dir.clone(),
                        container_socket,
                    },
                    Some(dir),
                    owns,
                    Some(task),
                )
            }
        };
        let socket_file = match &route {
            GrantRoute::Socket { host_socket, .. } => file_identity(host_socket),
            GrantRoute::Tcp { .. } => None,
        };
        let hashes: Vec<[u8; 32]> = entries.iter().map(|(h, _)| *h).collect();
        {
            let mut tokens = self.inner.tokens.write().unwrap_or_else(|e| e.into_inner());
            for (h, e) in entries {
                tokens.insert(h, e);
            }
        }
        self.inner
            .grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id.clone(),
                GrantState {
                    workspace: request.workspace.clone(),
                    hashes,
                    socket_dir,
                    socket_file,
                    owns_dir,
                    task,
                },
            );
        withheld.sort();
        withheld.dedup();
        Ok(Grant {
            id,
            workspace: request.workspace,
            providers,
            env: grant_env,
            route: Some(route),
            withheld,
        })
    }

    /// Ends a grant at once: its tokens stop working (also on open keep-alive connections)
    /// and its socket is closed and removed. `false` when there was no such grant.
    pub fn revoke(&self, grant_id: &str) -> bool {
        self.revoke_inner(grant_id).is_some()
    }

    /// Revokes a grant; hands back its aborted listener task, so that `close` can wait for the
    /// listener to be dropped. The socket file is gone when this returns.
    fn revoke_inner(&self, grant_id: &str) -> Option<Option<tokio::task::JoinHandle<()>>> {
        let state = self
            .inner
            .grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(grant_id)?;
        {
            // A later grant from the same token file carries the same tokens: those entries are
            // its own now and stay.
            let mut tokens = self.inner.tokens.write().unwrap_or_else(|e| e.into_inner());
            for h in &state.hashes {
                if tokens.get(h).is_some_and(|e| e.grant == grant_id) {
                    tokens.remove(h);
                }
            }
        }
        if let Some(task) = &state.task {
            task.abort();
        }
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
        Some(state.task)
    }

    /// Whether a grant is still in force and, for a socket route, its socket is still the
    /// one it bound (nobody removed or replaced it).
    pub fn grant_live(&self, grant_id: &str) -> bool {
        let grants = self.inner.grants.lock().unwrap_or_else(|e| e.into_inner());
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
        self.inner
            .grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Revokes every grant and stops listening. Returns once every listener is dropped: a
    /// connection attempt after this is refused.
    pub async fn close(&self) {
        let mut tasks: Vec<_> = self
            .grant_ids()
            .iter()
            .filter_map(|id| self.revoke_inner(id).flatten())
            .collect();
        if let Some((_, task)) = self
            .inner
            .tcp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
            tasks.push(task);
        }
        // An aborted task's future (and with it its listener) is dropped before its handle
        // completes, so awaiting the handles is what makes "closed" true.
        for task in tasks {
            let _ = task.await;
        }
    }

    async fn serve_tcp(self, listener: tokio::net::TcpListener) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // EMFILE and the like: let connections drain instead of spinning.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (stream, smuggling) = Sniffed::new(stream);
            self.serve_connection(TokioIo::new(stream), None, smuggling);
        }
    }

    async fn serve_unix(self, listener: tokio::net::UnixListener, grant: String) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // EMFILE and the like: let connections drain instead of spinning.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let (stream, smuggling) = Sniffed::new(stream);
            self.serve_connection(TokioIo::new(stream), Some(grant.clone()), smuggling);
        }
    }

    fn serve_connection<I>(&self, io: I, grant: Option<String>, smuggling: Arc<AtomicBool>)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let Ok(permit) = self.inner.connections.clone().try_acquire_owned() else {
            tracing::warn!("broker connection refused: {MAX_CONNECTIONS} connections already open");
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let this = this.clone();
                let grant = grant.clone();
                let smuggling = smuggling.load(Ordering::SeqCst);
                async move {
                    Ok::<_, std::convert::Infallible>(
                        this.handle(req, grant.as_deref(), smuggling).await,
                    )
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(IDLE_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                .keep_alive(true)
                .serve_connection(io, service);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "broker connection ended");
            }
            drop(permit);
        });
    }

    /// One request: checks, swap, forward, stream back.
    async fn handle(
        &self,
        req: Request<Incoming>,
        scope: Option<&str>,
        smuggling: bool,
    ) -> Response<ResponseBody> {
        let started = Instant::now();
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let mut event = AuditEvent {
            grant: None,
            workspace: None,
            provider: None,
            method,
            path: path.clone(),
            status: 0,
            bytes: 0,
            duration_ms: 0,
            error: None,
        };
        let refuse = |this: &Broker, mut event: AuditEvent, status: StatusCode, why: String| {
            event.status = status.as_u16();
            event.duration_ms = started.elapsed().as_millis() as u64;
            event.error = Some(why.clone());
            this.audit(event);
            plain(status, &why)
        };
        // 1. The request target: origin-form only, no tricks.
        if req.uri().scheme().is_some() || req.uri().authority().is_some() {
            return refuse(
                self,
                event,
                StatusCode::BAD_REQUEST,
                "absolute-form request targets are refused".into(),
            );
        }
        let lower = path.to_ascii_lowercase();
        if path.starts_with("//")
            || path.contains('\\')
            || lower.contains("%5c")
            || has_dot_segment(&lower)
        {
            return refuse(
                self,
                event,
                StatusCode::BAD_REQUEST,
                "the request path contains '//', '\\' or '..'".into(),
            );
        }
        let headers = req.headers();
        // hyper drops Content-Length when Transfer-Encoding is present; the raw bytes tell.
        if smuggling
            || (headers.contains_key(hyper::header::CONTENT_LENGTH)
                && headers.contains_key(hyper::header::TRANSFER_ENCODING))
        {
            return refuse(
                self,
                event,
                StatusCode::BAD_REQUEST,
                "both Content-Length and Transfer-Encoding are set".into(),
            );
        }
        if headers
            .get_all(hyper::header::CONTENT_LENGTH)
            .iter()
            .count()
            > 1
        {
            return refuse(
                self,
                event,
                StatusCode::BAD_REQUEST,
                "more than one Content-Length".into(),
            );
        }
        // 2. The provider.
        let Some((route, rest)) = routes::route_path(&path) else {
            return refuse(
                self,
                event,
                StatusCode::NOT_FOUND,
                "unknown provider: paths are /<provider>/...".into(),
            );
        };
        event.provider = Some(route.id.to_string());
        // 3. Exactly one auth header, of this provider's kinds; the token nowhere else.
        let present: Vec<&str> = AUTH_HEADERS
            .iter()
            .copied()
            .filter(|h| headers.contains_key(*h))
            .collect();
        let repeated = present
            .iter()
            .any(|h| headers.get_all(*h).iter().count() > 1);
        if present.len() > 1 || repeated {
            return refuse(
                self,
                event,
                StatusCode::BAD_REQUEST,
                "more than one auth header".into(),
            );
        }
        if self.token_elsewhere(&req, present.first().copied()) {
            // The path may hold the token itself: keep it out of the audit and the logs.
            if self.token_in(path.as_bytes()) {
                event.path = "(withheld: it carried a token)".into();
            }
            return refuse(
                self,
                event,
                StatusCode::BAD_REQUEST,
                "a broker token appears outside the auth header".into(),
            );
        }
        let Some(header) = present.first().copied() else {
            return refuse(
                self,
                event,
                StatusCode::UNAUTHORIZED,
                format!("no {} credentials", route.id),
            );
        };
        let Some(scheme) = route.auth.iter().copied().find(|a| a.header() == header) else {
            return refuse(
                self,
                event,
                StatusCode::UNAUTHORIZED,
                format!("{} does not take credentials in {header}", route.id),
            );
        };
        let token = headers
            .get(header)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| scheme.decode(v))
            .map(str::to_string);
        let Some(token) = token else {
            return refuse(
                self,
                event,
                StatusCode::UNAUTHORIZED,
                "malformed credentials".into(),
            );
        };
        let token = Secret::new(token);
        // 4. A live grant for this provider (and, on a grant's own socket, that grant).
        let grant = {
            let tokens = self.inner.tokens.read().unwrap_or_else(|e| e.into_inner());
            match tokens.get(&hash(token.expose())) {
                Some(e)
                    if bool::from(e.token.ct_eq(&token))
                        && e.provider.id == route.id
                        && scope.is_none_or(|s| s == e.grant) =>
                {
                    Some(e.grant.clone())
                }
                _ => None,
            }
        };
        let Some(grant) = grant else {
            return refuse(
                self,
                event,
                StatusCode::UNAUTHORIZED,
                format!("the {} token is not a live grant for it", route.id),
            );
        };
        event.workspace = self
            .inner
            .grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&grant)
            .map(|g| g.workspace.clone());
        event.grant = Some(grant);
        // 5. Forward.
        let env = &self.inner.host_env;
        let (Some((_, key)), Ok(upstream)) =
            (routes::host_key(route, env), routes::upstream(route, env))
        else {
            return refuse(
                self,
                event,
                StatusCode::BAD_GATEWAY,
                format!("the host has no usable {} configuration", route.id),
            );
        };
        let key = Secret::new(key);
        let query = req
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let uri = format!("{}{}{query}", upstream.origin(), upstream.target(rest));
        let (parts, body) = req.into_parts();
        let mut out = Request::builder().method(parts.method).uri(uri);
        let out_headers = out.headers_mut().expect("a fresh builder has headers");
        copy_headers(&parts.headers, out_headers);
        for h in AUTH_HEADERS {
            out_headers.remove(h);
        }
        out_headers.remove(hyper::header::HOST);
        if let Ok(v) = HeaderValue::from_str(&upstream.authority()) {
            out_headers.insert(hyper::header::HOST, v);
        }
        match HeaderValue::from_str(&scheme.encode(key.expose())) {
            Ok(mut v) => {
                v.set_sensitive(true);
                out_headers.insert(HeaderName::from_static(scheme.header()), v);
            }
            Err(_) => {
                return refuse(
                    self,
                    event,
                    StatusCode::BAD_GATEWAY,
                    "the host key is not a valid header value".into(),
                );
            }
        }
        // A client that stalls its upload for longer than the idle bound ends the request.
        let out = match out.body(Idle::new(body, IDLE_TIMEOUT).boxed()) {
            Ok(r) => r,
            Err(e) => {
                return refuse(
                    self,
                    event,
                    StatusCode::BAD_REQUEST,
                    format!("cannot forward: {e}"),
                );
            }
        };
        let response =
            match tokio::time::timeout(IDLE_TIMEOUT, self.inner.client.request(out)).await {
                Ok(Ok(r)) => r,
                Err(_) => {
                    let why = format!(
                        "{} upstream {} sent no answer within {} s",
                        route.id,
                        upstream.origin(),
                        IDLE_TIMEOUT.as_secs()
                    );
                    return refuse(self, event, StatusCode::GATEWAY_TIMEOUT, why);
                }
                Ok(Err(e)) => {
                    let why = format!(
                        "{} upstream {} did not answer: {}",
                        route.id,
                        upstream.origin(),
                        redact(&e.to_string(), &key, &token)
                    );
                    return refuse(self, event, StatusCode::BAD_GATEWAY, why);
                }
            };
        // 6. Stream the answer back; redirects are passed on, never followed; no header may
        // carry the real key back.
        let (parts, body) = response.into_parts();
        let mut back = Response::builder().status(parts.status);
        let back_headers = back.headers_mut().expect("a fresh builder has headers");
        copy_headers(&parts.headers, back_headers);
        // Drop each header value (not each name: one Set-Cookie of many) that echoes the key.
        let echoes = |v: &HeaderValue| {
            v.as_bytes()
                .windows(key.expose().len().max(1))
                .any(|w| w == key.expose().as_bytes())
        };
        if back_headers.values().any(echoes) {
            let kept: Vec<(HeaderName, HeaderValue)> = back_headers
                .iter()
                .filter(|(_, v)| !echoes(v))
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect();
            back_headers.clear();
            for (n, v) in kept {
                back_headers.append(n, v);
            }
        }
        event.status = parts.status.as_u16();
        let body = AuditedBody {
            // An upstream that goes quiet mid-stream for longer than the idle bound ends it.
            inner: Idle::new(body, IDLE_TIMEOUT),
            bytes: 0,
            broker: self.clone(),
            event: Some(event),
            started,
        };
        back.body(BodyExt::boxed(body))
            .unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "bad upstream response"))
    }

    /// Whether any live token appears in `hay`, as is or percent-decoded.
    fn token_in(&self, hay: &[u8]) -> bool {
        let tokens = self.inner.tokens.read().unwrap_or_else(|e| e.into_inner());
        let contains = |hay: &[u8]| {
            tokens.values().any(|e| {
                hay.windows(e.token.expose().len())
                    .any(|w| w == e.token.expose().as_bytes())
            })
        };
        contains(hay) || contains(&percent_decode(hay))
    }

    /// Whether any live token appears in the path, the query or a header other than `auth`.
    fn token_elsewhere(&self, req: &Request<Incoming>, auth: Option<&str>) -> bool {
        let target = req
            .uri()
            .path_and_query()
            .map(|pq| pq.as_str())
            .unwrap_or_default();
        self.token_in(target.as_bytes())
            || req
                .headers()
                .iter()
                .filter(|(n, _)| Some(n.as_str()) != auth)
                .any(|(_, v)| self.token_in(v.as_bytes()))
    }
}

/// `%XX` decoded (and `+` as space); anything malformed is kept as it is.
fn percent_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == b'%' && i + 2 < input.len() {
            let hex = std::str::from_utf8(&input[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b == b'+' { b' ' } else { b });
        i += 1;
    }
    out
}

/// A connection's bytes, watched for a request header block carrying both `Content-Length`
/// and `Transfer-Encoding` (which hyper resolves silently, but the broker refuses).
struct Sniffed<S> {
    inner: S,
    window: Vec<u8>,
    flag: Arc<AtomicBool>,
}

impl<S> Sniffed<S> {
    fn new(inner: S) -> (Sniffed<S>, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        let sniffed = Sniffed {
            inner,
            window: Vec::new(),
            flag: flag.clone(),
        };
        (sniffed, flag)
    }

    fn observe(&mut self, bytes: &[u8]) {
        self.window.extend_from_slice(bytes);
        while let Some(end) = self.window.windows(4).position(|w| w == b"\r\n\r\n") {
            let block = self.window[..end].to_ascii_lowercase();
            let has = |name: &[u8]| block.windows(name.len()).any(|w| w == name);
            if has(b"\ncontent-length:") && has(b"\ntransfer-encoding:") {
                self.flag.store(true, Ordering::SeqCst);
            }
            self.window.drain(..end + 4);
        }
        // Bodies pass through here too: keep only a header block's worth.
        if self.window.len() > 2 * MAX_HEADER_BYTES {
            let cut = self.window.len() - MAX_HEADER_BYTES;
            self.window.drain(..cut);
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Sniffed<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled {
            let fresh = buf.filled()[before..].to_vec();
            self.observe(&fresh);
        }
        polled
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Sniffed<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn random_bytes() -> Result<[u8; 16]> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::broker_caused("no randomness", e))?;
    Ok(b)
}

/// A token derived from a container's secret: the provider's prefix, then
/// HMAC-SHA256(secret, provider) as hex. Stable for the container's life, unguessable without
/// the secret (which stays in the host's 0600 token file and the container).
fn derived_token(route: &ProviderRoute, real_key: &str, secret: &Secret, provider: &str) -> Secret {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes any key length");
    mac.update(b"po-broker-token/1/");
    mac.update(provider.as_bytes());
    Secret::new(format!(
        "{}{}",
        route.token_shape.prefix(real_key),
        hex::encode(mac.finalize().into_bytes())
    ))
}

/// A path with a `.` or `..` segment (plain or percent-encoded).
fn has_dot_segment(lower_path: &str) -> bool {
    lower_path
        .replace("%2e", ".")
        .split('/')
        .any(|s| s == ".." || s == ".")
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    let named_by_connection: Vec<String> = from
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for (name, value) in from {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || named_by_connection.iter().any(|c| c == n) {
            continue;
        }
        to.append(name.clone(), value.clone());
    }
}

fn redact(text: &str, key: &Secret, token: &Secret) -> String {
    text.replace(key.expose(), "***")
        .replace(token.expose(), "***")
}

fn plain(status: StatusCode, message: &str) -> Response<ResponseBody> {
    let body = format!(
        "{{\"error\":{{\"type\":\"po_broker\",\"message\":{}}}}}\n",
        serde_json::Value::String(message.to_string())
    );
    let mut r = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A body that fails when its source sends nothing for `limit`: a stalled upload or a stream
/// gone quiet must not hold one of the broker's connections for ever.
struct Idle<B> {
    inner: B,
    limit: Duration,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl<B> Idle<B> {
    fn new(inner: B, limit: Duration) -> Self {
        Idle {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
        }
    }
}

impl<B> Body for Idle<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<Frame<Bytes>, BoxError>>> {
        use std::task::Poll;
        match std::pin::Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(frame)) => {
                let next = tokio::time::Instant::now() + self.limit;
                self.deadline.as_mut().reset(next);
                Poll::Ready(Some(frame.map_err(Into::into)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                    "nothing was sent for {} s",
                    self.limit.as_secs()
                )
                .into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The upstream body, passed through frame by frame (so each SSE event leaves as it arrives),
/// counting bytes and reporting the request when it ends.
struct AuditedBody {
    inner: Idle<Incoming>,
    bytes: u64,
    broker: Broker,
    event: Option<AuditEvent>,
    started: Instant,
}

impl AuditedBody {
    fn finish(&mut self, error: Option<String>) {
        if let Some(mut e) = self.event.take() {
            e.bytes = self.bytes;
            e.duration_ms = self.started.elapsed().as_millis() as u64;
            e.error = error;
            self.broker.audit(e);
        }
    }
}

impl Body for AuditedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<Frame<Bytes>, BoxError>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    self.bytes += d.len() as u64;
                }
                // With a Content-Length the server stops polling after the last byte instead
                // of asking for the end: that last byte is the end.
                if self.inner.is_end_stream() {
                    self.finish(None);
                }
            }
            std::task::Poll::Ready(Some(Err(e))) => {
                let why = format!("the upstream stream broke: {e}");
                self.finish(Some(why));
            }
            std::task::Poll::Ready(None) => self.finish(None),
            std::task::Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for AuditedBody {
    /// Audits a request not audited yet (`finish` runs once): complete when the body is at its
    /// end (an empty one, 204, 304 or HEAD, is never polled), else cut off by the client.
    fn drop(&mut self) {
        let cut = !self.inner.is_end_stream();
        self.finish(cut.then(|| "the client went away before the end".into()));
    }
}

/// Makes the socket folder (0700) and binds the socket (0600), both owned by `owner` when
/// given; a stale socket at the path is replaced. Returns a Tokio listener (call inside a
/// runtime).
fn bind_socket(
    dir: &Path,
    socket: &Path,
    owner: Option<(u32, u32)>,
) -> Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let bad = |what: &str, e: std::io::Error| {
        Error::broker_caused(format!("cannot {what} {}", dir.display()), e)
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| bad("create", e))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| bad("inspect", e))?;
    if !meta.is_dir() {
        return Err(failed(format!("{} is not a folder", dir.display())));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| bad("secure", e))?;
    if socket.as_os_str().len() > 100 {
        return Err(failed(format!(
            "the socket path {} is too long for a Unix socket; choose a shorter socketDir",
            socket.display()
        )));
    }
    match std::fs::symlink_metadata(socket) {
        Ok(m) if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => {
            let _ = std::fs::remove_file(socket);
        }
        Ok(_) => {
            return Err(failed(format!(
                "{} exists and is not a socket",
                socket.display()
            )));
        }
        Err(_) => {}
    }
    let std_listener =
        std::os::unix::net::UnixListener::bind(socket).map_err(|e| bad("listen in", e))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| bad("secure the socket in", e))?;
    if let Some((uid, gid)) = owner {
        for p in [dir, socket] {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(|e| bad("hand over", e))?;
        }
    }
    std_listener
        .set_nonblocking(true)
        .map_err(|e| bad("set up", e))?;
    tokio::net::UnixListener::from_std(std_listener).map_err(|e| bad("register", e))
}

#[cfg(test)]
mod tests;
