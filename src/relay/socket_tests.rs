//! The relay with a forward's socket, against the real agent (see `tests.rs`): the agent runs
//! on this host, so the socket's folder is the same path on both sides. The test also plays
//! the container's other processes: they can connect to the socket and send anything.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use super::carrier::SocketCarrier;
use super::frame::{SocketSecret, handshake};
use super::mux::Relay;
use super::tests::{carry_from_loopback, exited, pattern, round_trip, server, spawn_agent};

struct Forward {
    child: Child,
    relay: Relay,
    host_port: u16,
    socket: PathBuf,
    secret: SocketSecret,
    _dir: tempfile::TempDir,
}

/// A relay to `port` whose connections go over a socket in a fresh folder; `inside`: the
/// folder as the agent is told it (`None`: the same path).
async fn forward_socket(port: u16, inside: Option<&str>) -> (Forward, Result<(), String>) {
    let (child, from, to) = spawn_agent(port);
    let relay = Relay::start(from, to).await.expect("the agent greets");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let carrier = SocketCarrier::bind(dir.path(), inside.unwrap_or(&path), None).unwrap();
    let (socket, secret) = (carrier.host_path(), carrier.secret());
    let used = relay.use_socket(carrier).await;
    let host_port = carry_from_loopback(&relay).await;
    let f = Forward {
        child,
        relay,
        host_port,
        socket,
        secret,
        _dir: dir,
    };
    (f, used)
}

/// What the socket answers a connection that sends `bytes` (in pieces, 20 ms apart): the
/// bytes it sent back before it closed, or `None` when it stayed open for 6 s.
async fn knock(socket: &PathBuf, pieces: &[&[u8]]) -> Option<Vec<u8>> {
    let mut conn = UnixStream::connect(socket).await.unwrap();
    for piece in pieces {
        conn.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(6), conn.read_to_end(&mut got));
    read.await.ok().map(|_| got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_go_over_the_socket_each_with_its_own_bytes() {
    let (f, used) = forward_socket(server().await, None).await;
    assert_eq!(used, Ok(()));
    assert!(f.socket.exists());
    let clients = (0..100).map(|i| {
        let sent = pattern(i, 1000 + i * 4000);
        let port = f.host_port;
        tokio::spawn(async move { (round_trip(port, sent.clone()).await, sent) })
    });
    for (i, client) in clients.enumerate() {
        let (got, sent) = client.await.unwrap();
        let trailer = format!("bytes: {}", sent.len());
        assert!(got[..sent.len()] == sent[..], "connection {i}");
        assert_eq!(&got[sent.len()..], trailer.as_bytes(), "connection {i}");
    }
    // More connections open at once than may present their handshakes at once.
    let mut held = Vec::new();
    for i in 0..100u8 {
        let mut conn = TcpStream::connect(("127.0.0.1", f.host_port))
            .await
            .unwrap();
        conn.write_all(&[i]).await.unwrap();
        held.push(conn);
    }
    for (i, conn) in held.iter_mut().enumerate() {
        let mut b = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(10), conn.read_exact(&mut b));
        read.await.expect("each held connection answers").unwrap();
        assert_eq!(b[0] as usize, i);
    }
    assert_eq!(f.relay.connections(), 100);
    drop(held);
    // Half-close kept: the answer still comes after the client's end.
    assert_eq!(
        round_trip(f.host_port, b"hello".to_vec()).await,
        b"hellobytes: 5"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(f.relay.connections(), 0);
    assert_eq!(f.relay.refused(), 0);
    f.relay.close("done");
    assert!(!f.socket.exists(), "the socket goes with the forward");
    assert!(exited(f.child).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_else_connects_to_the_socket_is_closed_and_counted_and_the_forward_works_on() {
    let (f, used) = forward_socket(server().await, None).await;
    assert_eq!(used, Ok(()));
    let wrong = SocketSecret([0x5a; 32]);
    let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("a wrong secret", vec![handshake(&wrong, 1).to_vec()]),
        (
            "garbage",
            vec![b"GET / HTTP/1.1\r\n\r\n and more bytes".to_vec()],
        ),
        ("too short, then its end", vec![b"short".to_vec()]),
        // The right secret (learnt somehow) and a stream nobody waits for, split anywhere.
        (
            "a stream nobody waits for",
            handshake(&f.secret, 77)
                .chunks(5)
                .map(<[u8]>::to_vec)
                .collect(),
        ),
    ];
    for (i, (what, pieces)) in cases.iter().enumerate() {
        let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        // A half-close after the bytes: a short handshake then ends.
        let got = knock(&f.socket, &pieces).await;
        assert_eq!(got, Some(vec![]), "{what}: closed, nothing sent back");
        assert_eq!(f.relay.refused(), i as u64 + 1, "{what}: counted");
    }
    // The forward works on, over the socket.
    let got = round_trip(f.host_port, pattern(3, 300_000)).await;
    assert_eq!(got.len(), 300_000 + "bytes: 300000".len());
    f.relay.close("done");
    exited(f.child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_the_agent_cannot_reach_leaves_the_stream_pair_carrying() {
    let (f, used) = forward_socket(server().await, Some("/nonexistent-po-folder")).await;
    let why = used.unwrap_err();
    assert!(
        why.contains("/nonexistent-po-folder/fwd-") && why.contains("ENOENT"),
        "{why}"
    );
    assert!(!f.socket.exists(), "an unused socket goes at once");
    assert_eq!(
        round_trip(f.host_port, b"hello".to_vec()).await,
        b"hellobytes: 5"
    );
    f.relay.close("done");
    exited(f.child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_ends_the_connection_and_the_agents_end_removes_the_socket() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (mut f, used) = forward_socket(closed, None).await;
    assert_eq!(used, Ok(()));
    let mut conn = TcpStream::connect(("127.0.0.1", f.host_port))
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut got));
    assert!(read.await.expect("ends at once").is_ok() && got.is_empty());
    // A connection held while the agent goes: both end, the socket too.
    let held = TcpStream::connect(("127.0.0.1", f.host_port))
        .await
        .unwrap();
    let _ = f.child.kill();
    let reason = tokio::time::timeout(Duration::from_secs(5), f.relay.ended()).await;
    // Its output ending or its input refusing a write, whichever the relay finds first.
    let reason = reason.expect("the relay ends");
    assert!(
        reason == "the relay's output ended"
            || reason.starts_with("the relay's input could not be written: Broken pipe"),
        "{reason}"
    );
    assert!(!f.socket.exists());
    drop(held);
    let _ = f.child.wait();
}
