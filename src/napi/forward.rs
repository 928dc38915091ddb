//! `WorkspaceContainers.forwardPort` and `forwards`, and the `PortForward` handle.

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;

use super::errors::{coded, promise};
use super::provider::WorkspaceContainers;
use crate::sandbox::folder::check_workspace_id;
use crate::sandbox::on_engine;
use crate::sandbox::on_engine::{ForwardEnd, ForwardInfo, check_ports};

/// How `WorkspaceContainers.forwardPort` forwards a port.
#[napi(object, js_name = "ForwardOptions")]
pub struct JsForwardOptions {
    /// The port on the host's 127.0.0.1 (default: any free port).
    pub host_port: Option<u32>,
    /// The workspace folder (default: the one the container was started for).
    pub path: Option<String>,
}

/// A port of a sandbox forwarded to the host's 127.0.0.1 (connections travel over a socket in
/// the sandbox's broker folder, else the engine's exec stream: nothing published or loosened).
#[napi]
pub struct PortForward {
    inner: on_engine::PortForward,
}

#[napi]
impl PortForward {
    /// `http://127.0.0.1:<hostPort>`.
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.inner.info.url.clone()
    }
    /// The port on the host's 127.0.0.1.
    #[napi(getter)]
    pub fn host_port(&self) -> u16 {
        self.inner.info.host_port
    }
    /// The port inside the sandbox (its 127.0.0.1).
    #[napi(getter)]
    pub fn port(&self) -> u16 {
        self.inner.info.port
    }
    #[napi(getter)]
    pub fn workspace_id(&self) -> String {
        self.inner.info.workspace_id.clone()
    }
    /// What carries the bytes: `namespace` (the hub dials inside the container's network
    /// namespace), `socket` (the broker folder's) or `exec` (the exec stream).
    #[napi(getter, ts_return_type = "'namespace' | 'socket' | 'exec'")]
    pub fn carrier(&self) -> String {
        self.inner.info.carrier.clone()
    }
    /// Ends the forward; resolves once its listener is closed and its relay gone.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        promise(env, async move { inner.close().await })
    }
    /// Resolves when the forward ends, with why (closed; or the sandbox container stopped or
    /// restarted, saying what to do).
    #[napi(ts_return_type = "Promise<ForwardEnd>")]
    pub fn wait<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ForwardEnd>> {
        let inner = self.inner.clone();
        promise(env, async move { inner.ended().await })
    }
}

#[napi]
impl WorkspaceContainers {
    /// Forwards `port` on the 127.0.0.1 of the workspace's running container to the host's
    /// 127.0.0.1 (`hostPort`, or any free port). Rejects with `SANDBOX_NOT_RUNNING` when it has
    /// no running container, `PORT_IN_USE` when the host port is taken; throws
    /// `OPTIONS_INVALID` for a port outside 1-65535, `WORKSPACE_INVALID` for a bad id.
    #[napi(ts_return_type = "Promise<PortForward>")]
    pub fn forward_port<'env>(
        &self,
        env: &'env Env,
        workspace_id: String,
        port: u32,
        options: Option<JsForwardOptions>,
    ) -> napi::Result<PromiseRaw<'env, PortForward>> {
        check_workspace_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let (host_port, path) = options.map_or((None, None), |o| (o.host_port, o.path));
        let (port, host_port) = check_ports(port, host_port).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move {
            let id = &workspace_id;
            let fwd = provider.forward_port(id, path.as_deref(), port, host_port);
            Ok(PortForward { inner: fwd.await? })
        })
    }

    /// The ports this hub forwards now.
    #[napi(ts_return_type = "Promise<ForwardInfo[]>")]
    pub fn forwards<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<PromiseRaw<'env, Vec<ForwardInfo>>> {
        let provider = self.provider.clone();
        promise(env, async move { provider.forwards().await })
    }
}
