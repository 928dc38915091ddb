//! The per-hub network: one labelled bridge per owner that its workspace containers join
//! instead of the engine's default bridge. Made on first need, shared by every hub of the
//! owner, removed when the owner's containers are all stopped and none uses it.

use std::collections::HashMap;

use bollard::models::{Network, NetworkCreateRequest};

use crate::engine::api::EngineApi;
use crate::engine::{Operation, Resource};
use crate::error::Result;
use crate::sandbox::container::{engine_err, is_status};
use crate::sandbox::spec::{LABEL_NETWORK, LABEL_OWNER, LABEL_SANDBOX, network_name};

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
async fn listed(docker: &impl EngineApi, owner: &str) -> Result<Vec<Network>> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![
            format!("{LABEL_OWNER}={owner}"),
            format!("{LABEL_NETWORK}={NETWORK_KIND}"),
        ],
    )]);
    let name = network_name(owner);
    let mut found: Vec<Network> = docker
        .list_networks(filters)
        .await
        .map_err(engine_err(docker, Operation::List(Resource::Network)))?
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
pub async fn ensure(docker: &impl EngineApi, owner: &str) -> Result<String> {
    if let Some(id) = listed(docker, owner)
        .await?
        .first()
        .and_then(|n| n.id.clone())
    {
        return Ok(id);
    }
    let name = network_name(owner);
    let request = NetworkCreateRequest {
        name: name.clone(),
        driver: Some("bridge".into()),
        labels: Some(labels(owner)),
        ..Default::default()
    };
    let made = match docker.create_network(request).await {
        Ok(id) => Some(id),
        Err(e) if is_status(&e, 409) => None,
        Err(e) => {
            return Err(engine_err(
                docker,
                Operation::Create(Resource::Network, name),
            )(e));
        }
    };
    let found = listed(docker, owner).await?;
    let winner = found.first().and_then(|n| n.id.clone()).or(made.clone());
    // Another hub made one first: ours goes (only ours: another hub's may already be named
    // by a container it created and has not started, which the engine does not count as use).
    if let (Some(mine), Some(w)) = (&made, &winner)
        && mine != w
    {
        let _ = docker.remove_network(mine).await;
    }
    winner.ok_or_else(|| {
        crate::error::Error::container(
            "",
            format!("the network {name} could not be made or found (docker network ls)"),
        )
    })
}

/// Removes the owner's networks that no container uses (the engine also refuses to remove a
/// network in use, so one joined meanwhile stays). Returns the names removed.
pub async fn remove_unused(docker: &impl EngineApi, owner: &str) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for n in listed(docker, owner).await? {
        let Some(id) = n.id else { continue };
        let inspected = docker.inspect_network(&id).await;
        let in_use = match inspected {
            Ok(i) => i.containers.is_some_and(|c| !c.is_empty()),
            Err(e) if is_status(&e, 404) => continue,
            Err(e) => {
                return Err(engine_err(
                    docker,
                    Operation::Inspect(Resource::Network, id),
                )(e));
            }
        };
        if in_use {
            continue;
        }
        match docker.remove_network(&id).await {
            Ok(()) => removed.push(n.name.unwrap_or(id)),
            // Gone already, or joined meanwhile: either way not this call's to remove.
            Err(e) => tracing::debug!(network = %id, error = %e, "network kept"),
        }
    }
    Ok(removed)
}

/// The gateway of a network (the host's side of its bridge), as its IPAM config says.
pub async fn gateway(docker: &impl EngineApi, id: &str) -> Result<Option<std::net::IpAddr>> {
    let inspected = docker.inspect_network(id).await.map_err(engine_err(
        docker,
        Operation::Inspect(Resource::Network, id.into()),
    ))?;
    Ok(inspected
        .ipam
        .and_then(|i| i.config)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.gateway.as_deref()?.parse().ok())
        .find(|ip: &std::net::IpAddr| ip.is_ipv4()))
}
