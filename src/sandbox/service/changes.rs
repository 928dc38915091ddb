//! `diff` and `apply` of a clone-mode workspace's copy, on its running container: for a git
//! repository's copy, git run inside through the engine and (for `apply`) the work put on a
//! host branch; for a folder without git, the copy listed and its changed files read by `node`
//! inside, compared on the host with the host's record of what went into the copy, and (for
//! `apply`) written into the folder.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::{ContainerService, WorkspaceContainer};
use crate::engine::EngineApi;
use crate::error::{Error, Result};
use crate::sandbox::folder::clone::{
    self, ApplyRules, CloneApplied, CloneApplyOptions, CloneChanges, CloneDiff, Entry, Listing,
    Manifest, Planned,
};
use crate::sandbox::on_engine::exec::Deadline;

impl<E: EngineApi> ContainerService<E> {
    /// What the agent did in a clone-mode workspace's copy since it was made: `c` is its
    /// running container, adopted; `folder` the host folder it copies.
    pub async fn copy_diff(
        &self,
        c: &WorkspaceContainer,
        folder: &str,
        deadline: Deadline,
    ) -> Result<CloneDiff> {
        let id = &c.workspace_id;
        if let Some(manifest) = self.copy_manifest(id, folder) {
            return self.folder_diff(c, manifest, deadline).await;
        }
        let out = self
            .capture_adopted(c, clone::diff_command(), deadline)
            .await?;
        let parts = clone::answers(id, out.code, &out.stdout, &out.stderr, clone::DIFF_ANSWERS)?;
        Ok(clone::parse_diff(id, folder, parts))
    }

    /// Puts the agent's work in a clone-mode workspace's copy on a host branch (see
    /// [`clone::apply_work`]), or, for a folder without git, writes its changed files into
    /// `folder`; `branch` is checked already.
    pub async fn copy_apply(
        &self,
        c: &WorkspaceContainer,
        options: &CloneApplyOptions,
        folder: PathBuf,
        branch: String,
        deadline: Deadline,
    ) -> Result<CloneApplied> {
        let id = c.workspace_id.clone();
        if let Some(manifest) = self.copy_manifest(&id, &folder.to_string_lossy()) {
            return self.folder_apply(c, manifest, options, deadline).await;
        }
        let command = clone::apply_command(options.patch.is_some());
        let out = self.capture_adopted(c, command, deadline).await?;
        let parts = clone::answers(
            &id,
            out.code,
            &out.stdout,
            &out.stderr,
            clone::APPLY_ANSWERS,
        )?;
        let work = clone::parse_work(parts);
        let patch = options.patch.clone().map(PathBuf::from);
        tokio::task::spawn_blocking(move || {
            clone::apply_work(&id, &folder, &branch, work, patch.as_deref())
        })
        .await
        .map_err(|e| Error::container_caused("apply", "cannot apply", e))?
    }

    /// The host's record of the workspace's copy, when it is a folder without git's copy of
    /// `folder`.
    fn copy_manifest(&self, id: &str, folder: &str) -> Option<Manifest> {
        let s = &self.inner.config.container;
        let path = clone::manifest_path(&s.po_home, &s.owner, id);
        clone::read_manifest(&path).filter(|m| m.path == folder && m.workspace_id == id)
    }

    /// The copy's listing, by one exec.
    async fn listing(
        &self,
        c: &WorkspaceContainer,
        manifest: &Manifest,
        deadline: Deadline,
    ) -> Result<Listing> {
        let id = &c.workspace_id;
        let rules = manifest.rules();
        let out = self
            .capture_adopted(c, clone::list_command(&rules), deadline)
            .await?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.code != 0 {
            let why = format!("cannot list its copy (exit {}): {}", out.code, err.trim());
            return Err(Error::container(id, why));
        }
        clone::parse_listing(&out.stdout, &rules).map_err(|why| Error::container(id, why))
    }

    /// The copy's files and links at `paths`, as they are now (one exec per command-line's worth).
    async fn fetch(
        &self,
        c: &WorkspaceContainer,
        paths: &[&str],
        deadline: Deadline,
    ) -> Result<HashMap<String, (Entry, Vec<u8>)>> {
        let mut got = HashMap::new();
        for command in clone::fetch_commands(paths) {
            let batch: Vec<&str> = command[3..].iter().map(String::as_str).collect();
            let out = self.capture_adopted(c, command.clone(), deadline).await?;
            let files = clone::parse_fetched(&batch, &out.stdout)
                .filter(|_| out.code == 0)
                .ok_or_else(|| {
                    let err = String::from_utf8_lossy(&out.stderr);
                    let why = format!("cannot read its copy (exit {}): {}", out.code, err.trim());
                    Error::container(&c.workspace_id, why)
                })?;
            got.extend(files.into_iter().filter_map(|(p, e)| e.map(|e| (p, e))));
        }
        Ok(got)
    }

    /// The plan of the copy's changes against the manifest and the host (off the async threads).
    async fn folder_plan(
        manifest: Manifest,
        listing: Arc<Listing>,
        rules: ApplyRules,
    ) -> Result<Vec<Planned>> {
        let id = manifest.workspace_id.clone();
        tokio::task::spawn_blocking(move || {
            let folder = PathBuf::from(&manifest.path);
            clone::plan(&folder, &manifest.entries, &listing, &rules).map_err(|e| {
                Error::ApplyRefused {
                    folder: manifest.path.clone(),
                    reason: format!("the folder cannot be read: {e}"),
                }
            })
        })
        .await
        .map_err(|e| Error::container_caused(&id, "cannot compare its copy", e))?
    }

    /// `diff` of a folder copy.
    async fn folder_diff(
        &self,
        c: &WorkspaceContainer,
        manifest: Manifest,
        deadline: Deadline,
    ) -> Result<CloneDiff> {
        // What an interrupted apply left aside goes first (the diff compares the folder).
        let s = &self.inner.config.container;
        let manifest_file = clone::manifest_path(&s.po_home, &s.owner, &manifest.workspace_id);
        let journal = clone::journal_path(&manifest_file);
        let _ = tokio::task::spawn_blocking(move || clone::sweep_asides(&journal)).await;
        let listing = Arc::new(self.listing(c, &manifest, deadline).await?);
        let (id, path) = (manifest.workspace_id.clone(), manifest.path.clone());
        let rules = ApplyRules {
            guarded: self.inner.config.container.guarded_paths.clone(),
            ..ApplyRules::default()
        };
        let planned = Self::folder_plan(manifest, listing.clone(), rules).await?;
        let bytes = self
            .fetch(c, &clone::diff_fetch(&planned, &listing), deadline)
            .await?;
        let (patch, stat) = clone::patch_of(&planned, &|p| bytes.get(p).map(|(_, b)| b.clone()));
        Ok(CloneDiff {
            workspace_id: id,
            kind: "folder".into(),
            path,
            base: None,
            head: None,
            commits: Vec::new(),
            committed: CloneChanges::default(),
            uncommitted: CloneChanges {
                files: planned.iter().map(clone::file_of).collect(),
                stat,
                patch,
            },
        })
    }

    /// `apply` of a folder copy: nothing without `yes`; see [`clone::decide`].
    async fn folder_apply(
        &self,
        c: &WorkspaceContainer,
        manifest: Manifest,
        options: &CloneApplyOptions,
        deadline: Deadline,
    ) -> Result<CloneApplied> {
        if let Some(option) = [("branch", &options.branch), ("patch", &options.patch)]
            .iter()
            .find_map(|(name, v)| v.is_some().then_some(*name))
        {
            return Err(Error::OptionsInvalid {
                option: option.into(),
                reason: "is for a git repository's copy; a folder without git gets its changed \
                         files written into the folder (with --yes)"
                    .into(),
            });
        }
        let yes = options.yes == Some(true);
        let rules = ApplyRules {
            yes,
            include_executable: options.include_executable == Some(true),
            guarded: self.inner.config.container.guarded_paths.clone(),
        };
        let listing = Arc::new(self.listing(c, &manifest, deadline).await?);
        let (id, path) = (manifest.workspace_id.clone(), manifest.path.clone());
        let mut planned = Self::folder_plan(manifest, listing.clone(), rules).await?;
        let wanted = clone::apply_fetch(&mut planned, &listing);
        let fetched = self.fetch(c, &wanted, deadline).await?;
        let folder = PathBuf::from(&path);
        let s = &self.inner.config.container;
        let manifest_file = clone::manifest_path(&s.po_home, &s.owner, &id);
        let journal = clone::journal_path(&manifest_file);
        let planned = tokio::task::spawn_blocking(move || {
            clone::write(&folder, &mut planned, &fetched, &journal).map(|()| planned)
        })
        .await
        .map_err(|e| Error::container_caused(&id, "cannot apply", e))?
        .map_err(|e| Error::ApplyRefused {
            folder: path.clone(),
            reason: format!("the folder cannot be written: {e}"),
        })?;
        let changed = planned.iter().any(|p| {
            matches!(
                p.outcome,
                clone::CloneOutcome::Written | clone::CloneOutcome::Removed
            )
        });
        Ok(CloneApplied {
            workspace_id: id,
            kind: "folder".into(),
            message: clone::message(&planned, yes),
            files: planned.iter().map(clone::file_of).collect(),
            path,
            branch: None,
            previous: None,
            tip: None,
            changed,
            uncommitted_commit: None,
            patch: None,
        })
    }
}
