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
#[derive(Debug)]
pub enum SocketListener {}

/// What the checks read of a folder: kind, owner, mode bits (Unix only: on Windows there are
/// no socket folders to check).
#[cfg_attr(not(unix), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
struct Facts {
    dir: bool,
    link: bool,
    uid: u32,
    mode: u32,
}

impl Facts {
    #[cfg(unix)]
    fn of(meta: &std::fs::Metadata) -> Facts {
        use std::os::unix::fs::MetadataExt;
        Facts {
            dir: meta.is_dir(),
            link: meta.file_type().is_symlink(),
            uid: meta.uid(),
            mode: meta.mode(),
        }
    }
}

/// The folder that holds the grants' folders: a real folder that only its owner (this user or
/// root) can change, or a sticky one (like /tmp), where others cannot rename or remove what
/// this user made in it. Otherwise another local user could swap a grant's folder or socket.
#[cfg_attr(not(unix), allow(dead_code))]
fn safe_parent(path: &Path, f: &Facts, me: u32) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::broker(format!(
            "the broker socket folder {} {why}: use a folder only you can change (brokerSocketDir, or set XDG_RUNTIME_DIR)",
            path.display()
        )))
    };
    if f.link || !f.dir {
        return refuse("is not a folder".into());
    }
    if f.uid != me && f.uid != 0 {
        return refuse(format!("belongs to uid {}, not to you (uid {me})", f.uid));
    }
    if f.mode & 0o022 != 0 && f.mode & 0o1000 == 0 {
        return refuse(format!(
            "can be changed by other users (mode {:o}, not sticky)",
            f.mode & 0o7777
        ));
    }
    Ok(())
}

/// A grant's own folder: a real folder of this user or of the container's user it is handed
/// to (made now, or left by an earlier run), not one another user prepared.
#[cfg_attr(not(unix), allow(dead_code))]
fn ours(path: &Path, f: &Facts, me: u32, handed_to: Option<u32>) -> Result<()> {
    if f.link || !f.dir {
        return Err(Error::broker(format!("{} is not a folder", path.display())));
    }
    if f.uid != me && Some(f.uid) != handed_to {
        return Err(Error::broker(format!(
            "the broker socket folder {} belongs to uid {}, not to you (uid {me}): remove it, or use another brokerSocketDir",
            path.display(),
            f.uid
        )));
    }
    Ok(())
}

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
    let me = unsafe { libc::geteuid() };
    if let Some(parent) = dir.parent() {
        let meta = std::fs::symlink_metadata(parent).map_err(|e| bad("inspect", e))?;
        safe_parent(parent, &Facts::of(&meta), me)?;
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| bad("inspect", e))?;
    ours(dir, &Facts::of(&meta), me, owner.map(|(uid, _)| uid))?;
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
        bind_aside(dir, socket, owner, Place::Replace, || ()).map_err(|e| bad("listen in", e))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).map_err(|e| bad("hand over", e))?;
    }
    std_listener
        .set_nonblocking(true)
        .map_err(|e| bad("set up", e))?;
    tokio::net::UnixListener::from_std(std_listener).map_err(|e| bad("register", e))
}

/// Binds the socket in a fresh 0700 folder of this user beside `dir` (its parent was checked:
/// only this user can change it), sets its mode and owner there, then renames it to `socket`.
/// `dir` may belong to the container's user, who could swap the socket for a link between a
/// bind and a chmod by path; a rename replaces whatever is at `socket` without following it.
/// `before_place` runs just before the rename (tests plant a link there).
#[cfg(unix)]
fn bind_aside(
    dir: &Path,
    socket: &Path,
    owner: Option<(u32, u32)>,
    place: Place,
    before_place: impl FnOnce(),
) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let parent = dir.parent().unwrap_or(dir);
    let aside = parent.join(format!(".bind-{}-{}", std::process::id(), next_aside()));
    std::fs::DirBuilder::new().mode(0o700).create(&aside)?;
    let staged = aside.join("s");
    let placed = (|| {
        let listener = std::os::unix::net::UnixListener::bind(&staged)?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::lchown(&staged, Some(uid), Some(gid))?;
        }
        before_place();
        match place {
            Place::Replace => std::fs::rename(&staged, socket)?,
            // A hard link fails on any existing path (a link included) and follows none.
            Place::New => std::fs::hard_link(&staged, socket)?,
        }
        Ok(listener)
    })();
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&aside);
    placed
}

/// How a socket bound aside takes its place.
#[cfg(unix)]
#[derive(Clone, Copy)]
enum Place {
    /// Replaces whatever is at the path (a stale socket of an earlier run).
    Replace,
    /// Refuses (`AlreadyExists`) when anything is at the path.
    New,
}

/// Binds a socket at `socket`, a new path in `dir` (a folder the container's user may change),
/// 0600 and owned by `owner` when given; refuses when anything is at that path (a link
/// included) and follows no link. The caller removes it (see [`file_identity`]).
#[cfg(unix)]
pub fn bind_new(
    dir: &Path,
    socket: &Path,
    owner: Option<(u32, u32)>,
) -> std::io::Result<std::os::unix::net::UnixListener> {
    bind_aside(dir, socket, owner, Place::New, || ())
}

/// A number for each bind of this process, so concurrent binds use separate folders.
#[cfg(unix)]
fn next_aside() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(uid: u32, mode: u32) -> Facts {
        Facts {
            dir: true,
            link: false,
            uid,
            mode: 0o040000 | mode,
        }
    }

    #[test]
    fn the_folder_of_the_grants_must_be_changeable_only_by_its_owner_or_sticky() {
        let p = Path::new("/x/po-broker");
        // Ours or root's, not writable by others; or sticky like /tmp.
        for (uid, mode) in [
            (1600, 0o700),
            (1600, 0o755),
            (0, 0o755),
            (0, 0o1777),
            (1600, 0o1777),
        ] {
            assert!(
                safe_parent(p, &facts(uid, mode), 1600).is_ok(),
                "{uid} {mode:o}"
            );
        }
        // Another user's, or writable by group/others without the sticky bit.
        for (uid, mode, why) in [
            (1700, 0o700, "belongs to uid 1700"),
            (1700, 0o1777, "belongs to uid 1700"),
            (1600, 0o777, "can be changed by other users (mode 777"),
            (1600, 0o770, "mode 770"),
            (0, 0o775, "mode 775"),
        ] {
            let err = safe_parent(p, &facts(uid, mode), 1600)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{err}");
            assert!(err.contains("/x/po-broker"), "{err}");
        }
        let link = Facts {
            link: true,
            dir: false,
            ..facts(1600, 0o777)
        };
        assert!(
            safe_parent(p, &link, 1600)
                .unwrap_err()
                .to_string()
                .contains("is not a folder")
        );
        let file = Facts {
            dir: false,
            ..facts(1600, 0o600)
        };
        assert!(safe_parent(p, &file, 1600).is_err());
    }

    #[test]
    fn a_grants_folder_must_be_this_users_or_the_containers_users() {
        let p = Path::new("/x/po-broker/w");
        assert!(ours(p, &facts(1600, 0o700), 1600, None).is_ok());
        assert!(ours(p, &facts(1000, 0o700), 0, Some(1000)).is_ok());
        let err = ours(p, &facts(1700, 0o700), 1600, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("belongs to uid 1700, not to you (uid 1600)"),
            "{err}"
        );
        assert!(ours(p, &facts(1700, 0o700), 0, Some(1000)).is_err());
        let link = Facts {
            link: true,
            dir: false,
            ..facts(1600, 0o700)
        };
        assert!(ours(p, &link, 1600, None).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn binding_refuses_a_folder_another_user_made_and_a_shared_writable_parent() {
        use std::os::unix::fs::PermissionsExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let base = tempfile::tempdir().unwrap();
        // A parent writable by everyone and not sticky: refused, nothing bound.
        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = rt
            .block_on(async { bind_socket(&open.join("w"), &open.join("w/s.sock"), None) })
            .unwrap_err()
            .to_string();
        assert!(err.contains("can be changed by other users"), "{err}");
        assert!(!open.join("w/s.sock").exists());
        // A safe parent: bound, folder 0700 and socket 0600.
        let safe = base.path().join("safe");
        std::fs::create_dir(&safe).unwrap();
        std::fs::set_permissions(&safe, std::fs::Permissions::from_mode(0o700)).unwrap();
        let sock = safe.join("w/s.sock");
        rt.block_on(async { bind_socket(&safe.join("w"), &sock, None).map(drop) })
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&safe.join("w")), mode(&sock)), (0o700, 0o600));
        // Nothing is left beside the grants' folder.
        let left: Vec<_> = std::fs::read_dir(&safe)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["w"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_swapped_in_while_the_socket_is_bound_is_replaced_and_its_target_untouched() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("w");
        std::fs::create_dir(&dir).unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "host file").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let sock = dir.join("s.sock");
        // The container's user owns the grant's folder: between the bind and the chmod it
        // swaps in a link to a host file (plain, dangling-looking and repeated names alike).
        let listener = bind_aside(&dir, &sock, None, Place::Replace, || {
            std::os::unix::fs::symlink(&victim, &sock).unwrap();
        })
        .unwrap();
        let meta = std::fs::symlink_metadata(&sock).unwrap();
        assert!(
            meta.file_type().is_socket(),
            "the link was replaced by the socket"
        );
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let victim_meta = std::fs::metadata(&victim).unwrap();
        assert_eq!(
            victim_meta.permissions().mode() & 0o777,
            0o644,
            "target untouched"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "host file");
        // The socket answers at its final path.
        std::os::unix::net::UnixStream::connect(&sock).unwrap();
        drop(listener);
        let left: Vec<_> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "no staging folder left: {left:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_new_socket_refuses_any_path_already_there_and_follows_no_link() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("w");
        std::fs::create_dir(&dir).unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "host file").unwrap();
        let sock = dir.join("fwd.sock");
        // A link (dangling or not) or a file planted at the name first: refused, untouched.
        for plant in [victim.clone(), base.path().join("nothing")] {
            std::os::unix::fs::symlink(&plant, &sock).unwrap();
            let err = bind_new(&dir, &sock, None).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
            assert_eq!(std::fs::read_link(&sock).unwrap(), plant);
            std::fs::remove_file(&sock).unwrap();
        }
        // Planted between the bind and the placing: refused too.
        let err = bind_aside(&dir, &sock, None, Place::New, || {
            std::os::unix::fs::symlink(&victim, &sock).unwrap();
        })
        .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "host file");
        std::fs::remove_file(&sock).unwrap();
        // A free name: a 0600 socket that answers there.
        let listener = bind_new(&dir, &sock, None).unwrap();
        let meta = std::fs::symlink_metadata(&sock).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        std::os::unix::net::UnixStream::connect(&sock).unwrap();
        drop(listener);
        let left: Vec<_> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left.len(), 2, "no staging folder left: {left:?}");
    }
}
