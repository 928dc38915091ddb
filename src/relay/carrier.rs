//! The fast carrier of a forward's connections: a Unix socket of the host's in a folder the
//! container has bind-mounted (the broker's socket folder). The relay's stream pair stays the
//! control channel (DIAL, CLOSE, the end); each connection's bytes go over its own connection
//! to this socket, at kernel speed, once it presented the forward's secret and a stream id
//! the host is waiting for. Anything else that connects (the container's other processes can)
//! is closed and counted: the most it can do is serve or break its own forward. Unix hosts
//! only (elsewhere [`SocketCarrier::bind`] fails and the stream pair carries everything).
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, watch};

use super::frame::{self, Frame, HANDSHAKE_LEN, SECRET_LEN, SocketSecret};
use crate::lock::Locked;

/// How long a connection to the socket may take to present its secret and stream.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections to the socket that may be presenting at once.
const HANDSHAKES: usize = 64;
/// How long a host connection waits for the relay's connection that claims it.
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);
/// Each direction's copy buffer of a paired connection.
const PIPE_BUFFER: usize = 256 * 1024;
/// Where the socket's file name starts: what a sweep of the folder removes.
pub const SOCKET_PREFIX: &str = "fwd-";

/// No Unix sockets on this host: no carrier is ever bound.
#[cfg(not(unix))]
enum UnixListener {}

/// A bound socket for one forward, not yet in use (see `Relay::use_socket`). Dropped unused,
/// its file is removed.
pub struct SocketCarrier {
    listener: UnixListener,
    file: SocketFile,
    container_path: String,
    secret: SocketSecret,
}

impl SocketCarrier {
    /// Binds `fwd-<random>.sock` in `host_dir` (a real folder, not a link), 0600 and owned by
    /// `owner` when given, for the container to reach as `<container_dir>/<same name>`.
    pub fn bind(
        host_dir: &Path,
        container_dir: &str,
        owner: Option<(u32, u32)>,
    ) -> std::io::Result<SocketCarrier> {
        #[cfg(not(unix))]
        {
            let _ = (host_dir, container_dir, owner);
            Err(std::io::Error::other("Unix sockets need a Unix host"))
        }
        #[cfg(unix)]
        Self::bind_unix(host_dir, container_dir, owner)
    }

    #[cfg(unix)]
    fn bind_unix(
        host_dir: &Path,
        container_dir: &str,
        owner: Option<(u32, u32)>,
    ) -> std::io::Result<SocketCarrier> {
        let meta = std::fs::symlink_metadata(host_dir)?;
        if !meta.is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a folder",
                host_dir.display()
            )));
        }
        let mut random = [0u8; 8 + SECRET_LEN];
        getrandom::fill(&mut random).map_err(std::io::Error::other)?;
        let name = format!("{SOCKET_PREFIX}{}.sock", hex::encode(&random[..8]));
        let path = host_dir.join(&name);
        if path.as_os_str().len() > 100 {
            return Err(std::io::Error::other(format!(
                "{} is too long for a Unix socket",
                path.display()
            )));
        }
        let std_listener = crate::broker::socket::bind_new(host_dir, &path, owner)?;
        let file = SocketFile {
            identity: crate::broker::socket::file_identity(&path),
            path,
        };
        std_listener.set_nonblocking(true)?;
        let listener = UnixListener::from_std(std_listener)?;
        let secret = SocketSecret(random[8..].try_into().expect("the secret's length"));
        let container_path = format!("{}/{name}", container_dir.trim_end_matches('/'));
        Ok(SocketCarrier {
            listener,
            file,
            container_path,
            secret,
        })
    }

    /// The socket's path on the host.
    #[cfg(test)]
    pub fn host_path(&self) -> PathBuf {
        self.file.path.clone()
    }

    /// Its secret (tests play the attacker who learnt it).
    #[cfg(test)]
    pub fn secret(&self) -> SocketSecret {
        self.secret.clone()
    }
}

/// The socket's file: removed once, and only while it is still the socket bound.
struct SocketFile {
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        // The folder is the container's to change: whatever it put at the name stays.
        if self.identity.is_some()
            && crate::broker::socket::file_identity(&self.path) == self.identity
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A carrier in use: the host connections waiting for their pair, and what went wrong.
pub(super) struct SocketSide {
    secret: SocketSecret,
    /// Host connections by stream id, each waiting for the agent's connection that claims it.
    pending: Mutex<HashMap<u32, TcpStream>>,
    /// The probe's outcome: `Ok` once the agent reached the socket, else why not.
    probed: watch::Sender<Option<Result<(), String>>>,
    /// Connections closed for a wrong secret or stream, a slow or short handshake, or too many.
    refused: AtomicU64,
    /// Connections carried now.
    paired: AtomicUsize,
    file: Mutex<Option<SocketFile>>,
}

impl SocketSide {
    /// Serves `carrier` until `ended` holds a reason; returns the side and the SOCKET frame
    /// that tells the agent where and how to connect.
    pub(super) fn start(
        carrier: SocketCarrier,
        ended: watch::Receiver<Option<String>>,
    ) -> (Arc<SocketSide>, Frame) {
        let SocketCarrier {
            listener,
            file,
            container_path,
            secret,
        } = carrier;
        let side = Arc::new(SocketSide {
            secret: secret.clone(),
            pending: Mutex::default(),
            probed: watch::channel(None).0,
            refused: AtomicU64::new(0),
            paired: AtomicUsize::new(0),
            file: Mutex::new(Some(file)),
        });
        #[cfg(unix)]
        tokio::spawn(accept(side.clone(), listener, ended));
        #[cfg(not(unix))]
        let _ = (listener, ended);
        let frame = Frame::Socket {
            secret,
            path: container_path,
        };
        (side, frame)
    }

    /// Whether the agent proved it reaches the socket.
    pub(super) fn live(&self) -> bool {
        matches!(*self.probed.borrow(), Some(Ok(())))
    }

    /// The probe's outcome, once known.
    pub(super) async fn probe(&self) -> Result<(), String> {
        let mut rx = self.probed.subscribe();
        let outcome = rx.wait_for(Option::is_some).await;
        outcome.map_or_else(
            |_| Err("the relay ended".into()),
            |o| o.clone().unwrap_or(Err("no probe".into())),
        )
    }

    /// Holds `conn` for the agent's connection that claims `stream`, for [`DIAL_TIMEOUT`] at
    /// most.
    pub(super) fn dial(self: &Arc<Self>, stream: u32, conn: TcpStream) {
        self.pending.locked().insert(stream, conn);
        let side = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(DIAL_TIMEOUT).await;
            if let Some(side) = side.upgrade() {
                side.closed(stream, "no connection from the relay in time");
            }
        });
    }

    /// The agent's CLOSE of `stream`: a DIAL that failed (the waiting connection drops), or
    /// on stream 0 the probe (the socket cannot be reached).
    pub(super) fn closed(&self, stream: u32, reason: &str) {
        if stream == 0 {
            self.probed
                .send_if_modified(|p| p.is_none() && p.replace(Err(reason.into())).is_none());
            return;
        }
        if let Some(conn) = self.pending.locked().remove(&stream) {
            tracing::debug!(stream, %reason, "forwarded connection closed in the sandbox");
            tokio::spawn(end_unpaired(conn));
        }
    }

    /// Ends it: the socket's file goes, waiting connections drop.
    pub(super) fn shutdown(&self) {
        drop(self.file.locked().take());
        self.pending.locked().clear();
        self.probed.send_if_modified(|p| {
            p.is_none() && p.replace(Err("the relay ended".into())).is_none()
        });
    }

    /// Connections refused so far.
    #[cfg(test)]
    pub(super) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Connections carried now.
    #[cfg(test)]
    pub(super) fn paired(&self) -> usize {
        self.paired.load(Ordering::Relaxed)
    }

    fn refuse(&self, why: &str) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(
            refused = n,
            "a connection to a forward's socket was refused: {why}"
        );
    }
}

/// Ends a connection that gets no pair: its end sent and what the client sent read, so it
/// sees an end, not a reset (unread bytes at a close reset the connection).
pub(super) async fn end_unpaired(mut conn: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = conn.shutdown().await;
    let mut sink = [0u8; 4096];
    let drain = async { while matches!(conn.read(&mut sink).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
}

/// Accepts connections to the socket until the relay ends; each presents its handshake in a
/// task of its own, at most [`HANDSHAKES`] at once (one that stalls holds a place for
/// [`HANDSHAKE_TIMEOUT`]: the most it does is slow its own forward).
#[cfg(unix)]
async fn accept(
    side: Arc<SocketSide>,
    listener: UnixListener,
    mut ended: watch::Receiver<Option<String>>,
) {
    let gate = Arc::new(Semaphore::new(HANDSHAKES));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = ended.wait_for(Option::is_some) => break,
        };
        let Ok((conn, _)) = accepted else {
            // Out of descriptors and the like: the next accept may do.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        // At most HANDSHAKES present at once; the rest wait in the listen backlog.
        let Ok(permit) = gate.clone().acquire_owned().await else {
            break;
        };
        let (side, ended) = (side.clone(), ended.clone());
        tokio::spawn(handshake(side, conn, ended, permit));
    }
    side.shutdown();
}

/// Reads one connection's handshake: the probe confirms the socket; a waiting stream is
/// paired and carried; anything else is refused.
#[cfg(unix)]
async fn handshake(
    side: Arc<SocketSide>,
    mut conn: UnixStream,
    ended: watch::Receiver<Option<String>>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let mut bytes = [0u8; HANDSHAKE_LEN];
    let read = tokio::time::timeout(HANDSHAKE_TIMEOUT, conn.read_exact(&mut bytes)).await;
    drop(permit);
    let stream = match read {
        Ok(Ok(_)) => frame::check_handshake(&bytes, &side.secret),
        Ok(Err(_)) => return side.refuse("it ended before its handshake"),
        Err(_) => return side.refuse("no handshake within 5 s"),
    };
    let waiting = match stream {
        None => return side.refuse("a wrong secret"),
        Some(0) => {
            side.probed
                .send_if_modified(|p| p.is_none() && p.replace(Ok(())).is_none());
            return;
        }
        Some(id) => side.pending.locked().remove(&id),
    };
    let Some(tcp) = waiting else {
        return side.refuse("a stream nobody waits for");
    };
    side.paired.fetch_add(1, Ordering::Relaxed);
    pipe(tcp, conn, ended).await;
    side.paired.fetch_sub(1, Ordering::Relaxed);
}

/// Both directions between the host connection and its pair (this carrier's Unix connection,
/// or the namespace carrier's TCP one) until both ended (half-close kept), one failed, or the
/// relay ended.
pub(super) async fn pipe<P>(
    mut tcp: TcpStream,
    mut pair: P,
    mut ended: watch::Receiver<Option<String>>,
) where
    P: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let _ = tcp.set_nodelay(true);
    let copy =
        tokio::io::copy_bidirectional_with_sizes(&mut tcp, &mut pair, PIPE_BUFFER, PIPE_BUFFER);
    tokio::select! {
        r = copy => if let Err(e) = r {
            tracing::debug!("a forwarded connection failed: {e}");
        },
        _ = ended.wait_for(Option::is_some) => {}
    }
}
