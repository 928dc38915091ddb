//! Reads that need not wait for the engine check: while it runs (version and info, the slowest
//! answers of a start-up), they go to the endpoint the check tries first. A hub restart lists
//! the owner's containers this way and asks each running-alone container's server its health
//! path once (the asks go on while start-up proceeds; each adoption awaits its own answer), and
//! pins the image recipe to its base; an exec reads the workspace's container by name. A read is used only when the check settles on
//! that same endpoint; reads only, on a local Unix socket only.

use std::collections::HashSet;
use std::future::Future;

use super::options::ProviderOptions;
use crate::engine::{self, Connector};
use crate::runtime_bundle as runtime;
use crate::sandbox::on_engine::{KnownContainers, read_ahead};

/// A read under way; aborted when dropped (a failed start-up leaves nothing running).
pub struct ReadAhead<T> {
    endpoint: String,
    task: tokio::task::JoinHandle<Option<T>>,
}

impl<T> Drop for ReadAhead<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<T: Send + 'static> ReadAhead<T> {
    /// Runs `read` on a client of the engine check's first candidate, when that is a Unix
    /// socket, bounded by the call timeout; `None` when it is not.
    pub fn on_first_candidate<C, F, Fut>(
        connector: &C,
        o: &ProviderOptions,
        read: F,
    ) -> Option<ReadAhead<T>>
    where
        C: Connector,
        F: FnOnce(C::Engine) -> Fut,
        Fut: Future<Output = Option<T>> + Send + 'static,
    {
        let timeout = engine::call_timeout(&o.host).ok()?;
        let (endpoint, engine) = connector.read_ahead(&o.host, &o.detect, timeout)?;
        let read = read(engine);
        let task = tokio::spawn(async move { tokio::time::timeout(timeout, read).await.ok()? });
        Some(ReadAhead { endpoint, task })
    }

    /// What it read, when the engine check settled on its endpoint and the read succeeded.
    pub async fn take(mut self, report: &engine::EngineReport) -> Option<T> {
        if report.endpoint.as_deref() != Some(self.endpoint.as_str()) {
            tracing::debug!(read = %self.endpoint, chosen = ?report.endpoint, "read-ahead on another endpoint: not used");
            return None;
        }
        (&mut self.task).await.ok().flatten()
    }
}

/// The image recipe pinned to its base as the engine has it ([`crate::image::pin`]: an
/// inspect of the base), read ahead; `None` when the engine has no such base.
pub fn image<C: Connector>(
    connector: &C,
    o: &ProviderOptions,
) -> Option<ReadAhead<crate::image::ImageRecipe>> {
    let recipe = o.recipe.clone();
    ReadAhead::on_first_candidate(connector, o, move |engine| async move {
        let pinned = crate::image::pin(&engine, &recipe).await.ok()?;
        pinned.base_id.is_some().then_some(pinned)
    })
}

/// A hub restart's adoptions read ahead: this owner's containers, when a workspace wants a
/// container and the runtime bundle is installed (it says the server's port and health path).
pub fn known<C: Connector>(
    connector: &C,
    o: &ProviderOptions,
    held: tokio::sync::oneshot::Receiver<HashSet<String>>,
) -> Option<ReadAhead<KnownContainers>> {
    if !o.workspaces.iter().any(|w| w.container) {
        return None;
    }
    let bundle = runtime::locate(&o.po_home, o.runtime_version.as_deref()).ok()?;
    let owner = o.owner.clone();
    let (port, path) = (bundle.server.port, bundle.server.health_path.clone());
    ReadAhead::on_first_candidate(connector, o, move |engine| async move {
        let held = async { held.await.unwrap_or_default() };
        read_ahead(&engine, &owner, (port, &path), held).await.ok()
    })
}
