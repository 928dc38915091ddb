//! Start-up, steps 1 to 3 and the broker: the engine found and reached, the runtime bundle,
//! the image (with this owner's containers listed alongside), then the service stored and the
//! provider `ready`; a failed attempt is the status, tried again by a later call.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use super::{Provider, ProviderState, WorkspacePhase, read_ahead, running};
use crate::broker::egress::EgressEvent;
use crate::broker::server::{Broker, BrokerOptions, RouteKind};
use crate::engine::{self, Connector};
use crate::error::{Error, Result};
use crate::events::Event;
use crate::image;
use crate::lock::Locked;
use crate::runtime_bundle as runtime;
use crate::sandbox::folder::{self, WorkspaceMode};
use crate::sandbox::service::{
    BrokerWiring, ContainerService, KnownContainers, known_containers, start_lock_now,
};

/// What start-up read while the engine and the image were checked, for the configured
/// workspaces' starts.
pub(super) struct Prefetched {
    /// This owner's containers (`None`: the list failed; start-up lists again).
    pub known: Option<KnownContainers>,
    /// Each bind-mode workspace's guards, by workspace id.
    pub guards: HashMap<String, folder::GuardsResolved>,
    /// The start locks taken before the read, by workspace id.
    pub locks: HashMap<String, folder::HostLock>,
}

impl<C: Connector> Provider<C> {
    /// Steps 1 to 3 (engine, runtime bundle, image) and the broker; on success the service is
    /// stored and the provider is `ready`.
    pub(super) async fn setup(&self) -> Result<ContainerService<C::Engine>> {
        self.begin_attempt();
        self.options.policy_good()?;
        // The owner's containers listed while the workspaces' start locks are taken; the rest
        // is read only of those whose lock was taken, so what is read holds for them.
        let (held, read_held) = tokio::sync::oneshot::channel();
        let ahead = read_ahead::known(&self.connector, &self.options, read_held);
        let mut locks = self.start_locks_now();
        let _ = held.send(locks.keys().cloned().collect());
        if ahead.is_none() {
            locks.clear();
        }
        let guards = self.guards_ahead();
        // A base pulled first is pinned after its pull, not ahead.
        let pinned = match self.options.pull_base {
            true => None,
            false => read_ahead::image(&self.connector, &self.options),
        };
        // The person's git is asked while the engine is checked.
        let git_safety = self.git_safety();
        let (report, engine) = self.check_engine().await?;
        if report.engine.as_deref() == Some("podman") {
            crate::sandbox::blueprint::refuse_run_flags_on_podman(&self.options.run_flags)?;
        }
        let bundle = self.check_runtime()?;
        // The broker's start (its listeners; its TLS roots load once the configured workspaces
        // are started, see `start_workspaces`) and the list of this owner's containers overlap
        // the image check.
        let (built, wiring, known, git_warning, guards) = tokio::join!(
            self.ensure_image(&engine, pinned, &report),
            self.start_broker(&report, false),
            self.prefetch_known(&engine, ahead, &report),
            git_safety,
            async { guards.await.unwrap_or_default() }
        );
        let ((built, recipe), wiring) = (built?, wiring?);
        if !built {
            *self.prefetched.locked() = Some(Prefetched {
                known,
                guards,
                locks,
            });
        }
        let config = running::service_config(&self.options, &recipe, bundle, &report, wiring)?;
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

    /// The start locks of the options' container workspaces that are free now.
    fn start_locks_now(&self) -> HashMap<String, folder::HostLock> {
        let o = &self.options;
        o.workspaces
            .iter()
            .filter(|w| w.container)
            .filter_map(|w| Some((w.id.clone(), start_lock_now(&o.po_home, &o.owner, &w.id)?)))
            .collect()
    }

    /// The guarded paths of the options' bind-mode workspaces resolved against their folders
    /// (a walk of each), off the async threads, from this call on.
    fn guards_ahead(&self) -> tokio::task::JoinHandle<HashMap<String, folder::GuardsResolved>> {
        let o = &self.options;
        let folders: Vec<(String, String)> = o
            .workspaces
            .iter()
            .filter(|w| w.container && w.mode.unwrap_or(o.workspace_mode) == WorkspaceMode::Bind)
            .map(|w| (w.id.clone(), w.path.clone()))
            .collect();
        let entries = o.guarded_paths.clone();
        tokio::task::spawn_blocking(move || {
            let resolve = |(id, path): (String, String)| {
                let ws = folder::resolve_workspace(&id, &path).ok()?;
                Some((id, folder::resolve_guards(&ws.path, &entries)))
            };
            folders.into_iter().filter_map(resolve).collect()
        })
    }

    /// Bind-mode workspaces: the person's `safe.bareRepository`, set with the opt-in, else the
    /// warning when it is open ([`crate::sandbox::folder::guards::git_safety`]). Without the
    /// opt-in the check (a read) runs from this call on, in the background; with it, the change
    /// is made only when the future is awaited (after the engine check).
    pub(super) fn git_safety(&self) -> impl Future<Output = Option<String>> + use<C> {
        let o = &self.options;
        let wanted = o.workspace_mode == WorkspaceMode::Bind || o.set_git_safe_bare;
        let (vars, opt_in) = (o.host.vars().clone(), o.set_git_safe_bare);
        let (home, owner) = (o.po_home.clone(), o.owner.clone());
        let check = move || folder::ensure_safe_bare(&vars, opt_in, &home, &owner);
        let read_now = (wanted && !opt_in).then(|| tokio::task::spawn_blocking(check.clone()));
        async move {
            let task = match read_now {
                Some(task) => task,
                None if wanted => tokio::task::spawn_blocking(check),
                None => return None,
            };
            task.await.ok().flatten()
        }
    }

    /// A new attempt: `starting`, and the workspaces a failed one never reached are pending.
    pub(super) fn begin_attempt(&self) {
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
    pub(super) async fn check_engine(&self) -> Result<(engine::EngineReport, C::Engine)> {
        let o = &self.options;
        let report = self.connector.detect(&o.host, &o.detect).await?;
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
        // On another machine, its containers are carried through the engine; the broker's
        // carrier ends in a Unix socket of this host's.
        if report.remote && !cfg!(unix) {
            return Err(Error::EngineUnavailable {
                reason: engine::remote_reason(&report),
                reason_code: Some("ENGINE_REMOTE".into()),
            });
        }
        self.update(|s| {
            s.engine = report.engine.clone();
            s.endpoint = report.endpoint.clone();
        });
        let engine = self
            .connector
            .connect(&o.host, &report, engine::call_timeout(&o.host)?)?;
        Ok((report, engine))
    }

    /// 2. Runtime bundle: located and valid.
    pub(super) fn check_runtime(&self) -> Result<runtime::RuntimeBundle> {
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

    /// 3. Image: there, or built now (`true`), on the base as the engine has it.
    ///
    /// Returns the recipe pinned to that base.
    pub(super) async fn ensure_image(
        &self,
        engine: &impl engine::EngineApi,
        pinned: Option<read_ahead::ReadAhead<image::ImageRecipe>>,
        report: &engine::EngineReport,
    ) -> Result<(bool, image::ImageRecipe)> {
        let ahead = match pinned {
            Some(read) => read.take(report).await,
            None => None,
        };
        let recipe = &ahead.unwrap_or_else(|| self.options.recipe.clone());
        self.update(|s| s.image = Some(recipe.tag()));
        let bounds = engine::bounds(&self.options.host)?;
        if self.options.pull_base {
            image::pull_base(engine, recipe, &self.events, &bounds).await?;
        }
        let (provenance, pinned) = image::ensure(engine, recipe, &self.events, &bounds).await?;
        self.update(|s| s.image = Some(pinned.tag()));
        Ok((provenance == image::Provenance::Built, pinned))
    }

    /// This owner's containers, when any workspace of the options wants one: what was read
    /// ahead on the endpoint the engine check chose, else one list now; `None` when none is
    /// wanted or the list failed (start-up lists again).
    pub(super) async fn prefetch_known(
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

    /// The broker's options for `transport`.
    fn broker_options(&self, transport: RouteKind) -> BrokerOptions {
        let o = &self.options;
        BrokerOptions {
            host_env: o.host.vars().clone(),
            socket_dir: o.broker_socket_dir.clone(),
            tcp: transport == RouteKind::Tcp,
            egress: o.egress_policy(),
            fetch_screen: o.network_mode != crate::sandbox::blueprint::NetworkMode::Open,
            git: Some(o.git_policy.0.clone()),
            // On every route: a remote engine's carrier carries the registry sockets too, and
            // the TCP route's port rules let the registry ports through.
            registries: crate::broker::registry::from_host(o.host.vars()),
        }
    }

    /// The credential broker, unless it is off: a socket per container on a native engine,
    /// loopback TCP reached as host.docker.internal on a VM engine; `warm`: its TLS roots load
    /// now, in the background.
    pub(super) async fn start_broker(
        &self,
        report: &engine::EngineReport,
        warm: bool,
    ) -> Result<Option<BrokerWiring>> {
        let o = &self.options;
        if !o.broker {
            return Ok(None);
        }
        // A container on another machine reaches the broker through the hub's carrier, which
        // ends in the workspace's socket here: the socket route, whatever was chosen.
        let transport = match report.remote {
            true => RouteKind::Socket,
            false => o.broker_route.route(o.host.os, report.vm),
        };
        let broker = Broker::start_warm(self.broker_options(transport), warm).await?;
        if !broker.enabled() {
            return Ok(None);
        }
        let events = self.events.clone();
        let home = o.po_home.clone();
        broker.on_egress(Arc::new(move |e: &EgressEvent| {
            // Denials are kept for `po-sandbox policy log`.
            if e.decision == crate::broker::egress::EgressDecision::Denied {
                let denial = crate::policy::denials::Denial {
                    at: crate::policy::denials::now(),
                    workspace: e.workspace.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    reason: e.reason.clone().unwrap_or_default(),
                };
                let home = home.clone();
                // Off the proxy's threads: a file append.
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => drop(
                        rt.spawn_blocking(move || crate::policy::denials::record(&home, &denial)),
                    ),
                    Err(_) => crate::policy::denials::record(&home, &denial),
                }
            }
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
        // Its egress proxy follows the policy file while it runs (a hub's, and a command's
        // such as `po-sandbox exec` that serves its container's grant).
        let policy = (o.network_policy.clone(), o.policy_file.clone());
        let home = o.po_home.clone();
        let git_pinned = match o.git_policy.1 {
            crate::policy::effective::Source::Variable(_) => Some(o.git_policy.0.hosts.clone()),
            _ => None,
        };
        let events = self.events.clone();
        crate::policy::watch::spawn(home, policy, git_pinned, broker.downgrade(), events);
        Ok(Some(BrokerWiring {
            broker,
            transport,
            socket_root: o.broker_socket_dir.clone(),
        }))
    }
}
