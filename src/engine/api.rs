//! What the core asks of a container engine, as one narrow trait: containers, networks,
//! volumes, exec, events and image builds. Bollard's [`Docker`] is the one production implementation; the
//! orchestration is generic over it so unit tests drive it with an in-memory engine.
//!
//! Answers keep the Engine API's data shapes ([`model`](super::model)); failures are the
//! layer's own [`EngineError`], classified once here, so the callers' decisions (the name is
//! taken, gone, already so) are the same for every implementation.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use bollard::Docker;
use bollard::exec::ResizeExecOptions;
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateContainerOptionsBuilder, EventsOptionsBuilder,
    InspectContainerOptions, InspectNetworkOptions, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder, ListVolumesOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptions, RestartContainerOptions,
    StartContainerOptions, StopContainerOptionsBuilder, WaitContainerOptions,
};
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};

use super::fault::{EngineError, EngineResult};
use super::model::{
    BuildInfo, ContainerCreateBody, ContainerInspectResponse, ContainerSummary, EventMessage,
    ExecConfig, ExecInspectResponse, ExecStarted, Network, NetworkCreateRequest, NetworkInspect,
    StartExecOptions, VolumeCreateRequest,
};

/// The production client: the Engine API over a local socket (or a named pipe, or TCP).
pub(crate) type Client = Docker;

/// An image build as the layer asks for it: the tag and the labels that say what the image
/// was built from. The context's `Dockerfile` is built; intermediate containers are always
/// removed.
#[derive(Debug, Clone, Default)]
pub(crate) struct BuildOptions {
    /// The tag the image gets.
    pub tag: String,
    /// The image's labels.
    pub labels: HashMap<String, String>,
}

/// What the engine says of one image: its ID (which changes whenever another image takes its
/// name, as a base pulled again does) and when it was made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ImageFacts {
    /// `sha256:…`.
    pub id: String,
    /// When it was made (RFC 3339), when the engine says.
    pub created: Option<String>,
}

/// `name[:tag]` or `name@digest` as the engine's pull takes them: the name, and the tag or
/// digest (`latest` when none is given, as `docker pull` does). A registry's port is not a tag.
pub(crate) fn split_reference(reference: &str) -> (&str, &str) {
    if let Some((name, digest)) = reference.split_once('@') {
        return (name, digest);
    }
    let last = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[last..].rfind(':') {
        Some(i) => (&reference[..last + i], &reference[last + i + 1..]),
        None => (reference, "latest"),
    }
}

/// Label filters as the engine takes them: `{"label": ["k=v", "k"]}` and the like.
pub(crate) type Filters = HashMap<String, Vec<String>>;

/// What the core asks of a container engine. Every call is bounded by [`timeout`]
/// (a hung engine answers [`EngineError::Timeout`]); [`with_timeout`] gives a client with
/// another bound.
///
/// [`timeout`]: EngineApi::timeout
/// [`with_timeout`]: EngineApi::with_timeout
pub(crate) trait EngineApi: Clone + Send + Sync + 'static {
    /// The bound on each call of this client.
    fn timeout(&self) -> Duration;
    /// The same engine, each call bounded by `timeout`.
    fn with_timeout(&self, timeout: Duration) -> Self;
    /// Whether the engine answers.
    fn ping(&self) -> impl Future<Output = EngineResult<()>> + Send;
    /// Containers in any state whose labels match `labels` (`k=v` or `k`).
    fn list_containers(
        &self,
        labels: Vec<String>,
    ) -> impl Future<Output = EngineResult<Vec<ContainerSummary>>> + Send;
    /// One container by id or name (not found when there is none).
    fn inspect_container(
        &self,
        id: &str,
    ) -> impl Future<Output = EngineResult<ContainerInspectResponse>> + Send;
    /// Creates (does not start) a container, named or not; returns its id (a conflict: the name
    /// is taken; network gone: its network is).
    fn create_container(
        &self,
        name: Option<&str>,
        body: ContainerCreateBody,
    ) -> impl Future<Output = EngineResult<String>> + Send;
    /// Starts a container (not modified: it runs already; network gone: its network is).
    fn start_container(&self, id: &str) -> impl Future<Output = EngineResult<()>> + Send;
    /// Stops a container, `grace` seconds after its stop signal (not modified: it was stopped).
    fn stop_container(&self, id: &str, grace: i32)
    -> impl Future<Output = EngineResult<()>> + Send;
    /// Restarts a container.
    fn restart_container(&self, id: &str) -> impl Future<Output = EngineResult<()>> + Send;
    /// Removes a container, running or not; its volumes stay (a conflict: another removal is
    /// under way).
    fn remove_container(&self, id: &str) -> impl Future<Output = EngineResult<()>> + Send;
    /// Waits until a started container exits; its exit code.
    fn wait_container(&self, id: &str) -> impl Future<Output = EngineResult<i64>> + Send;
    /// The last `lines` lines of a container's output, as far as the engine sent them.
    fn logs_tail(&self, id: &str, lines: usize) -> impl Future<Output = String> + Send;
    /// Creates a volume (an existing one of that name is kept as it is).
    fn create_volume(
        &self,
        request: VolumeCreateRequest,
    ) -> impl Future<Output = EngineResult<()>> + Send;
    /// The volumes matching `filters`: name and labels.
    fn list_volumes(
        &self,
        filters: Filters,
    ) -> impl Future<Output = EngineResult<Vec<(String, HashMap<String, String>)>>> + Send;
    /// Removes a volume (not found: gone).
    fn remove_volume(&self, name: &str) -> impl Future<Output = EngineResult<()>> + Send;
    /// Extracts the tar file `tar` (a host file, streamed) into `path` of a container, created
    /// or running (the engine's archive upload).
    fn upload_archive(
        &self,
        id: &str,
        path: &str,
        tar: std::path::PathBuf,
    ) -> impl Future<Output = EngineResult<()>> + Send;
    /// The networks matching `filters`.
    fn list_networks(
        &self,
        filters: Filters,
    ) -> impl Future<Output = EngineResult<Vec<Network>>> + Send;
    /// Creates a network; returns its id (a conflict: an engine that refuses a second of one
    /// name).
    fn create_network(
        &self,
        request: NetworkCreateRequest,
    ) -> impl Future<Output = EngineResult<String>> + Send;
    /// One network by id or name, with the containers that use it.
    fn inspect_network(
        &self,
        id: &str,
    ) -> impl Future<Output = EngineResult<NetworkInspect>> + Send;
    /// Removes a network (refused while a container uses it).
    fn remove_network(&self, id: &str) -> impl Future<Output = EngineResult<()>> + Send;
    /// The engine's events matching `filters`, from now on, until the stream breaks.
    fn events(&self, filters: Filters) -> BoxStream<'static, EngineResult<EventMessage>>;
    /// An image's ID and age (not found: there is none of that name).
    fn inspect_image(&self, tag: &str) -> impl Future<Output = EngineResult<ImageFacts>> + Send;
    /// The images whose labels match `labels` (`k=v`): each one's labels and when it was
    /// made (seconds since the epoch).
    fn list_images(
        &self,
        labels: Vec<String>,
    ) -> impl Future<Output = EngineResult<Vec<(HashMap<String, String>, i64)>>> + Send;
    /// Pulls `reference` (`name[:tag]` or `name@digest`) from its registry: the engine's
    /// progress as lines (`<layer>: <status>`); a failure in the stream is an error item.
    fn pull_image(&self, reference: &str) -> BoxStream<'_, EngineResult<String>>;
    /// Builds an image from an in-memory tar context; the engine's progress messages.
    fn build_image(
        &self,
        options: BuildOptions,
        context: Vec<u8>,
    ) -> BoxStream<'_, EngineResult<BuildInfo>>;
    /// Creates a command run in a running container; returns the exec's id.
    fn create_exec(
        &self,
        container: &str,
        config: ExecConfig,
    ) -> impl Future<Output = EngineResult<String>> + Send;
    /// Starts an exec, attached to its streams.
    fn start_exec(
        &self,
        id: &str,
        options: StartExecOptions,
    ) -> impl Future<Output = EngineResult<ExecStarted>> + Send;
    /// An exec's state (running, exit code).
    fn inspect_exec(
        &self,
        id: &str,
    ) -> impl Future<Output = EngineResult<ExecInspectResponse>> + Send;
    /// Gives an exec's terminal a size.
    fn resize_exec(
        &self,
        id: &str,
        height: u16,
        width: u16,
    ) -> impl Future<Output = EngineResult<()>> + Send;
    /// The names of the container runtimes the engine lists (`runc`, `runsc`, …).
    fn runtimes(&self) -> impl Future<Output = EngineResult<Vec<String>>> + Send {
        // An engine with no runtime list (the unit tests' fake) lists none.
        async { Ok(Vec::new()) }
    }
    /// The command lines of a running container's processes (the engine's `top`, its last
    /// column: Docker's `CMD`, Podman's `COMMAND`).
    fn top_commands(&self, id: &str) -> impl Future<Output = EngineResult<Vec<String>>> + Send {
        // An engine without processes (the unit tests' fake) lists none.
        let _ = id;
        async { Ok(Vec::new()) }
    }
}

impl EngineApi for Docker {
    fn timeout(&self) -> Duration {
        Docker::timeout(self)
    }

    fn with_timeout(&self, timeout: Duration) -> Self {
        self.clone().with_timeout(timeout)
    }

    async fn ping(&self) -> EngineResult<()> {
        Ok(Docker::ping(self).await.map(|_| ())?)
    }

    async fn list_containers(&self, labels: Vec<String>) -> EngineResult<Vec<ContainerSummary>> {
        let filters: HashMap<&str, Vec<String>> = HashMap::from([("label", labels)]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        Ok(Docker::list_containers(self, Some(options)).await?)
    }

    async fn inspect_container(&self, id: &str) -> EngineResult<ContainerInspectResponse> {
        Ok(Docker::inspect_container(self, id, None::<InspectContainerOptions>).await?)
    }

    async fn create_container(
        &self,
        name: Option<&str>,
        body: ContainerCreateBody,
    ) -> EngineResult<String> {
        let options = name.map(|n| CreateContainerOptionsBuilder::new().name(n).build());
        match Docker::create_container(self, options, body).await {
            Ok(created) => Ok(created.id),
            Err(e) => Err(EngineError::from(e).of_container()),
        }
    }

    async fn start_container(&self, id: &str) -> EngineResult<()> {
        Docker::start_container(self, id, None::<StartContainerOptions>)
            .await
            .map_err(|e| EngineError::from(e).of_container())
    }

    async fn stop_container(&self, id: &str, grace: i32) -> EngineResult<()> {
        let options = StopContainerOptionsBuilder::new().t(grace).build();
        Ok(Docker::stop_container(self, id, Some(options)).await?)
    }

    async fn restart_container(&self, id: &str) -> EngineResult<()> {
        Ok(Docker::restart_container(self, id, None::<RestartContainerOptions>).await?)
    }

    async fn remove_container(&self, id: &str) -> EngineResult<()> {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(false)
            .build();
        Ok(Docker::remove_container(self, id, Some(options)).await?)
    }

    async fn wait_container(&self, id: &str) -> EngineResult<i64> {
        let mut wait = Docker::wait_container(self, id, None::<WaitContainerOptions>);
        match wait.next().await {
            Some(Ok(r)) => Ok(r.status_code),
            // A non-zero exit comes as an error carrying the code.
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(e.into()),
            None => Ok(-1),
        }
    }

    async fn logs_tail(&self, id: &str, lines: usize) -> String {
        let options = LogsOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .tail(&lines.to_string())
            .build();
        let mut out = String::new();
        let mut stream = Docker::logs(self, id, Some(options));
        while let Some(Ok(chunk)) = stream.next().await {
            out.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        out
    }

    async fn create_volume(&self, request: VolumeCreateRequest) -> EngineResult<()> {
        Ok(Docker::create_volume(self, request).await.map(|_| ())?)
    }

    async fn list_volumes(
        &self,
        filters: Filters,
    ) -> EngineResult<Vec<(String, HashMap<String, String>)>> {
        let options = ListVolumesOptionsBuilder::new().filters(&filters).build();
        let listed = Docker::list_volumes(self, Some(options)).await?;
        let wanted = filters.get("label").map_or(&[][..], Vec::as_slice);
        // Podman (4.3) answers volumes with any of the labels, Docker with all: kept are those
        // with all, as the callers mean.
        Ok(listed
            .volumes
            .unwrap_or_default()
            .into_iter()
            .filter(|v| has_labels(&v.labels, wanted))
            .map(|v| (v.name, v.labels))
            .collect())
    }

    async fn remove_volume(&self, name: &str) -> EngineResult<()> {
        Ok(Docker::remove_volume(self, name, None::<RemoveVolumeOptions>).await?)
    }

    async fn upload_archive(
        &self,
        id: &str,
        path: &str,
        tar: std::path::PathBuf,
    ) -> EngineResult<()> {
        let file = tokio::fs::File::open(&tar).await?;
        // 256 KiB at a time: a large copy never sits in memory whole.
        let chunks = futures_util::stream::unfold(Some(file), |file| async move {
            use tokio::io::AsyncReadExt;
            let mut file = file?;
            let mut buf = vec![0u8; 256 << 10];
            match file.read(&mut buf).await {
                Ok(0) | Err(_) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((bytes::Bytes::from(buf), Some(file)))
                }
            }
        });
        let options = bollard::query_parameters::UploadToContainerOptions {
            path: path.to_string(),
            ..Default::default()
        };
        Ok(
            Docker::upload_to_container(self, id, Some(options), bollard::body_stream(chunks))
                .await?,
        )
    }

    async fn list_networks(&self, filters: Filters) -> EngineResult<Vec<Network>> {
        let options = ListNetworksOptionsBuilder::new().filters(&filters).build();
        Ok(Docker::list_networks(self, Some(options)).await?)
    }

    async fn create_network(&self, request: NetworkCreateRequest) -> EngineResult<String> {
        Ok(Docker::create_network(self, request).await?.id)
    }

    async fn inspect_network(&self, id: &str) -> EngineResult<NetworkInspect> {
        Ok(Docker::inspect_network(self, id, None::<InspectNetworkOptions>).await?)
    }

    async fn remove_network(&self, id: &str) -> EngineResult<()> {
        Ok(Docker::remove_network(self, id).await?)
    }

    fn events(&self, filters: Filters) -> BoxStream<'static, EngineResult<EventMessage>> {
        let options = EventsOptionsBuilder::new().filters(&filters).build();
        Docker::events(self, Some(options))
            .map_err(EngineError::from)
            .boxed()
    }

    async fn inspect_image(&self, tag: &str) -> EngineResult<ImageFacts> {
        let image = Docker::inspect_image(self, tag).await?;
        Ok(ImageFacts {
            id: image.id.unwrap_or_default(),
            created: image.created,
        })
    }

    async fn list_images(
        &self,
        labels: Vec<String>,
    ) -> EngineResult<Vec<(HashMap<String, String>, i64)>> {
        let filters = HashMap::from([("label".to_string(), labels)]);
        let options = bollard::query_parameters::ListImagesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let images = Docker::list_images(self, Some(options)).await?;
        Ok(images.into_iter().map(|i| (i.labels, i.created)).collect())
    }

    fn pull_image(&self, reference: &str) -> BoxStream<'_, EngineResult<String>> {
        let (from, tag) = split_reference(reference);
        let options = bollard::query_parameters::CreateImageOptionsBuilder::default()
            .from_image(from)
            .tag(tag)
            .build();
        Docker::create_image(self, Some(options), None, None)
            .map_ok(|info| {
                let status = info.status.unwrap_or_default();
                match info.id {
                    Some(id) => format!("{id}: {status}"),
                    None => status,
                }
            })
            .map_err(EngineError::from)
            .boxed()
    }

    fn build_image(
        &self,
        options: BuildOptions,
        context: Vec<u8>,
    ) -> BoxStream<'_, EngineResult<BuildInfo>> {
        let body = bollard::body_full(bytes::Bytes::from(context));
        let options = BuildImageOptionsBuilder::default()
            .dockerfile("Dockerfile")
            .t(&options.tag)
            .rm(true)
            .forcerm(true)
            .labels(&options.labels)
            .build();
        Docker::build_image(self, options, None, Some(body))
            .map_err(EngineError::from)
            .boxed()
    }

    async fn create_exec(&self, container: &str, config: ExecConfig) -> EngineResult<String> {
        Ok(Docker::create_exec(self, container, config).await?.id)
    }

    async fn start_exec(&self, id: &str, options: StartExecOptions) -> EngineResult<ExecStarted> {
        Ok(match Docker::start_exec(self, id, Some(options)).await? {
            bollard::exec::StartExecResults::Attached { output, input } => ExecStarted::Attached {
                output: output.map_err(EngineError::from).boxed(),
                input,
            },
            bollard::exec::StartExecResults::Detached => ExecStarted::Detached,
        })
    }

    async fn inspect_exec(&self, id: &str) -> EngineResult<ExecInspectResponse> {
        Ok(Docker::inspect_exec(self, id).await?)
    }

    async fn resize_exec(&self, id: &str, height: u16, width: u16) -> EngineResult<()> {
        Ok(Docker::resize_exec(self, id, ResizeExecOptions { height, width }).await?)
    }

    async fn runtimes(&self) -> EngineResult<Vec<String>> {
        let info = Docker::info(self).await?;
        Ok(info.runtimes.unwrap_or_default().into_keys().collect())
    }

    async fn top_commands(&self, id: &str) -> EngineResult<Vec<String>> {
        let top = Docker::top_processes(self, id, None).await?;
        let rows = top.processes.unwrap_or_default().into_iter();
        Ok(rows.filter_map(|mut p| p.pop()).collect())
    }
}

/// Whether `labels` has every label filter of `wanted` (`key` or `key=value`).
pub(crate) fn has_labels(labels: &HashMap<String, String>, wanted: &[String]) -> bool {
    wanted.iter().all(|w| match w.split_once('=') {
        Some((k, v)) => labels.get(k).is_some_and(|have| have == v),
        None => labels.contains_key(w.as_str()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_filters_all_hold_as_on_docker() {
        let labels: HashMap<String, String> = [("po.owner", "a"), ("po.workspace-copy", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let w = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(has_labels(&labels, &[]));
        assert!(has_labels(
            &labels,
            &w(&["po.owner=a", "po.workspace-copy"])
        ));
        assert!(has_labels(
            &labels,
            &w(&["po.owner=a", "po.workspace-copy=1"])
        ));
        // Podman's answer holds volumes with only one of them: those are not kept.
        assert!(!has_labels(&labels, &w(&["po.owner=a", "po.workspace=w"])));
        assert!(!has_labels(&labels, &w(&["po.owner=b"])));
        assert!(!has_labels(&labels, &w(&["po.owner=a=b"])));
        assert!(!has_labels(&labels, &w(&["po.workspace"])));
    }
}
