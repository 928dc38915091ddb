//! Workspace identity: ids that are single safe path segments, paths that exist, and the
//! sandbox folder P = `<poHome>/sandboxes/<id>`. Checked before any other I/O.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The longest workspace id accepted.
pub const MAX_ID_LEN: usize = 128;

/// A workspace the layer may sandbox: a checked id and a canonical folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// A single safe path segment.
    pub id: String,
    /// The workspace folder, canonicalised (links resolved).
    pub path: PathBuf,
}

/// Checks a workspace id: 1–128 of `[A-Za-z0-9._-]`, not starting with `.` (so never `.`,
/// `..` or a hidden name) — a single path segment that is also valid in container names.
pub fn check_id(id: &str) -> Result<()> {
    let invalid = |reason: String| {
        Err(Error::WorkspaceInvalid {
            what: format!("id {id:?}"),
            reason,
        })
    };
    if id.is_empty() {
        return invalid("it is empty; use a name like 'my-project'".into());
    }
    if id.len() > MAX_ID_LEN {
        return invalid(format!(
            "it is {} bytes long; the limit is {MAX_ID_LEN}",
            id.len()
        ));
    }
    if id.starts_with('.') {
        return invalid("it starts with '.'; ids are plain folder names like 'my-project'".into());
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!(
            "it contains {c:?}; ids are single path segments of letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Checks an id and a folder: the folder must be absolute, exist and be a directory; it is
/// canonicalised.
pub fn resolve(id: &str, path: &str) -> Result<Workspace> {
    check_id(id)?;
    let invalid = |reason: String| Error::WorkspaceInvalid {
        what: format!("path {path:?} (workspace '{id}')"),
        reason,
    };
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(invalid(
            "it is not absolute; give the workspace folder's full path".into(),
        ));
    }
    let canonical = std::fs::canonicalize(p).map_err(|e| {
        invalid(format!(
            "it cannot be resolved ({e}); create the folder first"
        ))
    })?;
    if !canonical.is_dir() {
        return Err(invalid("it is not a folder".into()));
    }
    let s = canonical.to_string_lossy();
    if s.contains(':') || s.contains(',') {
        return Err(invalid("its path contains ':' or ',', which container bind mounts cannot carry; move or link it elsewhere".into()));
    }
    Ok(Workspace {
        id: id.to_string(),
        path: canonical,
    })
}

/// Checks the Po home: absolute, no `..`.
pub fn check_po_home(po_home: &Path) -> Result<()> {
    if !po_home.is_absolute()
        || po_home
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Error::OptionsInvalid {
            option: "poHome".into(),
            reason: format!(
                "{} is not an absolute path without '..'; give the full path (default ~/.po)",
                po_home.display()
            ),
        });
    }
    Ok(())
}

/// P: the workspace's sandbox folder on the host, `<poHome>/sandboxes/<id>`.
pub fn sandbox_dir(po_home: &Path, id: &str) -> PathBuf {
    po_home.join("sandboxes").join(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["a", "my-project", "Proj_1.2", &"x".repeat(128)] {
            check_id(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            ".hidden",
            "a b",
            "é",
            "a:b",
            &"x".repeat(300),
            "a\0b",
        ] {
            let err = check_id(bad).unwrap_err();
            assert_eq!(err.code(), "WORKSPACE_INVALID", "{bad:?}");
        }
    }

    #[test]
    fn paths_are_checked_and_canonicalised() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let ws = resolve("w", dir.path().join("link").to_str().unwrap()).unwrap();
        assert_eq!(ws.path, std::fs::canonicalize(&real).unwrap());
        std::fs::write(dir.path().join("file"), "").unwrap();
        for bad in [
            "relative/path",
            dir.path().join("missing").to_str().unwrap(),
            dir.path().join("file").to_str().unwrap(),
        ] {
            assert_eq!(
                resolve("w", bad).unwrap_err().code(),
                "WORKSPACE_INVALID",
                "{bad}"
            );
        }
        // A bad id fails before the path is looked at.
        assert!(
            resolve("../x", "/nonexistent")
                .unwrap_err()
                .to_string()
                .contains("id")
        );
    }

    #[test]
    fn po_home_must_be_absolute() {
        assert!(check_po_home(Path::new("/home/u/.po")).is_ok());
        assert_eq!(
            check_po_home(Path::new(".po")).unwrap_err().code(),
            "OPTIONS_INVALID"
        );
        assert!(check_po_home(Path::new("/home/../etc")).is_err());
    }
}
