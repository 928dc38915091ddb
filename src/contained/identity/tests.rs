use super::*;

fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn host_with_nothing_set() {
    let s = read_state(&env(&[]));
    assert_eq!(s, SandboxState::default());
    let r = report(&s);
    assert!(r.contains("directly on the host"), "{r}");
    assert!(!r.contains("Problems"), "{r}");
}

#[test]
fn contained_with_workspace_and_socket_route() {
    let s = read_state(&env(&[
        ("PO_SANDBOX", "1"),
        ("PO_WORKSPACE", "acme"),
        ("PO_BROKER_PROVIDERS", "anthropic, openai,anthropic"),
        ("PO_BROKER_SOCKET", "/run/po-broker/broker.sock"),
    ]));
    assert!(s.contained && s.brokered);
    assert_eq!(s.workspace.as_deref(), Some("acme"));
    assert_eq!(s.brokered_providers, ["anthropic", "openai"]);
    assert_eq!(
        s.route,
        Some(BrokerRoute::new(
            RouteKind::Socket,
            "/run/po-broker/broker.sock"
        ))
    );
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let r = report(&s);
    assert!(
        r.contains("inside a sandbox container") && r.contains("\"acme\""),
        "{r}"
    );
    assert!(
        r.contains("anthropic, openai") && r.contains("/run/po-broker/broker.sock"),
        "{r}"
    );
}

#[test]
fn tcp_route() {
    let s = read_state(&env(&[
        ("PO_BROKER_PROVIDERS", "openai"),
        ("PO_BROKER_ADDRESS", "host.docker.internal:41234"),
    ]));
    assert_eq!(
        s.route,
        Some(BrokerRoute::new(
            RouteKind::Tcp,
            "host.docker.internal:41234"
        ))
    );
    assert!(s.problems.is_empty());
}

#[test]
fn contradictions_and_malformations_are_problems_not_errors() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[
                ("PO_BROKER_SOCKET", "/a.sock"),
                ("PO_BROKER_ADDRESS", "127.0.0.1:1"),
                ("PO_BROKER_PROVIDERS", "openai"),
            ],
            "Both",
        ),
        (
            &[
                ("PO_BROKER_PROVIDERS", " , "),
                ("PO_BROKER_SOCKET", "/a.sock"),
            ],
            "names no provider",
        ),
        (
            &[
                ("PO_BROKER_PROVIDERS", "openai"),
                ("PO_BROKER_SOCKET", "run/broker.sock"),
            ],
            "not an absolute path",
        ),
        (
            &[
                ("PO_BROKER_PROVIDERS", "openai"),
                ("PO_BROKER_SOCKET", "/run/../etc/x"),
            ],
            "contains '..'",
        ),
        (
            &[
                ("PO_BROKER_PROVIDERS", "openai"),
                ("PO_BROKER_ADDRESS", "localhost"),
            ],
            "not HOST:PORT",
        ),
        (
            &[
                ("PO_BROKER_PROVIDERS", "Open AI!"),
                ("PO_BROKER_SOCKET", "/a.sock"),
            ],
            "not a provider id",
        ),
        (&[("PO_BROKER_PROVIDERS", "openai")], "no broker route"),
        (&[("PO_BROKER_SOCKET", "/a.sock")], "is not, so no provider"),
        (&[("PO_SANDBOX", "yes")], "not understood"),
        (&[("PO_SANDBOX", "1")], "PO_WORKSPACE is not set"),
        // A usable route and provider list, but another variable is wrong: not brokered.
        (
            &[
                ("PO_SANDBOX", "yes"),
                ("PO_BROKER_PROVIDERS", "openai"),
                ("PO_BROKER_SOCKET", "/a.sock"),
            ],
            "not understood",
        ),
        (
            &[
                ("PO_SANDBOX", "1"),
                ("PO_BROKER_PROVIDERS", "openai,Open AI!"),
                ("PO_BROKER_SOCKET", "/a.sock"),
            ],
            "not a provider id",
        ),
    ];
    for (vars, needle) in cases {
        let s = read_state(&env(vars));
        assert!(!s.brokered, "{vars:?}");
        assert!(
            s.problems.iter().any(|p| p.contains(needle)),
            "{vars:?}: {:?}",
            s.problems
        );
        let r = report(&s);
        assert!(r.contains("Problems:") && r.contains(needle), "{r}");
    }
}

#[test]
fn sandbox_zero_or_empty_means_host() {
    for v in ["0", "", " "] {
        let s = read_state(&env(&[("PO_SANDBOX", v)]));
        assert!(!s.contained && s.problems.is_empty(), "{v:?}");
    }
}

#[test]
fn guarded_paths_are_listed_in_the_report_inside_a_container() {
    let s = read_state(&env(&[
        ("PO_SANDBOX", "1"),
        ("PO_WORKSPACE", "w"),
        ("PO_SANDBOX_GUARDED_PATHS", "/ws/.git/hooks, /ws/.envrc,"),
    ]));
    assert_eq!(s.guarded_paths, ["/ws/.git/hooks", "/ws/.envrc"]);
    assert!(
        report(&s).contains(
            "Read-only here, because the host runs them later: /ws/.git/hooks, /ws/.envrc."
        )
    );
    let none = read_state(&env(&[("PO_SANDBOX", "1"), ("PO_WORKSPACE", "w")]));
    assert!(report(&none).contains("No workspace paths are guarded"));
    let host = read_state(&env(&[("PO_SANDBOX_GUARDED_PATHS", "/x")]));
    assert!(
        !report(&host).contains("Read-only here"),
        "only inside a container"
    );
}
