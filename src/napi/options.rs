//! The options the JS caller passes, each converted once into what the core checks.

use std::collections::HashMap;

use napi_derive::napi;

use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::provider::{GivenOptions, GivenWorkspace, ProviderOptions};

/// A workspace the hub knows.
#[napi(object, js_name = "WorkspaceOption")]
pub struct JsWorkspaceOption {
    /// The workspace id: 1-128 of letters, digits, `.`, `_`, `-`, not starting with `.`.
    pub id: String,
    /// Its folder (absolute; it must exist).
    pub path: String,
    /// `container` (default) starts a container for it at hub start; `none` (or `host`, the
    /// same) does not: its status is `skipped`.
    #[napi(ts_type = "'container' | 'none' | 'host'")]
    pub sandbox: Option<String>,
}

/// Options of the container provider.
#[napi(object, js_name = "ContainerProviderOptions")]
#[derive(Default)]
pub struct JsProviderOptions {
    /// The Po home on the host (default `~/.po`). Must be absolute.
    pub po_home: Option<String>,
    /// This hub's owner id, the `po.owner` label (default: 12 hex digits derived from poHome).
    pub owner: Option<String>,
    /// The workspaces to bring up at hub start.
    pub workspaces: Option<Vec<JsWorkspaceOption>>,
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
}

/// Options of `ensureSandboxImage`.
#[napi(object, js_name = "ImageOptions")]
#[derive(Default)]
pub struct JsImageOptions {
    /// The base (default `PO_SANDBOX_BASE_IMAGE`, else `node:24-bookworm-slim`).
    pub base_image: Option<String>,
    /// `full` or `minimal` (default `PO_SANDBOX_IMAGE_VARIANT`, else `full`).
    #[napi(ts_type = "'full' | 'minimal'")]
    pub image_variant: Option<String>,
    /// Only this engine.
    pub engine: Option<String>,
    /// The environment to read instead of `process.env`.
    pub env: Option<HashMap<String, Option<String>>>,
}

/// [`GivenOptions`] from a JS options struct `o`: the listed fields moved as they are, the
/// `name: value` pairs after them set, the rest left unset.
macro_rules! given {
    ($o:ident { $($field:ident),* $(,)? } $($name:ident: $value:expr),* $(,)?) => {
        GivenOptions { $($field: $o.$field,)* $($name: $value,)* ..Default::default() }
    };
}
pub(super) use given;

impl TryFrom<JsProviderOptions> for ProviderOptions {
    type Error = Error;

    /// Checks the options against their environment (`env`, else `process.env`).
    fn try_from(o: JsProviderOptions) -> Result<ProviderOptions> {
        let workspaces = o.workspaces.unwrap_or_default().into_iter();
        let workspaces = workspaces.map(|w| GivenWorkspace {
            id: w.id,
            path: w.path,
            sandbox: w.sandbox,
        });
        #[rustfmt::skip]
        let given = GivenOptions { workspaces: workspaces.collect(), ..given!(o {
            po_home, owner, runtime_version, base_image, image_variant, user, pids_limit,
            health_timeout_ms, concurrency, engine, engine_timeout_ms, broker, broker_socket_dir,
            broker_route, guarded_paths, demo_runtime, run_flags, memory, cpus,
            health_interval_ms, network_allow, network_resolve, network, one_shot,
        }) };
        ProviderOptions::resolve(given, HostEnv::given(o.env))
    }
}

impl From<JsImageOptions> for GivenOptions {
    fn from(o: JsImageOptions) -> GivenOptions {
        given!(o {
            base_image,
            image_variant,
            engine
        })
    }
}
