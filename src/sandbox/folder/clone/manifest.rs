//! A folder without git's copy: the host's record of what went into it (its manifest: each
//! file's sha256 and executable bit, each link's target), written when the copy is filled and
//! kept under `<poHome>/sandbox-copies/<owner>/<id>.json`, outside the workspace and every
//! mount. It is the trusted base of `diff` and `apply`; nothing the container says is.
//! Here also: the copy's listing as the container reports it, and how the two compare.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use super::ignore::IgnoreRules;
use crate::sandbox::folder::review::ReviewChangeKind;

/// The version of the manifest file's shape.
const MANIFEST_VERSION: u32 = 1;
/// A manifest larger than this is not read.
const MAX_MANIFEST: u64 = 256 << 20;
/// The most entries a copy's listing may have.
pub const MAX_ENTRIES: usize = 200_000;

/// What a path is: a regular file or a symbolic link (folders are implied by their files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Link,
}

/// One file or link: its kind, its content's sha256 (a file) or target (a link), and whether
/// it is executable (any `x` bit).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub kind: EntryKind,
    pub value: String,
    pub executable: bool,
}

impl Entry {
    /// A regular file of these bytes.
    pub fn file(bytes: &[u8], executable: bool) -> Entry {
        Entry {
            kind: EntryKind::File,
            value: hex::encode(Sha256::digest(bytes)),
            executable,
        }
    }

    /// A link to `target`.
    pub fn link(target: &str) -> Entry {
        Entry {
            kind: EntryKind::Link,
            value: target.into(),
            executable: false,
        }
    }
}

/// The record of a folder's copy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: u32,
    pub workspace_id: String,
    /// The host folder.
    pub path: String,
    /// The `.posandboxignore` lines the copy was made with (or the defaults).
    pub ignore: String,
    /// Relative, `/`-separated path to what went into the copy.
    pub entries: BTreeMap<String, Entry>,
}

impl Manifest {
    /// An empty record of `folder`'s copy, made with these ignore lines.
    pub fn new(workspace_id: &str, folder: &Path, ignore: String) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            workspace_id: workspace_id.into(),
            path: folder.to_string_lossy().into_owned(),
            ignore,
            entries: BTreeMap::new(),
        }
    }

    /// The rules the copy was made with.
    pub fn rules(&self) -> IgnoreRules {
        IgnoreRules::parse(&self.ignore)
    }
}

/// Where a workspace's manifest lives: `<poHome>/sandbox-copies/<owner>/<id>.json`.
pub fn manifest_path(po_home: &Path, owner: &str, workspace_id: &str) -> PathBuf {
    po_home
        .join("sandbox-copies")
        .join(owner)
        .join(format!("{workspace_id}.json"))
}

/// Writes the manifest whole (written aside, then renamed; owner-only).
pub fn write_manifest(path: &Path, manifest: &Manifest) -> std::io::Result<()> {
    let dir = path.parent().expect("manifests live in a folder");
    crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true)).create(dir)?;
    crate::write_aside::write_whole(path, &serde_json::to_vec(manifest)?, true)
}

/// The manifest at `path`, when there is a readable one (a regular file, not a link).
pub fn read_manifest(path: &Path) -> Option<Manifest> {
    let bytes = crate::safe_read::read_regular(path, MAX_MANIFEST)?;
    serde_json::from_slice::<Manifest>(&bytes)
        .ok()
        .filter(|m| m.version == MANIFEST_VERSION)
}

/// Removes the manifests of one workspace of `owner`, or all of the owner's (with a discard).
pub fn remove_manifests(po_home: &Path, owner: &str, workspace_id: Option<&str>) {
    match workspace_id {
        Some(id) => {
            let _ = std::fs::remove_file(manifest_path(po_home, owner, id));
        }
        None => {
            let _ = std::fs::remove_dir_all(po_home.join("sandbox-copies").join(owner));
        }
    }
}

/// Why a path the container named cannot be written on the host, if it cannot: it must be
/// relative, `/`-separated plain names (no `.`, `..`, empty part, `.git`, backslash or control
/// character), valid UTF-8 and of sane length.
pub fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() || path.len() > 4096 {
        return Err("an empty or overlong path");
    }
    if path.contains('\u{fffd}') || path.chars().any(|c| c.is_control() || c == '\\') {
        return Err("a name that is not plain UTF-8 (control characters, backslashes)");
    }
    for part in path.split('/') {
        match part {
            "" | "." | ".." => return Err("a path that is absolute or climbs (`.`, `..`, `//`)"),
            // As a case-insensitive host reads it (`.GIT`; Windows drops trailing dots and blanks).
            p if crate::sandbox::folder::review::fold(p.trim_end_matches(['.', ' '])) == ".git" => {
                return Err("a path inside a `.git`");
            }
            p if p.len() > 255 => return Err("a name longer than 255 bytes"),
            _ => {}
        }
    }
    Ok(())
}

/// Whether `path` (a file's) is left out by `rules`: it or a folder on its way is ignored.
pub fn ignored_path(rules: &IgnoreRules, path: &str) -> bool {
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        if rules.ignored(&path[..at + i], true) {
            return true;
        }
        at += i + 1;
    }
    rules.ignored(path, false)
}

/// A link whose target is absolute or climbs out of the folder.
pub fn link_escapes(path: &str, target: &str) -> bool {
    let target = Path::new(target);
    target.is_absolute() || target.as_os_str().is_empty() || escapes(Path::new(path), target)
}

/// The copy's listing as the container reported it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub entries: BTreeMap<String, Entry>,
    /// Sizes of the files, by path.
    pub sizes: BTreeMap<String, u64>,
    /// Files the container could not read (no hash).
    pub unreadable: Vec<String>,
}

/// The listing script's output: records of five NUL-terminated fields (`f|l|p`, sha256 or
/// target, `x` or `-`, size, path). Pruned folders (`p`) must be ignored by `rules` too (else
/// the container left out what the host would not); files the rules leave out are dropped.
pub fn parse_listing(out: &[u8], rules: &IgnoreRules) -> Result<Listing, String> {
    let fields: Vec<&[u8]> = out.split(|&b| b == 0).collect();
    let fields = fields.split_last().map_or(&[][..], |(_, f)| f);
    if !fields.len().is_multiple_of(5) || fields.len() / 5 > MAX_ENTRIES {
        return Err("the copy's listing is malformed or too long".into());
    }
    let mut listing = Listing::default();
    for r in fields.chunks(5) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (value, path) = (text(r[1]), text(r[4]));
        let executable = r[2] == b"x";
        let entry = match r[0] {
            b"p" if rules.ignored(&path, true) => continue,
            b"p" => return Err(format!("the copy's listing left out {path:?}")),
            _ if ignored_path(rules, &path) => continue,
            b"f" if value.is_empty() => {
                listing.unreadable.push(path);
                continue;
            }
            b"f" => Entry {
                kind: EntryKind::File,
                value,
                executable,
            },
            b"l" => Entry::link(&value),
            _ => return Err("the copy's listing has an unknown record".into()),
        };
        let size = text(r[3]).parse().unwrap_or(0);
        listing.sizes.insert(path.clone(), size);
        listing.entries.insert(path, entry);
    }
    Ok(listing)
}

/// One path whose copy differs from the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub change: ReviewChangeKind,
    pub base: Option<Entry>,
    pub copy: Option<Entry>,
}

/// The paths added, modified (content, kind or executable bit) or removed between the base
/// and the copy, by path; paths that are not plain UTF-8 on both sides are left out.
pub fn compare(base: &BTreeMap<String, Entry>, copy: &BTreeMap<String, Entry>) -> Vec<Change> {
    let mut paths: Vec<&String> = base.keys().chain(copy.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| {
            let (b, c) = (base.get(path), copy.get(path));
            let change = match (b, c) {
                (None, Some(_)) => ReviewChangeKind::Added,
                (Some(_), None) => ReviewChangeKind::Removed,
                (Some(b), Some(c)) if b != c => ReviewChangeKind::Modified,
                _ => return None,
            };
            Some(Change {
                path: path.clone(),
                change,
                base: b.cloned(),
                copy: c.cloned(),
            })
        })
        .collect()
}

/// Lists the copy (run by `node` in the container, in the workspace folder; `argv[1]`: the
/// ignore rules as `[glob, negated, dirOnly, anchored]` arrays). Folders the rules leave out
/// are not entered (reported as `p`), `.git` is never listed, links are not followed.
const LIST_SCRIPT: &str = r#"
const fs = require('fs'), crypto = require('crypto')
const rules = JSON.parse(process.argv[1]).map(([g, n, d, a]) => [Buffer.from(g), n, d, a])
const glob = (p, i, s, j) => {
  if (i === p.length) return j === s.length
  if (p[i] === 42 && p[i + 1] === 42) { let k = i + 2; if (p[k] === 47) k++; for (let x = j; x <= s.length; x++) if (glob(p, k, s, x)) return true; return false }
  if (p[i] === 42) { let stop = s.indexOf(47, j); if (stop < 0) stop = s.length; for (let x = j; x <= stop; x++) if (glob(p, i + 1, s, x)) return true; return false }
  if (p[i] === 63) return j < s.length && s[j] !== 47 && glob(p, i + 1, s, j + 1)
  return j < s.length && s[j] === p[i] && glob(p, i + 1, s, j + 1)
}
const ignored = (rel, dir) => {
  const whole = Buffer.from(rel), name = Buffer.from(rel.slice(rel.lastIndexOf('/') + 1))
  let out = false
  for (const [g, neg, dirOnly, anchored] of rules) if (!(dirOnly && !dir) && glob(g, 0, anchored ? whole : name, 0)) out = !neg
  return out
}
const hash = (p) => {
  try {
    const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW), h = crypto.createHash('sha256'), buf = Buffer.alloc(1 << 20)
    try { let n; while ((n = fs.readSync(fd, buf)) > 0) h.update(buf.subarray(0, n)) } finally { fs.closeSync(fd) }
    return h.digest('hex')
  } catch { return '' }
}
const out = []
const rec = (...f) => { out.push(Buffer.from(f.join('\0') + '\0')); if (out.length > 200000) { process.stderr.write('more than 200000 files'); process.exit(4) } }
const walk = (rel) => {
  const names = fs.readdirSync(rel || '.', { withFileTypes: true }).sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)))
  for (const d of names) {
    if (d.name === '.git') continue
    const p = rel ? `${rel}/${d.name}` : d.name
    if (ignored(p, d.isDirectory())) { if (d.isDirectory()) rec('p', '', '-', 0, p); continue }
    if (d.isDirectory()) walk(p)
    else if (d.isSymbolicLink()) rec('l', fs.readlinkSync(p), '-', 0, p)
    else if (d.isFile()) { const st = fs.lstatSync(p); rec('f', hash(p), st.mode & 0o111 ? 'x' : '-', st.size, p) }
  }
}
walk('')
fs.writeSync(1, Buffer.concat(out))
"#;

/// Writes the named files and links of the copy (`argv[1..]`), each as two frames
/// (`<length>\n<bytes>`): its kind (`f`, `fx`, `l`, or `n` for anything else) and its content
/// or target.
const FETCH_SCRIPT: &str = r#"
const fs = require('fs')
const frame = (b) => { fs.writeSync(1, `${b.length}\n`); if (b.length) fs.writeSync(1, b) }
for (const p of process.argv.slice(1)) {
  let kind = 'n', body = Buffer.alloc(0)
  try {
    const st = fs.lstatSync(p)
    if (st.isSymbolicLink()) { kind = 'l'; body = Buffer.from(fs.readlinkSync(p)) }
    else if (st.isFile()) {
      const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
      try { body = fs.readFileSync(fd) } finally { fs.closeSync(fd) }
      kind = st.mode & 0o111 ? 'fx' : 'f'
    }
  } catch {}
  frame(Buffer.from(kind)); frame(body)
}
"#;

/// The command that lists the copy with `rules`.
pub fn list_command(rules: &IgnoreRules) -> Vec<String> {
    vec![
        "node".into(),
        "-e".into(),
        LIST_SCRIPT.into(),
        rules.to_json(),
    ]
}

/// The commands that fetch `paths`, in batches short enough for one command line each.
pub fn fetch_commands(paths: &[&str]) -> Vec<Vec<String>> {
    let budget = crate::names::paths::MAX_COMMAND_BYTES - FETCH_SCRIPT.len() - 1024;
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut used = usize::MAX;
    for p in paths {
        if used.saturating_add(p.len() + 1) > budget {
            out.push(vec!["node".into(), "-e".into(), FETCH_SCRIPT.into()]);
            used = 0;
        }
        used += p.len() + 1;
        out.last_mut().expect("a batch").push((*p).into());
    }
    out
}

/// A file or link of the copy and its bytes (a link's: none).
pub type Fetched = (Entry, Vec<u8>);

/// The fetch script's frames as `(path, entry, bytes)`; `None` for what is neither a file nor a
/// link now.
pub fn parse_fetched(paths: &[&str], out: &[u8]) -> Option<Vec<(String, Option<Fetched>)>> {
    let frames = super::unframe(out)?;
    if frames.len() != paths.len() * 2 {
        return None;
    }
    let got = paths
        .iter()
        .zip(frames.chunks(2))
        .map(|(p, f)| {
            let body = f[1].clone();
            let entry = match f[0].as_slice() {
                b"f" => Some(Entry::file(&body, false)),
                b"fx" => Some(Entry::file(&body, true)),
                b"l" => Some(Entry::link(&String::from_utf8_lossy(&body))),
                _ => None,
            };
            (p.to_string(), entry.map(|e| (e, body)))
        })
        .collect();
    Some(got)
}

/// A relative link whose target climbs out of the copy (the engine refuses such an archive).
pub(super) fn escapes(rel: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: i64 = rel.components().count() as i64 - 1;
    for c in target.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}
