//! A bounded walk of a workspace that fingerprints the files of the reviewed classes, never
//! following a link and never opening anything but a regular file.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::classes::{ReviewClass, class_of};
use crate::safe_read::{open_regular, read_regular};

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

/// Entries looked at in the skipped folders, at most: there only repository shapes are looked
/// for (a `.git` file or folder, a bare repository's shape), which host git would take.
pub const MAX_SHAPE_ENTRIES: usize = 200_000;

/// Walks `root` within [`MAX_DEPTH`] and [`MAX_ENTRIES`], skipping the top repository's `.git`;
/// [`SKIPPED_DIRS`] are walked for repository shapes only, within [`MAX_SHAPE_ENTRIES`].
pub fn snapshot(root: &Path) -> Snapshot {
    snapshot_within(root, MAX_DEPTH, MAX_ENTRIES)
}

/// As [`snapshot`], within `max_depth` folders and `max_entries` entries.
pub(super) fn snapshot_within(root: &Path, max_depth: usize, max_entries: usize) -> Snapshot {
    let mut snap = Snapshot {
        files: BTreeMap::new(),
        complete: true,
    };
    let (mut seen, mut seen_shapes) = (0usize, 0usize);
    // A folder to read, and whether it is in a skipped folder (repository shapes only).
    let mut stack: Vec<(Vec<String>, bool)> = vec![(vec![], false)];
    while let Some((rel, shapes_only)) = stack.pop() {
        let dir = rel.iter().fold(root.to_path_buf(), |p, n| p.join(n));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            snap.complete = false;
            continue;
        };
        let mut shape = BareShape::default();
        for entry in entries {
            let counter = if shapes_only {
                &mut seen_shapes
            } else {
                &mut seen
            };
            *counter += 1;
            if seen > max_entries || seen_shapes > MAX_SHAPE_ENTRIES {
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
            shape.note(&name, ft);
            let mut parts = rel.clone();
            parts.push(name.clone());
            if super::classes::fold(&name) == ".git" {
                if rel.is_empty() {
                    gitlinks(&entry.path(), "", ft.is_dir(), &mut snap);
                } else {
                    let print = nested_git(&entry.path(), ft.is_dir());
                    snap.files.insert(parts.join("/"), print);
                    let prefix = format!("{}/", rel.join("/"));
                    gitlinks(&entry.path(), &prefix, ft.is_dir(), &mut snap);
                }
            } else if ft.is_dir() {
                let skipped = shapes_only || SKIPPED_DIRS.contains(&name.as_str());
                if parts.len() > max_depth {
                    snap.complete = false;
                } else {
                    stack.push((parts, skipped));
                }
            } else if !shapes_only {
                let names: Vec<&str> = parts.iter().map(String::as_str).collect();
                if let Some(class) = class_of(&names) {
                    let print = fingerprint(&entry.path(), ft.is_symlink(), class);
                    snap.files.insert(parts.join("/"), print);
                }
            }
        }
        if shape.is_bare() {
            let mut print = nested_git(&dir, true);
            print.class = ReviewClass::BareRepository;
            let key = if rel.is_empty() {
                ".".to_string()
            } else {
                rel.join("/")
            };
            snap.files.insert(key, print);
        }
    }
    snap
}

/// What a folder holds of a bare repository's shape: `HEAD` (a file), `objects` and `refs`
/// (folders), the three host git looks for.
#[derive(Default)]
struct BareShape(u8);

impl BareShape {
    fn note(&mut self, name: &str, ft: std::fs::FileType) {
        match super::classes::fold(name).as_str() {
            "head" if ft.is_file() => self.0 |= 1,
            "objects" if ft.is_dir() => self.0 |= 2,
            "refs" if ft.is_dir() => self.0 |= 4,
            _ => {}
        }
    }

    fn is_bare(&self) -> bool {
        self.0 == 7
    }
}

/// The gitlinks in the index of the git folder at `dot_git` (a `.git` folder; a `.git` file's
/// index is elsewhere and not read), each under `prefix` (the repository's folder).
fn gitlinks(dot_git: &Path, prefix: &str, dir: bool, snap: &mut Snapshot) {
    if !dir {
        return;
    }
    let config = read_regular(&dot_git.join("config"), 1 << 20).unwrap_or_default();
    let sha256 =
        crate::sandbox::folder::guards::defuse::names_by_sha256(&String::from_utf8_lossy(&config));
    match crate::sandbox::folder::guards::defuse::gitlinks(&dot_git.join("index"), sha256) {
        Ok(links) => {
            for link in links {
                let print = Fingerprint {
                    class: ReviewClass::Gitlink,
                    hash: sha(b"gitlink"),
                    scripts: None,
                };
                snap.files.insert(format!("{prefix}{link}"), print);
            }
        }
        Err(_) => snap.complete = false,
    }
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
