use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn input(mode: NetworkMode) -> RulesInput {
    RulesInput {
        mode,
        gateway: Some(ip("172.30.0.1")),
        broadcast: Some(ip("172.30.255.255")),
        network_v6: vec![],
        dns: vec![ip("10.255.255.53"), ip("127.0.0.53")],
        host_addresses: vec![ip("192.0.2.2"), ip("127.0.0.1"), ip("fd00::2"), ip("::1")],
        broker_port: None,
        egress_port: None,
        server_port: 7300,
    }
}

/// The rules of one chain, in order.
fn chain_rules(text: &str, chain: &str) -> Vec<String> {
    let add = format!("add rule inet {TABLE} {chain} ");
    text.lines()
        .filter_map(|l| l.strip_prefix(add.as_str()))
        .map(str::to_string)
        .collect()
}

/// The rules of the output chain, in order.
fn output_rules(text: &str) -> Vec<String> {
    chain_rules(text, "output")
}

#[test]
fn modes_parse_by_name_and_nothing_else() {
    for (s, m) in [
        ("open", NetworkMode::Open),
        (" none ", NetworkMode::None),
        ("allowlist", NetworkMode::Allowlist),
    ] {
        assert_eq!(NetworkMode::parse(s), Some(m));
        assert_eq!(NetworkMode::parse(m.as_str()), Some(m));
    }
    for bad in ["", "Open", "closed", "off", "allow-list", "none,open"] {
        assert_eq!(NetworkMode::parse(bad), None, "{bad:?}");
    }
    assert_eq!(NetworkMode::default(), NetworkMode::Open);
}

#[test]
fn the_option_wins_over_the_variable_and_bad_values_name_their_source() {
    let r = NetworkMode::resolve;
    assert_eq!(r(None, None).unwrap(), NetworkMode::Open);
    assert_eq!(r(None, Some("  ")).unwrap(), NetworkMode::Open);
    assert_eq!(r(None, Some("none")).unwrap(), NetworkMode::None);
    assert_eq!(
        r(Some("allowlist"), Some("none")).unwrap(),
        NetworkMode::Allowlist
    );
    let e = r(Some("closed"), None).unwrap_err();
    assert_eq!(e.code(), "OPTIONS_INVALID");
    let text = e.to_string();
    assert!(
        text.contains("network") && text.contains("closed") && text.contains("'allowlist'"),
        "{text}"
    );
    let e = r(None, Some("shut")).unwrap_err();
    assert!(e.to_string().contains(NETWORK_VAR), "{e}");
}

#[test]
fn every_mode_accepts_loopback_and_replies_first_and_refuses_the_private_ranges_the_gateway_and_the_host()
 {
    for mode in [NetworkMode::Open, NetworkMode::None, NetworkMode::Allowlist] {
        let rules = output_rules(&ruleset(&input(mode)));
        // Outside open the embedded resolver's refusal comes between the marker and loopback.
        let lo = if mode.internet() { 1 } else { 2 };
        assert_eq!(rules[lo], "oif \"lo\" accept");
        assert_eq!(rules[lo + 1], "ct state established,related accept");
        let v4 = rules
            .iter()
            .find(|r| r.starts_with("ip daddr {") && r.ends_with("jump refuse"))
            .unwrap();
        for range in REFUSED_V4
            .iter()
            .copied()
            .chain(["172.30.0.1", "192.0.2.2"])
        {
            assert!(v4.contains(range), "{mode:?}: {range} not in {v4}");
        }
        assert!(!v4.contains("127.0.0.1"), "loopback is never refused: {v4}");
        let v6 = rules.iter().find(|r| r.starts_with("ip6 daddr {")).unwrap();
        for range in ["fc00::/7", "fe80::/10", "fd00::2"] {
            assert!(v6.contains(range), "{mode:?}: {range} not in {v6}");
        }
        assert!(!v6.contains("::1,") && !v6.contains(" ::1 "), "{v6}");
    }
}

#[test]
fn a_networks_own_ipv6_ranges_are_refused_in_every_mode() {
    for mode in [NetworkMode::Open, NetworkMode::None, NetworkMode::Allowlist] {
        let mut i = input(mode);
        i.network_v6 = vec!["2001:db8:5::/64".into(), "2001:db8:5::1/128".into()];
        let rules = output_rules(&ruleset(&i));
        let v6 = rules.iter().find(|r| r.starts_with("ip6 daddr {")).unwrap();
        assert!(
            v6.contains("2001:db8:5::/64") && v6.contains("2001:db8:5::1/128"),
            "{v6}"
        );
        assert!(v6.ends_with("jump refuse"));
    }
}

#[test]
fn every_mode_refuses_multicast_and_broadcast_before_anything_is_let_out() {
    for mode in [NetworkMode::Open, NetworkMode::None, NetworkMode::Allowlist] {
        let rules = output_rules(&ruleset(&input(mode)));
        let refusal = |ip: &str| {
            rules
                .iter()
                .position(|r| {
                    r.starts_with(&format!("{ip} daddr {{")) && r.ends_with("jump refuse")
                })
                .unwrap()
        };
        let (v4, v6) = (refusal("ip"), refusal("ip6"));
        // mDNS, SSDP and every other group; the limited and the network's own broadcast.
        for addr in ["224.0.0.0/4", "255.255.255.255", "172.30.255.255"] {
            assert!(
                rules[v4].contains(addr),
                "{mode:?}: {addr} not in {}",
                rules[v4]
            );
        }
        assert!(rules[v6].contains("ff00::/8"), "{mode:?}: {}", rules[v6]);
        // Nothing accepts before them but loopback, replies, the broker and the kernel's own
        // neighbour solicitation (never a process's).
        for r in &rules[..v4.min(v6)] {
            assert!(
                !r.ends_with("accept")
                    || r.contains("oif \"lo\"")
                    || r.starts_with("ct state")
                    || r.contains("dport 53")
                    || r == NEIGHBOUR_SOLICITATION,
                "{mode:?}: {r}"
            );
        }
        assert!(NEIGHBOUR_SOLICITATION.contains("ff02::1:ff00:0/104"));
    }
}

#[test]
fn open_mode_allows_the_rest_and_dns_to_the_engines_resolvers_only() {
    let rules = output_rules(&ruleset(&input(NetworkMode::Open)));
    assert!(
        rules.contains(&"ip daddr { 10.255.255.53 } udp dport 53 accept".to_string()),
        "{rules:?}"
    );
    assert!(rules.contains(&"ip daddr { 10.255.255.53 } tcp dport 53 accept".to_string()));
    // DNS comes before the refusal of its (private) address.
    let dns = rules.iter().position(|r| r.contains("dport 53")).unwrap();
    let refuse = rules
        .iter()
        .position(|r| r.ends_with("jump refuse"))
        .unwrap();
    assert!(dns < refuse);
    assert_ne!(rules.last().unwrap(), "jump refuse");
}

#[test]
fn none_and_allowlist_refuse_everything_else_and_have_no_dns() {
    for mode in [NetworkMode::None, NetworkMode::Allowlist] {
        let text = ruleset(&input(mode));
        let rules = output_rules(&text);
        assert_eq!(rules.last().unwrap(), "jump refuse", "{mode:?}");
        assert!(!text.contains("dport 53"), "{mode:?}: {text}");
    }
    // At packet level allowlist is none: the proxy arrives over the broker route.
    assert_eq!(
        ruleset(&input(NetworkMode::None)),
        ruleset(&input(NetworkMode::Allowlist))
    );
}

#[test]
fn a_tcp_broker_route_allows_that_port_on_the_resolved_address_before_any_refusal() {
    let mut i = input(NetworkMode::None);
    i.broker_port = Some(41234);
    let rules = output_rules(&ruleset(&i));
    assert_eq!(rules[4], "ip daddr $broker tcp dport 41234 accept");
    // Other hubs' ports: the set their helpers add to, right after.
    assert_eq!(rules[5], "ip daddr $broker tcp dport @broker_ports accept");
    assert!(ruleset(&i).contains("  set broker_ports {\n    type inet_service;\n  }\n"));
    let socket_route = ruleset(&input(NetworkMode::None));
    assert!(!socket_route.contains("$broker") && !socket_route.contains("broker_ports"));
    // The allowlist mode's egress proxy port on the same address, next.
    let mut i = input(NetworkMode::Allowlist);
    i.broker_port = Some(41234);
    i.egress_port = Some(41235);
    let rules = output_rules(&ruleset(&i));
    assert_eq!(rules[4], "ip daddr $broker tcp dport 41234 accept");
    assert_eq!(rules[5], "ip daddr $broker tcp dport 41235 accept");
    assert_eq!(rules[6], "ip daddr $broker tcp dport @broker_ports accept");
}

#[test]
fn outbound_refusals_reset_tcp_and_answer_the_rest_admin_prohibited_never_drop() {
    let text = ruleset(&input(NetworkMode::None));
    assert!(text.contains("meta l4proto tcp reject with tcp reset"));
    assert!(text.contains("reject with icmpx type admin-prohibited"));
    for r in output_rules(&text)
        .iter()
        .chain(&chain_rules(&text, "refuse"))
    {
        assert!(!r.contains("drop"), "{r}");
    }
}

#[test]
fn a_load_declares_the_table_then_flushes_and_fills_its_chains_and_never_deletes_it() {
    let mut i = input(NetworkMode::Open);
    i.broker_port = Some(41234);
    let text = ruleset(&i);
    // Declared (made when missing, kept when there: the port set keeps its elements and the
    // counter its count), then the chains flushed and filled in the same transaction.
    assert!(
        text.starts_with("table inet po_sandbox {\n  set broker_ports {"),
        "{text}"
    );
    assert!(
        text.contains("  counter inbound_dropped {\n  }\n"),
        "{text}"
    );
    assert!(
        text.contains("  chain input {\n    type filter hook input priority 0; policy drop;\n  }"),
        "{text}"
    );
    assert!(!text.contains("delete"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let at = |line: &str| lines.iter().position(|l| *l == line).unwrap();
    let flushes =
        ["refuse", "output", "input"].map(|c| at(&format!("flush chain inet po_sandbox {c}")));
    let first_add = lines
        .iter()
        .position(|l| l.starts_with("add rule "))
        .unwrap();
    let last_decl = at("}");
    assert!(last_decl < flushes[0] && flushes[0] < flushes[1] && flushes[1] < flushes[2]);
    assert!(flushes[2] < first_add);
    // Every rule after the declaration is an `add rule` of one of the three chains.
    for l in &lines[flushes[2] + 1..] {
        assert!(
            ["refuse", "output", "input"]
                .iter()
                .any(|c| l.starts_with(&format!("add rule inet po_sandbox {c} "))),
            "{l}"
        );
    }
    // The marker counter goes into the declaration.
    let (marked_text, hash) = marked(&text);
    let counter = marked_text
        .find(&format!("counter po_rules_{hash}"))
        .unwrap();
    assert!(counter < marked_text.find("flush chain").unwrap());
}

const IN_DROP: &str = "counter name inbound_dropped drop";
const IN_ND: &str =
    "ip6 hoplimit 255 icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept";

#[test]
fn every_mode_lets_in_loopback_replies_and_the_server_port_from_the_gateway_only_and_counts_the_rest()
 {
    let lo = "iif \"lo\" accept";
    let ct = "ct state established,related accept";
    // (gateway, server port, the input chain's rules)
    let cases: [(Option<&str>, u16, Vec<&str>); 5] = [
        (
            Some("172.30.0.1"),
            7300,
            vec![
                lo,
                ct,
                "ip saddr 172.30.0.1 tcp dport 7300 accept",
                IN_ND,
                IN_DROP,
            ],
        ),
        (
            Some("10.89.0.1"),
            4242,
            vec![
                lo,
                ct,
                "ip saddr 10.89.0.1 tcp dport 4242 accept",
                IN_ND,
                IN_DROP,
            ],
        ),
        (
            Some("fd00:5eed::1"),
            7300,
            vec![
                lo,
                ct,
                "ip6 saddr fd00:5eed::1 tcp dport 7300 accept",
                IN_ND,
                IN_DROP,
            ],
        ),
        // No host side known (an engine network mode: slirp4netns forwards over loopback), or
        // none worth the name: the server's port over loopback only.
        (None, 7300, vec![lo, ct, IN_ND, IN_DROP]),
        (Some("0.0.0.0"), 7300, vec![lo, ct, IN_ND, IN_DROP]),
    ];
    for mode in [NetworkMode::Open, NetworkMode::None, NetworkMode::Allowlist] {
        for (gateway, port, want) in &cases {
            let mut i = input(mode);
            i.gateway = gateway.map(ip);
            i.server_port = *port;
            let text = ruleset(&i);
            assert_eq!(chain_rules(&text, "input"), *want, "{mode:?} {gateway:?}");
            // The broker's TCP route changes nothing inbound (its replies are replies).
            i.broker_port = Some(41234);
            i.egress_port = Some(41235);
            assert_eq!(
                chain_rules(&ruleset(&i), "input"),
                *want,
                "{mode:?} {gateway:?}"
            );
        }
    }
}

#[test]
fn nothing_but_the_server_port_is_let_in_from_anywhere_but_loopback() {
    let rules = chain_rules(&ruleset(&input(NetworkMode::Open)), "input");
    let accepting: Vec<&String> = rules
        .iter()
        .filter(|r| r.ends_with("accept"))
        .filter(|r| !r.starts_with("iif \"lo\"") && !r.starts_with("ct state ") && *r != IN_ND)
        .collect();
    assert_eq!(accepting, ["ip saddr 172.30.0.1 tcp dport 7300 accept"]);
    // Dropped, not rejected (a scan learns nothing), and counted last; the policy drops too.
    assert_eq!(rules.last().unwrap(), IN_DROP);
    assert!(!rules.iter().any(|r| r.contains("reject")), "{rules:?}");
    // The other hosts' way in: neighbour discovery never leaves the link (hop limit 255).
    assert!(IN_ND.starts_with("ip6 hoplimit 255 "));
}

#[test]
fn the_server_port_is_part_of_the_ruleset_and_its_hash() {
    let a = input(NetworkMode::Open);
    let mut b = a.clone();
    b.server_port = 7301;
    assert_ne!(rules_hash(&ruleset(&a)), rules_hash(&ruleset(&b)));
}

#[test]
fn the_shape_follows_the_mode_and_this_code_never_a_hosts_addresses() {
    let [open, none, allowlist] =
        [NetworkMode::Open, NetworkMode::None, NetworkMode::Allowlist].map(shape);
    assert_eq!(open.len(), 16);
    assert!(open.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(open, none);
    // Allowlist is none at packet level.
    assert_eq!(none, allowlist);
    assert_eq!(shape(NetworkMode::Open), open, "stable");
}

#[test]
fn the_hash_follows_the_ruleset_and_marks_the_table() {
    let a = ruleset(&input(NetworkMode::Open));
    let b = ruleset(&input(NetworkMode::None));
    assert_ne!(rules_hash(&a), rules_hash(&b));
    assert_eq!(rules_hash(&a), rules_hash(&a.clone()));
    let (text, hash) = marked(&a);
    assert_eq!(hash, rules_hash(&a));
    assert!(text.contains(&format!("counter po_rules_{hash} {{")));
}

#[test]
fn addresses_are_sorted_and_deduplicated_so_the_hash_is_stable() {
    let mut i = input(NetworkMode::Open);
    let mut j = i.clone();
    i.host_addresses.reverse();
    j.host_addresses.push(ip("192.0.2.2"));
    assert_eq!(ruleset(&i), ruleset(&j));
}

#[test]
fn the_marker_is_refused_admin_prohibited_before_loopback_is_accepted_in_every_mode() {
    for mode in [NetworkMode::Open, NetworkMode::None, NetworkMode::Allowlist] {
        let rules = output_rules(&ruleset(&input(mode)));
        assert_eq!(
            rules[0],
            format!(
                "ip daddr {MARK_ADDR} tcp dport {MARK_PORT} reject with icmpx type admin-prohibited"
            )
        );
        let lo = if mode.internet() { 1 } else { 2 };
        assert_eq!(rules[lo], "oif \"lo\" accept");
    }
    assert!(
        MARK_ADDR.starts_with("127."),
        "the marker never leaves the namespace"
    );
}

#[test]
fn the_embedded_resolver_is_refused_before_loopback_outside_open_only() {
    let refused = format!("ip daddr {EMBEDDED_DNS} jump refuse");
    for mode in [NetworkMode::None, NetworkMode::Allowlist] {
        let rules = output_rules(&ruleset(&input(mode)));
        assert_eq!(rules[1], refused, "{mode:?}");
        assert_eq!(rules[2], "oif \"lo\" accept", "{mode:?}");
    }
    let open = output_rules(&ruleset(&input(NetworkMode::Open)));
    assert!(!open.iter().any(|r| r.contains(EMBEDDED_DNS)), "{open:?}");
}

#[test]
fn the_marker_probe_has_no_whitespace_for_health_checks_and_waits_only_when_asked() {
    let health = mark_probe(false);
    assert!(!health.contains(char::is_whitespace), "{health}");
    assert!(health.contains(MARK_ADDR) && health.contains("EHOSTUNREACH"));
    assert!(!health.contains("setTimeout"));
    let gate = mark_probe(true);
    assert!(gate.contains("setTimeout(t,1000)") && gate.contains("waiting for the network rules"));
    assert!(!gate.contains("process.exit(1)"));
}
