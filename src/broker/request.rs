//! The request rules, each a pure step over what the client sent that either passes or returns a
//! typed [`Refusal`]: method, target, framing headers, the auth header, token placement and the
//! credentials. The server runs them in that order before anything is forwarded.

use std::collections::HashSet;

use hyper::header::HeaderMap;
use hyper::{StatusCode, Uri};
use sha2::{Digest, Sha256};

use super::decode::{DECODE_DEPTH, decodings};
use super::framing::FramingFault;
use super::headers::AUTH_HEADERS;
use super::limits::PER_GRANT_CONNECTIONS;
use super::routes::{AuthScheme, ProviderRoute};
use super::secret::Secret;

/// The methods the providers' APIs use; any other is refused (`TRACE` would echo the injected
/// key back, `CONNECT` would open a tunnel).
pub const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/// Every token ends in this many lower-case hex digits (256 random or HMAC bits).
pub const TOKEN_TAIL: usize = 64;

/// What is wrong with a request path, after full percent-decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathFault {
    /// `//` anywhere: a URL resolver reads `//host` as another host.
    DoubleSlash,
    /// `\`, which some servers read as `/`.
    Backslash,
    /// A `.` or `..` segment (also `..;params`), which climbs out of an upstream's path prefix.
    DotSegment,
    /// A control character, a space or a non-ASCII byte (overlong and full-width dots).
    Character,
    /// Percent-encoding nested deeper than [`DECODE_DEPTH`].
    NestedEncoding,
}

impl PathFault {
    fn describe(self) -> &'static str {
        match self {
            PathFault::DoubleSlash => "'//'",
            PathFault::Backslash => "'\\'",
            PathFault::DotSegment => "a '.' or '..' segment",
            PathFault::Character => "a control, space or non-ASCII character",
            PathFault::NestedEncoding => "percent-encoding nested more than 3 deep",
        }
    }
}

/// Why the broker refuses a request: each carries its status and a message that never holds a
/// token, a key or the request's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A method outside [`METHODS`].
    Method,
    /// Absolute-form, authority-form or `*`: only `/<provider>/…` is served.
    NotOriginForm,
    /// The path breaks a [`PathFault`] rule.
    Path(PathFault),
    /// The connection's bytes broke a framing rule.
    Framing(FramingFault),
    /// The first path segment names no provider the broker carries.
    UnknownProvider,
    /// Two auth headers, or one twice.
    AuthRepeated,
    /// A live token outside the one auth header.
    TokenElsewhere,
    /// No auth header.
    NoCredentials(&'static str),
    /// An auth header this provider does not take.
    WrongAuthHeader(&'static str, &'static str),
    /// The auth header does not have its scheme's form.
    MalformedCredentials,
    /// The token is not a live grant for this provider (or this socket).
    NotLive(&'static str),
    /// This grant already has its share of connections open.
    TooManyConnections,
}

impl Refusal {
    /// The HTTP status the client gets.
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::Method => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::Framing(FramingFault::HeadTooLarge) => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            Refusal::NotOriginForm
            | Refusal::Path(_)
            | Refusal::Framing(_)
            | Refusal::AuthRepeated
            | Refusal::TokenElsewhere => StatusCode::BAD_REQUEST,
            Refusal::UnknownProvider => StatusCode::NOT_FOUND,
            Refusal::NoCredentials(_)
            | Refusal::WrongAuthHeader(..)
            | Refusal::MalformedCredentials
            | Refusal::NotLive(_) => StatusCode::UNAUTHORIZED,
            Refusal::TooManyConnections => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// What the client (and the audit) is told.
    pub fn message(self) -> String {
        match self {
            Refusal::Method => format!(
                "the request method is not one the broker forwards ({})",
                METHODS.join(", ")
            ),
            Refusal::NotOriginForm => {
                "absolute-form request targets are refused: paths are /<provider>/...".into()
            }
            Refusal::Path(fault) => format!(
                "the request path contains {} (checked after percent-decoding; '//', '\\', '.' and '..' are refused in any form)",
                fault.describe()
            ),
            Refusal::Framing(fault) => fault.describe().into(),
            Refusal::UnknownProvider => "unknown provider: paths are /<provider>/...".into(),
            Refusal::AuthRepeated => "more than one auth header".into(),
            Refusal::TokenElsewhere => "a broker token appears outside the auth header".into(),
            Refusal::NoCredentials(p) => format!("no {p} credentials"),
            Refusal::WrongAuthHeader(p, h) => format!("{p} does not take credentials in {h}"),
            Refusal::MalformedCredentials => "malformed credentials".into(),
            Refusal::NotLive(p) => format!("the {p} token is not a live grant for it"),
            Refusal::TooManyConnections => {
                format!("this grant already has {PER_GRANT_CONNECTIONS} connections open")
            }
        }
    }

    /// Whether the connection must close after the answer (its framing cannot be trusted).
    pub fn closes(self) -> bool {
        matches!(self, Refusal::Framing(_) | Refusal::TooManyConnections)
    }
}

/// Step 1: the method is one the providers use (exact, upper case).
pub fn method(method: &str) -> Result<(), Refusal> {
    METHODS
        .contains(&method)
        .then_some(())
        .ok_or(Refusal::Method)
}

/// The method as the audit records it: a refused method may be anything, even a token.
pub fn audited_method(method: &str) -> &str {
    if METHODS.contains(&method) {
        method
    } else {
        "(other)"
    }
}

/// Step 2: the target is origin-form and its path is clean in every encoding.
pub fn target(uri: &Uri) -> Result<(), Refusal> {
    if uri.scheme().is_some() || uri.authority().is_some() || !uri.path().starts_with('/') {
        return Err(Refusal::NotOriginForm);
    }
    path(uri.path()).map_err(Refusal::Path)
}

/// A path's rules: fully percent-decoded (at most [`DECODE_DEPTH`] deep), it has no `//`, no
/// `\`, no `.`/`..` segment, also with each segment's `;parameters` stripped, and only printable
/// ASCII.
pub fn path(path: &str) -> Result<(), PathFault> {
    let (layers, deeper) = decodings(path.as_bytes(), DECODE_DEPTH + 1);
    if deeper {
        return Err(PathFault::NestedEncoding);
    }
    // Every layer is checked: an upstream may decode any number of times.
    for layer in &layers {
        if layer.iter().any(|b| !(0x21..=0x7e).contains(b)) {
            return Err(PathFault::Character);
        }
        if layer.contains(&b'\\') {
            return Err(PathFault::Backslash);
        }
        if layer.windows(2).any(|w| w == b"//") {
            return Err(PathFault::DoubleSlash);
        }
        // Each segment without its `;parameters`, as a server that strips them reads it.
        let bare: Vec<&[u8]> = layer
            .split(|b| *b == b'/')
            .map(|segment| segment.split(|b| *b == b';').next().unwrap_or_default())
            .collect();
        if bare.iter().any(|s| *s == b"." || *s == b"..") {
            return Err(PathFault::DotSegment);
        }
        if bare.join(&b'/').windows(2).any(|w| w == b"//") {
            return Err(PathFault::DoubleSlash);
        }
    }
    Ok(())
}

/// Step 3: framing as hyper parsed it (the connection's bytes are checked by
/// [`super::framing::Framing`] too): one Content-Length at most, never with Transfer-Encoding.
pub fn framing_headers(headers: &HeaderMap) -> Result<(), Refusal> {
    let lengths = headers
        .get_all(hyper::header::CONTENT_LENGTH)
        .iter()
        .count();
    let chunked = headers.contains_key(hyper::header::TRANSFER_ENCODING);
    if lengths > 0 && chunked {
        return Err(Refusal::Framing(FramingFault::LengthAndChunked));
    }
    if lengths > 1 {
        return Err(Refusal::Framing(FramingFault::LengthRepeated));
    }
    Ok(())
}

/// Step 4: at most one auth header, given once; its name when there is one.
pub fn auth_header(headers: &HeaderMap) -> Result<Option<&'static str>, Refusal> {
    let mut present = AUTH_HEADERS
        .iter()
        .copied()
        .filter(|h| headers.contains_key(*h));
    let first = present.next();
    if present.next().is_some() || first.is_some_and(|h| headers.get_all(h).iter().count() > 1) {
        return Err(Refusal::AuthRepeated);
    }
    Ok(first)
}

/// Step 5: no live token outside the auth header: not in the method, the target (as sent and
/// decoded), a header name, or any other header's value.
pub fn token_placement(
    tokens: &TokenIndex,
    method: &str,
    target: &str,
    headers: &HeaderMap,
    auth: Option<&str>,
) -> Result<(), Refusal> {
    let elsewhere = tokens.appears_in(method.as_bytes())
        || tokens.appears_in(target.as_bytes())
        || headers.iter().any(|(name, value)| {
            tokens.appears_in(name.as_str().as_bytes())
                || (Some(name.as_str()) != auth && tokens.appears_in(value.as_bytes()))
        });
    if elsewhere {
        Err(Refusal::TokenElsewhere)
    } else {
        Ok(())
    }
}

/// Step 6: the credentials, in one of this provider's schemes.
pub fn credentials(
    route: &'static ProviderRoute,
    headers: &HeaderMap,
    auth: Option<&'static str>,
) -> Result<(AuthScheme, Secret), Refusal> {
    let header = auth.ok_or(Refusal::NoCredentials(route.id))?;
    let scheme = route
        .auth
        .iter()
        .copied()
        .find(|a| a.header() == header)
        .ok_or(Refusal::WrongAuthHeader(route.id, header))?;
    let token = headers
        .get(header)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| scheme.decode(v))
        .ok_or(Refusal::MalformedCredentials)?;
    Ok((scheme, Secret::new(token)))
}

/// The path as the audit and the logs may show it: in full once it passed the token check,
/// before that only the provider segment (a refused path may hold anything).
pub fn audited_path(path: &str, provider: Option<&str>, checked: bool) -> String {
    match (checked, provider) {
        (true, _) => path.to_string(),
        (false, Some(p)) => format!("/{p}/…"),
        (false, None) => "/…".into(),
    }
}

/// The live tokens, by the SHA-256 of their hex tails, so a request can be searched for any of
/// them in one pass whatever their number: a token appears wherever its 64-hex tail does (in any
/// case, percent-encoded up to [`DECODE_DEPTH`] deep), with or without its prefix.
#[derive(Default)]
pub struct TokenIndex {
    tails: HashSet<[u8; 32]>,
}

impl TokenIndex {
    /// The index key of a token's tail; `None` for a token without a hex tail.
    pub fn key(token: &str) -> Option<[u8; 32]> {
        let tail = token.get(token.len().checked_sub(TOKEN_TAIL)?..)?;
        let bytes = hex::decode(tail.to_ascii_lowercase()).ok()?;
        Some(Sha256::digest(bytes).into())
    }

    pub fn insert(&mut self, key: [u8; 32]) {
        self.tails.insert(key);
    }

    pub fn remove(&mut self, key: &[u8; 32]) {
        self.tails.remove(key);
    }

    /// Whether a live token's tail appears in `hay`, as is or percent-decoded.
    pub fn appears_in(&self, hay: &[u8]) -> bool {
        if self.tails.is_empty() {
            return false;
        }
        let (layers, _) = decodings(hay, DECODE_DEPTH + 2);
        layers.iter().any(|layer| self.tail_in(layer))
    }

    /// Every run of 64 hex digits in `hay`, looked up.
    fn tail_in(&self, hay: &[u8]) -> bool {
        hay.split(|b| !b.is_ascii_hexdigit())
            .filter(|run| run.len() >= TOKEN_TAIL)
            .any(|run| {
                run.windows(TOKEN_TAIL).any(|w| {
                    let lower = w.to_ascii_lowercase();
                    hex::decode(lower)
                        .map(|bytes| {
                            self.tails
                                .contains(&<[u8; 32]>::from(Sha256::digest(bytes)))
                        })
                        .unwrap_or(false)
                })
            })
    }
}

#[cfg(test)]
mod tests;
