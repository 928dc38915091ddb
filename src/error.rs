//! The one error type of the core. Each variant has a stable code that the JS bindings expose as
//! `err.code`, and a message that names the thing at fault and the fix.

/// Everything the core can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `PO_SANDBOX_ENGINE` (or the `engine` option) names no engine we know.
    #[error(
        "Unknown container engine '{name}' (from {source_name}). Valid engines: docker, podman, nerdctl, finch. Unset it to detect one automatically."
    )]
    EngineUnknown { name: String, source_name: String },

    /// An option value is out of range or malformed.
    #[error("Invalid option {option}: {reason}")]
    OptionsInvalid { option: String, reason: String },
}

impl Error {
    /// The stable code exposed to JS as `err.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::EngineUnknown { .. } => "ENGINE_UNKNOWN",
            Error::OptionsInvalid { .. } => "OPTIONS_INVALID",
        }
    }
}

/// Result with the core error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
