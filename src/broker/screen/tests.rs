use super::*;

use tokio::sync::mpsc;

/// A request body fed by the test through a channel, as a client would send it.
struct Fed(mpsc::Receiver<Bytes>);

impl Body for Fed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

fn fed(capacity: usize) -> (mpsc::Sender<Bytes>, Fed) {
    let (tx, rx) = mpsc::channel(capacity);
    (tx, Fed(rx))
}

/// What the upstream would receive: every byte until the end or the error.
async fn drain<B>(mut body: Screened<B>) -> (Vec<u8>, Option<String>)
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let mut got = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => got.extend_from_slice(&f.into_data().expect("data only")),
            Err(e) => return (got, Some(e.to_string())),
        }
    }
    (got, None)
}

fn chat() -> Option<&'static Grammar> {
    apis::grammar(
        crate::broker::routes::paths::Api::OpenAi,
        "/chat/completions",
    )
}

fn key(key: &str) -> Finding {
    Finding::Key {
        key: key.into(),
        within: "the request",
    }
}

/// A clean JSON body of about `size` bytes whose last key is `tail_key`.
fn big_body(size: usize, tail_key: &str) -> Vec<u8> {
    let mut body = b"{\"messages\":[{\"role\":\"user\",\"content\":\"".to_vec();
    body.resize(size, b'a');
    body.extend_from_slice(format!("\"}}],\"{tail_key}\":[]}}").as_bytes());
    body
}

#[tokio::test]
async fn a_small_body_is_judged_before_anything_is_sent() {
    let (tx, body) = fed(4);
    tx.send(Bytes::from_static(br#"{"model":"m","mcp_"#))
        .await
        .unwrap();
    tx.send(Bytes::from_static(br#"servers":[]}"#))
        .await
        .unwrap();
    drop(tx);
    match screen(body, chat(), Verdict::default()).await {
        Err(Stopped::Found(f)) => assert_eq!(f, key("mcp_servers")),
        other => panic!("expected a finding, got {:?}", other.err()),
    }
    let (tx, body) = fed(4);
    let clean = br#"{"model":"m","messages":[{"role":"user","content":"mcp_servers"}]}"#;
    tx.send(Bytes::from_static(clean)).await.unwrap();
    drop(tx);
    let screened = screen(body, chat(), Verdict::default())
        .await
        .expect("clean");
    assert_eq!(screened.size_hint().exact(), Some(clean.len() as u64));
    assert_eq!(drain(screened).await, (clean.to_vec(), None));
}

#[tokio::test]
async fn a_long_body_streams_with_its_last_byte_held_until_the_scan_ends() {
    let body_bytes = big_body(HOLD + 3 * 65536, "stop");
    let (tx, body) = fed(1);
    let chunks: Vec<Bytes> = body_bytes
        .chunks(65536)
        .map(Bytes::copy_from_slice)
        .collect();
    let verdict = Verdict::default();
    // The screen returns once it read past HOLD, while the client still has chunks to send.
    let sender = tokio::spawn(async move {
        for c in chunks {
            if tx.send(c).await.is_err() {
                return;
            }
        }
    });
    let screened = screen(body, chat(), verdict.clone())
        .await
        .expect("clean so far");
    assert!(
        !sender.is_finished(),
        "the screen read the whole body first"
    );
    let (got, error) = drain(screened).await;
    assert_eq!(error, None);
    assert_eq!(got, body_bytes);
    assert!(verdict.get().is_none());
}

#[tokio::test]
async fn a_finding_past_the_hold_ends_the_body_before_its_last_byte() {
    for tail in ["mcp_servers", "web_search_options"] {
        let body_bytes = big_body(HOLD + 200_000, tail);
        let (tx, body) = fed(64);
        let verdict = Verdict::default();
        let chunks: Vec<Bytes> = body_bytes
            .chunks(4096)
            .map(Bytes::copy_from_slice)
            .collect();
        tokio::spawn(async move {
            for c in chunks {
                let _ = tx.send(c).await;
            }
        });
        let screened = screen(body, chat(), verdict.clone())
            .await
            .expect("clean in the hold");
        let (got, error) = drain(screened).await;
        assert!(error.is_some_and(|e| e.contains(tail)), "{tail}");
        assert!(got.len() < body_bytes.len(), "the whole body went out");
        assert_eq!(verdict.get(), Some(&key(tail)));
    }
}

#[tokio::test]
async fn a_gibibyte_body_streams_through_in_bounded_memory() {
    // 1 GiB in 1 MiB chunks: the screen holds at most HOLD plus a chunk, never the body.
    const CHUNK: usize = 1 << 20;
    const TOTAL: usize = 1 << 30;
    const HEAD: &[u8] = b"{\"messages\":[{\"content\":\"";
    const TAIL: &[u8] = b"\"}]}";
    let (tx, body) = fed(2);
    tokio::spawn(async move {
        let _ = tx.send(Bytes::from_static(HEAD)).await;
        let chunk = Bytes::from(vec![b'a'; CHUNK]);
        for _ in 0..TOTAL / CHUNK {
            if tx.send(chunk.clone()).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Bytes::from_static(TAIL)).await;
    });
    let mut screened = screen(body, chat(), Verdict::default())
        .await
        .expect("clean");
    let mut total = 0usize;
    let mut most_queued = 0usize;
    while let Some(frame) = screened.frame().await {
        total += frame.expect("no error").into_data().expect("data").len();
        let queued: usize = screened.ready.iter().map(Bytes::len).sum();
        most_queued = most_queued.max(queued);
    }
    assert_eq!(total, TOTAL + HEAD.len() + TAIL.len());
    assert!(
        most_queued <= HOLD + CHUNK,
        "{most_queued} bytes queued at once"
    );
}
