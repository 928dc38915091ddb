//! How a hub reaches its engine: finds one and makes a client of it. [`Local`] is the engines
//! this host reaches (a socket, a named pipe, TCP): detection over the candidates, then the
//! production [`Client`]. The provider is generic over [`Connector`], so its start-up, retry
//! and watch run the same on the in-memory engine; a new transport adds its own.

use std::future::Future;
use std::time::Duration;

use super::api::{Client, EngineApi};
use super::{DetectOptions, Endpoint, EngineReport};
use crate::error::Result;
use crate::host::HostEnv;

/// Finds the engine and makes clients of it.
pub(crate) trait Connector: Send + Sync + 'static {
    /// The client it makes.
    type Engine: EngineApi;
    /// Which engine answers, and whether the layer can use it.
    fn detect(
        &self,
        host: &HostEnv,
        options: &DetectOptions,
    ) -> impl Future<Output = Result<EngineReport>> + Send;
    /// A client of the engine a report found, each call bounded by `call_timeout`.
    fn connect(
        &self,
        host: &HostEnv,
        report: &EngineReport,
        call_timeout: Duration,
    ) -> Result<Self::Engine>;
    /// A client of the place detection tries first, for reads that need not wait for it (ids,
    /// labels, states, ports: the oldest API serves them), with that place's address; `None`
    /// when that place is not a local socket.
    fn read_ahead(
        &self,
        host: &HostEnv,
        options: &DetectOptions,
        timeout: Duration,
    ) -> Option<(String, Self::Engine)>;
}

/// The engines this host reaches by a socket, a named pipe or TCP.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Local;

impl Connector for Local {
    type Engine = Client;

    async fn detect(&self, host: &HostEnv, options: &DetectOptions) -> Result<EngineReport> {
        super::detect(host, options).await
    }

    fn connect(
        &self,
        host: &HostEnv,
        report: &EngineReport,
        call_timeout: Duration,
    ) -> Result<Client> {
        super::connect_reported(host, report, call_timeout)
    }

    fn read_ahead(
        &self,
        host: &HostEnv,
        options: &DetectOptions,
        timeout: Duration,
    ) -> Option<(String, Client)> {
        let first = super::candidates(host, options.engine.as_deref())
            .ok()?
            .into_iter()
            .next()?;
        if !matches!(first.endpoint, Endpoint::Unix(_)) {
            return None;
        }
        let engine = super::connect_oldest(&first.endpoint, timeout).ok()?;
        Some((first.endpoint.to_string(), engine))
    }
}
