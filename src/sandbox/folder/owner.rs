//! The hub's owner id: the `po.owner` label of everything it makes on the engine and the name
//! of its folders in the Po home. It is made once per Po home and kept in
//! `<poHome>/sandbox-owner`, so two machines whose Po homes have the same path (`/root/.po` on
//! identical CI images) have two owners on a shared engine, and never adopt, sweep, prune or
//! stop each other's sandboxes.
//!
//! A Po home that already holds the folders of the id earlier versions derived from its path
//! (12 hex digits of the path's sha256) keeps that id, so its running sandboxes are adopted
//! after an upgrade, not replaced.

use std::io::ErrorKind;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The file that keeps the owner id, in the Po home.
pub const FILE: &str = "sandbox-owner";

/// The folders and files a Po home holds under an owner's id once that owner made a sandbox.
const OWNED: [(&str, &str); 5] = [
    ("sandbox-tokens", ""),
    ("sandbox-guards", ""),
    ("sandbox-copies", ""),
    ("sandbox-review", ""),
    ("git-safety", ".json"),
];

/// The id earlier versions derived from the Po home's path: 12 hex digits of its sha256.
pub fn derived(po_home: &Path) -> String {
    hex::encode(&Sha256::digest(po_home.to_string_lossy().as_bytes())[..6])
}

/// Whether `id` is an owner id: 1-32 lowercase letters or digits.
pub fn valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 32
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The Po home's owner id: the one its file keeps; else one made now and kept (the derived id
/// when the Po home holds its folders, a random one otherwise; another process that kept one
/// first wins). A Po home where nothing can be kept uses the derived id, as earlier versions
/// did.
pub fn of_po_home(po_home: &Path) -> String {
    let file = po_home.join(FILE);
    if let Some(id) = read(&file) {
        return id;
    }
    let legacy = derived(po_home);
    let made = match used_by(po_home, &legacy) {
        true => legacy.clone(),
        false => random(),
    };
    match keep(po_home, &file, &made) {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "the owner id cannot be kept; using the one derived from the Po home's path");
            legacy
        }
    }
}

/// The id a file keeps, when it keeps a valid one.
fn read(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let id = text.trim();
    valid(id).then(|| id.to_string())
}

/// Whether the Po home holds a folder (or file) of `owner`.
fn used_by(po_home: &Path, owner: &str) -> bool {
    OWNED.iter().any(|(dir, ext)| {
        po_home
            .join(dir)
            .join(format!("{owner}{ext}"))
            .symlink_metadata()
            .is_ok()
    })
}

/// 12 random hex digits.
fn random() -> String {
    let mut bytes = [0u8; 6];
    match getrandom::fill(&mut bytes) {
        Ok(()) => hex::encode(bytes),
        // No randomness: the path and the time of day still differ between machines.
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            hex::encode(&Sha256::digest(format!("{now:?} {}", std::process::id()))[..6])
        }
    }
}

/// Keeps `id` in `file` unless another process kept one first (a link never replaces a file):
/// the id the file keeps then.
fn keep(po_home: &Path, file: &Path, id: &str) -> std::io::Result<String> {
    use std::io::Write;
    let mut dirs = std::fs::DirBuilder::new();
    crate::platform::private_dirs(dirs.recursive(true)).create(po_home)?;
    // An aside of this call's own (two calls of one process may make one at once), written
    // whole and synced before it is linked into place.
    let mut aside = crate::write_aside::aside_path(file).into_os_string();
    aside.push(format!(".{}", random()));
    let aside = std::path::PathBuf::from(aside);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&aside)?;
        f.write_all(format!("{id}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::hard_link(&aside, file)
    })();
    let _ = std::fs::remove_file(&aside);
    match written {
        // What the file holds now, whoever linked it.
        Ok(()) | Err(_) if file.exists() => read(file).ok_or_else(|| {
            std::io::Error::new(
                ErrorKind::InvalidData,
                format!("{} does not hold an owner id", file.display()),
            )
        }),
        Ok(()) => Ok(id.to_string()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_po_home_gets_an_id_of_its_own_kept_for_every_later_call() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("po");
        let id = of_po_home(&home);
        assert!(valid(&id) && id.len() == 12, "{id}");
        assert_ne!(
            id,
            derived(&home),
            "a fresh Po home got the path-derived id"
        );
        assert_eq!(
            std::fs::read_to_string(home.join(FILE)).unwrap(),
            format!("{id}\n")
        );
        assert_eq!(of_po_home(&home), id);
        // The same path on another machine (the file gone, as on a fresh copy of an image):
        // another id.
        std::fs::remove_file(home.join(FILE)).unwrap();
        assert_ne!(of_po_home(&home), id);
    }

    #[test]
    fn a_po_home_an_earlier_version_used_keeps_the_derived_id() {
        for (dir_name, ext) in OWNED {
            let dir = tempfile::tempdir().unwrap();
            let home = dir.path();
            let legacy = derived(home);
            let at = home.join(dir_name).join(format!("{legacy}{ext}"));
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            if ext.is_empty() {
                std::fs::create_dir(&at).unwrap();
            } else {
                std::fs::write(&at, "{}").unwrap();
            }
            assert_eq!(of_po_home(home), legacy, "{dir_name}");
            assert_eq!(read(&home.join(FILE)).as_deref(), Some(legacy.as_str()));
        }
    }

    #[test]
    fn the_first_kept_id_wins_and_a_bad_file_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let file = home.join(FILE);
        std::fs::write(&file, "abc123\n").unwrap();
        assert_eq!(keep(home, &file, "ffffff").unwrap(), "abc123");
        assert_eq!(of_po_home(home), "abc123");
        std::fs::write(&file, "Not An Id\n").unwrap();
        assert!(keep(home, &file, "ffffff").is_err());
        assert_eq!(of_po_home(home), derived(home));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "Not An Id\n");
        assert!(!crate::write_aside::aside_path(&file).exists());
    }
}
