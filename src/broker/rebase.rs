//! Re-pointing provider base URLs at the broker (being written).
