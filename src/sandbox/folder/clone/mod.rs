//! Clone mode: the workspace's container works on a copy of the host folder in a named volume
//! of its own, filled once through the engine (an archive upload, never a host bind), so
//! nothing the agent writes reaches the host. This module owns the mode, the copy volume's
//! name and labels, what goes into the copy ([`source`]) and how it gets there ([`fill`]), the
//! agent's work in a git repository's copy ([`work`], [`apply`]) and in a folder without git's
//! ([`manifest`], [`folder`], [`hostfs`]).

mod apply;
mod folder;
mod hostfs;
mod ignore;
mod manifest;
mod source;
mod work;

pub use apply::{CloneApplied, CloneApplyOptions, apply_work, check_branch, default_branch};
#[cfg(all(test, unix))]
pub use folder::Journal;
#[cfg(test)]
pub use folder::decide;
pub use folder::{
    ApplyRules, CloneOutcome, Planned, apply_fetch, diff_fetch, file_of, guarded, journal_path,
    message, patch_of, plan, sweep_asides, write,
};
#[cfg(test)]
pub use manifest::{Change, check_path, compare, ignored_path, link_escapes};
pub use manifest::{
    Entry, Listing, Manifest, fetch_commands, list_command, manifest_path, parse_fetched,
    parse_listing, read_manifest, remove_manifests, write_manifest,
};
#[cfg(test)]
pub use source::NO_REMOTE;
pub use source::{PreparedCopy, prepare, private_temp_dir};
#[cfg(test)]
pub use work::files_of;
pub use work::{
    APPLY_ANSWERS, BASE_REF, CloneChanges, CloneDiff, CloneFile, DIFF_ANSWERS, answers,
    apply_command, diff_command, parse_diff, parse_work, unframe,
};

use crate::error::{Error, Result};
use crate::names::vars::WORKSPACE_MODE_VAR;

/// Label: on a clone-mode container, its workspace mode (`clone`; absent: `bind`).
pub const LABEL_WORKSPACE_MODE: &str = "po.workspace-mode";
/// Label: marks a workspace's copy volume. `stop`, `onCleanStop`, `down --volumes` and
/// `prune --volumes` keep it; only a discard (`down --discard`) removes it.
pub const LABEL_COPY: &str = "po.workspace-copy";

/// How a workspace's folder reaches its container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum WorkspaceMode {
    /// The host folder is mounted read-write (guarded paths read-only): changes are live.
    #[default]
    Bind,
    /// The container works on a copy in a volume of its own; the host folder is not mounted.
    Clone,
}

impl WorkspaceMode {
    /// The word the option, the variable and the label use.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceMode::Bind => "bind",
            WorkspaceMode::Clone => "clone",
        }
    }

    /// `value` as a mode; `OPTIONS_INVALID` naming `option` otherwise.
    pub fn parse(value: &str, option: &str) -> Result<WorkspaceMode> {
        match value.trim() {
            "bind" => Ok(WorkspaceMode::Bind),
            "clone" => Ok(WorkspaceMode::Clone),
            other => Err(Error::OptionsInvalid {
                option: option.into(),
                reason: format!(
                    "{other:?} is not a workspace mode; use 'bind' (the host folder, live) or \
                     'clone' (a copy in a volume of its own)"
                ),
            }),
        }
    }

    /// The `workspaceMode` option, else [`WORKSPACE_MODE_VAR`] (blank: unset), else `bind`.
    pub fn resolve(option: Option<&str>, var: Option<&str>) -> Result<WorkspaceMode> {
        match (option, var.filter(|v| !v.trim().is_empty())) {
            (Some(v), _) => WorkspaceMode::parse(v, "workspaceMode"),
            (None, Some(v)) => WorkspaceMode::parse(v, WORKSPACE_MODE_VAR),
            (None, None) => Ok(WorkspaceMode::Bind),
        }
    }

    /// The mode a container's labels say it was made in.
    pub fn of_labels(labels: &std::collections::HashMap<String, String>) -> WorkspaceMode {
        match labels.get(LABEL_WORKSPACE_MODE).map(String::as_str) {
            Some("clone") => WorkspaceMode::Clone,
            _ => WorkspaceMode::Bind,
        }
    }
}

/// The copy volume of a workspace in clone mode: `po-<owner>-<workspace>-copy`.
pub fn copy_volume_name(owner: &str, workspace_id: &str) -> String {
    format!("po-{owner}-{workspace_id}-copy")
}

#[cfg(test)]
mod folder_tests;
#[cfg(test)]
mod tests;
