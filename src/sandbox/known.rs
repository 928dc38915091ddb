//! What one list call says of an owner's containers, read before start-up adopts them: which
//! workspaces have exactly one container and it runs (most likely adopted, not created), and,
//! read ahead while the engine is still being checked, whose server already answered its
//! health path on the port the list shows.

use std::collections::{HashMap, HashSet};

use bollard::Docker;
use bollard::models::ContainerSummary;

use super::container;
use super::spec::{LABEL_OWNER, LABEL_WORKSPACE};
use crate::error::Result;

/// What one list call says of this owner's containers.
#[derive(Debug, Clone, Default)]
pub struct KnownContainers {
    /// Container ids by workspace.
    pub ids: HashMap<String, Vec<String>>,
    /// Workspaces whose one container runs: starting them most likely adopts it.
    pub running_alone: HashSet<String>,
    /// Containers (by id) whose server answered its health path during the read-ahead, with
    /// the host port it answered on. Adoption skips its own wait for them when it took the
    /// workspace's lock uncontended and the inspect shows the same port.
    pub answered: HashMap<String, u16>,
}

impl KnownContainers {
    /// Reads one list: ids by workspace, and the workspaces whose one container runs.
    pub fn from_list(list: Vec<ContainerSummary>) -> KnownContainers {
        let mut known = KnownContainers::default();
        let mut running: HashSet<String> = HashSet::new();
        let mut several: HashSet<String> = HashSet::new();
        for c in list {
            let Some(ws) = c.labels.and_then(|l| l.get(LABEL_WORKSPACE).cloned()) else {
                continue;
            };
            let Some(id) = c.id else { continue };
            if c.state == Some(bollard::models::ContainerSummaryStateEnum::RUNNING)
                && !running.insert(ws.clone())
            {
                several.insert(ws.clone());
            }
            known.ids.entry(ws).or_default().push(id);
        }
        known.running_alone = running
            .into_iter()
            .filter(|ws| !several.contains(ws) && known.ids.get(ws).is_some_and(|i| i.len() == 1))
            .collect();
        known
    }

    /// The one container of a workspace that runs alone, when it does.
    fn alone(&self, ws: &str) -> Option<&str> {
        if !self.running_alone.contains(ws) {
            return None;
        }
        self.ids
            .get(ws)
            .and_then(|ids| ids.first())
            .map(String::as_str)
    }
}

/// One list call for `owner`'s containers.
pub async fn known_containers(docker: &Docker, owner: &str) -> Result<KnownContainers> {
    let owner = format!("{LABEL_OWNER}={owner}");
    let list = container::list_labelled(docker, vec![owner]).await?;
    Ok(KnownContainers::from_list(list))
}

/// As [`known_containers`], and every running-alone container's server asked its health path
/// once, all at once, on the loopback port the list shows published for `container_port`.
/// Reads only; used while the engine check runs, so a hub restart's adoptions need no wait of
/// their own.
pub async fn read_ahead(
    docker: &Docker,
    owner: &str,
    container_port: u16,
    health_path: &str,
) -> Result<KnownContainers> {
    let label = format!("{LABEL_OWNER}={owner}");
    let list = container::list_labelled(docker, vec![label]).await?;
    let ports: HashMap<String, u16> = list
        .iter()
        .filter_map(|c| Some((c.id.clone()?, loopback_port(c, container_port)?)))
        .collect();
    let mut known = KnownContainers::from_list(list);
    let asks = known
        .running_alone
        .iter()
        .filter_map(|ws| known.alone(ws))
        .filter_map(|id| Some((id.to_string(), *ports.get(id)?)))
        .map(|(id, port)| async move {
            container::answers(port, health_path)
                .await
                .then_some((id, port))
        });
    known.answered = futures_util::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect();
    Ok(known)
}

/// The host port a list entry shows published on 127.0.0.1 for `container_port`.
fn loopback_port(c: &ContainerSummary, container_port: u16) -> Option<u16> {
    c.ports.as_ref()?.iter().find_map(|p| {
        (p.private_port == container_port && p.ip.as_deref() == Some("127.0.0.1"))
            .then_some(p.public_port)
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use bollard::models::{ContainerSummaryStateEnum as S, PortSummary};

    use super::*;

    fn summary(
        id: &str,
        ws: Option<&str>,
        state: S,
        port: Option<(u16, &str, u16)>,
    ) -> ContainerSummary {
        ContainerSummary {
            id: Some(id.into()),
            labels: Some(
                ws.map(|w| HashMap::from([(LABEL_WORKSPACE.to_string(), w.to_string())]))
                    .unwrap_or_default(),
            ),
            state: Some(state),
            ports: port.map(|(private, ip, public)| {
                vec![PortSummary {
                    ip: Some(ip.into()),
                    private_port: private,
                    public_port: Some(public),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_workspace_whose_one_container_runs_is_running_alone() {
        let known = KnownContainers::from_list(vec![
            summary("a1", Some("a"), S::RUNNING, None),
            summary("b1", Some("b"), S::RUNNING, None),
            summary("b2", Some("b"), S::EXITED, None),
            summary("c1", Some("c"), S::RUNNING, None),
            summary("c2", Some("c"), S::RUNNING, None),
            summary("d1", Some("d"), S::EXITED, None),
            summary("x", None, S::RUNNING, None),
        ]);
        let mut alone: Vec<_> = known.running_alone.iter().cloned().collect();
        alone.sort();
        assert_eq!(alone, ["a"]);
        assert_eq!(known.ids["b"], ["b1", "b2"]);
        assert_eq!(known.ids["d"], ["d1"]);
        assert!(!known.ids.contains_key(""));
        assert_eq!(known.alone("a"), Some("a1"));
        assert_eq!(known.alone("c"), None);
    }

    #[test]
    fn the_health_port_is_the_loopback_one_of_the_servers_port() {
        let on = |port| summary("a1", Some("a"), S::RUNNING, port);
        assert_eq!(
            loopback_port(&on(Some((7300, "127.0.0.1", 32770))), 7300),
            Some(32770)
        );
        assert_eq!(
            loopback_port(&on(Some((7300, "0.0.0.0", 32770))), 7300),
            None
        );
        assert_eq!(
            loopback_port(&on(Some((22, "127.0.0.1", 32770))), 7300),
            None
        );
        assert_eq!(loopback_port(&on(None), 7300), None);
    }
}
