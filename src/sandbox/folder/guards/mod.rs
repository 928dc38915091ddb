//! Guarded paths: files in a workspace that the host executes later, outside any sandbox (git
//! hooks and config, agents' project resources, editor tasks, direnv), mounted read-only over
//! the read-write workspace.
//!
//! Each guard is a read-only bind of the path onto itself; each folder between the workspace
//! and a guard is bound read-write onto itself, so that it is a mount point too and cannot be
//! renamed away and recreated (rename and rmdir of a mount point fail with `EBUSY`). A guard
//! that does not exist yet gets an empty placeholder on the host first (owned by the
//! workspace's owner), so the container cannot create it either; the stop that ends the
//! container takes the placeholders away again ([`placeholders`]).

use crate::host::HostOs;
pub(crate) use crate::names::vars::GUARDED_PATHS_VAR;
use crate::platform::container_path;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::sandbox::blueprint::spec::Bind;

pub mod case;
pub mod defuse;
mod git;
pub use git::Config as GitConfig;
pub mod git_safety;
pub mod placeholders;

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
/// Guards that are files when they do not exist yet (every other missing guard is a folder):
/// config files, and the folders only host editors read (`.vscode`, `.idea`, `.devcontainer`),
/// whose empty placeholder folder an editor would take for a project of its own, while a file
/// by that name is nothing to it; `.git` at the top of a folder without git (see
/// [`placeholder_text`]).
const FILE_GUARDS: [&str; 11] = [
    ".git",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".envrc",
    ".git/config",
    "config",
    ".mcp.json",
    "commondir",
    "config.worktree",
    "gitdir",
];

/// Guards that get no placeholder when missing: their tool refuses a new file by itself
/// (direnv runs only an `.envrc` whose content the person allowed with `direnv allow`), while
/// an empty placeholder would make it complain at every `cd`. `review` lists one made inside.
const NO_PLACEHOLDER: [&str; 1] = [".envrc"];

/// The `.git` placeholder of a folder without git: a `.git` file naming a git folder that
/// cannot exist (below a file), which stops git's discovery there, so that neither a bare
/// repository's shape written at the top nor a repository above the folder is taken by host
/// git while the container runs (an empty `.git` folder would not stop it).
pub const NO_REPOSITORY: &[u8] = b"gitdir: .git/po-sandbox-no-repository\n";

/// What a missing file guard is made with: empty; `{}` for JSON, which its readers parse; `.`
/// for a git folder's `commondir` (git reads it as "this folder": unchanged behaviour);
/// [`NO_REPOSITORY`] for `.git` at the top.
fn placeholder_text(rel: &str) -> &'static [u8] {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    match name {
        ".git" if rel == ".git" => NO_REPOSITORY,
        "commondir" => b".\n",
        _ if name.ends_with(".json") => b"{}\n",
        _ => b"",
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
    /// Guards that are files when they do not exist yet, beyond the known names (the config
    /// files a repository's `include.path` names).
    pub files: Vec<String>,
    /// Guards mounted from a copy (written by [`write_copies`]) instead of themselves: the
    /// submodules' configs, without `core.worktree`, which `git submodule update` would rewrite
    /// (a guarded file cannot be replaced). The host's file is never changed.
    pub copies: Vec<String>,
}

/// Resolves `entries` for the workspace at `ws` (canonical). `.git/<x>` entries follow git:
/// for the top repository and each repository below it ([`git::guards`]), in every git folder
/// host git reads (a linked worktree's or submodule's own and its common folder, submodules'
/// under `modules/`), with `commondir`, `config.worktree`, the linked worktrees' pointer files,
/// the `core.hooksPath` folder and `include.path` files inside the workspace. With no `.git` at
/// the top, `.git` itself is guarded (an empty placeholder: no repository can be made there
/// inside the container). Other entries stay as listed.
pub fn resolve(ws: &Path, entries: &[String]) -> Resolved {
    let rests: Vec<&str> = entries
        .iter()
        .filter_map(|e| e.strip_prefix(".git/"))
        .collect();
    let mut guards: Vec<String> = Vec::new();
    let (mut files, mut copies) = (Vec::new(), Vec::new());
    for entry in entries {
        match entry.starts_with(".git/") {
            false => guards.push(entry.clone()),
            // Git's guards all go where the first `.git/` entry is listed.
            true if files.is_empty() && !guards.iter().any(|g| g.starts_with(".git")) => {
                let git = git::guards(ws, &rests);
                guards.extend(git.guards);
                (files, copies) = (git.files, git.copies);
            }
            true => {}
        }
    }
    let mut out = Vec::new();
    for g in guards {
        if !out.contains(&g) {
            out.push(g);
        }
    }
    // A guard inside another guard is covered by it; a missing one whose tool refuses new
    // files by itself gets no placeholder.
    let guards: Vec<String> = out
        .iter()
        .filter(|g| {
            !out.iter()
                .any(|o| o != *g && g.starts_with(&format!("{o}/")))
        })
        .filter(|g| {
            !NO_PLACEHOLDER.contains(&g.as_str()) || std::fs::symlink_metadata(ws.join(g)).is_ok()
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
    Resolved {
        guards,
        pins,
        files,
        copies,
    }
}

/// The bind mounts: each pin read-write onto itself, each guard read-only onto itself (the
/// workspace is mounted at its own path).
pub fn binds(ws: &Path, resolved: &Resolved, os: HostOs, copies: &Path) -> Vec<Bind> {
    let bind = |rel: &String, read_only: bool| {
        let p = ws.join(rel);
        Bind {
            target: container_path(os, &p.to_string_lossy()),
            source: match resolved.copies.contains(rel) {
                true => copies.join(copy_name(rel)),
                false => p,
            },
            read_only,
        }
    };
    let mut out: Vec<Bind> = resolved.pins.iter().map(|p| bind(p, false)).collect();
    out.extend(resolved.guards.iter().map(|g| bind(g, true)));
    out
}

/// The file name of a guard's copy in the copies folder.
fn copy_name(rel: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(rel.as_bytes());
    format!("{}.config", &hex::encode(digest)[..16])
}

/// Writes the copies [`Resolved::copies`] names into the folder `dir` (made 0700; each copy
/// 0644, readable by the container's user), afresh from the host's files, after [`prepare`]
/// checked that no link leads to them.
pub fn write_copies(workspace_id: &str, ws: &Path, resolved: &Resolved, dir: &Path) -> Result<()> {
    if resolved.copies.is_empty() {
        return Ok(());
    }
    let failed = |e: std::io::Error| {
        Error::container_caused(
            workspace_id,
            format!("cannot copy a submodule's config to {}", dir.display()),
            e,
        )
    };
    crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true))
        .create(dir)
        .map_err(failed)?;
    for rel in &resolved.copies {
        let text = read_no_follow(&ws.join(rel)).map_err(failed)?;
        let to = dir.join(copy_name(rel));
        let aside = to.with_extension(format!("tmp-{}", std::process::id()));
        write_new(&aside, &git::config_without_worktree(&text))
            .and_then(|()| std::fs::rename(&aside, &to))
            .map_err(|e| {
                let _ = std::fs::remove_file(&aside);
                failed(e)
            })?;
    }
    Ok(())
}

/// Writes a new file, 0644 on Unix whatever the umask (the container's user reads it through
/// its mount), set on the open file, not by path.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    file.write_all(text.as_bytes())
}

/// A file's text, refusing a link at its last component.
fn read_no_follow(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW);
    let mut text = String::new();
    open.open(path)?.read_to_string(&mut text)?;
    Ok(text)
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
/// makes each missing one as an empty placeholder (a file for config files and the editors'
/// folders, holding `{}` when JSON, [`NO_REPOSITORY`] for `.git`; a folder otherwise) owned by
/// the workspace folder's owner. A file made inside a git repository is added to its
/// `.git/info/exclude` so `git status` does not show it (empty folders never show). What it
/// made is added to the record in `guard_dir` ([`placeholders`]), which the stop that ends the
/// container takes away. Returns the placeholders made.
pub fn prepare(
    workspace_id: &str,
    ws: &Path,
    resolved: &Resolved,
    guard_dir: &Path,
) -> Result<Vec<PathBuf>> {
    let owner = std::fs::metadata(ws)
        .map(|m| crate::platform::owner(&m))
        .map_err(|e| Error::container_caused(workspace_id, "cannot read its folder", e))?;
    let mut record = placeholders::Record {
        folder: ws.to_path_buf(),
        ..Default::default()
    };
    let made = make_placeholders(workspace_id, ws, resolved, owner, &mut record);
    if made.is_ok() {
        record.git_settings = ignore_submodules(ws, resolved);
    }
    // Recorded even when a later one failed: the stop (or the create's undo) takes them away.
    if let Err(e) = placeholders::remember(guard_dir, record.clone()) {
        return Err(Error::container_caused(
            workspace_id,
            format!(
                "cannot record its guard placeholders in {}",
                guard_dir.display()
            ),
            e,
        ));
    }
    made
}

/// Makes the missing guards' placeholders, listing each in `record` as it is made.
fn make_placeholders(
    workspace_id: &str,
    ws: &Path,
    resolved: &Resolved,
    owner: Option<(u32, u32)>,
    record: &mut placeholders::Record,
) -> Result<Vec<PathBuf>> {
    let mut made = Vec::new();
    let mut made_files = Vec::new();
    let all = resolved.pins.iter().map(|p| (p, true));
    let is_dir = |g: &String| !is_file_guard(g) && !resolved.files.contains(g);
    for (rel, is_dir) in all.chain(resolved.guards.iter().map(|g| (g, is_dir(g)))) {
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
            record.made.push(placeholders::Made {
                path: rel.clone(),
                dir: false,
            });
            file.write_all(placeholder_text(rel)).map_err(placeholder)?;
            // Files inside a `.git` folder never show in `git status`, nor does `.git`.
            if !rel.starts_with(".git") && !rel.contains("/.git/") {
                made_files.push(rel.clone());
            }
        }
        if is_dir {
            record.made.push(placeholders::Made {
                path: rel.clone(),
                dir: true,
            });
        }
        crate::platform::lchown(&path, owner).map_err(placeholder)?;
        made.push(path);
    }
    (
        record.excluded,
        record.exclude_created,
        record.exclude_joined,
    ) = exclude(ws, &made_files);
    Ok(made)
}

/// Adds `diff.ignoreSubmodules = dirty` ([`defuse::BLOCK`]) to each repository config of the
/// workspace that does not set it yet (appended in place, never through a link), with the
/// gitlinks its index holds now. Best effort: a config that cannot be written is named in the
/// log.
fn ignore_submodules(ws: &Path, resolved: &Resolved) -> Vec<placeholders::GitSetting> {
    let mut out = Vec::new();
    for rel in defuse::repository_configs(&resolved.guards) {
        if first_link(ws, &rel).is_some() {
            continue;
        }
        let path = ws.join(&rel);
        let Some(text) =
            crate::safe_read::read_regular(&path, 8 << 20).and_then(|b| String::from_utf8(b).ok())
        else {
            continue;
        };
        if defuse::sets_ignore_submodules(&text) {
            continue;
        }
        let (index, sha256) = defuse::index_of(ws, &rel, &text);
        let gitlinks = defuse::gitlinks(&index, sha256).unwrap_or_default();
        let appended = match text.is_empty() || text.ends_with('\n') {
            true => defuse::BLOCK.to_string(),
            false => format!("\n{}", defuse::BLOCK),
        };
        let written = (|| {
            use std::io::Write;
            let mut open = std::fs::OpenOptions::new();
            open.append(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW);
            open.open(&path)?.write_all(appended.as_bytes())
        })();
        match written {
            Ok(()) => out.push(placeholders::GitSetting {
                config: rel,
                appended,
                gitlinks,
            }),
            Err(e) => {
                tracing::warn!(config = %path.display(), error = %e, "cannot add diff.ignoreSubmodules to a repository's config")
            }
        }
    }
    out
}

fn is_file_guard(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    FILE_GUARDS.contains(&rel) || FILE_GUARDS.contains(&name)
}

/// Refuses `rel` when it, or a folder between the workspace and it, is a symbolic link.
fn refuse_links(workspace_id: &str, ws: &Path, rel: &str) -> Result<()> {
    let Some(at) = first_link(ws, rel) else {
        return Ok(());
    };
    let to = std::fs::read_link(&at)
        .map(|t| t.display().to_string())
        .unwrap_or_default();
    Err(Error::WorkspaceInvalid {
        what: format!("{workspace_id:?}"),
        reason: format!(
            "its guarded path {rel} goes through the symbolic link {} (to {to}), \
             which could move the read-only mount outside the workspace: replace the \
             link with the file or folder itself, or drop {rel} from guardedPaths \
             ({GUARDED_PATHS_VAR}=-{rel})",
            at.display()
        ),
    })
}

/// The first symbolic link on the way from `ws` to `rel` (`rel` itself included), if any; the
/// walk ends at the first name that does not exist.
fn first_link(ws: &Path, rel: &str) -> Option<PathBuf> {
    let mut at = ws.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Some(at),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Lists `files` in the repository's `.git/info/exclude` (best effort: a folder that is not a
/// repository has nothing to hide them from). Neither `.git/info` nor the file is followed when
/// it is a link: the workspace is the agent's, and a link there could point at any host file.
/// Returns the lines added, whether the file was made, and whether its last line was ended.
fn exclude(ws: &Path, files: &[String]) -> (Vec<String>, bool, bool) {
    let info = ws.join(".git/info");
    let real_folder = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if files.is_empty() || !real_folder(&ws.join(".git")) || !real_folder(&info) {
        return (vec![], false, false);
    }
    let path = info.join("exclude");
    let created = std::fs::symlink_metadata(&path).is_err();
    match append_missing(&path, files) {
        Ok((added, joined)) => (added, created && path.is_file(), joined),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot list guard placeholders in the git exclude file");
            (vec![], false, false)
        }
    }
}

/// Appends to the exclude file at `path` (made when missing, never through a link) the lines
/// of `files` it does not have yet. Returns the lines added, and whether it ended the file's
/// last line first.
fn append_missing(path: &Path, files: &[String]) -> std::io::Result<(Vec<String>, bool)> {
    use std::io::{Read, Write};
    let mut open = std::fs::OpenOptions::new();
    open.read(true).append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW);
    let mut file = open.open(path)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut added = String::new();
    let mut lines = Vec::new();
    let mut joined = false;
    for f in files {
        let line = format!("/{f}");
        if !text.lines().any(|l| l.trim() == line) {
            if added.is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    added.push('\n');
                    joined = true;
                }
                added.push_str(placeholders::EXCLUDE_MARKER);
                added.push('\n');
            }
            added.push_str(&line);
            added.push('\n');
            lines.push(line);
        }
    }
    if !added.is_empty() {
        file.write_all(added.as_bytes())?;
    }
    Ok((lines, joined))
}

#[cfg(all(test, unix))]
mod tests;
