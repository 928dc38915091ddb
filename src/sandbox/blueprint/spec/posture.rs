//! Posture checks: adoption compares a live container's inspect data against the spec
//! ([`check_posture`]), and a person reads it as a [`ContainerPosture`].

use super::build::ContainerSpec;
use crate::sandbox::blueprint::firewall::{self, NetworkMode};

/// What adoption reads from a live container's inspect data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LivePosture {
    /// `HostConfig.CapDrop`.
    pub cap_drop: Vec<String>,
    /// `HostConfig.CapAdd`.
    pub cap_add: Vec<String>,
    /// `HostConfig.Privileged`.
    pub privileged: bool,
    /// `HostConfig.SecurityOpt`.
    pub security_opt: Vec<String>,
    /// `HostConfig.PidsLimit`.
    pub pids_limit: Option<i64>,
    /// `Config.User`.
    pub user: String,
    /// `HostConfig.NetworkMode`, `PidMode`, `IpcMode`, `UsernsMode`.
    pub namespaces: Vec<(String, String)>,
    /// `Mounts`: (type, source or volume name, destination, read-write).
    pub mounts: Vec<(String, String, String, bool)>,
    /// `HostConfig.PortBindings`: (container port spec, host ip).
    pub ports: Vec<(String, String)>,
    /// `HostConfig.Devices` count.
    pub devices: usize,
    /// `po.spec-hash` label.
    pub spec_hash: Option<String>,
    /// `HostConfig.Runtime` (empty: the engine's default).
    pub runtime: String,
    /// `HostConfig.Tmpfs` mount points.
    pub tmpfs: Vec<String>,
    /// The `po.run-flags` label, split.
    pub run_flags: Vec<String>,
    /// `HostConfig.Memory` (0: none).
    pub memory: i64,
    /// `HostConfig.MemorySwap`: memory and swap together (0: not reported, -1: unlimited).
    pub memory_swap: i64,
    /// `HostConfig.NanoCpus`, or `CpuQuota` / `CpuPeriod` in billionths (0: none).
    pub nano_cpus: i64,
    /// `HostConfig.CpuShares` (0: the engine's default).
    pub cpu_shares: i64,
    /// `HostConfig.ReadonlyRootfs`.
    pub read_only_root: bool,
    /// `Config.Healthcheck.Test` (empty: none).
    pub health_test: Vec<String>,
    /// The names of the networks in `NetworkSettings.Networks`.
    pub networks: Vec<String>,
    /// The namespace holder it joined (`container:<id>`), as the service read it.
    pub holder: Option<HolderPosture>,
    /// What its environment has the broker carry (see [`brokered_of`]).
    pub brokered: Vec<String>,
}

/// What adoption reads of a workspace's namespace holder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HolderPosture {
    /// Its id.
    pub id: String,
    /// It runs.
    pub running: bool,
    /// The host port it publishes for the server, on 127.0.0.1.
    pub host_port: Option<u16>,
    /// The networks it is on.
    pub networks: Vec<String>,
    /// Its port bindings: (container port spec, host ip).
    pub ports: Vec<(String, String)>,
    /// Its `po.net-mode` label.
    pub mode: Option<NetworkMode>,
    /// Its `po.net-rules` label.
    pub rules_hash: Option<String>,
    /// Its `po.net-shape` label (absent on holders made before it).
    pub rules_shape: Option<String>,
    /// The ruleset it carries (`PO_NET_RULES`), which its rules helper loads.
    pub rules: Option<String>,
    /// The broker's host name its rules resolve (`PO_NET_BROKER_HOST`, TCP routes).
    pub broker_host: Option<String>,
    /// When it last started (`State.StartedAt`): rules are loaded once per start.
    pub started_at: String,
    /// Its health (`State.Health.Status`): `healthy` while the rules' marker is refused.
    pub health: Option<String>,
    /// Its `CapAdd` (none).
    pub cap_add: Vec<String>,
    /// It runs privileged.
    pub privileged: bool,
}

/// The capabilities Docker and Podman grant by default: with none added, dropping all of these
/// leaves a container with none.
pub(super) const DEFAULT_CAPABILITIES: [&str; 14] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "NET_RAW",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// `CapDrop` says all: Docker keeps `ALL`; Podman lists every default capability it dropped.
fn drops_all_capabilities(cap_drop: &[String]) -> bool {
    let norm = |c: &str| {
        c.trim()
            .to_ascii_uppercase()
            .trim_start_matches("CAP_")
            .to_string()
    };
    let dropped: Vec<String> = cap_drop.iter().map(|c| norm(c)).collect();
    dropped.iter().any(|c| c == "ALL")
        || DEFAULT_CAPABILITIES
            .iter()
            .all(|d| dropped.iter().any(|c| c == d))
}

/// A mount as the engine reports it.
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountFact {
    /// The engine's mount type: `bind`, `volume` or `tmpfs` for a sandbox's own mounts; open,
    /// as the engine may report others (`npipe`, `cluster`, `image`).
    #[napi(ts_type = "'bind' | 'volume' | 'tmpfs' | (string & {})")]
    pub kind: String,
    /// The host path, or the volume's name.
    pub source: String,
    /// Where it is inside the container.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A container's security posture as the engine reports it (its live inspect data), for a
/// person to read (`po-sandbox up`).
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPosture {
    /// The `uid:gid` it runs as.
    pub user: String,
    /// Every capability is dropped and none added.
    pub no_capabilities: bool,
    /// It runs privileged.
    pub privileged: bool,
    /// `no-new-privileges` is set.
    pub no_new_privileges: bool,
    /// Its pid limit, when it has one.
    pub pids_limit: Option<i64>,
    /// Its network mode (`bridge`, a network's name…).
    pub network_mode: String,
    /// Its mounts.
    pub mounts: Vec<MountFact>,
    /// Its published ports, as `<host ip> -> <container port>`.
    pub published: Vec<String>,
    /// The ports this hub forwards into it now, as `127.0.0.1:<host port> -> <port>`: over
    /// the engine's exec, nothing published and no rule loosened (`containers.forwardPort`).
    pub forwarded: Vec<String>,
    /// Its OCI runtime (`runc`, `runsc`…), as the engine reports it; empty when the engine
    /// does not say.
    pub runtime: String,
    /// The run flags it was made with (`runFlags`, `PO_SANDBOX_RUN_FLAGS`).
    pub run_flags: Vec<String>,
    /// Its memory limit in bytes (0: none).
    pub memory: i64,
    /// Its CPU limit in billionths of a CPU (0: none).
    pub nano_cpus: i64,
    /// Its CPU shares (0: the engine's default, 1024).
    pub cpu_shares: i64,
    /// Its root file system is read-only.
    pub read_only_root: bool,
    /// It has an engine health check.
    pub health_check: bool,
    /// The networks it is on (the per-hub network's name), through its namespace holder.
    pub networks: Vec<String>,
    /// The egress mode its namespace holder's rules enforce (`open`, `none`, `allowlist`);
    /// absent when it has no holder.
    pub egress: Option<String>,
    /// The id of the namespace holder whose network it shares.
    pub network_holder: Option<String>,
    /// Why the layer's exec spawner cannot run in it, once an exec found so (a base image
    /// without `mkfifo`, for one): every exec then takes the engine's exec, about twice as
    /// slow, and launches no spawner. Absent while the spawner can run.
    pub exec_spawner: Option<String>,
    /// What the broker carries for it, from its environment: `providers <ids>`, `git <hosts>`,
    /// `registries <npm, npm @scope, pip>` (each present only when it has some).
    pub brokered: Vec<String>,
}

impl From<&LivePosture> for ContainerPosture {
    fn from(live: &LivePosture) -> Self {
        ContainerPosture {
            user: live.user.clone(),
            no_capabilities: check_capabilities_of(live),
            privileged: live.privileged,
            no_new_privileges: has_no_new_privileges(live),
            pids_limit: live.pids_limit,
            network_mode: live
                .namespaces
                .iter()
                .find(|(k, _)| k == "network")
                .map(|(_, v)| v.clone())
                .unwrap_or_default(),
            mounts: live
                .mounts
                .iter()
                .map(|(kind, source, target, rw)| MountFact {
                    kind: kind.clone(),
                    source: source.clone(),
                    target: target.clone(),
                    read_only: !rw,
                })
                .collect(),
            // Published by its namespace holder.
            forwarded: Vec::new(),
            published: live
                .holder
                .as_ref()
                .map_or(&live.ports, |h| &h.ports)
                .iter()
                .map(|(port, ip)| format!("{ip} -> {port}"))
                .collect(),
            runtime: live.runtime.clone(),
            run_flags: live.run_flags.clone(),
            memory: live.memory,
            nano_cpus: live.nano_cpus,
            cpu_shares: live.cpu_shares,
            read_only_root: live.read_only_root,
            health_check: !live.health_test.is_empty(),
            networks: live
                .holder
                .as_ref()
                .map_or_else(|| live.networks.clone(), |h| h.networks.clone()),
            egress: live
                .holder
                .as_ref()
                .and_then(|h| h.mode.map(|m| m.as_str().to_string())),
            network_holder: live.holder.as_ref().map(|h| h.id.clone()),
            // Not the engine's to say: the service reads the spawner's record.
            exec_spawner: None,
            brokered: live.brokered.clone(),
        }
    }
}

fn check_capabilities_of(live: &LivePosture) -> bool {
    drops_all_capabilities(&live.cap_drop) && live.cap_add.is_empty()
}

fn has_no_new_privileges(live: &LivePosture) -> bool {
    live.security_opt.iter().any(|o| {
        o == "no-new-privileges" || o == "no-new-privileges:true" || o == "no-new-privileges=true"
    })
}

/// Which posture check found a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostureCheckKind {
    /// All capabilities dropped, none added.
    Capabilities,
    /// The OCI runtime a `--runtime` run flag names.
    Runtime,
    /// The tmpfs mounts the spec asks for, and no others.
    Tmpfs,
    /// Not privileged, no new privileges.
    Privileges,
    /// A pid limit no higher than the spec's.
    PidsLimit,
    /// Memory and CPU limits, CPU shares.
    Limits,
    /// A read-only root file system.
    ReadOnlyRoot,
    /// The spec's engine health check.
    Health,
    /// Its namespace holder's network and rules.
    Network,
    /// The user it runs as.
    User,
    /// No namespace shared with the host.
    Namespaces,
    /// No host devices.
    Devices,
    /// Only the spec's mounts.
    Mounts,
    /// Every read-only mount of the spec, read-only.
    Guards,
    /// The spec's port only, on 127.0.0.1, through the holder.
    Ports,
    /// The `po.spec-hash` label.
    SpecHash,
}

// Short, for the checks below.
use PostureCheckKind as Kind;

impl PostureCheckKind {
    /// A drift this check found, described by `message`.
    fn drift(self, message: impl Into<String>) -> Drift {
        Drift {
            check: self,
            message: message.into(),
        }
    }
}

/// How a live container departs from the spec's posture: which check found it, and what a
/// person reads (the message is shown as is, after `was not adopted: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Drift {
    /// The check that found it.
    pub check: PostureCheckKind,
    /// What differs.
    pub message: String,
}

/// One posture rule: `Err` names the drift.
type PostureCheck = fn(&ContainerSpec, &LivePosture) -> Result<(), Drift>;

/// The posture rules, in the order drift is reported.
const POSTURE_CHECKS: [PostureCheck; 16] = [
    check_capabilities,
    check_runtime,
    check_tmpfs,
    check_privileges,
    check_pids_limit,
    check_limits,
    check_read_only_root,
    check_health,
    check_network,
    check_user,
    check_namespaces,
    check_devices,
    check_mounts,
    check_guards,
    check_ports,
    check_spec_hash,
];

/// Checks a live container against the spec's security posture. `Err` names the first drift.
pub fn check_posture(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    POSTURE_CHECKS
        .iter()
        .try_for_each(|check| check(spec, live))
}

/// All capabilities dropped, none added.
fn check_capabilities(_: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if !drops_all_capabilities(&live.cap_drop) {
        return Err(
            Kind::Capabilities.drift("it does not drop all capabilities (CapDrop lacks ALL)")
        );
    }
    if !live.cap_add.is_empty() {
        return Err(Kind::Capabilities.drift(format!(
            "it adds capabilities ({})",
            live.cap_add.join(", ")
        )));
    }
    Ok(())
}

/// The runtime a `--runtime` run flag names (none named: whatever the engine defaults to).
fn check_runtime(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    match &spec.run_flags.runtime {
        Some(r) if *r != live.runtime => Err(Kind::Runtime.drift(format!(
            "it runs on the runtime {:?}, not {r} (runFlags)",
            live.runtime
        ))),
        _ => Ok(()),
    }
}

/// Every tmpfs is one the spec asks for (the writable places, the run flags'), and each of
/// those is there.
fn check_tmpfs(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if let Some(t) = live.tmpfs.iter().find(|t| !spec.tmpfs.contains_key(*t)) {
        return Err(Kind::Tmpfs.drift(format!(
            "it has a tmpfs at {t} that the spec does not ask for"
        )));
    }
    match spec.tmpfs.keys().find(|t| !live.tmpfs.contains(*t)) {
        Some(t) => Err(Kind::Tmpfs.drift(format!("it has no tmpfs at {t}"))),
        None => Ok(()),
    }
}

/// The spec's memory, CPU and CPU-shares limits exactly (CIS 5.11, 5.12: a `docker update`
/// either way is drift), and no more swap than the engine's default of twice the memory (or
/// the `--memory-swap` run flag's).
fn check_limits(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if !spec.limits_enforced {
        return Ok(());
    }
    let l = &spec.limits;
    // (what, live, wanted): above the spec, or unset, reads as before; below it is named too.
    let differs = |(what, live, want): (&str, String, String), higher: Option<bool>| {
        let said = match higher? {
            true => format!("its {what} is {live}, not at most {want}"),
            false => format!("its {what} is {live}, lower than the spec's {want}"),
        };
        Some(Kind::Limits.drift(said))
    };
    let side = |live: i64, want: i64| (live != want).then_some(live <= 0 || live > want);
    let swap_limit = spec
        .run_flags
        .memory_swap
        .unwrap_or(l.memory.saturating_mul(2));
    let unlimited = |v: i64| v < 0;
    let swap = (!unlimited(swap_limit)
        && (unlimited(live.memory_swap) || live.memory_swap > swap_limit))
        .then(|| {
            Kind::Limits.drift(format!(
                "its memory and swap limit is {}, not at most {swap_limit} bytes",
                live.memory_swap
            ))
        });
    let shares = match live.cpu_shares {
        v if v <= 0 => Some(Kind::Limits.drift("its CPU shares are not set")),
        v if v != l.cpu_shares => Some(Kind::Limits.drift(format!(
            "its CPU shares are {v}, not the spec's {}",
            l.cpu_shares
        ))),
        _ => None,
    };
    let memory = (
        "memory limit",
        live.memory.to_string(),
        format!("{} bytes", l.memory),
    );
    let cpus = (
        "CPU limit",
        format!("{} billionths", live.nano_cpus),
        l.nano_cpus.to_string(),
    );
    match differs(memory, side(live.memory, l.memory))
        .or_else(|| differs(cpus, side(live.nano_cpus, l.nano_cpus)))
        .or(shares)
        .or(swap)
    {
        Some(drift) => Err(drift),
        None => Ok(()),
    }
}

/// A read-only root file system (CIS 5.13).
fn check_read_only_root(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if spec.read_only_root && !live.read_only_root {
        return Err(Kind::ReadOnlyRoot.drift("its root file system is writable"));
    }
    Ok(())
}

/// The spec's engine health check (CIS 5.27).
fn check_health(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if live.health_test.is_empty() {
        return Err(Kind::Health.drift("it has no health check"));
    }
    // Compared as one line: Podman re-splits the arguments on whitespace.
    if live.health_test.join(" ") != spec.health.test.join(" ") {
        return Err(Kind::Health.drift("its health check is not the spec's"));
    }
    Ok(())
}

/// In its namespace holder's network, which is on the per-hub network only, runs with no
/// capability and carries the rules of the spec's egress mode (the holder may be in an engine
/// network mode instead: slirp4netns for the forced TCP route on rootless Podman). Whether the
/// rules are loaded is the service's to see to (`holder::ensure_rules`): they are loaded
/// again, not the container replaced.
pub(super) fn check_network(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    let Some(h) = &live.holder else {
        return Err(Kind::Network.drift("it has no network namespace holder (no network rules)"));
    };
    let mode = live
        .namespaces
        .iter()
        .find(|(k, _)| k == "network")
        .map(|(_, v)| v.as_str());
    // Podman reports the holder's networks on a container that joined it; Docker none.
    if !live.networks.is_empty() && live.networks != h.networks {
        return Err(Kind::Network.drift(format!(
            "it is on the network(s) {:?} itself, not in its holder's namespace only",
            live.networks
        )));
    }
    if mode != Some(format!("container:{}", h.id).as_str()) {
        return Err(Kind::Network.drift(format!(
            "its network mode is {mode:?}, not its holder's namespace"
        )));
    }
    if !h.running {
        return Err(Kind::Network.drift("its network namespace holder is not running"));
    }
    // The per-hub network by name; or the engine's network mode (slirp4netns), listed by
    // its first word.
    let engine_mode = spec.network.split(':').next().unwrap_or_default();
    let on_it = match spec.per_hub_network {
        true => h.networks == [spec.network.clone()],
        false => h.networks.iter().all(|n| n == engine_mode),
    };
    if !on_it {
        return Err(Kind::Network.drift(format!(
            "its holder is on the network(s) {:?}, not only {}",
            h.networks, spec.network
        )));
    }
    if h.mode != Some(spec.network_mode) {
        return Err(Kind::Network.drift(format!(
            "its network mode is {}, not {}",
            h.mode.map_or("unknown", |m| m.as_str()),
            spec.network_mode.as_str()
        )));
    }
    if h.privileged || !h.cap_add.is_empty() {
        return Err(Kind::Network.drift(format!(
            "its holder has capabilities ({}); it has none",
            h.cap_add.join(", ")
        )));
    }
    if h.rules.is_none() || h.rules_hash.is_none() {
        return Err(Kind::Network.drift("its holder carries no network rules"));
    }
    // Its helper loads the rules it carries: rules of another shape are another version's.
    if h.rules_shape.as_deref() != Some(firewall::shape(spec.network_mode).as_str()) {
        return Err(Kind::Network.drift(
            "its holder carries network rules of another version (this one's refuse more, inbound connections among them)",
        ));
    }
    Ok(())
}

/// Not privileged, no new privileges, and the layer's system-call filter.
fn check_privileges(_: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if live.privileged {
        return Err(Kind::Privileges.drift("it runs privileged"));
    }
    if !has_no_new_privileges(live) {
        return Err(Kind::Privileges.drift("it allows new privileges (no no-new-privileges)"));
    }
    if !live.security_opt.iter().any(|o| super::seccomp::is_ours(o)) {
        return Err(Kind::Privileges.drift(
            "it runs without the layer's system-call filter (which refuses setuid and setgid bits)",
        ));
    }
    Ok(())
}

/// The spec's pid limit exactly.
pub(super) fn check_pids_limit(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if !spec.limits_enforced {
        return Ok(());
    }
    match live.pids_limit {
        Some(n) if n == spec.pids_limit => Ok(()),
        Some(n) if n > 0 && n < spec.pids_limit => Err(Kind::PidsLimit.drift(format!(
            "its pid limit is {n}, lower than the spec's {}",
            spec.pids_limit
        ))),
        other => Err(Kind::PidsLimit.drift(format!(
            "its pid limit is {other:?}, not at most {}",
            spec.pids_limit
        ))),
    }
}

fn check_user(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if live.user != spec.user {
        return Err(Kind::User.drift(format!(
            "it runs as user {:?}, not {}",
            live.user, spec.user
        )));
    }
    Ok(())
}

/// No namespace shared with the host.
fn check_namespaces(_: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    for (what, mode) in &live.namespaces {
        if mode == "host" {
            return Err(Kind::Namespaces.drift(format!("it shares the host's {what} namespace")));
        }
    }
    Ok(())
}

pub(super) fn check_devices(_: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if live.devices > 0 {
        return Err(Kind::Devices.drift("it has host devices"));
    }
    Ok(())
}

/// Every mount is one of the spec's, and none is writable where the spec has it read-only.
fn check_mounts(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    for (kind, source, dest, rw) in &live.mounts {
        if !mount_allowed(spec, kind, source, dest, *rw) {
            return Err(Kind::Mounts.drift(format!(
                "it mounts {source} at {dest} ({kind}, {}), which the spec does not allow",
                if *rw { "rw" } else { "ro" }
            )));
        }
    }
    Ok(())
}

/// Every read-only mount of the spec (guarded paths, the bundle, the token file) is there, and
/// read-only: a container without its guards is not adopted.
fn check_guards(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    for b in spec.binds.iter().filter(|b| b.read_only) {
        let source = b.source.to_string_lossy();
        let there = live
            .mounts
            .iter()
            .any(|(kind, s, d, rw)| kind == "bind" && *s == source && *d == b.target && !rw);
        if !there {
            return Err(Kind::Guards.drift(format!("{} is not mounted read-only", b.target)));
        }
    }
    for v in spec.volumes.iter().filter(|v| v.read_only) {
        let there = live
            .mounts
            .iter()
            .any(|(kind, s, d, rw)| kind == "volume" && *s == v.name && *d == v.target && !rw);
        if !there {
            return Err(Kind::Guards.drift(format!("{} is not mounted read-only", v.target)));
        }
    }
    Ok(())
}

pub(super) fn mount_allowed(
    spec: &ContainerSpec,
    kind: &str,
    source: &str,
    dest: &str,
    rw: bool,
) -> bool {
    match kind {
        "volume" => spec
            .volumes
            .iter()
            .any(|v| v.name == source && v.target == dest && (!rw || !v.read_only)),
        "bind" => spec.binds.iter().any(|b| {
            b.source.to_string_lossy() == source && b.target == dest && (!rw || !b.read_only)
        }),
        // A writable place or a `--tmpfs` run flag (engines that list it among the mounts).
        "tmpfs" => spec.tmpfs.contains_key(dest),
        _ => false,
    }
}

/// The spec's port only, on 127.0.0.1 only, and published (by its holder; the container
/// itself publishes none).
fn check_ports(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if let Some((port, _)) = live.ports.first() {
        return Err(Kind::Ports.drift(format!(
            "it publishes port {port} itself, not through its holder"
        )));
    }
    let holder_ports = live
        .holder
        .as_ref()
        .map(|h| h.ports.clone())
        .unwrap_or_default();
    for (port, ip) in &holder_ports {
        if port != &format!("{}/tcp", spec.container_port) {
            return Err(Kind::Ports.drift(format!(
                "it publishes port {port}, not only {}/tcp",
                spec.container_port
            )));
        }
        if ip != "127.0.0.1" {
            return Err(Kind::Ports.drift(format!(
                "it publishes port {port} on {:?}, not on 127.0.0.1 only",
                ip
            )));
        }
    }
    if holder_ports.is_empty() {
        return Err(Kind::Ports.drift("it publishes no port"));
    }
    Ok(())
}

/// The `po.spec-hash` label matches this hub's spec.
fn check_spec_hash(spec: &ContainerSpec, live: &LivePosture) -> Result<(), Drift> {
    if live.spec_hash.as_deref() != Some(spec.spec_hash.as_str()) {
        return Err(Kind::SpecHash.drift(
            "its spec changed (image, runtime bundle, mounts or settings differ from this hub's)",
        ));
    }
    Ok(())
}

/// What a container's environment (`KEY=VALUE` entries) has the broker carry.
pub fn brokered_of(env: &[String]) -> Vec<String> {
    let env: std::collections::HashMap<String, String> = env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let providers: Vec<&str> = env
        .get("PO_BROKER_PROVIDERS")
        .map(|p| {
            p.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let git = crate::broker::git::hosts_in(&env);
    let registries = crate::broker::registry::names_in(&env);
    [
        ("providers", providers.join(", ")),
        ("git", git.join(", ")),
        ("registries", registries.join(", ")),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| format!("{k} {v}"))
    .collect()
}
