use http_body_util::BodyExt;

use super::*;

const UNLISTED: &str = "a.test:443 is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow a.test:443";

/// The answer at once to `after`.
async fn now(feed: &Feed, after: u64) -> Answer {
    feed.answer(Query {
        after: Some(after),
        wait: Duration::ZERO,
    })
    .await
}

fn get(uri: &str) -> Request<()> {
    Request::get(uri).body(()).unwrap()
}

#[test]
fn only_requests_for_its_own_name_are_the_feeds() {
    assert_eq!(asked(&get("http://example.test/denials")), None);
    assert_eq!(asked(&get("/denials")), None);
    // A tunnel to the name is an ordinary (denied) CONNECT.
    let connect = Request::connect("po-sandbox.invalid:443").body(()).unwrap();
    assert_eq!(asked(&connect), None);
    assert_eq!(
        asked(&get("http://PO-SANDBOX.invalid/denials?after=3&wait=10")),
        Some(Ok(Query {
            after: Some(3),
            wait: Duration::from_secs(10)
        }))
    );
    assert_eq!(
        asked(&get("http://po-sandbox.invalid/denials")),
        Some(Ok(Query {
            after: None,
            wait: Duration::ZERO
        }))
    );
    // The wait is bounded.
    assert_eq!(
        asked(&get("http://po-sandbox.invalid/denials?after=0&wait=99999")),
        Some(Ok(Query {
            after: Some(0),
            wait: MAX_WAIT
        }))
    );
    for bad in [
        "http://po-sandbox.invalid/",
        "http://po-sandbox.invalid/denials/x",
        "http://po-sandbox.invalid/denials?after=-1",
        "http://po-sandbox.invalid/denials?after=1&path=/etc",
        "http://po-sandbox.invalid/denials?wait",
        "https://po-sandbox.invalid/denials",
    ] {
        assert!(matches!(asked(&get(bad)), Some(Err(_))), "{bad}");
    }
    let post = Request::post("http://po-sandbox.invalid/denials")
        .body(())
        .unwrap();
    assert!(matches!(asked(&post), Some(Err(_))));
}

#[tokio::test]
async fn an_answer_without_after_says_where_the_feed_is_and_nothing_more() {
    let feed = Feed::default();
    feed.push("a.test:443", UNLISTED);
    let a = feed
        .answer(Query {
            after: None,
            wait: MAX_WAIT,
        })
        .await;
    assert_eq!((a.next, a.denials.len(), a.notice), (1, 0, None));
}

#[tokio::test(start_paused = true)]
async fn denials_are_grouped_with_their_count_and_the_command_that_allows_them() {
    let feed = Feed::default();
    feed.push("a.test:443", UNLISTED);
    feed.push("b.test:80", "b.test resolves only to non-public addresses");
    feed.push("a.test:443", UNLISTED);
    let a = now(&feed, 0).await;
    assert_eq!(a.next, 3);
    assert_eq!(
        a.denials
            .iter()
            .map(|g| (g.destination.as_str(), g.count, g.allow.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("a.test:443", 2, Some("po-sandbox allow a.test:443")),
            ("b.test:80", 1, None)
        ]
    );
    assert_eq!(
        a.notice.as_deref(),
        Some(
            "Po sandbox refused connections:\n- a.test:443 (2 times) is not in the allow list; to allow it, run on the host: po-sandbox allow a.test:443\n- b.test:80: b.test resolves only to non-public addresses"
        )
    );
    // Only what came after.
    let later = now(&feed, 2).await;
    assert_eq!(
        later.notice.as_deref(),
        Some(
            "Po sandbox refused a connection: a.test:443 is not in the allow list; to allow it, run on the host: po-sandbox allow a.test:443"
        )
    );
    let body = String::from_utf8(
        respond(&later)
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(
        body.starts_with(r#"{"next":3,"denials":[{"destination":"a.test:443","count":1,"#),
        "{body}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiting_answer_comes_with_the_next_denial_and_gathers_a_burst() {
    let feed = std::sync::Arc::new(Feed::default());
    let pusher = feed.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        pusher.push("a.test:443", UNLISTED);
        tokio::time::sleep(Duration::from_millis(100)).await;
        pusher.push("a.test:443", UNLISTED);
    });
    let started = tokio::time::Instant::now();
    let a = feed
        .answer(Query {
            after: Some(0),
            wait: Duration::from_secs(25),
        })
        .await;
    // Woken by the first, then it gathered the second: one answer.
    assert_eq!(started.elapsed(), Duration::from_secs(5) + GATHER);
    assert_eq!((a.next, a.denials[0].count), (2, 2));
    // With nothing new, it answers empty when its wait is over.
    let started = tokio::time::Instant::now();
    let empty = feed
        .answer(Query {
            after: Some(2),
            wait: Duration::from_secs(25),
        })
        .await;
    assert_eq!(started.elapsed(), Duration::from_secs(25));
    assert_eq!(
        (empty.next, empty.denials.len(), empty.notice),
        (2, 0, None)
    );
}

#[tokio::test(start_paused = true)]
async fn the_feed_is_bounded_and_a_number_past_its_end_reads_it_from_the_start() {
    let feed = Feed::default();
    for i in 0..(KEEP + 6) {
        feed.push(&format!("h{i}.test:443"), "refused");
    }
    let all = now(&feed, 0).await;
    assert_eq!((all.next, all.denials.len()), ((KEEP + 6) as u64, KEEP));
    assert_eq!(all.denials[0].destination, "h6.test:443");
    // A session that knew an earlier grant's feed (a hub restarted) gets what this one keeps.
    let fresh = Feed::default();
    fresh.push("a.test:443", UNLISTED);
    let a = now(&fresh, 500).await;
    assert_eq!((a.next, a.denials.len()), (1, 1));
}
