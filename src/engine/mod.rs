//! The container engine: which one runs here, where it answers, and whether the layer can use it.
//!
//! Detection is split in two: [`candidates`] is a pure function of the host's environment that
//! lists every place an engine may answer, in order; [`probe`] visits one candidate and
//! classifies what it found. [`detect`] walks the list and reports.
//!
//! The seam the rest of the layer talks through is [`EngineApi`]: its data shapes are in
//! [`model`], its failures are [`EngineError`] (classified once, here), and [`Client`] is its
//! production implementation; [`transport`] reaches engines over TLS and SSH behind it, so no
//! caller knows which transport it has. Nothing outside this folder names the client library.

pub(crate) mod api;
pub(crate) mod candidates;
pub(crate) mod connector;
pub(crate) mod context;
pub(crate) mod endpoint;
pub(crate) mod facts_cache;
#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod fault;
pub(crate) mod libpod;
pub(crate) mod model;
pub(crate) mod operation;
pub(crate) mod probe;
pub(crate) mod report;
pub(crate) mod transport;

use std::time::Duration;

pub(crate) use api::{BuildOptions, Client, EngineApi};
pub(crate) use candidates::candidates;
pub(crate) use connector::{Connector, Local};
pub(crate) use endpoint::Endpoint;
pub(crate) use fault::EngineError;
pub(crate) use operation::{Operation, Resource};
pub(crate) use probe::Outcome;
pub(crate) use report::{CandidateOutcome, CandidateReport, EngineReport, remote_reason};

use crate::error::Result;
use crate::host::HostEnv;
use crate::names::vars::{
    BUILD_IDLE_VAR, CALL_TIMEOUT_VAR, CHANGE_TIMEOUT_VAR, CHANGES_TIMEOUT_VAR, ENGINE_VAR,
    REMOTE_VAR, TIMEOUT_VAR,
};

/// Default bound on each of connect, ping, version and info.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(3000);
/// Default bound on a reading call: an engine that answers at all answers these in
/// milliseconds; a hung one is reported as `ENGINE_TIMEOUT` after this.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on a changing call: a busy engine creates and starts slowly.
pub const DEFAULT_CHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default longest silence of a build step (a quiet `npm install` on a slow network).
pub const DEFAULT_BUILD_IDLE: Duration = Duration::from_secs(300);
/// Default bound on a `diff` or `apply`'s reading of a copy.
pub const DEFAULT_CHANGES_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a stop lets the container's process exit before the engine kills it.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long each kind of engine call may take, by what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Reading calls ([`CALL_TIMEOUT_VAR`]).
    pub read: Duration,
    /// Changing calls ([`CHANGE_TIMEOUT_VAR`]); a stop gets this plus [`STOP_GRACE`].
    pub change: Duration,
    /// The gap between two messages of an image build ([`BUILD_IDLE_VAR`]).
    pub build_idle: Duration,
    /// The whole of a `diff` or `apply`'s reading of a copy, every exec it runs together
    /// ([`CHANGES_TIMEOUT_VAR`]).
    pub changes: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            read: DEFAULT_CALL_TIMEOUT,
            change: DEFAULT_CHANGE_TIMEOUT,
            build_idle: DEFAULT_BUILD_IDLE,
            changes: DEFAULT_CHANGES_TIMEOUT,
        }
    }
}

/// The oldest Engine API the layer accepts (Docker 20.10, Podman 3+ report 1.41 or newer).
pub const MIN_API_VERSION: (u32, u32) = (1, 41);

/// How to look for an engine.
#[derive(Debug, Clone, Default)]
pub struct DetectOptions {
    /// Pick this engine (overrides `PO_SANDBOX_ENGINE`).
    pub engine: Option<String>,
    /// Bound on each step against one endpoint. `None`: `PO_SANDBOX_ENGINE_TIMEOUT_MS` or 3 s.
    pub timeout: Option<Duration>,
    /// Probe every candidate even after one answered (the doctor's view).
    pub probe_all: bool,
    /// Where the engine's facts are kept between start-ups ([`facts_cache`]); `None`: asked
    /// every time.
    pub facts_file: Option<std::path::PathBuf>,
    /// Ask the engine its facts even when kept ones hold, and keep its answers (a running hub
    /// keeps them fresh for the next start-up).
    pub refresh_facts: bool,
    /// Whether the engine is on another machine, when the person says (the `engineRemote`
    /// option, else `PO_SANDBOX_ENGINE_REMOTE`); `None`: decided from the engine (see
    /// [`report::is_remote`]).
    pub remote: Option<bool>,
}

/// `engineRemote`, else `PO_SANDBOX_ENGINE_REMOTE` (`1` or `0`): whether the engine is taken
/// as on another machine whatever it says; `OPTIONS_INVALID` for another value of the variable.
pub fn remote_forced(host: &HostEnv, option: Option<bool>) -> Result<Option<bool>> {
    if option.is_some() {
        return Ok(option);
    }
    match host.var(REMOTE_VAR).map(str::trim) {
        None | Some("") => Ok(None),
        Some("1") => Ok(Some(true)),
        Some("0") => Ok(Some(false)),
        Some(other) => Err(crate::error::Error::OptionsInvalid {
            option: REMOTE_VAR.into(),
            reason: format!(
                "'{other}' is not 1 (the engine is on another machine) or 0 (it sees this machine's paths); unset it to let the engine's identity decide"
            ),
        }),
    }
}

/// The places detection would try, in order, as untried reports: nothing is probed (see
/// [`candidates`] for what fails).
pub fn candidate_reports(host: &HostEnv, only: Option<&str>) -> Result<Vec<CandidateReport>> {
    let list = candidates(host, only)?;
    Ok(list.into_iter().map(CandidateReport::untried).collect())
}

impl DetectOptions {
    /// The options a caller gives: `timeoutMs` checked as [`timeout_from_ms`], `probe_all`
    /// false unless set.
    pub fn given(
        engine: Option<String>,
        timeout_ms: Option<f64>,
        probe_all: Option<bool>,
    ) -> Result<DetectOptions> {
        let timeout = timeout_ms.map(|ms| timeout_from_ms(ms, "timeoutMs"));
        Ok(DetectOptions {
            engine,
            timeout: timeout.transpose()?,
            probe_all: probe_all.unwrap_or(false),
            ..DetectOptions::default()
        })
    }
}

/// A timeout given in milliseconds by a caller: a whole number from 1 to 600000.
pub fn timeout_from_ms(ms: f64, name: &str) -> Result<Duration> {
    if ms.fract() == 0.0 && (1.0..=600_000.0).contains(&ms) {
        Ok(Duration::from_millis(ms as u64))
    } else {
        Err(crate::error::Error::OptionsInvalid {
            option: name.into(),
            reason: format!("{ms} is not a whole number of milliseconds between 1 and 600000"),
        })
    }
}

/// Resolves the per-step timeout from the option or the environment.
pub fn resolve_timeout(host: &HostEnv, option: Option<Duration>) -> Result<Duration> {
    if let Some(t) = option {
        return Ok(t);
    }
    match host.var(TIMEOUT_VAR) {
        None => Ok(DEFAULT_TIMEOUT),
        Some(raw) => match raw.trim().parse::<u64>() {
            Ok(ms) if (1..=600_000).contains(&ms) => Ok(Duration::from_millis(ms)),
            _ => Err(crate::error::Error::OptionsInvalid {
                option: TIMEOUT_VAR.into(),
                reason: format!(
                    "'{raw}' is not a whole number of milliseconds between 1 and 600000; unset it to use 3000"
                ),
            }),
        },
    }
}

/// Finds the engine to use: candidates in order, the first that answers a usable Engine API
/// wins. Resolves with a report even when none is usable (then `available` is false and the
/// reason says why); fails only on bad input (an unknown engine name, a bad timeout).
pub async fn detect(host: &HostEnv, options: &DetectOptions) -> Result<EngineReport> {
    let timeout = resolve_timeout(host, options.timeout)?;
    let remote = remote_forced(host, options.remote)?;
    let list = candidates(host, options.engine.as_deref())?;
    let mut probed = Vec::with_capacity(list.len());
    let mut found = false;
    for candidate in list {
        if found && !options.probe_all {
            break;
        }
        let facts = options.facts_file.as_deref().map(|file| facts_cache::Keep {
            file,
            ask_anyway: options.refresh_facts,
        });
        let outcome = probe::probe_keeping(&candidate, host, timeout, facts).await;
        tracing::debug!(engine = candidate.engine.as_str(), endpoint = %candidate.endpoint, outcome = outcome.code(), "engine candidate probed");
        found |= matches!(outcome, Outcome::Available(_));
        probed.push((candidate, outcome));
    }
    Ok(report::summarise(host, probed, remote))
}

/// The bound on each reading engine call: [`Bounds::read`].
pub fn call_timeout(host: &HostEnv) -> Result<Duration> {
    Ok(bounds(host)?.read)
}

/// The bounds of engine calls from [`CALL_TIMEOUT_VAR`], [`CHANGE_TIMEOUT_VAR`] and
/// [`BUILD_IDLE_VAR`]: whole milliseconds from 1000 to 600000 (3600000 for the build), rounded
/// up to the second the client counts in; `OPTIONS_INVALID` naming the variable otherwise.
pub fn bounds(host: &HostEnv) -> Result<Bounds> {
    let d = Bounds::default();
    Ok(Bounds {
        read: ms_var(host, CALL_TIMEOUT_VAR, 600_000, d.read)?,
        change: ms_var(host, CHANGE_TIMEOUT_VAR, 600_000, d.change)?,
        build_idle: ms_var(host, BUILD_IDLE_VAR, 3_600_000, d.build_idle)?,
        changes: ms_var(host, CHANGES_TIMEOUT_VAR, 3_600_000, d.changes)?,
    })
}

fn ms_var(host: &HostEnv, var: &str, max: u64, default: Duration) -> Result<Duration> {
    let Some(raw) = host.var(var) else {
        return Ok(default);
    };
    match raw.trim().parse::<u64>() {
        Ok(ms) if (1000..=max).contains(&ms) => Ok(Duration::from_secs(ms.div_ceil(1000))),
        _ => Err(crate::error::Error::OptionsInvalid {
            option: var.into(),
            reason: format!(
                "'{raw}' is not a whole number of milliseconds between 1000 and {max}; unset it to use {}",
                default.as_millis()
            ),
        }),
    }
}

/// The client for changing calls: `engine` with the [`Bounds::change`] bound.
pub fn for_changes<E: api::EngineApi>(engine: &E, bounds: &Bounds) -> E {
    engine.with_timeout(bounds.change)
}

/// A client for the engine a report found, speaking its negotiated API, each call bounded by
/// `call_timeout` (see [`call_timeout`]).
pub fn connect_reported(
    host: &HostEnv,
    report: &EngineReport,
    call_timeout: Duration,
) -> Result<Client> {
    let unavailable = |reason: String| crate::error::Error::EngineUnavailable {
        reason,
        reason_code: None,
    };
    let (Some(endpoint), Some(api)) = (report.endpoint.as_deref(), report.api_version.as_deref())
    else {
        return Err(unavailable(
            report
                .reason
                .clone()
                .unwrap_or_else(|| "no engine is available".into()),
        ));
    };
    let (major, minor) = probe::parse_api_version(api)
        .ok_or_else(|| unavailable(format!("unreadable API version {api}")))?;
    let version = bollard::ClientVersion {
        major_version: major as usize,
        minor_version: minor as usize,
    };
    let tls = match &report.tls_certs {
        Some(dir) => endpoint::Tls::Verify(dir.into()),
        None => endpoint::Tls::Off,
    };
    let place = candidates::with_ssh_command(Endpoint::parse_with(endpoint, &tls), host);
    probe::client(&place, call_timeout, &version).map_err(|e| unavailable(e.to_string()))
}

/// A client of `endpoint` speaking the oldest API this layer accepts, with no version
/// negotiation: enough for reads of ids, labels, states, ports and postures, which need not
/// wait for the engine check.
pub fn connect_oldest(endpoint: &Endpoint, timeout: Duration) -> Result<Client> {
    let oldest = bollard::ClientVersion {
        major_version: MIN_API_VERSION.0 as usize,
        minor_version: MIN_API_VERSION.1 as usize,
    };
    probe::connect(endpoint, timeout, &oldest).map_err(|e| crate::error::Error::EngineUnavailable {
        reason: e.to_string(),
        reason_code: None,
    })
}

/// `ENGINE_UNAVAILABLE` for a report that found no usable engine: its reason and reason code.
pub fn unavailable(report: &EngineReport) -> crate::error::Error {
    crate::error::Error::EngineUnavailable {
        reason: report.reason.clone().unwrap_or_default(),
        reason_code: Some(report.reason_code.clone().unwrap_or_default()),
    }
}

/// Detects the engine and connects to it; `ENGINE_UNAVAILABLE` (with the reason) when none is
/// usable.
pub async fn connect(host: &HostEnv, options: &DetectOptions) -> Result<(Client, EngineReport)> {
    let call_timeout = call_timeout(host)?;
    let report = detect(host, options).await?;
    if !report.available {
        return Err(unavailable(&report));
    }
    let engine = connect_reported(host, &report, call_timeout)?;
    Ok((engine, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_reports_list_untried_places_and_refuse_an_unknown_engine() {
        let host = HostEnv::with_vars(&[("DOCKER_HOST", "unix:///tmp/d.sock")]);
        let list = candidate_reports(&host, Some("docker")).unwrap();
        assert_eq!(list[0].endpoint, "unix:///tmp/d.sock");
        assert!(list.iter().all(|c| c.engine == "docker"));
        assert!(
            list.iter()
                .all(|c| matches!(c.outcome, CandidateOutcome::Untried))
        );
        let err = candidate_reports(&host, Some("bogus")).unwrap_err();
        assert_eq!(err.code(), "ENGINE_UNKNOWN");
    }

    #[test]
    fn detect_options_check_the_timeout_and_default_probe_all() {
        let o = DetectOptions::given(Some("podman".into()), Some(250.0), None).unwrap();
        assert_eq!(o.engine.as_deref(), Some("podman"));
        assert_eq!(o.timeout, Some(Duration::from_millis(250)));
        assert!(!o.probe_all);
        assert!(
            DetectOptions::given(None, None, Some(true))
                .unwrap()
                .probe_all
        );
        let err = DetectOptions::given(None, Some(0.5), None).unwrap_err();
        assert_eq!(err.code(), "OPTIONS_INVALID");
        assert!(err.to_string().contains("timeoutMs"), "{err}");
    }

    #[test]
    fn call_timeout_default_range_and_rounding() {
        assert_eq!(
            call_timeout(&HostEnv::with_vars(&[])).unwrap(),
            DEFAULT_CALL_TIMEOUT
        );
        let t = |v: &str| call_timeout(&HostEnv::with_vars(&[(CALL_TIMEOUT_VAR, v)]));
        assert_eq!(t("1000").unwrap(), Duration::from_secs(1));
        assert_eq!(t("1500").unwrap(), Duration::from_secs(2));
        assert_eq!(t(" 600000 ").unwrap(), Duration::from_secs(600));
        for bad in ["999", "600001", "0", "-5", "1e4", "soon"] {
            let e = t(bad).unwrap_err();
            assert_eq!(e.code(), "OPTIONS_INVALID", "{bad}");
            assert!(e.to_string().contains(CALL_TIMEOUT_VAR), "{e}");
        }
    }

    #[test]
    fn operations_name_their_bound() {
        let id = || "1a2b".to_string();
        for (op, text) in [
            (
                Operation::Create(Resource::Container, "po-x".into()),
                "create container po-x",
            ),
            (Operation::Start(id()), "start container 1a2b"),
            (Operation::Stop(id()), "stop container 1a2b"),
            (Operation::Restart(id()), "restart container 1a2b"),
            (
                Operation::Remove(Resource::Container, id()),
                "remove container 1a2b",
            ),
            (
                Operation::Create(Resource::Volume, "v".into()),
                "create volume v",
            ),
            (
                Operation::Remove(Resource::Volume, "v".into()),
                "remove volume v",
            ),
            (
                Operation::CreateHelper("w".into()),
                "create the network rules helper of w",
            ),
        ] {
            assert_eq!(op.to_string(), text);
            assert_eq!(op.bound_variable(), CHANGE_TIMEOUT_VAR, "{op}");
        }
        for (op, text) in [
            (Operation::List(Resource::Container), "list containers"),
            (
                Operation::Inspect(Resource::Container, "po-x".into()),
                "inspect container po-x",
            ),
            (Operation::List(Resource::Volume), "list volumes"),
            (Operation::Wait(id()), "wait for container 1a2b"),
        ] {
            assert_eq!(op.to_string(), text);
            assert_eq!(op.bound_variable(), CALL_TIMEOUT_VAR, "{op}");
        }
    }

    #[test]
    fn bounds_by_kind_of_call() {
        let b = |vars: &[(&str, &str)]| bounds(&HostEnv::with_vars(vars));
        assert_eq!(
            b(&[]).unwrap(),
            Bounds {
                read: Duration::from_secs(10),
                change: Duration::from_secs(30),
                build_idle: Duration::from_secs(300),
                changes: Duration::from_secs(600),
            }
        );
        let set = b(&[
            (CALL_TIMEOUT_VAR, "2000"),
            (CHANGE_TIMEOUT_VAR, "45000"),
            (BUILD_IDLE_VAR, "3600000"),
            (CHANGES_TIMEOUT_VAR, "1500"),
        ])
        .unwrap();
        assert_eq!(set.changes, Duration::from_secs(2));
        assert_eq!(set.read, Duration::from_secs(2));
        assert_eq!(set.change, Duration::from_secs(45));
        assert_eq!(set.build_idle, Duration::from_secs(3600));
        for (var, bad) in [
            (CHANGE_TIMEOUT_VAR, "600001"),
            (CHANGE_TIMEOUT_VAR, "later"),
            (BUILD_IDLE_VAR, "3600001"),
            (BUILD_IDLE_VAR, "500"),
            (CHANGES_TIMEOUT_VAR, "3600001"),
            (CHANGES_TIMEOUT_VAR, "999"),
        ] {
            let e = b(&[(var, bad)]).unwrap_err();
            assert_eq!(e.code(), "OPTIONS_INVALID", "{var}={bad}");
            assert!(e.to_string().contains(var), "{e}");
        }
    }
}
