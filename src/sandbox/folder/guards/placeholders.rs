//! The placeholders' record: what a create made in the person's folder (empty placeholders of
//! missing guards, lines in `.git/info/exclude`), so that the stop that ends the workspace's
//! container takes exactly that away again and the folder is the person's once more.
//!
//! The record lives in the workspace's guard folder (`<poHome>/sandbox-guards/<owner>/<id>/`,
//! mounted into no container): the agent cannot add a path to it. A placeholder goes only when it
//! is still what the layer made (an empty folder, a file holding exactly its placeholder text,
//! owned as made, reached through no link); anything the person put there since keeps it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The record's file name in the guard folder.
pub const RECORD: &str = "placeholders.json";

/// What the layer made in one workspace folder.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The workspace folder (canonical).
    pub folder: PathBuf,
    /// Placeholders made, relative to the folder, in the order made (parents first).
    pub made: Vec<Made>,
    /// Lines added to `.git/info/exclude`.
    pub excluded: Vec<String>,
    /// `.git/info/exclude` did not exist before the layer wrote it.
    pub exclude_created: bool,
    /// The layer ended the exclude file's last line (it had no newline at its end).
    #[serde(default)]
    pub exclude_joined: bool,
    /// Settings added to repositories' configs ([`super::defuse`]).
    #[serde(default)]
    pub git_settings: Vec<GitSetting>,
}

/// `diff.ignoreSubmodules` added to one repository's config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitSetting {
    /// The config, relative to the folder.
    pub config: String,
    /// The text appended (the block, after a newline when the file did not end with one).
    pub appended: String,
    /// The index's gitlinks when it was added: any other at the stop is the agent's.
    pub gitlinks: Vec<String>,
}

/// One placeholder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Made {
    /// Relative to the folder.
    pub path: String,
    /// A folder (else a file).
    pub dir: bool,
}

/// The marker line above the exclude file's lines the layer adds.
pub const EXCLUDE_MARKER: &str = "# po-sandbox: empty placeholders of guarded paths";

fn record_path(guard_dir: &Path) -> PathBuf {
    guard_dir.join(RECORD)
}

/// The record in `guard_dir`, when there is one for `folder` (`None` for another folder's, or
/// none, or one that does not parse).
pub fn read(guard_dir: &Path) -> Option<Record> {
    let bytes = crate::safe_read::read_regular(&record_path(guard_dir), 1 << 20)?;
    serde_json::from_slice(&bytes).ok()
}

/// Adds what one create made to the record in `guard_dir` (made 0700), keeping what earlier
/// creates for the same folder made and the layer has not taken away yet.
pub fn remember(guard_dir: &Path, added: Record) -> std::io::Result<()> {
    let mut record = match read(guard_dir) {
        Some(r) if r.folder == added.folder => r,
        _ => Record {
            folder: added.folder.clone(),
            ..Record::default()
        },
    };
    let nothing =
        |r: &Record| r.made.is_empty() && r.excluded.is_empty() && r.git_settings.is_empty();
    if nothing(&added) && nothing(&record) {
        return Ok(());
    }
    for g in added.git_settings {
        if !record.git_settings.iter().any(|r| r.config == g.config) {
            record.git_settings.push(g);
        }
    }
    for m in added.made {
        if !record.made.iter().any(|r| r.path == m.path) {
            record.made.push(m);
        }
    }
    for line in added.excluded {
        if !record.excluded.contains(&line) {
            record.excluded.push(line);
        }
    }
    record.exclude_created |= added.exclude_created;
    record.exclude_joined |= added.exclude_joined;
    let text = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
    let write = || {
        crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true))
            .create(guard_dir)?;
        crate::write_aside::write_whole(&record_path(guard_dir), &text, true)
    };
    // The folder of a workspace that is not running may be swept away by a starting hub
    // (between the folder's making and the write): made again.
    match write() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => write(),
        done => done,
    }
}

/// Takes away what the record in `guard_dir` lists, once the workspace's container is gone:
/// each placeholder still as made (deepest first), the exclude file's lines (the file itself
/// when the layer made it and nothing else is left in it); then the record. Returns the paths
/// taken away. A placeholder changed since (a file in the folder, other bytes, another kind) is
/// left, and named in the log.
pub fn take_away(guard_dir: &Path) -> Vec<PathBuf> {
    let Some(record) = read(guard_dir) else {
        return vec![];
    };
    let ws = &record.folder;
    let mut removed = Vec::new();
    // Before the placeholders: a config the layer made holds the setting until it goes.
    let mut kept = Vec::new();
    for g in &record.git_settings {
        match take_setting_away(ws, g) {
            Taken::Yes(path) => removed.push(path),
            Taken::Kept => kept.push(g.clone()),
            Taken::No => {}
        }
    }
    for m in record.made.iter().rev() {
        let path = ws.join(&m.path);
        match unchanged(ws, m) {
            true => {
                let gone = match m.dir {
                    true => std::fs::remove_dir(&path),
                    false => std::fs::remove_file(&path),
                };
                match gone {
                    Ok(()) => removed.push(path),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot remove a guard placeholder")
                    }
                }
            }
            false if std::fs::symlink_metadata(&path).is_ok() => {
                tracing::info!(path = %path.display(), "a guard placeholder changed since it was made: left in place");
            }
            false => {}
        }
    }
    if !record.excluded.is_empty() {
        let exclude = ws.join(".git/info/exclude");
        match unexclude(ws, &record) {
            Ok(true) => removed.push(exclude),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(path = %exclude.display(), error = %e, "cannot take the placeholders' lines out of the git exclude file")
            }
        }
    }
    // A setting kept for the agent's gitlinks stays recorded: the next stop looks again.
    let rest = Record {
        folder: record.folder.clone(),
        git_settings: kept,
        ..Record::default()
    };
    let _ = std::fs::remove_file(record_path(guard_dir));
    if !rest.git_settings.is_empty() {
        let _ = remember(guard_dir, rest);
    }
    removed
}

/// Empties a workspace's guard folder but for a record that [`take_away`] kept, and removes the
/// folder when nothing is left. Entries are removed, never followed.
pub fn clear_folder(guard_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(guard_dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name() == RECORD {
            continue;
        }
        let _ = match e.file_type().is_ok_and(|t| t.is_dir()) {
            true => std::fs::remove_dir_all(e.path()),
            false => std::fs::remove_file(e.path()),
        };
    }
    let _ = std::fs::remove_dir(guard_dir);
}

/// What [`take_setting_away`] did.
enum Taken {
    /// Taken out of this config.
    Yes(PathBuf),
    /// Kept, for the agent's gitlinks.
    Kept,
    /// Nothing to do (changed since, or gone).
    No,
}

/// Whether the placeholder `m` is still what the layer made, reached through no link.
fn unchanged(ws: &Path, m: &Made) -> bool {
    if through_link(ws, &m.path) {
        return false;
    }
    let path = ws.join(&m.path);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    match m.dir {
        true => meta.is_dir() && std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none()),
        false => {
            let text = super::placeholder_text(&m.path);
            meta.is_file()
                && meta.len() == text.len() as u64
                && crate::safe_read::read_regular(&path, 4096).as_deref() == Some(text)
        }
    }
}

/// Whether a folder between `ws` and `rel`, or `rel` itself, is a symbolic link.
fn through_link(ws: &Path, rel: &str) -> bool {
    super::first_link(ws, rel).is_some()
}

/// Takes the record's lines and the marker out of `.git/info/exclude` (written aside, renamed
/// over it), or removes the file when the layer made it and nothing else is left. Returns
/// whether it changed anything.
fn unexclude(ws: &Path, record: &Record) -> std::io::Result<bool> {
    if through_link(ws, ".git/info/exclude") {
        return Ok(false);
    }
    let path = ws.join(".git/info/exclude");
    let Some(bytes) = crate::safe_read::read_regular(&path, 8 << 20) else {
        return Ok(false);
    };
    let text = String::from_utf8_lossy(&bytes);
    let ours = |l: &str| l == EXCLUDE_MARKER || record.excluded.iter().any(|e| e == l);
    let kept: Vec<&str> = text.lines().filter(|l| !ours(l.trim_end())).collect();
    if kept.len() == text.lines().count() {
        return Ok(false);
    }
    // The layer's block was the file's end: its last line ends as it did.
    let block_last = text.lines().last().is_some_and(|l| ours(l.trim_end()));
    if record.exclude_created && kept.iter().all(|l| l.trim().is_empty()) {
        std::fs::remove_file(&path)?;
        return Ok(true);
    }
    let mut out = kept.join("\n");
    let ends_as_it_did = record.exclude_joined && block_last;
    if !out.is_empty() && !ends_as_it_did {
        out.push('\n');
    }
    let aside = crate::write_aside::aside_path(&path);
    let written = (|| {
        use std::io::Write;
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
            let mode = std::fs::metadata(&path)
                .map(|m| m.mode() & 0o777)
                .unwrap_or(0o644);
            open.mode(mode).custom_flags(libc::O_NOFOLLOW);
        }
        let mut file = open.open(&aside)?;
        file.write_all(out.as_bytes())?;
        file.sync_all()?;
        let owner = std::fs::metadata(&path)
            .ok()
            .and_then(|m| crate::platform::owner(&m));
        crate::platform::lchown(&aside, owner)?;
        std::fs::rename(&aside, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written.map(|()| true)
}

/// Takes the setting `g` out of its config again, unless the config's index now holds gitlinks
/// it did not hold when the setting was added (the agent's: then it stays, and the log says why
/// and what to do). Written in place, so the file keeps its mode and owner.
fn take_setting_away(ws: &Path, g: &GitSetting) -> Taken {
    use super::defuse;
    if through_link(ws, &g.config) {
        return Taken::No;
    }
    let path = ws.join(&g.config);
    let Some(text) =
        crate::safe_read::read_regular(&path, 8 << 20).and_then(|b| String::from_utf8(b).ok())
    else {
        return Taken::No;
    };
    if !text.contains(&g.appended) {
        tracing::info!(config = %path.display(), "the sandbox's diff.ignoreSubmodules block was changed since: left in place");
        return Taken::No;
    }
    let (index, sha256) = defuse::index_of(ws, &g.config, &text);
    let added: Vec<String> = match defuse::gitlinks(&index, sha256) {
        Ok(now) => now
            .into_iter()
            .filter(|l| !g.gitlinks.contains(l))
            .collect(),
        Err(e) => vec![format!("(the index cannot be read: {e})")],
    };
    if !added.is_empty() {
        tracing::warn!(
            config = %path.display(),
            gitlinks = ?added,
            "diff.ignoreSubmodules = dirty stays in this repository's config: its index holds gitlinks the sandbox added, whose folders host git status would enter and run; remove them (git rm --cached <path>); the next stop then takes the setting away"
        );
        return Taken::Kept;
    }
    let new_text = text.replacen(&g.appended, "", 1);
    let written = (|| {
        use std::io::Write;
        let mut open = std::fs::OpenOptions::new();
        open.write(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW);
        let mut file = open.open(&path)?;
        file.write_all(new_text.as_bytes())?;
        file.sync_all()
    })();
    match written {
        Ok(()) => Taken::Yes(path),
        Err(e) => {
            tracing::warn!(config = %path.display(), error = %e, "cannot take the sandbox's diff.ignoreSubmodules out of the config");
            Taken::No
        }
    }
}
