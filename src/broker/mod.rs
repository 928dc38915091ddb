//! The host-side credential broker: grants, routes and the request path that swaps a
//! per-grant token for the real key; and the container-side loopback bridge.

pub mod bridge;
pub mod rebase;
pub mod routes;
pub mod secret;
pub mod server;
