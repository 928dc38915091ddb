//! Header names the broker treats apart: the hop-by-hop ones, never forwarded, and those a
//! provider's key may travel in.

/// Never forwarded either way.
pub const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Every header any provider's key may travel in.
pub const AUTH_HEADERS: [&str; 4] = ["authorization", "x-api-key", "x-goog-api-key", "api-key"];
