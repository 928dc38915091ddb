//! One workspace's container, in four wings, each behind its facade (its `mod.rs`): outside
//! this folder, code imports a wing's names, never a module inside one.
//!
//! ```text
//! service      po/workspace-containers: adopt, create, stop, grants, forwards, the engine's
//!   |          event feed; composes the three wings below
//!   v
//! on_engine    what runs on the engine: the workspace container, its namespace holder and
//!   |          rules helper, the per-hub network, exec, forwarded ports, the read-ahead list,
//!   |          the inventory, prune, the fill of a clone-mode copy
//!   v
//! blueprint    what a container is to be, pure: the spec and its posture check, run flags,
//!   |          what the engine mode changes, the egress modes and nft rules
//!   v
//! folder       host-side work on the person's folder: workspace ids and paths, host locks,
//!              guarded paths and git's indirections, review, the host side of clone mode
//! ```
//!
//! Arrows run down only: a wing uses the ones below it, never one above.

pub(crate) mod blueprint;
pub(crate) mod folder;
pub(crate) mod on_engine;
pub(crate) mod service;
