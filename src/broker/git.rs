//! The git route: git over HTTPS from inside a container with no credential inside.
//!
//! The container's git is pointed at the broker by its environment alone (`GIT_CONFIG_COUNT`
//! and its keys: `url.<broker>/git/<host>/.insteadOf` for `https://<host>/`, `git@<host>:` and
//! `ssh://git@<host>/`, and a credential helper that answers the grant's placeholder,
//! `PO_BROKER_GIT_TOKEN`), so no file changes and a repository cloned with an SSH remote works
//! too. The broker takes only git's smart-HTTP requests ([`path`]) for the hosts it carries
//! ([`GitPolicy::hosts`]), checks the placeholder (Basic auth, decoded), judges a push's ref
//! updates ([`push`], the pack read by [`pack`]) before the host sees any of it, and sends the
//! request to the host's fixed origin with the host's own credential ([`credential`]).

pub(crate) mod credential;
mod pack;
pub mod path;
pub mod pkt;
pub mod push;
mod serve;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

#[cfg(test)]
pub use credential::MIN_KEPT;
pub use credential::{COMMAND_VAR, Credentials};
pub use push::PushRule;

use crate::lock::{Locked, ReadWriteLocked};

/// The variable listing the git hosts (`name` or `name=origin`, comma-separated; empty: none).
pub const HOSTS_VAR: &str = "PO_SANDBOX_GIT_HOSTS";
/// The hosts carried when nothing says otherwise.
pub const DEFAULT_HOSTS: [&str; 2] = ["github.com", "gitlab.com"];
/// The container's variable holding the grant's git placeholder.
pub const TOKEN_VAR: &str = "PO_BROKER_GIT_TOKEN";
/// The git placeholder's prefix (then 64 hex digits).
pub const TOKEN_PREFIX: &str = "po-git-";
/// The loopback port of a socket-route container where its bridge carries the broker socket.
pub const BRIDGE_PORT: u16 = 47390;
/// The variable naming that port to the bridge.
pub const PORT_VAR: &str = "PO_SANDBOX_GIT_PORT";

/// A git host the broker carries: the name the container's remotes use, and the origin the
/// broker sends its requests to (`https://<name>` unless the person mapped it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitHost {
    pub name: String,
    pub origin: String,
}

impl GitHost {
    /// `name` or `name=origin` (`http(s)://host[:port]`, no path).
    pub fn parse(entry: &str) -> Result<GitHost, String> {
        let entry = entry.trim();
        let (name, origin) = match entry.split_once('=') {
            Some((n, o)) => (n.trim(), Some(o.trim().trim_end_matches('/'))),
            None => (entry, None),
        };
        if !path::host_ok(name) {
            return Err(format!(
                "{name:?} is not a host name (lower-case letters, digits, '-' and '.', an optional :port)"
            ));
        }
        let origin = match origin {
            None => format!("https://{name}"),
            Some(o) => {
                let rest = o
                    .strip_prefix("https://")
                    .or_else(|| o.strip_prefix("http://"))
                    .ok_or_else(|| format!("{o:?} is not an http:// or https:// origin"))?;
                if !path::host_ok(rest) {
                    return Err(format!(
                        "{o:?} is not an origin (scheme://host[:port], no path, no user)"
                    ));
                }
                o.to_string()
            }
        };
        Ok(GitHost {
            name: name.to_string(),
            origin,
        })
    }

    /// As it is written in the variable and the file.
    pub fn entry(&self) -> String {
        match self.origin == format!("https://{}", self.name) {
            true => self.name.clone(),
            false => format!("{}={}", self.name, self.origin),
        }
    }
}

/// The hosts a list names (each once, the last word on a name wins).
pub fn parse_hosts<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Vec<GitHost>, String> {
    let mut hosts: Vec<GitHost> = Vec::new();
    for e in entries.into_iter().map(str::trim).filter(|e| !e.is_empty()) {
        let h = GitHost::parse(e)?;
        hosts.retain(|o| o.name != h.name);
        hosts.push(h);
    }
    Ok(hosts)
}

/// The default hosts.
pub fn default_hosts() -> Vec<GitHost> {
    parse_hosts(DEFAULT_HOSTS).expect("the default hosts parse")
}

/// The git route's policy: the hosts it carries and the push rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GitPolicy {
    pub hosts: Vec<GitHost>,
    pub push: Vec<PushRule>,
}

impl GitPolicy {
    pub fn host(&self, name: &str) -> Option<&GitHost> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

/// What the broker keeps for the git route.
pub struct GitState {
    policy: RwLock<Arc<GitPolicy>>,
    pub credentials: Credentials,
    /// The branches each workspace created, by repository (at most [`MAX_CREATED`] each).
    created: Mutex<HashMap<(String, String), HashSet<String>>>,
    /// The pushes held at once.
    pub pushes: tokio::sync::Semaphore,
}

/// The most branches recorded as created per workspace and repository.
pub const MAX_CREATED: usize = 1000;
/// The most pushes the broker holds at once.
pub const MAX_PUSHES: usize = 4;

impl GitState {
    pub fn new(policy: GitPolicy, env: HashMap<String, String>) -> GitState {
        GitState {
            policy: RwLock::new(Arc::new(policy)),
            credentials: Credentials::new(env),
            created: Mutex::new(HashMap::new()),
            pushes: tokio::sync::Semaphore::new(MAX_PUSHES),
        }
    }

    pub fn policy(&self) -> Arc<GitPolicy> {
        self.policy.read_locked().clone()
    }

    pub fn set_policy(&self, policy: GitPolicy) {
        *self.policy.write_locked() = Arc::new(policy);
    }

    /// The branches `workspace` created in `repository`.
    fn created_in(&self, workspace: &str, repository: &str) -> HashSet<String> {
        self.created
            .locked()
            .get(&(workspace.to_string(), repository.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    fn record_created(&self, workspace: &str, repository: &str, name: &str) {
        let mut created = self.created.locked();
        let set = created
            .entry((workspace.to_string(), repository.to_string()))
            .or_default();
        if set.len() < MAX_CREATED {
            set.insert(name.to_string());
        }
    }
}

/// The container's git configuration for `hosts` through the broker at `base`
/// (`http://127.0.0.1:<port>` or the TCP route's address): `GIT_CONFIG_COUNT` and its pairs.
pub fn container_env(base: &str, hosts: &[GitHost]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for h in hosts {
        let to = format!("url.{base}/git/{}/.insteadOf", h.name);
        let bare = h.name.split(':').next().unwrap_or(&h.name);
        pairs.push((to.clone(), format!("https://{}/", h.name)));
        pairs.push((to.clone(), format!("git@{bare}:")));
        pairs.push((to, format!("ssh://git@{bare}/")));
    }
    // The broker is reached directly, never through a proxy the environment names (the TCP
    // route's host is no loopback address).
    pairs.push((format!("http.{base}/.proxy"), String::new()));
    // The helpers configured before are dropped for the broker (an empty value resets the
    // list), so no helper inside stores the placeholder; git asks this one.
    let helper = format!("credential.{base}/git/.helper");
    pairs.push((helper.clone(), String::new()));
    pairs.push((
        helper,
        format!(
            "!f() {{ test \"$1\" = get && echo username=po && echo \"password=${TOKEN_VAR}\"; }}; f"
        ),
    ));
    let mut env = vec![("GIT_CONFIG_COUNT".to_string(), pairs.len().to_string())];
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), k));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), v));
    }
    env
}

/// The repositories a workspace's remotes name on `hosts` (as [`path::repository`] names
/// them), from the URLs of its git configuration: `https://host/path`, `git@host:path`,
/// `ssh://git@host/path`.
pub fn remotes_on(urls: &[String], hosts: &[GitHost]) -> Vec<String> {
    let mut out: Vec<String> = urls
        .iter()
        .filter_map(|u| {
            let u = u.trim();
            let (host, path) = if let Some(r) = u.strip_prefix("https://") {
                r.split_once('/')?
            } else if let Some(r) = u.strip_prefix("ssh://") {
                let r = r.split_once('@').map_or(r, |(_, r)| r);
                r.split_once('/')?
            } else if let Some((user_host, path)) = u.split_once(':') {
                let host = user_host.split_once('@').map_or(user_host, |(_, h)| h);
                (host, path)
            } else {
                return None;
            };
            let host = host
                .split_once('@')
                .map_or(host, |(_, h)| h)
                .to_ascii_lowercase();
            let named = hosts
                .iter()
                .find(|h| h.name == host || h.name.split(':').next() == Some(host.as_str()))?;
            Some(path::repository(&named.name, path.trim_start_matches('/')))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The hosts a container's git configuration (its environment) sends to the git route.
pub fn hosts_in(env: &HashMap<String, String>) -> Vec<String> {
    let get = |name: &str| env.get(name).map(String::as_str);
    if get(TOKEN_VAR).is_none_or(str::is_empty) {
        return Vec::new();
    }
    let count: usize = get("GIT_CONFIG_COUNT")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut hosts: Vec<String> = (0..count.min(1000))
        .filter_map(|i| get(&format!("GIT_CONFIG_KEY_{i}")))
        .filter_map(|k| k.strip_prefix("url.")?.strip_suffix("/.insteadOf"))
        .filter_map(|base| base.rsplit_once("/git/").map(|(_, host)| host.to_string()))
        .collect();
    hosts.dedup();
    hosts
}

#[cfg(test)]
mod tests;
