//! Filling a workspace's copy volume: once, when the volume is new, by uploading the prepared
//! tar into the created (not yet started) container's workspace path through the engine.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::engine::api::EngineApi;
use crate::engine::{Operation, Resource};
use crate::error::{Error, Result};
use crate::host::UserIds;
use crate::sandbox::blueprint::spec::{LABEL_OWNER, LABEL_WORKSPACE};
use crate::sandbox::folder::clone::{self, LABEL_COPY, PreparedCopy};
use crate::sandbox::on_engine::container::engine_err;

/// Whether the workspace's copy volume exists already (then it holds the agent's work and is
/// never filled again).
pub async fn copy_exists(
    engine: &impl EngineApi,
    owner: &str,
    workspace_id: &str,
    name: &str,
) -> Result<bool> {
    let copy = format!("{LABEL_COPY}=1");
    let names = volumes_of(engine, owner, workspace_id, Some(copy)).await?;
    Ok(names.iter().any(|n| n == name))
}

/// The names of the workspace's volumes (labelled with the owner and workspace, and `label`
/// when given).
pub async fn volumes_of(
    engine: &impl EngineApi,
    owner: &str,
    workspace_id: &str,
    label: Option<String>,
) -> Result<Vec<String>> {
    let mut labels = vec![
        format!("{LABEL_OWNER}={owner}"),
        format!("{LABEL_WORKSPACE}={workspace_id}"),
    ];
    labels.extend(label);
    let filters = HashMap::from([("label".to_string(), labels)]);
    let listed = engine
        .list_volumes(filters)
        .await
        .map_err(engine_err(engine, Operation::List(Resource::Volume)))?;
    Ok(listed.into_iter().map(|(n, _)| n).collect())
}

/// Prepares the copy of `folder` on the host (off the async threads).
pub async fn prepare_copy(
    workspace_id: &str,
    folder: PathBuf,
    user: UserIds,
) -> Result<PreparedCopy> {
    let started = std::time::Instant::now();
    let copy = tokio::task::spawn_blocking(move || clone::prepare(&folder, user))
        .await
        .map_err(|e| Error::container_caused(workspace_id, "cannot prepare its copy", e))?
        .map_err(|e| Error::container_caused(workspace_id, "cannot prepare its copy", e))?;
    tracing::debug!(
        workspace = workspace_id,
        entries = copy.entries,
        git = copy.git,
        ms = started.elapsed().as_millis() as u64,
        "copy prepared"
    );
    Ok(copy)
}

/// Uploads the prepared copy into `target` of the created container `container`.
pub async fn upload_copy(
    engine: &impl EngineApi,
    workspace_id: &str,
    container: &str,
    target: &str,
    copy: &PreparedCopy,
) -> Result<()> {
    engine
        .upload_archive(container, target, copy.tar.clone())
        .await
        .map_err(|e| Error::container_caused(workspace_id, "cannot fill its copy volume", e))
}

/// Records on the host what went into a folder without git's copy (its manifest, the base of
/// `diff` and `apply`), once the copy is uploaded; for a git repository's copy, removes any
/// older record (of a folder that had no git then).
pub fn record_copy(
    po_home: &std::path::Path,
    owner: &str,
    workspace_id: &str,
    copy: &PreparedCopy,
) -> Result<()> {
    let Some(manifest) = &copy.manifest else {
        clone::remove_manifests(po_home, owner, Some(workspace_id));
        return Ok(());
    };
    let mut manifest = manifest.clone();
    manifest.workspace_id = workspace_id.into();
    let path = clone::manifest_path(po_home, owner, workspace_id);
    clone::write_manifest(&path, &manifest).map_err(|e| {
        Error::container_caused(
            workspace_id,
            format_args!("cannot record its copy in {}", path.display()),
            e,
        )
    })
}
