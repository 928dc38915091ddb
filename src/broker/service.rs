//! What the service routes (git, the registries) share: the rules they run before anything
//! else, as the model routes do, and how a request's placeholder is found live.

use hyper::Request;
use hyper::body::Incoming;
use subtle::ConstantTimeEq;

use super::request::{self, Refusal};
use super::server::{Broker, Connection, TokenEntry, hash};
use crate::lock::ReadWriteLocked;

impl Broker {
    /// The rules a service route (git, a registry) runs before anything else, as the model
    /// routes do: framing, one of `methods` (else `405` with `wrong_method`), an origin-form
    /// target, framing headers, one auth header, and no live token outside it (checked before
    /// anything of the request is echoed). The auth header's name, when there is one.
    pub(super) fn service_rules(
        &self,
        req: &Request<Incoming>,
        connection: &Connection,
        (methods, wrong_method): (&[&str], &str),
    ) -> std::result::Result<Option<&'static str>, (hyper::StatusCode, String, bool)> {
        let refused = |r: Refusal| (r.status(), r.message(), r.closes());
        if let Some(fault) = connection.fault.get() {
            return Err(refused(Refusal::Framing(fault)));
        }
        let method = req.method().as_str();
        if !methods.contains(&method) {
            let status = hyper::StatusCode::METHOD_NOT_ALLOWED;
            return Err((status, wrong_method.to_string(), false));
        }
        request::target(req.uri()).map_err(refused)?;
        let headers = req.headers();
        request::framing_headers(headers).map_err(refused)?;
        let auth = request::auth_header(headers).map_err(refused)?;
        let tokens = self.inner.tokens.read_locked();
        let whole = req.uri().path_and_query().map_or("", |pq| pq.as_str());
        request::token_placement(&tokens.index, method, whole, headers, auth).map_err(refused)?;
        Ok(auth)
    }

    /// The grant whose placeholder `token` is, when its entry is of the route's kind (`kind`)
    /// and, on a grant's own socket (`scope`), that grant's.
    pub(super) fn live_service_grant(
        &self,
        token: &str,
        scope: Option<&str>,
        kind: fn(&TokenEntry) -> bool,
    ) -> Option<String> {
        let tokens = self.inner.tokens.read_locked();
        let e = tokens.by_hash.get(&hash(token))?;
        (kind(e)
            && bool::from(e.token.expose().as_bytes().ct_eq(token.as_bytes()))
            && scope.is_none_or(|s| s == e.grant))
        .then(|| e.grant.clone())
    }
}

/// The password of a Basic auth value (`Basic base64(user:password)`).
pub fn basic_password(value: &str) -> Option<String> {
    let b64 = value.strip_prefix("Basic ")?.trim();
    let bytes = super::git::credential::decode_base64(b64)?;
    let text = String::from_utf8(bytes).ok()?;
    let (_, password) = text.split_once(':')?;
    Some(password.to_string())
}
