//! `po-sandbox prune`: the per-hub networks no container uses and, when asked, the volumes of
//! workspaces whose container and folder are both gone, of every owner (or of one).

use std::collections::HashSet;
use std::time::Duration;

use crate::engine::EngineError;
use crate::engine::api::EngineApi;
use crate::engine::{Operation, Resource};
use crate::error::Result;
use crate::sandbox::blueprint::spec::{
    LABEL_OWNER, LABEL_SANDBOX, LABEL_WORKSPACE, LABEL_WORKSPACE_PATH,
};
use crate::sandbox::on_engine::container::{self, engine_err};
use crate::sandbox::on_engine::network;

/// What `prune` asks.
#[derive(Debug, Clone, Copy)]
pub struct PruneAsk<'a> {
    /// Only this owner's networks and volumes; every owner's when `None`.
    pub owner: Option<&'a str>,
    /// Also the volumes of workspaces whose container and folder are both gone.
    pub volumes: bool,
    /// List only, remove nothing.
    pub dry_run: bool,
    /// Unused networks younger than this stay (see [`network::PRUNE_GRACE`]).
    pub grace: Duration,
}

/// What `prune` removed (or, on a dry run, would remove).
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneReport {
    /// Per-hub networks no container uses, by name.
    pub networks: Vec<String>,
    /// Volumes of workspaces whose container and folder are gone (only with `volumes`).
    pub volumes: Vec<String>,
    /// Nothing was removed: these are what a prune would remove.
    pub dry_run: bool,
}

/// Prunes as `ask` says (networks first, then volumes).
pub async fn prune(engine: &impl EngineApi, ask: PruneAsk<'_>) -> Result<PruneReport> {
    let networks = network::prune(engine, ask.owner, ask.grace, ask.dry_run).await?;
    let volumes = match ask.volumes {
        true => orphan_volumes(engine, ask.owner, ask.dry_run).await?,
        false => vec![],
    };
    Ok(PruneReport {
        networks,
        volumes,
        dry_run: ask.dry_run,
    })
}

/// The sandbox volumes whose (owner, workspace) has no container in any state and whose
/// workspace folder (their `po.workspace-path` label) does not exist here, removed unless
/// `dry_run`; never a copy volume. A volume without that label (made before it was added) is kept: its folder is
/// unknown. Returns their names, sorted.
async fn orphan_volumes(
    engine: &impl EngineApi,
    owner: Option<&str>,
    dry_run: bool,
) -> Result<Vec<String>> {
    let mut labels = vec![format!("{LABEL_SANDBOX}=1")];
    labels.extend(owner.map(|o| format!("{LABEL_OWNER}={o}")));
    let containers = container::list_labelled(engine, labels.clone()).await?;
    let with_container: HashSet<(String, String)> = containers
        .iter()
        .filter_map(|c| {
            let l = c.labels.as_ref()?;
            Some((l.get(LABEL_OWNER)?.clone(), l.get(LABEL_WORKSPACE)?.clone()))
        })
        .collect();
    let filters = std::collections::HashMap::from([("label".to_string(), labels)]);
    let listed = engine
        .list_volumes(filters)
        .await
        .map_err(engine_err(engine, Operation::List(Resource::Volume)))?;
    let mut orphans = Vec::new();
    for (name, l) in listed {
        let (Some(o), Some(w), Some(path)) = (
            l.get(LABEL_OWNER),
            l.get(LABEL_WORKSPACE),
            l.get(LABEL_WORKSPACE_PATH),
        ) else {
            continue;
        };
        // A copy (clone mode) may hold work nobody took yet: only a discard removes it.
        if l.contains_key(crate::sandbox::folder::clone::LABEL_COPY) {
            continue;
        }
        let folder_gone = std::fs::symlink_metadata(path)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        if with_container.contains(&(o.clone(), w.clone())) || !folder_gone {
            continue;
        }
        if !dry_run {
            match engine.remove_volume(&name).await {
                Ok(()) => {}
                Err(EngineError::NotFound(_)) => continue,
                // In use by a container made meanwhile, or refused: kept.
                Err(e) => {
                    tracing::debug!(volume = %name, error = %e, "volume kept");
                    continue;
                }
            }
        }
        orphans.push(name);
    }
    orphans.sort();
    Ok(orphans)
}

/// The grace of `prune` from `PO_SANDBOX_PRUNE_GRACE_MS` (0 to a day), else
/// [`network::PRUNE_GRACE`].
pub fn grace(value: Option<&str>) -> Result<Duration> {
    let Some(raw) = value else {
        return Ok(network::PRUNE_GRACE);
    };
    match raw.trim().parse::<u64>() {
        Ok(ms) if ms <= 86_400_000 => Ok(Duration::from_millis(ms)),
        _ => Err(crate::error::Error::OptionsInvalid {
            option: crate::names::vars::PRUNE_GRACE_VAR.into(),
            reason: format!(
                "'{raw}' is not a whole number of milliseconds from 0 to 86400000; unset it to use {}",
                network::PRUNE_GRACE.as_millis()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fake::FakeEngine;
    use crate::engine::model::{ContainerCreateBody, VolumeCreateRequest};
    use std::collections::HashMap;

    async fn volume(engine: &FakeEngine, name: &str, owner: &str, ws: &str, path: Option<&str>) {
        let mut labels = HashMap::from([
            (LABEL_SANDBOX.to_string(), "1".to_string()),
            (LABEL_OWNER.to_string(), owner.to_string()),
            (LABEL_WORKSPACE.to_string(), ws.to_string()),
        ]);
        if let Some(p) = path {
            labels.insert(LABEL_WORKSPACE_PATH.to_string(), p.to_string());
        }
        engine
            .create_volume(VolumeCreateRequest {
                name: Some(name.into()),
                labels: Some(labels),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn volumes_go_only_when_container_and_folder_are_both_gone() {
        let engine = FakeEngine::default();
        let here = tempfile::tempdir().unwrap();
        let here = here.path().to_str().unwrap();
        volume(
            &engine,
            "gone-home",
            "o1",
            "gone",
            Some("/nonexistent/po-gone"),
        )
        .await;
        volume(&engine, "kept-folder", "o1", "kept", Some(here)).await;
        volume(
            &engine,
            "gone-copy",
            "o1",
            "gone",
            Some("/nonexistent/po-gone"),
        )
        .await;
        engine
            .state()
            .volumes
            .get_mut("gone-copy")
            .unwrap()
            .insert(crate::sandbox::folder::clone::LABEL_COPY.into(), "1".into());
        volume(&engine, "kept-unknown", "o1", "old", None).await;
        volume(
            &engine,
            "kept-container",
            "o1",
            "run",
            Some("/nonexistent/po-run"),
        )
        .await;
        volume(
            &engine,
            "other-owner",
            "o2",
            "gone",
            Some("/nonexistent/po-gone"),
        )
        .await;
        let body = ContainerCreateBody {
            labels: Some(HashMap::from([
                (LABEL_SANDBOX.to_string(), "1".to_string()),
                (LABEL_OWNER.to_string(), "o1".to_string()),
                (LABEL_WORKSPACE.to_string(), "run".to_string()),
            ])),
            ..Default::default()
        };
        engine.state().create(Some("c-run"), body).unwrap();
        let ask = PruneAsk {
            owner: Some("o1"),
            volumes: true,
            dry_run: true,
            grace: Duration::ZERO,
        };
        let dry = prune(&engine, ask).await.unwrap();
        assert_eq!(dry.volumes, ["gone-home"]);
        assert!(dry.dry_run);
        assert_eq!(engine.state().volumes.len(), 6);
        let all = PruneAsk {
            owner: None,
            dry_run: false,
            ..ask
        };
        let done = prune(&engine, all).await.unwrap();
        assert_eq!(done.volumes, ["gone-home", "other-owner"]);
        let left: Vec<String> = engine.state().volumes.keys().cloned().collect();
        // A copy may hold work nobody took: only a discard removes it.
        assert_eq!(
            left,
            ["gone-copy", "kept-container", "kept-folder", "kept-unknown"]
        );
        let none = PruneAsk {
            volumes: false,
            ..all
        };
        assert!(prune(&engine, none).await.unwrap().volumes.is_empty());
    }

    #[test]
    fn the_grace_comes_from_its_variable() {
        assert_eq!(grace(None).unwrap(), network::PRUNE_GRACE);
        assert_eq!(grace(Some("0")).unwrap(), Duration::ZERO);
        assert_eq!(grace(Some("1500")).unwrap(), Duration::from_millis(1500));
        let e = grace(Some("soon")).unwrap_err();
        assert_eq!(e.code(), "OPTIONS_INVALID");
        assert!(e.to_string().contains("PO_SANDBOX_PRUNE_GRACE_MS"), "{e}");
    }
}
