//! What an engine said about itself (its `version` and `info` answers, [`EngineFacts`]), kept
//! between one-shot commands (`po-sandbox exec`, `up`, `port`) so that each need not ask again:
//! Docker 20.10 takes 10-25 ms for each. An entry holds for one start of the engine at one Unix
//! socket: the key is the candidate (engine, place, VM, rootless) and the socket file's device,
//! inode and change time, which an engine's start makes anew. A socket-activated engine keeps
//! its socket across restarts, so an entry also expires after [`MAX_AGE`]. The engine is still
//! pinged, and every check made of a container (labels, posture) still runs, against facts
//! from this start of the engine at most [`MAX_AGE`] old.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::candidates::{Candidate, EngineKind};
use super::endpoint::Endpoint;

/// What a usable engine said about itself (kept between commands by `facts_cache`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EngineFacts {
    /// The engine that answered (a Podman socket behind a Docker path reports Podman).
    #[serde(with = "engine_name")]
    pub engine: EngineKind,
    /// The engine's own version.
    pub engine_version: String,
    /// The Engine API version it serves (negotiated down to ours when newer).
    pub api_version: String,
    /// The engine host's operating system, as the engine reports it.
    pub os: String,
    /// `linux` or `windows`: the kind of containers it runs.
    pub os_type: String,
    /// The engine host's architecture.
    pub arch: String,
    /// Its containers run in a VM (Docker Desktop, Podman machine, Colima...).
    pub vm: bool,
    /// The engine runs rootless.
    pub rootless: bool,
    /// The cgroup version of the engine's host (`1`, `2`; empty when it does not say).
    pub cgroup_version: String,
    /// The name of the machine the engine runs on (`Name` in its info).
    pub host_name: String,
    /// The memory the engine's machine has, in bytes (`MemTotal`), when it says.
    pub mem_total: Option<i64>,
    /// The CPUs the engine's machine has (`NCPU`), when it says.
    pub ncpu: Option<i64>,
}

/// Where facts are kept, and whether the engine is asked even when kept ones hold.
#[derive(Debug, Clone, Copy)]
pub struct Keep<'a> {
    /// The file ([`FILE`] in the Po home).
    pub file: &'a Path,
    /// Ask the engine anyway, and keep its answers.
    pub ask_anyway: bool,
}

/// The file in the Po home.
pub const FILE: &str = "engine-facts.json";

/// How long an entry holds at most.
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// One entry, as the file holds it: the facts' fields beside its key and time.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Entry {
    key: String,
    /// When it was written, in seconds since the epoch.
    at: u64,
    #[serde(flatten)]
    facts: EngineFacts,
}

/// [`EngineKind`] as its name (`docker`, `podman`) in the file.
pub(super) mod engine_name {
    use super::EngineKind;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(kind: &EngineKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<EngineKind, D::Error> {
        let name = String::deserialize(d)?;
        EngineKind::parse(&name).ok_or_else(|| D::Error::custom(format!("engine {name}")))
    }
}

/// The key of the candidate's engine as it runs now; `None` where there is none to trust (not
/// a Unix socket, or its file cannot be read).
pub fn key_of(candidate: &Candidate) -> Option<String> {
    let Endpoint::Unix(path) = &candidate.endpoint else {
        return None;
    };
    let socket = socket_identity(path)?;
    Some(format!(
        "{} {} vm={} rootless={} {socket}",
        candidate.engine.as_str(),
        path.display(),
        candidate.vm,
        candidate.rootless
    ))
}

/// The socket file's device, inode and change time (links followed).
#[cfg(unix)]
fn socket_identity(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!(
        "{}:{}:{}.{}",
        m.dev(),
        m.ino(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

#[cfg(not(unix))]
fn socket_identity(path: &Path) -> Option<String> {
    let _ = path;
    None
}

/// The facts kept under `key` in `file`, when written less than [`MAX_AGE`] before `now`.
pub fn read(file: &Path, key: &str, now: SystemTime) -> Option<EngineFacts> {
    let text = std::fs::read_to_string(file).ok()?;
    decode(&text, key, now)
}

/// Keeps `facts` under `key` in `file` (whole, owner-only). A failure only costs the next
/// command its `version` and `info` calls.
pub fn write(file: &Path, key: &str, facts: &EngineFacts, now: SystemTime) {
    let text = encode(key, facts, now);
    if let Err(e) = crate::write_aside::write_whole(file, text.as_bytes(), true) {
        tracing::debug!(file = %file.display(), error = %e, "engine facts not kept");
    }
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn encode(key: &str, f: &EngineFacts, now: SystemTime) -> String {
    let entry = Entry {
        key: key.to_string(),
        at: secs(now),
        facts: f.clone(),
    };
    serde_json::to_string(&entry).unwrap_or_default()
}

fn decode(text: &str, key: &str, now: SystemTime) -> Option<EngineFacts> {
    let e: Entry = serde_json::from_str(text).ok()?;
    let age = secs(now).checked_sub(e.at)?;
    if e.key != key || age >= MAX_AGE.as_secs() {
        return None;
    }
    Some(e.facts).filter(|f| f.engine.has_docker_api())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> EngineFacts {
        EngineFacts {
            engine: EngineKind::Podman,
            engine_version: "4.3.1".into(),
            api_version: "1.41".into(),
            os: "Debian GNU/Linux 12 (bookworm)".into(),
            os_type: "linux".into(),
            arch: "amd64".into(),
            vm: false,
            rootless: true,
            cgroup_version: "2".into(),
            host_name: "vm".into(),
            mem_total: Some(25_275_990_016),
            ncpu: Some(2),
        }
    }

    #[test]
    fn an_entry_holds_for_its_key_and_max_age_only() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let text = encode("docker /s 1:2:3.4", &facts(), t0);
        assert_eq!(decode(&text, "docker /s 1:2:3.4", t0), Some(facts()));
        let later = t0 + MAX_AGE - Duration::from_secs(1);
        assert_eq!(decode(&text, "docker /s 1:2:3.4", later), Some(facts()));
        assert_eq!(
            decode(&text, "docker /s 1:2:3.4", t0 + MAX_AGE),
            None,
            "expired"
        );
        let earlier = t0 - Duration::from_secs(1);
        assert_eq!(
            decode(&text, "docker /s 1:2:3.4", earlier),
            None,
            "from the future"
        );
        assert_eq!(
            decode(&text, "docker /s 1:2:9.4", t0),
            None,
            "another start"
        );
        assert_eq!(decode("", "k", t0), None);
        assert_eq!(decode("{\"key\":\"k\"}", "k", t0), None);
        let nerdctl = text.replace("\"podman\"", "\"nerdctl\"");
        assert_eq!(decode(&nerdctl, "docker /s 1:2:3.4", t0), None, "no API");
    }

    #[cfg(unix)]
    #[test]
    fn a_socket_made_anew_is_another_key_and_other_endpoints_have_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.sock");
        let candidate = |endpoint| Candidate {
            engine: EngineKind::Docker,
            endpoint,
            source: "test",
            vm: false,
            rootless: false,
            context: None,
        };
        let at = candidate(Endpoint::Unix(path.clone()));
        assert_eq!(key_of(&at), None, "no socket file");
        let first = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let k1 = key_of(&at).unwrap();
        assert_eq!(key_of(&at).as_deref(), Some(k1.as_str()));
        drop(first);
        std::fs::remove_file(&path).unwrap();
        // Past the file system's clock granularity (a freed inode may be reused).
        std::thread::sleep(Duration::from_millis(50));
        let _second = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert_ne!(key_of(&at).unwrap(), k1, "the engine's next start");
        let tcp = candidate(Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port: 2375,
        });
        assert_eq!(key_of(&tcp), None);
    }
}
