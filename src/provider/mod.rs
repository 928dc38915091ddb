//! The container provider: at hub start, in the background, engine → runtime bundle → image →
//! every container-sandboxed workspace (adopted or created, in parallel with a bound). Its
//! status is always readable; the `po/workspace-containers` service waits for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::engine::{Connector, Local};
use crate::error::{Error, Result};
use crate::events::{Event, EventBus};
use crate::lock::Locked;
use crate::sandbox::service::ContainerService;

mod calls;
mod clone_work;
mod engine_watch;
pub(crate) mod image_job;
pub(crate) mod inventory;
mod options;
mod read_ahead;
mod running;
mod schedule;
mod startup;
mod status;
#[cfg(test)]
mod tests;

pub(crate) use options::{
    GivenOptions, ProviderOptions, WorkspaceRequest, refuse_nesting, registers,
};
pub(crate) use status::{ProviderState, ProviderStatus, WorkspacePhase, WorkspaceStatus};

/// A start-up's outcome: the service, or the failure every caller shares.
type StartUp<C> = std::result::Result<ContainerService<<C as Connector>::Engine>, Arc<Error>>;

/// The provider of one hub.
pub struct Provider<C: Connector = Local> {
    /// How the engine is found and reached.
    connector: C,
    options: ProviderOptions,
    events: EventBus,
    status: Arc<watch::Sender<ProviderStatus>>,
    /// The engine event feed of the current service (see [`crate::sandbox::service::feed`]).
    feed: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The start-up's outcome; a failure is shared by every caller that asks.
    service: Mutex<Option<StartUp<C>>>,
    /// Serialises start-up retries; holds when the last attempt ended.
    retry: tokio::sync::Mutex<Option<std::time::Instant>>,
    /// Held while the configured workspaces are being started; a stop of every container
    /// takes it first, so nothing start-up creates outlives that stop.
    starting_workspaces: tokio::sync::Mutex<()>,
    /// Set by a stop of every container: workspaces not yet started are skipped.
    stopping: std::sync::atomic::AtomicBool,
    /// A probe of an engine that stopped answering is running.
    probing: std::sync::atomic::AtomicBool,
    /// What start-up read while the engine and the image were checked (kept only when the
    /// image was there already, so it is fresh); taken by the first
    /// [`start_workspaces`](Self::start_workspaces).
    prefetched: Mutex<Option<startup::Prefetched>>,
    /// A one-shot provider's start-up waits for the first call that needs the service.
    start_asked: tokio::sync::Notify,
}

/// A failed start-up is tried again by a later call only when the last attempt is this old,
/// so a caller polling `list()` against a stopped engine does not probe it on every call.
const RETRY_AFTER: Duration = Duration::from_secs(2);

impl Provider {
    /// A provider in state `starting` on the engines this host reaches; call
    /// [`run`](Self::run) to start it.
    pub fn new(options: ProviderOptions) -> Arc<Provider> {
        Provider::with_connector(options, Local)
    }
}

impl<C: Connector> Provider<C> {
    /// A provider in state `starting` that reaches its engine through `connector`; call
    /// [`run`](Self::run) to start it.
    pub(crate) fn with_connector(options: ProviderOptions, connector: C) -> Arc<Provider<C>> {
        let workspaces = options
            .workspaces
            .iter()
            .map(|w| WorkspaceStatus {
                id: w.id.clone(),
                state: if w.container {
                    WorkspacePhase::Pending
                } else {
                    WorkspacePhase::Skipped
                },
                container: None,
                error_code: None,
                error: None,
            })
            .collect();
        let status = ProviderStatus {
            state: ProviderState::Starting,
            reason: None,
            code: None,
            engine_answering: true,
            engine_problem: None,
            engine: None,
            endpoint: None,
            runtime_version: None,
            image: None,
            image_built: false,
            owner: options.owner.clone(),
            settled: false,
            warnings: Vec::new(),
            workspaces,
        };
        Arc::new(Provider {
            connector,
            options,
            events: EventBus::default(),
            status: Arc::new(watch::channel(status).0),
            feed: Mutex::new(None),
            service: Mutex::new(None),
            retry: tokio::sync::Mutex::new(None),
            starting_workspaces: tokio::sync::Mutex::new(()),
            stopping: std::sync::atomic::AtomicBool::new(false),
            probing: std::sync::atomic::AtomicBool::new(false),
            prefetched: Mutex::new(None),
            start_asked: tokio::sync::Notify::new(),
        })
    }

    /// Its events.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// The current status.
    pub fn status(&self) -> ProviderStatus {
        self.status.borrow().clone()
    }

    /// Waits until start-up has settled, then returns the status.
    pub async fn ready(&self) -> ProviderStatus {
        let mut rx = self.status.subscribe();
        let settled = rx.wait_for(|s| s.settled).await.map(|s| s.clone());
        settled.unwrap_or_else(|_| self.status())
    }

    fn update(&self, f: impl FnOnce(&mut ProviderStatus)) {
        self.status.send_modify(f);
    }

    fn set_workspace(&self, id: &str, f: impl FnOnce(&mut WorkspaceStatus)) {
        self.update(|s| {
            if let Some(w) = s.workspaces.iter_mut().find(|w| w.id == id) {
                f(w);
            }
        });
    }

    /// Stores a start-up failure and reports it in the status; returns it shared.
    fn fail(&self, e: Error) -> Arc<Error> {
        let (reason, code) = (e.to_string(), e.code().to_string());
        let e = Arc::new(e);
        *self.service.locked() = Some(Err(e.clone()));
        self.update(|s| {
            s.state = ProviderState::Unavailable;
            s.reason = Some(reason.clone());
            s.code = Some(code.clone());
            s.settled = true;
            for w in s
                .workspaces
                .iter_mut()
                .filter(|w| w.state == WorkspacePhase::Pending)
            {
                w.state = WorkspacePhase::Failed;
                w.error_code = Some(code.clone());
                w.error = Some(reason.clone());
            }
        });
        self.events.emit(Event::Provider {
            state: ProviderState::Unavailable,
            reason: Some(reason),
            code: Some(code),
        });
        e
    }

    /// The start-up sequence (a one-shot provider's once a call needs it). Never fails:
    /// problems become the status.
    pub async fn run(self: Arc<Self>) {
        if self.options.one_shot {
            self.start_asked.notified().await;
        } else {
            tokio::spawn(engine_watch::keep_facts(Arc::downgrade(&self)));
        }
        let service = match self.setup().await {
            Ok(service) => service,
            Err(e) => {
                if let Ok(mut last) = self.retry.try_lock() {
                    *last = Some(std::time::Instant::now());
                }
                let watch = waits_for_host(&e);
                self.fail(e);
                if watch {
                    tokio::spawn(watch_for_fix(Arc::downgrade(&self)));
                }
                return;
            }
        };
        // The configured workspaces first: nothing else asks the engine or takes CPU from
        // their adoptions meanwhile.
        self.start_workspaces(&service).await;
        service.prune_own_networks().await;
    }

    /// The `po/workspace-containers` service, once start-up got that far; the start-up's error
    /// otherwise. Never retries (stops and listings use this).
    pub async fn service(&self) -> Result<ContainerService<C::Engine>> {
        self.start_asked.notify_one();
        let mut rx = self.status.subscribe();
        let _ = rx.wait_for(|s| s.state != ProviderState::Starting).await;
        match self.stored() {
            Some(result) => result,
            None => Err(Error::EngineUnavailable {
                reason: "the container provider has not started".into(),
                reason_code: None,
            }),
        }
    }

    /// As [`service`](Self::service), for a call that starts or adopts a workspace: when
    /// start-up failed (engine down, bundle missing or invalid, image build failed), it is tried
    /// again (at most every [`RETRY_AFTER`]), so a hub need not restart once the cause is fixed;
    /// on success the configured workspaces start in the background.
    pub async fn service_for_start(self: &Arc<Self>) -> Result<ContainerService<C::Engine>> {
        let failed = match self.service().await {
            Ok(service) => return Ok(service),
            Err(e) => e,
        };
        let mut last = self.retry.lock().await;
        // Another caller may have retried while this one waited.
        match self.stored() {
            Some(Ok(service)) => return Ok(service),
            Some(Err(e)) if last.is_some_and(|t| t.elapsed() < RETRY_AFTER) => return Err(e),
            None => return Err(failed),
            _ => {}
        }
        tracing::info!("retrying the container provider's start-up");
        let result = self.setup().await;
        *last = Some(std::time::Instant::now());
        match result {
            Ok(service) => {
                let this = self.clone();
                let started = service.clone();
                tokio::spawn(async move { this.start_workspaces(&started).await });
                Ok(service)
            }
            Err(e) => Err(Error::Shared(self.fail(e))),
        }
    }

    /// One background retry (see [`watch_for_fix`]): `false` once there is nothing to wait for.
    async fn retry_in_background(self: &Arc<Self>) -> bool {
        match self.stored() {
            Some(Err(e)) if waits_for_host(&e) => {}
            _ => return false,
        }
        match self.service_for_start().await {
            Ok(_) => false,
            Err(e) => waits_for_host(&e),
        }
    }

    /// Stops every container of this owner (volumes kept), after the configured workspaces'
    /// start-up: those not started yet are skipped, those starting are waited for.
    ///
    /// The status then says `stopped` (with no container) for every workspace that was
    /// running: none of this owner's containers is left.
    pub async fn stop_all(&self) -> Result<Vec<String>> {
        let service = self.service().await?;
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _gate = self.starting_workspaces.lock().await;
        let stopped = service.stop_all().await?;
        self.update(|s| s.workspaces.iter_mut().for_each(mark_stopped));
        Ok(stopped)
    }

    /// Switches one workspace's sandbox off (its container stopped and removed, volumes kept);
    /// the status then says `stopped` for it, when it was running. `false` when it had none.
    pub async fn stop(&self, workspace_id: &str) -> Result<bool> {
        let stopped = self.service().await?.stop(workspace_id).await?;
        self.set_workspace(workspace_id, mark_stopped);
        Ok(stopped)
    }

    /// The stored start-up outcome; `None` before start-up ran.
    fn stored(&self) -> Option<Result<ContainerService<C::Engine>>> {
        let stored = self.service.locked();
        stored
            .as_ref()
            .map(|result| result.clone().map_err(Error::Shared))
    }

    /// A clean user stop: stops every container of this owner (as [`stop_all`](Self::stop_all)).
    pub async fn clean_stop(&self) -> Result<Vec<String>> {
        self.stop_all().await
    }
}

impl<C: Connector> Drop for Provider<C> {
    fn drop(&mut self) {
        if let Some(task) = self.feed.locked().take() {
            task.abort();
        }
    }
}

/// A workspace whose container was stopped on request: `stopped`, with no container, when it
/// was running (a skipped or failed one keeps its state).
fn mark_stopped(w: &mut WorkspaceStatus) {
    if w.state == WorkspacePhase::Running {
        w.state = WorkspacePhase::Stopped;
        w.container = None;
    }
}

/// Start-up failures the host fixes without the hub: the engine starts, Po installs the runtime
/// bundle. Those are retried in the background; an image build failure is not (a rebuild is
/// expensive), a `start` call retries it.
fn waits_for_host(e: &Error) -> bool {
    matches!(
        e.unshared(),
        Error::EngineUnavailable { .. }
            | Error::RuntimeNotInstalled { .. }
            | Error::RuntimeInvalid { .. }
    )
}

/// After such a failure, retries start-up in the background at 2, 4, 8… up to every 60 s, until
/// it succeeds (the configured workspaces then start), fails otherwise, or the provider is gone.
async fn watch_for_fix<C: Connector>(provider: std::sync::Weak<Provider<C>>) {
    let mut pause = Duration::from_secs(2);
    loop {
        tokio::time::sleep(pause).await;
        let Some(p) = provider.upgrade() else { return };
        if !p.retry_in_background().await {
            return;
        }
        pause = (pause * 2).min(Duration::from_secs(60));
    }
}
