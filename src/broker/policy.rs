//! What the broker forwards for a provider beyond the request rules: only the provider's model
//! endpoints ([`routes::paths`]) and the paths the host adds (`PO_SANDBOX_BROKER_ALLOW_PATHS`);
//! a path outside both is refused with 403 before anything reaches the upstream. In the `none`
//! and `allowlist` modes, bodies that ask the provider to fetch a URL are refused too
//! ([`super::screen`]), except for the providers in `PO_SANDBOX_BROKER_ALLOW_FETCH`.

use std::collections::HashMap;

use hyper::StatusCode;

use super::decode::{DECODE_DEPTH, decodings};
use super::reply::Failure;
use super::routes::{self, ProviderRoute, paths};
use super::screen::apis;
use super::screen::shape::{Finding, Grammar};
use crate::error::{Error, Result};
use crate::names::vars::{ALLOW_FETCH_VAR, ALLOW_PATHS_VAR};

/// The host's additions to the forwarded paths, by provider id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwardPolicy {
    extra_paths: HashMap<&'static str, Vec<String>>,
    /// Screen request bodies (the `none` and `allowlist` modes).
    screen: bool,
    /// Providers whose bodies are not screened (`PO_SANDBOX_BROKER_ALLOW_FETCH`).
    allow_fetch: Vec<&'static str>,
}

impl ForwardPolicy {
    /// Reads `PO_SANDBOX_BROKER_ALLOW_PATHS` and `PO_SANDBOX_BROKER_ALLOW_FETCH` from
    /// `host_env`; `screen`: the mode asks for the body screen. A bad entry is
    /// `OPTIONS_INVALID` naming it and why.
    pub fn from_env(host_env: &HashMap<String, String>, screen: bool) -> Result<ForwardPolicy> {
        let allow_fetch = entries(host_env, ALLOW_FETCH_VAR)
            .map(|id| {
                routes::find(id).map(|r| r.id).ok_or_else(|| Error::OptionsInvalid {
                    option: ALLOW_FETCH_VAR.into(),
                    reason: format!("{id:?} is not a provider the broker carries; expected comma-separated provider ids"),
                })
            })
            .collect::<Result<_>>()?;
        Ok(ForwardPolicy {
            extra_paths: extra_paths(host_env)?,
            screen,
            allow_fetch,
        })
    }

    /// Whether `route`'s request bodies go through the fetch screen.
    pub fn screens(&self, route: &ProviderRoute) -> bool {
        self.screen && !self.allow_fetch.contains(&route.id)
    }

    /// The 403 for a body the screen refused.
    pub fn fetch_refused(
        route: &ProviderRoute,
        grammar: Option<&Grammar>,
        found: &Finding,
    ) -> Failure {
        let id = route.id;
        Failure(
            StatusCode::FORBIDDEN,
            format!(
                "the request body holds {}; in this workspace's network mode (none or allowlist) the broker forwards only the body shapes of plain model calls, so that no request makes {id} fetch a URL, search or browse; to allow it, add {id} to {ALLOW_FETCH_VAR} on the host (see docs/security.md, What the broker forwards)",
                found.describe(grammar)
            ),
        )
    }

    /// The body shape of the endpoint `rest` goes to (see [`Self::check_path`] for `prefix`):
    /// the one built-in endpoint that every percent-decoding of the path reaches; `None` when
    /// some decoding reaches none (a path the host added) or two decodings reach different
    /// ones, and for endpoints that take no body. (The request path gets it from
    /// [`Self::check_path`].)
    #[cfg(test)]
    pub fn grammar(route: &ProviderRoute, rest: &str, prefix: &str) -> Option<&'static Grammar> {
        let (layers, deeper) = decodings(rest.as_bytes(), DECODE_DEPTH + 1);
        if deeper {
            return None;
        }
        grammar_of(route, &layers, prefix)
    }

    /// The 403 for a compressed body, which the screen cannot read.
    pub fn encoded_refused(route: &ProviderRoute) -> Failure {
        let id = route.id;
        Failure(
            StatusCode::FORBIDDEN,
            format!(
                "a request body with a Content-Encoding cannot be screened for URLs to fetch in this network mode; send it uncompressed, or add {id} to {ALLOW_FETCH_VAR} on the host"
            ),
        )
    }

    /// Whether the broker forwards `rest` (the path after `/<provider>`, no query) for `route`:
    /// as sent and in every percent-decoding of it, it (or `prefix`, the upstream's base path,
    /// followed by it) is one of the route's model endpoints or of the host's additions. The 403 otherwise names the path, the provider and the way to
    /// allow it; call it only once the path passed the token check (it may then be shown).
    /// Forwarded, the body shape of its endpoint, from the same decodings ([`grammar_of`]).
    pub fn check_path(
        &self,
        route: &ProviderRoute,
        rest: &str,
        prefix: &str,
    ) -> std::result::Result<Option<&'static Grammar>, Failure> {
        let extra = self
            .extra_paths
            .get(route.id)
            .map_or(&[][..], Vec::as_slice);
        let (layers, deeper) = decodings(rest.as_bytes(), DECODE_DEPTH + 1);
        let every = !deeper
            && layers.iter().all(|layer| {
                std::str::from_utf8(layer).is_ok_and(|p| {
                    // The upstream gets `prefix` + path: a host base URL ending in `/v1` makes
                    // `/models` the endpoint `/v1/models`.
                    let upstream = format!("{prefix}{p}");
                    paths::allowed(route, extra, p) || paths::allowed(route, extra, &upstream)
                })
            });
        if every {
            return Ok(grammar_of(route, &layers, prefix));
        }
        let id = route.id;
        Err(Failure(
            StatusCode::FORBIDDEN,
            format!(
                "{rest} is not a model endpoint the broker forwards for {id} (paths are matched exactly, after percent-decoding); to allow it, add {id}:{rest} to {ALLOW_PATHS_VAR} on the host (see docs/security.md, What the broker forwards)"
            ),
        ))
    }
}

/// The body shape of the one built-in endpoint every decoding in `layers` reaches (see
/// [`ForwardPolicy::check_path`], which decoded them); `None` when some decoding reaches none (a
/// path the host added), two reach different ones, or the endpoint takes no body.
fn grammar_of(
    route: &ProviderRoute,
    layers: &[impl AsRef<[u8]>],
    prefix: &str,
) -> Option<&'static Grammar> {
    let mut found: Option<(paths::Api, &'static str)> = None;
    for layer in layers {
        let p = std::str::from_utf8(layer.as_ref()).ok()?;
        let upstream = format!("{prefix}{p}");
        let here = paths::endpoint(route, p).or_else(|| paths::endpoint(route, &upstream))?;
        if found.is_some_and(|f| f != here) {
            return None;
        }
        found = Some(here);
    }
    let (api, endpoint) = found?;
    apis::grammar(api, endpoint)
}

/// `PO_SANDBOX_BROKER_ALLOW_PATHS`: comma-separated `<provider>:<path>` entries (blank ones
/// skipped), each path a pattern of [`paths::matches`], by provider.
fn extra_paths(host_env: &HashMap<String, String>) -> Result<HashMap<&'static str, Vec<String>>> {
    let mut extra_paths: HashMap<&'static str, Vec<String>> = HashMap::new();
    for entry in entries(host_env, ALLOW_PATHS_VAR) {
        let bad = |why: &str| Error::OptionsInvalid {
            option: ALLOW_PATHS_VAR.into(),
            reason: format!("{entry:?}: {why}; expected <provider>:<path>, e.g. openai:/v1/files"),
        };
        let (id, pattern) = entry
            .split_once(':')
            .ok_or_else(|| bad("no ':' after the provider"))?;
        let route = routes::find(id).ok_or_else(|| bad("not a provider the broker carries"))?;
        paths::check_pattern(pattern).map_err(bad)?;
        extra_paths
            .entry(route.id)
            .or_default()
            .push(pattern.to_string());
    }
    Ok(extra_paths)
}

/// A variable's comma-separated entries, trimmed, blank ones skipped.
fn entries<'a>(host_env: &'a HashMap<String, String>, var: &str) -> impl Iterator<Item = &'a str> {
    host_env
        .get(var)
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
}

#[cfg(test)]
mod tests;
