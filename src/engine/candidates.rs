//! Which engines to try, and where: a pure function of the host's environment.

use std::path::PathBuf;

use super::context::{self, DockerContext};
use super::endpoint::{Endpoint, Tls};
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
    /// The Docker context the place comes from (`DOCKER_CONTEXT` or `currentContext`).
    pub context: Option<String>,
}

/// Every place to try, in order: docker, podman, nerdctl, finch, or only the engine that
/// `only` (the option) or `PO_SANDBOX_ENGINE` names. `DOCKER_HOST`, else the Docker context in
/// force, replaces Docker's usual sockets and `CONTAINER_HOST` Podman's. Fails on an unknown
/// engine name and on a Docker context that cannot be read (`ENGINE_CONTEXT_INVALID`).
pub fn candidates(host: &HostEnv, only: Option<&str>) -> Result<Vec<Candidate>> {
    candidates_reading(host, only, &context::read_file)
}

/// [`candidates`], reading the docker CLI's files through `read`.
pub fn candidates_reading(
    host: &HostEnv,
    only: Option<&str>,
    read: &dyn Fn(&std::path::Path) -> std::io::Result<String>,
) -> Result<Vec<Candidate>> {
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
    // Docker contexts are read only when Docker is among the engines to try.
    let docker_context = match engines.contains(&EngineKind::Docker) {
        true => context::resolve(host, read)?,
        false => None,
    };
    let mut out = Vec::new();
    for engine in engines {
        places(host, engine, docker_context.as_ref(), &mut out);
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

fn places(
    host: &HostEnv,
    engine: EngineKind,
    docker_context: Option<&DockerContext>,
    out: &mut Vec<Candidate>,
) {
    let mut places = Places { host, engine, out };
    match engine {
        EngineKind::Docker => docker_places(&mut places, docker_context),
        EngineKind::Podman => podman_places(&mut places),
        EngineKind::Nerdctl => nerdctl_places(&mut places),
        EngineKind::Finch => finch_places(&mut places),
    }
}

/// Docker Desktop, Colima, OrbStack and Rancher Desktop sockets below the home folder.
const DOCKER_IN_HOME: [(&str, &str); 6] = [
    (".docker/run/docker.sock", "Docker Desktop"),
    (".docker/desktop/docker.sock", "Docker Desktop"),
    (".colima/default/docker.sock", "Colima"),
    (".colima/docker.sock", "Colima"),
    (".orbstack/run/docker.sock", "OrbStack"),
    (".rd/docker.sock", "Rancher Desktop"),
];

/// Docker Desktop's named pipes on Windows: the engine's, then the Linux engine's own.
const DOCKER_PIPES: [&str; 2] = [
    "//./pipe/docker_engine",
    "//./pipe/dockerDesktopLinuxEngine",
];

/// The default Podman machine's named pipe on Windows.
const PODMAN_PIPE: &str = "//./pipe/podman-machine-default";

/// Podman machine sockets below the home folder.
const PODMAN_MACHINE_IN_HOME: [(&str, &str); 3] = [
    (
        ".local/share/containers/podman/machine/podman.sock",
        "Podman machine",
    ),
    (
        ".local/share/containers/podman/machine/qemu/podman.sock",
        "Podman machine",
    ),
    (
        ".local/share/containers/podman/machine/applehv/podman.sock",
        "Podman machine",
    ),
];

/// One engine's list of places being written: on a host other than Linux every place is in a VM.
struct Places<'a> {
    host: &'a HostEnv,
    engine: EngineKind,
    out: &'a mut Vec<Candidate>,
}

impl Places<'_> {
    fn push(&mut self, endpoint: Endpoint, source: &'static str, vm: bool, rootless: bool) {
        self.out.push(Candidate {
            engine: self.engine,
            endpoint,
            source,
            vm: vm || self.host.os != HostOs::Linux,
            rootless,
            context: None,
        });
    }

    /// A socket at a fixed path, never rootless.
    fn push_socket(&mut self, path: &str, source: &'static str, vm: bool) {
        self.push(Endpoint::Unix(path.into()), source, vm, false);
    }

    /// On Linux, a rootless socket below the user's runtime folder.
    fn push_rootless(&mut self, rel: &str, source: &'static str) {
        if self.on_linux() {
            let socket = Endpoint::Unix(self.host.runtime_dir().join(rel));
            self.push(socket, source, false, true);
        }
    }

    /// Sockets below the home folder, each in a VM; none when `HOME` is not absolute.
    fn push_in_home(&mut self, sockets: &[(&str, &'static str)]) {
        let Some(home) = self.host.home() else {
            return;
        };
        for &(rel, source) in sockets {
            self.push(Endpoint::Unix(home.join(rel)), source, true, false);
        }
    }

    fn on_linux(&self) -> bool {
        self.host.os == HostOs::Linux
    }
}

/// `DOCKER_HOST` alone when set; else the Docker context's endpoint alone; else Docker
/// Desktop's pipe on Windows; else the rootful and (on Linux) rootless sockets, then the
/// desktop VMs' sockets in the home folder.
fn docker_places(p: &mut Places, docker_context: Option<&DockerContext>) {
    let host = p.host;
    if let Some(uri) = host.var("DOCKER_HOST") {
        let endpoint = with_ssh_command(Endpoint::parse_with(uri, &tls_of(host)), host);
        p.push(endpoint, "DOCKER_HOST", false, false);
        return;
    }
    if let Some(ctx) = docker_context {
        let endpoint = with_ssh_command(Endpoint::parse_with(&ctx.host, &ctx.tls), host);
        p.push(endpoint, ctx.source, false, false);
        if let Some(last) = p.out.last_mut() {
            last.context = Some(ctx.name.clone());
        }
        return;
    }
    if host.os == HostOs::Windows {
        for pipe in DOCKER_PIPES {
            p.push(
                Endpoint::NamedPipe(pipe.into()),
                "Docker Desktop",
                true,
                false,
            );
        }
        return;
    }
    p.push_socket("/var/run/docker.sock", "rootful", false);
    p.push_rootless("docker.sock", "rootless");
    p.push_in_home(&DOCKER_IN_HOME);
}

/// An `ssh://` endpoint runs the command `PO_SANDBOX_SSH_COMMAND` names (`ssh` when it names
/// none), found on the environment's `PATH` (else on the hub process's).
pub fn with_ssh_command(endpoint: Endpoint, host: &HostEnv) -> Endpoint {
    match endpoint {
        Endpoint::Ssh(mut target) => {
            let given = host
                .var(super::transport::ssh::COMMAND_VAR)
                .filter(|c| !c.trim().is_empty())
                .unwrap_or("ssh");
            let mut words = given.split_whitespace();
            let program = words.next().unwrap_or("ssh");
            let found = match program.contains('/') {
                true => None,
                false => host.which(program),
            };
            let program = found.map_or(program.to_string(), |p| p.display().to_string());
            let rest: Vec<&str> = words.collect();
            target.command = Some(
                [program.as_str()]
                    .into_iter()
                    .chain(rest)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            Endpoint::Ssh(target)
        }
        other => other,
    }
}

/// TLS as the docker CLI's variables set it: `DOCKER_TLS_VERIFY` (any non-empty value) checks
/// the engine against the files in `DOCKER_CERT_PATH`, else the docker CLI's config folder
/// (`~/.docker`); `DOCKER_TLS` alone is TLS without the check, which is refused.
pub fn tls_of(host: &HostEnv) -> Tls {
    let on = |v: &str| host.var(v).is_some_and(|x| !x.is_empty());
    if on("DOCKER_TLS_VERIFY") {
        let certs = host
            .var("DOCKER_CERT_PATH")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| context::config_dir(host));
        match certs {
            Some(dir) => Tls::Verify(dir),
            None => Tls::Unverified,
        }
    } else if on("DOCKER_TLS") {
        Tls::Unverified
    } else {
        Tls::Off
    }
}

/// `CONTAINER_HOST` alone when set; else the rootful and rootless sockets on Linux, then the
/// Podman machine sockets (in the home folder, and under `TMPDIR` on macOS).
fn podman_places(p: &mut Places) {
    let host = p.host;
    if let Some(uri) = host.var("CONTAINER_HOST") {
        let endpoint = with_ssh_command(Endpoint::parse(uri), host);
        p.push(endpoint, "CONTAINER_HOST", false, false);
        return;
    }
    if p.on_linux() {
        p.push_socket("/run/podman/podman.sock", "rootful", false);
        p.push_rootless("podman/podman.sock", "rootless");
    }
    if host.os == HostOs::Windows {
        let pipe = Endpoint::NamedPipe(PODMAN_PIPE.into());
        p.push(pipe, "Podman machine", true, false);
        return;
    }
    p.push_in_home(&PODMAN_MACHINE_IN_HOME);
    let tmp = host.var("TMPDIR").map(PathBuf::from);
    if let Some(tmp) = tmp.filter(|t| t.is_absolute() && host.os == HostOs::MacOs) {
        let socket = Endpoint::Unix(tmp.join("podman/podman-machine-default-api.sock"));
        p.push(socket, "Podman machine", true, false);
    }
}

/// containerd's rootful socket, and its rootless one on Linux.
fn nerdctl_places(p: &mut Places) {
    p.push_socket("/run/containerd/containerd.sock", "containerd", false);
    p.push_rootless("containerd-rootless/containerd.sock", "rootless containerd");
}

/// Finch's macOS VM socket, and its native socket on Linux.
fn finch_places(p: &mut Places) {
    p.push_socket(
        "/Applications/Finch/lima/data/finch/sock/finch.sock",
        "Finch",
        true,
    );
    if p.on_linux() {
        p.push_socket("/run/finch.sock", "Finch", false);
    }
}

#[cfg(test)]
mod tests;
