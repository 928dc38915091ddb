//! Whether a workspace folder's names are looked up without regard to case (macOS's APFS and
//! Windows' NTFS by default, an ext4 `casefold` folder, a FUSE or virtiofs share of one). A
//! read-only bind mount guards the name it is mounted on, and only that name where the folder's
//! file system, not the kernel's own lookup, folds case: the agent's `.VSCODE/tasks.json` then
//! lands in the guarded `.vscode`. Bind mode refuses such a folder unless the person accepts it.

use std::path::Path;

use crate::error::{Error, Result};
use crate::names::vars::CASE_INSENSITIVE_BIND_VAR;

/// Whether `folder` looks names up without regard to case: an entry of it with a letter, looked
/// up in the other case, is the same file; in a folder with no such entry, a probe file made and
/// removed at once is.
pub fn case_insensitive(folder: &Path) -> bool {
    let named = std::fs::read_dir(folder).ok().and_then(|entries| {
        entries.flatten().take(256).find_map(|e| {
            e.file_name()
                .to_str()
                .and_then(swapped)
                .map(|s| (e.path(), s))
        })
    });
    if let Some((entry, other)) = named {
        return same_file(&entry, &folder.join(other));
    }
    let mut random = [0u8; 6];
    if getrandom::fill(&mut random).is_err() {
        return false;
    }
    let name = format!(".po-sandbox-case-probe-{}", hex::encode(random));
    let probe = folder.join(&name);
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    if open.open(&probe).is_err() {
        return false;
    }
    let insensitive = same_file(&probe, &folder.join(name.to_ascii_uppercase()));
    let _ = std::fs::remove_file(&probe);
    insensitive
}

/// Refuses a bind-mode workspace on a case-insensitive folder unless the host accepts it
/// (`PO_SANDBOX_CASE_INSENSITIVE_BIND=accept`).
pub fn check_bind(
    folder: &Path,
    host_env: &std::collections::HashMap<String, String>,
) -> Result<()> {
    let accepted = match host_env.get(CASE_INSENSITIVE_BIND_VAR).map(|v| v.trim()) {
        None | Some("") => false,
        Some("accept") => true,
        Some(other) => {
            return Err(Error::OptionsInvalid {
                option: CASE_INSENSITIVE_BIND_VAR.into(),
                reason: format!(
                    "'{other}' is not 'accept'; unset it to refuse bind mode on a case-insensitive folder"
                ),
            });
        }
    };
    if accepted || !case_insensitive(folder) {
        return Ok(());
    }
    Err(Error::WorkspaceInvalid {
        what: format!("folder {}", folder.display()),
        reason: format!(
            "it is on a case-insensitive file system, where the read-only guards of bind mode hold only for the case they name (the agent's .VSCODE/tasks.json would land in the guarded .vscode, .GIT/hooks in .git/hooks); bring it up in clone mode (po-sandbox up --clone, workspaceMode 'clone', or PO_SANDBOX_WORKSPACE_MODE=clone), or set {CASE_INSENSITIVE_BIND_VAR}=accept on the host to share it anyway"
        ),
    })
}

/// `name` with the case of its ASCII letters swapped; `None` when it has none.
fn swapped(name: &str) -> Option<String> {
    let other: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' => c.to_ascii_uppercase(),
            'A'..='Z' => c.to_ascii_lowercase(),
            c => c,
        })
        .collect();
    (other != name).then_some(other)
}

/// Whether `a` and `b` name one file (not through a link).
fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(x), Ok(y)) = (std::fs::symlink_metadata(a), std::fs::symlink_metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        x.dev() == y.dev() && x.ino() == y.ino()
    }
    #[cfg(not(unix))]
    {
        // No stable file identity in std elsewhere: another case that exists is the same file
        // on the case-insensitive file systems these hosts have.
        let _ = (x, y);
        true
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_case_sensitive_folder_is_told_apart_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!case_insensitive(dir.path()), "an empty folder: the probe");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the probe is removed"
        );
        std::fs::write(dir.path().join("Readme"), "").unwrap();
        std::fs::write(dir.path().join("rEADME"), "").unwrap();
        assert!(
            !case_insensitive(dir.path()),
            "two files that differ in case"
        );
        check_bind(dir.path(), &Default::default()).unwrap();
        let bad = [(CASE_INSENSITIVE_BIND_VAR.to_string(), "yes".to_string())].into();
        assert_eq!(
            check_bind(dir.path(), &bad).unwrap_err().code(),
            "OPTIONS_INVALID"
        );
        assert_eq!(swapped("a1.B"), Some("A1.b".into()));
        assert_eq!(swapped("123_"), None);
    }
}
