//! What a create made so far, undone together when a later step fails.

use std::path::PathBuf;

use super::ContainerService;
use crate::engine::api::EngineApi;
use crate::sandbox::blueprint::spec;
use crate::sandbox::folder::guards;

/// What `create` made so far, undone together when a later step fails: nothing half-done
/// (no container, token file, broker grant or fresh review baseline of a container that does
/// not run).
pub(super) struct Rollback<'a, E> {
    pub(super) service: &'a ContainerService<E>,
    pub(super) workspace: &'a str,
    /// A baseline this create took (one kept from an earlier container is not undone).
    pub(super) baseline: Option<PathBuf>,
    pub(super) token: Option<PathBuf>,
    pub(super) granted: bool,
    pub(super) container: Option<String>,
    /// A copy volume this create made (holding nothing of the agent's yet).
    pub(super) copy_volume: Option<String>,
    /// A runtime bundle's volume this create is to fill (remote engines): empty or half-filled
    /// until the create succeeds, so never kept when it fails.
    pub(super) bundle_volume: Option<String>,
}

impl<'a, E: EngineApi> Rollback<'a, E> {
    /// Nothing made yet.
    pub(super) fn new(service: &'a ContainerService<E>, workspace: &'a str) -> Self {
        Rollback {
            service,
            workspace,
            baseline: None,
            token: None,
            granted: false,
            container: None,
            copy_volume: None,
            bundle_volume: None,
        }
    }

    /// Keeps everything: the work was handed to a container that is adopted instead.
    pub(super) fn disarm(&mut self) {
        self.baseline = None;
        self.token = None;
        self.granted = false;
        self.container = None;
        self.copy_volume = None;
        self.bundle_volume = None;
    }

    /// Undoes what was made, newest first: the container (and its holder), the token file, the
    /// baseline, the grant.
    pub(super) async fn undo(self) {
        if let Some(id) = &self.container {
            let _ = self.service.stop_and_remove(id, self.workspace).await;
        }
        // Made by this create and holding nothing of the agent's yet.
        if let Some(volume) = &self.bundle_volume {
            let _ = self.service.changes().remove_volume(volume).await;
        }
        if let Some(volume) = &self.copy_volume {
            let _ = self.service.changes().remove_volume(volume).await;
        }
        if let Some(token) = &self.token {
            let _ = std::fs::remove_file(token);
        }
        // The guard placeholders its preparation made: no container of this create mounts them.
        let c = &self.service.inner.config.container;
        guards::placeholders::take_away(&spec::guard_copies(&c.po_home, &c.owner, self.workspace));
        if let Some(baseline) = &self.baseline {
            let _ = std::fs::remove_file(baseline);
        }
        if self.granted {
            self.service.revoke_for(self.workspace);
        }
        // The links a carried container's start opened.
        if self.container.is_some() {
            self.service.drop_carried(self.workspace);
        }
    }
}
