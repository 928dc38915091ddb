//! A bounded walk of a workspace that fingerprints the files of the reviewed classes, never
//! following a link and never opening anything but a regular file.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::classes::{ReviewClass, class_of};

/// Folders never entered: dependencies, build output, caches (their files are not the
/// project's own, and walking them would spend the entry budget).
pub const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    "target",
    ".venv",
    "venv",
    "dist",
    "build",
    "__pycache__",
    ".tox",
    ".gradle",
    ".next",
    ".cache",
    "bower_components",
];

/// Folders below the workspace entered at most this deep (the workspace itself is depth 0).
pub const MAX_DEPTH: usize = 12;

/// Folder entries looked at in all, at most.
pub const MAX_ENTRIES: usize = 50_000;

/// A `package.json` larger than this is fingerprinted whole, not parsed for its scripts.
const MAX_PARSED: u64 = 4 << 20;

/// Bytes of a file hashed, at most: a larger one is compared by its size and these.
pub const MAX_HASHED: u64 = 64 << 20;

/// Hooks of a nested repository fingerprinted, at most.
const MAX_HOOKS: usize = 200;

/// One reviewed file as it was seen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fingerprint {
    pub class: ReviewClass,
    /// sha256 (hex) of what matters: a `package.json`'s scripts, a link's target, a nested
    /// repository's config and hooks, else the file's bytes.
    pub hash: String,
    /// A `package.json`'s scripts, when it parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scripts: Option<BTreeMap<String, String>>,
}

/// The reviewed files of a workspace, by path below it (`/`-separated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub files: BTreeMap<String, Fingerprint>,
    /// No limit was hit and every folder could be read.
    pub complete: bool,
}

/// Walks `root` within [`MAX_DEPTH`] and [`MAX_ENTRIES`], skipping [`SKIPPED_DIRS`] and the
/// top repository's `.git`.
pub fn snapshot(root: &Path) -> Snapshot {
    snapshot_within(root, MAX_DEPTH, MAX_ENTRIES)
}

/// As [`snapshot`], within `max_depth` folders and `max_entries` entries.
pub(super) fn snapshot_within(root: &Path, max_depth: usize, max_entries: usize) -> Snapshot {
    let mut snap = Snapshot {
        files: BTreeMap::new(),
        complete: true,
    };
    let mut seen = 0usize;
    let mut stack: Vec<Vec<String>> = vec![vec![]];
    while let Some(rel) = stack.pop() {
        let dir = rel.iter().fold(root.to_path_buf(), |p, n| p.join(n));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            snap.complete = false;
            continue;
        };
        for entry in entries {
            seen += 1;
            if seen > max_entries {
                snap.complete = false;
                return snap;
            }
            let Ok(entry) = entry else {
                snap.complete = false;
                continue;
            };
            let Some(name) = name_of(&entry) else {
                continue;
            };
            // `file_type` never follows a link.
            let Ok(ft) = entry.file_type() else { continue };
            let mut parts = rel.clone();
            parts.push(name.clone());
            if name == ".git" {
                if !rel.is_empty() {
                    let print = nested_git(&entry.path(), ft.is_dir());
                    snap.files.insert(parts.join("/"), print);
                }
            } else if ft.is_dir() {
                if SKIPPED_DIRS.contains(&name.as_str()) {
                    continue;
                }
                if parts.len() > max_depth {
                    snap.complete = false;
                } else {
                    stack.push(parts);
                }
            } else {
                let names: Vec<&str> = parts.iter().map(String::as_str).collect();
                if let Some(class) = class_of(&names) {
                    let print = fingerprint(&entry.path(), ft.is_symlink(), class);
                    snap.files.insert(parts.join("/"), print);
                }
            }
        }
    }
    snap
}

/// An entry's name, when it is valid UTF-8 (no reviewed name is anything else).
fn name_of(entry: &std::fs::DirEntry) -> Option<String> {
    entry.file_name().into_string().ok()
}

/// sha256 of `bytes`, hex.
fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A reviewed file's fingerprint: a link by its target, a `package.json` by its scripts.
fn fingerprint(path: &Path, link: bool, class: ReviewClass) -> Fingerprint {
    let plain = |hash| Fingerprint {
        class,
        hash,
        scripts: None,
    };
    if link {
        let target = std::fs::read_link(path).unwrap_or_default();
        return plain(sha(format!("link:{}", target.display()).as_bytes()));
    }
    let Some(bytes) = read_regular(path, MAX_PARSED) else {
        return plain(file_hash(path));
    };
    if class == ReviewClass::PackageScripts
        && let Some(scripts) = scripts_of(&bytes)
    {
        let canonical = serde_json::to_vec(&scripts).unwrap_or_default();
        return Fingerprint {
            class,
            hash: sha(&canonical),
            scripts: Some(scripts),
        };
    }
    plain(sha(&bytes))
}

/// A `package.json`'s `scripts` (empty when it has none); `None` when it is not a JSON object.
pub fn scripts_of(bytes: &[u8]) -> Option<BTreeMap<String, String>> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let object = value.as_object()?;
    let Some(scripts) = object.get("scripts").and_then(|s| s.as_object()) else {
        return Some(BTreeMap::new());
    };
    let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    Some(scripts.iter().map(|(k, v)| (k.clone(), text(v))).collect())
}

/// A file's bytes when it is a regular file (opened without following a link or blocking on
/// a pipe) of at most `max` bytes.
pub(crate) fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = open_regular(path)?;
    if file.metadata().ok()?.len() > max {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// sha256 of a regular file's size and first [`MAX_HASHED`] bytes, streamed (a file planted
/// to be huge cannot stall the walk); a fixed marker for anything else.
fn file_hash(path: &Path) -> String {
    hash_within(path, MAX_HASHED)
}

/// As [`file_hash`], hashing at most `max` bytes.
pub(super) fn hash_within(path: &Path, max: u64) -> String {
    let Some(file) = open_regular(path) else {
        return sha(b"not a regular file");
    };
    let mut hasher = Sha256::new();
    let size = file.metadata().map_or(0, |m| m.len());
    if size > max {
        hasher.update(format!("size {size}\n"));
    }
    let mut file = file.take(max);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return sha(b"unreadable"),
        }
    }
    hex::encode(hasher.finalize())
}

/// Opens `path` for reading only when its last component is no link and it is a regular file.
fn open_regular(path: &Path) -> Option<std::fs::File> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path)
        .ok()?
        .file_type()
        .is_symlink()
    {
        return None;
    }
    let file = open.open(path).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// A nested repository's fingerprint: a `.git` file (a pointer) by its bytes, a `.git` folder
/// by its `config`, `commondir` and the names and bytes of its hooks.
fn nested_git(path: &Path, dir: bool) -> Fingerprint {
    let class = ReviewClass::NestedGit;
    let scripts = None;
    if !dir {
        let hash = file_hash(path);
        return Fingerprint {
            class,
            hash,
            scripts,
        };
    }
    let mut hasher = Sha256::new();
    for name in ["config", "commondir", "config.worktree"] {
        hasher.update(format!("{name}:{}\n", file_hash(&path.join(name))));
    }
    let hooks = path.join("hooks");
    let is_dir = std::fs::symlink_metadata(&hooks).is_ok_and(|m| m.is_dir());
    let mut names: Vec<String> = match std::fs::read_dir(&hooks) {
        Ok(entries) if is_dir => entries.flatten().filter_map(|e| name_of(&e)).collect(),
        _ => vec![],
    };
    names.sort();
    for name in names.iter().take(MAX_HOOKS) {
        hasher.update(format!("hook {name}:{}\n", file_hash(&hooks.join(name))));
    }
    Fingerprint {
        class,
        hash: hex::encode(hasher.finalize()),
        scripts,
    }
}
