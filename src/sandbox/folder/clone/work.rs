//! Seeing the agent's work in a git repository's copy (`diff`): what git inside the container
//! reports, run by one shell script through the engine's exec as the container's user, with no
//! hook, fsmonitor, pager, colour, external diff or text conversion. Each answer comes back
//! framed (`<length>\n<bytes>`), so no content can be read as the next one.

use napi_derive::napi;

use crate::error::{Error, Result};
use crate::sandbox::folder::review::{ReviewChangeKind, ReviewClass, class_of};

/// The ref in the copy that records the host's HEAD the copy was made from (the base).
pub const BASE_REF: &str = "refs/po-sandbox/base";

/// The exit code of the scripts when the copy is not a git repository.
const NO_GIT: i64 = 3;

/// What every script starts with: a safe `g` (git), the copy's git folder, the base, HEAD,
/// and the uncommitted work (tracked and untracked files git does not ignore) as a tree `W`
/// written through an index of its own, so the agent's index is left as it is.
const PRELUDE: &str = r#"set -eu
export GIT_PAGER=cat PAGER=cat GIT_TERMINAL_PROMPT=0 LC_ALL=C GIT_NO_LAZY_FETCH=1
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_CONFIG_PARAMETERS
g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.allow=never -c color.ui=never -c core.quotePath=false -c log.showSignature=false "$@"; }
D=$(g rev-parse --absolute-git-dir 2>/dev/null) || exit 3
T="$D/po-sandbox-$$"
trap 'rm -f "$T".*' EXIT
sec() { "$@" >"$T.out"; wc -c <"$T.out" | tr -d ' '; cat "$T.out"; }
E=4b825dc642cb6eb9a060e54bf8d69288fbee4904
H=$(g rev-parse -q --verify 'HEAD^{commit}' || true)
B=$(g rev-parse -q --verify 'refs/po-sandbox/base^{commit}' || true)
HT=$E; [ -z "$H" ] || HT=$(g rev-parse "$H^{tree}")
[ ! -f "$D/index" ] || cp "$D/index" "$T.index"
export GIT_INDEX_FILE="$T.index"
g add -A
W=$(g write-tree)
FROM=${B:-$E}
DIFF="--no-ext-diff --no-textconv --no-renames --no-color"
"#;

/// The diff script's answers: base, HEAD, the commits since the base, then the committed and
/// the uncommitted changes, each as names with modes (`-z --raw`), a stat and a patch.
const DIFF_SCRIPT: &str = r#"
sec printf '%s' "$B"
sec printf '%s' "$H"
if [ -z "$H" ]; then sec true
elif [ -n "$B" ]; then sec g log -z --format='%H%x1f%an <%ae>%x1f%aI%x1f%s' "$B..$H"
else sec g log -z --format='%H%x1f%an <%ae>%x1f%aI%x1f%s' "$H"; fi
sec g diff $DIFF -z --raw "$FROM" "$HT"
sec g diff $DIFF --stat=100 "$FROM" "$HT"
sec g diff $DIFF "$FROM" "$HT"
sec g diff $DIFF -z --raw "$HT" "$W"
sec g diff $DIFF --stat=100 "$HT" "$W"
sec g diff $DIFF "$HT" "$W"
"#;

/// The apply script (`$1`: `commit` or `patch`): base, HEAD, the tip to take, the commit made
/// of the uncommitted work, a bundle of base..tip, and the uncommitted work as a patch. The
/// commit of the uncommitted work has the agent's identity and HEAD's date, so the same work
/// makes the same commit.
const APPLY_SCRIPT: &str = r#"
TIP=$H; U=; P=
if [ "$W" != "$HT" ] && [ "$1" = commit ]; then
  N=$(g config user.name || echo 'Po sandbox agent'); M=$(g config user.email || echo agent@po-sandbox.invalid)
  WHEN='@0 +0000'; [ -z "$H" ] || WHEN=$(g log -1 --format=%cI "$H")
  export GIT_AUTHOR_NAME="$N" GIT_AUTHOR_EMAIL="$M" GIT_COMMITTER_NAME="$N" GIT_COMMITTER_EMAIL="$M"
  export GIT_AUTHOR_DATE="$WHEN" GIT_COMMITTER_DATE="$WHEN"
  U=$(g commit-tree --no-gpg-sign "$W" ${H:+-p "$H"} -m 'Uncommitted work in the sandbox' -m 'Po-Sandbox: uncommitted work')
  TIP=$U
fi
sec printf '%s' "$B"
sec printf '%s' "$H"
sec printf '%s' "$TIP"
sec printf '%s' "$U"
if [ -n "$TIP" ] && [ "$TIP" != "$B" ] && ! { [ -n "$B" ] && g merge-base --is-ancestor "$TIP" "$B"; }; then
  g update-ref refs/po-sandbox/apply "$TIP"
  sec g bundle create -q - refs/po-sandbox/apply ${B:+"^$B"}
  g update-ref -d refs/po-sandbox/apply
else sec true; fi
if [ "$1" = patch ]; then sec g diff $DIFF --binary "$HT" "$W"; else sec true; fi
"#;

/// The command that runs the diff script.
pub fn diff_command() -> Vec<String> {
    vec!["sh".into(), "-c".into(), format!("{PRELUDE}{DIFF_SCRIPT}")]
}

/// The command that runs the apply script; `patch`: the uncommitted work as a patch, not a
/// commit.
pub fn apply_command(patch: bool) -> Vec<String> {
    let mode = if patch { "patch" } else { "commit" };
    let script = format!("{PRELUDE}{APPLY_SCRIPT}");
    vec![
        "sh".into(),
        "-c".into(),
        script,
        "po-sandbox".into(),
        mode.into(),
    ]
}

/// A commit the agent made since the base.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneCommit {
    /// Its id, the same in the copy and, once applied, on the host.
    pub id: String,
    /// `Name <email>`.
    pub author: String,
    /// The author date (ISO 8601).
    pub date: String,
    pub subject: String,
}

/// A file the agent's work changes.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneFile {
    /// Its path below the workspace folder, `/`-separated.
    pub path: String,
    pub change: ReviewChangeKind,
    /// Its host-executed class, when it has one (the classes `review` reports).
    pub class: Option<ReviewClass>,
    /// Why the host may run (or heed) it, with `class`.
    pub reason: Option<String>,
    /// A folder without git's copy: what `apply` does (did) with it.
    pub outcome: Option<super::CloneOutcome>,
    /// A folder without git's copy: why, in words (held back, a conflict, refused).
    pub note: Option<String>,
}

/// One part of the agent's work: the files, a stat and a unified diff.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CloneChanges {
    pub files: Vec<CloneFile>,
    /// `git diff --stat`.
    pub stat: String,
    /// The unified diff (binary files as a line saying they differ).
    pub patch: String,
}

/// What the agent did in a clone-mode sandbox since its copy was made.
#[napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneDiff {
    pub workspace_id: String,
    /// What the copy is of: `git` (a repository: its commits and uncommitted work) or `folder`
    /// (a folder without git: its files against the host's record of what went into the copy,
    /// all in `uncommitted`; no base, head or commits).
    #[napi(ts_type = "'git' | 'folder'")]
    pub kind: String,
    /// The host folder.
    pub path: String,
    /// The host's HEAD the copy was made from (none: the repository had no commit).
    pub base: Option<String>,
    /// The copy's HEAD now.
    pub head: Option<String>,
    /// The commits since the base, newest first.
    pub commits: Vec<CloneCommit>,
    /// From the base to HEAD.
    pub committed: CloneChanges,
    /// From HEAD to the working tree: tracked changes and untracked files git does not ignore.
    pub uncommitted: CloneChanges,
}

/// The answers of a script, unframed: each `<length>\n<bytes>`.
pub fn unframe(out: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut parts = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let nl = at + out[at..].iter().position(|&b| b == b'\n')?;
        let len: usize = std::str::from_utf8(&out[at..nl])
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let end = nl.checked_add(1 + len)?;
        parts.push(out.get(nl + 1..end)?.to_vec());
        at = end;
    }
    Some(parts)
}

/// `n` answers of a script that exited `code`, or the error saying why not.
pub fn answers(
    workspace: &str,
    code: i64,
    stdout: &[u8],
    stderr: &[u8],
    n: usize,
) -> Result<Vec<Vec<u8>>> {
    if code == NO_GIT {
        return Err(Error::NotAClone {
            workspace: workspace.into(),
            reason: "works on a copy of a folder without git, and the host has no record of \
                     what went into it (the copy was made by an older version, or for another \
                     folder): diff and apply need that record. Take what you need with \
                     `po-sandbox exec <folder> -- ...`, then `po-sandbox down --discard` and \
                     bring it up again"
                .into(),
        });
    }
    let err = String::from_utf8_lossy(stderr);
    let parts = unframe(stdout).filter(|p| code == 0 && p.len() == n);
    parts.ok_or_else(|| {
        Error::container(
            workspace,
            format!("git in its copy failed (exit {code}): {}", err.trim()),
        )
    })
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn some(b: &[u8]) -> Option<String> {
    Some(text(b)).filter(|s| !s.is_empty())
}

/// The files of `git diff -z --raw` (`:<old mode> <new mode> <old id> <new id> <status>`, then
/// the path), each with its class: a gitlink the change leaves (mode 160000: a folder host git
/// enters as a submodule) is [`ReviewClass::Gitlink`], a folder's `HEAD` is
/// [`ReviewClass::BareRepository`] when the change also leaves files under its `objects/` and
/// `refs/` (a bare repository's shape once checked out), other files as [`class_of`] says.
pub fn files_of(raw: &[u8]) -> Vec<CloneFile> {
    let mut fields = raw.split(|&b| b == 0).filter(|f| !f.is_empty());
    let mut out = Vec::new();
    while let (Some(header), Some(path)) = (fields.next(), fields.next()) {
        let header = text(header);
        let new_mode = header.trim_start_matches(':').split(' ').nth(1);
        let change = match header.trim_end().chars().last() {
            Some('A') => ReviewChangeKind::Added,
            Some('D') => ReviewChangeKind::Removed,
            _ => ReviewChangeKind::Modified,
        };
        let path = text(path);
        let parts: Vec<&str> = path.split('/').collect();
        let class = match (new_mode, change) {
            (Some("160000"), ReviewChangeKind::Added | ReviewChangeKind::Modified) => {
                Some(ReviewClass::Gitlink)
            }
            _ => class_of(&parts),
        };
        out.push(CloneFile {
            reason: class.map(|c| c.reason().to_string()),
            path,
            change,
            class,
            outcome: None,
            note: None,
        });
    }
    mark_bare_shapes(&mut out);
    out
}

/// Classes as [`ReviewClass::BareRepository`] each `HEAD` (any case) the change leaves beside
/// files under `objects/` and `refs/` of the same folder.
fn mark_bare_shapes(files: &mut [CloneFile]) {
    use crate::sandbox::folder::review::fold;
    let left: Vec<String> = files
        .iter()
        .filter(|f| f.change != ReviewChangeKind::Removed)
        .map(|f| fold(&f.path))
        .collect();
    let bare: Vec<bool> = left
        .iter()
        .map(|p| {
            let (prefix, name) = p.rsplit_once('/').map_or(("", p.as_str()), |(d, n)| (d, n));
            let prefix = if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            };
            let has = |sub: &str| {
                left.iter().any(|q| {
                    q.strip_prefix(prefix.as_str())
                        .is_some_and(|r| r.starts_with(sub))
                })
            };
            name == "head" && has("objects/") && has("refs/")
        })
        .collect();
    let kept = files
        .iter_mut()
        .filter(|f| f.change != ReviewChangeKind::Removed);
    for (f, _) in kept.zip(bare).filter(|(_, bare)| *bare) {
        f.class = Some(ReviewClass::BareRepository);
        f.reason = Some(ReviewClass::BareRepository.reason().to_string());
    }
}

/// The commits of `git log -z --format=%H%x1f%an <%ae>%x1f%aI%x1f%s`. Every record is a
/// commit and is listed, whatever its author and subject hold: the agent chose them, and a
/// `\x1f` in either must not hide a commit. The id is the first field and the date the first
/// later one that reads as git's ISO date; the author is what lies between, the subject the rest.
fn commits_of(log: &[u8]) -> Vec<CloneCommit> {
    log.split(|&b| b == 0)
        .filter(|r| !r.is_empty())
        .filter_map(|r| {
            let f: Vec<&[u8]> = r.split(|&b| b == 0x1f).collect();
            let id = text(f.first()?).trim().to_string();
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let at = (2..f.len())
                .find(|&i| is_iso_date(f[i]))
                .unwrap_or(f.len().min(2));
            let join = |parts: &[&[u8]]| text(&parts.join(&0x1f));
            Some(CloneCommit {
                id,
                author: join(f.get(1..at).unwrap_or_default()),
                date: f.get(at).map(|d| text(d)).unwrap_or_default(),
                subject: join(f.get(at + 1..).unwrap_or_default()),
            })
        })
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SS±HH:MM` (or `Z`), as `%aI` prints it.
fn is_iso_date(b: &[u8]) -> bool {
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    (b.len() == 25 || b.len() == 20)
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && (b[19] == b'Z' || b[19] == b'+' || b[19] == b'-')
}

/// The diff script's answers as a [`CloneDiff`].
pub fn parse_diff(workspace: &str, folder: &str, parts: Vec<Vec<u8>>) -> CloneDiff {
    let p = |i: usize| parts[i].as_slice();
    CloneDiff {
        workspace_id: workspace.into(),
        kind: "git".into(),
        path: folder.into(),
        base: some(p(0)),
        head: some(p(1)),
        commits: commits_of(p(2)),
        committed: CloneChanges {
            files: files_of(p(3)),
            stat: text(p(4)),
            patch: text(p(5)),
        },
        uncommitted: CloneChanges {
            files: files_of(p(6)),
            stat: text(p(7)),
            patch: text(p(8)),
        },
    }
}

/// The number of answers of the diff script.
pub const DIFF_ANSWERS: usize = 9;
/// The number of answers of the apply script.
pub const APPLY_ANSWERS: usize = 6;

/// What the apply script answered.
#[derive(Debug, Default)]
pub struct Work {
    pub tip: Option<String>,
    /// The commit made of the uncommitted work.
    pub uncommitted: Option<String>,
    /// A bundle of base..tip (empty: nothing beyond the base).
    pub bundle: Vec<u8>,
    /// The uncommitted work as a patch (`--patch`).
    pub patch: Vec<u8>,
}

/// The apply script's answers as [`Work`].
pub fn parse_work(mut parts: Vec<Vec<u8>>) -> Work {
    let patch = parts.pop().unwrap_or_default();
    let bundle = parts.pop().unwrap_or_default();
    Work {
        tip: some(&parts[2]),
        uncommitted: some(&parts[3]),
        bundle,
        patch,
    }
}
