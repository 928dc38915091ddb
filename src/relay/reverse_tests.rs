//! The relay run the other way, against the real agent (see `tests.rs`): the agent listens on
//! Unix sockets "inside" (a folder of the test's), and each connection to one is carried to the
//! host's socket of that name; the test plays both the container's processes and the host.

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::carrier_command;
use super::mux::Relay;
use super::tests::{exited, pattern, spawn_command};

/// A host socket that answers each connection with `<tag>:` and then echoes what it reads.
fn host_socket(path: &std::path::Path, tag: &'static str) {
    let listener = UnixListener::bind(path).unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                conn.write_all(format!("{tag}:").as_bytes()).await.unwrap();
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
}

/// Waits until `path` exists (the agent made its socket).
async fn appears(path: &std::path::Path) {
    for _ in 0..250 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} did not appear", path.display());
}

#[tokio::test]
async fn connections_inside_reach_the_host_socket_of_their_name_and_no_other() {
    let host = tempfile::tempdir().unwrap();
    let inside = tempfile::tempdir().unwrap();
    let inside_dir = inside.path().join("po-broker");
    host_socket(&host.path().join("broker.sock"), "broker");
    host_socket(&host.path().join("egress.sock"), "egress");
    let dir = inside_dir.to_str().unwrap();
    // `gone.sock` is listened on inside, but the host carries no socket of that name.
    let cmd = carrier_command("node", dir, &["broker.sock", "egress.sock", "gone.sock"]);
    let (child, from, to) = spawn_command(cmd);
    let targets = HashMap::from([
        ("broker.sock".to_string(), host.path().join("broker.sock")),
        ("egress.sock".to_string(), host.path().join("egress.sock")),
    ]);
    let relay = Relay::start_with(from, to, targets)
        .await
        .expect("the agent greets");
    appears(&inside_dir.join("gone.sock")).await;
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&inside_dir).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o700,
        "the socket folder is the container user's alone"
    );
    // Many at once, each its own bytes back, through the socket it named.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let name = if i % 2 == 0 { "broker" } else { "egress" };
        let path = inside_dir.join(format!("{name}.sock"));
        tasks.push(tokio::spawn(async move {
            let sent = pattern(i, 1000 + i * 7919);
            let mut conn = UnixStream::connect(&path).await.unwrap();
            conn.write_all(&sent).await.unwrap();
            conn.shutdown().await.unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).await.unwrap();
            let mut want = format!("{name}:").into_bytes();
            want.extend_from_slice(&sent);
            assert!(got == want, "connection {i}: {} bytes back", got.len());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // A name the host does not carry: closed at once, nothing carried.
    let mut conn = UnixStream::connect(inside_dir.join("gone.sock"))
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut got)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?} {got:?}");
    // The relay closed: the agent exits and its sockets refuse.
    relay.close("the test is done");
    assert!(exited(child).await.success());
}

#[tokio::test]
async fn an_agent_that_grants_credit_but_stops_reading_ends_the_relay_not_the_hub() {
    use super::frame::{Frame, VERSION};
    use bytes::BytesMut;
    // The test plays the agent: it greets, grants a stream far more credit than a window and
    // then never reads what the relay writes to it.
    let (agent_out, relay_in) = tokio::io::duplex(64 * 1024);
    let (relay_out, _agent_in) = tokio::io::duplex(64 * 1024);
    let mut agent_out = agent_out;
    let mut hello = BytesMut::new();
    Frame::Hello { version: VERSION }.encode(&mut hello);
    agent_out.write_all(&hello).await.unwrap();
    let relay = Relay::start(relay_in, relay_out).await.expect("greeted");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let r = relay.clone();
    tokio::spawn(async move {
        while let Ok((c, _)) = listener.accept().await {
            r.carry(c);
        }
    });
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut grant = BytesMut::new();
    for _ in 0..64 {
        Frame::Window {
            stream: 1,
            credit: u32::MAX / 2,
        }
        .encode(&mut grant);
    }
    agent_out.write_all(&grant).await.unwrap();
    let chunk = vec![7u8; 1 << 20];
    let writer = tokio::spawn(async move {
        for _ in 0..200 {
            if client.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    let why = tokio::time::timeout(Duration::from_secs(20), relay.ended())
        .await
        .expect("the relay ends");
    assert!(why.contains("stopped reading"), "{why}");
    writer.abort();
}

#[tokio::test]
async fn a_connect_out_of_place_is_closed_with_why_and_nothing_is_dialled() {
    use super::frame::{AGENT_STREAM, Decoder, Frame, VERSION};
    use bytes::BytesMut;
    let host = tempfile::tempdir().unwrap();
    let sock = host.path().join("broker.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let (mut agent_out, relay_in) = tokio::io::duplex(64 * 1024);
    let (relay_out, mut agent_in) = tokio::io::duplex(64 * 1024);
    let mut frames = BytesMut::new();
    Frame::Hello { version: VERSION }.encode(&mut frames);
    let valid = AGENT_STREAM | 7;
    for f in [
        // A host stream's id (no agent bit), a name the host does not carry, the same id twice.
        Frame::Connect {
            stream: 5,
            name: "broker.sock".into(),
        },
        Frame::Connect {
            stream: AGENT_STREAM | 1,
            name: "other.sock".into(),
        },
        Frame::Connect {
            stream: valid,
            name: "broker.sock".into(),
        },
        Frame::Connect {
            stream: valid,
            name: "broker.sock".into(),
        },
    ] {
        f.encode(&mut frames);
    }
    agent_out.write_all(&frames).await.unwrap();
    let targets = HashMap::from([("broker.sock".to_string(), sock.clone())]);
    let _relay = Relay::start_with(relay_in, relay_out, targets)
        .await
        .expect("greeted");
    let (mut decoder, mut got, mut buf) = (Decoder::default(), Vec::new(), vec![0u8; 4096]);
    while got.len() < 4 {
        let n = tokio::time::timeout(Duration::from_secs(5), agent_in.read(&mut buf))
            .await
            .expect("the relay answers")
            .unwrap();
        decoder.push(&buf[..n]);
        while let Some(f) = decoder.next_frame().unwrap() {
            got.push(f);
        }
    }
    let closed = |id: u32| {
        got.iter().find_map(|f| match f {
            Frame::Close { stream, reason } if *stream == id => Some(reason.clone()),
            _ => None,
        })
    };
    assert!(
        closed(5).unwrap().contains("not one the sandbox may open"),
        "{got:?}"
    );
    assert!(
        closed(AGENT_STREAM | 1)
            .unwrap()
            .contains("no socket named \"other.sock\"")
    );
    // The valid one is dialled once and opened; its repeat is refused.
    assert!(got.contains(&Frame::Opened { stream: valid }), "{got:?}");
    assert!(
        closed(valid)
            .unwrap()
            .contains("not one the sandbox may open"),
        "{got:?}"
    );
    let (_one, _) = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
    assert!(second.is_err(), "a refused CONNECT was dialled");
}
