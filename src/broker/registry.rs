//! The registry routes: npm registries and a Python package index reached from inside a
//! container with the host's credential, which never enters it.
//!
//! Each brokered registry has a route of its own: on the socket route a socket per grant
//! (`reg-<n>.sock` beside `broker.sock`, which the container's bridge carries to loopback port
//! [`FIRST_PORT`]` + n`), on the TCP route a port of the broker's shared by the grants. A
//! route's every request goes to its registry's fixed origin and path; the container's
//! placeholder (`PO_BROKER_REGISTRY_TOKEN`, as npm's Bearer token or pip's Basic password) is
//! swapped for the host's credential. npm is pointed at the routes by a generated user config
//! (`npm_config_userconfig`, naming the placeholder by its variable, and
//! `replace-registry-host=always` so tarballs come through the route too); pip by
//! `PIP_INDEX_URL`.
//!
//! Which registries: the host's npm user config (`npm_config_userconfig`, else `~/.npmrc`):
//! its `registry` and each `@scope:registry` that has a credential there
//! (`//host/path/:_authToken`, `_auth`, or `username` and `_password`; `${VAR}` expanded from the
//! hub's environment), and the default registry with `NPM_TOKEN` when the config has none for it;
//! and the host's `PIP_INDEX_URL` when it carries a user and password.

mod listen;
pub mod npmrc;
mod serve;

pub use listen::{NPMRC_PATH, NPMRC_VAR, SOCKET_PREFIX, Sockets, close_sockets, socket_name};

use std::collections::HashMap;

use crate::broker::secret::Secret;

/// The loopback port of a socket-route container where its bridge carries registry route 0.
pub const FIRST_PORT: u16 = 47400;
/// The most registries brokered.
pub const MAX_REGISTRIES: usize = 16;
/// The container's variable holding the grant's registry placeholder.
pub const TOKEN_VAR: &str = "PO_BROKER_REGISTRY_TOKEN";
/// The placeholder's prefix (then 64 hex digits).
pub const TOKEN_PREFIX: &str = "po-reg-";
/// The variable naming the bridge's registry ports (`port=socket,…`).
pub const PORTS_VAR: &str = "PO_SANDBOX_REGISTRY_PORTS";

/// What a registry speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Npm,
    Pip,
}

/// The host's credential for a registry.
#[derive(Clone)]
pub enum Credential {
    Bearer(Secret),
    Basic(String, Secret),
    /// None (npm's default registry, read as the public reads it).
    None,
}

impl Credential {
    /// The `Authorization` value the registry gets, when it gets one.
    pub fn header(&self) -> Option<String> {
        match self {
            Credential::Bearer(t) => Some(format!("Bearer {}", t.expose())),
            Credential::Basic(user, pass) => {
                Some(super::git::credential::basic(user, pass.expose()))
            }
            Credential::None => None,
        }
    }
}

/// A brokered registry.
#[derive(Clone)]
pub struct Registry {
    pub kind: Kind,
    /// The npm scope (`@acme`) it serves; `None`: the default registry (or pip's index).
    pub scope: Option<String>,
    /// `scheme://host[:port]`.
    pub origin: String,
    /// Its path, starting and ending with `/`.
    pub prefix: String,
    pub credential: Credential,
    /// Where the credential came from (never the credential).
    pub source: String,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Registry({:?} {:?} {}{} from {})",
            self.kind, self.scope, self.origin, self.prefix, self.source
        )
    }
}

impl Registry {
    /// `scheme://host[:port]/path/` of the registry.
    pub fn url(&self) -> String {
        format!("{}{}", self.origin, self.prefix)
    }

    /// How the doctor and the report name it.
    pub fn name(&self) -> String {
        match (self.kind, &self.scope) {
            (Kind::Npm, Some(scope)) => format!("npm {scope} ({})", self.url()),
            (Kind::Npm, None) => format!("npm ({})", self.url()),
            (Kind::Pip, _) => format!("pip ({})", self.url()),
        }
    }
}

/// A URL split into origin and path (`http(s)` only, no query or fragment); the path ends
/// with `/`.
pub fn split_url(url: &str) -> Option<(String, String)> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') || path.contains(['?', '#']) {
        return None;
    }
    let path = if path.ends_with('/') {
        path.to_string()
    } else {
        format!("{path}/")
    };
    Some((
        format!("{scheme}://{}", authority.to_ascii_lowercase()),
        path,
    ))
}

/// The registries the host's configuration brokers (at most [`MAX_REGISTRIES`]).
pub fn from_host(env: &HashMap<String, String>) -> Vec<Registry> {
    let mut out = npmrc::registries(env);
    if let Some(index) = pip_index(env) {
        out.push(index);
    }
    out.truncate(MAX_REGISTRIES);
    out
}

/// The host's `PIP_INDEX_URL`, when it carries a user and password.
fn pip_index(env: &HashMap<String, String>) -> Option<Registry> {
    let url = env.get("PIP_INDEX_URL")?.trim();
    let (scheme, rest) = url.split_once("://")?;
    let (userinfo, rest) = rest.split_once('@').filter(|(u, _)| !u.contains('/'))?;
    let (user, pass) = userinfo.split_once(':')?;
    let (origin, prefix) = split_url(&format!("{scheme}://{rest}"))?;
    let decode = |s: &str| {
        String::from_utf8_lossy(&crate::broker::decode::percent_decode(s.as_bytes())).into_owned()
    };
    Some(Registry {
        kind: Kind::Pip,
        scope: None,
        origin,
        prefix,
        credential: Credential::Basic(decode(user), Secret::new(decode(pass))),
        source: "PIP_INDEX_URL".into(),
    })
}

/// The registries a container's npm config and pip index (its environment) name through the
/// registry routes (`npm`, `npm @scope`, `pip`).
pub fn names_in(env: &HashMap<String, String>) -> Vec<String> {
    let get = |name: &str| env.get(name).map(String::as_str);
    if get(TOKEN_VAR).is_none_or(str::is_empty) {
        return Vec::new();
    }
    let npmrc = get(NPMRC_VAR).unwrap_or_default();
    let mut out: Vec<String> = npmrc
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
        .filter_map(|k| match k {
            "registry" => Some("npm".to_string()),
            _ => k
                .strip_suffix(":registry")
                .map(|scope| format!("npm {scope}")),
        })
        .collect();
    if get("PIP_INDEX_URL").is_some_and(|u| u.contains(TOKEN_PREFIX)) {
        out.push("pip".into());
    }
    out
}

#[cfg(test)]
mod tests;
