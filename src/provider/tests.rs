//! The provider on the in-memory engine: start-up, its retry, the engine lost and back, and the
//! scheduling of the configured workspaces (the real-engine suites run the same on Docker).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::engine::fake::{FakeConnector, FakeEngine, Fault, healthy_server};
use crate::host::HostEnv;
use crate::names::vars::{CALL_TIMEOUT_VAR, CHANGE_TIMEOUT_VAR, NETWORK_VAR};

/// A hub's machine: a home with a Po home and workspace folders, the fake engine (its
/// containers' published port answers health), and the connector that finds it.
struct Machine {
    home: tempfile::TempDir,
    engine: FakeEngine,
    connector: FakeConnector,
}

impl Machine {
    async fn new() -> Machine {
        let engine = FakeEngine::default();
        engine.state().host_port = healthy_server().await;
        Machine {
            home: tempfile::tempdir().unwrap(),
            connector: FakeConnector::new(engine.clone()),
            engine,
        }
    }

    /// A workspace folder of this machine.
    fn folder(&self, id: &str) -> PathBuf {
        let path = self.home.path().join(id);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// A provider of owner `hub1` for these workspaces (ids), at `concurrency` creations at once.
    fn provider(&self, workspaces: &[&str], concurrency: f64) -> Arc<Provider<FakeConnector>> {
        let home = self.home.path();
        let given = GivenOptions {
            po_home: Some(home.join("po").to_string_lossy().into()),
            owner: Some("hub1".into()),
            workspaces: Some(
                workspaces
                    .iter()
                    .map(|id| options::GivenWorkspace {
                        id: id.to_string(),
                        path: self.folder(id).to_string_lossy().into(),
                        sandbox: None,
                        mode: None,
                    })
                    .collect(),
            ),
            demo_runtime: Some(true),
            broker: Some(false),
            guarded_paths: Some(vec![]),
            concurrency: Some(concurrency),
            ..GivenOptions::default()
        };
        let host = host_of(home);
        let options = ProviderOptions::resolve(given, host).unwrap();
        Provider::with_connector(options, self.connector.clone())
    }
}

/// The host of a test: its home, open egress, short engine bounds (a hung call ends fast).
fn host_of(home: &Path) -> HostEnv {
    let home = home.to_string_lossy().to_string();
    HostEnv::with_vars(&[
        ("HOME", home.as_str()),
        (NETWORK_VAR, "open"),
        (CALL_TIMEOUT_VAR, "1000"),
        (CHANGE_TIMEOUT_VAR, "2000"),
    ])
}

/// Waits (up to 20 s) until the status says `done`.
async fn until(p: &Provider<FakeConnector>, what: &str, done: impl Fn(&ProviderStatus) -> bool) {
    let mut rx = p.status.subscribe();
    let waited = tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|s| done(s))).await;
    assert!(waited.is_ok(), "{what}: {:?}", p.status());
}

fn phase(s: &ProviderStatus, id: &str) -> WorkspacePhase {
    s.workspaces.iter().find(|w| w.id == id).unwrap().state
}

#[tokio::test]
async fn start_up_reaches_ready_builds_the_image_once_and_starts_each_workspace() {
    let m = Machine::new().await;
    let p = m.provider(&["w1", "w2"], 2.0);
    tokio::spawn(p.clone().run());
    let s = p.ready().await;
    until(&p, "both running", |s| {
        phase(s, "w1") == WorkspacePhase::Running && phase(s, "w2") == WorkspacePhase::Running
    })
    .await;
    assert_eq!(s.state, ProviderState::Ready, "{s:?}");
    assert_eq!(s.engine.as_deref(), Some("docker"));
    assert!(s.image_built, "the image was not there: built");
    assert_eq!(m.engine.count("build_image"), 1);
    assert_eq!(m.connector.detections(), 1);
    let c = p.status().workspaces[0].container.clone().unwrap();
    assert!(m.engine.state().find(&c.container_id).is_some());
    // A second hub of the owner builds nothing: the image is there.
    let again = m.provider(&["w1", "w2"], 2.0);
    tokio::spawn(again.clone().run());
    assert!(!again.ready().await.image_built);
    assert_eq!(m.engine.count("build_image"), 1);
}

#[tokio::test]
async fn a_start_up_without_an_engine_fails_coded_and_is_retried_once_it_runs() {
    let m = Machine::new().await;
    m.connector.set_running(false);
    let p = m.provider(&["w1"], 1.0);
    tokio::spawn(p.clone().run());
    let s = p.ready().await;
    assert_eq!(s.state, ProviderState::Unavailable, "{s:?}");
    assert_eq!(s.code.as_deref(), Some("ENGINE_UNAVAILABLE"));
    assert_eq!(phase(&s, "w1"), WorkspacePhase::Failed);
    // Within RETRY_AFTER, a call gets the stored failure without detecting again.
    let Err(e) = p.service_for_start().await else {
        panic!("a service with no engine")
    };
    assert_eq!(e.code(), "ENGINE_UNAVAILABLE");
    assert_eq!(m.connector.detections(), 1);
    // The engine starts: the background retry finds it and starts the workspace.
    m.connector.set_running(true);
    until(&p, "ready after the retry", |s| {
        s.state == ProviderState::Ready && phase(s, "w1") == WorkspacePhase::Running
    })
    .await;
    assert!(m.connector.detections() >= 2);
}

#[tokio::test]
async fn a_failed_start_up_is_tried_again_by_a_call_once_the_last_attempt_is_old_enough() {
    let m = Machine::new().await;
    let p = m.provider(&[], 1.0);
    // An image build that fails is not retried in the background (a rebuild is expensive).
    m.engine.fault("build_image", "", Fault::Fail(500), Some(1));
    tokio::spawn(p.clone().run());
    let s = p.ready().await;
    assert_eq!(s.code.as_deref(), Some("IMAGE_BUILD_FAILED"), "{s:?}");
    assert!(
        p.service_for_start().await.is_err(),
        "too soon: the stored failure"
    );
    assert_eq!(m.engine.count("build_image"), 1);
    tokio::time::sleep(RETRY_AFTER).await;
    p.service_for_start().await.unwrap();
    assert_eq!(m.engine.count("build_image"), 2);
    assert_eq!(p.status().state, ProviderState::Ready);
}

#[tokio::test]
async fn an_engine_that_stops_answering_is_marked_probed_and_cleared_when_it_answers() {
    let m = Machine::new().await;
    let p = m.provider(&[], 1.0);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    p.events().subscribe(Arc::new(move |e: &Event| {
        if let Event::Engine { available, .. } = e {
            s.lock().unwrap().push(*available);
        }
    }));
    tokio::spawn(p.clone().run());
    assert_eq!(p.ready().await.state, ProviderState::Ready);
    // The engine hangs: a call times out, the status says so once, and a probe starts.
    m.engine.fault("list_containers", "", Fault::Hang, None);
    m.engine.fault("ping", "", Fault::Hang, None);
    let e = p.containers().await.unwrap_err();
    assert_eq!(e.code(), "ENGINE_TIMEOUT");
    let s = p.status();
    assert!(!s.engine_answering);
    assert!(s.engine_problem.unwrap().contains("probes the engine"));
    assert!(p.containers().await.is_err());
    // An engine that answers with an error is answering: a refusal clears nothing it hangs on.
    m.engine.clear_faults();
    until(&p, "the probe saw it answer", |s| s.engine_answering).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [true, false, true],
        "one event each way"
    );
    p.containers().await.unwrap();
}

#[tokio::test]
async fn workspaces_running_already_are_adopted_and_the_others_created_at_the_bound() {
    let m = Machine::new().await;
    let first = m.provider(&["w1"], 1.0);
    tokio::spawn(first.clone().run());
    first.ready().await;
    until(&first, "w1 running", |s| {
        phase(s, "w1") == WorkspacePhase::Running
    })
    .await;
    let created = m.engine.count("create_container");
    // Creations overlap at most `concurrency`: the fake counts creates in flight.
    let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (f, mo) = (in_flight.clone(), most.clone());
    m.engine.state().on_call = Some(Box::new(move |call: &str| {
        use std::sync::atomic::Ordering::SeqCst;
        if call.starts_with("create_container po-hub1-") {
            let now = f.fetch_add(1, SeqCst) + 1;
            mo.fetch_max(now, SeqCst);
        } else if call.starts_with("start_container po-hub1-") {
            f.fetch_sub(1, SeqCst);
        }
    }));
    let p = m.provider(&["w1", "w2", "w3", "w4"], 1.0);
    tokio::spawn(p.clone().run());
    p.ready().await;
    until(&p, "all running", |s| {
        s.settled
            && s.workspaces
                .iter()
                .all(|w| w.state == WorkspacePhase::Running)
    })
    .await;
    // w1 was adopted: its container is the one the first hub made.
    let before = first.status().workspaces[0].container.clone().unwrap();
    let after = p.status().workspaces[0].container.clone().unwrap();
    assert_eq!(before.container_id, after.container_id);
    let workspace_creates = |n: usize| n - created;
    assert!(workspace_creates(m.engine.count("create_container")) >= 3);
    assert_eq!(
        most.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one creation at a time"
    );
}

#[tokio::test]
async fn a_stop_of_every_container_during_start_up_skips_what_is_not_started_yet() {
    let m = Machine::new().await;
    let p = m.provider(&["w1", "w2", "w3"], 1.0);
    // A slow first creation (its holder's create hangs until the change bound): the stop
    // comes while it is under way.
    m.engine.fault("create_container", "", Fault::Hang, Some(1));
    tokio::spawn(p.clone().run());
    until(&p, "one starting", |s| {
        s.workspaces
            .iter()
            .any(|w| w.state == WorkspacePhase::Starting)
    })
    .await;
    p.stop_all().await.unwrap();
    let s = p.status();
    assert!(s.settled);
    let skipped = s
        .workspaces
        .iter()
        .filter(|w| w.state == WorkspacePhase::Stopped && w.container.is_none())
        .count();
    assert!(skipped >= 2, "{s:?}");
    assert!(
        s.workspaces
            .iter()
            .all(|w| w.state != WorkspacePhase::Running),
        "{s:?}"
    );
    for id in ["w2", "w3"] {
        let name = crate::sandbox::blueprint::container_name("hub1", id);
        assert!(m.engine.state().find(&name).is_none(), "{id} was made");
    }
}

#[tokio::test(start_paused = true)]
async fn a_running_hub_asks_the_engine_its_facts_again_at_half_their_life_until_it_is_gone() {
    let m = Machine::new().await;
    let p = m.provider(&[], 1.0);
    assert!(
        p.options.detect.facts_file.is_some(),
        "a hub keeps the engine's facts"
    );
    let keep = tokio::spawn(engine_watch::keep_facts(Arc::downgrade(&p)));
    let half_life = crate::engine::facts_cache::MAX_AGE / 2;
    tokio::time::sleep(half_life - Duration::from_secs(1)).await;
    assert_eq!(m.connector.refreshes(), 0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(m.connector.refreshes(), 1);
    tokio::time::sleep(half_life).await;
    assert_eq!(m.connector.refreshes(), 2);
    drop(p);
    tokio::time::sleep(half_life).await;
    assert!(keep.is_finished(), "it ends with its provider");
    assert_eq!(m.connector.refreshes(), 2);
}
