//! What the broker sends back: the boxed body every answer has ([`ResponseBody`], failing with
//! a [`BoxError`], as request bodies on their way upstream do), why a request was refused or
//! failed ([`Failure`]), and the broker's own answer for it ([`plain`]).

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderValue;
use hyper::{Response, StatusCode};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type ResponseBody = BoxBody<Bytes, BoxError>;

/// Why a request is refused or failed: the status and the message (no key, no token).
pub struct Failure(pub StatusCode, pub String);

/// A whole body, as an answer carries it.
pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// The broker's own answer: JSON `{"error":{"type":"po_broker","message":…}}`.
pub fn plain(status: StatusCode, message: &str) -> Response<ResponseBody> {
    let body = format!(
        "{{\"error\":{{\"type\":\"po_broker\",\"message\":{}}}}}\n",
        serde_json::Value::String(message.to_string())
    );
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A service route's own answer: `why` as text; a `401` carries a Basic challenge for
/// `realm` (so the client asks its helper for the placeholder); `closes`: the connection ends.
pub fn said(
    status: StatusCode,
    why: &str,
    closes: bool,
    realm: &'static str,
) -> Response<ResponseBody> {
    let mut r = Response::new(full(format!("{why}\n")));
    *r.status_mut() = status;
    let headers = r.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static(realm),
        );
    }
    if closes {
        headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}
