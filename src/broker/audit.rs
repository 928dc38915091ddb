//! The broker's audit: one [`AuditEvent`] per request and one [`EgressEvent`] per egress tunnel
//! or plain request, each logged and handed to every listener. [`Audit`] is the handle the
//! request path and the egress proxy report to.

use std::sync::{Arc, Mutex};

use crate::lock::Locked;

/// The log target of the audit's lines: the server's, where they were first written, so a
/// `PO_SANDBOX_LOG` filter naming it still selects them.
const LOG_TARGET: &str = "po_sandbox::broker::server";

/// One request, for audit: never a key, a token or a query string; a refused request's method
/// and path only as far as the rules vouched for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    pub grant: Option<String>,
    pub workspace: Option<String>,
    pub provider: Option<String>,
    /// The method, or `(other)` for one the broker does not forward.
    pub method: String,
    /// The path without its query; for a request refused before the token check only
    /// `/<provider>/…` (or `/…`).
    pub path: String,
    pub status: u16,
    /// Response body bytes sent to the client.
    pub bytes: u64,
    pub duration_ms: u64,
    /// Why the broker refused or failed, when it did.
    pub error: Option<String>,
}

/// An audit listener.
pub type AuditListener = Arc<dyn Fn(&AuditEvent) + Send + Sync>;

/// How a destination was decided.
#[napi_derive::napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressDecision {
    /// Let through (the event comes when the connection closes).
    Allowed,
    /// Refused by the policy (403, or a refused tunnel).
    Denied,
    /// Allowed, but the upstream could not be reached.
    Failed,
}

/// One tunnel or plain-HTTP request, for audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressEvent {
    pub grant: String,
    pub workspace: String,
    /// The destination's host in canonical form, or the authority as sent when unreadable.
    pub host: String,
    /// 0 when unreadable.
    pub port: u16,
    pub decision: EgressDecision,
    /// Why it was denied or failed.
    pub reason: Option<String>,
    /// Bytes sent to the upstream (the TLS stream, or the request as sent).
    pub bytes_up: u64,
    /// Bytes received from the upstream.
    pub bytes_down: u64,
    pub duration_ms: u64,
}

/// An egress audit listener.
pub type EgressListener = Arc<dyn Fn(&EgressEvent) + Send + Sync>;

/// The listeners of both kinds of event. The broker holds one; each forwarded answer and each
/// egress scope holds it too.
#[derive(Default)]
pub struct Audit {
    requests: Mutex<Vec<AuditListener>>,
    egress: Mutex<Vec<EgressListener>>,
}

impl Audit {
    /// Adds a request listener.
    pub fn on_request(&self, listener: AuditListener) {
        self.requests.locked().push(listener);
    }

    /// Logs a request and hands it to every request listener.
    pub fn request(&self, event: AuditEvent) {
        tracing::info!(
            target: LOG_TARGET,
            grant = event.grant.as_deref().unwrap_or("-"),
            provider = event.provider.as_deref().unwrap_or("-"),
            method = %event.method,
            path = %event.path,
            status = event.status,
            bytes = event.bytes,
            duration_ms = event.duration_ms,
            error = event.error.as_deref().unwrap_or(""),
            "broker request"
        );
        let listeners = self.requests.locked().clone();
        for l in listeners {
            l(&event);
        }
    }

    /// Adds an egress listener.
    pub fn on_egress(&self, listener: EgressListener) {
        self.egress.locked().push(listener);
    }

    /// Logs an egress tunnel or plain request and hands it to every egress listener.
    pub fn egress(&self, event: EgressEvent) {
        tracing::info!(
            target: LOG_TARGET,
            grant = %event.grant,
            workspace = %event.workspace,
            host = %event.host,
            port = event.port,
            decision = ?event.decision,
            reason = event.reason.as_deref().unwrap_or(""),
            bytes_up = event.bytes_up,
            bytes_down = event.bytes_down,
            duration_ms = event.duration_ms,
            "egress connection"
        );
        let listeners = self.egress.locked().clone();
        for l in listeners {
            l(&event);
        }
    }
}
