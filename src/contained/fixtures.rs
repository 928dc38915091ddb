//! Test fixtures shared by the contained modules' tests: environments as a contained session
//! sees them.

use std::collections::HashMap;

/// An environment of `vars`.
pub(crate) fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A contained session on the socket route whose grant is the egress proxy alone (bridged to
/// its socket, no provider brokered), before the session sets `HTTPS_PROXY`.
pub(crate) const EGRESS_BRIDGED: [(&str, &str); 5] = [
    ("PO_SANDBOX", "1"),
    ("PO_WORKSPACE", "acme"),
    ("PO_BROKER_PROVIDERS", ""),
    ("PO_BROKER_SOCKET", "/run/po-broker/broker.sock"),
    ("PO_BROKER_EGRESS_SOCKET", "/run/po-broker/egress.sock"),
];
