//! `startBrokerBridge` and the `BrokerBridge` it resolves with.

use std::path::PathBuf;
use std::sync::Mutex;

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;

use super::errors::promise;
use crate::contained::bridge::Bridge;

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
        let bridge = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
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
