//! `review`: the files of a workspace the host may run although they are the agent's
//! legitimate work (package scripts, Makefiles, cargo and yarn configuration, workflows, agent
//! instructions, nested repositories), compared with a baseline of their hashes taken on the
//! host when the container was made and kept outside the workspace and every mount.

mod classes;
pub(crate) mod walk;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use napi_derive::napi;

pub use classes::{ReviewClass, class_of, fold};
pub use walk::{Fingerprint, snapshot};

use crate::error::{Error, Result};
use crate::sandbox::folder::workspace::Workspace;

/// The version of the baseline file's shape.
const BASELINE_VERSION: u32 = 1;

/// A baseline file larger than this is not read (50,000 entries stay far below it).
const MAX_BASELINE: u64 = 64 << 20;

/// How a reviewed file changed since the baseline.
#[napi(string_enum = "lowercase")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewChangeKind {
    Added,
    Modified,
    Removed,
}

/// One reviewed file that changed since the baseline.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewChange {
    /// Its path below the workspace folder, `/`-separated.
    pub path: String,
    pub class: ReviewClass,
    /// Why the host may run (or heed) it.
    pub reason: String,
    pub change: ReviewChangeKind,
    /// What changed, where known: for a `package.json`, the scripts added, changed, removed.
    pub detail: Option<String>,
}

/// What `review` found in a workspace.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceReview {
    pub workspace_id: String,
    /// The workspace folder.
    pub path: String,
    /// When the baseline was taken (ISO 8601, UTC).
    pub since: String,
    /// `false` when the baseline or this walk hit a limit (depth 12, 50,000 entries) or met an
    /// unreadable folder: files beyond it are not compared.
    pub complete: bool,
    /// The reviewed files added, modified or removed since; nothing for untouched files.
    pub changes: Vec<ReviewChange>,
}

/// The baseline file: the reviewed files' fingerprints when the container was made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Baseline {
    pub version: u32,
    pub workspace_id: String,
    pub path: String,
    pub since: String,
    pub complete: bool,
    pub files: BTreeMap<String, Fingerprint>,
}

/// Where a workspace's baseline lives: `<poHome>/sandbox-review/<owner>/<id>.json`, beside the
/// token files and like them never mounted into a container.
pub fn baseline_path(po_home: &Path, owner: &str, workspace_id: &str) -> PathBuf {
    po_home
        .join("sandbox-review")
        .join(owner)
        .join(format!("{workspace_id}.json"))
}

/// Takes a workspace's baseline unless it has one for the same folder (a container replaced
/// without a stop keeps the older one, so what its agent wrote still shows). Says whether it
/// wrote one.
pub fn ensure_baseline(path: &Path, ws: &Workspace, now_secs: i64) -> std::io::Result<bool> {
    let kept = crate::safe_read::read_regular(path, MAX_BASELINE)
        .and_then(|bytes| serde_json::from_slice::<Baseline>(&bytes).ok())
        .is_some_and(|b| Path::new(&b.path) == ws.path);
    if kept {
        return Ok(false);
    }
    let snap = snapshot(&ws.path);
    let baseline = Baseline {
        version: BASELINE_VERSION,
        workspace_id: ws.id.clone(),
        path: ws.path.to_string_lossy().into_owned(),
        since: iso_utc(now_secs),
        complete: snap.complete,
        files: snap.files,
    };
    write_aside(path, &serde_json::to_vec_pretty(&baseline)?)?;
    Ok(true)
}

/// Writes `bytes` to `path` (mode 0600, folder 0700) through a new file renamed over it, so a
/// reader never sees half a file and no link is followed.
fn write_aside(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("baselines live in a folder");
    crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true)).create(dir)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut open = std::fs::OpenOptions::new();
    let mut f = crate::platform::private_files(open.write(true).create_new(true)).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Removes a workspace's baseline (with its stop, as its token file goes).
pub fn remove_baseline(po_home: &Path, owner: &str, workspace_id: &str) {
    let _ = std::fs::remove_file(baseline_path(po_home, owner, workspace_id));
}

/// As [`review`], off the async threads (the walk reads the disk).
pub async fn review_off_thread(
    po_home: PathBuf,
    owner: String,
    workspace_id: String,
) -> Result<WorkspaceReview> {
    let id = workspace_id.clone();
    tokio::task::spawn_blocking(move || review(&po_home, &owner, &id))
        .await
        .map_err(|e| Error::ReviewUnavailable {
            workspace: workspace_id,
            reason: format!("the review stopped: {e}"),
        })?
}

/// Compares the workspace's reviewed files now with its baseline. `REVIEW_UNAVAILABLE` when it
/// has none (or it cannot be read), `WORKSPACE_INVALID` for a bad id.
pub fn review(po_home: &Path, owner: &str, workspace_id: &str) -> Result<WorkspaceReview> {
    crate::sandbox::folder::workspace::check_id(workspace_id)?;
    let path = baseline_path(po_home, owner, workspace_id);
    let unavailable = |reason: String| Error::ReviewUnavailable {
        workspace: workspace_id.to_string(),
        reason,
    };
    let bytes = crate::safe_read::read_regular(&path, MAX_BASELINE).ok_or_else(|| {
        unavailable(format!(
            "it has no baseline ({} is missing)",
            path.display()
        ))
    })?;
    let baseline: Baseline = serde_json::from_slice(&bytes).map_err(|e| {
        unavailable(format!(
            "its baseline {} is unreadable: {e}",
            path.display()
        ))
    })?;
    let now = snapshot(Path::new(&baseline.path));
    Ok(WorkspaceReview {
        workspace_id: baseline.workspace_id.clone(),
        changes: compare(&baseline.files, &now.files),
        complete: baseline.complete && now.complete,
        path: baseline.path,
        since: baseline.since,
    })
}

/// The reviewed files added, modified or removed between `before` and `after`, by path.
pub fn compare(
    before: &BTreeMap<String, Fingerprint>,
    after: &BTreeMap<String, Fingerprint>,
) -> Vec<ReviewChange> {
    let mut paths: Vec<&String> = before.keys().chain(after.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| {
            let (old, new) = (before.get(path), after.get(path));
            let (change, print) = match (old, new) {
                (None, Some(n)) => (ReviewChangeKind::Added, n),
                (Some(o), None) => (ReviewChangeKind::Removed, o),
                (Some(o), Some(n)) if o.hash != n.hash || o.class != n.class => {
                    (ReviewChangeKind::Modified, n)
                }
                _ => return None,
            };
            Some(ReviewChange {
                path: path.clone(),
                class: print.class,
                reason: print.class.reason().to_string(),
                change,
                detail: scripts_detail(old, new),
            })
        })
        .collect()
}

/// Which scripts were added, changed and removed, when either side has parsed scripts.
fn scripts_detail(old: Option<&Fingerprint>, new: Option<&Fingerprint>) -> Option<String> {
    let scripts = |f: Option<&Fingerprint>| f.and_then(|f| f.scripts.clone());
    let (before, after) = (scripts(old), scripts(new));
    if before.is_none() && after.is_none() {
        return None;
    }
    if old.is_some() && new.is_some() && (before.is_none() || after.is_none()) {
        let now = if after.is_none() { "not" } else { "now" };
        return Some(format!(
            "{now} a JSON object: its scripts cannot be compared"
        ));
    }
    let (before, after) = (before.unwrap_or_default(), after.unwrap_or_default());
    let names = |keep: &dyn Fn(&String) -> bool, from: &BTreeMap<String, String>| {
        let list: Vec<&str> = from
            .keys()
            .filter(|k| keep(k))
            .map(String::as_str)
            .collect();
        list.join(", ")
    };
    let parts = [
        ("added", names(&|k| !before.contains_key(k), &after)),
        (
            "changed",
            names(&|k| before.get(k).is_some_and(|v| after[k] != *v), &after),
        ),
        ("removed", names(&|k| !after.contains_key(k), &before)),
    ];
    let said: Vec<String> = parts
        .iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(what, list)| format!("scripts {what}: {list}"))
        .collect();
    Some(if said.is_empty() {
        "no scripts".into()
    } else {
        said.join("; ")
    })
}

/// Unix seconds as ISO 8601 UTC (`2026-12-01T10:00:00Z`).
pub fn iso_utc(secs: i64) -> String {
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // The civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(all(test, unix))]
mod tests;
