//! A grant as JS reads it (`BrokerGrant`): its tokens in the clear for the container, its route
//! flattened into optional fields, its withheld credentials as objects.

use std::collections::HashMap;

use super::{Grant, GrantRoute, RouteKind};

/// What a container gets.
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerGrant {
    /// The grant id, for `revoke`.
    pub id: String,
    pub workspace: String,
    /// Providers brokered.
    pub providers: Vec<String>,
    /// The environment to hand the container: `PO_BROKER_PROVIDERS`, exactly one of
    /// `PO_BROKER_SOCKET` / `PO_BROKER_ADDRESS`, and each provider's key variable holding its
    /// per-grant token. Empty when the broker is off.
    pub env: HashMap<String, String>,
    /// The route (absent when the broker is off).
    pub route: Option<BrokerGrantRoute>,
    /// Host credentials that never reach the container, with reasons.
    pub withheld: Vec<WithheldCredential>,
}

/// A grant's route.
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerGrantRoute {
    pub kind: RouteKind,
    /// socket: the socket on the host.
    pub host_socket: Option<String>,
    /// socket: its folder, to bind-mount into the container (at the folder of `containerSocket`).
    pub host_dir: Option<String>,
    /// socket: the path the container sees (`PO_BROKER_SOCKET`).
    pub container_socket: Option<String>,
    /// tcp: the broker's `127.0.0.1:<port>`.
    pub address: Option<String>,
    /// tcp: what the container dials (`PO_BROKER_ADDRESS`).
    pub container_address: Option<String>,
}

/// A credential the broker keeps on the host.
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithheldCredential {
    pub variable: String,
    pub reason: String,
}

impl From<Grant> for BrokerGrant {
    fn from(grant: Grant) -> BrokerGrant {
        let env = grant.exposed_env();
        let withheld = grant.withheld.into_iter();
        BrokerGrant {
            env,
            id: grant.id,
            workspace: grant.workspace,
            providers: grant.providers,
            route: grant.route.map(BrokerGrantRoute::from),
            withheld: withheld
                .map(|(variable, reason)| WithheldCredential { variable, reason })
                .collect(),
        }
    }
}

impl From<GrantRoute> for BrokerGrantRoute {
    fn from(route: GrantRoute) -> BrokerGrantRoute {
        BrokerGrantRoute {
            kind: route.kind(),
            host_socket: route.host_socket(),
            host_dir: route.host_dir(),
            container_socket: route.container_socket(),
            address: route.address(),
            container_address: route.container_address(),
        }
    }
}
