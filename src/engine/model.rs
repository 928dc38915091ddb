//! The Engine API's data shapes that the layer reads and writes (a container's create body,
//! an inspect answer, an event, an exec's streams), named here so that callers never name
//! the client that defines them. They are data, not decisions: how a call failed is
//! [`EngineError`](super::EngineError)'s to say.

use std::pin::Pin;

pub(crate) use bollard::container::LogOutput;
pub(crate) use bollard::exec::StartExecOptions;
pub(crate) use bollard::models::{
    BuildInfo, ContainerConfig, ContainerCreateBody, ContainerInspectResponse, ContainerSummary,
    ContainerSummaryStateEnum, DeviceRequest, EventMessage, ExecConfig, ExecInspectResponse,
    HealthConfig, HostConfig, Mount, MountType, Network, NetworkCreateRequest, NetworkInspect,
    PortBinding, ResourcesUlimits, RestartPolicy, RestartPolicyNameEnum, VolumeCreateRequest,
};
#[cfg(test)]
pub(crate) use bollard::models::{EventActor, IpamConfig, PortSummary};
use futures_util::stream::BoxStream;
use tokio::io::AsyncWrite;

use super::fault::EngineResult;

/// A started exec: attached, its output stream and its input; or detached.
pub(crate) enum ExecStarted {
    /// Attached to the exec's streams.
    Attached {
        /// Its output, chunk by chunk (stdout and stderr apart, or one terminal stream).
        output: BoxStream<'static, EngineResult<LogOutput>>,
        /// Its input.
        input: Pin<Box<dyn AsyncWrite + Send>>,
    },
    /// Started detached: nothing to read.
    Detached,
}
