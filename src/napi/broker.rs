//! `startCredentialBroker` and the `CredentialBroker` class.

use std::collections::HashMap;
use std::sync::Arc;

use napi::Env;
use napi::JsValue;
use napi::bindgen_prelude::{FromNapiValue, Function, PromiseRaw, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use super::errors::{coded, object_arg, promise, required_arg};
use super::events::listener;
use crate::broker::grant::BrokerGrant;
use crate::broker::server::{AuditEvent, Broker, BrokerOptions, GrantRequest};

/// Options of `startCredentialBroker`.
#[napi(object, js_name = "CredentialBrokerOptions")]
#[derive(Default)]
pub struct JsCredentialBrokerOptions {
    /// The host environment holding the real keys and `<PROVIDER>_BASE_URL` overrides
    /// (default `process.env`). `PO_SANDBOX_BROKER=0` there turns the broker off.
    pub env: Option<HashMap<String, Option<String>>>,
    /// Where per-grant socket folders are made (default `$XDG_RUNTIME_DIR/po-broker`, else
    /// `<tmpdir>/po-broker-<uid>`); keep it short: socket paths are limited to ~100 bytes.
    pub socket_dir: Option<String>,
    /// Also listen on `127.0.0.1:<ephemeral>` for TCP grants (VM engines). Never another address.
    pub tcp: Option<bool>,
}

/// What a grant is for.
#[napi(object, js_name = "GrantOptions")]
pub struct JsGrantOptions {
    /// The workspace id.
    pub workspace: String,
    /// Providers to broker (default: every carried provider with a key on the host).
    pub providers: Option<Vec<String>>,
    /// `socket` (default; Linux, native engines) or `tcp` (VM engines).
    #[napi(js_name = "transport", ts_type = "RouteKind")]
    pub route: Option<String>,
    /// `uid:gid` to own the socket and its folder (the container's user).
    pub user: Option<String>,
    /// The socket path the container sees (`PO_BROKER_SOCKET`), where you bind-mount
    /// `route.hostDir` (e.g. `/run/po-broker/broker.sock`); default: the host path, for a
    /// process on the host.
    pub container_socket_path: Option<String>,
    /// The host name a TCP route is reached by (default `host.docker.internal`).
    pub container_host: Option<String>,
}

/// What `revoke` reads of a grant: its id.
#[napi(object, js_name = "GrantRef")]
pub struct JsGrantRef {
    /// The grant id.
    pub id: String,
}

/// One brokered request (never a key, a token or a query string).
#[napi(object, js_name = "BrokerAuditEvent")]
pub struct JsBrokerAuditEvent {
    pub grant: Option<String>,
    pub workspace: Option<String>,
    pub provider: Option<String>,
    pub method: String,
    /// The path, without its query.
    pub path: String,
    pub status: u32,
    /// Response bytes sent back.
    pub bytes: f64,
    pub duration_ms: f64,
    /// Why the broker refused or failed, when it did.
    pub error: Option<String>,
}

impl From<&AuditEvent> for JsBrokerAuditEvent {
    fn from(e: &AuditEvent) -> Self {
        JsBrokerAuditEvent {
            grant: e.grant.clone(),
            workspace: e.workspace.clone(),
            provider: e.provider.clone(),
            method: e.method.clone(),
            path: e.path.clone(),
            status: e.status as u32,
            bytes: e.bytes as f64,
            duration_ms: e.duration_ms as f64,
            error: e.error.clone(),
        }
    }
}

/// The host-side credential broker: per-grant tokens in, real keys out, to each provider's
/// fixed upstream.
#[napi]
pub struct CredentialBroker {
    inner: Broker,
}

/// Starts the broker. Resolves with a `CredentialBroker`; rejects with `BROKER_FAILED` when it
/// cannot listen.
#[napi(
    ts_args_type = "options?: CredentialBrokerOptions | undefined | null",
    ts_return_type = "Promise<CredentialBroker>"
)]
pub fn start_credential_broker<'env>(
    env: &'env Env,
    options: Option<Unknown>,
) -> napi::Result<PromiseRaw<'env, CredentialBroker>> {
    let o: JsCredentialBrokerOptions = object_arg(env, options, "options")?.unwrap_or_default();
    // A bad value rejects (a mistyped one throws, as everywhere).
    let options = BrokerOptions::given(o.env, o.socket_dir.as_deref(), o.tcp);
    promise(env, async move {
        let inner = Broker::start(options?).await?;
        Ok(CredentialBroker { inner })
    })
}

#[napi]
impl CredentialBroker {
    /// The broker is on (`PO_SANDBOX_BROKER` is not `0`).
    #[napi(getter)]
    pub fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    /// `127.0.0.1:<port>` when listening for TCP grants.
    #[napi(getter)]
    pub fn address(&self) -> Option<String> {
        self.inner.tcp_address().map(|a| a.to_string())
    }

    /// Grants a container its credentials: one route and a fresh token per provider in the shape
    /// pi expects. Throws `WORKSPACE_INVALID`, `OPTIONS_INVALID` (an unknown provider, a bad
    /// `<PROVIDER>_BASE_URL`) or `BROKER_FAILED`.
    #[napi(ts_args_type = "options: GrantOptions")]
    pub fn grant(&self, env: &Env, options: Unknown) -> napi::Result<BrokerGrant> {
        let o: JsGrantOptions =
            required_arg(env, Some(options), "options", "expected { workspace, ... }")?;
        let (route, user) = (o.route.as_deref(), o.user.as_deref());
        let request = GrantRequest::given(o.workspace, o.providers, route, user);
        let request = GrantRequest {
            container_socket: o.container_socket_path,
            container_host: o.container_host,
            ..request.map_err(|e| coded(env, &e))?
        };
        let broker = self.inner.clone();
        napi::bindgen_prelude::within_runtime_if_available(move || broker.grant(request))
            .map(BrokerGrant::from)
            .map_err(|e| coded(env, &e))
    }

    /// Ends a grant at once (its tokens stop working, also on open connections; its socket is
    /// removed). Takes the grant or its id. `false` when there was no such grant.
    #[napi(ts_args_type = "grant: BrokerGrant | string")]
    pub fn revoke(&self, env: Env, grant: Unknown) -> napi::Result<bool> {
        let id = if grant.get_type()? == napi::ValueType::String {
            // SAFETY: the value belongs to this env and is alive for this call.
            unsafe { String::from_napi_value(env.raw(), grant.raw()) }?
        } else {
            let expected = "expected a grant from grant() or its id, got nothing";
            required_arg::<JsGrantRef>(&env, Some(grant), "grant", expected)?.id
        };
        Ok(self.inner.revoke(&id))
    }

    /// Revokes every grant and stops listening.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let broker = self.inner.clone();
        promise(env, async move {
            broker.close().await;
            Ok(())
        })
    }

    /// Calls `callback` with an audit event for every request.
    #[napi(ts_args_type = "callback: (event: BrokerAuditEvent) => void")]
    pub fn on_event(&self, callback: Function<JsBrokerAuditEvent, ()>) -> napi::Result<()> {
        let tsfn = listener(callback)?;
        self.inner.on_audit(Arc::new(move |e: &AuditEvent| {
            let event = JsBrokerAuditEvent::from(e);
            tsfn.call(event, ThreadsafeFunctionCallMode::NonBlocking);
        }));
        Ok(())
    }
}
