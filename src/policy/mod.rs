//! The sandbox policy file of a Po home, `<poHome>/sandbox-policy.yaml`: the network mode, the
//! allow list (every workspace's, and each workspace's own additions) and name overrides, in
//! one place a person can read and change. Options and variables still win over it
//! ([`effective`]: option > variable > file > default, every value's source kept).
//!
//! The file is read whole, bounded, and checked as the options are: a file that does not
//! parse or breaks a rule is a [`Problem`] naming its line, its field and the expected form.
//! A hub reads it at start-up (a bad file fails the start-up with `POLICY_INVALID`) and
//! watches it while it runs ([`watch`]): the host-side values (the allow lists, the name
//! overrides) apply to running containers at once, a bad file changes nothing.
//! [`edit`] changes it keeping its comments (`po-sandbox allow`, `deny`, `policy init`).

pub mod command;
pub mod denials;
pub mod edit;
pub mod effective;
pub mod watch;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::broker::egress::rules::{self, AllowEntry};
use crate::broker::git::{GitHost, PushRule};
use crate::names::network::{MODES, NetworkMode};

/// The file's name in the Po home.
pub const FILE: &str = "sandbox-policy.yaml";
/// The largest file read (a policy is a few lines; anything larger is a mistake).
pub const MAX_BYTES: u64 = 256 * 1024;

/// The policy file of `po_home`.
pub fn path_in(po_home: &Path) -> PathBuf {
    po_home.join(FILE)
}

/// A value of the file and the line it is on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtLine<T> {
    pub value: T,
    pub line: usize,
}

/// The file as written, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFile {
    /// `network`: the mode.
    pub network: Option<AtLine<NetworkMode>>,
    /// `allow`: every workspace's allow list (replaces the default list).
    pub allow: Option<AtLine<Vec<AllowEntry>>>,
    /// `resolve`: name overrides, `name: address`.
    pub resolve: Option<AtLine<BTreeMap<String, IpAddr>>>,
    /// `workspaces.<id>.allow`: what one workspace may reach beyond the list every one has.
    pub workspaces: BTreeMap<String, AtLine<Vec<AllowEntry>>>,
    /// `workspaceMode`: `bind` or `clone` (container-side: at the next start).
    pub workspace_mode: Option<AtLine<String>>,
    /// `guardedPaths`: the complete list (container-side).
    pub guarded_paths: Option<AtLine<Vec<String>>>,
    /// `runFlags`: the complete list, each self-contained (container-side).
    pub run_flags: Option<AtLine<Vec<String>>>,
    /// `git.hosts`: the git hosts the broker carries (replaces the default list).
    pub git_hosts: Option<AtLine<Vec<GitHost>>>,
    /// `git.push`: the push rules beyond the default ones.
    pub git_push: Option<AtLine<Vec<PushRule>>>,
}

/// What is wrong with a file: where (line, when known), which field, and why (with the
/// expected form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: Option<usize>,
    pub field: String,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}, {}: {}", self.field, self.reason),
            None => write!(f, "{}: {}", self.field, self.reason),
        }
    }
}

/// The file's fields, as YAML gives them (anything else is refused).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Doc {
    network: Option<String>,
    allow: Option<Vec<String>>,
    resolve: Option<Entries<String>>,
    workspaces: Option<Entries<WorkspaceDoc>>,
    #[serde(rename = "workspaceMode")]
    workspace_mode: Option<String>,
    #[serde(rename = "guardedPaths")]
    guarded_paths: Option<Vec<String>>,
    #[serde(rename = "runFlags")]
    run_flags: Option<Vec<String>>,
    git: Option<GitDoc>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct GitDoc {
    hosts: Option<Vec<String>>,
    push: Option<Vec<PushDoc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PushDoc {
    repo: String,
    refs: String,
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WorkspaceDoc {
    allow: Option<Vec<String>>,
}

/// Reads `po_home`'s policy file: `None` when there is none; a [`Problem`] when it cannot be
/// read or is not a good policy.
pub fn load(po_home: &Path) -> Result<Option<(PolicyFile, String)>, Problem> {
    let path = path_in(po_home);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(format!("it cannot be read ({e})"))),
    };
    let mut bytes = Vec::new();
    use std::io::Read;
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(format!("it cannot be read ({e})")))?;
    let text = text_of(bytes)?;
    Ok(Some((parse(&text)?, text)))
}

/// A file's bytes as its text: at most [`MAX_BYTES`], UTF-8.
pub fn text_of(bytes: Vec<u8>) -> Result<String, Problem> {
    if bytes.len() as u64 > MAX_BYTES {
        return Err(unreadable(format!("it is larger than {MAX_BYTES} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| unreadable(format!("it is not UTF-8 text ({e})")))
}

/// A problem of the file as a whole (it cannot be read as a policy's text).
fn unreadable(reason: String) -> Problem {
    Problem {
        line: None,
        field: "the file".into(),
        reason,
    }
}

/// Checks a policy's text.
pub fn parse(text: &str) -> Result<PolicyFile, Problem> {
    let blank = text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    let doc: Doc = match blank {
        true => Doc::default(),
        false => serde_yaml_ng::from_str(text).map_err(|e| yaml_problem(&e))?,
    };
    let mut file = PolicyFile::default();
    if let Some(mode) = doc.network {
        let line = key_line(text, &["network"]);
        let value = NetworkMode::parse(&mode).ok_or_else(|| Problem {
            line: Some(line),
            field: "network".into(),
            reason: format!("{mode:?} is not a network mode: use {MODES}"),
        })?;
        file.network = Some(AtLine { value, line });
    }
    if let Some(list) = doc.allow {
        file.allow = Some(allow_list(text, &["allow"], &list)?);
    }
    if let Some(Entries(map)) = doc.resolve {
        let line = key_line(text, &["resolve"]);
        let canonical = |n: &str| n.trim_end_matches('.').to_ascii_lowercase();
        if let Some(name) = twice(&map, canonical) {
            return Err(Problem {
                line: Some(value_line(text, line, &name)),
                field: format!("resolve.{name}"),
                reason: "the name is mapped twice; expected one address per name".into(),
            });
        }
        let mut checked = BTreeMap::new();
        for (name, address) in &map {
            let (host, ip) =
                rules::parse_resolve(&format!("{name}={address}")).map_err(|why| Problem {
                    line: Some(value_line(text, line, name)),
                    field: format!("resolve.{name}"),
                    reason: why.replace(rules::RESOLVE_FORM, "NAME: ADDRESS"),
                })?;
            checked.insert(host, ip);
        }
        file.resolve = Some(AtLine {
            value: checked,
            line,
        });
    }
    container_side(
        text,
        &mut file,
        doc.workspace_mode,
        doc.guarded_paths,
        doc.run_flags,
    )?;
    if let Some(git) = doc.git {
        git_rules(text, &mut file, git)?;
    }
    let workspaces = doc.workspaces.map(|Entries(e)| e).unwrap_or_default();
    if let Some(id) = twice(&workspaces, str::to_string) {
        return Err(Problem {
            line: Some(key_line(text, &["workspaces", &id])),
            field: format!("workspaces.{id}"),
            reason: "the workspace is written twice; expected one entry per workspace".into(),
        });
    }
    for (id, ws) in workspaces {
        crate::sandbox::folder::check_workspace_id(&id).map_err(|e| Problem {
            line: Some(key_line(text, &["workspaces", &id])),
            field: format!("workspaces.{id}"),
            reason: e.to_string(),
        })?;
        if let Some(list) = ws.allow {
            let at = allow_list(text, &["workspaces", &id, "allow"], &list)?;
            file.workspaces.insert(id, at);
        }
    }
    Ok(file)
}

/// The git route's hosts and push rules.
fn git_rules(text: &str, file: &mut PolicyFile, git: GitDoc) -> Result<(), Problem> {
    if let Some(list) = git.hosts {
        let line = key_line(text, &["git", "hosts"]);
        let mut hosts: Vec<GitHost> = Vec::new();
        for (i, e) in list.iter().enumerate() {
            let h = GitHost::parse(e).map_err(|why| Problem {
                line: Some(value_line(text, line, e)),
                field: format!("git.hosts[{i}]"),
                reason: format!("{why}; expected NAME or NAME=ORIGIN (https://host[:port])"),
            })?;
            if hosts.iter().any(|o| o.name == h.name) {
                return Err(Problem {
                    line: Some(value_line(text, line, e)),
                    field: format!("git.hosts[{i}]"),
                    reason: format!("{} is written twice; expected each host once", h.name),
                });
            }
            hosts.push(h);
        }
        file.git_hosts = Some(AtLine { value: hosts, line });
    }
    if let Some(list) = git.push {
        let line = key_line(text, &["git", "push"]);
        let mut rules = Vec::new();
        for (i, r) in list.into_iter().enumerate() {
            let bad = |what: &str, value: &str, why: &str| Problem {
                line: Some(value_line(text, line, value)),
                field: format!("git.push[{i}].{what}"),
                reason: format!("{value:?} {why}"),
            };
            let repo = r.repo.trim().to_string();
            if repo.split('/').count() < 2 || repo.chars().any(|c| c.is_whitespace()) {
                return Err(bad(
                    "repo",
                    &r.repo,
                    "is not HOST/PATH (a pattern: * within a segment, ** across them), e.g. github.com/acme/*",
                ));
            }
            let refs = r.refs.trim().to_string();
            if !refs.starts_with("refs/") || refs.chars().any(|c| c.is_whitespace()) {
                return Err(bad(
                    "refs",
                    &r.refs,
                    "is not a ref pattern starting with refs/, e.g. refs/heads/agent/*",
                ));
            }
            rules.push(PushRule {
                repo,
                refs,
                force: r.force,
            });
        }
        file.git_push = Some(AtLine { value: rules, line });
    }
    Ok(())
}

/// The container-side values, checked as their options are.
fn container_side(
    text: &str,
    file: &mut PolicyFile,
    mode: Option<String>,
    guarded: Option<Vec<String>>,
    flags: Option<Vec<String>>,
) -> Result<(), Problem> {
    let problem = |key: &str, e: crate::error::Error| Problem {
        line: Some(key_line(text, &[key])),
        field: key.to_string(),
        reason: match e {
            crate::error::Error::OptionsInvalid { reason, .. } => reason,
            other => other.to_string(),
        },
    };
    if let Some(m) = mode {
        crate::sandbox::folder::WorkspaceMode::parse(&m, "workspaceMode")
            .map_err(|e| problem("workspaceMode", e))?;
        let line = key_line(text, &["workspaceMode"]);
        file.workspace_mode = Some(AtLine {
            value: m.trim().to_string(),
            line,
        });
    }
    if let Some(list) = guarded {
        crate::sandbox::folder::guarded_from_option(&list)
            .map_err(|e| problem("guardedPaths", e))?;
        let line = key_line(text, &["guardedPaths"]);
        file.guarded_paths = Some(AtLine { value: list, line });
    }
    if let Some(list) = flags {
        let pids = crate::sandbox::blueprint::DEFAULT_PIDS_LIMIT;
        crate::sandbox::blueprint::resolve_run_flags(Some(&list), None, pids)
            .map_err(|e| problem("runFlags", e))?;
        let line = key_line(text, &["runFlags"]);
        file.run_flags = Some(AtLine { value: list, line });
    }
    Ok(())
}

/// An allow list of the file, each entry checked.
fn allow_list(
    text: &str,
    path: &[&str],
    list: &[String],
) -> Result<AtLine<Vec<AllowEntry>>, Problem> {
    let line = key_line(text, path);
    let entries = list
        .iter()
        .enumerate()
        .map(|(i, e)| {
            rules::parse_allow(e).map_err(|why| Problem {
                line: Some(value_line(text, line, e)),
                field: format!("{}[{i}]", path.join(".")),
                reason: why,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AtLine {
        value: entries,
        line,
    })
}

/// A YAML error as a problem: its line, and the field path serde_yaml puts before its message.
fn yaml_problem(e: &serde_yaml_ng::Error) -> Problem {
    let said = e.to_string();
    let (field, rest) = match said.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => (path.to_string(), rest.to_string()),
        _ => ("the file".to_string(), said.clone()),
    };
    // The location is in the message too: said once, in the line.
    let reason = match rest.rfind(" at line ") {
        Some(i) => rest[..i].to_string(),
        None => rest,
    };
    let hint = match reason.contains("anchor") || reason.contains("alias") {
        true => " (an entry that starts with '*' must be quoted: \"*.example.com:443\")",
        false => "",
    };
    let line = e.location().map(|l| l.line()).filter(|&l| l > 0);
    Problem {
        line,
        field,
        reason: format!(
            "{reason}{hint}; expected the form docs/configuration.md#the-policy-file shows"
        ),
    }
}

/// The line of the key at `path` (each key at a deeper indentation than the one before), or
/// 1 when it is not found as written (a flow mapping).
fn key_line(text: &str, path: &[&str]) -> usize {
    let mut from = 0;
    let mut indent: Option<usize> = None;
    for key in path {
        let found = text.lines().enumerate().skip(from).find(|(_, l)| {
            let i = l.len() - l.trim_start().len();
            let t = l.trim_start();
            indent.map_or(i == 0, |d| i > d)
                && [
                    format!("{key}:"),
                    format!("\"{key}\":"),
                    format!("'{key}':"),
                ]
                .iter()
                .any(|k| t.starts_with(k.as_str()))
        });
        match found {
            Some((n, l)) => {
                from = n + 1;
                indent = Some(l.len() - l.trim_start().len());
            }
            None => return from.max(1),
        }
    }
    from.max(1)
}

/// The first line at or after `from` (1-based) whose item or key is `value` (else the first
/// that holds it); `from` when none does.
fn value_line(text: &str, from: usize, value: &str) -> usize {
    let lines = || text.lines().enumerate().skip(from.saturating_sub(1));
    let is_it = |l: &str| {
        let t = l.trim_start();
        let t = t.strip_prefix("- ").unwrap_or(t);
        let t = t.split(" #").next().unwrap_or("").trim();
        let unquoted = t.trim_matches(|c| c == '"' || c == '\'');
        unquoted == value
            || unquoted.starts_with(&format!("{value}:"))
            || t.starts_with(&format!("\"{value}\":"))
    };
    lines()
        .find(|(_, l)| is_it(l))
        .or_else(|| lines().find(|(_, l)| l.contains(value)))
        .map_or(from, |(n, _)| n + 1)
}

/// A YAML mapping read as its entries in order, every key kept: a key written twice is found
/// (a map type would keep the last one without a word).
struct Entries<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, T>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// The first key written twice, when one is.
fn twice<T>(entries: &[(String, T)], same: impl Fn(&str) -> String) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    entries
        .iter()
        .map(|(k, _)| same(k))
        .find(|k| !seen.insert(k.clone()))
}

#[cfg(test)]
mod tests;
