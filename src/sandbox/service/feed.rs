//! The engine's event stream for this owner's containers. It keeps what the provider reports
//! current without calls (a container restarted by its policy, or by an engine restart, comes
//! back on a new host port) and reports died / restarted / OOM / unhealthy with the reason. The
//! stream is re-opened when it ends (an engine restart ends it), after a resynchronising list.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::model::EventMessage;
use futures_util::StreamExt;

use super::{ContainerService, WorkspaceContainer};
use crate::engine::api::{EngineApi, Filters};
use crate::events::WorkspaceChange;
use crate::sandbox::blueprint::spec::{LABEL_HOLDER_OF, LABEL_OWNER, LABEL_WORKSPACE};

/// What an engine event means for one of this owner's workspaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happening {
    /// Its process exited (the code, when the engine says).
    Died(Option<String>),
    /// The kernel killed a process in it for lack of memory.
    OutOfMemory,
    /// It started (created by a hub, or restarted).
    Started,
    /// Its health check failed.
    Unhealthy,
    /// Its network namespace holder started (the id is the holder's): its rules are to be
    /// loaded.
    HolderStarted,
}

/// One event, read: the workspace, the container id, and what happened. `None` for events of
/// other owners, of containers without a workspace label, and for actions that change nothing
/// this layer reports.
pub fn classify(msg: &EventMessage, owner: &str) -> Option<(String, String, Happening)> {
    let actor = msg.actor.as_ref()?;
    let attrs = actor.attributes.as_ref()?;
    if attrs.get(LABEL_OWNER).map(String::as_str) != Some(owner) {
        return None;
    }
    let id = actor.id.clone()?;
    if let Some(ws) = attrs.get(LABEL_HOLDER_OF) {
        return (msg.action.as_deref()? == "start")
            .then(|| (ws.clone(), id, Happening::HolderStarted));
    }
    let workspace = attrs.get(LABEL_WORKSPACE)?.clone();
    let happening = match msg.action.as_deref()? {
        "die" => Happening::Died(attrs.get("exitCode").cloned()),
        "oom" => Happening::OutOfMemory,
        "start" => Happening::Started,
        "health_status: unhealthy" => Happening::Unhealthy,
        _ => return None,
    };
    Some((workspace, id, happening))
}

/// Called with a workspace's container as it is now, after any change; says whether what the
/// provider reports of it (id, port, state) changed.
pub type OnChange = Arc<dyn Fn(&str, &WorkspaceContainer) -> bool + Send + Sync>;

/// The longest wait between attempts to re-open the stream while the engine does not answer:
/// short, so a restarted engine's new ports are reported within seconds of its return (a failed
/// attempt is one refused connection, or one bounded list of a hung engine).
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// How long after a `die` the container is looked at: a stop on request by another process
/// (this hub's own are known) removes it by then.
const SETTLE: Duration = Duration::from_millis(500);

/// Follows the engine's events for `service`'s owner until the task is dropped.
pub async fn follow<E: EngineApi>(service: ContainerService<E>, on_change: OnChange) {
    let mut pause = Duration::from_secs(1);
    let mut died: HashSet<String> = HashSet::new();
    let mut first = true;
    loop {
        // Resynchronise after a gap (not at first: start-up reports every container itself):
        // one list gives every container as it is now.
        let resync = if first {
            Ok(Vec::new())
        } else {
            service.list().await
        };
        let resynced = !first;
        first = false;
        match resync {
            Ok(all) => {
                pause = Duration::from_secs(1);
                // Holders that started meanwhile have no rules yet: their workspaces wait at
                // their start gates (at first, adoption sees to the rules).
                if resynced {
                    match service.running_holders().await {
                        Ok(holders) => {
                            for (ws, id) in holders {
                                spawn_holder_started(&service, ws, id);
                            }
                        }
                        Err(e) => tracing::debug!(error = %e, "engine events: cannot list holders"),
                    }
                }
                report_resync(&service, &on_change, &mut died, &all);
            }
            Err(e) => {
                tracing::debug!(error = %e, "engine events: cannot list, retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                continue;
            }
        }
        let mut stream = service.engine().events(owner_filters(service.owner()));
        while let Some(item) = stream.next().await {
            let msg = match item {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(error = %e, "engine events: the stream broke");
                    break;
                }
            };
            if let Some((ws, id, happening)) = classify(&msg, service.owner()) {
                react(&service, &on_change, &mut died, &ws, &id, happening).await;
            }
        }
        tracing::info!("engine events: the stream ended (engine restarted?); re-opening");
        tokio::time::sleep(pause).await;
    }
}

/// Reports each container of a resynchronising list to `on_change`, and says `restarted` for
/// a running one the provider knew elsewhere (another port, another id), e.g. after an engine
/// restart. Also when its status is already current: a container whose death was seen (and
/// whose restart was not) came back meanwhile. A death it saw stays remembered until the
/// container runs again.
fn report_resync<E: EngineApi>(
    service: &ContainerService<E>,
    on_change: &OnChange,
    died: &mut HashSet<String>,
    all: &[WorkspaceContainer],
) {
    for c in all {
        let changed = on_change(&c.workspace_id, c);
        let running = c.state == "running";
        let was_dead = running && died.remove(&c.container_id);
        if running && (changed || was_dead) {
            let port = c
                .host_port
                .map_or_else(String::new, |p| format!(", now on 127.0.0.1:{p}"));
            let reason = format!(
                "restarted while the engine's events were not followed (the engine restarted?){port}"
            );
            service.events().workspace(
                &c.workspace_id,
                WorkspaceChange::Restarted,
                Some(&c.container_id),
                Some(reason),
            );
        }
    }
}

/// The events of `owner`'s containers.
fn owner_filters(owner: &str) -> Filters {
    HashMap::from([
        ("type".to_string(), vec!["container".to_string()]),
        ("label".to_string(), vec![format!("{LABEL_OWNER}={owner}")]),
    ])
}

/// The reason of a `restarted` event for a container the engine restarted, with its port.
fn restarted_by_the_engine(now: &WorkspaceContainer) -> String {
    let port = now
        .host_port
        .map_or_else(String::new, |p| format!(", now on 127.0.0.1:{p}"));
    format!("restarted by the engine{port}")
}

async fn react<E: EngineApi>(
    service: &ContainerService<E>,
    on_change: &OnChange,
    died: &mut HashSet<String>,
    ws: &str,
    id: &str,
    happening: Happening,
) {
    let events = service.events();
    match happening {
        Happening::Died(code) => {
            // This hub stopped it: not a death to report.
            if service.stop_requested(id) {
                return;
            }
            tokio::time::sleep(SETTLE).await;
            // Removed by then: a stop on request (by another process), not a death to report.
            let Ok(Some(now)) = service.current(id).await else {
                return;
            };
            let code = code.map_or_else(String::new, |c| format!(" with code {c}"));
            let reason = format!(
                "its process exited{code}; the engine restarts it (restart policy unless-stopped)"
            );
            events.workspace(ws, WorkspaceChange::Died, Some(id), Some(reason));
            on_change(ws, &now);
            if now.state == "running" {
                // Restarted already (its `start` event may be gone with the stream, as in an
                // engine restart): say so now, once.
                events.workspace(
                    ws,
                    WorkspaceChange::Restarted,
                    Some(id),
                    Some(restarted_by_the_engine(&now)),
                );
            } else {
                died.insert(id.to_string());
            }
        }
        Happening::OutOfMemory => {
            let reason = "the kernel killed a process in it for lack of memory".to_string();
            events.workspace(ws, WorkspaceChange::Oom, Some(id), Some(reason));
        }
        Happening::Started => {
            if let Ok(Some(now)) = service.current(id).await {
                if died.remove(id) {
                    let reason = restarted_by_the_engine(&now);
                    events.workspace(ws, WorkspaceChange::Restarted, Some(id), Some(reason));
                }
                on_change(ws, &now);
            }
        }
        Happening::Unhealthy => {
            let reason = "its health check failed".to_string();
            events.workspace(ws, WorkspaceChange::Unhealthy, Some(id), Some(reason));
        }
        Happening::HolderStarted => spawn_holder_started(service, ws.to_string(), id.to_string()),
    }
}

/// Loads a started holder's rules in a task of its own (a helper container runs: the feed
/// reads on meanwhile); a failure is reported as the workspace's health.
fn spawn_holder_started<E: EngineApi>(service: &ContainerService<E>, ws: String, holder: String) {
    let service = service.clone();
    tokio::spawn(async move {
        if let Err(e) = service.holder_started(&ws, &holder).await {
            tracing::warn!(workspace = %ws, holder = %holder, error = %e, "cannot load a holder's network rules");
            let reason =
                format!("the network rules of its namespace holder could not be loaded: {e}");
            service
                .events()
                .workspace(&ws, WorkspaceChange::Unhealthy, None, Some(reason));
        }
    });
}

#[cfg(test)]
mod tests {
    use crate::engine::model::EventActor;

    use super::*;

    fn msg(action: &str, attrs: &[(&str, &str)]) -> EventMessage {
        EventMessage {
            action: Some(action.into()),
            actor: Some(EventActor {
                id: Some("c1".into()),
                attributes: Some(
                    attrs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn events_of_this_owners_workspaces_are_read_and_others_ignored() {
        let ours = [
            (LABEL_OWNER, "o1"),
            (LABEL_WORKSPACE, "w"),
            ("exitCode", "137"),
        ];
        let cases: Vec<(EventMessage, Option<Happening>)> = vec![
            (msg("die", &ours), Some(Happening::Died(Some("137".into())))),
            (msg("oom", &ours), Some(Happening::OutOfMemory)),
            (msg("start", &ours), Some(Happening::Started)),
            (
                msg("health_status: unhealthy", &ours),
                Some(Happening::Unhealthy),
            ),
            (msg("health_status: healthy", &ours), None),
            (msg("attach", &ours), None),
            (
                msg("die", &[(LABEL_OWNER, "o2"), (LABEL_WORKSPACE, "w")]),
                None,
            ),
            (msg("die", &[(LABEL_OWNER, "o1")]), None),
        ];
        for (m, want) in cases {
            let got = classify(&m, "o1").map(|(ws, id, h)| {
                assert_eq!((ws.as_str(), id.as_str()), ("w", "c1"));
                h
            });
            assert_eq!(got, want, "{:?}", m.action);
        }
        // A holder's start is its workspace's (the id the holder's); nothing else of it.
        let holder = [(LABEL_OWNER, "o1"), (LABEL_HOLDER_OF, "w")];
        assert_eq!(
            classify(&msg("start", &holder), "o1"),
            Some(("w".into(), "c1".into(), Happening::HolderStarted))
        );
        for action in ["die", "oom", "health_status: unhealthy", "create"] {
            assert_eq!(classify(&msg(action, &holder), "o1"), None, "{action}");
        }
        assert_eq!(classify(&msg("start", &holder), "o2"), None);
    }
}
