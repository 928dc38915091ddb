//! The one error type of the core. Each variant has a stable code that the JS bindings expose as
//! `err.code`, and a message that names the thing at fault and the fix.

use std::path::PathBuf;
use std::sync::Arc;

/// An underlying failure kept as an error's `source()`.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Everything the core can fail with. Not `Clone`: an outcome shared between callers holds an
/// `Arc<Error>` and reaches each of them as [`Error::Shared`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `PO_SANDBOX_ENGINE` (or the `engine` option) names no engine we know.
    #[error(
        "Unknown container engine '{name}' (from {source_name}). Valid engines: docker, podman, nerdctl, finch. Unset it to detect one automatically."
    )]
    EngineUnknown { name: String, source_name: String },

    /// The Docker context in force (`DOCKER_CONTEXT`, `currentContext`) cannot be used: a
    /// malformed config or meta file, or a context that does not exist. `reason` names the
    /// file or context and the fix.
    #[error("{reason}")]
    EngineContextInvalid { reason: String },

    /// An option value is out of range or malformed.
    #[error("Invalid option {option}: {reason}")]
    OptionsInvalid { option: String, reason: String },

    /// No usable engine answered; `reason` says which and what to do, `reason_code` is the
    /// engine report's code (`ENGINE_NOT_INSTALLED`, `ENGINE_TIMEOUT`, …) when there is one.
    #[error("{reason}{}", reason_code.as_ref().map(|c| format!(" [{c}]")).unwrap_or_default())]
    EngineUnavailable {
        reason: String,
        reason_code: Option<String>,
    },

    /// The engine refused or failed a request the layer needed; `source` is the engine
    /// client's error (its HTTP status, if any, included).
    #[error("The container engine failed to {operation}: {source}")]
    EngineRequest {
        operation: String,
        #[source]
        source: Cause,
    },

    /// The engine accepted a request but did not answer it within the call bound: it is hung.
    #[error(
        "The container engine did not answer in time to {operation} (bound: {waited_ms} ms, {variable}); it may be hung: restart it (for Docker: systemctl restart docker), or raise the bound for a slow engine."
    )]
    EngineTimeout {
        operation: String,
        waited_ms: u64,
        /// The variable that sets this kind of call's bound.
        variable: &'static str,
    },

    /// The engine has no address pool left for a new network: per-hub networks that outlived
    /// their containers (`per_hub` of them, `unused` with no container) may hold them.
    #[error(
        "The container engine has no address pool left for the network {network} ({per_hub} per-hub networks of po-sandbox exist, {unused} of them with no container): run `po-sandbox prune` to remove the unused ones, then try again."
    )]
    EngineNetworkPoolExhausted {
        network: String,
        per_hub: usize,
        unused: usize,
        #[source]
        source: Cause,
    },

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

    /// The base image could not be pulled from its registry (`pullBase`, `up --pull`); nothing
    /// was made.
    #[error(
        "Pulling the base image {image} failed: {detail}. Check its name and that the engine reaches its registry (docker pull {image} there), or start without --pull (pullBase) to use the base the engine has."
    )]
    ImagePullFailed { image: String, detail: String },

    /// The policy file (`<poHome>/sandbox-policy.yaml`) does not parse or breaks a rule; the
    /// problem names its line and field.
    #[error(
        "The sandbox policy {file} is not good: {problem}. Fix it and save it again (`po-sandbox policy check` checks it); nothing was started or changed."
    )]
    PolicyInvalid { file: String, problem: String },

    /// A run flag (`runFlags`, `PO_SANDBOX_RUN_FLAGS`) is malformed, unknown, or would weaken
    /// the container's containment or take over a part of the spec; nothing was made.
    #[error(
        "Run flag '{flag}' (runFlags / PO_SANDBOX_RUN_FLAGS) is refused: {reason}. Remove or fix it; docs/security.md (Run flags) lists what is accepted."
    )]
    RunFlagsInvalid { flag: String, reason: String },

    /// A workspace id or path is unusable; nothing was touched.
    #[error("Workspace {what} is invalid: {reason}")]
    WorkspaceInvalid { what: String, reason: String },

    /// A workspace container could not be created, started or stopped.
    #[error("The sandbox container for workspace '{workspace}' failed: {reason}")]
    ContainerFailed {
        workspace: String,
        reason: String,
        #[source]
        source: Option<Cause>,
    },

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
    BrokerFailed {
        reason: String,
        #[source]
        source: Option<Cause>,
    },

    /// A command was to run in a workspace's sandbox, but it has no running container.
    #[error(
        "The sandbox of workspace '{workspace}' is not running: start it with `po-sandbox up {folder}` first."
    )]
    SandboxNotRunning { workspace: String, folder: String },

    /// A forwarded port's host side cannot listen: the port on the host's 127.0.0.1 is taken
    /// (or not allowed).
    #[error(
        "The host port 127.0.0.1:{port} cannot be used for the forward ({reason}): pick another (po-sandbox port <port>:<host-port>, or hostPort), or leave it out to get a free one."
    )]
    PortInUse { port: u16, reason: String },

    /// A workspace's host-executed files cannot be reviewed: it has no baseline (none was taken,
    /// or its sandbox was stopped) or the baseline cannot be read.
    #[error(
        "Workspace '{workspace}' cannot be reviewed: {reason}. A baseline is taken when its sandbox container is made (`po-sandbox up <folder>`) and removed when it is stopped; files changed before one was taken cannot be reviewed."
    )]
    ReviewUnavailable { workspace: String, reason: String },

    /// `diff` or `apply` of a workspace whose sandbox does not work on a git repository's copy.
    #[error("The sandbox of workspace '{workspace}' {reason}")]
    NotAClone { workspace: String, reason: String },

    /// `diff` or `apply` did not finish reading the copy inside the container within its bound
    /// (a very large copy, or a command stuck inside); nothing on the host was changed.
    #[error(
        "Reading the changes of workspace '{workspace}' took longer than {bound_ms} ms (PO_SANDBOX_CHANGES_TIMEOUT_MS); nothing was changed on the host: raise the bound for a very large copy, or look inside with `po-sandbox exec` for a command that hangs"
    )]
    ChangesTimeout { workspace: String, bound_ms: u64 },

    /// `apply` would change what the person made: the host branch has diverged from the
    /// agent's work, is checked out, or the host folder cannot take the work.
    #[error("Nothing was applied to {folder}: {reason}")]
    ApplyRefused { folder: String, reason: String },

    /// Called inside a sandbox container, where containers must not nest.
    #[error(
        "Refusing to manage containers from inside a sandbox container (PO_SANDBOX=1): sandboxes do not nest. Run this on the host."
    )]
    NestingRefused,

    /// One failure reported to every caller that shared the operation (a workspace start, an
    /// image build, the provider's start-up); reads exactly as the failure itself.
    #[error(transparent)]
    Shared(Arc<Error>),
}

impl Error {
    /// The stable code exposed to JS as `err.code`.
    pub fn code(&self) -> &'static str {
        match self.unshared() {
            Error::EngineUnknown { .. } => "ENGINE_UNKNOWN",
            Error::EngineContextInvalid { .. } => "ENGINE_CONTEXT_INVALID",
            Error::OptionsInvalid { .. } => "OPTIONS_INVALID",
            Error::EngineUnavailable { .. } => "ENGINE_UNAVAILABLE",
            Error::EngineRequest { .. } => "ENGINE_REQUEST_FAILED",
            Error::EngineTimeout { .. } => "ENGINE_TIMEOUT",
            Error::EngineNetworkPoolExhausted { .. } => "ENGINE_NETWORK_POOL_EXHAUSTED",
            Error::RuntimeNotInstalled { .. } => "RUNTIME_NOT_INSTALLED",
            Error::RuntimeInvalid { .. } => "RUNTIME_INVALID",
            Error::ImageBuildFailed { .. } => "IMAGE_BUILD_FAILED",
            Error::ImagePullFailed { .. } => "IMAGE_PULL_FAILED",
            Error::PolicyInvalid { .. } => "POLICY_INVALID",
            Error::RunFlagsInvalid { .. } => "RUN_FLAGS_INVALID",
            Error::WorkspaceInvalid { .. } => "WORKSPACE_INVALID",
            Error::ContainerFailed { .. } => "CONTAINER_FAILED",
            Error::ContainerUnhealthy { .. } => "CONTAINER_UNHEALTHY",
            Error::BrokerFailed { .. } => "BROKER_FAILED",
            Error::SandboxNotRunning { .. } => "SANDBOX_NOT_RUNNING",
            Error::ReviewUnavailable { .. } => "REVIEW_UNAVAILABLE",
            Error::NotAClone { .. } => "NOT_A_CLONE",
            Error::ChangesTimeout { .. } => "CHANGES_TIMEOUT",
            Error::ApplyRefused { .. } => "APPLY_REFUSED",
            Error::PortInUse { .. } => "PORT_IN_USE",
            Error::NestingRefused => "NESTING_REFUSED",
            Error::Shared(_) => unreachable!("unshared() sees through Shared"),
        }
    }

    /// A finer code than [`code`](Self::code) where the core has one, exposed to JS as
    /// `err.reasonCode`: for `ENGINE_UNAVAILABLE`, the engine report's reason code.
    pub fn reason_code(&self) -> Option<&str> {
        match self.unshared() {
            Error::EngineUnavailable { reason_code, .. } => {
                reason_code.as_deref().filter(|c| !c.is_empty())
            }
            _ => None,
        }
    }

    /// The messages of the errors under this one (its `source()` chain), outermost first.
    pub fn causes(&self) -> impl Iterator<Item = String> + '_ {
        std::iter::successors(std::error::Error::source(self), |e| e.source())
            .map(|e| e.to_string())
    }

    /// The message, then a `Caused by:` line for each underlying error whose text it does not
    /// already contain.
    pub fn message_with_causes(&self) -> String {
        let mut message = self.to_string();
        for cause in self.causes() {
            if !message.contains(&cause) {
                message.push_str("\nCaused by: ");
                message.push_str(&cause);
            }
        }
        message
    }

    /// The failure itself, through any number of [`Error::Shared`].
    pub fn unshared(&self) -> &Error {
        match self {
            Error::Shared(inner) => inner.unshared(),
            other => other,
        }
    }

    /// A shared failure for one of its callers: the error itself when no other caller holds
    /// it any more, otherwise [`Error::Shared`].
    pub fn from_shared(shared: Arc<Error>) -> Error {
        Arc::try_unwrap(shared).unwrap_or_else(Error::Shared)
    }

    /// `CONTAINER_FAILED` without an underlying error.
    pub fn container(workspace: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::ContainerFailed {
            workspace: workspace.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// `CONTAINER_FAILED` because of `cause`, whose message ends the reason (`doing: cause`).
    pub fn container_caused(
        workspace: impl Into<String>,
        doing: impl std::fmt::Display,
        cause: impl Into<Cause>,
    ) -> Error {
        let cause = cause.into();
        Error::ContainerFailed {
            workspace: workspace.into(),
            reason: format!("{doing}: {cause}"),
            source: Some(cause),
        }
    }

    /// `BROKER_FAILED` without an underlying error.
    pub fn broker(reason: impl Into<String>) -> Error {
        Error::BrokerFailed {
            reason: reason.into(),
            source: None,
        }
    }

    /// `BROKER_FAILED` because of `cause`, whose message ends the reason (`doing: cause`).
    pub fn broker_caused(doing: impl std::fmt::Display, cause: impl Into<Cause>) -> Error {
        let cause = cause.into();
        Error::BrokerFailed {
            reason: format!("{doing}: {cause}"),
            source: Some(cause),
        }
    }
}

/// Result with the core error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn caused_constructors_keep_the_words_and_the_source() {
        let e = Error::container_caused("ws1", "cannot read x", std::io::Error::other("gone"));
        assert_eq!(
            e.to_string(),
            "The sandbox container for workspace 'ws1' failed: cannot read x: gone"
        );
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("gone"));
        let e = Error::broker_caused("cannot listen", std::io::Error::other("busy"));
        assert_eq!(
            e.to_string(),
            "The credential broker failed: cannot listen: busy"
        );
        assert!(e.source().is_some());
        assert!(Error::broker("off").source().is_none());
    }

    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let e = Error::container_caused("ws1", "cannot lock", std::io::Error::other("disk full"));
        assert_eq!(e.causes().collect::<Vec<_>>(), ["disk full"]);
        assert_eq!(e.message_with_causes(), e.to_string());
        let inner = Error::broker_caused("cannot listen", std::io::Error::other("no port"));
        let outer = Error::container_caused("ws1", "no broker grant", inner);
        assert_eq!(outer.causes().count(), 2);
        assert_eq!(outer.message_with_causes(), outer.to_string());
        assert!(Error::NestingRefused.causes().next().is_none());
    }

    #[test]
    fn causes_missing_from_the_message_are_appended_once_each() {
        let e = Error::Shared(Arc::new(Error::BrokerFailed {
            reason: "listen".into(),
            source: Some(Box::new(std::io::Error::other("no port"))),
        }));
        assert_eq!(
            e.message_with_causes(),
            "The credential broker failed: listen\nCaused by: no port"
        );
    }

    #[test]
    fn sandbox_not_running_names_the_workspace_and_says_to_run_up() {
        let e = Error::SandboxNotRunning {
            workspace: "app-0123456789ab".into(),
            folder: "/home/ann/app".into(),
        };
        assert_eq!(e.code(), "SANDBOX_NOT_RUNNING");
        assert_eq!(
            e.to_string(),
            "The sandbox of workspace 'app-0123456789ab' is not running: start it with `po-sandbox up /home/ann/app` first."
        );
        assert_eq!(Error::Shared(Arc::new(e)).code(), "SANDBOX_NOT_RUNNING");
    }

    #[test]
    fn a_shared_error_reads_and_codes_as_the_error_itself() {
        let e = Error::EngineUnavailable {
            reason: "Docker is not running".into(),
            reason_code: Some("ENGINE_STOPPED".into()),
        };
        assert_eq!(e.to_string(), "Docker is not running [ENGINE_STOPPED]");
        let shared = Arc::new(e);
        let again = Error::Shared(shared.clone());
        assert_eq!(again.to_string(), shared.to_string());
        assert_eq!(again.code(), "ENGINE_UNAVAILABLE");
        assert_eq!(again.reason_code(), Some("ENGINE_STOPPED"));
        drop(again);
        // The last holder gets the error itself back.
        assert!(matches!(
            Error::from_shared(shared),
            Error::EngineUnavailable { .. }
        ));
        let plain = Error::EngineUnavailable {
            reason: "remote".into(),
            reason_code: None,
        };
        assert_eq!(
            (plain.to_string().as_str(), plain.reason_code()),
            ("remote", None)
        );
    }
}
