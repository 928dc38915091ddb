//! Every sandbox container on the engine, across hubs: what `po-sandbox ls` shows and
//! `po-sandbox stop` acts on. One label-filtered list call.

use std::collections::HashMap;
use std::path::Path;

use crate::engine::api::EngineApi;

use crate::error::Result;
use crate::sandbox::blueprint::spec::{
    self, LABEL_OWNER, LABEL_SANDBOX, LABEL_WORKSPACE, LABEL_WORKSPACE_PATH,
};
use crate::sandbox::on_engine::container;

/// One sandbox container.
#[napi_derive::napi(object, js_name = "SandboxContainerRow", object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRow {
    pub owner: String,
    pub workspace_id: String,
    pub workspace_path: Option<String>,
    pub name: String,
    pub container_id: String,
    /// The engine's state word: Docker's set (`created`, `running`, `paused`, `restarting`,
    /// `removing`, `exited`, `dead`); open, as Podman and later engines may say more.
    #[napi(
        ts_type = "'created' | 'running' | 'paused' | 'restarting' | 'removing' | 'exited' | 'dead' | (string & {})"
    )]
    pub state: String,
    /// The engine's words (`Up 5 minutes`).
    pub status: String,
    /// Host port on 127.0.0.1.
    pub host_port: Option<u16>,
    pub image: String,
    /// The base its image was built on (the image's `po.image-base` label), when known.
    pub image_base: Option<String>,
    /// Its image's recipe variant (`full` or `minimal`, the `po.image-variant` label).
    pub image_variant: Option<String>,
    /// Unix seconds.
    pub created: i64,
    /// The run flags it was made with (its `po.run-flags` label), long form.
    pub run_flags: Vec<String>,
    /// The ports forwarded from it now (its relays in its process list), when asked for.
    pub forwards: Vec<ForwardedPort>,
    /// The host folder bind-mounted as its broker socket folder, when it has one.
    #[serde(skip)]
    #[napi(skip)]
    pub broker_folder: Option<std::path::PathBuf>,
}

/// A port forwarded from a sandbox (a relay running in it).
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForwardedPort {
    /// The port inside (on its 127.0.0.1).
    pub port: u16,
    /// The port on the host's 127.0.0.1.
    pub host_port: u16,
}

/// Fills the running rows' `forwards` from their process lists, concurrently (one `top` each:
/// a forward's relay runs as `… po-sandbox-forward <port> <hostPort>`).
pub async fn add_forwards(engine: &impl EngineApi, rows: &mut [SandboxRow]) {
    let running = rows.iter_mut().filter(|r| r.state == "running");
    let found = running.map(|row| async move {
        let commands = engine
            .top_commands(&row.container_id)
            .await
            .unwrap_or_default();
        row.forwards = commands
            .iter()
            .filter_map(|c| {
                let words: Vec<&str> = c.split_whitespace().collect();
                let (port, host_port) = crate::relay::parse_agent_args(&words)?;
                Some(ForwardedPort { port, host_port })
            })
            .collect();
    });
    futures_util::future::join_all(found).await;
}

/// Lists sandbox containers: this owner's, or every owner's when `owner` is `None`.
pub async fn list(engine: &impl EngineApi, owner: Option<&str>) -> Result<Vec<SandboxRow>> {
    let mut labels = vec![format!("{LABEL_SANDBOX}=1")];
    if let Some(o) = owner {
        labels.push(format!("{LABEL_OWNER}={o}"));
    }
    let list = container::list_labelled(engine, labels).await?;
    // Namespace holders publish the ports of their workspaces and are never rows of their own.
    let (holders, list): (Vec<_>, Vec<_>) = list.into_iter().partition(|c| {
        c.labels
            .as_ref()
            .is_some_and(|l| l.contains_key(spec::LABEL_HOLDER_OF))
    });
    let holder_ports: HashMap<(String, String), u16> = holders
        .iter()
        .filter_map(|h| {
            let l = h.labels.as_ref()?;
            let key = (
                l.get(LABEL_OWNER)?.clone(),
                l.get(spec::LABEL_HOLDER_OF)?.clone(),
            );
            let port = h
                .ports
                .as_ref()?
                .iter()
                .find(|p| p.ip.as_deref() == Some("127.0.0.1"))?
                .public_port?;
            Some((key, port))
        })
        .collect();
    let mut rows: Vec<SandboxRow> = list
        .into_iter()
        .map(|c| {
            let labels = c.labels.unwrap_or_default();
            let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
            SandboxRow {
                owner: get(LABEL_OWNER),
                workspace_id: get(LABEL_WORKSPACE),
                workspace_path: labels.get(LABEL_WORKSPACE_PATH).cloned(),
                name: c
                    .names
                    .unwrap_or_default()
                    .first()
                    .map(|n| n.trim_start_matches('/').to_string())
                    .unwrap_or_default(),
                container_id: c.id.unwrap_or_default(),
                state: c.state.map(|s| container::enum_str(&s)).unwrap_or_default(),
                status: c.status.unwrap_or_default(),
                host_port: holder_ports
                    .get(&(get(LABEL_OWNER), get(LABEL_WORKSPACE)))
                    .copied()
                    .or_else(|| {
                        c.ports
                            .unwrap_or_default()
                            .into_iter()
                            .find(|p| p.ip.as_deref() == Some("127.0.0.1"))
                            .and_then(|p| p.public_port)
                    }),
                image: c.image.unwrap_or_default(),
                image_base: labels.get(spec::LABEL_IMAGE_BASE).cloned(),
                image_variant: labels.get(spec::LABEL_IMAGE_VARIANT).cloned(),
                created: c.created.unwrap_or_default(),
                forwards: Vec::new(),
                run_flags: labels
                    .get(spec::LABEL_RUN_FLAGS)
                    .map(|l| l.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default(),
                broker_folder: c
                    .mounts
                    .unwrap_or_default()
                    .into_iter()
                    .find(|m| m.destination.as_deref() == Some(crate::names::paths::BROKER_MOUNT))
                    .and_then(|m| m.source.map(std::path::PathBuf::from)),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.owner, &a.workspace_id).cmp(&(&b.owner, &b.workspace_id)));
    Ok(rows)
}

/// Stops and removes this owner's containers (one workspace's, or all), removing their token
/// files and review baselines; their volumes too with `remove_volumes`, else they are kept;
/// their copy volumes (clone mode) only with `discard`; the owner's network too when no
/// container uses it any more. Returns the workspace ids stopped.
pub async fn stop(
    engine: &impl EngineApi,
    vars: &std::collections::HashMap<String, String>,
    po_home: &Path,
    owner: &str,
    workspace: Option<&str>,
    remove_volumes: bool,
    discard: bool,
) -> Result<Vec<String>> {
    if let Some(w) = workspace {
        crate::names::ids::check_id(w)?;
    }
    let rows = list(engine, Some(owner)).await?;
    let mut stopped = Vec::new();
    for row in rows
        .into_iter()
        .filter(|r| workspace.is_none_or(|w| r.workspace_id == w))
    {
        container::stop_and_remove(engine, &row.container_id).await?;
        remove_token_files(po_home, owner, &row.workspace_id);
        // Its broker socket folder too, so a hub that still runs (and granted that socket) no
        // longer serves a container that is gone.
        if let Some(folder) = &row.broker_folder {
            remove_broker_folder(folder);
            // Its lock file, unless a hub still holds it (whose watch removes it then).
            crate::sandbox::folder::locks::remove_free_lock(&folder.with_extension("lock"));
        }
        stopped.push(row.workspace_id);
    }
    stopped.dedup();
    // Their namespace holders (and any a failed start left behind).
    crate::sandbox::on_engine::holder::remove_of(engine, owner, workspace).await?;
    if remove_volumes {
        container::remove_volumes(engine, owner, workspace, false).await?;
    }
    if discard {
        container::remove_volumes(engine, owner, workspace, true).await?;
        crate::sandbox::folder::clone::remove_manifests(po_home, owner, workspace);
    }
    if !stopped.is_empty() {
        // The owner's per-hub network, when no container uses it any more.
        crate::sandbox::on_engine::network::remove_unused(engine, owner).await?;
    }
    undo_git_safety_when_last(engine, vars, po_home, owner).await;
    Ok(stopped)
}

/// Puts the person's `safe.bareRepository` back as it was when the layer set it for `owner`
/// ([`crate::sandbox::folder::guards::git_safety`]) and no container of the owner is left.
pub(crate) async fn undo_git_safety_when_last(
    engine: &impl EngineApi,
    vars: &std::collections::HashMap<String, String>,
    po_home: &Path,
    owner: &str,
) {
    use crate::sandbox::folder::guards::git_safety;
    if !git_safety::recorded(po_home, owner) {
        return;
    }
    if !list(engine, Some(owner))
        .await
        .is_ok_and(|rows| rows.is_empty())
    {
        return;
    }
    let (vars, home, owner) = (vars.clone(), po_home.to_path_buf(), owner.to_string());
    let _ = tokio::task::spawn_blocking(move || git_safety::undo(&vars, &home, &owner)).await;
}

/// Removes a stopped workspace's files in the owner's token folder: its token file, its rules
/// record (`<id>.net`), its spawner record (`<id>.exec`), and its start lock (`<id>.lock`) and
/// the spawner's launch lock (`<id>.exec.lock`) unless a process holds them (a start or launch
/// under way); its guard placeholders in its folder ([`guards::placeholders`]), its guard
/// copies (`<poHome>/sandbox-guards/<owner>/<id>`) and its review baseline.
///
/// [`guards::placeholders`]: crate::sandbox::folder::guards::placeholders
pub(crate) fn remove_token_files(po_home: &Path, owner: &str, workspace_id: &str) {
    let guard_dir = spec::guard_copies(po_home, owner, workspace_id);
    let placeholders = crate::sandbox::folder::guards::placeholders::take_away(&guard_dir);
    if !placeholders.is_empty() {
        tracing::info!(workspace = %workspace_id, ?placeholders, "guard placeholders taken away");
    }
    crate::sandbox::folder::guards::placeholders::clear_folder(&guard_dir);
    crate::sandbox::folder::review::remove_baseline(po_home, owner, workspace_id);
    let token = spec::token_file(po_home, owner, workspace_id);
    let _ = std::fs::remove_file(&token);
    let _ = std::fs::remove_file(crate::sandbox::on_engine::holder::record_path(&token));
    let spawner = crate::sandbox::on_engine::exec::spawner::record_path(&token);
    let _ = std::fs::remove_file(&spawner);
    let launch_lock = crate::sandbox::on_engine::exec::spawner::launch_lock_path(&spawner);
    crate::sandbox::folder::locks::remove_free_lock(&launch_lock);
    crate::sandbox::folder::locks::remove_free_lock(&token.with_extension("lock"));
}

/// Removes a broker socket folder: its `broker.sock` and `egress.sock` when they are sockets,
/// then the folder when it is a real directory left empty. Never follows a link; anything else is left alone.
pub(crate) fn remove_broker_folder(folder: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(folder) else {
        return;
    };
    if !meta.file_type().is_dir() {
        return;
    }
    // With the sockets of forwards whose holder was killed (a forward removes its own) and
    // of exec spawners (a container's stop kills them where they stand).
    let forwards = std::fs::read_dir(folder).into_iter().flatten().flatten();
    let forwards = forwards
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with(crate::relay::carrier::SOCKET_PREFIX)
                || n.starts_with(crate::sandbox::on_engine::exec::spawner::SOCKET_PREFIX)
                || (n.starts_with(crate::broker::registry::SOCKET_PREFIX) && n.ends_with(".sock"))
        });
    let names = [
        "broker.sock".to_string(),
        crate::broker::egress::EGRESS_SOCKET.into(),
    ];
    for name in names.into_iter().chain(forwards) {
        crate::sandbox::on_engine::exec::spawner::remove_socket(&folder.join(name));
    }
    let _ = std::fs::remove_dir(folder);
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// `po-sandbox stop` / `down`: the stopped workspace's token, record, start lock, broker
    /// folder and broker lock go; a lock a running hub holds stays (that hub removes it).
    #[tokio::test]
    async fn a_stop_without_a_hub_leaves_nothing_of_the_workspace_but_a_held_lock() {
        use crate::engine::model::{ContainerCreateBody, HostConfig, Mount};
        let engine = crate::engine::fake::FakeEngine::default();
        let home = tempfile::tempdir().unwrap();
        let sockets = home.path().join("s");
        let mut held = vec![];
        for ws in ["w1", "w2"] {
            let token = spec::token_file(home.path(), "o1", ws);
            std::fs::create_dir_all(token.parent().unwrap()).unwrap();
            for f in [
                token.clone(),
                token.with_extension("net"),
                token.with_extension("lock"),
                token.with_extension("exec"),
                token.with_extension("exec.lock"),
            ] {
                std::fs::write(f, "x").unwrap();
            }
            let folder = sockets.join(format!("o1-{ws}"));
            std::fs::create_dir_all(&folder).unwrap();
            let lock = folder.with_extension("lock");
            std::fs::write(&lock, "").unwrap();
            if ws == "w2" {
                held.push(crate::sandbox::folder::locks::HostLock::try_acquire(&lock).unwrap());
            }
            let body = ContainerCreateBody {
                labels: Some(HashMap::from([
                    (LABEL_SANDBOX.to_string(), "1".to_string()),
                    (LABEL_OWNER.to_string(), "o1".to_string()),
                    (LABEL_WORKSPACE.to_string(), ws.to_string()),
                ])),
                host_config: Some(HostConfig {
                    mounts: Some(vec![Mount {
                        source: Some(folder.to_string_lossy().into_owned()),
                        target: Some(crate::names::paths::BROKER_MOUNT.into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            };
            engine
                .state()
                .create(Some(&format!("po-o1-{ws}")), body)
                .unwrap();
        }
        let stopped = stop(
            &engine,
            &Default::default(),
            home.path(),
            "o1",
            None,
            false,
            false,
        )
        .await
        .unwrap();
        assert_eq!(stopped, ["w1", "w2"]);
        let tokens = spec::token_file(home.path(), "o1", "w1");
        assert_eq!(
            std::fs::read_dir(tokens.parent().unwrap()).unwrap().count(),
            0
        );
        let mut left: Vec<String> = std::fs::read_dir(&sockets)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["o1-w2.lock"], "held by a running hub");
        drop(held);
    }

    #[tokio::test]
    async fn volumes_go_with_remove_volumes_and_the_copy_only_with_a_discard() {
        use crate::engine::fake::FakeEngine;
        use crate::engine::model::VolumeCreateRequest;
        let engine = FakeEngine::default();
        let home = tempfile::tempdir().unwrap();
        for (name, copy) in [("po-o1-w-home", false), ("po-o1-w-copy", true)] {
            let mut labels = HashMap::from([
                (LABEL_OWNER.to_string(), "o1".to_string()),
                (LABEL_WORKSPACE.to_string(), "w".to_string()),
            ]);
            if copy {
                labels.insert(crate::sandbox::folder::clone::LABEL_COPY.into(), "1".into());
            }
            let request = VolumeCreateRequest {
                name: Some(name.into()),
                labels: Some(labels),
                ..Default::default()
            };
            engine.create_volume(request).await.unwrap();
        }
        let left = |e: &FakeEngine| e.state().volumes.keys().cloned().collect::<Vec<_>>();
        stop(
            &engine,
            &Default::default(),
            home.path(),
            "o1",
            Some("w"),
            true,
            false,
        )
        .await
        .unwrap();
        assert_eq!(left(&engine), ["po-o1-w-copy"]);
        stop(
            &engine,
            &Default::default(),
            home.path(),
            "o1",
            Some("w"),
            false,
            true,
        )
        .await
        .unwrap();
        assert!(left(&engine).is_empty());
    }

    #[test]
    fn a_broker_folder_loses_its_socket_and_itself_but_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("owner-abc");
        std::fs::create_dir(&folder).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(folder.join("broker.sock")).unwrap();
        // A killed forward's socket goes too.
        let _f = std::os::unix::net::UnixListener::bind(folder.join("fwd-0a1b.sock")).unwrap();
        remove_broker_folder(&folder);
        assert!(!folder.exists());

        // A folder with something else in it keeps it (and itself).
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("broker.sock"), "not a socket").unwrap();
        remove_broker_folder(&other);
        assert!(other.join("broker.sock").exists());

        // A link is not followed.
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let _t = std::os::unix::net::UnixListener::bind(target.join("broker.sock")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        remove_broker_folder(&link);
        assert!(target.join("broker.sock").exists() && link.exists());
    }
}
