/// A broker for a test: `env` as the host's, sockets under `dir`.
async fn broker_in(dir: &Path, env: HashMap<String, String>, tcp: bool) -> Broker {
    Broker::start(BrokerOptions {
        host_env: env,
        socket_dir: dir.into(),
        tcp,
    })
    .await
    .unwrap()
}

/// A socket grant for workspace `w` with every default.
fn socket_grant_request() -> GrantRequest {
    GrantRequest {
        workspace: "w".into(),
        providers: None,
        transport: RouteKind::Socket,
        owner: None,
        container_socket: None,
        container_host: None,
        secret: None,
        socket_folder: None,
    }
}
use super::*;

#[test]
fn percent_decoding() {
    assert_eq!(percent_decode(b"a%2Db+c%zz%4"), b"a-b c%zz%4");
}

#[test]
fn sniffer_flags_content_length_with_transfer_encoding() {
    let (mut s, flag) = Sniffed::new(());
    s.observe(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc");
    assert!(!flag.load(Ordering::SeqCst));
    s.observe(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nCon");
    s.observe(b"tent-Length: 5\r\n\r\n0\r\n\r\n");
    assert!(flag.load(Ordering::SeqCst));
}

#[test]
fn dot_segments() {
    assert!(has_dot_segment("/openai/../x"));
    assert!(has_dot_segment("/openai/%2e%2e/x"));
    assert!(has_dot_segment("/openai/./x"));
    assert!(!has_dot_segment("/openai/v1/chat.completions"));
}

#[test]
fn derived_tokens_are_stable_per_secret_and_provider() {
    let route = routes::find("openai").unwrap();
    let s1 = Secret::new("secret-one");
    let a = derived_token(route, "sk-real", &s1, "openai");
    let b = derived_token(route, "sk-real", &s1, "openai");
    let c = derived_token(route, "sk-real", &Secret::new("secret-two"), "openai");
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.expose().starts_with("sk-") && a.expose().len() >= 3 + 64);
    let anthropic = routes::find("anthropic").unwrap();
    assert!(
        !derived_token(anthropic, "sk-ant-api03-x", &s1, "anthropic")
            .expose()
            .contains("sk-ant-oat")
    );
    assert!(
        derived_token(anthropic, "sk-ant-oat01-x", &s1, "anthropic")
            .expose()
            .starts_with("sk-ant-oat01-")
    );
}

#[test]
fn hop_by_hop_and_connection_named_headers_are_dropped() {
    let mut from = HeaderMap::new();
    from.insert(
        "connection",
        HeaderValue::from_static("x-private, keep-alive"),
    );
    from.insert("x-private", HeaderValue::from_static("1"));
    from.insert("proxy-authorization", HeaderValue::from_static("Basic x"));
    from.insert("transfer-encoding", HeaderValue::from_static("chunked"));
    from.insert("content-type", HeaderValue::from_static("application/json"));
    let mut to = HeaderMap::new();
    copy_headers(&from, &mut to);
    assert_eq!(to.len(), 1);
    assert!(to.contains_key("content-type"));
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
        transport: RouteKind::Socket,
        owner: None,
        container_socket: None,
        container_host: None,
        secret: Some(Secret::new("token-file-content")),
        socket_folder: Some(folder.clone()),
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
        .get(&hash(new.env["OPENAI_API_KEY"].expose()))
        .expect("the successor's token was removed");
    assert_eq!(entry.grant, new.id);
    drop(tokens);
    assert!(b.revoke(&new.id));
    assert!(!socket.exists() && !b.grant_live(&new.id));
}

/// A body that yields `frames` at the given delays (from the previous one), then ends.
struct Paced {
    frames: std::collections::VecDeque<Duration>,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Paced {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        let Some(delay) = self.frames.front().copied() else {
            return Poll::Ready(None);
        };
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.frames.pop_front();
                self.sleep = None;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_quiet_for_the_idle_bound_fails_and_a_slow_but_steady_one_does_not() {
    let limit = IDLE_TIMEOUT;
    // Frames 300 s apart: slower than anything real, still inside the bound.
    let steady = Paced {
        frames: [limit - Duration::from_secs(30); 4].into(),
        sleep: None,
    };
    let collected = Idle::new(steady, limit).collect().await.unwrap();
    assert_eq!(collected.to_bytes().len(), 4);
    // One frame, then silence longer than the bound.
    let quiet = Paced {
        frames: [Duration::from_secs(1), limit + Duration::from_secs(1)].into(),
        sleep: None,
    };
    let started = tokio::time::Instant::now();
    let err = Idle::new(quiet, limit).collect().await.unwrap_err();
    assert_eq!(err.to_string(), "nothing was sent for 330 s");
    assert_eq!(started.elapsed(), Duration::from_secs(1) + limit);
}
