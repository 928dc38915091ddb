//! One request of a registry route: the broker's framing, method, target and placement rules,
//! the placeholder checked (npm's Bearer token or pip's Basic password), then the request sent
//! to the registry's fixed origin and path with the host's credential, its answer streamed back.

use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{self, HeaderName};
use hyper::{Request, Response, StatusCode};

use super::Registry;
use crate::broker::audit::AuditEvent;
use crate::broker::limits::IDLE_TIMEOUT;
use crate::broker::reply::{ResponseBody, said};
use crate::broker::request::{self, Refusal};
use crate::broker::server::{Broker, Connection};
use crate::broker::service::basic_password;
use crate::lock::Locked;

/// The request headers sent on (the rest stay here).
const SENT_ON: [&str; 8] = [
    "accept",
    "accept-encoding",
    "user-agent",
    "if-none-match",
    "if-modified-since",
    "npm-command",
    "npm-scope",
    "npm-session",
];
/// The response headers sent back.
const SENT_BACK: [HeaderName; 7] = [
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LENGTH,
    header::ETAG,
    header::LAST_MODIFIED,
    header::CACHE_CONTROL,
    header::LOCATION,
];
/// The redirects within a registry's own origin followed by the broker.
const MAX_REDIRECTS: usize = 4;

/// The Basic challenge of this route's `401`.
const REALM: &str = "Basic realm=\"po-sandbox registry\"";

fn text(status: StatusCode, why: &str) -> Response<ResponseBody> {
    said(status, why, false, REALM)
}

impl Broker {
    /// Serves one request of registry route `index`.
    pub(in crate::broker) async fn serve_registry(
        &self,
        req: Request<Incoming>,
        connection: &Connection,
        index: usize,
    ) -> Response<ResponseBody> {
        let started = Instant::now();
        let Some(registry) = self.inner.registries.get(index).cloned() else {
            return text(StatusCode::NOT_FOUND, "no such registry route");
        };
        let mut event = AuditEvent {
            grant: None,
            workspace: None,
            provider: Some(format!("registry:{}", registry.name())),
            method: request::audited_method(req.method().as_str()).to_string(),
            path: "/…".into(),
            status: 0,
            bytes: 0,
            duration_ms: 0,
            error: None,
        };
        let response = match self.admit_registry(&req, connection) {
            Err((status, why, closes)) => {
                let r = said(status, &why, closes, REALM);
                event.error = Some(why);
                r
            }
            Ok((grant, workspace)) => {
                event.path = req.uri().path().to_string();
                event.grant = Some(grant);
                event.workspace = Some(workspace);
                let registry = self.by_scope(&req, registry);
                event.provider = Some(format!("registry:{}", registry.name()));
                self.send_registry(req, &registry)
                    .await
                    .unwrap_or_else(|why| {
                        event.error = Some(why.clone());
                        text(StatusCode::BAD_GATEWAY, &why)
                    })
            }
        };
        event.status = response.status().as_u16();
        event.duration_ms = started.elapsed().as_millis() as u64;
        self.inner.audit.request(event);
        response
    }

    /// The rules before anything is sent; the grant and workspace of a live placeholder.
    fn admit_registry(
        &self,
        req: &Request<Incoming>,
        connection: &Connection,
    ) -> Result<(String, String), (StatusCode, String, bool)> {
        let refused = |r: Refusal| (r.status(), r.message(), r.closes());
        let reads = "a registry route only reads (GET, HEAD): publishing goes from the host";
        self.service_rules(req, connection, (&["GET", "HEAD"], reads))?;
        let headers = req.headers();
        let unauthorized = |why: &str| (StatusCode::UNAUTHORIZED, why.to_string(), false);
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| unauthorized("the registry route takes the grant's placeholder as a Bearer token or a Basic password"))?;
        let placeholder = match value.strip_prefix("Bearer ") {
            Some(t) => t.trim().to_string(),
            None => basic_password(value).ok_or_else(|| {
                unauthorized("the Authorization header is neither Bearer nor Basic")
            })?,
        };
        let grant = self
            .live_service_grant(&placeholder, connection.scope.as_deref(), |e| e.registry)
            .ok_or_else(|| unauthorized("the placeholder is not a live registry grant's here"))?;
        if connection.scope.is_none() {
            self.attribute(connection, &grant).map_err(refused)?;
        }
        let workspace = self
            .inner
            .grants
            .locked()
            .get(&grant)
            .map(|g| g.workspace.clone())
            .unwrap_or_default();
        Ok((grant, workspace))
    }

    /// The registry a request of an npm route is for: its scope's when the path names a scoped
    /// package whose scope has a registry here (npm sends every tarball to the default
    /// registry's route), else the route's own.
    fn by_scope(&self, req: &Request<Incoming>, own: Registry) -> Registry {
        if own.kind != super::Kind::Npm {
            return own;
        }
        // A scoped package's name is a segment of its paths (`/@s/p`, `/@s%2fp`, a tarball's
        // `/download/@s/p/…` or `/api/npm/repo/@s/p/-/…`): the registry of its scope, the one
        // whose path the request is under when several could be.
        let path = req.uri().path().replace("%2f", "/").replace("%2F", "/");
        let scopes: Vec<&str> = path.split('/').filter(|s| s.starts_with('@')).collect();
        self.inner
            .registries
            .iter()
            .filter(|r| r.kind == super::Kind::Npm)
            .filter(|r| r.scope.as_deref().is_some_and(|s| scopes.contains(&s)))
            .max_by_key(|r| {
                if path.starts_with(&r.prefix) {
                    r.prefix.len()
                } else {
                    0
                }
            })
            .cloned()
            .unwrap_or(own)
    }

    /// The request sent to the registry's origin with the host's credential.
    async fn send_registry(
        &self,
        req: Request<Incoming>,
        r: &Registry,
    ) -> Result<Response<ResponseBody>, String> {
        let path = req.uri().path();
        // npm's registry URL in the container is the route's root: its requests get the
        // registry's path in front, but for a tarball URL, which keeps it (npm puts only its
        // host in front). pip's index URL keeps the index's path, and its files are paths on
        // the same origin: sent as they are.
        let path = match r.kind == super::Kind::Pip || path.starts_with(&r.prefix) {
            true => path.to_string(),
            false => format!("{}{}", r.prefix.trim_end_matches('/'), path),
        };
        let query = req
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let client = self
            .inner
            .client
            .get()
            .await
            .map_err(|e| format!("the broker has no TLS set-up for {}: {e}", r.url()))?;
        let mut url = format!("{}{path}{query}", r.origin);
        let mut redirects = 0;
        let response = loop {
            let out = outgoing(&req, &url, r)?;
            let response = match tokio::time::timeout(IDLE_TIMEOUT, client.request(out)).await {
                Ok(Ok(resp)) => resp,
                Ok(Err(e)) => return Err(format!("the registry {} did not answer: {e}", r.url())),
                Err(_) => {
                    let secs = IDLE_TIMEOUT.as_secs();
                    return Err(format!(
                        "the registry {} sent no answer within {secs} s",
                        r.url()
                    ));
                }
            };
            let next = response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .filter(|_| response.status().is_redirection());
            // Only within the registry's own origin: a redirect elsewhere (a tarball on a CDN)
            // goes back to the client as it is, which follows it by its own way out (none in
            // `none`), never the broker (no request of the host's to an address it names).
            let next = next.and_then(|l| redirect(&url, l));
            let next = next.filter(|n| n.starts_with(&format!("{}/", r.origin)));
            match next {
                Some(next) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    url = next;
                }
                Some(_) => {
                    return Err(format!(
                        "the registry {} redirected more than {MAX_REDIRECTS} times",
                        r.url()
                    ));
                }
                None => break response,
            }
        };
        Ok(crate::broker::forward::streamed(response, &SENT_BACK))
    }
}

/// One request to `url` for `req`: the headers sent on, and the host's credential when `url` is
/// on the registry's own origin (never where it redirects elsewhere).
fn outgoing(
    req: &Request<Incoming>,
    url: &str,
    r: &Registry,
) -> Result<
    Request<http_body_util::combinators::BoxBody<Bytes, crate::broker::reply::BoxError>>,
    String,
> {
    let mut out = Request::builder().method(req.method()).uri(url);
    for name in SENT_ON {
        for v in req.headers().get_all(name) {
            out = out.header(name, v);
        }
    }
    if url.starts_with(&format!("{}/", r.origin))
        && let Some(value) = r.credential.header()
    {
        out = out.header(header::AUTHORIZATION, value);
    }
    let empty = Empty::<Bytes>::new().map_err(|never| match never {});
    out.body(empty.boxed())
        .map_err(|e| format!("the request to {} does not form: {e}", r.url()))
}

/// Where a redirect from `from` to `location` leads: an absolute `http(s)` URL, or a path on the
/// same origin; `None` for anything else.
fn redirect(from: &str, location: &str) -> Option<String> {
    if location.starts_with("https://") || location.starts_with("http://") {
        return Some(location.to_string());
    }
    let path = location.strip_prefix('/').filter(|p| !p.starts_with('/'))?;
    let (scheme, rest) = from.split_once("://")?;
    let authority = rest.split('/').next()?;
    Some(format!("{scheme}://{authority}/{path}"))
}
