//! What only Podman's own API says about it: whether it runs rootless, and its cgroup version.
//! Podman 4's Docker-compatible `info` does not list `name=rootless` (its service runs as root
//! inside the user's namespace), so a Podman on a Unix socket is also asked `/libpod/info`.

use std::time::Duration;

use super::endpoint::Endpoint;

/// Rootless and cgroup version, as `/libpod/info` gives them (`host.security.rootless`,
/// `host.cgroupVersion`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibpodFacts {
    pub rootless: bool,
    /// `v1` / `v2` as Podman writes it, or empty.
    pub cgroup_version: String,
}

/// Reads the facts from a `/libpod/info` answer body; `None` when it is not one.
#[cfg_attr(not(unix), allow(dead_code))]
pub fn parse(body: &str) -> Option<LibpodFacts> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let host = v.get("host")?;
    Some(LibpodFacts {
        rootless: host.get("security")?.get("rootless")?.as_bool()?,
        cgroup_version: host
            .get("cgroupVersion")
            .and_then(|c| c.as_str())
            .unwrap_or_default()
            .to_string(),
    })
}

/// The body of a complete HTTP/1.x response with status 200, else `None`.
#[cfg_attr(not(unix), allow(dead_code))]
fn ok_body(response: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(response).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.lines().next()?;
    let mut parts = status.split_whitespace();
    (parts.next()?.starts_with("HTTP/1.") && parts.next()? == "200").then_some(body)
}

/// The head is in and so is as much body as its `Content-Length` says (without one, only the
/// end of the connection tells).
#[cfg_attr(not(unix), allow(dead_code))]
fn complete(response: &[u8]) -> bool {
    let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&response[..end]).to_ascii_lowercase();
    head.lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .is_some_and(|len| response.len() >= end + 4 + len)
}

/// Asks a Podman on a Unix socket for `/libpod/info` (HTTP/1.0, so the answer is one body that
/// ends with the connection), within `timeout`. `None` on any failure: the caller keeps what
/// the compatible `info` said.
pub async fn ask(endpoint: &Endpoint, timeout: Duration) -> Option<LibpodFacts> {
    #[cfg(unix)]
    if let Endpoint::Unix(path) = endpoint {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let exchange = async {
            let mut s = tokio::net::UnixStream::connect(path).await.ok()?;
            s.write_all(b"GET /v4.0.0/libpod/info HTTP/1.0\r\nHost: d\r\n\r\n")
                .await
                .ok()?;
            // Until the connection ends or the body's `Content-Length` is in, at most 1 MiB (an
            // info answer is a few KiB).
            let mut response = Vec::new();
            let mut buf = [0u8; 8192];
            while response.len() < 1 << 20 && !complete(&response) {
                let n = s.read(&mut buf).await.ok()?;
                if n == 0 {
                    break;
                }
                response.extend_from_slice(&buf[..n]);
            }
            parse(ok_body(&response)?)
        };
        return tokio::time::timeout(timeout, exchange).await.ok().flatten();
    }
    let _ = (endpoint, timeout);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rootless_and_the_cgroup_version() {
        let body = r#"{"host":{"cgroupVersion":"v1","security":{"rootless":true,"seccompEnabled":true}},"store":{}}"#;
        assert_eq!(
            parse(body),
            Some(LibpodFacts {
                rootless: true,
                cgroup_version: "v1".into()
            })
        );
        let rootful = r#"{"host":{"cgroupVersion":"v2","security":{"rootless":false}}}"#;
        assert!(!parse(rootful).unwrap().rootless);
        // The compatible info, or anything else, is no libpod answer.
        assert_eq!(parse(r#"{"SecurityOptions":[],"CgroupVersion":"1"}"#), None);
        assert_eq!(parse("not json"), None);
    }

    #[test]
    fn an_answer_is_complete_with_its_content_length() {
        assert!(!complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"));
        assert!(!complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n{}"));
        assert!(complete(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"));
        assert!(
            !complete(b"HTTP/1.0 200 OK\r\n\r\n{}"),
            "no length: until the end"
        );
    }

    #[test]
    fn only_a_complete_200_answer_counts() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}";
        assert_eq!(ok_body(ok), Some("{\"a\":1}"));
        assert_eq!(ok_body(b"HTTP/1.1 404 Not Found\r\n\r\n{}"), None);
        assert_eq!(ok_body(b"HTTP/1.1 200 OK\r\n"), None);
        assert_eq!(ok_body(b"SSH-2.0\r\n\r\n"), None);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn asks_over_the_unix_socket() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("podman.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            assert!(String::from_utf8_lossy(&buf[..n]).starts_with("GET /v4.0.0/libpod/info "));
            let body = r#"{"host":{"cgroupVersion":"v2","security":{"rootless":true}}}"#;
            let answer = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(answer.as_bytes()).await.unwrap();
        });
        let facts = ask(&Endpoint::Unix(path), Duration::from_secs(5)).await;
        assert_eq!(
            facts,
            Some(LibpodFacts {
                rootless: true,
                cgroup_version: "v2".into()
            })
        );
        let missing = Endpoint::Unix(dir.path().join("none.sock"));
        assert_eq!(ask(&missing, Duration::from_secs(1)).await, None);
    }
}
