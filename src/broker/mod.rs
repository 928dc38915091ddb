//! The host-side credential broker: grants, routes and the request path that swaps a
//! per-grant token for the real key.

pub mod routes;
