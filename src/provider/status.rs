//! What the provider reports: its state and each configured workspace's place in start-up.

use napi_derive::napi;

pub(crate) use crate::events::ProviderState;
use crate::sandbox::service::WorkspaceContainer;

/// A configured workspace's place in start-up.
#[napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspacePhase {
    /// Waiting for start-up.
    Pending,
    /// Being adopted or created.
    Starting,
    /// Its container runs.
    Running,
    /// Starting it failed.
    Failed,
    /// Its sandbox is not `container`.
    Skipped,
    /// Stopped by a stop of every container.
    Stopped,
}

/// One workspace in the provider's start-up.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceStatus {
    pub id: String,
    pub state: WorkspacePhase,
    pub container: Option<WorkspaceContainer>,
    /// The error code when it failed.
    pub error_code: Option<String>,
    pub error: Option<String>,
}

/// The provider's status.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderStatus {
    pub state: ProviderState,
    /// Why it is unavailable, and what to do.
    pub reason: Option<String>,
    /// `ENGINE_UNAVAILABLE`, `RUNTIME_NOT_INSTALLED`, `RUNTIME_INVALID`, `IMAGE_BUILD_FAILED`…
    pub code: Option<String>,
    /// The engine answered the last call (false after a call it did not answer, until it
    /// answers again: the provider probes it every 2 s meanwhile and recovers by itself).
    pub engine_answering: bool,
    /// Why the engine is taken as not answering (`ENGINE_TIMEOUT` or a connection failure), and
    /// what to do.
    pub engine_problem: Option<String>,
    /// The engine in use (`docker` / `podman`) and its endpoint.
    pub engine: Option<String>,
    pub endpoint: Option<String>,
    /// The runtime bundle version.
    pub runtime_version: Option<String>,
    /// The image tag.
    pub image: Option<String>,
    /// This start built the image.
    pub image_built: bool,
    /// This hub's owner id.
    pub owner: String,
    /// Start-up has finished: every workspace was attempted.
    pub settled: bool,
    /// What works but is weaker than it should be: limits the engine cannot enforce (a
    /// rootless engine on cgroup v1), with the fix.
    pub warnings: Vec<String>,
    pub workspaces: Vec<WorkspaceStatus>,
}
