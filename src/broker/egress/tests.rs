use std::collections::HashMap;
use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::*;
use crate::broker::grant::{GrantRequest, GrantRoute, RouteKind};
use crate::broker::server::{Broker, BrokerOptions};
use crate::names::vars::{EGRESS_PROXY_VAR, EGRESS_SOCKET_VAR};

/// An upstream on 127.0.0.1 that records each connection's first bytes and answers `hi`.
async fn upstream() -> (u16, Arc<Mutex<Vec<String>>>) {
    crate::broker::test_support::upstream(|_| {
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi".to_string()
    })
    .await
}

/// A broker with an egress policy allowing `allowed.test:<port>` (mapped to 127.0.0.1), a
/// socket grant for workspace `w`, its egress socket, and the audit events.
async fn proxy(
    port: u16,
) -> (
    Broker,
    tempfile::TempDir,
    std::path::PathBuf,
    Arc<Mutex<Vec<EgressEvent>>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let policy = EgressPolicy {
        allow: vec![rules::parse_allow(&format!("allowed.test:{port}")).unwrap()],
        resolve: BTreeMap::from([("allowed.test".to_string(), IpAddr::from([127, 0, 0, 1]))]),
        host_addresses: vec![],
        workspaces: Default::default(),
    };
    let broker = Broker::start(BrokerOptions {
        host_env: HashMap::new(),
        socket_dir: dir.path().into(),
        tcp: false,
        egress: Some(policy),
        fetch_screen: false,
        registries: Vec::new(),
        git: None,
    })
    .await
    .unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let record = events.clone();
    broker.on_egress(Arc::new(move |e: &EgressEvent| {
        record.lock().unwrap().push(e.clone())
    }));
    let grant = broker
        .grant(crate::broker::test_support::socket_request("w"))
        .unwrap();
    assert_eq!(
        grant
            .env
            .get(EGRESS_SOCKET_VAR)
            .map(|s| s.expose().to_string()),
        Some("/run/po-broker/egress.sock".into())
    );
    let Some(GrantRoute::Socket { host_dir, .. }) = grant.route else {
        panic!("socket route")
    };
    (broker, dir, host_dir.join(EGRESS_SOCKET), events)
}

async fn exchange(socket: &std::path::Path, request: &[u8]) -> String {
    let mut s = UnixStream::connect(socket).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn an_unlisted_destination_is_denied_with_the_reason_and_audited() {
    let (port, seen) = upstream().await;
    let (_b, _dir, socket, events) = proxy(port).await;
    let answer = exchange(
        &socket,
        b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n",
    )
    .await;
    // The reason in the status line too: npm shows that line of an error, not its body.
    assert!(
        answer
            .starts_with("HTTP/1.1 403 egress denied: denied.test:443 is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow denied.test:443\r\n"),
        "{answer}"
    );
    assert!(
        answer.ends_with("egress denied: denied.test:443 is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow denied.test:443\n"),
        "{answer}"
    );
    let e = events.lock().unwrap()[0].clone();
    assert_eq!(
        (e.workspace.as_str(), e.host.as_str(), e.port, e.decision),
        ("w", "denied.test", 443, EgressDecision::Denied)
    );
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_plain_request_goes_upstream_in_origin_form_without_proxy_headers() {
    let (port, seen) = upstream().await;
    let (_b, _dir, socket, events) = proxy(port).await;
    let request = format!(
        "GET http://Allowed.Test.:{port}/p?q=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nProxy-Authorization: Basic eDp5\r\nConnection: close\r\n\r\n"
    );
    let answer = exchange(&socket, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("hi"),
        "{answer}"
    );
    let got = seen.lock().unwrap()[0].clone();
    assert!(got.starts_with("GET /p?q=1 HTTP/1.1\r\n"), "{got}");
    assert!(
        !got.to_ascii_lowercase().contains("proxy-authorization"),
        "{got}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let e = events.lock().unwrap()[0].clone();
    assert_eq!(
        (e.host.as_str(), e.decision, e.reason.as_deref()),
        ("allowed.test", EgressDecision::Allowed, None)
    );
    assert!(e.bytes_up > 0 && e.bytes_down > 0, "{e:?}");
}

#[tokio::test]
async fn a_tunnel_whose_client_hello_names_another_server_is_refused_before_dialling() {
    let (port, seen) = upstream().await;
    let (b, _dir, socket, events) = proxy(port).await;
    let mut s = UnixStream::connect(&socket).await.unwrap();
    s.write_all(format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 19];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head[..12], b"HTTP/1.1 200");
    s.write_all(&super::sni::tests::rustls_hello("elsewhere.test"))
        .await
        .unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    assert!(rest.ends_with(&ACCESS_DENIED_ALERT), "{rest:?}");
    assert!(seen.lock().unwrap().is_empty());
    let e = events.lock().unwrap()[0].clone();
    assert_eq!(e.decision, EgressDecision::Denied);
    assert!(
        e.reason
            .unwrap()
            .contains("\"elsewhere.test\", not the CONNECT host allowed.test")
    );
    // Revoking the grant removes the egress socket.
    for id in b.grant_ids() {
        b.revoke(&id);
    }
    assert!(!socket.exists());
}

#[test]
fn basic_credentials_are_base64_of_po_and_the_token() {
    assert_eq!(basic_credentials("abc"), "Basic cG86YWJj");
    assert_eq!(basic_credentials("ab"), "Basic cG86YWI=");
    assert_eq!(basic_credentials("a"), "Basic cG86YQ==");
}

#[tokio::test]
async fn the_tcp_route_names_its_grant_with_proxy_credentials_on_every_request() {
    let (port, seen) = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(BrokerOptions {
        host_env: HashMap::new(),
        socket_dir: dir.path().into(),
        tcp: true,
        egress: Some(EgressPolicy {
            allow: vec![rules::parse_allow(&format!("allowed.test:{port}")).unwrap()],
            resolve: BTreeMap::from([("allowed.test".to_string(), IpAddr::from([127, 0, 0, 1]))]),
            host_addresses: vec![],
            workspaces: Default::default(),
        }),
        fetch_screen: false,
        registries: Vec::new(),
        git: None,
    })
    .await
    .unwrap();
    let grant = broker
        .grant(GrantRequest {
            workspace: "w".into(),
            providers: None,
            route: RouteKind::Tcp,
            owner: None,
            container_socket: None,
            container_host: None,
            secret: None,
            socket_folder: None,
            git_remotes: Vec::new(),
        })
        .unwrap();
    let egress = broker.egress_tcp_address().unwrap();
    let url = grant
        .env
        .get(EGRESS_PROXY_VAR)
        .unwrap()
        .expose()
        .to_string();
    let prefix = "http://po:";
    let token = url[prefix.len()..url.find('@').unwrap()].to_string();
    assert_eq!(
        &url[url.find('@').unwrap()..],
        format!("@host.docker.internal:{}", egress.port())
    );
    assert!(!format!("{grant:?}").contains(&token));
    let get = |url: String, auth: Option<String>| {
        let host = url.trim_start_matches("http://").split('/').next().unwrap();
        let request = format!(
            "GET {url} HTTP/1.1\r\nHost: {host}\r\n{}Connection: close\r\n\r\n",
            auth.map(|a| format!("Proxy-Authorization: {a}\r\n"))
                .unwrap_or_default()
        );
        async move {
            let mut s = tokio::net::TcpStream::connect(egress).await.unwrap();
            s.write_all(request.as_bytes()).await.unwrap();
            let mut out = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
            String::from_utf8_lossy(&out).into_owned()
        }
    };
    let send = |auth| get(format!("http://allowed.test:{port}/t"), auth);
    assert!(send(None).await.starts_with("HTTP/1.1 407"));
    assert!(
        send(Some(basic_credentials("forged")))
            .await
            .starts_with("HTTP/1.1 407")
    );
    let ok = send(Some(basic_credentials(&token))).await;
    assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("hi"), "{ok}");
    // The credentials never reach the upstream.
    assert!(
        !seen.lock().unwrap()[0]
            .to_ascii_lowercase()
            .contains("proxy-authorization")
    );
    // The grant's denial feed, by the same credentials (none: 407).
    let ask = |auth| get("http://po-sandbox.invalid/denials".into(), auth);
    assert!(ask(None).await.starts_with("HTTP/1.1 407"));
    let fed = ask(Some(basic_credentials(&token))).await;
    assert!(
        fed.starts_with("HTTP/1.1 200") && fed.ends_with(r#"{"next":0,"denials":[]}"#),
        "{fed}"
    );
    broker.revoke(&grant.id);
    assert!(
        send(Some(basic_credentials(&token)))
            .await
            .starts_with("HTTP/1.1 407")
    );
    broker.close().await;
}

#[test]
fn a_reason_phrase_is_the_line_when_short_and_printable() {
    let phrase = |line: &str| reason_phrase(line).map(|r| r.as_bytes().to_vec());
    assert_eq!(
        phrase("egress denied: a.test:443 is not in networkAllow").as_deref(),
        Some(&b"egress denied: a.test:443 is not in networkAllow"[..])
    );
    assert_eq!(phrase("egress denied: a\r\nX-Injected: 1"), None);
    assert_eq!(
        phrase("tab\tis fine").as_deref(),
        Some(&b"tab\tis fine"[..])
    );
    assert_eq!(phrase(&"x".repeat(MAX_REASON_BYTES + 1)), None);
    // Without a phrase the response keeps the standard one and its body.
    let r = text(StatusCode::BAD_GATEWAY, &"y".repeat(MAX_REASON_BYTES + 1));
    assert!(r.extensions().get::<hyper::ext::ReasonPhrase>().is_none());
    let r = text(StatusCode::FORBIDDEN, "egress denied: why");
    assert_eq!(
        r.extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|p| p.as_bytes()),
        Some(&b"egress denied: why"[..])
    );
}

/// A connection's view taken before its check sees every later policy: one put in force
/// before the connection even opened ends it too; a policy that still allows it (another
/// entry changed) does not; a name override that moves, or goes for a non-public address,
/// ends it.
#[tokio::test]
async fn a_connection_ends_when_a_later_policy_no_longer_allows_it() {
    use std::net::Ipv4Addr;
    let target = rules::parse_authority("a.test:443", None).unwrap();
    let entry = |e: &str| rules::parse_allow(e).unwrap();
    let policy = |allow: &[&str], resolve: &[(&str, [u8; 4])]| EgressPolicy {
        allow: allow.iter().map(|e| entry(e)).collect(),
        resolve: resolve
            .iter()
            .map(|(n, ip)| (n.to_string(), IpAddr::V4(Ipv4Addr::from(*ip))))
            .collect(),
        ..Default::default()
    };
    let live = LiveEgress::new(policy(&["a.test:443"], &[("a.test", [127, 0, 0, 1])]));
    let settled = |f: std::pin::Pin<&mut (dyn std::future::Future<Output = ()> + Send)>| {
        futures_util::FutureExt::now_or_never(f).is_some()
    };
    let dialled = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let route = |workspace: &str| Route {
        workspace: workspace.into(),
        target: target.clone(),
        dialled,
        overridden: true,
    };
    // Taken before the check; the deny comes before the watch starts: it still ends.
    let view = live.view();
    live.replace(policy(&["b.test:443"], &[("a.test", [127, 0, 0, 1])]));
    let mut r: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
        Box::pin(revoked(view, route("w")));
    assert!(settled(r.as_mut()));
    // Another entry added: still allowed; then the override moves: ended.
    let live = LiveEgress::new(policy(&["a.test:443"], &[("a.test", [127, 0, 0, 1])]));
    let mut r: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
        Box::pin(revoked(live.view(), route("w")));
    assert!(!settled(r.as_mut()));
    live.replace(policy(
        &["a.test:443", "c.test:443"],
        &[("a.test", [127, 0, 0, 1])],
    ));
    assert!(!settled(r.as_mut()));
    live.replace(policy(&["a.test:443"], &[]));
    assert!(settled(r.as_mut()), "the loopback override is gone: ended");
    // A workspace's own entry holds for it only.
    let mut own = policy(&[], &[("a.test", [127, 0, 0, 1])]);
    own.workspaces.insert("w".into(), vec![entry("a.test:443")]);
    let live = LiveEgress::new(own.clone());
    let mut mine: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
        Box::pin(revoked(live.view(), route("w")));
    let mut other: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
        Box::pin(revoked(live.view(), route("v")));
    assert!(!settled(mine.as_mut()));
    assert!(
        settled(other.as_mut()),
        "another workspace is not allowed it"
    );
    own.workspaces.clear();
    live.replace(own);
    assert!(settled(mine.as_mut()));
    // An override to a public address that goes ends the connection too (an address only: no
    // traffic here): the name would now
    // be looked up, maybe elsewhere.
    let public = Some(IpAddr::V4(Ipv4Addr::new(11, 0, 0, 1)));
    let live = LiveEgress::new(policy(&["a.test:443"], &[("a.test", [11, 0, 0, 1])]));
    let by_override = Route {
        dialled: public,
        ..route("w")
    };
    let looked_up = Route {
        dialled: public,
        overridden: false,
        ..route("w")
    };
    let mut a: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
        Box::pin(revoked(live.view(), by_override));
    assert!(!settled(a.as_mut()));
    live.replace(policy(&["a.test:443"], &[]));
    assert!(settled(a.as_mut()));
    let mut b: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
        Box::pin(revoked(live.view(), looked_up));
    assert!(!settled(b.as_mut()), "a public address looked up stays");
}

#[tokio::test]
async fn the_feed_of_a_grant_holds_its_own_denials_and_is_answered_by_the_proxy_itself() {
    let (port, seen) = upstream().await;
    let (_b, _dir, socket, events) = proxy(port).await;
    let feed_at = |after: &str| {
        format!(
            "GET http://po-sandbox.invalid/denials{after} HTTP/1.1\r\nHost: po-sandbox.invalid\r\nConnection: close\r\n\r\n"
        )
    };
    let start = exchange(&socket, feed_at("").as_bytes()).await;
    assert!(start.starts_with("HTTP/1.1 200"), "{start}");
    assert!(start.ends_with(r#"{"next":0,"denials":[]}"#), "{start}");
    let _ = exchange(
        &socket,
        b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n",
    )
    .await;
    let _ = exchange(
        &socket,
        b"GET http://denied.test/x HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    let answer = exchange(&socket, feed_at("?after=0&wait=5").as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""next":2"#), "{answer}");
    assert!(
        answer.contains("- denied.test:443 is not in the allow list; to allow it, run on the host: po-sandbox allow denied.test:443\\n- denied.test:80 is not in the allow list"),
        "{answer}"
    );
    // The feed's own requests are neither audited nor dialled; a bad one is refused.
    let bad = exchange(&socket, b"GET http://po-sandbox.invalid/etc HTTP/1.1\r\nHost: po-sandbox.invalid\r\nConnection: close\r\n\r\n").await;
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    assert_eq!(events.lock().unwrap().len(), 2);
    assert!(seen.lock().unwrap().is_empty());
}
