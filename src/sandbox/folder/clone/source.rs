//! What goes into a workspace's copy, prepared on the host as one tar file in a private temporary
//! folder: for a git repository, a fresh `.git` (objects fetched from a `git bundle` of HEAD, every
//! local branch and tag; a new config; no hooks, info or remote of the host's) and the working
//! tree as the person sees it (tracked files as they are now, untracked files git does not
//! ignore); for a folder without git, its files but what `.posandboxignore` lists. Every entry
//! is owned by the container's user; nothing under a `.git` of the host is ever read into it.

use std::collections::BTreeSet;
use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use super::ignore::IgnoreRules;
use super::manifest::{Entry, Manifest, escapes};
use crate::host::UserIds;

/// Where the copy's `origin` points: a path that can never be a repository (`/dev/null` is
/// not a folder), so a push or fetch from inside fails at once, offline.
pub const NO_REMOTE: &str = "/dev/null/po-sandbox-copy";

/// A workspace's copy, ready to upload; its temporary folder goes when it is dropped.
#[derive(Debug)]
pub struct PreparedCopy {
    dir: PathBuf,
    /// The tar file.
    pub tar: PathBuf,
    /// Files, links and folders in it.
    pub entries: usize,
    /// The folder is a git repository (its copy carries a fresh `.git`).
    pub git: bool,
    /// A folder without git: the record of what went into the copy (its workspace id is set
    /// by the caller).
    pub manifest: Option<Manifest>,
}

impl Drop for PreparedCopy {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Prepares the copy of `folder` (blocking: run it off the async threads).
pub fn prepare(folder: &Path, user: UserIds) -> io::Result<PreparedCopy> {
    let dir = private_temp_dir("copy")?;
    let mut copy = PreparedCopy {
        tar: dir.join("copy.tar"),
        dir,
        entries: 0,
        git: false,
        manifest: None,
    };
    let mut tar = CopyTar::create(&copy.tar, user)?;
    if folder.join(".git").exists() {
        copy.git = true;
        let fresh = copy.dir.join("work");
        fresh_repository(folder, &fresh, &copy.dir)?;
        tar.tree(&fresh.join(".git"), Path::new(".git"))?;
        for rel in working_tree(folder)? {
            tar.path(folder, &rel)?;
        }
    } else {
        let text = IgnoreRules::text_of_folder(folder);
        tar.record = Some(Manifest::new("", folder, text.clone()));
        tar.folder(folder, Path::new(""), &IgnoreRules::parse(&text))?;
        copy.manifest = tar.record.take();
    }
    copy.entries = tar.finish()?;
    Ok(copy)
}

/// A folder only this user can read, under the system's temporary folder:
/// `po-sandbox-<what>-<pid>-<random>` (whose process made it shows in its name).
pub fn private_temp_dir(what: &str) -> io::Result<PathBuf> {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(io::Error::other)?;
    let name = format!(
        "po-sandbox-{what}-{}-{}",
        std::process::id(),
        hex::encode(random)
    );
    let dir = std::env::temp_dir().join(name);
    // Made with its mode (never wider for a moment, whatever the umask), never chmod'ed after.
    crate::platform::private_dirs(&mut fs::DirBuilder::new()).create(&dir)?;
    Ok(dir)
}

/// A file's permission bits (elsewhere than Unix: the usual ones for its kind).
fn mode_of(meta: &Metadata) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.mode()
    }
    #[cfg(not(unix))]
    {
        if meta.is_dir() { 0o755 } else { 0o644 }
    }
}

/// Host git, in `dir`, with nothing of the repository's own that could run: no fsmonitor, no
/// hooks, no prompt, and none of the caller's `GIT_*` redirections.
pub(super) fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(dir);
    c.args([
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
    ]);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
    ] {
        c.env_remove(var);
    }
    c.env("GIT_TERMINAL_PROMPT", "0");
    c.stdin(std::process::Stdio::null());
    c
}

/// Runs it; its standard output, or an error with its standard error.
pub(super) fn run(mut c: Command) -> io::Result<Vec<u8>> {
    let out = c.output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot run git ({e}); install git to copy a git repository"),
        )
    })?;
    if !out.status.success() {
        let args: Vec<String> = c
            .get_args()
            .skip(6)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return Err(io::Error::other(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// Runs it; `None` when it fails (a question git answers with its exit code).
pub(super) fn answer(c: Command) -> Option<String> {
    run(c)
        .ok()
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// A new repository at `fresh` holding the objects of `folder`'s HEAD, branches and tags (moved
/// as one bundle), with its HEAD, an index of HEAD, and a config of its own.
fn fresh_repository(folder: &Path, fresh: &Path, tmp: &Path) -> io::Result<()> {
    let template = tmp.join("template");
    fs::create_dir(&template)?;
    let mut init = git(tmp);
    let mut template_arg = std::ffi::OsString::from("--template=");
    template_arg.push(&template);
    init.args(["init", "-q"]).arg(template_arg);
    init.arg(fresh);
    run(init)?;
    let head = answer(with(git(folder), &["rev-parse", "--verify", "-q", "HEAD"]));
    let branch = answer(with(git(folder), &["symbolic-ref", "-q", "HEAD"]));
    if let Some(head) = &head {
        let bundle = tmp.join("repo.bundle");
        let mut create = with(git(folder), &["bundle", "create", "-q"]);
        create.arg(&bundle).args(["HEAD", "--branches", "--tags"]);
        run(create)?;
        let mut fetch = with(
            git(fresh),
            &["fetch", "-q", "--no-tags", "--update-head-ok"],
        );
        fetch
            .arg(&bundle)
            .args(["refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*"]);
        run(fetch)?;
        fs::remove_file(&bundle)?;
        let _ = fs::remove_file(fresh.join(".git/FETCH_HEAD"));
        match &branch {
            Some(b) => run(with(git(fresh), &["symbolic-ref", "HEAD", b]))?,
            None => run(with(
                git(fresh),
                &["update-ref", "--no-deref", "HEAD", head],
            ))?,
        };
        run(with(git(fresh), &["read-tree", "HEAD"]))?;
        run(with(git(fresh), &["update-ref", super::BASE_REF, head]))?;
    } else if let Some(b) = &branch {
        run(with(git(fresh), &["symbolic-ref", "HEAD", b]))?;
    }
    fresh_config(folder, fresh)
}

/// The copy's config: `origin` at [`NO_REMOTE`], and the person's name and email as git on the
/// host resolves them for this folder.
fn fresh_config(folder: &Path, fresh: &Path) -> io::Result<()> {
    let set = |k: &str, v: &str| run(with(git(fresh), &["config", k, v]));
    set("remote.origin.url", NO_REMOTE)?;
    set("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")?;
    for key in ["user.name", "user.email"] {
        if let Some(v) = answer(with(git(folder), &["config", key])) {
            set(key, &v)?;
        }
    }
    Ok(())
}

fn with(mut c: Command, args: &[&str]) -> Command {
    c.args(args);
    c
}

/// The working tree as the person sees it: every tracked file and every untracked one git does
/// not ignore, relative; none inside a `.git` (a nested repository's) or a nested repository,
/// and no untracked file at or under a guarded path (`.envrc`, `.vscode`, `.pi`...: what the
/// person keeps beside the project, often secrets; a tracked one is in the history anyway).
fn working_tree(folder: &Path) -> io::Result<Vec<PathBuf>> {
    // `-t`: each path after a tag, `H ` tracked, `? ` untracked.
    let listed = run(with(
        git(folder),
        &[
            "ls-files",
            "-z",
            "-t",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    ))?;
    Ok(copied_paths(&listed))
}

/// The paths to copy of `git ls-files -z -t` output (see [`working_tree`]).
pub(super) fn copied_paths(listed: &[u8]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = listed
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let (tag, p) = (entry.get(..2)?, entry.get(2..)?);
            let p = String::from_utf8_lossy(p).into_owned();
            let kept_out = tag == b"? " && super::guarded(&p, &[]);
            let listed = !p.is_empty() && !p.ends_with('/');
            (listed && !kept_out).then(|| PathBuf::from(p))
        })
        .filter(|p| plain_relative(p) && !p.components().any(|c| c.as_os_str() == ".git"))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Only normal components: nothing that climbs out or starts at the root.
fn plain_relative(p: &Path) -> bool {
    p.components().all(|c| matches!(c, Component::Normal(_)))
}

/// The tar being written: every entry owned by the container's user, each folder once and
/// before what it holds.
struct CopyTar {
    builder: tar::Builder<BufWriter<File>>,
    user: UserIds,
    dirs: BTreeSet<PathBuf>,
    entries: usize,
    /// A folder without git: what went in, recorded as it is written.
    record: Option<Manifest>,
}

impl CopyTar {
    /// A new tar whose first entry is the copy's root (named `/`, which the engine applies to
    /// the folder it extracts into, so the volume's root is the user's too).
    fn create(path: &Path, user: UserIds) -> io::Result<CopyTar> {
        let mut builder = tar::Builder::new(BufWriter::new(File::create(path)?));
        builder.follow_symlinks(false);
        let mut root = CopyTar {
            builder,
            user,
            dirs: BTreeSet::new(),
            entries: 0,
            record: None,
        };
        let mut h = root.header(tar::EntryType::Directory, 0o755, 0);
        h.as_old_mut().name[0] = b'/';
        h.set_cksum();
        root.builder.append(&h, io::empty())?;
        Ok(root)
    }

    fn header(&self, kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_uid(self.user.uid.into());
        h.set_gid(self.user.gid.into());
        h.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        h
    }

    /// The folders on the way to `rel`, each once.
    fn parents(&mut self, rel: &Path) -> io::Result<()> {
        let mut at = PathBuf::new();
        let parent = rel.parent().unwrap_or(Path::new(""));
        for c in parent.components() {
            at.push(c);
            if self.dirs.insert(at.clone()) {
                let mut h = self.header(tar::EntryType::Directory, 0o755, 0);
                self.builder.append_data(&mut h, &at, io::empty())?;
                self.entries += 1;
            }
        }
        Ok(())
    }

    /// `root/rel` as it is on the host (a file, a link, or a folder's own entry), not
    /// following links; a vanished path is skipped.
    fn path(&mut self, root: &Path, rel: &Path) -> io::Result<()> {
        let full = root.join(rel);
        let meta = match fs::symlink_metadata(&full) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        self.parents(rel)?;
        self.entry(&full, rel, &meta)
    }

    fn entry(&mut self, full: &Path, rel: &Path, meta: &Metadata) -> io::Result<()> {
        let mode = mode_of(meta) & 0o1777;
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = fs::read_link(full)?;
            if escapes(rel, &target) {
                tracing::debug!(path = %rel.display(), "a link out of the folder is not copied");
                return Ok(());
            }
            let mut h = self.header(tar::EntryType::Symlink, 0o777, 0);
            self.builder.append_link(&mut h, rel, &target)?;
            if let (Some(m), Some(t)) = (self.record.as_mut(), target.to_str()) {
                m.entries.insert(slashed(rel), Entry::link(t));
            }
        } else if kind.is_dir() {
            if !self.dirs.insert(rel.to_path_buf()) {
                return Ok(());
            }
            let mut h = self.header(tar::EntryType::Directory, mode | 0o700, 0);
            self.builder.append_data(&mut h, rel, io::empty())?;
        } else if kind.is_file() {
            let mut h = self.header(tar::EntryType::Regular, mode | 0o600, meta.len());
            let mut read = Hashing(File::open(full)?, sha2::Sha256::default());
            self.builder.append_data(&mut h, rel, &mut read)?;
            if let Some(m) = self.record.as_mut() {
                let digest = hex::encode(sha2::Digest::finalize(read.1));
                let entry = Entry {
                    kind: super::manifest::EntryKind::File,
                    value: digest,
                    executable: mode & 0o111 != 0,
                };
                m.entries.insert(slashed(rel), entry);
            }
        } else {
            // Sockets, pipes, devices: not part of a copy.
            return Ok(());
        }
        self.entries += 1;
        Ok(())
    }

    /// `root` (a folder of the host, or the fresh `.git`) under `at`, every entry.
    fn tree(&mut self, root: &Path, at: &Path) -> io::Result<()> {
        self.folder_with(root, at, &|_, _| false)
    }

    /// A folder without git: everything but what `rules` leave out and any `.git`.
    fn folder(&mut self, root: &Path, at: &Path, rules: &IgnoreRules) -> io::Result<()> {
        self.folder_with(root, at, &|rel: &Path, dir: bool| {
            rel.file_name().is_some_and(|n| n == ".git")
                || rules.ignored(&rel.to_string_lossy(), dir)
        })
    }

    fn folder_with(
        &mut self,
        root: &Path,
        at: &Path,
        skip: &dyn Fn(&Path, bool) -> bool,
    ) -> io::Result<()> {
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let mut names: Vec<_> = fs::read_dir(root.join(&rel))?
                .collect::<io::Result<Vec<_>>>()?
                .into_iter()
                .map(|e| e.file_name())
                .collect();
            names.sort();
            for name in names {
                let child = rel.join(&name);
                let meta = fs::symlink_metadata(root.join(&child))?;
                if skip(&child, meta.is_dir()) {
                    continue;
                }
                self.parents(&at.join(&child))?;
                self.entry(&root.join(&child), &at.join(&child), &meta)?;
                if meta.is_dir() {
                    stack.push(child);
                }
            }
        }
        Ok(())
    }

    /// Writes the end of the archive; the number of entries.
    fn finish(mut self) -> io::Result<usize> {
        self.builder.finish()?;
        let mut inner = self.builder.into_inner()?;
        io::Write::flush(&mut inner)?;
        Ok(self.entries)
    }
}

/// A reader that hashes what it reads (a file's bytes as they go into the tar).
struct Hashing<R>(R, sha2::Sha256);

impl<R: io::Read> io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        sha2::Digest::update(&mut self.1, &buf[..n]);
        Ok(n)
    }
}

/// A relative path as the manifest keys it: `/`-separated.
fn slashed(rel: &Path) -> String {
    let parts: Vec<_> = rel.iter().map(|p| p.to_string_lossy()).collect();
    parts.join("/")
}
