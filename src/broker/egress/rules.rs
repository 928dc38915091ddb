//! The egress proxy's pure rules: the `networkAllow` and `networkResolve` entries, the one
//! canonical form of an authority (whatever encoding a client sends), the Host and SNI
//! checks, and which addresses are not public. No I/O here.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host as compared: a lowercase ASCII name without a trailing dot, or an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V4(a)) => write!(f, "{a}"),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
        }
    }
}

/// A destination: host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub host: Host,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// One `networkAllow` entry: an exact host, or every name under a suffix (`*.example.com`
/// matches `a.example.com` and `a.b.example.com`, not `example.com`), on one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowEntry {
    Exact(Target),
    Suffix { suffix: String, port: u16 },
}

/// The default `networkAllow` of allowlist mode: package registries and git hosts, on 443.
pub const DEFAULT_ALLOW: &[&str] = &[
    "registry.npmjs.org:443",
    "pypi.org:443",
    "files.pythonhosted.org:443",
    "github.com:443",
    "codeload.github.com:443",
    "objects.githubusercontent.com:443",
    "crates.io:443",
    "static.crates.io:443",
    "index.crates.io:443",
    "deb.debian.org:443",
];

/// [`DEFAULT_ALLOW`], parsed.
pub fn default_allow() -> Vec<AllowEntry> {
    DEFAULT_ALLOW
        .iter()
        .map(|e| parse_allow(e).expect("the default list parses"))
        .collect()
}

/// The form an allow entry must have, for messages.
pub const ALLOW_FORM: &str = "HOST:PORT or *.SUFFIX:PORT (a lowercase ASCII name, its punycode xn-- form for an international one, an IPv4 address or a [IPv6] address; a port from 1 to 65535)";
/// The form a resolve entry must have, for messages.
pub const RESOLVE_FORM: &str =
    "HOST=IP (a host name and the IPv4 or IPv6 address to use for it, like curl's --resolve)";

/// Why a destination is refused or unreadable: the text after `egress denied: `.
pub type Why = String;

/// Parses an authority (`host[:port]`, `[v6][:port]`) into its one canonical form. `default`
/// is the port when none is given (`None`: a port is required). Refuses userinfo,
/// percent-encoding, non-ASCII (a client sends an international name as punycode), empty or
/// out-of-range ports, unbracketed IPv6; reads IPv4 in every form a resolver accepts
/// (`127.1`, `0x7f.0.0.1`, `017700000001`, `2130706433`) as the address it is.
pub fn parse_authority(raw: &str, default: Option<u16>) -> Result<Target, Why> {
    if raw.is_empty() {
        return Err("the destination is empty".into());
    }
    if raw.contains('@') {
        return Err(format!(
            "{raw:?} carries userinfo (user@host), which is refused"
        ));
    }
    if raw.contains('%') {
        return Err(format!("{raw:?} is percent-encoded, which is refused"));
    }
    if !raw.is_ascii() {
        return Err(format!(
            "{raw:?} is not ASCII: send an international name in its punycode (xn--) form"
        ));
    }
    let (host, port) = split_port(raw)?;
    let port = match (port, default) {
        (Some(p), _) => {
            parse_port(p).ok_or_else(|| format!("{raw:?} has no valid port (1-65535)"))?
        }
        (None, Some(d)) => d,
        (None, None) => return Err(format!("{raw:?} names no port")),
    };
    Ok(Target {
        host: parse_host(host).map_err(|why| format!("{raw:?}: {why}"))?,
        port,
    })
}

/// `host` and the port text after its last `:` (IPv6 literals in brackets).
fn split_port(raw: &str) -> Result<(&str, Option<&str>), Why> {
    if let Some(rest) = raw.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{raw:?} has an unclosed '['"))?;
        let host = &raw[..inside.len() + 2];
        return match after {
            "" => Ok((host, None)),
            p => match p.strip_prefix(':') {
                Some(p) => Ok((host, Some(p))),
                None => Err(format!("{raw:?} has text after ']'")),
            },
        };
    }
    match raw.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Err(format!(
            "{raw:?} looks like an IPv6 address without brackets: write [address]:port"
        )),
        Some((h, p)) => Ok((h, Some(p))),
        None => Ok((raw, None)),
    }
}

/// A decimal port from 1 to 65535, digits only, no leading zero.
pub fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) || p.starts_with('0') {
        return None;
    }
    p.parse::<u16>().ok().filter(|&n| n > 0)
}

/// A host in its canonical form: `[v6]` an address; a name ending in a number is an IPv4
/// address (every resolver form) or invalid; otherwise a lowercase name of letters, digits,
/// `-` and `_`, labels of 1-63, at most 253 long, one trailing dot dropped.
pub fn parse_host(raw: &str) -> Result<Host, Why> {
    if let Some(inside) = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return inside
            .parse::<Ipv6Addr>()
            .map(|a| Host::Ip(canonical_ip(IpAddr::V6(a))))
            .map_err(|_| "not an IPv6 address in brackets".into());
    }
    let lower = raw.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.is_empty() {
        return Err("the host is empty".into());
    }
    let labels: Vec<&str> = name.split('.').collect();
    let last = labels[labels.len() - 1];
    if ends_in_number(last) {
        return legacy_ipv4(&labels)
            .map(|a| Host::Ip(IpAddr::V4(a)))
            .ok_or_else(|| "ends in a number but is not an IPv4 address".into());
    }
    if name.len() > 253 {
        return Err("the name is longer than 253 characters".into());
    }
    for label in &labels {
        if label.is_empty() || label.len() > 63 {
            return Err("a label is empty or longer than 63 characters".into());
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err("a name may hold only letters, digits, '-' and '_'".into());
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("a label starts or ends with '-'".into());
        }
    }
    Ok(Host::Name(name.to_string()))
}

/// An IPv4-mapped IPv6 address is the IPv4 address it maps.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// The WHATWG URL rule: a last label of digits, or `0x` and hex digits, makes the host an
/// IPv4 address.
fn ends_in_number(label: &str) -> bool {
    !label.is_empty()
        && (label.bytes().all(|b| b.is_ascii_digit())
            || label
                .strip_prefix("0x")
                .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit())))
}

/// inet_aton: 1 to 4 parts, each decimal, octal (leading 0) or hex (0x); the last part fills
/// the remaining bytes.
fn legacy_ipv4(parts: &[&str]) -> Option<Ipv4Addr> {
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for p in parts {
        let v = if let Some(h) = p.strip_prefix("0x") {
            if h.is_empty() {
                0
            } else {
                u64::from_str_radix(h, 16).ok()?
            }
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()?
        } else {
            p.parse::<u64>().ok()?
        };
        values.push(v);
    }
    let (last, head) = values.split_last()?;
    if head.iter().any(|&v| v > 255) || *last >= 1u64 << (8 * (5 - values.len())) {
        return None;
    }
    let mut n: u64 = *last;
    for (i, v) in head.iter().enumerate() {
        n |= v << (8 * (3 - i));
    }
    Some(Ipv4Addr::from(n as u32))
}

/// Parses one `networkAllow` entry.
pub fn parse_allow(entry: &str) -> Result<AllowEntry, Why> {
    let e = entry.trim();
    let bad =
        |why: String| format!("{entry:?} is not an allow entry ({why}); expected {ALLOW_FORM}");
    if let Some(rest) = e.strip_prefix("*.") {
        let (host, port) = split_port(rest).map_err(bad)?;
        let port = port
            .and_then(parse_port)
            .ok_or_else(|| bad("no valid port".into()))?;
        return match parse_authority(&format!("{host}:{port}"), None).map_err(bad)? {
            Target {
                host: Host::Name(suffix),
                port,
            } => Ok(AllowEntry::Suffix { suffix, port }),
            _ => Err(bad("a wildcard needs a name, not an address".into())),
        };
    }
    if e.contains('*') {
        return Err(bad("'*' is only allowed as a leading '*.'".into()));
    }
    parse_authority(e, None).map(AllowEntry::Exact).map_err(bad)
}

/// Parses one `networkResolve` entry: the name and its address.
pub fn parse_resolve(entry: &str) -> Result<(String, IpAddr), Why> {
    let bad =
        |why: &str| format!("{entry:?} is not a resolve entry ({why}); expected {RESOLVE_FORM}");
    let (host, ip) = entry.trim().split_once('=').ok_or_else(|| bad("no '='"))?;
    let name = match parse_authority(host.trim(), Some(1)) {
        Ok(Target {
            host: Host::Name(n),
            port: 1,
        }) if !host.contains(':') => n,
        _ => return Err(bad("the left side must be a host name")),
    };
    let ip = ip.trim();
    let ip = ip
        .strip_prefix('[')
        .and_then(|i| i.strip_suffix(']'))
        .unwrap_or(ip);
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| bad("the right side must be an IP address"))?;
    Ok((name, canonical_ip(ip)))
}

impl std::fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllowEntry::Exact(t) => write!(f, "{t}"),
            AllowEntry::Suffix { suffix, port } => write!(f, "*.{suffix}:{port}"),
        }
    }
}

/// The entry of `list` that lets `target` through, if one does.
pub fn allowing<'a>(list: &'a [AllowEntry], target: &Target) -> Option<&'a AllowEntry> {
    list.iter()
        .find(|e| allowed(std::slice::from_ref(e), target))
}

/// Whether the list lets `target` through.
pub fn allowed(list: &[AllowEntry], target: &Target) -> bool {
    list.iter().any(|e| match e {
        AllowEntry::Exact(t) => t == target,
        AllowEntry::Suffix { suffix, port } => {
            *port == target.port
                && matches!(&target.host, Host::Name(n)
                    if n.len() > suffix.len() + 1
                        && n.ends_with(suffix.as_str())
                        && n.as_bytes()[n.len() - suffix.len() - 1] == b'.')
        }
    })
}

/// Whether `reason` is the allow list's refusal (the one `po-sandbox allow` lifts).
pub fn unlisted(reason: &str) -> bool {
    reason.contains(" is not in networkAllow (the sandbox policy)")
}

/// What the policy says of a destination before any lookup: denied (with the reason), an
/// address to dial as it is (a listed literal, or a name `networkResolve` maps), or a name to
/// look up (each of its addresses then checked with [`non_public`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Denied(Why),
    Dial(IpAddr),
    Lookup(String),
}

/// The policy's decision for `target`.
pub fn decide(list: &[AllowEntry], resolve: &BTreeMap<String, IpAddr>, target: &Target) -> Verdict {
    if !allowed(list, target) {
        return Verdict::Denied(format!(
            "{target} is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow {target}"
        ));
    }
    match &target.host {
        Host::Ip(ip) => Verdict::Dial(*ip),
        Host::Name(n) => match resolve.get(n) {
            Some(ip) => Verdict::Dial(*ip),
            None => Verdict::Lookup(n.clone()),
        },
    }
}

/// Why an address looked up for an allowed name is refused: loopback, private, shared,
/// link-local (cloud metadata), unspecified, multicast, reserved or documentation ranges, and
/// IPv6 forms that embed such an IPv4 address.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match canonical_ip(ip) {
        IpAddr::V4(a) => non_public_v4(a),
        IpAddr::V6(a) => non_public_v6(a),
    }
}

/// What [`non_public`] refuses, and the host's own addresses `own` (the packet rules refuse
/// them too; an IPv4-mapped form of one is the address it maps).
pub fn refused(ip: IpAddr, own: &[IpAddr]) -> Option<&'static str> {
    let ip = canonical_ip(ip);
    non_public(ip).or_else(|| {
        own.iter()
            .any(|o| canonical_ip(*o) == ip)
            .then_some("local (this host's own)")
    })
}

fn non_public_v4(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    Some(match o {
        [127, ..] => "loopback",
        [10, ..] | [192, 168, ..] => "private",
        [172, b, ..] if (16..32).contains(&b) => "private",
        [100, b, ..] if (64..128).contains(&b) => "shared (carrier-grade NAT)",
        [169, 254, ..] => "link-local (cloud metadata)",
        [0, ..] => "unspecified",
        [192, 0, 0, _] | [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => "reserved",
        [198, b, ..] if b == 18 || b == 19 => "reserved",
        [a0, ..] if a0 >= 224 => "multicast or reserved",
        _ => return None,
    })
}

fn non_public_v6(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    if a.is_loopback() {
        return Some("loopback");
    }
    if a.is_unspecified() {
        return Some("unspecified");
    }
    if s[0] & 0xfe00 == 0xfc00 {
        return Some("private (unique local)");
    }
    if s[0] & 0xffc0 == 0xfe80 || s[0] & 0xffc0 == 0xfec0 {
        return Some("link-local");
    }
    if s[0] & 0xff00 == 0xff00 {
        return Some("multicast");
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return Some("reserved");
    }
    // Relays that carry IPv6 over IPv4 to any IPv4 address, the refused ones among them.
    if s[0] == 0x2002 {
        return Some("6to4 (relayed to an IPv4 address)");
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return Some("Teredo (relayed to an IPv4 address)");
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some("local-use NAT64 (translated to an IPv4 address)");
    }
    // NAT64 (64:ff9b::/96) and IPv4-compatible (::a.b.c.d) embed an IPv4 address.
    let embedded = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) || s[0..6] == [0; 6] {
        return non_public_v4(embedded).or(Some("reserved"));
    }
    None
}

/// The Host header check: exactly one Host header, naming the same destination as the target
/// (`default` port when it has none).
pub fn host_header(values: &[&[u8]], target: &Target, default: u16) -> Result<(), Why> {
    match values {
        [] => Err("the request has no Host header".into()),
        [one] => {
            let text =
                std::str::from_utf8(one).map_err(|_| "the Host header is not text".to_string())?;
            let host = parse_authority(text.trim(), Some(default))?;
            if &host == target {
                Ok(())
            } else {
                Err(format!(
                    "the Host header {host} does not match the target {target}"
                ))
            }
        }
        _ => Err("the request has more than one Host header".into()),
    }
}

/// The TLS server name check: a name target needs a ClientHello naming it (compared in the
/// canonical form); an address target needs none (a name would not be that address).
pub fn sni_matches(sni: Option<&str>, target: &Target) -> Result<(), Why> {
    match (&target.host, sni) {
        (Host::Name(_), None) => Err(format!(
            "the TLS ClientHello for {target} names no server (no SNI)"
        )),
        (Host::Name(n), Some(s)) => match parse_host(s) {
            Ok(Host::Name(m)) if &m == n => Ok(()),
            _ => Err(format!(
                "the TLS ClientHello names {s:?}, not the CONNECT host {n}"
            )),
        },
        (Host::Ip(_), None) => Ok(()),
        (Host::Ip(_), Some(s)) => Err(format!(
            "the TLS ClientHello names {s:?}, not the CONNECT address {target}"
        )),
    }
}

#[cfg(test)]
mod tests;
