use bytes::Bytes;

use super::*;

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

#[test]
fn response_headers_echoing_the_key_by_name_or_value_in_any_case_are_dropped() {
    let key = "sk-ReAl-KeY-0123456789";
    let cases: &[(&str, &str, bool)] = &[
        ("x-echo", "sk-ReAl-KeY-0123456789", false),
        ("x-echo", "prefix SK-REAL-KEY-0123456789 suffix", false),
        ("x-echo", "sk-real-key-0123456789", false),
        ("x-sk-real-key-0123456789", "1", false),
        ("set-cookie", "k=sk-ReAl-KeY-0123456789", false),
        ("set-cookie", "session=1", true),
        ("content-type", "application/json", true),
        ("x-part", "sk-ReAl-KeY", true),
    ];
    let mut headers = HeaderMap::new();
    for (n, v, _) in cases {
        headers.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    drop_echoes(&mut headers, key);
    for (n, v, kept) in cases {
        let there = headers
            .get_all(*n)
            .iter()
            .any(|x| x.as_bytes() == v.as_bytes());
        assert_eq!(there, *kept, "{n}: {v}");
    }
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
