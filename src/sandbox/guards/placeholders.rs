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
    let bytes = crate::sandbox::review::walk::read_regular(&record_path(guard_dir), 1 << 20)?;
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
    if added.made.is_empty() && added.excluded.is_empty() && record.made.is_empty() {
        return Ok(());
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
    let _ = std::fs::remove_file(record_path(guard_dir));
    removed
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
                && crate::sandbox::review::walk::read_regular(&path, 4096).as_deref() == Some(text)
        }
    }
}

/// Whether a folder between `ws` and `rel`, or `rel` itself, is a symbolic link.
fn through_link(ws: &Path, rel: &str) -> bool {
    let mut at = ws.to_path_buf();
    rel.split('/').any(|part| {
        at.push(part);
        std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink())
    })
}

/// Takes the record's lines and the marker out of `.git/info/exclude` (written aside, renamed
/// over it), or removes the file when the layer made it and nothing else is left. Returns
/// whether it changed anything.
fn unexclude(ws: &Path, record: &Record) -> std::io::Result<bool> {
    if through_link(ws, ".git/info/exclude") {
        return Ok(false);
    }
    let path = ws.join(".git/info/exclude");
    let Some(bytes) = crate::sandbox::review::walk::read_regular(&path, 8 << 20) else {
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
