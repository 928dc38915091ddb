//! Lifecycle events and the states they carry, as JS sees them: string unions for states and
//! a discriminated union on `type` for events.

use std::sync::Arc;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::events::{self as core, Event, EventBus};
use crate::provider as status;

/// The provider's state.
#[napi(string_enum = "lowercase")]
pub enum ProviderState {
    /// Start-up runs (engine, runtime bundle, image).
    Starting,
    /// The service is usable.
    Ready,
    /// Start-up failed; `reason` says why and what to do.
    Unavailable,
}

mirror_enum!(
    ProviderState = status::ProviderState {
        Starting,
        Ready,
        Unavailable
    }
);

/// A configured workspace's place in start-up.
#[napi(string_enum = "lowercase")]
pub enum WorkspacePhase {
    /// Waiting for start-up.
    Pending,
    /// Being adopted or created.
    Starting,
    /// Its container runs.
    Running,
    /// Starting it failed (`error`, `errorCode`).
    Failed,
    /// Its sandbox is not `container`.
    Skipped,
    /// Stopped by a stop of every container.
    Stopped,
}

mirror_enum!(
    WorkspacePhase = status::WorkspacePhase {
        Pending,
        Starting,
        Running,
        Failed,
        Skipped,
        Stopped
    }
);

/// Where an image is.
#[napi(string_enum = "lowercase")]
pub enum ImagePhase {
    /// Looking for the tag on the engine.
    Checking,
    /// The engine has it: nothing to build.
    Cached,
    /// A build started.
    Building,
    /// One line of build output (`message`).
    Progress,
    /// The build finished and the tag exists.
    Built,
    /// The build failed (`message` says where).
    Failed,
}

mirror_enum!(
    ImagePhase = core::ImagePhase {
        Checking,
        Cached,
        Building,
        Progress,
        Built,
        Failed
    }
);

/// What happened to a workspace's container.
#[napi(string_enum = "lowercase")]
pub enum WorkspaceChange {
    /// Work on it began.
    Starting,
    /// A running container that satisfies the spec was taken over.
    Adopted,
    /// A new container was created.
    Created,
    /// A container that drifted from the spec is being replaced (`reason`).
    Replaced,
    /// Its server answers its health path.
    Ready,
    /// It was stopped on request.
    Stopped,
    /// A container was removed (`reason`).
    Removed,
    /// Starting it failed (`reason`).
    Failed,
}

mirror_enum!(
    WorkspaceChange = core::WorkspaceChange {
        Starting,
        Adopted,
        Created,
        Replaced,
        Ready,
        Stopped,
        Removed,
        Failed
    }
);

/// A lifecycle event; narrow on `type`.
#[napi(discriminant = "type", discriminant_case = "lowercase")]
pub enum SandboxEvent {
    /// Engine detection finished.
    Engine {
        /// A usable engine answered.
        available: bool,
        /// `docker` / `podman`.
        engine: Option<String>,
        endpoint: Option<String>,
        /// Why none is usable, and what to do.
        reason: Option<String>,
        /// The reason's code (as `checkEngine`'s `reasonCode`).
        code: Option<String>,
    },
    /// The runtime bundle was checked.
    Runtime {
        /// The bundle is valid.
        ok: bool,
        /// The bundle version.
        version: Option<String>,
        reason: Option<String>,
        /// `RUNTIME_NOT_INSTALLED` / `RUNTIME_INVALID`.
        code: Option<String>,
    },
    /// Image progress.
    Image {
        phase: ImagePhase,
        /// `po-sandbox:<digest>`.
        tag: String,
        /// A build output line or a note.
        message: Option<String>,
    },
    /// A workspace's container changed.
    Workspace {
        workspace_id: String,
        state: WorkspaceChange,
        container_id: Option<String>,
        /// Why (replacement, removal, failure).
        reason: Option<String>,
    },
    /// The provider changed state.
    Provider {
        state: ProviderState,
        /// Why it is unavailable, and what to do.
        reason: Option<String>,
        /// The code of that reason.
        code: Option<String>,
    },
}

impl From<&Event> for SandboxEvent {
    fn from(e: &Event) -> Self {
        match e.clone() {
            Event::Engine {
                available,
                engine,
                endpoint,
                reason,
                reason_code,
            } => SandboxEvent::Engine {
                available,
                engine,
                endpoint,
                reason,
                code: reason_code,
            },
            Event::Runtime {
                ok,
                version,
                reason,
                code,
            } => SandboxEvent::Runtime {
                ok,
                version,
                reason,
                code,
            },
            Event::Image {
                phase,
                tag,
                message,
            } => SandboxEvent::Image {
                phase: phase.into(),
                tag,
                message,
            },
            Event::Workspace {
                workspace_id,
                state,
                container_id,
                reason,
            } => SandboxEvent::Workspace {
                workspace_id,
                state: state.into(),
                container_id,
                reason,
            },
            Event::Provider {
                state,
                reason,
                code,
            } => SandboxEvent::Provider {
                state: state.into(),
                reason,
                code,
            },
        }
    }
}

/// The JS shape of an event listener: `(event: SandboxEvent) => void`, weak (it never keeps
/// Node alive) and not error-first.
type EventCallback = ThreadsafeFunction<SandboxEvent, (), SandboxEvent, napi::Status, false, true>;

/// Subscribes a JS callback to a bus.
pub fn subscribe(events: &EventBus, callback: Function<SandboxEvent, ()>) -> napi::Result<()> {
    let tsfn: EventCallback = callback
        .build_threadsafe_function()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    events.subscribe(Arc::new(move |event| {
        tsfn.call(
            SandboxEvent::from(event),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }));
    Ok(())
}
