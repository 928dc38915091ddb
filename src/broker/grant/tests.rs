use std::collections::HashMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn given_requests_parse_transport_and_user() {
    let r = GrantRequest::given("w".into(), None, Some("tcp"), Some("1000:100")).unwrap();
    assert_eq!((r.route, r.owner), (RouteKind::Tcp, Some((1000, 100))));
    let r = GrantRequest::given("w".into(), None, None, None).unwrap();
    assert_eq!((r.route, r.owner), (RouteKind::Socket, None));
    for (transport, user, option) in [(Some("udp"), None, "transport"), (None, Some("x"), "user")] {
        let err = GrantRequest::given("w".into(), None, transport, user).unwrap_err();
        assert_eq!(err.code(), "OPTIONS_INVALID");
        assert!(err.to_string().contains(option), "{err}");
    }
}

#[test]
fn a_grant_exposes_its_tokens_for_the_container() {
    let grant = Grant {
        id: "g".into(),
        workspace: "w".into(),
        providers: vec!["openai".into()],
        env: [("OPENAI_API_KEY".to_string(), Secret::new("po-token"))].into(),
        route: None,
        withheld: Vec::new(),
    };
    assert_eq!(grant.exposed_env(), env(&[("OPENAI_API_KEY", "po-token")]));
}

#[test]
fn a_grant_reads_in_js_with_its_tokens_route_and_withheld_credentials() {
    let route = GrantRoute::Tcp {
        address: "127.0.0.1:4000".parse().unwrap(),
        container_address: "host.docker.internal:4000".into(),
    };
    let grant = Grant {
        id: "g".into(),
        workspace: "w".into(),
        providers: vec!["openai".into()],
        env: [("OPENAI_API_KEY".to_string(), Secret::new("po-token"))].into(),
        route: Some(route),
        withheld: vec![("AWS_SECRET_ACCESS_KEY".into(), "not carried".into())],
    };
    let view = BrokerGrant::from(grant);
    assert_eq!(view.env, env(&[("OPENAI_API_KEY", "po-token")]));
    let r = view.route.unwrap();
    assert_eq!(
        (r.kind, r.address.as_deref()),
        (RouteKind::Tcp, Some("127.0.0.1:4000"))
    );
    assert_eq!(
        r.container_address.as_deref(),
        Some("host.docker.internal:4000")
    );
    assert_eq!(
        (r.host_socket, r.host_dir, r.container_socket),
        (None, None, None)
    );
    let w = &view.withheld[0];
    assert_eq!(
        (w.variable.as_str(), w.reason.as_str()),
        ("AWS_SECRET_ACCESS_KEY", "not carried")
    );
    assert_eq!(
        (view.id, view.workspace, view.providers),
        ("g".into(), "w".into(), vec!["openai".to_string()])
    );
}

#[test]
fn routes_read_as_their_strings() {
    let socket = GrantRoute::Socket {
        host_socket: "/run/b/g/broker.sock".into(),
        host_dir: "/run/b/g".into(),
        container_socket: "/run/po-broker/broker.sock".into(),
    };
    assert_eq!(socket.kind(), RouteKind::Socket);
    assert_eq!(
        socket.host_socket().as_deref(),
        Some("/run/b/g/broker.sock")
    );
    assert_eq!(socket.host_dir().as_deref(), Some("/run/b/g"));
    assert_eq!(
        socket.container_socket().as_deref(),
        Some("/run/po-broker/broker.sock")
    );
    assert_eq!((socket.address(), socket.container_address()), (None, None));
    let tcp = GrantRoute::Tcp {
        address: "127.0.0.1:4000".parse().unwrap(),
        container_address: "host.docker.internal:4000".into(),
    };
    assert_eq!(tcp.kind(), RouteKind::Tcp);
    assert_eq!(tcp.address().as_deref(), Some("127.0.0.1:4000"));
    assert_eq!(
        tcp.container_address().as_deref(),
        Some("host.docker.internal:4000")
    );
    assert_eq!(
        (tcp.host_socket(), tcp.host_dir(), tcp.container_socket()),
        (None, None, None)
    );
}

#[test]
fn choose_takes_the_asked_providers_or_every_one_with_a_key() {
    let host = env(&[
        ("OPENAI_API_KEY", "sk-real"),
        ("ANTHROPIC_API_KEY", "sk-ant-api03-x"),
    ]);
    let (all, _) = choose(None, &host).unwrap();
    let ids: Vec<&str> = all.iter().map(|c| c.route.id).collect();
    assert!(ids.contains(&"openai") && ids.contains(&"anthropic"));
    let asked = vec![
        "openai".to_string(),
        "openai".to_string(),
        "groq".to_string(),
    ];
    let (some, withheld) = choose(Some(&asked), &host).unwrap();
    assert_eq!(
        some.iter().map(|c| c.route.id).collect::<Vec<_>>(),
        ["openai"]
    );
    assert!(
        withheld
            .iter()
            .any(|(v, r)| v == "GROQ_API_KEY" && r.contains("no groq key"))
    );
    let bad = vec!["nope".to_string()];
    let err = choose(Some(&bad), &host).err().unwrap();
    assert!(err.to_string().contains("providers"), "{err}");
    let broken = env(&[
        ("OPENAI_API_KEY", "sk-real"),
        ("OPENAI_BASE_URL", "http://10.0.0.1"),
    ]);
    assert!(
        choose(None, &broken).is_err(),
        "a non-loopback http base URL is refused"
    );
}

#[test]
fn withheld_when_off_names_every_key() {
    let host = env(&[("OPENAI_API_KEY", "sk-real")]);
    let w = withheld_when_off(&host);
    assert!(
        w.iter()
            .any(|(v, r)| v == "OPENAI_API_KEY" && r.contains("PO_SANDBOX_BROKER=0"))
    );
}

#[test]
fn providers_sharing_a_key_variable_share_one_token_good_for_each() {
    let shared: Vec<&'static ProviderRoute> = routes::providers()
        .iter()
        .filter(|r| r.key_vars.contains(&"MOONSHOT_API_KEY"))
        .collect();
    assert!(shared.len() >= 2, "two routes share MOONSHOT_API_KEY");
    let chosen: Vec<Chosen> = shared
        .iter()
        .map(|r| Chosen {
            route: r,
            var: "MOONSHOT_API_KEY",
            key: Secret::new("sk-moon"),
        })
        .collect();
    let (env, entries) = mint("g1", &chosen, None).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].providers.len(), shared.len());
    assert_eq!(env["MOONSHOT_API_KEY"], entries[0].token);
    assert!(env["PO_BROKER_PROVIDERS"].expose().contains(shared[1].id));
}

#[test]
fn every_token_ends_in_a_64_hex_tail_the_index_can_find() {
    let s = Secret::new("secret");
    for route in routes::providers() {
        let minted = routes::mint_token(route, "sk-ant-oat01-x").unwrap();
        let derived = derived_token(route, "sk-real", &s, route.id);
        for t in [minted.as_str(), derived.expose()] {
            assert!(TokenIndex::key(t).is_some(), "{}", route.id);
        }
    }
}

#[test]
fn derived_tokens_are_stable_per_secret_and_provider() {
    let route = routes::find("openai").unwrap();
    let s1 = Secret::new("secret-one");
    let a = derived_token(route, "sk-real", &s1, "openai");
    let b = derived_token(route, "sk-real", &s1, "openai");
    let c = derived_token(route, "sk-real", &Secret::new("secret-two"), "openai");
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.expose().starts_with("sk-") && a.expose().len() >= 3 + 64);
    let anthropic = routes::find("anthropic").unwrap();
    assert!(
        !derived_token(anthropic, "sk-ant-api03-x", &s1, "anthropic")
            .expose()
            .contains("sk-ant-oat")
    );
    assert!(
        derived_token(anthropic, "sk-ant-oat01-x", &s1, "anthropic")
            .expose()
            .starts_with("sk-ant-oat01-")
    );
}

#[test]
fn route_by_os_and_engine_kind() {
    use crate::host::HostOs;
    for os in [HostOs::Linux, HostOs::MacOs, HostOs::Windows, HostOs::Other] {
        assert_eq!(route_for(os, true), RouteKind::Tcp, "{os:?} VM engine");
    }
    assert_eq!(route_for(HostOs::Linux, false), RouteKind::Socket);
    assert_eq!(route_for(HostOs::MacOs, false), RouteKind::Socket);
    assert_eq!(route_for(HostOs::Other, false), RouteKind::Socket);
    // No Unix socket to bind-mount on Windows, even for an engine that is not in a VM.
    assert_eq!(route_for(HostOs::Windows, false), RouteKind::Tcp);
}
