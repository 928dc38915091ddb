//! Forwarding an admitted request: the real key in place of the token, the provider's fixed
//! upstream, and the answer streamed back frame by frame with no header carrying the key.
//! [`Forwarder`] holds what it needs of the broker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::OnceCell;

use super::audit::{Audit, AuditEvent};
use super::headers::{AUTH_HEADERS, HOP_BY_HOP};
use super::limits::IDLE_TIMEOUT;
use super::policy::ForwardPolicy;
use super::reply::{BoxError, Failure, ResponseBody, plain};
use super::routes::{self, AuthScheme, ProviderRoute};
use super::screen::shape::Grammar;
use super::screen::{self, Stopped, Verdict};
use super::secret::Secret;
use crate::error::{Error, Result};

pub type HttpsClient =
    Client<hyper_rustls::HttpsConnector<HttpConnector>, BoxBody<Bytes, BoxError>>;

/// The upstream client, built on first use (once; concurrent callers wait for the one build),
/// off the async threads.
#[derive(Default)]
pub struct UpstreamClient(OnceCell<HttpsClient>);

impl UpstreamClient {
    pub async fn get(&self) -> Result<&HttpsClient> {
        self.0
            .get_or_try_init(|| async {
                tokio::task::spawn_blocking(https_client)
                    .await
                    .map_err(|e| Error::broker_caused("the TLS set-up did not finish", e))?
            })
            .await
    }
}

fn https_client() -> Result<HttpsClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(30)));
    let connector = tls_builder()?
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector))
}

type TlsBuilder = hyper_rustls::HttpsConnectorBuilder<hyper_rustls::builderstates::WantsSchemes>;

/// The system's roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` honoured), else Mozilla's.
#[cfg(not(target_os = "macos"))]
fn tls_builder() -> Result<TlsBuilder> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    match hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider.clone())
    {
        Ok(b) => Ok(b),
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(provider)
            .map_err(|e| Error::broker_caused("no TLS set-up", e)),
    }
}

/// Mozilla's roots only: the keychain backend links Apple's Security framework, which a
/// build on Linux has no SDK for (see docs/platforms.md).
#[cfg(target_os = "macos")]
fn tls_builder() -> Result<TlsBuilder> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(provider)
        .map_err(|e| Error::broker_caused("no TLS set-up", e))
}

/// A request that passed every rule: its provider, the path after the provider segment, its
/// query, the scheme its token came in, the token, and the grant.
pub struct Admitted {
    pub route: &'static ProviderRoute,
    pub rest: String,
    /// `?query` or empty.
    pub query: String,
    pub scheme: AuthScheme,
    pub token: Secret,
}

/// What forwarding takes from the broker: the host environment (its keys and base URLs), the
/// policy (whose bodies are screened), the upstream client, and the audit each answer goes to.
pub struct Forwarder<'a> {
    pub host_env: &'a HashMap<String, String>,
    pub policy: &'a ForwardPolicy,
    pub client: &'a UpstreamClient,
    pub audit: &'a Arc<Audit>,
}

impl Forwarder<'_> {
    /// Sends the request upstream with the real key and streams the answer back; audits it
    /// when the answer ends.
    pub async fn forward(
        &self,
        req: Request<Incoming>,
        (admitted, grammar): (Admitted, Option<&'static Grammar>),
        mut event: AuditEvent,
        started: Instant,
    ) -> std::result::Result<Response<ResponseBody>, (AuditEvent, Failure)> {
        let route = admitted.route;
        let env = self.host_env;
        let (Some((_, key)), Ok(upstream)) =
            (routes::host_key(route, env), routes::upstream(route, env))
        else {
            let why = format!("the host has no usable {} configuration", route.id);
            return Err((event, Failure(StatusCode::BAD_GATEWAY, why)));
        };
        let key = Secret::new(key);
        let uri = format!(
            "{}{}{}",
            upstream.origin(),
            upstream.target(&admitted.rest),
            admitted.query
        );
        let verdict = Verdict::default();
        let body = match self.screened(route, req, grammar, &verdict).await {
            Ok(parts) => parts,
            Err(failure) => return Err((event, failure)),
        };
        let out = match outgoing(body, uri, &upstream.authority(), admitted.scheme, &key) {
            Ok(out) => out,
            Err(failure) => return Err((event, failure)),
        };
        let client = match self.client.get().await {
            Ok(c) => c,
            Err(e) => {
                let why = format!("the broker has no TLS set-up for {}: {e}", route.id);
                return Err((event, Failure(StatusCode::BAD_GATEWAY, why)));
            }
        };
        let response = match tokio::time::timeout(IDLE_TIMEOUT, client.request(out)).await {
            Ok(Ok(r)) => r,
            Err(_) => {
                let why = format!(
                    "{} upstream {} sent no answer within {} s",
                    route.id,
                    upstream.origin(),
                    IDLE_TIMEOUT.as_secs()
                );
                return Err((event, Failure(StatusCode::GATEWAY_TIMEOUT, why)));
            }
            // The screen ended the body mid-stream: the upstream never got all of it.
            Ok(Err(_)) if verdict.get().is_some() => {
                let found = verdict.get().expect("checked just above");
                return Err((event, ForwardPolicy::fetch_refused(route, grammar, found)));
            }
            Ok(Err(e)) => {
                let why = format!(
                    "{} upstream {} did not answer: {}",
                    route.id,
                    upstream.origin(),
                    redact(&e.to_string(), &key, &admitted.token)
                );
                return Err((event, Failure(StatusCode::BAD_GATEWAY, why)));
            }
        };
        event.status = response.status().as_u16();
        Ok(self.answer(response, &key, event, started))
    }

    /// The request with its body bounded by the idle limit, trailers dropped, and (where the
    /// policy screens this provider's bodies) screened: a finding in the first
    /// [`screen::HOLD`] bytes, or a compressed body, is a 403 before the upstream is called.
    async fn screened(
        &self,
        route: &'static ProviderRoute,
        req: Request<Incoming>,
        grammar: Option<&'static Grammar>,
        verdict: &Verdict,
    ) -> std::result::Result<Request<BoxBody<Bytes, BoxError>>, Failure> {
        let (parts, body) = req.into_parts();
        let body = Idle::new(body, IDLE_TIMEOUT).without_trailers();
        if !self.policy.screens(route) {
            return Ok(Request::from_parts(parts, body.boxed()));
        }
        let encoded = parts
            .headers
            .get_all(hyper::header::CONTENT_ENCODING)
            .iter()
            .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
        if encoded {
            return Err(ForwardPolicy::encoded_refused(route));
        }
        match screen::screen(body, grammar, verdict.clone()).await {
            Ok(body) => Ok(Request::from_parts(parts, screen::boxed(body))),
            Err(Stopped::Found(found)) => Err(ForwardPolicy::fetch_refused(route, grammar, &found)),
            Err(Stopped::Broken(e)) => {
                let why = format!("the request body did not arrive: {e}");
                Err(Failure(StatusCode::BAD_REQUEST, why))
            }
        }
    }

    /// The upstream's answer for the client: redirects passed on, never followed; no header
    /// carrying the real key; the body streamed and audited when it ends.
    fn answer(
        &self,
        response: Response<Incoming>,
        key: &Secret,
        event: AuditEvent,
        started: Instant,
    ) -> Response<ResponseBody> {
        let (parts, body) = response.into_parts();
        let mut back = Response::builder().status(parts.status);
        let back_headers = back.headers_mut().expect("a fresh builder has headers");
        copy_headers(&parts.headers, back_headers);
        drop_echoes(back_headers, key.expose());
        let body = AuditedBody {
            // An upstream that goes quiet mid-stream for longer than the idle bound ends it.
            inner: Idle::new(body, IDLE_TIMEOUT),
            bytes: 0,
            audit: self.audit.clone(),
            event: Some(event),
            started,
        };
        back.body(BodyExt::boxed(body))
            .unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "bad upstream response"))
    }
}

/// The request for the upstream: end-to-end headers only, its `Host`, the real key in the
/// token's header (marked sensitive), the body as [`Forwarder::screened`] made it.
fn outgoing(
    req: Request<BoxBody<Bytes, BoxError>>,
    uri: String,
    authority: &str,
    scheme: AuthScheme,
    key: &Secret,
) -> std::result::Result<Request<BoxBody<Bytes, BoxError>>, Failure> {
    let (parts, body) = req.into_parts();
    let mut out = Request::builder().method(parts.method).uri(uri);
    let headers = out.headers_mut().expect("a fresh builder has headers");
    copy_headers(&parts.headers, headers);
    for h in AUTH_HEADERS {
        headers.remove(h);
    }
    headers.remove(hyper::header::HOST);
    if let Ok(v) = HeaderValue::from_str(authority) {
        headers.insert(hyper::header::HOST, v);
    }
    let Ok(mut value) = HeaderValue::from_str(&scheme.encode(key.expose())) else {
        let why = "the host key is not a valid header value".to_string();
        return Err(Failure(StatusCode::BAD_GATEWAY, why));
    };
    value.set_sensitive(true);
    headers.insert(HeaderName::from_static(scheme.header()), value);
    out.body(body)
        .map_err(|e| Failure(StatusCode::BAD_REQUEST, format!("cannot forward: {e}")))
}

/// Copies every end-to-end header: hop-by-hop ones and those `Connection` names are dropped.
pub fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
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

/// Drops each response header (one value of many, e.g. one `Set-Cookie`) whose name or value
/// holds the key in any letter case.
pub fn drop_echoes(headers: &mut HeaderMap, key: &str) {
    let key = key.to_ascii_lowercase();
    if key.is_empty() {
        return;
    }
    let holds = |bytes: &[u8]| {
        bytes
            .to_ascii_lowercase()
            .windows(key.len())
            .any(|w| w == key.as_bytes())
    };
    let echoes =
        |n: &HeaderName, v: &HeaderValue| holds(n.as_str().as_bytes()) || holds(v.as_bytes());
    if !headers.iter().any(|(n, v)| echoes(n, v)) {
        return;
    }
    let kept: Vec<(HeaderName, HeaderValue)> = headers
        .iter()
        .filter(|(n, v)| !echoes(n, v))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    headers.clear();
    for (n, v) in kept {
        headers.append(n, v);
    }
}

fn redact(text: &str, key: &Secret, token: &Secret) -> String {
    text.replace(key.expose(), "***")
        .replace(token.expose(), "***")
}

/// A body that fails when its source sends nothing for `limit`: a stalled upload or a stream
/// gone quiet must not hold one of the broker's connections for ever.
pub struct Idle<B> {
    inner: B,
    limit: Duration,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    trailers: bool,
}

impl<B> Idle<B> {
    pub fn new(inner: B, limit: Duration) -> Self {
        Idle {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
            trailers: true,
        }
    }

    /// Trailer frames are dropped.
    pub fn without_trailers(mut self) -> Self {
        self.trailers = false;
        self
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
        loop {
            return match std::pin::Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) if !self.trailers && frame.is_trailers() => continue,
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
            };
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
    audit: Arc<Audit>,
    event: Option<AuditEvent>,
    started: Instant,
}

impl AuditedBody {
    fn finish(&mut self, error: Option<String>) {
        if let Some(mut e) = self.event.take() {
            e.bytes = self.bytes;
            e.duration_ms = self.started.elapsed().as_millis() as u64;
            e.error = error;
            self.audit.request(e);
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

#[cfg(test)]
mod tests;

/// An upstream's answer as the container gets it: its status and body (bounded by the idle
/// limit, trailers dropped) and only the headers in `keep`.
pub fn streamed(
    response: Response<hyper::body::Incoming>,
    keep: &[hyper::header::HeaderName],
) -> Response<ResponseBody> {
    let (parts, body) = response.into_parts();
    let body = Idle::new(body, super::limits::IDLE_TIMEOUT).without_trailers();
    let mut back = Response::new(body.map_err(Into::into).boxed());
    *back.status_mut() = parts.status;
    for name in keep {
        for v in parts.headers.get_all(name) {
            back.headers_mut().append(name, v.clone());
        }
    }
    back
}
