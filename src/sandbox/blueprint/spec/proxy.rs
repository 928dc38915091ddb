//! The host's proxy variables as a container gets them: never with credentials. A value's
//! userinfo (`user:pass@`) is removed; a value this reading cannot take apart with certainty
//! is withheld, and the doctor says why ([`proxy_notes`]).

use std::collections::HashMap;

/// Proxy variables a container inherits (without credentials).
pub const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// What becomes of one proxy variable's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyValue {
    /// Passed as it is: it carries no credentials.
    Kept(String),
    /// Passed without its userinfo (the value given is the stripped one).
    Stripped(String),
    /// Not passed: why the value could not be read with certainty.
    Withheld(&'static str),
}

/// Reads one proxy value (`[scheme://][user[:pass]@]host[:port][/path]`): the userinfo, up to
/// the last `@` of the authority, goes. Refused (withheld): blanks or control characters, a bad
/// scheme, an `@` after the authority or a `%` in the host (either could hide credentials from a
/// reading that differs from ours), an empty or malformed host, a non-numeric port.
pub fn sanitize_proxy(value: &str) -> ProxyValue {
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return ProxyValue::Withheld("it contains blanks or control characters");
    }
    let (scheme, rest) = match value.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, value),
    };
    if let Some(s) = scheme
        && !valid_scheme(s)
    {
        return ProxyValue::Withheld("its scheme is not a URL scheme");
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if tail.contains('@') {
        return ProxyValue::Withheld("it has an '@' after the host, which may be credentials");
    }
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if let Err(why) = check_host_port(host_port) {
        return ProxyValue::Withheld(why);
    }
    let clean = match scheme {
        Some(s) => format!("{s}://{host_port}{tail}"),
        None => format!("{host_port}{tail}"),
    };
    match userinfo {
        Some(_) => ProxyValue::Stripped(clean),
        None => ProxyValue::Kept(clean),
    }
}

/// RFC 3986: a letter, then letters, digits, `+`, `-` or `.`.
fn valid_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `host[:port]` or `[v6][:port]`: a name or IPv4 address of letters, digits, `.`, `-`, `_`;
/// an IPv6 address in brackets; a port of digits.
fn check_host_port(hp: &str) -> Result<(), &'static str> {
    let port = if let Some(inside) = hp.strip_prefix('[') {
        let (v6, after) = inside
            .split_once(']')
            .ok_or("its IPv6 host has no closing ']'")?;
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err("its bracketed host is not an IPv6 address");
        }
        match after {
            "" => None,
            a => Some(a.strip_prefix(':').ok_or("it has text after ']'")?),
        }
    } else {
        let (host, port) = match hp.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hp, None),
        };
        check_host(host)?;
        port
    };
    match port {
        Some(p) if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) => {
            Err("its port is not a number")
        }
        _ => Ok(()),
    }
}

/// A host name or IPv4 address: letters, digits, `.`, `-`, `_`.
fn check_host(host: &str) -> Result<(), &'static str> {
    if host.is_empty() {
        return Err("it names no host");
    }
    if host.contains('%') {
        return Err("its host is percent-encoded, which may hide credentials");
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err("its host is not a host name or address");
    }
    Ok(())
}

/// The proxy variables of `host` (non-empty ones) with what becomes of each, sorted by name.
pub fn proxy_values(host: &HashMap<String, String>) -> Vec<(&'static str, ProxyValue)> {
    let mut out: Vec<(&'static str, ProxyValue)> = PROXY_VARS
        .iter()
        .filter_map(|k| {
            let v = host.get(*k).filter(|v| !v.is_empty())?;
            Some((*k, sanitize_proxy(v)))
        })
        .collect();
    out.sort_by_key(|(k, _)| *k);
    out
}

/// One line per proxy variable that does not enter containers as the host has it: credentials
/// removed, or the variable withheld and why (the doctor's warnings).
pub fn proxy_notes(host: &HashMap<String, String>) -> Vec<String> {
    proxy_values(host)
        .into_iter()
        .filter_map(|(k, v)| match v {
            ProxyValue::Kept(_) => None,
            ProxyValue::Stripped(_) => Some(format!(
                "{k} carries credentials (user:pass@): containers get it without them"
            )),
            ProxyValue::Withheld(why) => Some(format!(
                "{k} is not passed to containers: {why} (write it as scheme://host:port)"
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests;
