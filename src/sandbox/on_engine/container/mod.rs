//! One workspace container on the engine: create from a [`ContainerSpec`], read it back as a
//! [`LiveContainer`], stop and remove it, wait for its server. Translation only; the decisions
//! live in `spec` and `workspaces`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::engine::EngineError;
use crate::engine::model::{
    ContainerConfig, ContainerCreateBody, ContainerInspectResponse, DeviceRequest, HealthConfig,
    HostConfig, Mount, MountType, ResourcesUlimits, RestartPolicy, RestartPolicyNameEnum,
    VolumeCreateRequest,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::engine::STOP_GRACE;
use crate::engine::api::{EngineApi, Filters};
use crate::engine::{Operation, Resource};
use crate::error::{Error, Result};
use crate::sandbox::blueprint::run_flags::{Gpus, RunFlags};
use crate::sandbox::blueprint::spec::{
    ContainerSpec, LABEL_RUN_FLAGS, LABEL_SPEC_HASH, LivePosture, seccomp,
};

/// A container as the engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveContainer {
    /// Full id.
    pub id: String,
    /// Name without the leading `/`.
    pub name: String,
    /// The image reference it was created from.
    pub image: String,
    /// `running`, `exited`, `created`…
    pub state: String,
    /// The host port published for the spec's container port, on 127.0.0.1.
    pub host_port: Option<u16>,
    /// Labels.
    pub labels: HashMap<String, String>,
    /// When it was created (RFC 3339), as the engine says.
    pub created: Option<String>,
    /// When it last started (RFC 3339), as the engine says; empty when never.
    pub started_at: String,
    /// Why its last start failed (`State.Error`), as the engine says; empty when it did not.
    pub start_error: String,
    /// `State.Health.Status` (`starting`, `healthy`, `unhealthy`); `None` without a health
    /// check. The engine sets it back to `starting` at every start of the container.
    pub health: Option<String>,
    /// What adoption checks.
    pub posture: LivePosture,
}

impl LiveContainer {
    /// It is running.
    pub fn running(&self) -> bool {
        self.state == "running"
    }

    /// Its network mode (`container:<id>` when it joined a holder).
    pub fn network_mode(&self) -> Option<&str> {
        self.posture
            .namespaces
            .iter()
            .find(|(k, _)| k == "network")
            .map(|(_, v)| v.as_str())
    }
}

/// An RFC 3339 time as (seconds since the epoch, nanoseconds): what the engine gives for
/// `StartedAt` (Docker in UTC, Podman with the host's offset). `None` when it is not one.
pub fn rfc3339(t: &str) -> Option<(i64, u32)> {
    let num = |s: &str| s.parse::<i64>().ok();
    let (date, rest) = t.split_once('T')?;
    let mut d = date.splitn(3, '-');
    let (y, m, day) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    let zone_at = rest.find(['Z', 'z', '+', '-'])?;
    let (clock, zone) = rest.split_at(zone_at);
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut c = hms.splitn(3, ':');
    let (h, mi, s) = (num(c.next()?)?, num(c.next()?)?, num(c.next()?)?);
    let nanos: u32 = format!("{frac:0<9}").get(..9)?.parse().ok()?;
    let offset = match zone {
        "Z" | "z" => 0,
        z => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let (oh, om) = z[1..].split_once(':')?;
            sign * (num(oh)? * 3600 + num(om)? * 60)
        }
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + s - offset, nanos))
}

pub(crate) fn engine_err(
    engine: &impl EngineApi,
    operation: Operation,
) -> impl FnOnce(EngineError) -> Error {
    let bound = engine.timeout();
    move |source| Error::engine(bound, operation, source)
}

/// An engine enum (`running`, `exited`…) as the engine spells it.
pub fn enum_str<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Lists containers (any state) carrying every `label=value`.
pub async fn list_labelled(
    engine: &impl EngineApi,
    labels: Vec<String>,
) -> Result<Vec<crate::engine::model::ContainerSummary>> {
    engine
        .list_containers(labels)
        .await
        .map_err(engine_err(engine, Operation::List(Resource::Container)))
}

/// Lists the ids of containers (any state) carrying every `label=value`.
pub async fn list_ids(engine: &impl EngineApi, labels: &[(&str, &str)]) -> Result<Vec<String>> {
    let labels = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let list = list_labelled(engine, labels).await?;
    Ok(list.into_iter().filter_map(|c| c.id).collect())
}

/// Inspects a container by id or name; `None` when there is none.
pub async fn inspect(
    engine: &impl EngineApi,
    id_or_name: &str,
    container_port: Option<u16>,
) -> Result<Option<LiveContainer>> {
    let info = match engine.inspect_container(id_or_name).await {
        Ok(i) => i,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => {
            let op = Operation::Inspect(Resource::Container, id_or_name.into());
            return Err(engine_err(engine, op)(e));
        }
    };
    Ok(Some(live_from(info, container_port)))
}

/// Reads what the layer needs from inspect data; `container_port` picks the published port.
pub(crate) fn live_from(
    info: ContainerInspectResponse,
    container_port: Option<u16>,
) -> LiveContainer {
    let hc = info.host_config.clone().unwrap_or_default();
    let config = info.config.clone().unwrap_or_default();
    let labels = config.labels.clone().unwrap_or_default();
    let state = info
        .state
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .map(enum_str)
        .unwrap_or_default();
    let host_port = published_host_port(&info, container_port);
    let posture = live_posture(&info, &hc, &config, &labels);
    LiveContainer {
        id: info.id.unwrap_or_default(),
        name: info
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        image: config.image.unwrap_or_default(),
        state,
        host_port,
        labels,
        created: info.created.map(|c| c.to_string()),
        started_at: info
            .state
            .as_ref()
            .and_then(|s| s.started_at.clone())
            .unwrap_or_default(),
        start_error: info
            .state
            .as_ref()
            .and_then(|s| s.error.clone())
            .unwrap_or_default(),
        health: info
            .state
            .as_ref()
            .and_then(|s| s.health.as_ref())
            .and_then(|h| h.status)
            .map(|s| s.to_string()),
        posture,
    }
}

/// The host port published for `container_port` (or for any port when `None`).
fn published_host_port(
    info: &ContainerInspectResponse,
    container_port: Option<u16>,
) -> Option<u16> {
    let port_key = container_port.map(|p| format!("{p}/tcp"));
    info.network_settings
        .as_ref()
        .and_then(|n| n.ports.as_ref())
        .and_then(|ports| {
            let bindings = match &port_key {
                Some(k) => ports.get(k).cloned().flatten(),
                None => ports.values().flatten().next().cloned(),
            }?;
            bindings
                .iter()
                .find_map(|b| b.host_port.as_ref().and_then(|p| p.parse::<u16>().ok()))
        })
}

/// What adoption checks, from the host config, the config and the mounts.
fn live_posture(
    info: &ContainerInspectResponse,
    hc: &HostConfig,
    config: &ContainerConfig,
    labels: &HashMap<String, String>,
) -> LivePosture {
    LivePosture {
        cap_drop: hc.cap_drop.clone().unwrap_or_default(),
        cap_add: hc.cap_add.clone().unwrap_or_default(),
        privileged: hc.privileged.unwrap_or(false),
        security_opt: hc.security_opt.clone().unwrap_or_default(),
        pids_limit: hc.pids_limit,
        user: config.user.clone().unwrap_or_default(),
        namespaces: [
            ("network", hc.network_mode.clone()),
            ("pid", hc.pid_mode.clone()),
            ("ipc", hc.ipc_mode.clone()),
            ("user", hc.userns_mode.clone()),
            ("uts", hc.uts_mode.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.unwrap_or_default()))
        .collect(),
        mounts: live_mounts(info),
        ports: port_bindings(hc),
        devices: hc.devices.as_ref().map_or(0, Vec::len),
        spec_hash: labels.get(LABEL_SPEC_HASH).cloned(),
        runtime: hc.runtime.clone().unwrap_or_default(),
        tmpfs: hc.tmpfs.clone().unwrap_or_default().into_keys().collect(),
        run_flags: labels
            .get(LABEL_RUN_FLAGS)
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        memory: hc.memory.unwrap_or(0),
        memory_swap: hc.memory_swap.unwrap_or(0),
        nano_cpus: live_nano_cpus(hc),
        cpu_shares: hc.cpu_shares.unwrap_or(0),
        read_only_root: hc.readonly_rootfs.unwrap_or(false),
        health_test: config
            .healthcheck
            .as_ref()
            .and_then(|h| h.test.clone())
            .filter(|t| t.first().is_some_and(|c| c != "NONE"))
            .unwrap_or_default(),
        networks: {
            let mut names: Vec<String> = info
                .network_settings
                .as_ref()
                .and_then(|n| n.networks.as_ref())
                .map(|n| n.keys().cloned().collect())
                .unwrap_or_default();
            names.sort();
            names
        },
        holder: None,
        brokered: crate::sandbox::blueprint::spec::brokered_of(
            config.env.as_deref().unwrap_or_default(),
        ),
    }
}

/// The CPU limit in billionths: `NanoCpus`, or what `CpuQuota` / `CpuPeriod` amount to (an
/// engine that reports the limit that way).
fn live_nano_cpus(hc: &HostConfig) -> i64 {
    match (hc.nano_cpus, hc.cpu_quota, hc.cpu_period) {
        (Some(n), _, _) if n > 0 => n,
        (_, Some(q), Some(p)) if q > 0 && p > 0 => {
            (i128::from(q) * 1_000_000_000 / i128::from(p)) as i64
        }
        _ => 0,
    }
}

/// `HostConfig.PortBindings` as (container port spec, host ip), one per binding.
fn port_bindings(hc: &HostConfig) -> Vec<(String, String)> {
    let mut ports = Vec::new();
    for (port, bindings) in hc.port_bindings.clone().unwrap_or_default() {
        for b in bindings.unwrap_or_default() {
            ports.push((port.clone(), b.host_ip.unwrap_or_default()));
        }
    }
    ports
}

/// `Mounts` as (type, volume name or source, destination, read-write).
fn live_mounts(info: &ContainerInspectResponse) -> Vec<(String, String, String, bool)> {
    info.mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            let kind = m.typ.as_ref().map(enum_str).unwrap_or_default();
            let source = if kind == "volume" {
                m.name.clone().unwrap_or_default()
            } else {
                m.source.clone().unwrap_or_default()
            };
            (
                kind,
                source,
                m.destination.unwrap_or_default(),
                m.rw.unwrap_or(true),
            )
        })
        .collect()
}

/// Creates the named volumes of a spec, labelled; existing ones are kept as they are.
pub async fn ensure_volumes(engine: &impl EngineApi, spec: &ContainerSpec) -> Result<()> {
    let labels: HashMap<String, String> = spec
        .labels
        .iter()
        // The workspace's folder too: `prune --volumes` removes them once it and the container
        // are gone.
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "po.owner"
                    | "po.workspace"
                    | "po.sandbox"
                    | crate::sandbox::blueprint::spec::LABEL_WORKSPACE_PATH
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for v in &spec.volumes {
        let mut labels = labels.clone();
        if spec.copy_volume() == Some(v) {
            labels.insert(crate::sandbox::folder::clone::LABEL_COPY.into(), "1".into());
        }
        let request = VolumeCreateRequest {
            name: Some(v.name.clone()),
            labels: Some(labels),
            ..Default::default()
        };
        engine.create_volume(request).await.map_err(engine_err(
            engine,
            Operation::Create(Resource::Volume, v.name.clone()),
        ))?;
    }
    Ok(())
}

/// Removes the volumes labelled with this owner (and workspace, when given); gone already is
/// fine. A workspace's copy volume (clone mode) goes only with `copies`, and then only it.
/// Returns their names.
pub async fn remove_volumes(
    engine: &impl EngineApi,
    owner: &str,
    workspace: Option<&str>,
    copies: bool,
) -> Result<Vec<String>> {
    let mut labels = vec![format!("po.owner={owner}")];
    if let Some(w) = workspace {
        labels.push(format!("po.workspace={w}"));
    }
    let filters: Filters = HashMap::from([("label".to_string(), labels)]);
    let listed = engine
        .list_volumes(filters)
        .await
        .map_err(engine_err(engine, Operation::List(Resource::Volume)))?;
    let mut removed = Vec::new();
    let is_copy =
        |l: &HashMap<String, String>| l.contains_key(crate::sandbox::folder::clone::LABEL_COPY);
    for (name, _) in listed.into_iter().filter(|(_, l)| is_copy(l) == copies) {
        match engine.remove_volume(&name).await {
            Ok(()) => removed.push(name),
            Err(EngineError::NotFound(_)) => {}
            Err(e) => {
                return Err(engine_err(
                    engine,
                    Operation::Remove(Resource::Volume, name),
                )(e));
            }
        }
    }
    removed.sort();
    Ok(removed)
}

/// What a create attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// The new container's id.
    New(String),
    /// A container with the spec's name already exists (another process won the race).
    NameTaken,
    /// Its network is gone (another hub of the owner removed it meanwhile).
    NetworkGone,
}

/// A resource whose limit Podman is given.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Files,
    Processes,
}

/// This process's hard limit for a resource, capped at `cap` (unlimited counts as `cap`).
/// Without Unix resource limits (Windows, whose engines run in a VM anyway) it is `cap`.
fn own_hard_limit(limit: Limit, cap: i64) -> i64 {
    #[cfg(unix)]
    {
        // The resource's C type differs between libcs (glibc's is its own): let it be inferred.
        let resource = match limit {
            Limit::Files => libc::RLIMIT_NOFILE,
            Limit::Processes => libc::RLIMIT_NPROC,
        };
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        if unsafe { libc::getrlimit(resource, &mut l) } != 0 || l.rlim_max == libc::RLIM_INFINITY {
            return cap;
        }
        (l.rlim_max as i64).min(cap)
    }
    #[cfg(not(unix))]
    {
        let _ = limit;
        cap
    }
}

/// Explicit `nofile` and `nproc` limits, which Podman needs on some kernels to start a
/// container at all. Podman cannot raise them above its own hard limits (seen: nofile 20000,
/// nproc 32768), so they stay modest: 16384 files and 8192 processes, or this user's own hard
/// limits when lower.
pub fn podman_ulimits() -> Vec<ResourcesUlimits> {
    let ulimit = |name: &str, n: i64| ResourcesUlimits {
        name: Some(name.into()),
        soft: Some(n),
        hard: Some(n),
    };
    vec![
        ulimit("nofile", own_hard_limit(Limit::Files, 16384)),
        ulimit("nproc", own_hard_limit(Limit::Processes, 8192)),
    ]
}

/// The engine body for a spec. Podman gets explicit ulimits, and no init process: its init
/// (catatonit) is a separate package that many hosts lack, while Docker ships its own.
pub fn create_body(spec: &ContainerSpec, podman: bool) -> ContainerCreateBody {
    let mut mounts: Vec<Mount> = spec
        .binds
        .iter()
        .map(|b| Mount {
            typ: Some(MountType::BIND),
            source: Some(b.source.to_string_lossy().to_string()),
            target: Some(b.target.clone()),
            read_only: Some(b.read_only),
            ..Default::default()
        })
        .collect();
    mounts.extend(spec.volumes.iter().map(|v| Mount {
        typ: Some(MountType::VOLUME),
        source: Some(v.name.clone()),
        target: Some(v.target.clone()),
        read_only: Some(v.read_only),
        ..Default::default()
    }));
    let mut body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(spec.cmd.clone()),
        entrypoint: Some(vec![]),
        env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        labels: Some(
            spec.labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        user: Some(spec.user.clone()),
        working_dir: Some(spec.working_dir.clone()),
        healthcheck: Some(HealthConfig {
            test: Some(spec.health.test.clone()),
            interval: Some(spec.health.interval_ns),
            timeout: Some(spec.health.timeout_ns),
            retries: Some(spec.health.retries),
            start_period: Some(spec.health.start_period_ns),
            start_interval: None,
        }),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            // Its holder's namespace (`create` names it): the holder publishes the port and
            // carries the `--add-host` entries and DNS flags, which that mode does not take.
            network_mode: Some(spec.network.clone()),
            readonly_rootfs: Some(spec.read_only_root),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec![
                "no-new-privileges".into(),
                seccomp::security_opt(&spec.seccomp_file, podman),
            ]),
            pids_limit: spec.limits_enforced.then_some(spec.pids_limit),
            privileged: Some(false),
            userns_mode: spec.keep_id.then(|| "keep-id".to_string()),
            ulimits: podman.then(podman_ulimits),
            restart_policy: Some(RestartPolicy {
                name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
                maximum_retry_count: None,
            }),
            init: (!podman).then_some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    if let Some(hc) = body.host_config.as_mut() {
        apply_run_flags(hc, &spec.run_flags);
        apply_limits_and_tmpfs(hc, spec);
    }
    body
}

/// The spec's limits and tmpfs mounts, after the run flags: a run flag naming a limit or a
/// tmpfs path wins over the spec's (the spec already holds them when it was built with the
/// flags). An engine that cannot enforce the limits (rootless on cgroup v1) is not asked for
/// them.
fn apply_limits_and_tmpfs(hc: &mut HostConfig, spec: &ContainerSpec) {
    let f = &spec.run_flags;
    let enforced = |v: i64| spec.limits_enforced.then_some(v);
    hc.memory = enforced(f.memory.unwrap_or(spec.limits.memory));
    hc.nano_cpus = enforced(f.nano_cpus.unwrap_or(spec.limits.nano_cpus));
    hc.cpu_shares = enforced(f.cpu_shares.unwrap_or(spec.limits.cpu_shares));
    let mut tmpfs = spec.tmpfs.clone();
    tmpfs.extend(f.tmpfs.clone());
    hc.tmpfs = Some(tmpfs.into_iter().collect());
}

/// Maps the run flags onto the host config: the layer's own settings stay (security options
/// are added to, a ulimit of the same name replaces Podman's).
pub fn apply_run_flags(hc: &mut HostConfig, f: &RunFlags) {
    hc.runtime = f.runtime.clone();
    hc.memory = f.memory;
    hc.memory_swap = f.memory_swap;
    hc.nano_cpus = f.nano_cpus;
    hc.cpu_shares = f.cpu_shares;
    hc.shm_size = f.shm_size;
    // DNS flags go to the namespace holder (see `holder::create_body`).
    if !f.tmpfs.is_empty() {
        hc.tmpfs = Some(f.tmpfs.clone().into_iter().collect());
    }
    if !f.security_opt.is_empty() {
        hc.security_opt
            .get_or_insert_with(Vec::new)
            .extend(f.security_opt.iter().cloned());
    }
    if !f.ulimits.is_empty() {
        let mut ulimits = hc.ulimits.take().unwrap_or_default();
        ulimits.retain(|u| !f.ulimits.iter().any(|o| Some(&o.name) == u.name.as_ref()));
        ulimits.extend(f.ulimits.iter().map(|u| ResourcesUlimits {
            name: Some(u.name.clone()),
            soft: Some(u.soft),
            hard: Some(u.hard),
        }));
        hc.ulimits = Some(ulimits);
    }
    hc.device_requests = f.gpus.as_ref().map(|g| {
        let (count, ids) = match g {
            Gpus::All => (Some(-1), None),
            Gpus::Count(n) => (Some(*n), None),
            Gpus::Devices(ids) => (None, Some(ids.clone())),
        };
        vec![DeviceRequest {
            driver: Some(String::new()),
            count,
            device_ids: ids,
            capabilities: Some(vec![vec!["gpu".into()]]),
            options: None,
        }]
    });
}

/// Creates (does not start) the container of a spec, on the network with id `network` (its
/// name could be ambiguous while two hubs race to create it).
pub async fn create(
    engine: &impl EngineApi,
    spec: &ContainerSpec,
    podman: bool,
    network: &str,
) -> Result<Created> {
    if podman {
        // Podman's Docker API takes the profile as a path.
        seccomp::write_file(&spec.seccomp_file).map_err(|e| {
            let doing = format!(
                "cannot write its system-call filter's profile {} (check that the Po home is writable)",
                spec.seccomp_file.display()
            );
            let workspace = spec.labels.get(crate::sandbox::blueprint::spec::LABEL_WORKSPACE);
            Error::container_caused(workspace.unwrap_or(&spec.name).clone(), doing, e)
        })?;
    }
    let mut body = create_body(spec, podman);
    if let Some(hc) = body.host_config.as_mut() {
        hc.network_mode = Some(network.to_string());
        if spec.keep_id && network.starts_with("container:") {
            // keep-id is its holder's (see holder::create_body): joined with its network.
            hc.userns_mode = Some(network.to_string());
        }
    }
    match engine.create_container(Some(&spec.name), body).await {
        Ok(id) => Ok(Created::New(id)),
        Err(EngineError::Conflict(_)) => Ok(Created::NameTaken),
        Err(EngineError::NetworkGone(_)) => Ok(Created::NetworkGone),
        Err(e) => {
            let op = Operation::Create(Resource::Container, spec.name.clone());
            Err(engine_err(engine, op)(e))
        }
    }
}

/// Starts a container; already running is fine.
pub async fn start(engine: &impl EngineApi, id: &str) -> Result<()> {
    match engine.start_container(id).await {
        Ok(()) => Ok(()),
        Err(EngineError::NotModified(_)) => Ok(()),
        Err(e) => Err(engine_err(engine, Operation::Start(id.into()))(e)),
    }
}

/// Stops ([`STOP_GRACE`] for the process to exit) and removes a container, keeping its
/// volumes. Gone already is fine. `engine` is the client for changing calls: the stop may take
/// its bound plus the grace.
pub async fn stop_and_remove(engine: &impl EngineApi, id: &str) -> Result<()> {
    let grace = STOP_GRACE.as_secs() as i32;
    let stopper = engine.with_timeout(engine.timeout() + STOP_GRACE);
    match stopper.stop_container(id, grace).await {
        Ok(()) => {}
        Err(e)
            if matches!(e, EngineError::NotModified(_))
                || matches!(e, EngineError::NotFound(_)) => {}
        Err(e) => return Err(engine_err(&stopper, Operation::Stop(id.into()))(e)),
    }
    match engine.remove_container(id).await {
        Ok(()) => Ok(()),
        Err(EngineError::NotFound(_)) => Ok(()),
        // Another stop is already removing it.
        Err(EngineError::Conflict(_)) => Ok(()),
        Err(e) => Err(engine_err(
            engine,
            Operation::Remove(Resource::Container, id.into()),
        )(e)),
    }
}

/// The last `lines` lines of a container's output.
pub async fn logs_tail(engine: &impl EngineApi, id: &str, lines: usize) -> String {
    // A tail, not a follow: the whole read gets the client's (reading) bound.
    let Ok(out) = tokio::time::timeout(engine.timeout(), engine.logs_tail(id, lines)).await else {
        return format!(
            "(the engine did not send the logs within {} ms)",
            engine.timeout().as_millis()
        );
    };
    if out.trim().is_empty() {
        "(no output)".to_string()
    } else {
        out.trim_end().to_string()
    }
}

/// One HTTP GET on loopback: did `path` answer 2xx?
pub async fn answers(port: u16, path: &str) -> bool {
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: po-sandbox\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = [0u8; 64];
        let mut n = 0;
        while n < 12 {
            let got = s.read(&mut buf[n..]).await.ok()?;
            if got == 0 {
                break;
            }
            n += got;
        }
        let head = std::str::from_utf8(&buf[..n]).ok()?;
        Some(head.starts_with("HTTP/1.") && head.as_bytes().get(9) == Some(&b'2'))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(true))
    )
}

/// Why [`wait_healthy`] gave up on a container's server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unhealthy {
    /// The server did not answer within the bound.
    #[error("no answer within {ms} ms")]
    NoAnswer { ms: u128 },
    /// The container stopped; `state` is the engine's word for it.
    #[error("the container is {state}")]
    NotRunning { state: String },
    /// The container is no longer there.
    #[error("the container is gone (something removed it)")]
    Gone,
}

/// Waits until the server answers `path` on `port`, checking every second that the container
/// still runs. `Err` holds why it gave up.
pub async fn wait_healthy(
    engine: &impl EngineApi,
    id: &str,
    port: u16,
    path: &str,
    timeout: Duration,
) -> std::result::Result<(), Unhealthy> {
    let started = Instant::now();
    let mut last_check = Instant::now();
    loop {
        if answers(port, path).await {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            return Err(Unhealthy::NoAnswer {
                ms: timeout.as_millis(),
            });
        }
        if last_check.elapsed() >= Duration::from_secs(1) {
            last_check = Instant::now();
            match inspect(engine, id, None).await {
                Ok(Some(c)) if !c.running() => {
                    return Err(Unhealthy::NotRunning { state: c.state });
                }
                Ok(None) => return Err(Unhealthy::Gone),
                _ => {}
            }
        }
        // Often early (a server usually answers within a second of its start: each poll
        // saved is start-up time), then calmer.
        let pause = if started.elapsed() < Duration::from_secs(2) {
            Duration::from_millis(20)
        } else {
            Duration::from_millis(100)
        };
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
pub(in crate::sandbox) mod tests;
