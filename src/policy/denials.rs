//! The denials of a Po home's egress proxies, kept for `po-sandbox policy log`:
//! `<poHome>/sandbox-denials.jsonl`, one JSON line per denied connection (when, the workspace,
//! the destination, why; never a path, a header or a body). Bounded: past [`MAX_BYTES`] the file
//! becomes `sandbox-denials.jsonl.1` (the one before is dropped) and a new one starts. Written
//! by the hubs (appends of one line, so hubs of one Po home share it), read by the command.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file's name in the Po home.
pub const FILE: &str = "sandbox-denials.jsonl";
/// The size past which the file is rotated.
pub const MAX_BYTES: u64 = 1 << 20;

/// One denied connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// Seconds since the Unix epoch.
    pub at: u64,
    pub workspace: String,
    pub host: String,
    pub port: u16,
    pub reason: String,
}

/// One writer at a time in this process: the size is checked and the file rotated under it.
static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Appends `d` to `po_home`'s log (rotating it when full). Best effort: a log that cannot be
/// written, or rotated, is said in the trace and not written (never past its bound). A
/// destination that could not be read is kept as `-`, with no reason: the request's words
/// (a path, userinfo) are never kept.
pub fn record(po_home: &Path, d: &Denial) {
    let path = po_home.join(FILE);
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_BYTES)
        && let Err(e) = std::fs::rename(&path, po_home.join(format!("{FILE}.1")))
    {
        tracing::debug!(error = %e, path = %path.display(), "the denials log was not rotated");
        return;
    }
    let kept = match d.port {
        0 => Denial {
            host: "-".into(),
            reason: "the request named no destination that could be read".into(),
            ..d.clone()
        },
        _ => d.clone(),
    };
    let Ok(mut line) = serde_json::to_string(&kept) else {
        return;
    };
    line.push('\n');
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        tracing::debug!(error = %e, path = %path.display(), "the denials log was not written");
    }
}

/// The denials kept, oldest first (lines that do not read are passed over).
pub fn read(po_home: &Path) -> Vec<Denial> {
    [format!("{FILE}.1"), FILE.to_string()]
        .iter()
        .filter_map(|name| std::fs::read_to_string(po_home.join(name)).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str::<Denial>(l).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The denials of one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// `host:port` (the authority as sent when it could not be read).
    pub destination: String,
    pub count: u32,
    /// The last one's time (seconds since the epoch) and reason.
    pub last_at: u64,
    pub last_reason: String,
    pub workspaces: BTreeSet<String>,
}

/// `denials` (of `workspace` only, when given) by destination, the most denied first.
pub fn grouped(denials: &[Denial], workspace: Option<&str>) -> Vec<Group> {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for d in denials
        .iter()
        .filter(|d| workspace.is_none_or(|w| d.workspace == w))
    {
        let destination = match d.port {
            0 => d.host.clone(),
            port => format!("{}:{port}", d.host),
        };
        let g = groups.entry(destination.clone()).or_insert_with(|| Group {
            destination,
            count: 0,
            last_at: 0,
            last_reason: String::new(),
            workspaces: BTreeSet::new(),
        });
        g.count += 1;
        if d.at >= g.last_at {
            (g.last_at, g.last_reason) = (d.at, d.reason.clone());
        }
        g.workspaces.insert(d.workspace.clone());
    }
    let mut list: Vec<Group> = groups.into_values().collect();
    list.sort_by(|a, b| b.count.cmp(&a.count).then(b.last_at.cmp(&a.last_at)));
    list
}

/// Now, in seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long ago `at` was, in words (`12 s ago`, `5 min ago`, `3 h ago`, `2 days ago`).
pub fn ago(at: u64, now: u64) -> String {
    let s = now.saturating_sub(at);
    match s {
        0..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}
