//! The policy in force: each value from the first of the option, the variable, the policy file
//! and the default that gives it, and which one that was.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::{AtLine, PolicyFile, Problem};
use crate::broker::egress::rules::{self, AllowEntry};
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::names::network::NetworkMode;
use crate::names::vars::{NETWORK_ALLOW_VAR, NETWORK_RESOLVE_VAR, NETWORK_VAR};

/// Where a value in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The hub's option of this name.
    Option(&'static str),
    /// The environment variable of this name.
    Variable(&'static str),
    /// The policy file, at this line.
    File(usize),
    /// Nothing set it.
    Default,
}

impl Source {
    /// Whether a change of the policy file changes this value (it is the file's, or the
    /// default the file may set).
    pub fn follows_file(self) -> bool {
        matches!(self, Source::File(_) | Source::Default)
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Option(name) => write!(f, "the {name} option"),
            Source::Variable(name) => write!(f, "the variable {name}"),
            Source::File(line) => write!(f, "{} line {line}", super::FILE),
            Source::Default => f.write_str("the default"),
        }
    }
}

/// The network values in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    pub mode: (NetworkMode, Source),
    /// `None`: the default list ([`rules::DEFAULT_ALLOW`]).
    pub allow: (Option<Vec<AllowEntry>>, Source),
    pub resolve: (BTreeMap<String, IpAddr>, Source),
    /// Each workspace's own additions (the file's only).
    pub workspaces: BTreeMap<String, AtLine<Vec<AllowEntry>>>,
}

/// What a hub was given for the network: its options as they came.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub mode: Option<String>,
    pub allow: Option<Vec<String>>,
    pub resolve: Option<Vec<String>>,
}

impl NetworkPolicy {
    /// The values in force for `given` options, `host`'s variables and `file`.
    pub fn resolve(
        given: Given,
        host: &HostEnv,
        file: Option<&PolicyFile>,
    ) -> Result<NetworkPolicy> {
        let var = |name: &str| host.vars().get(name).filter(|v| !v.trim().is_empty());
        let mode = match (
            given.mode.as_deref(),
            var(NETWORK_VAR),
            file.and_then(|f| f.network.as_ref()),
        ) {
            (Some(m), _, _) => (
                NetworkMode::resolve(Some(m), None)?,
                Source::Option("network"),
            ),
            (None, Some(v), _) => (
                NetworkMode::resolve(None, Some(v))?,
                Source::Variable(NETWORK_VAR),
            ),
            (None, None, Some(at)) => (at.value, Source::File(at.line)),
            _ => (NetworkMode::Open, Source::Default),
        };
        let allow = match list_or_var(given.allow, "networkAllow", NETWORK_ALLOW_VAR, host) {
            Some((source, list)) => {
                let entries = list
                    .iter()
                    .map(|e| rules::parse_allow(e).map_err(|why| invalid(source, why)))
                    .collect::<Result<Vec<_>>>()?;
                (Some(entries), source)
            }
            None => match file.and_then(|f| f.allow.as_ref()) {
                Some(at) => (Some(at.value.clone()), Source::File(at.line)),
                None => (None, Source::Default),
            },
        };
        let resolve = match list_or_var(given.resolve, "networkResolve", NETWORK_RESOLVE_VAR, host)
        {
            Some((source, list)) => (resolve_entries(source, &list)?, source),
            None => match file.and_then(|f| f.resolve.as_ref()) {
                Some(at) => (at.value.clone(), Source::File(at.line)),
                None => (BTreeMap::new(), Source::Default),
            },
        };
        Ok(NetworkPolicy {
            mode,
            allow,
            resolve,
            workspaces: file.map(|f| f.workspaces.clone()).unwrap_or_default(),
        })
    }

    /// The allow list every workspace has.
    pub fn allow_list(&self) -> Vec<AllowEntry> {
        self.allow.0.clone().unwrap_or_else(rules::default_allow)
    }

    /// This policy with the file's values replaced by `file`'s where they follow the file
    /// (an option or a variable still wins): what a watching hub applies.
    pub fn with_file(&self, file: &PolicyFile) -> NetworkPolicy {
        let mut next = self.clone();
        if self.allow.1.follows_file() {
            next.allow = match &file.allow {
                Some(at) => (Some(at.value.clone()), Source::File(at.line)),
                None => (None, Source::Default),
            };
        }
        if self.resolve.1.follows_file() {
            next.resolve = match &file.resolve {
                Some(at) => (at.value.clone(), Source::File(at.line)),
                None => (BTreeMap::new(), Source::Default),
            };
        }
        if self.mode.1.follows_file() {
            next.mode = match &file.network {
                Some(at) => (at.value, Source::File(at.line)),
                None => (NetworkMode::Open, Source::Default),
            };
        }
        next.workspaces = file.workspaces.clone();
        next
    }
}

/// The option's list, else the variable's comma-separated entries, with where it came from.
fn list_or_var(
    option: Option<Vec<String>>,
    name: &'static str,
    var: &'static str,
    host: &HostEnv,
) -> Option<(Source, Vec<String>)> {
    match (option, host.vars().get(var)) {
        (Some(list), _) => Some((Source::Option(name), list)),
        (None, Some(v)) if !v.trim().is_empty() => Some((
            Source::Variable(var),
            v.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect(),
        )),
        _ => None,
    }
}

/// `networkResolve` entries (`host=ip`), one address per host.
fn resolve_entries(source: Source, list: &[String]) -> Result<BTreeMap<String, IpAddr>> {
    let mut map = BTreeMap::new();
    for entry in list {
        let (host, ip) = rules::parse_resolve(entry).map_err(|why| invalid(source, why))?;
        if map
            .insert(host.clone(), ip)
            .is_some_and(|before| before != ip)
        {
            return Err(invalid(
                source,
                format!(
                    "{entry:?} maps {host} a second time, to another address; expected one {} per host",
                    rules::RESOLVE_FORM
                ),
            ));
        }
    }
    Ok(map)
}

fn invalid(source: Source, reason: String) -> Error {
    let option = match source {
        Source::Option(name) | Source::Variable(name) => name.to_string(),
        other => other.to_string(),
    };
    Error::OptionsInvalid { option, reason }
}

/// A problem of the policy file as the error a start-up or a command fails with.
pub fn problem_error(file: &std::path::Path, problem: Problem) -> Error {
    Error::PolicyInvalid {
        file: file.display().to_string(),
        problem: problem.to_string(),
    }
}

/// The git route's policy in force: the hosts from `PO_SANDBOX_GIT_HOSTS` (`none`: no host),
/// else the file's `git.hosts`, else [`crate::broker::git::DEFAULT_HOSTS`]; the push rules
/// from the file. A bad variable is `OPTIONS_INVALID`.
pub fn git_policy(
    host: &HostEnv,
    file: Option<&PolicyFile>,
) -> Result<(crate::broker::git::GitPolicy, Source)> {
    use crate::broker::git;
    let pinned = match host.var(git::HOSTS_VAR).map(str::trim) {
        Some("none") => Some(Vec::new()),
        Some(v) => {
            Some(
                git::parse_hosts(v.split(',')).map_err(|reason| Error::OptionsInvalid {
                    option: git::HOSTS_VAR.into(),
                    reason: format!(
                        "{reason}; expected NAME or NAME=ORIGIN, comma-separated, or none"
                    ),
                })?,
            )
        }
        None => None,
    };
    Ok(git_policy_with(pinned, file))
}

/// The git route's policy with the hosts `pinned` by the variable (when it is set), else the
/// file's, else the default; the push rules are the file's. (The policy watcher's too.)
pub fn git_policy_with(
    pinned: Option<Vec<crate::broker::git::GitHost>>,
    file: Option<&PolicyFile>,
) -> (crate::broker::git::GitPolicy, Source) {
    use crate::broker::git::{self, GitPolicy};
    let (hosts, source) = match (pinned, file.and_then(|f| f.git_hosts.as_ref())) {
        (Some(hosts), _) => (hosts, Source::Variable(git::HOSTS_VAR)),
        (None, Some(at)) => (at.value.clone(), Source::File(at.line)),
        (None, None) => (git::default_hosts(), Source::Default),
    };
    let push = file
        .and_then(|f| f.git_push.as_ref())
        .map(|a| a.value.clone())
        .unwrap_or_default();
    (GitPolicy { hosts, push }, source)
}
