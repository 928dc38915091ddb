use super::*;
use crate::contained::fixtures::{EGRESS_BRIDGED, env};
use crate::contained::identity::read_state;

fn skill_of(vars: &[(&str, &str)], cwd: Option<&str>) -> Option<String> {
    let e = env(vars);
    skill(&read_state(&e), &read_facts(&e), cwd)
}

#[test]
fn no_skill_on_the_host() {
    assert_eq!(skill_of(&[], Some("/src/acme")), None);
    assert_eq!(skill_of(&[("PO_SANDBOX", "0")], None), None);
    // Not understood is the host too, as `/po-sandbox` says.
    assert_eq!(skill_of(&[("PO_SANDBOX", "yes")], None), None);
}

#[test]
fn contained_skill_names_mounts_providers_network_and_limits() {
    let md = skill_of(
        &[
            ("PO_SANDBOX", "1"),
            ("PO_WORKSPACE", "acme"),
            ("PO_HOME", "/home/ann/.po/sandboxes/acme"),
            ("HOME", "/po-home"),
            ("PO_SANDBOX_TOKEN_FILE", "/run/po-sandbox/token"),
            ("PO_BROKER_PROVIDERS", "anthropic,openai"),
            ("PO_BROKER_SOCKET", "/run/po-broker/broker.sock"),
            (
                "PO_SANDBOX_GUARDED_PATHS",
                "/src/acme/.git/hooks,/src/acme/.envrc",
            ),
            ("PO_SANDBOX_NETWORK", "none"),
        ],
        Some("/src/acme"),
    )
    .unwrap();
    // pi's skill frontmatter: a name and a description within the Agent Skills limits.
    let front = md.strip_prefix("---\n").unwrap();
    let (front, body) = front.split_once("\n---\n").unwrap();
    let lines: Vec<&str> = front.lines().collect();
    assert_eq!(lines[0], "name: po-sandbox");
    let description = lines[1].strip_prefix("description: ").unwrap();
    assert!(description.len() <= 1024 && !description.contains(": "));
    assert_eq!(lines.len(), 2);
    for needle in [
        "workspace \"acme\"",
        "`/src/acme`",
        "`/po-home` (`HOME`)",
        "`/home/ann/.po/sandboxes/acme` (`PO_HOME`)",
        "modes.yaml, domains.yaml, config.yaml",
        "`/opt/po`",
        "`/po-runtime`",
        "`/po-git`",
        "`/run/po-sandbox/token`",
        "`/run/po-broker`",
        "`/src/acme/.git/hooks`, `/src/acme/.envrc`",
        "Brokered: `anthropic`, `openai`, via the broker socket `/run/po-broker/broker.sock`",
        "firewall rules loaded before this container started",
        "private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) are refused at once",
        "Mode `none`: nothing else is reachable",
        "127.0.0.1",
        "No container engine",
        "No host paths beyond the mounts",
        "No OAuth `/login`",
        "No privileges",
    ] {
        assert!(body.contains(needle), "{needle} missing in:\n{body}");
    }
    assert!(!body.contains("Problems"), "{body}");
}

#[test]
fn tcp_route_unguarded_and_unbrokered_variants() {
    let tcp = skill_of(
        &[
            ("PO_SANDBOX", "1"),
            ("PO_WORKSPACE", "w"),
            ("PO_BROKER_PROVIDERS", "openai"),
            ("PO_BROKER_ADDRESS", "host.docker.internal:4100"),
        ],
        None,
    )
    .unwrap();
    assert!(tcp.contains("via the broker at `host.docker.internal:4100`"));
    assert!(tcp.contains("`host.docker.internal` is the host"));
    assert!(!tcp.contains("`/run/po-broker`"));
    assert!(tcp.contains("No workspace paths are guarded"));
    assert!(tcp.contains("- Writable here though the host may run them"));
    assert!(tcp.contains("`po-sandbox review <folder>` on the host"));
    assert!(tcp.contains("`PO_HOME` is not set"));
    // Defaults for the fixed paths when the variables are missing.
    assert!(tcp.contains("`/po-home` (`HOME`)") && tcp.contains("`/run/po-sandbox/token`"));
    let plain = skill_of(&[("PO_SANDBOX", "1"), ("PO_WORKSPACE", "w")], None).unwrap();
    assert!(plain.contains("No providers are brokered"));
}

#[test]
fn problems_are_listed_as_in_the_report() {
    let md = skill_of(
        &[
            ("PO_SANDBOX", "1"),
            ("PO_BROKER_PROVIDERS", "openai"),
            ("PO_BROKER_SOCKET", "/a.sock"),
            ("PO_BROKER_ADDRESS", "127.0.0.1:1"),
        ],
        None,
    )
    .unwrap();
    assert!(md.contains("did not name its workspace"));
    assert!(md.contains("## Problems"));
    assert!(md.contains("Both PO_BROKER_SOCKET and PO_BROKER_ADDRESS are set"));
    assert!(md.contains("No providers are brokered"));
}

#[test]
fn the_network_section_tells_how_to_use_the_egress_proxy() {
    let vars = [
        &EGRESS_BRIDGED[..],
        &[("HTTPS_PROXY", "http://127.0.0.1:4567")],
    ]
    .concat();
    let md = skill_of(&vars, None).unwrap();
    assert!(
        md.contains("through the host's egress proxy (`/run/po-broker/egress.sock`)"),
        "{md}"
    );
    assert!(
        md.contains("at `http://127.0.0.1:4567` through `HTTPS_PROXY`/`HTTP_PROXY`"),
        "{md}"
    );
    assert!(md.contains("403 egress denied"), "{md}");
    let md = skill_of(&EGRESS_BRIDGED, None).unwrap();
    assert!(md.contains("This session has not bridged it"), "{md}");
}
