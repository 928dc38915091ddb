use super::*;
use crate::broker::routes::paths::Api;
use crate::broker::screen::apis::grammar;

fn chat() -> Option<&'static Grammar> {
    grammar(Api::OpenAi, "/chat/completions")
}
fn responses() -> Option<&'static Grammar> {
    grammar(Api::OpenAi, "/responses")
}
fn messages() -> Option<&'static Grammar> {
    grammar(Api::Anthropic, "/v1/messages")
}
fn gemini() -> Option<&'static Grammar> {
    grammar(Api::Gemini, "/models/*:streamGenerateContent")
}

/// The scan of `body` in one piece, split at every offset into two pieces, and byte by byte:
/// all must agree.
fn scan(g: Option<&'static Grammar>, body: &str) -> Option<Finding> {
    let bytes = body.as_bytes();
    let whole = {
        let mut s = ShapeScan::new(g);
        s.feed(bytes);
        s.finish().cloned()
    };
    for cut in 0..=bytes.len() {
        let mut s = ShapeScan::new(g);
        s.feed(&bytes[..cut]);
        s.feed(&bytes[cut..]);
        assert_eq!(s.finish().cloned(), whole, "{body:?} split at {cut}");
    }
    let mut s = ShapeScan::new(g);
    for b in bytes {
        s.feed(std::slice::from_ref(b));
    }
    assert_eq!(s.finish().cloned(), whole, "{body:?} byte by byte");
    whole
}

fn key(key: &str, within: &'static str) -> Finding {
    Finding::Key {
        key: key.into(),
        within,
    }
}

fn fetch_url(value: &str, within: &'static str) -> Finding {
    Finding::Value {
        value: value.into(),
        within,
        rule: Text::NotFetched,
    }
}

/// The finding's value and place when it is a refused word (the rule's list is not compared).
fn word(f: Option<Finding>) -> Option<(String, &'static str)> {
    match f {
        Some(Finding::Value {
            value,
            within,
            rule: Text::OneOf(_),
        }) => Some((value, within)),
        other => panic!("expected a refused word, got {other:?}"),
    }
}

#[test]
fn server_tools_and_fetching_fields_are_refused_in_every_api_by_their_key() {
    let keys: &[(Option<&'static Grammar>, &str, Finding)] = &[
        (
            messages(),
            r#"{"model":"m","mcp_servers":[{"type":"url","url":"https://x"}]}"#,
            key("mcp_servers", "the request"),
        ),
        (
            chat(),
            r#"{"model":"m","web_search_options":{}}"#,
            key("web_search_options", "the request"),
        ),
        (
            chat(),
            r#"{"model":"grok-4","search_parameters":{"mode":"on"}}"#,
            key("search_parameters", "the request"),
        ),
        (
            chat(),
            r#"{"model":"m","plugins":[{"id":"web"}]}"#,
            key("plugins", "the request"),
        ),
        (
            responses(),
            r#"{"model":"m","prompt":{"id":"pmpt_1"}}"#,
            key("prompt", "the request"),
        ),
        (
            responses(),
            r#"{"model":"m","tools":[{"server_url":"https://x","type":"mcp"}]}"#,
            key("server_url", "a tool"),
        ),
        (
            gemini(),
            r#"{"contents":[],"tools":[{"googleSearch":{}}]}"#,
            key("googleSearch", "a tool"),
        ),
        (
            gemini(),
            r#"{"contents":[],"tools":[{"url_context":{}}]}"#,
            key("url_context", "a tool"),
        ),
        (
            gemini(),
            r#"{"contents":[{"parts":[{"fileData":{"fileUri":"https://x/v.mp4"}}]}]}"#,
            key("fileData", "a part"),
        ),
        (
            gemini(),
            r#"{"cachedContent":"cachedContents/1"}"#,
            key("cachedContent", "the request"),
        ),
        (
            responses(),
            r#"{"input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}"#,
            key("file_url", "a content part"),
        ),
    ];
    for (g, body, want) in keys {
        assert_eq!(scan(*g, body).as_ref(), Some(want), "{body}");
    }
}

#[test]
fn escaped_repeated_and_out_of_place_keys_are_judged() {
    let keys: &[(Option<&'static Grammar>, &str, Finding)] = &[
        (
            messages(),
            r#"{"\u006dcp_servers":[]}"#,
            key("mcp_servers", "the request"),
        ),
        (
            messages(),
            r#"{"model":"m","model":"m","messages":[],"messages":[],"mcp_servers":[]}"#,
            key("mcp_servers", "the request"),
        ),
        (
            messages(),
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi","mcp_servers":[]}]}]}"#,
            key("mcp_servers", "a content block"),
        ),
        (
            messages(),
            "{\"model\":\"m\",\n \"mcp_servers\" \t:\r\n []}",
            key("mcp_servers", "the request"),
        ),
    ];
    for (g, body, want) in keys {
        assert_eq!(scan(*g, body).as_ref(), Some(want), "{body}");
    }
}

#[test]
fn hosted_tools_and_url_sources_are_refused_by_their_type() {
    let words: &[(Option<&'static Grammar>, &str, &str, &str)] = &[
        (
            messages(),
            r#"{"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}"#,
            "web_fetch_20250910",
            "a tool's type",
        ),
        (
            messages(),
            r#"{"tools":[{"name":"web_search","type":"web_search_20250305"}]}"#,
            "web_search_20250305",
            "a tool's type",
        ),
        (
            messages(),
            r#"{"tools":[{"type":"code_execution_20250825","name":"x"}]}"#,
            "code_execution_20250825",
            "a tool's type",
        ),
        (
            responses(),
            r#"{"tools":[{"type":"web_search_preview"}]}"#,
            "web_search_preview",
            "a tool's type",
        ),
        (
            responses(),
            r#"{"tools":[{"type":"\u006D\u0063\u0070"}]}"#,
            "mcp",
            "a tool's type",
        ),
        (
            responses(),
            r#"{"tool_choice":{"type":"web_search_preview"}}"#,
            "web_search_preview",
            "tool_choice's type",
        ),
        (
            messages(),
            r#"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/i.png"}}]}]}"#,
            "url",
            "a source's type",
        ),
        (
            messages(),
            r#"{"messages":[{"role":"user","content":[{"type":"web_search_tool_result"}]}]}"#,
            "web_search_tool_result",
            "a content block's type",
        ),
        (
            chat(),
            r#"{"messages":[{"role":"user","content":[{"type":"Text","text":"x"}]}]}"#,
            "Text",
            "a content part's type",
        ),
    ];
    for (g, body, value, within) in words {
        assert_eq!(
            word(scan(*g, body)),
            Some((value.to_string(), *within)),
            "{body}"
        );
    }
}

#[test]
fn urls_a_provider_would_fetch_are_refused_in_every_form() {
    let cases: &[(Option<&'static Grammar>, &str, Finding)] = &[
        (
            chat(),
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/i.png"}}]}]}"#,
            fetch_url("http://x/i.png", "an inline value"),
        ),
        (
            chat(),
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x/i.png"}]}]}"#,
            fetch_url("https://x/i.png", "an image"),
        ),
        // OpenRouter's file part: a URL in file_data is fetched.
        (
            chat(),
            r#"{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"https://x/a.pdf"}}]}]}"#,
            fetch_url("https://x/a.pdf", "an inline value"),
        ),
        (
            responses(),
            r#"{"input":[{"role":"user","content":[{"type":"input_image","image_url":"  HTTPS://x/i.png"}]}]}"#,
            fetch_url("https://x/i.png", "an inline value"),
        ),
        (
            responses(),
            r#"{"input":[{"role":"user","content":[{"type":"input_image","image_url":"\u0068ttps:\/\/x"}]}]}"#,
            fetch_url("https://x", "an inline value"),
        ),
        (
            chat(),
            r#"{"messages":[{"content":[{"image_url":{"url":"//evil.example/x"}}]}]}"#,
            fetch_url("//evil.example/x", "an inline value"),
        ),
        (
            chat(),
            r#"{"messages":[{"content":[{"image_url":{"url":"gs://bucket/x"}}]}]}"#,
            fetch_url("gs://bucket/x", "an inline value"),
        ),
        (
            chat(),
            r#"{"messages":[{"content":[{"image_url":{"url":"FTP://evil/x"}}]}]}"#,
            fetch_url("ftp://evil/x", "an inline value"),
        ),
    ];
    for (g, body, want) in cases {
        let got = scan(*g, body);
        // The value is shown as sent (its case kept); compare it case-insensitively.
        match (&got, want) {
            (
                Some(Finding::Value {
                    value,
                    within,
                    rule,
                    ..
                }),
                Finding::Value {
                    value: v,
                    within: w,
                    rule: r,
                },
            ) => {
                assert!(value.trim().eq_ignore_ascii_case(v), "{body}: {value}");
                assert_eq!((within, rule), (w, r), "{body}");
            }
            _ => panic!("{body}: {got:?}"),
        }
    }
}

#[test]
fn models_that_browse_by_themselves_are_refused() {
    for model in [
        "gpt-4o-search-preview",
        "openai/gpt-4o-mini-search-preview-2025-03-11",
        "gpt-5-search-api",
        "o3-deep-research",
        "openai/o4-mini-deep-research",
        "perplexity/sonar-pro",
        "sonar",
        "anthropic/claude-3.5-sonnet:online",
        "groq/compound-mini",
        "compound-beta",
        "GPT-4o-SEARCH-preview",
        "gpt-4o\u{2d}search",
    ] {
        for g in [chat(), responses(), messages()] {
            let body = format!(r#"{{"model":{}}}"#, serde_json::to_string(model).unwrap());
            assert_eq!(
                scan(g, &body),
                Some(Finding::Browsing(model.into())),
                "{model}"
            );
        }
    }
    let fallback = r#"{"model":"openai/gpt-4o","models":["openai/gpt-4o","perplexity/sonar"]}"#;
    assert_eq!(
        scan(chat(), fallback),
        Some(Finding::Browsing("perplexity/sonar".into()))
    );
    let escaped = r#"{"model":"gpt-4o-\u0073earch-preview"}"#;
    assert!(matches!(scan(chat(), escaped), Some(Finding::Browsing(_))));
    for model in [
        "nousresearch/hermes-3-llama-3.1-405b",
        "claude-sonnet-4-5",
        "gpt-5.1-codex",
        "gemini-2.5-pro",
        "researcher-7b",
        "deepseek-reasoner",
    ] {
        assert!(!browses(model), "{model}");
    }
    let long = format!(r#"{{"model":"{}"}}"#, "m".repeat(200));
    assert!(matches!(
        scan(chat(), &long),
        Some(Finding::Value {
            rule: Text::Model,
            ..
        })
    ));
}

#[test]
fn what_pi_sends_passes() {
    let cases: &[(Option<&'static Grammar>, &str)] = &[
        (
            messages(),
            r#"{"model":"claude-sonnet-4-5","max_tokens":8,"stream":true,"system":[{"type":"text","text":"You are pi","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"ping"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls","url":"https://x"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}],"is_error":false}]}],"tools":[{"name":"bash","description":"run","input_schema":{"type":"object","properties":{"url":{"type":"string","format":"uri"},"mcp_servers":{"type":"array"}},"required":[]},"cache_control":{"type":"ephemeral","ttl":"1h"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":1024,"display":"summarized"},"output_config":{"effort":"high"},"metadata":{"user_id":"u"}}"#,
        ),
        (
            chat(),
            r#"{"model":"gpt-4o","messages":[{"role":"developer","content":"sys"},{"role":"user","content":[{"type":"text","text":"look: \"url\":\"https://x\" mcp_servers"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"url\":\"https://x\"}"}}],"reasoning_details":[{"type":"reasoning.encrypted","data":"x","anything":{"server":"keys"}}]},{"role":"tool","tool_call_id":"c1","content":"done"}],"stream":true,"stream_options":{"include_usage":true},"store":false,"max_completion_tokens":100,"tools":[{"type":"function","function":{"name":"read","description":"d","parameters":{"type":"object","properties":{"web_search_options":{}}},"strict":false}}],"tool_choice":"auto","reasoning_effort":"high","prompt_cache_key":"k","provider":{"order":["a"],"allow_fallbacks":true},"reasoning":{"effort":"high"},"thinking":{"type":"enabled","clear_thinking":false},"chat_template_kwargs":{"enable_thinking":true}}"#,
        ),
        (
            responses(),
            r#"{"model":"gpt-5.1-codex","store":false,"stream":true,"instructions":"sys","input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","detail":"auto","image_url":"data:image/jpeg;base64,AAAA"}]},{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"t"}],"encrypted_content":"e"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[{"type":"url_citation","url":"https://x"}]}],"status":"completed","id":"msg_1"},{"type":"function_call","call_id":"c","name":"bash","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]}],"text":{"verbosity":"low"},"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","tool_choice":"auto","parallel_tool_calls":true,"tools":[{"type":"function","name":"bash","description":"d","parameters":{"type":"object"},"strict":null}],"reasoning":{"effort":"medium","summary":"auto"}}"#,
        ),
        (
            gemini(),
            r#"{"contents":[{"role":"user","parts":[{"text":"hi"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]},{"role":"model","parts":[{"thought":true,"text":"t","thoughtSignature":"s"},{"functionCall":{"name":"bash","args":{"url":"https://x"}}}]},{"role":"user","parts":[{"functionResponse":{"name":"bash","response":{"output":"ok"}}}]}],"systemInstruction":{"parts":[{"text":"sys"}],"role":"user"},"tools":[{"functionDeclarations":[{"name":"bash","description":"d","parametersJsonSchema":{"type":"object"}}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}},"generationConfig":{"temperature":0.2,"maxOutputTokens":100,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"HIGH"}}}"#,
        ),
        // The Gemini API's snake_case spelling.
        (
            gemini(),
            r#"{"contents":[{"parts":[{"inline_data":{"mime_type":"image/png","data":"AAAA"}}]}],"system_instruction":{"parts":[{"text":"s"}]},"generation_config":{"thinking_config":{"thinking_budget":0}}}"#,
        ),
        // Words as values or inside strings, never as keys.
        (
            messages(),
            r#"{"messages":[{"role":"user","content":"{\"mcp_servers\":1} web_search_20250305"}]}"#,
        ),
        (messages(), "  \n{}"),
        (None, ""),
        (None, " \r\n\t"),
    ];
    for (g, body) in cases {
        assert_eq!(scan(*g, body), None, "{body}");
    }
}

#[test]
fn a_gemini_snake_case_key_is_judged_as_its_camel_case_form() {
    assert_eq!(
        scan(gemini(), r#"{"tools":[{"google_search":{}}]}"#),
        Some(key("google_search", "a tool"))
    );
    assert_eq!(
        scan(
            gemini(),
            r#"{"contents":[{"parts":[{"file_data":{"file_uri":"https://x"}}]}]}"#
        ),
        Some(key("file_data", "a part"))
    );
    // Elsewhere keys are exact: OpenAI's are snake_case only.
    assert_eq!(
        scan(chat(), r#"{"maxTokens":1}"#),
        Some(key("maxTokens", "the request"))
    );
}

#[test]
fn bodies_with_no_known_shape_deep_or_not_objects_are_refused() {
    assert_eq!(scan(None, "{}"), Some(Finding::NoShape));
    assert_eq!(scan(None, " x"), Some(Finding::NoShape));
    for body in ["[]", "\"x\"", "1", "model=m&tools=x", "\u{feff}{}"] {
        assert_eq!(scan(chat(), body), Some(Finding::NotAnObject), "{body}");
    }
    let deep = format!(
        r#"{{"tools":[{{"input_schema":{}{}}}]}}"#,
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    );
    assert_eq!(scan(messages(), &deep), Some(Finding::Deep));
    // A second object after the first has no keys to give.
    assert_eq!(
        scan(messages(), r#"{"model":"m"}{"mcp_servers":[]}"#),
        Some(key("mcp_servers", "a plain value"))
    );
    // A key whose value is missing its colon is read as another key.
    assert!(matches!(
        scan(messages(), r#"{"model" "mcp_servers":1}"#),
        Some(Finding::Key { .. })
    ));
    // An object where a plain value stands has no keys.
    assert_eq!(
        scan(messages(), r#"{"max_tokens":{"url":"https://x"}}"#),
        Some(key("url", "a plain value"))
    );
}

#[test]
fn memory_stays_small_over_a_long_body() {
    let mut s = ShapeScan::new(chat());
    s.feed(b"{\"messages\":[{\"role\":\"user\",\"content\":\"");
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..64 {
        assert_eq!(s.feed(&chunk), None);
    }
    s.feed(b"\"}],\"mcp_servers\":[]}");
    assert_eq!(s.finish(), Some(&key("mcp_servers", "the request")));
    assert!(std::mem::size_of::<ShapeScan>() < 320);
    assert!(s.stack.capacity() <= MAX_DEPTH);
}
