//! What the engine in use changes about every container, decided once per hub from the engine
//! report and the broker route (pure): rootless Podman maps the hub's user to itself
//! (`keep-id`), a rootless engine on cgroup v1 cannot enforce the pid, memory and CPU limits,
//! and the forced TCP broker route on rootless Podman reaches the host's loopback through
//! slirp4netns instead of the per-hub network.

use crate::broker::server::RouteKind;
pub(crate) use crate::names::vars::ROUTE_VAR;

/// The broker route the provider gives its containers (`brokerTransport`,
/// `PO_SANDBOX_BROKER_TRANSPORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouteChoice {
    /// A socket of its own on a native Linux engine, TCP on a VM engine and on Windows.
    #[default]
    Auto,
    /// Always the bind-mounted Unix socket.
    Socket,
    /// Always the broker's loopback TCP port.
    Tcp,
}

impl RouteChoice {
    /// `auto` (also empty or absent), `socket` or `tcp`; `OPTIONS_INVALID` naming `option`
    /// otherwise.
    pub fn parse(value: Option<&str>, option: &str) -> crate::error::Result<RouteChoice> {
        match value.map(str::trim) {
            None | Some("") | Some("auto") => Ok(RouteChoice::Auto),
            Some("socket") => Ok(RouteChoice::Socket),
            Some("tcp") => Ok(RouteChoice::Tcp),
            Some(other) => Err(crate::error::Error::OptionsInvalid {
                option: option.into(),
                reason: format!("{other:?} is not 'auto', 'socket' or 'tcp'"),
            }),
        }
    }

    /// The route on `os` with an engine in a VM (`vm`) or native.
    pub fn route(self, os: crate::host::HostOs, vm: bool) -> RouteKind {
        match self {
            RouteChoice::Auto => crate::broker::grant::route_for(os, vm),
            RouteChoice::Socket => RouteKind::Socket,
            RouteChoice::Tcp => RouteKind::Tcp,
        }
    }
}

/// How containers are networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkMode {
    /// The owner's bridge network `po-net-<owner>` (see `network.rs`).
    #[default]
    PerHub,
    /// Rootless Podman's slirp4netns with `allow_host_loopback=true`: the container reaches
    /// the host's 127.0.0.1 as [`SLIRP_HOST_ADDRESS`], where the broker's TCP port listens.
    SlirpHostLoopback,
}

/// The engine network mode of [`NetworkMode::SlirpHostLoopback`].
pub const SLIRP_HOST_LOOPBACK: &str = "slirp4netns:allow_host_loopback=true";
/// The address slirp4netns gives the host's loopback inside the container.
pub const SLIRP_HOST_ADDRESS: &str = "10.0.2.2";

/// What the engine changes about every container of this hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineMode {
    /// Map the hub's uid and gid to themselves in the container's user namespace (Podman's
    /// `keep-id`), so what the container writes is the user's on the host.
    pub keep_id: bool,
    /// The engine enforces the pid, memory and CPU limits.
    pub limits_enforced: bool,
    /// How the container is networked.
    pub network: NetworkMode,
}

impl Default for EngineMode {
    /// Rootful: no user mapping, limits enforced, the per-hub network.
    fn default() -> Self {
        EngineMode {
            keep_id: false,
            limits_enforced: true,
            network: NetworkMode::PerHub,
        }
    }
}

impl EngineMode {
    /// The mode for an engine (`podman` or not, `rootless` or not, in a VM (`vm`) or native, on
    /// cgroup `cgroup_version` as its info gives it: `1`, `2`, libpod's `v1`/`v2`, or empty when
    /// unknown) with the broker route `route` (`None`: no broker). keep-id and slirp4netns are
    /// for a native rootless Podman only: a Podman machine's containers reach the host through
    /// its VM's gateway, and its files through the VM's sharing.
    pub fn decide(
        podman: bool,
        rootless: bool,
        vm: bool,
        cgroup_version: &str,
        route: Option<RouteKind>,
    ) -> EngineMode {
        let native_rootless_podman = podman && rootless && !vm;
        EngineMode {
            keep_id: native_rootless_podman,
            limits_enforced: limits_enforceable(rootless, cgroup_version),
            network: network_mode(native_rootless_podman, route),
        }
    }

    /// The `--add-host` entry by which a TCP route's container reaches the host:
    /// `host.docker.internal:host-gateway` on the per-hub network (VM engines map the gateway
    /// to the host), `host.docker.internal:10.0.2.2` through slirp4netns.
    pub fn broker_host_entry(&self) -> String {
        let host = crate::broker::server::CONTAINER_HOST;
        match self.network {
            NetworkMode::PerHub => format!("{host}:host-gateway"),
            NetworkMode::SlirpHostLoopback => format!("{host}:{SLIRP_HOST_ADDRESS}"),
        }
    }

    /// Why the limits are not enforced and how to have them, when they are not.
    pub fn limits_warning(&self) -> Option<String> {
        (!self.limits_enforced).then(|| UNENFORCED_LIMITS.to_string())
    }
}

/// The warning for a rootless engine on cgroup v1.
pub const UNENFORCED_LIMITS: &str = "the engine runs rootless on cgroup v1, which cannot \
     enforce the pid, memory and CPU limits: containers run without them. Fix: boot with \
     cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate the pids, memory and cpu \
     controllers to the user (Delegate=yes for user@.service)";

/// A rootless engine on cgroup v1 cannot set limits (it has no cgroup of its own to write).
pub fn limits_enforceable(rootless: bool, cgroup_version: &str) -> bool {
    !(rootless && cgroup_version.trim_start_matches('v') == "1")
}

/// The one decision about networking for the broker route: the TCP route on a native rootless
/// Podman uses slirp4netns with the host's loopback allowed (a bridge network's gateway is not
/// the host's loopback, where the broker listens); everything else the per-hub network.
pub fn network_mode(native_rootless_podman: bool, route: Option<RouteKind>) -> NetworkMode {
    if native_rootless_podman && route == Some(RouteKind::Tcp) {
        NetworkMode::SlirpHostLoopback
    } else {
        NetworkMode::PerHub
    }
}

#[cfg(test)]
mod tests;
