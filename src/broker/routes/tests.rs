use super::upstream::{Scheme, Upstream};
use super::*;

fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn route(id: &str) -> &'static ProviderRoute {
    find(id).unwrap_or_else(|| panic!("no route {id}"))
}

fn reason_of(err: Error) -> (String, String) {
    match err {
        Error::OptionsInvalid { option, reason } => (option, reason),
        other => panic!("expected OptionsInvalid, got {other:?}"),
    }
}

fn override_err(id: &str, value: &str) -> String {
    let r = route(id);
    let (option, reason) = reason_of(upstream(r, &env(&[(r.base_url_var, value)])).unwrap_err());
    assert_eq!(option, r.base_url_var);
    reason
}

/// pi-ai 1.3.0 `getApiKeyEnvVars` / `envMap`, plus the ambient credentials
/// `getEnvApiKey` checks (Bedrock, Vertex).
const PI_AI_KEY_VARS: &[&str] = &[
    "COPILOT_GITHUB_TOKEN",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_OAUTH_TOKEN",
    "ANTHROPIC_API_KEY",
    "ANT_LING_API_KEY",
    "QWEN_TOKEN_PLAN_API_KEY",
    "QWEN_TOKEN_PLAN_CN_API_KEY",
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "NVIDIA_API_KEY",
    "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_CLOUD_API_KEY",
    "GROQ_API_KEY",
    "CEREBRAS_API_KEY",
    "XAI_API_KEY",
    "TYPESAFE_API_KEY",
    "RADIUS_API_KEY",
    "OPENROUTER_API_KEY",
    "AI_GATEWAY_API_KEY",
    "ZAI_API_KEY",
    "ZAI_CODING_CN_API_KEY",
    "MISTRAL_API_KEY",
    "MINIMAX_API_KEY",
    "MINIMAX_CN_API_KEY",
    "MOONSHOT_API_KEY",
    "HF_TOKEN",
    "FIREWORKS_API_KEY",
    "TOGETHER_API_KEY",
    "BASETEN_API_KEY",
    "OPENCODE_API_KEY",
    "KIMI_API_KEY",
    "META_API_KEY",
    "CLOUDFLARE_API_KEY",
    "XIAOMI_API_KEY",
    "XIAOMI_TOKEN_PLAN_CN_API_KEY",
    "XIAOMI_TOKEN_PLAN_AMS_API_KEY",
    "XIAOMI_TOKEN_PLAN_SGP_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
];

fn carried_vars() -> Vec<&'static str> {
    providers()
        .iter()
        .flat_map(|r| r.key_vars.iter().copied())
        .collect()
}

// --- the table ---

#[test]
fn ids_are_distinct_and_findable() {
    let mut ids: Vec<&str> = providers().iter().map(|r| r.id).collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate provider ids");
    for r in providers() {
        assert!(std::ptr::eq(find(r.id).unwrap(), r));
    }
    assert!(find("Anthropic").is_none());
    assert!(find("").is_none());
    assert!(find("amazon-bedrock").is_none());
}

#[test]
fn covers_the_required_providers() {
    for id in [
        "anthropic",
        "openai",
        "google",
        "mistral",
        "groq",
        "cerebras",
        "xai",
        "openrouter",
        "deepseek",
        "azure",
        "fireworks",
        "together",
        "opencode",
        "zai",
        "moonshotai",
        "minimax",
        "nvidia",
        "vercel-ai-gateway",
    ] {
        assert!(find(id).is_some(), "{id} missing");
    }
}

#[test]
fn uncarried_pi_providers_are_absent() {
    for id in [
        "amazon-bedrock",
        "google-vertex",
        "github-copilot",
        "openai-codex",
        "cloudflare-workers-ai",
        "cloudflare-ai-gateway",
        "radius",
        "faux",
    ] {
        assert!(find(id).is_none(), "{id} should not be carried");
    }
}

#[test]
fn every_route_has_key_vars_auth_and_a_base_url_var() {
    for r in providers() {
        assert!(!r.key_vars.is_empty(), "{}", r.id);
        assert!(r.key_vars.iter().all(|v| !v.is_empty()), "{}", r.id);
        assert!(!r.auth.is_empty(), "{}", r.id);
        assert!(r.base_url_var.ends_with("_BASE_URL"), "{}", r.id);
    }
}

#[test]
fn base_url_vars_follow_the_id_and_are_distinct() {
    let mut seen = Vec::new();
    for r in providers() {
        let derived = format!("{}_BASE_URL", r.id.to_ascii_uppercase().replace('-', "_"));
        if r.id == "azure" {
            // pi-ai's own variable, which it reads itself.
            assert_eq!(r.base_url_var, "AZURE_OPENAI_BASE_URL");
        } else {
            assert_eq!(r.base_url_var, derived);
        }
        assert!(!seen.contains(&r.base_url_var));
        seen.push(r.base_url_var);
    }
}

#[test]
fn default_origins_are_https_without_path() {
    for r in providers() {
        if r.resource.is_some() {
            // Azure OpenAI lives on the customer's own resource host: no public default.
            assert_eq!(r.default_origin, "", "{}", r.id);
            continue;
        }
        assert!(r.default_origin.starts_with("https://"), "{}", r.id);
        let up = upstream(r, &HashMap::new()).unwrap();
        assert_eq!(up.scheme, Scheme::Https, "{}", r.id);
        assert_eq!(up.port, 443, "{}", r.id);
        assert_eq!(up.path_prefix, "", "{}", r.id);
        assert_eq!(up.origin(), r.default_origin, "{}", r.id);
    }
}

#[test]
fn only_azure_is_per_resource() {
    let per_resource: Vec<&str> = providers()
        .iter()
        .filter(|r| r.resource.is_some())
        .map(|r| r.id)
        .collect();
    assert_eq!(per_resource, ["azure"]);
}

#[test]
fn auth_headers_of_the_main_providers() {
    assert_eq!(
        route("anthropic").auth,
        [AuthScheme::Header("x-api-key"), AuthScheme::Bearer]
    );
    assert_eq!(route("openai").auth, [AuthScheme::Bearer]);
    assert_eq!(route("google").auth, [AuthScheme::Header("x-goog-api-key")]);
    assert_eq!(
        route("azure").auth,
        [AuthScheme::Header("api-key"), AuthScheme::Bearer]
    );
    assert_eq!(
        route("openrouter").auth,
        [AuthScheme::Bearer, AuthScheme::Header("x-api-key")]
    );
    assert_eq!(route("minimax").auth, [AuthScheme::Header("x-api-key")]);
    assert_eq!(route("mistral").auth, [AuthScheme::Bearer]);
}

#[test]
fn header_names_are_lower_case_and_not_repeated() {
    for r in providers() {
        let mut names: Vec<&str> = r.auth.iter().map(|a| a.header()).collect();
        for n in &names {
            assert_eq!(*n, n.to_ascii_lowercase(), "{}", r.id);
        }
        let len = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), len, "{}", r.id);
    }
}

#[test]
fn key_vars_follow_pi_ai() {
    assert_eq!(
        route("anthropic").key_vars,
        [
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_OAUTH_TOKEN",
            "ANTHROPIC_API_KEY"
        ]
    );
    assert_eq!(route("openai").key_vars, ["OPENAI_API_KEY"]);
    assert_eq!(route("google").key_vars, ["GEMINI_API_KEY"]);
    assert_eq!(route("azure").key_vars, ["AZURE_OPENAI_API_KEY"]);
    assert_eq!(route("vercel-ai-gateway").key_vars, ["AI_GATEWAY_API_KEY"]);
    assert_eq!(route("huggingface").key_vars, ["HF_TOKEN"]);
    for v in carried_vars() {
        assert!(
            PI_AI_KEY_VARS.contains(&v),
            "{v} is not a pi-ai key variable"
        );
    }
}

#[test]
fn routes_sharing_a_key_var_take_the_same_token() {
    for a in providers() {
        for b in providers() {
            if a.id < b.id && a.key_vars.iter().any(|v| b.key_vars.contains(v)) {
                assert_eq!(a.token_shape, b.token_shape, "{} / {}", a.id, b.id);
            }
        }
    }
    let sharing = |var: &str| -> Vec<&str> {
        providers()
            .iter()
            .filter(|r| r.key_vars.contains(&var))
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(sharing("MOONSHOT_API_KEY"), ["moonshotai", "moonshotai-cn"]);
    assert_eq!(sharing("OPENCODE_API_KEY"), ["opencode", "opencode-go"]);
    assert_eq!(
        sharing("QWEN_TOKEN_PLAN_API_KEY"),
        ["qwen-token-plan", "qwen-token-plan-individual"]
    );
}

#[test]
fn every_pi_ai_credential_is_carried_or_withheld() {
    let carried = carried_vars();
    let held: Vec<&str> = WITHHELD.iter().map(|(v, _)| *v).collect();
    for v in PI_AI_KEY_VARS {
        assert!(
            carried.contains(v) != held.contains(v),
            "{v} must be exactly one of carried or withheld"
        );
    }
}

// --- AuthScheme ---

#[test]
fn auth_scheme_encodes_and_decodes() {
    assert_eq!(AuthScheme::Bearer.header(), "authorization");
    assert_eq!(AuthScheme::Bearer.encode("k1"), "Bearer k1");
    assert_eq!(AuthScheme::Bearer.decode("Bearer k1"), Some("k1"));
    assert_eq!(AuthScheme::Bearer.decode("bearer  k1 "), Some("k1"));
    assert_eq!(AuthScheme::Bearer.decode("Basic k1"), None);
    assert_eq!(AuthScheme::Bearer.decode("k1"), None);
    assert_eq!(AuthScheme::Bearer.decode("Bearer "), None);
    assert_eq!(AuthScheme::Bearer.decode("Bearer a b"), None);
    let h = AuthScheme::Header("x-api-key");
    assert_eq!(h.header(), "x-api-key");
    assert_eq!(h.encode("k1"), "k1");
    assert_eq!(h.decode(" k1 "), Some("k1"));
    assert_eq!(h.decode(""), None);
    assert_eq!(h.decode("a b"), None);
}

// --- upstream ---

#[test]
fn upstream_without_override_is_the_default() {
    let up = upstream(
        route("anthropic"),
        &env(&[("OPENAI_BASE_URL", "https://x.test")]),
    )
    .unwrap();
    assert_eq!(
        up,
        Upstream {
            scheme: Scheme::Https,
            host: "api.anthropic.com".into(),
            port: 443,
            path_prefix: String::new(),
        }
    );
    assert_eq!(up.authority(), "api.anthropic.com");
    assert_eq!(up.target("/v1/messages"), "/v1/messages");
}

#[test]
fn blank_override_counts_as_unset() {
    for v in ["", "   "] {
        let up = upstream(route("openai"), &env(&[("OPENAI_BASE_URL", v)])).unwrap();
        assert_eq!(up.host, "api.openai.com");
    }
}

#[test]
fn https_override_keeps_its_path_as_prefix() {
    let up = upstream(
        route("anthropic"),
        &env(&[(
            "ANTHROPIC_BASE_URL",
            " HTTPS://Gateway.Example.com:8443/anthropic/ ",
        )]),
    )
    .unwrap();
    assert_eq!(up.scheme, Scheme::Https);
    assert_eq!(up.host, "gateway.example.com");
    assert_eq!(up.port, 8443);
    assert_eq!(up.path_prefix, "/anthropic");
    assert_eq!(up.authority(), "gateway.example.com:8443");
    assert_eq!(up.origin(), "https://gateway.example.com:8443");
    assert_eq!(up.target("/v1/messages"), "/anthropic/v1/messages");

    let up = upstream(
        route("openrouter"),
        &env(&[("OPENROUTER_BASE_URL", "https://eu.openrouter.ai")]),
    )
    .unwrap();
    assert_eq!(up.path_prefix, "");
    assert_eq!(up.authority(), "eu.openrouter.ai");
    let up = upstream(
        route("openai"),
        &env(&[("OPENAI_BASE_URL", "https://h.test:443/")]),
    )
    .unwrap();
    assert_eq!((up.port, up.path_prefix.as_str()), (443, ""));
    assert_eq!(up.authority(), "h.test");
}

#[test]
fn http_override_allowed_for_loopback() {
    let cases = [
        (
            "http://127.0.0.1:4000/v1",
            "127.0.0.1",
            4000,
            "127.0.0.1:4000",
            "/v1",
        ),
        ("http://127.8.9.10", "127.8.9.10", 80, "127.8.9.10", ""),
        (
            "http://localhost:11434",
            "localhost",
            11434,
            "localhost:11434",
            "",
        ),
        ("http://LOCALHOST/", "localhost", 80, "localhost", ""),
        ("http://[::1]:8080/api", "::1", 8080, "[::1]:8080", "/api"),
        ("http://[0:0:0:0:0:0:0:1]", "::1", 80, "[::1]", ""),
    ];
    for (url, host, port, authority, prefix) in cases {
        let up = upstream(route("openai"), &env(&[("OPENAI_BASE_URL", url)])).unwrap();
        assert_eq!(up.scheme, Scheme::Http, "{url}");
        assert_eq!(up.host, host, "{url}");
        assert_eq!(up.port, port, "{url}");
        assert_eq!(up.authority(), authority, "{url}");
        assert_eq!(up.path_prefix, prefix, "{url}");
    }
}

#[test]
fn ipv6_https_override_is_bracketed() {
    let up = upstream(
        route("openai"),
        &env(&[("OPENAI_BASE_URL", "https://[2001:db8::1]:8443")]),
    )
    .unwrap();
    assert_eq!(up.host, "2001:db8::1");
    assert_eq!(up.authority(), "[2001:db8::1]:8443");
    let up = upstream(
        route("openai"),
        &env(&[("OPENAI_BASE_URL", "https://[2001:db8::1]")]),
    )
    .unwrap();
    assert_eq!(up.authority(), "[2001:db8::1]");
}

#[test]
fn http_override_refused_off_loopback() {
    for url in [
        "http://example.com",
        "http://10.0.0.1:8080",
        "http://[2001:db8::1]",
        "http://localhost.example.com",
        "http://128.0.0.1",
    ] {
        let reason = override_err("openai", url);
        assert!(reason.contains("loopback"), "{url}: {reason}");
    }
}

#[test]
fn override_refuses_other_schemes_and_relative_urls() {
    assert!(override_err("openai", "ftp://example.com").contains("scheme 'ftp'"));
    assert!(override_err("openai", "ws://localhost").contains("https"));
    for url in [
        "example.com/v1",
        "/v1",
        "//example.com",
        "https:example.com",
    ] {
        assert!(
            override_err("openai", url).contains("absolute URL"),
            "{url}"
        );
    }
}

#[test]
fn override_refuses_userinfo_query_and_fragment() {
    let reason = override_err("openai", "https://user:secret@example.com/v1");
    assert!(reason.contains("user info"));
    assert!(
        !reason.contains("secret"),
        "the password must not be echoed"
    );
    assert!(override_err("openai", "https://example.com/v1?key=1").contains("query"));
    assert!(override_err("openai", "https://example.com?x").contains("query"));
    assert!(override_err("openai", "https://example.com/v1#frag").contains("fragment"));
}

#[test]
fn override_refuses_bad_hosts_ports_and_paths() {
    for url in [
        "https://",
        "https:///v1",
        "https://exa mple.com",
        "https://-bad.example",
        "https://a..b",
        "https://host:",
        "https://host:0",
        "https://host:65536",
        "https://host:12x",
        "https://[::1",
        "https://[fe80::1%25eth0]",
        "https://[::1]x",
        "https://999.1.1.1",
        "http://127.1",
        "https://ex\u{e4}mple.com",
    ] {
        assert!(
            upstream(route("openai"), &env(&[("OPENAI_BASE_URL", url)])).is_err(),
            "{url}"
        );
    }
    assert!(override_err("openai", "https://h.test/a/../b").contains("'..'"));
    assert!(override_err("openai", "https://h.test/./b").contains("'..'"));
    assert!(override_err("openai", "https://h.test/a\\b").contains("backslash"));
}

#[test]
fn azure_needs_a_base_url_or_resource_name() {
    let (option, reason) = reason_of(upstream(route("azure"), &HashMap::new()).unwrap_err());
    assert_eq!(option, "AZURE_OPENAI_BASE_URL");
    assert!(reason.contains("AZURE_OPENAI_RESOURCE_NAME"));
}

#[test]
fn azure_resource_name_makes_the_upstream() {
    let up = upstream(
        route("azure"),
        &env(&[("AZURE_OPENAI_RESOURCE_NAME", "My-Res")]),
    )
    .unwrap();
    assert_eq!(up.origin(), "https://my-res.openai.azure.com");
    assert_eq!(up.path_prefix, "/openai/v1");
    let long = "a".repeat(64);
    for bad in ["-x", "x-", "a.b", "a/b", long.as_str()] {
        let (option, _) = reason_of(
            upstream(route("azure"), &env(&[("AZURE_OPENAI_RESOURCE_NAME", bad)])).unwrap_err(),
        );
        assert_eq!(option, "AZURE_OPENAI_RESOURCE_NAME", "{bad}");
    }
}

#[test]
fn azure_base_url_wins_and_bare_service_urls_get_the_api_path() {
    let both = env(&[
        ("AZURE_OPENAI_RESOURCE_NAME", "ignored"),
        ("AZURE_OPENAI_BASE_URL", "https://res.openai.azure.com/"),
    ]);
    let up = upstream(route("azure"), &both).unwrap();
    assert_eq!(up.host, "res.openai.azure.com");
    assert_eq!(up.path_prefix, "/openai/v1");
    for (url, prefix) in [
        ("https://res.openai.azure.com/openai", "/openai/v1"),
        (
            "https://res.openai.azure.com/openai/v1/responses",
            "/openai/v1",
        ),
        ("https://res.cognitiveservices.azure.com", "/openai/v1"),
        ("https://res.services.ai.azure.com", "/openai/v1"),
        ("https://res.openai.azure.com/openai/v1", "/openai/v1"),
        ("https://res.openai.azure.com/custom", "/custom"),
        ("https://proxy.example.com", ""),
        ("http://127.0.0.1:9000/azure", "/azure"),
    ] {
        let up = upstream(route("azure"), &env(&[("AZURE_OPENAI_BASE_URL", url)])).unwrap();
        assert_eq!(up.path_prefix, prefix, "{url}");
    }
    // The bare-path rewrite is Azure's alone.
    let up = upstream(
        route("openai"),
        &env(&[("OPENAI_BASE_URL", "https://res.openai.azure.com")]),
    )
    .unwrap();
    assert_eq!(up.path_prefix, "");
}

// --- withheld ---

#[test]
fn withheld_lists_set_uncarriable_credentials_sorted_with_reasons() {
    let host = env(&[
        ("AWS_SECRET_ACCESS_KEY", "s"),
        ("AWS_ACCESS_KEY_ID", "a"),
        ("AWS_SESSION_TOKEN", "t"),
        ("AWS_PROFILE", "dev"),
        ("AWS_BEARER_TOKEN_BEDROCK", "b"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
        ("GOOGLE_CLOUD_PROJECT", "p"),
        ("GOOGLE_CLOUD_API_KEY", "g"),
        ("COPILOT_GITHUB_TOKEN", "gho_x"),
        ("CLOUDFLARE_API_KEY", "cf"),
        ("RADIUS_API_KEY", "r"),
        ("ANTHROPIC_IDENTITY_TOKEN_FILE", "/id"),
        ("ANTHROPIC_API_KEY", "sk-ant-api03-x"),
        ("OPENAI_API_KEY", "sk-x"),
        ("PATH", "/bin"),
    ]);
    let got = withheld(&host);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "ANTHROPIC_IDENTITY_TOKEN_FILE",
            "AWS_ACCESS_KEY_ID",
            "AWS_BEARER_TOKEN_BEDROCK",
            "AWS_PROFILE",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "CLOUDFLARE_API_KEY",
            "COPILOT_GITHUB_TOKEN",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_CLOUD_API_KEY",
            "GOOGLE_CLOUD_PROJECT",
            "RADIUS_API_KEY",
        ]
    );
    for (name, reason) in &got {
        assert!(reason.len() > 20, "{name} needs a reason");
    }
    let reason = |n: &str| got.iter().find(|(v, _)| v == n).unwrap().1.clone();
    assert!(reason("AWS_ACCESS_KEY_ID").contains("SigV4"));
    assert!(reason("GOOGLE_APPLICATION_CREDENTIALS").contains("Application Default Credentials"));
}

#[test]
fn withheld_ignores_unset_and_empty() {
    assert!(withheld(&HashMap::new()).is_empty());
    assert!(
        withheld(&env(&[
            ("AWS_PROFILE", ""),
            ("GOOGLE_APPLICATION_CREDENTIALS", " ")
        ]))
        .is_empty()
    );
}

#[test]
fn withheld_never_lists_carried_key_vars() {
    let carried = carried_vars();
    let all: Vec<(&str, &str)> = carried
        .iter()
        .map(|v| (*v, "value"))
        .chain(WITHHELD.iter().map(|(v, _)| (*v, "value")))
        .collect();
    let got = withheld(&env(&all));
    assert_eq!(got.len(), WITHHELD.len());
    for (name, _) in got {
        assert!(!carried.contains(&name.as_str()), "{name} is carried");
    }
    // Static subscription tokens in variables are carried, not withheld.
    assert!(carried.contains(&"ANTHROPIC_OAUTH_TOKEN"));
}

// --- host_key ---

#[test]
fn host_key_takes_the_first_set_variable_in_pi_order() {
    let anthropic = route("anthropic");
    assert_eq!(host_key(anthropic, &HashMap::new()), None);
    let host = env(&[
        ("ANTHROPIC_API_KEY", "sk-ant-api03-k"),
        ("ANTHROPIC_OAUTH_TOKEN", "sk-ant-oat01-o"),
    ]);
    assert_eq!(
        host_key(anthropic, &host),
        Some(("ANTHROPIC_OAUTH_TOKEN", "sk-ant-oat01-o"))
    );
    let host = env(&[
        ("ANTHROPIC_AUTH_TOKEN", "gw"),
        ("ANTHROPIC_API_KEY", "sk-ant-api03-k"),
    ]);
    assert_eq!(
        host_key(anthropic, &host),
        Some(("ANTHROPIC_AUTH_TOKEN", "gw"))
    );
    let host = env(&[("ANTHROPIC_AUTH_TOKEN", ""), ("ANTHROPIC_API_KEY", "k")]);
    assert_eq!(host_key(anthropic, &host), Some(("ANTHROPIC_API_KEY", "k")));
    assert_eq!(
        host_key(route("openai"), &env(&[("OPENAI_API_KEY", "sk-1")])),
        Some(("OPENAI_API_KEY", "sk-1"))
    );
    assert_eq!(
        host_key(route("openai"), &env(&[("OPENAI_API_KEY", "")])),
        None
    );
}

// --- mint_token ---

fn is_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

#[test]
fn openai_tokens_start_sk() {
    let t = mint_token(route("openai"), "sk-proj-real").unwrap();
    let rest = t.strip_prefix("sk-").unwrap();
    assert!(is_hex(rest), "{t}");
}

#[test]
fn anthropic_api_key_tokens_never_look_like_subscriptions() {
    for real in ["sk-ant-api03-real", "gateway-token", ""] {
        let t = mint_token(route("anthropic"), real).unwrap();
        assert!(t.starts_with("sk-ant-api03-"), "{t}");
        assert!(!t.contains("sk-ant-oat"), "{t}");
        assert!(is_hex(&t["sk-ant-api03-".len()..]));
    }
}

#[test]
fn anthropic_subscription_tokens_stay_subscriptions() {
    for real in ["sk-ant-oat01-real", "xx-sk-ant-oat99"] {
        let t = mint_token(route("anthropic"), real).unwrap();
        assert!(t.starts_with("sk-ant-oat01-"), "{t}");
        assert!(is_hex(&t["sk-ant-oat01-".len()..]));
    }
}

#[test]
fn plain_tokens_are_hex_and_never_trip_pi_key_checks() {
    let t = mint_token(route("openrouter"), "sk-or-v1-real").unwrap();
    assert!(is_hex(&t), "{t}");
    assert!(!t.contains("sk-ant-oat"));
}

#[test]
fn tokens_are_long_and_differ() {
    for r in providers() {
        let a = mint_token(r, "key").unwrap();
        let b = mint_token(r, "key").unwrap();
        assert_ne!(a, b, "{}", r.id);
        let prefix = r.token_shape.prefix("key");
        assert!(a.starts_with(prefix));
        assert!(a.len() >= prefix.len() + 32, "{}", r.id);
        assert!(is_hex(&a[prefix.len()..]), "{}", r.id);
    }
}

// --- route_path ---

#[test]
fn route_path_splits_provider_and_rest() {
    let (r, rest) = route_path("/anthropic/v1/messages").unwrap();
    assert_eq!((r.id, rest), ("anthropic", "/v1/messages"));
    let (r, rest) = route_path("/openrouter/api/v1/chat/completions").unwrap();
    assert_eq!((r.id, rest), ("openrouter", "/api/v1/chat/completions"));
    let (r, rest) = route_path("/anthropic").unwrap();
    assert_eq!((r.id, rest), ("anthropic", "/"));
    let (r, rest) = route_path("/anthropic/").unwrap();
    assert_eq!((r.id, rest), ("anthropic", "/"));
    let (r, rest) = route_path("/google/v1beta/models/x:streamGenerateContent?alt=sse").unwrap();
    assert_eq!(
        (r.id, rest),
        ("google", "/v1beta/models/x:streamGenerateContent?alt=sse")
    );
    let (r, rest) = route_path("/vercel-ai-gateway/typesafe/v1/systemone").unwrap();
    assert_eq!(
        (r.id, rest),
        ("vercel-ai-gateway", "/typesafe/v1/systemone")
    );
}

#[test]
fn route_path_refuses_unknown_and_malformed() {
    for p in [
        "/unknown/x",
        "/",
        "",
        "//x",
        "//anthropic/v1",
        "anthropic/v1",
        "/Anthropic/v1",
        "/anthropic?x=1",
        "/anthr%6fpic/v1",
    ] {
        assert!(route_path(p).is_none(), "{p}");
    }
}

#[test]
fn route_path_refuses_dot_segments() {
    for p in [
        "/openai/../anthropic/v1",
        "/openai/v1/..",
        "/openai/./v1",
        "/openai/%2e%2e/x",
        "/openai/.%2E/x",
        "/openai/%2E/x",
    ] {
        assert!(route_path(p).is_none(), "{p}");
    }
    // Dots inside a segment, and in the query, are fine.
    assert!(route_path("/openai/v1/a..b").is_some());
    assert!(route_path("/openai/v1/x?p=..").is_some());
}
