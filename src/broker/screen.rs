//! The body screen on request bodies (the `none` and `allowlist` modes): a body whose shape is
//! not in the endpoint's allowlist ([`apis`], judged by [`shape`]) is refused with 403, and no
//! complete request carrying it ever reaches the upstream; memory stays bounded whatever the
//! body's size. The allowlist holds what a plain model call sends, so nothing forwarded can ask
//! the provider to fetch a URL, search or browse for the caller.
//!
//! How: the first [`HOLD`] bytes are read and scanned before the upstream is called, so a body
//! up to that size (nearly every model request) is refused with nothing sent at all. A longer
//! body is scanned as it streams, and its last byte is withheld until the scan reached the end:
//! a finding aborts the upstream request before its body is complete, so the provider never
//! holds a whole request to act on (an HTTP server acts on a request only once its body is
//! complete; a JSON body is not even parseable without its last byte).

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

use super::reply::BoxError;

pub mod apis;
pub mod shape;
use shape::{Finding, Grammar, ShapeScan};

/// How much of a body is read and scanned before the upstream is called.
pub const HOLD: usize = 1 << 20;

/// Where a refusal found while streaming is left for the request path to report.
pub type Verdict = Arc<OnceLock<Finding>>;

/// Why a body did not get past the screen before the upstream call.
#[derive(Debug)]
pub enum Stopped {
    /// The scan found this in the first [`HOLD`] bytes.
    Found(Finding),
    /// The client's body broke (went quiet, or the client went away).
    Broken(BoxError),
}

/// A body being screened: the bytes read ahead (scanned), then the rest scanned as it passes,
/// its last byte held back until the scan reached the end.
pub struct Screened<B> {
    ready: VecDeque<Bytes>,
    inner: Option<B>,
    scan: ShapeScan,
    held: Option<Bytes>,
    verdict: Verdict,
}

/// Reads and scans up to [`HOLD`] bytes of `body` against `grammar` (`None`: the endpoint takes
/// no body); the body to send when nothing was found.
pub async fn screen<B>(
    mut body: B,
    grammar: Option<&'static Grammar>,
    verdict: Verdict,
) -> Result<Screened<B>, Stopped>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let mut scan = ShapeScan::new(grammar);
    let mut ready = VecDeque::new();
    let mut read = 0usize;
    let mut ended = false;
    while read <= HOLD {
        match body.frame().await {
            None => {
                ended = true;
                break;
            }
            Some(Err(e)) => return Err(Stopped::Broken(e)),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if let Some(found) = scan.feed(&data) {
                    return Err(Stopped::Found(found.clone()));
                }
                read += data.len();
                ready.push_back(data);
            }
        }
    }
    if ended {
        if let Some(found) = scan.finish() {
            return Err(Stopped::Found(found.clone()));
        }
        return Ok(Screened {
            ready,
            inner: None,
            scan,
            held: None,
            verdict,
        });
    }
    let held = hold_last(&mut ready);
    Ok(Screened {
        ready,
        inner: Some(body),
        scan,
        held,
        verdict,
    })
}

/// Takes the last byte off the queued bytes.
fn hold_last(ready: &mut VecDeque<Bytes>) -> Option<Bytes> {
    while let Some(last) = ready.pop_back() {
        if last.is_empty() {
            continue;
        }
        let cut = last.len() - 1;
        if cut > 0 {
            ready.push_back(last.slice(..cut));
        }
        return Some(last.slice(cut..));
    }
    None
}

impl<B> Body for Screened<B>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        use std::task::Poll;
        let this = &mut *self;
        loop {
            if let Some(data) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            let Some(inner) = this.inner.as_mut() else {
                return Poll::Ready(this.held.take().map(|b| Ok(Frame::data(b))));
            };
            match std::pin::Pin::new(inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if let Some(found) = this.scan.feed(&data).cloned() {
                        return Poll::Ready(Some(Err(this.refuse(found))));
                    }
                    // The new bytes go out after the held one, their own last byte held.
                    this.ready.extend(this.held.take());
                    this.ready.push_back(data);
                    this.held = hold_last(&mut this.ready);
                }
                Poll::Ready(None) => {
                    this.inner = None;
                    if let Some(found) = this.scan.finish().cloned() {
                        this.held = None;
                        return Poll::Ready(Some(Err(this.refuse(found))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_none() && self.ready.is_empty() && self.held.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let queued: usize = self.ready.iter().map(Bytes::len).sum::<usize>()
            + self.held.as_ref().map_or(0, Bytes::len);
        let queued = queued as u64;
        match &self.inner {
            None => SizeHint::with_exact(queued),
            Some(inner) => {
                let rest = inner.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower() + queued);
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper + queued);
                }
                hint
            }
        }
    }
}

impl<B> Screened<B> {
    /// Records the finding for the request path and ends the upstream body with an error.
    fn refuse(&mut self, found: Finding) -> BoxError {
        let why = format!("the request body is refused: {}", found.describe(None));
        let _ = self.verdict.set(found);
        self.inner = None;
        self.ready.clear();
        why.into()
    }
}

/// Boxes a screened body for the upstream client.
pub fn boxed<B>(body: Screened<B>) -> http_body_util::combinators::BoxBody<Bytes, BoxError>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin + Send + Sync + 'static,
{
    body.boxed()
}

#[cfg(test)]
mod tests;
