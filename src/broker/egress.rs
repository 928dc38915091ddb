//! The egress proxy: the way out of an `allowlist` container. Each grant gets a second socket,
//! `egress.sock`, beside `broker.sock` in its route folder; the in-container bridge relays a
//! loopback port to it, and tools use that port as `HTTPS_PROXY` / `HTTP_PROXY`.
//!
//! It takes `CONNECT host:port` (then reads the TLS ClientHello and requires its server name to
//! be the CONNECT host before it dials anything) and absolute-form plain-HTTP requests
//! (`GET http://host/…`, every request on a kept-alive connection checked, its one Host header
//! naming the same destination). The destination, in its one canonical form ([`rules`]), must
//! be in `networkAllow`; a name is dialled at the address `networkResolve` maps it to, or at
//! the addresses it resolves to, none of which may be non-public. A denial answers `403` with
//! `egress denied: <why>`, as the body and as the status line's reason phrase. Every tunnel and
//! every plain request is one audit event, emitted when its upstream connection closes (or at
//! once when denied): never a header beyond the authority, never a body. Windows has no socket
//! grants, so none of the serving is used there.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

mod feed;
mod live;
pub(crate) mod rules;
pub(crate) mod sni;

pub use live::LiveEgress;
use live::{NotOpened, Route, WITHDRAWN, Watched, dial_for, revoked};

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{HOST, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use self::rules::{AllowEntry, Target, Verdict};
use super::audit::Audit;
pub use super::audit::{EgressDecision, EgressEvent};
use super::framing::MAX_HEAD_BYTES;
use super::headers::HOP_BY_HOP;
use super::limits::{HEAD_TIMEOUT, IDLE_TIMEOUT};
use super::reply::{ResponseBody, full};
use super::socket::SocketListener;

/// The egress socket's file name in a grant's route folder.
pub const EGRESS_SOCKET: &str = "egress.sock";
/// Connections (tunnels and plain-HTTP connections) one grant may have open at once.
pub const EGRESS_CONNECTIONS: usize = 64;
/// How long dialling an upstream (and looking its name up) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A TLS alert, fatal, `access_denied`: what a refused tunnel's client reads.
const ACCESS_DENIED_ALERT: [u8; 7] = [21, 3, 3, 0, 2, 2, 49];

/// A grant's egress socket as opened: its path in the container, its listener task, and the
/// (device, inode) of the socket file it bound.
pub struct EgressSocket {
    pub container: String,
    pub task: tokio::task::JoinHandle<()>,
    pub bound: Option<(u64, u64)>,
}

/// What may leave: `networkAllow` and `networkResolve`, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    pub allow: Vec<AllowEntry>,
    pub resolve: BTreeMap<String, IpAddr>,
    /// The host's own addresses ([`crate::host::interface_addresses`]): a name that resolves
    /// to one is refused, as the packet rules refuse them.
    pub host_addresses: Vec<IpAddr>,
    /// What single workspaces may reach beyond `allow` (the policy file's `workspaces`).
    pub workspaces: BTreeMap<String, Vec<AllowEntry>>,
}

impl EgressPolicy {
    /// The allow list of `workspace`: every workspace's, then its own additions.
    pub fn list_for(&self, workspace: &str) -> Vec<AllowEntry> {
        let own = self.workspaces.get(workspace).into_iter().flatten();
        self.allow.iter().chain(own).cloned().collect()
    }
}

/// A connection's share of its grant's [`EGRESS_CONNECTIONS`].
type Permit = Arc<tokio::sync::OwnedSemaphorePermit>;

/// One grant's egress connections share this.
pub(super) struct Scope {
    audit: Arc<Audit>,
    policy: Arc<LiveEgress>,
    grant: String,
    workspace: String,
    /// Its recent denials, for the person ([`feed`]).
    feed: feed::Feed,
}

impl Scope {
    pub(super) fn new(
        audit: Arc<Audit>,
        policy: Arc<LiveEgress>,
        grant: &str,
        workspace: &str,
    ) -> Scope {
        Scope {
            audit,
            policy,
            grant: grant.to_string(),
            workspace: workspace.to_string(),
            feed: feed::Feed::default(),
        }
    }

    fn event(&self, target: Result<&Target, &str>, decision: EgressDecision) -> EgressEvent {
        let (host, port) = match target {
            Ok(t) => (t.host.to_string(), t.port),
            Err(raw) => (raw.chars().take(255).collect(), 0),
        };
        EgressEvent {
            grant: self.grant.clone(),
            workspace: self.workspace.clone(),
            host,
            port,
            decision,
            reason: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
        }
    }

    fn emit(&self, mut event: EgressEvent, reason: Option<String>, started: Instant) {
        event.reason = reason;
        event.duration_ms = started.elapsed().as_millis() as u64;
        if event.decision == EgressDecision::Denied {
            let destination = match event.port {
                0 => event.host.clone(),
                port => format!("{}:{port}", event.host),
            };
            self.feed
                .push(&destination, event.reason.as_deref().unwrap_or_default());
        }
        self.audit.egress(event);
    }

    /// The route of a connection to `target` admitted under `policy` (not dialled yet).
    fn route(&self, policy: &EgressPolicy, target: &Target) -> Route {
        let overridden =
            matches!(&target.host, rules::Host::Name(n) if policy.resolve.contains_key(n));
        Route {
            workspace: self.workspace.clone(),
            target: target.clone(),
            dialled: None,
            overridden,
        }
    }

    /// Audits a denial and answers it.
    fn deny(
        &self,
        target: Result<&Target, &str>,
        why: String,
        started: Instant,
    ) -> Response<ResponseBody> {
        self.emit(
            self.event(target, EgressDecision::Denied),
            Some(why.clone()),
            started,
        );
        text(StatusCode::FORBIDDEN, &format!("egress denied: {why}"))
    }

    /// Audits a failure to reach an allowed destination and answers it.
    fn fail(&self, target: &Target, why: String, started: Instant) -> Response<ResponseBody> {
        self.emit(
            self.event(Ok(target), EgressDecision::Failed),
            Some(why.clone()),
            started,
        );
        text(StatusCode::BAD_GATEWAY, &format!("egress failed: {why}"))
    }
}

/// The proxy's own answer: `line` as the body and as the status line's reason phrase, since
/// clients such as npm show the status line of an error and never its body.
fn text(status: StatusCode, line: &str) -> Response<ResponseBody> {
    let mut r = Response::new(full(format!("{line}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Some(reason) = reason_phrase(line) {
        r.extensions_mut().insert(reason);
    }
    r
}

/// Longest reason phrase sent; a longer line keeps the standard phrase (the body still has it).
const MAX_REASON_BYTES: usize = 512;

/// `line` as a status-line reason phrase, when it is short and has no byte a reason phrase
/// may not carry (hyper checks: no control characters, so no CR or LF).
fn reason_phrase(line: &str) -> Option<hyper::ext::ReasonPhrase> {
    if line.len() > MAX_REASON_BYTES {
        return None;
    }
    hyper::ext::ReasonPhrase::try_from(line.as_bytes()).ok()
}

/// The destination of a request, checked: its canonical form and the addresses to dial.
async fn admit(
    policy: &EgressPolicy,
    workspace: &str,
    authority: &str,
    default_port: Option<u16>,
    hosts: &[&[u8]],
) -> Result<(Target, Vec<SocketAddr>), (Option<Target>, String)> {
    let target = rules::parse_authority(authority, default_port).map_err(|why| (None, why))?;
    let denied = |why: String| (Some(target.clone()), why);
    // A Host without a port names http's 80 on a plain request, the CONNECT port on a tunnel.
    if default_port.is_some() || !hosts.is_empty() {
        rules::host_header(hosts, &target, default_port.unwrap_or(target.port)).map_err(denied)?;
    }
    match rules::decide(&policy.list_for(workspace), &policy.resolve, &target) {
        Verdict::Denied(why) => Err(denied(why)),
        Verdict::Dial(ip) => Ok((target.clone(), vec![SocketAddr::new(ip, target.port)])),
        Verdict::Lookup(name) => {
            let found = tokio::time::timeout(
                CONNECT_TIMEOUT,
                tokio::net::lookup_host((name.as_str(), target.port)),
            )
            .await
            .map_err(|_| denied(format!("looking up {name} timed out")))?
            .map_err(|e| denied(format!("{name} does not resolve ({e})")))?;
            let addrs: Vec<SocketAddr> = found.collect();
            for a in &addrs {
                if let Some(kind) = rules::refused(a.ip(), &policy.host_addresses) {
                    return Err(denied(format!(
                        "{name} resolves to {}, a {kind} address (map it with networkResolve to allow it)",
                        a.ip()
                    )));
                }
            }
            if addrs.is_empty() {
                return Err(denied(format!("{name} has no address")));
            }
            Ok((target, addrs))
        }
    }
}

/// Dials the first address that answers.
async fn dial(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for a in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"),
        }
    }
    Err(last)
}

/// An upstream connection that counts its bytes, stamps its last activity, and emits its
/// audit event when dropped (when the connection is over).
struct Counted {
    inner: TcpStream,
    up: u64,
    down: u64,
    born: Instant,
    last_ms: Arc<AtomicU64>,
    audit: Option<(Arc<Scope>, EgressEvent, Instant)>,
}

impl Counted {
    fn new(inner: TcpStream, scope: Arc<Scope>, target: &Target, started: Instant) -> Counted {
        let event = scope.event(Ok(target), EgressDecision::Allowed);
        Counted {
            inner,
            up: 0,
            down: 0,
            born: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
            audit: Some((scope, event, started)),
        }
    }

    fn touch(&self) {
        self.last_ms
            .store(self.born.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some((scope, mut event, started)) = self.audit.take() {
            event.bytes_up = self.up;
            event.bytes_down = self.down;
            scope.emit(event, None, started);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            self.down += n;
            self.touch();
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.up += n as u64;
            self.touch();
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The ClientHello's server name, read from the tunnel's first bytes (which are kept).
async fn read_hello<S: AsyncRead + Unpin>(
    client: &mut S,
) -> Result<(Vec<u8>, Option<String>), String> {
    let mut buf = Vec::with_capacity(2048);
    let deadline = tokio::time::Instant::now() + HEAD_TIMEOUT;
    loop {
        match sni::client_hello(&buf) {
            sni::Hello::Parsed(name) => return Ok((buf, name)),
            sni::Hello::NotTls(why) => {
                return Err(format!("the tunnel does not start with TLS: {why}"));
            }
            sni::Hello::Incomplete if buf.len() >= sni::MAX_HELLO => {
                return Err("the TLS ClientHello is too large".into());
            }
            sni::Hello::Incomplete => {}
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout_at(deadline, client.read(&mut chunk))
            .await
            .map_err(|_| "no TLS ClientHello arrived in time".to_string())?
            .map_err(|e| format!("the tunnel failed before its ClientHello: {e}"))?;
        if n == 0 {
            return Err("the tunnel closed before its ClientHello".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

impl Scope {
    /// One request on an egress connection.
    async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        permit: Permit,
    ) -> Response<ResponseBody> {
        match feed::asked(&req) {
            Some(Ok(query)) => return feed::respond(&self.feed.answer(query).await),
            Some(Err(why)) => return feed::refuse(&why),
            None => {}
        }
        let started = Instant::now();
        let hosts: Vec<Vec<u8>> = req
            .headers()
            .get_all(HOST)
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect();
        let hosts: Vec<&[u8]> = hosts.iter().map(Vec::as_slice).collect();
        if req.method() == Method::CONNECT {
            let authority = req
                .uri()
                .authority()
                .map(|a| a.as_str().to_string())
                .unwrap_or_else(|| req.uri().to_string());
            let mut view = self.policy.view();
            let policy = view.borrow_and_update().clone();
            return match admit(&policy, &self.workspace, &authority, None, &hosts).await {
                Err((t, why)) => {
                    let mut r = self.deny(t.as_ref().ok_or(authority.as_str()), why, started);
                    r.headers_mut()
                        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                    r
                }
                Ok((target, addrs)) => {
                    let upgrade = hyper::upgrade::on(req);
                    let route = self.route(&policy, &target);
                    let watch = (permit, view, route);
                    tokio::spawn(self.tunnel(upgrade, target, addrs, started, watch));
                    Response::new(Empty::new().map_err(|never| match never {}).boxed())
                }
            };
        }
        let view = self.policy.view();
        self.plain(req, &hosts, started, view).await
    }

    /// A CONNECT tunnel, once answered: the ClientHello checked, then the upstream dialled and
    /// the bytes relayed until either side ends or it idles for [`IDLE_TIMEOUT`].
    async fn tunnel(
        self: Arc<Self>,
        upgrade: hyper::upgrade::OnUpgrade,
        target: Target,
        addrs: Vec<SocketAddr>,
        started: Instant,
        (_permit, view, route): (Permit, Watched, Route),
    ) {
        let Ok(upgraded) = upgrade.await else { return };
        let mut client = TokioIo::new(upgraded);
        let hello = read_hello(&mut client)
            .await
            .and_then(|(bytes, name)| rules::sni_matches(name.as_deref(), &target).map(|()| bytes));
        let hello = match hello {
            Ok(bytes) => bytes,
            Err(why) => {
                let _ = client.write_all(&ACCESS_DENIED_ALERT).await;
                let _ = client.shutdown().await;
                self.emit(
                    self.event(Ok(&target), EgressDecision::Denied),
                    Some(why),
                    started,
                );
                return;
            }
        };
        let (upstream, route) = match dial_for(&addrs, &view, route).await {
            Ok(opened) => opened,
            Err(not) => {
                let (decision, why) = match not {
                    NotOpened::Withdrawn => (EgressDecision::Denied, WITHDRAWN.to_string()),
                    NotOpened::Failed(e) => (
                        EgressDecision::Failed,
                        format!("cannot reach {target}: {e}"),
                    ),
                };
                self.emit(self.event(Ok(&target), decision), Some(why), started);
                return;
            }
        };
        let mut upstream = Counted::new(upstream, self.clone(), &target, started);
        if upstream.write_all(&hello).await.is_err() {
            return;
        }
        let last = upstream.last_ms.clone();
        let born = upstream.born;
        let revoked = revoked(view, route);
        tokio::pin!(revoked);
        let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
        tokio::pin!(copy);
        loop {
            tokio::select! {
                _ = &mut copy => break,
                _ = &mut revoked => {
                    tracing::debug!(%target, "egress tunnel closed: the policy no longer allows it");
                    break;
                }
                _ = tokio::time::sleep(Duration::from_secs(5)) => {
                    let idle = born.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed);
                    if idle >= IDLE_TIMEOUT.as_millis() as u64 {
                        break;
                    }
                }
            }
        }
    }

    /// An absolute-form plain-HTTP request: checked, then sent on a new upstream connection
    /// in origin form, without the proxy's hop-by-hop headers.
    async fn plain(
        self: Arc<Self>,
        req: Request<Incoming>,
        hosts: &[&[u8]],
        started: Instant,
        mut view: Watched,
    ) -> Response<ResponseBody> {
        let uri = req.uri().clone();
        let Some(authority) = uri.authority().map(|a| a.as_str().to_string()) else {
            let why = "only CONNECT and absolute-form http:// requests go through the egress proxy"
                .to_string();
            return self.deny(Err(uri.path()), why, started);
        };
        if uri.scheme_str() != Some("http") {
            let why = format!(
                "{} requests go through CONNECT, not as absolute-form requests",
                uri.scheme_str().unwrap_or("other")
            );
            return self.deny(Err(&authority), why, started);
        }
        let policy = view.borrow_and_update().clone();
        let (target, addrs) = match admit(&policy, &self.workspace, &authority, Some(80), hosts)
            .await
        {
            Ok(ok) => ok,
            Err((t, why)) => return self.deny(t.as_ref().ok_or(authority.as_str()), why, started),
        };
        let (upstream, route) = match dial_for(&addrs, &view, self.route(&policy, &target)).await {
            Ok((s, route)) => (Counted::new(s, self.clone(), &target, started), route),
            Err(NotOpened::Withdrawn) => return self.deny(Ok(&target), WITHDRAWN.into(), started),
            Err(NotOpened::Failed(e)) => {
                return self.fail(&target, format!("cannot reach {target}: {e}"), started);
            }
        };
        let (mut parts, body) = req.into_parts();
        parts.uri = uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .parse()
            .unwrap_or_default();
        for h in HOP_BY_HOP {
            parts.headers.remove(h);
        }
        let (mut sender, conn) =
            match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
                Ok(pair) => pair,
                Err(e) => {
                    return self.fail(
                        &target,
                        format!("the upstream {target} failed: {e}"),
                        started,
                    );
                }
            };
        // The upstream connection ends when the policy no longer allows it (its response
        // with it).
        let revoked = revoked(view, route);
        tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = revoked => {}
                _ = conn => {}
            }
        });
        match sender.send_request(Request::from_parts(parts, body)).await {
            Ok(response) => {
                let (mut parts, body) = response.into_parts();
                for h in HOP_BY_HOP {
                    parts.headers.remove(h);
                }
                Response::from_parts(parts, body.map_err(Into::into).boxed())
            }
            Err(e) => text(
                StatusCode::BAD_GATEWAY,
                &format!("egress failed: the upstream {target} failed: {e}"),
            ),
        }
    }
}

/// Serves one grant's egress socket: at most [`EGRESS_CONNECTIONS`] at once (a connection over
/// that is closed unanswered).
pub(super) async fn serve_egress(listener: SocketListener, scope: Arc<Scope>) {
    #[cfg(not(unix))]
    {
        let _ = scope;
        match listener {}
    }
    #[cfg(unix)]
    {
        let connections = Arc::new(Semaphore::new(EGRESS_CONNECTIONS));
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Ok(permit) = connections.clone().try_acquire_owned() else {
                tracing::debug!(grant = %scope.grant, "egress connection refused: {EGRESS_CONNECTIONS} open");
                continue;
            };
            let scope = scope.clone();
            // A tunnel outlives the HTTP connection it came from: it holds the permit too.
            let permit = Arc::new(permit);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let scope = scope.clone();
                    let permit = permit.clone();
                    async move { Ok::<_, std::convert::Infallible>(scope.handle(req, permit).await) }
                });
                serve_connection(stream, service).await;
            });
        }
    }
}

/// Serves one proxy connection (either route's): HTTP/1.1, kept alive, with upgrades (`CONNECT`
/// tunnels), its head bounded in time and size.
async fn serve_connection<I, S>(stream: I, service: S)
where
    I: AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = ResponseBody>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "egress connection ended");
    }
}

/// The `Proxy-Authorization` value that names a grant on the TCP route: `Basic` and
/// base64(`po:<token>`), what clients send for a proxy URL `http://po:<token>@host:port`.
pub fn basic_credentials(token: &str) -> String {
    super::git::credential::basic("po", token)
}

/// Serves the shared egress port of the TCP route: each request names its grant with
/// `Proxy-Authorization` (checked on every request of a kept-alive connection), which
/// `scope_of` looks up; without a live grant's credentials it is answered `407`. At most
/// `connections` (the broker's [`super::limits::MAX_TCP_CONNECTIONS`]) at once.
pub(super) async fn serve_egress_tcp<F>(
    listener: tokio::net::TcpListener,
    connections: Arc<Semaphore>,
    scope_of: F,
) where
    F: Fn(&[u8]) -> Option<Arc<Scope>> + Clone + Send + Sync + 'static,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let permit = Arc::new(permit);
        let scope_of = scope_of.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let scope_of = scope_of.clone();
                let permit = permit.clone();
                async move {
                    let scope = req
                        .headers()
                        .get(hyper::header::PROXY_AUTHORIZATION)
                        .and_then(|v| scope_of(v.as_bytes()));
                    Ok::<_, std::convert::Infallible>(match scope {
                        Some(scope) => scope.handle(req, permit).await,
                        None => {
                            let mut r = text(
                                StatusCode::PROXY_AUTHENTICATION_REQUIRED,
                                "egress denied: the request carries no live grant's proxy credentials",
                            );
                            r.headers_mut().insert(
                                hyper::header::PROXY_AUTHENTICATE,
                                HeaderValue::from_static("Basic realm=\"po-egress\""),
                            );
                            r
                        }
                    })
                }
            });
            serve_connection(stream, service).await;
        });
    }
}

#[cfg(all(test, unix))]
mod tests;
