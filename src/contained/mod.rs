//! What runs inside a sandbox container: who am I (identity), how model calls reach the host's
//! broker (the loopback bridge), and how provider base URLs are re-pointed at it (rebase).

pub(crate) mod bridge;
pub(crate) mod identity;
pub(crate) mod rebase;
