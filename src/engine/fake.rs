//! An in-memory container engine for unit tests: containers, networks and volumes in one
//! `Mutex<State>`, answering as the engine does (409 on a name clash, 404 after removal,
//! `NetworkMode: container:<id>` joining a running container), with events, and told to fail
//! or hang one named call.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::models::{EndpointResource, EventMessageTypeEnum, Ipam};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use super::api::{BuildOptions, EngineApi, Filters};
use super::fault::{EngineError, EngineResult};
use super::model::{
    BuildInfo, ContainerCreateBody, ContainerInspectResponse, ContainerSummary, EventActor,
    EventMessage, ExecConfig, ExecInspectResponse, ExecStarted, IpamConfig, Network,
    NetworkCreateRequest, NetworkInspect, StartExecOptions, VolumeCreateRequest,
};
use crate::lock::Locked;

mod answers;
mod connector;
use answers::{inspect_of, summary_of};
pub(crate) use connector::FakeConnector;

/// What a faulty call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Answers with this HTTP status.
    Fail(u16),
    /// Answers with this HTTP status and the engine's own message.
    FailSaying(u16, &'static str),
    /// Never answers: the client's bound fires (`RequestTimeoutError`).
    Hang,
}

/// One container as the fake keeps it.
#[derive(Debug, Clone)]
pub(crate) struct FakeContainer {
    /// Its id (64 hex-ish characters).
    pub id: String,
    /// Its name, without the leading `/`.
    pub name: String,
    /// What it was created with (inspect answers from it, as the engine does).
    pub body: ContainerCreateBody,
    /// `created`, `running`, `exited`.
    pub status: &'static str,
    pub started_at: String,
    /// The exit code a wait reports once it ran.
    pub exit_code: i64,
    /// Why its last start failed (`State.Error`); empty when it did not.
    pub error: String,
}

/// A look at every call as it is made (`call subject`), under the state's lock.
pub(crate) type CallHook = Box<dyn Fn(&str) + Send>;

/// Everything the fake engine holds.
#[derive(Default)]
pub(crate) struct State {
    /// Containers by id.
    pub containers: BTreeMap<String, FakeContainer>,
    /// Networks by id.
    pub networks: BTreeMap<String, Network>,
    /// Volumes by name, with their labels.
    pub volumes: BTreeMap<String, HashMap<String, String>>,
    /// Image tags, as built.
    pub images: Vec<String>,
    /// The ID of an image tag, where a test gave one (else derived from the tag).
    pub image_ids: HashMap<String, String>,
    /// The images a pull finds in their registry: reference, ID.
    pub registry: HashMap<String, String>,
    /// The labels of the images built, by tag.
    pub image_labels: HashMap<String, HashMap<String, String>>,
    /// Archives uploaded: container id, path, the tar file (gone once the upload returned).
    pub uploads: Vec<(String, String, PathBuf)>,
    /// Calls made, as `call subject`, in order.
    pub calls: Vec<String>,
    /// Faults by call: the subject (a container's name or id, a network's name…) must contain
    /// the pattern; `remaining` counts down (`None`: always).
    faults: Vec<(String, String, Fault, Option<u32>)>,
    /// The host port published for a container's first port binding (a test's server).
    pub host_port: u16,
    /// The exit code of a started container whose name has this prefix, when waited for.
    pub exit_codes: Vec<(String, i64)>,
    /// Called with every call (`call subject`) as it is made, under the state's lock.
    pub on_call: Option<CallHook>,
    /// Subscribers to the event stream.
    subscribers: Vec<tokio::sync::mpsc::UnboundedSender<EventMessage>>,
    /// The last id handed out.
    next: u64,
    /// A clock for `StartedAt` and `Created`: every reading is later than the one before.
    clock: u64,
}

/// The in-memory engine. Cheap to clone (one shared state).
#[derive(Clone)]
pub(crate) struct FakeEngine {
    state: Arc<Mutex<State>>,
    timeout: Duration,
}

impl Default for FakeEngine {
    fn default() -> Self {
        FakeEngine {
            state: Arc::default(),
            timeout: Duration::from_millis(200),
        }
    }
}

/// An engine answer with an HTTP status.
fn status(code: u16, message: impl Into<String>) -> EngineError {
    EngineError::answered(code, message)
}

impl FakeEngine {
    /// The state, to look at or change.
    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Makes every `call` whose subject contains `pattern` answer with `fault`, `times` times
    /// (`None`: always).
    pub fn fault(&self, call: &str, pattern: &str, fault: Fault, times: Option<u32>) {
        self.state()
            .faults
            .push((call.into(), pattern.into(), fault, times));
    }

    /// Takes every fault away: each call answers again.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// How many calls `call` were made.
    pub fn count(&self, call: &str) -> usize {
        let s = self.state();
        s.calls
            .iter()
            .filter(|c| c.split(' ').next() == Some(call))
            .count()
    }

    /// Sends an event about a container, as the engine would.
    pub fn emit(&self, action: &str, id: &str) {
        let mut s = self.state();
        if let Some(msg) = s.event(action, id) {
            s.send(msg);
        }
    }

    /// Records the call and answers its fault, if any.
    async fn enter(&self, call: &str, subject: &str) -> EngineResult<()> {
        let fault = {
            let mut s = self.state();
            let subject = s.subject_of(subject);
            let line = format!("{call} {subject}");
            if let Some(hook) = &s.on_call {
                hook(&line);
            }
            s.calls.push(line);
            s.fault_for(call, &subject)
        };
        match fault {
            None => Ok(()),
            Some(Fault::Fail(code)) => Err(status(code, format!("{call} failed (fake)"))),
            Some(Fault::FailSaying(code, message)) => Err(status(code, message.to_string())),
            Some(Fault::Hang) => {
                tokio::time::sleep(self.timeout).await;
                Err(EngineError::Timeout)
            }
        }
    }
}

impl State {
    /// A container's name for its id (what faults match), else the subject itself.
    fn subject_of(&self, subject: &str) -> String {
        match self.find(subject) {
            Some(c) => c.name.clone(),
            None => subject.to_string(),
        }
    }

    /// The fault set for this call on this subject, counted down.
    fn fault_for(&mut self, call: &str, subject: &str) -> Option<Fault> {
        let i = self
            .faults
            .iter()
            .position(|(c, p, _, n)| c == call && subject.contains(p.as_str()) && *n != Some(0))?;
        let (_, _, fault, remaining) = &mut self.faults[i];
        if let Some(n) = remaining {
            *n -= 1;
        }
        Some(*fault)
    }

    /// A fresh id with a prefix (`c` containers, `n` networks).
    fn id(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{:060x}", self.next)
    }

    /// The next reading of the fake clock, as RFC 3339.
    fn now(&mut self) -> String {
        self.clock += 1;
        format!(
            "2026-01-01T00:00:{:02}.{:09}Z",
            self.clock / 1000 % 60,
            self.clock
        )
    }

    /// A container by id, name or id prefix (12 characters at least).
    pub fn find(&self, id_or_name: &str) -> Option<&FakeContainer> {
        self.containers
            .get(id_or_name)
            .or_else(|| self.containers.values().find(|c| c.name == id_or_name))
            .or_else(|| {
                (id_or_name.len() >= 12)
                    .then(|| {
                        self.containers
                            .values()
                            .find(|c| c.id.starts_with(id_or_name))
                    })
                    .flatten()
            })
    }

    /// A container's id, or 404.
    fn find_id(&self, id_or_name: &str) -> EngineResult<String> {
        self.find(id_or_name)
            .map(|c| c.id.clone())
            .ok_or_else(|| status(404, format!("No such container: {id_or_name}")))
    }

    /// A network's id by id or name.
    fn network_id(&self, id_or_name: &str) -> Option<String> {
        self.networks
            .iter()
            .find(|(id, n)| *id == id_or_name || n.name.as_deref() == Some(id_or_name))
            .map(|(id, _)| id.clone())
    }

    /// The engine event of an action on a container, with its labels as attributes.
    fn event(&self, action: &str, id: &str) -> Option<EventMessage> {
        let c = self.find(id)?;
        let mut attributes = c.body.labels.clone().unwrap_or_default();
        attributes.insert("name".into(), c.name.clone());
        Some(EventMessage {
            typ: Some(EventMessageTypeEnum::CONTAINER),
            action: Some(action.into()),
            actor: Some(EventActor {
                id: Some(c.id.clone()),
                attributes: Some(attributes),
            }),
            ..Default::default()
        })
    }

    /// Sends an event to every live subscriber.
    fn send(&mut self, msg: EventMessage) {
        self.subscribers.retain(|s| s.send(msg.clone()).is_ok());
    }

    /// Sends the event of an action on a container.
    fn emit(&mut self, action: &str, id: &str) {
        if let Some(msg) = self.event(action, id) {
            self.send(msg);
        }
    }

    /// A container's network mode (`container:<id>` when it joined another).
    pub fn network_mode_of(c: &FakeContainer) -> String {
        c.body
            .host_config
            .as_ref()
            .and_then(|h| h.network_mode.clone())
            .unwrap_or_default()
    }

    /// Starts a container: 304 when it runs, 409 when the container it joins does not run, 404 when its network is gone.
    pub fn start(&mut self, id: &str) -> EngineResult<()> {
        let id = self.find_id(id)?;
        let c = &self.containers[&id];
        if c.status == "running" {
            return Err(status(304, "container already started"));
        }
        let mode = Self::network_mode_of(c);
        if let Some(joined) = mode.strip_prefix("container:") {
            match self.find(joined) {
                Some(h) if h.status == "running" => {}
                Some(_) => {
                    return Err(
                        self.failed_start(&id, "cannot join network of a non running container")
                    );
                }
                None => return Err(status(404, format!("No such container: {joined}"))),
            }
        } else if !mode.is_empty() && self.network_id(&mode).is_none() {
            return Err(status(404, format!("network {mode} not found")));
        }
        let at = self.now();
        let exit = self
            .exit_codes
            .iter()
            .find(|(p, _)| self.containers[&id].name.starts_with(p.as_str()))
            .map_or(0, |(_, code)| *code);
        let c = self.containers.get_mut(&id).expect("found above");
        c.status = "running";
        c.started_at = at;
        c.exit_code = exit;
        c.error.clear();
        self.emit("start", &id);
        Ok(())
    }

    /// A start that failed with 409 `why`, recorded as the container's `State.Error`.
    fn failed_start(&mut self, id: &str, why: &str) -> EngineError {
        self.containers.get_mut(id).expect("found above").error = why.into();
        status(409, why)
    }

    /// Stops a running container (304 otherwise), with its `die` and `stop` events.
    pub fn stop(&mut self, id: &str) -> EngineResult<()> {
        let id = self.find_id(id)?;
        let c = self.containers.get_mut(&id).expect("found");
        if c.status != "running" {
            return Err(status(304, "container already stopped"));
        }
        c.status = "exited";
        self.emit("die", &id);
        self.emit("stop", &id);
        Ok(())
    }

    /// Removes a container (409 while it runs, unless forced), with its `destroy` event.
    pub fn remove(&mut self, id: &str, force: bool) -> EngineResult<()> {
        let id = self.find_id(id)?;
        if self.containers[&id].status == "running" {
            if !force {
                return Err(status(409, "cannot remove a running container"));
            }
            self.emit("die", &id);
        }
        self.emit("destroy", &id);
        self.containers.remove(&id);
        Ok(())
    }

    /// Creates a container: 409 on a name clash, 404 when its network is gone.
    pub fn create(
        &mut self,
        name: Option<&str>,
        body: ContainerCreateBody,
    ) -> EngineResult<String> {
        if let Some(n) = name
            && self.containers.values().any(|c| c.name == n)
        {
            return Err(status(
                409,
                format!("Conflict. The container name \"/{n}\" is already in use"),
            ));
        }
        let mode = body
            .host_config
            .as_ref()
            .and_then(|h| h.network_mode.clone())
            .unwrap_or_default();
        if !mode.is_empty()
            && !mode.starts_with("container:")
            && self.network_id(&mode).is_none()
            && !matches!(mode.as_str(), "bridge" | "host" | "none" | "slirp4netns")
        {
            return Err(status(404, format!("network {mode} not found")));
        }
        let id = self.id("c");
        let name = name.map_or_else(|| format!("anon_{}", &id[..12]), str::to_string);
        let c = FakeContainer {
            id: id.clone(),
            name,
            body,
            status: "created",
            started_at: "0001-01-01T00:00:00Z".into(),
            exit_code: 0,
            error: String::new(),
        };
        self.containers.insert(id.clone(), c);
        self.emit("create", &id);
        Ok(id)
    }

    /// Whether labels satisfy every `k=v` / `k` filter.
    fn matches(labels: &HashMap<String, String>, filters: &[String]) -> bool {
        filters.iter().all(|f| match f.split_once('=') {
            Some((k, v)) => labels.get(k).map(String::as_str) == Some(v),
            None => labels.contains_key(f.as_str()),
        })
    }
}

impl EngineApi for FakeEngine {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn with_timeout(&self, timeout: Duration) -> Self {
        FakeEngine {
            state: self.state.clone(),
            timeout,
        }
    }

    async fn ping(&self) -> EngineResult<()> {
        self.enter("ping", "").await
    }

    async fn list_containers(&self, labels: Vec<String>) -> EngineResult<Vec<ContainerSummary>> {
        self.enter("list_containers", &labels.join(",")).await?;
        let s = self.state();
        Ok(s.containers
            .values()
            .filter(|c| State::matches(&c.body.labels.clone().unwrap_or_default(), &labels))
            .map(|c| summary_of(c, &s))
            .collect())
    }

    async fn inspect_container(&self, id: &str) -> EngineResult<ContainerInspectResponse> {
        self.enter("inspect_container", id).await?;
        let s = self.state();
        let c = s
            .find(id)
            .ok_or_else(|| status(404, format!("No such container: {id}")))?;
        Ok(inspect_of(c, &s))
    }

    async fn create_container(
        &self,
        name: Option<&str>,
        body: ContainerCreateBody,
    ) -> EngineResult<String> {
        self.enter("create_container", name.unwrap_or("")).await?;
        self.state()
            .create(name, body)
            .map_err(EngineError::of_container)
    }

    async fn start_container(&self, id: &str) -> EngineResult<()> {
        self.enter("start_container", id).await?;
        self.state().start(id).map_err(EngineError::of_container)
    }

    async fn stop_container(&self, id: &str, _grace: i32) -> EngineResult<()> {
        self.enter("stop_container", id).await?;
        self.state().stop(id)
    }

    async fn restart_container(&self, id: &str) -> EngineResult<()> {
        self.enter("restart_container", id).await?;
        let mut s = self.state();
        let _ = s.stop(id);
        s.start(id)
    }

    async fn remove_container(&self, id: &str) -> EngineResult<()> {
        self.enter("remove_container", id).await?;
        self.state().remove(id, true)
    }

    async fn wait_container(&self, id: &str) -> EngineResult<i64> {
        self.enter("wait_container", id).await?;
        let mut s = self.state();
        let id = s.find_id(id)?;
        let c = s.containers.get_mut(&id).expect("found");
        if c.status == "running" {
            c.status = "exited";
        }
        let code = c.exit_code;
        s.emit("die", &id);
        Ok(code)
    }

    async fn logs_tail(&self, id: &str, _lines: usize) -> String {
        let _ = self.enter("logs", id).await;
        format!("(fake logs of {id})")
    }

    async fn create_volume(&self, request: VolumeCreateRequest) -> EngineResult<()> {
        let name = request.name.clone().unwrap_or_default();
        self.enter("create_volume", &name).await?;
        self.state()
            .volumes
            .entry(name)
            .or_insert_with(|| request.labels.unwrap_or_default());
        Ok(())
    }

    async fn list_volumes(
        &self,
        filters: Filters,
    ) -> EngineResult<Vec<(String, HashMap<String, String>)>> {
        self.enter("list_volumes", "").await?;
        let labels = filters.get("label").cloned().unwrap_or_default();
        let s = self.state();
        Ok(s.volumes
            .iter()
            .filter(|(_, l)| State::matches(l, &labels))
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect())
    }

    async fn remove_volume(&self, name: &str) -> EngineResult<()> {
        self.enter("remove_volume", name).await?;
        match self.state().volumes.remove(name) {
            Some(_) => Ok(()),
            None => Err(status(404, format!("no such volume: {name}"))),
        }
    }

    async fn upload_archive(&self, id: &str, path: &str, tar: PathBuf) -> EngineResult<()> {
        self.enter("upload_archive", id).await?;
        self.state().uploads.push((id.into(), path.into(), tar));
        Ok(())
    }

    async fn list_networks(&self, filters: Filters) -> EngineResult<Vec<Network>> {
        self.enter("list_networks", "").await?;
        let labels = filters.get("label").cloned().unwrap_or_default();
        let s = self.state();
        Ok(s.networks
            .values()
            .filter(|n| State::matches(&n.labels.clone().unwrap_or_default(), &labels))
            .cloned()
            .collect())
    }

    async fn create_network(&self, request: NetworkCreateRequest) -> EngineResult<String> {
        self.enter("create_network", &request.name).await?;
        let mut s = self.state();
        let id = s.id("n");
        let created = s.now();
        let subnet = s.networks.len() + 18;
        let network = Network {
            name: Some(request.name),
            id: Some(id.clone()),
            created: Some(created),
            driver: request.driver,
            labels: request.labels,
            enable_ipv6: request.enable_ipv6,
            ipam: Some(Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some(format!("172.{subnet}.0.0/16")),
                    gateway: Some(format!("172.{subnet}.0.1")),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        s.networks.insert(id.clone(), network);
        Ok(id)
    }

    async fn inspect_network(&self, id: &str) -> EngineResult<NetworkInspect> {
        self.enter("inspect_network", id).await?;
        let s = self.state();
        let nid = s
            .network_id(id)
            .ok_or_else(|| status(404, format!("network {id} not found")))?;
        let network = s.networks[&nid].clone();
        let name = network.name.clone().unwrap_or_default();
        let users: HashMap<String, EndpointResource> = s
            .containers
            .values()
            .filter(|c| c.status == "running")
            .filter(|c| [nid.as_str(), name.as_str()].contains(&State::network_mode_of(c).as_str()))
            .map(|c| (c.id.clone(), EndpointResource::default()))
            .collect();
        Ok(NetworkInspect {
            name: network.name,
            id: network.id,
            created: network.created,
            driver: network.driver,
            enable_ipv6: network.enable_ipv6,
            ipam: network.ipam,
            labels: network.labels,
            containers: Some(users),
            ..Default::default()
        })
    }

    async fn remove_network(&self, id: &str) -> EngineResult<()> {
        self.enter("remove_network", id).await?;
        let mut s = self.state();
        let nid = s
            .network_id(id)
            .ok_or_else(|| status(404, format!("network {id} not found")))?;
        let name = s.networks[&nid].name.clone().unwrap_or_default();
        let used = s.containers.values().any(|c| {
            c.status == "running"
                && [nid.as_str(), name.as_str()].contains(&State::network_mode_of(c).as_str())
        });
        if used {
            return Err(status(403, format!("network {name} has active endpoints")));
        }
        s.networks.remove(&nid);
        Ok(())
    }

    fn events(&self, filters: Filters) -> BoxStream<'static, EngineResult<EventMessage>> {
        let labels = filters.get("label").cloned().unwrap_or_default();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.state().subscribers.push(tx);
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) })
            .filter(move |m: &EventMessage| {
                let attrs = m
                    .actor
                    .as_ref()
                    .and_then(|a| a.attributes.clone())
                    .unwrap_or_default();
                std::future::ready(State::matches(&attrs, &labels))
            })
            .map(Ok)
            .boxed()
    }

    async fn inspect_image(&self, tag: &str) -> EngineResult<super::api::ImageFacts> {
        self.enter("inspect_image", tag).await?;
        let s = self.state();
        if !s.images.iter().any(|i| i == tag) {
            return Err(status(404, format!("No such image: {tag}")));
        }
        let id = s.image_ids.get(tag).cloned().unwrap_or_else(|| {
            use sha2::{Digest, Sha256};
            format!("sha256:{}", hex::encode(Sha256::digest(tag.as_bytes())))
        });
        Ok(super::api::ImageFacts {
            id,
            created: Some("2026-11-20T10:00:00Z".into()),
        })
    }

    async fn list_images(
        &self,
        labels: Vec<String>,
    ) -> EngineResult<Vec<(HashMap<String, String>, i64)>> {
        self.enter("list_images", "").await?;
        let s = self.state();
        Ok(s.images
            .iter()
            .filter_map(|tag| s.image_labels.get(tag))
            .filter(|l| State::matches(l, &labels))
            .map(|l| (l.clone(), 0))
            .collect())
    }

    /// A build of one step that tags the image, or fails as told.
    fn pull_image(&self, reference: &str) -> BoxStream<'_, EngineResult<String>> {
        let reference = reference.to_string();
        futures_util::stream::once(async move {
            self.enter("pull_image", &reference).await?;
            let mut s = self.state();
            let Some(id) = s.registry.get(&reference).cloned() else {
                let said = format!("manifest for {reference} not found: manifest unknown");
                return Err(EngineError::answered(0, said));
            };
            if !s.images.contains(&reference) {
                s.images.push(reference.clone());
            }
            s.image_ids.insert(reference.clone(), id);
            Ok(format!("Status: Downloaded newer image for {reference}"))
        })
        .boxed()
    }

    fn build_image(
        &self,
        options: BuildOptions,
        _context: Vec<u8>,
    ) -> BoxStream<'_, EngineResult<BuildInfo>> {
        let (tag, labels) = (options.tag, options.labels);
        futures_util::stream::once(async move {
            self.enter("build_image", &tag).await?;
            let mut s = self.state();
            s.images.push(tag.clone());
            s.image_labels.insert(tag.clone(), labels);
            drop(s);
            Ok(BuildInfo {
                stream: Some(format!("Step 1/1 : tagged {tag}\n")),
                ..Default::default()
            })
        })
        .boxed()
    }

    async fn create_exec(&self, container: &str, _config: ExecConfig) -> EngineResult<String> {
        self.enter("create_exec", container).await?;
        Err(status(501, "exec is not faked"))
    }

    async fn start_exec(&self, id: &str, _options: StartExecOptions) -> EngineResult<ExecStarted> {
        self.enter("start_exec", id).await?;
        Err(status(501, "exec is not faked"))
    }

    async fn inspect_exec(&self, id: &str) -> EngineResult<ExecInspectResponse> {
        self.enter("inspect_exec", id).await?;
        Err(status(501, "exec is not faked"))
    }

    async fn resize_exec(&self, id: &str, _height: u16, _width: u16) -> EngineResult<()> {
        self.enter("resize_exec", id).await
    }
}

/// A server answering every request with 200, as the contained server's health path does.
pub(crate) async fn healthy_server() -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    .await;
            });
        }
    });
    port
}
