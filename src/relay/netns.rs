//! The direct carrier of a forward's connections, where the hub may enter the container's
//! network namespace (Linux, the engine on this host, the hub with `CAP_SYS_ADMIN` over the
//! namespace: root with a rootful engine). Each connection is dialled from the hub itself to
//! `127.0.0.1:<port>` inside that namespace: a thread of its own enters the namespace, makes
//! the socket and ends, so no other work of the hub ever runs there; the socket stays in the
//! namespace it was made in. The bytes then pass between two sockets of the hub, with no copying
//! process in the container. The relay's stream pair stays the control channel (the forward
//! still ends when the relay does). What the connection reaches is what the relay would reach:
//! the container's loopback, under the namespace's own rules.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

/// How long a connection into the namespace may take to be accepted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A network namespace the hub can make sockets in, and the port dialled there. Cheap to clone.
#[derive(Clone)]
pub struct Namespace {
    file: Arc<std::fs::File>,
    port: u16,
}

impl Namespace {
    /// Opens the namespace file at `path` (the engine's `SandboxKey`, an nsfs file), checks it
    /// is a network namespace, the one process `pid` of this host is in (the engine's pid of
    /// the namespace's holder: a path of another machine's engine, or of another pid namespace,
    /// that happens to exist here fails this) and not the hub's own, and proves the hub may
    /// enter it by making one socket there. Fails with why otherwise (on other systems, always).
    pub async fn enter(path: &Path, pid: u32, port: u16) -> std::io::Result<Namespace> {
        #[cfg(target_os = "linux")]
        {
            let file = Arc::new(open_net_namespace(path, pid)?);
            let ns = Namespace { file, port };
            drop(ns.socket().await?);
            Ok(ns)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (path, pid, port);
            Err(std::io::Error::other(
                "entering a network namespace needs Linux",
            ))
        }
    }

    /// A TCP socket made inside the namespace, by a thread that enters it and then ends.
    #[cfg(target_os = "linux")]
    async fn socket(&self) -> std::io::Result<TcpSocket> {
        let file = self.file.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("po-netns".into())
            .spawn(move || {
                let _ = tx.send(socket_in(&file));
            })?;
        let fd = rx
            .await
            .map_err(|_| std::io::Error::other("the namespace's thread ended"))??;
        Ok(TcpSocket::from_std_stream(std::net::TcpStream::from(fd)))
    }

    #[cfg(not(target_os = "linux"))]
    async fn socket(&self) -> std::io::Result<TcpSocket> {
        Err(std::io::Error::other(
            "entering a network namespace needs Linux",
        ))
    }

    /// A connection to the port on the namespace's loopback.
    async fn dial(&self) -> std::io::Result<TcpStream> {
        let socket = self.socket().await?;
        let to = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        match tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(to)).await {
            Ok(connected) => connected,
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    }

    /// Carries `conn` to a connection of its own into the namespace until both ended (half-close
    /// kept), one failed, or `ended` holds a reason. A port nothing listens on ends `conn` as
    /// the other carriers do: its end sent, what the client sent read.
    pub(super) fn carry(&self, conn: TcpStream, ended: watch::Receiver<Option<String>>) {
        let ns = self.clone();
        tokio::spawn(async move {
            match ns.dial().await {
                Ok(inside) => {
                    let _ = inside.set_nodelay(true);
                    super::carrier::pipe(conn, inside, ended).await;
                }
                Err(e) => {
                    tracing::debug!(
                        port = ns.port,
                        "a forwarded connection was not accepted in the sandbox: {e}"
                    );
                    super::carrier::end_unpaired(conn).await;
                }
            }
        });
    }
}

/// Opens `path` (not through a link) when it is the network namespace of process `pid` and not
/// this process's.
#[cfg(target_os = "linux")]
fn open_net_namespace(path: &Path, pid: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    check_net_namespace(file, path, pid)
}

/// `file` (opened from `path`) when it is the network namespace of process `pid` and not this
/// process's.
#[cfg(target_os = "linux")]
fn check_net_namespace(
    file: std::fs::File,
    path: &Path,
    pid: u32,
) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    // _IO(0xb7, 0x3): the namespace type of an nsfs file (Linux 4.11).
    const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
    let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
    // SAFETY: an ioctl without arguments on an open descriptor.
    let kind = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE as _) };
    if kind != libc::CLONE_NEWNET {
        let e = std::io::Error::last_os_error();
        return Err(invalid(format!(
            "{} is not a network namespace ({e})",
            path.display()
        )));
    }
    let it = file.metadata()?;
    // `/proc/<pid>/ns/net` is a link to the process's namespace: metadata follows it.
    let of_pid = std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .map_err(|e| invalid(format!("process {pid} is not one this host sees ({e})")))?;
    if (it.dev(), it.ino()) != (of_pid.dev(), of_pid.ino()) {
        let why = format!(
            "{} is not the network namespace of process {pid}",
            path.display()
        );
        return Err(invalid(why));
    }
    let own = std::fs::metadata("/proc/self/ns/net")?;
    if (it.dev(), it.ino()) == (own.dev(), own.ino()) {
        return Err(invalid(format!(
            "{} is the hub's own network namespace",
            path.display()
        )));
    }
    Ok(file)
}

/// On a thread that ends right after: enters `ns` and makes a non-blocking TCP socket there.
#[cfg(target_os = "linux")]
fn socket_in(ns: &std::fs::File) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: setns on this thread only (a network namespace may be entered by one thread of
    // a multi-threaded process); the thread ends after this function.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let flags = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: a new socket; its descriptor is owned below or the error returned.
    let fd = unsafe { libc::socket(libc::AF_INET, flags, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket(2) and is owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn only_another_network_namespace_passes() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"x").unwrap();
        let me = std::process::id();
        let net = Path::new("/proc/self/ns/net");
        let cases = [
            (plain.as_path(), me, "is not a network namespace"),
            (
                Path::new("/proc/self/ns/uts"),
                me,
                "is not a network namespace",
            ),
            // A pid this host does not see (a VM engine's, another pid namespace's).
            (net, u32::MAX, "is not one this host sees"),
            (net, me, "the hub's own network namespace"),
        ];
        for (path, pid, why) in cases {
            let file = std::fs::File::open(path).unwrap();
            let e = check_net_namespace(file, path, pid).err();
            let e = e.unwrap_or_else(|| panic!("{path:?} passed"));
            assert!(e.to_string().contains(why), "{path:?}: {e}");
        }
    }

    #[tokio::test]
    async fn a_link_or_a_missing_file_is_not_entered() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/proc/self/ns/net", &link).unwrap();
        // The engine's namespace files are nsfs files, never links: /proc's are magic links.
        for path in [link.as_path(), Path::new("/proc/self/ns/net")] {
            let e = Namespace::enter(path, std::process::id(), 80).await.err();
            let e = e.unwrap_or_else(|| panic!("{path:?} was entered"));
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{path:?}: {e}");
        }
        let missing = Namespace::enter(Path::new("/nonexistent/po-netns"), 1, 80).await;
        assert_eq!(
            missing.err().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
    }
}
