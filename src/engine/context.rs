//! Docker CLI contexts: which Docker endpoint the user picked with `docker context use` or
//! `DOCKER_CONTEXT`, read the way the docker CLI reads it, so the layer talks to the engine
//! `docker info` talks to (Colima, OrbStack, Rancher Desktop and remote setups are usually
//! selected this way).
//!
//! Order, as the CLI: `DOCKER_HOST` > `DOCKER_CONTEXT` > `currentContext` in
//! `$DOCKER_CONFIG/config.json` (`~/.docker/config.json`) > the defaults. The context named
//! `default` is the defaults. A named context's endpoint is `Endpoints.docker.Host` in
//! `contexts/meta/<sha256(name)>/meta.json` below the same folder.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::endpoint::Tls;
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::names::vars::{CONFIG_VAR, CONTEXT_VAR};

/// The context that means "the defaults".
pub const DEFAULT_CONTEXT: &str = "default";

/// A named Docker context that supplies Docker's endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerContext {
    /// The context's name.
    pub name: String,
    /// Its `Endpoints.docker.Host` (a `DOCKER_HOST`-style URI).
    pub host: String,
    /// How it was chosen: `DOCKER_CONTEXT` or `currentContext`.
    pub source: &'static str,
    /// TLS to its `tcp://` engine: the context's TLS material (`contexts/tls/<sha256(name)>/docker/`)
    /// when it has some, refused when it skips the certificate check.
    pub tls: Tls,
}

/// The docker CLI's config folder: `DOCKER_CONFIG` when absolute, else `~/.docker`; `None`
/// without either (no absolute `HOME`).
pub fn config_dir(host: &HostEnv) -> Option<PathBuf> {
    match host.var(CONFIG_VAR).map(PathBuf::from) {
        Some(d) if d.is_absolute() => Some(d),
        _ => host.home().map(|h| h.join(".docker")),
    }
}

/// The folder of a context's metadata: `contexts/meta/<sha256(name)>` below the config folder.
pub fn meta_dir(config: &Path, name: &str) -> PathBuf {
    let digest = hex::encode(Sha256::digest(name.as_bytes()));
    config.join("contexts").join("meta").join(digest)
}

/// The Docker context in force, reading files through `read` (`NotFound` means absent).
/// `None`: the defaults apply (`DOCKER_HOST` is set, no context is chosen, or it is `default`).
/// `ENGINE_CONTEXT_INVALID` for a malformed config or meta file and for a missing context.
pub fn resolve(
    host: &HostEnv,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<Option<DockerContext>> {
    if host.var("DOCKER_HOST").is_some() {
        return Ok(None);
    }
    let config = config_dir(host);
    let (name, source) = match host.var(CONTEXT_VAR) {
        Some(name) => (name.trim().to_string(), CONTEXT_VAR),
        None => match &config {
            Some(dir) => match current_context(&dir.join("config.json"), read)? {
                Some(name) => (name, "currentContext"),
                None => return Ok(None),
            },
            None => return Ok(None),
        },
    };
    if name.is_empty() || name == DEFAULT_CONTEXT {
        return Ok(None);
    }
    let Some(config) = config else {
        return Err(invalid(format!(
            "{CONTEXT_VAR} names the Docker context '{name}', but neither {CONFIG_VAR} nor HOME says where the docker CLI keeps its contexts. Set {CONFIG_VAR} to that folder (usually ~/.docker), or unset {CONTEXT_VAR}"
        )));
    };
    let (host_uri, skip_verify) = context_host(&config, &name, source, read)?;
    let tls = if skip_verify {
        Tls::Unverified
    } else {
        let dir = tls_dir(&config, &name);
        let has = |f: &str| read(&dir.join(f)).is_ok();
        match has("ca.pem") || has("cert.pem") {
            true => Tls::Verify(dir),
            false => Tls::Off,
        }
    };
    Ok(Some(DockerContext {
        name,
        host: host_uri,
        source,
        tls,
    }))
}

/// `currentContext` of the config file; `None` when the file or the field is absent.
fn current_context(
    file: &Path,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<Option<String>> {
    let text = match read(file) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(file, &e)),
    };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "the docker CLI config {} is not valid JSON ({e}). Fix or remove the file (docker writes it again), or set {CONTEXT_VAR}/DOCKER_HOST to bypass it",
            file.display()
        ))
    })?;
    match json.get("currentContext") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(other) => Err(invalid(format!(
            "currentContext in {} is {other}, not a context name. Fix it with 'docker context use NAME' (or 'docker context use default')",
            file.display()
        ))),
    }
}

/// `Endpoints.docker.Host` of a named context's meta.json.
/// Where the docker CLI keeps a context's TLS material for its Docker endpoint.
pub fn tls_dir(config: &Path, name: &str) -> PathBuf {
    let digest = hex::encode(Sha256::digest(name.as_bytes()));
    config
        .join("contexts")
        .join("tls")
        .join(digest)
        .join("docker")
}

/// The context's `Endpoints.docker.Host`, and whether it skips the TLS check
/// (`SkipTLSVerify`).
fn context_host(
    config: &Path,
    name: &str,
    source: &str,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<(String, bool)> {
    let file = meta_dir(config, name).join("meta.json");
    let chosen_by = match source {
        CONTEXT_VAR => format!("{CONTEXT_VAR}={name}"),
        _ => format!(
            "currentContext \"{name}\" in {}",
            config.join("config.json").display()
        ),
    };
    let text = match read(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(invalid(format!(
                "the Docker context '{name}' (from {chosen_by}) does not exist: no {}. List the contexts with 'docker context ls' and pick one with 'docker context use NAME', or create it with 'docker context create {name} --docker host=unix:///path/to/docker.sock'",
                file.display()
            )));
        }
        Err(e) => return Err(unreadable(&file, &e)),
    };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "the Docker context '{name}' has a malformed {} ({e}). Recreate it ('docker context rm {name}', then 'docker context create {name} --docker host=...'), or pick another with 'docker context use NAME'",
            file.display()
        ))
    })?;
    let skip =
        json.pointer("/Endpoints/docker/SkipTLSVerify") == Some(&serde_json::Value::Bool(true));
    match json.pointer("/Endpoints/docker/Host") {
        Some(serde_json::Value::String(h)) if !h.trim().is_empty() => {
            Ok((h.trim().to_string(), skip))
        }
        _ => Err(invalid(format!(
            "the Docker context '{name}' ({}) has no Endpoints.docker.Host. Set one with 'docker context update {name} --docker host=unix:///path/to/docker.sock', or pick another with 'docker context use NAME'",
            file.display()
        ))),
    }
}

fn invalid(reason: String) -> Error {
    Error::EngineContextInvalid { reason }
}

fn unreadable(file: &Path, e: &std::io::Error) -> Error {
    invalid(format!(
        "cannot read {} ({e}). Make it readable to this user, or set DOCKER_HOST to bypass Docker contexts",
        file.display()
    ))
}

/// Reads a file of the docker CLI's config (the real file system).
pub fn read_file(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

#[cfg(test)]
mod tests;
