//! The fake engine's connector: detection finds it as a local Docker on a socket, or (told
//! so) finds no running engine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::FakeEngine;
use crate::engine::api::EngineApi;
use crate::lock::Locked;

/// A connector that finds the fake engine, as a local Docker on a socket; told so, it finds
/// none (the engine is not running) until told otherwise.
#[derive(Clone)]
pub(crate) struct FakeConnector {
    /// The engine it connects to.
    pub engine: FakeEngine,
    report: Arc<Mutex<super::super::EngineReport>>,
    detections: Arc<std::sync::atomic::AtomicUsize>,
    /// Those of them that asked the engine its facts anyway (`refresh_facts`).
    refreshes: Arc<std::sync::atomic::AtomicUsize>,
}

impl FakeConnector {
    /// A connector that finds `engine`.
    pub fn new(engine: FakeEngine) -> FakeConnector {
        let report = super::super::EngineReport {
            available: true,
            engine: Some("docker".into()),
            endpoint: Some("unix:///run/fake-docker.sock".into()),
            engine_version: Some("20.10.24".into()),
            api_version: Some("1.41".into()),
            os: Some("Debian GNU/Linux 12".into()),
            os_type: Some("linux".into()),
            arch: Some("x86_64".into()),
            cgroup_version: Some("2".into()),
            ..Default::default()
        };
        FakeConnector {
            engine,
            report: Arc::new(Mutex::new(report)),
            detections: Arc::default(),
            refreshes: Arc::default(),
        }
    }

    /// Whether detection finds the engine (`false`: as when its service is stopped).
    pub fn set_running(&self, running: bool) {
        let mut report = self.report.locked();
        report.available = running;
        report.reason = (!running).then(|| "Docker is installed but not running (fake)".into());
        report.reason_code = (!running).then(|| "ENGINE_NOT_RUNNING".into());
    }

    /// How many detections were made.
    pub fn detections(&self) -> usize {
        self.detections.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many of them asked the engine its facts anyway.
    pub fn refreshes(&self) -> usize {
        self.refreshes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl super::super::Connector for FakeConnector {
    type Engine = FakeEngine;

    async fn detect(
        &self,
        _host: &crate::host::HostEnv,
        options: &super::super::DetectOptions,
    ) -> crate::error::Result<super::super::EngineReport> {
        self.detections
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if options.refresh_facts {
            self.refreshes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(self.report.locked().clone())
    }

    fn connect(
        &self,
        _host: &crate::host::HostEnv,
        report: &super::super::EngineReport,
        call_timeout: Duration,
    ) -> crate::error::Result<FakeEngine> {
        match report.available {
            true => Ok(self.engine.with_timeout(call_timeout)),
            false => Err(super::super::unavailable(report)),
        }
    }

    fn read_ahead(
        &self,
        _host: &crate::host::HostEnv,
        _options: &super::super::DetectOptions,
        _timeout: Duration,
    ) -> Option<(String, FakeEngine)> {
        None
    }
}
