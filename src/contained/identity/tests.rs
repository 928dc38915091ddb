use super::*;
use crate::contained::fixtures::{EGRESS_BRIDGED, env};

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
    assert!(report(&s).contains("`po-sandbox review <folder>` on the host"));
    let none = read_state(&env(&[("PO_SANDBOX", "1"), ("PO_WORKSPACE", "w")]));
    assert!(report(&none).contains("No workspace paths are guarded"));
    let host = read_state(&env(&[("PO_SANDBOX_GUARDED_PATHS", "/x")]));
    assert!(
        !report(&host).contains("Read-only here") && !report(&host).contains("po-sandbox review"),
        "only inside a container"
    );
}

#[test]
fn the_egress_proxy_is_reported_with_its_address_once_bridged() {
    // A grant for the proxy alone names no provider: no problem.
    let s = read_state(&env(&EGRESS_BRIDGED));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(
        s.egress_socket.as_deref(),
        Some("/run/po-broker/egress.sock")
    );
    assert_eq!(s.egress_proxy, None);
    assert!(report(&s).contains(
        "Egress proxy: on (bridged to /run/po-broker/egress.sock), but this session has not set it"
    ));
    let mut with_proxy = EGRESS_BRIDGED.to_vec();
    with_proxy.push(("HTTPS_PROXY", "http://127.0.0.1:4567"));
    let s = read_state(&env(&with_proxy));
    assert_eq!(s.egress_proxy.as_deref(), Some("http://127.0.0.1:4567"));
    let r = report(&s);
    assert!(r.contains("Egress proxy: on, at http://127.0.0.1:4567 (HTTPS_PROXY/HTTP_PROXY; bridged to /run/po-broker/egress.sock)"), "{r}");
    // A relative path is a problem, not a route.
    let s = read_state(&env(&[("PO_BROKER_EGRESS_SOCKET", "run/egress.sock")]));
    assert_eq!(s.egress_socket, None);
    assert!(s.problems[0].contains("not an absolute path"));
    // Without the variable there is no egress line.
    assert!(
        !report(&read_state(&env(&[
            ("PO_SANDBOX", "1"),
            ("PO_WORKSPACE", "a")
        ])))
        .contains("Egress")
    );
}

#[test]
fn the_tcp_routes_egress_proxy_is_used_directly_and_never_shown_with_its_credentials() {
    let url = "http://po:0123abcd@host.docker.internal:40002";
    let s = read_state(&env(&[
        ("PO_SANDBOX", "1"),
        ("PO_WORKSPACE", "acme"),
        ("PO_BROKER_PROVIDERS", ""),
        ("PO_BROKER_ADDRESS", "host.docker.internal:40001"),
        ("PO_BROKER_EGRESS_PROXY", url),
        ("HTTPS_PROXY", url),
    ]));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.egress_proxy_route.as_deref(), Some(url));
    let r = report(&s);
    assert!(r.contains("Egress proxy: on, at http://host.docker.internal:40002 (HTTPS_PROXY/HTTP_PROXY; the host's egress port http://host.docker.internal:40002)"), "{r}");
    assert!(!r.contains("0123abcd"), "{r}");
    let bad = read_state(&env(&[("PO_BROKER_EGRESS_PROXY", "socks5://x")]));
    assert!(bad.problems[0].contains("not an http:// proxy URL"));
}

#[test]
fn the_network_mode_is_reported_inside_a_container_and_a_bad_one_is_a_problem() {
    let inside = |mode: &str| {
        read_state(&env(&[
            ("PO_SANDBOX", "1"),
            ("PO_WORKSPACE", "w"),
            ("PO_SANDBOX_NETWORK", mode),
        ]))
    };
    let open = inside("open");
    assert_eq!(open.network.as_deref(), Some("open"));
    assert!(report(&open).contains("Network: open (the public internet; other workspaces, the host, link-local and private addresses are refused)."));
    assert!(
        report(&inside("none"))
            .contains("Network: none (nothing but loopback and the broker route).")
    );
    assert!(report(&inside("allowlist")).contains("Network: allowlist ("));
    let bad = inside("wide");
    assert_eq!(bad.network, None);
    assert!(
        bad.problems[0].contains("PO_SANDBOX_NETWORK=\"wide\" is not a network mode"),
        "{:?}",
        bad.problems
    );
    let unset = read_state(&env(&[("PO_SANDBOX", "1")]));
    assert!(!report(&unset).contains("Network:"));
}

#[test]
fn forwarded_ports_are_read_from_the_relays_command_lines() {
    let proc = tempfile::tempdir().unwrap();
    let write = |pid: &str, argv: &[&str]| {
        let dir = proc.path().join(pid);
        std::fs::create_dir(&dir).unwrap();
        let mut bytes = argv.join("\0").into_bytes();
        bytes.push(0);
        std::fs::write(dir.join("cmdline"), bytes).unwrap();
    };
    write("1", &["node", "/opt/po/server.js"]);
    write(
        "20",
        &[
            "node",
            "-e",
            "'use strict' …",
            "po-sandbox-forward",
            "5173",
            "40123",
        ],
    );
    write(
        "21",
        &["node", "-e", "x", "po-sandbox-forward", "8000", "40200"],
    );
    write("self", &["node", "-e", "x", "po-sandbox-forward", "1", "2"]);
    let ports = forwarded_ports(proc.path());
    assert_eq!(ports, vec![(5173, 40123), (8000, 40200)]);
    assert_eq!(
        forwards_lines(&ports[..1]),
        "\nPort 5173 is forwarded to the host's 127.0.0.1:40123 (po-sandbox port)."
    );
    assert_eq!(forwards_lines(&[]), "");
    assert!(forwarded_ports(&proc.path().join("missing")).is_empty());
}

#[test]
fn a_session_on_a_copy_says_how_the_person_takes_its_work() {
    let s = read_state(&env(&[
        ("PO_SANDBOX", "1"),
        ("PO_WORKSPACE", "acme"),
        ("PO_SANDBOX_WORKSPACE_MODE", "clone"),
    ]));
    assert!(s.clone);
    let r = report(&s);
    assert!(r.contains("a copy of the host folder"), "{r}");
    assert!(
        r.contains("po-sandbox diff") && r.contains("po-sandbox apply"),
        "{r}"
    );
    assert!(!r.contains("po-sandbox review"), "{r}");
    let md = crate::contained::help::skill(&s, &Default::default(), None).unwrap();
    assert!(md.contains("a copy, not the host's folder") && md.contains("po-sandbox apply"));
    let bind = read_state(&env(&[
        ("PO_SANDBOX", "1"),
        ("PO_SANDBOX_WORKSPACE_MODE", "bind"),
    ]));
    assert!(!bind.clone && !report(&bind).contains("po-sandbox apply"));
}

#[test]
fn the_git_route_is_read_from_the_containers_git_configuration_and_said() {
    let hosts =
        crate::broker::git::parse_hosts(["github.com", "git.test=http://127.0.0.1:9"]).unwrap();
    let config = crate::broker::git::container_env("http://127.0.0.1:47390", &hosts);
    let mut vars: Vec<(&str, &str)> = config
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    vars.extend([
        ("PO_SANDBOX", "1"),
        ("PO_WORKSPACE", "w"),
        ("PO_BROKER_PROVIDERS", ""),
        ("PO_BROKER_SOCKET", "/run/po-broker/broker.sock"),
    ]);
    // Without the placeholder, the configuration alone is no git route.
    assert_eq!(read_state(&env(&vars)).git_hosts, Vec::<String>::new());
    vars.push(("PO_BROKER_GIT_TOKEN", "po-git-0123"));
    let s = read_state(&env(&vars));
    assert_eq!(s.git_hosts, ["github.com", "git.test"]);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let r = report(&s);
    assert!(r.contains("Git over HTTPS to github.com, git.test (HTTPS and SSH-form remotes alike) goes through the host's broker"), "{r}");
    assert!(!r.contains("po-git-0123"), "{r}");
    let skill =
        crate::contained::help::skill(&s, &crate::contained::help::read_facts(&env(&vars)), None)
            .unwrap();
    assert!(
        skill.contains("## Git\n\nGit over HTTPS to github.com, git.test"),
        "{skill}"
    );
    assert!(
        skill.contains("when a push is refused, ask the person"),
        "{skill}"
    );
}
