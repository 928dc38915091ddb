//! Git's indirections, resolved as git resolves them: for the top repository and each one
//! below it, the git folders host git reads hooks and config from (a linked worktree's and a
//! submodule's own, their common folder, the submodules' under `modules/`, the linked
//! worktrees' pointer files under `worktrees/`), the folder `core.hooksPath` names and the files
//! `include.path` names, when they are inside the workspace.

use std::path::{Component, Path, PathBuf};

use super::check_entry;

/// Folders the walk for nested repositories never enters: dependencies and build output,
/// which hold other people's repositories, and are large.
const SKIPPED: [&str; 14] = [
    "node_modules",
    "target",
    ".venv",
    "venv",
    "vendor",
    "dist",
    "build",
    ".cache",
    ".tox",
    "__pycache__",
    ".gradle",
    ".next",
    ".terraform",
    "bower_components",
];
/// How deep below the workspace the walk looks for nested repositories.
pub const MAX_DEPTH: usize = 6;
/// How many folders the walk reads at most (a larger tree is walked in part).
pub const MAX_FOLDERS: usize = 20_000;
/// How deep `modules/` nest inside one git folder (submodules of submodules).
const MAX_MODULE_DEPTH: usize = 4;

/// Files git reads from a git folder beside the listed entries, each guarded: `commondir`
/// (where hooks and config are really read from) and `config.worktree`.
pub const GIT_DIR_FILES: [&str; 2] = ["commondir", "config.worktree"];
/// A linked worktree's pointer files under `<git folder>/worktrees/<id>/`.
const WORKTREE_FILES: [&str; 3] = ["commondir", "gitdir", "config.worktree"];

/// The git guards of a workspace.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GitGuards {
    /// Relative paths to mount read-only.
    pub guards: Vec<String>,
    /// Those of them that are config files (made as empty files when missing).
    pub files: Vec<String>,
    /// Submodules' config files, mounted as copies without `core.worktree` (see
    /// [`super::Resolved::copies`]).
    pub copies: Vec<String>,
}

/// The guards of every repository of the workspace at `ws` (canonical), for the `.git/<rest>`
/// entries `rests` (`hooks`, `config`, `info`, ...). With no repository at the top, `.git`
/// itself is guarded (an empty placeholder: none can be made inside).
pub fn guards(ws: &Path, rests: &[&str]) -> GitGuards {
    let mut found = GitGuards::default();
    let GitGuards {
        guards: out,
        files,
        copies,
    } = &mut found;
    // The person's own configuration, read once for every repository of the workspace.
    let mut global = None;
    for tree in work_trees(ws) {
        let dot_git = join(&tree, ".git");
        let meta = std::fs::symlink_metadata(ws.join(&dot_git)).ok();
        match meta {
            Some(m) if m.is_dir() && ws.join(&dot_git).join("HEAD").exists() => {
                git_dir(ws, &dot_git, rests, 0, out, copies);
                followed_files(ws, (&tree, &dot_git), &mut global, out, files);
            }
            Some(m) if m.is_file() => {
                out.push(dot_git.clone());
                let Some(dir) = linked_git_dir(ws, &tree, &ws.join(&dot_git)) else {
                    continue;
                };
                git_dir(ws, &dir, rests, 0, out, copies);
                let common = common_dir(ws, &dir);
                if let Some(common) = &common {
                    git_dir(ws, common, rests, 0, out, copies);
                }
                let git_dir = common.as_deref().unwrap_or(&dir);
                followed_files(ws, (&tree, git_dir), &mut global, out, files);
            }
            // No repository at the top (or a link, or an empty placeholder): `.git` as it is
            // (prepare refuses a link). Below the top, only real repositories count.
            _ if tree.is_empty() => out.push(".git".into()),
            _ => {}
        }
    }
    found
}

/// One git folder's guards: the entries, [`GIT_DIR_FILES`], each linked worktree's pointer
/// files, and the same for each submodule's git folder under `modules/` (`depth` > 0: their
/// configs are listed in `copies`).
fn git_dir(
    ws: &Path,
    dir: &str,
    rests: &[&str],
    depth: usize,
    out: &mut Vec<String>,
    copies: &mut Vec<String>,
) {
    out.extend(rests.iter().map(|r| format!("{dir}/{r}")));
    if depth > 0 && rests.contains(&"config") && ws.join(dir).join("config").is_file() {
        copies.push(format!("{dir}/config"));
    }
    out.extend(GIT_DIR_FILES.iter().map(|f| format!("{dir}/{f}")));
    for id in sub_folders(&ws.join(dir).join("worktrees")) {
        let wt = format!("{dir}/worktrees/{id}");
        out.extend(
            WORKTREE_FILES
                .iter()
                .filter(|f| **f == "config.worktree" || ws.join(&wt).join(f).is_file())
                .map(|f| format!("{wt}/{f}")),
        );
    }
    if depth < MAX_MODULE_DEPTH {
        modules(ws, &format!("{dir}/modules"), rests, depth, out, copies);
    }
}

/// The submodules' git folders under `modules` (a name may hold slashes: `modules/a/b`).
fn modules(
    ws: &Path,
    modules: &str,
    rests: &[&str],
    depth: usize,
    out: &mut Vec<String>,
    copies: &mut Vec<String>,
) {
    for name in sub_folders(&ws.join(modules)) {
        let dir = format!("{modules}/{name}");
        match ws.join(&dir).join("HEAD").is_file() {
            true => git_dir(ws, &dir, rests, depth + 1, out, copies),
            false => self::modules(ws, &dir, rests, depth + 1, out, copies),
        }
    }
}

/// A submodule's config as the container sees it: without `core.worktree`, so that
/// `git submodule update` inside, which rewrites that key whenever it is set, finds nothing to
/// rewrite (git finds the work tree from the submodule's `.git` file).
pub fn config_without_worktree(text: &str) -> String {
    let mut section = String::new();
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(header) = t.strip_prefix('[') {
            section = header
                .split([']', ' ', '\t', '.'])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
        } else if section == "core"
            && t.split('=')
                .next()
                .is_some_and(|k| k.trim().eq_ignore_ascii_case("worktree"))
        {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The real folders directly in `dir` (links are not followed), sorted.
fn sub_folders(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| check_entry(n).is_ok())
        .collect();
    names.sort();
    names
}

/// The folders `core.hooksPath` names and the files `include.path` names, from the repository's
/// config (in its common git folder `git_dir`), the files it includes from inside the
/// workspace, and (for the hooks) the person's own configuration (`global`, read once for all
/// repositories), when they are inside the workspace: git runs those hooks, and reads those
/// files as config.
fn followed_files(
    ws: &Path,
    (tree, git_dir): (&str, &str),
    global: &mut Option<Vec<String>>,
    out: &mut Vec<String>,
    files: &mut Vec<String>,
) {
    let config = Config::parse(&read_config(&ws.join(git_dir).join("config")));
    // Every hooks folder git might use, the person's own configuration's included: guarding one
    // git would not use costs nothing.
    let mut hooks = global
        .get_or_insert_with(|| global_config().hooks_paths)
        .clone();
    hooks.extend(config.hooks_paths);
    for include in config.includes {
        // Relative includes are relative to the config file's folder.
        if let Some(file) = inside(ws, &ws.join(git_dir), &include) {
            // An included file inside the workspace is guarded, and read for the hooks it names.
            hooks.extend(Config::parse(&read_config(&ws.join(&file))).hooks_paths);
            out.push(file.clone());
            files.push(file);
        }
    }
    for hooks in hooks {
        if let Some(p) = inside(ws, &ws.join(tree), &hooks).filter(|p| !out.contains(p)) {
            out.push(p);
        }
    }
}

/// A config file of the workspace as text: a regular file (never through a link, never a FIFO),
/// at most 1 MiB; anything else reads as empty.
fn read_config(path: &Path) -> String {
    crate::safe_read::read_regular(path, 1 << 20)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// What the person's own git configuration says (system: `/etc/gitconfig` or
/// `GIT_CONFIG_SYSTEM` unless `GIT_CONFIG_NOSYSTEM`; global: `GIT_CONFIG_GLOBAL`, or
/// `$XDG_CONFIG_HOME/git/config` and `~/.gitconfig`), read by gix-config as git reads it, the
/// files they include followed. Where an include cannot be followed (an `includeIf` these files
/// hold needs a repository to decide), the files are read without their includes.
fn global_config() -> Config {
    let file = gix_config::File::from_globals().ok().or_else(|| {
        let sources = [
            gix_config::source::Kind::GitInstallation,
            gix_config::source::Kind::System,
            gix_config::source::Kind::Global,
        ];
        let metas = sources
            .iter()
            .flat_map(|kind| kind.sources())
            .filter_map(|source| {
                let path = source.storage_location(&mut |name| std::env::var_os(name))?;
                path.is_file()
                    .then(|| gix_config::file::Metadata::from(*source).at(path))
            });
        gix_config::File::from_paths_metadata(metas, Default::default())
            .ok()
            .flatten()
    });
    file.as_ref().map(Config::of).unwrap_or_default()
}

/// `value` (a path from a git config, relative to `base`) as a workspace-relative guard, when
/// it lies inside the workspace; `~/` paths and paths outside are not mounted at all.
fn inside(ws: &Path, base: &Path, value: &str) -> Option<String> {
    if value.starts_with('~') {
        return None;
    }
    let full = normalise(&base.join(value));
    let full = std::fs::canonicalize(&full).unwrap_or(full);
    let rel = full.strip_prefix(ws).ok()?;
    check_entry(&rel.to_string_lossy()).ok()
}

/// `..` and `.` resolved lexically (the path may not exist yet).
fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What the guards need of a git config file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Every `core.hooksPath`, in order (git uses the last).
    pub hooks_paths: Vec<String>,
    /// Every `include.path` and `includeIf.<condition>.path`.
    pub includes: Vec<String>,
}

impl Config {
    /// A config file's text as git reads it (gix-config: names case-insensitive, values on the
    /// section's line, quoting, escapes, continuation lines and comments as git has them),
    /// without following its includes. Text git would refuse gives nothing.
    pub fn parse(text: &str) -> Config {
        gix_config::File::try_from(text)
            .map(|f| Config::of(&f))
            .unwrap_or_default()
    }

    fn of(file: &gix_config::File) -> Config {
        let hooks_paths = file
            .strings("core.hooksPath")
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.to_string())
            .collect();
        let mut includes = Vec::new();
        for (name, conditional) in [("include", false), ("includeIf", true)] {
            for section in file.sections_by_name(name).into_iter().flatten() {
                // `include.path`, and `includeIf.<condition>.path`: nothing else includes.
                if section.header().subsection_name().is_some() == conditional {
                    includes.extend(section.values("path").into_iter().map(|v| v.to_string()));
                }
            }
        }
        Config {
            hooks_paths,
            includes,
        }
    }

    /// Every `remote.<name>.url` (and `pushurl`) of a config file's text, without its includes.
    pub fn remote_urls(text: &str) -> Vec<String> {
        let Ok(file) = gix_config::File::try_from(text) else {
            return Vec::new();
        };
        file.sections_by_name("remote")
            .into_iter()
            .flatten()
            .flat_map(|s| {
                let mut v: Vec<String> =
                    s.values("url").into_iter().map(|v| v.to_string()).collect();
                v.extend(s.values("pushurl").into_iter().map(|v| v.to_string()));
                v
            })
            .collect()
    }

    /// The value of `key` git would use (the last one), when `text` sets it.
    pub fn value(text: &str, key: &str) -> Option<String> {
        let file = gix_config::File::try_from(text).ok()?;
        file.string(key).map(|v| v.to_string())
    }
}

/// The work trees of the workspace with a `.git` entry, relative (`""` first: the top, listed
/// whatever it holds), found by a walk that skips [`SKIPPED`] folders and git folders, follows
/// no link and stops at [`MAX_DEPTH`] and [`MAX_FOLDERS`].
pub fn work_trees(ws: &Path) -> Vec<String> {
    let mut found = vec![String::new()];
    let mut queue = std::collections::VecDeque::from([(String::new(), 0usize)]);
    let mut read = 0;
    while let Some((rel, depth)) = queue.pop_front() {
        read += 1;
        if read > MAX_FOLDERS {
            tracing::warn!(folder = %ws.display(), "the walk for nested repositories stopped at {MAX_FOLDERS} folders");
            break;
        }
        for name in sub_folders(&ws.join(&rel)) {
            if name == ".git" || SKIPPED.contains(&name.as_str()) {
                continue;
            }
            let child = join(&rel, &name);
            if std::fs::symlink_metadata(ws.join(&child).join(".git")).is_ok() {
                found.push(child.clone());
            }
            if depth + 1 < MAX_DEPTH {
                queue.push_back((child, depth + 1));
            }
        }
    }
    found
}

/// `a/b` (or `b` when `a` is the top).
fn join(a: &str, b: &str) -> String {
    match a.is_empty() {
        true => b.to_string(),
        false => format!("{a}/{b}"),
    }
}

/// The git folder a `.git` file in `tree` names (`gitdir: <path>`, relative to `tree`), relative
/// to the workspace when it is inside it; `None` outside it (it is not mounted at all) or
/// unreadable.
pub fn linked_git_dir(ws: &Path, tree: &str, dot_git: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    inside(ws, &ws.join(tree), target)
}

/// The common folder a linked git folder's `commondir` names, when inside the workspace.
fn common_dir(ws: &Path, dir: &str) -> Option<String> {
    let common = std::fs::read_to_string(ws.join(dir).join("commondir")).ok()?;
    inside(ws, &ws.join(dir), common.trim())
}

#[cfg(all(test, unix))]
mod tests;
