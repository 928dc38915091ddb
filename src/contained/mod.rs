//! What runs inside a sandbox container: who am I (identity), how model calls reach the host's
//! broker (the loopback bridge), how provider base URLs are re-pointed at it (rebase), and the
//! help skill that tells a contained session's agent what its sandbox is (help).

pub(crate) mod bridge;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod help;
pub(crate) mod identity;
pub(crate) mod rebase;
