//! What the provider reports: its state and each configured workspace's place in start-up.

use crate::sandbox::service::WorkspaceContainer;

/// One workspace's place in the start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceStatus {
    pub id: String,
    /// `pending`, `starting`, `running`, `failed` or `skipped` (sandbox is not `container`).
    pub state: String,
    pub container: Option<WorkspaceContainer>,
    pub error_code: Option<String>,
    pub error: Option<String>,
}

/// The provider's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderStatus {
    /// `starting`, `ready`, `unavailable` or `stopped`.
    pub state: String,
    /// Why it is unavailable.
    pub reason: Option<String>,
    /// The code of that reason (`ENGINE_UNAVAILABLE`, `RUNTIME_NOT_INSTALLED`…).
    pub code: Option<String>,
    /// The engine in use (`docker` / `podman`) and its endpoint.
    pub engine: Option<String>,
    pub endpoint: Option<String>,
    /// The runtime bundle version.
    pub runtime_version: Option<String>,
    /// The image tag.
    pub image: Option<String>,
    /// Whether this start built the image.
    pub image_built: bool,
    /// This hub's owner id.
    pub owner: String,
    /// Start-up has finished (every workspace attempted).
    pub settled: bool,
    pub workspaces: Vec<WorkspaceStatus>,
}
