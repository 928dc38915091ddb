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

use super::path::{Endpoint, Service, Target};
use super::push::{Context, Verdict};
use super::{GitHost, GitState, pack, pkt, push};
use crate::broker::audit::AuditEvent;
use crate::broker::forward::Idle;
use crate::broker::limits::IDLE_TIMEOUT;
use crate::broker::reply::{BoxError, ResponseBody, full, said};
use crate::broker::request::{self, Refusal};
use crate::broker::server::{Broker, Connection};
use crate::broker::service::basic_password;
use crate::lock::Locked;

/// The largest push body the broker reads (a push is judged whole before the host sees it).
pub const MAX_PUSH_BYTES: usize = 64 << 20;
/// How long a push's body may take to arrive.
const PUSH_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// The most of a host's refs advertisement read.
const MAX_REFS_BYTES: usize = 16 << 20;
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
    /// The workspace's remotes (those of its grant).
    remotes: Vec<String>,
    /// The host's credential goes with its requests: the repository is one of the
    /// workspace's remotes or a push rule names it (any other is read as the public reads it).
    credentialed: bool,
}

/// The Basic challenge of this route's `401`.
const REALM: &str = "Basic realm=\"po-sandbox git\"";

fn text(status: StatusCode, why: &str) -> Response<ResponseBody> {
    said(status, why, false, REALM)
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
                let r = said(status, &why, closes, REALM);
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
            // A push to a repository no rule lets through is refused before the host is asked
            // (which, with no credential, would only say it needs one).
            Endpoint::Refs(Service::ReceivePack) if !admitted.credentialed => {
                let repository = admitted.target.repository();
                Err((
                    StatusCode::FORBIDDEN,
                    format!(
                        "Po sandbox refused a push: {repository} is not a remote of this workspace; the person can allow it in the host's sandbox policy: git: push: [{{ repo: {repository}, refs: refs/heads/<branch> }}]"
                    ),
                ))
            }
            Endpoint::Rpc(Service::ReceivePack) => self.push(req, &admitted, git).await,
            // An advertisement has no body to send.
            Endpoint::Refs(_) => self.send(req.headers(), None, &admitted, git).await,
            Endpoint::Rpc(_) => {
                let (parts, body) = req.into_parts();
                let body = Idle::new(body, IDLE_TIMEOUT).without_trailers().boxed();
                self.send(&parts.headers, Some(body), &admitted, git).await
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
        let methods = (&["GET", "POST"][..], Refusal::Method.message());
        let auth = self.service_rules(req, connection, (methods.0, &methods.1))?;
        let (method, headers) = (req.method().as_str(), req.headers());
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
        let unauthorized = |why: &str| (StatusCode::UNAUTHORIZED, why.to_string(), false);
        if auth != Some("authorization") {
            return Err(unauthorized(
                "the git route takes Basic auth with the grant's placeholder (the credential helper of the container's git configuration gives it)",
            ));
        }
        let placeholder = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(basic_password)
            .ok_or_else(|| unauthorized("the Authorization header is not Basic user:password"))?;
        let grant = self
            .live_service_grant(&placeholder, connection.scope.as_deref(), |e| e.git)
            .ok_or_else(|| unauthorized("the placeholder is not a live git grant's here"))?;
        if connection.scope.is_none() {
            self.attribute(connection, &grant).map_err(refused)?;
        }
        let (workspace, remotes) = self
            .inner
            .grants
            .locked()
            .get(&grant)
            .map(|g| (g.workspace.clone(), g.git_remotes.clone()))
            .unwrap_or_default();
        let repository = target.repository();
        let credentialed = remotes.contains(&repository)
            || policy
                .push
                .iter()
                .any(|r| push::repo_matches(&r.repo, &repository));
        Ok(Admitted {
            target,
            host,
            grant,
            workspace,
            remotes,
            credentialed,
        })
    }

    /// A push: its head read and judged (against the host's refs, read first, when a rule
    /// could let it through), its pack read when an update must move forward; a refused push
    /// is answered here (git shows each reason) and the host sees none of it.
    async fn push(
        &self,
        req: Request<Incoming>,
        a: &Admitted,
        git: &GitState,
    ) -> Result<Response<ResponseBody>, (StatusCode, String)> {
        let (parts, body) = req.into_parts();
        let encodings = parts.headers.get_all(header::CONTENT_ENCODING);
        if encodings.iter().any(|v| v.as_bytes() != b"identity") {
            let why = "a compressed push is not read (git does not compress one)";
            return Err((StatusCode::BAD_REQUEST, why.into()));
        }
        // A few pushes are held at once (each up to MAX_PUSH_BYTES), each read within a bound.
        let _held = git.pushes.try_acquire().map_err(|_| {
            let why = format!(
                "{} pushes are being read already: push again in a moment",
                super::MAX_PUSHES
            );
            (StatusCode::SERVICE_UNAVAILABLE, why)
        })?;
        let body = tokio::time::timeout(PUSH_READ_TIMEOUT, read_bounded(body))
            .await
            .map_err(|_| {
                let secs = PUSH_READ_TIMEOUT.as_secs();
                let why = format!("the push was not sent whole within {secs} s");
                (StatusCode::REQUEST_TIMEOUT, why)
            })??;
        let head = match pkt::head(&body) {
            Ok(Some(head)) => head,
            Ok(None) => {
                let why = "the push ends inside its ref updates";
                return Err((StatusCode::BAD_REQUEST, why.into()));
            }
            Err(why) => return Err((StatusCode::BAD_REQUEST, why)),
        };
        let repository = a.target.repository();
        let refs = match !head.commands.is_empty() && a.credentialed {
            true => Some(self.host_refs(a, git).await),
            false => None,
        };
        let (policy, workspace, remotes) = (git.policy(), a.workspace.clone(), a.remotes.clone());
        let created = git.created_in(&a.workspace, &repository);
        let judging = (head.clone(), body.clone(), repository.clone());
        let refused = tokio::task::spawn_blocking(move || {
            let (head, body, repository) = judging;
            let refs = refs.as_ref().map(|r| r.as_ref().map_err(String::as_str));
            let ctx = Context {
                repository: &repository,
                remotes: &remotes,
                rules: &policy.push,
                default_branch: refs.and_then(|r| r.ok()).and_then(|r| r.head.as_deref()),
                created: &|name: &str| created.contains(name),
            };
            judged(&ctx, refs, &head, &body)
        })
        .await
        .map_err(|e| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the push was not judged: {e}"),
            )
        })?;
        if !refused.is_empty() {
            tracing::info!(%workspace, %repository, "git push refused: {refused:?}");
            return Ok(refusal(&head, &refused));
        }
        for c in head.commands.iter().filter(|c| c.creates()) {
            git.record_created(&a.workspace, &repository, &c.name);
        }
        let body = Full::new(body).map_err(|never| match never {}).boxed();
        self.send(&parts.headers, Some(body), a, git).await
    }

    /// The repository's refs and default branch as the host advertises them to a fetch
    /// (read up to [`MAX_REFS_BYTES`]); why not, when they cannot be read.
    async fn host_refs(&self, a: &Admitted, git: &GitState) -> Result<HostRefs, String> {
        let target = Target {
            endpoint: Endpoint::Refs(Service::UploadPack),
            ..a.target.clone()
        };
        let probe = Admitted {
            target,
            host: a.host.clone(),
            grant: a.grant.clone(),
            workspace: a.workspace.clone(),
            remotes: Vec::new(),
            credentialed: a.credentialed,
        };
        let response = self
            .send(&hyper::HeaderMap::new(), None, &probe, git)
            .await
            .map_err(|(_, why)| why)?;
        if !response.status().is_success() {
            return Err(format!(
                "the host answered {} for its refs",
                response.status()
            ));
        }
        let mut body = response.into_body();
        let mut read: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("the host's refs were not read whole ({e})"))?;
            if let Ok(data) = frame.into_data() {
                read.extend_from_slice(&data);
            }
            if read.len() > MAX_REFS_BYTES {
                return Err(format!(
                    "the host's refs are larger than {} MiB",
                    MAX_REFS_BYTES >> 20
                ));
            }
        }
        HostRefs::parse(&read)
    }

    /// Sends the request to the host's origin with the host's credential (when one is found);
    /// a request with no `body` (an advertisement) the host refuses as not valid is asked once
    /// more with the credential found again.
    async fn send(
        &self,
        headers: &hyper::HeaderMap,
        mut body: Option<BoxBody<Bytes, BoxError>>,
        a: &Admitted,
        git: &GitState,
    ) -> Result<Response<ResponseBody>, (StatusCode, String)> {
        let mut again = body.is_none();
        loop {
            let credential = match a.credentialed {
                true => git.credentials.get(&a.host).await,
                false => None,
            };
            let this_body = body.take().unwrap_or_else(|| {
                Full::new(Bytes::new())
                    .map_err(|never| match never {})
                    .boxed()
            });
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
                // Not valid (401): found again, once; not allowed (403) stays as it is.
                if status == StatusCode::UNAUTHORIZED && credential.is_some() {
                    git.credentials.forget(&a.host);
                }
                if again && credential.is_some() && status == StatusCode::UNAUTHORIZED {
                    again = false;
                    continue;
                }
                return Err((
                    StatusCode::FORBIDDEN,
                    host_refused(a, credential.as_ref(), status),
                ));
            }
            return Ok(crate::broker::forward::streamed(response, &SENT_BACK));
        }
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
            match super::credential::token_vars(&a.host.origin) {
                [] => "no token variable for this host".to_string(),
                vars => vars.join(" or "),
            },
            super::COMMAND_VAR
        ),
    }
}

/// The updates of a push the rules refuse, each with why: checked against the host's refs
/// (a branch created must not exist, an update must start where the host's is), judged one by
/// one, then (when none is refused) those that must move forward checked against the push's
/// own commits.
fn judged(
    ctx: &Context<'_>,
    refs: Option<Result<&HostRefs, &str>>,
    head: &pkt::Head,
    body: &[u8],
) -> Vec<(String, String)> {
    let mut refused: Vec<(String, String)> = Vec::new();
    let mut forward: Vec<&pkt::Command> = Vec::new();
    for c in &head.commands {
        let verdict = match (push::judge(ctx, c), refs) {
            (Verdict::Refuse(why), _) => Verdict::Refuse(why),
            (_, None) => Verdict::Refuse("the host's refs were not asked".into()),
            (_, Some(Err(why))) => {
                Verdict::Refuse(format!("the host's refs could not be read: {why}"))
            }
            (v, Some(Ok(refs))) => match (refs.refs.get(&c.name), c.creates()) {
                (Some(_), true) => {
                    Verdict::Refuse(format!("{} exists on the host already", c.name))
                }
                (Some(at), false) if *at != c.old => Verdict::Refuse(format!(
                    "{} is not at {} on the host (fetch first)",
                    c.name, c.old
                )),
                (None, false) => Verdict::Refuse(format!("{} does not exist on the host", c.name)),
                _ => v,
            },
        };
        match verdict {
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

/// The refs a host advertises to a fetch, and its default branch (`symref=HEAD:`).
#[derive(Debug, Default)]
pub struct HostRefs {
    pub head: Option<String>,
    pub refs: std::collections::HashMap<String, String>,
}

impl HostRefs {
    /// An `info/refs?service=git-upload-pack` answer (protocol v0).
    pub fn parse(body: &[u8]) -> Result<HostRefs, String> {
        let mut out = HostRefs::default();
        let mut at = 0;
        while at + 4 <= body.len() {
            let len = std::str::from_utf8(&body[at..at + 4])
                .ok()
                .and_then(|l| usize::from_str_radix(l, 16).ok())
                .ok_or("the host's refs are not pkt-lines")?;
            if len == 0 {
                at += 4;
                continue;
            }
            let line = body
                .get(at + 4..at + len)
                .ok_or("the host's refs end early")?;
            at += len;
            let line = String::from_utf8_lossy(line);
            let (text, caps) = line.split_once('\0').unwrap_or((&line, ""));
            if let Some(target) = caps.split(' ').find_map(|c| c.strip_prefix("symref=HEAD:")) {
                out.head = Some(target.trim().to_string());
            }
            if let Some((id, name)) = text.trim_end().split_once(' ')
                && name.starts_with("refs/")
            {
                out.refs.insert(name.to_string(), id.to_string());
            }
        }
        Ok(out)
    }
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

/// A push's body, whole, at most [`MAX_PUSH_BYTES`].
async fn read_bounded(body: Incoming) -> Result<Bytes, (StatusCode, String)> {
    let limited = http_body_util::Limited::new(Idle::new(body, IDLE_TIMEOUT), MAX_PUSH_BYTES);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the push was not read whole ({e}); pushes through the broker are at most {} MiB",
                MAX_PUSH_BYTES >> 20
            ),
        )),
    }
}
