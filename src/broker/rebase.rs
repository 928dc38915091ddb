//! Re-pointing provider base URLs at the broker. Inside a container, every model of a brokered
//! provider keeps its own base path and only its origin changes: a model at
//! `https://openrouter.ai/api/v1` is reached at `http://127.0.0.1:<bridge port>/openrouter/api/v1`,
//! and the broker forwards `/openrouter/<rest>` to the provider's upstream origin + `<rest>`.
//! Pure string arithmetic, no I/O.
//!
//! Errors are sentences that start with the argument at fault and a colon (`baseUrl: …`,
//! `provider: …`, `brokerOrigin: …`, `route: …`, `bridgePort: …`); use [`split_error`] to
//! separate the two. They never echo a base URL whole: it may carry a password.

/// `base_url` with its scheme, host and port replaced by `broker_origin` + `/` + `provider`.
/// The path is kept as it is, a trailing `/` included; a base URL without a path becomes
/// `<broker_origin>/<provider>`.
///
/// Refuses a `base_url` that is not an absolute `http(s)://host[:port][/path]` URL, or that has
/// user info, a query, a fragment, or a `.`/`..` path segment (which the broker refuses too); a
/// `provider` that is not a provider id (1 to 64 of `a-z`, `0-9`, `-`, `_`); and a
/// `broker_origin` that is not `http://host:port` (one trailing `/` is tolerated, no other path).
pub fn rebase(base_url: &str, provider: &str, broker_origin: &str) -> Result<String, String> {
    let origin = parse_broker_origin(broker_origin)?;
    if !is_provider_id(provider) {
        return Err(
            "provider: must be a provider id: 1 to 64 lowercase letters, digits, '-' or '_'".into(),
        );
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
) -> Result<String, String> {
    let per_resource = super::routes::find(provider).is_some_and(|r| r.resource.is_some());
    if per_resource && base_url.trim().is_empty() {
        let origin = parse_broker_origin(broker_origin)?;
        return Ok(format!("{origin}/{provider}"));
    }
    rebase(base_url, provider, broker_origin)
}

/// The origin a container's SDKs should use for the broker: for a `socket` route, the loopback
/// bridge at `http://127.0.0.1:<bridge_port>` (the port is required); for a `tcp` route,
/// `http://<target>` (`host:port`, IPv6 in brackets; a bridge port is ignored).
pub fn broker_origin(
    route_kind: &str,
    target: &str,
    bridge_port: Option<u16>,
) -> Result<String, String> {
    match route_kind {
        "socket" => match bridge_port {
            Some(port) if port > 0 => Ok(format!("http://127.0.0.1:{port}")),
            _ => Err(
                "bridgePort: a socket route is reached through the loopback bridge; pass the port it listens on (1-65535)"
                    .into(),
            ),
        },
        "tcp" => {
            let (host, port) = split_authority(target.trim(), true).ok_or_else(|| {
                "route: a tcp route's target must be HOST:PORT (a DNS name, an IPv4 address or an IPv6 address in brackets, and a port 1-65535)".to_string()
            })?;
            Ok(format!("http://{}:{}", bracket(&host), port.unwrap_or(0)))
        }
        other => Err(format!(
            "route: the kind must be 'socket' or 'tcp', not {other:?}"
        )),
    }
}

/// Splits an error of this module into the argument at fault and the reason.
pub fn split_error(message: &str) -> (&str, &str) {
    message.split_once(": ").unwrap_or(("baseUrl", message))
}

/// `http://host:port`, lower case, IPv6 in brackets; the argument must be nothing else.
fn parse_broker_origin(value: &str) -> Result<String, String> {
    const RULE: &str = "brokerOrigin: must be http://HOST:PORT with no path (HOST a DNS name, an IPv4 address or an IPv6 address in brackets; PORT 1-65535)";
    let rest = strip_scheme(value, &["http"]).ok_or(RULE)?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty()
        || authority
            .bytes()
            .any(|b| matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\') || !b.is_ascii_graphic())
    {
        return Err(RULE.into());
    }
    let (host, port) = split_authority(authority, true).ok_or(RULE)?;
    Ok(format!("http://{}:{}", bracket(&host), port.unwrap_or(0)))
}

/// The path of an absolute http(s) base URL (`""` when it has none), after checking the rest.
fn base_path(base_url: &str) -> Result<&str, String> {
    if base_url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("baseUrl: must not contain spaces or control characters".into());
    }
    let rest = strip_scheme(base_url, &["http", "https"]).ok_or(
        "baseUrl: must be an absolute http or https URL such as https://host[:port][/path]",
    )?;
    if rest.contains('#') {
        return Err("baseUrl: must not carry a fragment (#…)".into());
    }
    if rest.contains('?') {
        return Err("baseUrl: must not carry a query (?…)".into());
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(
            "baseUrl: must not carry user info (user:password@); the key travels in its header"
                .into(),
        );
    }
    if split_authority(authority, false).is_none() {
        return Err("baseUrl: must name a valid host: a DNS name, an IPv4 address or an IPv6 address in brackets, with an optional port 1-65535".into());
    }
    if path.contains('\\') || !path.is_ascii() {
        return Err(
            "baseUrl: the path must be ASCII without backslashes (percent-encode anything else)"
                .into(),
        );
    }
    let climbs = path.split('/').any(|seg| {
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        seg == "." || seg == ".."
    });
    if climbs {
        return Err("baseUrl: the path must not contain '.' or '..' segments".into());
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
    super::routes::split_host_port(authority).filter(|(_, port)| !need_port || port.is_some())
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
mod tests {
    use super::*;

    const BRIDGE: &str = "http://127.0.0.1:41234";

    fn ok(base: &str, provider: &str) -> String {
        rebase(base, provider, BRIDGE).unwrap_or_else(|e| panic!("{base}: {e}"))
    }

    fn err(base: &str, provider: &str, origin: &str) -> String {
        match rebase(base, provider, origin) {
            Ok(url) => panic!("{base} / {provider} / {origin} rebased to {url}"),
            Err(e) => e,
        }
    }

    #[test]
    fn openrouter_keeps_each_models_path() {
        assert_eq!(
            ok("https://openrouter.ai/api/v1", "openrouter"),
            "http://127.0.0.1:41234/openrouter/api/v1"
        );
        assert_eq!(
            ok("https://openrouter.ai/api", "openrouter"),
            "http://127.0.0.1:41234/openrouter/api"
        );
    }

    #[test]
    fn other_providers_paths() {
        assert_eq!(
            ok("https://api.anthropic.com", "anthropic"),
            "http://127.0.0.1:41234/anthropic"
        );
        assert_eq!(
            ok("https://api.groq.com/openai/v1", "groq"),
            "http://127.0.0.1:41234/groq/openai/v1"
        );
        assert_eq!(
            ok("https://api.fireworks.ai/inference", "fireworks"),
            "http://127.0.0.1:41234/fireworks/inference"
        );
        assert_eq!(
            ok("https://opencode.ai/inference/go/v1", "opencode-go"),
            "http://127.0.0.1:41234/opencode-go/inference/go/v1"
        );
    }

    #[test]
    fn trailing_slash_is_kept() {
        assert_eq!(
            ok("https://api.openai.com/v1/", "openai"),
            "http://127.0.0.1:41234/openai/v1/"
        );
        assert_eq!(
            ok("https://api.anthropic.com/", "anthropic"),
            "http://127.0.0.1:41234/anthropic/"
        );
    }

    #[test]
    fn base_url_ports_schemes_and_hosts_are_replaced() {
        assert_eq!(
            ok("http://127.0.0.1:11434/v1", "ollama"),
            "http://127.0.0.1:41234/ollama/v1"
        );
        assert_eq!(
            ok("HTTPS://API.Example.COM:8443/a/b", "x"),
            "http://127.0.0.1:41234/x/a/b"
        );
        assert_eq!(
            ok("https://[2001:db8::1]:8443/v1", "openai"),
            "http://127.0.0.1:41234/openai/v1"
        );
        assert_eq!(
            ok("https://api.deepseek.com", "deepseek"),
            "http://127.0.0.1:41234/deepseek"
        );
        // Percent-encoded and unusual-but-valid path characters pass through untouched.
        assert_eq!(
            ok("https://h.example/a%20b/c:d/v1", "p"),
            "http://127.0.0.1:41234/p/a%20b/c:d/v1"
        );
    }

    #[test]
    fn broker_origins() {
        assert_eq!(
            rebase("https://api.openai.com/v1", "openai", "http://[::1]:8080").unwrap(),
            "http://[::1]:8080/openai/v1"
        );
        assert_eq!(
            rebase(
                "https://api.openai.com/v1",
                "openai",
                "http://[0:0:0:0:0:0:0:1]:8080/"
            )
            .unwrap(),
            "http://[::1]:8080/openai/v1"
        );
        assert_eq!(
            rebase(
                "https://api.openai.com/v1",
                "openai",
                "HTTP://Host.Docker.Internal:41234"
            )
            .unwrap(),
            "http://host.docker.internal:41234/openai/v1"
        );
    }

    #[test]
    fn bad_base_urls() {
        let cases = [
            ("", "absolute http or https"),
            ("api.openai.com/v1", "absolute http or https"),
            ("/v1", "absolute http or https"),
            ("ftp://api.openai.com/v1", "absolute http or https"),
            ("file:///etc/passwd", "absolute http or https"),
            ("https://", "valid host"),
            ("https:///v1", "valid host"),
            ("https://user:secret@api.openai.com/v1", "user info"),
            ("https://api.openai.com/v1?x=1", "query"),
            ("https://api.openai.com/v1#frag", "fragment"),
            ("https://api.openai.com:0/v1", "valid host"),
            ("https://api.openai.com:70000/v1", "valid host"),
            ("https://api.openai.com:/v1", "valid host"),
            ("https://[::1/v1", "valid host"),
            ("https://[zz::1]/v1", "valid host"),
            ("https://bad_host-.com/v1", "valid host"),
            ("https://api.openai.com/a b", "spaces"),
            ("https://api.openai.com/v1\n", "spaces"),
            ("https://api.openai.com/../v1", "'..'"),
            ("https://api.openai.com/v1/%2E%2e", "'..'"),
            ("https://api.openai.com/./v1", "'..'"),
            ("https://api.openai.com/a\\b", "backslashes"),
            ("https://api.openai.com/é", "ASCII"),
        ];
        for (base, needle) in cases {
            let e = err(base, "openai", BRIDGE);
            assert!(e.starts_with("baseUrl: "), "{base}: {e}");
            assert!(e.contains(needle), "{base}: {e}");
            assert!(!e.contains("secret"), "{e}");
            assert_eq!(split_error(&e).0, "baseUrl");
        }
    }

    #[test]
    fn bad_providers() {
        for p in ["", "OpenAI", "open ai", "a/b", "../x", &"x".repeat(65)] {
            let e = err("https://api.openai.com/v1", p, BRIDGE);
            assert_eq!(split_error(&e).0, "provider", "{p}: {e}");
        }
    }

    #[test]
    fn bad_broker_origins() {
        for o in [
            "",
            "127.0.0.1:41234",
            "https://127.0.0.1:41234",
            "http://127.0.0.1",
            "http://127.0.0.1:0",
            "http://127.0.0.1:99999",
            "http://127.0.0.1:41234/bridge",
            "http://127.0.0.1:41234//",
            "http://127.0.0.1:41234?x",
            "http://127.0.0.1:41234#x",
            "http://u@127.0.0.1:41234",
            "http://::1:8080",
            "http://[::1]",
            "http://[::1]:",
            "http:// 127.0.0.1:1",
        ] {
            let e = err("https://api.openai.com/v1", "openai", o);
            let (arg, reason) = split_error(&e);
            assert_eq!(arg, "brokerOrigin", "{o}: {e}");
            assert!(reason.contains("http://HOST:PORT"), "{o}: {e}");
        }
    }

    #[test]
    fn per_resource_providers_without_a_base_url_get_the_bare_route() {
        assert_eq!(
            brokered_base_url("", "azure", BRIDGE).unwrap(),
            "http://127.0.0.1:41234/azure"
        );
        assert_eq!(
            brokered_base_url("https://acme.openai.azure.com/openai/v1", "azure", BRIDGE).unwrap(),
            "http://127.0.0.1:41234/azure/openai/v1"
        );
        // Only per-resource providers: anyone else still needs an absolute base URL.
        let e = brokered_base_url("", "openai", BRIDGE).unwrap_err();
        assert_eq!(split_error(&e).0, "baseUrl");
        let e = brokered_base_url("", "azure", "http://127.0.0.1").unwrap_err();
        assert_eq!(split_error(&e).0, "brokerOrigin");
        assert_eq!(
            brokered_base_url("https://openrouter.ai/api", "openrouter", BRIDGE).unwrap(),
            "http://127.0.0.1:41234/openrouter/api"
        );
    }

    #[test]
    fn broker_origin_for_socket_and_tcp_routes() {
        assert_eq!(
            broker_origin("socket", "/run/po-broker/broker.sock", Some(41234)).unwrap(),
            "http://127.0.0.1:41234"
        );
        let e = broker_origin("socket", "/run/po-broker/broker.sock", None).unwrap_err();
        assert_eq!(split_error(&e).0, "bridgePort");
        assert!(broker_origin("socket", "/x", Some(0)).is_err());
        assert_eq!(
            broker_origin("tcp", "host.docker.internal:41234", None).unwrap(),
            "http://host.docker.internal:41234"
        );
        assert_eq!(
            broker_origin("tcp", "[::1]:8080", Some(1)).unwrap(),
            "http://[::1]:8080"
        );
        assert_eq!(
            broker_origin("tcp", "10.0.0.2:9", None).unwrap(),
            "http://10.0.0.2:9"
        );
        for t in [
            "localhost",
            "::1:8080",
            "host:0",
            "host:",
            ":80",
            "a b:1",
            "[::1]",
        ] {
            let e = broker_origin("tcp", t, None).unwrap_err();
            assert_eq!(split_error(&e).0, "route", "{t}: {e}");
        }
        let e = broker_origin("udp", "x:1", None).unwrap_err();
        assert_eq!(split_error(&e).0, "route");
        // What broker_origin makes, rebase accepts.
        let origin = broker_origin("tcp", "[::1]:8080", None).unwrap();
        assert_eq!(
            rebase("https://openrouter.ai/api", "openrouter", &origin).unwrap(),
            "http://[::1]:8080/openrouter/api"
        );
    }
}
