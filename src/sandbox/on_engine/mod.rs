//! What runs on the engine, one kind of thing a module: the workspace container
//! ([`container`]), its network namespace holder and rules helper ([`holder`]), the per-hub
//! network ([`network`]), a command run in a container ([`exec`]), a forwarded port
//! ([`forward`]), the owner's containers listed ahead of start-up ([`known`]), every sandbox
//! container of a Po home ([`inventory`]), [`prune`], the fill of a clone-mode copy
//! ([`fill`]), and the parts a remote engine's container carries in volumes ([`carried`]). Each talks to the engine through [`EngineApi`](crate::engine::EngineApi) only.

pub(in crate::sandbox) mod carried;
pub(in crate::sandbox) mod container;
pub(in crate::sandbox) mod exec;
pub(in crate::sandbox) mod fill;
pub(in crate::sandbox) mod forward;
pub(in crate::sandbox) mod holder;
pub(in crate::sandbox) mod inventory;
pub(in crate::sandbox) mod known;
pub(in crate::sandbox) mod network;
pub(in crate::sandbox) mod prune;

pub(crate) use container::LiveContainer;
pub(crate) use exec::spawner::unusable as spawners_unusable;
pub(crate) use exec::{Deadline, check_command as check_exec_command};
pub(crate) use forward::{ForwardEnd, ForwardInfo, PortForward, check_ports};
pub(crate) use inventory::{
    SandboxRow, add_forwards, list as list_sandboxes, stop as stop_sandboxes,
};
pub(crate) use known::{KnownContainers, inspect_workspace, read_ahead};
#[cfg(test)]
pub(crate) use network::ensure as ensure_network;
pub(crate) use network::per_hub as per_hub_networks;
pub(crate) use prune::{PruneAsk, PruneReport, grace as prune_grace, prune};
