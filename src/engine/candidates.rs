//! Which engines to try, and where: a pure function of the host's environment.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::endpoint::Endpoint;
use crate::error::{Error, Result};

/// The engines the layer knows, in detection order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Docker,
    Podman,
    Nerdctl,
    Finch,
}

impl EngineKind {
    /// Detection order.
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Docker,
        EngineKind::Podman,
        EngineKind::Nerdctl,
        EngineKind::Finch,
    ];

    /// The engine's name, as users spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
            EngineKind::Nerdctl => "nerdctl",
            EngineKind::Finch => "finch",
        }
    }

    /// Parses a name (case-insensitive, surrounding space ignored).
    pub fn parse(name: &str) -> Option<EngineKind> {
        let name = name.trim().to_ascii_lowercase();
        EngineKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether the engine serves the Docker Engine API the layer speaks.
    pub fn has_docker_api(self) -> bool {
        matches!(self, EngineKind::Docker | EngineKind::Podman)
    }
}

/// The host operating system, as far as engine locations go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOs {
    Linux,
    MacOs,
    Windows,
    Other,
}

impl HostOs {
    /// The OS this process runs on.
    pub fn current() -> HostOs {
        match std::env::consts::OS {
            "linux" => HostOs::Linux,
            "macos" => HostOs::MacOs,
            "windows" => HostOs::Windows,
            _ => HostOs::Other,
        }
    }
}

/// The parts of the host that decide where engines live: its variables, user and OS.
#[derive(Debug, Clone)]
pub struct HostEnv {
    vars: HashMap<String, String>,
    /// The effective user id (0 where there is none).
    pub uid: u32,
    /// The effective group id (0 where there is none).
    pub gid: u32,
    /// The host OS.
    pub os: HostOs,
}

impl HostEnv {
    /// The given variables with this process's user and OS.
    pub fn from_vars(vars: HashMap<String, String>) -> HostEnv {
        #[cfg(unix)]
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        #[cfg(not(unix))]
        let (uid, gid) = (0, 0);
        HostEnv {
            vars,
            uid,
            gid,
            os: HostOs::current(),
        }
    }

    /// This process's environment, user and OS.
    pub fn from_process() -> HostEnv {
        HostEnv::from_vars(std::env::vars().collect())
    }

    /// Every variable.
    pub fn vars(&self) -> &HashMap<String, String> {
        &self.vars
    }

    /// A variable's value; empty counts as unset.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The user's home folder (`HOME`), when absolute.
    pub fn home(&self) -> Option<PathBuf> {
        self.var("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// `XDG_RUNTIME_DIR`, or `/run/user/<uid>` where it is unset.
    pub fn runtime_dir(&self) -> PathBuf {
        self.var("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| PathBuf::from(format!("/run/user/{}", self.uid)))
    }

    /// Finds an executable on `PATH` (I/O: one stat per folder).
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        let path = self.var("PATH")?;
        std::env::split_paths(path)
            .map(|dir| dir.join(program))
            .find(|p| is_executable(p))
    }
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// One place to look for one engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The engine expected there.
    pub engine: EngineKind,
    /// Where it would answer.
    pub endpoint: Endpoint,
    /// Why this place is on the list (`DOCKER_HOST`, `rootful`, `Docker Desktop`…).
    pub source: &'static str,
    /// The place belongs to an engine that runs its containers in a VM.
    pub vm: bool,
    /// The place belongs to a rootless engine.
    pub rootless: bool,
}

/// Every place to try, in order: docker, podman, nerdctl, finch, or only the engine that
/// `only` (the option) or `PO_SANDBOX_ENGINE` names. `DOCKER_HOST` replaces Docker's usual
/// sockets and `CONTAINER_HOST` Podman's. Fails on an unknown engine name.
pub fn candidates(host: &HostEnv, only: Option<&str>) -> Result<Vec<Candidate>> {
    let picked = match (
        only.filter(|s| !s.trim().is_empty()),
        host.var(super::ENGINE_VAR),
    ) {
        (Some(name), _) => Some(parse_engine(name, "the engine option")?),
        (None, Some(name)) => Some(parse_engine(name, super::ENGINE_VAR)?),
        (None, None) => None,
    };
    let engines: Vec<EngineKind> = match picked {
        Some(k) => vec![k],
        None => EngineKind::ALL.to_vec(),
    };
    let mut out = Vec::new();
    for engine in engines {
        places(host, engine, &mut out);
    }
    out.dedup_by(|a, b| a.engine == b.engine && a.endpoint == b.endpoint);
    Ok(out)
}

fn parse_engine(name: &str, source_name: &str) -> Result<EngineKind> {
    EngineKind::parse(name).ok_or_else(|| Error::EngineUnknown {
        name: name.to_string(),
        source_name: source_name.to_string(),
    })
}

fn places(host: &HostEnv, engine: EngineKind, out: &mut Vec<Candidate>) {
    let vm_os = host.os != HostOs::Linux;
    let tls = host.var("DOCKER_TLS_VERIFY").is_some_and(|v| v != "0");
    let mut push = |endpoint: Endpoint, source: &'static str, vm: bool, rootless: bool| {
        out.push(Candidate {
            engine,
            endpoint,
            source,
            vm: vm || vm_os,
            rootless,
        });
    };
    let home = host.home();
    let in_home = |rel: &str| home.as_ref().map(|h| Endpoint::Unix(h.join(rel)));
    let run = host.runtime_dir();
    match engine {
        EngineKind::Docker => {
            if let Some(uri) = host.var("DOCKER_HOST") {
                push(Endpoint::parse(uri, tls), "DOCKER_HOST", false, false);
                return;
            }
            if host.os == HostOs::Windows {
                push(
                    Endpoint::parse("npipe:////./pipe/docker_engine", false),
                    "Docker Desktop",
                    true,
                    false,
                );
                return;
            }
            push(
                Endpoint::Unix("/var/run/docker.sock".into()),
                "rootful",
                false,
                false,
            );
            if host.os == HostOs::Linux {
                push(
                    Endpoint::Unix(run.join("docker.sock")),
                    "rootless",
                    false,
                    true,
                );
            }
            for (rel, source) in [
                (".docker/run/docker.sock", "Docker Desktop"),
                (".docker/desktop/docker.sock", "Docker Desktop"),
                (".colima/default/docker.sock", "Colima"),
                (".colima/docker.sock", "Colima"),
                (".orbstack/run/docker.sock", "OrbStack"),
                (".rd/docker.sock", "Rancher Desktop"),
            ] {
                if let Some(e) = in_home(rel) {
                    push(e, source, true, false);
                }
            }
        }
        EngineKind::Podman => {
            if let Some(uri) = host.var("CONTAINER_HOST") {
                push(Endpoint::parse(uri, false), "CONTAINER_HOST", false, false);
                return;
            }
            if host.os == HostOs::Linux {
                push(
                    Endpoint::Unix("/run/podman/podman.sock".into()),
                    "rootful",
                    false,
                    false,
                );
                push(
                    Endpoint::Unix(run.join("podman/podman.sock")),
                    "rootless",
                    false,
                    true,
                );
            }
            for rel in [
                ".local/share/containers/podman/machine/podman.sock",
                ".local/share/containers/podman/machine/qemu/podman.sock",
                ".local/share/containers/podman/machine/applehv/podman.sock",
            ] {
                if let Some(e) = in_home(rel) {
                    push(e, "Podman machine", true, false);
                }
            }
            let tmp = host.var("TMPDIR").map(PathBuf::from);
            if let Some(tmp) = tmp.filter(|p| p.is_absolute() && host.os == HostOs::MacOs) {
                push(
                    Endpoint::Unix(tmp.join("podman/podman-machine-default-api.sock")),
                    "Podman machine",
                    true,
                    false,
                );
            }
        }
        EngineKind::Nerdctl => {
            push(
                Endpoint::Unix("/run/containerd/containerd.sock".into()),
                "containerd",
                false,
                false,
            );
            if host.os == HostOs::Linux {
                push(
                    Endpoint::Unix(run.join("containerd-rootless/containerd.sock")),
                    "rootless containerd",
                    false,
                    true,
                );
            }
        }
        EngineKind::Finch => {
            push(
                Endpoint::Unix("/Applications/Finch/lima/data/finch/sock/finch.sock".into()),
                "Finch",
                true,
                false,
            );
            if host.os == HostOs::Linux {
                push(
                    Endpoint::Unix("/run/finch.sock".into()),
                    "Finch",
                    false,
                    false,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(vars: &[(&str, &str)]) -> HostEnv {
        let mut h = HostEnv::from_vars(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        h.os = HostOs::Linux;
        h.uid = 1000;
        h
    }

    fn engines(list: &[Candidate]) -> Vec<&'static str> {
        let mut seen: Vec<&'static str> = Vec::new();
        for c in list {
            if seen.last() != Some(&c.engine.as_str()) {
                seen.push(c.engine.as_str());
            }
        }
        seen
    }

    #[test]
    fn order_is_docker_podman_nerdctl_finch() {
        let list = candidates(&host(&[("HOME", "/home/u")]), None).unwrap();
        assert_eq!(engines(&list), ["docker", "podman", "nerdctl", "finch"]);
        assert_eq!(
            list[0].endpoint,
            Endpoint::Unix("/var/run/docker.sock".into())
        );
        assert_eq!(list[0].source, "rootful");
    }

    #[test]
    fn docker_locations_cover_rootless_desktop_and_colima() {
        let list = candidates(
            &host(&[("HOME", "/home/u"), ("XDG_RUNTIME_DIR", "/run/user/1000")]),
            Some("docker"),
        )
        .unwrap();
        let paths: Vec<String> = list.iter().map(|c| c.endpoint.to_string()).collect();
        assert_eq!(
            paths,
            [
                "unix:///var/run/docker.sock",
                "unix:///run/user/1000/docker.sock",
                "unix:///home/u/.docker/run/docker.sock",
                "unix:///home/u/.docker/desktop/docker.sock",
                "unix:///home/u/.colima/default/docker.sock",
                "unix:///home/u/.colima/docker.sock",
                "unix:///home/u/.orbstack/run/docker.sock",
                "unix:///home/u/.rd/docker.sock",
            ]
        );
        assert!(list[1].rootless && !list[1].vm);
        assert!(list[2..].iter().all(|c| c.vm));
    }

    #[test]
    fn rootless_dir_defaults_to_run_user_uid() {
        let list = candidates(&host(&[]), Some("podman")).unwrap();
        assert_eq!(
            list[0].endpoint,
            Endpoint::Unix("/run/podman/podman.sock".into())
        );
        assert_eq!(
            list[1].endpoint,
            Endpoint::Unix("/run/user/1000/podman/podman.sock".into())
        );
        assert!(list[1].rootless);
        // No HOME: no home-relative places, and nothing relative either.
        assert!(
            list.iter()
                .all(|c| c.endpoint.socket_path().is_none_or(|p| p.is_absolute()))
        );
    }

    #[test]
    fn docker_host_replaces_docker_defaults_only() {
        let list = candidates(
            &host(&[("DOCKER_HOST", "unix:///tmp/d.sock"), ("HOME", "/h")]),
            None,
        )
        .unwrap();
        let docker: Vec<_> = list
            .iter()
            .filter(|c| c.engine == EngineKind::Docker)
            .collect();
        assert_eq!(docker.len(), 1);
        assert_eq!(docker[0].endpoint, Endpoint::Unix("/tmp/d.sock".into()));
        assert_eq!(docker[0].source, "DOCKER_HOST");
        assert!(
            list.iter()
                .any(|c| c.engine == EngineKind::Podman && c.source == "rootful")
        );
    }

    #[test]
    fn container_host_replaces_podman_defaults() {
        let list = candidates(
            &host(&[("CONTAINER_HOST", "unix:///tmp/p.sock")]),
            Some("podman"),
        )
        .unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].endpoint, Endpoint::Unix("/tmp/p.sock".into()));
        assert_eq!(list[0].source, "CONTAINER_HOST");
    }

    #[test]
    fn engine_variable_and_option_pick_one_engine() {
        let h = host(&[("PO_SANDBOX_ENGINE", "Podman")]);
        assert_eq!(engines(&candidates(&h, None).unwrap()), ["podman"]);
        // The option wins over the variable.
        assert_eq!(
            engines(&candidates(&h, Some("docker")).unwrap()),
            ["docker"]
        );
        // An empty variable means detect.
        let h = host(&[("PO_SANDBOX_ENGINE", "")]);
        assert_eq!(candidates(&h, None).unwrap()[0].engine, EngineKind::Docker);
    }

    #[test]
    fn unknown_engine_is_a_coded_error_listing_valid_ones() {
        let err = candidates(&host(&[("PO_SANDBOX_ENGINE", "bogus")]), None).unwrap_err();
        assert_eq!(err.code(), "ENGINE_UNKNOWN");
        let msg = err.to_string();
        assert!(
            msg.contains("'bogus'") && msg.contains("PO_SANDBOX_ENGINE"),
            "{msg}"
        );
        assert!(msg.contains("docker, podman, nerdctl, finch"), "{msg}");
        let err = candidates(&host(&[]), Some("lxc")).unwrap_err();
        assert!(err.to_string().contains("the engine option"));
    }

    #[test]
    fn tls_docker_host_is_reported_unsupported() {
        let list = candidates(
            &host(&[
                ("DOCKER_HOST", "tcp://10.0.0.5:2376"),
                ("DOCKER_TLS_VERIFY", "1"),
            ]),
            Some("docker"),
        )
        .unwrap();
        assert!(matches!(list[0].endpoint, Endpoint::Unsupported { .. }));
    }

    #[test]
    fn macos_marks_everything_vm() {
        let mut h = host(&[("HOME", "/Users/u"), ("TMPDIR", "/var/folders/x/T/")]);
        h.os = HostOs::MacOs;
        let list = candidates(&h, None).unwrap();
        assert!(list.iter().all(|c| c.vm));
        assert!(list.iter().any(|c| {
            c.endpoint
                .to_string()
                .ends_with("podman-machine-default-api.sock")
        }));
        assert!(!list.iter().any(|c| c.source == "rootless"));
    }
}
