//! Just enough of a git pack to tell whether a push moves a branch forward: the commits it
//! carries (whole, or as deltas on a commit in the same pack), each with its id and parents.
//! Every other object is inflated only to find where the next one starts. A commit the pack
//! does not carry (the server has it) ends a walk: an update is shown to be a fast-forward only
//! when its new commit reaches the old one through commits of the push itself.

use std::collections::{HashMap, HashSet};

use flate2::{Decompress, FlushDecompress, Status};

/// An object id, as lower-case hex (40 digits for SHA-1, 64 for SHA-256 repositories).
pub type Id = String;

/// The commits of a pack: id to parents.
pub type Commits = HashMap<Id, Vec<Id>>;

const COMMIT: u8 = 1;
const OFS_DELTA: u8 = 6;
const REF_DELTA: u8 = 7;
/// The largest object inflated whole (a commit); larger ones are only skipped.
const MAX_COMMIT_BYTES: usize = 1 << 20;
/// The most bytes a pack may inflate to in all (whatever is kept): a pack that inflates to
/// more is not read (and the push refused), so a small body cannot cost the hub gigabytes.
const MAX_INFLATED: usize = 512 << 20;
/// The most commit text kept (bases of deltas).
const MAX_KEPT: usize = 64 << 20;
/// The most passes over deltas whose base by id comes later (a longer chain is not read).
const MAX_PASSES: usize = 8;

/// One entry as read.
enum Entry {
    /// A commit's text.
    Commit(Vec<u8>),
    /// A delta on the entry at that offset, or on the object with that id.
    OnOffset(usize, Vec<u8>),
    OnId(Id, Vec<u8>),
    /// Anything else (trees, blobs, tags; a delta too large to be a commit's).
    Other,
}

/// The commits in `pack` (the bytes from `PACK` on). `sha256`: the repository's ids are
/// SHA-256. A pack that does not read is an error (the push is then refused).
pub fn commits(pack: &[u8], sha256: bool) -> Result<Commits, String> {
    if pack.len() < 12 || &pack[..4] != b"PACK" {
        return Err("the push carries no pack".into());
    }
    let version = u32::from_be_bytes([pack[4], pack[5], pack[6], pack[7]]);
    if version != 2 && version != 3 {
        return Err(format!("pack version {version} is not read"));
    }
    let count = u32::from_be_bytes([pack[8], pack[9], pack[10], pack[11]]) as usize;
    let id_len = if sha256 { 32 } else { 20 };
    let mut pos = 12;
    let mut entries: Vec<(usize, Entry)> = Vec::with_capacity(count.min(1 << 16));
    let (mut inflated, mut kept) = (0usize, 0usize);
    for _ in 0..count {
        let start = pos;
        let (kind, size, after) = header(pack, pos)?;
        pos = after;
        inflated = inflated.saturating_add(size);
        if inflated > MAX_INFLATED {
            return Err(format!(
                "the pack inflates to more than {} MiB",
                MAX_INFLATED >> 20
            ));
        }
        let keep = size <= MAX_COMMIT_BYTES && kept + size <= MAX_KEPT;
        if matches!(kind, COMMIT | OFS_DELTA | REF_DELTA) && keep {
            kept += size;
        }
        let entry = match kind {
            OFS_DELTA => {
                let (back, after) = offset(pack, pos)?;
                pos = after;
                let base = start
                    .checked_sub(back)
                    .ok_or("a delta's base lies before the pack")?;
                let (data, after) = inflate(pack, pos, size, keep)?;
                pos = after;
                data.map_or(Entry::Other, |d| Entry::OnOffset(base, d))
            }
            REF_DELTA => {
                let base = pack
                    .get(pos..pos + id_len)
                    .ok_or("the pack ends inside a delta's base id")?;
                pos += id_len;
                let (data, after) = inflate(pack, pos, size, keep)?;
                pos = after;
                data.map_or(Entry::Other, |d| Entry::OnId(hex::encode(base), d))
            }
            COMMIT => {
                let (data, after) = inflate(pack, pos, size, keep)?;
                pos = after;
                data.map_or(Entry::Other, Entry::Commit)
            }
            2..=4 => {
                pos = inflate(pack, pos, size, false)?.1;
                Entry::Other
            }
            other => return Err(format!("the pack holds an object of unknown type {other}")),
        };
        entries.push((start, entry));
    }
    Ok(resolve(entries, sha256))
}

/// The commits among `entries`, deltas applied to commit bases (repeatedly, since a delta's
/// base by id may come later in the pack). Each text is kept once, and every text kept,
/// resolved ones included, counts against [`MAX_KEPT`]: past it the rest stays unresolved (and
/// shows no forward move).
fn resolve(entries: Vec<(usize, Entry)>, sha256: bool) -> Commits {
    let mut texts: HashMap<usize, Vec<u8>> = HashMap::new();
    let mut ids: HashMap<Id, usize> = HashMap::new();
    let mut kept = 0usize;
    let mut pending = Vec::new();
    for (at, entry) in entries {
        match entry {
            Entry::Commit(text) => {
                kept += text.len();
                ids.insert(object_id(&text, sha256), at);
                texts.insert(at, text);
            }
            Entry::Other => {}
            delta => pending.push((at, delta)),
        }
    }
    for _ in 0..MAX_PASSES {
        let before = pending.len();
        pending.retain(|(at, entry)| {
            if kept > MAX_KEPT {
                return true;
            }
            let (base, delta) = match entry {
                Entry::OnOffset(base, delta) => (texts.get(base), delta),
                Entry::OnId(id, delta) => (ids.get(id).and_then(|b| texts.get(b)), delta),
                _ => return true,
            };
            let Some(base) = base else {
                return true;
            };
            if let Some(text) = apply(base, delta) {
                kept += text.len();
                ids.insert(object_id(&text, sha256), *at);
                texts.insert(*at, text);
            }
            false
        });
        if pending.len() == before {
            break;
        }
    }
    ids.into_iter()
        .filter_map(|(id, at)| texts.get(&at).map(|text| (id, parents(text))))
        .collect()
}

/// Whether `new` reaches `old` through `commits` (`new == old` counts).
pub fn descends(commits: &Commits, new: &str, old: &str) -> bool {
    let mut seen = HashSet::new();
    let mut todo = vec![new.to_string()];
    while let Some(id) = todo.pop() {
        if id == old {
            return true;
        }
        if !seen.insert(id.clone()) {
            continue;
        }
        if let Some(ps) = commits.get(&id) {
            todo.extend(ps.iter().cloned());
        }
    }
    false
}

/// A commit's parents as git reads them: the `parent <id>` lines right after its first line,
/// `tree <id>`, each id exactly the repository's length in lower-case hex. A commit that does
/// not start so has no parents here (it then shows no forward move).
fn parents(text: &[u8]) -> Vec<Id> {
    let is_id = |s: &[u8]| {
        (s.len() == 40 || s.len() == 64)
            && s.iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    };
    let mut lines = text.split(|b| *b == b'\n');
    match lines.next().and_then(|l| l.strip_prefix(b"tree ")) {
        Some(tree) if is_id(tree) => {}
        _ => return Vec::new(),
    }
    lines
        .map_while(|l| l.strip_prefix(b"parent ").filter(|p| is_id(p)))
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// The id git gives a commit with this text.
fn object_id(text: &[u8], sha256: bool) -> Id {
    let head = format!("commit {}\0", text.len());
    if sha256 {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(head.as_bytes());
        h.update(text);
        hex::encode(h.finalize())
    } else {
        let mut h = sha1_smol::Sha1::new();
        h.update(head.as_bytes());
        h.update(text);
        h.digest().to_string()
    }
}

/// An entry's type and inflated size, and where its data (or delta base) starts.
fn header(pack: &[u8], mut pos: usize) -> Result<(u8, usize, usize), String> {
    let mut c = *pack.get(pos).ok_or("the pack ends early")?;
    pos += 1;
    let kind = (c >> 4) & 7;
    let mut size = usize::from(c & 15);
    let mut shift = 4;
    while c & 0x80 != 0 {
        c = *pack.get(pos).ok_or("the pack ends early")?;
        pos += 1;
        size |= usize::from(c & 0x7f)
            .checked_shl(shift)
            .filter(|_| shift <= 56)
            .ok_or("an object's size does not read")?;
        shift += 7;
    }
    Ok((kind, size, pos))
}

/// An OFS_DELTA's distance back to its base.
fn offset(pack: &[u8], mut pos: usize) -> Result<(usize, usize), String> {
    let mut c = *pack.get(pos).ok_or("the pack ends early")?;
    pos += 1;
    let mut back = usize::from(c & 0x7f);
    while c & 0x80 != 0 {
        c = *pack.get(pos).ok_or("the pack ends early")?;
        pos += 1;
        back = back
            .checked_add(1)
            .and_then(|b| b.checked_mul(128))
            .ok_or("a delta's offset does not read")?
            | usize::from(c & 0x7f);
    }
    Ok((back, pos))
}

/// Inflates the zlib stream at `pos` (`size` bytes once inflated): the bytes when `keep`,
/// and where the stream ended.
fn inflate(
    pack: &[u8],
    pos: usize,
    size: usize,
    keep: bool,
) -> Result<(Option<Vec<u8>>, usize), String> {
    let mut z = Decompress::new(true);
    let mut out = Vec::with_capacity(if keep { size } else { 0 });
    let mut scratch = vec![0u8; 32 * 1024];
    loop {
        let input = pack.get(pos + z.total_in() as usize..).unwrap_or_default();
        let before = (z.total_in(), z.total_out());
        let status = match keep {
            true => {
                out.reserve(size.saturating_sub(out.len()).max(64));
                z.decompress_vec(input, &mut out, FlushDecompress::None)
            }
            false => z.decompress(input, &mut scratch, FlushDecompress::None),
        }
        .map_err(|e| format!("an object does not inflate: {e}"))?;
        if z.total_out() as usize > size {
            return Err("an object inflates past its size".into());
        }
        match status {
            Status::StreamEnd => break,
            _ if (z.total_in(), z.total_out()) == before => {
                return Err("the pack ends inside an object".into());
            }
            _ => {}
        }
    }
    if z.total_out() as usize != size {
        return Err("an object inflates to another size than its header says".into());
    }
    Ok((keep.then_some(out), pos + z.total_in() as usize))
}

/// A git delta applied to `base`; `None` when it does not apply.
fn apply(base: &[u8], delta: &[u8]) -> Option<Vec<u8>> {
    let mut pos = 0;
    let mut varint = || {
        let mut n = 0usize;
        let mut shift = 0;
        loop {
            let c = *delta.get(pos)?;
            pos += 1;
            n |= usize::from(c & 0x7f).checked_shl(shift)?;
            shift += 7;
            if c & 0x80 == 0 {
                return Some(n);
            }
        }
    };
    let (src, dst) = (varint()?, varint()?);
    if src != base.len() || dst > MAX_COMMIT_BYTES {
        return None;
    }
    let mut out = Vec::with_capacity(dst);
    while pos < delta.len() {
        let op = delta[pos];
        pos += 1;
        if op & 0x80 != 0 {
            let mut field = |bits: u8, count: usize| {
                let mut v = 0usize;
                for i in 0..count {
                    if bits & (1 << i) != 0 {
                        v |= usize::from(*delta.get(pos)?) << (8 * i);
                        pos += 1;
                    }
                }
                Some(v)
            };
            let off = field(op, 4)?;
            let mut len = field(op >> 4, 3)?;
            if len == 0 {
                len = 0x10000;
            }
            if out.len() + len > dst {
                return None;
            }
            out.extend_from_slice(base.get(off..off.checked_add(len)?)?);
        } else if op != 0 {
            if out.len() + usize::from(op) > dst {
                return None;
            }
            out.extend_from_slice(delta.get(pos..pos + usize::from(op))?);
            pos += usize::from(op);
        } else {
            return None;
        }
    }
    (out.len() == dst).then_some(out)
}
