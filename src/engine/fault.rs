//! How an engine call fails, in the layer's own words. The one production client classifies
//! its errors here, once, at the seam; callers decide on these kinds (gone, taken, already
//! so, …) and never on an HTTP status or an error's text, so every transport (a local socket,
//! SSH, TLS) and the in-memory engine fail alike.

use std::fmt;
use std::time::Duration;

use super::operation::Operation;
use crate::error::Error;

/// An underlying failure kept as the error's `source()`.
type Cause = Box<dyn std::error::Error + Send + Sync>;

/// What the engine said when it answered with an error: its status and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status of the answer (`0` when the engine answered in a stream, with none).
    pub status: u16,
    /// The engine's own message.
    pub message: String,
}

impl Answer {
    /// An answer of `status` saying `message`.
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Answer {
        Answer {
            status,
            message: message.into(),
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            0 => write!(f, "the engine answered: {}", self.message),
            status => write!(f, "the engine answered {status}: {}", self.message),
        }
    }
}

/// How an engine call failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// What the call is about does not exist (a container, network, volume, image or exec).
    #[error("{0}")]
    NotFound(Answer),
    /// The name is taken, or another change of the same thing is under way.
    #[error("{0}")]
    Conflict(Answer),
    /// The thing is already as asked (a started container started, a stopped one stopped).
    #[error("{0}")]
    NotModified(Answer),
    /// A container cannot be made or started because its network is gone.
    #[error("{0}")]
    NetworkGone(Answer),
    /// A network name names more than one network (two were made at once by racing hubs).
    #[error("{0}")]
    NetworkAmbiguous(Answer),
    /// The engine has no address pool left for a new network.
    #[error("{0}")]
    PoolExhausted(Answer),
    /// A passing fault of the engine's own that the same call, tried once more, gets past
    /// (a network interface that went while the engine read it; Podman's internal error at
    /// a quick start).
    #[error("{0}")]
    Passing(Answer),
    /// The call's bound fired: the engine did not answer in time.
    #[error("the engine did not answer in time")]
    Timeout,
    /// The engine could not be reached or its connection broke (no answer at all).
    #[error("the engine could not be reached: {0}")]
    Unavailable(#[source] Cause),
    /// Any other failure: an answer with an error, or a reply the client could not read.
    #[error("{answer}")]
    Other {
        answer: Answer,
        #[source]
        cause: Option<Cause>,
    },
}

/// An engine call's outcome.
pub(crate) type EngineResult<T> = std::result::Result<T, EngineError>;

impl EngineError {
    /// The engine's answer, when it answered.
    pub(crate) fn answer(&self) -> Option<&Answer> {
        match self {
            EngineError::NotFound(a)
            | EngineError::Conflict(a)
            | EngineError::NotModified(a)
            | EngineError::NetworkGone(a)
            | EngineError::NetworkAmbiguous(a)
            | EngineError::PoolExhausted(a)
            | EngineError::Passing(a)
            | EngineError::Other { answer: a, .. } => Some(a),
            EngineError::Timeout | EngineError::Unavailable(_) => None,
        }
    }

    /// Whether the engine did not answer at all (a timeout or no connection), as opposed to
    /// answering with an error.
    pub(crate) fn not_answering(&self) -> bool {
        matches!(self, EngineError::Timeout | EngineError::Unavailable(_))
    }

    /// The engine's answer of `status` saying `message`, classified: the one place that
    /// reads an engine's status numbers and error texts.
    pub(crate) fn answered(status: u16, message: impl Into<String>) -> EngineError {
        let answer = Answer::new(status, message);
        let text = answer.message.to_ascii_lowercase();
        // The texts first: engines answer these with varying statuses (Docker: an ambiguous
        // network name is a 404).
        match status {
            _ if text.contains("is ambiguous") => EngineError::NetworkAmbiguous(answer),
            _ if POOL_EXHAUSTED.iter().any(|t| text.contains(t)) => {
                EngineError::PoolExhausted(answer)
            }
            404 => EngineError::NotFound(answer),
            409 => EngineError::Conflict(answer),
            304 => EngineError::NotModified(answer),
            500 if PASSING.iter().any(|t| text.contains(t)) => EngineError::Passing(answer),
            _ if mentions_network(&answer) => EngineError::NetworkGone(answer),
            _ => EngineError::Other {
                answer,
                cause: None,
            },
        }
    }
}

impl EngineError {
    /// The failure of a container's create or start: there, a missing network is the
    /// container's network gone, not the container missing.
    pub(crate) fn of_container(self) -> EngineError {
        match self {
            EngineError::NotFound(a) if mentions_network(&a) => EngineError::NetworkGone(a),
            other => other,
        }
    }
}

/// Whether an answer says a network was not found.
fn mentions_network(answer: &Answer) -> bool {
    let text = answer.message.to_ascii_lowercase();
    text.contains("network") && text.contains("not found")
}

impl Error {
    /// An engine request that failed: `ENGINE_TIMEOUT` when the client's bound fired (`bound`:
    /// the client's per-call timeout), else `ENGINE_REQUEST_FAILED`.
    pub fn engine(bound: Duration, operation: Operation, source: EngineError) -> Error {
        match source {
            EngineError::Timeout => Error::EngineTimeout {
                variable: operation.bound_variable(),
                operation: operation.to_string(),
                waited_ms: bound.as_millis() as u64,
            },
            source => Error::EngineRequest {
                operation: operation.to_string(),
                source: Box::new(source),
            },
        }
    }

    /// How the engine failed, when this is a failed engine request (or a container failure
    /// the engine caused).
    pub(crate) fn engine_fault(&self) -> Option<&EngineError> {
        match self.unshared() {
            Error::EngineRequest { source, .. } => source.downcast_ref::<EngineError>(),
            Error::ContainerFailed {
                source: Some(cause),
                ..
            } => cause.downcast_ref::<EngineError>(),
            _ => None,
        }
    }
}

/// What engines say when no address pool is left (Docker; Podman).
const POOL_EXHAUSTED: [&str; 2] = [
    "non-overlapping ipv4 address pool",
    "could not find free subnet",
];

/// Passing faults: a network interface gone while Docker read it; Podman's internal error
/// when a container starts too quickly after another.
const PASSING: [&str; 2] = ["no such network interface", "internal libpod error"];

impl From<std::io::Error> for EngineError {
    fn from(e: std::io::Error) -> EngineError {
        EngineError::Other {
            answer: Answer::new(0, e.to_string()),
            cause: Some(Box::new(e)),
        }
    }
}

impl From<bollard::errors::Error> for EngineError {
    fn from(e: bollard::errors::Error) -> EngineError {
        use bollard::errors::Error as B;
        match e {
            B::DockerResponseServerError {
                status_code,
                message,
            } => EngineError::answered(status_code, message),
            B::RequestTimeoutError => EngineError::Timeout,
            B::DockerStreamError { error } => EngineError::answered(0, error),
            e @ (B::JsonDataError { .. }
            | B::JsonSerdeError { .. }
            | B::DockerContainerWaitError { .. }
            | B::APIVersionParseError {}
            | B::StrParseError { .. }
            | B::StrFmtError { .. }
            | B::URLEncodedError { .. }) => EngineError::Other {
                answer: Answer::new(0, e.to_string()),
                cause: Some(Box::new(e)),
            },
            // A transport that says why it could not connect (an SSH host key, a TLS
            // certificate) is the reason, in its own words.
            other => match super::transport::failure_in(&other) {
                Some(failure) => EngineError::Unavailable(Box::new(failure.clone())),
                None => EngineError::Unavailable(Box::new(other)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_call_that_timed_out_is_engine_timeout_naming_the_operation_and_bound() {
        use crate::engine::Resource;
        let bound = std::time::Duration::from_secs(7);
        let e = Error::engine(
            bound,
            Operation::List(Resource::Container),
            EngineError::Timeout,
        );
        assert_eq!(e.code(), "ENGINE_TIMEOUT");
        assert!(
            e.to_string().starts_with(
                "The container engine did not answer in time to list containers (bound: 7000 ms, PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS)"
            ),
            "{e}"
        );
        let change = Error::engine(
            bound,
            Operation::Create(Resource::Container, "x".into()),
            EngineError::Timeout,
        );
        assert!(
            change
                .to_string()
                .contains("(bound: 7000 ms, PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS)"),
            "{change}"
        );
        let other = Error::engine(
            bound,
            Operation::Start("x".into()),
            EngineError::Unavailable(Box::new(std::io::Error::other("gone"))),
        );
        assert_eq!(other.code(), "ENGINE_REQUEST_FAILED");
    }

    #[test]
    fn an_engine_request_keeps_the_engine_error_as_its_source() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::EngineRequest {
            operation: "list containers".into(),
            source: Box::new(EngineError::Unavailable(Box::new(io))),
        };
        let source = std::error::Error::source(&e).expect("a source");
        assert!(e.to_string().ends_with(&source.to_string()));
        assert!(
            e.to_string()
                .starts_with("The container engine failed to list containers: ")
        );
        assert!(matches!(
            source.downcast_ref::<EngineError>(),
            Some(EngineError::Unavailable(_))
        ));
    }

    #[test]
    fn engine_fault_reads_through_shared_and_container_failures() {
        let e = Error::engine(
            Duration::from_secs(1),
            Operation::Start("x".into()),
            EngineError::answered(404, "network n not found").of_container(),
        );
        assert!(matches!(
            e.engine_fault(),
            Some(EngineError::NetworkGone(_))
        ));
        let shared = Error::Shared(std::sync::Arc::new(e));
        assert!(matches!(
            shared.engine_fault(),
            Some(EngineError::NetworkGone(_))
        ));
        let caused = Error::container_caused("w", "start", EngineError::answered(409, "taken"));
        assert!(matches!(
            caused.engine_fault(),
            Some(EngineError::Conflict(_))
        ));
        assert!(Error::container("w", "no").engine_fault().is_none());
    }

    #[test]
    fn answers_are_classified_once_by_status_and_text() {
        let kind = |status, text: &str| match EngineError::answered(status, text) {
            EngineError::NotFound(_) => "not found",
            EngineError::Conflict(_) => "conflict",
            EngineError::NotModified(_) => "not modified",
            EngineError::NetworkGone(_) => "network gone",
            EngineError::NetworkAmbiguous(_) => "ambiguous",
            EngineError::PoolExhausted(_) => "pool",
            EngineError::Passing(_) => "passing",
            _ => "other",
        };
        assert_eq!(kind(404, "No such container: x"), "not found");
        assert_eq!(kind(404, "network po-o-net not found"), "not found");
        assert!(matches!(
            EngineError::answered(404, "network po-o-net not found").of_container(),
            EngineError::NetworkGone(_)
        ));
        assert!(matches!(
            EngineError::answered(404, "No such image: x").of_container(),
            EngineError::NotFound(_)
        ));
        assert_eq!(
            kind(
                500,
                "failed to set up container networking: network x not found"
            ),
            "network gone"
        );
        assert_eq!(
            kind(409, "Conflict. The container name is in use"),
            "conflict"
        );
        assert_eq!(kind(304, ""), "not modified");
        assert_eq!(
            kind(500, "network name po-x is ambiguous (2 matches)"),
            "ambiguous"
        );
        assert_eq!(
            kind(
                404,
                "network po-x is ambiguous (2 matches found based on name)"
            ),
            "ambiguous"
        );
        assert_eq!(
            kind(
                500,
                "could not find an available, non-overlapping IPv4 address pool"
            ),
            "pool"
        );
        assert_eq!(
            kind(500, "could not find free subnet from subnet pools"),
            "pool"
        );
        assert_eq!(kind(500, "no such network interface"), "passing");
        assert_eq!(kind(500, "internal libpod error"), "passing");
        assert_eq!(kind(400, "internal libpod error"), "other");
        assert_eq!(kind(500, "something else"), "other");
    }

    #[test]
    fn transport_failures_are_unavailable_and_timeouts_their_own() {
        let timeout: EngineError = bollard::errors::Error::RequestTimeoutError.into();
        assert!(matches!(timeout, EngineError::Timeout));
        assert!(timeout.not_answering());
        let io: EngineError = bollard::errors::Error::IOError {
            err: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        }
        .into();
        assert!(matches!(io, EngineError::Unavailable(_)));
        assert!(io.not_answering());
        let answered: EngineError = bollard::errors::Error::DockerResponseServerError {
            status_code: 500,
            message: "boom".into(),
        }
        .into();
        assert!(!answered.not_answering());
        assert_eq!(answered.to_string(), "the engine answered 500: boom");
        assert_eq!(answered.answer().map(|a| a.status), Some(500));
    }
}
