//! The host side of the relay: many TCP connections over one byte stream pair (an engine
//! exec's stdin and stdout). Each accepted connection gets a stream id and an OPEN; its bytes
//! travel as DATA within the peer's credit, both ways at once; END half-closes, CLOSE drops.
//! When the pair ends, every connection ends and [`Relay::ended`] says why.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::carrier::{SocketCarrier, SocketSide};
use super::frame::{AGENT_STREAM, Decoder, Frame, MAX_PAYLOAD, VERSION};
use super::netns::Namespace;
use crate::lock::Locked;

/// Each direction of a stream may have this many bytes sent and not yet drained.
pub const WINDOW: u32 = 256 * 1024;
/// The most bytes of frames queued for the agent: past it, the agent is not reading and the
/// relay ends (a legitimate relay queues at most a window per stream).
const MAX_QUEUED: usize = 64 << 20;
/// The most streams the agent may have open at once (the reverse relay's CONNECTs).
const MAX_AGENT_STREAMS: usize = 256;
/// The receiver grants credit back once it drained this much (fewer, larger WINDOW frames).
const GRANT_AT: u64 = WINDOW as u64 / 4;
/// The most bytes of frames written to the peer in one write.
const WRITE_BATCH: usize = 256 * 1024;

/// What arrives for one connection from the peer.
enum Inbound {
    Data(Bytes),
    End,
    Close(String),
}

/// One stream as the reader sees it.
struct Slot {
    inbound: mpsc::UnboundedSender<Inbound>,
    /// Total credit the peer granted this stream's sender.
    granted: watch::Sender<u64>,
    /// Total bytes the peer may have sent (what this side granted), and what it sent.
    allowed: Arc<AtomicU64>,
    received: u64,
}

/// State shared by the reader, the writer and the connections.
struct Shared {
    streams: Mutex<HashMap<u32, Slot>>,
    out: mpsc::UnboundedSender<Frame>,
    next_id: AtomicU32,
    ended: watch::Sender<Option<String>>,
    /// The forward's socket, once one is offered (see [`Relay::use_socket`]).
    socket: Mutex<Option<Arc<SocketSide>>>,
    /// The container's network namespace, once the hub entered it (see
    /// [`Relay::use_namespace`]).
    namespace: Mutex<Option<Namespace>>,
    /// Run the other way (see [`Relay::start_with`]): the host's sockets a CONNECT may name.
    reverse: Mutex<HashMap<String, std::path::PathBuf>>,
    /// Bytes of frames queued for the agent and not yet written to it.
    queued: AtomicUsize,
}

impl Shared {
    fn send(&self, frame: Frame) {
        // An agent that stops reading (its process stopped, or credit granted but never
        // drained) must not fill this process: past the bound the relay ends.
        let len = frame.encoded_len();
        let queued = self.queued.fetch_add(len, Ordering::AcqRel) + len;
        if queued > MAX_QUEUED {
            self.end(format!(
                "the relay in the sandbox stopped reading ({queued} bytes waiting for it)"
            ));
            return;
        }
        // The writer is gone only when the relay ended, which ends the connection too.
        let _ = self.out.send(frame);
    }

    /// Ends the relay with `reason` (the first reason stays) and drops every stream.
    /// Whoever learns the reason finds the socket's file gone.
    fn end(&self, reason: String) {
        if let Some(side) = self.socket.locked().take() {
            side.shutdown();
        }
        // The namespace is let go: a stopped container's namespace is not kept alive by a forward.
        drop(self.namespace.locked().take());
        self.ended
            .send_if_modified(|r| r.is_none() && r.replace(reason).is_none());
        self.streams.locked().clear();
    }

    /// The socket, once the agent proved it reaches it.
    fn live_socket(&self) -> Option<Arc<SocketSide>> {
        let socket = self.socket.locked();
        socket.as_ref().filter(|s| s.live()).cloned()
    }
}

/// A running relay over one stream pair. Cheap to clone.
#[derive(Clone)]
pub struct Relay {
    shared: Arc<Shared>,
}

/// How long the agent may take to say HELLO.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the agent may take to prove it reaches a forward's socket.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

impl Relay {
    /// Starts the relay over the agent's output `from` and input `to`: waits for the agent's
    /// HELLO (its version must be [`VERSION`]), then serves. Fails with why when the agent
    /// does not greet as expected.
    pub async fn start<R, W>(from: R, to: W) -> Result<Relay, String>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Relay::start_with(from, to, HashMap::new()).await
    }

    /// As [`start`](Self::start), run the other way from its first frame on: each CONNECT of
    /// the agent's (a process inside connected to its socket of that name) is carried to the
    /// host's Unix socket `reverse` names; a name not among them is closed with why.
    pub async fn start_with<R, W>(
        mut from: R,
        to: W,
        reverse: HashMap<String, std::path::PathBuf>,
    ) -> Result<Relay, String>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let mut decoder = Decoder::default();
        let greeted = tokio::time::timeout(HELLO_TIMEOUT, hello(&mut from, &mut decoder));
        match greeted.await {
            Err(_) => return Err(format!("the relay did not start within {HELLO_TIMEOUT:?}")),
            Ok(Err(reason)) => return Err(reason),
            Ok(Ok(())) => {}
        }
        let (out, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            streams: Mutex::new(HashMap::new()),
            out,
            next_id: AtomicU32::new(1),
            ended: watch::channel(None).0,
            socket: Mutex::new(None),
            namespace: Mutex::new(None),
            reverse: Mutex::new(reverse),
            queued: AtomicUsize::new(0),
        });
        tokio::spawn(write_frames(shared.clone(), rx, to));
        tokio::spawn(read_frames(shared.clone(), from, decoder));
        Ok(Relay { shared })
    }

    /// From now on carries each connection's bytes over `carrier`'s socket, once the agent
    /// proved it reaches it (within [`PROBE_TIMEOUT`]); else fails with why, the socket
    /// removed, and connections stay on the stream pair.
    pub async fn use_socket(&self, carrier: SocketCarrier) -> Result<(), String> {
        let (side, offer) = SocketSide::start(carrier, self.shared.ended.subscribe());
        *self.shared.socket.locked() = Some(side.clone());
        self.shared.send(offer);
        let outcome = match tokio::time::timeout(PROBE_TIMEOUT, side.probe()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no probe within {PROBE_TIMEOUT:?}")),
        };
        if outcome.is_err() {
            side.shutdown();
            let mut socket = self.shared.socket.locked();
            if socket.as_ref().is_some_and(|s| Arc::ptr_eq(s, &side)) {
                *socket = None;
            }
        }
        outcome
    }

    /// From now on dials each connection from the hub inside `namespace` (see [`Namespace`]);
    /// the stream pair stays the control channel.
    pub fn use_namespace(&self, namespace: Namespace) {
        *self.shared.namespace.locked() = Some(namespace);
    }

    /// Carries one accepted connection over the relay (its bytes over the namespace's own
    /// connection or the socket, when one is in use) until both sides are done.
    pub fn carry(&self, conn: TcpStream) {
        if self.shared.ended.borrow().is_some() {
            return;
        }
        let namespace = self.shared.namespace.locked().clone();
        if let Some(ns) = namespace {
            ns.carry(conn, self.shared.ended.subscribe());
            return;
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        if let Some(side) = self.shared.live_socket() {
            side.dial(id, conn);
            self.shared.send(Frame::Dial { stream: id });
            return;
        }
        let (slot, channel) = Channel::open();
        self.shared.streams.locked().insert(id, slot);
        self.shared.send(Frame::Open { stream: id });
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let _ = conn.set_nodelay(true);
            let (read, write) = conn.into_split();
            let failed = pump(&shared, id, read, write, channel).await;
            shared.streams.locked().remove(&id);
            if let Some(reason) = failed {
                shared.send(Frame::Close { stream: id, reason });
            }
        });
    }

    /// Ends the relay now: every connection is dropped and the agent's input closed (so it
    /// exits).
    pub fn close(&self, reason: &str) {
        self.shared.end(reason.to_string());
    }

    /// Whether it ended.
    pub fn is_ended(&self) -> bool {
        self.shared.ended.borrow().is_some()
    }

    /// Why the relay ended, once it has.
    pub async fn ended(&self) -> String {
        let mut rx = self.shared.ended.subscribe();
        let reason = rx.wait_for(Option::is_some).await;
        reason.map_or_else(
            |_| "the relay ended".into(),
            |r| r.clone().unwrap_or_default(),
        )
    }

    /// Connections carried now.
    #[cfg(test)]
    pub fn connections(&self) -> usize {
        let socket = self.shared.socket.locked();
        let paired = socket.as_ref().map_or(0, |s| s.paired());
        self.shared.streams.locked().len() + paired
    }

    /// Connections to the socket refused so far (a wrong secret or stream, and the like).
    #[cfg(test)]
    pub fn refused(&self) -> u64 {
        let socket = self.shared.socket.locked();
        socket.as_ref().map_or(0, |s| s.refused())
    }
}

/// Reads until the agent's first frame, which must be its HELLO of this version.
async fn hello<R: AsyncRead + Unpin>(from: &mut R, decoder: &mut Decoder) -> Result<(), String> {
    let mut buf = vec![0u8; 4096];
    loop {
        match decoder.next_frame() {
            Ok(Some(Frame::Hello { version: VERSION })) => return Ok(()),
            Ok(Some(Frame::Hello { version })) => {
                return Err(format!(
                    "the relay in the sandbox speaks version {version}, not {VERSION}"
                ));
            }
            Ok(Some(other)) => return Err(format!("the relay began with {other:?}, not HELLO")),
            Err(e) => return Err(format!("the relay sent bytes that are not a frame: {e}")),
            Ok(None) => {}
        }
        match from.read(&mut buf).await {
            Ok(0) => return Err("the relay exited before it started".into()),
            Ok(n) => decoder.push(&buf[..n]),
            Err(e) => return Err(format!("the relay's output could not be read: {e}")),
        }
    }
}

/// Writes queued frames to the agent, many per write; closes its input when the relay ends.
async fn write_frames<W: AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Frame>,
    mut to: W,
) {
    let mut ended = shared.ended.subscribe();
    let mut buf = BytesMut::with_capacity(WRITE_BATCH);
    loop {
        let first = tokio::select! {
            f = rx.recv() => f,
            _ = ended.wait_for(Option::is_some) => None,
        };
        let Some(first) = first else { break };
        buf.clear();
        first.encode(&mut buf);
        while buf.len() < WRITE_BATCH {
            match rx.try_recv() {
                Ok(f) => f.encode(&mut buf),
                Err(_) => break,
            }
        }
        if let Err(e) = async {
            to.write_all(&buf).await?;
            to.flush().await
        }
        .await
        {
            shared.end(format!("the relay's input could not be written: {e}"));
            break;
        }
        shared.queued.fetch_sub(buf.len(), Ordering::AcqRel);
    }
    let _ = to.shutdown().await;
}

/// Reads the agent's frames and hands each to its stream until the output ends.
async fn read_frames<R: AsyncRead + Unpin>(shared: Arc<Shared>, mut from: R, mut decoder: Decoder) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut ended = shared.ended.subscribe();
    let reason = loop {
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => dispatch(&shared, frame),
                Ok(None) => break,
                Err(e) => {
                    shared.end(format!(
                        "the relay in the sandbox sent bytes that are not a frame: {e}"
                    ));
                    return;
                }
            }
        }
        let read = tokio::select! {
            r = from.read(&mut buf) => r,
            _ = ended.wait_for(Option::is_some) => return,
        };
        match read {
            Ok(0) => match decoder.finish() {
                Ok(()) => break "the relay's output ended".to_string(),
                Err(e) => break format!("the relay's output ended: {e}"),
            },
            Ok(n) => decoder.push(&buf[..n]),
            Err(e) => break format!("the relay's output could not be read: {e}"),
        }
    };
    shared.end(reason);
}

/// One frame from the agent, to its stream (frames of streams already gone are dropped; a
/// CLOSE of a stream it was to DIAL drops the waiting connection).
fn dispatch(shared: &Arc<Shared>, frame: Frame) {
    if let Frame::Connect { stream, name } = frame {
        return connect(shared, stream, name);
    }
    let mut streams = shared.streams.locked();
    let id = frame.stream();
    let Some(slot) = streams.get_mut(&id) else {
        drop(streams);
        if let Frame::Close { stream, reason } = &frame
            && let Some(side) = shared.socket.locked().as_ref()
        {
            side.closed(*stream, reason);
        }
        return;
    };
    let inbound = match frame {
        Frame::Data { bytes, .. } => {
            slot.received += bytes.len() as u64;
            // More than was granted: a relay that ignores credit could fill this process.
            if slot.received > slot.allowed.load(Ordering::Acquire) {
                Inbound::Close("the relay in the sandbox sent beyond its window".into())
            } else {
                Inbound::Data(bytes)
            }
        }
        Frame::Window { credit, .. } => {
            slot.granted.send_modify(|g| *g += u64::from(credit));
            return;
        }
        Frame::End { .. } => Inbound::End,
        Frame::Close { reason, .. } => Inbound::Close(reason),
        Frame::Opened { .. }
        | Frame::Hello { .. }
        | Frame::Open { .. }
        | Frame::Socket { .. }
        | Frame::Connect { .. }
        | Frame::Dial { .. } => return,
    };
    let closing = matches!(inbound, Inbound::Close(_));
    let _ = slot.inbound.send(inbound);
    if closing {
        streams.remove(&id);
    }
}

/// A CONNECT of the agent's: a new stream (its id the agent's, not yet in use) to the host's
/// socket of that name, answered OPENED once connected, else CLOSE with why.
fn connect(shared: &Arc<Shared>, id: u32, name: String) {
    let target = shared.reverse.locked().get(&name).cloned();
    let mut streams = shared.streams.locked();
    let target = match target {
        _ if id & AGENT_STREAM == 0 || streams.contains_key(&id) => {
            Err(format!("stream {id} is not one the sandbox may open"))
        }
        _ if streams.keys().filter(|s| *s & AGENT_STREAM != 0).count() >= MAX_AGENT_STREAMS => Err(
            format!("the sandbox has {MAX_AGENT_STREAMS} connections open already"),
        ),
        None => Err(format!("the host carries no socket named {name:?}")),
        Some(path) => Ok(path),
    };
    let path = match target {
        Ok(path) => path,
        Err(reason) => {
            drop(streams);
            shared.send(Frame::Close { stream: id, reason });
            return;
        }
    };
    let (slot, channel) = Channel::open();
    streams.insert(id, slot);
    drop(streams);
    let shared = shared.clone();
    tokio::spawn(async move {
        let failed = match dial_unix(&path).await {
            Ok((read, write)) => {
                shared.send(Frame::Opened { stream: id });
                pump(&shared, id, read, write, channel).await
            }
            Err(e) => Some(format!("the host's {name}: {e}")),
        };
        shared.streams.locked().remove(&id);
        if let Some(reason) = failed {
            shared.send(Frame::Close { stream: id, reason });
        }
    });
}

/// Connects to the host's Unix socket at `path`: its two halves.
#[cfg(unix)]
async fn dial_unix(
    path: &std::path::Path,
) -> std::io::Result<(
    tokio::net::unix::OwnedReadHalf,
    tokio::net::unix::OwnedWriteHalf,
)> {
    Ok(tokio::net::UnixStream::connect(path).await?.into_split())
}

/// No Unix sockets on this host.
#[cfg(not(unix))]
async fn dial_unix(
    _path: &std::path::Path,
) -> std::io::Result<(tokio::io::Empty, tokio::io::Sink)> {
    Err(std::io::Error::other("Unix sockets need a Unix host"))
}

/// What the reader hands one stream: the peer's credit, its frames, and what this side granted.
struct Channel {
    granted: watch::Receiver<u64>,
    inbound: mpsc::UnboundedReceiver<Inbound>,
    allowed: Arc<AtomicU64>,
}

impl Channel {
    /// A new stream's slot (the reader's side, a [`WINDOW`] granted each way) and channel.
    fn open() -> (Slot, Channel) {
        let (inbound, inbound_rx) = mpsc::unbounded_channel();
        let (granted, granted_rx) = watch::channel(u64::from(WINDOW));
        let allowed = Arc::new(AtomicU64::new(u64::from(WINDOW)));
        let slot = Slot {
            inbound,
            granted,
            allowed: allowed.clone(),
            received: 0,
        };
        let channel = Channel {
            granted: granted_rx,
            inbound: inbound_rx,
            allowed,
        };
        (slot, channel)
    }
}

/// How one direction of a connection ended badly: `None` when the peer closed it (nothing to
/// tell it), else why this side gave up.
type Failed = Option<String>;

/// Both directions of one connection until both ended cleanly; the failure that cut them short.
async fn pump(
    shared: &Shared,
    id: u32,
    read: impl AsyncRead + Unpin,
    write: impl AsyncWrite + Unpin,
    channel: Channel,
) -> Failed {
    let Channel {
        granted,
        inbound,
        allowed,
    } = channel;
    let up = upstream(shared, id, read, granted);
    let down = downstream(shared, id, write, inbound, allowed);
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        let result = tokio::select! {
            r = &mut up, if !up_done => r.map(|()| up_done = true),
            r = &mut down, if !down_done => r.map(|()| down_done = true),
        };
        if let Err(failed) = result {
            return failed;
        }
    }
    None
}

/// The connection's bytes to the agent, within the credit it granted; END at the end.
async fn upstream(
    shared: &Shared,
    id: u32,
    mut read: impl AsyncRead + Unpin,
    mut granted: watch::Receiver<u64>,
) -> Result<(), Failed> {
    let mut sent: u64 = 0;
    loop {
        let limit = match granted.wait_for(|g| *g > sent).await {
            Ok(g) => *g,
            // The stream is gone (closed by the agent, or the relay ended).
            Err(_) => return Ok(()),
        };
        let room = (limit - sent).min(MAX_PAYLOAD as u64) as usize;
        let mut chunk = BytesMut::with_capacity(room);
        match read.read_buf(&mut (&mut chunk).limit(room)).await {
            Ok(0) => {
                shared.send(Frame::End { stream: id });
                return Ok(());
            }
            Ok(n) => {
                sent += n as u64;
                let bytes = chunk.freeze();
                shared.send(Frame::Data { stream: id, bytes });
            }
            Err(e) => return Err(Some(format!("the client's connection failed: {e}"))),
        }
    }
}

/// The agent's bytes to the connection, granting credit back as they are written; END
/// shuts the connection's write side, CLOSE ends it.
async fn downstream(
    shared: &Shared,
    id: u32,
    mut write: impl AsyncWrite + Unpin,
    mut inbound: mpsc::UnboundedReceiver<Inbound>,
    allowed: Arc<AtomicU64>,
) -> Result<(), Failed> {
    let mut drained: u64 = 0;
    loop {
        match inbound.recv().await {
            Some(Inbound::Data(bytes)) => {
                if let Err(e) = write.write_all(&bytes).await {
                    return Err(Some(format!("the client's connection failed: {e}")));
                }
                drained += bytes.len() as u64;
                if drained >= GRANT_AT {
                    allowed.fetch_add(drained, Ordering::AcqRel);
                    let credit = drained as u32;
                    shared.send(Frame::Window { stream: id, credit });
                    drained = 0;
                }
            }
            Some(Inbound::End) => {
                let _ = write.shutdown().await;
                return Ok(());
            }
            // Closed by the agent (with its reason) or the relay ended: the connection drops.
            Some(Inbound::Close(reason)) => {
                tracing::debug!(stream = id, %reason, "forwarded connection closed in the sandbox");
                return Err(None);
            }
            None => return Err(None),
        }
    }
}
