//! A grant's recent denials, for the person: the pi extension inside the container asks its
//! egress proxy for them (`GET http://po-sandbox.invalid/denials?after=<n>&wait=<s>`, a name
//! that never resolves, answered by the proxy itself and never dialled) and shows the notice
//! the answer carries to the person, not to the model. Each grant's feed holds only its own
//! container's denials (the last [`KEEP`]), so a container learns nothing it did not cause.
//!
//! An answer waits (up to `wait` seconds, at most [`MAX_WAIT`]) for a denial after `after`;
//! once one comes it waits [`GATHER`] more, so a burst is one notice. Without `after` it says
//! at once where the feed is (`next`), with no denials: a session starts from now.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;

use super::rules;
use crate::broker::reply::{ResponseBody, full};
use crate::lock::Locked;

/// The name the proxy answers for itself (`.invalid` never resolves, RFC 6761).
pub const HOST: &str = "po-sandbox.invalid";
/// The denials a feed keeps.
pub const KEEP: usize = 64;
/// The longest an answer waits for a denial.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// How long an answer waits for more once a denial came.
pub const GATHER: Duration = Duration::from_millis(750);

/// One denial as the feed keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    destination: String,
    reason: String,
}

#[derive(Default)]
struct State {
    /// The number of denials ever pushed (the next one's number).
    next: u64,
    items: VecDeque<Item>,
}

/// One grant's recent denials.
#[derive(Default)]
pub struct Feed {
    state: Mutex<State>,
    changed: tokio::sync::Notify,
}

/// What a feed request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    pub after: Option<u64>,
    pub wait: Duration,
}

/// The denials of one destination in an answer, in the order first seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub destination: String,
    pub count: u32,
    /// The last one's reason.
    pub reason: String,
    /// The host command that would allow it, when the allow list refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<String>,
}

/// An answer's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// Ask with `after` set to this next time.
    pub next: u64,
    pub denials: Vec<Group>,
    /// What to show the person (none when there is nothing new).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

impl Feed {
    /// Keeps a denial (the oldest is dropped past [`KEEP`]) and wakes the answers waiting.
    pub fn push(&self, destination: &str, reason: &str) {
        {
            let mut s = self.state.locked();
            s.items.push_back(Item {
                destination: destination.chars().take(255).collect(),
                reason: reason.chars().take(1024).collect(),
            });
            if s.items.len() > KEEP {
                s.items.pop_front();
            }
            s.next += 1;
        }
        self.changed.notify_waiters();
    }

    /// The denials after `after` (all it keeps when `after` is past its end: a new grant's
    /// feed, asked by a session that knew the one before), and the next number.
    fn since(&self, after: u64) -> Answer {
        let s = self.state.locked();
        let after = if after > s.next { 0 } else { after };
        let first = s.next - s.items.len() as u64;
        let skip = after.saturating_sub(first) as usize;
        let denials = grouped(s.items.iter().skip(skip));
        Answer {
            next: s.next,
            notice: notice(&denials),
            denials,
        }
    }

    /// The answer to `query`: at once without `after`, else once there are denials after it
    /// (and [`GATHER`] more) or its wait is over.
    pub async fn answer(&self, query: Query) -> Answer {
        let Some(after) = query.after else {
            return Answer {
                next: self.state.locked().next,
                denials: Vec::new(),
                notice: None,
            };
        };
        let deadline = tokio::time::Instant::now() + query.wait.min(MAX_WAIT);
        loop {
            // Listening before looking, so a push between the two is not missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.since(after).denials.is_empty() {
                tokio::time::sleep(GATHER).await;
                return self.since(after);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.since(after);
            }
        }
    }
}

/// `items` by destination, in the order first seen, each with its count and last reason.
fn grouped<'a>(items: impl Iterator<Item = &'a Item>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for item in items {
        match groups
            .iter_mut()
            .find(|g| g.destination == item.destination)
        {
            Some(g) => {
                g.count += 1;
                g.reason.clone_from(&item.reason);
            }
            None => groups.push(Group {
                destination: item.destination.clone(),
                count: 1,
                reason: item.reason.clone(),
                allow: None,
            }),
        }
    }
    for g in &mut groups {
        g.allow = rules::unlisted(&g.reason).then(|| format!("po-sandbox allow {}", g.destination));
    }
    groups
}

/// What the person is shown for `groups`: each destination, how often, and the command that
/// allows it (or the reason, when the allow list was not what refused it).
pub fn notice(groups: &[Group]) -> Option<String> {
    let line = |g: &Group| {
        let times = match g.count {
            1 => String::new(),
            n => format!(" ({n} times)"),
        };
        match &g.allow {
            Some(cmd) => format!(
                "{}{times} is not in the allow list; to allow it, run on the host: {cmd}",
                g.destination
            ),
            None => format!("{}{times}: {}", g.destination, g.reason),
        }
    };
    match groups {
        [] => None,
        [g] => Some(format!("Po sandbox refused a connection: {}", line(g))),
        _ => Some(format!(
            "Po sandbox refused connections:\n{}",
            groups
                .iter()
                .map(|g| format!("- {}", line(g)))
                .collect::<Vec<_>>()
                .join("\n")
        )),
    }
}

/// What `req` asks of the feed: `None` when it is not for [`HOST`] (an ordinary request);
/// `Err` with the answer's text when it is, but not a feed request the proxy knows.
pub fn asked<B>(req: &Request<B>) -> Option<Result<Query, String>> {
    let uri = req.uri();
    let host = uri.host()?;
    if !host.eq_ignore_ascii_case(HOST) || req.method() == Method::CONNECT {
        return None;
    }
    if req.method() != Method::GET || uri.scheme_str() != Some("http") || uri.path() != "/denials" {
        return Some(Err(format!(
            "{HOST} answers only GET http://{HOST}/denials?after=<n>&wait=<seconds>"
        )));
    }
    let mut query = Query {
        after: None,
        wait: Duration::ZERO,
    };
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number = value.parse::<u64>().ok();
        match (key, number) {
            ("after", Some(n)) => query.after = Some(n),
            ("wait", Some(s)) => query.wait = Duration::from_secs(s).min(MAX_WAIT),
            _ => {
                return Some(Err(format!(
                    "{HOST}: {pair:?} is not after=<n> or wait=<seconds>"
                )));
            }
        }
    }
    Some(Ok(query))
}

/// `answer` as JSON.
pub fn respond(answer: &Answer) -> Response<ResponseBody> {
    let mut r = Response::new(full(serde_json::to_vec(answer).unwrap_or_default()));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

/// A refused feed request: `400` with `why`.
pub fn refuse(why: &str) -> Response<ResponseBody> {
    let mut r = Response::new(full(format!("{why}\n")));
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r
}

#[cfg(test)]
mod tests;
