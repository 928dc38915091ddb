//! npm's user config: the host's, read for its registries and their credentials, and the
//! container's, written to point npm at the registry routes.

use std::collections::HashMap;

use super::{Credential, Kind, Registry, split_url};
use crate::broker::secret::Secret;

/// npm's default registry.
pub const DEFAULT_REGISTRY: &str = "https://registry.npmjs.org/";
/// The largest user config read.
const MAX_BYTES: u64 = 1 << 20;

/// The host's npm user config: `npm_config_userconfig`, else `$HOME/.npmrc`; its `key=value`
/// lines (comments and blank lines dropped, `${VAR}` expanded from `env`).
fn host_config(env: &HashMap<String, String>) -> Vec<(String, String)> {
    let given = env
        .get("npm_config_userconfig")
        .or_else(|| env.get("NPM_CONFIG_USERCONFIG"))
        .filter(|p| !p.trim().is_empty());
    let path = match (given, env.get("HOME").filter(|h| !h.is_empty())) {
        (Some(p), _) => std::path::PathBuf::from(p.trim()),
        (None, Some(home)) => std::path::Path::new(home).join(".npmrc"),
        (None, None) => return Vec::new(),
    };
    let Some(bytes) = crate::safe_read::read_regular(&path, MAX_BYTES) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';') && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.trim().to_string(),
                expand(v.trim().trim_matches('"'), env),
            )
        })
        .collect()
}

/// `${VAR}` replaced by the variable's value (empty when unset), as npm does.
fn expand(value: &str, env: &HashMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find("${") {
        let Some(end) = rest[i..].find('}') else {
            break;
        };
        out.push_str(&rest[..i]);
        let name = &rest[i + 2..i + end];
        out.push_str(env.get(name).map(String::as_str).unwrap_or_default());
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    out
}

/// The credential the config holds for `url` (`//host[:port]/path/:<key>`, the longest
/// matching path), and the key it came from.
fn credential_for(config: &[(String, String)], url: &str) -> Option<(Credential, String)> {
    let nerf = url.split_once(':').map(|(_, r)| r)?;
    let mut best: Option<(usize, Credential, String)> = None;
    for (k, v) in config {
        let Some((scope, key)) = k.rsplit_once(':') else {
            continue;
        };
        // npm's own rule: the key's path is the URL's, or a whole-segment ancestor of it.
        let under = nerf.starts_with(scope)
            && (scope.ends_with('/') || nerf[scope.len()..].starts_with('/'));
        if !scope.starts_with("//") || !under || v.is_empty() {
            continue;
        }
        let credential = match key {
            "_authToken" => Credential::Bearer(Secret::new(v.clone())),
            "_auth" => match decode_base64(v).as_deref().and_then(|d| d.split_once(':')) {
                Some((user, pass)) => Credential::Basic(user.into(), Secret::new(pass)),
                None => continue,
            },
            "_password" => {
                let user = config
                    .iter()
                    .find(|(k2, _)| *k2 == format!("{scope}:username"));
                match (user, decode_base64(v)) {
                    (Some((_, user)), Some(pass)) => {
                        Credential::Basic(user.clone(), Secret::new(pass))
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        if best.as_ref().is_none_or(|(l, _, _)| scope.len() > *l) {
            best = Some((scope.len(), credential, k.clone()));
        }
    }
    best.map(|(_, c, k)| (c, k))
}

/// Whether some scope's registry has a credential in the config.
fn credential_for_any_scope(config: &[(String, String)]) -> bool {
    config.iter().any(|(k, v)| {
        k.strip_suffix(":registry")
            .is_some_and(|s| s.starts_with('@'))
            && split_url(v)
                .is_some_and(|(o, p)| credential_for(config, &format!("{o}{p}")).is_some())
    })
}

fn decode_base64(s: &str) -> Option<String> {
    let bytes = crate::broker::git::credential::decode_base64(s.trim())?;
    String::from_utf8(bytes).ok()
}

/// The npm registries the host's config brokers: the default one and each scope's, each with
/// a credential (the config's, or `NPM_TOKEN` for the default registry).
pub fn registries(env: &HashMap<String, String>) -> Vec<Registry> {
    let config = host_config(env);
    let default = config
        .iter()
        .rev()
        .find(|(k, _)| k == "registry")
        .map_or(DEFAULT_REGISTRY.to_string(), |(_, v)| v.clone());
    let mut wanted: Vec<(Option<String>, String)> = vec![(None, default)];
    for (k, v) in &config {
        let scope = k
            .strip_suffix(":registry")
            .filter(|s| s.starts_with('@') && s.len() > 1 && !s.contains('/'));
        if let Some(scope) = scope {
            wanted.retain(|(s, _)| s.as_deref() != Some(scope));
            wanted.push((Some(scope.to_string()), v.clone()));
        }
    }
    let mut out = Vec::new();
    for (scope, url) in wanted {
        let Some((origin, prefix)) = split_url(&url) else {
            continue;
        };
        let url = format!("{origin}{prefix}");
        let found = credential_for(&config, &url)
            .map(|(c, key)| (c, format!("the host's npm config ({key})")))
            .or_else(|| {
                // NPM_TOKEN is npmjs's: never sent to another default registry.
                let token = env.get("NPM_TOKEN").filter(|t| !t.trim().is_empty())?;
                let bearer = Credential::Bearer(Secret::new(token.trim()));
                (scope.is_none() && url == DEFAULT_REGISTRY)
                    .then(|| (bearer, "NPM_TOKEN".to_string()))
            });
        // npm sends every tarball to the default registry's URL (`replace-registry-host`), so
        // with a scope brokered the default registry is too, without a credential when it has
        // none (then read as the public reads it).
        let found = found.or_else(|| {
            let scoped = config
                .iter()
                .any(|(k, _)| k.starts_with('@') && k.ends_with(":registry"))
                && credential_for_any_scope(&config);
            (scope.is_none() && scoped)
                .then(|| (Credential::None, "none (public reads)".to_string()))
        });
        if let Some((credential, source)) = found {
            out.push(Registry {
                kind: Kind::Npm,
                scope,
                origin,
                prefix,
                credential,
                source,
            });
        }
    }
    out
}

/// The container's npm user config for `routes` (each registry with the URL its route has in
/// the container): the registries pointed at their routes, the placeholder named by its
/// variable (npm expands it), and tarballs fetched through the registry they came from.
pub fn container_config(routes: &[(&Registry, String)]) -> String {
    let mut out = String::from(
        "; Written by po-sandbox: npm's registries through the host's broker (docs/security.md#the-registry-routes).\n",
    );
    for (r, url) in routes.iter().filter(|(r, _)| r.kind == Kind::Npm) {
        match &r.scope {
            Some(scope) => out.push_str(&format!("{scope}:registry={url}\n")),
            None => out.push_str(&format!("registry={url}\n")),
        }
        let nerf = url.split_once(':').map_or(url.as_str(), |(_, r)| r);
        out.push_str(&format!("{nerf}:_authToken=${{{}}}\n", super::TOKEN_VAR));
    }
    out.push_str("replace-registry-host=always\n");
    out
}
