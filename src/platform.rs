//! The few file-system facts that differ between Unix and Windows hosts, in one place: socket
//! files, owners, owner-only modes. On Windows there are no Unix sockets, owners or modes: the
//! broker is reached over TCP there, and token and lock files rely on the user profile's ACLs
//! (see the README's platform notes).

use std::fs::{DirBuilder, FileType, Metadata, OpenOptions};
use std::path::Path;

/// The file is a Unix socket (never on Windows).
pub fn is_socket(ft: &FileType) -> bool {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileTypeExt::is_socket(ft)
    }
    #[cfg(not(unix))]
    {
        let _ = ft;
        false
    }
}

/// `(uid, gid)` owning the file; `None` where files have no numeric owner (Windows).
pub fn owner(meta: &Metadata) -> Option<(u32, u32)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.uid(), meta.gid()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// (device, inode) of the file; `None` without them (Windows).
pub fn identity(meta: &Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Hands a path (the link itself, never its target) to `owner`; nothing to do without owners.
pub fn lchown(path: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    #[cfg(unix)]
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    }
    #[cfg(not(unix))]
    let _ = (path, owner);
    Ok(())
}

/// Folders made by this builder are owner-only (0700) on Unix.
pub fn private_dirs(dirs: &mut DirBuilder) -> &mut DirBuilder {
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(dirs, 0o700);
    dirs
}

/// Files created with these options are owner-only (0600) on Unix.
pub fn private_files(open: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(open, 0o600);
    open
}
