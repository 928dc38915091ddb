//! Guarded paths: files in a workspace that the host executes later, outside any sandbox (git
//! hooks and config, agents' project resources, editor tasks, direnv), mounted read-only over
//! the read-write workspace.
//!
//! Each guard is a read-only bind of the path onto itself; each folder between the workspace
//! and a guard is bound read-write onto itself, so that it is a mount point too and cannot be
//! renamed away and recreated (rename and rmdir of a mount point fail with `EBUSY`). A guard
//! that does not exist yet gets an empty placeholder on the host first (owned by the
//! workspace's owner), so the container cannot create it either.

use crate::host::HostOs;
pub(crate) use crate::names::vars::GUARDED_PATHS_VAR;
use crate::platform::container_path;
use std::path::{Component, Path, PathBuf};

use super::spec::Bind;
use crate::error::{Error, Result};

/// The default guarded paths, relative to the workspace, each a file or folder some host tool
/// runs or trusts without asking: git's hooks, config and info; pi's project resources
/// (settings with `sessionDir`, MCP servers, extensions, skills, prompts, themes, system
/// prompts: all of `.pi`) and the shared `.agents` skills; Claude Code's `.claude` (hooks in
/// its settings, commands, agents) and `.mcp.json`; Cursor's and Codex's folders; dev
/// containers (`initializeCommand` runs on the host); VS Code tasks and JetBrains run
/// configurations; direnv; husky's hooks.
pub const DEFAULT_GUARDED_PATHS: [&str; 15] = [
    ".git/hooks",
    ".git/config",
    ".git/info",
    ".pi",
    ".agents",
    ".claude",
    ".mcp.json",
    ".cursor",
    ".codex",
    ".devcontainer",
    ".vscode",
    ".idea",
    ".envrc",
    ".direnv",
    ".husky",
];
/// Guards that are files when they do not exist yet (every other missing guard is a folder).
const FILE_GUARDS: [&str; 4] = [".envrc", ".git/config", "config", ".mcp.json"];

/// What a missing file guard is made with: empty, or `{}` for JSON, which its readers parse.
fn placeholder_text(rel: &str) -> &'static [u8] {
    match rel.ends_with(".json") {
        true => b"{}\n",
        false => b"",
    }
}

/// Why an entry cannot be a guarded path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadEntry {
    /// Nothing but blanks and slashes.
    #[error("it is empty")]
    Empty,
    /// A comma, newline or NUL (the list is comma-separated), or not UTF-8.
    #[error("it has a character that cannot be listed")]
    Unlistable,
    /// A `..` segment.
    #[error("it climbs out of the workspace ('..')")]
    Climbs,
    /// An absolute path.
    #[error("it is absolute: guarded paths are relative to the workspace")]
    Absolute,
    /// Only `.` segments.
    #[error("it is the workspace itself")]
    Workspace,
}

/// Checks one entry: a relative path inside the workspace, normalised (`./` and a trailing `/`
/// dropped). `Err` says why not.
pub fn check_entry(entry: &str) -> std::result::Result<String, BadEntry> {
    let trimmed = entry.trim().trim_end_matches('/');
    let path = Path::new(trimmed);
    if trimmed.is_empty() {
        return Err(BadEntry::Empty);
    }
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(s) => match s.to_str() {
                Some(s) if !s.contains([',', '\n', '\0']) => parts.push(s),
                _ => return Err(BadEntry::Unlistable),
            },
            Component::CurDir => {}
            Component::ParentDir => return Err(BadEntry::Climbs),
            Component::RootDir | Component::Prefix(_) => return Err(BadEntry::Absolute),
        }
    }
    if parts.is_empty() {
        return Err(BadEntry::Workspace);
    }
    Ok(parts.join("/"))
}

fn invalid(option: &str, entry: &str, reason: BadEntry) -> Error {
    Error::OptionsInvalid {
        option: option.into(),
        reason: format!("{entry:?}: {reason}"),
    }
}

/// The `guardedPaths` option: the complete list (empty: none).
pub fn from_option(list: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in list {
        let path = check_entry(entry).map_err(|r| invalid("guardedPaths", entry, r))?;
        if !out.contains(&path) {
            out.push(path);
        }
    }
    Ok(out)
}

/// [`GUARDED_PATHS_VAR`]: comma-separated; `+path` adds to the defaults, `-path` removes one; any
/// entry without a sign makes the list replace the defaults; empty (or blank) means none.
pub fn from_var(value: &str) -> Result<Vec<String>> {
    let entries: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let replaces = entries.iter().any(|e| !e.starts_with(['+', '-']));
    let mut out: Vec<String> = if replaces || entries.is_empty() {
        Vec::new()
    } else {
        DEFAULT_GUARDED_PATHS
            .iter()
            .map(|p| p.to_string())
            .collect()
    };
    for entry in entries {
        let (remove, bare) = match entry.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, entry.strip_prefix('+').unwrap_or(entry)),
        };
        let path = check_entry(bare).map_err(|r| invalid(GUARDED_PATHS_VAR, entry, r))?;
        if remove {
            out.retain(|p| *p != path);
        } else if !out.contains(&path) {
            out.push(path);
        }
    }
    Ok(out)
}

/// The guards of one workspace, resolved against its folder: what is mounted read-only, and
/// the folders in between that are pinned (bound onto themselves).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    /// Relative paths mounted read-only.
    pub guards: Vec<String>,
    /// Relative folders bound read-write onto themselves (parents of guards).
    pub pins: Vec<String>,
}

/// The git folder a `.git` file names (`gitdir: <path>`), relative to the workspace when it is
/// inside it; `None` outside it (it is not mounted at all) or unreadable.
fn linked_git_dir(ws: &Path, dot_git: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let full = ws.join(target);
    let full = std::fs::canonicalize(&full).unwrap_or(full);
    let rel = full.strip_prefix(ws).ok()?;
    check_entry(&rel.to_string_lossy()).ok()
}

/// Resolves `entries` for the workspace at `ws` (canonical). `.git/<x>` entries follow the
/// repository: with `.git` a folder they stay; with `.git` a file (a linked worktree or a
/// submodule) the file itself is guarded and the entries move to the git folder it names when
/// that is inside the workspace (and to its common folder, when it has one inside it); with no
/// `.git` at all, `.git` itself is guarded (an empty placeholder: no repository can be made here
/// inside the container).
pub fn resolve(ws: &Path, entries: &[String]) -> Resolved {
    let mut guards: Vec<String> = Vec::new();
    let dot_git = ws.join(".git");
    let git_meta = std::fs::symlink_metadata(&dot_git).ok();
    for entry in entries {
        let Some(rest) = entry.strip_prefix(".git/") else {
            guards.push(entry.clone());
            continue;
        };
        match &git_meta {
            // A repository; an empty `.git` (the placeholder made below) is none.
            Some(m) if m.is_dir() && dot_git.join("HEAD").exists() => guards.push(entry.clone()),
            Some(m) if m.is_file() => {
                guards.push(".git".into());
                if let Some(dir) = linked_git_dir(ws, &dot_git) {
                    guards.push(format!("{dir}/{rest}"));
                    let common = std::fs::read_to_string(ws.join(&dir).join("commondir")).ok();
                    if let Some(common) = common {
                        let full = ws.join(&dir).join(common.trim());
                        let full = std::fs::canonicalize(&full).unwrap_or(full);
                        if let Some(rel) = full.strip_prefix(ws).ok().map(|r| r.to_string_lossy())
                            && let Ok(rel) = check_entry(&rel)
                        {
                            guards.push(format!("{rel}/{rest}"));
                        }
                    }
                }
            }
            // No repository, or a link or anything else at .git: guarded as it is (prepare
            // refuses a link).
            Some(_) | None => guards.push(".git".into()),
        }
    }
    let mut out = Vec::new();
    for g in guards {
        if !out.contains(&g) {
            out.push(g);
        }
    }
    // A guard inside another guard is covered by it.
    let guards: Vec<String> = out
        .iter()
        .filter(|g| {
            !out.iter()
                .any(|o| o != *g && g.starts_with(&format!("{o}/")))
        })
        .cloned()
        .collect();
    let mut pins: Vec<String> = Vec::new();
    for g in &guards {
        let parts: Vec<&str> = g.split('/').collect();
        for i in 1..parts.len() {
            let parent = parts[..i].join("/");
            if !pins.contains(&parent) && !guards.contains(&parent) {
                pins.push(parent);
            }
        }
    }
    pins.sort();
    Resolved { guards, pins }
}

/// The bind mounts: each pin read-write onto itself, each guard read-only onto itself (the
/// workspace is mounted at its own path).
pub fn binds(ws: &Path, resolved: &Resolved, os: HostOs) -> Vec<Bind> {
    let bind = |rel: &String, read_only: bool| {
        let p = ws.join(rel);
        Bind {
            target: container_path(os, &p.to_string_lossy()),
            source: p,
            read_only,
        }
    };
    let mut out: Vec<Bind> = resolved.pins.iter().map(|p| bind(p, false)).collect();
    out.extend(resolved.guards.iter().map(|g| bind(g, true)));
    out
}

/// The guards' container paths, comma-separated, for `PO_SANDBOX_GUARDED_PATHS` inside.
pub fn listing(ws: &Path, resolved: &Resolved, os: HostOs) -> String {
    resolved
        .guards
        .iter()
        .map(|g| container_path(os, &ws.join(g).to_string_lossy()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Makes the guards mountable, before the container is created: refuses a guard or pinned
/// folder that is a symbolic link (a mount through it could land outside the workspace), and
/// makes each missing one as an empty placeholder (a file for `.envrc`, `.mcp.json` and git
/// config files, holding `{}` when JSON; a folder otherwise) owned by the workspace folder's
/// owner. A file made inside a git repository is added to its `.git/info/exclude` so `git status` does not show it (empty
/// folders never show). Returns the placeholders made.
pub fn prepare(workspace_id: &str, ws: &Path, resolved: &Resolved) -> Result<Vec<PathBuf>> {
    let owner = std::fs::metadata(ws)
        .map(|m| crate::platform::owner(&m))
        .map_err(|e| Error::container_caused(workspace_id, "cannot read its folder", e))?;
    let mut made = Vec::new();
    let mut made_files = Vec::new();
    let all = resolved.pins.iter().map(|p| (p, true));
    for (rel, is_dir) in all.chain(resolved.guards.iter().map(|g| (g, !is_file_guard(g)))) {
        refuse_links(workspace_id, ws, rel)?;
        let path = ws.join(rel);
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        let placeholder = |e: std::io::Error| {
            let doing = format!("cannot make the placeholder of its guarded path {rel}");
            Error::container_caused(workspace_id, doing, e)
        };
        if is_dir {
            std::fs::create_dir(&path).map_err(placeholder)?;
        } else {
            use std::io::Write;
            let mut file = std::fs::File::create_new(&path).map_err(placeholder)?;
            file.write_all(placeholder_text(rel)).map_err(placeholder)?;
            made_files.push(rel.clone());
        }
        crate::platform::lchown(&path, owner).map_err(placeholder)?;
        made.push(path);
    }
    exclude(ws, &made_files);
    Ok(made)
}

fn is_file_guard(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    FILE_GUARDS.contains(&rel) || FILE_GUARDS.contains(&name)
}

/// Refuses `rel` when it, or a folder between the workspace and it, is a symbolic link.
fn refuse_links(workspace_id: &str, ws: &Path, rel: &str) -> Result<()> {
    let mut at = ws.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at)
                    .map(|t| t.display().to_string())
                    .unwrap_or_default();
                return Err(Error::WorkspaceInvalid {
                    what: format!("{workspace_id:?}"),
                    reason: format!(
                        "its guarded path {rel} goes through the symbolic link {} (to {to}), \
                         which could move the read-only mount outside the workspace: replace the \
                         link with the file or folder itself, or drop {rel} from guardedPaths \
                         ({GUARDED_PATHS_VAR}=-{rel})",
                        at.display()
                    ),
                });
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Lists `files` in the repository's `.git/info/exclude` (best effort: a folder that is not a
/// repository has nothing to hide them from). Neither `.git/info` nor the file is followed when
/// it is a link: the workspace is the agent's, and a link there could point at any host file.
fn exclude(ws: &Path, files: &[String]) {
    let info = ws.join(".git/info");
    let real_folder = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if files.is_empty() || !real_folder(&ws.join(".git")) || !real_folder(&info) {
        return;
    }
    let path = info.join("exclude");
    if let Err(e) = append_missing(&path, files) {
        tracing::warn!(path = %path.display(), error = %e, "cannot list guard placeholders in the git exclude file");
    }
}

/// Appends to the exclude file at `path` (made when missing, never through a link) the lines
/// of `files` it does not have yet.
fn append_missing(path: &Path, files: &[String]) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let mut open = std::fs::OpenOptions::new();
    open.read(true).append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW);
    let mut file = open.open(path)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut added = String::new();
    for f in files {
        let line = format!("/{f}");
        if !text.lines().any(|l| l.trim() == line) {
            if added.is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    added.push('\n');
                }
                added.push_str("# po-sandbox: empty placeholders of guarded paths\n");
            }
            added.push_str(&line);
            added.push('\n');
        }
    }
    match added.is_empty() {
        true => Ok(()),
        false => file.write_all(added.as_bytes()),
    }
}

#[cfg(all(test, unix))]
mod tests;
