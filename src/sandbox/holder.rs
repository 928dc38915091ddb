//! The namespace holder of a workspace (the Kubernetes pod pattern): a small container that
//! owns the workspace's network namespace, joins the per-hub network and publishes the
//! server's port. At every start of its own (first start, restart policy, engine restart) it
//! loads the workspace's nft ruleset and only then drops every capability and idles, so its
//! namespace never runs without rules for longer than that load; the workspace container
//! joins it (`container:<holder>`) with no capability at all.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig, PortBinding, RestartPolicy};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;

use crate::error::{Error, Result};
use crate::sandbox::container::{self, engine_err, is_status};
use crate::sandbox::firewall::{self, NetworkMode};
use crate::sandbox::spec::{
    ContainerSpec, HolderPosture, LABEL_HOLDER_OF, LABEL_NET_MODE, LABEL_NET_RULES, LABEL_OWNER,
    LABEL_SANDBOX,
};

/// What the holder prints once its rules are loaded (before it drops its capabilities).
pub const READY: &str = "po-net-ready";
/// The capabilities the holder starts with: `NET_ADMIN` to load the rules, `SETPCAP`,
/// `SETUID` and `SETGID` to give up every capability (bounding set too) and root right after.
pub const HOLDER_CAPS: [&str; 4] = ["NET_ADMIN", "SETPCAP", "SETUID", "SETGID"];
/// How long the holder may take to load its rules.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// The holder's program (POSIX sh: dash and busybox): resolve the broker's host name when the
/// route is TCP, load the rules (a failure ends the container: it never idles without them),
/// say so, then idle as nobody with no capability left (bounding and inheritable sets empty;
/// util-linux's setpriv by its path: busybox's shell prefers its own, smaller applet).
pub const SCRIPT: &str = r#"set -e
if [ -n "$PO_NET_BROKER_HOST" ]; then
  b=
  while read -r a n rest; do if [ "$n" = "$PO_NET_BROKER_HOST" ]; then b=$a; fi; done </etc/hosts
  if [ -z "$b" ]; then echo "po-net: $PO_NET_BROKER_HOST is not in /etc/hosts" >&2; exit 1; fi
  printf 'define broker = %s\n%s\n' "$b" "$PO_NET_RULES" | nft -f /dev/stdin
else
  printf '%s\n' "$PO_NET_RULES" | nft -f /dev/stdin
fi
echo po-net-ready
exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all sleep 2147483647
"#;

/// The holder's name: `pon-<owner>-<workspace>` (never a workspace container's `po-…`).
pub fn holder_name(owner: &str, workspace_id: &str) -> String {
    format!("pon-{owner}-{workspace_id}")
}

/// The holder's engine body for a workspace spec, its marked ruleset and the broker's host
/// name (TCP routes). It carries the spec's published port, `--add-host` entries and DNS run
/// flags (a `container:` network mode takes none of them), and small limits of its own.
pub fn create_body(
    spec: &ContainerSpec,
    rules: &str,
    rules_hash: &str,
    broker_host: Option<&str>,
    podman: bool,
    network: &str,
) -> ContainerCreateBody {
    let port = format!("{}/tcp", spec.container_port);
    let labels = labels(spec, rules_hash);
    let mut env = vec![format!("PO_NET_RULES={rules}")];
    env.extend(broker_host.map(|h| format!("PO_NET_BROKER_HOST={h}")));
    let f = &spec.run_flags;
    let vec_or_none = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        entrypoint: Some(vec!["/bin/sh".into(), "-c".into()]),
        cmd: Some(vec![SCRIPT.into()]),
        env: Some(env),
        labels: Some(labels),
        user: Some("0:0".into()),
        exposed_ports: Some(vec![port.clone()]),
        stop_signal: Some("SIGKILL".into()),
        healthcheck: Some(health(spec, rules_hash)),
        host_config: Some(HostConfig {
            network_mode: Some(network.to_string()),
            port_bindings: Some(HashMap::from([(
                port,
                Some(vec![PortBinding {
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(String::new()),
                }]),
            )])),
            cap_drop: Some(vec!["ALL".into()]),
            cap_add: Some(HOLDER_CAPS.iter().map(|c| c.to_string()).collect()),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            // Not asked for where the engine cannot enforce them (rootless on cgroup v1).
            pids_limit: spec.limits_enforced.then_some(16),
            memory: spec.limits_enforced.then_some(32 << 20),
            nano_cpus: spec.limits_enforced.then_some(500_000_000),
            cpu_shares: spec.limits_enforced.then_some(spec.limits.cpu_shares),
            privileged: Some(false),
            // Rootless Podman's keep-id: made here, and the workspace container joins this
            // user namespace with the network one (a network namespace is only joined from
            // the user namespace that owns it).
            userns_mode: spec.keep_id.then(|| "keep-id".to_string()),
            ulimits: podman.then(container::podman_ulimits),
            extra_hosts: (!spec.extra_hosts.is_empty()).then(|| spec.extra_hosts.clone()),
            dns: vec_or_none(&f.dns),
            dns_search: vec_or_none(&f.dns_search),
            dns_options: vec_or_none(&f.dns_options),
            // The engine's default runtime, whatever `--runtime` the workspace gets: nft talks
            // to the kernel's netfilter of the namespace, which a gVisor sandbox (on
            // `--network=host`) then uses for the workspace's traffic.
            runtime: None,
            restart_policy: Some(RestartPolicy {
                name: Some(bollard::models::RestartPolicyNameEnum::UNLESS_STOPPED),
                maximum_retry_count: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The holder's labels: ours, its workspace (never as `po.workspace`), its mode and rules.
fn labels(spec: &ContainerSpec, rules_hash: &str) -> HashMap<String, String> {
    let label = |k: &str| spec.labels.get(k).cloned().unwrap_or_default();
    [
        (LABEL_SANDBOX, "1".to_string()),
        (LABEL_OWNER, label(LABEL_OWNER)),
        (
            LABEL_HOLDER_OF,
            label(crate::sandbox::spec::LABEL_WORKSPACE),
        ),
        (LABEL_NET_MODE, spec.network_mode.as_str().to_string()),
        (LABEL_NET_RULES, rules_hash.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Healthy while its rules are loaded (CIS 5.27): the marker counter is listed.
fn health(spec: &ContainerSpec, rules_hash: &str) -> bollard::models::HealthConfig {
    bollard::models::HealthConfig {
        test: Some(
            ["CMD", "nft", "list", "counter", "inet", firewall::TABLE]
                .iter()
                .map(|s| s.to_string())
                .chain([format!("po_rules_{rules_hash}")])
                .collect(),
        ),
        interval: Some(spec.health.interval_ns),
        timeout: Some(spec.health.timeout_ns),
        retries: Some(spec.health.retries),
        start_period: None,
        start_interval: None,
    }
}

/// Makes (does not start) the workspace's holder on the network with id `network`; returns its
/// id. A stale holder of the same name is replaced.
pub async fn create(
    docker: &Docker,
    spec: &ContainerSpec,
    rules: &firewall::RulesInput,
    broker_host: Option<&str>,
    podman: bool,
    network: &str,
) -> Result<String> {
    let name = name_of(spec);
    let (text, hash) = firewall::marked(&firewall::ruleset(rules));
    let body = create_body(spec, &text, &hash, broker_host, podman, network);
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    let created = match docker
        .create_container(Some(options.clone()), body.clone())
        .await
    {
        Err(e) if is_status(&e, 409) => {
            remove(docker, &name).await?;
            docker.create_container(Some(options), body).await
        }
        other => other,
    };
    Ok(created
        .map_err(engine_err(docker, format!("create container {name}")))?
        .id)
}

/// The holder's name for a workspace spec.
fn name_of(spec: &ContainerSpec) -> String {
    let label = |k: &str| spec.labels.get(k).cloned().unwrap_or_default();
    holder_name(
        &label(LABEL_OWNER),
        &label(crate::sandbox::spec::LABEL_WORKSPACE),
    )
}

/// Starts a created holder and waits until its rules are loaded. Any failure removes the
/// holder (nothing half-done) and names its output.
pub async fn ready(docker: &Docker, spec: &ContainerSpec, id: &str) -> Result<()> {
    let Err(why) = start_and_wait(docker, id).await else {
        return Ok(());
    };
    let logs = container::logs_tail(docker, id, 20).await;
    let _ = remove(docker, id).await;
    let workspace = spec
        .labels
        .get(crate::sandbox::spec::LABEL_WORKSPACE)
        .cloned()
        .unwrap_or_default();
    Err(Error::container(
        &workspace,
        format!(
            "its network holder {} did not load the {} network rules ({why}); its output:\n{logs}",
            name_of(spec),
            spec.network_mode.as_str()
        ),
    ))
}

/// Starts the holder and waits for its [`READY`] line.
async fn start_and_wait(docker: &Docker, id: &str) -> std::result::Result<(), String> {
    container::start(docker, id)
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    loop {
        let options = LogsOptionsBuilder::new().stdout(true).stderr(false).build();
        let mut out = String::new();
        let mut stream = docker.logs(id, Some(options));
        while let Some(Ok(chunk)) = stream.next().await {
            out.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        if out.lines().any(|l| l.trim() == READY) {
            return Ok(());
        }
        match container::inspect(docker, id, None).await {
            Ok(Some(c)) if !c.running() => return Err(format!("it is {}", c.state)),
            Ok(None) => return Err("it is gone".into()),
            _ => {}
        }
        if started.elapsed() > READY_WITHIN {
            return Err(format!("not ready within {} s", READY_WITHIN.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Removes a holder (by id or name) at once: it holds no state. Gone already is fine.
pub async fn remove(docker: &Docker, id: &str) -> Result<()> {
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
        Err(e) => Err(engine_err(docker, format!("remove container {id}"))(e)),
    }
}

/// Removes the holders of an owner (one workspace's, or all). Returns how many.
pub async fn remove_of(docker: &Docker, owner: &str, workspace: Option<&str>) -> Result<usize> {
    let mut labels = vec![format!("{LABEL_OWNER}={owner}")];
    labels.push(match workspace {
        Some(w) => format!("{LABEL_HOLDER_OF}={w}"),
        None => LABEL_HOLDER_OF.to_string(),
    });
    let list = container::list_labelled(docker, labels).await?;
    for c in &list {
        if let Some(id) = &c.id {
            remove(docker, id).await?;
        }
    }
    Ok(list.len())
}

/// The holder a workspace container joined (`container:<id>` network mode), as adoption reads
/// it; with `check_rules`, one exec lists its nft table to see the rules are loaded. `None`
/// when the container joined none or it is gone.
pub async fn posture(
    docker: &Docker,
    network_mode: &str,
    container_port: u16,
    check_rules: bool,
) -> Result<Option<HolderPosture>> {
    let Some(id) = network_mode.strip_prefix("container:") else {
        return Ok(None);
    };
    let info = match docker
        .inspect_container(id, None::<InspectContainerOptions>)
        .await
    {
        Ok(i) => i,
        Err(e) if is_status(&e, 404) => return Ok(None),
        Err(e) => return Err(engine_err(docker, format!("inspect container {id}"))(e)),
    };
    let live = container::live_from(info, Some(container_port));
    let label = |k: &str| live.labels.get(k).cloned();
    let rules_hash = label(LABEL_NET_RULES);
    let rules_loaded = match (&rules_hash, check_rules && live.running()) {
        (Some(hash), true) => rules_listed(docker, &live.id)
            .await?
            .is_some_and(|l| firewall::shows_rules(&l, hash)),
        _ => false,
    };
    Ok(Some(HolderPosture {
        id: live.id.clone(),
        running: live.running(),
        host_port: live.host_port,
        networks: live.posture.networks.clone(),
        ports: live.posture.ports.clone(),
        mode: label(LABEL_NET_MODE).and_then(|m| NetworkMode::parse(&m)),
        rules_hash,
        rules_checked: check_rules,
        rules_loaded,
        cap_add: live.posture.cap_add.clone(),
        privileged: live.posture.privileged,
    }))
}

/// `nft list table inet po_sandbox` in the holder (as root, with the holder's capabilities);
/// `None` when it could not run.
async fn rules_listed(docker: &Docker, id: &str) -> Result<Option<String>> {
    let cmd = ["nft", "list", "table", "inet", firewall::TABLE];
    run_in(
        docker,
        id,
        cmd.iter().map(|a| a.to_string()).collect(),
        vec![],
    )
    .await
}

/// Lets a TCP broker route's `ports` (this hub's broker and egress proxy listeners) through
/// the holder's rules, on the address its `host` resolves to there, when they are not yet:
/// a later hub listens on other ports than the hub that made the holder. Each rule goes
/// first in the output chain (before any refusal); earlier hubs' ports stay.
pub async fn allow_broker_ports(
    docker: &Docker,
    workspace: &str,
    id: &str,
    host: &str,
    ports: &[u16],
) -> Result<()> {
    let script = format!(
        r#"set -e
b=
while read -r a n rest; do if [ "$n" = "$H" ]; then b=$a; fi; done </etc/hosts
[ -n "$b" ] || {{ echo "$H is not in /etc/hosts"; exit 1; }}
for p in $PORTS; do
  nft list chain inet {t} output | grep -q "ip daddr $b tcp dport $p accept" || nft insert rule inet {t} output ip daddr "$b" tcp dport "$p" accept
done
echo po-net-allowed"#,
        t = firewall::TABLE
    );
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let env = vec![format!("H={host}"), format!("PORTS={}", ports.join(" "))];
    let cmd = vec!["/bin/sh".to_string(), "-c".into(), script];
    let out = run_in(docker, id, cmd, env).await?.unwrap_or_default();
    if out.trim_end().ends_with("po-net-allowed") {
        return Ok(());
    }
    Err(crate::error::Error::container(
        workspace,
        format!(
            "cannot let the broker's ports through its network holder {id}'s rules: {}",
            out.trim()
        ),
    ))
}

/// Runs `cmd` in the holder as root (with the holder's capabilities), its output as text;
/// `None` when the holder is gone or not running.
async fn run_in(
    docker: &Docker,
    id: &str,
    cmd: Vec<String>,
    env: Vec<String>,
) -> Result<Option<String>> {
    let config = CreateExecOptions {
        cmd: Some(cmd),
        env: Some(env),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        user: Some("0:0".into()),
        ..Default::default()
    };
    let exec = match docker.create_exec(id, config).await {
        Ok(e) => e,
        Err(e) if is_status(&e, 409) || is_status(&e, 404) => return Ok(None),
        Err(e) => return Err(engine_err(docker, format!("exec in container {id}"))(e)),
    };
    let started = docker
        .start_exec(&exec.id, None)
        .await
        .map_err(engine_err(docker, format!("exec in container {id}")))?;
    let StartExecResults::Attached { mut output, .. } = started else {
        return Ok(None);
    };
    let mut out = String::new();
    while let Some(Ok(chunk)) = output.next().await {
        out.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
    }
    Ok(Some(out))
}
