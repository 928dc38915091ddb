//! One workspace's container: its id and paths, the spec (pure), the engine operations on it, a
//! command run in it (exec), a port forwarded
//! into it,
//! the `po/workspace-containers` service that adopts or creates it, the per-hub network, host
//! locks, and the inventory of every container a Po home owns.

pub(crate) mod clone;
pub(crate) mod container;
pub(crate) mod engine_mode;
pub(crate) mod exec;
pub(crate) mod feed;
pub(crate) mod firewall;
pub(crate) mod forward;
pub(crate) mod guards;
pub(crate) mod holder;
pub(crate) mod inventory;
pub(crate) mod known;
pub(crate) mod locks;
pub(crate) mod network;
pub(crate) mod prune;
pub(crate) mod review;
pub(crate) mod run_flags;
pub(crate) mod service;
pub(crate) mod spec;
pub(crate) mod workspace;
