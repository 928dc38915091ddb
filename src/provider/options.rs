//! The provider's options: what the hub passes, checked without I/O into [`ProviderOptions`].

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use napi_derive::napi;

use crate::broker::egress::EgressPolicy;
use crate::broker::egress::rules::{self, AllowEntry};
use crate::engine::{self, DetectOptions, EngineReport};
use crate::error::{Error, Result};
use crate::host::{HostEnv, HostOs, UserIds};
use crate::image::ImageRecipe;
use crate::names::vars::WORKSPACE_MODE_VAR;
use crate::names::vars::{CPUS_VAR, MEMORY_VAR};
use crate::policy::effective::{Given, NetworkPolicy, problem_error};
use crate::runtime_bundle::{self, RuntimeBundle};
use crate::sandbox::blueprint;
use crate::sandbox::blueprint::NetworkMode;
use crate::sandbox::blueprint::{ContainerSettings, DEFAULT_PIDS_LIMIT, Limits};
use crate::sandbox::blueprint::{EngineMode, ROUTE_VAR, RouteChoice};
use crate::sandbox::blueprint::{RUN_FLAGS_VAR, RunFlags};
use crate::sandbox::folder;
use crate::sandbox::folder::WorkspaceMode;

/// Default bound on the server's health answer.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(60);
/// Default number of workspaces started at once.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// A workspace as the hub describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRequest {
    /// The workspace id.
    pub id: String,
    /// Its folder.
    pub path: String,
    /// Its sandbox is `container`.
    pub container: bool,
    /// Its own workspace mode (`mode`); `None`: the hub's default.
    pub mode: Option<WorkspaceMode>,
}

/// A workspace the hub knows.
#[napi(object, js_name = "WorkspaceOption")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GivenWorkspace {
    /// The workspace id: 1-128 of letters, digits, `.`, `_`, `-`, not starting with `.`.
    pub id: String,
    /// Its folder (absolute; it must exist).
    pub path: String,
    /// `container` (default) starts a container for it at hub start; `none` (or `host`, the
    /// same) does not: its status is `skipped`.
    #[napi(ts_type = "'container' | 'none' | 'host'")]
    pub sandbox: Option<String>,
    /// `bind` (the folder mounted, changes live) or `clone` (the container works on a copy in
    /// a volume of its own); default the provider's `workspaceMode`.
    #[napi(ts_type = "'bind' | 'clone'")]
    pub mode: Option<String>,
}

/// Options of the container provider.
// As the caller gives them (the JS object itself), before checks: the one input of
// `ProviderOptions::resolve`, so every check is reachable without the binding.
#[napi(object, js_name = "ContainerProviderOptions")]
#[derive(Debug, Clone, Default)]
pub struct GivenOptions {
    /// The Po home on the host (default `~/.po`). Must be absolute.
    pub po_home: Option<String>,
    /// This hub's owner id, the `po.owner` label (default: the Po home's, kept in
    /// `<poHome>/sandbox-owner`: made once, so two machines never share one).
    pub owner: Option<String>,
    /// The workspaces to bring up at hub start.
    pub workspaces: Option<Vec<GivenWorkspace>>,
    /// The runtime bundle version folder (default: the highest under `<poHome>/container-runtime`).
    pub runtime_version: Option<String>,
    /// The image's base (default `PO_SANDBOX_BASE_IMAGE`, else `node:24-bookworm-slim`).
    pub base_image: Option<String>,
    /// `full` (default, `PO_SANDBOX_IMAGE_VARIANT`) or `minimal` (toolchain-free).
    #[napi(ts_type = "'full' | 'minimal'")]
    pub image_variant: Option<String>,
    /// `uid:gid` the containers run as (default: this user on Linux, `1000:1000` elsewhere).
    pub user: Option<String>,
    /// Pid limit per container (default 2048).
    pub pids_limit: Option<f64>,
    /// How long to wait for the contained server's health answer (default 60000 ms).
    pub health_timeout_ms: Option<f64>,
    /// Workspaces started at once at hub start (default 4).
    pub concurrency: Option<f64>,
    /// Only this engine (as `PO_SANDBOX_ENGINE`).
    pub engine: Option<String>,
    /// Bound on each engine detection step (ms).
    pub engine_timeout_ms: Option<f64>,
    /// Whether the engine is on another machine, whatever its identity says (as
    /// `PO_SANDBOX_ENGINE_REMOTE`: `true` refuses it, `false` takes it as local).
    pub engine_remote: Option<bool>,
    /// The environment to read instead of `process.env` (engine variables, the allowlist, and
    /// the provider keys the credential broker carries).
    pub env: Option<HashMap<String, Option<String>>>,
    /// Run the credential broker for the containers (default true; `PO_SANDBOX_BROKER=0` also
    /// turns it off). Off: containers get no credentials at all.
    pub broker: Option<bool>,
    /// Where per-container broker sockets go (default `$XDG_RUNTIME_DIR/po-broker`, else
    /// `<tmpdir>/po-broker-<uid>`).
    pub broker_socket_dir: Option<String>,
    /// The broker route: `auto` (default: a socket per container on a native Linux engine, TCP
    /// on a VM engine and on Windows), `socket` or `tcp` (`PO_SANDBOX_BROKER_TRANSPORT` when
    /// not given).
    #[napi(js_name = "brokerTransport", ts_type = "'auto' | 'socket' | 'tcp'")]
    pub broker_route: Option<String>,
    /// Paths of each workspace mounted read-only inside its container, relative to the
    /// workspace: the complete list (default `PO_SANDBOX_GUARDED_PATHS`, else `.git/hooks`,
    /// `.git/config`, `.git/info`, `.pi`, `.agents`, `.claude`, `.mcp.json`, `.cursor`, `.codex`,
    /// `.devcontainer`, `.vscode`, `.idea`, `.envrc`, `.direnv`, `.husky`); `[]` guards none.
    pub guarded_paths: Option<Vec<String>>,
    /// When Po's runtime bundle is not installed (and no `runtimeVersion` is named), use the
    /// package's embedded demo bundle (a small status server; version `demo`) instead of
    /// failing with `RUNTIME_NOT_INSTALLED` (default false; `po-sandbox up` sets it).
    pub demo_runtime: Option<bool>,
    /// For one command (the CLI's `up` and `exec`): nothing starts up until a call needs it;
    /// `start` and `exec` adopt the workspace's running container without a start-up (default false).
    pub one_shot: Option<bool>,
    /// Pull the base image from its registry at start-up, before the image check (default
    /// false; `po-sandbox up --pull`): a base that changed there is built on, and a running
    /// container on the old one is replaced at its start. A failed pull is
    /// `IMAGE_PULL_FAILED`, and nothing is made.
    pub pull_base: Option<bool>,
    /// Extra engine options for every container, each self-contained (`--flag=value`), e.g.
    /// `['--runtime=runsc', '--memory=2g']`: the complete list (default
    /// `PO_SANDBOX_RUN_FLAGS`, whitespace-separated). Only flags that add a bound, pick a
    /// runtime or tighten are accepted (see the README's table); anything else throws
    /// `RUN_FLAGS_INVALID` before anything is made.
    pub run_flags: Option<Vec<String>>,
    /// Memory limit of every container, a size as for `--memory` (`2g`, `512m`; at least
    /// `6m`). Default `PO_SANDBOX_MEMORY`, else half the engine's memory (`MemTotal` in its
    /// info; at least 512 MiB). A `--memory` run flag wins.
    pub memory: Option<String>,
    /// CPU limit of every container, in CPUs (0.01-1024). Default `PO_SANDBOX_CPUS`, else half
    /// the engine's CPUs (`NCPU`; at least 1). A `--cpus` run flag wins.
    pub cpus: Option<f64>,
    /// Interval of the engine health check that probes `healthPath` inside each container
    /// (1000-3600000 ms, default 15000).
    pub health_interval_ms: Option<f64>,
    /// Where an `allowlist` container may connect through the egress proxy: `host:port` or
    /// `*.suffix:port` entries, the complete list (default `PO_SANDBOX_NETWORK_ALLOW`,
    /// comma-separated; else a default list of package registries and git hosts). Used only
    /// in the `allowlist` mode; an empty list allows nothing. Host-side only: not part of the
    /// spec hash.
    pub network_allow: Option<Vec<String>>,
    /// `host=ip` overrides, like curl's `--resolve`: the proxy dials `ip` for `host` (which
    /// must still be in `networkAllow`), also when `ip` is not public (default
    /// `PO_SANDBOX_NETWORK_RESOLVE`, comma-separated). Host-side only.
    pub network_resolve: Option<Vec<String>>,
    /// What each workspace may reach on the network: `open` (the public internet; the
    /// default), `none` (nothing but loopback and the broker route) or `allowlist` (at packet
    /// level as `none`; only listed hosts through the host-side forward proxy). Every mode
    /// refuses other workspaces, the host, link-local and private ranges. Default
    /// `PO_SANDBOX_NETWORK`, else `open`.
    pub network: Option<String>,
    /// How each workspace's folder reaches its container: `bind` (the default: mounted,
    /// changes live, guarded paths read-only) or `clone` (a copy in a volume of its own,
    /// filled once through the engine; the host folder is never mounted). Default
    /// `PO_SANDBOX_WORKSPACE_MODE`, else `bind`; a workspace's `mode` wins.
    #[napi(ts_type = "'bind' | 'clone'")]
    pub workspace_mode: Option<String>,
    /// Let the layer set `safe.bareRepository = explicit` in the person's global git
    /// configuration while this owner's sandboxes run (when it is not already), and put it back
    /// when the last one stops (default `PO_SANDBOX_SET_GIT_SAFE_BARE`, else false: the layer
    /// only warns). See docs/security.md, "Repository shapes".
    pub set_git_safe_bare_repository: Option<bool>,
}

/// Checked options.
#[derive(Debug, Clone)]
pub struct ProviderOptions {
    pub po_home: PathBuf,
    pub owner: String,
    pub workspaces: Vec<WorkspaceRequest>,
    pub runtime_version: Option<String>,
    pub recipe: ImageRecipe,
    pub user: UserIds,
    pub pids_limit: i64,
    pub health_timeout: Duration,
    pub concurrency: usize,
    pub detect: DetectOptions,
    pub host: HostEnv,
    /// Run a credential broker for the containers (off with `broker: false` or
    /// `PO_SANDBOX_BROKER=0`).
    pub broker: bool,
    /// Where per-container broker sockets go.
    pub broker_socket_dir: PathBuf,
    /// The broker route (`brokerTransport`, `PO_SANDBOX_BROKER_TRANSPORT`; default `auto`).
    pub broker_route: RouteChoice,
    /// Paths of each workspace mounted read-only (relative; empty: none).
    pub guarded_paths: Vec<String>,
    /// Use the embedded demo runtime bundle when Po's is not installed.
    pub demo_runtime: bool,
    /// For one command (`oneShot`): no start-up until a call needs it; `start` and `exec`
    /// adopt the workspace's running container without one.
    pub one_shot: bool,
    /// Pull the base from its registry at start-up (`pullBase`); a one-shot start then never
    /// adopts without one.
    pub pull_base: bool,
    /// `baseImage` or `imageVariant` was given (else an exec checks a container against the
    /// recipe it was made with).
    pub image_given: bool,
    /// Extra engine options for every container (`runFlags`, `PO_SANDBOX_RUN_FLAGS`).
    pub run_flags: RunFlags,
    /// The memory limit (`memory`, `PO_SANDBOX_MEMORY`); `None`: derived from the engine.
    pub memory: Option<i64>,
    /// The CPU limit in billionths (`cpus`, `PO_SANDBOX_CPUS`); `None`: derived from the
    /// engine.
    pub nano_cpus: Option<i64>,
    /// The interval of the engine health check.
    pub health_interval: Duration,
    /// `networkAllow` / `PO_SANDBOX_NETWORK_ALLOW`, checked; `None`: not given.
    pub network_allow: Option<Vec<AllowEntry>>,
    /// `networkResolve` / `PO_SANDBOX_NETWORK_RESOLVE`, checked.
    pub network_resolve: BTreeMap<String, IpAddr>,
    /// The egress mode (`network`, `PO_SANDBOX_NETWORK`, the policy file; default `open`).
    pub network_mode: NetworkMode,
    /// The network values in force and where each came from (the policy file's included):
    /// what the hub's policy watcher starts from.
    pub network_policy: NetworkPolicy,
    /// What is wrong with the policy file, when it is not good (the values above are then
    /// without it).
    pub policy_problem: Option<crate::policy::Problem>,
    /// The policy file as read here (none when absent or not good): what a watcher starts
    /// from.
    pub policy_file: Option<crate::policy::PolicyFile>,
    /// The git route's hosts and push rules, and where the hosts came from.
    pub git_policy: (
        crate::broker::git::GitPolicy,
        crate::policy::effective::Source,
    ),
    /// The default workspace mode (`workspaceMode`, `PO_SANDBOX_WORKSPACE_MODE`).
    pub workspace_mode: WorkspaceMode,
    /// The workspace mode was given (option or variable), not the default: a remote engine's
    /// default is `clone`, a given `bind` is refused there.
    pub workspace_mode_given: bool,
    /// `setGitSafeBareRepository` / `PO_SANDBOX_SET_GIT_SAFE_BARE`.
    pub set_git_safe_bare: bool,
}

/// The Po home's policy file, read whole: a bad one is kept as the problem, not an error
/// here (it fails what would start a container, [`ProviderOptions::policy_good`], not a listing
/// or a stop), and none of its values is used.
fn policy_file(
    po_home: &std::path::Path,
) -> (
    Option<crate::policy::PolicyFile>,
    Option<crate::policy::Problem>,
) {
    match crate::policy::load(po_home) {
        Ok(file) => (file.map(|(file, _)| file), None),
        Err(problem) => (None, Some(problem)),
    }
}

/// `runFlags`, else `PO_SANDBOX_RUN_FLAGS`, else the policy file's `runFlags`.
fn run_flags(
    option: Option<Vec<String>>,
    host: &HostEnv,
    file: Option<&crate::policy::PolicyFile>,
    pids_limit: i64,
) -> Result<RunFlags> {
    // The variable set, even empty (no flags), wins over the file as over the default.
    let var = host.vars().get(RUN_FLAGS_VAR).map(String::as_str);
    let from_file = match var.is_some() {
        true => None,
        false => file
            .and_then(|f| f.run_flags.as_ref())
            .map(|at| at.value.clone()),
    };
    let given = option.or(from_file);
    let var = var.filter(|_| given.is_none());
    blueprint::resolve_run_flags(given.as_deref(), var, pids_limit)
}

/// `workspaceMode`, else `PO_SANDBOX_WORKSPACE_MODE`, else the policy file's; whether the
/// option or the variable gave it (a remote engine's default is `clone`, a given `bind` is
/// refused there).
fn workspace_mode(
    option: Option<String>,
    host: &HostEnv,
    file: Option<&crate::policy::PolicyFile>,
) -> Result<(WorkspaceMode, bool)> {
    let var = host.vars().get(WORKSPACE_MODE_VAR).map(String::as_str);
    let var = var.filter(|v| !v.trim().is_empty());
    let from_file = file
        .and_then(|f| f.workspace_mode.as_ref())
        .map(|at| at.value.clone());
    // Given: by the option or the variable. The file is every hub's of the Po home: on a
    // remote engine (where `bind` is refused) its `bind` gives way to the remote default.
    let given = option.is_some() || var.is_some();
    let option = option.or(from_file.filter(|_| var.is_none()));
    Ok((WorkspaceMode::resolve(option.as_deref(), var)?, given))
}

impl ProviderOptions {
    /// `POLICY_INVALID` when the policy file is not good: a start-up (or a command that may
    /// make a container) must not go on without the policy the person wrote.
    pub fn policy_good(&self) -> Result<()> {
        match &self.policy_problem {
            None => Ok(()),
            Some(p) => Err(problem_error(
                &crate::policy::path_in(&self.po_home),
                p.clone(),
            )),
        }
    }

    /// What every container of this hub shares, derived here once: these options, the image
    /// `recipe` as the engine has its base ([`crate::image::pin`]), the runtime `bundle`, the
    /// limits the engine's `report` allows and the engine `mode`.
    pub fn container_settings(
        &self,
        recipe: &ImageRecipe,
        bundle: RuntimeBundle,
        report: &EngineReport,
        mode: EngineMode,
    ) -> ContainerSettings {
        // An unreadable bundle fails its upload, saying why; its name here is its version's.
        let carried = report.remote.then(|| {
            crate::runtime_bundle::files_digest(&bundle.dir).unwrap_or_else(|_| {
                use sha2::Digest;
                hex::encode(&sha2::Sha256::digest(bundle.version.as_bytes())[..6])
            })
        });
        ContainerSettings {
            owner: self.owner.clone(),
            po_home: self.po_home.clone(),
            bundle,
            image: recipe.tag(),
            image_digest: recipe.digest(),
            user: self.user,
            pids_limit: self.pids_limit,
            run_flags: self.run_flags.clone(),
            guarded_paths: self.guarded_paths.clone(),
            limits: Limits::derive(report.mem_total, report.ncpu, self.memory, self.nano_cpus),
            health_interval: self.health_interval,
            host_env: self.host.vars().clone(),
            mode,
            network_mode: self.network_mode,
            workspace_mode: match report.remote && !self.workspace_mode_given {
                // A remote engine cannot see this host's folders: a copy by default.
                true => WorkspaceMode::Clone,
                false => self.workspace_mode,
            },
            carried,
        }
    }

    /// These options with the run flags a running container was made with and, unless they
    /// name an image (`baseImage`, `imageVariant`), its image recipe: read from its
    /// labels, so an exec checks it against its own spec and never asks for another.
    pub fn with_recipe_of(
        &self,
        labels: &std::collections::HashMap<String, String>,
    ) -> Result<ProviderOptions> {
        let mut o = self.clone();
        if !self.image_given {
            let label = |k: &str| labels.get(k).map(String::as_str);
            let (base, variant) = (
                label(blueprint::LABEL_IMAGE_BASE),
                label(blueprint::LABEL_IMAGE_VARIANT),
            );
            o.recipe = ImageRecipe::resolve(base, variant, o.host.vars())?;
            // The base it was built on (none for an image of an earlier version).
            o.recipe.base_id = label(crate::image::LABEL_BASE_ID).map(str::to_string);
        }
        let flags: Vec<String> = labels
            .get(blueprint::LABEL_RUN_FLAGS)
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let var = o.host.vars().get(RUN_FLAGS_VAR).map(String::as_str);
        o.run_flags = blueprint::resolve_run_flags(Some(&flags), var, o.pids_limit)?;
        Ok(o)
    }

    /// The egress proxy's policy, or `None` when the proxy is off. The gate, in this one
    /// place: on in the `allowlist` mode only, with `networkAllow` (an empty list allows
    /// nothing) or else [`rules::DEFAULT_ALLOW`].
    pub fn egress_policy(&self) -> Option<EgressPolicy> {
        if self.network_mode != NetworkMode::Allowlist {
            return None;
        }
        Some(EgressPolicy {
            allow: self
                .network_allow
                .clone()
                .unwrap_or_else(rules::default_allow),
            resolve: self.network_resolve.clone(),
            workspaces: self
                .network_policy
                .workspaces
                .iter()
                .map(|(id, at)| (id.clone(), at.value.clone()))
                .collect(),
            // The proxy dials from the host, whatever the engine: its own addresses are
            // always the host's.
            host_addresses: crate::host::interface_addresses(),
        })
    }
}

fn invalid(option: &str, reason: impl Into<String>) -> Error {
    Error::OptionsInvalid {
        option: option.into(),
        reason: reason.into(),
    }
}

/// A whole number in `range`, or `default` when absent.
fn whole(
    value: Option<f64>,
    option: &str,
    range: std::ops::RangeInclusive<f64>,
    default: f64,
) -> Result<f64> {
    match value {
        None => Ok(default),
        Some(v) if v.fract() == 0.0 && range.contains(&v) => Ok(v),
        Some(v) => Err(invalid(
            option,
            format!(
                "{v} is not a whole number from {} to {}",
                range.start(),
                range.end()
            ),
        )),
    }
}

/// Containers never nest: managing them from inside a sandbox container (`PO_SANDBOX=1`) is
/// refused.
pub fn refuse_nesting(host: &HostEnv) -> Result<()> {
    if host.contained() {
        Err(Error::NestingRefused)
    } else {
        Ok(())
    }
}

/// Whether a host registers the provider: only its `global` scope, and never a contained one
/// (its identity says so, or `PO_SANDBOX=1`).
pub fn registers(scope: Option<&str>, identity_contained: bool, host: &HostEnv) -> bool {
    scope == Some("global") && !identity_contained && refuse_nesting(host).is_ok()
}

/// The default owner id of a Po home: the one `<poHome>/sandbox-owner` keeps, made once
/// (see [`folder::owner`]).
pub fn default_owner(po_home: &std::path::Path) -> String {
    folder::owner::of_po_home(po_home)
}

/// `poHome`: absolute, no `..`; default `~/.po`.
fn po_home(value: Option<String>, host: &HostEnv) -> Result<PathBuf> {
    folder::resolve_po_home(value, host)
}

/// `owner`: 1-32 lowercase letters or digits; `None` when it is not given: the Po home's is
/// used (kept in its `sandbox-owner` file, made once), read or made only once every other
/// option is known good.
fn given_owner(value: Option<String>) -> Result<Option<String>> {
    let Some(owner) = value.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if folder::owner::valid(&owner) {
        Ok(Some(owner))
    } else {
        Err(invalid(
            "owner",
            format!("{owner:?} must be 1-32 lowercase letters or digits"),
        ))
    }
}

/// `workspaces`: valid ids, each once; `sandbox` is `container` (default), `none` or `host`
/// (the same as `none`).
fn workspaces(list: Vec<GivenWorkspace>) -> Result<Vec<WorkspaceRequest>> {
    let mut out: Vec<WorkspaceRequest> = Vec::new();
    for GivenWorkspace {
        id,
        path,
        sandbox,
        mode,
    } in list
    {
        folder::check_workspace_id(&id)?;
        if out.iter().any(|w| w.id == id) {
            return Err(Error::WorkspaceInvalid {
                what: format!("id {id:?}"),
                reason: "it is listed twice".into(),
            });
        }
        let container = match sandbox.as_deref() {
            None | Some("container") => true,
            Some("none") | Some("host") => false,
            Some(other) => {
                return Err(invalid(
                    "workspaces[].sandbox",
                    format!("{other:?} is not 'container', 'none' or 'host' (the same as 'none')"),
                ));
            }
        };
        let mode = mode
            .map(|m| WorkspaceMode::parse(&m, "workspaces[].mode"))
            .transpose()?;
        out.push(WorkspaceRequest {
            id,
            path,
            container,
            mode,
        });
    }
    Ok(out)
}

/// `runtimeVersion`: a plain version folder name.
fn runtime_version(value: Option<String>) -> Result<Option<String>> {
    match value {
        Some(v) if !runtime_bundle::is_safe_version(&v) => Err(invalid(
            "runtimeVersion",
            format!("{v:?} is not a plain version folder name"),
        )),
        v => Ok(v),
    }
}

/// `user`: numeric `uid:gid`; default this user on Linux, `1000:1000` elsewhere.
fn user(value: Option<String>, host: &HostEnv) -> Result<UserIds> {
    match value.filter(|s| !s.is_empty()) {
        Some(u) => UserIds::parse(&u, "user"),
        None if host.os == HostOs::Linux => Ok(UserIds {
            uid: host.uid,
            gid: host.gid,
        }),
        None => Ok(UserIds {
            uid: 1000,
            gid: 1000,
        }),
    }
}

/// `engine` and `engineTimeoutMs`: a known engine name, a timeout in range.
fn detect(
    engine: Option<String>,
    timeout_ms: Option<f64>,
    host: &HostEnv,
) -> Result<DetectOptions> {
    let timeout = match timeout_ms {
        Some(ms) => Some(engine::timeout_from_ms(ms, "engineTimeoutMs")?),
        None => None,
    };
    if let Some(name) = engine.as_deref() {
        engine::candidates(host, Some(name))?;
    }
    engine::bounds(host)?;
    Ok(DetectOptions {
        engine,
        timeout,
        probe_all: false,
        ..DetectOptions::default()
    })
}

/// `brokerTransport`, else `PO_SANDBOX_BROKER_TRANSPORT`: `auto` (default), `socket` or `tcp`.
fn broker_route(option: Option<String>, host: &HostEnv) -> Result<RouteChoice> {
    match (option, host.vars().get(ROUTE_VAR)) {
        (Some(v), _) => RouteChoice::parse(Some(&v), "brokerTransport"),
        (None, Some(v)) => RouteChoice::parse(Some(v), ROUTE_VAR),
        (None, None) => Ok(RouteChoice::Auto),
    }
}

/// `guardedPaths` (the complete list), else `PO_SANDBOX_GUARDED_PATHS`, else the defaults.
fn guarded_paths(
    option: Option<Vec<String>>,
    host: &HostEnv,
    file: Option<&crate::policy::PolicyFile>,
) -> Result<Vec<String>> {
    let from_file = file.and_then(|f| f.guarded_paths.as_ref());
    match (
        option,
        host.vars().get(folder::GUARDED_PATHS_VAR),
        from_file,
    ) {
        (Some(list), _, _) => folder::guarded_from_option(&list),
        (None, Some(value), _) => folder::guarded_from_var(value),
        (None, None, Some(at)) => folder::guarded_from_option(&at.value),
        (None, None, None) => Ok(folder::DEFAULT_GUARDED_PATHS
            .iter()
            .map(|p| p.to_string())
            .collect()),
    }
}

/// `memory`, else `PO_SANDBOX_MEMORY`: a size as for `--memory` (at least `6m`); `None` when
/// neither is given (derived from the engine later).
fn memory(option: Option<String>, host: &HostEnv) -> Result<Option<i64>> {
    let (name, value) = match (option, host.vars().get(MEMORY_VAR)) {
        (Some(v), _) => ("memory", v),
        (None, Some(v)) if !v.trim().is_empty() => (MEMORY_VAR, v.trim().to_string()),
        _ => return Ok(None),
    };
    match blueprint::decode_bytes(&value) {
        Ok(b) if b >= 6 << 20 => Ok(Some(b)),
        Ok(_) => Err(invalid(
            name,
            format!("{value:?} is below the engine's minimum memory limit, 6m"),
        )),
        Err(why) => Err(invalid(name, format!("{why}, like 2g or 512m"))),
    }
}

/// `cpus`, else `PO_SANDBOX_CPUS`: a number of CPUs from 0.01 to 1024; `None` when neither is
/// given (derived from the engine later).
fn cpus(option: Option<f64>, host: &HostEnv) -> Result<Option<i64>> {
    let (name, value) = match (option, host.vars().get(CPUS_VAR)) {
        (Some(v), _) => ("cpus", format_cpus(v)),
        (None, Some(v)) if !v.trim().is_empty() => (CPUS_VAR, v.trim().to_string()),
        _ => return Ok(None),
    };
    blueprint::decode_nano_cpus(&value)
        .map(Some)
        .map_err(|why| invalid(name, why.to_string()))
}

/// A JS number of CPUs as `--cpus` reads it (at most 9 decimals).
fn format_cpus(v: f64) -> String {
    if !v.is_finite() || v < 0.0 {
        return v.to_string();
    }
    let s = format!("{v:.9}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `pidsLimit`: 16 to 1,000,000; default [`DEFAULT_PIDS_LIMIT`].
fn pids_limit(value: Option<f64>) -> Result<i64> {
    let default = DEFAULT_PIDS_LIMIT as f64;
    Ok(whole(value, "pidsLimit", 16.0..=1_000_000.0, default)? as i64)
}

/// `healthTimeoutMs`: 100 ms to an hour; default [`DEFAULT_HEALTH_TIMEOUT`].
fn health_timeout(value: Option<f64>) -> Result<Duration> {
    let default = DEFAULT_HEALTH_TIMEOUT.as_millis() as f64;
    let ms = whole(value, "healthTimeoutMs", 100.0..=3_600_000.0, default)?;
    Ok(Duration::from_millis(ms as u64))
}

/// `concurrency`: 1 to 64; default [`DEFAULT_CONCURRENCY`].
fn concurrency(value: Option<f64>) -> Result<usize> {
    Ok(whole(value, "concurrency", 1.0..=64.0, DEFAULT_CONCURRENCY as f64)? as usize)
}

/// `healthIntervalMs`: a second to an hour; default 15 s.
fn health_interval(value: Option<f64>) -> Result<Duration> {
    let default = crate::sandbox::blueprint::DEFAULT_HEALTH_INTERVAL_MS as f64;
    let ms = whole(value, "healthIntervalMs", 1000.0..=3_600_000.0, default)?;
    Ok(Duration::from_millis(ms as u64))
}

/// `network`, else `PO_SANDBOX_NETWORK`: `open` (default), `none` or `allowlist`.
impl ProviderOptions {
    /// Checks everything that can be checked without I/O (but the Po home's owner file, read,
    /// or made once), one option at a time in the order of the run-flags table
    /// (docs/security.md); the first bad one is the error.
    pub fn resolve(given: GivenOptions, host: HostEnv) -> Result<ProviderOptions> {
        let g = given;
        let po_home = po_home(g.po_home, &host)?;
        let (file, policy_problem) = policy_file(&po_home);
        let file = file.as_ref();
        let owner = given_owner(g.owner)?;
        let workspaces = workspaces(g.workspaces.unwrap_or_default())?;
        let runtime_version = runtime_version(g.runtime_version)?;
        let (base, variant) = (g.base_image.as_deref(), g.image_variant.as_deref());
        let recipe = ImageRecipe::resolve(base, variant, host.vars())?;
        let user = user(g.user, &host)?;
        let pids_limit = pids_limit(g.pids_limit)?;
        let run_flags = run_flags(g.run_flags, &host, file, pids_limit)?;
        let health_timeout = health_timeout(g.health_timeout_ms)?;
        let concurrency = concurrency(g.concurrency)?;
        let mut detect = detect(g.engine, g.engine_timeout_ms, &host)?;
        detect.remote = engine::remote_forced(&host, g.engine_remote)?;
        let socket_dir = g.broker_socket_dir.as_deref().filter(|d| !d.is_empty());
        let broker_socket_dir = host.broker_socket_dir(socket_dir, "brokerSocketDir")?;
        let broker_route = broker_route(g.broker_route, &host)?;
        let guarded_paths = guarded_paths(g.guarded_paths, &host, file)?;
        let memory = memory(g.memory, &host)?;
        let nano_cpus = cpus(g.cpus, &host)?;
        let given = Given {
            mode: g.network.clone(),
            allow: g.network_allow,
            resolve: g.network_resolve,
        };
        let network_policy = NetworkPolicy::resolve(given, &host, file)?;
        let network_allow = network_policy.allow.0.clone();
        let network_resolve = network_policy.resolve.0.clone();
        let health_interval = health_interval(g.health_interval_ms)?;
        let network_mode = network_policy.mode.0;
        let git_policy = crate::policy::effective::git_policy(&host, file)?;
        let (workspace_mode, workspace_mode_given) = workspace_mode(g.workspace_mode, &host, file)?;
        let set_git_safe_bare = crate::sandbox::folder::safe_bare_opted_in(
            g.set_git_safe_bare_repository,
            host.vars(),
        )?;
        let one_shot = g.one_shot.unwrap_or(false);
        // The engine's facts are kept for the next start-up (a hub's restart, a CLI command).
        detect.facts_file = Some(po_home.join(engine::facts_cache::FILE));
        // Last: the Po home's owner file is read, or made, only for options that are good.
        let owner = owner.unwrap_or_else(|| default_owner(&po_home));
        Ok(ProviderOptions {
            workspace_mode,
            workspace_mode_given,
            set_git_safe_bare,
            network_allow,
            network_resolve,
            network_mode,
            network_policy,
            policy_problem,
            policy_file: file.cloned(),
            git_policy,
            memory,
            nano_cpus,
            health_interval,
            guarded_paths,
            broker: g.broker.unwrap_or(true),
            demo_runtime: g.demo_runtime.unwrap_or(false),
            one_shot,
            pull_base: g.pull_base.unwrap_or(false),
            image_given: base.is_some() || variant.is_some(),
            run_flags,
            broker_socket_dir,
            broker_route,
            po_home,
            owner,
            workspaces,
            runtime_version,
            recipe,
            user,
            pids_limit,
            health_timeout,
            concurrency,
            detect,
            host,
        })
    }
}

#[cfg(test)]
mod tests;
