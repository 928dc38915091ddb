//! Reads of host files that a container may have planted or changed: the file is opened only
//! when it is a regular file (no link followed in its last component, no pipe or device blocked
//! on), and no more than a bound is read.

use std::io::Read;
use std::path::Path;

/// A file's bytes when it is a regular file (opened without following a link or blocking on
/// a pipe) of at most `max` bytes.
pub(crate) fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = open_regular(path)?;
    if file.metadata().ok()?.len() > max {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Opens `path` for reading only when its last component is no link and it is a regular file.
pub(crate) fn open_regular(path: &Path) -> Option<std::fs::File> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path)
        .ok()?
        .file_type()
        .is_symlink()
    {
        return None;
    }
    let file = open.open(path).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}
