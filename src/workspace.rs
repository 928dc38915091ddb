//! Workspace identity: ids that are single safe path segments, paths that exist, and the
//! sandbox folder P = `<poHome>/sandboxes/<id>`. Checked before any other I/O.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The longest workspace id accepted.
pub const MAX_ID_LEN: usize = 128;

/// A workspace the layer may sandbox: a checked id and a canonical folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// A single safe path segment.
    pub id: String,
    /// The workspace folder, canonicalised (links resolved).
    pub path: PathBuf,
}

/// Checks a workspace id: 1–128 of `[A-Za-z0-9._-]`, not starting with `.` (so never `.`,
/// `..` or a hidden name) — a single path segment that is also valid in container names.
pub fn check_id(id: &str) -> Result<()> {
    let invalid = |reason: String| {
        Err(Error::WorkspaceInvalid {
            what: format!("id {id:?}"),
            reason,
        })
    };
    if id.is_empty() {
        return invalid("it is empty; use a name like 'my-project'".into());
    }
    if id.len() > MAX_ID_LEN {
        return invalid(format!(
            "it is {} bytes long; the limit is {MAX_ID_LEN}",
            id.len()
        ));
    }
    if id.starts_with('.') {
        return invalid("it starts with '.'; ids are plain folder names like 'my-project'".into());
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!(
            "it contains {c:?}; ids are single path segments of letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Checks an id and a folder: the folder must be absolute, exist and be a directory; it is
/// canonicalised.
pub fn resolve(id: &str, path: &str) -> Result<Workspace> {
    check_id(id)?;
    let invalid = |reason: String| Error::WorkspaceInvalid {
        what: format!("path {path:?} (workspace '{id}')"),
        reason,
    };
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(invalid(
            "it is not absolute; give the workspace folder's full path".into(),
        ));
    }
    let canonical = std::fs::canonicalize(p).map_err(|e| {
        invalid(format!(
            "it cannot be resolved ({e}); create the folder first"
        ))
    })?;
    if !canonical.is_dir() {
        return Err(invalid("it is not a folder".into()));
    }
    let s = canonical.to_string_lossy();
    if s.contains(':') || s.contains(',') {
        return Err(invalid("its path contains ':' or ',', which container bind mounts cannot carry; move or link it elsewhere".into()));
    }
    Ok(Workspace {
        id: id.to_string(),
        path: canonical,
    })
}

/// Checks the Po home: absolute, no `..`.
pub fn check_po_home(po_home: &Path) -> Result<()> {
    if !po_home.is_absolute()
        || po_home
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Error::OptionsInvalid {
            option: "poHome".into(),
            reason: format!(
                "{} is not an absolute path without '..'; give the full path (default ~/.po)",
                po_home.display()
            ),
        });
    }
    Ok(())
}

/// P: the workspace's sandbox folder on the host, `<poHome>/sandboxes/<id>`.
pub fn sandbox_dir(po_home: &Path, id: &str) -> PathBuf {
    po_home.join("sandboxes").join(id)
}

/// The suffix of the lock files a crashed server may leave behind.
pub const LOCK_SUFFIX: &str = ".po-v4.lock";

/// Deletes stale `*.po-v4.lock` entries under `dir`, recursively, without following links
/// and without leaving `dir`: a link named `x.po-v4.lock` is removed (its target untouched);
/// folders and other files are untouched. Returns the removed paths.
pub fn remove_stale_locks(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return Ok(removed);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let ft = entry.file_type()?; // never follows links
            let name = entry.file_name();
            if ft.is_dir() {
                stack.push(entry.path());
            } else if (ft.is_file() || ft.is_symlink())
                && name.to_string_lossy().ends_with(LOCK_SUFFIX)
            {
                std::fs::remove_file(entry.path())?;
                removed.push(entry.path());
            }
        }
    }
    Ok(removed)
}

/// An exclusive advisory lock on a file (`flock`), released on drop.
#[derive(Debug)]
pub struct HostLock {
    _file: std::fs::File,
}

impl HostLock {
    /// Takes the lock, creating the file (0600, folder 0700) when missing; waits up to
    /// `timeout` for another holder.
    pub async fn acquire(path: &Path, timeout: std::time::Duration) -> std::io::Result<HostLock> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        use std::os::unix::io::AsRawFd;
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(HostLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err);
            }
            if std::time::Instant::now() >= deadline {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "another process held it too long",
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["a", "my-project", "Proj_1.2", &"x".repeat(128)] {
            check_id(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            ".hidden",
            "a b",
            "é",
            "a:b",
            &"x".repeat(300),
            "a\0b",
        ] {
            let err = check_id(bad).unwrap_err();
            assert_eq!(err.code(), "WORKSPACE_INVALID", "{bad:?}");
        }
    }

    #[test]
    fn paths_are_checked_and_canonicalised() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let ws = resolve("w", dir.path().join("link").to_str().unwrap()).unwrap();
        assert_eq!(ws.path, std::fs::canonicalize(&real).unwrap());
        std::fs::write(dir.path().join("file"), "").unwrap();
        for bad in [
            "relative/path",
            dir.path().join("missing").to_str().unwrap(),
            dir.path().join("file").to_str().unwrap(),
        ] {
            assert_eq!(
                resolve("w", bad).unwrap_err().code(),
                "WORKSPACE_INVALID",
                "{bad}"
            );
        }
        // A bad id fails before the path is looked at.
        assert!(
            resolve("../x", "/nonexistent")
                .unwrap_err()
                .to_string()
                .contains("id")
        );
    }

    #[test]
    fn po_home_must_be_absolute() {
        assert!(check_po_home(Path::new("/home/u/.po")).is_ok());
        assert_eq!(
            check_po_home(Path::new(".po")).unwrap_err().code(),
            "OPTIONS_INVALID"
        );
        assert!(check_po_home(Path::new("/home/../etc")).is_err());
    }

    #[tokio::test]
    async fn host_lock_is_exclusive_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t/w.lock");
        let first = HostLock::acquire(&path, std::time::Duration::from_secs(5))
            .await
            .unwrap();
        let err = HostLock::acquire(&path, std::time::Duration::from_millis(120))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        drop(first);
        HostLock::acquire(&path, std::time::Duration::from_millis(120))
            .await
            .unwrap();
    }

    #[test]
    fn stale_locks_are_removed_without_following_links() {
        let root = tempfile::tempdir().unwrap();
        let p = root.path().join("P");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(p.join("top.po-v4.lock"), "").unwrap();
        std::fs::write(p.join("a/b/deep.po-v4.lock"), "").unwrap();
        std::fs::write(p.join("a/keep.txt"), "keep").unwrap();
        std::fs::write(p.join("a/almost.po-v4.lock.bak"), "").unwrap();
        std::fs::create_dir(p.join("dir.po-v4.lock")).unwrap();
        std::fs::write(outside.join("target.po-v4.lock"), "target").unwrap();
        std::fs::write(outside.join("victim"), "victim").unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), p.join("link.po-v4.lock")).unwrap();
        std::os::unix::fs::symlink(&outside, p.join("linked-dir")).unwrap();
        let mut removed = remove_stale_locks(&p).unwrap();
        removed.sort();
        assert_eq!(
            removed,
            [
                p.join("a/b/deep.po-v4.lock"),
                p.join("link.po-v4.lock"),
                p.join("top.po-v4.lock")
            ]
        );
        assert!(p.join("a/keep.txt").exists() && p.join("a/almost.po-v4.lock.bak").exists());
        assert!(p.join("dir.po-v4.lock").is_dir());
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "victim"
        );
        assert!(
            outside.join("target.po-v4.lock").exists(),
            "a linked folder is not entered"
        );
        assert!(
            remove_stale_locks(&root.path().join("missing"))
                .unwrap()
                .is_empty()
        );
    }
}
