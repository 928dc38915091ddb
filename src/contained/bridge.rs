//! The container-side loopback bridge: model SDKs inside a sandbox container can dial a TCP
//! address but not a Unix socket path, so the bridge listens on `127.0.0.1` and relays raw
//! bytes to the credential broker's Unix socket (bind-mounted into the container). It never
//! parses what it relays: the broker speaks HTTP, the bridge only moves bytes.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[cfg(unix)]
use tokio::io::copy_bidirectional_with_sizes;
use tokio::net::{TcpListener, TcpStream};
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
        Ok(meta) if crate::platform::is_socket(&meta.file_type()) => Ok(()),
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
    #[cfg(not(unix))]
    let _ = (&mut tcp, socket, BUF); // No Unix sockets to relay to: check_route refused already.
    #[cfg(unix)]
    let mut unix = match tokio::net::UnixStream::connect(socket).await {
        Ok(u) => u,
        Err(e) => {
            // Dropping `tcp` closes the client's connection.
            tracing::debug!(%peer, socket = %socket.display(), error = %e, "broker socket refused the relay");
            return;
        }
    };
    // On EOF from either side this shuts down the other side's write half and keeps copying
    // the other direction until it ends too.
    #[cfg(unix)]
    match copy_bidirectional_with_sizes(&mut tcp, &mut unix, BUF, BUF).await {
        Ok((up, down)) => tracing::debug!(%peer, up, down, "broker bridge relay ended"),
        Err(e) => tracing::debug!(%peer, error = %e, "broker bridge relay failed"),
    }
}

#[cfg(all(test, unix))]
mod tests;
