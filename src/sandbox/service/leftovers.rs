//! What killed hubs of this owner left behind, removed at a hub's start-up: write-aside files
//! in the token folder, guard copies and broker socket folders and lock files of stopped
//! workspaces whose lock nobody holds, socket bind folders of gone hubs, and this owner's
//! per-hub networks no container uses.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::ContainerService;
use crate::engine::api::EngineApi;
use crate::sandbox::blueprint::spec;
use crate::sandbox::folder::locks::HostLock;
use crate::sandbox::on_engine::{inventory, network};
use crate::write_aside;

/// What one start-up sweep of files removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// In the token folder: write-aside files, and rules records and free start locks of
    /// workspaces with no token file (stopped).
    pub asides: Vec<PathBuf>,
    /// Broker socket folders and lock files.
    pub broker: Vec<PathBuf>,
}

impl<E: EngineApi> ContainerService<E> {
    /// Removes the files killed hubs of this owner left behind: write-aside files in its token
    /// folder, and the broker socket folders and lock files of its stopped workspaces. Never
    /// fails: what cannot be removed stays for the next start.
    pub fn sweep_files(&self) -> Swept {
        let c = &self.inner.config;
        let tokens = spec::tokens_dir(&c.container.po_home, &c.container.owner);
        let asides = write_aside::sweep(&tokens, write_aside::ASIDE_MAX_AGE).unwrap_or_else(|e| {
            tracing::debug!(folder = %tokens.display(), error = %e, "write-aside sweep failed");
            vec![]
        });
        // Workspaces with a token file may have a container (it mounts its token file).
        let live = token_workspaces(&tokens);
        let mut asides = asides;
        asides.extend(sweep_stopped(&tokens, &live));
        let copies = spec::guard_copies(&c.container.po_home, &c.container.owner, "-");
        asides.extend(sweep_copies(
            copies.parent().unwrap_or(&copies),
            &live,
            &tokens,
        ));
        let broker = match &c.broker {
            Some(w) => {
                let live: HashSet<PathBuf> = live
                    .iter()
                    .map(|ws| w.socket_folder(&c.container.owner, ws))
                    .collect();
                let mut removed = sweep_broker(&w.socket_root, &c.container.owner, &live);
                removed.extend(sweep_binds(&w.socket_root));
                removed
            }
            None => vec![],
        };
        if !asides.is_empty() || !broker.is_empty() {
            tracing::info!(?asides, ?broker, "left behind by earlier hubs: removed");
        }
        Swept { asides, broker }
    }

    /// Removes this owner's per-hub networks no container uses (older than
    /// [`network::PRUNE_GRACE`]). Never fails. Returns their names.
    pub async fn prune_own_networks(&self) -> Vec<String> {
        // One at a time with this hub's own finding or making of the network.
        let mut cached = self.inner.holders.network.lock().await;
        let owner = Some(self.inner.config.container.owner.as_str());
        let pruned = network::prune(&self.changes(), owner, network::PRUNE_GRACE, false)
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(error = %e, "start-up network prune failed");
                vec![]
            });
        if !pruned.is_empty() {
            *cached = None;
            tracing::info!(networks = ?pruned, "unused per-hub networks removed");
        }
        pruned
    }
}

/// The workspace ids with a token file (`<id>.token`, a regular file) in the token folder.
fn token_workspaces(tokens: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(tokens) else {
        return vec![];
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".token").map(str::to_string)
        })
        .collect()
}

/// In the owner's guard copies folder: removes the folder of each workspace not in `live`
/// (stopped), after taking away the placeholders its record lists, and the write-aside files in
/// the others. A stopped workspace whose start lock (`<tokens>/<id>.lock`) another process holds
/// is being started: it is left to that start. Real folders only; links are removed, never
/// followed.
fn sweep_copies(root: &Path, live: &[String], tokens: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return vec![];
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && live.contains(&name) {
            removed.extend(
                write_aside::sweep(&e.path(), write_aside::ASIDE_MAX_AGE).unwrap_or_default(),
            );
        } else if is_dir && crate::names::ids::check_id(&name).is_ok() {
            let lock_path = tokens.join(format!("{name}.lock"));
            let Ok(Some(lock)) = crate::sandbox::folder::locks::HostLock::try_acquire(&lock_path)
            else {
                continue;
            };
            removed.extend(crate::sandbox::folder::guards::placeholders::take_away(
                &e.path(),
            ));
            crate::sandbox::folder::guards::placeholders::clear_folder(&e.path());
            if !e.path().exists() {
                removed.push(e.path());
            }
            lock.remove(&lock_path);
        }
    }
    removed
}

/// Removes the folders a killed hub bound a broker socket in before renaming it into place
/// (`.bind-<pid>-<n>` under the socket root, see `broker::socket`) whose writer is gone: the
/// socket in it, then the folder. Links and anything else are left alone.
fn sweep_binds(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return vec![];
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(".bind-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if !e.file_type().is_ok_and(|t| t.is_dir())
            || !write_aside::writer_gone(pid, &e, write_aside::ASIDE_MAX_AGE)
        {
            continue;
        }
        let socket = e.path().join("s");
        if std::fs::symlink_metadata(&socket)
            .is_ok_and(|m| crate::platform::is_socket(&m.file_type()))
        {
            let _ = std::fs::remove_file(&socket);
        }
        if std::fs::remove_dir(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

/// Removes the rules records (`<id>.net`), spawner records (`<id>.exec`) and free start locks
/// (`<id>.lock`) in the token folder of workspaces not in `live` (no token file: stopped).
/// Regular files only.
fn sweep_stopped(tokens: &Path, live: &[String]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(tokens) else {
        return vec![];
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let (id, lock) = match (name.strip_suffix(".net"), name.strip_suffix(".lock")) {
            (Some(id), _) => (id, false),
            (_, Some(id)) => (id, true),
            _ => match name.strip_suffix(".exec") {
                Some(id) => (id, false),
                None => continue,
            },
        };
        if live.iter().any(|l| l == id) {
            continue;
        }
        let gone = match lock {
            true => crate::sandbox::folder::locks::remove_free_lock(&e.path()),
            false => std::fs::remove_file(e.path()).is_ok(),
        };
        if gone {
            removed.push(e.path());
        }
    }
    removed
}

/// Removes this owner's broker socket folders (`<owner>-<12 hex>`) and lock files
/// (`<owner>-<12 hex>.lock`) directly under `root`, except those in `live`: each only after
/// taking its lock (never one another hub holds), the folder (its socket and itself, when then
/// empty) before the lock file. Never follows a link, never leaves `root`, never touches
/// another owner's. Returns the removed paths.
fn sweep_broker(root: &Path, owner: &str, live: &HashSet<PathBuf>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return vec![];
    };
    let prefix = format!("{owner}-");
    let mut folders: Vec<PathBuf> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hash = name.strip_prefix(&prefix)?;
            let hash = hash.strip_suffix(".lock").unwrap_or(hash);
            let hex = hash.len() == 12 && hash.bytes().all(|b| b.is_ascii_hexdigit());
            hex.then(|| root.join(format!("{prefix}{hash}")))
        })
        .filter(|f| !live.contains(f))
        .collect();
    folders.sort();
    folders.dedup();
    let mut removed = Vec::new();
    for folder in folders {
        let lock_path = folder.with_extension("lock");
        let lock = match std::fs::symlink_metadata(&lock_path) {
            Ok(m) if m.is_file() => match HostLock::try_acquire(&lock_path) {
                Ok(Some(lock)) => Some(lock),
                _ => continue, // held: its hub serves it still
            },
            _ => None,
        };
        if std::fs::symlink_metadata(&folder).is_ok_and(|m| m.is_dir()) {
            inventory::remove_broker_folder(&folder);
            if !folder.exists() {
                removed.push(folder.clone());
            }
        }
        if let Some(lock) = lock {
            lock.remove(&lock_path);
            removed.push(lock_path);
        }
    }
    removed
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_broker_sweep_takes_stopped_free_ones_of_this_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let (stopped, live, held) = ("o1-aaaaaaaaaaaa", "o1-bbbbbbbbbbbb", "o1-cccccccccccc");
        for f in [stopped, live, held, "o1-x-dddddddddddd", "o1-notahash"] {
            std::fs::create_dir(r.join(f)).unwrap();
            std::fs::write(r.join(f).with_extension("lock"), "").unwrap();
        }
        let _sock =
            std::os::unix::net::UnixListener::bind(r.join(stopped).join("broker.sock")).unwrap();
        // Another owner's, and a link in this owner's name.
        std::fs::create_dir(r.join("o2-aaaaaaaaaaaa")).unwrap();
        std::fs::write(r.join("o2-aaaaaaaaaaaa.lock"), "").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "v").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("victim"),
            r.join("o1-eeeeeeeeeeee.lock"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("o1-ffffffffffff")).unwrap();
        let holder = HostLock::try_acquire(&r.join(held).with_extension("lock"))
            .unwrap()
            .unwrap();
        let removed = sweep_broker(r, "o1", &HashSet::from([r.join(live)]));
        assert_eq!(
            removed,
            vec![r.join(stopped), r.join(stopped).with_extension("lock")]
        );
        for kept in [
            live.to_string(),
            format!("{live}.lock"),
            held.into(),
            format!("{held}.lock"),
            "o1-x-dddddddddddd.lock".into(),
            "o1-notahash.lock".into(),
            "o2-aaaaaaaaaaaa".into(),
            "o2-aaaaaaaaaaaa.lock".into(),
            "o1-eeeeeeeeeeee.lock".into(),
            "o1-ffffffffffff".into(),
        ] {
            assert!(
                std::fs::symlink_metadata(r.join(&kept)).is_ok(),
                "{kept} kept"
            );
        }
        assert!(outside.path().join("victim").exists());
        drop(holder);
    }

    #[test]
    fn records_and_free_start_locks_of_stopped_workspaces_go() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "run.token",
            "run.net",
            "run.lock",
            "run.exec",
            "old.net",
            "old.lock",
            "old.exec",
            "held.lock",
        ] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let held = HostLock::try_acquire(&d.join("held.lock"))
            .unwrap()
            .unwrap();
        let mut removed = sweep_stopped(d, &["run".to_string()]);
        removed.sort();
        assert_eq!(
            removed,
            [d.join("old.exec"), d.join("old.lock"), d.join("old.net")]
        );
        let mut left = token_workspaces(d);
        left.sort();
        assert_eq!(left, ["run"]);
        assert!(d.join("held.lock").exists() && d.join("run.lock").exists());
        assert!(d.join("run.exec").exists());
        drop(held);
    }

    #[test]
    fn token_workspaces_are_the_token_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("w1.token"), "t").unwrap();
        std::fs::write(dir.path().join("w1.net"), "r").unwrap();
        std::fs::write(dir.path().join("w2.token.tmp-1"), "t").unwrap();
        std::fs::create_dir(dir.path().join("w3.token")).unwrap();
        assert_eq!(token_workspaces(dir.path()), ["w1"]);
    }

    /// A pid no process has (above Linux's largest).
    const GONE: u32 = 999_999_999;

    #[test]
    fn bind_folders_of_gone_hubs_go_and_others_stay() {
        let root = tempfile::tempdir().unwrap();
        let gone = root.path().join(format!(".bind-{GONE}-0"));
        std::fs::create_dir(&gone).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(gone.join("s")).unwrap();
        let mine = root.path().join(format!(".bind-{}-1", std::process::id()));
        std::fs::create_dir(&mine).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            elsewhere.path(),
            root.path().join(format!(".bind-{GONE}-2")),
        )
        .unwrap();
        assert_eq!(sweep_binds(root.path()), std::slice::from_ref(&gone));
        assert!(!gone.exists() && mine.is_dir());
        assert!(elsewhere.path().is_dir());
    }

    #[test]
    fn guard_copies_of_stopped_workspaces_go_and_asides_of_running_ones() {
        let root = tempfile::tempdir().unwrap();
        let running = root.path().join("a");
        std::fs::create_dir(&running).unwrap();
        std::fs::write(running.join("c.config"), "x").unwrap();
        std::fs::write(running.join(format!("c.tmp-{GONE}")), "x").unwrap();
        std::fs::create_dir(root.path().join("b")).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("c")).unwrap();
        let tokens = tempfile::tempdir().unwrap();
        let mut removed = sweep_copies(root.path(), &["a".to_string()], tokens.path());
        removed.sort();
        assert_eq!(
            removed,
            [running.join(format!("c.tmp-{GONE}")), root.path().join("b")]
        );
        assert!(running.join("c.config").exists());
        assert!(
            elsewhere.path().join("keep").exists(),
            "a link is never followed"
        );
    }
}
