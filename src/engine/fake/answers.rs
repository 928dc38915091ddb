//! The fake engine's answers: a container's inspect and list entries, as the engine builds them
//! from the create body and the state.

use std::collections::HashMap;

use bollard::models::{
    ContainerConfig, ContainerCreateBody, ContainerInspectResponse, ContainerState,
    ContainerStateStatusEnum, ContainerSummary, ContainerSummaryStateEnum, EndpointSettings,
    MountPoint, NetworkSettings, PortBinding, PortSummary,
};

use super::{FakeContainer, State};

/// The mounts as the engine reports them, from the create body.
fn mount_points(body: &ContainerCreateBody) -> Vec<MountPoint> {
    let mounts = body
        .host_config
        .as_ref()
        .and_then(|h| h.mounts.clone())
        .unwrap_or_default();
    mounts
        .into_iter()
        .map(|m| {
            let volume = m.typ == Some(bollard::models::MountType::VOLUME);
            MountPoint {
                typ: Some(match volume {
                    true => "volume".to_string(),
                    false => "bind".to_string(),
                }),
                name: volume.then(|| m.source.clone().unwrap_or_default()),
                source: m.source,
                destination: m.target,
                rw: Some(!m.read_only.unwrap_or(false)),
                ..Default::default()
            }
        })
        .collect()
}

/// The published ports: every binding of the body gets the fake's host port.
fn published(body: &ContainerCreateBody, host_port: u16) -> HashMap<String, Vec<PortBinding>> {
    let bindings = body
        .host_config
        .as_ref()
        .and_then(|h| h.port_bindings.clone())
        .unwrap_or_default();
    bindings
        .into_iter()
        .map(|(port, b)| {
            let b = b
                .unwrap_or_default()
                .into_iter()
                .map(|b| PortBinding {
                    host_ip: b.host_ip,
                    host_port: Some(host_port.to_string()),
                })
                .collect();
            (port, b)
        })
        .collect()
}

/// The inspect answer of a container.
pub(super) fn inspect_of(c: &FakeContainer, s: &State) -> ContainerInspectResponse {
    let b = &c.body;
    let running = c.status == "running";
    let mode = State::network_mode_of(c);
    let networks = (!mode.starts_with("container:") && !mode.is_empty()).then(|| {
        let name = s
            .network_id(&mode)
            .and_then(|id| s.networks[&id].name.clone())
            .unwrap_or(mode.clone());
        HashMap::from([(name, EndpointSettings::default())])
    });
    let ports = (running && !mode.starts_with("container:")).then(|| {
        published(b, s.host_port)
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect()
    });
    ContainerInspectResponse {
        id: Some(c.id.clone()),
        name: Some(format!("/{}", c.name)),
        created: Some("2026-01-01T00:00:00Z".into()),
        state: Some(ContainerState {
            status: Some(match c.status {
                "running" => ContainerStateStatusEnum::RUNNING,
                "exited" => ContainerStateStatusEnum::EXITED,
                _ => ContainerStateStatusEnum::CREATED,
            }),
            running: Some(running),
            started_at: Some(c.started_at.clone()),
            exit_code: Some(c.exit_code),
            error: Some(c.error.clone()),
            ..Default::default()
        }),
        config: Some(ContainerConfig {
            image: b.image.clone(),
            user: b.user.clone(),
            env: b.env.clone(),
            labels: b.labels.clone(),
            healthcheck: b.healthcheck.clone(),
            ..Default::default()
        }),
        host_config: b.host_config.clone(),
        mounts: Some(mount_points(b)),
        network_settings: Some(NetworkSettings {
            ports,
            networks,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A container's line in a list answer.
pub(super) fn summary_of(c: &FakeContainer, s: &State) -> ContainerSummary {
    let running = c.status == "running";
    let ports = published(&c.body, s.host_port)
        .into_iter()
        .filter(|_| running)
        .flat_map(|(port, bindings)| {
            let private: u16 = port
                .split('/')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            bindings.into_iter().map(move |b| PortSummary {
                ip: b.host_ip,
                private_port: private,
                public_port: b.host_port.and_then(|p| p.parse().ok()),
                typ: None,
            })
        })
        .collect();
    ContainerSummary {
        id: Some(c.id.clone()),
        names: Some(vec![format!("/{}", c.name)]),
        image: c.body.image.clone(),
        labels: c.body.labels.clone(),
        state: Some(match c.status {
            "running" => ContainerSummaryStateEnum::RUNNING,
            "exited" => ContainerSummaryStateEnum::EXITED,
            _ => ContainerSummaryStateEnum::CREATED,
        }),
        ports: Some(ports),
        mounts: Some(mount_points(&c.body)),
        // As Docker lists it: the network mode the container was made with.
        host_config: Some(bollard::models::ContainerSummaryHostConfig {
            network_mode: Some(State::network_mode_of(c)),
            ..Default::default()
        }),
        ..Default::default()
    }
}
