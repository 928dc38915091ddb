//! The per-hub network: one labelled bridge per owner that its workspace containers join
//! instead of the engine's default bridge. Made on first need, shared by every hub of the
//! owner, removed when the owner's containers are all stopped and none uses it.

use std::collections::HashMap;
use std::time::Duration;

use crate::engine::EngineError;
use crate::engine::model::{ContainerSummary, Network, NetworkCreateRequest};

use crate::engine::api::EngineApi;
use crate::engine::{Operation, Resource};
use crate::error::{Error, Result};
use crate::sandbox::blueprint::spec::{LABEL_NETWORK, LABEL_OWNER, LABEL_SANDBOX, network_name};
use crate::sandbox::on_engine::container::{self, engine_err};

/// The `po.network` label's value on a per-hub network.
const NETWORK_KIND: &str = "workspaces";
/// The labels of an owner's network (also how it is found).
fn labels(owner: &str) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_SANDBOX.to_string(), "1".to_string()),
        (LABEL_OWNER.to_string(), owner.to_string()),
        (LABEL_NETWORK.to_string(), NETWORK_KIND.to_string()),
    ])
}

/// The owner's networks with its exact name, oldest first (ties by id): the first is the one
/// every hub uses.
async fn listed(engine: &impl EngineApi, owner: &str) -> Result<Vec<Network>> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![
            format!("{LABEL_OWNER}={owner}"),
            format!("{LABEL_NETWORK}={NETWORK_KIND}"),
        ],
    )]);
    let name = network_name(owner);
    let mut found: Vec<Network> = engine
        .list_networks(filters)
        .await
        .map_err(engine_err(engine, Operation::List(Resource::Network)))?
        .into_iter()
        .filter(|n| n.name.as_deref() == Some(name.as_str()))
        .collect();
    found.sort_by(|a, b| {
        let created = |n: &Network| {
            n.created
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_default()
        };
        (created(a), a.id.clone()).cmp(&(created(b), b.id.clone()))
    });
    Ok(found)
}

/// The id of the owner's network, made when there is none. Hubs racing to make it all end on
/// the oldest one: a creator that finds an older one removes its own (an engine that refuses a
/// second network of one name answers 409, and the existing one is used).
pub async fn ensure(engine: &impl EngineApi, owner: &str) -> Result<String> {
    if let Some(id) = adoptable(engine, owner).await? {
        return Ok(id);
    }
    let name = network_name(owner);
    let request = NetworkCreateRequest {
        name: name.clone(),
        driver: Some("bridge".into()),
        labels: Some(labels(owner)),
        // Explicitly: an engine whose default pools hand out IPv6 would give the containers a
        // route the rules were not written for.
        enable_ipv6: Some(false),
        ..Default::default()
    };
    let made = match create(engine, request).await {
        Ok(id) => Some(id),
        Err(EngineError::Conflict(_)) => None,
        Err(e @ EngineError::PoolExhausted(_)) => return Err(exhausted(engine, name, e).await),
        Err(e) => {
            return Err(engine_err(
                engine,
                Operation::Create(Resource::Network, name),
            )(e));
        }
    };
    let found = listed(engine, owner).await?;
    let winner = found.first().and_then(|n| n.id.clone()).or(made.clone());
    // Another hub made one first: ours goes (only ours: another hub's may already be named
    // by a container it created and has not started, which the engine does not count as use).
    if let (Some(mine), Some(w)) = (&made, &winner)
        && mine != w
    {
        let _ = engine.remove_network(mine).await;
    }
    winner.ok_or_else(|| {
        crate::error::Error::container(
            "",
            format!("the network {name} could not be made or found (docker network ls)"),
        )
    })
}

/// Creates a network; one that Podman refused because a host interface went away while it
/// read them is tried once more: nothing was made.
async fn create(
    engine: &impl EngineApi,
    request: NetworkCreateRequest,
) -> std::result::Result<String, EngineError> {
    match engine.create_network(request.clone()).await {
        Err(e @ EngineError::Passing(_)) => {
            tracing::debug!(network = %request.name, error = %e, "network create refused; once more");
            tokio::time::sleep(Duration::from_millis(250)).await;
            engine.create_network(request).await
        }
        done => done,
    }
}

/// The owner's network to use as it is, if any. One with IPv6 on (made by another version, or
/// by hand) is removed when no container uses it, so that a new one is made without; one in
/// use is kept, and the rules of its containers refuse its IPv6 ranges ([`addresses`]).
async fn adoptable(engine: &impl EngineApi, owner: &str) -> Result<Option<String>> {
    let found = listed(engine, owner).await?;
    let Some((id, ipv6)) = found
        .first()
        .and_then(|n| Some((n.id.clone()?, n.enable_ipv6 == Some(true))))
    else {
        return Ok(None);
    };
    if !ipv6 || joined(engine, &id).await? == Some(true) {
        return Ok(Some(id));
    }
    match engine.remove_network(&id).await {
        Ok(()) => Ok(None),
        // Joined meanwhile: kept, its IPv6 ranges refused.
        Err(e) if !matches!(e, EngineError::NotFound(_)) => Ok(Some(id)),
        Err(_) => Ok(None),
    }
}

/// `ENGINE_NETWORK_POOL_EXHAUSTED` for the network `name`, counting the per-hub networks there
/// are (and how many no container uses) when the engine still answers a list.
async fn exhausted(engine: &impl EngineApi, name: String, source: EngineError) -> Error {
    let found = per_hub(engine, None).await.unwrap_or_default();
    Error::EngineNetworkPoolExhausted {
        network: name,
        per_hub: found.len(),
        unused: found.iter().filter(|n| !n.in_use).count(),
        source: Box::new(source),
    }
}

/// Whether any container is joined to the network `id`; `None` when it is gone.
async fn joined(engine: &impl EngineApi, id: &str) -> Result<Option<bool>> {
    match engine.inspect_network(id).await {
        Ok(i) => Ok(Some(i.containers.is_some_and(|c| !c.is_empty()))),
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(engine_err(
            engine,
            Operation::Inspect(Resource::Network, id.to_string()),
        )(e)),
    }
}

/// Removes the owner's networks that no container uses (the engine also refuses to remove a
/// network in use, so one joined meanwhile stays). Returns the names removed.
pub async fn remove_unused(engine: &impl EngineApi, owner: &str) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for n in listed(engine, owner).await? {
        let Some(id) = n.id else { continue };
        let Some(in_use) = joined(engine, &id).await? else {
            continue;
        };
        if in_use {
            continue;
        }
        match engine.remove_network(&id).await {
            Ok(()) => removed.push(n.name.unwrap_or(id)),
            // Gone already, or joined meanwhile: either way not this call's to remove.
            Err(e) => tracing::debug!(network = %id, error = %e, "network kept"),
        }
    }
    Ok(removed)
}

/// What the rules of a network's containers refuse of the network itself, as its IPAM config
/// says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkAddresses {
    /// The IPv4 gateway (the host's side of its bridge).
    pub gateway: Option<std::net::IpAddr>,
    /// The IPv4 subnet's directed broadcast address.
    pub broadcast: Option<std::net::IpAddr>,
    /// Its IPv6 subnets and gateways (`addr/len`), on an engine that gave it IPv6 anyway.
    pub v6: Vec<String>,
}

/// The gateway, directed broadcast and IPv6 ranges of a network.
pub async fn addresses(engine: &impl EngineApi, id: &str) -> Result<NetworkAddresses> {
    let inspected = engine.inspect_network(id).await.map_err(engine_err(
        engine,
        Operation::Inspect(Resource::Network, id.into()),
    ))?;
    let config = inspected.ipam.and_then(|i| i.config).unwrap_or_default();
    Ok(NetworkAddresses {
        gateway: config
            .iter()
            .filter_map(|c| c.gateway.as_deref()?.parse().ok())
            .find(|ip: &std::net::IpAddr| ip.is_ipv4()),
        broadcast: config
            .iter()
            .find_map(|c| directed_broadcast(c.subnet.as_deref()?)),
        v6: config
            .iter()
            .flat_map(|c| [c.subnet.as_deref(), c.gateway.as_deref()])
            .filter_map(|a| v6_range(a?))
            .collect(),
    })
}

/// An IPv6 subnet (`fd00:1::/64`) or address (a /128) from the engine, in canonical form for
/// the ruleset; `None` for IPv4 or anything else.
pub fn v6_range(text: &str) -> Option<String> {
    let (addr, len) = text.split_once('/').unwrap_or((text, "128"));
    let addr: std::net::Ipv6Addr = addr.parse().ok()?;
    let len: u8 = len.parse().ok().filter(|l| *l <= 128)?;
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    Some(format!(
        "{}/{len}",
        std::net::Ipv6Addr::from(u128::from(addr) & mask)
    ))
}

/// The directed broadcast address of an IPv4 subnet (`172.18.0.0/16` → `172.18.255.255`);
/// `None` for IPv6, a /31 or /32 (none there), or text that is not a subnet.
pub fn directed_broadcast(subnet: &str) -> Option<std::net::IpAddr> {
    let (addr, prefix) = subnet.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 30)?;
    let host_bits = u32::MAX.checked_shr(prefix).unwrap_or(0);
    Some(std::net::Ipv4Addr::from(u32::from(addr) | host_bits).into())
}

/// How long a per-hub network no container uses is kept by [`prune`]: a hub makes its network
/// moments before the first container on it (created, not yet started, is no use the engine
/// counts), and a network this young may be one such.
pub const PRUNE_GRACE: Duration = Duration::from_secs(300);

/// A per-hub network, as [`per_hub`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerHubNetwork {
    pub id: String,
    pub name: String,
    pub owner: String,
    /// Unix seconds, when the engine says.
    pub created: Option<i64>,
    /// A container (running, or any sandbox container in any state) is on it.
    pub in_use: bool,
}

/// Every per-hub network (of `owner`, or of every owner), with whether a container uses it:
/// one the engine lists as joined (any container), or a sandbox container in any state whose
/// network it is (a stopped one would need it to start again).
pub async fn per_hub(engine: &impl EngineApi, owner: Option<&str>) -> Result<Vec<PerHubNetwork>> {
    let mut labels = vec![
        format!("{LABEL_SANDBOX}=1"),
        format!("{LABEL_NETWORK}={NETWORK_KIND}"),
    ];
    labels.extend(owner.map(|o| format!("{LABEL_OWNER}={o}")));
    let filters = HashMap::from([("label".to_string(), labels)]);
    let networks = engine
        .list_networks(filters)
        .await
        .map_err(engine_err(engine, Operation::List(Resource::Network)))?;
    let sandboxes = container::list_labelled(engine, vec![format!("{LABEL_SANDBOX}=1")]).await?;
    let mut found = Vec::new();
    for n in networks {
        let (Some(id), Some(name)) = (n.id, n.name) else {
            continue;
        };
        let Some(joined) = joined(engine, &id).await? else {
            continue;
        };
        let in_use = joined || sandboxes.iter().any(|c| on_network(c, &id, &name));
        found.push(PerHubNetwork {
            owner: n
                .labels
                .and_then(|mut l| l.remove(LABEL_OWNER))
                .unwrap_or_default(),
            created: n
                .created
                .as_deref()
                .and_then(container::rfc3339)
                .map(|(s, _)| s),
            id,
            name,
            in_use,
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// Whether a listed container is on the network (by id or name), in any state.
fn on_network(c: &ContainerSummary, id: &str, name: &str) -> bool {
    let mode = c
        .host_config
        .as_ref()
        .and_then(|h| h.network_mode.as_deref());
    let attached = c
        .network_settings
        .as_ref()
        .and_then(|s| s.networks.as_ref())
        .is_some_and(|n| {
            n.contains_key(name) || n.values().any(|e| e.network_id.as_deref() == Some(id))
        });
    mode == Some(id) || mode == Some(name) || attached
}

/// The networks [`prune`] removes: no container uses them and they are older than `grace` at
/// `now` (unix seconds); one whose age is unknown counts as old.
pub fn prunable(found: &[PerHubNetwork], now: i64, grace: Duration) -> Vec<&PerHubNetwork> {
    let grace = i64::try_from(grace.as_secs()).unwrap_or(i64::MAX);
    found
        .iter()
        .filter(|n| !n.in_use && n.created.is_none_or(|c| now.saturating_sub(c) >= grace))
        .collect()
}

/// Removes the per-hub networks (of `owner`, or of every owner) that no container uses and that
/// are older than `grace`; with `dry_run`, only lists them. Returns their names. One the engine
/// refuses to remove (joined meanwhile) or that is gone already is not listed.
pub async fn prune(
    engine: &impl EngineApi,
    owner: Option<&str>,
    grace: Duration,
    dry_run: bool,
) -> Result<Vec<String>> {
    let found = per_hub(engine, owner).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut removed = Vec::new();
    for n in prunable(&found, now, grace) {
        if dry_run {
            removed.push(n.name.clone());
            continue;
        }
        match engine.remove_network(&n.id).await {
            Ok(()) => removed.push(n.name.clone()),
            Err(e) => tracing::debug!(network = %n.name, error = %e, "network kept"),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fake::{FakeEngine, Fault};
    use crate::engine::model::{ContainerCreateBody, HostConfig};

    fn found(name: &str, created: Option<i64>, in_use: bool) -> PerHubNetwork {
        PerHubNetwork {
            id: format!("id-{name}"),
            name: name.into(),
            owner: "o".into(),
            created,
            in_use,
        }
    }

    #[test]
    fn directed_broadcast_of_ipv4_subnets_only() {
        let b = |s: &str| directed_broadcast(s).map(|a| a.to_string());
        assert_eq!(b("172.18.0.0/16").as_deref(), Some("172.18.255.255"));
        assert_eq!(b("10.0.5.0/24").as_deref(), Some("10.0.5.255"));
        assert_eq!(b("192.168.0.64/26").as_deref(), Some("192.168.0.127"));
        assert_eq!(b("0.0.0.0/0").as_deref(), Some("255.255.255.255"));
        for none in [
            "10.0.0.0/31",
            "10.0.0.1/32",
            "fd00::/64",
            "10.0.0.0",
            "x/8",
            "10.0.0.0/33",
        ] {
            assert_eq!(b(none), None, "{none}");
        }
    }

    #[test]
    fn prunable_are_the_unused_past_the_grace() {
        let grace = Duration::from_secs(300);
        let list = [
            found("old", Some(1_000), false),
            found("young", Some(1_900), false),
            found("used", Some(0), true),
            found("undated", None, false),
            found("just", Some(1_700), false),
        ];
        let names: Vec<&str> = prunable(&list, 2_000, grace)
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(names, ["old", "undated", "just"]);
        assert_eq!(prunable(&list, 2_000, Duration::ZERO).len(), 4);
    }

    /// A sandbox container on the network `name`, in the fake's state `status`.
    fn on(engine: &FakeEngine, name: &str, owner: &str, running: bool) {
        let body = ContainerCreateBody {
            labels: Some(HashMap::from([
                (LABEL_SANDBOX.to_string(), "1".to_string()),
                (LABEL_OWNER.to_string(), owner.to_string()),
            ])),
            host_config: Some(HostConfig {
                network_mode: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut s = engine.state();
        let id = s.create(Some(&format!("c-{owner}")), body).unwrap();
        if running {
            s.start(&id).unwrap();
        }
    }

    #[tokio::test]
    async fn prune_removes_unused_per_hub_networks_of_any_owner_or_of_one() {
        let engine = FakeEngine::default();
        for owner in ["o1", "o2", "o3", "o4"] {
            ensure(&engine, owner).await.unwrap();
        }
        // o3's has a running container, o4's a stopped one (which needs it to start again).
        on(&engine, &network_name("o3"), "o3", true);
        on(&engine, &network_name("o4"), "o4", false);
        // A network that is not a per-hub one.
        engine
            .create_network(NetworkCreateRequest {
                name: "other".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let all = per_hub(&engine, None).await.unwrap();
        let used: Vec<(&str, bool)> = all.iter().map(|n| (n.owner.as_str(), n.in_use)).collect();
        assert_eq!(
            used,
            [("o1", false), ("o2", false), ("o3", true), ("o4", true)]
        );
        let dry = prune(&engine, None, Duration::ZERO, true).await.unwrap();
        assert_eq!(dry, [network_name("o1"), network_name("o2")]);
        assert_eq!(
            engine.state().networks.len(),
            5,
            "a dry run removes nothing"
        );
        let one = prune(&engine, Some("o2"), Duration::ZERO, false)
            .await
            .unwrap();
        assert_eq!(one, [network_name("o2")]);
        let rest = prune(&engine, None, Duration::ZERO, false).await.unwrap();
        assert_eq!(rest, [network_name("o1")]);
        let mut left: Vec<String> = engine
            .state()
            .networks
            .values()
            .filter_map(|n| n.name.clone())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["other".into(), network_name("o3"), network_name("o4")]
        );
    }

    #[test]
    fn v6_ranges_are_canonical_and_never_ipv4_or_text() {
        let r = |s: &str| v6_range(s);
        assert_eq!(r("fd00:5eed:1::/64").as_deref(), Some("fd00:5eed:1::/64"));
        assert_eq!(r("FD00:5EED:1::9/64").as_deref(), Some("fd00:5eed:1::/64"));
        assert_eq!(r("fd00:5eed:1::1").as_deref(), Some("fd00:5eed:1::1/128"));
        assert_eq!(r("::/0").as_deref(), Some("::/0"));
        for none in [
            "172.18.0.0/16",
            "172.18.0.1",
            "fd00::/129",
            "fd00::/x",
            "fd00::; flush ruleset",
            "",
        ] {
            assert_eq!(r(none), None, "{none}");
        }
    }

    /// The owner's network as another version (or a person) made it: IPv6 on, with a subnet.
    async fn with_ipv6(engine: &FakeEngine, owner: &str) -> String {
        let id = engine
            .create_network(NetworkCreateRequest {
                name: network_name(owner),
                driver: Some("bridge".into()),
                labels: Some(labels(owner)),
                enable_ipv6: Some(true),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut s = engine.state();
        let n = s.networks.get_mut(&id).unwrap();
        let config = n.ipam.as_mut().unwrap().config.as_mut().unwrap();
        config.push(crate::engine::model::IpamConfig {
            subnet: Some("fd00:5eed:1::/64".into()),
            gateway: Some("fd00:5eed:1::1".into()),
            ..Default::default()
        });
        id
    }

    #[tokio::test]
    async fn ipv6_is_off_on_a_new_network_and_an_unused_one_with_it_is_replaced() {
        let engine = FakeEngine::default();
        let made = ensure(&engine, "o1").await.unwrap();
        assert_eq!(engine.state().networks[&made].enable_ipv6, Some(false));
        assert_eq!(
            ensure(&engine, "o1").await.unwrap(),
            made,
            "adopted as it is"
        );
        let own = addresses(&engine, &made).await.unwrap();
        assert!(
            own.v6.is_empty() && own.gateway.is_some() && own.broadcast.is_some(),
            "{own:?}"
        );

        let old = with_ipv6(&engine, "o2").await;
        let new = ensure(&engine, "o2").await.unwrap();
        assert_ne!(new, old, "the network with IPv6 is replaced");
        let s = engine.state();
        assert!(!s.networks.contains_key(&old));
        assert_eq!(s.networks[&new].enable_ipv6, Some(false));
        assert_eq!(
            s.networks[&new].name.as_deref(),
            Some(network_name("o2").as_str())
        );
    }

    #[tokio::test]
    async fn a_network_with_ipv6_in_use_is_kept_and_its_ipv6_ranges_are_given_to_the_rules() {
        let engine = FakeEngine::default();
        let old = with_ipv6(&engine, "o3").await;
        on(&engine, &network_name("o3"), "o3", true);
        assert_eq!(ensure(&engine, "o3").await.unwrap(), old);
        let own = addresses(&engine, &old).await.unwrap();
        assert_eq!(own.v6, ["fd00:5eed:1::/64", "fd00:5eed:1::1/128"]);
        assert!(own.gateway.is_some_and(|g| g.is_ipv4()));
    }

    /// Podman's refusal while a host interface goes away is tried once more; a second one is
    /// the engine's error, and nothing is left made.
    #[tokio::test]
    async fn a_network_create_podman_refuses_as_an_interface_goes_is_tried_once_more() {
        let said = "route ip+net: no such network interface";
        for (times, ok) in [(1, true), (2, false)] {
            let engine = FakeEngine::default();
            engine.fault(
                "create_network",
                "",
                Fault::FailSaying(500, said),
                Some(times),
            );
            let got = ensure(&engine, "o1").await;
            assert_eq!(got.is_ok(), ok, "{times}: {got:?}");
            assert_eq!(engine.count("create_network"), 2, "{times}");
            assert_eq!(engine.state().networks.len(), usize::from(ok), "{times}");
            if let Err(e) = got {
                assert_eq!(e.code(), "ENGINE_REQUEST_FAILED");
                assert!(e.message_with_causes().contains(said), "{e:?}");
            }
        }
        // Another 500 is not tried again.
        let engine = FakeEngine::default();
        engine.fault("create_network", "", Fault::Fail(500), Some(1));
        assert!(ensure(&engine, "o1").await.is_err());
        assert_eq!(engine.count("create_network"), 1);
    }

    #[tokio::test]
    async fn an_exhausted_address_pool_is_a_coded_error_that_names_prune() {
        let engine = FakeEngine::default();
        ensure(&engine, "o1").await.unwrap();
        ensure(&engine, "o2").await.unwrap();
        on(&engine, &network_name("o2"), "o2", true);
        let said = "could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network";
        engine.fault("create_network", "", Fault::FailSaying(400, said), Some(1));
        let e = ensure(&engine, "o3").await.unwrap_err();
        assert_eq!(e.code(), "ENGINE_NETWORK_POOL_EXHAUSTED");
        let text = e.message_with_causes();
        assert!(text.contains("2 per-hub networks"), "{text}");
        assert!(text.contains("1 of them with no container"), "{text}");
        assert!(text.contains("po-sandbox prune"), "{text}");
        assert!(
            text.contains(said),
            "the engine's words as the cause: {text}"
        );
        // Another failure stays the engine's own.
        engine.fault("create_network", "", Fault::Fail(500), None);
        let e = ensure(&engine, "o4").await.unwrap_err();
        assert_eq!(e.code(), "ENGINE_REQUEST_FAILED");
    }
}
