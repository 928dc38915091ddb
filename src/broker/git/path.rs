//! The git route's requests: `/git/<host>/<repository>/<endpoint>`, where the endpoint is one
//! of git's smart-HTTP ones and nothing else (no dumb-HTTP object paths, no web pages, no
//! API). The repository is plain segments only: no percent-encoding at all, no `.` or `..`,
//! nothing hidden; so what the rules judge is what the host gets.

/// git's two services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    UploadPack,
    ReceivePack,
}

impl Service {
    pub fn name(self) -> &'static str {
        match self {
            Service::UploadPack => "git-upload-pack",
            Service::ReceivePack => "git-receive-pack",
        }
    }
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET …/info/refs?service=<service>`: the refs advertised.
    Refs(Service),
    /// `POST …/<service>`: the exchange.
    Rpc(Service),
}

impl Endpoint {
    /// The path after the repository, with its query.
    pub fn target(self) -> String {
        match self {
            Endpoint::Refs(s) => format!("info/refs?service={}", s.name()),
            Endpoint::Rpc(s) => s.name().to_string(),
        }
    }
}

/// A git request: the host's name as the route names it, the repository path as sent, and
/// the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub repo: String,
    pub endpoint: Endpoint,
}

impl Target {
    /// The repository as the rules name it: `host/path`, lower case, without `.git`.
    pub fn repository(&self) -> String {
        repository(&self.host, &self.repo)
    }
}

/// `host/path` as the rules name a repository, without a trailing `/`. On github.com and
/// gitlab.com, which read names so, also in lower case and without `.git`; any other host is
/// taken as written (a server on a file system may hold `App` beside `app`, `app.git` beside
/// `app`).
pub fn repository(host: &str, path: &str) -> String {
    let path = path.trim_end_matches('/');
    match folds(host) {
        true => {
            let path = path.strip_suffix(".git").unwrap_or(path);
            format!("{host}/{path}").to_ascii_lowercase()
        }
        false => format!("{host}/{path}"),
    }
}

/// Whether the host reads repository names without case and `.git` (github.com, gitlab.com).
pub fn folds(host: &str) -> bool {
    matches!(host, "github.com" | "gitlab.com")
}

/// The first path segment of the git route.
pub const PREFIX: &str = "/git/";
/// The most segments a repository path has (GitLab nests groups 20 deep).
const MAX_SEGMENTS: usize = 21;

fn segment_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s != "."
        && s != ".."
        && !s.eq_ignore_ascii_case(".git")
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
}

/// Whether `name` has the form of a host name of the git route (`name` or `name:port`).
pub fn host_ok(name: &str) -> bool {
    let (host, port) = match name.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (name, None),
    };
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
        && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

/// The request `method path?query`, when it is one of git's smart-HTTP requests under
/// [`PREFIX`]; else why not (shown to git as the answer's text).
pub fn parse(method: &str, path: &str, query: Option<&str>) -> Result<Target, String> {
    const FORM: &str = "the git route serves only git's smart-HTTP requests: GET /git/<host>/<repository>/info/refs?service=git-upload-pack|git-receive-pack and POST /git/<host>/<repository>/git-upload-pack|git-receive-pack";
    let rest = path.strip_prefix(PREFIX).ok_or(FORM)?;
    let (host, rest) = rest.split_once('/').ok_or(FORM)?;
    if !host_ok(host) {
        return Err(format!("{host:?} is not a host name of the git route"));
    }
    let (repo, endpoint) = if let Some(repo) = rest.strip_suffix("/info/refs") {
        let service = match (method, query) {
            ("GET", Some("service=git-upload-pack")) => Service::UploadPack,
            ("GET", Some("service=git-receive-pack")) => Service::ReceivePack,
            _ => return Err(FORM.into()),
        };
        (repo, Endpoint::Refs(service))
    } else if let Some(repo) = rest.strip_suffix("/git-upload-pack") {
        (repo, Endpoint::Rpc(Service::UploadPack))
    } else if let Some(repo) = rest.strip_suffix("/git-receive-pack") {
        (repo, Endpoint::Rpc(Service::ReceivePack))
    } else {
        return Err(FORM.into());
    };
    if matches!(endpoint, Endpoint::Rpc(_)) && (method != "POST" || query.is_some()) {
        return Err(FORM.into());
    }
    let segments: Vec<&str> = repo.split('/').collect();
    if segments.len() > MAX_SEGMENTS || !segments.iter().all(|s| segment_ok(s)) {
        return Err(
            "a repository path is plain segments (letters, digits, '-', '_', '.', '~'; no '.', '..' or '.git' segment; no percent-encoding)"
                .into(),
        );
    }
    Ok(Target {
        host: host.to_string(),
        repo: repo.to_string(),
        endpoint,
    })
}
