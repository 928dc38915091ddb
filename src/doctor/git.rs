//! The doctor's git line: which git hosts the broker carries, and for each where its
//! credential comes from on this host (or that none was found, and where it would be looked
//! for). Only the person's own sources are asked (never the host itself).

use napi_derive::napi;

use crate::broker::git::{COMMAND_VAR, Credentials, GitPolicy};

/// One git host the broker carries.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GitHostCheck {
    /// Its name as remotes use it.
    pub host: String,
    /// Where the broker sends its requests.
    pub origin: String,
    /// Where its credential comes from (`git credential fill`, `GH_TOKEN`, the command); absent
    /// when none was found (then the host is reached without one: public repositories only).
    pub credential: Option<String>,
}

/// A package registry the broker carries.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryCheck {
    /// `npm (URL)`, `npm @scope (URL)` or `pip (URL)`.
    pub registry: String,
    /// Where its credential comes from (`NPM_TOKEN`, the host's npm config and its key,
    /// `PIP_INDEX_URL`).
    pub credential: String,
}

/// What the broker carries beyond model calls.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokeredCheck {
    /// The git hosts, each with its credential's source.
    pub git: Vec<GitHostCheck>,
    /// Where the git hosts came from, and how many push rules the policy adds.
    pub git_source: String,
    pub git_push_rules: u32,
    /// The package registries (those with a credential on this host).
    pub registries: Vec<RegistryCheck>,
}

/// The hosts of `policy`, each with its credential's source, and the registries.
pub async fn check(
    policy: &GitPolicy,
    source: String,
    env: &std::collections::HashMap<String, String>,
) -> BrokeredCheck {
    let credentials = Credentials::new(env.clone());
    let mut git = Vec::new();
    for h in &policy.hosts {
        git.push(GitHostCheck {
            host: h.name.clone(),
            origin: h.origin.clone(),
            credential: credentials.get(h).await.map(|c| c.source),
        });
    }
    let registries = crate::broker::registry::from_host(env)
        .iter()
        .map(|r| RegistryCheck {
            registry: r.name(),
            credential: r.source.clone(),
        })
        .collect();
    BrokeredCheck {
        git,
        git_source: source,
        git_push_rules: policy.push.len() as u32,
        registries,
    }
}

/// The report's lines.
pub fn section(b: &BrokeredCheck) -> String {
    let mut out = git_section(&b.git, &b.git_source, b.git_push_rules as usize);
    if b.registries.is_empty() {
        out.push_str("Registries none brokered (no npm or pip credential on this host)\n");
    }
    for (i, r) in b.registries.iter().enumerate() {
        let head = if i == 0 { "Registries" } else { "          " };
        out.push_str(&format!(
            "{head} {}: the credential from {}\n",
            r.registry, r.credential
        ));
    }
    out
}

fn git_section(hosts: &[GitHostCheck], source: &str, push_rules: usize) -> String {
    if hosts.is_empty() {
        return format!("Git       no host brokered (from {source})\n");
    }
    let mut out = format!(
        "Git       {} brokered (from {source}; {push_rules} push rule{} beyond the defaults)\n",
        hosts
            .iter()
            .map(|h| h.host.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        if push_rules == 1 { "" } else { "s" }
    );
    for h in hosts {
        out.push_str(&match &h.credential {
            Some(from) => format!("          {}: the credential from {from}\n", h.host),
            None => format!(
                "          {}: no credential found (git credential fill for {}{}, or {COMMAND_VAR}); public repositories only\n",
                h.host,
                h.origin,
                crate::broker::git::credential::token_vars(&h.origin)
                    .iter()
                    .map(|v| format!(", {v}"))
                    .collect::<String>()
            ),
        });
    }
    out
}
