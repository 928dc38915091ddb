//! The registry routes' listeners and a grant's part of them: its placeholder, its sockets on
//! the socket route, and the container's variables that point npm and pip at them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{FIRST_PORT, Kind, PORTS_VAR, TOKEN_PREFIX, TOKEN_VAR, npmrc};
use crate::broker::grant::{CONTAINER_HOST, GrantRequest, GrantRoute, service_token};
use crate::broker::secret::Secret;
use crate::broker::server::{Broker, TokenEntry};
use crate::broker::socket::{bind_socket, file_identity};
use crate::error::{Error, Result};
use crate::lock::Locked;

/// Where the container's npm user config is written (by its bridge, from [`NPMRC_VAR`]).
pub const NPMRC_PATH: &str = "/tmp/po-sandbox-npmrc";
/// The variable holding the container's npm user config.
pub const NPMRC_VAR: &str = "PO_SANDBOX_NPMRC";

/// The start of a registry socket's file name (then its index and `.sock`).
pub const SOCKET_PREFIX: &str = "reg-";

/// A registry socket's file name in a grant's route folder.
pub fn socket_name(index: usize) -> String {
    format!("{SOCKET_PREFIX}{index}.sock")
}

/// A grant's registry sockets: their listener tasks and file identities.
pub type Sockets = Vec<(tokio::task::JoinHandle<()>, Option<(u64, u64)>)>;

/// Stops a revoked grant's registry sockets and removes the files it bound (not a later
/// grant's); hands back the tasks to wait for.
pub fn close_sockets(dir: Option<&Path>, sockets: Sockets) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (index, (task, bound)) in sockets.into_iter().enumerate() {
        task.abort();
        if let (Some(dir), Some(bound)) = (dir, bound) {
            let socket = dir.join(socket_name(index));
            if file_identity(&socket) == Some(bound) {
                let _ = std::fs::remove_file(&socket);
            }
        }
        tasks.push(task);
    }
    tasks
}

impl Broker {
    /// How many registries the broker routes (each grant gets a route to each).
    pub fn registry_count(&self) -> usize {
        self.inner.registries.len()
    }

    /// The TCP route's registry ports (empty when the broker has no TCP route or no registry).
    pub fn registry_tcp_ports(&self) -> Vec<u16> {
        let listening = self.inner.registry_tcp.locked();
        listening.iter().map(|(addr, _)| addr.port()).collect()
    }

    /// The TCP route's port of each registry route, shared by the TCP grants.
    pub(in crate::broker) async fn listen_registries_tcp(&self) -> Result<()> {
        for index in 0..self.inner.registries.len() {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| {
                    Error::broker_caused("cannot listen on 127.0.0.1 for a registry", e)
                })?;
            let addr = listener.local_addr().map_err(|e| {
                Error::broker_caused("cannot read a registry listener's address", e)
            })?;
            let this = self.clone();
            let task = tokio::spawn(async move { this.serve_tcp(listener, Some(index)).await });
            self.inner.registry_tcp.locked().push((addr, task));
        }
        Ok(())
    }

    /// A grant's part of the registry routes, when the broker has any: its placeholder's
    /// entry, its sockets (socket route), and the container's variables in `env`.
    pub(in crate::broker) fn registry_grant(
        &self,
        request: &GrantRequest,
        id: &str,
        route: &GrantRoute,
        connections: &Arc<Semaphore>,
        env: &mut BTreeMap<String, Secret>,
    ) -> Result<(Option<TokenEntry>, Sockets)> {
        let registries = &self.inner.registries;
        if registries.is_empty() {
            return Ok((None, Vec::new()));
        }
        let token = service_token(
            request.secret.as_ref(),
            b"po-registry-token/1",
            TOKEN_PREFIX,
        )?;
        let mut sockets: Sockets = Vec::new();
        let mut bases: Vec<String> = Vec::new();
        match route {
            GrantRoute::Socket {
                host_dir,
                container_socket,
                ..
            } => {
                let folder = container_socket.rsplit_once('/').map_or("", |(f, _)| f);
                let mut ports = Vec::new();
                for index in 0..registries.len() {
                    let port = FIRST_PORT + index as u16;
                    ports.push(format!("{port}={folder}/{}", socket_name(index)));
                    bases.push(format!("http://127.0.0.1:{port}"));
                    if host_dir.as_os_str().is_empty() {
                        continue; // an unbound grant: another hub serves the sockets
                    }
                    let socket = host_dir.join(socket_name(index));
                    let listener = match bind_socket(host_dir, &socket, request.owner) {
                        Ok(l) => l,
                        Err(e) => {
                            close_sockets(None, sockets);
                            return Err(e);
                        }
                    };
                    let bound = file_identity(&socket);
                    let (this, grant, connections) =
                        (self.clone(), id.to_string(), connections.clone());
                    let task = tokio::spawn(async move {
                        this.serve_unix(listener, (grant, Some(index)), connections)
                            .await
                    });
                    sockets.push((task, bound));
                }
                env.insert(PORTS_VAR.into(), Secret::new(ports.join(",")));
            }
            GrantRoute::Tcp { .. } => {
                let host = request.container_host.as_deref().unwrap_or(CONTAINER_HOST);
                for (addr, _) in self.inner.registry_tcp.locked().iter() {
                    bases.push(format!("http://{host}:{}", addr.port()));
                }
                env.insert("PIP_TRUSTED_HOST".into(), Secret::new(host));
            }
        }
        container_env(registries, &bases, &token, env);
        env.insert(TOKEN_VAR.into(), token.clone());
        let entry = TokenEntry {
            grant: id.to_string(),
            providers: vec![],
            token,
            git: false,
            registry: true,
        };
        Ok((Some(entry), sockets))
    }
}

/// The variables that point npm and pip at the routes at `bases` (one per registry).
fn container_env(
    registries: &[super::Registry],
    bases: &[String],
    token: &Secret,
    env: &mut BTreeMap<String, Secret>,
) {
    let routes: Vec<(&super::Registry, String)> = registries
        .iter()
        .zip(bases)
        .map(|(r, base)| (r, format!("{base}/")))
        .collect();
    if routes.iter().any(|(r, _)| r.kind == Kind::Npm) {
        env.insert(
            NPMRC_VAR.into(),
            Secret::new(npmrc::container_config(&routes)),
        );
        env.insert("npm_config_userconfig".into(), Secret::new(NPMRC_PATH));
    }
    if let Some((r, base)) = routes.iter().find(|(r, _)| r.kind == Kind::Pip) {
        let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
        let index = format!(
            "{scheme}://po:{}@{}{}",
            token.expose(),
            rest.trim_end_matches('/'),
            r.prefix
        );
        env.insert("PIP_INDEX_URL".into(), Secret::new(index.clone()));
        env.insert("UV_INDEX_URL".into(), Secret::new(index));
    }
}
