use super::*;

/// The scan of `body` in one piece, and split at every offset into two pieces and into
/// single bytes: all must agree.
fn scan(body: &str) -> Option<Finding> {
    let bytes = body.as_bytes();
    let whole = {
        let mut s = FetchScan::default();
        s.feed(bytes);
        s.finish()
    };
    for cut in 0..=bytes.len() {
        let mut s = FetchScan::default();
        s.feed(&bytes[..cut]);
        s.feed(&bytes[cut..]);
        assert_eq!(s.finish(), whole, "{body:?} split at {cut}");
    }
    let mut s = FetchScan::default();
    for b in bytes {
        s.feed(std::slice::from_ref(b));
    }
    assert_eq!(s.finish(), whole, "{body:?} byte by byte");
    whole
}

#[test]
fn fetching_bodies_are_found() {
    let cases: &[(&str, Finding)] = &[
        (
            r#"{"model":"m","mcp_servers":[{"type":"url","url":"https://x"}]}"#,
            Finding::Key("mcp_servers"),
        ),
        (
            r#"{"tools":[{"type":"mcp","server_url":"https://x"}]}"#,
            Finding::Type("mcp"),
        ),
        (
            r#"{"tools":[{"server_url":"https://x","type":"mcp"}]}"#,
            Finding::Key("server_url"),
        ),
        (
            r#"{"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}"#,
            Finding::Type("web_fetch…"),
        ),
        (
            r#"{"tools":[{"type":"web_search_20250305"}]}"#,
            Finding::Type("web_search…"),
        ),
        (
            r#"{"tools":[{"type":"web_search_preview"}]}"#,
            Finding::Type("web_search…"),
        ),
        (
            r#"{"web_search_options":{}}"#,
            Finding::Key("web_search_options"),
        ),
        (
            r#"{"tools":[{"googleSearch":{}}]}"#,
            Finding::Key("googleSearch"),
        ),
        (
            r#"{"tools":[{"url_context":{}}]}"#,
            Finding::Key("url_context"),
        ),
        (
            r#"{"content":[{"type":"image","source":{"type":"url","url":"https://x/i.png"}}]}"#,
            Finding::Type("url"),
        ),
        (
            r#"{"content":[{"type":"image_url","image_url":{"url":"http://x/i.png"}}]}"#,
            Finding::Url("url"),
        ),
        (
            r#"{"input":[{"type":"input_image","image_url":"HTTPS://x/i.png"}]}"#,
            Finding::Url("image_url"),
        ),
        (
            r#"{"input":[{"type":"input_file","file_url":"https://x/a.pdf"}]}"#,
            Finding::Url("file_url"),
        ),
        (
            r#"{"parts":[{"fileData":{"fileUri":"  https://x/v.mp4"}}]}"#,
            Finding::Url("fileUri"),
        ),
        (r#"{"a":{"url":"//evil.example/x"}}"#, Finding::Url("url")),
        (
            r#"{"a":{"url":"ftp://evil.example/x"}}"#,
            Finding::Url("url"),
        ),
        // Escaped key names and values.
        (r#"{"\u006dcp_servers":[]}"#, Finding::Key("mcp_servers")),
        (r#"{"a":{"\u0075rl":"https://x"}}"#, Finding::Url("url")),
        (r#"{"a":{"url":"\u0068ttps://x"}}"#, Finding::Url("url")),
        (
            r#"{"type":"web\u005ffetch_1"}"#,
            Finding::Type("web_fetch…"),
        ),
        (r#"{"type":"\u006D\u0063\u0070"}"#, Finding::Type("mcp")),
        (r#"{"a":{"url":"https:\/\/x"}}"#, Finding::Url("url")),
        // White space around the colon, nested deep, after other keys.
        (
            "{\"x\":1,\n \"mcp_servers\" \t:\r\n []}",
            Finding::Key("mcp_servers"),
        ),
        (
            r#"[[[[[[[[[[{"a":[{"b":{"c":[{"mcp_servers":0}]}}]}]]]]]]]]]]"#,
            Finding::Key("mcp_servers"),
        ),
        (
            r#"{"note":"a \"quoted\" \\ text","server_url":"x"}"#,
            Finding::Key("server_url"),
        ),
        // OpenRouter's web plugin and :online models, short and long names.
        (
            r#"{"model":"m","plugins":[{"id":"web","max_results":3}]}"#,
            Finding::WebSearch,
        ),
        (r#"{"model":"gpt-4o:online"}"#, Finding::WebSearch),
        (
            r#"{"model":"anthropic/claude-3.5-sonnet-20241022-long-name:online","x":1}"#,
            Finding::WebSearch,
        ),
    ];
    for (body, want) in cases {
        assert_eq!(scan(body), Some(*want), "{body}");
    }
}

#[test]
fn ordinary_bodies_pass() {
    let cases: &[&str] = &[
        r#"{"model":"claude","max_tokens":8,"messages":[{"role":"user","content":"ping"}]}"#,
        // The words as values or inside strings, never as keys.
        r#"{"messages":[{"role":"user","content":"\"mcp_servers\": [] and \"url\":\"https://x\""}]}"#,
        r#"{"content":"mcp_servers"}"#,
        r#"{"content":["server_url","web_search_options"]}"#,
        r#"{"content":"{\"mcp_servers\":1}"}"#,
        // A data URL, a relative value, a non-string URL value.
        r#"{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}"#,
        r#"{"a":{"url":"notes.txt"}}"#,
        r#"{"a":{"url":{"type":"string"}}}"#,
        r#"{"a":{"url":null,"b":"https://x"}}"#,
        // Other types and keys that only look alike.
        r#"{"type":"message"}"#,
        r#"{"type":"mcp_like"}"#,
        r#"{"type":"urls"}"#,
        r#"{"mcp_servers_x":1,"xmcp_servers":2,"MCP_SERVERS":3}"#,
        r#"{"urlx":"https://x","Url":"https://x"}"#,
        r#"{"type":["mcp"]}"#,
        r#"{"type":1,"x":"mcp"}"#,
        r#"{"model":"anthropic/claude-3.5-sonnet-20241022-long-name","id":"webx"}"#,
        r#"{"model":"online","content":"model:online","id":"msg_web"}"#,
        r#"{"a_very_long_key_that_goes_beyond_the_kept_bytes_mcp_servers":1}"#,
        r#"{"tools":[{"name":"bash","input_schema":{"type":"object","properties":{"url":{"type":"string"}}}}]}"#,
        "",
        "not json at all",
    ];
    for body in cases {
        assert_eq!(scan(body), None, "{body}");
    }
}

#[test]
fn a_string_value_at_the_very_end_is_judged() {
    assert_eq!(scan(r#""url":"https://x""#), Some(Finding::Url("url")));
    let mut s = FetchScan::default();
    assert_eq!(s.feed(br#"{"type":"mcp""#), None);
    assert_eq!(s.finish(), Some(Finding::Type("mcp")));
}

#[test]
fn memory_stays_small_over_a_long_body() {
    let mut s = FetchScan::default();
    s.feed(b"{\"pad\":\"");
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..64 {
        assert_eq!(s.feed(&chunk), None);
    }
    s.feed(b"\",\"mcp_servers\":[]}");
    assert_eq!(s.finish(), Some(Finding::Key("mcp_servers")));
    assert!(std::mem::size_of::<FetchScan>() < 160);
}
