//! Typed lifecycle events: engine checked, runtime bundle checked, image build progress,
//! workspace state changes — each with the reason a person needs.

use std::sync::{Arc, Mutex};

/// One lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// Engine detection finished.
    Engine {
        available: bool,
        engine: Option<String>,
        endpoint: Option<String>,
        reason: Option<String>,
        reason_code: Option<String>,
    },
    /// The runtime bundle was checked.
    Runtime {
        ok: bool,
        version: Option<String>,
        reason: Option<String>,
        code: Option<String>,
    },
    /// Image: `checking`, `cached`, `building`, `progress`, `built` or `failed`.
    Image {
        phase: String,
        tag: String,
        message: Option<String>,
    },
    /// A workspace changed state: `starting`, `adopted`, `created`, `replaced`, `ready`,
    /// `stopped`, `removed` or `failed`.
    Workspace {
        workspace_id: String,
        state: String,
        container_id: Option<String>,
        reason: Option<String>,
    },
    /// The provider changed state: `starting`, `ready`, `unavailable` or `stopped`.
    Provider {
        state: String,
        reason: Option<String>,
        code: Option<String>,
    },
}

/// A listener.
pub type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// Fans events out to every listener; cheap to clone.
#[derive(Clone, Default)]
pub struct EventBus {
    listeners: Arc<Mutex<Vec<Listener>>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus").finish_non_exhaustive()
    }
}

impl EventBus {
    /// Adds a listener.
    pub fn subscribe(&self, listener: Listener) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(listener);
    }

    /// Sends an event to every listener (and to `tracing`).
    pub fn emit(&self, event: Event) {
        tracing::debug!(?event, "po-sandbox event");
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for l in listeners {
            l(&event);
        }
    }

    /// A workspace event.
    pub fn workspace(
        &self,
        id: &str,
        state: &str,
        container_id: Option<&str>,
        reason: Option<String>,
    ) {
        self.emit(Event::Workspace {
            workspace_id: id.to_string(),
            state: state.to_string(),
            container_id: container_id.map(str::to_string),
            reason,
        });
    }

    /// An image event.
    pub fn image(&self, phase: &str, tag: &str, message: Option<String>) {
        self.emit(Event::Image {
            phase: phase.to_string(),
            tag: tag.to_string(),
            message,
        });
    }
}
