//! The orchestration on the in-memory engine: create, adopt, drift, the name race, every
//! rollback step, engine timeouts, the holder and its rules helper, stop and stop-all.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::engine::fake::{FakeEngine, Fault, healthy_server};
use crate::events::{Event, WorkspaceChange};
use crate::host::UserIds;
use crate::runtime_bundle::RuntimeBundle;
use crate::sandbox::blueprint::engine_mode::EngineMode;
use crate::sandbox::blueprint::firewall::NetworkMode;
use crate::sandbox::blueprint::run_flags::RunFlags;
use crate::sandbox::blueprint::spec::{LABEL_HOLDER_OF, LABEL_OWNER};

/// A loopback port nothing listens on.
fn silent_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn bundle(home: &Path) -> RuntimeBundle {
    RuntimeBundle {
        version: "1.0.0".into(),
        dir: home.join("container-runtime/1.0.0"),
        json_path: home.join("container-runtime/1.0.0/container-runtime.json"),
        server: crate::runtime_bundle::ParsedRuntime {
            entry: "/opt/po/server.js".into(),
            port: 7300,
            args: vec![],
            env: BTreeMap::new(),
            health_path: "/api/health".into(),
            interpreter: None,
        },
    }
}

fn config(home: &Path, broker: Option<BrokerWiring>) -> ServiceConfig {
    ServiceConfig {
        container: ContainerSettings {
            owner: "hub1".into(),
            po_home: home.join("po"),
            bundle: bundle(home),
            image: "po-sandbox:test".into(),
            image_digest: "sha256:0123".into(),
            user: UserIds {
                uid: 1000,
                gid: 1000,
            },
            pids_limit: 512,
            run_flags: RunFlags::default(),
            guarded_paths: vec![],
            limits: spec::Limits {
                memory: 1 << 30,
                nano_cpus: 1_000_000_000,
                cpu_shares: 1024,
            },
            health_interval: Duration::from_secs(30),
            host_env: HashMap::new(),
            mode: EngineMode::default(),
            network_mode: NetworkMode::Open,
            workspace_mode: Default::default(),
            carried: None,
        },
        health_timeout: Duration::from_millis(1500),
        podman: false,
        broker,
        bounds: crate::engine::Bounds {
            read: Duration::from_millis(200),
            change: Duration::from_millis(200),
            build_idle: Duration::from_secs(1),
            changes: Duration::from_secs(2),
        },
        host_addresses: vec![],
        dns_servers: vec![],
    }
}

/// The workspace events a hub emitted, with their reasons.
type Seen = Arc<Mutex<Vec<(WorkspaceChange, Option<String>)>>>;

/// One hub on the fake engine, with a workspace and the events it emitted.
struct Hub {
    engine: FakeEngine,
    service: ContainerService<FakeEngine>,
    home: tempfile::TempDir,
    seen: Seen,
}

impl Hub {
    async fn new() -> Hub {
        let engine = FakeEngine::default();
        engine.state().host_port = healthy_server().await;
        Hub::on(engine, tempfile::tempdir().unwrap(), None)
    }

    /// Another hub of the same owner and Po home on the same engine.
    fn on(engine: FakeEngine, home: tempfile::TempDir, broker: Option<BrokerWiring>) -> Hub {
        let events = EventBus::default();
        let seen: Seen = Arc::default();
        let s = seen.clone();
        events.subscribe(Arc::new(move |e: &Event| {
            if let Event::Workspace { state, reason, .. } = e {
                s.lock().unwrap().push((*state, reason.clone()));
            }
        }));
        let service = ContainerService::new(engine.clone(), config(home.path(), broker), events);
        Hub {
            engine,
            service,
            home,
            seen,
        }
    }

    /// A second hub sharing this one's engine, Po home and broker folder (this one stays).
    fn again_with(&self, wiring: BrokerWiring) -> Hub {
        let home = tempfile::TempDir::new().unwrap();
        let mut hub = Hub::on(self.engine.clone(), home, Some(wiring));
        let config = config(self.home.path(), hub.service.inner.config.broker.clone());
        hub.service = ContainerService::new(self.engine.clone(), config, EventBus::default());
        hub
    }

    /// A second hub sharing this one's engine and Po home.
    fn again(self) -> Hub {
        let Hub { engine, home, .. } = self;
        Hub::on(engine, home, None)
    }

    fn ws(&self, id: &str) -> Workspace {
        let path = self.home.path().join("src").join(id);
        std::fs::create_dir_all(&path).unwrap();
        Workspace {
            id: id.into(),
            path: path.canonicalize().unwrap(),
            mode: None,
        }
    }

    fn changes(&self) -> Vec<WorkspaceChange> {
        self.seen.lock().unwrap().iter().map(|(c, _)| *c).collect()
    }

    fn token(&self, id: &str) -> std::path::PathBuf {
        spec::token_file(&self.home.path().join("po"), "hub1", id)
    }

    /// Every container's name on the engine, sorted.
    fn names(&self) -> Vec<String> {
        let mut n: Vec<String> = self
            .engine
            .state()
            .containers
            .values()
            .map(|c| c.name.clone())
            .collect();
        n.sort();
        n
    }

    fn holders(&self) -> usize {
        let s = self.engine.state();
        s.containers
            .values()
            .filter(|c| {
                c.body
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(LABEL_HOLDER_OF))
            })
            .count()
    }
}

/// The workspace container's name for `acme` (the holder's starts with it too).
fn ws_name(hub: &Hub, id: &str) -> String {
    hub.service.spec_for(&hub.ws(id)).name
}

#[tokio::test]
async fn a_new_workspace_gets_a_container_in_its_holders_namespace() {
    let hub = Hub::new().await;
    let got = hub.service.start(hub.ws("acme")).await.unwrap();
    assert!(!got.adopted);
    assert_eq!(got.state, "running");
    assert_eq!(got.host_port, Some(hub.engine.state().host_port));
    let s = hub.engine.state();
    let c = &s.containers[&got.container_id];
    let mode = State::network_mode_of(c);
    let holder = mode.strip_prefix("container:").expect("joined its holder");
    assert_eq!(s.containers[holder].status, "running");
    assert_eq!(
        s.containers.len(),
        2,
        "the helper is gone: {:?}",
        hub.names()
    );
    drop(s);
    assert!(hub.token("acme").exists());
    assert_eq!(
        hub.changes(),
        [
            WorkspaceChange::Starting,
            WorkspaceChange::Created,
            WorkspaceChange::Ready
        ]
    );
}

#[tokio::test]
async fn the_holder_starts_and_its_helper_loads_the_rules_before_the_container_starts() {
    let hub = Hub::new().await;
    hub.service.start(hub.ws("acme")).await.unwrap();
    let name = ws_name(&hub, "acme");
    let calls = hub.engine.state().calls.clone();
    let at = |call: &str| {
        calls
            .iter()
            .position(|c| c == call)
            .unwrap_or_else(|| panic!("no {call} in {calls:#?}"))
    };
    let holder = crate::sandbox::on_engine::holder::holder_name("hub1", "acme");
    let helper_start = calls
        .iter()
        .position(|c| c.starts_with("start_container anon_"))
        .expect("a helper ran");
    assert!(at(&format!("create_container {holder}")) < at(&format!("start_container {holder}")));
    assert!(at(&format!("start_container {holder}")) < helper_start);
    assert!(helper_start < at(&format!("start_container {name}")));
    assert!(calls.iter().any(|c| c.starts_with("wait_container anon_")));
    assert!(
        calls
            .iter()
            .any(|c| c.starts_with("remove_container anon_"))
    );
}

#[tokio::test]
async fn a_running_container_that_satisfies_the_spec_is_adopted_by_the_next_hub() {
    let hub = Hub::new().await;
    let first = hub.service.start(hub.ws("acme")).await.unwrap();
    let hub = hub.again();
    let creates = hub.engine.count("create_container");
    let second = hub.service.start(hub.ws("acme")).await.unwrap();
    assert!(second.adopted);
    assert_eq!(second.container_id, first.container_id);
    assert_eq!(hub.engine.count("create_container"), creates);
    assert_eq!(
        hub.changes(),
        [WorkspaceChange::Starting, WorkspaceChange::Adopted]
    );
}

#[tokio::test]
async fn a_spawner_that_cannot_run_is_said_in_the_posture_of_that_container_only() {
    use crate::sandbox::on_engine::exec::spawner::{Record, record_path};
    let hub = Hub::new().await;
    let first = hub.service.start(hub.ws("acme")).await.unwrap();
    assert_eq!(first.posture.exec_spawner, None);
    let why = "its exec spawner cannot run in this container (no mkfifo)";
    let record = |container_id: &str| Record {
        container_id: container_id.into(),
        pid: 1,
        start_time: 1,
        socket: "exec-x.sock".into(),
        failed: Some(why.into()),
    };
    let at = record_path(Path::new(&first.token_file));
    std::fs::write(
        &at,
        serde_json::to_vec(&record(&first.container_id)).unwrap(),
    )
    .unwrap();
    let hub = hub.again();
    let adopted = hub.service.start(hub.ws("acme")).await.unwrap();
    assert!(adopted.adopted);
    assert_eq!(adopted.posture.exec_spawner.as_deref(), Some(why));
    // The record of another container (the one before a replacement) says nothing of this one.
    std::fs::write(&at, serde_json::to_vec(&record("c-gone")).unwrap()).unwrap();
    let listed = hub.service.list().await.unwrap();
    assert_eq!(listed[0].posture.exec_spawner, None);
}

#[tokio::test]
async fn a_drifted_container_is_replaced_and_says_why() {
    let hub = Hub::new().await;
    let first = hub.service.start(hub.ws("acme")).await.unwrap();
    {
        let mut s = hub.engine.state();
        let c = s.containers.get_mut(&first.container_id).unwrap();
        c.body.host_config.as_mut().unwrap().cap_add = Some(vec!["NET_RAW".into()]);
    }
    let hub = hub.again();
    let second = hub.service.start(hub.ws("acme")).await.unwrap();
    assert!(!second.adopted);
    assert_ne!(second.container_id, first.container_id);
    let why = second.replaced_reason.expect("a reason");
    assert!(why.contains("adds capabilities (NET_RAW)"), "{why}");
    assert!(
        !hub.engine
            .state()
            .containers
            .contains_key(&first.container_id)
    );
    assert_eq!(hub.holders(), 1);
    assert!(hub.changes().contains(&WorkspaceChange::Replaced));
}

#[tokio::test]
async fn a_stopped_leftover_is_removed_and_a_new_container_made() {
    let hub = Hub::new().await;
    let first = hub.service.start(hub.ws("acme")).await.unwrap();
    hub.engine
        .state()
        .containers
        .get_mut(&first.container_id)
        .unwrap()
        .status = "exited";
    let hub = hub.again();
    let second = hub.service.start(hub.ws("acme")).await.unwrap();
    assert_ne!(second.container_id, first.container_id);
    assert_eq!(hub.names().len(), 2, "{:?}", hub.names());
}

#[tokio::test]
async fn adopt_never_creates_and_removes_a_drifted_container() {
    let hub = Hub::new().await;
    assert!(hub.service.adopt("acme", None).await.unwrap().is_none());
    assert_eq!(hub.engine.count("create_container"), 0);
    let first = hub.service.start(hub.ws("acme")).await.unwrap();
    let path = first.workspace_path.clone();
    let adopted = hub.service.adopt("acme", path.as_deref()).await.unwrap();
    assert_eq!(adopted.unwrap().container_id, first.container_id);
    hub.engine
        .state()
        .containers
        .get_mut(&first.container_id)
        .unwrap()
        .body
        .host_config
        .as_mut()
        .unwrap()
        .privileged = Some(true);
    assert!(
        hub.service
            .adopt("acme", path.as_deref())
            .await
            .unwrap()
            .is_none()
    );
    assert!(hub.names().is_empty(), "{:?}", hub.names());
    assert!(!hub.token("acme").exists());
}

#[tokio::test]
async fn losing_the_name_race_adopts_the_winner_and_removes_its_own_holder() {
    let hub = Hub::new().await;
    let first = hub.service.start(hub.ws("acme")).await.unwrap();
    // The winner's holder under another name: this hub's own holder is made beside it, as
    // when both race from the start (the holder's name is not what arbitrates).
    {
        let mut s = hub.engine.state();
        let holder = crate::sandbox::on_engine::holder::holder_name("hub1", "acme");
        let id = s.find(&holder).unwrap().id.clone();
        s.containers.get_mut(&id).unwrap().name = "winners-holder".into();
    }
    let hub = hub.again();
    let name = ws_name(&hub, "acme");
    // The pre-create look finds nothing (the winner was not there yet): the create gets 409.
    hub.engine
        .fault("inspect_container", &name, Fault::Fail(404), Some(1));
    let got = hub
        .service
        .start_with(
            hub.ws("acme"),
            ReadBefore {
                ids: Some(vec![]),
                ..ReadBefore::default()
            },
        )
        .await
        .unwrap();
    assert!(got.adopted);
    assert_eq!(got.container_id, first.container_id);
    assert!(
        hub.engine
            .state()
            .calls
            .contains(&format!("create_container {name}"))
    );
    assert_eq!(hub.holders(), 1, "{:?}", hub.names());
    assert_eq!(hub.names(), [name, "winners-holder".to_string()]);
}

/// A hub start's read-ahead (the container inspected beside the holder the list names, its
/// server asked) stands for the start's own inspects only under the start lock taken before
/// the read; without it, the start inspects again.
#[tokio::test]
async fn a_read_ahead_stands_for_the_inspects_only_under_the_lock_taken_before_it() {
    let hub = Hub::new().await;
    let first = hub.service.start(hub.ws("acme")).await.unwrap();
    let home = hub.home.path().join("po");
    let inspects = || hub.engine.count("inspect_container");
    // An adoption that read nothing before: its own inspects (the container, its holder).
    let before = inspects();
    let plain = hub.service.start(hub.ws("acme")).await.unwrap();
    assert!(plain.adopted);
    let own = inspects() - before;
    let read_ahead = |held: &[&str]| {
        let held = held.iter().map(|w| w.to_string()).collect();
        let read = crate::sandbox::on_engine::read_ahead;
        read(&hub.engine, "hub1", (7300, "/api/health"), async { held })
    };
    // A workspace whose lock the caller did not take is not read.
    assert!(read_ahead(&[]).await.unwrap().asked.is_empty());
    let read = |lock| async {
        let known = read_ahead(&["acme"]).await.unwrap();
        let asked = known.asked.get(&first.container_id).cloned();
        assert!(asked.is_some(), "the running container is asked ahead");
        let live = asked.as_ref().unwrap().inspected().await.unwrap();
        assert!(
            live.posture.holder.is_some(),
            "its holder is read beside it"
        );
        ReadBefore {
            ids: Some(vec![first.container_id.clone()]),
            asked,
            guards: None,
            lock,
        }
    };
    // Under the lock taken before the read: the read's two inspects are the only ones.
    let before = inspects();
    let lock = start_lock_now(&home, "hub1", "acme").expect("the lock is free");
    let read_first = read(Some(lock)).await;
    let got = hub.service.start_with(hub.ws("acme"), read_first).await;
    assert!(got.unwrap().adopted);
    assert_eq!(inspects() - before, own);
    // Without it: the start inspects again after the read.
    let before = inspects();
    let read_first = read(None).await;
    let got = hub.service.start_with(hub.ws("acme"), read_first).await;
    assert!(got.unwrap().adopted);
    assert_eq!(inspects() - before, own + 2);
}

/// A start that fails at `call` on `subject` leaves nothing: no container, holder, helper,
/// token file, review baseline or grant.
async fn fails_cleanly(call: &str, subject: &str, fault: Fault) -> (Hub, Error) {
    let hub = Hub::new().await;
    let subject = match subject {
        "workspace" => ws_name(&hub, "acme"),
        "holder" => crate::sandbox::on_engine::holder::holder_name("hub1", "acme"),
        other => other.to_string(),
    };
    hub.engine.fault(call, &subject, fault, None);
    let e = hub.service.start(hub.ws("acme")).await.unwrap_err();
    assert!(
        hub.names().is_empty(),
        "{call} {subject}: left {:?}",
        hub.names()
    );
    assert!(!hub.token("acme").exists(), "{call}: the token file stays");
    let baseline =
        crate::sandbox::folder::review::baseline_path(&hub.home.path().join("po"), "hub1", "acme");
    assert!(
        !baseline.exists(),
        "{call}: the fresh review baseline stays"
    );
    assert_eq!(hub.changes().last(), Some(&WorkspaceChange::Failed));
    (hub, e)
}

#[tokio::test]
async fn a_container_that_does_not_start_is_removed_with_its_holder_and_token() {
    let (_, e) = fails_cleanly("start_container", "workspace", Fault::Fail(500)).await;
    assert_eq!(e.code(), "CONTAINER_FAILED", "{e}");
}

#[tokio::test]
async fn a_container_that_cannot_be_created_takes_its_holder_with_it() {
    let (_, e) = fails_cleanly("create_container", "workspace", Fault::Fail(500)).await;
    assert_eq!(e.code(), "ENGINE_REQUEST_FAILED", "{e}");
}

#[tokio::test]
async fn a_holder_that_does_not_start_takes_the_container_and_helper_with_it() {
    let (_, e) = fails_cleanly("start_container", "holder", Fault::Fail(500)).await;
    assert_eq!(e.code(), "ENGINE_REQUEST_FAILED", "{e}");
}

#[tokio::test]
async fn a_helper_that_fails_takes_the_holder_and_container_with_it() {
    let hub = Hub::new().await;
    hub.engine.state().exit_codes.push(("anon_".into(), 1));
    let e = hub.service.start(hub.ws("acme")).await.unwrap_err();
    assert!(e.to_string().contains("rules helper"), "{e}");
    assert!(hub.names().is_empty(), "left {:?}", hub.names());
    assert!(!hub.token("acme").exists());
}

#[tokio::test]
async fn a_helper_that_cannot_be_made_takes_the_holder_and_container_with_it() {
    fails_cleanly("create_container", "", Fault::Fail(500)).await;
}

#[tokio::test]
async fn an_unhealthy_container_is_removed_with_its_logs_in_the_error() {
    let hub = Hub::new().await;
    hub.engine.state().host_port = silent_port();
    let e = hub.service.start(hub.ws("acme")).await.unwrap_err();
    assert_eq!(e.code(), "CONTAINER_UNHEALTHY", "{e}");
    assert!(e.to_string().contains("fake logs"), "{e}");
    assert!(hub.names().is_empty(), "left {:?}", hub.names());
    assert!(!hub.token("acme").exists());
}

#[tokio::test]
async fn a_hung_engine_is_engine_timeout_and_what_was_made_is_removed() {
    let (_, e) = fails_cleanly("create_container", "workspace", Fault::Hang).await;
    assert_eq!(e.code(), "ENGINE_TIMEOUT", "{e}");
    assert!(
        e.to_string()
            .contains("PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS"),
        "{e}"
    );
}

#[tokio::test]
async fn a_failed_start_ends_the_broker_grant_it_made() {
    let (hub, broker) = broker_hub(RouteKind::Tcp).await;
    let name = ws_name(&hub, "acme");
    hub.engine
        .fault("start_container", &name, Fault::Fail(500), None);
    let grants = Arc::new(Mutex::new(Vec::new()));
    let g = grants.clone();
    let service = hub.service.clone();
    // The grant as the create made it, read when the container is created.
    hub.engine.state().on_call = Some(Box::new(move |call: &str| {
        if call.starts_with("start_container po-") {
            g.lock().unwrap().extend(service.granted("acme"));
        }
    }));
    hub.service.start(hub.ws("acme")).await.unwrap_err();
    let grants = grants.lock().unwrap();
    assert_eq!(grants.len(), 1, "a grant was made");
    assert!(
        !broker.grant_live(&grants[0]),
        "the grant outlived the failed start"
    );
    assert!(hub.service.granted("acme").is_none());
}

#[tokio::test]
async fn stop_removes_the_container_its_holder_token_and_network() {
    let hub = Hub::new().await;
    let got = hub.service.start(hub.ws("acme")).await.unwrap();
    assert!(hub.service.stop("acme").await.unwrap());
    assert!(hub.names().is_empty(), "{:?}", hub.names());
    assert!(hub.engine.state().networks.is_empty());
    assert!(!hub.token("acme").exists());
    assert!(hub.service.stop_requested(&got.container_id));
    assert_eq!(hub.changes().last(), Some(&WorkspaceChange::Stopped));
    assert!(
        !hub.service.stop("acme").await.unwrap(),
        "nothing left to stop"
    );
}

#[tokio::test]
async fn stop_all_stops_every_workspace_of_this_owner_only() {
    let hub = Hub::new().await;
    hub.service.start(hub.ws("acme")).await.unwrap();
    hub.service.start(hub.ws("beta")).await.unwrap();
    // Another owner's container on the same engine stays.
    let other = hub
        .engine
        .state()
        .create(
            Some("other"),
            crate::engine::model::ContainerCreateBody {
                labels: Some(HashMap::from([(
                    LABEL_OWNER.to_string(),
                    "hub2".to_string(),
                )])),
                ..Default::default()
            },
        )
        .unwrap();
    let stopped = hub.service.stop_all().await.unwrap();
    assert_eq!(stopped, ["acme", "beta"]);
    assert_eq!(hub.names(), ["other"]);
    assert!(hub.engine.state().containers.contains_key(&other));
    let listed = hub.service.list().await.unwrap();
    assert!(listed.is_empty());
}

#[tokio::test]
async fn a_restarted_holder_gets_its_rules_again_and_its_container_is_restarted_into_it() {
    let hub = Hub::new().await;
    let got = hub.service.start(hub.ws("acme")).await.unwrap();
    let holder = crate::sandbox::on_engine::holder::holder_name("hub1", "acme");
    let holder_id = {
        let mut s = hub.engine.state();
        let id = s.find(&holder).unwrap().id.clone();
        s.stop(&id).unwrap();
        s.start(&id).unwrap();
        id
    };
    let helpers = hub.engine.count("wait_container");
    hub.service
        .holder_started("acme", &holder_id)
        .await
        .unwrap();
    assert_eq!(
        hub.engine.count("wait_container"),
        helpers + 1,
        "a helper ran"
    );
    let restarted = hub
        .engine
        .state()
        .calls
        .iter()
        .any(|c| c.starts_with("restart_container po-"));
    assert!(restarted, "the container joins the new namespace");
    assert_eq!(hub.changes().last(), Some(&WorkspaceChange::Restarted));
    assert!(
        hub.engine
            .state()
            .containers
            .contains_key(&got.container_id)
    );
}

/// An engine restart starts holders and workspaces at once: a workspace container started before
/// its holder fails to join and stays down. The holder's start (its event, or the feed's
/// resynchronising list) starts it; one stopped on request stays stopped.
#[tokio::test]
async fn a_workspace_container_left_down_by_a_failed_start_is_started_once_its_holder_runs() {
    let hub = Hub::new().await;
    let got = hub.service.start(hub.ws("acme")).await.unwrap();
    let holder = crate::sandbox::on_engine::holder::holder_name("hub1", "acme");
    let holder_id = {
        let mut s = hub.engine.state();
        let id = s.find(&holder).unwrap().id.clone();
        s.stop(&got.container_id).unwrap();
        s.stop(&id).unwrap();
        let failed = s.start(&got.container_id).unwrap_err();
        assert!(failed.to_string().contains("non running"), "{failed}");
        s.start(&id).unwrap();
        id
    };
    hub.service
        .holder_started("acme", &holder_id)
        .await
        .unwrap();
    assert_eq!(
        hub.engine.state().find(&got.container_id).unwrap().status,
        "running"
    );
    assert_eq!(hub.changes().last(), Some(&WorkspaceChange::Restarted));

    // Down without a failed start (stopped by someone): left as it is.
    {
        let mut s = hub.engine.state();
        s.stop(&got.container_id).unwrap();
        s.stop(&holder_id).unwrap();
        s.start(&holder_id).unwrap();
    }
    let said = hub.changes().len();
    hub.service
        .holder_started("acme", &holder_id)
        .await
        .unwrap();
    assert_eq!(hub.changes().len(), said, "nothing said, nothing started");
    assert_eq!(
        hub.engine.state().find(&got.container_id).unwrap().status,
        "exited"
    );
}

#[tokio::test]
async fn the_feed_reports_a_death_and_the_engines_restart_but_not_a_stop_on_request() {
    let hub = Hub::new().await;
    let got = hub.service.start(hub.ws("acme")).await.unwrap();
    let changes = Arc::new(Mutex::new(0));
    let c = changes.clone();
    let on_change: crate::sandbox::service::feed::OnChange =
        Arc::new(move |_: &str, _: &WorkspaceContainer| {
            *c.lock().unwrap() += 1;
            true
        });
    let feed = tokio::spawn(crate::sandbox::service::feed::follow(
        hub.service.clone(),
        on_change,
    ));
    tokio::time::sleep(Duration::from_millis(50)).await;
    hub.engine.state().stop(&got.container_id).unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    hub.engine.state().start(&got.container_id).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let seen = hub.changes();
    assert!(
        seen.ends_with(&[WorkspaceChange::Died, WorkspaceChange::Restarted]),
        "{seen:?}"
    );
    assert!(*changes.lock().unwrap() >= 2);
    hub.service.stop("acme").await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(hub.changes().last(), Some(&WorkspaceChange::Stopped));
    feed.abort();
}

use crate::engine::fake::State;

#[tokio::test]
async fn a_folder_overlapping_another_workspace_or_the_po_home_is_refused_with_nothing_made() {
    let hub = Hub::new().await;
    hub.service.start(hub.ws("web")).await.unwrap();
    let made = hub.names();
    let inner = Workspace {
        id: "api".into(),
        path: hub.ws("web").path.join("api"),
        mode: None,
    };
    std::fs::create_dir_all(&inner.path).unwrap();
    let po_home = Workspace {
        id: "home".into(),
        path: hub.home.path().canonicalize().unwrap(),
        mode: None,
    };
    for ws in [inner.clone(), po_home] {
        let err = hub.service.start(ws.clone()).await.unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_INVALID", "{ws:?}");
        assert_eq!(hub.names(), made, "nothing made for {ws:?}");
        assert!(!hub.token(&ws.id).exists());
    }
    // Once the other workspace is stopped, its folder is free.
    hub.service.stop("web").await.unwrap();
    hub.service.start(inner).await.unwrap();
}

/// A hub whose containers reach the broker by `route` (sockets under `<home>/s`), and its
/// broker.
async fn broker_hub(route: RouteKind) -> (Hub, crate::broker::server::Broker) {
    let engine = FakeEngine::default();
    engine.state().host_port = healthy_server().await;
    let home = tempfile::tempdir().unwrap();
    let broker = crate::broker::server::Broker::start(crate::broker::server::BrokerOptions {
        host_env: HashMap::from([("OPENAI_API_KEY".to_string(), "sk-test".to_string())]),
        socket_dir: home.path().join("sockets"),
        tcp: route == RouteKind::Tcp,
        egress: None,
        fetch_screen: false,
        registries: Vec::new(),
        git: None,
    })
    .await
    .unwrap();
    let wiring = BrokerWiring {
        broker: broker.clone(),
        transport: route,
        socket_root: home.path().join("s"),
    };
    (Hub::on(engine, home, Some(wiring)), broker)
}

/// A hub whose containers reach the broker by a socket under `<home>/s`.
async fn socket_hub() -> Hub {
    broker_hub(RouteKind::Socket).await.0
}

/// The names in a folder, sorted (none when it is missing).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn start_stop_cycles_leave_no_socket_folder_lock_or_token_file() {
    let hub = socket_hub().await;
    let sockets = hub.home.path().join("s");
    let tokens = hub.token("acme").parent().unwrap().to_path_buf();
    for _ in 0..3 {
        hub.service.start(hub.ws("acme")).await.unwrap();
        assert_eq!(
            listing(&sockets).len(),
            2,
            "the folder and its lock while it runs"
        );
        assert!(hub.service.stop("acme").await.unwrap());
        assert_eq!(listing(&sockets), Vec::<String>::new());
        assert_eq!(listing(&tokens), Vec::<String>::new());
    }
    hub.service.start(hub.ws("acme")).await.unwrap();
    hub.service.start(hub.ws("beta")).await.unwrap();
    assert_eq!(hub.service.stop_all().await.unwrap(), ["acme", "beta"]);
    assert_eq!(listing(&sockets), Vec::<String>::new());
    assert_eq!(listing(&tokens), Vec::<String>::new());
}

#[tokio::test]
async fn start_up_sweeps_what_killed_hubs_left_and_keeps_what_runs() {
    let hub = socket_hub().await;
    hub.service.start(hub.ws("acme")).await.unwrap();
    let sockets = hub.home.path().join("s");
    let tokens = hub.token("acme").parent().unwrap().to_path_buf();
    let dead = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    // A killed hub's write-asides, and the folder and lock of a workspace stopped meanwhile.
    std::fs::write(tokens.join(format!("beta.token.tmp-{dead}")), "half").unwrap();
    std::fs::write(tokens.join(format!("acme.net.tmp-{dead}")), "half").unwrap();
    std::fs::write(tokens.join("gone.net"), "h1 t -").unwrap();
    let wiring = hub.service.inner.config.broker.clone().unwrap();
    let gone = wiring.socket_folder("hub1", "gone");
    std::fs::create_dir_all(&gone).unwrap();
    std::fs::write(gone.with_extension("lock"), "").unwrap();
    let before = listing(&sockets);
    let swept = hub.again_with(wiring).service.sweep_files();
    assert_eq!(swept.asides.len(), 3, "{swept:?}");
    assert_eq!(swept.broker, [gone.clone(), gone.with_extension("lock")]);
    assert_eq!(listing(&tokens), ["acme.lock", "acme.net", "acme.token"]);
    assert_eq!(
        listing(&sockets).len(),
        before.len() - 2,
        "the running workspace's folder and lock stay"
    );
}

#[tokio::test]
async fn the_review_baseline_is_taken_before_the_container_and_goes_with_the_stop() {
    use crate::sandbox::folder::review;
    let hub = Hub::new().await;
    let ws = hub.ws("acme");
    std::fs::write(ws.path.join("Makefile"), "all:\n").unwrap();
    let home = hub.home.path().join("po");
    let baseline = review::baseline_path(&home, "hub1", "acme");
    let first = hub.service.start(ws.clone()).await.unwrap();
    assert!(baseline.exists());
    // The agent's write, then its container drifts and is replaced: the older baseline stays,
    // so the write still shows.
    std::fs::write(ws.path.join("Makefile"), "all:\n\tcurl x | sh\n").unwrap();
    {
        let mut s = hub.engine.state();
        let c = s.containers.get_mut(&first.container_id).unwrap();
        c.body.host_config.as_mut().unwrap().cap_add = Some(vec!["NET_RAW".into()]);
    }
    let hub = hub.again();
    assert!(!hub.service.start(ws.clone()).await.unwrap().adopted);
    let r = review::review(&home, "hub1", "acme").unwrap();
    assert_eq!(r.changes.len(), 1, "{r:?}");
    // A replacement that fails keeps the older baseline (it is not this create's).
    {
        let mut s = hub.engine.state();
        let c = s
            .containers
            .values_mut()
            .find(|c| c.name == ws_name(&hub, "acme"));
        c.unwrap().body.host_config.as_mut().unwrap().cap_add = Some(vec!["NET_RAW".into()]);
    }
    let hub = hub.again();
    let name = ws_name(&hub, "acme");
    hub.engine
        .fault("start_container", &name, Fault::Fail(500), Some(1));
    assert!(hub.service.start(ws.clone()).await.is_err());
    assert_eq!(
        review::review(&home, "hub1", "acme").unwrap().changes.len(),
        1
    );
    let hub = hub.again();
    assert!(!hub.service.start(ws.clone()).await.unwrap().adopted);
    // A container adopted without a baseline gets one.
    std::fs::remove_file(&baseline).unwrap();
    let hub = hub.again();
    assert!(hub.service.start(ws.clone()).await.unwrap().adopted);
    assert!(baseline.exists());
    assert!(hub.service.stop("acme").await.unwrap());
    assert!(!baseline.exists());
    let e = review::review(&home, "hub1", "acme").unwrap_err();
    assert_eq!(e.code(), "REVIEW_UNAVAILABLE");
}

#[test]
fn a_container_is_the_workspaces_only_with_its_owner_id_and_folder_labels() {
    let ws = Workspace {
        id: "w1".into(),
        path: "/work/p".into(),
        mode: None,
    };
    let full = [
        (spec::LABEL_OWNER, "o1"),
        (spec::LABEL_WORKSPACE, "w1"),
        (LABEL_WORKSPACE_PATH, "/work/p"),
    ];
    let labels = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(lifecycle::is_workspace_container(&labels(&full), "o1", &ws));
    let cases: [(&str, &[(&str, &str)]); 6] = [
        ("another owner", &[(spec::LABEL_OWNER, "o2")]),
        ("another workspace", &[(spec::LABEL_WORKSPACE, "w2")]),
        ("another folder", &[(LABEL_WORKSPACE_PATH, "/work/q")]),
        ("a folder inside", &[(LABEL_WORKSPACE_PATH, "/work/p/sub")]),
        ("no owner", &[(spec::LABEL_OWNER, "")]),
        ("no folder", &[(LABEL_WORKSPACE_PATH, "")]),
    ];
    for (what, changed) in cases {
        let mut l = labels(&full);
        for (k, v) in changed {
            if v.is_empty() {
                l.remove(*k);
            } else {
                l.insert(k.to_string(), v.to_string());
            }
        }
        assert!(!lifecycle::is_workspace_container(&l, "o1", &ws), "{what}");
    }
}

/// The workspace `id` of this hub in clone mode.
fn clone_ws(hub: &Hub, id: &str) -> Workspace {
    Workspace {
        mode: Some(crate::sandbox::folder::clone::WorkspaceMode::Clone),
        ..hub.ws(id)
    }
}

#[tokio::test]
async fn a_clone_is_filled_once_kept_by_stops_and_replaced_when_the_mode_changes() {
    let hub = Hub::new().await;
    let ws = clone_ws(&hub, "acme");
    std::fs::write(ws.path.join("a.txt"), "a").unwrap();
    let got = hub.service.start(ws.clone()).await.unwrap();
    let copy = crate::sandbox::folder::clone::copy_volume_name("hub1", "acme");
    {
        let s = hub.engine.state();
        assert_eq!(s.uploads.len(), 1);
        let (container, path, tar) = &s.uploads[0];
        assert_eq!(container, &got.container_id);
        assert_eq!(path, &ws.path.to_string_lossy());
        assert!(
            !tar.exists(),
            "the prepared copy is removed after the upload"
        );
        assert_eq!(
            s.volumes[&copy][crate::sandbox::folder::clone::LABEL_COPY],
            "1"
        );
        let body = &s.containers[&got.container_id].body;
        let binds = body.host_config.as_ref().unwrap().mounts.clone().unwrap();
        let host = ws.path.to_string_lossy();
        assert!(!binds.iter().any(|m| m.source.as_deref() == Some(&*host)));
    }
    hub.service.stop_all().await.unwrap();
    assert!(
        hub.engine.state().volumes.contains_key(&copy),
        "stopAll keeps it"
    );
    hub.service.start(ws.clone()).await.unwrap();
    assert_eq!(hub.engine.state().uploads.len(), 1, "never filled again");
    let bind = Workspace { mode: None, ..ws };
    let again = hub.service.start(bind).await.unwrap();
    assert!(again.replaced_reason.unwrap().contains("not adopted"));
    assert!(
        hub.engine.state().volumes.contains_key(&copy),
        "kept on a switch"
    );
}

#[tokio::test]
async fn a_failed_clone_start_removes_the_copy_it_made() {
    let hub = Hub::new().await;
    let ws = clone_ws(&hub, "acme");
    let name = hub.service.spec_for(&ws).name;
    hub.engine
        .fault("start_container", &name, Fault::Fail(500), None);
    hub.service.start(ws).await.unwrap_err();
    let copy = crate::sandbox::folder::clone::copy_volume_name("hub1", "acme");
    assert!(!hub.engine.state().volumes.contains_key(&copy));
    assert!(hub.names().is_empty(), "{:?}", hub.names());
}

#[tokio::test]
async fn a_clone_whose_volumes_cannot_be_made_leaves_no_empty_copy() {
    let hub = Hub::new().await;
    let ws = clone_ws(&hub, "acme");
    let copy = crate::sandbox::folder::clone::copy_volume_name("hub1", "acme");
    hub.engine
        .fault("create_volume", &copy, Fault::Fail(500), None);
    hub.service.start(ws).await.unwrap_err();
    assert!(!hub.engine.state().volumes.contains_key(&copy));
    assert!(hub.names().is_empty(), "{:?}", hub.names());
}
