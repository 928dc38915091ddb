use super::*;

const BRIDGE: &str = "http://127.0.0.1:41234";

fn ok(base: &str, provider: &str) -> String {
    rebase(base, provider, BRIDGE).unwrap_or_else(|e| panic!("{base}: {e}"))
}

fn err(base: &str, provider: &str, origin: &str) -> Refusal {
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
        assert_eq!(e.argument, "baseUrl", "{base}: {e}");
        assert!(e.reason.contains(needle), "{base}: {e}");
        assert!(!e.to_string().contains("secret"), "{e}");
        assert_eq!(e.argument, "baseUrl");
    }
}

#[test]
fn bad_providers() {
    for p in ["", "OpenAI", "open ai", "a/b", "../x", &"x".repeat(65)] {
        let e = err("https://api.openai.com/v1", p, BRIDGE);
        assert_eq!(e.argument, "provider", "{p}: {e}");
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
        let (arg, reason) = (e.argument, e.reason.as_str());
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
    assert_eq!(e.argument, "baseUrl");
    let e = brokered_base_url("", "azure", "http://127.0.0.1").unwrap_err();
    assert_eq!(e.argument, "brokerOrigin");
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
    assert_eq!(e.argument, "bridgePort");
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
        assert_eq!(e.argument, "route", "{t}: {e}");
    }
    let e = broker_origin("udp", "x:1", None).unwrap_err();
    assert_eq!(e.argument, "route");
    // What broker_origin makes, rebase accepts.
    let origin = broker_origin("tcp", "[::1]:8080", None).unwrap();
    assert_eq!(
        rebase("https://openrouter.ai/api", "openrouter", &origin).unwrap(),
        "http://[::1]:8080/openrouter/api"
    );
}
