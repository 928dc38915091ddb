//! The host-side credential broker: grants, the curated provider routes, and the request path
//! that swaps a per-grant token for the real key. The modules are layered: each imports only
//! modules listed after it (apart from [`grant`], which adds to the server's [`server::Broker`]).
//!
//! - [`server`]: the broker's state, its connections and the request path.
//! - [`grant`]: choosing providers, minting tokens, opening a route.
//! - [`git`]: the git route (git over HTTPS with the host's credential, pushes judged by rules;
//!   like [`grant`], it adds to the server's [`server::Broker`]); [`registry`]: npm registries
//!   and a Python index with the host's credential, a route of their own each (the same).
//! - [`egress`]: the allowlist mode's forward proxy, a second socket per grant.
//! - [`forward`]: the key swap, the upstream call and the streamed answer.
//! - [`policy`]: which paths are forwarded for a provider; [`screen`]: the body screen of the
//!   `none` and `allowlist` modes.
//! - [`request`]: the request rules, each a pure step with a typed refusal.
//! - [`framing`]: the connection's bytes followed request by request.
//! - [`audit`]: the audit events and their listeners; [`reply`]: the answer body and
//!   [`reply::Failure`]; [`limits`]: timeouts and connection counts; [`headers`]: hop-by-hop
//!   and auth header names; [`decode`]: percent-decoding.
//! - [`routes`]: the providers the broker carries; [`secret`]: keys and tokens in memory;
//!   [`socket`]: a grant's Unix socket.

pub(crate) mod audit;
pub(crate) mod decode;
pub(crate) mod egress;
pub(crate) mod forward;
pub(crate) mod framing;
pub(crate) mod git;
pub(crate) mod grant;
pub(crate) mod headers;
pub(crate) mod limits;
pub(crate) mod policy;
pub(crate) mod registry;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod routes;
pub(crate) mod screen;
pub(crate) mod secret;
pub(crate) mod server;
pub(crate) mod service;
pub(crate) mod socket;
#[cfg(all(test, unix))]
pub(crate) mod test_support;
