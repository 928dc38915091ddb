//! A hub restart's adoptions, read ahead: while the engine check (version and info, the
//! slowest answers of a start-up) runs, the owner's containers are listed on the endpoint that
//! check tries first, and each running-alone container's server is asked its health path once
//! (the asks go on while start-up proceeds; each adoption awaits its own answer).
//! The result is used only when the check settles on that same endpoint; reads only, on a local
//! Unix socket only.

use bollard::ClientVersion;

use super::options::ProviderOptions;
use crate::engine::{self, Endpoint};
use crate::runtime_bundle as runtime;
use crate::sandbox::known::{KnownContainers, read_ahead};

/// A read-ahead under way; aborted when dropped (a failed start-up leaves nothing running).
pub struct ReadAhead {
    endpoint: String,
    task: tokio::task::JoinHandle<Option<KnownContainers>>,
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReadAhead {
    /// Starts one for `o`, when a workspace wants a container, the runtime bundle is installed
    /// and the engine check's first candidate is a Unix socket; `None` otherwise.
    pub fn start(o: &ProviderOptions) -> Option<ReadAhead> {
        if !o.workspaces.iter().any(|w| w.container) {
            return None;
        }
        let bundle = runtime::locate(&o.po_home, o.runtime_version.as_deref()).ok()?;
        let first = engine::candidates(&o.host, o.detect.engine.as_deref())
            .ok()?
            .into_iter()
            .next()?;
        if !matches!(first.endpoint, Endpoint::Unix(_)) {
            return None;
        }
        // The list reads only ids, labels, states and ports: the oldest API this layer
        // accepts serves them, so it need not wait for the version negotiation.
        let oldest = ClientVersion {
            major_version: engine::MIN_API_VERSION.0 as usize,
            minor_version: engine::MIN_API_VERSION.1 as usize,
        };
        let timeout = engine::call_timeout(&o.host).ok()?;
        let docker = engine::probe::connect(&first.endpoint, timeout, &oldest).ok()?;
        let owner = o.owner.clone();
        let (port, path) = (bundle.server.port, bundle.server.health_path.clone());
        let task = tokio::spawn(async move {
            let read = read_ahead(&docker, &owner, port, &path);
            tokio::time::timeout(timeout, read).await.ok()?.ok()
        });
        Some(ReadAhead {
            endpoint: first.endpoint.to_string(),
            task,
        })
    }

    /// What it read, when the engine check settled on its endpoint and the read succeeded.
    pub async fn take(mut self, report: &engine::EngineReport) -> Option<KnownContainers> {
        if report.endpoint.as_deref() != Some(self.endpoint.as_str()) {
            tracing::debug!(read = %self.endpoint, chosen = ?report.endpoint, "read-ahead on another endpoint: not used");
            return None;
        }
        let known = (&mut self.task).await.ok().flatten();
        tracing::debug!(
            used = known.is_some(),
            asked = known.as_ref().map_or(0, |k| k.asked.len()),
            "read-ahead of the owner's containers"
        );
        known
    }
}
