//! Workspace identity: a checked id (see `names::ids`), a folder that exists, and the sandbox
//! folder P = `<poHome>/sandboxes/<id>`. Checked before any other I/O.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
// Where the lifecycle and the options check ids; the check itself is a leaf.
pub use crate::names::ids::check_id;

/// A workspace the layer may sandbox: a checked id and a canonical folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// A single safe path segment.
    pub id: String,
    /// The workspace folder, canonicalised (links resolved).
    pub path: PathBuf,
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

/// The longest folder-name part of an id made by [`for_folder`].
const FOLDER_ID_NAME_LEN: usize = 40;

/// The workspace for a folder outside Po (`po-sandbox up [dir]`): the folder canonicalised, and
/// a stable id from it, `<name>-<12 hex of sha256(canonical path)>`, where name is the folder's
/// own name with every character outside `[A-Za-z0-9._-]` as `-`, leading dots dropped and cut
/// to 40 (`folder` when nothing is left). The same folder always gets the same id; two folders
/// with one name get different ones.
pub fn for_folder(path: &str) -> Result<Workspace> {
    let p = Path::new(path);
    let invalid = |reason: String| Error::WorkspaceInvalid {
        what: format!("folder {path:?}"),
        reason,
    };
    let canonical = std::fs::canonicalize(p).map_err(|e| {
        invalid(format!(
            "it cannot be resolved ({e}); give an existing folder"
        ))
    })?;
    let id = folder_id(&canonical);
    resolve(&id, &canonical.to_string_lossy())
}

/// The id [`for_folder`] gives a canonical folder path (pure).
pub fn folder_id(canonical: &Path) -> String {
    use sha2::Digest;
    let raw = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut name: String = cleaned
        .trim_start_matches('.')
        .chars()
        .take(FOLDER_ID_NAME_LEN)
        .collect();
    if name.is_empty() {
        name = "folder".into();
    }
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    format!("{name}-{}", &hex::encode(digest)[..12])
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

#[cfg(all(test, unix))]
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
    fn folder_ids_are_stable_safe_segments() {
        let cases: [(&str, &str); 7] = [
            ("/home/ann/my-project", "my-project-"),
            ("/srv/Web App (old)", "Web-App--old--"),
            ("/x/.hidden", "hidden-"),
            ("/x/...", "folder-"),
            ("/", "folder-"),
            ("/x/caf\u{e9}", "caf--"),
            ("/x/a.b_c-d", "a.b_c-d-"),
        ];
        for (path, prefix) in cases {
            let id = folder_id(Path::new(path));
            assert!(id.starts_with(prefix), "{path}: {id}");
            assert_eq!(id.len(), prefix.len() + 12, "{path}: {id}");
            check_id(&id).unwrap_or_else(|e| panic!("{path}: {id}: {e}"));
            assert_eq!(id, folder_id(Path::new(path)), "stable");
        }
        let long = format!("/x/{}", "n".repeat(300));
        let id = folder_id(Path::new(&long));
        assert_eq!(id.len(), FOLDER_ID_NAME_LEN + 13);
        assert_ne!(
            folder_id(Path::new("/a/app")),
            folder_id(Path::new("/b/app")),
            "one name in two places gets two ids"
        );
    }

    #[test]
    fn for_folder_canonicalises_and_refuses_missing() {
        let dir = tempfile::tempdir().unwrap();
        let ws = for_folder(&dir.path().to_string_lossy()).unwrap();
        assert_eq!(ws.path, std::fs::canonicalize(dir.path()).unwrap());
        assert_eq!(ws.id, folder_id(&ws.path));
        let missing = dir.path().join("nope");
        let e = for_folder(&missing.to_string_lossy()).unwrap_err();
        assert_eq!(e.code(), "WORKSPACE_INVALID");
        assert!(e.to_string().contains("nope"), "{e}");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(
            for_folder(&file.to_string_lossy()).unwrap_err().code(),
            "WORKSPACE_INVALID"
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
