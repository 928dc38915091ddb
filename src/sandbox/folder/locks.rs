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
///
/// `dir` is writable from inside a running container, so on Unix the walk never resolves a
/// path twice: each folder is opened (`O_NOFOLLOW`) relative to its parent's open descriptor,
/// listed through that descriptor, and its entries removed with `unlinkat`. A folder swapped
/// for a link between the listing and the descent is not entered.
pub fn remove_stale_locks(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    #[cfg(unix)]
    return at::remove_stale_locks(dir);
    #[cfg(not(unix))]
    return by_path::remove_stale_locks(dir);
}

#[cfg(unix)]
mod at {
    use std::ffi::{CStr, CString, OsStr};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    use super::LOCK_SUFFIX;

    /// How deep the walk goes; a deeper tree is the container's doing and is left alone.
    const MAX_DEPTH: usize = 64;

    pub fn remove_stale_locks(dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        let c = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is a valid C string; the descriptor is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // Missing, or not a folder (a link included): nothing to clear.
                Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP) => Ok(removed),
                _ => Err(e),
            };
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        let top = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut stack = vec![(top, dir.to_path_buf(), 0usize)];
        while let Some((folder, path, depth)) = stack.pop() {
            for (name, kind) in entries(&folder)? {
                let shown = path.join(OsStr::from_bytes(name.to_bytes()));
                match kind {
                    Kind::Dir if depth < MAX_DEPTH => {
                        if let Some(child) = open_child(&folder, &name)? {
                            stack.push((child, shown, depth + 1));
                        }
                    }
                    Kind::FileOrLink if name.to_bytes().ends_with(LOCK_SUFFIX.as_bytes()) => {
                        // SAFETY: valid descriptor and C string.
                        if unsafe { libc::unlinkat(folder.as_raw_fd(), name.as_ptr(), 0) } != 0 {
                            let e = io::Error::last_os_error();
                            if e.raw_os_error() != Some(libc::ENOENT) {
                                return Err(e);
                            }
                            continue;
                        }
                        removed.push(shown);
                    }
                    _ => {}
                }
            }
        }
        Ok(removed)
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Dir,
        FileOrLink,
        Other,
    }

    /// `name` below `folder` opened as a folder, never through a link; `None` when it is no
    /// longer a folder (or gone).
    fn open_child(folder: &OwnedFd, name: &CStr) -> io::Result<Option<OwnedFd>> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: valid descriptor and C string.
        let fd = unsafe { libc::openat(folder.as_raw_fd(), name.as_ptr(), flags) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: just opened, owned here.
        Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The entries of the open folder (`.` and `..` left out), each with its kind as
    /// `fstatat` without following links sees it.
    fn entries(folder: &OwnedFd) -> io::Result<Vec<(CString, Kind)>> {
        // fdopendir takes the descriptor it is given: give it a duplicate.
        // SAFETY: valid descriptor.
        let dup = unsafe { libc::fcntl(folder.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dup` is ours; on success the stream owns it and closedir closes it.
        let stream = unsafe { libc::fdopendir(dup) };
        if stream.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so `dup` is still ours to close.
            unsafe { libc::close(dup) };
            return Err(e);
        }
        let mut names = Vec::new();
        loop {
            // SAFETY: `stream` is a valid open stream until closedir below.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                names.push(name.to_owned());
            }
        }
        // SAFETY: the stream is closed once.
        unsafe { libc::closedir(stream) };
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            // SAFETY: zeroed stat is a valid out-parameter; valid descriptor and C string.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::fstatat(
                    folder.as_raw_fd(),
                    name.as_ptr(),
                    &mut st,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if r != 0 {
                continue; // gone since the listing
            }
            let kind = match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => Kind::Dir,
                libc::S_IFREG | libc::S_IFLNK => Kind::FileOrLink,
                _ => Kind::Other,
            };
            out.push((name, kind));
        }
        Ok(out)
    }
}

#[cfg(not(unix))]
mod by_path {
    use std::path::{Path, PathBuf};

    use super::LOCK_SUFFIX;

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

    /// The container swaps a folder for a link to the host while the walk runs: the walk never
    /// follows it (a walk by path, which lists a folder and then opens it again by name, does).
    #[test]
    fn a_folder_swapped_for_a_link_mid_walk_is_not_entered() {
        let root = tempfile::tempdir().unwrap();
        let p = root.path().join("P");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(p.join("a")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("host.po-v4.lock"), "host").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flipper = {
            let (p, outside, stop) = (p.clone(), outside.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::fs::rename(p.join("a"), p.join("a-real")).unwrap();
                    std::os::unix::fs::symlink(&outside, p.join("a")).unwrap();
                    std::fs::remove_file(p.join("a")).unwrap();
                    std::fs::rename(p.join("a-real"), p.join("a")).unwrap();
                }
            })
        };
        for _ in 0..3000 {
            // A listing may meet the moment `a` is renamed away; only the host's file matters.
            let _ = remove_stale_locks(&p);
            if !outside.join("host.po-v4.lock").exists() {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        flipper.join().unwrap();
        assert!(
            outside.join("host.po-v4.lock").exists(),
            "the walk followed a link swapped in for a folder and removed a host file"
        );
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
