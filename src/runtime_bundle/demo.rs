//! The demo runtime bundle embedded in the package: a tiny Node server (`demo/server.js`) that
//! answers the health path and shows the sandbox it runs in. Used only when asked for
//! (`demoRuntime`) and Po's own bundle is not installed; always reported as version `demo`.
//! Its files are written once to `<poHome>/demo-runtime/<digest>/`, a folder named by their
//! content, so a later process (`exec`, `down`, a hub) finds exactly the same bundle.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{FILE_NAME, RuntimeBundle, locate, parse};
use crate::error::{Error, Result};

/// The version every use of the demo bundle reports.
pub const DEMO_VERSION: &str = "demo";

/// The folder under the Po home that holds materialised demo bundles.
pub const DEMO_DIR_NAME: &str = "demo-runtime";

/// The bundle's files: (name, contents).
const FILES: [(&str, &str); 2] = [
    (FILE_NAME, include_str!("demo/container-runtime.json")),
    ("server.js", include_str!("demo/server.js")),
];

/// 16 hex digits of the sha256 of every file's name and contents.
pub fn digest() -> String {
    let mut h = Sha256::new();
    for (name, contents) in FILES {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((contents.len() as u64).to_le_bytes());
        h.update(contents.as_bytes());
    }
    hex::encode(h.finalize())[..16].to_string()
}

/// Where the demo bundle of this package lives under a Po home.
pub fn folder(po_home: &Path) -> PathBuf {
    po_home.join(DEMO_DIR_NAME).join(digest())
}

/// The port the server of the bundle [`locate_or_demo`] would give listens on, found without
/// writing anything; `None` when there is no such bundle or it cannot be read.
pub fn server_port(po_home: &Path, version: Option<&str>, demo: bool) -> Option<u16> {
    match locate(po_home, version) {
        Ok(bundle) => Some(bundle.server.port),
        Err(Error::RuntimeNotInstalled { .. }) if demo && version.is_none() => {
            let manifest = Path::new(FILE_NAME);
            parse(manifest, FILES[0].1.as_bytes()).ok().map(|p| p.port)
        }
        Err(_) => None,
    }
}

/// Po's bundle when installed; otherwise, when `demo` is set and no version was named, the
/// demo bundle (written first when missing). Errors as [`locate`] does.
pub fn locate_or_demo(po_home: &Path, version: Option<&str>, demo: bool) -> Result<RuntimeBundle> {
    match locate(po_home, version) {
        Err(Error::RuntimeNotInstalled { .. }) if demo && version.is_none() => install(po_home),
        other => other,
    }
}

/// Writes the demo bundle to [`folder`] unless it is there with exactly these files, and
/// returns it. A partial or altered folder is replaced; a concurrent writer is fine (the
/// folder appears whole, by rename).
pub fn install(po_home: &Path) -> Result<RuntimeBundle> {
    let dir = folder(po_home);
    if !matches(&dir) {
        write(&dir).map_err(|e| unwritable(&dir, &e))?;
    }
    let json_path = dir.join(FILE_NAME);
    let parsed = parse(&json_path, FILES[0].1.as_bytes())?;
    Ok(RuntimeBundle::new(
        DEMO_VERSION.to_string(),
        dir,
        json_path,
        parsed,
    ))
}

/// The folder holds exactly the bundle's files, as regular files (not links).
fn matches(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    if entries.count() != FILES.len() {
        return false;
    }
    FILES.iter().all(|(name, contents)| {
        let path = dir.join(name);
        fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
            && fs::read(&path).is_ok_and(|b| b == contents.as_bytes())
    })
}

/// Writes the files into a fresh sibling folder, then renames it into place.
fn write(dir: &Path) -> std::io::Result<()> {
    let parent = dir.parent().unwrap_or(dir);
    fs::create_dir_all(parent)?;
    let mut nonce = [0u8; 4];
    getrandom::fill(&mut nonce).map_err(std::io::Error::other)?;
    sweep_staging(parent);
    let staging = parent.join(format!(
        ".staging-{}-{}",
        std::process::id(),
        hex::encode(nonce)
    ));
    let result = (|| {
        fs::create_dir(&staging)?;
        for (name, contents) in FILES {
            fs::write(staging.join(name), contents)?;
        }
        set_modes(&staging)?;
        if fs::symlink_metadata(dir).is_ok() && !matches(dir) {
            remove_any(dir)?;
        }
        match fs::rename(&staging, dir) {
            Ok(()) => Ok(()),
            // Another process put the same bundle in place first.
            Err(_) if matches(dir) => Ok(()),
            Err(e) => Err(e),
        }
    })();
    let _ = fs::remove_dir_all(&staging);
    result
}

/// Removes the staging folders (`.staging-<pid>-<nonce>`) in `parent` that a killed writer left:
/// its pid no longer runs, or older than any write takes. Real folders only, never a link.
fn sweep_staging(parent: &Path) {
    use crate::write_aside::{ASIDE_MAX_AGE, writer_gone};
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(".staging-")
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && e.file_type().is_ok_and(|t| t.is_dir())
            && writer_gone(pid, &e, ASIDE_MAX_AGE)
        {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn remove_any(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(_) => Ok(()),
    }
}

/// Readable by any container user: folder 0755, files 0644.
fn set_modes(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
        for (name, _) in FILES {
            fs::set_permissions(dir.join(name), fs::Permissions::from_mode(0o644))?;
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

fn unwritable(dir: &Path, e: &std::io::Error) -> Error {
    Error::RuntimeInvalid {
        path: dir.to_path_buf(),
        key: "(demo bundle folder)".into(),
        rule: format!(
            "it cannot be written ({e}); make the Po home writable or pass another --po-home"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_file_is_valid_and_stays_in_the_bundle() {
        let b = install(tempfile::tempdir().unwrap().path()).unwrap();
        assert_eq!(b.version, DEMO_VERSION);
        assert_eq!(b.server.entry, "/opt/po/server.js");
        assert_eq!(b.server.health_path, "/api/health");
        assert_eq!(b.command(), ["node", "/opt/po/server.js"]);
        assert!(FILES[1].1.contains(&format!("PORT = {}", b.server.port)));
    }

    #[cfg(unix)]
    #[test]
    fn a_killed_writers_staging_folder_goes_and_a_live_ones_stays() {
        let parent = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let dead_dir = parent.path().join(format!(".staging-{dead}-0a0b0c0d"));
        let live_dir = parent
            .path()
            .join(format!(".staging-{}-01020304", std::process::id()));
        for d in [&dead_dir, &live_dir] {
            fs::create_dir(d).unwrap();
            fs::write(d.join("server.js"), "half").unwrap();
        }
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            outside.path(),
            parent.path().join(format!(".staging-{dead}-linked")),
        )
        .unwrap();
        fs::write(outside.path().join("keep"), "k").unwrap();
        sweep_staging(parent.path());
        assert!(!dead_dir.exists());
        assert!(live_dir.join("server.js").exists());
        assert!(
            outside.path().join("keep").exists(),
            "a link is not followed"
        );
    }

    #[test]
    fn install_is_idempotent_and_repairs() {
        let home = tempfile::tempdir().unwrap();
        let first = install(home.path()).unwrap();
        assert_eq!(first.dir, folder(home.path()));
        assert!(matches(&first.dir));
        // Same folder, same contents the second time.
        assert_eq!(install(home.path()).unwrap(), first);
        // Altered, extra or missing files are put right.
        let repairs: [fn(&Path); 3] = [
            |d| fs::write(d.join("server.js"), "altered").unwrap(),
            |d| fs::write(d.join("extra"), "x").unwrap(),
            |d| fs::remove_file(d.join(FILE_NAME)).unwrap(),
        ];
        for repair in repairs {
            repair(&first.dir);
            assert!(!matches(&first.dir));
            install(home.path()).unwrap();
            assert!(matches(&first.dir));
        }
        // No staging folders are left behind.
        let left: Vec<_> = fs::read_dir(home.path().join(DEMO_DIR_NAME))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from(digest())]);
    }

    #[test]
    fn demo_only_when_asked_and_nothing_installed() {
        let home = tempfile::tempdir().unwrap();
        let cases: [(Option<&str>, bool, Result<&str, &str>); 4] = [
            (None, false, Err("RUNTIME_NOT_INSTALLED")),
            (None, true, Ok(DEMO_VERSION)),
            (Some("1.0.0"), true, Err("RUNTIME_NOT_INSTALLED")),
            (Some("../x"), true, Err("RUNTIME_INVALID")),
        ];
        for (version, demo, want) in cases {
            let got = locate_or_demo(home.path(), version, demo)
                .map(|b| b.version)
                .map_err(|e| e.code());
            assert_eq!(got.as_deref().map_err(|e| *e), want, "{version:?} {demo}");
        }
        // Po's own bundle wins over the demo.
        let v = home.path().join("container-runtime/2.0.0");
        fs::create_dir_all(&v).unwrap();
        fs::write(
            v.join(FILE_NAME),
            r#"{"entry":"/opt/po/main.js","port":7300}"#,
        )
        .unwrap();
        let b = locate_or_demo(home.path(), None, true).unwrap();
        assert_eq!(b.version, "2.0.0");
    }

    #[test]
    fn an_unwritable_home_is_a_coded_error_naming_the_folder() {
        let home = tempfile::tempdir().unwrap();
        // A file where the demo-runtime folder would go.
        fs::write(home.path().join(DEMO_DIR_NAME), "x").unwrap();
        let e = install(home.path()).unwrap_err();
        assert_eq!(e.code(), "RUNTIME_INVALID");
        assert!(e.to_string().contains(DEMO_DIR_NAME), "{e}");
    }
}
