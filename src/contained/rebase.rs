//! Re-pointing provider base URLs at the broker. Inside a container, every model of a brokered
//! provider keeps its own base path and only its origin changes: a model at
//! `https://openrouter.ai/api/v1` is reached at `http://127.0.0.1:<bridge port>/openrouter/api/v1`,
//! and the broker forwards `/openrouter/<rest>` to the provider's upstream origin + `<rest>`.
//! Pure string arithmetic, no I/O.
//!
//! Errors are [`Refusal`]s naming the argument at fault (`baseUrl`, `provider`,
//! `brokerOrigin`, `route`) and the rule it broke; they never echo a base URL whole: it may
//! carry a password.

/// `base_url` with its scheme, host and port replaced by `broker_origin` + `/` + `provider`.
/// The path is kept as it is, a trailing `/` included; a base URL without a path becomes
/// `<broker_origin>/<provider>`.
///
/// Refuses a `base_url` that is not an absolute `http(s)://host[:port][/path]` URL, or that has
/// user info, a query, a fragment, or a `.`/`..` path segment (which the broker refuses too); a
/// `provider` that is not a provider id (1 to 64 of `a-z`, `0-9`, `-`, `_`); and a
/// `broker_origin` that is not `http://host:port` (one trailing `/` is tolerated, no other path).
pub fn rebase(base_url: &str, provider: &str, broker_origin: &str) -> Result<String, Refusal> {
    let origin = parse_broker_origin(broker_origin)?;
    if !is_provider_id(provider) {
        return Err(refuse(
            "provider",
            "must be a provider id: 1 to 64 lowercase letters, digits, '-' or '_'",
        ));
    }
    let path = base_path(base_url)?;
    Ok(format!("{origin}/{provider}{path}"))
}

/// A model's base URL inside a container whose `provider` is brokered at `broker_origin`: what
/// [`rebase`] makes of it; except that a provider whose upstream is per-resource (Azure OpenAI,
/// whose catalogue models carry no base URL: pi builds it from the resource named on the host)
/// gets `<broker_origin>/<provider>` for an empty base URL, because the broker adds the
/// resource's base path (`/openai/v1`) itself.
pub fn brokered_base_url(
    base_url: &str,
    provider: &str,
    broker_origin: &str,
) -> Result<String, Refusal> {
    let per_resource = crate::broker::routes::find(provider).is_some_and(|r| r.resource.is_some());
    if per_resource && base_url.trim().is_empty() {
        let origin = parse_broker_origin(broker_origin)?;
        return Ok(format!("{origin}/{provider}"));
    }
    rebase(base_url, provider, broker_origin)
}

/// The origin a container's SDKs should use for the broker: for a `socket` route, the loopback
/// bridge at `http://127.0.0.1:<bridge_port>` (the port is required); for a `tcp` route,
/// `http://<target>` (`host:port`, IPv6 in brackets; a bridge port is ignored). A bridge port
/// beyond 65535 is refused whatever the route.
pub fn broker_origin(
    route_kind: &str,
    target: &str,
    bridge_port: Option<u32>,
) -> Result<String, Refusal> {
    let bridge_port = match bridge_port.map(u16::try_from) {
        Some(Err(_)) => return Err(refuse("bridgePort", "must be a TCP port 1-65535")),
        port => port.and_then(Result::ok),
    };
    match route_kind {
        "socket" => match bridge_port {
            Some(port) if port > 0 => Ok(format!("http://127.0.0.1:{port}")),
            _ => Err(refuse(
                "bridgePort",
                "a socket route is reached through the loopback bridge; pass the port it listens on (1-65535)",
            )),
        },
        "tcp" => {
            let (host, port) = split_authority(target.trim(), true).ok_or_else(|| {
                refuse("route", "a tcp route's target must be HOST:PORT (a DNS name, an IPv4 address or an IPv6 address in brackets, and a port 1-65535)")
            })?;
            Ok(format!("http://{}:{}", bracket(&host), port.unwrap_or(0)))
        }
        other => Err(Refusal {
            argument: "route",
            reason: format!("the kind must be 'socket' or 'tcp', not {other:?}"),
        }),
    }
}

/// Why an argument was refused: the argument's JS name and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub argument: &'static str,
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.argument, self.reason)
    }
}

impl From<Refusal> for crate::error::Error {
    fn from(r: Refusal) -> Self {
        crate::error::Error::OptionsInvalid {
            option: r.argument.into(),
            reason: r.reason,
        }
    }
}

fn refuse(argument: &'static str, reason: &str) -> Refusal {
    Refusal {
        argument,
        reason: reason.to_string(),
    }
}

/// `http://host:port`, lower case, IPv6 in brackets; the argument must be nothing else.
fn parse_broker_origin(value: &str) -> Result<String, Refusal> {
    let rule = || {
        refuse(
            "brokerOrigin",
            "must be http://HOST:PORT with no path (HOST a DNS name, an IPv4 address or an IPv6 address in brackets; PORT 1-65535)",
        )
    };
    let rest = strip_scheme(value, &["http"]).ok_or_else(rule)?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty()
        || authority
            .bytes()
            .any(|b| matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\') || !b.is_ascii_graphic())
    {
        return Err(rule());
    }
    let (host, port) = split_authority(authority, true).ok_or_else(rule)?;
    Ok(format!("http://{}:{}", bracket(&host), port.unwrap_or(0)))
}

/// The path of an absolute http(s) base URL (`""` when it has none), after checking the rest.
fn base_path(base_url: &str) -> Result<&str, Refusal> {
    if base_url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(refuse(
            "baseUrl",
            "must not contain spaces or control characters",
        ));
    }
    let rest = strip_scheme(base_url, &["http", "https"]).ok_or_else(|| {
        refuse(
            "baseUrl",
            "must be an absolute http or https URL such as https://host[:port][/path]",
        )
    })?;
    if rest.contains('#') {
        return Err(refuse("baseUrl", "must not carry a fragment (#…)"));
    }
    if rest.contains('?') {
        return Err(refuse("baseUrl", "must not carry a query (?…)"));
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(refuse(
            "baseUrl",
            "must not carry user info (user:password@); the key travels in its header",
        ));
    }
    if split_authority(authority, false).is_none() {
        return Err(refuse(
            "baseUrl",
            "must name a valid host: a DNS name, an IPv4 address or an IPv6 address in brackets, with an optional port 1-65535",
        ));
    }
    if path.contains('\\') || !path.is_ascii() {
        return Err(refuse(
            "baseUrl",
            "the path must be ASCII without backslashes (percent-encode anything else)",
        ));
    }
    let climbs = path.split('/').any(|seg| {
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        seg == "." || seg == ".."
    });
    if climbs {
        return Err(refuse(
            "baseUrl",
            "the path must not contain '.' or '..' segments",
        ));
    }
    Ok(path)
}

/// What follows `scheme://` when the scheme (any case) is one of `schemes`.
fn strip_scheme<'a>(url: &'a str, schemes: &[&str]) -> Option<&'a str> {
    let (scheme, rest) = url.split_once("://")?;
    schemes
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
        .then_some(rest)
}

/// `host[:port]` as [`routes::split_host_port`] reads it; with `need_port`, the port must be
/// there.
fn split_authority(authority: &str, need_port: bool) -> Option<(String, Option<u16>)> {
    crate::broker::routes::split_host_port(authority)
        .filter(|(_, port)| !need_port || port.is_some())
}

/// A host as it appears in a URL: IPv6 in brackets.
fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// pi's provider ids, as `PO_BROKER_PROVIDERS` names them.
fn is_provider_id(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests;
