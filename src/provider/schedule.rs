//! Step 4, the configured workspaces: one list call for all, then adoptions (reads and a
//! health answer) at up to [`ADOPT_CONCURRENCY`] at once alongside creations at the options'
//! `concurrency`; a stop of every container skips those not started yet.

use futures_util::StreamExt;

use super::{Provider, WorkspacePhase, WorkspaceRequest};
use crate::engine::Connector;
use crate::lock::Locked;
use crate::sandbox::folder;
use crate::sandbox::service::{ContainerService, KnownContainers, ReadBefore};

/// How many workspaces whose container already runs are adopted at once at hub start: an
/// adoption only reads (an inspect, a health answer), so it is not held to `concurrency`,
/// which paces creations; this bound keeps a hub with many workspaces from opening hundreds
/// of engine connections at once.
const ADOPT_CONCURRENCY: usize = 32;

impl<C: Connector> Provider<C> {
    /// Step 4: every container workspace of the options: one list call for all, then the
    /// workspaces whose one container runs (adoptions: reads and a health answer) at up to
    /// [`ADOPT_CONCURRENCY`] at once, alongside the others (creations) at `concurrency`.
    /// Settles the status.
    pub(super) async fn start_workspaces(&self, service: &ContainerService<C::Engine>) {
        let _gate = self.starting_workspaces.lock().await;
        let o = &self.options;
        let wanted: Vec<WorkspaceRequest> = o
            .workspaces
            .iter()
            .filter(|w| w.container)
            .cloned()
            .collect();
        if !wanted.is_empty() {
            let prefetched = self.prefetched.locked().take();
            let (known, mut guards, mut locks) = match prefetched {
                Some(p) => (p.known, p.guards, p.locks),
                None => (None, Default::default(), Default::default()),
            };
            let known = match known {
                Some(k) => Some(k),
                None => service.known_containers().await.ok(),
            };
            let (adopting, creating): (Vec<_>, Vec<_>) = wanted.into_iter().partition(|w| {
                known
                    .as_ref()
                    .is_some_and(|k| k.running_alone.contains(&w.id))
            });
            let known = &known;
            let mut read_for = |w: WorkspaceRequest| {
                let read = (guards.remove(&w.id), locks.remove(&w.id));
                (w, read)
            };
            let adopting: Vec<_> = adopting.into_iter().map(&mut read_for).collect();
            let creating: Vec<_> = creating.into_iter().map(read_for).collect();
            let adoptions = futures_util::stream::iter(adopting)
                .map(|(w, read)| self.start_one(service, known, w, read))
                .buffer_unordered(ADOPT_CONCURRENCY)
                .collect::<Vec<()>>();
            let creations = futures_util::stream::iter(creating)
                .map(|(w, read)| self.start_one(service, known, w, read))
                .buffer_unordered(o.concurrency)
                .collect::<Vec<()>>();
            tokio::join!(adoptions, creations);
        }
        self.update(|s| s.settled = true);
        // The broker's TLS roots, loaded now rather than at the first request that needs them.
        service.warm_broker();
    }

    /// Starts (adopts or creates) one workspace of the options, with what start-up read for
    /// it (its containers, its guards, under its start lock taken before), and records the
    /// outcome.
    pub(super) async fn start_one(
        &self,
        service: &ContainerService<C::Engine>,
        known: &Option<KnownContainers>,
        w: WorkspaceRequest,
        (guards, lock): (Option<folder::GuardsResolved>, Option<folder::HostLock>),
    ) {
        if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            // Every container is being stopped: do not start more.
            self.set_workspace(&w.id, |s| s.state = WorkspacePhase::Stopped);
            return;
        }
        self.set_workspace(&w.id, |s| s.state = WorkspacePhase::Starting);
        let result = match folder::resolve_workspace(&w.id, &w.path) {
            Ok(mut ws) => {
                ws.mode = w.mode;
                let ids = known
                    .as_ref()
                    .map(|k| k.ids.get(&w.id).cloned().unwrap_or_default());
                let asked = known.as_ref().and_then(|k| {
                    let id = k.ids.get(&w.id)?.first()?;
                    k.asked.get(id).cloned()
                });
                let read = ReadBefore {
                    ids,
                    asked,
                    guards,
                    lock,
                };
                service.start_with(ws, read).await
            }
            Err(e) => Err(e),
        };
        self.set_workspace(&w.id, |s| match result {
            Ok(c) => {
                s.state = WorkspacePhase::Running;
                s.container = Some(c);
                s.error = None;
                s.error_code = None;
            }
            Err(e) => {
                s.state = WorkspacePhase::Failed;
                s.error_code = Some(e.code().into());
                s.error = Some(e.to_string());
            }
        });
    }
}
