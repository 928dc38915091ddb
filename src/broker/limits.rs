//! The broker's bounds in time and in connections, shared by its request path and its egress
//! proxy.

use std::time::Duration;

/// Longer than pi's 300 s request timeout, so a slow stream is never cut by the broker.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(330);
/// How long a request head may take to arrive, counted from when the broker waits for one (a
/// new connection, or an idle keep-alive one): a head trickled in byte by byte is cut here.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections one grant may have open at once (its socket; on the TCP port, those its tokens
/// authenticated): one container cannot starve another.
pub const PER_GRANT_CONNECTIONS: usize = 64;
/// Connections the shared TCP port serves at once before a request authenticates them.
pub const MAX_TCP_CONNECTIONS: usize = 512;
