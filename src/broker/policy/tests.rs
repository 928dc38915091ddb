use super::*;

fn env(value: &str) -> HashMap<String, String> {
    HashMap::from([(ALLOW_PATHS_VAR.to_string(), value.to_string())])
}

fn route(id: &str) -> &'static ProviderRoute {
    routes::find(id).expect("a carried provider")
}

fn refused(policy: &ForwardPolicy, id: &str, rest: &str) -> bool {
    policy.check_path(route(id), rest, "").is_err()
}

#[test]
fn model_endpoints_pass_and_others_are_403_with_the_way_to_allow_them() {
    let p = ForwardPolicy::default();
    assert!(!refused(&p, "anthropic", "/v1/messages"));
    let Err(Failure(status, why)) = p.check_path(route("anthropic"), "/v1/files", "") else {
        panic!("/v1/files passed");
    };
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(why.contains("/v1/files"), "{why}");
    assert!(why.contains("anthropic"), "{why}");
    assert!(why.contains("PO_SANDBOX_BROKER_ALLOW_PATHS"), "{why}");
    assert!(why.contains("anthropic:/v1/files"), "{why}");
}

#[test]
fn a_host_base_path_counts_in_front_of_the_path() {
    // OPENAI_BASE_URL=https://host/v1: `/models` reaches the upstream as `/v1/models`.
    let p = ForwardPolicy::default();
    let check = |rest: &str| p.check_path(route("openai"), rest, "/v1").is_ok();
    assert!(check("/models"));
    assert!(check("/chat/completions"));
    for rest in [
        "/files",
        "/batches",
        "/models/../files",
        "/v1/files",
        "/%2e%2e/files",
    ] {
        assert!(!check(rest), "{rest} passed below /v1");
    }
    assert!(
        refused(&p, "openai", "/models"),
        "no prefix: /models is not an endpoint"
    );
}

#[test]
fn every_decoding_must_match() {
    let p = ForwardPolicy::default();
    for rest in [
        "/v1/%6d%65%73%73%61%67%65%73/../files",
        "/v1/messages%2F..%2Ffiles",
        "/v1/messages%2fbatches",
        "/v1/%2e%2e/files",
        "/v1/models/a%2Fb",
        "/v1/models/a%252Fb",
        "/v1/models/a%25252Fb",
        "/v1/models/a%2525252Fb",
        "/v1/messages%3Fx",
        "/v1/messages%23x",
        "/v1/messages%00",
        "/v1/messages%2F",
        "/v1/Messages",
        "/V1/messages",
        "/v1/messages/%2e%2e/files",
    ] {
        assert!(refused(&p, "anthropic", rest), "{rest} passed");
    }
    // Encoded letters of an allowed path decode to it in every layer but the first.
    assert!(refused(&p, "anthropic", "/v1/%6dessages"));
    // A model id with an encoded character that stays one segment passes.
    assert!(!refused(&p, "openai", "/v1/models/ft%3Dx"));
}

#[test]
fn the_variable_adds_paths_per_provider() {
    let p = ForwardPolicy::from_env(
        &env(" openai:/v1/files , ,anthropic:/v1/messages/batches/**"),
        false,
    )
    .expect("valid");
    assert!(!refused(&p, "openai", "/v1/files"));
    assert!(refused(&p, "anthropic", "/v1/files"));
    assert!(!refused(&p, "anthropic", "/v1/messages/batches/b1/results"));
    assert!(refused(&p, "openai", "/v1/messages/batches/b1"));
    assert_eq!(
        ForwardPolicy::from_env(&HashMap::new(), false).expect("unset"),
        ForwardPolicy::default()
    );
}

#[test]
fn a_bad_entry_is_options_invalid_naming_it() {
    for (value, why) in [
        ("openai", "no ':'"),
        ("nope:/v1/files", "not a provider"),
        ("Openai:/v1/files", "not a provider"),
        ("openai:v1/files", "start with '/'"),
        ("openai:/v1/../files", "'..'"),
        ("openai:/v1/files?x", "'?'"),
    ] {
        match ForwardPolicy::from_env(&env(value), false) {
            Err(Error::OptionsInvalid { option, reason }) => {
                assert_eq!(option, ALLOW_PATHS_VAR);
                assert!(
                    reason.contains(why) && reason.contains(value),
                    "{value}: {reason}"
                );
            }
            other => panic!("{value}: {other:?}"),
        }
    }
}

#[test]
fn the_screen_is_on_in_the_closed_modes_except_for_providers_allowed_to_fetch() {
    let fetch = |value: &str| {
        HashMap::from([(
            crate::names::vars::ALLOW_FETCH_VAR.to_string(),
            value.to_string(),
        )])
    };
    let open = ForwardPolicy::from_env(&HashMap::new(), false).unwrap();
    assert!(!open.screens(route("anthropic")));
    let closed = ForwardPolicy::from_env(&HashMap::new(), true).unwrap();
    assert!(closed.screens(route("anthropic")) && closed.screens(route("openai")));
    let some = ForwardPolicy::from_env(&fetch(" openai ,"), true).unwrap();
    assert!(!some.screens(route("openai")));
    assert!(some.screens(route("anthropic")));
    match ForwardPolicy::from_env(&fetch("openai,nope"), true) {
        Err(Error::OptionsInvalid { option, reason }) => {
            assert_eq!(option, crate::names::vars::ALLOW_FETCH_VAR);
            assert!(reason.contains("nope"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let Failure(status, why) = ForwardPolicy::fetch_refused(
        route("anthropic"),
        None,
        &Finding::Key {
            key: "mcp_servers".into(),
            within: "the request",
        },
    );
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        why.contains("mcp_servers")
            && why.contains("anthropic")
            && why.contains("PO_SANDBOX_BROKER_ALLOW_FETCH"),
        "{why}"
    );
}

#[test]
fn the_body_shape_follows_the_endpoint_in_every_decoding() {
    let name = |id: &str, rest: &str, prefix: &str| {
        ForwardPolicy::grammar(route(id), rest, prefix).map(|g| g.name)
    };
    assert_eq!(
        name("anthropic", "/v1/messages", ""),
        Some("Anthropic Messages")
    );
    assert_eq!(
        name("anthropic", "/v1/messages/count_tokens", ""),
        Some("Anthropic Messages")
    );
    // An encoded model in a Gemini path reaches the same endpoint in each decoding.
    assert_eq!(
        name(
            "google",
            "/v1beta/models/gemini%2D2.5:streamGenerateContent",
            ""
        ),
        Some("the Gemini API")
    );
    assert_eq!(
        name("openai", "/v1/chat/completions", ""),
        Some("OpenAI chat completions")
    );
    assert_eq!(
        name("openai", "/v1/responses", ""),
        Some("OpenAI Responses")
    );
    // A host base URL ending in /v1: the path below it reaches the same endpoint.
    assert_eq!(
        name("openai", "/responses", "/v1"),
        Some("OpenAI Responses")
    );
    // No body shape: the model list, a path only the host added, a path deeper than decoded.
    assert_eq!(name("openai", "/v1/models", ""), None);
    assert_eq!(name("openai", "/v1/files", ""), None);
    assert_eq!(name("openai", "/v1/%2525252572esponses", ""), None);
}
