//! Network containment as data: the egress mode (`network`, `PO_SANDBOX_NETWORK`) and the nft
//! ruleset a workspace's network namespace gets, as a pure function of the mode and the
//! addresses that matter (the network's gateway, the DNS servers the engine forwards to, the
//! host's own addresses, the broker's TCP route, the server's port). A short-lived helper loads
//! it into the namespace holder's namespace (`holder`).

use std::net::IpAddr;

use sha2::{Digest, Sha256};

pub(crate) use crate::names::network::{MODES, NetworkMode};
pub(crate) use crate::names::vars::NETWORK_VAR;

/// The nft table the rules helper loads.
pub const TABLE: &str = "po_sandbox";
/// The set, in [`TABLE`], of the TCP broker ports of hubs other than the one that made the
/// holder (on a TCP broker route).
pub const PORT_SET: &str = "broker_ports";
/// IPv4 ranges no workspace reaches in any mode: private (RFC 1918), shared address space
/// (RFC 6598), link-local and cloud metadata, "this network", multicast (mDNS, SSDP) and the
/// limited broadcast.
pub const REFUSED_V4: [&str; 8] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "255.255.255.255",
];
/// IPv6 ranges no workspace reaches in any mode: unique-local, link-local and multicast.
pub const REFUSED_V6: [&str; 3] = ["fc00::/7", "fe80::/10", "ff00::/8"];
/// The kernel's own neighbour solicitation to a solicited-node group (what IPv6 needs to reach
/// any neighbour): only the kernel sends it, as no workspace process may open a raw socket.
const NEIGHBOUR_SOLICITATION: &str =
    "ip6 daddr ff02::1:ff00:0/104 icmpv6 type nd-neighbor-solicit accept";

/// The named counter, in [`TABLE`], of the inbound packets the input chain drops (all but
/// loopback, replies, the server's port from the host side and neighbour discovery).
pub const INBOUND_DROPPED: &str = "inbound_dropped";

/// The marker of loaded rules: a TCP connection to this loopback address and port is refused
/// with ICMP admin-prohibited (`EHOSTUNREACH`) by the rules and only by them (without them it
/// is `ECONNREFUSED`). Anything in the namespace can look, with no capability: the holder's
/// health check and the workspace's start gate do. It never leaves the namespace.
pub const MARK_ADDR: &str = "127.80.79.78";
/// The marker's port (discard).
pub const MARK_PORT: u16 = 9;

/// The JavaScript (for the bundle's interpreter, `node -e`) that looks for the [`MARK_ADDR`]
/// marker: exits 0 when the rules refuse it. With `wait`, it looks again every second until
/// they do, saying once on stderr that it waits (the workspace's start gate); otherwise it
/// exits 1 (the holder's health check: no whitespace then, as Podman 4.3 re-splits a health
/// check's arguments on it).
pub fn mark_probe(wait: bool) -> String {
    let again = match wait {
        true => {
            "(w||console.error('po-sandbox: waiting for the network rules of the namespace holder'),w=1,setTimeout(t,1000))"
        }
        false => "process.exit(1)",
    };
    format!(
        "let{{connect:c}}=require('net'),w=0,t=()=>{{let{{s}}={{s:c({{host:'{MARK_ADDR}',port:{MARK_PORT}}})}};\
         s.on('connect',()=>{{s.destroy();{again}}});\
         s.on('error',e=>e.code==='EHOSTUNREACH'?process.exit(0):{again})}};t()"
    )
}

/// Everything the ruleset depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesInput {
    /// The egress mode.
    pub mode: NetworkMode,
    /// The per-hub network's gateway (the host side of the bridge), refused in every mode.
    pub gateway: Option<IpAddr>,
    /// The per-hub network's directed broadcast address, refused in every mode.
    pub broadcast: Option<IpAddr>,
    /// The per-hub network's IPv6 subnets and gateways (`addr/len`, canonical), refused in
    /// every mode: present only where an engine gave the network IPv6 anyway.
    pub network_v6: Vec<String>,
    /// DNS servers the engine's resolver forwards to from inside the namespace (Podman's
    /// aardvark-dns on the gateway; Docker's upstreams), allowed on port 53 in `open` mode.
    pub dns: Vec<IpAddr>,
    /// The host's own addresses (when the engine runs on this host), refused in every mode.
    pub host_addresses: Vec<IpAddr>,
    /// The broker's TCP port when the route is TCP (`host.docker.internal:<port>` on VM
    /// engines): that one address:port is allowed; the holder resolves the name at its start.
    pub broker_port: Option<u16>,
    /// The egress proxy's TCP port on the same address (the `allowlist` mode on the TCP
    /// route), allowed like the broker's.
    pub egress_port: Option<u16>,
    /// The workspace server's TCP port in the namespace (the bundle's `server.port`, published
    /// on the host's 127.0.0.1): let in from the [`RulesInput::gateway`] only.
    pub server_port: u16,
}

/// The nft set of addresses, or `None` when empty.
fn set_of(addrs: impl Iterator<Item = String>) -> Option<String> {
    let mut list: Vec<String> = addrs.collect();
    list.sort();
    list.dedup();
    (!list.is_empty()).then(|| format!("{{ {} }}", list.join(", ")))
}

/// The addresses of one family, as text.
fn family(addrs: &[IpAddr], v4: bool) -> impl Iterator<Item = String> + '_ {
    addrs
        .iter()
        .filter(move |a| a.is_ipv4() == v4 && !a.is_loopback() && !a.is_unspecified())
        .map(IpAddr::to_string)
}

/// Docker's embedded DNS resolver inside a container's namespace (user-defined networks).
pub const EMBEDDED_DNS: &str = "127.0.0.11";

/// The output chain's rules: refuse the [`MARK_ADDR`] marker (and, outside `open`, the engine's
/// embedded resolver [`EMBEDDED_DNS`]), accept loopback and replies (the published port),
/// allow the broker's TCP route and, in `open` mode, DNS to the engine's resolvers, reject the
/// gateway, the network's broadcast, the host's addresses and the refused ranges (multicast and
/// broadcast among them), then, outside `open`, everything else.
fn output_rules(input: &RulesInput) -> Vec<String> {
    let mut rules = vec![format!(
        "ip daddr {MARK_ADDR} tcp dport {MARK_PORT} reject with icmpx type admin-prohibited"
    )];
    if !input.mode.internet() {
        // The engine's embedded resolver: it forwards from the host's namespace (for a loopback
        // resolver there), where these rules never apply. Nothing resolves in these modes.
        rules.push(format!("ip daddr {EMBEDDED_DNS} jump refuse"));
    }
    rules.push("oif \"lo\" accept".to_string());
    rules.push("ct state established,related accept".to_string());
    for port in input.broker_port.iter().chain(input.egress_port.iter()) {
        rules.push(format!("ip daddr $broker tcp dport {port} accept"));
    }
    if input.broker_port.is_some() {
        rules.push(format!("ip daddr $broker tcp dport @{PORT_SET} accept"));
    }
    if input.mode.internet() {
        for v4 in [true, false] {
            if let Some(set) = set_of(family(&input.dns, v4)) {
                let ip = if v4 { "ip" } else { "ip6" };
                rules.push(format!("{ip} daddr {set} udp dport 53 accept"));
                rules.push(format!("{ip} daddr {set} tcp dport 53 accept"));
            }
        }
    }
    rules.push(NEIGHBOUR_SOLICITATION.to_string());
    let mut host: Vec<IpAddr> = input.host_addresses.clone();
    host.extend(input.gateway);
    host.extend(input.broadcast);
    let refused_v4 = REFUSED_V4
        .iter()
        .map(|s| s.to_string())
        .chain(family(&host, true));
    let refused_v6 = REFUSED_V6
        .iter()
        .map(|s| s.to_string())
        .chain(family(&host, false))
        .chain(input.network_v6.iter().cloned());
    for (ip, set) in [("ip", set_of(refused_v4)), ("ip6", set_of(refused_v6))] {
        let set = set.expect("the fixed ranges are never empty");
        rules.push(format!("{ip} daddr {set} jump refuse"));
    }
    if !input.mode.internet() {
        rules.push("jump refuse".into());
    }
    rules
}

/// Neighbour discovery from the link (hop limit 255: never routed), which conntrack does not
/// track: the answer to the kernel's own solicitation, and a neighbour's question.
const NEIGHBOUR_DISCOVERY_IN: &str =
    "ip6 hoplimit 255 icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept";

/// The input chain's rules, in every mode: accept loopback (the forwarded-port relay, the
/// health checks, the bridge, rootless Podman's port forwarder, which connects from inside the
/// namespace), replies, the server's port from the per-hub network's gateway only (the host
/// side: Docker's proxy or NAT and netavark's NAT for the published 127.0.0.1 port, and the
/// host itself), and neighbour discovery; count and drop the rest (another host routed to the
/// container's address, another workspace, any other port). With no gateway known (an engine
/// network mode such as slirp4netns), the server's port is let in over loopback only.
fn input_rules(input: &RulesInput) -> Vec<String> {
    let mut rules = vec![
        "iif \"lo\" accept".to_string(),
        "ct state established,related accept".to_string(),
    ];
    if let Some(gw) = input
        .gateway
        .filter(|g| !g.is_loopback() && !g.is_unspecified())
    {
        let ip = if gw.is_ipv4() { "ip" } else { "ip6" };
        let port = input.server_port;
        rules.push(format!("{ip} saddr {gw} tcp dport {port} accept"));
    }
    rules.push(NEIGHBOUR_DISCOVERY_IN.to_string());
    rules.push(format!("counter name {INBOUND_DROPPED} drop"));
    rules
}

/// The nft ruleset: one `inet` table with an output hook ([`output_rules`]) that rejects
/// (TCP reset, else ICMP admin-prohibited: attempts fail at once) and an input hook
/// ([`input_rules`], policy drop) that drops silently and counts in [`INBOUND_DROPPED`].
/// Loaded atomically (`nft -f`), and again as often as wanted: the table, its counter and its
/// chains are declared (made when missing), the chains flushed and filled again, in one
/// transaction, so a second load gives the same table with no moment without rules. On a TCP
/// broker route the ruleset also has the set [`PORT_SET`] of other hubs' broker ports (their
/// rules helpers add to it): a set's elements survive a load, so a helper that loads after
/// another hub's helper added its ports does not take them away. With a broker port, the
/// ruleset expects `define broker = <ip>` before it (the helper adds it).
pub fn ruleset(input: &RulesInput) -> String {
    let set = if input.broker_port.is_some() {
        format!("  set {PORT_SET} {{\n    type inet_service;\n  }}\n")
    } else {
        String::new()
    };
    let refuse = [
        "meta l4proto tcp reject with tcp reset",
        "reject with icmpx type admin-prohibited",
    ];
    let add = |chain: &str, rule: &str| format!("add rule inet {TABLE} {chain} {rule}\n");
    let refuse: String = refuse.iter().map(|r| add("refuse", r)).collect();
    let output: String = output_rules(input)
        .iter()
        .map(|r| add("output", r))
        .collect();
    let inbound: String = input_rules(input).iter().map(|r| add("input", r)).collect();
    format!(
        "table inet {TABLE} {{\n{set}  counter {INBOUND_DROPPED} {{\n  }}\n  chain refuse {{\n  }}\n  \
         chain output {{\n    type filter hook output priority 0; policy accept;\n  }}\n  \
         chain input {{\n    type filter hook input priority 0; policy drop;\n  }}\n}}\n\
         flush chain inet {TABLE} refuse\nflush chain inet {TABLE} output\n\
         flush chain inet {TABLE} input\n{refuse}{output}{inbound}"
    )
}

/// The shape of the rules this code makes for a mode: the hash of its rulesets for fixed
/// inputs (documentation addresses; a socket and a TCP broker route), so it changes with this
/// code and never with a host's addresses or ports. A holder carries it (`po.net-shape`);
/// adoption replaces one that carries another (made by a version whose rules differ: they
/// lack what this one refuses), as its own rules are what its helper loads.
pub fn shape(mode: NetworkMode) -> String {
    let ip = |s: &str| s.parse::<IpAddr>().expect("a fixed address");
    let socket = RulesInput {
        mode,
        gateway: Some(ip("192.0.2.1")),
        broadcast: Some(ip("192.0.2.255")),
        network_v6: vec!["2001:db8::/64".into()],
        dns: vec![ip("192.0.2.53"), ip("2001:db8::53")],
        host_addresses: vec![ip("198.51.100.2"), ip("2001:db8:1::2")],
        broker_port: None,
        egress_port: None,
        server_port: 7300,
    };
    let tcp = RulesInput {
        broker_port: Some(1),
        egress_port: Some(2),
        ..socket.clone()
    };
    rules_hash(&(ruleset(&socket) + &ruleset(&tcp)))
}

/// The ruleset's hash (16 hex digits): the holder's `po.net-rules` label, and a comment in
/// the loaded table that adoption looks for.
pub fn rules_hash(ruleset: &str) -> String {
    hex::encode(&Sha256::digest(ruleset.as_bytes())[..8])
}

/// The ruleset with its hash as the table's marker: a named counter `po_rules_<hash>` that
/// `nft list table` shows (comments need a newer nft than some hosts have).
pub fn marked(ruleset: &str) -> (String, String) {
    let hash = rules_hash(ruleset);
    let marker = format!("  counter po_rules_{hash} {{\n  }}\n");
    let text = ruleset.replacen("  chain refuse {", &format!("{marker}  chain refuse {{"), 1);
    (text, hash)
}

#[cfg(test)]
mod tests;
