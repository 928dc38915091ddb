//! The container provider: at hub start, in the background, engine → runtime bundle → image →
//! every container-sandboxed workspace (adopted or created, in parallel with a bound). Its
//! status is always readable; the `po/workspace-containers` service waits for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;

use crate::broker::egress::EgressEvent;
use crate::broker::server::{Broker, BrokerOptions, RouteKind};
use crate::engine::{self};
use crate::error::{Error, Result};
use crate::events::{Event, EventBus};
use crate::image::{self};
use crate::lock::Locked;
use crate::runtime_bundle as runtime;
use crate::sandbox::folder;
use crate::sandbox::service::{BrokerWiring, ContainerService, KnownContainers, known_containers};

mod calls;
mod clone_work;
pub(crate) mod image_job;
pub(crate) mod inventory;
mod options;
mod read_ahead;
mod running;
mod status;

pub(crate) use options::{
    GivenOptions, ProviderOptions, WorkspaceRequest, refuse_nesting, registers,
};
pub(crate) use status::{ProviderState, ProviderStatus, WorkspacePhase, WorkspaceStatus};

/// The provider of one hub.
pub struct Provider {
    options: ProviderOptions,
    events: EventBus,
    status: Arc<watch::Sender<ProviderStatus>>,
    /// The engine event feed of the current service (see [`crate::sandbox::service::feed`]).
    feed: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The start-up's outcome; a failure is shared by every caller that asks.
    service: Mutex<Option<std::result::Result<ContainerService, Arc<Error>>>>,
    /// Serialises start-up retries; holds when the last attempt ended.
    retry: tokio::sync::Mutex<Option<std::time::Instant>>,
    /// Held while the configured workspaces are being started; a stop of every container
    /// takes it first, so nothing start-up creates outlives that stop.
    starting_workspaces: tokio::sync::Mutex<()>,
    /// Set by a stop of every container: workspaces not yet started are skipped.
    stopping: std::sync::atomic::AtomicBool,
    /// A probe of an engine that stopped answering is running.
    probing: std::sync::atomic::AtomicBool,
    /// This owner's containers, listed during start-up while the image was checked (kept only
    /// when the image was there already, so the list is fresh); taken by the first
    /// [`start_workspaces`](Self::start_workspaces).
    prefetched: Mutex<Option<KnownContainers>>,
    /// A one-shot provider's start-up waits for the first call that needs the service.
    start_asked: tokio::sync::Notify,
}

/// How often an engine that stopped answering is probed.
const ENGINE_PROBE_EVERY: Duration = Duration::from_secs(2);

/// A failed start-up is tried again by a later call only when the last attempt is this old,
/// so a caller polling `list()` against a stopped engine does not probe it on every call.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// How many workspaces whose container already runs are adopted at once at hub start: an
/// adoption only reads (an inspect, a health answer), so it is not held to `concurrency`,
/// which paces creations; this bound keeps a hub with many workspaces from opening hundreds
/// of engine connections at once.
const ADOPT_CONCURRENCY: usize = 32;

impl Provider {
    /// A provider in state `starting`; call [`run`](Self::run) to start it.
    pub fn new(options: ProviderOptions) -> Arc<Provider> {
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

    /// Steps 1 to 3 (engine, runtime bundle, image) and the broker; on success the service is
    /// stored and the provider is `ready`.
    async fn setup(&self) -> Result<ContainerService> {
        self.begin_attempt();
        let ahead = read_ahead::known(&self.options);
        let (report, engine) = self.check_engine().await?;
        if report.engine.as_deref() == Some("podman") {
            crate::sandbox::blueprint::refuse_run_flags_on_podman(&self.options.run_flags)?;
        }
        let bundle = self.check_runtime()?;
        // The broker's start (TLS roots, listeners) and the list of this owner's containers
        // overlap the image check.
        let (built, wiring, known, git_warning) = tokio::join!(
            self.ensure_image(&engine),
            self.start_broker(&report, true),
            self.prefetch_known(&engine, ahead, &report),
            self.git_safety()
        );
        let (built, wiring) = (built?, wiring?);
        if !built {
            *self.prefetched.locked() = known;
        }
        let config = running::service_config(&self.options, bundle, &report, wiring)?;
        let mut warnings: Vec<String> =
            config.container.mode.limits_warning().into_iter().collect();
        warnings.extend(git_warning);
        let service = ContainerService::new(engine, config, self.events.clone());
        service.sweep_files();
        *self.service.locked() = Some(Ok(service.clone()));
        self.follow_engine(&service);
        self.update(|s| {
            s.state = ProviderState::Ready;
            s.image_built = built;
            s.warnings = warnings;
        });
        self.events.emit(Event::Provider {
            state: ProviderState::Ready,
            reason: None,
            code: None,
        });
        Ok(service)
    }

    /// Bind-mode workspaces: the person's `safe.bareRepository`, set with the opt-in, else the
    /// warning when it is open ([`crate::sandbox::folder::guards::git_safety`]).
    async fn git_safety(&self) -> Option<String> {
        let o = &self.options;
        if o.workspace_mode != crate::sandbox::folder::WorkspaceMode::Bind && !o.set_git_safe_bare {
            return None;
        }
        let (vars, opt_in) = (o.host.vars().clone(), o.set_git_safe_bare);
        let (home, owner) = (o.po_home.clone(), o.owner.clone());
        tokio::task::spawn_blocking(move || folder::ensure_safe_bare(&vars, opt_in, &home, &owner))
            .await
            .ok()
            .flatten()
    }

    /// A new attempt: `starting`, and the workspaces a failed one never reached are pending.
    fn begin_attempt(&self) {
        self.update(|s| {
            s.state = ProviderState::Starting;
            s.reason = None;
            s.code = None;
            s.settled = false;
            for w in s
                .workspaces
                .iter_mut()
                .filter(|w| w.state == WorkspacePhase::Failed)
            {
                w.state = WorkspacePhase::Pending;
                w.error = None;
                w.error_code = None;
            }
        });
        self.events.emit(Event::Provider {
            state: ProviderState::Starting,
            reason: None,
            code: None,
        });
    }

    /// 1. Engine: detected, usable and local, connected.
    async fn check_engine(&self) -> Result<(engine::EngineReport, engine::Client)> {
        let o = &self.options;
        let report = engine::detect(&o.host, &o.detect).await?;
        self.events.emit(Event::Engine {
            available: report.available,
            engine: report.engine.clone(),
            endpoint: report.endpoint.clone(),
            reason: report.reason.clone(),
            code: report.reason_code.clone(),
        });
        if !report.available {
            return Err(engine::unavailable(&report));
        }
        if report.remote {
            return Err(Error::EngineUnavailable {
                reason: engine::remote_reason(&report),
                reason_code: None,
            });
        }
        self.update(|s| {
            s.engine = report.engine.clone();
            s.endpoint = report.endpoint.clone();
        });
        let engine = engine::connect_reported(&report, engine::call_timeout(&o.host)?)?;
        Ok((report, engine))
    }

    /// 2. Runtime bundle: located and valid.
    fn check_runtime(&self) -> Result<runtime::RuntimeBundle> {
        let o = &self.options;
        let bundle = match runtime::demo::locate_or_demo(
            &o.po_home,
            o.runtime_version.as_deref(),
            o.demo_runtime,
        ) {
            Ok(b) => b,
            Err(e) => {
                self.events.emit(Event::Runtime {
                    ok: false,
                    version: None,
                    reason: Some(e.to_string()),
                    code: Some(e.code().into()),
                });
                return Err(e);
            }
        };
        self.events.emit(Event::Runtime {
            ok: true,
            version: Some(bundle.version.clone()),
            reason: None,
            code: None,
        });
        self.update(|s| s.runtime_version = Some(bundle.version.clone()));
        Ok(bundle)
    }

    /// 3. Image: there, or built now (`true`).
    async fn ensure_image(&self, engine: &impl engine::EngineApi) -> Result<bool> {
        let recipe = &self.options.recipe;
        self.update(|s| s.image = Some(recipe.tag()));
        let bounds = engine::bounds(&self.options.host)?;
        let provenance = image::ensure(engine, recipe, &self.events, &bounds).await?;
        Ok(provenance == image::Provenance::Built)
    }

    /// This owner's containers, when any workspace of the options wants one: what was read
    /// ahead on the endpoint the engine check chose, else one list now; `None` when none is
    /// wanted or the list failed (start-up lists again).
    async fn prefetch_known(
        &self,
        engine: &impl engine::EngineApi,
        ahead: Option<read_ahead::ReadAhead<KnownContainers>>,
        report: &engine::EngineReport,
    ) -> Option<KnownContainers> {
        if !self.options.workspaces.iter().any(|w| w.container) {
            return None;
        }
        if let Some(read) = ahead
            && let Some(known) = read.take(report).await
        {
            let asked = known.asked.len();
            tracing::debug!(asked, "read-ahead of the owner's containers used");
            return Some(known);
        }
        known_containers(engine, &self.options.owner).await.ok()
    }

    /// The credential broker, unless it is off: a socket per container on a native engine,
    /// loopback TCP reached as host.docker.internal on a VM engine; `warm`: its TLS roots load
    /// now, in the background.
    async fn start_broker(
        &self,
        report: &engine::EngineReport,
        warm: bool,
    ) -> Result<Option<BrokerWiring>> {
        let o = &self.options;
        if !o.broker {
            return Ok(None);
        }
        let transport = o.broker_route.route(o.host.os, report.vm);
        let broker = Broker::start_warm(
            BrokerOptions {
                host_env: o.host.vars().clone(),
                socket_dir: o.broker_socket_dir.clone(),
                tcp: transport == RouteKind::Tcp,
                egress: o.egress_policy(),
                fetch_screen: o.network_mode != crate::sandbox::blueprint::NetworkMode::Open,
            },
            warm,
        )
        .await?;
        if !broker.enabled() {
            return Ok(None);
        }
        let events = self.events.clone();
        broker.on_egress(Arc::new(move |e: &EgressEvent| {
            events.emit(Event::Egress {
                workspace_id: e.workspace.clone(),
                grant: e.grant.clone(),
                host: e.host.clone(),
                port: u32::from(e.port),
                decision: e.decision,
                reason: e.reason.clone(),
                bytes_up: e.bytes_up as i64,
                bytes_down: e.bytes_down as i64,
                duration_ms: e.duration_ms as i64,
            })
        }));
        Ok(Some(BrokerWiring {
            broker,
            transport,
            socket_root: o.broker_socket_dir.clone(),
        }))
    }

    /// The start-up sequence (a one-shot provider's once a call needs it). Never fails:
    /// problems become the status.
    pub async fn run(self: Arc<Self>) {
        if self.options.one_shot {
            self.start_asked.notified().await;
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
        tokio::join!(
            self.start_workspaces(&service),
            service.prune_own_networks()
        );
    }

    /// Step 4: every container workspace of the options: one list call for all, then the
    /// workspaces whose one container runs (adoptions: reads and a health answer) at up to
    /// [`ADOPT_CONCURRENCY`] at once, alongside the others (creations) at `concurrency`.
    /// Settles the status.
    async fn start_workspaces(&self, service: &ContainerService) {
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
            let known = match prefetched {
                Some(k) => Some(k),
                None => service.known_containers().await.ok(),
            };
            let (adopting, creating): (Vec<_>, Vec<_>) = wanted.into_iter().partition(|w| {
                known
                    .as_ref()
                    .is_some_and(|k| k.running_alone.contains(&w.id))
            });
            let known = &known;
            let adoptions = futures_util::stream::iter(adopting)
                .map(|w| self.start_one(service, known, w))
                .buffer_unordered(ADOPT_CONCURRENCY)
                .collect::<Vec<()>>();
            let creations = futures_util::stream::iter(creating)
                .map(|w| self.start_one(service, known, w))
                .buffer_unordered(o.concurrency)
                .collect::<Vec<()>>();
            tokio::join!(adoptions, creations);
        }
        self.update(|s| s.settled = true);
    }

    /// Starts (adopts or creates) one workspace of the options and records the outcome.
    async fn start_one(
        &self,
        service: &ContainerService,
        known: &Option<KnownContainers>,
        w: WorkspaceRequest,
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
                service.start_with(ws, ids, asked).await
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

    /// The `po/workspace-containers` service, once start-up got that far; the start-up's error
    /// otherwise. Never retries (stops and listings use this).
    pub async fn service(&self) -> Result<ContainerService> {
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
    pub async fn service_for_start(self: &Arc<Self>) -> Result<ContainerService> {
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

    /// Follows the engine's events for this owner: the status's containers stay current
    /// (ports, state) without calls; died / restarted / OOM / unhealthy become workspace events.
    fn follow_engine(&self, service: &ContainerService) {
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

    fn engine_lost(self: &Arc<Self>, e: &Error) {
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

    fn engine_back(&self) {
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

    /// The stored start-up outcome; `None` before start-up ran.
    fn stored(&self) -> Option<Result<ContainerService>> {
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

impl Drop for Provider {
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

/// The engine did not answer (a timeout, or no connection), as opposed to answering with an
/// error.
fn engine_not_answering(e: &Error) -> bool {
    match e.unshared() {
        Error::EngineTimeout { .. } | Error::EngineUnavailable { .. } => true,
        Error::EngineRequest { .. } => e.engine_fault().is_some_and(|f| f.not_answering()),
        _ => false,
    }
}

/// Pings the engine every [`ENGINE_PROBE_EVERY`] until it answers (then clears the mark), the
/// mark is cleared by a call, or the provider is gone.
async fn probe_engine(provider: std::sync::Weak<Provider>) {
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
async fn watch_for_fix(provider: std::sync::Weak<Provider>) {
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
