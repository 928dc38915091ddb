//! `registerSandboxLayer`, the container provider and the `po/workspace-containers` service.

use std::collections::HashMap;
use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{
    ClassInstance, FnArgs, Function, JavaScriptClassExt, JsObjectValue, JsValue, Object,
    PromiseRaw, Unknown,
};
use napi_derive::napi;

use super::errors::{coded, env_vars, object_arg, promise, required_arg};
use super::events::subscribe;
use crate::events::Event;
use crate::host::HostEnv;
use crate::provider::image_job::{ImageJob, ImageResult};
use crate::provider::{self as core, Provider, ProviderOptions, ProviderStatus, RawOptions};
use crate::sandbox::service::WorkspaceContainer;

/// A workspace the hub knows.
#[napi(object)]
pub struct WorkspaceOption {
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
#[napi(object)]
pub struct ContainerProviderOptions {
    /// The Po home on the host (default `~/.po`). Must be absolute.
    pub po_home: Option<String>,
    /// This hub's owner id, the `po.owner` label (default: 12 hex digits derived from poHome).
    pub owner: Option<String>,
    /// The workspaces to bring up at hub start.
    pub workspaces: Option<Vec<WorkspaceOption>>,
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
    #[napi(ts_type = "'auto' | 'socket' | 'tcp'")]
    pub broker_transport: Option<String>,
    /// Paths of each workspace mounted read-only inside its container, relative to the
    /// workspace: the complete list (default `PO_SANDBOX_GUARDED_PATHS`, else `.git/hooks`,
    /// `.git/config`, `.git/info`, `.vscode`, `.idea`, `.envrc`, `.direnv`); `[]` guards none.
    pub guarded_paths: Option<Vec<String>>,
    /// When Po's runtime bundle is not installed (and no `runtimeVersion` is named), use the
    /// package's embedded demo bundle (a small status server; version `demo`) instead of
    /// failing with `RUNTIME_NOT_INSTALLED` (default false; `po-sandbox up` sets it).
    pub demo_runtime: Option<bool>,
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

/// A workspace to start: its id and folder.
#[napi(object)]
pub struct WorkspaceRef {
    /// 1-128 of letters, digits, `.`, `_`, `-`, not starting with `.`.
    pub id: String,
    /// Its folder: absolute, existing.
    pub path: String,
}

/// How `WorkspaceContainers.exec` runs a command.
#[napi(object)]
pub struct ExecOptions {
    /// The workspace folder (default: the one the container was started for).
    pub path: Option<String>,
    /// Allocate a TTY: set it when this process's stdin is a terminal (default false).
    pub tty: Option<bool>,
}

/// A folder as a workspace: its stable id and canonical path.
#[napi(object)]
pub struct FolderWorkspace {
    /// `<folder name>-<12 hex digits of sha256(path)>`: the same folder always gets it.
    pub id: String,
    /// The folder, canonical (links resolved).
    pub path: String,
}

/// The workspace `po-sandbox up [dir]` uses for a folder: a stable id from the folder's
/// canonical path (its name, cleaned, and 12 hex digits of the path's sha256) and that path.
/// Throws `WORKSPACE_INVALID` when the folder does not exist or is not a folder.
#[napi]
pub fn workspace_for_folder(env: &Env, folder: String) -> napi::Result<FolderWorkspace> {
    let ws = crate::sandbox::workspace::for_folder(&folder).map_err(|e| coded(env, &e))?;
    Ok(FolderWorkspace {
        id: ws.id,
        path: ws.path.to_string_lossy().into_owned(),
    })
}

/// What a host says about itself (`po/sandbox-identity`).
#[napi(object, object_to_js = false)]
pub struct SandboxIdentity {
    /// This host runs inside a sandbox container.
    pub contained: bool,
}

/// The Po host the layer registers into.
#[allow(dead_code)] // A declaration for index.d.ts: the host is read property by property.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct SandboxHost {
    #[napi(ts_type = "'global' | 'workspace' | 'session'")]
    pub scope: String,
    pub identity: Option<SandboxIdentity>,
    /// Registers into `po/workspace-sandboxes`.
    #[napi(ts_type = "(provider: ContainerSandboxProvider) => void")]
    pub register_sandbox_provider: (),
    /// Publishes a service.
    #[napi(ts_type = "(name: 'po/workspace-containers', service: WorkspaceContainers) => void")]
    pub publish_service: (),
}

/// What `registerSandboxLayer` returns on a host's global scope.
#[allow(dead_code)] // A declaration for index.d.ts: the layer is built as a plain object.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct SandboxLayer {
    #[napi(ts_type = "ContainerSandboxProvider")]
    pub provider: (),
    #[napi(ts_type = "WorkspaceContainers")]
    pub containers: (),
}

/// The `container` sandbox provider registered into `po/workspace-sandboxes`.
#[napi]
pub struct ContainerSandboxProvider {
    provider: Arc<Provider>,
}

#[napi]
impl ContainerSandboxProvider {
    /// Always `container`.
    #[napi(getter, ts_return_type = "'container'")]
    pub fn kind(&self) -> &'static str {
        "container"
    }

    /// The status now: `starting`, `ready` or `unavailable` (with the reason), and every
    /// workspace's state.
    #[napi]
    pub fn status(&self) -> ProviderStatus {
        self.provider.status()
    }

    /// Resolves with the status once start-up has settled (engine, runtime, image and every
    /// workspace attempted).
    #[napi(ts_return_type = "Promise<ProviderStatus>")]
    pub fn ready<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ProviderStatus>> {
        let provider = self.provider.clone();
        promise(env, async move { Ok(provider.ready().await) })
    }

    /// A clean user stop: stops and removes every container of this hub (volumes are kept).
    /// Resolves with the workspace ids stopped.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn on_clean_stop<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
        let provider = self.provider.clone();
        promise(env, async move { provider.clean_stop().await })
    }

    /// Calls `callback` with every lifecycle event: `{ type: 'engine' | 'runtime' | 'image' |
    /// 'workspace' | 'provider', ... }`. Events already emitted are replayed first (the last
    /// 256; image progress lines are the first to go), so a callback added after registration
    /// still sees how start-up went.
    #[napi(ts_args_type = "callback: (event: SandboxEvent) => void")]
    pub fn on_event(&self, callback: Function<Event, ()>) -> napi::Result<()> {
        subscribe(self.provider.events(), callback)
    }
}

/// The `po/workspace-containers` service.
#[napi]
pub struct WorkspaceContainers {
    provider: Arc<Provider>,
}

#[napi]
impl WorkspaceContainers {
    /// Adopts the workspace's running container (when it still satisfies the security
    /// posture) or creates one, and waits until its server answers. Concurrent calls for one
    /// workspace share one operation.
    #[napi(
        ts_args_type = "workspace: WorkspaceRef",
        ts_return_type = "Promise<WorkspaceContainer>"
    )]
    pub fn start<'env>(
        &self,
        env: &'env Env,
        workspace: Unknown,
    ) -> napi::Result<PromiseRaw<'env, WorkspaceContainer>> {
        let arg: WorkspaceRef =
            required_arg(env, Some(workspace), "workspace", "expected { id, path }")?;
        let ws =
            crate::sandbox::workspace::resolve(&arg.id, &arg.path).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move {
            let call = async { provider.service_for_start().await?.start(ws).await };
            provider.watched(call).await
        })
    }

    /// Adopts the workspace's running container; `null` when there is none (or it drifted:
    /// then it is removed, with an event). Never creates.
    #[napi(ts_return_type = "Promise<WorkspaceContainer | null>")]
    pub fn adopt<'env>(
        &self,
        env: &'env Env,
        workspace_id: String,
        path: Option<String>,
    ) -> napi::Result<PromiseRaw<'env, Option<WorkspaceContainer>>> {
        crate::sandbox::workspace::check_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move {
            let call = async {
                let service = provider.service_for_start().await?;
                service.adopt(&workspace_id, path.as_deref()).await
            };
            provider.watched(call).await
        })
    }

    /// Switches the sandbox off for a workspace: stops and removes its container, keeps its
    /// volumes. Resolves `false` when it had none.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn stop<'env>(
        &self,
        env: &'env Env,
        workspace_id: String,
    ) -> napi::Result<PromiseRaw<'env, bool>> {
        crate::sandbox::workspace::check_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move {
            let call = provider.stop(&workspace_id);
            provider.watched(call).await
        })
    }

    /// Runs `command` in the workspace's running container, attached to this process's own
    /// stdin, stdout and stderr (what `po-sandbox exec` does): in the workspace folder, as the
    /// container's user, with its environment (the broker grant's tokens, never a key). The
    /// container is adopted first, so this process serves its broker grant while the command
    /// runs. `tty: true` (stdin is a terminal) allocates a TTY, puts this terminal in raw mode
    /// and follows its size. Resolves with the command's exit code. Rejects with
    /// `SANDBOX_NOT_RUNNING` when the workspace has no running container; throws
    /// `OPTIONS_INVALID` for an empty command, `WORKSPACE_INVALID` for a bad id.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn exec<'env>(
        &self,
        env: &'env Env,
        workspace_id: String,
        command: Vec<String>,
        options: Option<ExecOptions>,
    ) -> napi::Result<PromiseRaw<'env, i64>> {
        crate::sandbox::workspace::check_id(&workspace_id).map_err(|e| coded(env, &e))?;
        crate::sandbox::exec::check_command(&command).map_err(|e| coded(env, &e))?;
        let (path, tty) = options.map_or((None, false), |o| (o.path, o.tty.unwrap_or(false)));
        let provider = self.provider.clone();
        promise(env, async move {
            provider
                .service_for_start()
                .await?
                .exec(&workspace_id, path.as_deref(), command, tty)
                .await
        })
    }

    /// Stops and removes every container of this hub. Resolves with the workspace ids.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn stop_all<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
        let provider = self.provider.clone();
        promise(
            env,
            async move { provider.watched(provider.stop_all()).await },
        )
    }

    /// Same as `stopAll`: the clean-stop hook.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn on_clean_stop<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
        let provider = self.provider.clone();
        promise(env, async move { provider.clean_stop().await })
    }

    /// This hub's containers, any state.
    #[napi(ts_return_type = "Promise<WorkspaceContainer[]>")]
    pub fn list<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<PromiseRaw<'env, Vec<WorkspaceContainer>>> {
        let provider = self.provider.clone();
        promise(env, async move {
            let call = async { provider.service().await?.list().await };
            provider.watched(call).await
        })
    }

    /// Calls `callback` with every lifecycle event.
    #[napi(ts_args_type = "callback: (event: SandboxEvent) => void")]
    pub fn on_event(&self, callback: Function<Event, ()>) -> napi::Result<()> {
        subscribe(self.provider.events(), callback)
    }
}

fn raw_options(
    o: ContainerProviderOptions,
) -> (RawOptions, Option<HashMap<String, Option<String>>>) {
    let raw = RawOptions {
        po_home: o.po_home,
        owner: o.owner,
        workspaces: o
            .workspaces
            .unwrap_or_default()
            .into_iter()
            .map(|w| (w.id, w.path, w.sandbox))
            .collect(),
        runtime_version: o.runtime_version,
        base_image: o.base_image,
        image_variant: o.image_variant,
        user: o.user,
        pids_limit: o.pids_limit,
        health_timeout_ms: o.health_timeout_ms,
        concurrency: o.concurrency,
        engine: o.engine,
        engine_timeout_ms: o.engine_timeout_ms,
        broker: o.broker,
        broker_socket_dir: o.broker_socket_dir,
        broker_transport: o.broker_transport,
        guarded_paths: o.guarded_paths,
        demo_runtime: o.demo_runtime,
        run_flags: o.run_flags,
        memory: o.memory,
        cpus: o.cpus,
        health_interval_ms: o.health_interval_ms,
        network_allow: o.network_allow,
        network_resolve: o.network_resolve,
        network: o.network,
    };
    (raw, o.env)
}

/// Registers the container provider on a host's global scope: into `po/workspace-sandboxes`
/// (`host.registerSandboxProvider`) and as `po/workspace-containers` (`host.publishService`).
/// Returns at once; start-up (engine, runtime bundle, image, workspaces) runs in the
/// background, visible through `status()`, `ready()` and events. On any other scope, on a
/// contained host (`identity.contained` or `PO_SANDBOX=1`) it registers nothing and returns
/// `null`. Bad options throw a coded error before anything is registered.
#[napi(
    ts_args_type = "host: SandboxHost, options?: ContainerProviderOptions | undefined | null",
    ts_return_type = "SandboxLayer | null"
)]
pub fn register_sandbox_layer<'env>(
    env: &'env Env,
    host: Object<'env>,
    options: Option<Unknown>,
) -> napi::Result<Option<Object<'env>>> {
    let options: Option<ContainerProviderOptions> = object_arg(env, options, "options")?;
    let (raw, vars) = match options {
        Some(o) => raw_options(o),
        None => (RawOptions::default(), None),
    };
    let host_env = HostEnv::from_vars(env_vars(vars));
    let scope: Option<String> = host
        .get_named_property::<Option<String>>("scope")
        .unwrap_or(None);
    let contained_identity = host
        .get_named_property::<Option<SandboxIdentity>>("identity")
        .ok()
        .flatten()
        .is_some_and(|i| i.contained);
    if !core::registers(scope.as_deref(), contained_identity, &host_env) {
        return Ok(None);
    }
    let options = ProviderOptions::resolve(raw, host_env).map_err(|e| coded(env, &e))?;
    let provider = Provider::new(options);
    let provider_obj: ClassInstance<ContainerSandboxProvider> = ContainerSandboxProvider {
        provider: provider.clone(),
    }
    .into_instance(env)?;
    let service_obj: ClassInstance<WorkspaceContainers> = WorkspaceContainers {
        provider: provider.clone(),
    }
    .into_instance(env)?;
    let register: Function<Unknown, Unknown> =
        host.get_named_property("registerSandboxProvider")?;
    register.apply(host, provider_obj.as_object(env).to_unknown())?;
    // Two arguments, not one array: FnArgs spreads the tuple.
    let publish: Function<FnArgs<(String, Unknown)>, Unknown> =
        host.get_named_property("publishService")?;
    publish.apply(
        host,
        FnArgs::from((
            "po/workspace-containers".to_string(),
            service_obj.as_object(env).to_unknown(),
        )),
    )?;
    napi::bindgen_prelude::spawn(provider.run());
    let mut layer = Object::new(env)?;
    layer.set_named_property("provider", provider_obj)?;
    layer.set_named_property("containers", service_obj)?;
    Ok(Some(layer))
}

/// Options of `ensureSandboxImage`.
#[napi(object)]
pub struct ImageOptions {
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

/// Builds the sandbox image once if it is missing (what the provider does at start-up), with
/// progress to `onEvent` (`type: 'image'` events). Rejects with `IMAGE_BUILD_FAILED` carrying
/// the failing step's output tail, or `ENGINE_UNAVAILABLE`.
#[napi(
    ts_args_type = "options?: ImageOptions | undefined | null, onEvent?: ((event: Extract<SandboxEvent, { type: 'image' }>) => void) | undefined | null",
    ts_return_type = "Promise<ImageResult>"
)]
pub fn ensure_sandbox_image<'env>(
    env: &'env Env,
    options: Option<Unknown>,
    on_event: Option<Function<Event, ()>>,
) -> napi::Result<PromiseRaw<'env, ImageResult>> {
    let o: Option<ImageOptions> = object_arg(env, options, "options")?;
    let (raw, vars) = match o {
        Some(o) => (
            RawOptions {
                base_image: o.base_image,
                image_variant: o.image_variant,
                engine: o.engine,
                ..Default::default()
            },
            o.env,
        ),
        None => (RawOptions::default(), None),
    };
    let job = ImageJob::new(HostEnv::from_vars(env_vars(vars)), raw).map_err(|e| coded(env, &e))?;
    let events = crate::events::EventBus::default();
    if let Some(cb) = on_event {
        subscribe(&events, cb)?;
    }
    promise(env, job.run(events))
}
