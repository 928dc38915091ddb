//! What one list call says of an owner's containers, read before start-up adopts them: which
//! workspaces have exactly one container and it runs (most likely adopted, not created), and,
//! read ahead while the engine is still being checked, each such container's server asked its
//! health path on the port the list shows (the answer awaited only where adoption needs it).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::engine::api::EngineApi;
use crate::engine::model::ContainerSummary;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};

use crate::error::Result;
use crate::sandbox::blueprint::spec::{LABEL_HOLDER_OF, LABEL_OWNER, LABEL_WORKSPACE};
use crate::sandbox::on_engine::container::{self, LiveContainer};
use crate::sandbox::on_engine::holder;

/// What one list call says of this owner's containers.
#[derive(Debug, Clone, Default)]
pub struct KnownContainers {
    /// Container ids by workspace.
    pub ids: HashMap<String, Vec<String>>,
    /// Workspaces whose one container runs: starting them most likely adopts it.
    pub running_alone: HashSet<String>,
    /// Containers (by id) whose server the read-ahead asked its health path, with the host
    /// port it asked on and the answer to come. Adoption skips its own wait for one when it took
    /// the workspace's lock uncontended, the inspect shows the same port, and the answer was 2xx.
    pub asked: HashMap<String, Asked>,
}

/// What the read-ahead asked of one running container: the engine its inspect (with its
/// namespace holder's, as [`inspect_workspace`] reads them), and its server its health path on
/// the host port the list showed; each settled once (any number of awaiters share it). Both run
/// in tasks of their own from the start, so they overlap whatever comes before they are
/// awaited; dropping the last copy stops them.
#[derive(Clone)]
pub struct Asked {
    container: String,
    port: u16,
    answer: Shared<BoxFuture<'static, bool>>,
    inspected: Shared<BoxFuture<'static, Option<LiveContainer>>>,
}

impl fmt::Debug for Asked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Asked")
            .field("container", &self.container)
            .field("port", &self.port)
            .finish()
    }
}

impl Asked {
    /// The inspect of `container` (whose server listens on `container_port`) beside its
    /// `holder`'s, and the ask of `path` on loopback `port`, under way.
    fn start(
        engine: &impl EngineApi,
        (container, container_port): (&str, u16),
        (holder, port): (&str, u16),
        path: String,
    ) -> Asked {
        let (engine, id, holder) = (engine.clone(), container.to_string(), holder.to_string());
        let inspect = tokio::spawn(async move {
            let read = inspect_beside(&engine, &id, Some(&holder), container_port).await;
            read.ok().flatten()
        });
        let task = tokio::spawn(async move { container::answers(port, &path).await });
        Asked {
            container: container.to_string(),
            port,
            answer: AbortOnDrop(task).boxed().shared(),
            inspected: AbortOnDrop(inspect).boxed().shared(),
        }
    }

    /// An ask already settled, with no inspect read (for tests).
    #[cfg(test)]
    pub fn settled(container: &str, port: u16, answered: bool) -> Asked {
        Asked {
            container: container.to_string(),
            port,
            answer: async move { answered }.boxed().shared(),
            inspected: async { None }.boxed().shared(),
        }
    }

    /// The container it read and asked.
    pub fn container(&self) -> &str {
        &self.container
    }

    /// The container and its holder as the read-ahead inspected them; `None` when that read
    /// failed (the caller inspects again).
    pub async fn inspected(&self) -> Option<LiveContainer> {
        self.inspected.clone().await
    }

    /// Whether the server answered 2xx on `port`, the port adoption found published now (an
    /// ask on another port says nothing of it, and is not awaited).
    pub async fn answered_on(self, port: Option<u16>) -> bool {
        port == Some(self.port) && self.answer.await
    }
}

/// A task's result as a future that aborts the task when dropped unfinished (a task that
/// failed settles as `T::default()`: no answer, nothing read).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T: Default> Future for AbortOnDrop<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or_default())
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
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
            if c.state == Some(crate::engine::model::ContainerSummaryStateEnum::RUNNING)
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
pub async fn known_containers(engine: &impl EngineApi, owner: &str) -> Result<KnownContainers> {
    let owner = format!("{LABEL_OWNER}={owner}");
    let list = container::list_labelled(engine, vec![owner]).await?;
    Ok(KnownContainers::from_list(list))
}

/// As [`known_containers`], and every running-alone container of a workspace in `held` (the
/// workspaces whose start lock the caller holds, said once the list is under way) inspected
/// beside the holder the list names, and its server asked its health path once on the loopback
/// port the list shows published for `container_port`, all at once: started, not awaited (see
/// [`Asked`]). Reads only; used while the engine check runs, so a hub restart's adoptions need
/// no read of their own.
pub async fn read_ahead(
    engine: &impl EngineApi,
    owner: &str,
    (container_port, health_path): (u16, &str),
    held: impl Future<Output = HashSet<String>>,
) -> Result<KnownContainers> {
    let label = format!("{LABEL_OWNER}={owner}");
    let list = container::list_labelled(engine, vec![label]).await?;
    // Only the workspaces whose start lock the caller took (while the list was under way) are
    // asked: what is read of them holds until their start.
    let held = held.await;
    // The port is published by the workspace's namespace holder.
    let holders: HashMap<String, (String, u16)> = list
        .iter()
        .filter_map(|c| {
            let ws = c.labels.as_ref()?.get(LABEL_HOLDER_OF)?.clone();
            Some((ws, (c.id.clone()?, loopback_port(c, container_port)?)))
        })
        .collect();
    let mut known = KnownContainers::from_list(list);
    known.asked = known
        .running_alone
        .iter()
        .filter(|ws| held.contains(*ws))
        .filter_map(|ws| Some((known.alone(ws)?, holders.get(ws)?)))
        .map(|(id, (holder, port))| {
            let target = (id, container_port);
            let asked = Asked::start(engine, target, (holder, *port), health_path.to_string());
            (id.to_string(), asked)
        })
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

/// Inspects a workspace container (by id or name) and the namespace holder it joined: its
/// published port is the holder's. `port` is the server's port in the container.
pub async fn inspect_workspace(
    engine: &impl EngineApi,
    id: &str,
    port: u16,
) -> Result<Option<LiveContainer>> {
    inspect_beside(engine, id, None, port).await
}

/// As [`inspect_workspace`], with the holder a list named for the workspace (`holder`)
/// inspected at the same time; when the container did not join that one, the one it joined is
/// inspected after, as [`inspect_workspace`] does.
async fn inspect_beside(
    engine: &impl EngineApi,
    id: &str,
    holder: Option<&str>,
    port: u16,
) -> Result<Option<LiveContainer>> {
    let beside = async {
        match holder {
            Some(h) => holder::inspect(engine, h, port).await.ok().flatten(),
            None => None,
        }
    };
    let (live, beside) = tokio::join!(container::inspect(engine, id, Some(port)), beside);
    let Some(mut live) = live? else {
        return Ok(None);
    };
    let mode = live
        .posture
        .namespaces
        .iter()
        .find(|(k, _)| k == "network")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let joined = match beside {
        Some(h) if mode == format!("container:{}", h.id) => Some(h),
        _ => holder::posture(engine, &mode, port).await?,
    };
    if let Some(h) = joined {
        live.host_port = h.host_port;
        live.posture.holder = Some(h);
    }
    Ok(Some(live))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::engine::model::{ContainerSummaryStateEnum as S, PortSummary};

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

    #[tokio::test]
    async fn an_ask_counts_only_on_the_port_it_went_to_and_only_when_answered() {
        assert!(
            Asked::settled("c1", 32770, true)
                .answered_on(Some(32770))
                .await
        );
        assert!(
            !Asked::settled("c1", 32770, true)
                .answered_on(Some(32771))
                .await
        );
        assert!(!Asked::settled("c1", 32770, true).answered_on(None).await);
        assert!(
            !Asked::settled("c1", 32770, false)
                .answered_on(Some(32770))
                .await
        );
    }

    #[tokio::test]
    async fn a_real_ask_reads_the_status_line_and_every_awaiter_shares_it() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 256];
            let n = s.read(&mut buf).await.unwrap();
            assert!(
                std::str::from_utf8(&buf[..n])
                    .unwrap()
                    .starts_with("GET /api/health ")
            );
            s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                .await
                .unwrap();
        });
        let engine = crate::engine::fake::FakeEngine::default();
        let ask = Asked::start(&engine, ("c1", 7300), ("h1", port), "/api/health".into());
        assert_eq!(ask.container(), "c1");
        assert!(
            ask.inspected().await.is_none(),
            "nothing to read on an empty engine"
        );
        let (a, b) = tokio::join!(
            ask.clone().answered_on(Some(port)),
            ask.answered_on(Some(port))
        );
        assert!(a && b, "both awaiters see the one answer");
        server.await.unwrap();
    }
}
