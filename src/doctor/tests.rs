use super::*;

#[test]
fn node_versions() {
    assert!(check_node("v24.0.0").ok);
    assert!(check_node("v25.1.2").ok);
    assert!(!check_node("v20.20.2").ok);
    assert!(!check_node("").ok);
    assert!(!check_node("banana").ok);
}

fn report(engine_ok: bool, runtime_ok: bool) -> DoctorReport {
    let engine = EngineReport {
        available: engine_ok,
        reason: (!engine_ok).then(|| "No container engine is running here.".into()),
        reason_code: (!engine_ok).then(|| "ENGINE_NOT_INSTALLED".into()),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = if runtime_ok {
        RuntimeCheck {
            ok: true,
            root: "/r".into(),
            version: Some("1.0.0".into()),
            reason: None,
            code: None,
        }
    } else {
        check_runtime(dir.path(), None, false)
    };
    let image = ImageCheck {
        tag: "po-sandbox:x".into(),
        base: "b".into(),
        variant: "full".into(),
        present: None,
        base_present: None,
        base_id: None,
        base_created: None,
    };
    let node = check_node("v24.3.0");
    let ok = node.ok && engine_ok && runtime_ok;
    DoctorReport {
        ok,
        node,
        engine,
        runtime,
        image,
        guarded_paths: vec![".git/hooks".into()],
        run_flags: vec![],
        network: "open".into(),
        network_source: "the default".into(),
        policy_problem: None,
        brokered: super::git::BrokeredCheck {
            git: vec![],
            git_source: "the default".into(),
            git_push_rules: 0,
            registries: vec![],
        },
        networks: None,
        hubs: None,
        round_trip_ms: None,
        warnings: vec![],
        text: String::new(),
    }
}

#[tokio::test]
async fn the_per_hub_networks_are_counted_and_many_are_a_warning() {
    let engine = crate::engine::fake::FakeEngine::default();
    for i in 0..3 {
        crate::sandbox::on_engine::ensure_network(&engine, &format!("o{i}"))
            .await
            .unwrap();
    }
    let mut warnings = vec![];
    let check = network_check(&engine, &mut warnings).await.unwrap();
    assert_eq!(
        check,
        NetworkCheck {
            per_hub: 3,
            unused: 3
        }
    );
    assert!(warnings.is_empty());
    for i in 3..MANY_NETWORKS {
        crate::sandbox::on_engine::ensure_network(&engine, &format!("o{i}"))
            .await
            .unwrap();
    }
    let check = network_check(&engine, &mut warnings).await.unwrap();
    assert_eq!(check.per_hub, MANY_NETWORKS);
    assert!(warnings[0].contains("po-sandbox prune"), "{warnings:?}");
    let mut r = report(true, true);
    r.networks = Some(check);
    let text = render(&r);
    assert!(
        text.contains("Networks  20 per-hub networks, 20 with no container"),
        "{text}"
    );
}

#[test]
fn render_lists_the_guarded_paths_and_warns_when_there_are_none() {
    let text = render(&report(true, true));
    assert!(
        text.contains("Guarded   read-only inside: .git/hooks"),
        "{text}"
    );
    let mut none = report(true, true);
    none.guarded_paths.clear();
    none.warnings.push("no guarded paths".into());
    let text = render(&none);
    assert!(
        text.contains("Guarded   none") && text.contains("Warning   no guarded paths"),
        "{text}"
    );
}

#[test]
fn render_names_each_reason_and_the_verdict() {
    let text = render(&report(false, false));
    assert!(
        text.contains("ENGINE_NOT_INSTALLED") && text.contains("No container engine"),
        "{text}"
    );
    assert!(
        text.contains("RUNTIME_NOT_INSTALLED") && text.contains("container-runtime"),
        "{text}"
    );
    assert!(
        text.contains("not ready") && text.contains("install the runtime bundle"),
        "{text}"
    );
    let mut r = report(true, true);
    r.node = check_node("v20.1.0");
    r.ok = false;
    assert!(render(&r).contains("too old, needs Node.js 24 or newer"));
    assert!(render(&report(true, true)).contains("ready: the sandbox layer can run here"));
}

#[cfg(unix)]
#[test]
fn a_remote_engine_is_named_and_says_what_is_carried() {
    let mut r = report(true, true);
    r.engine.remote = true;
    r.engine.endpoint = Some("tcp://10.0.0.5:2375".into());
    r.engine.host_name = Some("buildbox".into());
    let text = render(&r);
    assert!(
        text.contains("machine buildbox (another machine)"),
        "{text}"
    );
    assert!(text.contains(CARRIED_LINE), "{text}");
    assert!(!text.contains("not usable"), "{text}");
    assert!(not_ready_actions(&r).is_empty());
}

#[test]
fn node_and_candidate_sections_are_exact() {
    assert_eq!(
        node_section(&check_node("v24.3.0")),
        "Node.js   v24.3.0: ok\n\n"
    );
    assert_eq!(
        node_section(&check_node("")),
        "Node.js   unknown: too old, needs Node.js 24 or newer\n\n"
    );
    let c = |engine: &str, outcome: CandidateOutcome| CandidateReport {
        engine: engine.into(),
        endpoint: "unix:///s".into(),
        source: "rootful".into(),
        outcome,
        detail: "d".into(),
        context: None,
    };
    assert_eq!(
        candidates_section(&[
            c("docker", CandidateOutcome::Available),
            c("podman", CandidateOutcome::NotFound),
            c("finch", CandidateOutcome::Stopped)
        ]),
        "Engine candidates, in the order tried:\n  [ok] docker   unix:///s (rootful): d\n  [--] podman   unix:///s (rootful): d\n  [!!] finch    unix:///s (rootful): d\n\n"
    );
}

#[test]
fn engine_and_runtime_sections_are_exact() {
    let mut e = EngineReport {
        available: true,
        engine: Some("docker".into()),
        engine_version: Some("28.1".into()),
        endpoint: Some("unix:///var/run/docker.sock".into()),
        api_version: Some("1.47".into()),
        os: Some("Debian".into()),
        os_type: Some("linux".into()),
        arch: Some("x86_64".into()),
        vm: true,
        rootless: true,
        host_name: Some("laptop".into()),
        ..Default::default()
    };
    assert_eq!(
        engine_section(&e, Some(2)),
        "Engine    docker 28.1 at unix:///var/run/docker.sock\n          API 1.47, Debian linux/x86_64, in a VM, rootless\n          over a Unix socket, machine laptop, 2 ms a round trip\n"
    );
    e.remote = true;
    e.endpoint = Some("tcp://10.0.0.5:2376".into());
    e.transport = Some("tls".into());
    e.tls_certs = Some("/home/me/.docker".into());
    e.host_name = Some("build-box".into());
    let carried = match REMOTE_CARRIED {
        true => CARRIED_LINE.to_string(),
        false => format!(
            "          not usable here (remote): {}\n",
            engine::remote_reason(&e)
        ),
    };
    assert!(engine_section(&e, None).ends_with(&format!(
        "rootless\n          over TLS (certificates in /home/me/.docker), machine build-box (another machine)\n{carried}"
    )));
    e.transport = Some("ssh".into());
    e.tls_certs = None;
    assert!(
        engine_section(&e, Some(31)).contains(
            "over SSH (ssh … docker system dial-stdio), machine build-box (another machine), 31 ms a round trip\n"
        )
    );
    let rt = report(true, true).runtime;
    assert_eq!(runtime_section(&rt), "Runtime   1.0.0 in /r: ok\n");
}

#[test]
fn image_presence_covers_each_case() {
    let mut im = report(true, true).image;
    assert_eq!(image_presence(&im), "unknown (no engine)");
    im.present = Some(true);
    assert_eq!(
        image_section(&im),
        "Image     po-sandbox:x (full recipe on b): present\n"
    );
    im.present = Some(false);
    im.base_present = Some(true);
    assert_eq!(
        image_presence(&im),
        "not built yet; built from b at first start"
    );
    im.base_present = Some(false);
    assert!(image_presence(&im).starts_with("not built yet, and its base b is not on the engine"));
}

#[test]
fn not_ready_actions_follow_the_checks_in_order() {
    let mut r = report(false, false);
    r.node = check_node("v1");
    assert_eq!(
        not_ready_actions(&r),
        [
            "install Node.js 24 or newer",
            "make a container engine reachable (see Engine above)",
            "install the runtime bundle (see Runtime above)"
        ]
    );
    let mut r = report(true, true);
    assert!(not_ready_actions(&r).is_empty());
    r.engine.remote = true;
    let remote: &[&str] = match REMOTE_CARRIED {
        true => &[],
        false => &["use an engine on this machine (see Engine above)"],
    };
    assert_eq!(not_ready_actions(&r), remote);
}

#[test]
fn a_missing_bundle_is_fine_with_the_demo_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Option<&str>, bool, bool, Option<&str>); 3] = [
        (None, false, false, None),
        (None, true, true, Some("demo")),
        // A named version is never replaced by the demo.
        (Some("1.0.0"), true, false, None),
    ];
    for (version, demo, ok, shown) in cases {
        let rt = check_runtime(dir.path(), version, demo);
        assert_eq!(rt.ok, ok, "{version:?} {demo}");
        assert_eq!(rt.version.as_deref(), shown);
    }
    let rt = check_runtime(dir.path(), None, true);
    assert!(rt.reason.as_deref().unwrap().contains("demo bundle"));
    let text = runtime_section(&rt);
    assert!(text.contains("demo bundle: ok"), "{text}");
    assert!(text.contains("not installed"), "{text}");
    // Nothing is written by the check.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn render_shows_the_run_flags() {
    let mut r = report(true, true);
    assert!(render(&r).contains("Run flags none (runFlags, PO_SANDBOX_RUN_FLAGS)\n"));
    r.run_flags = vec!["--runtime=runsc".into(), "--memory=1g".into()];
    let text = render(&r);
    assert!(
        text.contains("Run flags --runtime=runsc --memory=1g\n"),
        "{text}"
    );
}

#[test]
fn docker_before_28_on_this_machine_is_a_warning_that_names_the_input_rules() {
    let engine = |kind: &str, version: &str, vm: bool, rootless: bool| EngineReport {
        available: true,
        engine: Some(kind.into()),
        engine_version: Some(version.into()),
        vm,
        rootless,
        ..Default::default()
    };
    // (engine, version, in a VM, rootless, warned)
    let cases = [
        ("docker", "20.10.24+dfsg1", false, false, true),
        ("docker", "27.5.1", false, false, true),
        ("docker", "28.0.0", false, false, false),
        ("docker", "28.0.0-rc.1", false, false, false),
        ("docker", "29.1.3", false, false, false),
        // Docker Desktop (a VM's bridge) and rootless Docker (rootlesskit's namespace).
        ("docker", "27.5.1", true, false, false),
        ("docker", "27.5.1", false, true, false),
        // Another engine, or a version that does not say.
        ("podman", "4.3.1", false, false, false),
        ("docker", "", false, false, false),
        ("docker", "dev", false, false, false),
    ];
    for (kind, version, vm, rootless, warned) in cases {
        let w = lan_exposure_warning(&engine(kind, version, vm, rootless));
        assert_eq!(
            w.is_some(),
            warned,
            "{kind} {version} vm={vm} rootless={rootless}: {w:?}"
        );
        if let Some(w) = w {
            assert!(w.contains(version) && w.contains("moby #45610"), "{w}");
            assert!(
                w.contains("drops every inbound connection but the server's port"),
                "{w}"
            );
        }
    }
    let mut gone = engine("docker", "20.10.24", false, false);
    gone.available = false;
    assert_eq!(lan_exposure_warning(&gone), None);
    // Not about a container runtime (the run-flags suite filters warnings on that word).
    let w = lan_exposure_warning(&engine("docker", "20.10.24", false, false)).unwrap();
    assert!(!w.contains("runtime"), "{w}");
    let mut r = report(true, true);
    r.warnings.push(w.clone());
    assert!(render(&r).contains(&format!("Warning   {w}")));
}

#[test]
fn each_workspace_whose_spawner_cannot_run_is_a_warning_with_the_fix() {
    let home = tempfile::tempdir().unwrap();
    assert!(
        spawner_warnings(home.path()).is_empty(),
        "no records: nothing"
    );
    let write = |owner: &str, id: &str, failed: Option<&str>| {
        let record = home
            .path()
            .join(format!("sandbox-tokens/{owner}/{id}.exec"));
        std::fs::create_dir_all(record.parent().unwrap()).unwrap();
        let json = serde_json::json!({
            "container_id": "c1", "pid": 1, "start_time": 1, "socket": "exec-1.sock",
            "failed": failed,
        });
        std::fs::write(record, json.to_string()).unwrap();
    };
    write(
        "hub1",
        "w1",
        Some("its exec spawner cannot run in this container (no mkfifo)"),
    );
    write("hub1", "w2", None);
    write(
        "hub2",
        "w3",
        Some("its exec spawner cannot run in this container (no node)"),
    );
    let warnings = spawner_warnings(home.path());
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].starts_with("workspace w1: its exec spawner cannot run"));
    assert!(warnings[0].contains("(no mkfifo)"));
    assert!(warnings[0].contains("base image with mkfifo"));
    assert!(warnings[1].starts_with("workspace w3: "));
}

#[tokio::test]
async fn the_hubs_are_counted_by_owner() {
    let engine = crate::engine::fake::FakeEngine::default();
    let none = hubs_check(&engine, "me").await.unwrap();
    assert_eq!((none.sandboxes, none.other_sandboxes), (0, 0));
    assert_eq!(
        hubs_section(&none),
        "Hubs      owner me (0 sandboxes); no other hub's on this engine (po-sandbox ls --all)\n"
    );
    let h = HubsCheck {
        owner: "me".into(),
        sandboxes: 2,
        other_sandboxes: 3,
        other_owners: vec!["a1".into(), "b2".into()],
    };
    assert_eq!(
        hubs_section(&h),
        "Hubs      owner me (2 sandboxes); 3 of 2 other hubs on this engine (po-sandbox ls --all)\n"
    );
    let one = HubsCheck {
        other_owners: vec!["a1".into()],
        other_sandboxes: 1,
        ..h
    };
    assert!(
        hubs_section(&one).contains("1 of 1 other hub (a1)"),
        "{}",
        hubs_section(&one)
    );
}

#[test]
fn the_image_line_says_which_base_and_how_old() {
    let mut im = report(true, true).image;
    im.present = Some(true);
    im.base_id = Some(format!("sha256:{}", "ab".repeat(32)));
    im.base_created = Some("2026-11-20T10:00:00.123456789Z".into());
    let line = image_section(&im);
    assert!(
        line.starts_with("Image     po-sandbox:x (full recipe on b abababababab, made "),
        "{line}"
    );
    // 30 days on, the line also says how to pull it again.
    assert!(
        line.contains(" ago") && line.ends_with("): present\n"),
        "{line}"
    );
    im.base_created = Some("2000-01-01T00:00:00Z".into());
    let stale = image_section(&im);
    assert!(
        stale.ends_with(" days ago; `po-sandbox up --pull` gets its newest): present\n"),
        "{stale}"
    );
    let day = std::time::Duration::from_secs(86_400);
    let at = |days: u64| std::time::UNIX_EPOCH + day * days as u32;
    assert_eq!(age_days("1970-01-01T00:00:00Z", at(0)), Some(0));
    // 2026-11-20 is day 20_777 of the Unix epoch.
    assert_eq!(age_days("2026-11-20T10:00:00Z", at(20_777 + 14)), Some(14));
    assert_eq!(age_days("2024-02-29", at(19_782)), Some(0));
    assert_eq!(age_days("2026-13-01", at(20_777)), None);
    assert_eq!(age_days("soon", at(20_777)), None);
    assert_eq!(age_days("2027-01-01", at(20_777)), None);
}
