//! Leaf names every layer shares: workspace ids, environment variable names and the paths
//! inside a container. Nothing here imports from above the error type.

pub(crate) mod ids;
pub(crate) mod network;
pub(crate) mod paths;
pub(crate) mod vars;
