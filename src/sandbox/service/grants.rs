//! Token files and broker grants: a fresh token per container, the grant derived from it, and
//! which hub serves a workspace's broker socket (with the watch that takes it over).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ContainerService, Inner};
use crate::broker::secret::Secret;
use crate::broker::server::{Grant, GrantRequest, RouteKind};
use crate::engine::api::EngineApi;
use crate::error::{Error, Result};
use crate::lock::Locked;
use crate::names::paths::BROKER_MOUNT;
use crate::sandbox::blueprint::spec;
use crate::sandbox::folder::locks::HostLock;

/// How often a hub that does not serve a workspace's broker socket checks whether the one that
/// does is gone, and the one that does whether the token file changed.
const BROKER_WATCH_EVERY: Duration = Duration::from_secs(1);

/// The grants this hub holds and the broker sockets it serves or watches.
#[derive(Default)]
pub(super) struct BrokerGrants {
    /// Live broker grants by workspace, with the token-file content each was derived from.
    grants: Mutex<HashMap<String, (Grant, Secret)>>,
    /// Socket routes: per workspace, the lock that makes this hub the one serving the
    /// container's broker socket among hubs sharing the socket folder (when held), and the
    /// watch that takes over when the holder exits and re-grants when the token file changes.
    owners: Mutex<HashMap<String, BrokerOwner>>,
}

/// This hub's part in serving one workspace's broker socket.
struct BrokerOwner {
    lock: Option<HostLock>,
    watch: tokio::task::JoinHandle<()>,
}

/// A 256-bit random token, hex.
fn random_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::container_caused("", "no randomness for a token", e))?;
    Ok(hex::encode(bytes))
}

/// Writes a fresh token file with mode 0600 (folder 0700), replacing any earlier one (whole,
/// through a write-aside file a killed hub's successor sweeps).
pub(super) fn write_token_file(path: &Path) -> std::io::Result<()> {
    let dir = path.parent().expect("token files live in a folder");
    crate::platform::private_dirs(std::fs::DirBuilder::new().recursive(true)).create(dir)?;
    let token = random_token().map_err(std::io::Error::other)?;
    crate::write_aside::write_whole(path, token.as_bytes(), true)
}

/// Keeps one workspace's broker socket served while this hub has it: every
/// [`BROKER_WATCH_EVERY`], re-runs the grant, which takes the socket over when the hub that
/// served it is gone (its lock is free), and re-grants when the token file changed (another hub
/// made a new container). Ends when the token file is gone (the workspace was stopped), when
/// the workspace is revoked here, or when the service is gone.
async fn watch_broker<E: EngineApi>(inner: std::sync::Weak<Inner<E>>, workspace_id: String) {
    loop {
        tokio::time::sleep(BROKER_WATCH_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        let this = ContainerService { inner };
        let token = spec::token_file(
            &this.inner.config.container.po_home,
            &this.inner.config.container.owner,
            &workspace_id,
        );
        if !token.exists() {
            // The workspace was stopped (by any hub): this hub's part ends, and the socket it
            // served goes with it.
            this.revoke_for(&workspace_id);
            return;
        }
        if let Err(e) = this.grant_for(&workspace_id) {
            tracing::debug!(workspace = %workspace_id, error = %e, "broker watch: no grant");
        }
        // A stop that ran while this grant was made (its own revoke found nothing yet, or
        // this grant took the lock again after it): this watch ends what it made.
        if !token.exists() {
            this.revoke_for(&workspace_id);
            return;
        }
    }
}

impl<E: EngineApi> ContainerService<E> {
    /// Loads the broker's TLS roots now, in the background, when the broker is on.
    pub fn warm_broker(&self) {
        if let Some(w) = &self.inner.config.broker {
            w.broker.warm();
        }
    }

    /// Grants a container its broker route and tokens, derived from its token file so a hub
    /// that adopts it later can honour them again. `None` when the broker is off.
    pub(super) fn grant_for(&self, workspace_id: &str) -> Result<Option<Grant>> {
        let c = &self.inner.config;
        let Some(w) = &c.broker else { return Ok(None) };
        let token_path = spec::token_file(&c.container.po_home, &c.container.owner, workspace_id);
        let secret = std::fs::read_to_string(&token_path).map_err(|e| {
            let doing = format!(
                "cannot read its token file {} for the broker grant",
                token_path.display()
            );
            Error::container_caused(workspace_id, doing, e)
        })?;
        let secret = Secret::new(secret.trim());
        // The same token file and a grant still in force: keep it. A new grant would replace
        // the socket under the container's keep-alive connections to the old one.
        if let Some((grant, from)) = self.inner.grants.grants.locked().get(workspace_id)
            && from.expose() == secret.expose()
            && w.broker.grant_live(&grant.id)
        {
            return Ok(Some(grant.clone()));
        }
        let owner = Some((c.container.user.uid, c.container.user.gid));
        let mut request = GrantRequest {
            workspace: workspace_id.to_string(),
            providers: None,
            route: w.transport,
            owner,
            container_socket: Some(format!("{BROKER_MOUNT}/broker.sock")),
            container_host: None,
            secret: Some(secret.clone()),
            socket_folder: Some(w.socket_folder(&c.container.owner, workspace_id)),
            git_remotes: Vec::new(),
        };
        if w.transport == RouteKind::Socket && !self.serves_broker(workspace_id)? {
            // Another hub on this socket folder serves the container: its tokens are the same
            // (from the same token file); this hub takes over when that one is gone.
            let grant = w.broker.unbound_grant(request)?;
            return Ok(carries(&grant, &w.broker).then_some(grant));
        }
        // Read only for a grant this hub serves (an unbound one needs none, and the watch
        // asks for it every second).
        request.git_remotes = self.git_remotes(workspace_id);
        let grant = w.broker.grant(request)?;
        if !carries(&grant, &w.broker) {
            // No key on the host that the broker carries, no egress proxy and no git route:
            // nothing to hand the container.
            w.broker.revoke(&grant.id);
            return Ok(None);
        }
        let previous = self
            .inner
            .grants
            .grants
            .locked()
            .insert(workspace_id.to_string(), (grant.clone(), secret));
        if let Some((old, _)) = previous
            && old.id != grant.id
        {
            w.broker.revoke(&old.id);
        }
        Ok(Some(grant))
    }

    /// The URLs of the remotes in the workspace folder's own git configuration (the host's
    /// `.git/config`, a regular file, its includes not followed): where its pushes may go.
    fn git_remotes(&self, workspace_id: &str) -> Vec<String> {
        let folder = self.inner.folders.locked().get(workspace_id).cloned();
        folder
            .and_then(|f| crate::safe_read::read_regular(&f.join(".git").join("config"), 1 << 20))
            .map(|bytes| {
                crate::sandbox::folder::guards::GitConfig::remote_urls(&String::from_utf8_lossy(
                    &bytes,
                ))
            })
            .unwrap_or_default()
    }

    /// Whether this hub serves the workspace's broker socket: it holds the workspace's broker
    /// lock, or takes it now. Either way a watch runs from then on (see [`BrokerOwner`]).
    fn serves_broker(&self, workspace_id: &str) -> Result<bool> {
        let Some(w) = &self.inner.config.broker else {
            return Ok(false);
        };
        let mut owners = self.inner.grants.owners.locked();
        if let Some(o) = owners.get(workspace_id)
            && o.lock.is_some()
        {
            return Ok(true);
        }
        let folder = w.socket_folder(&self.inner.config.container.owner, workspace_id);
        let path = folder.with_extension("lock");
        let lock = HostLock::try_acquire(&path).map_err(|e| {
            let doing = format!("cannot open its broker lock {}", path.display());
            Error::container_caused(workspace_id, doing, e)
        })?;
        let serves = lock.is_some();
        match owners.get_mut(workspace_id) {
            Some(o) => o.lock = lock,
            None => {
                let watch = tokio::spawn(watch_broker(
                    Arc::downgrade(&self.inner),
                    workspace_id.to_string(),
                ));
                owners.insert(workspace_id.to_string(), BrokerOwner { lock, watch });
            }
        }
        Ok(serves)
    }

    /// Ends a workspace's broker grant and removes its socket folder and lock file, unless
    /// another hub still holds that lock (its watch removes them when it sees the workspace
    /// stopped).
    pub(super) fn revoke_for(&self, workspace_id: &str) {
        let id = self.inner.grants.grants.locked().remove(workspace_id);
        let Some(w) = &self.inner.config.broker else {
            return;
        };
        if let Some((grant, _)) = id {
            w.broker.revoke(&grant.id);
        }
        let mut owners = self.inner.grants.owners.locked();
        let held = owners.remove(workspace_id).and_then(|o| {
            o.watch.abort();
            o.lock
        });
        let folder = w.socket_folder(&self.inner.config.container.owner, workspace_id);
        let lock_path = folder.with_extension("lock");
        // The lock of a hub that served the socket and is gone is free: this hub takes it.
        let lock = held.or_else(|| {
            std::fs::symlink_metadata(&lock_path)
                .is_ok_and(|m| m.is_file())
                .then(|| HostLock::try_acquire(&lock_path).ok().flatten())
                .flatten()
        });
        // A socket another hub serves is that hub's to remove; this hub's goes before its lock
        // does, so a hub taking over never loses its fresh socket.
        if lock.is_some() || !lock_path.exists() {
            crate::sandbox::on_engine::inventory::remove_broker_folder(&folder);
        }
        if let Some(lock) = lock {
            lock.remove(&lock_path);
        }
    }

    /// On the TCP route, the environment of this hub's grant for a command run now
    /// ([`spec::exec_route_env`]): the ports are this hub's, and an adopted container's
    /// environment holds those of the hub that created it (its broker address, egress proxy,
    /// git and registry routes).
    pub(super) fn current_route_env(&self, id: &str) -> Vec<String> {
        let grants = self.inner.grants.grants.locked();
        let Some((grant, _)) = grants.get(id) else {
            return vec![];
        };
        if !grant.env.contains_key("PO_BROKER_ADDRESS") {
            return vec![];
        }
        let env = grant.env.iter();
        spec::exec_route_env(
            env.map(|(k, v)| (k.clone(), v.expose().to_string()))
                .collect(),
        )
    }

    /// Where a workspace's exec spawner is found: with a socket route only (its folder is
    /// the one the container has of the host's).
    pub(super) fn spawner_place(
        &self,
        id: &str,
    ) -> Option<crate::sandbox::on_engine::exec::spawner::Place> {
        let c = &self.inner.config;
        let wiring = c
            .broker
            .as_ref()
            .filter(|w| w.transport == RouteKind::Socket && c.container.carried.is_none())?;
        let token = spec::token_file(&c.container.po_home, &c.container.owner, id);
        Some(crate::sandbox::on_engine::exec::spawner::Place {
            record: crate::sandbox::on_engine::exec::spawner::record_path(&token),
            host_dir: wiring.socket_folder(&c.container.owner, id),
            container_dir: BROKER_MOUNT.into(),
        })
    }

    /// The broker grant this hub holds for a workspace, when it holds one.
    pub(super) fn granted_now(&self, workspace_id: &str) -> Option<Grant> {
        let grants = self.inner.grants.grants.locked();
        grants.get(workspace_id).map(|(g, _)| g.clone())
    }

    /// The id of the broker grant this hub holds for a workspace.
    #[cfg(test)]
    pub(super) fn granted(&self, workspace_id: &str) -> Option<String> {
        let grants = self.inner.grants.grants.locked();
        grants.get(workspace_id).map(|(g, _)| g.id.clone())
    }

    /// After its container is gone: removes the workspace's token file, rules record, free
    /// start lock, guard copies and review baseline, and ends its broker grant (and the socket, when this hub serves it).
    pub(super) fn forget_token(&self, id: &str) {
        let c = &self.inner.config.container;
        crate::sandbox::on_engine::inventory::remove_token_files(&c.po_home, &c.owner, id);
        self.revoke_for(id);
        self.drop_carried(id);
    }
}

/// Whether a grant hands the container anything: a provider's token, the egress proxy, the
/// git route or a registry route.
fn carries(grant: &Grant, broker: &crate::broker::server::Broker) -> bool {
    !grant.providers.is_empty()
        || broker.egress_on()
        || grant.env.contains_key(crate::broker::git::TOKEN_VAR)
        || grant.env.contains_key(crate::broker::registry::TOKEN_VAR)
}
