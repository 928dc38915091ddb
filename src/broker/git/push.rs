//! The push rules: what a push may change, judged on its ref updates before the host sees
//! any of it.
//!
//! By default the agent may create branches (`refs/heads/…`) in the repositories of its
//! workspace's own remotes, and move forward the ones it created; never the default branch,
//! never a tag or another kind of ref, never a force update or a deletion. A `git.push` rule of
//! the policy file (`repo` and `refs` patterns) allows more: creating and moving forward any ref
//! it matches, in any repository it matches; with `force: true` also moving it anywhere and
//! deleting it.

use super::pkt::Command;

/// One rule of the policy file's `git.push`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRule {
    /// `host/path` pattern (`*` within a segment, `**` across them).
    pub repo: String,
    /// Ref pattern (default `refs/heads/*`... as written).
    pub refs: String,
    pub force: bool,
}

/// What one update is judged against.
pub struct Context<'a> {
    /// The repository, as [`super::path::repository`] names it.
    pub repository: &'a str,
    /// The workspace's remotes, named the same way.
    pub remotes: &'a [String],
    pub rules: &'a [PushRule],
    /// The repository's default branch (`refs/heads/…`), when the host said it.
    pub default_branch: Option<&'a str>,
    /// Whether this workspace created `name` in this repository.
    pub created: &'a (dyn Fn(&str) -> bool + Sync),
}

/// What the rules say of one update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Allowed if it moves the ref forward (shown by the push's own commits).
    FastForward,
    Refuse(String),
}

/// Whether `text` matches `pattern` (`*`: any run without `/`; `**`: any run).
pub fn matches(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p {
            [] => t.is_empty(),
            [b'*', b'*', rest @ ..] => (0..=t.len()).any(|i| go(rest, &t[i..])),
            [b'*', rest @ ..] => (0..=t.len())
                .take_while(|i| *i == 0 || t[i - 1] != b'/')
                .any(|i| go(rest, &t[i..])),
            [c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// Whether a rule's `repo` pattern names `repository` (without case on the hosts that read
/// names so).
pub fn repo_matches(pattern: &str, repository: &str) -> bool {
    let host = repository.split('/').next().unwrap_or_default();
    match super::path::folds(host) {
        true => matches(&pattern.to_ascii_lowercase(), repository),
        false => matches(pattern, repository),
    }
}

/// The rule that lets `name` be pushed to `repository`, when one does.
fn rule_for<'a>(ctx: &'a Context<'_>, name: &str) -> Option<&'a PushRule> {
    ctx.rules
        .iter()
        .find(|r| repo_matches(&r.repo, ctx.repository) && matches(&r.refs, name))
}

/// The judgement of one update.
pub fn judge(ctx: &Context<'_>, c: &Command) -> Verdict {
    let how = |refs: &str, force: bool| {
        format!(
            "the person can allow it in the host's sandbox policy: git: push: [{{ repo: {}, refs: {refs}{} }}]",
            ctx.repository,
            if force { ", force: true" } else { "" }
        )
    };
    if let Some(rule) = rule_for(ctx, &c.name) {
        return match (rule.force, c.deletes(), c.creates()) {
            (true, _, _) => Verdict::Allow,
            (false, true, _) => Verdict::Refuse(format!(
                "deleting {} needs force: true in its push rule; {}",
                c.name,
                how(&rule.refs, true)
            )),
            (false, false, true) => Verdict::Allow,
            (false, false, false) => Verdict::FastForward,
        };
    }
    if !ctx.remotes.iter().any(|r| r == ctx.repository) {
        return Verdict::Refuse(format!(
            "{} is not a remote of this workspace; {}",
            ctx.repository,
            how(&c.name, false)
        ));
    }
    let Some(branch) = c.name.strip_prefix("refs/heads/") else {
        return Verdict::Refuse(format!(
            "only branches are pushed by default, not {}; {}",
            c.name,
            how(&c.name, false)
        ));
    };
    let default = match ctx.default_branch {
        Some(d) => c.name == d,
        None => branch == "main" || branch == "master",
    };
    if default {
        return Verdict::Refuse(format!(
            "{} is the default branch, which is not pushed by default; {}",
            c.name,
            how(&c.name, false)
        ));
    }
    if c.deletes() {
        return Verdict::Refuse(format!(
            "deleting {} is not allowed by default; {}",
            c.name,
            how(&c.name, true)
        ));
    }
    if c.creates() {
        return Verdict::Allow;
    }
    if (ctx.created)(&c.name) {
        return Verdict::FastForward;
    }
    Verdict::Refuse(format!(
        "{} was not created from this sandbox, so it is not updated by default; {}",
        c.name,
        how(&c.name, false)
    ))
}

/// The message of an update that does not move its ref forward.
pub fn not_forward(c: &Command, repository: &str) -> String {
    format!(
        "{} is not shown to move forward (a force update, or commits the push does not carry); the person can allow it in the host's sandbox policy: git: push: [{{ repo: {repository}, refs: {}, force: true }}]",
        c.name, c.name
    )
}
