//! Files a crashed server leaves behind, and the advisory locks that serialise work on one
//! workspace across processes of this host.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// An exclusive advisory lock on a file (`File::try_lock`: `flock` on Unix, `LockFileEx` on
/// Windows), released on drop.
#[derive(Debug)]
pub struct HostLock {
    _file: File,
}

impl HostLock {
    /// Takes the lock, creating the file (0600, folder 0700) when missing; waits up to
    /// `timeout` for another holder.
    pub async fn acquire(path: &Path, timeout: Duration) -> std::io::Result<HostLock> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(lock) = HostLock::try_acquire(path)? {
                return Ok(lock);
            }
            if std::time::Instant::now() >= deadline {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "another process held it too long",
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl HostLock {
    /// Takes the lock when nobody holds it; `None` when another holder does. A lock file
    /// removed by its last holder (see [`HostLock::remove`]) while this process opened it is
    /// opened again, so two processes never hold locks on two files of one path.
    pub fn try_acquire(path: &Path) -> std::io::Result<Option<HostLock>> {
        for _ in 0..3 {
            let file = open_lock_file(path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(e),
            }
            let same = match std::fs::symlink_metadata(path) {
                Ok(at_path) => {
                    crate::platform::identity(&at_path)
                        == crate::platform::identity(&file.metadata()?)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => return Err(e),
            };
            if same {
                return Ok(Some(HostLock { _file: file }));
            }
        }
        Ok(None)
    }

    /// Removes the lock file while still holding it, then releases it: a process that opened
    /// the file meanwhile finds it gone when it gets the lock (and opens the path again).
    pub fn remove(self, path: &Path) {
        let _ = std::fs::remove_file(path);
    }
}

/// Removes the lock file at `path` when it is a regular file (never a link) nobody holds: the
/// lock is taken first (non-blocking), so a holder's file stays. Says whether it was removed.
pub fn remove_free_lock(path: &Path) -> bool {
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    match HostLock::try_acquire(path) {
        Ok(Some(lock)) => {
            lock.remove(path);
            true
        }
        _ => false,
    }
}

/// Opens (creating when missing) a lock file owner-only, in an owner-only folder.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let mut dirs = std::fs::DirBuilder::new();
    crate::platform::private_dirs(dirs.recursive(true));
    let mut open = std::fs::OpenOptions::new();
    crate::platform::private_files(open.read(true).write(true).create(true).truncate(false));
    if let Some(dir) = path.parent() {
        dirs.create(dir)?;
    }
    open.open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn try_acquire_says_none_while_another_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b/w.lock");
        let first = HostLock::try_acquire(&path).unwrap().expect("free");
        assert!(HostLock::try_acquire(&path).unwrap().is_none());
        drop(first);
        assert!(HostLock::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn a_free_lock_file_is_removed_and_a_held_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o-abc.lock");
        let held = HostLock::try_acquire(&path).unwrap().expect("free");
        assert!(!remove_free_lock(&path), "held by another");
        assert!(path.exists());
        drop(held);
        assert!(remove_free_lock(&path));
        assert!(!path.exists());
        assert!(!remove_free_lock(&path), "nothing there");
        // A link is never a lock file to remove.
        std::fs::write(dir.path().join("target"), "t").unwrap();
        std::os::unix::fs::symlink(dir.path().join("target"), &path).unwrap();
        assert!(!remove_free_lock(&path));
        assert!(path.exists());
    }

    #[test]
    fn a_lock_on_a_removed_file_is_not_a_lock_on_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o-abc.lock");
        let first = HostLock::try_acquire(&path).unwrap().expect("free");
        // Opened before the holder removes it: the lock it then gets is on the old file.
        let stale = open_lock_file(&path).unwrap();
        first.remove(&path);
        stale.try_lock().unwrap();
        let now = HostLock::try_acquire(&path)
            .unwrap()
            .expect("a new file, free");
        assert!(HostLock::try_acquire(&path).unwrap().is_none());
        drop((now, stale));
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
