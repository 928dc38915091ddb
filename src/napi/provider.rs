//! `registerSandboxLayer`, the container provider and the `po/workspace-containers` service.

use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{
    FnArgs, Function, JavaScriptClassExt, JsObjectValue, JsValue, Object, PromiseRaw, Unknown,
};
use napi_derive::napi;

use super::errors::{coded, object_arg, promise, required_arg};
use super::events::subscribe;
use super::options::JsImageOptions;
use crate::events::Event;
use crate::host::HostEnv;
use crate::provider::image_job::{ImageJob, ImageResult};
use crate::provider::{self as core, GivenOptions, Provider, ProviderOptions, ProviderStatus};
use crate::sandbox::folder::WorkspaceReview;
use crate::sandbox::folder::check_workspace_id;
use crate::sandbox::folder::{CloneApplied, CloneApplyOptions, CloneDiff};
use crate::sandbox::service::WorkspaceContainer;

/// A workspace to start: its id and folder.
#[napi(object, js_name = "WorkspaceRef")]
pub struct JsWorkspaceRef {
    /// 1-128 of letters, digits, `.`, `_`, `-`, not starting with `.`.
    pub id: String,
    /// Its folder: absolute, existing.
    pub path: String,
    /// `bind` or `clone` (default: the provider's `workspaceMode`).
    #[napi(ts_type = "'bind' | 'clone'")]
    pub mode: Option<String>,
}

/// How `WorkspaceContainers.exec` runs a command.
#[napi(object, js_name = "ExecOptions")]
pub struct JsExecOptions {
    /// The workspace folder (default: the one the container was started for).
    pub path: Option<String>,
    /// Allocate a TTY: set it when this process's stdin is a terminal (default false).
    pub tty: Option<bool>,
}

/// A folder as a workspace: its stable id and canonical path.
#[napi(object, js_name = "FolderWorkspace")]
pub struct JsFolderWorkspace {
    /// `<folder name>-<12 hex digits of sha256(path)>`: the same folder always gets it.
    pub id: String,
    /// The folder, canonical (links resolved).
    pub path: String,
}

/// The workspace `po-sandbox up [dir]` uses for a folder: a stable id from the folder's
/// canonical path (its name, cleaned, and 12 hex digits of the path's sha256) and that path.
/// Throws `WORKSPACE_INVALID` when the folder does not exist or is not a folder.
#[napi]
pub fn workspace_for_folder(env: &Env, folder: String) -> napi::Result<JsFolderWorkspace> {
    let ws = crate::sandbox::folder::workspace_for_folder(&folder).map_err(|e| coded(env, &e))?;
    Ok(JsFolderWorkspace {
        id: ws.id,
        path: ws.path.to_string_lossy().into_owned(),
    })
}

/// What a host says about itself (`po/sandbox-identity`).
#[napi(object, js_name = "SandboxIdentity", object_to_js = false)]
pub struct JsSandboxIdentity {
    /// This host runs inside a sandbox container.
    pub contained: bool,
}

/// The Po host the layer registers into.
#[allow(dead_code)] // A declaration for index.d.ts: the host is read property by property.
#[napi(
    object,
    js_name = "SandboxHost",
    object_from_js = false,
    object_to_js = false
)]
pub struct JsSandboxHost {
    #[napi(ts_type = "'global' | 'workspace' | 'session'")]
    pub scope: String,
    pub identity: Option<JsSandboxIdentity>,
    /// Registers into `po/workspace-sandboxes`.
    #[napi(ts_type = "(provider: ContainerSandboxProvider) => void")]
    pub register_sandbox_provider: (),
    /// Publishes a service.
    #[napi(ts_type = "(name: 'po/workspace-containers', service: WorkspaceContainers) => void")]
    pub publish_service: (),
}

/// What `registerSandboxLayer` returns on a host's global scope.
#[allow(dead_code)] // A declaration for index.d.ts: the layer is built as a plain object.
#[napi(
    object,
    js_name = "SandboxLayer",
    object_from_js = false,
    object_to_js = false
)]
pub struct JsSandboxLayer {
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
    pub(super) provider: Arc<Provider>,
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
        let arg: JsWorkspaceRef =
            required_arg(env, Some(workspace), "workspace", "expected { id, path }")?;
        let ws = crate::sandbox::folder::resolve_workspace_with_mode(&arg.id, &arg.path, arg.mode)
            .map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move { provider.start_workspace(ws).await })
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
        check_workspace_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move {
            provider
                .adopt_workspace(&workspace_id, path.as_deref())
                .await
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
        check_workspace_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(
            env,
            async move { provider.stop_workspace(&workspace_id).await },
        )
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
        options: Option<JsExecOptions>,
    ) -> napi::Result<PromiseRaw<'env, i64>> {
        check_workspace_id(&workspace_id).map_err(|e| coded(env, &e))?;
        crate::sandbox::on_engine::check_exec_command(&command).map_err(|e| coded(env, &e))?;
        let (path, tty) = options.map_or((None, false), |o| (o.path, o.tty.unwrap_or(false)));
        let provider = self.provider.clone();
        promise(env, async move {
            let path = path.as_deref();
            provider.exec_in(&workspace_id, path, command, tty).await
        })
    }

    /// The workspace's host-executed files (package scripts, Makefiles, cargo, npm and yarn
    /// configuration, tool versions, workflows, `AGENTS.md`/`CLAUDE.md`, nested repositories)
    /// added, modified or removed since its container was made, each with why it matters.
    /// Rejects with `REVIEW_UNAVAILABLE` when it has no baseline; throws `WORKSPACE_INVALID`.
    #[napi(ts_return_type = "Promise<WorkspaceReview>")]
    pub fn review<'env>(
        &self,
        env: &'env Env,
        workspace_id: String,
    ) -> napi::Result<PromiseRaw<'env, WorkspaceReview>> {
        check_workspace_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move {
            provider.review_workspace(&workspace_id).await
        })
    }

    /// Clone mode: the agent's commits since the copy was made and its uncommitted work, with
    /// the host-executed files among them. Rejects with `NOT_A_CLONE`, `SANDBOX_NOT_RUNNING`, `CHANGES_TIMEOUT`;
    /// throws `WORKSPACE_INVALID` for a bad id.
    #[napi(ts_args_type = "workspaceId: string, options?: CloneApplyOptions | undefined | null")]
    pub fn diff<'env>(
        &self,
        env: &'env Env,
        workspace_id: String,
        options: Option<CloneApplyOptions>,
    ) -> napi::Result<PromiseRaw<'env, CloneDiff>> {
        check_workspace_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let (provider, path) = (self.provider.clone(), options.and_then(|o| o.path));
        promise(env, async move {
            provider.clone_diff(&workspace_id, path.as_deref()).await
        })
    }

    /// Clone mode: puts the agent's work on a host branch (see docs/api.md). Rejects with
    /// `APPLY_REFUSED`, `NOT_A_CLONE`, `SANDBOX_NOT_RUNNING`, `CHANGES_TIMEOUT`, `OPTIONS_INVALID` (branch).
    #[napi(ts_args_type = "workspaceId: string, options?: CloneApplyOptions | undefined | null")]
    pub fn apply<'env>(
        &self,
        env: &'env Env,
        workspace_id: String,
        options: Option<CloneApplyOptions>,
    ) -> napi::Result<PromiseRaw<'env, CloneApplied>> {
        check_workspace_id(&workspace_id).map_err(|e| coded(env, &e))?;
        let provider = self.provider.clone();
        promise(env, async move {
            provider
                .clone_apply(&workspace_id, options.unwrap_or_default())
                .await
        })
    }

    /// Stops and removes every container of this hub. Resolves with the workspace ids.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn stop_all<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
        let provider = self.provider.clone();
        promise(env, async move { provider.stop_every_workspace().await })
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
        promise(env, async move { provider.containers().await })
    }

    /// Calls `callback` with every lifecycle event.
    #[napi(ts_args_type = "callback: (event: SandboxEvent) => void")]
    pub fn on_event(&self, callback: Function<Event, ()>) -> napi::Result<()> {
        subscribe(self.provider.events(), callback)
    }
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
    let mut options: GivenOptions = object_arg(env, options, "options")?.unwrap_or_default();
    let host_env = HostEnv::given(options.env.take());
    let scope = host.get_named_property::<Option<String>>("scope");
    let identity = host.get_named_property::<Option<JsSandboxIdentity>>("identity");
    let contained = identity.ok().flatten().is_some_and(|i| i.contained);
    if !core::registers(scope.unwrap_or(None).as_deref(), contained, &host_env) {
        return Ok(None);
    }
    let options = ProviderOptions::resolve(options, host_env).map_err(|e| coded(env, &e))?;
    let provider = Provider::new(options);
    let p = provider.clone();
    let provider_obj = ContainerSandboxProvider { provider: p }.into_instance(env)?;
    let p = provider.clone();
    let service_obj = WorkspaceContainers { provider: p }.into_instance(env)?;
    let register: Function<Unknown, Unknown> =
        host.get_named_property("registerSandboxProvider")?;
    register.apply(host, provider_obj.as_object(env).to_unknown())?;
    // Two arguments, not one array: FnArgs spreads the tuple.
    let publish: Function<FnArgs<(String, Unknown)>, Unknown> =
        host.get_named_property("publishService")?;
    let service = service_obj.as_object(env).to_unknown();
    let args = FnArgs::from(("po/workspace-containers".to_string(), service));
    publish.apply(host, args)?;
    napi::bindgen_prelude::spawn(provider.run());
    let mut layer = Object::new(env)?;
    layer.set_named_property("provider", provider_obj)?;
    layer.set_named_property("containers", service_obj)?;
    Ok(Some(layer))
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
    let mut o: JsImageOptions = object_arg(env, options, "options")?.unwrap_or_default();
    let host = HostEnv::given(o.env.take());
    let job = ImageJob::new(host, o.into()).map_err(|e| coded(env, &e))?;
    let events = crate::events::EventBus::default();
    if let Some(cb) = on_event {
        subscribe(&events, cb)?;
    }
    promise(env, job.run(events))
}
