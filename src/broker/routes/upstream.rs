//! Where the broker sends a provider's requests on this host: the default origin, or the host's
//! base URL variable, checked (https, or http to loopback only; no user info, query or fragment).

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::{ProviderRoute, var};
use crate::error::{Error, Result};

/// An upstream URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port a URL of this scheme means when it names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Where the broker sends one provider's requests on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// `https`, or `http` for a loopback host.
    pub scheme: Scheme,
    /// Lower-case host name or IP address (IPv6 without brackets).
    pub host: String,
    /// The TCP port (the scheme's default when the URL named none).
    pub port: u16,
    /// Put before every request path: `""` or `/v1`-style, no trailing slash.
    pub path_prefix: String,
}

impl Upstream {
    /// `host[:port]` as the `Host` header must read: IPv6 in brackets, the default port omitted.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.scheme.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// `scheme://authority`, for logs and TLS set-up.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme.as_str(), self.authority())
    }

    /// The upstream request target for `rest` (a path from [`route_path`], starting `/`).
    pub fn target(&self, rest: &str) -> String {
        format!("{}{rest}", self.path_prefix)
    }
}

/// The upstream origin for a provider on this host: the default, or the host's base URL variable
/// when set (Azure: the base URL variable, else the resource name variable). The override must
/// be an absolute URL with scheme https, or http only when its host is loopback (127.0.0.0/8,
/// ::1, localhost); its path (if any) is kept as a prefix; user info, query and fragment are
/// refused, so is a `.`/`..` path segment. Empty or blank variables count as unset.
pub fn upstream(route: &ProviderRoute, host_env: &HashMap<String, String>) -> Result<Upstream> {
    if let Some(value) = var(host_env, route.base_url_var) {
        let mut up = parse_url(route.base_url_var, value)?;
        if let Some(res) = &route.resource {
            let on_service = res.service_hosts.iter().any(|s| up.host.ends_with(s));
            if on_service && res.bare_paths.contains(&up.path_prefix.as_str()) {
                up.path_prefix = res.api_path.to_string();
            }
        }
        return Ok(up);
    }
    if let Some(res) = &route.resource {
        if let Some(name) = var(host_env, res.name_var) {
            if !is_dns_label(name) {
                return Err(invalid(
                    res.name_var,
                    "must be a resource name: 1 to 63 letters, digits or '-', not starting or ending with '-'",
                ));
            }
            return Ok(Upstream {
                scheme: Scheme::Https,
                host: format!("{}{}", name.to_ascii_lowercase(), res.host_suffix),
                port: Scheme::Https.default_port(),
                path_prefix: res.api_path.to_string(),
            });
        }
        return Err(invalid(
            route.base_url_var,
            &format!(
                "{} has no public default upstream: set {} (https://<resource>{}) or {}",
                route.id, route.base_url_var, res.host_suffix, res.name_var
            ),
        ));
    }
    parse_url(route.base_url_var, route.default_origin)
}

/// `OPTIONS_INVALID`, naming the variable and why.
fn invalid(option: &str, reason: &str) -> Error {
    Error::OptionsInvalid {
        option: option.to_string(),
        reason: reason.to_string(),
    }
}

/// The hosts plain http may go to, as a message says it.
const LOOPBACK_RULE: &str = "127.0.0.0/8, ::1 or localhost";

/// Parses an upstream URL by the rules of [`upstream`]. Never echoes the value whole: it may
/// carry a password.
fn parse_url(option: &str, value: &str) -> Result<Upstream> {
    let bad = |reason: String| invalid(option, &reason);
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("must not contain spaces or control characters".into()));
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Err(bad(
            "must be an absolute URL such as https://host[:port][/path]".into(),
        ));
    };
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => {
            return Err(bad(format!(
                "must use https (http only for a loopback host: {LOOPBACK_RULE}); got scheme '{other}'"
            )));
        }
    };
    if rest.contains('#') {
        return Err(bad("must not carry a fragment (#…)".into()));
    }
    if rest.contains('?') {
        return Err(bad("must not carry a query (?…)".into()));
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(bad(
            "must not carry user info (user:password@); the key comes from the provider's key variable".into(),
        ));
    }
    let (host, port) = split_host_port(authority).ok_or_else(|| {
        bad("must name a valid host: a DNS name, an IPv4 address or an IPv6 address in brackets, with an optional port 1-65535".into())
    })?;
    if scheme == Scheme::Http && !is_loopback(&host) {
        return Err(bad(format!(
            "must use https: http is allowed only for a loopback host ({LOOPBACK_RULE}), not '{host}'"
        )));
    }
    if path.contains('\\') || !path.is_ascii() {
        return Err(bad(
            "path must be ASCII without backslashes (percent-encode anything else)".into(),
        ));
    }
    let path = path.trim_end_matches('/');
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(bad("path must not contain '.' or '..' segments".into()));
    }
    Ok(Upstream {
        port: port.unwrap_or(scheme.default_port()),
        scheme,
        host,
        path_prefix: path.to_string(),
    })
}

/// `host[:port]` → (lower-case host, IPv6 unbracketed; port). `None` when either is invalid.
pub(crate) fn split_host_port(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (v6, after) = inner.split_once(']')?;
        let ip: Ipv6Addr = v6.parse().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (ip.to_string(), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        let host = host.to_ascii_lowercase();
        if !is_host_name(&host) {
            return None;
        }
        (host, port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok().filter(|&n| n != 0)?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

/// A DNS name or dotted IPv4 address (lower case).
fn is_host_name(host: &str) -> bool {
    if host.is_empty() || host.len() > 253 {
        return false;
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return host.parse::<Ipv4Addr>().is_ok();
    }
    host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// One DNS label: what an Azure resource name must be.
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// 127.0.0.0/8, ::1 or `localhost` (host already lower case, IPv6 unbracketed).
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
        || host.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback())
}
