//! Typed lifecycle events: engine checked, runtime bundle checked, image build progress,
//! workspace state changes — each with the reason a person needs.

use std::sync::{Arc, Mutex};

use crate::lock::Locked;
use napi_derive::napi;

/// The provider's state.
#[napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderState {
    /// Start-up runs (engine, runtime bundle, image).
    Starting,
    /// The service is usable.
    Ready,
    /// Start-up failed; `reason` says why and what to do.
    Unavailable,
}

/// Where an image is: `checking`, `cached`, `building`, `progress`, `built` or `failed`; a
/// base pulled from its registry (`pullBase`): `pulling`, `progress`, `pulled` or `failed`,
/// on the base's name.
#[napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImagePhase {
    /// Looking for the tag on the engine.
    Checking,
    /// The engine has it: nothing to build.
    Cached,
    /// A build started.
    Building,
    /// One line of build output.
    Progress,
    /// The build finished and the tag exists.
    Built,
    /// The build failed (the message says where), or the pull did.
    Failed,
    /// A pull of the base from its registry started.
    Pulling,
    /// The pull finished (the message says whether the base changed).
    Pulled,
}

/// What a change of the policy file did.
#[napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyState {
    /// Its host-side values (the allow lists, the name overrides) are in force for the
    /// running containers.
    Applied,
    /// A container-side value (the network mode) changed: it applies when the hub starts
    /// again, which replaces the containers.
    Pending,
    /// It does not parse or breaks a rule: nothing changed, the last good policy stays.
    Invalid,
}

/// What happened to a workspace's container.
#[napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceChange {
    /// Work on it began.
    Starting,
    /// A running container that satisfies the spec was taken over.
    Adopted,
    /// A new container was created.
    Created,
    /// A container that drifted from the spec is being replaced.
    Replaced,
    /// Its server answers its health path.
    Ready,
    /// It was stopped on request.
    Stopped,
    /// A container was removed (stopped leftover, name holder, drift).
    Removed,
    /// Starting it failed.
    Failed,
    /// Its process exited on its own (the engine's event; it is restarted by its policy).
    Died,
    /// The engine restarted it after it died (or after an engine restart).
    Restarted,
    /// The kernel killed a process in it for lack of memory.
    Oom,
    /// Its health check failed.
    Unhealthy,
}

/// A lifecycle event (`SandboxEvent` in JS, a union discriminated by `type`).
#[napi(
    discriminant = "type",
    discriminant_case = "lowercase",
    js_name = "SandboxEvent",
    object_from_js = false
)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
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
    /// One connection through a workspace's egress proxy (allowlist mode): a CONNECT tunnel or
    /// a plain-HTTP request, when it closes (at once when denied). Never a header beyond the
    /// destination, never a body.
    Egress {
        workspace_id: String,
        /// The broker grant it came in on.
        grant: String,
        /// The destination host, canonical (lowercase, no trailing dot, addresses as numbers);
        /// the authority as sent when it could not be read.
        host: String,
        /// The destination port (0 when it could not be read).
        port: u32,
        /// `allowed`, `denied` or `failed` (allowed, but the upstream could not be reached).
        decision: crate::broker::egress::EgressDecision,
        /// Why it was denied or failed.
        reason: Option<String>,
        /// Bytes sent to the upstream.
        bytes_up: i64,
        /// Bytes received from the upstream.
        bytes_down: i64,
        duration_ms: i64,
    },
    /// The policy file (`<poHome>/sandbox-policy.yaml`) changed while the hub runs.
    Policy {
        state: PolicyState,
        /// What changed and where it applies, or what is wrong with the file (its line and
        /// field) and that the last good policy stays in force.
        message: String,
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

/// A listener.
pub type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// How many past events a late subscriber is replayed (image progress lines are dropped
/// first, then the oldest).
pub const REPLAY_LIMIT: usize = 256;

#[derive(Default)]
struct BusState {
    listeners: Vec<Listener>,
    history: std::collections::VecDeque<Event>,
}

/// Fans events out to every listener; cheap to clone. Keeps the last [`REPLAY_LIMIT`] events
/// so that a listener subscribed after start-up began (start-up runs in the background from
/// the moment the layer is registered) still sees the engine, runtime and provider events it
/// would otherwise have missed. Every event reaches every listener exactly once, in order.
#[derive(Clone, Default)]
pub struct EventBus {
    state: Arc<Mutex<BusState>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus").finish_non_exhaustive()
    }
}

impl EventBus {
    /// Adds a listener and replays to it, first, the events emitted so far. Listeners run under
    /// the bus's lock: a listener must not emit into, or subscribe to, the same bus.
    pub fn subscribe(&self, listener: Listener) {
        // Replay and registration happen under the lock that `emit` records under, so an
        // event is either in the replayed history or delivered live, never both or neither.
        let mut state = self.state.locked();
        for event in &state.history {
            listener(event);
        }
        state.listeners.push(listener);
    }

    /// Sends an event to every listener (and to `tracing`).
    pub fn emit(&self, event: Event) {
        tracing::debug!(?event, "po-sandbox event");
        let mut state = self.state.locked();
        if state.history.len() == REPLAY_LIMIT {
            // Image build progress goes first, so a long build does not push the engine,
            // runtime, provider and workspace events out of the replay.
            let progress = state.history.iter().position(|e| {
                matches!(
                    e,
                    Event::Image {
                        phase: ImagePhase::Progress,
                        ..
                    }
                )
            });
            match progress {
                Some(i) => {
                    state.history.remove(i);
                }
                None => {
                    state.history.pop_front();
                }
            }
        }
        state.history.push_back(event.clone());
        for l in &state.listeners {
            l(&event);
        }
    }

    /// A workspace event.
    pub fn workspace(
        &self,
        id: &str,
        state: WorkspaceChange,
        container_id: Option<&str>,
        reason: Option<String>,
    ) {
        self.emit(Event::Workspace {
            workspace_id: id.to_string(),
            state,
            container_id: container_id.map(str::to_string),
            reason,
        });
    }

    /// An image event.
    pub fn image(&self, phase: ImagePhase, tag: &str, message: Option<String>) {
        self.emit(Event::Image {
            phase,
            tag: tag.to_string(),
            message,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(state: ProviderState) -> Event {
        Event::Provider {
            state,
            reason: None,
            code: None,
        }
    }

    fn recorder() -> (Listener, Arc<Mutex<Vec<Event>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        (
            Arc::new(move |e: &Event| s.lock().unwrap().push(e.clone())),
            seen,
        )
    }

    #[test]
    fn a_late_listener_gets_the_history_then_live_events_once_each() {
        let bus = EventBus::default();
        bus.emit(provider(ProviderState::Starting));
        bus.emit(provider(ProviderState::Unavailable));
        let (l, seen) = recorder();
        bus.subscribe(l);
        bus.emit(provider(ProviderState::Ready));
        let states: Vec<_> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| match e {
                Event::Provider { state, .. } => *state,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            states,
            [
                ProviderState::Starting,
                ProviderState::Unavailable,
                ProviderState::Ready
            ]
        );
    }

    #[test]
    fn a_long_build_does_not_push_the_provider_events_out_of_the_replay() {
        let bus = EventBus::default();
        bus.emit(provider(ProviderState::Starting));
        for i in 0..REPLAY_LIMIT * 2 {
            bus.image(ImagePhase::Progress, "t", Some(i.to_string()));
        }
        bus.emit(provider(ProviderState::Ready));
        let (l, seen) = recorder();
        bus.subscribe(l);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), REPLAY_LIMIT);
        assert_eq!(seen[0], provider(ProviderState::Starting));
        assert_eq!(seen[REPLAY_LIMIT - 1], provider(ProviderState::Ready));
    }

    #[test]
    fn the_history_is_bounded_and_drops_the_oldest() {
        let bus = EventBus::default();
        for i in 0..REPLAY_LIMIT + 10 {
            bus.image(ImagePhase::Progress, "t", Some(i.to_string()));
        }
        let (l, seen) = recorder();
        bus.subscribe(l);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), REPLAY_LIMIT);
        assert_eq!(
            seen[0],
            Event::Image {
                phase: ImagePhase::Progress,
                tag: "t".into(),
                message: Some("10".into())
            }
        );
    }
}
