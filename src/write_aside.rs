//! Files written whole: written aside as `<file>.tmp-<pid>`, then renamed into place; and the
//! start-up sweep that removes the write-aside files a killed writer left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longer than any write of a token file or record could take: an aside this old is left
/// behind even when its pid runs again (pids are reused).
pub const ASIDE_MAX_AGE: Duration = Duration::from_secs(600);

/// The write-aside path of `path` for this process: `<file name>.tmp-<pid>` next to it.
pub fn aside_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `bytes` to `path` whole: into its write-aside file (created new; owner-only with
/// `private`), synced, then renamed over `path`. The aside is removed when a step fails.
pub fn write_whole(path: &Path, bytes: &[u8], private: bool) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = aside_path(path);
    let written = (|| {
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        if private {
            crate::platform::private_files(&mut open);
        }
        let mut f = open.open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        failpoint(path);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The pid a write-aside name carries: `….tmp-<pid>` (also the older `<ws>.net.<pid>` of rules
/// records); `None` for any other name.
fn aside_pid(name: &str) -> Option<u32> {
    let (_, pid) = name
        .rsplit_once(".tmp-")
        .or_else(|| name.rsplit_once(".net."))?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether a process with this pid runs (on this host). Where that cannot be asked, `true`:
/// the age rule alone decides then.
fn pid_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists and may be signalled.
        if unsafe { libc::kill(pid, 0) } == 0 {
            return true;
        }
        std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Whether the writer of a write-aside entry (file or folder) is gone: older than `max_age`,
/// or its pid (never this process's own, which may be writing now) no longer runs.
pub fn writer_gone(pid: u32, entry: &std::fs::DirEntry, max_age: Duration) -> bool {
    let old = entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > max_age);
    old || (pid != std::process::id() && !pid_alive(pid))
}

/// Removes the write-aside files directly in `dir` whose writer is gone: its pid no longer runs
/// (never this process's own, which may be writing now), or the file is older than `max_age`.
/// Never follows a link (a link is removed, its target untouched), never enters a sub-folder
/// and never leaves `dir`; a missing `dir` or one that is a link has nothing to sweep.
/// Returns the removed paths.
pub fn sweep(dir: &Path, max_age: Duration) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Ok(removed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ft = entry.file_type()?; // never follows links
        if !(ft.is_file() || ft.is_symlink()) {
            continue;
        }
        let Some(pid) = aside_pid(&entry.file_name().to_string_lossy()) else {
            continue;
        };
        if writer_gone(pid, &entry, max_age) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => removed.push(entry.path()),
                // Renamed into place or swept by another hub meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

/// Test builds only (`failpoints` feature): when `PO_SANDBOX_FAILPOINT` names the extension of
/// `path` (`token`, `net`), writes `PO_SANDBOX_FAILPOINT_MARKER` and blocks this thread for
/// good between the write-aside and the rename, so a test can kill the process right there.
#[cfg(feature = "failpoints")]
fn failpoint(path: &Path) {
    let Ok(at) = std::env::var("PO_SANDBOX_FAILPOINT") else {
        return;
    };
    if path.extension().is_some_and(|e| e == at.as_str()) {
        if let Ok(marker) = std::env::var("PO_SANDBOX_FAILPOINT_MARKER") {
            let _ = std::fs::write(marker, path.to_string_lossy().as_bytes());
        }
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// Release builds: no failpoint.
#[cfg(not(feature = "failpoints"))]
fn failpoint(_path: &Path) {}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A pid that runs no process: a child that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn names_carry_the_writers_pid() {
        assert_eq!(aside_pid("w1.token.tmp-123"), Some(123));
        assert_eq!(aside_pid("w1.tmp-123"), Some(123), "the older token aside");
        assert_eq!(aside_pid("w1.net.77"), Some(77), "the older record aside");
        assert_eq!(aside_pid("w1.token"), None);
        assert_eq!(aside_pid("w1.net"), None);
        assert_eq!(aside_pid("w1.tmp-"), None);
        assert_eq!(aside_pid("w1.tmp-12x"), None);
        let aside = aside_path(Path::new("/a/w.token"));
        let expected = format!("w.token.tmp-{}", std::process::id());
        assert_eq!(aside.file_name().unwrap().to_str(), Some(expected.as_str()));
    }

    #[test]
    fn a_write_is_whole_and_leaves_no_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.token");
        write_whole(&path, b"one", true).unwrap();
        write_whole(&path, b"two", true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_sweep_removes_asides_of_gone_writers_only_and_follows_no_link() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("owner");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let dead = dead_pid();
        let live = std::process::id();
        let parent = std::os::unix::process::parent_id();
        for name in [
            format!("a.token.tmp-{dead}"),
            format!("b.net.tmp-{dead}"),
            format!("c.tmp-{dead}"),
            format!("d.net.{dead}"),
            format!("mine.token.tmp-{live}"),
            format!("other.token.tmp-{parent}"),
            "keep.token".into(),
            "keep.net".into(),
        ] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        std::fs::write(dir.join(format!("sub/deep.token.tmp-{dead}")), "x").unwrap();
        std::fs::create_dir(dir.join(format!("folder.tmp-{dead}"))).unwrap();
        std::fs::write(outside.join("victim"), "victim").unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dir.join(format!("l.tmp-{dead}")))
            .unwrap();
        let mut removed = sweep(&dir, ASIDE_MAX_AGE).unwrap();
        removed.sort();
        let expected: Vec<PathBuf> = [
            format!("a.token.tmp-{dead}"),
            format!("b.net.tmp-{dead}"),
            format!("c.tmp-{dead}"),
            format!("d.net.{dead}"),
            format!("l.tmp-{dead}"),
        ]
        .iter()
        .map(|n| dir.join(n))
        .collect();
        assert_eq!(removed, expected);
        for kept in [
            format!("mine.token.tmp-{live}"),
            format!("other.token.tmp-{parent}"),
            "keep.token".into(),
            "keep.net".into(),
            format!("sub/deep.token.tmp-{dead}"),
            format!("folder.tmp-{dead}"),
        ] {
            assert!(dir.join(&kept).exists(), "{kept} kept");
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "victim"
        );
        // Past the age bound, even a live writer's (its pid may be another process now).
        let all = sweep(&dir, Duration::ZERO).unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        // A folder that is a link is not swept; a missing one has nothing.
        std::os::unix::fs::symlink(&outside, root.path().join("linked")).unwrap();
        std::fs::write(outside.join(format!("x.tmp-{dead}")), "x").unwrap();
        assert!(
            sweep(&root.path().join("linked"), ASIDE_MAX_AGE)
                .unwrap()
                .is_empty()
        );
        assert!(outside.join(format!("x.tmp-{dead}")).exists());
        assert!(
            sweep(&root.path().join("missing"), ASIDE_MAX_AGE)
                .unwrap()
                .is_empty()
        );
    }
}
