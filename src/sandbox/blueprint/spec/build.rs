//! The spec builder: everything one workspace's container is, as a pure function of its inputs.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::names::*;
use super::proxy::{PROXY_VARS, ProxyValue};
use crate::host::{HostOs, UserIds};
use crate::names::paths::{HOME_DIR, RUNTIME_DIR, TOKEN_PATH};
use crate::names::vars::WORKSPACE_MODE_VAR;
use crate::platform::container_path;
use crate::runtime_bundle::RuntimeBundle;
use crate::sandbox::blueprint::engine_mode::{NetworkMode as EngineNetwork, SLIRP_HOST_LOOPBACK};
use crate::sandbox::blueprint::firewall::{NETWORK_VAR, NetworkMode};
use crate::sandbox::blueprint::run_flags::{self, RunFlags};
use crate::sandbox::folder::clone::{self, WorkspaceMode};
use crate::sandbox::folder::workspace::Workspace;

/// The default pid limit.
pub const DEFAULT_PIDS_LIMIT: i64 = 2048;
/// The default CPU shares (CIS 5.12: set, and below the engine's 1024, so a busy workspace
/// yields to the host's own processes under contention).
pub const DEFAULT_CPU_SHARES: i64 = 512;
/// The default memory limit when the engine does not say how much memory it has.
pub const FALLBACK_MEMORY: i64 = 2 << 30;
/// The least default memory limit.
const MIN_DEFAULT_MEMORY: i64 = 512 << 20;
/// The default interval of the engine health check.
pub const DEFAULT_HEALTH_INTERVAL_MS: u64 = 15_000;

/// Host variables a container may inherit (exact names).
const ENV_ALLOW: [&str; 6] = ["TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "PO_PRESET"];
/// Loopback entries always added to `NO_PROXY` when a proxy is set.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Resource limits of a container (CIS 5.11, 5.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Memory limit in bytes.
    pub memory: i64,
    /// CPU limit in billionths of a CPU.
    pub nano_cpus: i64,
    /// Relative CPU weight.
    pub cpu_shares: i64,
}

impl Limits {
    /// The defaults on an engine with `mem_total` bytes and `ncpu` CPUs (as its `info` says):
    /// half its memory (at least 512 MiB, whole MiB) and half its CPUs (at least one), with
    /// [`DEFAULT_CPU_SHARES`]; `memory` / `nano_cpus` replace the derived values when given.
    pub fn derive(
        mem_total: Option<i64>,
        ncpu: Option<i64>,
        memory: Option<i64>,
        nano_cpus: Option<i64>,
    ) -> Limits {
        let derived_memory = match mem_total {
            Some(total) if total > 0 => ((total / 2) >> 20 << 20).max(MIN_DEFAULT_MEMORY),
            _ => FALLBACK_MEMORY,
        };
        let derived_cpus = match ncpu {
            Some(n) if n > 0 => (n * 1_000_000_000 / 2).max(1_000_000_000),
            _ => 1_000_000_000,
        };
        Limits {
            memory: memory.unwrap_or(derived_memory),
            nano_cpus: nano_cpus.unwrap_or(derived_cpus),
            cpu_shares: DEFAULT_CPU_SHARES,
        }
    }
}

/// The engine health check (CIS 5.27): the bundle's `healthPath` probed from inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthProbe {
    /// `CMD`, the interpreter, `-e`, the probe.
    pub test: Vec<String>,
    /// Between probes, in ns.
    pub interval_ns: i64,
    /// One probe's bound, in ns.
    pub timeout_ns: i64,
    /// Failures in a row that make it unhealthy.
    pub retries: i64,
    /// Failures in this time after start do not count, in ns.
    pub start_period_ns: i64,
}

/// The health probe of a bundle: its interpreter (Node) asks `healthPath` on the server's port
/// over loopback inside the container; 2xx is healthy. No shell is involved.
pub fn health_probe(bundle: &RuntimeBundle, interval: std::time::Duration) -> HealthProbe {
    let interpreter = bundle.interpreter().to_string();
    let path = serde_json::to_string(&bundle.server.health_path).unwrap_or_default();
    // No whitespace: Podman 4.3 re-splits a health check's arguments on it.
    let script = format!(
        "require('http').get({{host:'127.0.0.1',port:{},path:{path},timeout:4000}},\
         s=>{{s.resume();process.exit(s.statusCode>=200&&s.statusCode<300?0:1)}})\
         .on('error',()=>process.exit(1)).on('timeout',()=>process.exit(1))",
        bundle.server.port
    );
    let interval_ns = interval.as_nanos().min(i64::MAX as u128) as i64;
    HealthProbe {
        test: vec!["CMD".into(), interpreter, "-e".into(), script],
        interval_ns,
        timeout_ns: 5_000_000_000,
        retries: 3,
        start_period_ns: 60_000_000_000,
    }
}

/// The workspace's start gate (POSIX sh): the bundle's interpreter waits until the namespace's
/// network rules are loaded (`firewall::mark_probe`), then the server runs in the shell's place.
/// The holder loads no rules itself (it has no capability): a short-lived helper does, after
/// every start of the holder; until then the workspace's own process waits here. Where the
/// container has a bridge ([`EGRESS_BRIDGE_VAR`]: the egress, git or registry ports of the
/// socket route, or npm's user config of the registry routes) it first starts it beside the
/// server, so it lives with the container.
pub const GATE: &str = r#"p=$1; shift; "$1" -e "$p" || exit 1; [ -z "$PO_SANDBOX_EGRESS_BRIDGE" ] || "$1" -e "$PO_SANDBOX_EGRESS_BRIDGE" po-sandbox-egress-bridge "$PO_SANDBOX_EGRESS_PORT" </dev/null >/dev/null 2>&1 & exec "$@""#;

/// The variable holding the egress bridge's source ([`EGRESS_BRIDGE`]), set only where it runs.
pub const EGRESS_BRIDGE_VAR: &str = "PO_SANDBOX_EGRESS_BRIDGE";
/// The variable naming the bridge's loopback port.
pub const EGRESS_PORT_VAR: &str = "PO_SANDBOX_EGRESS_PORT";
/// The egress bridge: a loopback port carried to the egress proxy's socket.
pub const EGRESS_BRIDGE: &str = include_str!("egress_bridge.js");
/// The bridge's port on the container's loopback (each workspace has its own network
/// namespace).
pub const EGRESS_PORT: u16 = 47391;
/// The variables keeping loopback direct beside the proxy ones.
const NO_PROXY_VARS: [&str; 2] = ["NO_PROXY", "no_proxy"];

/// A bundle command behind the [`GATE`]: `/bin/sh -c GATE po-net-gate <probe> <command…>`.
pub fn gated(command: Vec<String>) -> Vec<String> {
    let mut cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        GATE.into(),
        "po-net-gate".into(),
        crate::sandbox::blueprint::firewall::mark_probe(true),
    ];
    cmd.extend(command);
    cmd
}

/// The [`GATE`] for a command run with `exec` (POSIX sh): the same probe by the bundle's
/// interpreter, named apart since the command need not start with it.
pub const EXEC_GATE: &str = r#"p=$1; i=$2; shift 2; "$i" -e "$p" && exec "$@""#;

/// A command run with `exec` into a workspace container whose health is `health`: as it is
/// when the container is `healthy` (its health check passes only while its server runs, and
/// the server runs only after the [`GATE`] passed in this start of the container: the engine
/// sets the health back to `starting` at every start), else behind the [`EXEC_GATE`] with the
/// bundle's `interpreter`: `/bin/sh -c EXEC_GATE po-net-gate <probe> <interpreter> <command…>`.
pub fn exec_gated(health: Option<&str>, interpreter: &str, command: Vec<String>) -> Vec<String> {
    if health == Some("healthy") {
        return command;
    }
    let mut cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        EXEC_GATE.into(),
        "po-net-gate".into(),
        crate::sandbox::blueprint::firewall::mark_probe(true),
        interpreter.into(),
    ];
    cmd.extend(command);
    cmd
}

/// What every container of one hub shares: the checked options and what the engine's report
/// decides, derived in one place (`ProviderOptions::container_settings`), held by the service
/// and borrowed by each [`SpecInput`].
#[derive(Debug, Clone)]
pub struct ContainerSettings {
    /// This hub's owner id.
    pub owner: String,
    /// The Po home on the host.
    pub po_home: PathBuf,
    /// The validated runtime bundle.
    pub bundle: RuntimeBundle,
    /// The image tag.
    pub image: String,
    /// The image digest (hex).
    pub image_digest: String,
    /// `uid:gid` the containers run as.
    pub user: UserIds,
    /// Pid limit.
    pub pids_limit: i64,
    /// Extra engine options (checked); a `--pids-limit` among them lowers `pids_limit`.
    pub run_flags: RunFlags,
    /// Guarded paths, relative to each workspace (mounted read-only): the service resolves
    /// them per workspace into [`SpecInput::extra_binds`].
    pub guarded_paths: Vec<String>,
    /// Memory and CPU limits (run flags naming them win).
    pub limits: Limits,
    /// The interval of the engine health check.
    pub health_interval: std::time::Duration,
    /// The host environment, for the allowlist.
    pub host_env: HashMap<String, String>,
    /// What the engine changes: keep-id, unenforced limits, the network mode.
    pub mode: crate::sandbox::blueprint::engine_mode::EngineMode,
    /// The egress mode (`network`, `PO_SANDBOX_NETWORK`).
    pub network_mode: NetworkMode,
    /// The default workspace mode (`workspaceMode`, `PO_SANDBOX_WORKSPACE_MODE`); a workspace
    /// entry's `mode` wins.
    pub workspace_mode: WorkspaceMode,
    /// The engine sees none of this host's files (it runs on another machine): nothing is
    /// bound, the bundle, P and the token file travel in volumes the hub fills through the
    /// engine ([`carried_volumes`]), and the workspace is a copy. It holds the runtime
    /// bundle's digest (`on_engine::carried::bundle_digest`), which names the bundle's volume.
    pub carried: Option<String>,
}

/// Everything that decides one workspace's container: the hub's settings and this
/// workspace's own parts.
#[derive(Debug, Clone)]
pub struct SpecInput<'a> {
    /// What every container of the hub shares.
    pub settings: &'a ContainerSettings,
    /// The host OS: where host paths appear inside the container.
    pub os: HostOs,
    /// The workspace.
    pub workspace: &'a Workspace,
    /// Which of [`SEED_FILES`] exist in `<poHome>` (the caller looks).
    pub seed_files: &'a [&'a str],
    /// Extra environment for the container (the broker grant), set after the allowlist.
    pub extra_env: &'a BTreeMap<String, String>,
    /// Extra bind mounts (the broker socket folder).
    pub extra_binds: &'a [Bind],
    /// `host:ip` entries (`host.docker.internal:host-gateway` on VM engines).
    pub extra_hosts: &'a [String],
}

/// One workspace's container, engine-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// Deterministic per (owner, workspace).
    pub name: String,
    /// Image tag.
    pub image: String,
    /// Labels (including the spec hash).
    pub labels: BTreeMap<String, String>,
    /// Environment, sorted by name.
    pub env: BTreeMap<String, String>,
    /// The command.
    pub cmd: Vec<String>,
    /// The bundle's interpreter (the command's first word behind the gate): the start gate,
    /// the health check and the namespace holder's health check run it.
    pub interpreter: String,
    /// Working directory: the workspace.
    pub working_dir: String,
    /// `uid:gid`.
    pub user: String,
    /// Bind mounts.
    pub binds: Vec<Bind>,
    /// Named volumes.
    pub volumes: Vec<VolumeMount>,
    /// The one port the server listens on, published on 127.0.0.1 only.
    pub container_port: u16,
    /// Pid limit (the lower of `pidsLimit` and a `--pids-limit` run flag).
    pub pids_limit: i64,
    /// `--add-host` entries.
    pub extra_hosts: Vec<String>,
    /// Extra engine options (`runFlags`), mapped onto the engine body.
    pub run_flags: RunFlags,
    /// Memory and CPU limits (a `--memory`, `--cpus` or `--cpu-shares` run flag wins).
    pub limits: Limits,
    /// The root file system is read-only.
    pub read_only_root: bool,
    /// Tmpfs mounts: the writable places ([`WRITABLE_TMPFS`]) and the run flags' (which win
    /// for the same path).
    pub tmpfs: BTreeMap<String, String>,
    /// The engine health check.
    pub health: HealthProbe,
    /// The per-hub network (its name), or the engine network mode that replaces it
    /// ([`crate::sandbox::blueprint::engine_mode::SLIRP_HOST_LOOPBACK`]).
    pub network: String,
    /// The network is the per-hub one (made and joined by name), not an engine mode.
    pub per_hub_network: bool,
    /// Map the user to itself in the container's user namespace (rootless Podman's `keep-id`).
    pub keep_id: bool,
    /// The engine enforces the pid, memory and CPU limits (not a rootless one on cgroup v1):
    /// when not, they are not asked for, and their absence is not drift.
    pub limits_enforced: bool,
    /// The egress mode its holder's rules enforce.
    pub network_mode: NetworkMode,
    /// `clone`: the workspace path is the copy volume (the last of `volumes`), not a bind.
    pub workspace_mode: WorkspaceMode,
    /// Where the system-call filter's profile ([`super::seccomp`]) is written for an engine
    /// that takes it as a path (Podman): under the Po home, named by its digest.
    pub seccomp_file: PathBuf,
    /// Hash of everything above but the environment inherited from the host.
    pub spec_hash: String,
}

/// The environment a container inherits from the host: the allowlist only, proxy variables
/// without credentials ([`super::proxy::sanitize_proxy`]), with loopback added to `NO_PROXY`
/// when any proxy is passed.
pub fn inherited_env(host: &HashMap<String, String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (k, v) in host {
        let allowed = ENV_ALLOW.contains(&k.as_str()) || k.starts_with("LC_");
        if allowed && !v.is_empty() {
            env.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in super::proxy::proxy_values(host) {
        if let ProxyValue::Kept(v) | ProxyValue::Stripped(v) = v {
            env.insert(k.to_string(), v);
        }
    }
    if PROXY_VARS.iter().any(|k| env.contains_key(*k)) {
        let existing = host
            .get("NO_PROXY")
            .or_else(|| host.get("no_proxy"))
            .cloned()
            .unwrap_or_default();
        let mut entries: Vec<String> = existing
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        for l in LOOPBACK {
            if !entries.iter().any(|e| e == l) {
                entries.push(l.to_string());
            }
        }
        let joined = entries.join(",");
        env.insert("NO_PROXY".into(), joined.clone());
        env.insert("no_proxy".into(), joined);
    }
    env
}

/// Builds the spec.
pub fn build(input: &SpecInput) -> ContainerSpec {
    let (ws, s) = (input.workspace, input.settings);
    let p = crate::sandbox::folder::workspace::sandbox_dir(&s.po_home, &ws.id);
    let ws_path = ws.path.to_string_lossy().to_string();
    let in_container = |p: &Path| container_path(input.os, &p.to_string_lossy());
    let own = layer_env(input, &in_container(&p));
    let workspace_mode = mode_of(input);
    let mut volumes = volume_names(&s.owner, &ws.id).to_vec();
    if let Some(bundle) = &s.carried {
        volumes.extend(carried_volumes(&s.owner, &ws.id, &in_container(&p), bundle));
    }
    // The last one, where `copy_volume` finds it.
    if workspace_mode == WorkspaceMode::Clone {
        volumes.push(VolumeMount {
            name: clone::copy_volume_name(&s.owner, &ws.id),
            target: in_container(&ws.path),
            read_only: false,
        });
    }
    let mut spec = ContainerSpec {
        name: container_name(&s.owner, &ws.id),
        image: s.image.clone(),
        labels: BTreeMap::new(),
        env: BTreeMap::new(),
        cmd: gated(s.bundle.command()),
        interpreter: s.bundle.interpreter().to_string(),
        working_dir: in_container(&ws.path),
        user: s.user.to_string(),
        binds: binds(input, &p),
        volumes,
        container_port: s.bundle.server.port,
        pids_limit: s
            .run_flags
            .pids_limit
            .map_or(s.pids_limit, |p| p.min(s.pids_limit)),
        extra_hosts: input.extra_hosts.to_vec(),
        run_flags: s.run_flags.clone(),
        limits: limits(s),
        read_only_root: true,
        tmpfs: tmpfs(&s.run_flags),
        health: health_probe(&s.bundle, s.health_interval),
        network: match s.mode.network {
            EngineNetwork::PerHub => network_name(&s.owner),
            EngineNetwork::SlirpHostLoopback => SLIRP_HOST_LOOPBACK.to_string(),
        },
        per_hub_network: s.mode.network == EngineNetwork::PerHub,
        keep_id: s.mode.keep_id,
        limits_enforced: s.mode.limits_enforced,
        network_mode: s.network_mode,
        workspace_mode,
        seccomp_file: super::seccomp::file_path(&s.po_home),
        spec_hash: String::new(),
    };
    set_env_and_hash(&mut spec, own, &s.host_env);
    spec.labels = labels(input, &spec.spec_hash, ws_path);
    if workspace_mode == WorkspaceMode::Clone {
        let mode = workspace_mode.as_str().to_string();
        spec.labels.insert(clone::LABEL_WORKSPACE_MODE.into(), mode);
    }
    spec
}

/// The workspace's own mode, else the hub's default.
fn mode_of(input: &SpecInput) -> WorkspaceMode {
    input
        .workspace
        .mode
        .unwrap_or(input.settings.workspace_mode)
}

impl ContainerSpec {
    /// The copy volume, in clone mode.
    pub fn copy_volume(&self) -> Option<&VolumeMount> {
        (self.workspace_mode == WorkspaceMode::Clone)
            .then(|| self.volumes.last())
            .flatten()
    }
}

impl ContainerSpec {
    /// A tmpfs run flag at, over or inside one of this container's own mount points (the
    /// workspace, P, the guards, the volumes…) is `RUN_FLAGS_INVALID`.
    pub fn check_run_flags(&self) -> crate::error::Result<()> {
        let targets = self
            .binds
            .iter()
            .map(|b| b.target.as_str())
            .chain(self.volumes.iter().map(|v| v.target.as_str()));
        run_flags::check_tmpfs_against(&self.run_flags, targets)
    }
}

/// The limits, a run flag's where it names one.
fn limits(settings: &ContainerSettings) -> Limits {
    let (f, l) = (&settings.run_flags, &settings.limits);
    Limits {
        memory: f.memory.unwrap_or(l.memory),
        nano_cpus: f.nano_cpus.unwrap_or(l.nano_cpus),
        cpu_shares: f.cpu_shares.unwrap_or(l.cpu_shares),
    }
}

/// The writable tmpfs places, then the run flags' tmpfs mounts (a flag's options win).
fn tmpfs(flags: &RunFlags) -> BTreeMap<String, String> {
    let mut tmpfs: BTreeMap<String, String> = WRITABLE_TMPFS
        .iter()
        .map(|(p, o)| (p.to_string(), o.to_string()))
        .collect();
    tmpfs.extend(flags.tmpfs.clone());
    tmpfs
}

/// The workspace, the bundle (read-only), P, the token file (read-only), the seed files that
/// exist (read-only, inside P), then the extra binds.
pub(super) fn binds(input: &SpecInput, p: &Path) -> Vec<Bind> {
    let (ws, s) = (input.workspace, input.settings);
    if s.carried.is_some() {
        // Nothing of this host's: its parts are in volumes.
        return input.extra_binds.to_vec();
    }
    let p_str = container_path(input.os, &p.to_string_lossy());
    // In clone mode the host folder is not mounted at all: its copy volume is.
    let mut binds: Vec<Bind> = (mode_of(input) == WorkspaceMode::Bind)
        .then(|| Bind {
            source: ws.path.clone(),
            target: container_path(input.os, &ws.path.to_string_lossy()),
            read_only: false,
        })
        .into_iter()
        .collect();
    binds.extend([
        Bind {
            source: s.bundle.dir.clone(),
            target: crate::runtime_bundle::MOUNT_POINT.into(),
            read_only: true,
        },
        Bind {
            source: p.to_path_buf(),
            target: p_str.clone(),
            read_only: false,
        },
        Bind {
            source: token_file(&s.po_home, &s.owner, &ws.id),
            target: TOKEN_PATH.into(),
            read_only: true,
        },
    ]);
    for seed in SEED_FILES.iter().filter(|s| input.seed_files.contains(s)) {
        binds.push(Bind {
            source: s.po_home.join(seed),
            target: format!("{p_str}/{seed}"),
            read_only: true,
        });
    }
    binds.extend(input.extra_binds.iter().cloned());
    binds
}

/// The variables the layer decides: the bundle's, then the fixed ones, then the extra ones.
pub(super) fn layer_env(input: &SpecInput, p_str: &str) -> BTreeMap<String, String> {
    // Fixed variables last, so neither the host nor the bundle can override them.
    let mut own = BTreeMap::new();
    for (k, v) in &input.settings.bundle.server.env {
        own.insert(k.clone(), v.clone());
    }
    own.insert("PO_SANDBOX".into(), "1".into());
    // What `/po-sandbox` reports inside; the holder's rules enforce it.
    own.insert(
        NETWORK_VAR.into(),
        input.settings.network_mode.as_str().into(),
    );
    own.insert("PO_HOME".into(), p_str.to_string());
    own.insert("PO_WORKSPACE".into(), input.workspace.id.clone());
    if mode_of(input) == WorkspaceMode::Clone {
        own.insert(WORKSPACE_MODE_VAR.into(), "clone".into());
    }
    own.insert("PO_SANDBOX_TOKEN_FILE".into(), TOKEN_PATH.into());
    own.insert("HOME".into(), HOME_DIR.into());
    own.insert("XDG_CACHE_HOME".into(), format!("{RUNTIME_DIR}/cache"));
    own.insert("npm_config_cache".into(), format!("{RUNTIME_DIR}/npm"));
    own.insert("COREPACK_HOME".into(), format!("{RUNTIME_DIR}/corepack"));
    for (k, v) in input.extra_env {
        own.insert(k.clone(), v.clone());
    }
    bridge_env(&mut own);
    egress_env(&mut own);
    own
}

/// The git and registry routes' ports (socket route) are carried by the egress bridge the
/// start gate runs, which also writes npm's user config (either route).
fn bridge_env(own: &mut BTreeMap<String, String>) {
    use crate::broker::registry::{NPMRC_VAR, PORTS_VAR};
    if [crate::broker::git::PORT_VAR, PORTS_VAR, NPMRC_VAR]
        .iter()
        .any(|v| own.contains_key(*v))
    {
        own.insert(EGRESS_BRIDGE_VAR.into(), EGRESS_BRIDGE.into());
    }
}

/// Every process of an allowlist container reaches the egress proxy through the standard
/// variables: on the socket route through the bridge the start gate runs, on the TCP route at
/// the proxy's URL itself. Loopback stays direct.
pub(super) fn egress_env(own: &mut BTreeMap<String, String>) {
    use crate::names::vars::{EGRESS_PROXY_VAR, EGRESS_SOCKET_VAR};
    let proxy = match (own.get(EGRESS_SOCKET_VAR), own.get(EGRESS_PROXY_VAR)) {
        (Some(_), _) => {
            own.insert(EGRESS_BRIDGE_VAR.into(), EGRESS_BRIDGE.into());
            own.insert(EGRESS_PORT_VAR.into(), EGRESS_PORT.to_string());
            format!("http://127.0.0.1:{EGRESS_PORT}")
        }
        (None, Some(url)) => url.clone(),
        (None, None) => return,
    };
    for name in PROXY_VARS {
        own.insert(name.into(), proxy.clone());
    }
    for name in NO_PROXY_VARS {
        own.insert(name.into(), LOOPBACK.join(","));
    }
}

/// `host:port` of the TCP route's broker, split.
pub(super) fn broker_address(env: &BTreeMap<String, String>) -> Option<(&str, &str)> {
    env.get("PO_BROKER_ADDRESS")
        .and_then(|a| a.rsplit_once(':'))
}

/// The TCP route's broker host is reached directly, past the egress proxy and past a proxy the
/// host passed on (its git and registry routes carry placeholders no proxy is to see): added
/// to the no-proxy variables `env` has.
pub(super) fn broker_direct(env: &mut BTreeMap<String, String>) {
    let Some(host) = broker_address(env).map(|(host, _)| host.to_string()) else {
        return;
    };
    for (name, list) in env.iter_mut() {
        if NO_PROXY_VARS.contains(&name.as_str()) && !list.split(',').any(|e| e.trim() == host) {
            list.push(',');
            list.push_str(&host);
        }
    }
}

/// Hashes the spec with the layer's variables but the per-grant ones, then sets its
/// environment: what the host may pass on, overridden by the layer's.
fn set_env_and_hash(
    spec: &mut ContainerSpec,
    own: BTreeMap<String, String>,
    host_env: &HashMap<String, String>,
) {
    // The hash covers what the layer decides, not what a terminal happens to export.
    spec.env = own.clone();
    spec.env.retain(|k, _| !is_per_grant(k));
    spec.spec_hash = hash(spec);
    let mut env = inherited_env(host_env);
    env.extend(own);
    broker_direct(&mut env);
    spec.env = env;
}

/// The ownership, identity and drift labels.
fn labels(input: &SpecInput, spec_hash: &str, ws_path: String) -> BTreeMap<String, String> {
    let s = input.settings;
    // The run flags' labels never carry a po.* key (refused when parsed), so ours stay ours.
    let mut labels = s.run_flags.labels.clone();
    if !s.run_flags.given.is_empty() {
        labels.insert(LABEL_RUN_FLAGS.into(), s.run_flags.given.join(" "));
    }
    labels.extend([
        (LABEL_OWNER.to_string(), s.owner.clone()),
        (LABEL_WORKSPACE.to_string(), input.workspace.id.clone()),
        (LABEL_SANDBOX.to_string(), "1".to_string()),
        (LABEL_IMAGE_DIGEST.to_string(), s.image_digest.clone()),
        (LABEL_SPEC_HASH.to_string(), spec_hash.to_string()),
        (LABEL_WORKSPACE_PATH.to_string(), ws_path),
    ]);
    labels
}

/// Variables whose values change with every grant (tokens) stay out of the hash.
fn is_per_grant(name: &str) -> bool {
    // The proxy variables follow the grant's egress route (on the TCP route they carry its
    // credentials).
    name.starts_with("PO_BROKER_")
        || name.starts_with("PO_SANDBOX_EGRESS_")
        || name == "GIT_CONFIG_COUNT"
        || name.starts_with("GIT_CONFIG_KEY_")
        || name.starts_with("GIT_CONFIG_VALUE_")
        || name == crate::broker::git::PORT_VAR
        || name.starts_with("PO_SANDBOX_REGISTRY_")
        || [
            crate::broker::registry::NPMRC_VAR,
            "npm_config_userconfig",
            "PIP_INDEX_URL",
            "UV_INDEX_URL",
            "PIP_TRUSTED_HOST",
        ]
        .contains(&name)
        || PROXY_VARS.contains(&name)
        || NO_PROXY_VARS.contains(&name)
        || name.ends_with("_API_KEY")
        || name.ends_with("_TOKEN")
        || name.ends_with("_KEY")
}

/// The spec's hash for drift detection. Every field is named (no `..`): a new one does not
/// compile until someone decides whether it is hashed.
fn hash(spec: &ContainerSpec) -> String {
    let ContainerSpec {
        // Follows from the owner and workspace, which the labels and paths already carry.
        name: _,
        image,
        // They carry the hash itself.
        labels: _,
        env,
        cmd,
        // The command's first word behind the gate: hashed with `cmd`.
        interpreter: _,
        working_dir,
        user,
        binds,
        volumes,
        container_port,
        pids_limit,
        extra_hosts,
        run_flags,
        limits,
        read_only_root,
        tmpfs,
        health,
        network,
        // Follows from `network` (a per-hub name or an engine mode).
        per_hub_network: _,
        keep_id,
        limits_enforced,
        network_mode,
        workspace_mode,
        // Under the Po home: its digest is hashed below.
        seccomp_file: _,
        spec_hash: _,
    } = spec;
    let mut h = SpecHasher(Sha256::new());
    h.field("image", image);
    h.field("user", user);
    h.field("workdir", working_dir);
    h.field("port", &container_port.to_string());
    h.field("pids", &pids_limit.to_string());
    h.each("cmd", cmd);
    h.each("env", env.iter().map(|(k, v)| format!("{k}={v}")));
    h.mounts(binds, volumes);
    h.each("host", extra_hosts);
    // Absent when there are none, so a spec without run flags hashes as it always did; the
    // parsed fields follow from the flags given.
    h.each("run-flag", &run_flags.given);
    h.limits(limits);
    h.field("read-only-root", &read_only_root.to_string());
    h.each("tmpfs", tmpfs.iter().map(|(path, o)| format!("{path}:{o}")));
    h.health(health);
    h.field("network", network);
    // Absent in the usual (rootful) case, so such a spec hashes as it always did.
    if *keep_id {
        h.field("userns", "keep-id");
    }
    if !limits_enforced {
        h.field("limits-enforced", "false");
    }
    h.field("network-mode", network_mode.as_str());
    // Absent in bind mode, so such a spec hashes as it always did.
    if *workspace_mode == WorkspaceMode::Clone {
        h.field("workspace-mode", workspace_mode.as_str());
    }
    h.field("seccomp", &super::seccomp::digest());
    hex::encode(&h.0.finalize()[..16])
}

/// The spec hash as it is fed: each field a tag and a value, each ended by a zero byte.
struct SpecHasher(Sha256);

impl SpecHasher {
    /// One tagged value.
    fn field(&mut self, tag: &str, value: &str) {
        self.0.update(tag.as_bytes());
        self.0.update([0]);
        self.0.update(value.as_bytes());
        self.0.update([0]);
    }

    /// One tagged value per item (none for none).
    fn each<S: AsRef<str>>(&mut self, tag: &str, values: impl IntoIterator<Item = S>) {
        for v in values {
            self.field(tag, v.as_ref());
        }
    }

    /// The bind mounts, then the volumes.
    fn mounts(&mut self, binds: &[Bind], volumes: &[VolumeMount]) {
        for b in binds {
            let value = format!("{}:{}:{}", b.source.display(), b.target, b.read_only);
            self.field("bind", &value);
        }
        // `:ro` only for a read-only one, so a spec without any hashes as it always did.
        self.each(
            "volume",
            volumes.iter().map(|v| match v.read_only {
                true => format!("{}:{}:ro", v.name, v.target),
                false => format!("{}:{}", v.name, v.target),
            }),
        );
    }

    /// The memory and CPU limits, as one field.
    fn limits(&mut self, limits: &Limits) {
        let Limits {
            memory,
            nano_cpus,
            cpu_shares,
        } = limits;
        self.field("limits", &format!("{memory}:{nano_cpus}:{cpu_shares}"));
    }

    /// The health check's command, then its timing.
    fn health(&mut self, health: &HealthProbe) {
        let HealthProbe {
            test,
            interval_ns,
            timeout_ns,
            retries,
            start_period_ns,
        } = health;
        self.each("health", test);
        let timing = format!("{interval_ns}:{timeout_ns}:{retries}:{start_period_ns}");
        self.field("health-timing", &timing);
    }
}
