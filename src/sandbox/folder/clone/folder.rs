//! `diff` and `apply` of a folder without git's copy: the copy's listing against the host's
//! manifest (the base), each changed path with what the host has there now and what `apply`
//! does with it. The person's own edits are never written over (a conflict), files the host
//! may run come only with `includeExecutable`, nothing at all without `yes`, and a link out of
//! the folder never.

use std::fmt::Write as _;
use std::path::Path;

use napi_derive::napi;

use super::hostfs::{HostFolder, HostSide, aside_name};
use super::manifest::{Change, Entry, EntryKind, Listing, check_path, compare, link_escapes};
use super::work::CloneFile;
use crate::sandbox::folder::guards::DEFAULT_GUARDED_PATHS;
use crate::sandbox::folder::review::{ReviewChangeKind, class_of, fold};

/// Files up to this size get a unified diff (larger ones: a line saying they differ).
pub const TEXT_LIMIT: u64 = 1 << 20;
/// The largest file `apply` writes.
pub const MAX_FILE: u64 = 256 << 20;

/// What `apply` does (did, or would do) with a changed path of a folder copy.
#[napi(string_enum = "kebab-case")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloneOutcome {
    /// Written on the host.
    Written,
    /// Removed on the host.
    Removed,
    /// Would be written or removed: `yes` was not given.
    Pending,
    /// A host-executed class, an executable file or a link: comes only with `includeExecutable`.
    Held,
    /// The host changed it since the copy was made: kept as the person left it.
    Conflict,
    /// The host has it as the copy does already.
    Present,
    /// Never written (a link out of the folder, an odd path, unreadable in the copy, a failed
    /// write).
    Refused,
}

/// One changed path, with what the host has there now.
#[derive(Debug, Clone)]
pub struct Planned {
    pub change: Change,
    pub host: HostSide,
    /// The host's bytes when the host still has the base (and they are small).
    pub host_bytes: Option<Vec<u8>>,
    pub outcome: CloneOutcome,
    pub note: Option<String>,
}

/// Whether `path` is at or under a guarded path: a default one's name at any depth (`.envrc`,
/// `.vscode`, `.pi`...), or an entry of the configured list from the top.
/// Names are compared folded ([`fold`]: `.Claude`, `.VSCode` are `.claude`, `.vscode` to a
/// case-insensitive host).
pub fn guarded(path: &str, configured: &[String]) -> bool {
    let path = fold(path);
    let names = DEFAULT_GUARDED_PATHS.iter().filter(|g| !g.contains('/'));
    let by_name = path.split('/').any(|p| names.clone().any(|n| fold(n) == p));
    by_name
        || configured.iter().any(|g| {
            let g = fold(g.trim_end_matches('/'));
            path == g
                || path
                    .strip_prefix(&g)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
}

/// Why a change needs `includeExecutable`, if it does: its class, a guarded path, a link, an
/// `x` bit.
fn executable_reason(c: &Change, configured: &[String]) -> Option<String> {
    let parts: Vec<&str> = c.path.split('/').collect();
    if let Some(class) = class_of(&parts) {
        return Some(class.reason().into());
    }
    if guarded(&c.path, configured) {
        return Some("host tools run or trust it: a guarded path in bind mode".into());
    }
    match &c.copy {
        Some(Entry {
            kind: EntryKind::Link,
            value,
            ..
        }) => Some(format!("a link (to {value}): host tools follow it")),
        Some(Entry {
            executable: true, ..
        }) => Some("an executable file".into()),
        _ => None,
    }
}

/// What `apply` may write: `yes`, `include_executable`, and the configured guarded paths.
#[derive(Debug, Clone, Default)]
pub struct ApplyRules {
    pub yes: bool,
    pub include_executable: bool,
    pub guarded: Vec<String>,
}

/// What `apply` does with `c` given what the host has there (pure).
pub fn decide(c: &Change, host: &HostSide, rules: &ApplyRules) -> (CloneOutcome, Option<String>) {
    let (include_executable, yes) = (rules.include_executable, rules.yes);
    use CloneOutcome::*;
    if let Err(why) = check_path(&c.path) {
        return (Refused, Some(format!("never written: {why}")));
    }
    if let Some(Entry {
        kind: EntryKind::Link,
        value,
        ..
    }) = &c.copy
        && link_escapes(&c.path, value)
    {
        return (
            Refused,
            Some(format!(
                "never written: a link out of the folder (to {value})"
            )),
        );
    }
    if host.is(c.copy.as_ref()) {
        return (Present, Some("the host has it as the copy does".into()));
    }
    if !host.is(c.base.as_ref()) {
        let why = match host {
            HostSide::Other(why) => why.clone(),
            _ => "the host's file changed since the copy was made".into(),
        };
        return (Conflict, Some(format!("{why}: kept as it is")));
    }
    if let Some(why) = executable_reason(c, &rules.guarded).filter(|_| !include_executable) {
        return (
            Held,
            Some(format!(
                "held back ({why}): comes with --include-executable"
            )),
        );
    }
    if !yes {
        let what = if c.copy.is_some() {
            "written"
        } else {
            "removed"
        };
        return (Pending, Some(format!("{what} with --yes")));
    }
    match c.copy {
        Some(_) => (Written, None),
        None => (Removed, None),
    }
}

/// The changes between the manifest's entries and the listing, each with the host's side and
/// its outcome; files the copy could not read are refused (never taken for removed). Blocking.
pub fn plan(
    folder: &Path,
    base: &std::collections::BTreeMap<String, Entry>,
    listing: &Listing,
    rules: &ApplyRules,
) -> std::io::Result<Vec<Planned>> {
    let host = HostFolder::open(folder)?;
    let mut out: Vec<Planned> = compare(base, &listing.entries)
        .into_iter()
        .filter(|c| !listing.unreadable.contains(&c.path))
        .map(|change| {
            let (side, bytes) = match check_path(&change.path) {
                Ok(()) => host.state(&change.path, TEXT_LIMIT),
                Err(why) => (HostSide::Other(why.into()), None),
            };
            let (outcome, note) = decide(&change, &side, rules);
            let host_bytes = bytes.filter(|_| side.is(change.base.as_ref()));
            Planned {
                change,
                host: side,
                host_bytes,
                outcome,
                note,
            }
        })
        .collect();
    for path in &listing.unreadable {
        let change = Change {
            path: path.clone(),
            change: ReviewChangeKind::Modified,
            base: base.get(path).cloned(),
            copy: None,
        };
        out.push(Planned {
            change,
            host: HostSide::Absent,
            host_bytes: None,
            outcome: CloneOutcome::Refused,
            note: Some("the copy's file cannot be read".into()),
        });
    }
    out.sort_by(|a, b| a.change.path.cmp(&b.change.path));
    Ok(out)
}

/// A planned change as a [`CloneFile`].
pub fn file_of(p: &Planned) -> CloneFile {
    let parts: Vec<&str> = p.change.path.split('/').collect();
    let class = class_of(&parts);
    CloneFile {
        path: p.change.path.clone(),
        change: p.change.change,
        class,
        reason: class.map(|c| c.reason().to_string()),
        outcome: Some(p.outcome),
        note: p.note.clone(),
    }
}

/// Text as a diff shows it: a link as its target, a file's bytes when they are text.
fn side_text(entry: Option<&Entry>, bytes: Option<&[u8]>) -> Option<String> {
    match entry {
        None => Some(String::new()),
        Some(Entry {
            kind: EntryKind::Link,
            value,
            ..
        }) => Some(format!("{value}\n")),
        Some(_) => bytes
            .filter(|b| !b.contains(&0))
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(str::to_string),
    }
}

/// The unified diff of a folder copy's changes and a stat of them; `copy_bytes` gives the
/// copy's bytes of the small files.
pub fn patch_of(
    planned: &[Planned],
    copy_bytes: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> (String, String) {
    let (mut patch, mut stat) = (String::new(), String::new());
    let (mut plus, mut minus) = (0usize, 0usize);
    for p in planned {
        let c = &p.change;
        let (a, b) = match c.change {
            ReviewChangeKind::Added => ("/dev/null".to_string(), format!("b/{}", c.path)),
            ReviewChangeKind::Removed => (format!("a/{}", c.path), "/dev/null".to_string()),
            ReviewChangeKind::Modified => (format!("a/{}", c.path), format!("b/{}", c.path)),
        };
        let host_has_base = p.host.is(c.base.as_ref());
        let old = if host_has_base || c.base.is_none() {
            side_text(c.base.as_ref(), p.host_bytes.as_deref())
        } else {
            let _ = writeln!(
                patch,
                "# {}: the host's file changed since the copy was made; the copy's version:",
                c.path
            );
            Some(String::new())
        };
        let new = side_text(c.copy.as_ref(), copy_bytes(&c.path).as_deref());
        let _ = writeln!(patch, "diff {a} {b}");
        match (old, new) {
            (Some(old), Some(new)) => {
                let diff = similar::TextDiff::configure()
                    .timeout(std::time::Duration::from_secs(2))
                    .diff_lines(&old, &new);
                let (mut add, mut del) = (0, 0);
                for ch in diff.iter_all_changes() {
                    match ch.tag() {
                        similar::ChangeTag::Insert => add += 1,
                        similar::ChangeTag::Delete => del += 1,
                        similar::ChangeTag::Equal => {}
                    }
                }
                let _ = write!(
                    patch,
                    "{}",
                    diff.unified_diff().context_radius(3).header(&a, &b)
                );
                let _ = writeln!(stat, " {} | +{add} -{del}", c.path);
                (plus, minus) = (plus + add, minus + del);
            }
            _ => {
                let _ = writeln!(patch, "Binary or large files {a} and {b} differ");
                let _ = writeln!(stat, " {} | binary or large", c.path);
            }
        }
    }
    if !planned.is_empty() {
        let _ = writeln!(
            stat,
            " {} files changed, {plus} insertions(+), {minus} deletions(-)",
            planned.len()
        );
    }
    (patch, stat)
}

/// The paths whose copy bytes a diff shows (small files).
pub fn diff_fetch<'a>(planned: &'a [Planned], listing: &Listing) -> Vec<&'a str> {
    planned
        .iter()
        .filter(|p| matches!(&p.change.copy, Some(e) if e.kind == EntryKind::File))
        .filter(|p| {
            listing
                .sizes
                .get(&p.change.path)
                .is_some_and(|&s| s <= TEXT_LIMIT)
        })
        .map(|p| p.change.path.as_str())
        .collect()
}

/// The files `apply` writes: to be fetched from the copy; a file over [`MAX_FILE`] is refused.
pub fn apply_fetch<'a>(planned: &'a mut [Planned], listing: &Listing) -> Vec<&'a str> {
    for p in planned.iter_mut() {
        let big = listing
            .sizes
            .get(&p.change.path)
            .is_some_and(|&s| s > MAX_FILE);
        if p.outcome == CloneOutcome::Written && big {
            p.outcome = CloneOutcome::Refused;
            p.note = Some(format!("never written: larger than {MAX_FILE} bytes"));
        }
    }
    planned
        .iter()
        .filter(|p| p.outcome == CloneOutcome::Written)
        .map(|p| p.change.path.as_str())
        .collect()
}

/// Writes and removes what the plan says (blocking), each only when the host still has what
/// the plan saw and the copy's fetched file is what the listing said; a failure is that file's
/// refusal, the others go on. The names written aside are listed first in `journal` (a file of
/// the Po home's, never the folder's), and the journal goes when the writes are done: an apply
/// killed between the two leaves them listed, and the next command sweeps them
/// ([`sweep_asides`]).
pub fn write(
    folder: &Path,
    planned: &mut [Planned],
    fetched: &std::collections::HashMap<String, (Entry, Vec<u8>)>,
    journal: &Path,
) -> std::io::Result<()> {
    sweep_asides(journal);
    let host = HostFolder::open(folder)?;
    let mut asides = Vec::new();
    for p in planned.iter() {
        if p.outcome == CloneOutcome::Written {
            asides.push((p.change.path.clone(), aside_name()?));
        }
    }
    let record = Journal {
        pid: std::process::id(),
        folder: folder.to_path_buf(),
        asides: asides.clone(),
    };
    if !asides.is_empty() {
        let text = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        if let Some(dir) = journal.parent() {
            crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true))
                .create(dir)?;
        }
        crate::write_aside::write_whole(journal, &text, true)?;
    }
    let mut names = asides.into_iter().map(|(_, a)| a);
    for p in planned.iter_mut() {
        let done = match p.outcome {
            CloneOutcome::Removed => host.put(&p.change.path, &p.host, None, ""),
            CloneOutcome::Written => {
                let aside = names.next().unwrap_or_default();
                match fetched.get(&p.change.path) {
                    Some((e, bytes)) if Some(e) == p.change.copy.as_ref() => {
                        host.put(&p.change.path, &p.host, Some((e, bytes)), &aside)
                    }
                    _ => Err(std::io::Error::other(
                        "the copy's file changed while it was applied; apply again",
                    )),
                }
            }
            _ => continue,
        };
        if let Err(e) = done {
            p.outcome = CloneOutcome::Refused;
            p.note = Some(format!("not written: {e}"));
        }
    }
    let _ = std::fs::remove_file(journal);
    Ok(())
}

/// The names an apply writes aside, listed before it writes them.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Journal {
    /// The applying process.
    pub pid: u32,
    /// The workspace folder.
    pub folder: std::path::PathBuf,
    /// (a file's path in the folder, the name written aside beside it).
    pub asides: Vec<(String, String)>,
}

/// Where a workspace's apply journal lives: beside its manifest, `<id>.applying`.
pub fn journal_path(manifest: &Path) -> std::path::PathBuf {
    manifest.with_extension("applying")
}

/// Removes what an earlier apply, killed mid-write, left aside in the folder (each listed name
/// that is still a file or link of that name, reached through no link), then its journal. A
/// journal of a process that still runs is left to it. Returns the names removed.
pub fn sweep_asides(journal: &Path) -> Vec<String> {
    let Some(record) = crate::safe_read::read_regular(journal, 16 << 20)
        .and_then(|b| serde_json::from_slice::<Journal>(&b).ok())
    else {
        return vec![];
    };
    if record.pid == std::process::id() || still_runs(record.pid) {
        return vec![];
    }
    let mut removed = Vec::new();
    if let Ok(host) = HostFolder::open(&record.folder) {
        for (path, aside) in &record.asides {
            if host.remove_aside(path, aside).unwrap_or(false) {
                removed.push(format!("{path} ({aside})"));
            }
        }
    }
    if !removed.is_empty() {
        tracing::info!(folder = %record.folder.display(), ?removed, "files an interrupted apply wrote aside: removed");
    }
    let _ = std::fs::remove_file(journal);
    removed
}

/// Whether a process with this pid runs on this host.
fn still_runs(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// What `apply` says it did.
pub fn message(planned: &[Planned], yes: bool) -> String {
    let count = |o: CloneOutcome| planned.iter().filter(|p| p.outcome == o).count();
    if planned.is_empty() {
        return "The copy has no change against what went into it: nothing to write.".into();
    }
    let mut said = vec![];
    for (o, what) in [
        (CloneOutcome::Written, "written"),
        (CloneOutcome::Removed, "removed"),
        (CloneOutcome::Pending, "to write or remove with --yes"),
        (CloneOutcome::Present, "already as in the copy"),
        (
            CloneOutcome::Held,
            "held back (host-executed; --include-executable)",
        ),
        (
            CloneOutcome::Conflict,
            "changed on the host meanwhile, kept (conflict)",
        ),
        (CloneOutcome::Refused, "refused"),
    ] {
        let n = count(o);
        if n > 0 {
            said.push(format!("{n} {what}"));
        }
    }
    let head = if yes {
        "Applied to the folder"
    } else {
        "Nothing written (no --yes)"
    };
    format!("{head}: {}.", said.join(", "))
}
