//! `brokeredBaseUrl` and `brokerOrigin`: the URL arithmetic of re-pointing providers at the
//! credential broker.

use napi::Env;
use napi::bindgen_prelude::{JsObjectValue, Object};
use napi_derive::napi;

use super::errors::coded;
use crate::contained::rebase::{self, Refusal};

fn invalid(env: &Env, refusal: Refusal) -> napi::Error {
    coded(env, &refusal.into())
}

/// A model's base URL re-pointed at the broker: `baseUrl` keeps its path (and a trailing `/`),
/// its scheme, host and port become `brokerOrigin` + `/` + `provider`. For example
/// `https://openrouter.ai/api/v1` with `openrouter` and `http://127.0.0.1:41234` becomes
/// `http://127.0.0.1:41234/openrouter/api/v1`. An empty `baseUrl` is accepted only for a
/// provider whose upstream is per-resource (`azure`): it becomes `brokerOrigin/azure`, the broker
/// adding the resource's base path.
///
/// Throws `OPTIONS_INVALID` when `baseUrl` is not an absolute http(s) URL or carries user info, a
/// query, a fragment or a `.`/`..` segment; when `provider` is not a provider id; or when
/// `brokerOrigin` is not `http://host:port` without a path.
#[napi]
pub fn brokered_base_url(
    env: &Env,
    base_url: String,
    provider: String,
    broker_origin: String,
) -> napi::Result<String> {
    rebase::brokered_base_url(&base_url, &provider, &broker_origin).map_err(|e| invalid(env, e))
}

/// The origin SDKs inside a container use for the broker: the loopback bridge
/// `http://127.0.0.1:<bridgePort>` for a `socket` route (`bridgePort` required), `http://<target>`
/// for a `tcp` route. Throws `OPTIONS_INVALID` on a socket route without a bridge port, a `tcp`
/// target that is not `host:port`, or another kind.
#[napi(ts_args_type = "route: BrokerRouteInfo, bridgePort?: number | undefined | null")]
pub fn broker_origin(
    env: &Env,
    route: Object<'_>,
    bridge_port: Option<u32>,
) -> napi::Result<String> {
    let port = match bridge_port {
        None => None,
        Some(p) => match u16::try_from(p) {
            Ok(p) => Some(p),
            Err(_) => {
                return Err(invalid(
                    env,
                    Refusal {
                        argument: "bridgePort",
                        reason: "must be a TCP port 1-65535".into(),
                    },
                ));
            }
        },
    };
    // Read as plain strings (not a RouteKind) so an unknown kind is OPTIONS_INVALID.
    let kind: String = route.get_named_property("kind")?;
    let target: String = route.get_named_property("target")?;
    rebase::broker_origin(&kind, &target, port).map_err(|e| invalid(env, e))
}
