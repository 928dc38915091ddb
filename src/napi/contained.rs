//! What a contained session uses: `DefaultSandboxExtensionService` (the sandbox state),
//! `startBrokerBridge` (a loopback bridge to the broker socket) and `brokeredBaseUrl` /
//! `brokerOrigin` (the URL arithmetic of re-pointing providers at the credential broker).

use std::path::PathBuf;
use std::sync::Mutex;

use napi::Env;
use napi::bindgen_prelude::{JsObjectValue, Object, PromiseRaw, Unknown};
use napi_derive::napi;

use super::errors::{coded, object_arg, promise};
use crate::contained::bridge::Bridge;
use crate::contained::help;
use crate::contained::identity::{self as core, SandboxState};
use crate::contained::rebase;

/// Reports sandbox state from the environment it is given: whether this process is contained,
/// its workspace, and its brokered providers and route. Never throws on odd variables; they
/// are listed in `problems`.
#[napi]
pub struct DefaultSandboxExtensionService {
    state: core::SandboxState,
    facts: help::HelpFacts,
}

#[napi]
impl DefaultSandboxExtensionService {
    /// Reads `PO_SANDBOX`, `PO_WORKSPACE`, `PO_BROKER_PROVIDERS`, `PO_BROKER_SOCKET`,
    /// `PO_BROKER_ADDRESS`, `PO_SANDBOX_GUARDED_PATHS`, and for the help skill `PO_HOME`, `HOME`
    /// and `PO_SANDBOX_TOKEN_FILE`, from `env` (default: the process environment), once.
    /// Throws `OPTIONS_INVALID` when `env` is given but is not an object.
    #[napi(
        constructor,
        ts_args_type = "env?: Record<string, string | undefined | null> | undefined | null"
    )]
    pub fn new(env: &Env, vars: Option<Unknown>) -> napi::Result<Self> {
        let vars = crate::host::given_vars(object_arg(env, vars, "env")?);
        Ok(DefaultSandboxExtensionService {
            state: core::read_state(&vars),
            facts: help::read_facts(&vars),
        })
    }

    /// Whether this process runs inside a sandbox container.
    #[napi(getter)]
    pub fn contained(&self) -> bool {
        self.state.contained
    }

    /// The full state.
    #[napi]
    pub fn state(&self) -> SandboxState {
        self.state.clone()
    }

    /// The text `/po-sandbox` shows a person (inside a container, with the ports forwarded
    /// from it now).
    #[napi]
    pub fn report(&self) -> String {
        core::report_now(&self.state)
    }

    /// The help skill of a contained session: the `SKILL.md` of the pi skill `po-sandbox`
    /// (what is mounted where — the workspace, `HOME`, `PO_HOME`, `/opt/po`, the guarded paths —,
    /// the brokered providers, the network, and what cannot be done here), from the same
    /// variables as `report()`, also `PO_HOME`, `HOME` and `PO_SANDBOX_TOKEN_FILE`. `cwd` is
    /// the session's working directory. `null` on the host (not contained).
    #[napi]
    pub fn help_skill(&self, cwd: Option<String>) -> Option<String> {
        help::skill(&self.state, &self.facts, cwd.as_deref())
    }
}

/// A running loopback bridge to the credential broker, for model SDKs that can dial TCP but
/// not a Unix socket. Call `close()` when done; it is safe to call twice.
#[napi]
pub struct BrokerBridge {
    port: u16,
    inner: Mutex<Option<Bridge>>,
}

#[napi]
impl BrokerBridge {
    /// The loopback port the bridge listens on (on 127.0.0.1 only).
    #[napi(getter)]
    pub fn port(&self) -> u32 {
        u32::from(self.port)
    }

    /// `http://127.0.0.1:<port>`: the base URL to give an SDK in place of the broker socket.
    #[napi(getter)]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops accepting, frees the port (before the promise resolves) and ends the relays in
    /// flight. Idempotent: later calls resolve at once.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let bridge = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        promise(env, async move {
            if let Some(bridge) = bridge {
                bridge.close().await;
            }
            Ok(())
        })
    }
}

/// Starts a bridge from `127.0.0.1:<ephemeral port>` to the broker's Unix socket `route` (an
/// absolute path, as in `PO_BROKER_SOCKET`), relaying raw bytes both ways. Inside a sandbox
/// container, SDKs then reach the broker at the bridge's `url`. Rejects with `OPTIONS_INVALID`
/// when `route` is not absolute, is missing or is not a socket.
#[napi(ts_return_type = "Promise<BrokerBridge>")]
pub fn start_broker_bridge<'env>(
    env: &'env Env,
    route: String,
) -> napi::Result<PromiseRaw<'env, BrokerBridge>> {
    let socket = PathBuf::from(route);
    promise(env, async move {
        let bridge = Bridge::start(&socket).await?;
        Ok(BrokerBridge {
            port: bridge.port(),
            inner: Mutex::new(Some(bridge)),
        })
    })
}

/// A model's base URL re-pointed at the broker: `baseUrl` keeps its path (and a trailing `/`),
/// its scheme, host and port become `brokerOrigin` + `/` + `provider`. For example
/// `https://openrouter.ai/api/v1` with `openrouter` and `http://127.0.0.1:41234` becomes
/// `http://127.0.0.1:41234/openrouter/api/v1`. An empty `baseUrl` is accepted only for a
/// provider whose upstream is per-resource (`azure`): it becomes `brokerOrigin/azure`, the broker
/// adding the resource's base path.
///
/// Throws `OPTIONS_INVALID` when `baseUrl` is not an absolute http(s) URL or carries user info, a
/// query, a fragment or a `.`/`..` segment; when `provider` is not a provider id; or when
/// `brokerOrigin` is not `http://host:port` without a path.
#[napi]
pub fn brokered_base_url(
    env: &Env,
    base_url: String,
    provider: String,
    broker_origin: String,
) -> napi::Result<String> {
    rebase::brokered_base_url(&base_url, &provider, &broker_origin)
        .map_err(|e| coded(env, &e.into()))
}

/// The origin SDKs inside a container use for the broker: the loopback bridge
/// `http://127.0.0.1:<bridgePort>` for a `socket` route (`bridgePort` required), `http://<target>`
/// for a `tcp` route. Throws `OPTIONS_INVALID` on a socket route without a bridge port, a `tcp`
/// target that is not `host:port`, or another kind.
#[napi(ts_args_type = "route: BrokerRouteInfo, bridgePort?: number | undefined | null")]
pub fn broker_origin(
    env: &Env,
    route: Object<'_>,
    bridge_port: Option<u32>,
) -> napi::Result<String> {
    // Read as plain strings (not a RouteKind) so an unknown kind is OPTIONS_INVALID.
    let kind: String = route.get_named_property("kind")?;
    let target: String = route.get_named_property("target")?;
    rebase::broker_origin(&kind, &target, bridge_port).map_err(|e| coded(env, &e.into()))
}
