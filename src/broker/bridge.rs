//! The container-side loopback bridge: model SDKs inside a sandbox container can dial a TCP
//! address but not a Unix socket path, so the bridge listens on `127.0.0.1` and relays raw
//! bytes to the credential broker's Unix socket (bind-mounted into the container). It never
//! parses what it relays: the broker speaks HTTP, the bridge only moves bytes.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::copy_bidirectional_with_sizes;
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::{JoinHandle, JoinSet};

use crate::error::{Error, Result};

/// At most this many connections are relayed at once; further clients wait in the listen
/// backlog until a relay ends, so a runaway client cannot exhaust file descriptors.
pub const MAX_RELAYS: usize = 256;

/// Copy buffer per direction: large enough that bulk bodies move in few syscalls.
const BUF: usize = 64 * 1024;

/// A running bridge: `127.0.0.1:<port>` → the broker's Unix socket. Dropping it without
/// [`Bridge::close`] also stops it, in the background.
pub struct Bridge {
    port: u16,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Bridge {
    /// Listens on `127.0.0.1:0` (never any other address, so nothing outside the container's
    /// loopback can reach the broker) and relays each accepted connection to a new connection
    /// to `socket` (an absolute path), copying bytes both ways and propagating half-close in
    /// both directions. Fails with `OptionsInvalid { option: "route" }` when the path is not
    /// absolute, is missing or is not a socket; these are checked before listening.
    pub async fn start(socket: &Path) -> Result<Bridge> {
        check_route(socket).await?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| invalid(format!("cannot listen on 127.0.0.1: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| invalid(format!("cannot read the loopback port: {e}")))?
            .port();
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, socket.to_path_buf(), stopped));
        tracing::debug!(port, socket = %socket.display(), "broker bridge listening");
        Ok(Bridge { port, stop, task })
    }

    /// The loopback port the bridge listens on, for `http://127.0.0.1:<port>`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops accepting, closes the listener (the port is free when this returns) and ends the
    /// relays in flight, so nothing outlives the owner that asked for the bridge.
    pub async fn close(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            tracing::debug!(error = %e, "broker bridge accept loop ended abnormally");
        }
        tracing::debug!(port = self.port, "broker bridge closed");
    }
}

fn invalid(reason: String) -> Error {
    Error::OptionsInvalid {
        option: "route".into(),
        reason,
    }
}

async fn check_route(socket: &Path) -> Result<()> {
    if !socket.is_absolute() {
        return Err(invalid(format!(
            "the broker socket path must be absolute, got '{}'",
            socket.display()
        )));
    }
    match tokio::fs::metadata(socket).await {
        Ok(meta) if meta.file_type().is_socket() => Ok(()),
        Ok(meta) => {
            let t = meta.file_type();
            let what = if t.is_file() {
                "a regular file"
            } else if t.is_dir() {
                "a directory"
            } else {
                "not a socket"
            };
            Err(invalid(format!(
                "{} is {what}, not the broker's Unix socket; point PO_BROKER_SOCKET at the socket the broker listens on",
                socket.display()
            )))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(invalid(format!(
            "the broker socket {} is missing; is the broker running and its socket mounted into the container?",
            socket.display()
        ))),
        Err(e) => Err(invalid(format!(
            "cannot inspect the broker socket {}: {e}",
            socket.display()
        ))),
    }
}

async fn accept_loop(listener: TcpListener, socket: PathBuf, mut stop: oneshot::Receiver<()>) {
    let permits = Arc::new(Semaphore::new(MAX_RELAYS));
    let mut relays = JoinSet::new();
    loop {
        while relays.try_join_next().is_some() {}
        // A send or a dropped `Bridge` both end the loop.
        let permit = tokio::select! {
            biased;
            _ = &mut stop => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            biased;
            _ = &mut stop => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((tcp, peer)) => {
                let socket = socket.clone();
                relays.spawn(async move {
                    relay(tcp, peer, &socket).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Usually transient (EMFILE, ECONNABORTED): back off instead of spinning.
                tracing::debug!(error = %e, "broker bridge accept failed");
                drop(permit);
                tokio::select! {
                    biased;
                    _ = &mut stop => break,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        }
    }
    // Free the port first, then end every relay in flight.
    drop(listener);
    relays.shutdown().await;
}

async fn relay(mut tcp: TcpStream, peer: SocketAddr, socket: &Path) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "broker bridge could not disable Nagle");
    }
    let mut unix = match UnixStream::connect(socket).await {
        Ok(u) => u,
        Err(e) => {
            // Dropping `tcp` closes the client's connection.
            tracing::debug!(%peer, socket = %socket.display(), error = %e, "broker socket refused the relay");
            return;
        }
    };
    // On EOF from either side this shuts down the other side's write half and keeps copying
    // the other direction until it ends too.
    match copy_bidirectional_with_sizes(&mut tcp, &mut unix, BUF, BUF).await {
        Ok((up, down)) => tracing::debug!(%peer, up, down, "broker bridge relay ended"),
        Err(e) => tracing::debug!(%peer, error = %e, "broker bridge relay failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::UnixListener;

    fn code_and_reason(e: Error) -> (String, String) {
        match e {
            Error::OptionsInvalid { option, reason } => (option, reason),
            other => panic!("unexpected error {other:?}"),
        }
    }

    async fn connect(bridge: &Bridge) -> TcpStream {
        TcpStream::connect((Ipv4Addr::LOCALHOST, bridge.port()))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn relays_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.sock");
        let peer = UnixListener::bind(&path).unwrap();
        let echo = tokio::spawn(async move {
            let (mut s, _) = peer.accept().await.unwrap();
            let (mut r, mut w) = s.split();
            tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let bridge = Bridge::start(&path).await.unwrap();
        let mut c = connect(&bridge).await;
        let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let (mut r, mut w) = c.split();
        let send = async {
            w.write_all(&body).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let recv = r.read_to_end(&mut got);
        let (_, n) = tokio::join!(send, recv);
        assert_eq!(n.unwrap(), body.len());
        assert!(got == body);
        echo.await.unwrap();
        bridge.close().await;
    }

    #[tokio::test]
    async fn client_half_close_reaches_peer_and_reply_still_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.sock");
        let peer = UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = peer.accept().await.unwrap();
            let mut req = Vec::new();
            s.read_to_end(&mut req).await.unwrap();
            assert_eq!(req, b"request");
            s.write_all(b"reply after EOF").await.unwrap();
            s.shutdown().await.unwrap();
        });
        let bridge = Bridge::start(&path).await.unwrap();
        let mut c = connect(&bridge).await;
        c.write_all(b"request").await.unwrap();
        c.shutdown().await.unwrap();
        let mut reply = Vec::new();
        c.read_to_end(&mut reply).await.unwrap();
        assert_eq!(reply, b"reply after EOF");
        server.await.unwrap();
        bridge.close().await;
    }

    #[tokio::test]
    async fn peer_half_close_reaches_client_and_client_can_still_send() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.sock");
        let peer = UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = peer.accept().await.unwrap();
            s.write_all(b"greeting").await.unwrap();
            s.shutdown().await.unwrap();
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await.unwrap();
            rest
        });
        let bridge = Bridge::start(&path).await.unwrap();
        let mut c = connect(&bridge).await;
        let mut greeting = Vec::new();
        c.read_to_end(&mut greeting).await.unwrap();
        assert_eq!(greeting, b"greeting");
        c.write_all(b"sent after the peer's EOF").await.unwrap();
        c.shutdown().await.unwrap();
        assert_eq!(server.await.unwrap(), b"sent after the peer's EOF");
        bridge.close().await;
    }

    #[tokio::test]
    async fn close_frees_the_port_and_ends_relays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.sock");
        let peer = UnixListener::bind(&path).unwrap();
        let held = tokio::spawn(async move {
            let (s, _) = peer.accept().await.unwrap();
            // Keep the broker side open: only the bridge closing can end the relay.
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(s);
        });
        let bridge = Bridge::start(&path).await.unwrap();
        let port = bridge.port();
        let mut c = connect(&bridge).await;
        c.write_all(b"x").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        bridge.close().await;
        let mut buf = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf)).await;
        assert!(ended.is_ok(), "the relay in flight was not ended");
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, port))
                .await
                .is_err()
        );
        let again = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await;
        assert!(again.is_ok(), "port {port} still taken: {again:?}");
        held.abort();
    }

    #[tokio::test]
    async fn refused_broker_closes_the_client() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let bridge = Bridge::start(&path).await.unwrap();
        let mut c = connect(&bridge).await;
        let mut buf = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf))
            .await
            .expect("the client was not closed");
        assert!(r.map(|n| n == 0).unwrap_or(true));
        bridge.close().await;
    }

    #[tokio::test]
    async fn bad_routes_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let (opt, reason) = code_and_reason(
            Bridge::start(Path::new("relative/broker.sock"))
                .await
                .err()
                .unwrap(),
        );
        assert_eq!(opt, "route");
        assert!(reason.contains("absolute"), "{reason}");

        let missing = dir.path().join("gone.sock");
        let (_, reason) = code_and_reason(Bridge::start(&missing).await.err().unwrap());
        assert!(reason.contains("missing"), "{reason}");

        let file = dir.path().join("file.sock");
        std::fs::write(&file, b"").unwrap();
        let (_, reason) = code_and_reason(Bridge::start(&file).await.err().unwrap());
        assert!(reason.contains("a regular file"), "{reason}");

        let (_, reason) = code_and_reason(Bridge::start(dir.path()).await.err().unwrap());
        assert!(reason.contains("a directory"), "{reason}");
    }
}
