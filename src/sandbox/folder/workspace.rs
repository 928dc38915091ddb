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
    /// Its own workspace mode (a workspace entry's `mode`); `None`: the hub's default.
    pub mode: Option<crate::sandbox::folder::clone::WorkspaceMode>,
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
        mode: None,
    })
}

/// As [`resolve`], with the workspace's own mode (`bind` or `clone`) when given.
pub fn resolve_with_mode(id: &str, path: &str, mode: Option<String>) -> Result<Workspace> {
    use crate::sandbox::folder::clone::WorkspaceMode;
    let mode = mode
        .map(|m| WorkspaceMode::parse(&m, "workspace.mode"))
        .transpose()?;
    Ok(Workspace {
        mode,
        ..resolve(id, path)?
    })
}

/// Folders of the host that a workspace must not be or contain, and Po's own folders, which a
/// workspace must not overlap either way: mounted read-write, they would let the agent change
/// what runs or is trusted on the host.
#[derive(Debug, Clone, Default)]
pub struct Fences {
    /// The person's home folder.
    pub home: Option<PathBuf>,
    /// Po's own folders, each with what it is called in messages.
    pub own: Vec<(&'static str, PathBuf)>,
}

impl Fences {
    /// The fences of a hub: the home folder from the host's `HOME` (`USERPROFILE` on
    /// Windows), the Po home and, when the broker runs, its socket folder; each canonicalised
    /// when it exists (the workspace's path is).
    pub fn of(
        vars: &std::collections::HashMap<String, String>,
        po_home: &Path,
        socket_root: Option<&Path>,
    ) -> Fences {
        let mut own = vec![("the Po home", real(po_home))];
        own.extend(socket_root.map(|s| ("the broker socket folder", real(s))));
        Fences {
            home: home_of(vars),
            own,
        }
    }
}

/// The home folder the variables name (`HOME`, else `USERPROFILE`), when absolute; canonical.
fn home_of(vars: &std::collections::HashMap<String, String>) -> Option<PathBuf> {
    ["HOME", "USERPROFILE"]
        .iter()
        .find_map(|k| vars.get(*k).filter(|v| Path::new(v).is_absolute()))
        .map(|h| real(Path::new(h)))
}

/// A path with links resolved when it exists, else as given.
fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Whether one folder is the other or lies inside it.
fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Refuses a workspace folder that would expose the host (`WORKSPACE_INVALID`): the root
/// folder, the home folder or one containing it, a folder overlapping Po's own, or one
/// overlapping another workspace of this hub (`others`: id to folder; one container could then
/// swap a folder of the other for a link before its mounts are made).
pub fn check_fences(
    ws: &Workspace,
    fences: &Fences,
    others: &std::collections::BTreeMap<String, PathBuf>,
) -> Result<()> {
    let refuse = |reason: String| {
        Err(Error::WorkspaceInvalid {
            what: format!(
                "path {:?} (workspace '{}')",
                ws.path.display().to_string(),
                ws.id
            ),
            reason,
        })
    };
    let path = ws.path.as_path();
    if path.parent().is_none() {
        return refuse("it is the root folder: the container would change the whole host; sandbox a project folder instead".into());
    }
    if let Some(home) = fences.home.as_deref().filter(|h| h.starts_with(path)) {
        let what = match home == path {
            true => "it is your home folder".to_string(),
            false => format!("it contains your home folder {}", home.display()),
        };
        return refuse(format!(
            "{what}: the container could change your shell start-up files, ~/.ssh, ~/.gitconfig \
             and Po's own files, which the host runs or trusts; sandbox a project folder inside it \
             instead"
        ));
    }
    if let Some((name, own)) = fences.own.iter().find(|(_, own)| overlap(path, own)) {
        return refuse(format!(
            "it overlaps {name} {}, which holds the hub's token files and records: choose a \
             folder that neither contains it nor lies inside it",
            own.display()
        ));
    }
    let other = others
        .iter()
        .find(|(id, other)| **id != ws.id && overlap(path, other));
    if let Some((id, other)) = other {
        return refuse(format!(
            "it overlaps the folder {} of workspace '{id}' of this hub: one container could \
             change the other's files before its mounts are made; give workspaces folders that \
             do not contain each other",
            other.display()
        ));
    }
    Ok(())
}

/// The longest folder-name part of an id made by [`for_folder`].
const FOLDER_ID_NAME_LEN: usize = 40;

/// The workspace for a folder outside Po (`po-sandbox up [dir]`): the folder canonicalised, and
/// a stable id from it, `<name>-<12 hex of sha256(canonical path)>`, where name is the folder's
/// own name with every character outside `[A-Za-z0-9._-]` as `-`, leading dots dropped and cut
/// to 40 (`folder` when nothing is left). The same folder always gets the same id; two folders
/// with one name get different ones. The root folder, the home folder and a folder containing
/// it are refused ([`check_fences`]).
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
    let ws = resolve(&id, &canonical.to_string_lossy())?;
    // The root and home folders are refused before any engine is asked (the Po home and the
    // other workspaces are the hub's to check).
    let host = crate::host::HostEnv::given(None);
    let fences = Fences {
        home: home_of(host.vars()),
        own: vec![],
    };
    check_fences(&ws, &fences, &Default::default())?;
    Ok(ws)
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

/// The Po home `value` names, else `~/.po` of `host`; checked ([`check_po_home`]).
pub fn resolve_po_home(value: Option<String>, host: &crate::host::HostEnv) -> Result<PathBuf> {
    let po_home = match value.filter(|s| !s.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => host
            .home()
            .map(|h| h.join(".po"))
            .ok_or_else(|| Error::OptionsInvalid {
                option: "poHome".into(),
                reason: "not given and HOME is not set; pass the Po home folder".into(),
            })?,
    };
    check_po_home(&po_home)?;
    Ok(po_home)
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
    fn folders_that_would_expose_the_host_are_refused() {
        let ws = |id: &str, p: &str| Workspace {
            id: id.into(),
            path: PathBuf::from(p),
            mode: None,
        };
        let fences = Fences {
            home: Some("/home/ann".into()),
            own: vec![
                ("the Po home", "/home/ann/.po".into()),
                (
                    "the broker socket folder",
                    "/run/user/1000/po-broker".into(),
                ),
            ],
        };
        let mut others = std::collections::BTreeMap::new();
        others.insert("web".to_string(), PathBuf::from("/home/ann/src/web"));
        for (id, bad, why) in [
            ("w", "/", "root folder"),
            ("w", "/home/ann", "it is your home folder"),
            ("w", "/home", "it contains your home folder /home/ann"),
            ("w", "/home/ann/.po", "the Po home /home/ann/.po"),
            ("w", "/home/ann/.po/sandboxes", "the Po home"),
            ("w", "/run/user/1000", "the broker socket folder"),
            (
                "w",
                "/run/user/1000/po-broker/x",
                "the broker socket folder",
            ),
            ("w", "/home/ann/src", "workspace 'web'"),
            ("w", "/home/ann/src/web/api", "workspace 'web'"),
            ("w", "/home/ann/src/web", "workspace 'web'"),
        ] {
            let err = check_fences(&ws(id, bad), &fences, &others).unwrap_err();
            assert_eq!(err.code(), "WORKSPACE_INVALID", "{bad}");
            assert!(err.to_string().contains(why), "{bad}: {err}");
            assert!(
                err.to_string().contains(&format!("{bad:?}")),
                "{bad}: {err}"
            );
        }
        for ok in [
            ("w", "/home/ann/src/api"),
            ("w", "/home/ann/src/web2"),
            ("web", "/home/ann/src/web"),
            ("web", "/home/ann/src/web/inner"),
            ("w", "/srv/x"),
            ("w", "/home/ann/.pox"),
        ] {
            check_fences(&ws(ok.0, ok.1), &fences, &others)
                .unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
    }

    #[test]
    fn fences_come_from_the_host_and_resolve_links() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real-home");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("home")).unwrap();
        let vars = std::collections::HashMap::from([(
            "HOME".to_string(),
            dir.path().join("home").to_string_lossy().into_owned(),
        )]);
        let f = Fences::of(&vars, Path::new("/nonexistent/.po"), None);
        assert_eq!(f.home, Some(real.canonicalize().unwrap()));
        assert_eq!(
            f.own,
            vec![("the Po home", PathBuf::from("/nonexistent/.po"))]
        );
        // A relative or missing HOME is no fence.
        let rel = std::collections::HashMap::from([("HOME".to_string(), "x".to_string())]);
        assert_eq!(Fences::of(&rel, Path::new("/p"), None).home, None);
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
        // The root folder, and this process's home folder (when it has one).
        let root = for_folder("/").unwrap_err();
        assert!(root.to_string().contains("root folder"), "{root}");
        if let Some(home) = std::env::var("HOME").ok().filter(|h| h.starts_with('/')) {
            let e = for_folder(&home).unwrap_err();
            assert!(e.to_string().contains("home folder"), "{e}");
        }
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
