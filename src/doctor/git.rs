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

/// The hosts of `policy`, each with its credential's source.
pub async fn check(
    policy: &GitPolicy,
    env: &std::collections::HashMap<String, String>,
) -> Vec<GitHostCheck> {
    let credentials = Credentials::new(env.clone());
    let mut out = Vec::new();
    for h in &policy.hosts {
        out.push(GitHostCheck {
            host: h.name.clone(),
            origin: h.origin.clone(),
            credential: credentials.get(h).await.map(|c| c.source),
        });
    }
    out
}

/// The report's lines.
pub fn section(hosts: &[GitHostCheck], source: &str, push_rules: usize) -> String {
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
                match h.host.as_str() {
                    "github.com" => ", GH_TOKEN, GITHUB_TOKEN",
                    "gitlab.com" => ", GITLAB_TOKEN",
                    _ => "",
                }
            ),
        });
    }
    out
}
