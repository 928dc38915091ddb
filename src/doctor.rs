//! `po-sandbox doctor`: can the layer run here, and if not, exactly why.

use std::path::PathBuf;

use napi_derive::napi;

use crate::engine::{self, CandidateOutcome, CandidateReport, DetectOptions, EngineReport};
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::image::ImageRecipe;
use crate::runtime_bundle as runtime;

/// The oldest Node.js major the package supports.
pub const MIN_NODE_MAJOR: u32 = 24;

/// The Node.js check.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCheck {
    /// The version checked (`v24.1.0`), or empty when unknown.
    pub version: String,
    /// It is new enough.
    pub ok: bool,
    /// The requirement, in words.
    pub required: String,
}

/// The runtime bundle check.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeCheck {
    /// A valid bundle was found.
    pub ok: bool,
    /// Where bundles are looked for.
    pub root: String,
    /// The version folder in use.
    pub version: Option<String>,
    /// Why not, and what to do.
    pub reason: Option<String>,
    /// `RUNTIME_NOT_INSTALLED` or `RUNTIME_INVALID`.
    pub code: Option<String>,
}

/// The image check.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageCheck {
    /// The tag the recipe gives, on the base as the engine has it.
    pub tag: String,
    /// The base image.
    pub base: String,
    /// `full` or `minimal`.
    pub variant: String,
    /// It is on the engine (absent when no engine answered).
    pub present: Option<bool>,
    /// The base image is on the engine (absent when no engine answered).
    pub base_present: Option<bool>,
    /// The base's ID on the engine (part of the image's digest: a base pulled again is built
    /// on anew at the next start).
    pub base_id: Option<String>,
    /// When the base was made (RFC 3339), when the engine says.
    pub base_created: Option<String>,
}

/// What the doctor checks, beyond the engine options.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// Engine detection.
    pub detect: DetectOptions,
    /// The Po home.
    pub po_home: PathBuf,
    /// This hub's owner id (the Po home's, or the `owner` option).
    pub owner: String,
    /// A runtime version folder, or the highest.
    pub runtime_version: Option<String>,
    /// The image recipe.
    pub recipe: ImageRecipe,
    /// The guarded paths containers get.
    pub guarded_paths: Vec<String>,
    /// The embedded demo bundle stands in when Po's is not installed.
    pub demo_runtime: bool,
    /// The run flags containers get (checked).
    pub run_flags: crate::sandbox::blueprint::RunFlags,
    /// The egress mode containers get.
    pub network_mode: crate::sandbox::blueprint::NetworkMode,
    /// Where the mode came from (an option, a variable, the policy file's line, the default).
    pub network_source: String,
    /// What is wrong with the policy file, when it is not good (`POLICY_INVALID`'s message).
    pub policy_problem: Option<String>,
    /// The git route's policy, where its hosts came from, and the host environment.
    pub git: (
        crate::broker::git::GitPolicy,
        String,
        std::collections::HashMap<String, String>,
    ),
}

impl DoctorOptions {
    /// What the doctor checks for the provider's options (the same Po home, bundle, recipe
    /// and engine).
    pub fn of(options: crate::provider::ProviderOptions) -> DoctorOptions {
        let policy_problem = options.policy_good().err().map(|e| e.to_string());
        let (git_policy, git_source) = options.git_policy.clone();
        DoctorOptions {
            detect: options.detect,
            po_home: options.po_home,
            owner: options.owner,
            runtime_version: options.runtime_version,
            recipe: options.recipe,
            guarded_paths: options.guarded_paths,
            demo_runtime: options.demo_runtime,
            network_mode: options.network_mode,
            network_source: options.network_policy.mode.1.to_string(),
            policy_problem,
            run_flags: options.run_flags,
            git: (
                git_policy,
                git_source.to_string(),
                options.host.vars().clone(),
            ),
        }
    }
}

/// The per-hub networks of every owner on the engine: each holds one of the engine's address
/// pools (about 30 by default), and one whose containers were removed another way stays.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkCheck {
    /// How many there are.
    pub per_hub: u32,
    /// How many no container uses (what `po-sandbox prune` removes, past its grace).
    pub unused: u32,
}

/// From this many per-hub networks on, the doctor warns (Docker's default pools hold about 30).
const MANY_NETWORKS: u32 = 20;

/// Counts the per-hub networks; a warning when there are many.
async fn network_check(
    engine: &impl crate::engine::api::EngineApi,
    warnings: &mut Vec<String>,
) -> Option<NetworkCheck> {
    let found = crate::sandbox::on_engine::per_hub_networks(engine, None)
        .await
        .ok()?;
    let check = NetworkCheck {
        per_hub: found.len() as u32,
        unused: found.iter().filter(|n| !n.in_use).count() as u32,
    };
    if check.per_hub >= MANY_NETWORKS {
        warnings.push(format!(
            "{} per-hub networks ({} with no container): each holds one of the engine's address pools (about 30 by default), and new workspaces fail when they run out; `po-sandbox prune` removes the unused ones",
            check.per_hub, check.unused
        ));
    }
    Some(check)
}

/// This hub and the others on the engine: whose sandboxes are whose.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HubsCheck {
    /// This hub's owner id (the `po.owner` label of what it makes).
    pub owner: String,
    /// This hub's sandbox containers on the engine, any state.
    pub sandboxes: u32,
    /// Other hubs' sandbox containers on the engine (another Po home, another machine sharing
    /// the engine): never adopted, stopped or pruned by this one.
    pub other_sandboxes: u32,
    /// The other hubs' owner ids, sorted.
    pub other_owners: Vec<String>,
}

/// Counts the sandbox containers of this owner and of the others on the engine.
async fn hubs_check(engine: &impl crate::engine::api::EngineApi, owner: &str) -> Option<HubsCheck> {
    let rows = crate::sandbox::on_engine::list_sandboxes(engine, None)
        .await
        .ok()?;
    let mine = rows.iter().filter(|r| r.owner == owner).count() as u32;
    let mut others: Vec<String> = rows
        .iter()
        .filter(|r| r.owner != owner)
        .map(|r| r.owner.clone())
        .collect();
    let other_sandboxes = others.len() as u32;
    others.sort();
    others.dedup();
    Some(HubsCheck {
        owner: owner.to_string(),
        sandboxes: mine,
        other_sandboxes,
        other_owners: others,
    })
}

/// `Hubs      owner … : N sandboxes; M of K other hubs on this engine`.
fn hubs_section(h: &HubsCheck) -> String {
    let others = match h.other_owners.len() {
        0 => "no other hub's".to_string(),
        1 => format!(
            "{} of 1 other hub ({})",
            h.other_sandboxes, h.other_owners[0]
        ),
        n => format!("{} of {n} other hubs", h.other_sandboxes),
    };
    let sandboxes = match h.sandboxes {
        1 => "1 sandbox".to_string(),
        n => format!("{n} sandboxes"),
    };
    format!(
        "Hubs      owner {} ({sandboxes}); {others} on this engine (po-sandbox ls --all)\n",
        h.owner
    )
}

/// The first Docker release whose published ports and container addresses other hosts on
/// the machine's network segment cannot reach (moby #45610: a host on the same segment routes
/// to a container's address, or to a port published on 127.0.0.1, and Docker's rules let it in).
pub const DOCKER_FIXED_LAN_EXPOSURE: u32 = 28;

/// A warning for a rootful Docker engine on this machine older than
/// [`DOCKER_FIXED_LAN_EXPOSURE`] (a VM's or a rootless engine's bridge is not on the host's
/// segment), saying what the holders' input rules cover. `None` for others, and when the
/// version does not say its major.
pub fn lan_exposure_warning(e: &EngineReport) -> Option<String> {
    if !e.available || e.vm || e.rootless || e.engine.as_deref() != Some("docker") {
        return None;
    }
    let version = e.engine_version.as_deref()?;
    let major: u32 = version.split('.').next()?.trim().parse().ok()?;
    (major < DOCKER_FIXED_LAN_EXPOSURE).then(|| {
        format!(
            "Docker {version} (before {DOCKER_FIXED_LAN_EXPOSURE}.0) lets hosts on this machine's network segment reach ports published on 127.0.0.1 and containers' own addresses (moby #45610): each workspace's network holder drops every inbound connection but the server's port from the host side of its per-hub network, so workspaces are covered; other containers of this engine are not (Docker 28 or newer closes it for them)"
        )
    })
}

/// Everything `po-sandbox doctor` found.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    /// The layer can run here: Node, engine and runtime bundle are fine (a missing image is
    /// built at first start).
    pub ok: bool,
    /// The Node.js check.
    pub node: NodeCheck,
    /// Engine detection, every candidate probed.
    pub engine: EngineReport,
    /// The runtime bundle.
    pub runtime: RuntimeCheck,
    /// The sandbox image.
    pub image: ImageCheck,
    /// The paths of each workspace mounted read-only (`guardedPaths`, `PO_SANDBOX_GUARDED_PATHS`).
    pub guarded_paths: Vec<String>,
    /// The run flags every container gets (`runFlags`, `PO_SANDBOX_RUN_FLAGS`), long form.
    pub run_flags: Vec<String>,
    /// The egress mode every container gets (`network`, `PO_SANDBOX_NETWORK`, the policy
    /// file): `open`, `none` or `allowlist`.
    pub network: String,
    /// Where the mode came from (`the variable PO_SANDBOX_NETWORK`, `the default`, …).
    pub network_source: String,
    /// What is wrong with the policy file, when it is not good (no hub starts until fixed).
    pub policy_problem: Option<String>,
    /// What the broker carries beyond model calls: git hosts and package registries.
    pub brokered: git::BrokeredCheck,
    /// The per-hub networks on the engine (absent when no engine answered).
    pub networks: Option<NetworkCheck>,
    /// This hub's owner and the other hubs' sandboxes on the engine (absent when no engine
    /// answered).
    pub hubs: Option<HubsCheck>,
    /// How long the engine takes to answer a ping, in milliseconds (the best of three;
    /// absent when no engine answered): over SSH or TLS, the round trip to its machine.
    pub round_trip_ms: Option<u32>,
    /// What works but is weaker than it should be (an empty guarded-path list).
    pub warnings: Vec<String>,
    /// The report as a person reads it.
    pub text: String,
}

/// Checks a Node.js version string against [`MIN_NODE_MAJOR`].
pub fn check_node(version: &str) -> NodeCheck {
    let major = version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    NodeCheck {
        version: version.to_string(),
        ok: major.is_some_and(|m| m >= MIN_NODE_MAJOR),
        required: format!("Node.js {MIN_NODE_MAJOR} or newer"),
    }
}

/// Checks the runtime bundle (file I/O only). With `demo`, a missing bundle is fine: the
/// embedded demo bundle stands in (version `demo`, the reason saying why).
pub fn check_runtime(po_home: &std::path::Path, version: Option<&str>, demo: bool) -> RuntimeCheck {
    let root = runtime::runtime_root(po_home).display().to_string();
    match runtime::locate(po_home, version) {
        Err(e @ Error::RuntimeNotInstalled { .. }) if demo && version.is_none() => RuntimeCheck {
            ok: true,
            root,
            version: Some(runtime::demo::DEMO_VERSION.into()),
            reason: Some(format!("{e} The embedded demo bundle is used instead.")),
            code: None,
        },
        Ok(b) => RuntimeCheck {
            ok: true,
            root,
            version: Some(b.version),
            reason: None,
            code: None,
        },
        Err(e) => RuntimeCheck {
            ok: false,
            root,
            version: None,
            reason: Some(e.to_string()),
            code: Some(e.code().into()),
        },
    }
}

/// The image on the engine: the tag on its base as the engine has it, whether both are
/// there, and the base's ID and age.
async fn image_check(
    engine: &impl engine::EngineApi,
    recipe: &crate::image::ImageRecipe,
    image: &mut ImageCheck,
) {
    let base = engine.inspect_image(&recipe.base).await.ok();
    if let Some(base) = &base {
        let pinned = crate::image::ImageRecipe {
            base_id: Some(base.id.clone()),
            ..recipe.clone()
        };
        image.tag = pinned.tag();
        image.base_id = Some(base.id.clone());
        image.base_created = base.created.clone();
    }
    image.present = Some(engine.inspect_image(&image.tag).await.is_ok());
    image.base_present = Some(base.is_some());
}

/// Runs every check and renders the report.
pub async fn doctor(
    host: &HostEnv,
    node_version: &str,
    options: DoctorOptions,
) -> Result<DoctorReport> {
    let found = engine::detect(
        host,
        &DetectOptions {
            probe_all: true,
            // The doctor asks the engine itself.
            facts_file: None,
            ..options.detect
        },
    )
    .await?;
    let node = check_node(node_version);
    let runtime = check_runtime(
        &options.po_home,
        options.runtime_version.as_deref(),
        options.demo_runtime,
    );
    let recipe = &options.recipe;
    let mut image = ImageCheck {
        tag: recipe.tag(),
        base: recipe.base.clone(),
        variant: recipe.variant.as_str().into(),
        present: None,
        base_present: None,
        base_id: None,
        base_created: None,
    };
    let mut warnings = Vec::new();
    let mut networks = None;
    let mut round_trip_ms = None;
    let mut hubs = None;
    if found.available
        && let Ok(engine) = engine::connect_reported(
            host,
            &found,
            engine::call_timeout(host).unwrap_or(engine::DEFAULT_CALL_TIMEOUT),
        )
    {
        round_trip_ms = round_trip(&engine).await;
        hubs = hubs_check(&engine, &options.owner).await;
        image_check(&engine, recipe, &mut image).await;
        if let Some(w) = runtime_warning(&engine, &found, &options.run_flags).await {
            warnings.push(w);
        }
        networks = network_check(&engine, &mut warnings).await;
    }
    let ok = node.ok
        && found.available
        && (!found.remote || REMOTE_CARRIED)
        && runtime.ok
        && options.policy_problem.is_none();
    warnings.extend(host_warnings(&found, host, &options.guarded_paths).await);
    warnings.extend(spawner_warnings(&options.po_home));
    let mut report = DoctorReport {
        ok,
        node,
        engine: found,
        runtime,
        image,
        guarded_paths: options.guarded_paths,
        run_flags: options.run_flags.given,
        network: options.network_mode.as_str().to_string(),
        network_source: options.network_source,
        policy_problem: options.policy_problem,
        brokered: git::check(&options.git.0, options.git.1, &options.git.2).await,
        networks,
        hubs,
        round_trip_ms,
        warnings,
        text: String::new(),
    };
    report.text = render(&report);
    Ok(report)
}

/// The best of three pings, in whole milliseconds (at least 1); `None` when one fails.
async fn round_trip(engine: &impl engine::EngineApi) -> Option<u32> {
    let mut best = u32::MAX;
    for _ in 0..3 {
        let at = std::time::Instant::now();
        engine.ping().await.ok()?;
        best = best.min(at.elapsed().as_millis().max(1) as u32);
    }
    Some(best)
}

/// Each workspace whose exec spawner cannot run in its container (found once, by an exec, and
/// recorded): its execs take the engine's exec, about twice as slow.
fn spawner_warnings(po_home: &std::path::Path) -> Vec<String> {
    crate::sandbox::on_engine::spawners_unusable(po_home)
        .into_iter()
        .map(|(id, why)| {
            format!(
                "workspace {id}: {why}. A base image with mkfifo and the runtime bundle's \
                 interpreter lets it run; the next container of the workspace tries again"
            )
        })
        .collect()
}

/// What the engine, the host's variables and git configuration, and the guarded paths say that
/// the person should know: limits the engine does not enforce, a LAN-reachable engine, proxy
/// variables, `safe.bareRepository`, no guarded paths.
async fn host_warnings(report: &EngineReport, host: &HostEnv, guarded: &[String]) -> Vec<String> {
    let mut warnings = Vec::new();
    if report.available
        && !crate::sandbox::blueprint::limits_enforceable(
            report.rootless,
            report.cgroup_version.as_deref().unwrap_or_default(),
        )
    {
        warnings.push(crate::sandbox::blueprint::UNENFORCED_LIMITS.to_string());
    }
    warnings.extend(lan_exposure_warning(report));
    warnings.extend(crate::sandbox::blueprint::proxy_notes(host.vars()));
    let vars = host.vars().clone();
    let bare = tokio::task::spawn_blocking(move || crate::sandbox::folder::check_safe_bare(&vars))
        .await
        .unwrap_or(crate::sandbox::folder::SafeBare::NoGit);
    warnings.extend(crate::sandbox::folder::safe_bare_warning(&bare));
    if guarded.is_empty() {
        warnings.push(format!(
            "no guarded paths: a contained agent can write git hooks, .git/config, editor tasks \
             and .envrc that this host runs later; unset {} (or guardedPaths) for the defaults",
            crate::names::vars::GUARDED_PATHS_VAR
        ));
    }
    warnings
}

/// The person-readable report.
pub fn render(r: &DoctorReport) -> String {
    let mut out = String::from("po-sandbox doctor\n\n");
    out.push_str(&node_section(&r.node));
    out.push_str(&candidates_section(&r.engine.candidates));
    out.push_str(&engine_section(&r.engine, r.round_trip_ms));
    out.push_str(&runtime_section(&r.runtime));
    out.push_str(&image_section(&r.image));
    out.push_str(&guards_section(&r.guarded_paths));
    out.push_str(&run_flags_section(&r.run_flags));
    out.push_str(&format!(
        "Network   {} (from {}; other workspaces, the host, link-local and private ranges refused in every mode)\n",
        r.network, r.network_source
    ));
    if let Some(p) = &r.policy_problem {
        out.push_str(&format!("Policy    NOT GOOD: {p}\n"));
    }
    out.push_str(&git::section(&r.brokered));
    if let Some(n) = &r.networks {
        out.push_str(&format!(
            "Networks  {} per-hub networks, {} with no container (po-sandbox prune removes those)\n",
            n.per_hub, n.unused
        ));
    }
    if let Some(h) = &r.hubs {
        out.push_str(&hubs_section(h));
    }
    for w in &r.warnings {
        out.push_str(&format!("Warning   {w}\n"));
    }
    out.push('\n');
    out.push_str(&result_section(r));
    out
}

/// `Node.js   v24.1.0: ok`, then a blank line.
fn node_section(node: &NodeCheck) -> String {
    let node_version = if node.version.is_empty() {
        "unknown"
    } else {
        &node.version
    };
    format!(
        "Node.js   {node_version}: {}\n\n",
        if node.ok {
            "ok".to_string()
        } else {
            format!("too old, needs {}", node.required)
        }
    )
}

/// One marked line per candidate probed, then a blank line.
fn candidates_section(candidates: &[CandidateReport]) -> String {
    let mut out = String::from("Engine candidates, in the order tried:\n");
    for c in candidates {
        let mark = match c.outcome {
            CandidateOutcome::Available => "ok",
            CandidateOutcome::NotFound => "--",
            _ => "!!",
        };
        let source = match &c.context {
            Some(name) => format!("{} {name}", c.source),
            None => c.source.clone(),
        };
        out.push_str(&format!(
            "  [{mark}] {:<8} {} ({source}): {}\n",
            c.engine, c.endpoint, c.detail
        ));
    }
    out.push('\n');
    out
}

/// The engine in use and what it runs on (and why a remote one is not usable), or why none is.
fn engine_section(e: &EngineReport, round_trip_ms: Option<u32>) -> String {
    if !e.available {
        return format!(
            "Engine    none usable [{}]\n          {}\n",
            e.reason_code.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or("")
        );
    }
    let mut out = format!(
        "Engine    {} {} at {}\n          API {}, {} {}/{}, {}, {}\n",
        e.engine.as_deref().unwrap_or(""),
        e.engine_version.as_deref().unwrap_or(""),
        e.endpoint.as_deref().unwrap_or(""),
        e.api_version.as_deref().unwrap_or(""),
        e.os.as_deref().unwrap_or(""),
        e.os_type.as_deref().unwrap_or(""),
        e.arch.as_deref().unwrap_or(""),
        if e.vm { "in a VM" } else { "native" },
        if e.rootless { "rootless" } else { "rootful" },
    );
    if let Some(name) = &e.context {
        out.push_str(&format!(
            "          Docker context {name} ({})\n",
            e.source.as_deref().unwrap_or("")
        ));
    }
    out.push_str(&format!(
        "          over {}{}, machine {}{}{}\n",
        match e.transport.as_deref() {
            Some("ssh") => "SSH (ssh … docker system dial-stdio)",
            Some("tls") => "TLS",
            Some("tcp") => "plain TCP",
            Some("npipe") => "a named pipe",
            _ => "a Unix socket",
        },
        e.tls_certs
            .as_deref()
            .map(|d| format!(" (certificates in {d})"))
            .unwrap_or_default(),
        e.host_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("unnamed"),
        if e.remote { " (another machine)" } else { "" },
        round_trip_ms
            .map(|ms| format!(", {ms} ms a round trip"))
            .unwrap_or_default(),
    ));
    if e.remote && REMOTE_CARRIED {
        out.push_str(CARRIED_LINE);
    } else if e.remote {
        out.push_str(&format!(
            "          not usable here (remote): {}\n",
            engine::remote_reason(e)
        ));
    }
    out
}

/// A remote engine's sandboxes are carried through it (a hub on Linux or macOS: the broker's
/// carrier ends in a Unix socket here).
const REMOTE_CARRIED: bool = cfg!(unix);

/// What a remote engine's sandbox carries how (docs/platforms.md, "Remote engines").
const CARRIED_LINE: &str = "          carried through the engine: the workspace as a copy; the runtime bundle, P and the token in volumes; the broker and the server's port over execs\n";

/// The bundle version in use, or why there is none.
fn runtime_section(rt: &RuntimeCheck) -> String {
    if rt.ok && rt.version.as_deref() == Some(runtime::demo::DEMO_VERSION) {
        format!(
            "Runtime   the embedded demo bundle: ok (Po's runtime bundle is not installed in {})\n",
            rt.root
        )
    } else if rt.ok {
        format!(
            "Runtime   {} in {}: ok\n",
            rt.version.as_deref().unwrap_or(""),
            rt.root
        )
    } else {
        format!(
            "Runtime   not usable [{}]\n          {}\n",
            rt.code.as_deref().unwrap_or(""),
            rt.reason.as_deref().unwrap_or("")
        )
    }
}

/// The image's tag, recipe and base, and whether it (or its base) is on the engine.
/// From this age on, the image line says how to pull the base again (its security fixes).
const STALE_BASE_DAYS: u64 = 30;

fn image_section(im: &ImageCheck) -> String {
    let base = match (&im.base_id, &im.base_created) {
        (Some(id), created) => {
            let short = id.trim_start_matches("sha256:");
            let made = created
                .as_deref()
                .and_then(|c| age_days(c, std::time::SystemTime::now()))
                .map(|days| match days {
                    0 => ", made today".to_string(),
                    1 => ", made 1 day ago".to_string(),
                    n if n >= STALE_BASE_DAYS => {
                        format!(", made {n} days ago; `po-sandbox up --pull` gets its newest")
                    }
                    n => format!(", made {n} days ago"),
                })
                .unwrap_or_default();
            format!(" {}{made}", &short[..short.len().min(12)])
        }
        (None, _) => String::new(),
    };
    format!(
        "Image     {} ({} recipe on {}{base}): {}\n",
        im.tag,
        im.variant,
        im.base,
        image_presence(im)
    )
}

/// Whole days from an RFC 3339 time (its date) to `now`; `None` when it does not read.
fn age_days(rfc3339: &str, now: std::time::SystemTime) -> Option<u64> {
    let date = rfc3339.get(..10)?;
    let mut parts = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (parts.next()??, parts.next()??, parts.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days from 1970-01-01 to y-m-d (the proleptic Gregorian calendar).
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let then = era * 146_097 + doe - 719_468;
    let today = now.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs() as i64 / 86_400;
    u64::try_from(today - then).ok()
}

fn guards_section(guards: &[String]) -> String {
    if guards.is_empty() {
        return "Guarded   none (every workspace file is writable from inside)\n".to_string();
    }
    format!("Guarded   read-only inside: {}\n", guards.join(", "))
}

fn run_flags_section(flags: &[String]) -> String {
    if flags.is_empty() {
        return "Run flags none (runFlags, PO_SANDBOX_RUN_FLAGS)\n".to_string();
    }
    format!("Run flags {}\n", flags.join(" "))
}

/// A `--runtime` run flag the engine cannot honour: Podman ignores it (and the provider
/// refuses it there), and Docker must list the runtime (daemon.json `runtimes`).
async fn runtime_warning(
    engine: &impl crate::engine::EngineApi,
    report: &EngineReport,
    flags: &crate::sandbox::blueprint::RunFlags,
) -> Option<String> {
    let runtime = flags.runtime.as_deref()?;
    if report.engine.as_deref() == Some("podman") {
        return Some(format!(
            "--runtime={runtime}: Podman's Docker API ignores the runtime, so the provider \
             refuses this flag on Podman (RUN_FLAGS_INVALID); set it in containers.conf instead"
        ));
    }
    let mut names = engine.runtimes().await.ok()?;
    if names.iter().any(|n| n == runtime) {
        return None;
    }
    names.sort();
    Some(format!(
        "--runtime={runtime}: the engine lists no such runtime (it has {}); register it in \
         /etc/docker/daemon.json \"runtimes\" and reload dockerd, or containers fail to start",
        names.join(", ")
    ))
}

fn image_presence(im: &ImageCheck) -> String {
    match (im.present, im.base_present) {
        (None, _) => "unknown (no engine)".to_string(),
        (Some(true), _) => "present".to_string(),
        (Some(false), Some(true)) => {
            format!("not built yet; built from {} at first start", im.base)
        }
        (Some(false), _) => format!(
            "not built yet, and its base {} is not on the engine: load or build it (no registry needed with {} set to a local image)",
            im.base,
            crate::names::vars::BASE_VAR
        ),
    }
}

/// The verdict, and when not ready, what to do about each check that failed.
fn result_section(r: &DoctorReport) -> String {
    if r.ok {
        return "Result    ready: the sandbox layer can run here.\n".to_string();
    }
    format!(
        "Result    not ready: {}.\n",
        not_ready_actions(r).join("; ")
    )
}

/// One action per failed check, in the order the checks are shown.
fn not_ready_actions(r: &DoctorReport) -> Vec<String> {
    let mut why = Vec::new();
    if !r.node.ok {
        why.push(format!("install {}", r.node.required));
    }
    if !r.engine.available {
        why.push("make a container engine reachable (see Engine above)".to_string());
    } else if r.engine.remote && !REMOTE_CARRIED {
        why.push("use an engine on this machine (see Engine above)".to_string());
    }
    if !r.runtime.ok {
        why.push("install the runtime bundle (see Runtime above)".to_string());
    }
    if r.policy_problem.is_some() {
        why.push("fix the policy file (see Policy above)".to_string());
    }
    why
}

mod git;

#[cfg(test)]
mod tests;
