//! What the agent can make after the container starts, defused for host git: a gitlink in a
//! repository's index (writable inside: commits need it) whose folder holds a `.git` file naming
//! a git folder the agent built. Host `git status` recurses into such a folder and runs that
//! folder's `core.fsmonitor`; `diff.ignoreSubmodules = dirty` in the repository's own config
//! stops it from looking inside a gitlink's folder at all. The layer adds that setting to each
//! repository's config (a guarded file: read-only inside) while a container runs, and takes it
//! away at the stop, unless the index then holds gitlinks it did not hold at the create: those
//! are the agent's, and the setting stays until the person removes them (`review` lists them).

use std::path::{Path, PathBuf};

/// The block the layer appends to a repository's config.
pub const BLOCK: &str = "# po-sandbox: while a sandbox runs (taken away at its stop)\n[diff]\n\tignoreSubmodules = dirty\n";

/// Whether `config`'s text sets `diff.ignoreSubmodules`, as git reads it (gix-config).
pub fn sets_ignore_submodules(config: &str) -> bool {
    super::git::Config::value(config, "diff.ignoreSubmodules").is_some()
}

/// The repository configs (relative to the workspace) of the work trees the guards found: the
/// top `.git/config` and each nested repository's `<dir>/.git/config`, when `.git` is a folder.
pub fn repository_configs(guards: &[String]) -> Vec<String> {
    guards
        .iter()
        .filter(|g| *g == ".git/config" || g.ends_with("/.git/config"))
        .cloned()
        .collect()
}

/// The paths of the gitlinks (mode 160000) in the git index at `index` (versions 2 to 4; sha-1
/// or, with `sha256`, sha-256 object names). A missing index has none.
pub fn gitlinks(index: &Path, sha256: bool) -> std::io::Result<Vec<String>> {
    let bytes = match crate::safe_read::read_regular(index, 512 << 20) {
        Some(b) => b,
        None if !index.exists() => return Ok(vec![]),
        None => return Err(std::io::Error::other("the index cannot be read")),
    };
    parse_gitlinks(&bytes, if sha256 { 32 } else { 20 })
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "not a git index"))
}

fn parse_gitlinks(b: &[u8], hash: usize) -> Option<Vec<String>> {
    let be32 = |at: usize| {
        b.get(at..at + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    };
    if b.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(8)? as usize;
    let (mut at, mut out, mut previous) = (12usize, Vec::new(), Vec::<u8>::new());
    for _ in 0..count {
        let start = at;
        let mode = be32(at + 24)?;
        let flags = u16::from_be_bytes([*b.get(at + 40 + hash)?, *b.get(at + 41 + hash)?]);
        at += 42 + hash;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2;
        }
        let path = if version == 4 {
            let (strip, used) = varint(b.get(at..)?)?;
            at += used;
            let end = at + b.get(at..)?.iter().position(|&c| c == 0)?;
            let keep = previous.len().checked_sub(strip)?;
            let mut p = previous[..keep].to_vec();
            p.extend_from_slice(&b[at..end]);
            at = end + 1;
            p
        } else {
            let end = at + b.get(at..)?.iter().position(|&c| c == 0)?;
            let p = b[at..end].to_vec();
            // Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
            at = start + (end - start + 8) / 8 * 8;
            p
        };
        if mode & 0o170000 == 0o160000 {
            out.push(String::from_utf8_lossy(&path).into_owned());
        }
        previous = path;
    }
    Some(out)
}

/// Git's offset varint (`decode_varint`): the value and the bytes it took.
fn varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *b.first()?;
    let mut value = (c & 127) as usize;
    while c & 128 != 0 {
        i += 1;
        c = *b.get(i)?;
        value = ((value + 1).checked_shl(7)?) | (c & 127) as usize;
    }
    Some((value, i + 1))
}

/// The index beside a repository config (`<git folder>/config` → `<git folder>/index`), and
/// whether the repository names objects by sha-256.
pub fn index_of(ws: &Path, config_rel: &str, config_text: &str) -> (PathBuf, bool) {
    (
        ws.join(config_rel).with_file_name("index"),
        names_by_sha256(config_text),
    )
}

/// Whether a repository config's `extensions.objectFormat` is `sha256`, as git reads it.
pub fn names_by_sha256(config_text: &str) -> bool {
    super::git::Config::value(config_text, "extensions.objectFormat")
        .is_some_and(|v| v.eq_ignore_ascii_case("sha256"))
}

#[cfg(all(test, unix))]
mod tests;
