//! The one route only the person's own git configuration closes: a folder shaped like a bare
//! repository (`HEAD`, `config`, `objects/`, `refs/`), which the agent can write anywhere in a
//! bind-mode workspace while its container runs. Host git run in such a folder takes it as a
//! repository and runs what its `config` names (`core.fsmonitor`, `core.pager`, aliases).
//! `safe.bareRepository = explicit` stops that, and git reads it only from protected
//! configuration (system, global, command line), never from a repository: the layer checks it
//! (hub start, `up`, the doctor) and says the one command that closes it; with the opt-in
//! (`setGitSafeBareRepository`, `PO_SANDBOX_SET_GIT_SAFE_BARE=1`) it sets it in the person's
//! global configuration itself, records that in `<poHome>/git-safety/<owner>.json`, and undoes
//! it when the owner's last sandbox stops.
//!
//! Git is asked through its own `git config` (so includes, `GIT_CONFIG_GLOBAL` and the system
//! file count as git counts them), run from `/` with the hub's environment.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// The opt-in variable.
pub const SET_VAR: &str = "PO_SANDBOX_SET_GIT_SAFE_BARE";
/// The setting.
pub const KEY: &str = "safe.bareRepository";
/// The value that closes the route.
pub const CLOSED: &str = "explicit";

/// What the person's git configuration says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bare {
    /// `explicit`: closed.
    Closed,
    /// Unset (`None`) or another value: open.
    Open(Option<String>),
    /// No git on this host's `PATH`: nothing here runs such a folder.
    NoGit,
}

fn git(vars: &HashMap<String, String>, args: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new("git")
        .env_clear()
        .envs(vars)
        .args(args)
        .current_dir("/")
        .output()
}

/// Reads `safe.bareRepository` as git does (system, global, their includes).
pub fn check(vars: &HashMap<String, String>) -> Bare {
    match git(vars, &["config", "--includes", "--get", KEY]) {
        Err(_) => Bare::NoGit,
        Ok(out) if out.status.success() => {
            let value = String::from_utf8_lossy(&out.stdout).trim().to_string();
            match value.eq_ignore_ascii_case(CLOSED) {
                true => Bare::Closed,
                false => Bare::Open(Some(value)),
            }
        }
        Ok(_) => Bare::Open(None),
    }
}

/// The warning for an open route (`None` when closed or without git).
pub fn warning(bare: &Bare) -> Option<String> {
    let now = match bare {
        Bare::Closed | Bare::NoGit => return None,
        Bare::Open(None) => "unset".to_string(),
        Bare::Open(Some(v)) => format!("{v:?}"),
    };
    Some(format!(
        "host git takes a folder shaped like a bare repository (HEAD, config, objects/, refs/) \
         as one and runs what its config names, and a contained agent can write that shape \
         anywhere in a bind-mode workspace: {KEY} is {now} in your git configuration. Close it \
         with: git config --global {KEY} {CLOSED} (or let the layer set it while sandboxes run: \
         setGitSafeBareRepository: true, {SET_VAR}=1)"
    ))
}

/// `setGitSafeBareRepository`, else [`SET_VAR`] (`1`/`true`/`yes`, `0`/`false`/`no`).
pub fn opted_in(
    option: Option<bool>,
    vars: &HashMap<String, String>,
) -> crate::error::Result<bool> {
    if let Some(b) = option {
        return Ok(b);
    }
    match vars
        .get(SET_VAR)
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("") | Some("0") | Some("false") | Some("no") => Ok(false),
        Some("1") | Some("true") | Some("yes") => Ok(true),
        Some(other) => Err(crate::error::Error::OptionsInvalid {
            option: SET_VAR.into(),
            reason: format!("{other:?} is not 1 or 0 (true/false, yes/no)"),
        }),
    }
}

/// What the layer changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The global value before (`None`: unset).
    pub previous: Option<String>,
}

fn record_path(po_home: &Path, owner: &str) -> PathBuf {
    po_home.join("git-safety").join(format!("{owner}.json"))
}

/// With the opt-in, sets [`KEY`] to [`CLOSED`] in the person's global configuration when it is
/// open there, and records the change (once: a second start finds it closed). Returns the
/// warning still to show (the route stays open: no opt-in, or the write failed).
pub fn ensure(
    vars: &HashMap<String, String>,
    opt_in: bool,
    po_home: &Path,
    owner: &str,
) -> Option<String> {
    let bare = check(vars);
    if !matches!(bare, Bare::Open(_)) {
        return None;
    }
    if !opt_in {
        return warning(&bare);
    }
    let global = git(vars, &["config", "--global", "--get", KEY]).ok();
    let previous_global = global
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let record = record_path(po_home, owner);
    let written = crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true))
        .create(record.parent().unwrap_or(po_home))
        .and_then(|()| {
            let change = Change {
                previous: previous_global,
            };
            let text = serde_json::to_vec(&change).map_err(std::io::Error::other)?;
            // Recorded before the change: a change is never made without its record.
            if !record.exists() {
                crate::write_aside::write_whole(&record, &text, true)?;
            }
            Ok(())
        });
    let set = written.and_then(|()| git(vars, &["config", "--global", KEY, CLOSED]));
    match set {
        Ok(out) if out.status.success() && check(vars) == Bare::Closed => {
            tracing::info!("{KEY} set to {CLOSED} in the global git configuration ({SET_VAR})");
            None
        }
        Ok(out) => Some(format!(
            "{}; setting it failed: {}",
            warning(&bare).unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!(
            "{}; setting it failed: {e}",
            warning(&bare).unwrap_or_default()
        )),
    }
}

/// Whether the layer changed the setting for `owner` (a record is there).
pub fn recorded(po_home: &Path, owner: &str) -> bool {
    record_path(po_home, owner).is_file()
}

/// Undoes the recorded change once the owner's last sandbox is gone: the global value back to
/// what it was (unset, or its old value), only while it is still [`CLOSED`] (a value the person
/// set since stays). Returns whether it undid anything.
pub fn undo(vars: &HashMap<String, String>, po_home: &Path, owner: &str) -> bool {
    let record = record_path(po_home, owner);
    let Some(change) = crate::safe_read::read_regular(&record, 4096)
        .and_then(|b| serde_json::from_slice::<Change>(&b).ok())
    else {
        return false;
    };
    let now = git(vars, &["config", "--global", "--get", KEY])
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let undone = match (now.as_deref(), &change.previous) {
        (Some(CLOSED), None) => {
            git(vars, &["config", "--global", "--unset", KEY]).is_ok_and(|o| o.status.success())
        }
        (Some(CLOSED), Some(old)) => {
            git(vars, &["config", "--global", KEY, old]).is_ok_and(|o| o.status.success())
        }
        _ => false,
    };
    let _ = std::fs::remove_file(&record);
    if undone {
        tracing::info!("{KEY} in the global git configuration put back as it was");
    }
    undone
}

#[cfg(all(test, unix))]
mod tests;
