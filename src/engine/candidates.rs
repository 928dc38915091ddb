//! Which engines to try, and where: a pure function of the host's environment.

use std::path::PathBuf;

use super::endpoint::Endpoint;
use crate::error::{Error, Result};
use crate::host::{HostEnv, HostOs};

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
mod tests;
