use std::collections::HashMap;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::broker::grant::{GrantRequest, GrantRoute, RouteKind};
use crate::broker::limits::PER_GRANT_CONNECTIONS;

/// A broker for a test: `env` as the host's, sockets under `dir`.
async fn broker_in(dir: &Path, env: HashMap<String, String>, tcp: bool) -> Broker {
    Broker::start(BrokerOptions {
        host_env: env,
        socket_dir: dir.into(),
        tcp,
        egress: None,
        fetch_screen: false,
        registries: Vec::new(),
        git: None,
    })
    .await
    .unwrap()
}

#[test]
fn given_options_check_the_socket_dir_and_default_to_no_tcp() {
    let env = HashMap::from([("K".to_string(), Some("v".to_string()))]);
    let o = BrokerOptions::given(Some(env), Some("/run/b"), None).unwrap();
    assert_eq!(o.socket_dir, Path::new("/run/b"));
    assert_eq!(o.host_env.get("K").map(String::as_str), Some("v"));
    assert!(!o.tcp && o.egress.is_none());
    let err = BrokerOptions::given(Some(HashMap::new()), Some("rel"), Some(true)).unwrap_err();
    assert_eq!(err.code(), "OPTIONS_INVALID");
    assert!(err.to_string().contains("socketDir"), "{err}");
}

/// A socket grant for workspace `w` with every default.
fn socket_grant_request() -> GrantRequest {
    GrantRequest {
        workspace: "w".into(),
        providers: None,
        route: RouteKind::Socket,
        owner: None,
        container_socket: None,
        container_host: None,
        secret: None,
        socket_folder: None,
        git_remotes: Vec::new(),
    }
}
#[tokio::test]
async fn disabled_broker_grants_nothing_and_withholds_every_key() {
    let env = HashMap::from([
        ("PO_SANDBOX_BROKER".to_string(), "0".to_string()),
        ("OPENAI_API_KEY".to_string(), "sk-real".to_string()),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let b = broker_in(dir.path(), env, true).await;
    assert!(!b.enabled() && b.tcp_address().is_none());
    let g = b.grant(socket_grant_request()).unwrap();
    assert!(g.env.is_empty() && g.route.is_none() && g.providers.is_empty());
    assert!(
        g.withheld
            .iter()
            .any(|(v, r)| v == "OPENAI_API_KEY" && r.contains("PO_SANDBOX_BROKER=0"))
    );
    assert!(!format!("{g:?}").contains("sk-real"));
}

#[tokio::test]
async fn close_returns_once_every_listener_is_dropped() {
    let env = HashMap::from([("OPENAI_API_KEY".to_string(), "sk-real".to_string())]);
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..20 {
        let b = broker_in(dir.path(), env.clone(), true).await;
        let g = b.grant(socket_grant_request()).unwrap();
        let addr = b.tcp_address().unwrap();
        let Some(GrantRoute::Socket {
            host_socket: socket,
            ..
        }) = g.route.clone()
        else {
            panic!("a socket grant without a socket route");
        };
        assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
        assert!(tokio::net::UnixStream::connect(&socket).await.is_ok());
        b.close().await;
        let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(!socket.exists() && b.grant_ids().is_empty());
    }
}

#[tokio::test]
async fn revoking_an_older_grant_spares_the_socket_and_tokens_of_its_successor() {
    let env = HashMap::from([("OPENAI_API_KEY".to_string(), "sk-real".to_string())]);
    let dir = tempfile::tempdir().unwrap();
    let b = broker_in(dir.path(), env, false).await;
    let folder = dir.path().join("ws");
    let request = || GrantRequest {
        workspace: "w".into(),
        providers: None,
        route: RouteKind::Socket,
        owner: None,
        container_socket: None,
        container_host: None,
        secret: Some(Secret::new("token-file-content")),
        socket_folder: Some(folder.clone()),
        git_remotes: Vec::new(),
    };
    let old = b.grant(request()).unwrap();
    let new = b.grant(request()).unwrap();
    assert_eq!(
        old.env["OPENAI_API_KEY"].expose(),
        new.env["OPENAI_API_KEY"].expose()
    );
    assert!(!b.grant_live(&old.id), "its socket was replaced");
    assert!(b.grant_live(&new.id));
    assert!(b.revoke(&old.id));
    let socket = folder.join("broker.sock");
    assert!(socket.exists(), "the successor's socket was removed");
    assert!(tokio::net::UnixStream::connect(&socket).await.is_ok());
    let tokens = b.inner.tokens.read().unwrap();
    let entry = tokens
        .by_hash
        .get(&hash(new.env["OPENAI_API_KEY"].expose()))
        .expect("the successor's token was removed");
    assert_eq!(entry.grant, new.id);
    drop(tokens);
    assert!(b.revoke(&new.id));
    assert!(!socket.exists() && !b.grant_live(&new.id));
}

/// The socket path of a socket grant.
fn socket_of(grant: &Grant) -> PathBuf {
    match &grant.route {
        Some(GrantRoute::Socket { host_socket, .. }) => host_socket.clone(),
        other => panic!("a socket grant with route {other:?}"),
    }
}

/// Reads until the broker closes the connection (or 2 s pass): what it sent.
async fn read_to_close(stream: &mut tokio::net::UnixStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    match tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut got)).await {
        Ok(_) => Some(got),
        Err(_) => None,
    }
}

#[tokio::test]
async fn one_grant_cannot_take_another_grants_connections() {
    let env = HashMap::from([("OPENAI_API_KEY".to_string(), "sk-real".to_string())]);
    let dir = tempfile::tempdir().unwrap();
    let b = broker_in(dir.path(), env, false).await;
    let greedy = socket_of(&b.grant(socket_grant_request()).unwrap());
    let other = socket_of(&b.grant(socket_grant_request()).unwrap());
    let mut held = Vec::new();
    for _ in 0..PER_GRANT_CONNECTIONS {
        held.push(tokio::net::UnixStream::connect(&greedy).await.unwrap());
    }
    // Over its share: accepted by the kernel, closed unanswered by the broker.
    let mut over = tokio::net::UnixStream::connect(&greedy).await.unwrap();
    let _ = over
        .write_all(b"GET /openai/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    assert_eq!(
        read_to_close(&mut over).await,
        Some(vec![]),
        "the 65th connection is closed"
    );
    // Another grant is served (401: no credentials, but answered).
    let mut fine = tokio::net::UnixStream::connect(&other).await.unwrap();
    fine.write_all(b"GET /openai/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut fine).await.expect("an answer");
    assert!(
        answer.starts_with(b"HTTP/1.1 401"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // Its connections closed, the greedy grant is served again.
    drop(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut again = tokio::net::UnixStream::connect(&greedy).await.unwrap();
    again
        .write_all(b"GET /openai/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut again).await.expect("an answer");
    assert!(answer.starts_with(b"HTTP/1.1 401"));
    b.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_head_that_trickles_in_is_cut_at_the_head_deadline() {
    let env = HashMap::from([("OPENAI_API_KEY".to_string(), "sk-real".to_string())]);
    let dir = tempfile::tempdir().unwrap();
    let b = broker_in(dir.path(), env, false).await;
    let socket = socket_of(&b.grant(socket_grant_request()).unwrap());
    let started = tokio::time::Instant::now();
    let mut slow = tokio::net::UnixStream::connect(&socket).await.unwrap();
    slow.write_all(b"GET /openai/v1/models HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let mut got = Vec::new();
    slow.read_to_end(&mut got).await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= HEAD_TIMEOUT && waited < HEAD_TIMEOUT + Duration::from_secs(2),
        "cut after {waited:?}"
    );
    // An idle keep-alive connection is cut the same way, never at the 330 s stream bound.
    let started = tokio::time::Instant::now();
    let mut idle = tokio::net::UnixStream::connect(&socket).await.unwrap();
    idle.write_all(b"GET /openai/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    idle.read_to_end(&mut got).await.unwrap();
    assert!(got.starts_with(b"HTTP/1.1 401"));
    assert!(started.elapsed() < HEAD_TIMEOUT + Duration::from_secs(2));
    b.close().await;
}

#[tokio::test]
async fn a_framing_fault_refuses_every_request_on_the_connection_and_closes_it() {
    let env = HashMap::from([("OPENAI_API_KEY".to_string(), "sk-real".to_string())]);
    let dir = tempfile::tempdir().unwrap();
    let b = broker_in(dir.path(), env, false).await;
    let socket = socket_of(&b.grant(socket_grant_request()).unwrap());
    let audit = Arc::new(Mutex::new(Vec::new()));
    let sink = audit.clone();
    b.on_audit(Arc::new(move |e: &AuditEvent| {
        sink.lock().unwrap().push(e.clone())
    }));
    let mut s = tokio::net::UnixStream::connect(&socket).await.unwrap();
    // hyper accepts bare LF and keeps only Transfer-Encoding; the broker refuses.
    s.write_all(b"POST /openai/v1/x HTTP/1.1\nHost: x\nContent-Length: 5\nTransfer-Encoding: chunked\n\n0\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut s).await.expect("answered and closed");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    let events = audit.lock().unwrap().clone();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].path, "/openai/…");
    b.close().await;
}
