//! A grant's Unix socket: a 0700 folder and a 0600 socket owned by the container's user, and
//! the (device, inode) identity that tells whether the socket is still the one bound.

use std::path::Path;

use crate::error::{Error, Result};

/// (device, inode) of a path itself (links not followed).
pub fn file_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .and_then(|m| crate::platform::identity(&m))
}

/// The listener of a grant's own socket. Windows has none (grants there use the TCP route).
#[cfg(unix)]
pub type SocketListener = tokio::net::UnixListener;
/// The listener of a grant's own socket. Windows has none (grants there use the TCP route).
#[cfg(not(unix))]
pub enum SocketListener {}

/// Makes the socket folder (0700) and binds the socket (0600), both owned by `owner` when
/// given; a stale socket at the path is replaced. Returns a Tokio listener (call inside a
/// runtime).
pub fn bind_socket(dir: &Path, socket: &Path, owner: Option<(u32, u32)>) -> Result<SocketListener> {
    #[cfg(not(unix))]
    {
        let _ = (dir, owner);
        Err(Error::broker(format!(
            "cannot listen on {}: Unix-socket grants need a Unix host; on Windows use transport 'tcp' (the container provider does)",
            socket.display()
        )))
    }
    #[cfg(unix)]
    bind_unix(dir, socket, owner)
}

#[cfg(unix)]
fn bind_unix(dir: &Path, socket: &Path, owner: Option<(u32, u32)>) -> Result<SocketListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let bad = |what: &str, e: std::io::Error| {
        Error::broker_caused(format!("cannot {what} {}", dir.display()), e)
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| bad("create", e))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| bad("inspect", e))?;
    if !meta.is_dir() {
        return Err(Error::broker(format!("{} is not a folder", dir.display())));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| bad("secure", e))?;
    if socket.as_os_str().len() > 100 {
        return Err(Error::broker(format!(
            "the socket path {} is too long for a Unix socket; choose a shorter socketDir",
            socket.display()
        )));
    }
    match std::fs::symlink_metadata(socket) {
        Ok(m) if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => {
            let _ = std::fs::remove_file(socket);
        }
        Ok(_) => {
            return Err(Error::broker(format!(
                "{} exists and is not a socket",
                socket.display()
            )));
        }
        Err(_) => {}
    }
    let std_listener =
        std::os::unix::net::UnixListener::bind(socket).map_err(|e| bad("listen in", e))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| bad("secure the socket in", e))?;
    if let Some((uid, gid)) = owner {
        for p in [dir, socket] {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(|e| bad("hand over", e))?;
        }
    }
    std_listener
        .set_nonblocking(true)
        .map_err(|e| bad("set up", e))?;
    tokio::net::UnixListener::from_std(std_listener).map_err(|e| bad("register", e))
}
