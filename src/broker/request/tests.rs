use hyper::header::{HeaderName, HeaderValue};
use proptest::prelude::*;

use super::*;
use crate::broker::decode::percent_decode;

type Pairs<'a> = &'a [(&'a str, &'a str)];

#[test]
fn methods_the_providers_use_pass_and_every_other_is_refused() {
    for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] {
        assert_eq!(method(m), Ok(()), "{m}");
        assert_eq!(audited_method(m), m);
    }
    let token = format!("sk-ant-api03-{}", "a".repeat(64));
    for m in [
        "TRACE",
        "TRACK",
        "CONNECT",
        "OPTIONS",
        "PROPFIND",
        "get",
        "Post",
        "",
        token.as_str(),
    ] {
        assert_eq!(method(m), Err(Refusal::Method), "{m}");
        assert_eq!(audited_method(m), "(other)", "{m}");
    }
    assert_eq!(Refusal::Method.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[test]
fn path_rules_hold_in_every_encoding() {
    use PathFault::*;
    let cases: &[(&str, Option<PathFault>)] = &[
        ("/anthropic/v1/messages", None),
        ("/openai/v1/chat/completions", None),
        ("/openai/v1...x/.well/a.b/..c/c..", None),
        ("/openai/v1/files/file-abc%2Dx", None),
        ("/openai/v1%2Fmodels", None),
        (
            "/google/v1beta/models/gemini-2.5-pro:streamGenerateContent",
            None,
        ),
        ("/openai/v1/x;a=1", None),
        ("/openai/v1/;x=1/messages", Some(DoubleSlash)),
        ("/openai/;x/evil.example/x", Some(DoubleSlash)),
        // '//' anywhere, plain or encoded at any depth.
        ("//openai/v1", Some(DoubleSlash)),
        ("/openrouter//evil.example/x", Some(DoubleSlash)),
        ("/openai/v1//messages", Some(DoubleSlash)),
        ("/openai/v1/", None),
        ("/openai/%2F%2Fevil.example/x", Some(DoubleSlash)),
        ("/openai/%2f/evil", Some(DoubleSlash)),
        ("/openai/v1%2F/x", Some(DoubleSlash)),
        ("/openai/%252F%252Fevil/x", Some(DoubleSlash)),
        // '\' in any form.
        ("/openai/v1\\x", Some(Backslash)),
        ("/openai/v1%5Cx", Some(Backslash)),
        ("/openai/v1%5cx", Some(Backslash)),
        ("/openai/v1%255Cx", Some(Backslash)),
        // '.' and '..' segments: plain, encoded, mixed, nested, with ';' parameters.
        ("/openai/..", Some(DotSegment)),
        ("/openai/../x", Some(DotSegment)),
        ("/openai/./x", Some(DotSegment)),
        ("/openai/v1/.", Some(DotSegment)),
        ("/openai/%2e%2e/x", Some(DotSegment)),
        ("/openai/%2E%2E/x", Some(DotSegment)),
        ("/openai/.%2e/x", Some(DotSegment)),
        ("/openai/%2E./x", Some(DotSegment)),
        ("/openai/%2e/x", Some(DotSegment)),
        ("/openai/%252e%252e/x", Some(DotSegment)),
        ("/openai/%25252e%25252e/x", Some(DotSegment)),
        ("/openai/..;/x", Some(DotSegment)),
        ("/openai/..;x=1/admin", Some(DotSegment)),
        ("/openai/.;/x", Some(DotSegment)),
        ("/openai/%2e%2e%3b/x", Some(DotSegment)),
        ("/openai/%2e%2e;x/y", Some(DotSegment)),
        ("/openai/v1%2F..%2Fadmin", Some(DotSegment)),
        ("/openai/v1%2f%2e%2e%2fadmin", Some(DotSegment)),
        ("/openai/v1/..", Some(DotSegment)),
        // Control, space and non-ASCII bytes, once decoded (overlong and full-width dots too).
        ("/openai/v1%00/x", Some(Character)),
        ("/openai/v1%0d%0aX-Injected:%201", Some(Character)),
        ("/openai/v1%09x", Some(Character)),
        ("/openai/v1%20x", Some(Character)),
        ("/openai/%c0%ae%c0%ae/x", Some(Character)),
        ("/openai/%ef%bc%8e%ef%bc%8e/x", Some(Character)),
        ("/openai/v1%7fx", Some(Character)),
        // Nested deeper than three.
        ("/openai/%2525252e", Some(NestedEncoding)),
    ];
    for (p, want) in cases {
        assert_eq!(path(p).err(), *want, "{p}");
    }
}

#[test]
fn only_origin_form_targets_pass() {
    for t in ["http://example.com/openai/v1", "https://evil/x", "*"] {
        let uri: Uri = t.parse().unwrap();
        assert_eq!(target(&uri), Err(Refusal::NotOriginForm), "{t}");
    }
    let authority: Uri = "example.com:443".parse().unwrap();
    assert_eq!(target(&authority), Err(Refusal::NotOriginForm));
    let fine: Uri = "/openai/v1/models?x=a%2Fb//..".parse().unwrap();
    assert_eq!(target(&fine), Ok(()), "the query is not a path");
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in pairs {
        h.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn framing_headers_as_hyper_parsed_them() {
    let cases: &[(Pairs, Option<FramingFault>)] = &[
        (&[("content-length", "2")], None),
        (&[("transfer-encoding", "chunked")], None),
        (&[], None),
        (
            &[("content-length", "2"), ("transfer-encoding", "chunked")],
            Some(FramingFault::LengthAndChunked),
        ),
        (
            &[("content-length", "2"), ("content-length", "2")],
            Some(FramingFault::LengthRepeated),
        ),
    ];
    for (h, want) in cases {
        assert_eq!(
            framing_headers(&headers(h)).err(),
            want.map(Refusal::Framing),
            "{h:?}"
        );
    }
}

#[test]
fn one_auth_header_at_most() {
    let cases: &[(Pairs, Result<Option<&str>, Refusal>)] = &[
        (&[], Ok(None)),
        (&[("x-api-key", "t")], Ok(Some("x-api-key"))),
        (&[("authorization", "Bearer t")], Ok(Some("authorization"))),
        (
            &[("x-api-key", "t"), ("x-api-key", "t")],
            Err(Refusal::AuthRepeated),
        ),
        (
            &[("x-api-key", "t"), ("authorization", "Bearer t")],
            Err(Refusal::AuthRepeated),
        ),
        (
            &[("x-goog-api-key", "t"), ("api-key", "t")],
            Err(Refusal::AuthRepeated),
        ),
    ];
    for (h, want) in cases {
        assert_eq!(auth_header(&headers(h)), *want, "{h:?}");
    }
}

fn token(prefix: &str, fill: char) -> String {
    format!("{prefix}{}", fill.to_string().repeat(TOKEN_TAIL))
}

fn index_of(tokens: &[&str]) -> TokenIndex {
    let mut index = TokenIndex::default();
    for t in tokens {
        index.insert(TokenIndex::key(t).unwrap());
    }
    index
}

#[test]
fn a_token_is_found_in_any_case_and_encoding_with_or_without_its_prefix() {
    let live = format!("sk-ant-api03-{}", "0123456789abcdef".repeat(4));
    let other = token("sk-", 'e');
    let index = index_of(&[&live, &other]);
    let tail = &live[live.len() - TOKEN_TAIL..];
    let every_char: String = live.bytes().map(|b| format!("%{b:02X}")).collect();
    let double: String = live.bytes().map(|b| format!("%25{b:02x}")).collect();
    let found = [
        live.clone(),
        other.clone(),
        live.to_ascii_uppercase(),
        tail.to_string(),
        format!("x-{live}"),
        format!("Bearer {live}"),
        format!("a=1&key={live}&b=2"),
        every_char,
        double,
        live.replace('a', "%61"),
    ];
    for hay in &found {
        assert!(index.appears_in(hay.as_bytes()), "{hay}");
    }
    let missed = [
        String::new(),
        token("sk-", 'f'),
        live[..live.len() - 1].to_string(),
        format!("{}-{}", &live[..40], &live[40..]),
        "/anthropic/v1/messages".to_string(),
    ];
    for hay in &missed {
        assert!(!index.appears_in(hay.as_bytes()), "{hay}");
    }
    assert!(!TokenIndex::default().appears_in(live.as_bytes()));
}

#[test]
fn a_token_anywhere_but_the_one_auth_header_is_refused() {
    let live = token("sk-ant-api03-", 'a');
    let index = index_of(&[&live]);
    let name = format!("x-{live}");
    type Case<'a> = (String, String, Vec<(String, String)>, Option<&'a str>, bool);
    let cases: Vec<Case> = vec![
        (
            "POST".into(),
            "/anthropic/v1/messages".into(),
            vec![("x-api-key".into(), live.clone())],
            Some("x-api-key"),
            true,
        ),
        (
            live.clone(),
            "/anthropic/v1/messages".into(),
            vec![],
            None,
            false,
        ),
        (
            "POST".into(),
            format!("/anthropic/v1/{live}"),
            vec![],
            None,
            false,
        ),
        (
            "POST".into(),
            format!("/anthropic/v1/messages?k={live}"),
            vec![],
            None,
            false,
        ),
        (
            "POST".into(),
            "/anthropic/v1".into(),
            vec![(name.clone(), "1".into())],
            None,
            false,
        ),
        (
            "POST".into(),
            "/anthropic/v1".into(),
            vec![("x-api-key".into(), live.clone()), (name, "1".into())],
            Some("x-api-key"),
            false,
        ),
        (
            "POST".into(),
            "/anthropic/v1".into(),
            vec![
                ("x-api-key".into(), live.clone()),
                ("cookie".into(), format!("t={live}")),
            ],
            Some("x-api-key"),
            false,
        ),
        (
            "POST".into(),
            "/anthropic/v1".into(),
            vec![("x-other".into(), live.to_ascii_uppercase())],
            None,
            false,
        ),
    ];
    for (m, t, h, auth, ok) in &cases {
        let pairs: Vec<(&str, &str)> = h.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let got = token_placement(&index, m, t, &headers(&pairs), *auth);
        assert_eq!(got.is_ok(), *ok, "{m} {t} {h:?}");
        if !ok {
            assert_eq!(got, Err(Refusal::TokenElsewhere));
        }
    }
}

#[test]
fn credentials_come_in_one_of_the_providers_schemes() {
    let anthropic = super::super::routes::find("anthropic").unwrap();
    let t = token("sk-ant-api03-", 'b');
    let ok = credentials(anthropic, &headers(&[("x-api-key", &t)]), Some("x-api-key")).unwrap();
    assert_eq!(ok.1.expose(), t);
    assert_eq!(
        credentials(anthropic, &headers(&[]), None).err(),
        Some(Refusal::NoCredentials("anthropic"))
    );
    assert_eq!(
        credentials(
            anthropic,
            &headers(&[("x-goog-api-key", &t)]),
            Some("x-goog-api-key")
        )
        .err(),
        Some(Refusal::WrongAuthHeader("anthropic", "x-goog-api-key"))
    );
    let openai = super::super::routes::find("openai").unwrap();
    assert_eq!(
        credentials(
            openai,
            &headers(&[("authorization", "Basic x y")]),
            Some("authorization")
        )
        .err(),
        Some(Refusal::MalformedCredentials)
    );
}

#[test]
fn refusals_before_the_token_check_audit_only_the_provider_segment() {
    let p = "/anthropic/v1/sk-ant-secret/x";
    assert_eq!(audited_path(p, Some("anthropic"), false), "/anthropic/…");
    assert_eq!(audited_path(p, None, false), "/…");
    assert_eq!(audited_path(p, Some("anthropic"), true), p);
}

#[test]
fn every_refusal_has_a_status_and_a_message_without_request_data() {
    let all = [
        Refusal::Method,
        Refusal::NotOriginForm,
        Refusal::Path(PathFault::DotSegment),
        Refusal::Framing(FramingFault::BareLf),
        Refusal::Framing(FramingFault::HeadTooLarge),
        Refusal::UnknownProvider,
        Refusal::AuthRepeated,
        Refusal::TokenElsewhere,
        Refusal::NoCredentials("openai"),
        Refusal::WrongAuthHeader("openai", "x-api-key"),
        Refusal::MalformedCredentials,
        Refusal::NotLive("openai"),
        Refusal::TooManyConnections,
    ];
    for r in all {
        assert!(
            r.status().is_client_error() || r.status().is_server_error(),
            "{r:?}"
        );
        assert!(!r.message().is_empty());
    }
    assert_eq!(
        Refusal::Framing(FramingFault::HeadTooLarge)
            .status()
            .as_u16(),
        431
    );
    assert!(Refusal::Framing(FramingFault::BareLf).closes());
    assert!(!Refusal::TokenElsewhere.closes());
}

#[test]
fn percent_decoding_once() {
    assert_eq!(percent_decode(b"a%2Db+c%zz%4"), b"a-b+c%zz%4");
    assert_eq!(percent_decode(b"%+1%2g%"), b"%+1%2g%");
    assert_eq!(percent_decode(b"%252e"), b"%2e");
}

/// Encodes each byte of `s` as `%XX` where the mask says so.
fn encode(s: &[u8], mask: &[bool]) -> String {
    s.iter()
        .zip(mask.iter().cycle())
        .map(|(b, m)| {
            if *m {
                format!("%{b:02x}")
            } else {
                (*b as char).to_string()
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the encoding, a path holding a dot segment or '//' once decoded is refused.
    #[test]
    fn an_encoded_escape_never_passes(
        prefix in "[a-z0-9]{1,8}",
        escape in prop::sample::select(vec!["..", ".", "", "..;x"]),
        suffix in "[a-z0-9]{1,8}",
        mask in prop::collection::vec(any::<bool>(), 1..16),
        depth in 0usize..3,
    ) {
        let raw = format!("/{prefix}/{escape}/{suffix}");
        let mut encoded = encode(raw.as_bytes(), &mask);
        for _ in 0..depth {
            encoded = encoded.replace('%', "%25");
        }
        let p = format!("/openai{encoded}");
        prop_assert!(path(&p).is_err(), "{} passed", p);
    }

    /// A path that passes has no escape in any decoding of it.
    #[test]
    fn a_passing_path_is_clean_at_every_depth(p in "/[a-zA-Z0-9%./;:_-]{0,40}") {
        if path(&p).is_ok() {
            let mut layer = p.clone().into_bytes();
            for _ in 0..=DECODE_DEPTH {
                let s = String::from_utf8_lossy(&layer).to_string();
                prop_assert!(!s.contains("//") && !s.contains('\\'), "{}", s);
                prop_assert!(!s.split('/').any(|seg| {
                    let bare = seg.split(';').next().unwrap_or_default();
                    bare == "." || bare == ".."
                }), "{}", s);
                layer = percent_decode(&layer);
            }
        }
    }
}
