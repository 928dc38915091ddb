//! The namespace holder of a workspace (the Kubernetes pod pattern): a small container that
//! owns the workspace's network namespace, joins the per-hub network and publishes the
//! server's port. It has no capability at all and idles as nobody. After every start of the
//! holder (first start, restart policy, engine restart) a short-lived rules helper with
//! `NET_ADMIN` alone joins its namespace, loads the workspace's nft ruleset (which the holder
//! carries) and exits; the workspace container joins the holder (`container:<holder>`) with no
//! capability either, and its process waits at a start gate until the rules' marker shows
//! (`spec::GATE`), so it never runs without them. A record next to the workspace's token file
//! (outside every mount) says for which start of the holder this Po home loaded them, so
//! adoption needs no call into the container.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::EngineError;
use crate::engine::model::{ContainerCreateBody, HostConfig, PortBinding, RestartPolicy};

use crate::engine::api::EngineApi;
use crate::engine::{Operation, Resource};
use crate::error::{Error, Result};
use crate::sandbox::blueprint::firewall::{self, NetworkMode};
use crate::sandbox::blueprint::spec::{
    ContainerSpec, HolderPosture, LABEL_HOLDER_OF, LABEL_NET_MODE, LABEL_NET_RULES,
    LABEL_NET_SHAPE, LABEL_OWNER, LABEL_SANDBOX,
};
use crate::sandbox::on_engine::container::{self, engine_err};

/// Label: on a rules helper, the workspace whose holder it loads rules into.
pub const LABEL_RULES_FOR: &str = "po.rules-for";
/// The one capability the rules helper has.
pub const HELPER_CAPS: [&str; 1] = ["NET_ADMIN"];
/// How long the rules helper may take, start to exit.
const HELPER_WITHIN: Duration = Duration::from_secs(30);

/// The rules helper's program (POSIX sh: dash and busybox), as root with `NET_ADMIN` alone in
/// the holder's namespace: resolve the broker's host name when the route is TCP, load the
/// holder's ruleset unless the one with its hash is loaded already (atomically; a load keeps
/// the port set's elements, see [`firewall::ruleset`]), let this hub's TCP broker ports through
/// (a later hub listens on other ports than the one that made the holder; earlier hubs' ports
/// stay, also when two helpers both load because both looked before either had loaded): added
/// to the port set, or, in a holder made before the set, as rules of their own. Say so. Any
/// failure exits non-zero. The table's and the set's names come as `PO_NET_TABLE` and
/// `PO_NET_PORT_SET` ([`firewall::TABLE`], [`firewall::PORT_SET`]).
pub const HELPER_SCRIPT: &str = r#"set -e
b=
if [ -n "$PO_NET_BROKER_HOST" ]; then
  while read -r a n rest; do if [ "$n" = "$PO_NET_BROKER_HOST" ]; then b=$a; fi; done </etc/hosts
  if [ -z "$b" ]; then echo "po-net: $PO_NET_BROKER_HOST is not in /etc/hosts" >&2; exit 1; fi
fi
if ! nft list counter inet "$PO_NET_TABLE" "po_rules_$PO_NET_HASH" >/dev/null 2>&1; then
  if [ -n "$b" ]; then
    printf 'define broker = %s
%s
' "$b" "$PO_NET_RULES" | nft -f /dev/stdin
  else
    printf '%s
' "$PO_NET_RULES" | nft -f /dev/stdin
  fi
fi
if [ -n "$PO_NET_PORTS" ]; then
  if nft list set inet "$PO_NET_TABLE" "$PO_NET_PORT_SET" >/dev/null 2>&1; then
    l=
    for p in $PO_NET_PORTS; do l="$l${l:+, }$p"; done
    nft add element inet "$PO_NET_TABLE" "$PO_NET_PORT_SET" "{ $l }"
  else
    for p in $PO_NET_PORTS; do
      nft list chain inet "$PO_NET_TABLE" output | grep -q "ip daddr $b tcp dport $p accept" || nft insert rule inet "$PO_NET_TABLE" output ip daddr "$b" tcp dport "$p" accept
    done
  fi
fi
echo po-net-ready
"#;

/// The holder's name: `pon-<owner>-<workspace>` (never a workspace container's `po-…`).
pub fn holder_name(owner: &str, workspace_id: &str) -> String {
    format!("pon-{owner}-{workspace_id}")
}

/// A holder's ruleset, as it carries it for its rules helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The marked ruleset (`PO_NET_RULES`).
    pub text: String,
    /// Its hash (`po.net-rules`, and the table's marker counter).
    pub hash: String,
    /// The broker's host name the helper resolves (`PO_NET_BROKER_HOST`, TCP routes).
    pub broker_host: Option<String>,
}

impl Rules {
    /// The marked ruleset of `input`, with the broker's host name on a TCP route.
    pub fn of(input: &firewall::RulesInput, broker_host: Option<&str>) -> Rules {
        let (text, hash) = firewall::marked(&firewall::ruleset(input));
        Rules {
            text,
            hash,
            broker_host: broker_host.map(str::to_string),
        }
    }

    /// What an adopted holder carries; `None` when it carries no rules.
    pub fn carried_by(h: &HolderPosture) -> Option<Rules> {
        Some(Rules {
            text: h.rules.clone()?,
            hash: h.rules_hash.clone()?,
            broker_host: h.broker_host.clone(),
        })
    }
}

/// The holder's engine body for a workspace spec, its rules and its network. It carries the
/// spec's published port, `--add-host` entries and DNS run flags (a `container:` network mode
/// takes none of them), the rules for its helper, and small limits of its own (room for its
/// health check: the bundle's interpreter looking for the rules' marker).
pub fn create_body(
    spec: &ContainerSpec,
    rules: &Rules,
    podman: bool,
    network: &str,
) -> ContainerCreateBody {
    let port = format!("{}/tcp", spec.container_port);
    let labels = labels(spec, &rules.hash);
    let mut env = vec![format!("PO_NET_RULES={}", rules.text)];
    env.extend(
        rules
            .broker_host
            .as_ref()
            .map(|h| format!("PO_NET_BROKER_HOST={h}")),
    );
    let f = &spec.run_flags;
    let vec_or_none = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        entrypoint: Some(vec!["sleep".into(), "2147483647".into()]),
        cmd: Some(vec![]),
        env: Some(env),
        labels: Some(labels),
        user: Some("65534:65534".into()),
        exposed_ports: Some(vec![port.clone()]),
        stop_signal: Some("SIGKILL".into()),
        healthcheck: Some(health(spec)),
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
            cap_add: None,
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            // Not asked for where the engine cannot enforce them (rootless on cgroup v1).
            pids_limit: spec.limits_enforced.then_some(32),
            memory: spec.limits_enforced.then_some(128 << 20),
            nano_cpus: spec.limits_enforced.then_some(500_000_000),
            cpu_shares: spec.limits_enforced.then_some(spec.limits.cpu_shares),
            privileged: Some(false),
            // Rootless Podman's keep-id: made here, and the workspace container and the rules
            // helper join this user namespace with the network one (a network namespace is
            // only joined from the user namespace that owns it).
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
                name: Some(crate::engine::model::RestartPolicyNameEnum::UNLESS_STOPPED),
                maximum_retry_count: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The holder's labels: ours, its workspace (never as `po.workspace`), its mode, rules and
/// their shape.
fn labels(spec: &ContainerSpec, rules_hash: &str) -> HashMap<String, String> {
    let label = |k: &str| spec.labels.get(k).cloned().unwrap_or_default();
    [
        (LABEL_SANDBOX, "1".to_string()),
        (LABEL_OWNER, label(LABEL_OWNER)),
        (
            LABEL_HOLDER_OF,
            label(crate::sandbox::blueprint::spec::LABEL_WORKSPACE),
        ),
        (LABEL_NET_MODE, spec.network_mode.as_str().to_string()),
        (LABEL_NET_RULES, rules_hash.to_string()),
        (LABEL_NET_SHAPE, firewall::shape(spec.network_mode)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Healthy while its rules are loaded (CIS 5.27): the bundle's interpreter sees the rules'
/// marker refused, with no capability.
fn health(spec: &ContainerSpec) -> crate::engine::model::HealthConfig {
    crate::engine::model::HealthConfig {
        test: Some(vec![
            "CMD".into(),
            spec.interpreter.clone(),
            "-e".into(),
            firewall::mark_probe(false),
        ]),
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
    engine: &impl EngineApi,
    spec: &ContainerSpec,
    rules: &Rules,
    podman: bool,
    network: &str,
) -> Result<String> {
    let name = name_of(spec);
    let body = create_body(spec, rules, podman, network);
    let created = match engine.create_container(Some(&name), body.clone()).await {
        Err(EngineError::Conflict(_)) => {
            remove(engine, &name).await?;
            engine.create_container(Some(&name), body).await
        }
        other => other,
    };
    created.map_err(engine_err(
        engine,
        Operation::Create(Resource::Container, name),
    ))
}

/// The holder's name for a workspace spec.
fn name_of(spec: &ContainerSpec) -> String {
    let label = |k: &str| spec.labels.get(k).cloned().unwrap_or_default();
    holder_name(
        &label(LABEL_OWNER),
        &label(crate::sandbox::blueprint::spec::LABEL_WORKSPACE),
    )
}

/// How a rules helper is made for a holder.
#[derive(Debug, Clone, Copy)]
pub struct Helper<'a> {
    /// The image (the workspace's: it has nft).
    pub image: &'a str,
    /// The owner and workspace, for its labels and messages.
    pub owner: &'a str,
    pub workspace: &'a str,
    /// Rootless Podman's keep-id: it joins the holder's user namespace too.
    pub keep_id: bool,
    /// Podman (its ulimits).
    pub podman: bool,
    /// The engine enforces limits.
    pub limits_enforced: bool,
}

/// Starts a created holder and loads its rules (with `ports` let through): its helper is
/// created while the holder starts, and the holder's `State.StartedAt` is read while the
/// helper runs. Returns that start, for the rules record (`None` when the engine did not say
/// it: no record then, and the next adoption runs a helper). Any failure removes the holder
/// (nothing half-done) and names the helper's output.
pub async fn ready(
    engine: &impl EngineApi,
    helper: Helper<'_>,
    id: &str,
    rules: &Rules,
    ports: &[u16],
) -> Result<Option<String>> {
    let (started, made) = tokio::join!(
        container::start(engine, id),
        create_helper(engine, helper, id, rules, ports)
    );
    let loaded = match (started, made) {
        (Ok(()), Ok(helper_id)) => {
            let (ran, at) = tokio::join!(
                run_helper(engine, helper, id, &helper_id),
                started_at(engine, id)
            );
            ran.map(|()| at)
        }
        (started, made) => {
            if let Ok(helper_id) = &made {
                let _ = remove(engine, helper_id).await;
            }
            started.and(made.map(|_| None))
        }
    };
    if loaded.is_err() {
        let _ = remove(engine, id).await;
    }
    loaded
}

/// A container's `State.StartedAt`; `None` when the engine does not give it.
async fn started_at(engine: &impl EngineApi, id: &str) -> Option<String> {
    let info = engine.inspect_container(id).await.ok()?;
    info.state?.started_at
}

/// Runs a rules helper in a running holder's namespace: loads `rules` unless loaded, lets
/// `ports` through on the broker's address. The helper is removed whatever happens.
pub async fn load_rules(
    engine: &impl EngineApi,
    helper: Helper<'_>,
    holder_id: &str,
    rules: &Rules,
    ports: &[u16],
) -> Result<()> {
    let helper_id = create_helper(engine, helper, holder_id, rules, ports).await?;
    run_helper(engine, helper, holder_id, &helper_id).await
}

/// Creates (does not start) a rules helper for a holder; returns its id.
async fn create_helper(
    engine: &impl EngineApi,
    helper: Helper<'_>,
    holder_id: &str,
    rules: &Rules,
    ports: &[u16],
) -> Result<String> {
    let body = helper_body(helper, holder_id, rules, ports);
    engine
        .create_container(None, body)
        .await
        .map_err(engine_err(
            engine,
            Operation::CreateHelper(helper.workspace.into()),
        ))
}

/// Starts a created helper, waits for its exit and removes it. Exit 0 means the rules are
/// loaded (its script stops at the first failure); otherwise the error names its output.
async fn run_helper(
    engine: &impl EngineApi,
    helper: Helper<'_>,
    holder_id: &str,
    helper_id: &str,
) -> Result<()> {
    let outcome = tokio::time::timeout(HELPER_WITHIN, started_exit(engine, helper_id)).await;
    if let Ok(Ok(0)) = outcome {
        remove(engine, helper_id).await?;
        return Ok(());
    }
    let logs = container::logs_tail(engine, helper_id, 20).await;
    let _ = remove(engine, helper_id).await;
    let why = match outcome {
        Ok(Ok(code)) => format!("it exited with code {code}"),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("it did not finish within {} s", HELPER_WITHIN.as_secs()),
    };
    Err(Error::container(
        helper.workspace,
        format!(
            "the network rules helper did not load the rules into its holder {} ({why}); its output:\n{logs}",
            &holder_id[..holder_id.len().min(12)]
        ),
    ))
}

/// The rules helper's engine body: root with `NET_ADMIN` alone, in the holder's network (and,
/// on keep-id, user) namespace, read-only, small, removed by whoever made it.
fn helper_body(
    helper: Helper<'_>,
    holder_id: &str,
    rules: &Rules,
    ports: &[u16],
) -> ContainerCreateBody {
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let mut env = vec![
        format!("PO_NET_RULES={}", rules.text),
        format!("PO_NET_HASH={}", rules.hash),
        format!("PO_NET_TABLE={}", firewall::TABLE),
        format!("PO_NET_PORT_SET={}", firewall::PORT_SET),
        format!("PO_NET_PORTS={}", ports.join(" ")),
    ];
    env.extend(
        rules
            .broker_host
            .as_ref()
            .map(|h| format!("PO_NET_BROKER_HOST={h}")),
    );
    let labels = HashMap::from([
        (LABEL_SANDBOX.to_string(), "1".to_string()),
        (LABEL_OWNER.to_string(), helper.owner.to_string()),
        (LABEL_RULES_FOR.to_string(), helper.workspace.to_string()),
    ]);
    let joined = format!("container:{holder_id}");
    ContainerCreateBody {
        image: Some(helper.image.to_string()),
        entrypoint: Some(vec!["/bin/sh".into(), "-c".into()]),
        cmd: Some(vec![HELPER_SCRIPT.into()]),
        env: Some(env),
        labels: Some(labels),
        user: Some("0:0".into()),
        host_config: Some(HostConfig {
            network_mode: Some(joined.clone()),
            cap_drop: Some(vec!["ALL".into()]),
            cap_add: Some(HELPER_CAPS.iter().map(|c| c.to_string()).collect()),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            pids_limit: helper.limits_enforced.then_some(16),
            memory: helper.limits_enforced.then_some(64 << 20),
            privileged: Some(false),
            userns_mode: helper.keep_id.then_some(joined),
            ulimits: helper.podman.then(container::podman_ulimits),
            runtime: None,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Starts a helper and waits for its exit code. Podman 4.3 now and then answers the start of
/// a container that joins another's namespaces with a 500 ("starting some containers: internal
/// libpod error") while other containers start on the same storage; the helper is ours and has
/// done nothing yet, so a start refused that way is tried once more.
async fn started_exit(engine: &impl EngineApi, id: &str) -> Result<i64> {
    match engine.start_container(id).await {
        Ok(()) => {}
        Err(EngineError::NotModified(_)) => {}
        Err(e @ EngineError::Passing(_)) => {
            tracing::debug!(helper = id, error = %e, "rules helper start refused; once more");
            tokio::time::sleep(Duration::from_millis(250)).await;
            container::start(engine, id).await?;
        }
        Err(e) => return Err(engine_err(engine, Operation::Start(id.into()))(e)),
    }
    engine
        .wait_container(id)
        .await
        .map_err(engine_err(engine, Operation::Wait(id.into())))
}

/// Removes a holder or helper (by id or name) at once: it holds no state. Gone already is
/// fine.
pub async fn remove(engine: &impl EngineApi, id: &str) -> Result<()> {
    match engine.remove_container(id).await {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(e, EngineError::NotFound(_)) || matches!(e, EngineError::Conflict(_)) =>
        {
            Ok(())
        }
        Err(e) => Err(engine_err(
            engine,
            Operation::Remove(Resource::Container, id.into()),
        )(e)),
    }
}

/// Removes the holders of an owner (one workspace's, or all) and any rules helper a killed hub
/// left. Returns how many holders.
pub async fn remove_of(
    engine: &impl EngineApi,
    owner: &str,
    workspace: Option<&str>,
) -> Result<usize> {
    let mut holders = 0;
    for label in [LABEL_HOLDER_OF, LABEL_RULES_FOR] {
        let mut labels = vec![format!("{LABEL_OWNER}={owner}")];
        labels.push(match workspace {
            Some(w) => format!("{label}={w}"),
            None => label.to_string(),
        });
        let list = container::list_labelled(engine, labels).await?;
        for c in &list {
            if let Some(id) = &c.id {
                remove(engine, id).await?;
            }
        }
        if label == LABEL_HOLDER_OF {
            holders = list.len();
        }
    }
    Ok(holders)
}

/// The holder a workspace container joined (`container:<id>` network mode), as adoption reads
/// it: one inspect, no call into it. `None` when the container joined none or it is gone.
pub async fn posture(
    engine: &impl EngineApi,
    network_mode: &str,
    container_port: u16,
) -> Result<Option<HolderPosture>> {
    let Some(id) = network_mode.strip_prefix("container:") else {
        return Ok(None);
    };
    inspect(engine, id, container_port).await
}

/// The holder `id` as adoption reads it (see [`posture`]); `None` when it is gone.
pub async fn inspect(
    engine: &impl EngineApi,
    id: &str,
    container_port: u16,
) -> Result<Option<HolderPosture>> {
    let info = match engine.inspect_container(id).await {
        Ok(i) => i,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => {
            return Err(engine_err(
                engine,
                Operation::Inspect(Resource::Container, id.into()),
            )(e));
        }
    };
    let env: Vec<String> = info
        .config
        .as_ref()
        .and_then(|c| c.env.clone())
        .unwrap_or_default();
    let var = |name: &str| {
        env.iter()
            .find_map(|e| e.strip_prefix(&format!("{name}=")).map(str::to_string))
    };
    let state = info.state.clone().unwrap_or_default();
    let started_at = state.started_at.clone().unwrap_or_default();
    let health = state
        .health
        .as_ref()
        .and_then(|h| h.status)
        .map(|s| s.to_string());
    let live = container::live_from(info, Some(container_port));
    let label = |k: &str| live.labels.get(k).cloned();
    Ok(Some(HolderPosture {
        id: live.id.clone(),
        running: live.running(),
        host_port: live.host_port,
        networks: live.posture.networks.clone(),
        ports: live.posture.ports.clone(),
        mode: label(LABEL_NET_MODE).and_then(|m| NetworkMode::parse(&m)),
        rules_hash: label(LABEL_NET_RULES),
        rules_shape: label(LABEL_NET_SHAPE),
        rules: var("PO_NET_RULES"),
        broker_host: var("PO_NET_BROKER_HOST"),
        started_at,
        health,
        cap_add: live.posture.cap_add.clone(),
        privileged: live.posture.privileged,
    }))
}

/// The record of loaded rules for a workspace: next to its token file, outside every mount.
pub fn record_path(token_file: &Path) -> PathBuf {
    token_file.with_extension("net")
}

/// The ports a record lists as let through for this start of this holder; `None` when it is
/// about another holder or start (or no record at all). The record is `<id> <StartedAt>
/// <port,port…|->`.
fn record_ports(record: &str, holder_id: &str, started_at: &str) -> Option<Vec<u16>> {
    let mut words = record.split_whitespace();
    let (id, at) = (words.next()?, words.next()?);
    let listed = words.next().unwrap_or_default().split(',');
    (id == holder_id && at == started_at).then(|| listed.filter_map(|p| p.parse().ok()).collect())
}

/// Whether a record says the rules were loaded for this start of this holder with these
/// broker ports let through.
pub fn record_covers(record: &str, holder_id: &str, started_at: &str, ports: &[u16]) -> bool {
    record_ports(record, holder_id, started_at)
        .is_some_and(|listed| ports.iter().all(|p| listed.contains(p)))
}

/// The record after loading for this start of this holder with `ports`: the ports of an
/// earlier load for the same start stay (other hubs' routes), any other start's go.
pub fn record_with(record: &str, holder_id: &str, started_at: &str, ports: &[u16]) -> String {
    let mut all: Vec<u16> = ports.to_vec();
    all.extend(record_ports(record, holder_id, started_at).unwrap_or_default());
    all.sort_unstable();
    all.dedup();
    let list: Vec<String> = all.iter().map(u16::to_string).collect();
    let list = if list.is_empty() {
        "-".to_string()
    } else {
        list.join(",")
    };
    format!("{holder_id} {started_at} {list}\n")
}

/// Sees to it that a running holder's rules are loaded (with `ports` let through): not when
/// the record says so for its current start and its health check does not say otherwise;
/// otherwise its rules helper runs and the record is written. Says whether the helper ran.
pub async fn ensure_rules(
    engine: &impl EngineApi,
    helper: Helper<'_>,
    holder: &HolderPosture,
    record: &Path,
    ports: &[u16],
) -> Result<bool> {
    let known = std::fs::read_to_string(record).unwrap_or_default();
    let unhealthy = holder.health.as_deref() == Some("unhealthy");
    if !unhealthy && record_covers(&known, &holder.id, &holder.started_at, ports) {
        return Ok(false);
    }
    let Some(rules) = Rules::carried_by(holder) else {
        return Err(Error::container(
            helper.workspace,
            format!("its network holder {} carries no rules", holder.id),
        ));
    };
    load_rules(engine, helper, &holder.id, &rules, ports).await?;
    write_record(
        record,
        &record_with(&known, &holder.id, &holder.started_at, ports),
    );
    Ok(true)
}

/// Writes the record (whole, by rename; owner-only where modes exist). A failure only costs
/// a helper run next time.
pub fn write_record(record: &Path, text: &str) {
    if let Err(e) = crate::write_aside::write_whole(record, text.as_bytes(), true) {
        tracing::warn!(record = %record.display(), error = %e, "cannot write the network rules record");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_covers_one_start_of_one_holder_with_its_ports() {
        let r = record_with("", "h1", "2026-12-01T10:00:00Z", &[]);
        assert_eq!(r, "h1 2026-12-01T10:00:00Z -\n");
        assert!(record_covers(&r, "h1", "2026-12-01T10:00:00Z", &[]));
        assert!(
            !record_covers(&r, "h1", "2026-12-01T10:05:00Z", &[]),
            "restarted since"
        );
        assert!(
            !record_covers(&r, "h2", "2026-12-01T10:00:00Z", &[]),
            "another holder"
        );
        assert!(
            !record_covers(&r, "h1", "2026-12-01T10:00:00Z", &[4000]),
            "a port not let through"
        );
        assert!(!record_covers("", "h1", "x", &[]));
        assert!(!record_covers("garbage", "garbage", "", &[]));
    }

    #[test]
    fn ports_of_the_same_start_add_up_and_another_start_forgets_them() {
        let r = record_with("", "h1", "t1", &[4001, 4000]);
        assert_eq!(r, "h1 t1 4000,4001\n");
        let r = record_with(&r, "h1", "t1", &[5000, 4000]);
        assert_eq!(r, "h1 t1 4000,4001,5000\n");
        assert!(record_covers(&r, "h1", "t1", &[4001, 5000]));
        let r = record_with(&r, "h1", "t2", &[6000]);
        assert_eq!(r, "h1 t2 6000\n");
        assert!(!record_covers(&r, "h1", "t2", &[4000]));
    }

    #[test]
    fn the_helper_has_net_admin_alone_in_the_holders_namespaces() {
        let rules = Rules {
            text: format!("table inet {} {{}}", firewall::TABLE),
            hash: "0123456789abcdef".into(),
            broker_host: Some("host.docker.internal".into()),
        };
        let helper = Helper {
            image: "img",
            owner: "o1",
            workspace: "w1",
            keep_id: true,
            podman: true,
            limits_enforced: true,
        };
        let body = helper_body(helper, "abc", &rules, &[4000, 4001]);
        let hc = body.host_config.unwrap();
        assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(hc.cap_add, Some(vec!["NET_ADMIN".to_string()]));
        assert_eq!(hc.network_mode.as_deref(), Some("container:abc"));
        assert_eq!(hc.userns_mode.as_deref(), Some("container:abc"));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(hc.privileged, Some(false));
        let env = body.env.unwrap();
        assert!(env.contains(&"PO_NET_PORTS=4000 4001".to_string()));
        assert!(env.contains(&"PO_NET_HASH=0123456789abcdef".to_string()));
        assert!(env.contains(&format!("PO_NET_TABLE={}", firewall::TABLE)));
        assert!(
            !HELPER_SCRIPT.contains(firewall::TABLE),
            "one spelling of the table"
        );
        assert!(env.contains(&format!("PO_NET_PORT_SET={}", firewall::PORT_SET)));
        assert!(
            !HELPER_SCRIPT.contains(firewall::PORT_SET),
            "one spelling of the set"
        );
        assert!(env.contains(&"PO_NET_BROKER_HOST=host.docker.internal".to_string()));
        assert_eq!(body.labels.unwrap()[LABEL_RULES_FOR], "w1");
        let rootful = Helper {
            keep_id: false,
            ..helper
        };
        assert_eq!(
            helper_body(rootful, "abc", &rules, &[])
                .host_config
                .unwrap()
                .userns_mode,
            None
        );
    }

    fn no_rules() -> Rules {
        Rules {
            text: String::new(),
            hash: "0".into(),
            broker_host: None,
        }
    }

    fn test_helper(podman: bool) -> Helper<'static> {
        Helper {
            image: "img",
            owner: "o1",
            workspace: "w1",
            keep_id: false,
            podman,
            limits_enforced: true,
        }
    }

    /// Podman's passing "internal libpod error" on the helper's start is tried once more;
    /// a second one fails the start (and removes holder and helper).
    #[tokio::test]
    async fn a_helper_start_podman_refuses_for_a_moment_is_tried_once_more() {
        use crate::engine::fake::{FakeEngine, Fault};
        let (rules, helper) = (no_rules(), test_helper(true));
        let said = "starting some containers: internal libpod error";
        for (times, ok) in [(1, true), (2, false)] {
            let engine = FakeEngine::default();
            let id = engine
                .state()
                .create(Some("h"), ContainerCreateBody::default())
                .unwrap();
            let fault = Fault::FailSaying(500, said);
            engine.fault("start_container", "anon_", fault, Some(times));
            let got = ready(&engine, helper, &id, &rules, &[]).await;
            assert_eq!(got.is_ok(), ok, "{times}: {:?}", got.err());
            assert_eq!(
                engine.count("start_container"),
                3,
                "holder once, helper twice"
            );
        }
    }

    /// A holder whose rules helper fails is removed by `ready` itself, with the helper.
    #[tokio::test]
    async fn a_holder_whose_rules_do_not_load_is_removed_with_its_helper() {
        use crate::engine::fake::FakeEngine;
        let engine = FakeEngine::default();
        let id = engine
            .state()
            .create(Some("h"), ContainerCreateBody::default())
            .unwrap();
        engine.state().exit_codes.push(("anon_".into(), 3));
        let (rules, helper) = (no_rules(), test_helper(false));
        let e = ready(&engine, helper, &id, &rules, &[]).await.unwrap_err();
        assert!(e.to_string().contains("exited with code 3"), "{e}");
        assert!(
            engine.state().containers.is_empty(),
            "holder or helper left"
        );
    }
}
