use std::collections::HashMap;

use super::*;

#[test]
fn credentials_never_pass_in_any_spelling() {
    use ProxyValue::*;
    let kept = |s: &str| Kept(s.to_string());
    let stripped = |s: &str| Stripped(s.to_string());
    let cases: &[(&str, ProxyValue)] = &[
        ("http://proxy:3128", kept("http://proxy:3128")),
        (
            "http://proxy.corp.example",
            kept("http://proxy.corp.example"),
        ),
        ("http://proxy:3128/", kept("http://proxy:3128/")),
        ("http://user:pass@proxy:3128", stripped("http://proxy:3128")),
        ("http://user@proxy:3128/", stripped("http://proxy:3128/")),
        ("HTTP://User:Pass@Proxy:3128", stripped("HTTP://Proxy:3128")),
        ("Https://u:p@proxy", stripped("Https://proxy")),
        (
            "socks5h://u:p@10.0.0.1:1080",
            stripped("socks5h://10.0.0.1:1080"),
        ),
        // Encoded '@' and ':' inside the userinfo, and several '@': all of it goes.
        (
            "http://us%40er:p%40ss@proxy:8080",
            stripped("http://proxy:8080"),
        ),
        ("http://user:p%3Ass@proxy", stripped("http://proxy")),
        ("http://a@b@c:d@proxy:1", stripped("http://proxy:1")),
        ("http://user:pa:ss@proxy", stripped("http://proxy")),
        ("http://:@proxy", stripped("http://proxy")),
        // IPv6 hosts.
        ("http://[::1]:3128", kept("http://[::1]:3128")),
        (
            "http://u:p@[2001:db8::1]:3128",
            stripped("http://[2001:db8::1]:3128"),
        ),
        ("http://u:p@[2001:db8::1]", stripped("http://[2001:db8::1]")),
        // No scheme.
        ("proxy:3128", kept("proxy:3128")),
        ("user:pass@proxy:3128", stripped("proxy:3128")),
        ("u%40x:p@proxy", stripped("proxy")),
    ];
    for (raw, want) in cases {
        let got = sanitize_proxy(raw);
        assert_eq!(&got, want, "{raw}");
        if let Kept(v) | Stripped(v) = &got {
            for secret in ["user", "pass", "%40", "p@", "u:p", "User"] {
                assert!(!v.contains(secret), "{raw} -> {v}");
            }
        }
    }
}

#[test]
fn values_that_cannot_be_read_with_certainty_are_withheld() {
    for raw in [
        "http://user:pa/ss@proxy",  // '/' ends the authority: the '@' is after it
        "http://proxy/x@y",         // an '@' in the path
        "http://proxy?u=a@b",       // an '@' in the query
        "http://user%40proxy:3128", // an encoded '@' in what reads as the host
        "http://us er:p@proxy",     // a blank
        "http://u:p@proxy\n",       // a control character
        "1http://proxy",            // not a scheme
        "ht tp://u:p@proxy",        // not a scheme
        "http://u:p@",              // no host
        "http://u:p@:3128",         // no host
        "http://u:p@proxy:31x8",    // not a port
        "http://u:p@proxy:",        // an empty port
        "http://u:p@[2001:db8::1",  // unclosed bracket
        "http://u:p@[zz::1]:1",     // not IPv6
        "http://u:p@[::1]x",        // text after ']'
        "http://u:p@pro\u{e9}xy",   // not ASCII
        "http://u:p@proxy:1:2",     // two ports
        "//u:p@proxy",              // no scheme but an authority marker
    ] {
        assert!(
            matches!(sanitize_proxy(raw), ProxyValue::Withheld(_)),
            "{raw:?} -> {:?}",
            sanitize_proxy(raw)
        );
    }
}

#[test]
fn notes_name_each_variable_changed_and_why() {
    let host: HashMap<String, String> = [
        ("HTTPS_PROXY", "http://u:p@proxy:3128"),
        ("http_proxy", "http://proxy:3128"),
        ("ALL_PROXY", "socks5://u:p@proxy/x@y"),
        ("all_proxy", ""),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let notes = proxy_notes(&host);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with("ALL_PROXY is not passed to containers: it has an '@'"),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with("HTTPS_PROXY carries credentials"),
        "{notes:?}"
    );
    assert!(notes.iter().all(|n| !n.contains("u:p")), "{notes:?}");
}
