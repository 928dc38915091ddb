//! The relay against the real agent: `node -e <AGENT>` as a child process (its stdin and stdout
//! pipes as the stream pair) and servers of the test's own on 127.0.0.1.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::net::{TcpListener, TcpStream};

use super::frame::{Decoder, Frame};
use super::mux::Relay;
use super::{AGENT, AGENT_VAR, agent_command};

/// Node for the agent: `PO_SANDBOX_TEST_NODE` or `node` on PATH.
pub(super) fn node() -> String {
    std::env::var("PO_SANDBOX_TEST_NODE").unwrap_or_else(|_| "node".into())
}

/// The agent for `port`, its stdin and stdout as tokio pipes.
pub(super) fn spawn_agent(port: u16) -> (Child, pipe::Receiver, pipe::Sender) {
    spawn_command(agent_command("node", port, 0))
}

/// The agent run as `cmd` (its first word `node`), its stdin and stdout as tokio pipes.
pub(super) fn spawn_command(cmd: Vec<String>) -> (Child, pipe::Receiver, pipe::Sender) {
    let mut child = Command::new(node())
        .args(&cmd[1..])
        .env(AGENT_VAR, AGENT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node runs (set PO_SANDBOX_TEST_NODE to a Node binary)");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let to = pipe::Sender::from_owned_fd(stdin.into()).expect("stdin pipe");
    let from = pipe::Receiver::from_owned_fd(stdout.into()).expect("stdout pipe");
    (child, from, to)
}

/// A loopback listener whose connections `relay` carries; its port.
pub(super) async fn carry_from_loopback(relay: &Relay) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_port = listener.local_addr().unwrap().port();
    let r = relay.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            r.carry(conn);
        }
    });
    host_port
}

/// A relay to `port` and a loopback listener whose connections it carries.
pub(super) async fn forward(port: u16) -> (Child, Relay, u16) {
    let (child, from, to) = spawn_agent(port);
    let relay = Relay::start(from, to).await.expect("the agent greets");
    let host_port = carry_from_loopback(&relay).await;
    (child, relay, host_port)
}

/// A server: echoes what it reads; after the client's END it writes `bytes: <n>` and closes. A
/// connection that starts with `FLOOD` instead gets 8 MiB it may never read.
pub(super) async fn server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut total = 0;
                loop {
                    let n = conn.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    if total == 0 && buf[..n].starts_with(b"FLOOD") {
                        let _ = conn.write_all(&vec![b'f'; 8 << 20]).await;
                        return;
                    }
                    total += n;
                    if conn.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
                let _ = conn.write_all(format!("bytes: {total}").as_bytes()).await;
            });
        }
    });
    port
}

/// What a client gets back for `sent`, writing all of it, then half-closing.
pub(super) async fn round_trip(host_port: u16, sent: Vec<u8>) -> Vec<u8> {
    let conn = TcpStream::connect(("127.0.0.1", host_port)).await.unwrap();
    let (mut read, mut write) = conn.into_split();
    let writer = tokio::spawn(async move {
        write.write_all(&sent).await.unwrap();
        write.shutdown().await.unwrap();
    });
    let mut got = Vec::new();
    read.read_to_end(&mut got).await.unwrap();
    writer.await.unwrap();
    got
}

pub(super) fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| ((i * 31 + j * 7) % 251) as u8).collect()
}

pub(super) async fn exited(mut child: Child) -> std::process::ExitStatus {
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    panic!("the agent did not exit within 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_connections_each_get_their_own_bytes_back() {
    let (child, relay, host_port) = forward(server().await).await;
    let clients = (0..100).map(|i| {
        // Over the window for some, so credit has to come back for them to finish.
        let sent = pattern(i, 1000 + i * 4000);
        tokio::spawn(async move { (round_trip(host_port, sent.clone()).await, sent) })
    });
    for (i, client) in clients.enumerate() {
        let (got, sent) = client.await.unwrap();
        let trailer = format!("bytes: {}", sent.len());
        assert_eq!(got.len(), sent.len() + trailer.len(), "connection {i}");
        assert!(
            got[..sent.len()] == sent[..],
            "connection {i} got other bytes"
        );
        assert_eq!(&got[sent.len()..], trailer.as_bytes(), "connection {i}");
    }
    relay.close("done");
    assert!(exited(child).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_client_still_reads_the_answer() {
    let (child, relay, host_port) = forward(server().await).await;
    let got = round_trip(host_port, b"hello".to_vec()).await;
    assert_eq!(got, b"hellobytes: 5");
    // Nothing is held for a connection both sides finished.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(relay.connections(), 0);
    relay.close("done");
    exited(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_does_not_read_stalls_no_other() {
    let (child, relay, host_port) = forward(server().await).await;
    let mut flood = TcpStream::connect(("127.0.0.1", host_port)).await.unwrap();
    flood.write_all(b"FLOOD").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let quick = tokio::time::timeout(
        Duration::from_secs(5),
        round_trip(host_port, pattern(7, 300_000)),
    );
    let got = quick.await.expect("another connection answers meanwhile");
    assert_eq!(got.len(), 300_000 + "bytes: 300000".len());
    // The flood still arrives whole once read.
    let mut got = vec![0u8; 8 << 20];
    flood.read_exact(&mut got).await.unwrap();
    assert!(got.iter().all(|b| *b == b'f'));
    relay.close("done");
    exited(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_closes_a_stream_to_a_closed_port_with_the_reason() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (child, mut from, mut to) = spawn_agent(closed);
    let mut out = BytesMut::new();
    Frame::Open { stream: 9 }.encode(&mut out);
    to.write_all(&out).await.unwrap();
    let mut decoder = Decoder::default();
    let mut frames = Vec::new();
    let mut buf = [0u8; 1024];
    while !frames.iter().any(|f| matches!(f, Frame::Close { .. })) {
        let n = from.read(&mut buf).await.unwrap();
        assert!(n > 0, "the agent exited early: {frames:?}");
        decoder.push(&buf[..n]);
        while let Some(f) = decoder.next_frame().unwrap() {
            frames.push(f);
        }
    }
    let reason = format!("nothing listens on 127.0.0.1:{closed} in the sandbox");
    assert_eq!(
        frames,
        vec![
            Frame::Hello {
                version: super::frame::VERSION
            },
            Frame::Close { stream: 9, reason }
        ]
    );
    // Through the mux, the client just sees its connection end.
    drop(to);
    assert!(exited(child).await.success());
    let (child, relay, host_port) = forward(closed).await;
    let mut conn = TcpStream::connect(("127.0.0.1", host_port)).await.unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut got));
    assert!(read.await.expect("ends at once").is_ok_and(|n| n == 0) || got.is_empty());
    relay.close("done");
    exited(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_exits_when_its_input_ends_and_the_relay_says_why() {
    let (mut child, relay, host_port) = forward(server().await).await;
    let conn = TcpStream::connect(("127.0.0.1", host_port)).await.unwrap();
    let _ = child.kill();
    let reason = tokio::time::timeout(Duration::from_secs(5), relay.ended()).await;
    // Which end the relay finds gone first is a race: its output ending, or (when it was
    // writing the new connection's frame as the agent died) its input refusing the write.
    let reason = reason.expect("the relay ends");
    assert!(
        reason == "the relay's output ended"
            || reason.starts_with("the relay's input could not be written: Broken pipe"),
        "{reason}"
    );
    drop(conn);
    let _ = child.wait();
    let (child, relay, _) = forward(server().await).await;
    relay.close("the forward was closed");
    assert!(exited(child).await.success());
    assert_eq!(relay.ended().await, "the forward was closed");
}
