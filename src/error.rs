//! The one error type of the core. Each variant has a stable code that the JS bindings expose as
//! `err.code`, and a message that names the thing at fault and the fix.

use std::path::PathBuf;

/// Everything the core can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// `PO_SANDBOX_ENGINE` (or the `engine` option) names no engine we know.
    #[error(
        "Unknown container engine '{name}' (from {source_name}). Valid engines: docker, podman, nerdctl, finch. Unset it to detect one automatically."
    )]
    EngineUnknown { name: String, source_name: String },

    /// An option value is out of range or malformed.
    #[error("Invalid option {option}: {reason}")]
    OptionsInvalid { option: String, reason: String },

    /// No usable engine answered; `reason` says which and what to do.
    #[error("{reason}")]
    EngineUnavailable { reason: String },

    /// The engine refused or failed a request the layer needed.
    #[error("The container engine failed to {operation}: {detail}")]
    EngineRequest { operation: String, detail: String },

    /// No `container-runtime.json` where it must be.
    #[error(
        "The container runtime is not installed: {path} does not exist. Install the Linux Po runtime bundle there (its container-runtime.json names the server entry and port)."
    )]
    RuntimeNotInstalled { path: PathBuf },

    /// `container-runtime.json` breaks a rule; `key` names the field (or `(file)`).
    #[error("The container runtime {path} is invalid: {key}: {rule}")]
    RuntimeInvalid {
        path: PathBuf,
        key: String,
        rule: String,
    },

    /// The sandbox image could not be built; `tail` is the end of the failing step's output.
    #[error("Building the sandbox image {tag} failed at {step}: {detail}\n{tail}")]
    ImageBuildFailed {
        tag: String,
        step: String,
        detail: String,
        tail: String,
    },

    /// A workspace id or path is unusable; nothing was touched.
    #[error("Workspace {what} is invalid: {reason}")]
    WorkspaceInvalid { what: String, reason: String },

    /// A workspace container could not be created, started or stopped.
    #[error("The sandbox container for workspace '{workspace}' failed: {reason}")]
    ContainerFailed { workspace: String, reason: String },

    /// The contained server did not answer its health path in time.
    #[error(
        "The sandbox container for workspace '{workspace}' started but its server did not answer {url} within {waited_ms} ms. Its last log lines:\n{logs}"
    )]
    ContainerUnhealthy {
        workspace: String,
        url: String,
        waited_ms: u64,
        logs: String,
    },

    /// The credential broker could not do what was asked (listen, bind a route).
    #[error("The credential broker failed: {reason}")]
    BrokerFailed { reason: String },

    /// Called inside a sandbox container, where containers must not nest.
    #[error(
        "Refusing to manage containers from inside a sandbox container (PO_SANDBOX=1): sandboxes do not nest. Run this on the host."
    )]
    NestingRefused,
}

impl Error {
    /// The stable code exposed to JS as `err.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::EngineUnknown { .. } => "ENGINE_UNKNOWN",
            Error::OptionsInvalid { .. } => "OPTIONS_INVALID",
            Error::EngineUnavailable { .. } => "ENGINE_UNAVAILABLE",
            Error::EngineRequest { .. } => "ENGINE_REQUEST_FAILED",
            Error::RuntimeNotInstalled { .. } => "RUNTIME_NOT_INSTALLED",
            Error::RuntimeInvalid { .. } => "RUNTIME_INVALID",
            Error::ImageBuildFailed { .. } => "IMAGE_BUILD_FAILED",
            Error::WorkspaceInvalid { .. } => "WORKSPACE_INVALID",
            Error::ContainerFailed { .. } => "CONTAINER_FAILED",
            Error::ContainerUnhealthy { .. } => "CONTAINER_UNHEALTHY",
            Error::BrokerFailed { .. } => "BROKER_FAILED",
            Error::NestingRefused => "NESTING_REFUSED",
        }
    }
}

/// Result with the core error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
