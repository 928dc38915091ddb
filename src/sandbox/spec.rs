//! The container spec: everything one workspace's container is, as a pure function of its
//! inputs. The engine-facing code only translates it; adoption compares live inspect data
//! against it ([`check_posture`]).

use crate::host::HostOs;
use crate::platform::container_path;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::host::UserIds;
use crate::runtime_bundle::RuntimeBundle;
use crate::sandbox::engine_mode::{NetworkMode as EngineNetwork, SLIRP_HOST_LOOPBACK};
use crate::sandbox::firewall::{NETWORK_VAR, NetworkMode};
use crate::sandbox::run_flags::{self, RunFlags};
use crate::sandbox::workspace::Workspace;

/// Label: the hub that owns the container.
pub const LABEL_OWNER: &str = "po.owner";
/// Label: the workspace id.
pub const LABEL_WORKSPACE: &str = "po.workspace";
/// Label: marks every container and volume this layer makes.
pub const LABEL_SANDBOX: &str = "po.sandbox";
/// Label: the image digest the container was made from.
pub const LABEL_IMAGE_DIGEST: &str = "po.image-digest";
/// Label: the hash of the spec, for drift detection.
pub const LABEL_SPEC_HASH: &str = "po.spec-hash";
/// Label: the workspace folder (for `po-sandbox ls`).
pub const LABEL_WORKSPACE_PATH: &str = "po.workspace-path";
/// Label: the run flags the container was made with, space-separated (for `po-sandbox ls`;
/// only when there are any).
pub const LABEL_RUN_FLAGS: &str = "po.run-flags";

/// Where the container's home volume is mounted (world-writable in the image).
pub const HOME_DIR: &str = "/po-home";
/// Where the package-cache volume is mounted.
pub const RUNTIME_DIR: &str = "/po-runtime";
/// Where the git worktree volume is mounted.
pub const GIT_DIR: &str = "/po-git";
/// Where the container's own token file is mounted.
pub const TOKEN_PATH: &str = "/run/po-sandbox/token";
/// The seed files copied read-only from `<poHome>` into P when they exist.
pub const SEED_FILES: [&str; 3] = ["modes.yaml", "domains.yaml", "config.yaml"];
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
/// The writable places on the read-only root file system (CIS 5.13), as tmpfs: path and
/// options. Everything else that is written goes to the workspace, P, or a volume (`HOME`,
/// the package caches, git worktrees).
pub const WRITABLE_TMPFS: [(&str, &str); 3] = [
    ("/tmp", "rw,exec,nosuid,nodev,mode=1777"),
    ("/var/tmp", "rw,exec,nosuid,nodev,mode=1777"),
    ("/run", "rw,noexec,nosuid,nodev,mode=1777"),
];
/// Label: marks the per-hub network (`workspaces`).
pub const LABEL_NETWORK: &str = "po.network";
/// Label: on a namespace holder, the workspace whose network namespace it holds (holders carry
/// no `po.workspace`: they are part of a workspace, never one).
pub const LABEL_HOLDER_OF: &str = "po.holder-of";
/// Label: on a namespace holder, the egress mode of its rules.
pub const LABEL_NET_MODE: &str = "po.net-mode";
/// Label: on a namespace holder, the hash of the ruleset it carries (its helper loads it).
pub const LABEL_NET_RULES: &str = "po.net-rules";

/// Host variables a container may inherit (exact names).
const ENV_ALLOW: [&str; 6] = ["TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "PO_PRESET"];
/// Proxy variables a container inherits.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];
/// Loopback entries always added to `NO_PROXY` when a proxy is set.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A bind mount from the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bind {
    /// Host path.
    pub source: PathBuf,
    /// Container path.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A named volume.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VolumeMount {
    /// Volume name.
    pub name: String,
    /// Container path.
    pub target: String,
}

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
/// every start of the holder; until then the workspace's own process waits here.
pub const GATE: &str = r#"p=$1; shift; "$1" -e "$p" && exec "$@""#;

/// A bundle command behind the [`GATE`]: `/bin/sh -c GATE po-net-gate <probe> <command…>`.
pub fn gated(command: Vec<String>) -> Vec<String> {
    let mut cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        GATE.into(),
        "po-net-gate".into(),
        crate::sandbox::firewall::mark_probe(true),
    ];
    cmd.extend(command);
    cmd
}

/// The per-hub network of an owner: a labelled bridge every container of the owner joins
/// (never the engine's default bridge).
pub fn network_name(owner: &str) -> String {
    format!("po-net-{owner}")
}

/// Everything that decides one workspace's container.
#[derive(Debug, Clone)]
pub struct SpecInput<'a> {
    /// The host OS: where host paths appear inside the container.
    pub os: HostOs,
    /// This hub's owner id.
    pub owner: &'a str,
    /// The workspace.
    pub workspace: &'a Workspace,
    /// The Po home on the host.
    pub po_home: &'a Path,
    /// The runtime bundle.
    pub bundle: &'a RuntimeBundle,
    /// The image tag.
    pub image: &'a str,
    /// The image digest (hex).
    pub image_digest: &'a str,
    /// `uid:gid` the container runs as.
    pub user: UserIds,
    /// Pid limit.
    pub pids_limit: i64,
    /// Extra engine options (checked); a `--pids-limit` among them lowers `pids_limit`.
    pub run_flags: &'a RunFlags,
    /// Which of [`SEED_FILES`] exist in `<poHome>` (the caller looks).
    pub seed_files: &'a [&'a str],
    /// The host environment, for the allowlist.
    pub host_env: &'a HashMap<String, String>,
    /// Extra environment for the container (the broker grant), set after the allowlist.
    pub extra_env: &'a BTreeMap<String, String>,
    /// Extra bind mounts (the broker socket folder).
    pub extra_binds: &'a [Bind],
    /// `host:ip` entries (`host.docker.internal:host-gateway` on VM engines).
    pub extra_hosts: &'a [String],
    /// Memory and CPU limits (run flags naming them win).
    pub limits: Limits,
    /// The interval of the engine health check.
    pub health_interval: std::time::Duration,
    /// What the engine changes: keep-id, unenforced limits, the network mode.
    pub mode: crate::sandbox::engine_mode::EngineMode,
    /// The egress mode (`network`, `PO_SANDBOX_NETWORK`).
    pub network_mode: NetworkMode,
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
    /// ([`crate::sandbox::engine_mode::SLIRP_HOST_LOOPBACK`]).
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
    /// Hash of everything above but the environment inherited from the host.
    pub spec_hash: String,
}

/// The deterministic container name of a workspace.
pub fn container_name(owner: &str, workspace_id: &str) -> String {
    format!("po-{owner}-{workspace_id}")
}

/// The named volumes of a workspace: (suffix, mount point).
pub fn volume_names(owner: &str, workspace_id: &str) -> [VolumeMount; 3] {
    let name = |suffix: &str| format!("po-{owner}-{workspace_id}-{suffix}");
    [
        VolumeMount {
            name: name("home"),
            target: HOME_DIR.into(),
        },
        VolumeMount {
            name: name("cache"),
            target: RUNTIME_DIR.into(),
        },
        VolumeMount {
            name: name("git"),
            target: GIT_DIR.into(),
        },
    ]
}

/// The host path of a workspace's token file: under `<poHome>/sandbox-tokens`, outside P.
pub fn token_file(po_home: &Path, owner: &str, workspace_id: &str) -> PathBuf {
    po_home
        .join("sandbox-tokens")
        .join(owner)
        .join(format!("{workspace_id}.token"))
}

/// The environment a container inherits from the host: the allowlist only, with loopback
/// added to `NO_PROXY` when any proxy is set.
pub fn inherited_env(host: &HashMap<String, String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (k, v) in host {
        let allowed = ENV_ALLOW.contains(&k.as_str())
            || k.starts_with("LC_")
            || PROXY_VARS.contains(&k.as_str());
        if allowed && !v.is_empty() {
            env.insert(k.clone(), v.clone());
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
    let ws = input.workspace;
    let p = crate::sandbox::workspace::sandbox_dir(input.po_home, &ws.id);
    let ws_path = ws.path.to_string_lossy().to_string();
    let in_container = |p: &Path| container_path(input.os, &p.to_string_lossy());
    let own = layer_env(input, &in_container(&p));
    let mut spec = ContainerSpec {
        name: container_name(input.owner, &ws.id),
        image: input.image.to_string(),
        labels: BTreeMap::new(),
        env: BTreeMap::new(),
        cmd: gated(input.bundle.command()),
        interpreter: input.bundle.interpreter().to_string(),
        working_dir: in_container(&ws.path),
        user: input.user.to_string(),
        binds: binds(input, &p),
        volumes: volume_names(input.owner, &ws.id).to_vec(),
        container_port: input.bundle.server.port,
        pids_limit: input
            .run_flags
            .pids_limit
            .map_or(input.pids_limit, |p| p.min(input.pids_limit)),
        extra_hosts: input.extra_hosts.to_vec(),
        run_flags: input.run_flags.clone(),
        limits: limits(input),
        read_only_root: true,
        tmpfs: tmpfs(input.run_flags),
        health: health_probe(input.bundle, input.health_interval),
        network: match input.mode.network {
            EngineNetwork::PerHub => network_name(input.owner),
            EngineNetwork::SlirpHostLoopback => SLIRP_HOST_LOOPBACK.to_string(),
        },
        per_hub_network: input.mode.network == EngineNetwork::PerHub,
        keep_id: input.mode.keep_id,
        limits_enforced: input.mode.limits_enforced,
        network_mode: input.network_mode,
        spec_hash: String::new(),
    };
    set_env_and_hash(&mut spec, own, input.host_env);
    spec.labels = labels(input, &spec.spec_hash, ws_path);
    spec
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
fn limits(input: &SpecInput) -> Limits {
    let f = input.run_flags;
    Limits {
        memory: f.memory.unwrap_or(input.limits.memory),
        nano_cpus: f.nano_cpus.unwrap_or(input.limits.nano_cpus),
        cpu_shares: f.cpu_shares.unwrap_or(input.limits.cpu_shares),
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
fn binds(input: &SpecInput, p: &Path) -> Vec<Bind> {
    let ws = input.workspace;
    let p_str = container_path(input.os, &p.to_string_lossy());
    let mut binds = vec![
        Bind {
            source: ws.path.clone(),
            target: container_path(input.os, &ws.path.to_string_lossy()),
            read_only: false,
        },
        Bind {
            source: input.bundle.dir.clone(),
            target: crate::runtime_bundle::MOUNT_POINT.into(),
            read_only: true,
        },
        Bind {
            source: p.to_path_buf(),
            target: p_str.clone(),
            read_only: false,
        },
        Bind {
            source: token_file(input.po_home, input.owner, &ws.id),
            target: TOKEN_PATH.into(),
            read_only: true,
        },
    ];
    for seed in SEED_FILES.iter().filter(|s| input.seed_files.contains(s)) {
        binds.push(Bind {
            source: input.po_home.join(seed),
            target: format!("{p_str}/{seed}"),
            read_only: true,
        });
    }
    binds.extend(input.extra_binds.iter().cloned());
    binds
}

/// The variables the layer decides: the bundle's, then the fixed ones, then the extra ones.
fn layer_env(input: &SpecInput, p_str: &str) -> BTreeMap<String, String> {
    // Fixed variables last, so neither the host nor the bundle can override them.
    let mut own = BTreeMap::new();
    for (k, v) in &input.bundle.server.env {
        own.insert(k.clone(), v.clone());
    }
    own.insert("PO_SANDBOX".into(), "1".into());
    // What `/po-sandbox` reports inside; the holder's rules enforce it.
    own.insert(NETWORK_VAR.into(), input.network_mode.as_str().into());
    own.insert("PO_HOME".into(), p_str.to_string());
    own.insert("PO_WORKSPACE".into(), input.workspace.id.clone());
    own.insert("PO_SANDBOX_TOKEN_FILE".into(), TOKEN_PATH.into());
    own.insert("HOME".into(), HOME_DIR.into());
    own.insert("XDG_CACHE_HOME".into(), format!("{RUNTIME_DIR}/cache"));
    own.insert("npm_config_cache".into(), format!("{RUNTIME_DIR}/npm"));
    own.insert("COREPACK_HOME".into(), format!("{RUNTIME_DIR}/corepack"));
    for (k, v) in input.extra_env {
        own.insert(k.clone(), v.clone());
    }
    own
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
    spec.env = env;
}

/// The ownership, identity and drift labels.
fn labels(input: &SpecInput, spec_hash: &str, ws_path: String) -> BTreeMap<String, String> {
    // The run flags' labels never carry a po.* key (refused when parsed), so ours stay ours.
    let mut labels = input.run_flags.labels.clone();
    if !input.run_flags.given.is_empty() {
        labels.insert(LABEL_RUN_FLAGS.into(), input.run_flags.given.join(" "));
    }
    labels.extend([
        (LABEL_OWNER.to_string(), input.owner.to_string()),
        (LABEL_WORKSPACE.to_string(), input.workspace.id.clone()),
        (LABEL_SANDBOX.to_string(), "1".to_string()),
        (
            LABEL_IMAGE_DIGEST.to_string(),
            input.image_digest.to_string(),
        ),
        (LABEL_SPEC_HASH.to_string(), spec_hash.to_string()),
        (LABEL_WORKSPACE_PATH.to_string(), ws_path),
    ]);
    labels
}

/// Variables whose values change with every grant (tokens) stay out of the hash.
fn is_per_grant(name: &str) -> bool {
    name.starts_with("PO_BROKER_")
        || name.ends_with("_API_KEY")
        || name.ends_with("_TOKEN")
        || name.ends_with("_KEY")
}

fn hash(spec: &ContainerSpec) -> String {
    let mut h = Sha256::new();
    let mut field = |tag: &str, value: &str| {
        h.update(tag.as_bytes());
        h.update([0]);
        h.update(value.as_bytes());
        h.update([0]);
    };
    field("image", &spec.image);
    field("user", &spec.user);
    field("workdir", &spec.working_dir);
    field("port", &spec.container_port.to_string());
    field("pids", &spec.pids_limit.to_string());
    for c in &spec.cmd {
        field("cmd", c);
    }
    for (k, v) in &spec.env {
        field("env", &format!("{k}={v}"));
    }
    for b in &spec.binds {
        field(
            "bind",
            &format!("{}:{}:{}", b.source.display(), b.target, b.read_only),
        );
    }
    for v in &spec.volumes {
        field("volume", &format!("{}:{}", v.name, v.target));
    }
    for e in &spec.extra_hosts {
        field("host", e);
    }
    // Absent when there are none, so a spec without run flags hashes as it always did.
    for f in &spec.run_flags.given {
        field("run-flag", f);
    }
    let l = &spec.limits;
    field(
        "limits",
        &format!("{}:{}:{}", l.memory, l.nano_cpus, l.cpu_shares),
    );
    field("read-only-root", &spec.read_only_root.to_string());
    for (path, options) in &spec.tmpfs {
        field("tmpfs", &format!("{path}:{options}"));
    }
    let probe = &spec.health;
    for t in &probe.test {
        field("health", t);
    }
    field(
        "health-timing",
        &format!(
            "{}:{}:{}:{}",
            probe.interval_ns, probe.timeout_ns, probe.retries, probe.start_period_ns
        ),
    );
    field("network", &spec.network);
    // Absent in the usual (rootful) case, so such a spec hashes as it always did.
    if spec.keep_id {
        field("userns", "keep-id");
    }
    if !spec.limits_enforced {
        field("limits-enforced", "false");
    }
    field("network-mode", spec.network_mode.as_str());
    hex::encode(&h.finalize()[..16])
}

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
const DEFAULT_CAPABILITIES: [&str; 14] = [
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

/// One posture rule: `Err` names the drift.
type PostureCheck = fn(&ContainerSpec, &LivePosture) -> Result<(), String>;

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
pub fn check_posture(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    POSTURE_CHECKS
        .iter()
        .try_for_each(|check| check(spec, live))
}

/// All capabilities dropped, none added.
fn check_capabilities(_: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if !drops_all_capabilities(&live.cap_drop) {
        return Err("it does not drop all capabilities (CapDrop lacks ALL)".into());
    }
    if !live.cap_add.is_empty() {
        return Err(format!(
            "it adds capabilities ({})",
            live.cap_add.join(", ")
        ));
    }
    Ok(())
}

/// The runtime a `--runtime` run flag names (none named: whatever the engine defaults to).
fn check_runtime(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    match &spec.run_flags.runtime {
        Some(r) if *r != live.runtime => Err(format!(
            "it runs on the runtime {:?}, not {r} (runFlags)",
            live.runtime
        )),
        _ => Ok(()),
    }
}

/// Every tmpfs is one the spec asks for (the writable places, the run flags'), and each of
/// those is there.
fn check_tmpfs(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if let Some(t) = live.tmpfs.iter().find(|t| !spec.tmpfs.contains_key(*t)) {
        return Err(format!(
            "it has a tmpfs at {t} that the spec does not ask for"
        ));
    }
    match spec.tmpfs.keys().find(|t| !live.tmpfs.contains(*t)) {
        Some(t) => Err(format!("it has no tmpfs at {t}")),
        None => Ok(()),
    }
}

/// A memory and a CPU limit, no higher than the spec's, and CPU shares set (CIS 5.11, 5.12).
fn check_limits(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if !spec.limits_enforced {
        return Ok(());
    }
    let l = &spec.limits;
    if live.memory <= 0 || live.memory > l.memory {
        return Err(format!(
            "its memory limit is {}, not at most {} bytes",
            live.memory, l.memory
        ));
    }
    if live.nano_cpus <= 0 || live.nano_cpus > l.nano_cpus {
        return Err(format!(
            "its CPU limit is {} billionths, not at most {}",
            live.nano_cpus, l.nano_cpus
        ));
    }
    if live.cpu_shares <= 0 {
        return Err("its CPU shares are not set".into());
    }
    Ok(())
}

/// A read-only root file system (CIS 5.13).
fn check_read_only_root(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if spec.read_only_root && !live.read_only_root {
        return Err("its root file system is writable".into());
    }
    Ok(())
}

/// The spec's engine health check (CIS 5.27).
fn check_health(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if live.health_test.is_empty() {
        return Err("it has no health check".into());
    }
    // Compared as one line: Podman re-splits the arguments on whitespace.
    if live.health_test.join(" ") != spec.health.test.join(" ") {
        return Err("its health check is not the spec's".into());
    }
    Ok(())
}

/// In its namespace holder's network, which is on the per-hub network only, runs with no
/// capability and carries the rules of the spec's egress mode (the holder may be in an engine
/// network mode instead: slirp4netns for the forced TCP route on rootless Podman). Whether the
/// rules are loaded is the service's to see to (`holder::ensure_rules`): they are loaded
/// again, not the container replaced.
fn check_network(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    let Some(h) = &live.holder else {
        return Err("it has no network namespace holder (no network rules)".into());
    };
    let mode = live
        .namespaces
        .iter()
        .find(|(k, _)| k == "network")
        .map(|(_, v)| v.as_str());
    // Podman reports the holder's networks on a container that joined it; Docker none.
    if !live.networks.is_empty() && live.networks != h.networks {
        return Err(format!(
            "it is on the network(s) {:?} itself, not in its holder's namespace only",
            live.networks
        ));
    }
    if mode != Some(format!("container:{}", h.id).as_str()) {
        return Err(format!(
            "its network mode is {mode:?}, not its holder's namespace"
        ));
    }
    if !h.running {
        return Err("its network namespace holder is not running".into());
    }
    // The per-hub network by name; or the engine's network mode (slirp4netns), listed by
    // its first word.
    let engine_mode = spec.network.split(':').next().unwrap_or_default();
    let on_it = match spec.per_hub_network {
        true => h.networks == [spec.network.clone()],
        false => h.networks.iter().all(|n| n == engine_mode),
    };
    if !on_it {
        return Err(format!(
            "its holder is on the network(s) {:?}, not only {}",
            h.networks, spec.network
        ));
    }
    if h.mode != Some(spec.network_mode) {
        return Err(format!(
            "its network mode is {}, not {}",
            h.mode.map_or("unknown", |m| m.as_str()),
            spec.network_mode.as_str()
        ));
    }
    if h.privileged || !h.cap_add.is_empty() {
        return Err(format!(
            "its holder has capabilities ({}); it has none",
            h.cap_add.join(", ")
        ));
    }
    if h.rules.is_none() || h.rules_hash.is_none() {
        return Err("its holder carries no network rules".into());
    }
    Ok(())
}

/// Not privileged, and no new privileges.
fn check_privileges(_: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if live.privileged {
        return Err("it runs privileged".into());
    }
    if !has_no_new_privileges(live) {
        return Err("it allows new privileges (no no-new-privileges)".into());
    }
    Ok(())
}

/// A pid limit, no higher than the spec's.
fn check_pids_limit(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if !spec.limits_enforced {
        return Ok(());
    }
    match live.pids_limit {
        Some(n) if n > 0 && n <= spec.pids_limit => Ok(()),
        other => Err(format!(
            "its pid limit is {other:?}, not at most {}",
            spec.pids_limit
        )),
    }
}

fn check_user(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if live.user != spec.user {
        return Err(format!(
            "it runs as user {:?}, not {}",
            live.user, spec.user
        ));
    }
    Ok(())
}

/// No namespace shared with the host.
fn check_namespaces(_: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    for (what, mode) in &live.namespaces {
        if mode == "host" {
            return Err(format!("it shares the host's {what} namespace"));
        }
    }
    Ok(())
}

fn check_devices(_: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if live.devices > 0 {
        return Err("it has host devices".into());
    }
    Ok(())
}

/// Every mount is one of the spec's, and none is writable where the spec has it read-only.
fn check_mounts(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    for (kind, source, dest, rw) in &live.mounts {
        if !mount_allowed(spec, kind, source, dest, *rw) {
            return Err(format!(
                "it mounts {source} at {dest} ({kind}, {}), which the spec does not allow",
                if *rw { "rw" } else { "ro" }
            ));
        }
    }
    Ok(())
}

/// Every read-only mount of the spec (guarded paths, the bundle, the token file) is there, and
/// read-only: a container without its guards is not adopted.
fn check_guards(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    for b in spec.binds.iter().filter(|b| b.read_only) {
        let source = b.source.to_string_lossy();
        let there = live
            .mounts
            .iter()
            .any(|(kind, s, d, rw)| kind == "bind" && *s == source && *d == b.target && !rw);
        if !there {
            return Err(format!("{} is not mounted read-only", b.target));
        }
    }
    Ok(())
}

fn mount_allowed(spec: &ContainerSpec, kind: &str, source: &str, dest: &str, rw: bool) -> bool {
    match kind {
        "volume" => spec
            .volumes
            .iter()
            .any(|v| v.name == source && v.target == dest),
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
fn check_ports(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if let Some((port, _)) = live.ports.first() {
        return Err(format!(
            "it publishes port {port} itself, not through its holder"
        ));
    }
    let holder_ports = live
        .holder
        .as_ref()
        .map(|h| h.ports.clone())
        .unwrap_or_default();
    for (port, ip) in &holder_ports {
        if port != &format!("{}/tcp", spec.container_port) {
            return Err(format!(
                "it publishes port {port}, not only {}/tcp",
                spec.container_port
            ));
        }
        if ip != "127.0.0.1" {
            return Err(format!(
                "it publishes port {port} on {:?}, not on 127.0.0.1 only",
                ip
            ));
        }
    }
    if holder_ports.is_empty() {
        return Err("it publishes no port".into());
    }
    Ok(())
}

/// The `po.spec-hash` label matches this hub's spec.
fn check_spec_hash(spec: &ContainerSpec, live: &LivePosture) -> Result<(), String> {
    if live.spec_hash.as_deref() != Some(spec.spec_hash.as_str()) {
        return Err(
            "its spec changed (image, runtime bundle, mounts or settings differ from this hub's)"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
