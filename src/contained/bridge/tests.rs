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
