//! The few file-system facts that differ between Unix and Windows hosts, in one place: socket
//! files, owners, owner-only modes. On Windows there are no Unix sockets, owners or modes: the
//! broker is reached over TCP there, and token and lock files rely on the user profile's ACLs
//! (see docs/platforms.md).

use std::fs::{DirBuilder, FileType, Metadata, OpenOptions};
use std::path::Path;

use crate::host::HostOs;

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

/// Where a host path appears inside the (always Linux) container. On Linux and macOS the same
/// path (the engine's VM shares it at the same place). On Windows a documented Linux path:
/// `C:\Users\me\proj` is `/mnt/c/Users/me/proj` (drive letter in lower case), a share
/// `\\server\share\dir` is `/mnt/unc/server/share/dir`; `\\?\` prefixes are dropped.
pub fn container_path(os: HostOs, host_path: &str) -> String {
    if os != HostOs::Windows {
        return host_path.to_string();
    }
    let p = host_path.replace('\\', "/");
    let p = match p.strip_prefix("//?/") {
        Some(rest) => match rest.strip_prefix("UNC/") {
            Some(share) => format!("//{share}"),
            None => rest.to_string(),
        },
        None => p,
    };
    let rest = |r: &str| {
        r.split('/')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("/")
    };
    let b = p.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        let drive = (b[0] as char).to_ascii_lowercase();
        return match rest(&p[2..]) {
            r if r.is_empty() => format!("/mnt/{drive}"),
            r => format!("/mnt/{drive}/{r}"),
        };
    }
    if let Some(share) = p.strip_prefix("//") {
        return format!("/mnt/unc/{}", rest(share));
    }
    // Already a Linux-style path (a test's, or one given that way): kept.
    format!("/{}", rest(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_paths_for_every_os() {
        for os in [HostOs::Linux, HostOs::MacOs, HostOs::Other] {
            assert_eq!(container_path(os, "/home/u/proj"), "/home/u/proj");
            assert_eq!(container_path(os, "/Users/me/My Proj"), "/Users/me/My Proj");
        }
        let w = |p: &str| container_path(HostOs::Windows, p);
        assert_eq!(w(r"C:\Users\me\proj"), "/mnt/c/Users/me/proj");
        assert_eq!(w(r"d:\work\My Proj\"), "/mnt/d/work/My Proj");
        assert_eq!(w("C:/Users/me/proj"), "/mnt/c/Users/me/proj");
        assert_eq!(w(r"E:\"), "/mnt/e");
        assert_eq!(w(r"\\?\C:\Users\me\.po"), "/mnt/c/Users/me/.po");
        assert_eq!(w(r"\\server\share\dir"), "/mnt/unc/server/share/dir");
        assert_eq!(w(r"\\?\UNC\server\share\dir"), "/mnt/unc/server/share/dir");
        assert_eq!(w("/already/linux"), "/already/linux");
    }

    #[test]
    fn private_files_and_folders_work_here() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        private_dirs(std::fs::DirBuilder::new().recursive(true))
            .create(&sub)
            .unwrap();
        let file = sub.join("f");
        private_files(std::fs::OpenOptions::new().write(true).create_new(true))
            .open(&file)
            .unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        assert!(!is_socket(&meta.file_type()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(meta.permissions().mode() & 0o777, 0o600);
            let d = std::fs::metadata(&sub).unwrap().permissions().mode() & 0o777;
            assert_eq!(d, 0o700);
            assert!(owner(&meta).is_some() && identity(&meta).is_some());
        }
    }
}
