//! The host-side credential broker: grants, the curated provider routes, and the request path
//! that swaps a per-grant token for the real key.

pub(crate) mod routes;
pub(crate) mod secret;
pub(crate) mod server;
