//! `sandboxPolicy`: what the CLI's `policy show|check|init`, `allow` and `deny` ask of a Po
//! home's policy file, answered as data and as the text the CLI prints. The values in force
//! are as a hub started here with no options would take them (this environment's variables,
//! then the file, then the defaults).

use std::collections::HashMap;

use napi_derive::napi;

use super::PolicyFile;
use super::edit::{self, ListOf};
use super::effective::{Given, NetworkPolicy, Source};
use crate::broker::egress::rules::{self, Target};
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::names::network::NetworkMode;

/// What `sandboxPolicy` is asked.
#[napi(object, js_name = "PolicyRequest")]
#[derive(Default)]
pub struct PolicyRequest {
    /// `show`, `check`, `allow`, `deny`, `init` or `log`.
    #[napi(ts_type = "'show' | 'check' | 'allow' | 'deny' | 'init' | 'log'")]
    pub command: String,
    /// `check`, `allow`, `deny`: `host[:port]` (port 443 when none is given) or
    /// `*.suffix:port`. `check` without one checks the file.
    pub target: Option<String>,
    /// `check`, `allow`, `deny`: this workspace's own list (its id) rather than every
    /// workspace's. `log`: only this workspace's denials.
    pub workspace: Option<String>,
    /// `init`: `open`, `balanced` or `closed`.
    #[napi(ts_type = "'open' | 'balanced' | 'closed'")]
    pub preset: Option<String>,
    /// The Po home (default `~/.po`).
    pub po_home: Option<String>,
    /// The environment to read instead of `process.env`.
    pub env: Option<HashMap<String, Option<String>>>,
}

/// One value in force and where it came from.
#[napi(object, object_from_js = false)]
pub struct PolicyValue {
    /// `network`, `allow`, `resolve`, `workspaceMode`, `guardedPaths`, `runFlags` or
    /// `workspaces.<id>.allow`.
    pub name: String,
    pub value: String,
    /// `the networkAllow option`, `the variable PO_SANDBOX_NETWORK`, `sandbox-policy.yaml line 3`
    /// or `the default`.
    pub source: String,
}

/// The recent denials of one destination (`policy log`).
#[napi(object, object_from_js = false)]
pub struct PolicyDenials {
    /// `host:port`.
    pub destination: String,
    pub count: u32,
    /// The last one: when (seconds since the epoch) and why.
    pub last_at: i64,
    pub last_reason: String,
    /// The workspaces denied it.
    pub workspaces: Vec<String>,
}

/// What `sandboxPolicy` answers.
#[napi(object, object_from_js = false)]
pub struct PolicyAnswer {
    /// The policy file.
    pub file: String,
    /// The file is there.
    pub exists: bool,
    /// `show`, `check` without a target: the file is good (or absent). `check`: the target is
    /// allowed. `allow`, `deny`, `init`: done (or nothing to do).
    pub ok: bool,
    /// `allow`, `deny`, `init`: the file was written.
    pub changed: bool,
    /// What is wrong with the file.
    pub problem: Option<String>,
    /// The line of the problem, when known.
    pub line: Option<u32>,
    /// The field of the problem.
    pub field: Option<String>,
    /// `check`: what allows or refuses the target, and where it is written.
    pub rule: Option<String>,
    /// `show`: each value in force.
    pub values: Vec<PolicyValue>,
    /// `log`: the recent denials by destination, the most denied first.
    pub denials: Vec<PolicyDenials>,
    /// The answer as the CLI prints it.
    pub text: String,
}

/// Answers `request`.
pub fn answer(mut request: PolicyRequest) -> Result<PolicyAnswer> {
    let host = HostEnv::given(request.env.take());
    let home = crate::sandbox::folder::resolve_po_home(request.po_home.take(), &host)?;
    let path = super::path_in(&home);
    // Read once: the file checked is the text an edit starts from.
    let (parsed, text) = match super::load(&home) {
        Ok(Some((file, text))) => (Ok(file), Some(text)),
        Ok(None) => (Ok(PolicyFile::default()), None),
        Err(problem) => (Err(problem), Some(String::new())),
    };
    let mut a = PolicyAnswer::new(&path, text.is_some());
    let workspace = request.workspace.as_deref();
    if let Some(id) = workspace {
        crate::sandbox::folder::check_workspace_id(id)?;
    }
    match (request.command.as_str(), parsed) {
        ("init", _) => init(&mut a, &home, request.preset.as_deref())?,
        ("log", _) => log(&mut a, &home, workspace),
        ("show" | "check" | "allow" | "deny", Err(problem)) => {
            a.ok = false;
            a.text = format!("{} is not a good policy: {problem}\n", a.file);
            (a.line, a.field) = (problem.line.map(|l| l as u32), Some(problem.field.clone()));
            a.problem = Some(problem.to_string());
            if matches!(request.command.as_str(), "allow" | "deny") {
                return Err(super::effective::problem_error(&path, problem));
            }
        }
        ("show", Ok(file)) => {
            let mut extra = container_values(&host, &file);
            extra.extend(git_values(&host, &file));
            show(&mut a, &policy(&host, &file)?, extra)
        }
        ("check", Ok(file)) => match request.target.as_deref() {
            None => {
                a.text = format!(
                    "{} is a good policy{}.\n",
                    a.file,
                    if a.exists {
                        ""
                    } else {
                        " (there is none: the defaults apply)"
                    }
                )
            }
            Some(raw) => check(&mut a, &policy(&host, &file)?, &target(raw)?, workspace),
        },
        (verb @ ("allow" | "deny"), Ok(file)) => {
            let raw = request.target.as_deref();
            edit_list(
                &mut a,
                &home,
                &host,
                file,
                text.unwrap_or_default(),
                verb,
                raw,
                workspace,
            )?;
        }
        (other, _) => {
            let why = format!(
                "{other:?} is not a policy command: use show, check, allow, deny, init or log"
            );
            return Err(invalid("command", why));
        }
    }
    Ok(a)
}

impl PolicyAnswer {
    fn new(path: &std::path::Path, exists: bool) -> PolicyAnswer {
        PolicyAnswer {
            file: path.display().to_string(),
            exists,
            ok: true,
            changed: false,
            problem: None,
            line: None,
            field: None,
            rule: None,
            values: Vec::new(),
            denials: Vec::new(),
            text: String::new(),
        }
    }
}

/// `allow` or `deny` of `raw` in `file` (its `text`), written when it changed; notes when this
/// environment or the mode keeps the change from mattering.
#[allow(clippy::too_many_arguments)]
fn edit_list(
    a: &mut PolicyAnswer,
    home: &std::path::Path,
    host: &HostEnv,
    file: PolicyFile,
    text: String,
    verb: &str,
    raw: Option<&str>,
    workspace: Option<&str>,
) -> Result<()> {
    let path = super::path_in(home);
    let raw = raw.ok_or_else(|| invalid("target", "name the host, as in host:443".into()))?;
    let entry = edit::entry(raw).map_err(|why| invalid("target", why))?;
    let of = workspace.map_or(ListOf::Every, ListOf::Workspace);
    let edited = match verb {
        "allow" => edit::allow(&text, of, &entry),
        _ => edit::deny(&text, of, &entry),
    }
    .map_err(|p| super::effective::problem_error(&path, p))?;
    if edited.changed {
        edit::write(home, &edited.text).map_err(|e| {
            invalid(
                "poHome",
                format!("{} cannot be written ({e})", path.display()),
            )
        })?;
    }
    a.changed = edited.changed;
    a.text = format!("{}.\n", edited.note);
    let now = policy(host, &super::parse(&edited.text).unwrap_or(file))?;
    if !now.allow.1.follows_file() && of == ListOf::Every {
        a.text.push_str(&format!(
            "Note: here the allow list is {}; a hub given it that way does not follow the file.\n",
            now.allow.1
        ));
    }
    if let ("deny", rules::AllowEntry::Exact(t)) = (verb, &entry) {
        let still = still_allowing(&now, t, workspace);
        if !still.is_empty() {
            a.ok = false;
            let by = still.join(" and by ");
            a.text
                .push_str(&format!("{t} is still allowed, by {by}: deny that too.\n"));
        }
    }
    if now.mode.0 != NetworkMode::Allowlist {
        a.text.push_str(&format!(
            "Note: the network mode is {} ({}): the allow list applies in the allowlist mode only.\n",
            now.mode.0.as_str(),
            now.mode.1
        ));
    }
    Ok(())
}

/// The recent denials, by destination, with the command that allows each.
fn log(a: &mut PolicyAnswer, home: &std::path::Path, workspace: Option<&str>) {
    let groups = super::denials::grouped(&super::denials::read(home), workspace);
    let now = super::denials::now();
    let file = home.join(super::denials::FILE);
    a.text = match groups.is_empty() {
        true => "No egress denials recorded.\n".to_string(),
        false => format!(
            "Egress denials, the most frequent first ({}):\n",
            file.display()
        ),
    };
    for g in &groups {
        let workspaces: Vec<&str> = g.workspaces.iter().map(String::as_str).collect();
        a.text.push_str(&format!(
            "  {}  {} denial{}, the last {} ({})\n    {}\n    {}\n",
            g.destination,
            g.count,
            if g.count == 1 { "" } else { "s" },
            super::denials::ago(g.last_at, now),
            workspaces.join(", "),
            g.last_reason,
            match crate::broker::egress::rules::unlisted(&g.last_reason) {
                true => format!("To allow it: po-sandbox allow {}", g.destination),
                false => "Not a matter of the allow list (the request itself was refused).".into(),
            },
        ));
    }
    a.denials = groups
        .into_iter()
        .map(|g| PolicyDenials {
            destination: g.destination,
            count: g.count,
            last_at: g.last_at as i64,
            last_reason: g.last_reason,
            workspaces: g.workspaces.into_iter().collect(),
        })
        .collect();
}

/// The entries of `p` that still let `t` through: of every workspace's list, and of the
/// workspaces' own lists (of `workspace` only, when given).
fn still_allowing(p: &NetworkPolicy, t: &Target, workspace: Option<&str>) -> Vec<String> {
    let mut still: Vec<String> = rules::allowing(&p.allow_list(), t)
        .map(|e| format!("the entry {e} of the allow list ({})", p.allow.1))
        .into_iter()
        .collect();
    for (id, at) in &p.workspaces {
        if workspace.is_none_or(|w| w == id)
            && let Some(e) = rules::allowing(&at.value, t)
        {
            let line = Source::File(at.line);
            still.push(format!("the entry {e} of workspace {id}'s list ({line})"));
        }
    }
    still
}

fn invalid(option: &str, reason: String) -> Error {
    Error::OptionsInvalid {
        option: option.into(),
        reason,
    }
}

/// The policy a hub started here with no options would take.
fn policy(host: &HostEnv, file: &PolicyFile) -> Result<NetworkPolicy> {
    NetworkPolicy::resolve(Given::default(), host, Some(file))
}

fn target(raw: &str) -> Result<Target> {
    let raw = raw.trim();
    let with_port = match raw.rsplit_once(':') {
        Some((_, p)) if !raw.ends_with(']') && p.bytes().all(|b| b.is_ascii_digit()) => {
            raw.to_string()
        }
        _ => format!("{raw}:443"),
    };
    rules::parse_authority(&with_port, None).map_err(|why| invalid("target", why))
}

/// The git route's hosts and push rules in force, and their sources.
fn git_values(host: &HostEnv, file: &PolicyFile) -> Vec<PolicyValue> {
    let (policy, source) = match super::effective::git_policy(host, Some(file)) {
        Ok(p) => p,
        Err(e) => {
            return vec![value(
                "git.hosts",
                format!("not good: {e}"),
                Source::Default,
            )];
        }
    };
    let hosts: Vec<String> = policy.hosts.iter().map(|h| h.entry()).collect();
    let push: Vec<String> = policy
        .push
        .iter()
        .map(|r| {
            format!(
                "{} {}{}",
                r.repo,
                r.refs,
                if r.force { " (force)" } else { "" }
            )
        })
        .collect();
    let push_source = file
        .git_push
        .as_ref()
        .map_or(Source::Default, |a| Source::File(a.line));
    vec![
        value("git.hosts", hosts.join(", "), source),
        value("git.push", push.join(", "), push_source),
    ]
}

/// The container-side values in force for a hub with no options, and their sources, as the
/// options resolve them: a guards or flags variable set even empty (none) wins over the file;
/// an empty mode variable does not count.
fn container_values(host: &HostEnv, file: &PolicyFile) -> Vec<PolicyValue> {
    use crate::names::vars::{GUARDED_PATHS_VAR, RUN_FLAGS_VAR, WORKSPACE_MODE_VAR};
    let var = |name: &str| host.vars().get(name).cloned();
    let pick = |name: &str,
                var: Option<(&'static str, String)>,
                at: Option<(String, usize)>,
                default: String| {
        match (var, at) {
            (Some((var, v)), _) => value(name, v, Source::Variable(var)),
            (None, Some((v, line))) => value(name, v, Source::File(line)),
            (None, None) => value(name, default, Source::Default),
        }
    };
    let mode_var = var(WORKSPACE_MODE_VAR).filter(|v| !v.trim().is_empty());
    let guards_var = var(GUARDED_PATHS_VAR).map(|v| {
        crate::sandbox::folder::guarded_from_var(&v)
            .map(|list| list.join(", "))
            .unwrap_or_else(|e| format!("not good: {e}"))
    });
    let flags_var = var(RUN_FLAGS_VAR).map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "));
    let mode = file
        .workspace_mode
        .as_ref()
        .map(|a| (a.value.clone(), a.line));
    let guarded = file
        .guarded_paths
        .as_ref()
        .map(|a| (a.value.join(", "), a.line));
    let flags = file.run_flags.as_ref().map(|a| (a.value.join(" "), a.line));
    let guards = crate::sandbox::folder::DEFAULT_GUARDED_PATHS.join(", ");
    vec![
        pick(
            "workspaceMode",
            mode_var.map(|v| (WORKSPACE_MODE_VAR, v)),
            mode,
            "bind".into(),
        ),
        pick(
            "guardedPaths",
            guards_var.map(|v| (GUARDED_PATHS_VAR, v)),
            guarded,
            guards,
        ),
        pick(
            "runFlags",
            flags_var.map(|v| (RUN_FLAGS_VAR, v)),
            flags,
            String::new(),
        ),
    ]
}

fn show(a: &mut PolicyAnswer, p: &NetworkPolicy, extra: Vec<PolicyValue>) {
    let mut values = vec![
        value("network", p.mode.0.as_str().to_string(), p.mode.1),
        value(
            "allow",
            match &p.allow.0 {
                Some(list) => joined(list),
                None => format!("the default list: {}", rules::DEFAULT_ALLOW.join(", ")),
            },
            p.allow.1,
        ),
        value(
            "resolve",
            p.resolve
                .0
                .iter()
                .map(|(n, ip)| format!("{n}={ip}"))
                .collect::<Vec<_>>()
                .join(", "),
            p.resolve.1,
        ),
    ];
    values.extend(extra);
    for (id, at) in &p.workspaces {
        values.push(value(
            &format!("workspaces.{id}.allow"),
            joined(&at.value),
            Source::File(at.line),
        ));
    }
    let width = values.iter().map(|v| v.name.len()).max().unwrap_or(0);
    a.text = format!(
        "The sandbox policy in force for a hub started here with no options ({}{}):\n",
        a.file,
        if a.exists {
            ""
        } else {
            ", not there: the defaults apply"
        }
    );
    for v in &values {
        let shown = if v.value.is_empty() {
            "(none)"
        } else {
            &v.value
        };
        a.text.push_str(&format!(
            "  {:width$}  {shown}\n  {:width$}  from {}\n",
            v.name, "", v.source
        ));
    }
    a.values = values;
}

fn value(name: &str, value: String, source: Source) -> PolicyValue {
    PolicyValue {
        name: name.to_string(),
        value,
        source: source.to_string(),
    }
}

fn joined(list: &[rules::AllowEntry]) -> String {
    list.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn check(a: &mut PolicyAnswer, p: &NetworkPolicy, t: &Target, workspace: Option<&str>) {
    let (ok, rule) = match p.mode.0 {
        NetworkMode::Open => (
            true,
            format!("the open network mode ({}): every public address", p.mode.1),
        ),
        NetworkMode::None => (
            false,
            format!("the none network mode ({}): nothing leaves", p.mode.1),
        ),
        NetworkMode::Allowlist => {
            let every = p.allow_list();
            let own = workspace.and_then(|w| p.workspaces.get(w));
            match (
                rules::allowing(&every, t),
                own.and_then(|o| rules::allowing(&o.value, t).map(|e| (e, o.line))),
            ) {
                (Some(e), _) => (
                    true,
                    format!("the entry {e} of the allow list ({})", p.allow.1),
                ),
                (None, Some((e, line))) => (
                    true,
                    format!(
                        "the entry {e} of workspace {}'s list ({})",
                        workspace.unwrap_or(""),
                        Source::File(line)
                    ),
                ),
                (None, None) => (
                    false,
                    format!(
                        "no entry of the allow list ({}){}",
                        p.allow.1,
                        workspace
                            .map(|w| format!(" or of workspace {w}'s"))
                            .unwrap_or_default()
                    ),
                ),
            }
        }
    };
    a.ok = ok;
    a.text = match ok {
        true => format!("{t} is allowed, by {rule}.\n"),
        false => format!("{t} is denied: {rule}. To allow it: po-sandbox allow {t}\n"),
    };
    a.rule = Some(rule);
}

fn init(a: &mut PolicyAnswer, home: &std::path::Path, preset: Option<&str>) -> Result<()> {
    let name = preset.unwrap_or("");
    let text = edit::preset(name).ok_or_else(|| {
        invalid(
            "preset",
            format!("{name:?} is not a preset: use {}", edit::PRESETS),
        )
    })?;
    if a.exists {
        a.ok = false;
        a.text = format!(
            "{} is there already: change it with po-sandbox allow/deny or an editor, or remove it first.\n",
            a.file
        );
        return Ok(());
    }
    edit::write(home, &text)
        .map_err(|e| invalid("poHome", format!("{} cannot be written ({e})", a.file)))?;
    a.changed = true;
    a.exists = true;
    a.text = format!("Wrote {} (preset {name}).\n", a.file);
    Ok(())
}
