use super::*;

#[test]
fn colour_codes_are_stripped() {
    assert_eq!(
        strip_ansi("\u{1b}[91mnpm error\u{1b}[0m done"),
        "npm error done"
    );
    assert_eq!(strip_ansi("plain"), "plain");
}

fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_and_overrides() {
    let r = ImageRecipe::resolve(None, None, &env(&[])).unwrap();
    assert_eq!(
        r,
        ImageRecipe {
            base: DEFAULT_BASE.into(),
            variant: Variant::Full,
            base_id: None,
        }
    );
    let r = ImageRecipe::resolve(
        None,
        None,
        &env(&[(BASE_VAR, "local/base:1"), (VARIANT_VAR, "minimal")]),
    )
    .unwrap();
    assert_eq!(
        r,
        ImageRecipe {
            base: "local/base:1".into(),
            variant: Variant::Minimal,
            base_id: None,
        }
    );
    let r = ImageRecipe::resolve(Some("opt/base"), Some("full"), &env(&[(BASE_VAR, "x")])).unwrap();
    assert_eq!(r.base, "opt/base");
    assert_eq!(
        ImageRecipe::resolve(None, Some("tiny"), &env(&[]))
            .unwrap_err()
            .code(),
        "OPTIONS_INVALID"
    );
    assert_eq!(
        ImageRecipe::resolve(Some("a b"), None, &env(&[]))
            .unwrap_err()
            .code(),
        "OPTIONS_INVALID"
    );
}

#[test]
fn digest_covers_base_variant_and_files() {
    let full = ImageRecipe {
        base: DEFAULT_BASE.into(),
        variant: Variant::Full,
        base_id: None,
    };
    let minimal = ImageRecipe {
        base: DEFAULT_BASE.into(),
        variant: Variant::Minimal,
        base_id: None,
    };
    let other_base = ImageRecipe {
        base: "node:24-bookworm".into(),
        variant: Variant::Full,
        base_id: None,
    };
    assert_eq!(full.digest(), full.clone().digest());
    assert_ne!(full.digest(), minimal.digest());
    assert_ne!(full.digest(), other_base.digest());
    assert_eq!(full.digest().len(), 64);
    assert!(full.tag().starts_with("po-sandbox:") && full.tag().len() == "po-sandbox:".len() + 24);
}

#[test]
fn full_recipe_installs_the_toolchain() {
    let full = ImageRecipe {
        base: DEFAULT_BASE.into(),
        variant: Variant::Full,
        base_id: None,
    };
    let d = full.dockerfile();
    assert!(d.starts_with("FROM node:24-bookworm-slim\n"));
    let setup = full
        .files()
        .iter()
        .find(|f| f.0 == "setup-full.sh")
        .unwrap()
        .2;
    for needle in [
        "git",
        "procps",
        "ripgrep",
        "libnss3",
        "fonts-liberation",
        "corepack enable",
        "/opt/cloak",
    ] {
        assert!(setup.contains(needle), "{needle}");
    }
    let dirs = full
        .files()
        .iter()
        .find(|f| f.0 == "setup-dirs.sh")
        .unwrap()
        .2;
    assert!(
        dirs.contains("chmod 1777")
            && dirs.contains("/po-home")
            && dirs.contains("/po-runtime")
            && dirs.contains("/po-git")
    );
}

#[test]
fn context_holds_dockerfile_and_files() {
    let r = ImageRecipe {
        base: "b".into(),
        variant: Variant::Minimal,
        base_id: None,
    };
    let bytes = r.context();
    let mut archive = tar::Archive::new(bytes.as_slice());
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["Dockerfile", "setup-dirs.sh"]);
}

/// Where the full recipe installs CloakBrowser.
const CLOAK_DIR: &str = "/opt/cloak";

/// The instructions of a Dockerfile, one per line.
fn instructions(d: &str) -> Vec<&str> {
    d.lines().filter(|l| !l.trim().is_empty()).collect()
}

#[test]
fn full_recipe_layers_set_the_browser_location_before_installing_it() {
    let full = ImageRecipe {
        base: DEFAULT_BASE.into(),
        variant: Variant::Full,
        base_id: None,
    };
    let d = full.dockerfile();
    assert_eq!(
        instructions(&d),
        [
            "FROM node:24-bookworm-slim",
            "ENV CLOAKBROWSER_CACHE_DIR=/opt/cloak/browser CLOAKBROWSER_AUTO_UPDATE=false NODE_PATH=/opt/cloak/node_modules PATH=/opt/cloak/node_modules/.bin:$PATH",
            "COPY setup-full.sh setup-dirs.sh /usr/local/lib/po-sandbox/",
            "RUN sh /usr/local/lib/po-sandbox/setup-full.sh",
            "RUN sh /usr/local/lib/po-sandbox/setup-dirs.sh",
            "ENV HOME=/po-home",
        ]
    );
    // Every location among the run-time variables is in the folder the setup script installs
    // into; the one flag turns updates off.
    for (name, value) in FULL_RUNTIME_ENV {
        match name {
            "CLOAKBROWSER_AUTO_UPDATE" => assert_eq!(value, "false"),
            _ => assert!(value.contains(CLOAK_DIR), "{name}={value}"),
        }
    }
    let setup = full
        .files()
        .iter()
        .find(|f| f.0 == "setup-full.sh")
        .unwrap()
        .2;
    // The script installs where the ENV says, not at a location of its own.
    assert!(setup.contains(r#": "${CLOAKBROWSER_CACHE_DIR:?"#));
    assert!(
        !setup.contains("CLOAKBROWSER_CACHE_DIR="),
        "no second location"
    );
    assert!(setup.contains(&format!("npm install --prefix {CLOAK_DIR} ")));
    let install = setup.find("cloakbrowser install").unwrap();
    let check = setup.find("cloakbrowser info --quick --json").unwrap();
    let readable = setup.find(&format!("chmod -R a+rX {CLOAK_DIR}")).unwrap();
    assert!(install < check && check < readable);
}

#[test]
fn minimal_recipe_has_no_browser_environment() {
    let minimal = ImageRecipe {
        base: "b".into(),
        variant: Variant::Minimal,
        base_id: None,
    };
    assert_eq!(
        instructions(&minimal.dockerfile()),
        [
            "FROM b",
            "COPY setup-dirs.sh /usr/local/lib/po-sandbox/",
            "RUN sh /usr/local/lib/po-sandbox/setup-dirs.sh",
            "ENV HOME=/po-home",
        ]
    );
}

/// On the in-memory engine: the first ensure builds (its progress as events), the next finds
/// the tag cached; a failing build is IMAGE_BUILD_FAILED with a failed event.
#[tokio::test]
async fn an_image_is_built_once_then_found_cached() {
    use crate::engine::fake::{FakeEngine, Fault};
    let engine = FakeEngine::default();
    let recipe = ImageRecipe::resolve(None, None, &env(&[])).unwrap();
    let events = EventBus::default();
    let phases = Arc::new(std::sync::Mutex::new(Vec::new()));
    let p = phases.clone();
    events.subscribe(Arc::new(move |e| {
        if let crate::events::Event::Image { phase, .. } = e {
            p.lock().unwrap().push(*phase);
        }
    }));
    let bounds = crate::engine::Bounds::default();
    let (got, pinned) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    assert_eq!(got, Provenance::Built);
    // The base is not on the engine (the build would pull it): not pinned.
    assert_eq!(pinned, recipe);
    let (again, _) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    assert_eq!(again, Provenance::Cached);
    assert_eq!(engine.count("build_image"), 1);
    use ImagePhase::*;
    assert_eq!(
        *phases.lock().unwrap(),
        [Checking, Building, Progress, Built, Checking, Cached]
    );
    engine.state().images.clear();
    engine.fault("build_image", "", Fault::Fail(500), None);
    let e = ensure(&engine, &recipe, &events, &bounds)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "IMAGE_BUILD_FAILED", "{e}");
    assert_eq!(phases.lock().unwrap().last(), Some(&Failed));
}

#[test]
fn the_bases_id_is_in_the_digest() {
    let recipe = ImageRecipe::resolve(Some("local/base:1"), Some("minimal"), &env(&[])).unwrap();
    let on = |id: &str| ImageRecipe {
        base_id: Some(id.into()),
        ..recipe.clone()
    };
    assert_ne!(on("sha256:aa").digest(), recipe.digest());
    assert_ne!(on("sha256:aa").digest(), on("sha256:bb").digest());
    assert_eq!(on("sha256:aa").tag(), on("sha256:aa").tag());
    let labels = build_options(&on("sha256:aa"), "t").labels;
    assert_eq!(labels[LABEL_BASE_ID], "sha256:aa");
    assert!(
        !build_options(&recipe, "t")
            .labels
            .contains_key(LABEL_BASE_ID)
    );
}

/// The in-memory engine with the base `local/base:1` of ID `id`, and the minimal recipe on it.
/// Each test takes an ID of its own: builds in flight are shared by tag in one process.
fn engine_with_base(id: &str) -> (crate::engine::fake::FakeEngine, ImageRecipe) {
    let engine = crate::engine::fake::FakeEngine::default();
    let recipe = ImageRecipe::resolve(Some("local/base:1"), Some("minimal"), &env(&[])).unwrap();
    engine.state().images.push("local/base:1".into());
    engine
        .state()
        .image_ids
        .insert("local/base:1".into(), id.into());
    (engine, recipe)
}

/// A base pulled again under its name (another ID) gets an image of its own at the next
/// ensure; the same base finds its image cached.
#[tokio::test]
async fn a_base_with_another_id_is_built_on_anew() {
    let (engine, recipe) = engine_with_base("sha256:one");
    let (events, bounds) = (EventBus::default(), crate::engine::Bounds::default());
    let (built, first) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    assert_eq!(built, Provenance::Built);
    assert_eq!(first.base_id.as_deref(), Some("sha256:one"));
    let (cached, same) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    assert_eq!((cached, same.tag()), (Provenance::Cached, first.tag()));
    engine
        .state()
        .image_ids
        .insert("local/base:1".into(), "sha256:two".into());
    let (rebuilt, second) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    assert_eq!(rebuilt, Provenance::Built);
    assert_eq!(second.base_id.as_deref(), Some("sha256:two"));
    assert_ne!(second.tag(), first.tag());
    assert_eq!(engine.count("build_image"), 2);
}

/// A base removed since its image was built (`docker image prune -a`): the recipe is pinned on
/// the base of the image it keeps, which is found cached, not built again.
#[tokio::test]
async fn a_removed_base_keeps_the_image_built_on_it() {
    let (engine, recipe) = engine_with_base("sha256:kept");
    let (events, bounds) = (EventBus::default(), crate::engine::Bounds::default());
    let (_, first) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    engine.state().images.retain(|i| i != "local/base:1");
    let pinned = pin(&engine, &recipe).await.unwrap();
    assert_eq!(pinned, first);
    let (again, same) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    assert_eq!((again, same.tag()), (Provenance::Cached, first.tag()));
    assert_eq!(engine.count("build_image"), 1);
    // A container's labels name its base: the same recipe takes it; another recipe does not.
    let labels: HashMap<String, String> = [
        ("po.image-base", "local/base:1"),
        ("po.image-variant", "minimal"),
        (LABEL_BASE_ID, "sha256:kept"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(recipe.on_base_of(&labels), Some(first.clone()));
    let full = ImageRecipe::resolve(Some("local/base:1"), Some("full"), &env(&[])).unwrap();
    assert_eq!(full.on_base_of(&labels), None);
}

/// A pull: the tag or digest apart from the name, a registry's port not taken for a tag.
#[test]
fn a_reference_is_split_as_the_engine_pulls_it() {
    use crate::engine::api::split_reference as split;
    assert_eq!(split("node:24-bookworm-slim"), ("node", "24-bookworm-slim"));
    assert_eq!(split("node"), ("node", "latest"));
    assert_eq!(
        split("127.0.0.1:5000/po/base"),
        ("127.0.0.1:5000/po/base", "latest")
    );
    assert_eq!(split("127.0.0.1:5000/base:1"), ("127.0.0.1:5000/base", "1"));
    let digest = format!("sha256:{}", "ab".repeat(32));
    let pinned = format!("127.0.0.1:5000/base@{digest}");
    assert_eq!(split(&pinned), ("127.0.0.1:5000/base", digest.as_str()));
}

/// `pullBase`: a base the registry has anew is pulled (its events on the base's name), says it
/// changed, and the next ensure builds on it; the same base again is up to date; a base the
/// registry lacks is IMAGE_PULL_FAILED with the engine's words and a failed event, the
/// engine's base unchanged.
#[tokio::test]
async fn a_pulled_base_that_changed_is_built_on() {
    let (engine, recipe) = engine_with_base("sha256:old");
    let events = EventBus::default();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    events.subscribe(Arc::new(move |e| {
        if let crate::events::Event::Image {
            phase,
            tag,
            message,
        } = e
        {
            s.lock()
                .unwrap()
                .push((*phase, tag.clone(), message.clone()));
        }
    }));
    let bounds = crate::engine::Bounds::default();
    let (_, first) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    let registry = |id: &str| {
        let id = id.to_string();
        engine.state().registry.insert("local/base:1".into(), id);
    };
    registry("sha256:0123456789abcdef");
    seen.lock().unwrap().clear();
    assert!(pull_base(&engine, &recipe, &events, &bounds).await.unwrap());
    {
        let seen = seen.lock().unwrap();
        let phases: Vec<_> = seen.iter().map(|(p, ..)| *p).collect();
        use ImagePhase::*;
        assert_eq!(phases, [Pulling, Progress, Pulled]);
        assert!(seen.iter().all(|(_, tag, _)| tag == "local/base:1"));
        let said = seen[2].2.as_deref().unwrap();
        assert!(said.starts_with("a newer image (0123456789ab)"), "{said}");
    }
    let (built, second) = ensure(&engine, &recipe, &events, &bounds).await.unwrap();
    assert_eq!(built, Provenance::Built);
    assert_ne!(second.tag(), first.tag());
    assert!(!pull_base(&engine, &recipe, &events, &bounds).await.unwrap());
    engine.state().registry.clear();
    let e = pull_base(&engine, &recipe, &events, &bounds)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "IMAGE_PULL_FAILED", "{e}");
    let text = e.to_string();
    assert!(
        text.contains("local/base:1") && text.contains("manifest unknown"),
        "{text}"
    );
    assert!(text.contains("--pull"), "{text}");
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (last.0, last.1.as_str()),
        (ImagePhase::Failed, "local/base:1")
    );
    assert_eq!(pin(&engine, &recipe).await.unwrap(), second);
}
