//! The lifecycle of one workspace's container: adopt the one that runs as the spec says,
//! replace one that drifted, create one otherwise (undoing every step when a later one fails).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::grants::write_token_file;
use super::rollback::Rollback;
use super::{Asked, ContainerService, ReadBefore, WorkspaceContainer, short_id};
use crate::engine::EngineError;
use crate::engine::api::EngineApi;
use crate::error::{Error, Result};
use crate::events::WorkspaceChange;
use crate::lock::Locked;
use crate::sandbox::blueprint::spec::{self, ContainerSpec, LABEL_WORKSPACE_PATH};
use crate::sandbox::folder::clone::{self, WorkspaceMode};
use crate::sandbox::folder::guards;
use crate::sandbox::folder::locks::HostLock;
use crate::sandbox::folder::workspace::{self, Workspace};
use crate::sandbox::on_engine::container::{self, Created, LiveContainer};
use crate::sandbox::on_engine::exec;
use crate::sandbox::on_engine::fill;

impl<E: EngineApi> ContainerService<E> {
    /// Adopts or creates the workspace's container and waits until its server answers.
    /// Concurrent calls for one workspace share one operation.
    pub async fn start(&self, ws: Workspace) -> Result<WorkspaceContainer> {
        self.start_with(ws, ReadBefore::default()).await
    }

    /// As [`start`](Self::start), with what a hub's start-up read before it (see
    /// [`ReadBefore`]): the ids of its containers (one list call serves a whole hub start),
    /// the health ask of its one container's server (awaited after the inspect; see
    /// [`super::Asked`]) and its resolved guards.
    pub async fn start_with(&self, ws: Workspace, read: ReadBefore) -> Result<WorkspaceContainer> {
        let key = ws.id.clone();
        let this = self.clone();
        let start = move || async move {
            let id = ws.id.clone();
            let result = this.start_uncached(ws, read).await;
            if let Err(e) = &result {
                this.inner.events.workspace(
                    &id,
                    WorkspaceChange::Failed,
                    None,
                    Some(e.to_string()),
                );
            }
            result.map_err(Arc::new)
        };
        let outcome = self.inner.inflight.run(key, start).await;
        outcome.map_err(Error::from_shared)
    }

    async fn start_uncached(&self, ws: Workspace, read: ReadBefore) -> Result<WorkspaceContainer> {
        let events = &self.inner.events;
        events.workspace(&ws.id, WorkspaceChange::Starting, None, None);
        // Processes of one hub on this host take turns per workspace, so a second one adopts
        // what the first made instead of racing it (the container name still arbitrates
        // between hosts).
        let c = &self.inner.config.container;
        // A folder that would expose the host, and a tmpfs run flag over this workspace's own
        // mounts, are refused before anything is made.
        self.claim_folder(&ws)?;
        let ReadBefore {
            ids,
            asked,
            guards,
            lock,
        } = read;
        let spec = self.spec_of(&ws, &BTreeMap::new(), guards);
        spec.check_run_flags()?;
        let (_lock, held_before) = match lock {
            Some(lock) => (lock, true),
            None => {
                let path = start_lock_path(&c.po_home, &c.owner, &ws.id);
                (self.start_lock(&ws.id, &path).await?, false)
            }
        };
        // What was read ahead holds only when this start held its lock since before the read.
        let asked = asked.filter(|_| held_before);
        let ids = match ids {
            Some(ids) => ids,
            None => self.ids_of(&ws.id).await?,
        };
        let mut replaced_reason = None;
        for cid in ids {
            let Some(live) = self.inspect_or_read(&cid, asked.as_ref()).await? else {
                continue;
            };
            if !live.running() {
                // A stopped leftover: it would block the deterministic name.
                self.stop_and_remove(&live.id, &ws.id).await?;
                events.workspace(
                    &ws.id,
                    WorkspaceChange::Removed,
                    Some(&live.id),
                    Some(format!("a leftover container was {}", live.state)),
                );
                continue;
            }
            match spec::check_posture(&spec, &live.posture) {
                Ok(()) => {
                    // A carried container's published port is another machine's: asked here it
                    // says nothing of it.
                    let answered = match asked {
                        Some(asked) if !self.carried() => asked.answered_on(live.host_port).await,
                        _ => false,
                    };
                    self.adopted_baseline(&ws).await;
                    return self.adopt_live(&ws.id, &spec, live, None, answered).await;
                }
                Err(reason) => {
                    let reason =
                        format!("container {} was not adopted: {reason}", short_id(&live.id));
                    events.workspace(
                        &ws.id,
                        WorkspaceChange::Replaced,
                        Some(&live.id),
                        Some(reason.clone()),
                    );
                    self.stop_and_remove(&live.id, &ws.id).await?;
                    replaced_reason = Some(reason);
                }
            }
        }
        self.create(&ws, &spec, replaced_reason).await
    }

    /// Refuses a folder that would expose the host ([`workspace::check_fences`]) or overlaps
    /// another workspace of this hub; otherwise records it as this workspace's.
    fn claim_folder(&self, ws: &Workspace) -> Result<()> {
        let c = &self.inner.config;
        let socket_root = c.broker.as_ref().map(|w| w.socket_root.as_path());
        let fences =
            workspace::Fences::of(&c.container.host_env, &c.container.po_home, socket_root);
        let mut folders = self.inner.folders.locked();
        workspace::check_fences(ws, &fences, &folders)?;
        folders.insert(ws.id.clone(), ws.path.clone());
        Ok(())
    }

    /// The container `cid` as `asked` read it ahead (when it is that container's and the read
    /// succeeded), else inspected now.
    async fn inspect_or_read(
        &self,
        cid: &str,
        asked: Option<&Asked>,
    ) -> Result<Option<LiveContainer>> {
        let read = match asked {
            Some(a) if a.container() == cid => a.inspected().await,
            _ => None,
        };
        match read {
            Some(live) => Ok(Some(live)),
            None => self.inspect_ws(cid).await,
        }
    }

    /// Forgets a stopped workspace's folder: another workspace may use it now.
    pub(super) fn release_folder(&self, id: &str) {
        self.inner.folders.locked().remove(id);
    }

    /// Takes the workspace's start lock, waiting for another holder.
    async fn start_lock(&self, id: &str, lock_path: &Path) -> Result<HostLock> {
        if let Ok(Some(lock)) = HostLock::try_acquire(lock_path) {
            return Ok(lock);
        }
        let wait = self.inner.config.health_timeout + Duration::from_secs(120);
        let lock = HostLock::acquire(lock_path, wait).await.map_err(|e| {
            let doing = format!("cannot take the start lock {}", lock_path.display());
            Error::container_caused(id, doing, e)
        })?;
        Ok(lock)
    }

    /// Adopts a running container whose posture matched: its broker grant restored, then its
    /// server's answer awaited, unless `answered` (it answered just now on its current port, or
    /// an exec that does not need it adopts it).
    async fn adopt_live(
        &self,
        id: &str,
        spec: &ContainerSpec,
        live: LiveContainer,
        replaced: Option<String>,
        answered: bool,
    ) -> Result<WorkspaceContainer> {
        // The adopted container keeps the tokens it was made with: re-derive them.
        if let Err(e) = self.grant_for(id) {
            self.inner.events.workspace(
                id,
                WorkspaceChange::Adopted,
                Some(&live.id),
                Some(format!("its broker grant could not be restored: {e}")),
            );
        }
        self.ensure_rules(id, &live).await?;
        if self.carried() {
            // An exec needs the broker's carrier, not the server's URL.
            self.carry(id, &live.id, !answered).await?;
        }
        if !answered {
            self.wait_ready(id, spec, &live).await?;
        }
        self.inner
            .events
            .workspace(id, WorkspaceChange::Adopted, Some(&live.id), None);
        Ok(self.report(&live, true, replaced))
    }

    /// Waits until the container's server answers; `CONTAINER_UNHEALTHY` (with its logs) when it does not.
    async fn wait_ready(&self, id: &str, spec: &ContainerSpec, live: &LiveContainer) -> Result<()> {
        let c = &self.inner.config;
        let port = self.server_port(id, live);
        let Some(port) = port else {
            return Err(Error::container(
                id,
                format!("container {} publishes no host port", live.name),
            ));
        };
        if let Err(why) = container::wait_healthy(
            &self.inner.engine,
            &live.id,
            port,
            &c.container.bundle.server.health_path,
            c.health_timeout,
        )
        .await
        {
            let logs = container::logs_tail(&self.inner.engine, &live.id, 30).await;
            tracing::debug!(workspace = id, %why, "container unhealthy");
            return Err(Error::ContainerUnhealthy {
                workspace: id.into(),
                url: format!(
                    "http://127.0.0.1:{port}{}",
                    c.container.bundle.server.health_path
                ),
                waited_ms: c.health_timeout.as_millis() as u64,
                logs: format!("({why})\n{logs}"),
            });
        }
        let _ = spec;
        Ok(())
    }

    /// Creates, starts and waits for a new container; every step made is undone when one fails.
    async fn create(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
        replaced_reason: Option<String>,
    ) -> Result<WorkspaceContainer> {
        self.check_carried_mode(ws)?;
        self.prepare_sandbox_dir(ws)?;
        // A copy volume that exists holds the agent's work: it is never filled again.
        let copy = self.prepare_copy(ws, spec).await?;
        // Before the volumes are made: whether the bundle's is new, to be filled.
        let bundle_new = self.carried() && self.bundle_is_new(spec).await?;
        let mut made = Rollback::new(self, &ws.id);
        // Undone with the rest (from here on): an empty copy kept would never be filled.
        made.copy_volume = copy.as_ref().map(|(name, _)| name.clone());
        made.bundle_volume = bundle_new
            .then(|| crate::sandbox::on_engine::carried::volume(spec, spec::CARRIED_BUNDLE))
            .flatten()
            .map(|v| v.name.clone());
        let copy = copy.map(|(_, c)| c);
        let result = match container::ensure_volumes(&self.changes(), spec).await {
            Ok(()) => {
                let parts = (copy, bundle_new);
                self.create_steps(ws, spec, replaced_reason, parts, &mut made)
                    .await
            }
            Err(e) => Err(e),
        };
        if result.is_err() {
            made.undo().await;
        }
        result
    }

    /// In clone mode, when the copy volume is new: the copy of the host folder, prepared on
    /// the host, with the volume's name; `None` otherwise.
    async fn prepare_copy(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
    ) -> Result<Option<(String, clone::PreparedCopy)>> {
        let Some(volume) = spec.copy_volume() else {
            return Ok(None);
        };
        let c = &self.inner.config.container;
        if fill::copy_exists(&self.inner.engine, &c.owner, &ws.id, &volume.name).await? {
            return Ok(None);
        }
        let copy = fill::prepare_copy(&ws.id, ws.path.clone(), c.user).await?;
        Ok(Some((volume.name.clone(), copy)))
    }

    /// P exists and holds no stale lock files (carried: P is in a volume, and nothing of the
    /// host's is prepared).
    fn prepare_sandbox_dir(&self, ws: &Workspace) -> Result<()> {
        if self.carried() {
            return Ok(());
        }
        let p = workspace::sandbox_dir(&self.inner.config.container.po_home, &ws.id);
        std::fs::create_dir_all(&p).map_err(|e| {
            Error::container_caused(
                &ws.id,
                format_args!("cannot create its sandbox folder {}", p.display()),
                e,
            )
        })?;
        let removed = crate::sandbox::folder::locks::remove_stale_locks(&p).map_err(|e| {
            Error::container_caused(
                &ws.id,
                format_args!("cannot clear stale locks in {}", p.display()),
                e,
            )
        })?;
        if !removed.is_empty() {
            tracing::debug!(workspace = %ws.id, count = removed.len(), "stale locks removed");
        }
        if self.is_clone(ws) {
            // Nothing is written into the host folder: it is copied, not mounted.
            return Ok(());
        }
        let c = &self.inner.config.container;
        // Before anything is made in the folder: a case-insensitive one is refused (the guards
        // would hold for one case only).
        guards::case::check_bind(&ws.path, &c.host_env)?;
        let guards = guards::resolve(&ws.path, &c.guarded_paths);
        let copies = spec::guard_copies(&c.po_home, &c.owner, &ws.id);
        let made = guards::prepare(&ws.id, &ws.path, &guards, &copies)?;
        guards::write_copies(&ws.id, &ws.path, &guards, &copies)?;
        if !made.is_empty() {
            tracing::info!(workspace = %ws.id, placeholders = ?made, "guarded paths given empty placeholders");
        }
        Ok(())
    }

    /// Token file, broker grant, container (or the winner of a name race, adopted), start,
    /// health; each thing made is recorded in `made` so a failure undoes it.
    async fn create_steps(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
        replaced_reason: Option<String>,
        (copy, bundle_new): (Option<clone::PreparedCopy>, bool),
        made: &mut Rollback<'_, E>,
    ) -> Result<WorkspaceContainer> {
        // Before the container starts: nothing its agent writes is in the baseline.
        made.baseline = self
            .ensure_baseline(ws)
            .await
            .map_err(|e| Error::container_caused(&ws.id, "cannot take its review baseline", e))?;
        let c = &self.inner.config.container;
        let token = spec::token_file(&c.po_home, &c.owner, &ws.id);
        // A fresh token per container; written before create so the mount source exists.
        write_token_file(&token).map_err(|e| {
            Error::container_caused(
                &ws.id,
                format_args!("cannot write its token file {}", token.display()),
                e,
            )
        })?;
        made.token = Some(token);
        made.granted = true;
        if self.carried() {
            // The fresh token, P and the bundle into their volumes, before the container is.
            self.fill_carried(ws, spec, bundle_new).await?;
        }
        let granted_spec = match self.grant_for(&ws.id)? {
            Some(g) => {
                let env: BTreeMap<String, String> = g
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_string()))
                    .collect();
                Some(self.spec_with(ws, &env))
            }
            None => None,
        };
        let spec = granted_spec.as_ref().unwrap_or(spec);
        let id = match self.create_or_adopt(ws, spec).await? {
            Creation::New(id) => id,
            Creation::Adopt(live) => {
                made.disarm();
                return self
                    .adopt_live(&ws.id, spec, *live, replaced_reason, false)
                    .await;
            }
        };
        made.container = Some(id.clone());
        if let (Some(copy), Some(target)) = (copy, spec.copy_volume()) {
            // Into the created container, before it starts: the engine writes the volume.
            let engine = self.changes();
            fill::upload_copy(&engine, &ws.id, &id, &target.target, &copy).await?;
            fill::record_copy(&c.po_home, &c.owner, &ws.id, &copy)?;
        }
        self.start_and_wait(ws, spec, &id, replaced_reason).await
    }

    /// Creates the container; when another process holds its name, waits for that one to
    /// start and hands it back for adoption when it satisfies the spec, or removes it (a
    /// leftover, or drifted) and tries again, at most three times.
    async fn create_or_adopt(&self, ws: &Workspace, spec: &ContainerSpec) -> Result<Creation> {
        let network_gone = || {
            Error::container(
                &ws.id,
                format!(
                    "its network {} was removed while the container was made; start it again",
                    spec.network
                ),
            )
        };
        for _ in 0..2 {
            match self.create_on_network(spec).await? {
                Created::New(id) => return Ok(Creation::New(id)),
                Created::NameTaken => {
                    if let Some(live) = self.settle_name_holder(ws, spec).await? {
                        return Ok(Creation::Adopt(Box::new(live)));
                    }
                }
                Created::NetworkGone => return Err(network_gone()),
            }
        }
        match self.create_on_network(spec).await? {
            Created::New(id) => Ok(Creation::New(id)),
            Created::NetworkGone => Err(network_gone()),
            Created::NameTaken => Err(Error::container(
                &ws.id,
                format!(
                    "the name {} stays taken by another container; remove it (docker rm -f {})",
                    spec.name, spec.name
                ),
            )),
        }
    }

    /// Another process created the container first. Gives it time to start, then returns it
    /// when it runs as it should; removes it when it is a leftover or drifted (`None`).
    async fn settle_name_holder(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
    ) -> Result<Option<LiveContainer>> {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let (holder, why) = match self.inspect_ws(&spec.name).await? {
                None => return Ok(None),
                Some(live) if live.running() => match spec::check_posture(spec, &live.posture) {
                    Ok(()) => return Ok(Some(live)),
                    Err(drift) => (live, format!("was not adopted: {drift}")),
                },
                Some(live) if live.state == "created" && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                Some(live) => {
                    let why = format!("was {}", live.state);
                    (live, why)
                }
            };
            self.remove_name_holder(&ws.id, spec, &holder, &why).await?;
            return Ok(None);
        }
    }

    /// Starts a created container. The engine resolves its network by name at start: while
    /// two hubs race to make the network a duplicate can exist for a moment ("ambiguous"), so
    /// the start is tried again (a few times) while the hub that made the duplicate removes it.
    async fn start_container(&self, id: &str) -> Result<()> {
        let mut tries = 0;
        loop {
            match container::start(&self.changes(), id).await {
                Err(e)
                    if tries < 5
                        && matches!(e.engine_fault(), Some(EngineError::NetworkAmbiguous(_))) =>
                {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100 * tries)).await;
                    self.network(true).await?;
                }
                other => return other,
            }
        }
    }

    /// Starts the created container, says so, and waits until its server answers.
    async fn start_and_wait(
        &self,
        ws: &Workspace,
        spec: &ContainerSpec,
        id: &str,
        replaced_reason: Option<String>,
    ) -> Result<WorkspaceContainer> {
        self.start_container(id).await.map_err(|e| match e {
            e @ Error::EngineTimeout { .. } => e,
            e => Error::container(&ws.id, e.to_string()),
        })?;
        let live = self
            .inspect_ws(id)
            .await?
            .ok_or_else(|| Error::container(&ws.id, "it vanished right after it started"))?;
        self.inner.events.workspace(
            &ws.id,
            WorkspaceChange::Created,
            Some(id),
            replaced_reason.clone(),
        );
        if self.carried() {
            // Its server's port here and the broker's sockets there, before it is awaited.
            self.carry(&ws.id, id, true).await?;
        }
        // Unhealthy: the error carries its logs, and the rollback removes it.
        self.wait_ready(&ws.id, spec, &live).await?;
        // It answers: a failed re-read (for the port) keeps the first one rather than undo it.
        let live = match self.inspect_ws(id).await {
            Ok(Some(newer)) => newer,
            _ => live,
        };
        self.inner
            .events
            .workspace(&ws.id, WorkspaceChange::Ready, Some(id), None);
        Ok(self.report(&live, false, replaced_reason))
    }

    /// Removes a container that holds the workspace's deterministic name without being one to
    /// adopt, with a `removed` event saying why.
    async fn remove_name_holder(
        &self,
        workspace_id: &str,
        spec: &ContainerSpec,
        live: &LiveContainer,
        why: &str,
    ) -> Result<()> {
        self.stop_and_remove(&live.id, workspace_id).await?;
        let reason = format!(
            "container {} held the name {} and {why}",
            short_id(&live.id),
            spec.name
        );
        self.inner.events.workspace(
            workspace_id,
            WorkspaceChange::Removed,
            Some(&live.id),
            Some(reason),
        );
        Ok(())
    }

    /// Adopts the workspace's running container when it still satisfies the spec's security
    /// posture; `None` when there is none. One that drifted is stopped and removed (with an
    /// event saying why) and `None` returned. Never creates.
    pub async fn adopt(&self, id: &str, path: Option<&str>) -> Result<Option<WorkspaceContainer>> {
        workspace::check_id(id)?;
        let ids = self.ids_of(id).await?;
        for cid in ids {
            let Some(live) = self.inspect_ws(&cid).await? else {
                continue;
            };
            if !live.running() {
                continue;
            }
            let ws_path = path
                .map(str::to_string)
                .or_else(|| live.labels.get(LABEL_WORKSPACE_PATH).cloned())
                .unwrap_or_default();
            let mut ws = workspace::resolve(id, &ws_path)?;
            // Adopting never creates: it is checked against the mode it was made in.
            ws.mode = Some(WorkspaceMode::of_labels(&live.labels));
            self.claim_folder(&ws)?;
            let spec = self.spec_for(&ws);
            match spec::check_posture(&spec, &live.posture) {
                Ok(()) => {
                    self.adopted_baseline(&ws).await;
                    return self
                        .adopt_live(id, &spec, live, None, false)
                        .await
                        .map(Some);
                }
                Err(reason) => {
                    self.stop_and_remove(&live.id, id).await?;
                    // As a stop: its token file and broker grant go with it.
                    self.forget_token(id);
                    self.inner.events.workspace(
                        id,
                        WorkspaceChange::Removed,
                        Some(&live.id),
                        Some(format!("not adopted: {reason}")),
                    );
                }
            }
        }
        // Nothing of this workspace runs here: its folder is free again.
        self.release_folder(id);
        Ok(None)
    }

    /// Runs a command in the workspace's running container, attached to this process's standard
    /// streams, in the workspace folder, as the container's user, with its environment. The
    /// container is adopted first (posture checked, its broker grant served by this process
    /// while the command runs). `SANDBOX_NOT_RUNNING` when it has none. Resolves with the exit
    /// code.
    pub async fn exec(
        &self,
        id: &str,
        path: Option<&str>,
        command: Vec<String>,
        tty: bool,
    ) -> Result<i64> {
        workspace::check_id(id)?;
        exec::check_command(&command)?;
        let not_running = || Error::SandboxNotRunning {
            workspace: id.to_string(),
            folder: path.unwrap_or("<folder>").to_string(),
        };
        let container = self.adopt(id, path).await?.ok_or_else(not_running)?;
        // Its health as it is now (adoption does not keep it): whether its start passed the gate.
        let health = container::inspect(&self.inner.engine, &container.container_id, None)
            .await?
            .and_then(|live| live.health);
        self.exec_adopted(&container, health.as_deref(), command, tty)
            .await
    }

    /// Runs a command in a container this service adopted (see [`exec`](Self::exec)) whose
    /// health the engine gives as `health`: as it is in a healthy one, else behind the
    /// network rules' gate (`spec::exec_gated`), so it never runs in a namespace whose rules
    /// its own start has not seen.
    pub async fn exec_adopted(
        &self,
        container: &WorkspaceContainer,
        health: Option<&str>,
        command: Vec<String>,
        tty: bool,
    ) -> Result<i64> {
        let id = &container.workspace_id;
        let working_dir = container.container_path.clone().ok_or_else(|| {
            Error::container(id, "its container does not say which folder it serves")
        })?;
        let interpreter = self.inner.config.container.bundle.interpreter();
        if health != Some("healthy") {
            tracing::debug!(workspace = %id, ?health, "exec behind the network rules' gate");
        }
        let env = self.current_route_env(id);
        let command = spec::exec_route_command(&env, command);
        let request = exec::ExecRequest {
            command,
            tty,
            working_dir,
            env,
        };
        let target = (container.container_id.as_str(), id.as_str());
        let place = self.spawner_place(id);
        let engine = &self.inner.engine;
        exec::run_or_spawn(
            engine,
            target,
            request,
            (health, interpreter),
            place.as_ref(),
        )
        .await
    }

    /// Runs `command` in a container this service adopted, in its workspace folder, as its
    /// user, with no stdin, and keeps what it writes (what `diff` and `apply` use).
    pub async fn capture_adopted(
        &self,
        container: &WorkspaceContainer,
        command: Vec<String>,
        deadline: exec::Deadline,
    ) -> Result<exec::Captured> {
        let id = &container.workspace_id;
        let working_dir = container.container_path.clone().ok_or_else(|| {
            Error::container(id, "its container does not say which folder it serves")
        })?;
        let engine = &self.inner.engine;
        let target = (container.container_id.as_str(), id.as_str());
        exec::capture(engine, target, command, working_dir, deadline).await
    }

    /// Adopts `live`, read before this call by its deterministic name, when it is this
    /// workspace's running container (owner, workspace and folder labels) and satisfies the
    /// posture, as [`adopt`](Self::adopt) would; `None` for anything else, which the caller
    /// hands to `adopt` or `start` (they list by labels, remove drift and leftovers). For an
    /// `exec` (`for_exec`) the server's answer is not awaited: the command does not need it.
    pub async fn adopt_read(
        &self,
        ws: &Workspace,
        live: LiveContainer,
        for_exec: bool,
    ) -> Result<Option<WorkspaceContainer>> {
        if !live.running() || !is_workspace_container(&live.labels, self.owner(), ws) {
            return Ok(None);
        }
        // An exec runs in what runs, in the mode it was made in; `up` asks for its mode.
        let mut ws = ws.clone();
        if for_exec && ws.mode.is_none() {
            ws.mode = Some(WorkspaceMode::of_labels(&live.labels));
        }
        let ws = &ws;
        self.claim_folder(ws)?;
        let spec = self.spec_for(ws);
        if let Err(drift) = spec::check_posture(&spec, &live.posture) {
            tracing::debug!(workspace = %ws.id, %drift, "read container not adopted as is");
            return Ok(None);
        }
        self.adopted_baseline(ws).await;
        let adopted = self.adopt_live(&ws.id, &spec, live, None, for_exec).await?;
        Ok(Some(adopted))
    }
}

/// Where a workspace's start lock is: beside its token file.
fn start_lock_path(po_home: &Path, owner: &str, id: &str) -> PathBuf {
    spec::token_file(po_home, owner, id).with_extension("lock")
}

/// The workspace's start lock when its file is there (a start made it; a stop removes it) and
/// it is free now; `None` otherwise (nothing is written: the engine may not even answer). A hub
/// start takes its workspaces' while it lists their containers and reads ahead only of those it
/// took, so what it reads holds for them (see [`ReadBefore`]).
pub fn start_lock_now(po_home: &Path, owner: &str, id: &str) -> Option<HostLock> {
    workspace::check_id(id).ok()?;
    let path = start_lock_path(po_home, owner, id);
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    HostLock::try_acquire(&path).ok().flatten()
}

/// The labels say the container is `ws`'s (its id and its folder) and `owner`'s.
pub(crate) fn is_workspace_container(
    labels: &std::collections::HashMap<String, String>,
    owner: &str,
    ws: &Workspace,
) -> bool {
    let label = |k: &str| labels.get(k).map(String::as_str);
    label(spec::LABEL_OWNER) == Some(owner)
        && label(spec::LABEL_WORKSPACE) == Some(ws.id.as_str())
        && label(LABEL_WORKSPACE_PATH).map(Path::new) == Some(ws.path.as_path())
}

/// What `create_or_adopt` ended with.
enum Creation {
    /// A container this call created (not started yet).
    New(String),
    /// Another process's container that satisfies the spec.
    Adopt(Box<LiveContainer>),
}
