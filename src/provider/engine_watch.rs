//! The engine watch: the engine's event feed followed into the status, and every service
//! call watched for an engine that stopped answering (marked, then probed until it answers).

use std::sync::Arc;
use std::time::Duration;

use super::Provider;
use crate::engine::Connector;
use crate::error::{Error, Result};
use crate::events::Event;
use crate::lock::Locked;
use crate::sandbox::service::ContainerService;

/// How often an engine that stopped answering is probed.
const ENGINE_PROBE_EVERY: Duration = Duration::from_secs(2);

/// How often a running hub asks the engine its facts again and keeps them: half the time kept
/// facts hold, so the next start-up (a hub restart) finds fresh ones.
const FACTS_REFRESH_EVERY: Duration =
    Duration::from_secs(crate::engine::facts_cache::MAX_AGE.as_secs() / 2);

impl<C: Connector> Provider<C> {
    /// Follows the engine's events for this owner: the status's containers stay current
    /// (ports, state) without calls; died / restarted / OOM / unhealthy become workspace events.
    pub(super) fn follow_engine(&self, service: &ContainerService<C::Engine>) {
        let status = self.status.clone();
        let on_change: crate::sandbox::service::OnChange = Arc::new(move |id, now| {
            status.send_if_modified(|s| {
                let Some(w) = s.workspaces.iter_mut().find(|w| w.id == id) else {
                    return false;
                };
                let Some(c) = w.container.as_mut() else {
                    return false;
                };
                let before = (c.container_id.clone(), c.host_port, c.state.clone());
                c.container_id = now.container_id.clone();
                c.host_port = now.host_port;
                c.url = now.url.clone();
                c.state = now.state.clone();
                before != (c.container_id.clone(), c.host_port, c.state.clone())
            })
        });
        let task = tokio::spawn(crate::sandbox::service::follow_feed(
            service.clone(),
            on_change,
        ));
        let previous = self.feed.locked().replace(task);
        if let Some(p) = previous {
            p.abort();
        }
    }

    /// Runs a call on the service and watches what it says about the engine: a call the engine
    /// did not answer marks it as not answering (status and an `engine` event) and starts a
    /// probe that clears the mark once it answers; any answered call clears it too.
    pub async fn watched<T>(
        self: &Arc<Self>,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let result = call.await;
        match &result {
            Err(e) if engine_not_answering(e) => self.engine_lost(e),
            // An answer, even an error, is the engine answering.
            _ => self.engine_back(),
        }
        result
    }

    pub(super) fn engine_lost(self: &Arc<Self>, e: &Error) {
        let problem = format!(
            "{e} The provider probes the engine every {} s and recovers when it answers.",
            ENGINE_PROBE_EVERY.as_secs()
        );
        let mut changed = false;
        self.update(|s| {
            changed = s.engine_answering;
            s.engine_answering = false;
            s.engine_problem = Some(problem.clone());
        });
        if changed {
            tracing::warn!(error = %e, "the container engine stopped answering");
            let status = self.status();
            self.events.emit(Event::Engine {
                available: false,
                engine: status.engine,
                endpoint: status.endpoint,
                reason: Some(problem),
                code: Some(e.code().into()),
            });
        }
        if !self.probing.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let provider = Arc::downgrade(self);
            tokio::spawn(probe_engine(provider));
        }
    }

    pub(super) fn engine_back(&self) {
        let mut changed = false;
        self.update(|s| {
            changed = !s.engine_answering;
            s.engine_answering = true;
            s.engine_problem = None;
        });
        if changed {
            tracing::info!("the container engine answers again");
            let status = self.status();
            self.events.emit(Event::Engine {
                available: true,
                engine: status.engine,
                endpoint: status.endpoint,
                reason: None,
                code: None,
            });
        }
    }
}

/// The engine did not answer (a timeout, or no connection), as opposed to answering with an
/// error.
fn engine_not_answering(e: &Error) -> bool {
    match e.unshared() {
        Error::EngineTimeout { .. } | Error::EngineUnavailable { .. } => true,
        Error::EngineRequest { .. } => e.engine_fault().is_some_and(|f| f.not_answering()),
        _ => false,
    }
}

/// Asks the engine its facts (`version`, `info`) every [`FACTS_REFRESH_EVERY`] and keeps
/// them (see [`crate::engine::facts_cache`]) until the provider is gone; an engine that does
/// not answer leaves nothing kept for its next start.
pub(super) async fn keep_facts<C: Connector>(provider: std::sync::Weak<Provider<C>>) {
    loop {
        tokio::time::sleep(FACTS_REFRESH_EVERY).await;
        let Some(p) = provider.upgrade() else { return };
        let o = &p.options;
        if o.detect.facts_file.is_none() {
            return;
        }
        let detect = crate::engine::DetectOptions {
            refresh_facts: true,
            ..o.detect.clone()
        };
        if let Err(e) = p.connector.detect(&o.host, &detect).await {
            tracing::debug!(error = %e, "the engine's facts were not asked again");
        }
    }
}

/// Pings the engine every [`ENGINE_PROBE_EVERY`] until it answers (then clears the mark), the
/// mark is cleared by a call, or the provider is gone.
async fn probe_engine<C: Connector>(provider: std::sync::Weak<Provider<C>>) {
    loop {
        tokio::time::sleep(ENGINE_PROBE_EVERY).await;
        let Some(p) = provider.upgrade() else { return };
        let service = p.stored().and_then(|r| r.ok());
        let answered = match &service {
            Some(s) => s.ping().await,
            None => false,
        };
        if answered {
            p.engine_back();
        }
        if p.status().engine_answering || service.is_none() {
            p.probing.store(false, std::sync::atomic::Ordering::SeqCst);
            return;
        }
    }
}
