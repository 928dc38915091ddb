//! One request of the git route: the broker's framing, method and token rules, the
//! placeholder checked, a push judged, then the request sent to the host's origin with the
//! host's credential and its answer streamed back.

use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use subtle::ConstantTimeEq;

use super::path::{Endpoint, Service, Target};
use super::push::{Context, Verdict};
use super::{GitHost, GitState, pack, pkt, push};
use crate::broker::audit::AuditEvent;
use crate::broker::forward::Idle;
use crate::broker::limits::IDLE_TIMEOUT;
use crate::broker::reply::{BoxError, ResponseBody, full};
use crate::broker::request::{self, Refusal};
use crate::broker::server::{Broker, Connection, hash};
use crate::lock::{Locked, ReadWriteLocked};

/// The largest push body the broker reads (a push is judged whole before the host sees it).
pub const MAX_PUSH_BYTES: usize = 64 << 20;
/// The request headers sent on to the host (the rest stay here).
const SENT_ON: [header::HeaderName; 4] = [
    header::CONTENT_TYPE,
    header::ACCEPT,
    header::CONTENT_ENCODING,
    header::USER_AGENT,
];
/// The response headers sent back.
const SENT_BACK: [header::HeaderName; 4] = [
    header::CONTENT_TYPE,
    header::CACHE_CONTROL,
    header::EXPIRES,
    header::PRAGMA,
];

/// A git request admitted: its target, host, grant and workspace.
struct Admitted {
    target: Target,
    host: GitHost,
    grant: String,
    workspace: String,
}

fn text(status: StatusCode, why: &str) -> Response<ResponseBody> {
    let mut r = Response::new(full(format!("{why}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

impl Broker {
    /// The git route's policy in force, when the broker serves it.
    pub fn git_policy(&self) -> Option<std::sync::Arc<super::GitPolicy>> {
        self.inner.git.as_ref().map(GitState::policy)
    }

    /// Puts `policy` in force for the git route (its next requests); `false` when the broker
    /// has none. A host added here is reached only by containers whose git configuration
    /// names it (those made after it was added).
    pub fn set_git_policy(&self, policy: super::GitPolicy) -> bool {
        match &self.inner.git {
            Some(git) => {
                git.set_policy(policy);
                true
            }
            None => false,
        }
    }

    /// Serves one request of the git route (its path starts with `/git/`).
    pub(in crate::broker) async fn serve_git(
        &self,
        req: Request<Incoming>,
        connection: &Connection,
        git: &GitState,
    ) -> Response<ResponseBody> {
        let started = Instant::now();
        let mut event = AuditEvent {
            grant: None,
            workspace: None,
            provider: Some("git".into()),
            method: request::audited_method(req.method().as_str()).to_string(),
            path: "/git/…".into(),
            status: 0,
            bytes: 0,
            duration_ms: 0,
            error: None,
        };
        let admitted = match self.admit_git(&req, connection, git) {
            Ok(a) => a,
            Err((status, why, closes)) => {
                let mut r = text(status, &why);
                if status == StatusCode::UNAUTHORIZED {
                    r.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        HeaderValue::from_static("Basic realm=\"po-sandbox git\""),
                    );
                }
                if closes {
                    r.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                event.status = status.as_u16();
                event.error = Some(why);
                self.audit_git(event, started);
                return r;
            }
        };
        event.path = req.uri().path().to_string();
        event.grant = Some(admitted.grant.clone());
        event.workspace = Some(admitted.workspace.clone());
        let answer = match admitted.target.endpoint {
            Endpoint::Rpc(Service::ReceivePack) => self.push(req, &admitted, git).await,
            _ => {
                let (parts, body) = req.into_parts();
                let body = Idle::new(body, IDLE_TIMEOUT).without_trailers().boxed();
                self.send(&parts.headers, body, &admitted, git).await
            }
        };
        let response = answer.unwrap_or_else(|(status, why)| {
            event.error = Some(why.clone());
            text(status, &why)
        });
        event.status = response.status().as_u16();
        self.audit_git(event, started);
        response
    }

    fn audit_git(&self, mut event: AuditEvent, started: Instant) {
        event.duration_ms = started.elapsed().as_millis() as u64;
        self.inner.audit.request(event);
    }

    /// The rules before anything is sent: framing, method, target, the one auth header, no
    /// placeholder elsewhere, and a live placeholder of this socket's grant in Basic auth.
    fn admit_git(
        &self,
        req: &Request<Incoming>,
        connection: &Connection,
        git: &GitState,
    ) -> Result<Admitted, (StatusCode, String, bool)> {
        let refused = |r: Refusal| (r.status(), r.message(), r.closes());
        if let Some(fault) = connection.fault.get() {
            return Err(refused(Refusal::Framing(fault)));
        }
        let method = req.method().as_str();
        if method != "GET" && method != "POST" {
            return Err(refused(Refusal::Method));
        }
        request::target(req.uri()).map_err(refused)?;
        let headers = req.headers();
        request::framing_headers(headers).map_err(refused)?;
        let target = super::path::parse(method, req.uri().path(), req.uri().query())
            .map_err(|why| (StatusCode::NOT_FOUND, why, false))?;
        let policy = git.policy();
        let host = policy.host(&target.host).cloned().ok_or_else(|| {
            let why = format!(
                "{} is not a git host the broker carries (git.hosts in the sandbox policy, or {})",
                target.host,
                super::HOSTS_VAR
            );
            (StatusCode::NOT_FOUND, why, false)
        })?;
        let auth = request::auth_header(headers).map_err(refused)?;
        {
            let tokens = self.inner.tokens.read_locked();
            let whole = req.uri().path_and_query().map_or("", |pq| pq.as_str());
            request::token_placement(&tokens.index, method, whole, headers, auth)
                .map_err(refused)?;
        }
        let unauthorized = |why: &str| (StatusCode::UNAUTHORIZED, why.to_string(), false);
        if auth != Some("authorization") {
            return Err(unauthorized(
                "the git route takes Basic auth with the grant's placeholder (the credential helper of the container's git configuration gives it)",
            ));
        }
        let placeholder = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(decode_basic)
            .ok_or_else(|| unauthorized("the Authorization header is not Basic user:password"))?;
        let grant = self
            .live_git_grant(&placeholder, connection.scope.as_deref())
            .ok_or_else(|| unauthorized("the placeholder is not a live git grant's here"))?;
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
        Ok(Admitted {
            target,
            host,
            grant,
            workspace,
        })
    }

    /// The grant whose git placeholder `token` is (on a grant's own socket, that grant's).
    fn live_git_grant(&self, token: &str, scope: Option<&str>) -> Option<String> {
        let tokens = self.inner.tokens.read_locked();
        let e = tokens.by_hash.get(&hash(token))?;
        (e.git
            && bool::from(e.token.expose().as_bytes().ct_eq(token.as_bytes()))
            && scope.is_none_or(|s| s == e.grant))
        .then(|| e.grant.clone())
    }

    /// A push: its head read and judged, its pack read when an update must move forward; a
    /// refused push is answered here (git shows each reason) and the host sees none of it.
    async fn push(
        &self,
        req: Request<Incoming>,
        a: &Admitted,
        git: &GitState,
    ) -> Result<Response<ResponseBody>, (StatusCode, String)> {
        let (parts, body) = req.into_parts();
        if parts
            .headers
            .get(header::CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes() != b"identity")
        {
            let why = "a compressed push is not read (git does not compress one)";
            return Err((StatusCode::BAD_REQUEST, why.into()));
        }
        let body = read_bounded(body).await?;
        let head = match pkt::head(&body) {
            Ok(Some(head)) => head,
            Ok(None) => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "the push ends inside its ref updates".into(),
                ));
            }
            Err(why) => return Err((StatusCode::BAD_REQUEST, why)),
        };
        let repository = a.target.repository();
        let remotes = self
            .inner
            .grants
            .locked()
            .get(&a.grant)
            .map(|g| g.git_remotes.clone())
            .unwrap_or_default();
        let policy = git.policy();
        let default_branch = match head.commands.is_empty() {
            true => None,
            false => self.default_branch(a, git).await,
        };
        let created = |name: &str| git.created(&a.workspace, &repository, name);
        let ctx = Context {
            repository: &repository,
            remotes: &remotes,
            rules: &policy.push,
            default_branch: default_branch.as_deref(),
            created: &created,
        };
        let refused = judged(&ctx, &head, &body);
        if !refused.is_empty() {
            tracing::info!(workspace = %a.workspace, %repository, "git push refused: {refused:?}");
            return Ok(refusal(&head, &refused));
        }
        for c in head.commands.iter().filter(|c| c.creates()) {
            git.record_created(&a.workspace, &repository, &c.name);
        }
        let body = Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed();
        self.send(&parts.headers, body, a, git).await
    }

    /// The repository's default branch, as the host advertises it to a fetch
    /// (`symref=HEAD:refs/heads/…`); `None` when it does not say.
    async fn default_branch(&self, a: &Admitted, git: &GitState) -> Option<String> {
        let target = Target {
            endpoint: Endpoint::Refs(Service::UploadPack),
            ..a.target.clone()
        };
        let probe = Admitted {
            target,
            host: a.host.clone(),
            grant: a.grant.clone(),
            workspace: a.workspace.clone(),
        };
        let empty = Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed();
        let response = self
            .send(&hyper::HeaderMap::new(), empty, &probe, git)
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body = response.into_body().collect().await.ok()?.to_bytes();
        let text = String::from_utf8_lossy(&body[..body.len().min(64 * 1024)]);
        let at = text.find("symref=HEAD:")? + "symref=HEAD:".len();
        let name: String = text[at..]
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '\0')
            .collect();
        name.starts_with("refs/heads/").then_some(name)
    }

    /// Sends the request to the host's origin with the host's credential (when one is found);
    /// an advertisement the host refuses is asked once more with the credential found again.
    async fn send(
        &self,
        headers: &hyper::HeaderMap,
        body: BoxBody<Bytes, BoxError>,
        a: &Admitted,
        git: &GitState,
    ) -> Result<Response<ResponseBody>, (StatusCode, String)> {
        let retry = matches!(a.target.endpoint, Endpoint::Refs(_));
        let mut body = Some(body);
        for attempt in 0..2 {
            let credential = git.credentials.get(&a.host).await;
            let this_body = match retry {
                true => Full::new(Bytes::new())
                    .map_err(|never| match never {})
                    .boxed(),
                false => body
                    .take()
                    .ok_or((StatusCode::BAD_GATEWAY, "no body to send".to_string()))?,
            };
            let out = outgoing(headers, this_body, a, credential.as_ref())?;
            let client = self.inner.client.get().await.map_err(|e| {
                let why = format!("the broker has no TLS set-up for {}: {e}", a.host.name);
                (StatusCode::BAD_GATEWAY, why)
            })?;
            let response = match tokio::time::timeout(IDLE_TIMEOUT, client.request(out)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    let why = format!(
                        "the git host {} ({}) did not answer: {e}",
                        a.host.name, a.host.origin
                    );
                    return Err((StatusCode::BAD_GATEWAY, why));
                }
                Err(_) => {
                    let secs = IDLE_TIMEOUT.as_secs();
                    let why = format!(
                        "the git host {} sent no answer within {secs} s",
                        a.host.name
                    );
                    return Err((StatusCode::GATEWAY_TIMEOUT, why));
                }
            };
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                git.credentials.forget(&a.host);
                if retry && attempt == 0 && credential.is_some() {
                    continue;
                }
                return Err((
                    StatusCode::FORBIDDEN,
                    host_refused(a, credential.as_ref(), status),
                ));
            }
            return Ok(answer(response));
        }
        let why = format!("the git host {} refused twice", a.host.name);
        Err((StatusCode::BAD_GATEWAY, why))
    }
}

/// The request to the host: its fixed origin, the repository and endpoint, the headers git
/// needs, the host's credential.
fn outgoing(
    headers: &hyper::HeaderMap,
    body: BoxBody<Bytes, BoxError>,
    a: &Admitted,
    credential: Option<&super::credential::Credential>,
) -> Result<Request<BoxBody<Bytes, BoxError>>, (StatusCode, String)> {
    let uri = format!(
        "{}/{}/{}",
        a.host.origin,
        a.target.repo,
        a.target.endpoint.target()
    );
    let mut out = Request::builder()
        .uri(&uri)
        .method(match a.target.endpoint {
            Endpoint::Refs(_) => hyper::Method::GET,
            Endpoint::Rpc(_) => hyper::Method::POST,
        });
    for name in &SENT_ON {
        for v in headers.get_all(name) {
            out = out.header(name, v);
        }
    }
    if let Some(v) = headers.get("git-protocol") {
        out = out.header("git-protocol", v);
    }
    if let Some(c) = credential {
        out = out.header(header::AUTHORIZATION, c.basic());
    }
    out.body(body).map_err(|e| {
        let why = format!("the request to {} does not form: {e}", a.host.name);
        (StatusCode::BAD_GATEWAY, why)
    })
}

/// Why the host refused, and where the credential came from (or where none was found).
fn host_refused(
    a: &Admitted,
    credential: Option<&super::credential::Credential>,
    status: StatusCode,
) -> String {
    match credential {
        Some(c) => format!(
            "the git host {} refused the host's credential (from {}) with {status}",
            a.host.name, c.source
        ),
        None => format!(
            "the git host {} needs a credential and none was found on the host (git credential fill for {}, {}, or {})",
            a.host.name,
            a.host.origin,
            match a.host.name.as_str() {
                "github.com" => "GH_TOKEN or GITHUB_TOKEN",
                "gitlab.com" => "GITLAB_TOKEN",
                _ => "no token variable for this host",
            },
            super::COMMAND_VAR
        ),
    }
}

/// The host's answer as the container gets it: its status, body and the headers git uses.
fn answer(response: Response<Incoming>) -> Response<ResponseBody> {
    let (parts, body) = response.into_parts();
    let mut back = Response::new(
        Idle::new(body, IDLE_TIMEOUT)
            .without_trailers()
            .map_err(Into::into)
            .boxed(),
    );
    *back.status_mut() = parts.status;
    for name in &SENT_BACK {
        for v in parts.headers.get_all(name) {
            back.headers_mut().append(name, v.clone());
        }
    }
    back
}

/// The updates of a push the rules refuse, each with why: judged one by one, then (when none
/// is refused) those that must move forward checked against the push's own commits.
fn judged(ctx: &Context<'_>, head: &pkt::Head, body: &[u8]) -> Vec<(String, String)> {
    let mut refused: Vec<(String, String)> = Vec::new();
    let mut forward: Vec<&pkt::Command> = Vec::new();
    for c in &head.commands {
        match push::judge(ctx, c) {
            Verdict::Allow => {}
            Verdict::FastForward => forward.push(c),
            Verdict::Refuse(why) => refused.push((c.name.clone(), why)),
        }
    }
    if refused.is_empty() && !forward.is_empty() {
        let commits =
            pkt::pack_start(body, head).and_then(|at| pack::commits(&body[at..], head.sha256));
        for c in forward {
            let moves = commits
                .as_ref()
                .is_ok_and(|commits| pack::descends(commits, &c.new, &c.old));
            if !moves {
                refused.push((c.name.clone(), push::not_forward(c, ctx.repository)));
            }
        }
    }
    refused
}

/// The broker's own answer to a refused push: git's report, which git shows.
fn refusal(head: &pkt::Head, refused: &[(String, String)]) -> Response<ResponseBody> {
    let message = refused
        .iter()
        .map(|(name, why)| format!("Po sandbox refused {name}: {why}"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut r = Response::new(full(pkt::refusal_report(head, refused, &message)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-git-receive-pack-result"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The `password` of a Basic auth value.
fn decode_basic(value: &str) -> Option<String> {
    let b64 = value.strip_prefix("Basic ")?.trim();
    let bytes = decode_base64(b64)?;
    let text = String::from_utf8(bytes).ok()?;
    let (_, password) = text.split_once(':')?;
    Some(password.to_string())
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return None,
        }
    }
    Some(out)
}

/// A push's body, whole, at most [`MAX_PUSH_BYTES`].
async fn read_bounded(body: Incoming) -> Result<Vec<u8>, (StatusCode, String)> {
    let limited = http_body_util::Limited::new(Idle::new(body, IDLE_TIMEOUT), MAX_PUSH_BYTES);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes().to_vec()),
        Err(e) => Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the push was not read whole ({e}); pushes through the broker are at most {} MiB",
                MAX_PUSH_BYTES >> 20
            ),
        )),
    }
}
