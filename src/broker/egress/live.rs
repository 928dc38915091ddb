//! The egress policy in force, replaced while the broker runs, and each connection's watch on
//! it: a connection checked under one policy ends when a later one no longer allows it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpStream;

use super::rules::{self, Target, Verdict};
use super::{EgressPolicy, dial};

/// The egress policy in force, replaced while the broker runs (the policy file); every
/// connection made under it watches it and ends when a new one no longer allows its
/// destination.
pub struct LiveEgress {
    tx: tokio::sync::watch::Sender<Arc<EgressPolicy>>,
}

impl LiveEgress {
    pub fn new(policy: EgressPolicy) -> LiveEgress {
        LiveEgress {
            tx: tokio::sync::watch::Sender::new(Arc::new(policy)),
        }
    }

    /// The policy in force.
    pub fn now(&self) -> Arc<EgressPolicy> {
        self.tx.borrow().clone()
    }

    /// Puts `policy` in force; connections it does not allow end.
    pub fn replace(&self, policy: EgressPolicy) {
        self.tx.send_replace(Arc::new(policy));
    }

    /// A view of the policy in force, taken before a connection is checked against it: a
    /// policy put in force after it is seen by [`revoked`], however long the connection takes
    /// to open.
    pub(super) fn view(&self) -> Watched {
        self.tx.subscribe()
    }
}

/// A connection's view of the policy in force.
pub(super) type Watched = tokio::sync::watch::Receiver<Arc<EgressPolicy>>;

/// Where a connection goes, as its checks need it: the workspace, the destination, the
/// address dialled (once known) and whether a name override chose it.
#[derive(Clone)]
pub(super) struct Route {
    pub(super) workspace: String,
    pub(super) target: Target,
    pub(super) dialled: Option<IpAddr>,
    pub(super) overridden: bool,
}

impl Route {
    /// Whether `policy` still lets this connection through: the destination still listed, a
    /// name still dialled where an override said (an override that is gone or moved ends it),
    /// a looked-up address still public.
    fn allowed_by(&self, policy: &EgressPolicy) -> bool {
        match rules::decide(
            &policy.list_for(&self.workspace),
            &policy.resolve,
            &self.target,
        ) {
            Verdict::Denied(_) => false,
            Verdict::Dial(ip) => self.dialled.is_none_or(|d| d == ip),
            Verdict::Lookup(_) => {
                !self.overridden
                    && self
                        .dialled
                        .is_none_or(|d| rules::refused(d, &policy.host_addresses).is_none())
            }
        }
    }
}

/// Why an upstream was not opened.
pub(super) enum NotOpened {
    /// A policy put in force meanwhile no longer allows it.
    Withdrawn,
    /// The dial failed.
    Failed(std::io::Error),
}

/// Why a withdrawn connection was refused.
pub(super) const WITHDRAWN: &str =
    "the policy in force changed while the connection opened and no longer allows it";

/// Dials `addrs` for `route` while the policy in force (`view`) allows it: checked before the
/// dial and again, with the address dialled, after it, before a byte is sent.
pub(super) async fn dial_for(
    addrs: &[SocketAddr],
    view: &Watched,
    mut route: Route,
) -> Result<(TcpStream, Route), NotOpened> {
    if !route.allowed_by(&view.borrow()) {
        return Err(NotOpened::Withdrawn);
    }
    let upstream = dial(addrs).await.map_err(NotOpened::Failed)?;
    route.dialled = upstream.peer_addr().ok().map(|a| a.ip());
    if !route.allowed_by(&view.borrow()) {
        return Err(NotOpened::Withdrawn);
    }
    Ok((upstream, route))
}

/// Resolves once the policy in force (from the one `rx` was checked against on) no longer
/// lets `route` through ([`Route::allowed_by`]).
pub(super) async fn revoked(mut rx: Watched, route: Route) {
    loop {
        let now = rx.borrow_and_update().clone();
        if !route.allowed_by(&now) {
            return;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}
