//! The loopback bridge (being written).
