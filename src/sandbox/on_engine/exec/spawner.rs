//! A fast `po-sandbox exec`: the engine's exec (create, start, inspect, a runtime's process
//! set-up each time) is the bulk of what an exec costs, so the first one into a running
//! container also starts a spawner there (`spawner.js`, by one detached engine exec), and
//! later ones ask it to run their command over a Unix socket in the broker's folder.
//!
//! What the host checks before it sends a spawner anything, each time:
//! - its record (in the owner's token folder, which the container never sees) names this very
//!   container, and the pid the engine gave for the spawner's exec;
//! - that pid runs with the start time recorded (not a later process reusing the number);
//! - the socket is a socket, opened without following links (the container can write the
//!   folder), and the process listening on it is that pid (`SO_PEERCRED`).
//!
//! Anything else (no record, a restarted or other container, a killed spawner, a socket
//! another process of the container put there, a VM engine whose processes this host does not
//! see) takes the engine's exec, unchanged. The command runs as the engine's exec would run
//! it: the container's user, its environment, confinement and cgroup (the spawner is one of
//! the engine's execs), in the workspace folder. Only commands without a TTY take this way.
//!
//! The spawner passes the network rules' gate before it listens, as any exec does: one that
//! listens proves this start of the container saw its rules (a restart ends it), so what it
//! runs needs no gate of its own.
// Only Linux hosts use a spawner (its checks read /proc): elsewhere this is compiled, unused.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use std::path::{Path, PathBuf};

use crate::engine::EngineError;
use crate::engine::model::ExecConfig;
use crate::engine::model::StartExecOptions;
use serde::{Deserialize, Serialize};

use super::wire;
use crate::engine::api::EngineApi;

/// The spawner's source, for the bundle's interpreter.
pub const SOURCE: &str = include_str!("spawner.js");
/// The spawner's `argv[1]`: how it shows in the process table.
pub const WORD: &str = "po-sandbox-exec";
/// The variable carrying its source (its command line stays short).
pub const VAR: &str = "PO_SANDBOX_SPAWNER";
/// The variable carrying the network rules' probe it runs before it listens.
pub const GATE_VAR: &str = "PO_SANDBOX_SPAWNER_GATE";
/// Where its socket's file name starts: what a sweep of the broker folder removes.
pub const SOCKET_PREFIX: &str = "exec-";
/// How long a spawner waits for a command before it exits.
pub const IDLE_SECONDS: u32 = 900;
/// The largest record read.
const MAX_RECORD: u64 = 4096;

/// What the host knows of a container's spawner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub container_id: String,
    /// Its pid on this host, as the engine reported the exec's.
    pub pid: u32,
    /// Its start time (`/proc/<pid>/stat`, field 22).
    pub start_time: u64,
    /// Its socket's file name in the broker's folder.
    pub socket: String,
    /// Why a spawner cannot run in this container, once one said so (`<socket>.failed`): every
    /// later exec into it takes the engine's exec and launches none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Where a workspace's spawner is found: its record, and the broker's folder as the host and
/// as the container see it.
#[derive(Debug, Clone)]
pub struct Place {
    pub record: PathBuf,
    pub host_dir: PathBuf,
    pub container_dir: String,
}

/// The record of the workspace whose token file is `token_file`: `<id>.exec` beside it.
pub fn record_path(token_file: &Path) -> PathBuf {
    token_file.with_extension("exec")
}

/// The spawner's command line, listening on `socket` (a path inside the container).
pub fn command(interpreter: &str, socket: &str) -> Vec<String> {
    let bootstrap = format!("eval(process.env.{VAR})");
    [
        interpreter,
        "-e",
        &bootstrap,
        WORD,
        socket,
        &IDLE_SECONDS.to_string(),
    ]
    .iter()
    .map(|w| w.to_string())
    .collect()
}

/// A socket file name a spawner is given: `exec-<16 hex>.sock`, nothing else.
fn is_socket_name(name: &str) -> bool {
    name.strip_prefix(SOCKET_PREFIX)
        .and_then(|n| n.strip_suffix(".sock"))
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The start time in a `/proc/<pid>/stat` line, `None` for a zombie or a line not of that form
/// (the command name, in parentheses, may hold anything, parentheses and spaces included).
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // Field 3 (the state) is the first after the name; field 22 the twentieth.
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The start time of process `pid` on this host, when it runs.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Every workspace of a Po home whose spawner cannot run in its container, as its record says
/// (`<poHome>/sandbox-tokens/<owner>/<id>.exec`): the workspace id and the reason, in order.
pub fn unusable(po_home: &Path) -> Vec<(String, String)> {
    let root = crate::sandbox::blueprint::spec::tokens_root(po_home);
    let owners = std::fs::read_dir(root).into_iter().flatten().flatten();
    let mut found: Vec<(String, String)> = owners
        .flat_map(|owner| {
            std::fs::read_dir(owner.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".exec")?.to_string();
            Some((id, read_record(&entry.path())?.failed?))
        })
        .collect();
    found.sort();
    found
}

/// The record at `path`: a regular file (not a link), small, that parses.
pub fn read_record(path: &Path) -> Option<Record> {
    let bytes = crate::safe_read::read_regular(path, MAX_RECORD)?;
    serde_json::from_slice(&bytes).ok()
}

/// What [`connect`] found.
pub enum Found {
    /// The recorded spawner, connected and checked.
    #[cfg(target_os = "linux")]
    Connected(tokio::net::UnixStream),
    /// The recorded spawner runs but does not listen yet (it starts, or waits at the rules'
    /// gate): the engine's exec this time, and no other spawner.
    Starting,
    /// None usable: the engine's exec, and a new spawner.
    Absent,
    /// A spawner cannot run in this container (the reason): the engine's exec, and no spawner.
    Unusable(String),
}

/// How long an exec waits for a recorded spawner that runs to listen.
const LISTEN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The container's spawner, connected when everything checks out (see the module).
#[cfg(target_os = "linux")]
pub async fn connect(place: &Place, container_id: &str) -> Found {
    let Some(rec) = read_record(&place.record) else {
        return Found::Absent;
    };
    if rec.container_id != container_id || !is_socket_name(&rec.socket) {
        return Found::Absent;
    }
    if let Some(why) = rec.failed {
        return Found::Unusable(why);
    }
    let deadline = tokio::time::Instant::now() + LISTEN_WAIT;
    loop {
        if start_time(rec.pid) != Some(rec.start_time) {
            tracing::debug!(pid = rec.pid, "the spawner recorded no longer runs");
            return match said_failed(place, &rec) {
                Some(why) => Found::Unusable(why),
                None => Found::Absent,
            };
        }
        match connect_checked(&place.host_dir.join(&rec.socket), rec.pid).await {
            Ok(stream) => return Found::Connected(stream),
            // Not there yet: it starts.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::debug!(error = %e, "the spawner's socket is not the spawner's");
                return Found::Absent;
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Found::Starting;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The reason the recorded spawner left in `<socket>.failed` before it exited, when it could not
/// run in its container: recorded (so no later exec launches another) and said once, its file
/// removed. The container can write the folder: a forged marker only costs its own execs the
/// spawner.
#[cfg(target_os = "linux")]
fn said_failed(place: &Place, rec: &Record) -> Option<String> {
    let marker = place.host_dir.join(format!("{}.failed", rec.socket));
    let bytes = crate::safe_read::read_regular(&marker, 512)?;
    let _ = std::fs::remove_file(&marker);
    let said: String = String::from_utf8_lossy(&bytes)
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let why = format!(
        "its exec spawner cannot run in this container ({said}): every exec takes the engine's exec"
    );
    tracing::warn!(container = %rec.container_id, "{why}");
    let failed = Record {
        failed: Some(why.clone()),
        ..rec.clone()
    };
    if let Ok(bytes) = serde_json::to_vec(&failed) {
        let _ = crate::write_aside::write_whole(&place.record, &bytes, true);
    }
    Some(why)
}

/// Connects to the socket at `path` (the folder is the container's to write: opened without
/// following a link, and connected to through that very file) when `pid` listens on it.
#[cfg(target_os = "linux")]
async fn connect_checked(path: &Path, pid: u32) -> std::io::Result<tokio::net::UnixStream> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.file_type().is_socket() {
        return Err(std::io::Error::other("not a socket"));
    }
    let via = format!("/proc/self/fd/{}", file.as_raw_fd());
    let stream = tokio::net::UnixStream::connect(&via).await?;
    let peer = stream.peer_cred()?.pid();
    if peer.and_then(|p| u32::try_from(p).ok()) != Some(pid) {
        return Err(std::io::Error::other(format!(
            "process {peer:?} listens on it"
        )));
    }
    Ok(stream)
}

/// No spawner off Linux: the engine's exec every time.
#[cfg(not(target_os = "linux"))]
pub async fn connect(_place: &Place, _container_id: &str) -> Found {
    Found::Absent
}

/// The lock a launch holds beside the record (`<id>.exec.lock`): two first execs at once start
/// one spawner, not two (the other's command takes the engine's exec).
pub fn launch_lock_path(record: &Path) -> PathBuf {
    record.with_extension("exec.lock")
}

/// Starts a spawner in `container_id` by a detached engine exec and records it (replacing an
/// older record, whose socket file goes, so its spawner exits). With a `gate` (the network
/// rules' probe), the spawner runs it first and listens only once it passes, so every command
/// it runs starts in a namespace that has its rules. One launch at a time per workspace, under
/// [`launch_lock_path`]: another under way is a reason not to. Why not, when it cannot.
pub async fn launch(
    engine: &impl EngineApi,
    container_id: &str,
    place: &Place,
    interpreter: &str,
    gate: Option<String>,
) -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("the host checks a spawner's process in /proc: Linux only".into());
    }
    let lock_path = launch_lock_path(&place.record);
    let lock = match crate::sandbox::folder::locks::HostLock::try_acquire(&lock_path) {
        Ok(Some(lock)) => lock,
        Ok(None) => return Err("another exec is starting the sandbox's spawner".into()),
        Err(e) => return Err(format!("its launch lock {}: {e}", lock_path.display())),
    };
    // Under the lock, whatever the outcome; the lock file goes with it.
    let launched: Result<(), String> = async {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| e.to_string())?;
        let socket = format!("{SOCKET_PREFIX}{}.sock", hex::encode(random));
        let mut env = vec![format!("{VAR}={SOURCE}")];
        env.extend(gate.map(|g| format!("{GATE_VAR}={g}")));
        let config = ExecConfig {
            cmd: Some(command(
                interpreter,
                &format!("{}/{socket}", place.container_dir),
            )),
            env: Some(env),
            working_dir: Some("/".into()),
            ..Default::default()
        };
        let failed = |doing: &'static str| move |e: EngineError| format!("{doing}: {e}");
        let exec_id = (engine.create_exec(container_id, config).await).map_err(failed("create"))?;
        let detached = StartExecOptions {
            detach: true,
            tty: false,
            output_capacity: None,
        };
        (engine.start_exec(&exec_id, detached).await).map_err(failed("start"))?;
        let info = (engine.inspect_exec(&exec_id).await).map_err(failed("inspect"))?;
        let pid = info
            .pid
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or("the engine gives no pid for it")?;
        let Some(start_time) = start_time(pid) else {
            // Never used: its socket goes, and with it the spawner (it checks for it).
            remove_socket(&place.host_dir.join(&socket));
            return Err("its process is not one this host sees".into());
        };
        let old = read_record(&place.record);
        let record = Record {
            container_id: container_id.to_string(),
            pid,
            start_time,
            socket,
            failed: None,
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
        crate::write_aside::write_whole(&place.record, &bytes, true).map_err(|e| e.to_string())?;
        if let Some(old) = old.filter(|o| is_socket_name(&o.socket) && o.socket != record.socket) {
            remove_socket(&place.host_dir.join(old.socket));
        }
        Ok(())
    }
    .await;
    lock.remove(&lock_path);
    launched
}

/// Removes `path` when it is a socket (never through a link).
pub fn remove_socket(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| crate::platform::is_socket(&m.file_type())) {
        let _ = std::fs::remove_file(path);
    }
}

/// Aborts the task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `req` through a connected spawner, attached to this process's stdin, stdout and
/// stderr; the command's exit code. When this process's stdout goes away (a pipe's reader
/// left), the connection is dropped, which ends the command (SIGHUP), and 141 is returned, as
/// a shell reports a command SIGPIPE ended.
#[cfg(unix)]
pub async fn run(stream: tokio::net::UnixStream, req: &super::ExecRequest) -> std::io::Result<i64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut from, mut to) = stream.into_split();
    let request = wire::Request {
        argv: &req.command,
        env: &req.env,
        cwd: &req.working_dir,
    };
    to.write_all(&wire::request(&request)).await?;
    let _feeder = AbortOnDrop(tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if to
                .write_all(&wire::encode(wire::STDIN, &buf[..n]))
                .await
                .is_err()
            {
                return;
            }
        }
        let _ = to.write_all(&wire::encode(wire::STDIN_END, &[])).await;
        // Held open until the command ends: a closed write side is not an end of stdin.
        std::future::pending::<()>().await
    }));
    let (mut stdout, mut stderr) = (tokio::io::stdout(), tokio::io::stderr());
    let mut decoder = wire::Decoder::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::Error::other(
                "the sandbox's spawner went away before the command ended (was the container stopped?)",
            ));
        }
        decoder.push(&buf[..n]);
        while let Some(frame) = decoder.next().map_err(std::io::Error::other)? {
            let written = match frame {
                wire::Output::Stdout(b) => super::write_now(&mut stdout, &b).await,
                wire::Output::Stderr(b) => super::write_now(&mut stderr, &b).await,
                wire::Output::Exit(code) => return Ok(code),
            };
            if written.is_err() {
                return Ok(141);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_are_read_past_any_command_name() {
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 19 20";
        let cases = [
            (format!("77 (node) {tail}"), Some(424242)),
            (format!("77 (a) b) (c) {tail}"), Some(424242)),
            (format!("77 (x y z) {tail}"), Some(424242)),
            (format!("77 (node) {}", tail.replacen('S', "Z", 1)), None),
            (format!("77 (node) {}", tail.replacen('S', "X", 1)), None),
            ("77 (node) S 1 2".to_string(), None),
            ("77 node S 1".to_string(), None),
            (format!("77 (node) {}", tail.replace("424242", "x")), None),
        ];
        for (stat, want) in cases {
            assert_eq!(parse_start_time(&stat), want, "{stat}");
        }
        #[cfg(target_os = "linux")]
        assert!(start_time(std::process::id()).is_some_and(|t| t > 0));
    }

    #[test]
    fn only_names_a_spawner_is_given_are_taken() {
        assert!(is_socket_name("exec-0123456789abcdef.sock"));
        for bad in [
            "exec-0123456789abcde.sock",
            "exec-0123456789abcdefa.sock",
            "exec-0123456789abcdeg.sock",
            "exec-../../../x.sock",
            "fwd-0123456789abcdef.sock",
            "exec-0123456789abcdef.sock/",
            "exec-0123456789abcdef",
            "broker.sock",
        ] {
            assert!(!is_socket_name(bad), "{bad}");
        }
        let cmd = command(
            "/opt/po/node/bin/node",
            "/run/po-broker/exec-0123456789abcdef.sock",
        );
        assert_eq!(cmd[3], WORD);
        assert!(cmd.join(" ").len() < 140, "{cmd:?}");
    }

    #[test]
    fn records_are_read_only_from_regular_small_files() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("w1.token");
        let path = record_path(&token);
        assert_eq!(path, dir.path().join("w1.exec"));
        assert_eq!(read_record(&path), None);
        let rec = Record {
            container_id: "c1".into(),
            pid: 7,
            start_time: 9,
            socket: "exec-0123456789abcdef.sock".into(),
            failed: None,
        };
        std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
        assert_eq!(read_record(&path), Some(rec));
        #[cfg(unix)]
        {
            let link = dir.path().join("w2.exec");
            std::os::unix::fs::symlink(&path, &link).unwrap();
            assert_eq!(read_record(&link), None);
        }
        std::fs::write(&path, vec![b' '; MAX_RECORD as usize + 1]).unwrap();
        assert_eq!(read_record(&path), None);
        std::fs::write(&path, b"{").unwrap();
        assert_eq!(read_record(&path), None);
    }
}

#[cfg(all(test, target_os = "linux"))]
#[path = "spawner_tests.rs"]
mod connect_tests;
