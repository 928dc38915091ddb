//! Taking the agent's work (`apply`): the bundle the copy wrote is unbundled into the host
//! repository's objects and its tip set on a branch with `update-ref` (compare-and-swap), by
//! host git with no hook and no fsmonitor. The host's working tree, index, HEAD and current
//! branch are never touched; a branch that moved on its own, or is checked out, is refused.

use std::fs;
use std::path::{Path, PathBuf};

use napi_derive::napi;

use super::source::{answer as answer_of, git as git_in, private_temp_dir, run as run_git};
use super::work::Work;
use crate::error::{Error, Result};

/// What `apply` may be told.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct CloneApplyOptions {
    /// The workspace folder (default: the one the container was started for).
    pub path: Option<String>,
    /// `apply`: the host branch to set (default `po-sandbox/<workspace>`).
    pub branch: Option<String>,
    /// `apply`: write the uncommitted work to this file as a patch instead of a commit.
    pub patch: Option<String>,
    /// `apply` of a folder without git's copy: write the changed files into the folder
    /// (without it nothing is written; the result says what would be).
    /// @default false
    pub yes: Option<bool>,
    /// `apply` of a folder without git's copy: also the files of host-executed classes,
    /// executable files and links (within the folder).
    /// @default false
    pub include_executable: Option<bool>,
}

/// What `apply` did.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneApplied {
    pub workspace_id: String,
    /// The host folder.
    pub path: String,
    /// What the copy is of: `git` (its work put on a branch) or `folder` (its files written
    /// into the folder: see `files`).
    #[napi(ts_type = "'git' | 'folder'")]
    pub kind: String,
    /// The host branch (without `refs/heads/`); none for a folder without git.
    pub branch: Option<String>,
    /// The branch's commit before (none: it did not exist).
    pub previous: Option<String>,
    /// The commit the branch points at now (none: there was nothing to take).
    pub tip: Option<String>,
    /// The branch changed (false: the same work was applied already, or there was none).
    pub changed: bool,
    /// The commit made of the uncommitted work (marked `Po-Sandbox: uncommitted work`).
    pub uncommitted_commit: Option<String>,
    /// The patch file written (`patch`), when there was uncommitted work.
    pub patch: Option<String>,
    /// A folder without git: each changed path and what `apply` did (or, without `yes`, would
    /// do) with it.
    pub files: Vec<super::CloneFile>,
    /// What happened, in words.
    pub message: String,
}

/// The branch `apply` sets by default.
pub fn default_branch(workspace_id: &str) -> String {
    format!("po-sandbox/{workspace_id}")
}

/// `name` when git takes it as a branch name as it is; `OPTIONS_INVALID` otherwise.
pub fn check_branch(name: &str) -> Result<()> {
    let bad = |why: &str| Error::OptionsInvalid {
        option: "branch".into(),
        reason: format!("{name:?} {why}; give a plain branch name such as po-sandbox/my-work"),
    };
    if name.is_empty() || name.starts_with('-') || name.contains('@') {
        return Err(bad("is not a branch name"));
    }
    let mut c = git_in(Path::new("/"));
    c.args(["check-ref-format", "--branch", name]);
    match answer_of(c) {
        Some(ok) if ok == name => Ok(()),
        _ => Err(bad(
            "is not a valid git branch name (git check-ref-format --branch)",
        )),
    }
}

/// The branches checked out in the repository's worktrees (`refs/heads/...`).
fn checked_out(folder: &Path) -> Vec<String> {
    let mut c = git_in(folder);
    c.args(["worktree", "list", "--porcelain"]);
    answer_of(c)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("branch ").map(str::to_string))
        .collect()
}

/// A private temporary folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Puts `work` on `branch` of the repository at `folder` (blocking: run it off the async
/// threads); writes its patch to `patch`.
pub fn apply_work(
    workspace_id: &str,
    folder: &Path,
    branch: &str,
    work: Work,
    patch: Option<&Path>,
) -> Result<CloneApplied> {
    let refuse = |reason: String| Error::ApplyRefused {
        folder: folder.display().to_string(),
        reason,
    };
    let io = |e: std::io::Error| refuse(e.to_string());
    let rev = |r: &str| {
        let mut c = git_in(folder);
        c.args(["rev-parse", "-q", "--verify", r]);
        answer_of(c)
    };
    if answer_of(with(git_in(folder), &["rev-parse", "--git-dir"])).is_none() {
        return Err(refuse("it is not a git repository".into()));
    }
    let full = format!("refs/heads/{branch}");
    let previous = rev(&full);
    let mut done = CloneApplied {
        workspace_id: workspace_id.into(),
        path: folder.display().to_string(),
        kind: "git".into(),
        branch: Some(branch.into()),
        previous: previous.clone(),
        tip: previous.clone(),
        changed: false,
        uncommitted_commit: work.uncommitted.clone(),
        patch: None,
        files: Vec::new(),
        message: String::new(),
    };
    let write_patch = |done: &mut CloneApplied| {
        if let (Some(file), false) = (patch, work.patch.is_empty()) {
            fs::write(file, &work.patch).map_err(io)?;
            done.patch = Some(file.display().to_string());
        }
        Ok::<_, Error>(())
    };
    if work.bundle.is_empty() {
        write_patch(&mut done)?;
        done.message = "No commit beyond the copy's base: nothing to put on a branch.".into();
        return Ok(done);
    }
    let tip = unbundle(folder, &work.bundle).map_err(io)?;
    if work.tip.as_deref().is_some_and(|t| t != tip) {
        return Err(refuse(format!(
            "the copy's bundle holds {tip}, not the tip it named"
        )));
    }
    done.tip = Some(tip.clone());
    if previous.as_deref() == Some(tip.as_str()) {
        write_patch(&mut done)?;
        done.message = format!("{branch} is at {tip} already: the same work, nothing changed.");
        return Ok(done);
    }
    refuse_unsafe(folder, branch, previous.as_deref(), &tip).map_err(refuse)?;
    let old = previous.unwrap_or_else(|| "0".repeat(tip.len()));
    let mut update = with(git_in(folder), &["update-ref", "-m", "po-sandbox apply"]);
    update.args([&full, &tip, &old]);
    run_git(update).map_err(io)?;
    write_patch(&mut done)?;
    done.changed = true;
    done.message = format!("{branch} is now at {tip}.");
    Ok(done)
}

/// Why the branch must not move to `tip`, if it must not: checked out, or diverged.
fn refuse_unsafe(
    folder: &Path,
    branch: &str,
    previous: Option<&str>,
    tip: &str,
) -> std::result::Result<(), String> {
    let full = format!("refs/heads/{branch}");
    if checked_out(folder).contains(&full) {
        return Err(format!(
            "the branch {branch} is checked out; moving it would change that working tree. \
             Switch to another branch, or apply to another one (--branch)"
        ));
    }
    if let Some(old) = previous {
        let mut c = with(git_in(folder), &["merge-base", "--is-ancestor", old, tip]);
        c.stdout(std::process::Stdio::null());
        if !c.status().is_ok_and(|s| s.success()) {
            return Err(format!(
                "the branch {branch} has diverged from the sandbox's work (it has commits the \
                 work does not, {old} is not an ancestor of {tip}); merge or rename it, or \
                 apply to another branch (--branch)"
            ));
        }
    }
    Ok(())
}

/// Writes `bundle` into the repository's objects (no ref changes); the tip it holds.
fn unbundle(folder: &Path, bundle: &[u8]) -> std::io::Result<String> {
    let dir = TempDir(private_temp_dir("apply")?);
    let file = dir.0.join("work.bundle");
    write_new_private(&file, bundle)?;
    let mut c = with(git_in(folder), &["bundle", "unbundle"]);
    c.arg(&file);
    let out = String::from_utf8_lossy(&run_git(c)?).into_owned();
    out.split_whitespace()
        .next()
        .filter(|t| t.len() >= 40 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
        .ok_or_else(|| std::io::Error::other(format!("the bundle named no commit: {out}")))
}

/// Writes a new file (0600), refusing one that exists and a link at its name.
pub(super) fn write_new_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut open = fs::OpenOptions::new();
    open.write(true).create_new(true);
    crate::platform::private_files(&mut open);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW);
    open.open(path)?.write_all(bytes)
}

fn with(mut c: std::process::Command, args: &[&str]) -> std::process::Command {
    c.args(args);
    c
}
