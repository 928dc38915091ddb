//! What the broker's unit tests share: an upstream of their own on 127.0.0.1, a socket grant
//! request, and one exchange over a grant's socket.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use crate::broker::grant::{GrantRequest, RouteKind};

/// What an upstream saw: each connection's first bytes (up to 16 KiB).
pub type Seen = Arc<Mutex<Vec<String>>>;

/// An upstream on 127.0.0.1 that records each connection's first bytes and writes what
/// `answer` makes of them; its port and what it saw.
pub async fn upstream(answer: impl Fn(&str) -> String + Send + Sync + 'static) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let (record, answer) = (seen.clone(), Arc::new(answer));
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (record, answer) = (record.clone(), answer.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                record.lock().unwrap().push(head.clone());
                let _ = s.write_all(answer(&head).as_bytes()).await;
            });
        }
    });
    (port, seen)
}

/// A socket-route grant request for `workspace`, its container socket where a container has it.
pub fn socket_request(workspace: &str) -> GrantRequest {
    GrantRequest {
        workspace: workspace.into(),
        providers: None,
        route: RouteKind::Socket,
        owner: None,
        container_socket: Some("/run/po-broker/broker.sock".into()),
        container_host: None,
        secret: None,
        socket_folder: None,
        git_remotes: Vec::new(),
    }
}

/// Writes `request` to `socket` and reads the answer until the end (5 s at most).
pub async fn exchange(socket: &std::path::Path, request: &[u8]) -> String {
    let mut s = UnixStream::connect(socket).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}
