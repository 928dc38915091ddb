use super::*;
use crate::broker::routes::{find, providers};

fn route(id: &str) -> &'static ProviderRoute {
    find(id).unwrap_or_else(|| panic!("no route {id}"))
}

#[test]
fn every_provider_has_model_endpoints_with_clean_base_paths() {
    for r in providers() {
        assert!(!r.apis.is_empty(), "{} forwards nothing", r.id);
        for (base, _) in r.apis {
            assert!(
                base.is_empty() || (base.starts_with('/') && !base.ends_with('/')),
                "{}: base {base:?}",
                r.id
            );
        }
    }
}

#[test]
fn the_documented_model_endpoints_pass() {
    let cases: &[(&str, &str)] = &[
        ("anthropic", "/v1/messages"),
        ("anthropic", "/v1/messages/count_tokens"),
        ("anthropic", "/v1/models"),
        ("anthropic", "/v1/models/claude-sonnet-4-5"),
        ("openai", "/v1/chat/completions"),
        ("openai", "/v1/responses"),
        ("openai", "/v1/completions"),
        ("openai", "/v1/embeddings"),
        ("openai", "/v1/models"),
        ("openai", "/v1/models/gpt-4o-mini"),
        (
            "google",
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        ),
        ("google", "/v1beta/models/gemini-2.5-flash:generateContent"),
        ("google", "/v1beta/models"),
        ("groq", "/openai/v1/chat/completions"),
        ("openrouter", "/api/v1/chat/completions"),
        ("openrouter", "/api/v1/messages"),
        ("fireworks", "/inference/v1/messages"),
        ("fireworks", "/inference/v1/chat/completions"),
        ("azure", "/responses"),
        ("azure", "/chat/completions"),
        ("zai", "/api/coding/paas/v4/chat/completions"),
        ("minimax", "/anthropic/v1/messages"),
        ("vercel-ai-gateway", "/v1/messages"),
        ("vercel-ai-gateway", "/typesafe/v1/decisions"),
        ("kimi-coding", "/coding/v1/chat/completions"),
        ("qwen-token-plan", "/compatible-mode/v1/chat/completions"),
        ("opencode-go", "/inference/go/v1/messages"),
        ("deepseek", "/chat/completions"),
    ];
    for (id, path) in cases {
        assert!(allowed(route(id), &[], path), "{id} {path} refused");
    }
}

#[test]
fn other_endpoints_and_look_alikes_are_refused() {
    let cases: &[(&str, &str)] = &[
        ("anthropic", "/v1/files"),
        ("anthropic", "/v1/messages/batches"),
        ("anthropic", "/v1/messages/batches/x/results"),
        ("anthropic", "/v1/messages-evil"),
        ("anthropic", "/v1/messagesx"),
        ("anthropic", "/v1/messages/"),
        ("anthropic", "/v1/messages/../files"),
        ("anthropic", "/V1/Messages"),
        ("anthropic", "/v1/MESSAGES"),
        ("anthropic", "/v1//messages"),
        ("anthropic", "/v1/./messages"),
        ("anthropic", "/v1/messages?x"),
        ("anthropic", "/v1/messages#x"),
        ("anthropic", "/x/v1/messages"),
        ("anthropic", "v1/messages"),
        ("anthropic", ""),
        ("anthropic", "/"),
        ("anthropic", "/v1/models/a/b"),
        ("anthropic", "/v1/models/"),
        ("anthropic", "/v1/models/a:b"),
        ("openai", "/v1/files"),
        ("openai", "/v1/batches"),
        ("openai", "/v1/fine_tuning/jobs"),
        ("openai", "/v1/uploads"),
        ("openai", "/v1/organization/admin_api_keys"),
        ("openai", "/v1/chat/completions/x"),
        ("openai", "/v1/responses/resp_1"),
        ("openai", "/v1/messages"),
        ("openai", "/chat/completions"),
        ("google", "/v1beta/files"),
        ("google", "/v1beta/models/gemini:batchGenerateContent"),
        ("google", "/v1beta/models/gemini:generateContent:x"),
        ("google", "/v1beta/models/:generateContent"),
        ("google", "/v1beta/cachedContents"),
        ("openrouter", "/api/v1/keys"),
        ("openrouter", "/api/v1/credits"),
        ("openrouter", "/v1/messages"),
        ("groq", "/openai/v1/files"),
        ("groq", "/openai/v1/batches"),
        ("azure", "/openai/files"),
        ("azure", "/files"),
    ];
    for (id, path) in cases {
        assert!(!allowed(route(id), &[], path), "{id} {path} passed");
    }
}

#[test]
fn the_hosts_patterns_add_paths() {
    let extra = vec!["/v1/files".to_string(), "/v1/batches/**".to_string()];
    let r = route("openai");
    assert!(allowed(r, &extra, "/v1/files"));
    assert!(!allowed(r, &extra, "/v1/files/x"));
    assert!(allowed(r, &extra, "/v1/batches/b1"));
    assert!(allowed(r, &extra, "/v1/batches/b1/cancel"));
    assert!(!allowed(r, &extra, "/v1/batches"));
    assert!(!allowed(r, &extra, "/v1/batches/"));
    assert!(!allowed(r, &extra, "/v1/batches/b1//x"));
    assert!(allowed(r, &["/**".to_string()], "/anything/at/all"));
}

#[test]
fn patterns_are_checked() {
    for good in [
        "/v1/files",
        "/v1/files/*",
        "/**",
        "/v1/models/*:predict",
        "/v1/x-y.z",
    ] {
        assert_eq!(check_pattern(good), Ok(()), "{good}");
    }
    for bad in [
        "v1/files",
        "",
        "/",
        "/v1//files",
        "/v1/files/",
        "/v1/../files",
        "/v1/./files",
        "/v1/%2e%2e",
        "/v1/files?x=1",
        "/v1/files#x",
        "/v1\\files",
        "/v1/fi*les",
        "/**/files",
        "/v1/*x",
        "/v1/file s",
        "/v1/é",
    ] {
        assert!(check_pattern(bad).is_err(), "{bad} accepted");
    }
}
