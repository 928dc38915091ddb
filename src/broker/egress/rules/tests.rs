use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use super::*;

fn name(n: &str, port: u16) -> Target {
    Target {
        host: Host::Name(n.into()),
        port,
    }
}

fn v4(a: [u8; 4], port: u16) -> Target {
    Target {
        host: Host::Ip(IpAddr::V4(Ipv4Addr::from(a))),
        port,
    }
}

#[test]
fn case_and_a_trailing_dot_are_the_same_name() {
    for raw in [
        "registry.npmjs.org:443",
        "REGISTRY.npmjs.ORG:443",
        "registry.npmjs.org.:443",
        "Registry.Npmjs.Org.:443",
    ] {
        assert_eq!(
            parse_authority(raw, None).unwrap(),
            name("registry.npmjs.org", 443),
            "{raw}"
        );
    }
    // Two trailing dots, an empty label, a leading dot: not a name.
    for raw in ["a..b:443", "registry.npmjs.org..:443", ".a.b:443", ".:443"] {
        assert!(parse_authority(raw, None).is_err(), "{raw}");
    }
}

#[test]
fn international_names_only_in_punycode() {
    assert_eq!(
        parse_authority("xn--bcher-kva.example:443", None).unwrap(),
        name("xn--bcher-kva.example", 443)
    );
    assert_eq!(
        parse_authority("XN--BCHER-KVA.example:443", None).unwrap(),
        name("xn--bcher-kva.example", 443)
    );
    for raw in [
        "bücher.example:443",
        "registry\u{ff0e}npmjs.org:443",
        "ｇｉｔｈｕｂ.com:443",
    ] {
        let why = parse_authority(raw, None).unwrap_err();
        assert!(why.contains("punycode"), "{why}");
    }
}

#[test]
fn percent_encoding_and_userinfo_are_refused() {
    for raw in [
        "github%2ecom:443",
        "github.com%00.evil:443",
        "[fe80::1%25eth0]:443",
    ] {
        assert!(
            parse_authority(raw, None).unwrap_err().contains("percent"),
            "{raw}"
        );
    }
    for raw in [
        "user@github.com:443",
        "github.com:443@evil.test:443",
        "a:b@github.com",
    ] {
        assert!(
            parse_authority(raw, Some(80))
                .unwrap_err()
                .contains("userinfo"),
            "{raw}"
        );
    }
}

#[test]
fn ports_must_be_in_range_and_canonical() {
    for raw in [
        "github.com:0",
        "github.com:65536",
        "github.com:99999",
        "github.com:",
        "github.com:+443",
        "github.com:0443",
        "github.com:44 3",
        "github.com:https",
        "github.com:-1",
    ] {
        assert!(parse_authority(raw, Some(80)).is_err(), "{raw}");
    }
    assert_eq!(
        parse_authority("github.com:65535", None).unwrap(),
        name("github.com", 65535)
    );
    // A required port; a default one.
    assert!(parse_authority("github.com", None).is_err());
    assert_eq!(
        parse_authority("github.com", Some(80)).unwrap(),
        name("github.com", 80)
    );
}

#[test]
fn ipv4_in_every_resolver_form_is_the_address() {
    for raw in [
        "127.0.0.1",
        "127.1",
        "127.0.1",
        "0x7f.0.0.1",
        "0x7F.1",
        "0177.0.0.1",
        "017700000001",
        "2130706433",
        "0x7f000001",
        "127.0.0.1.",
    ] {
        assert_eq!(
            parse_authority(&format!("{raw}:80"), None).unwrap(),
            v4([127, 0, 0, 1], 80),
            "{raw}"
        );
    }
    assert_eq!(
        parse_authority("169.254.169.254:80", None).unwrap(),
        v4([169, 254, 169, 254], 80)
    );
    assert_eq!(
        parse_authority("0xa9fea9fe:80", None).unwrap(),
        v4([169, 254, 169, 254], 80)
    );
    // Ends in a number but no address: refused, never read as a name.
    for raw in [
        "1.2.3.256",
        "1.2.3.4.5",
        "256.1.1.1",
        "08.1.1.1",
        "foo.123",
        "1.2.3.0x100",
        "4294967296",
    ] {
        assert!(
            parse_authority(&format!("{raw}:80"), None).is_err(),
            "{raw}"
        );
    }
    // A name that merely has digits is a name.
    assert_eq!(
        parse_authority("1password.com:443", None).unwrap(),
        name("1password.com", 443)
    );
}

#[test]
fn ipv6_literals_in_brackets_canonically() {
    let loop6 = Target {
        host: Host::Ip("::1".parse().unwrap()),
        port: 443,
    };
    for raw in ["[::1]:443", "[0:0:0:0:0:0:0:1]:443", "[0000::0001]:443"] {
        assert_eq!(parse_authority(raw, None).unwrap(), loop6, "{raw}");
    }
    // A mapped IPv4 address is that IPv4 address.
    assert_eq!(
        parse_authority("[::ffff:127.0.0.1]:443", None).unwrap(),
        v4([127, 0, 0, 1], 443)
    );
    assert_eq!(
        parse_authority("[::ffff:7f00:1]:443", None).unwrap(),
        v4([127, 0, 0, 1], 443)
    );
    for raw in ["::1:443", "[::1:443", "[::1]x:443", "[nothex]:443", "[::1]"] {
        assert!(parse_authority(raw, None).is_err(), "{raw}");
    }
    assert_eq!(parse_authority("[::1]", Some(80)).unwrap().port, 80);
}

#[test]
fn allow_entries_parse_or_name_the_form() {
    assert_eq!(
        parse_allow("Registry.npmjs.org:443").unwrap(),
        AllowEntry::Exact(name("registry.npmjs.org", 443))
    );
    assert_eq!(
        parse_allow("*.crates.io:443").unwrap(),
        AllowEntry::Suffix {
            suffix: "crates.io".into(),
            port: 443
        }
    );
    assert_eq!(
        parse_allow("10.1.2.3:8080").unwrap(),
        AllowEntry::Exact(v4([10, 1, 2, 3], 8080))
    );
    for bad in [
        "github.com",
        "github.com:0",
        "*.github.com",
        "*github.com:443",
        "a.*.com:443",
        "*.1.2.3.4:443",
        "https://github.com:443",
        "bücher.de:443",
        "",
    ] {
        let why = parse_allow(bad).unwrap_err();
        assert!(
            why.contains("expected HOST:PORT or *.SUFFIX:PORT"),
            "{bad}: {why}"
        );
        assert!(why.contains(&format!("{bad:?}")), "{why}");
    }
    for d in DEFAULT_ALLOW {
        assert!(parse_allow(d).is_ok(), "{d}");
    }
}

#[test]
fn suffixes_match_names_strictly_under_them_on_their_port() {
    let list = vec![
        parse_allow("*.crates.io:443").unwrap(),
        parse_allow("github.com:443").unwrap(),
    ];
    assert!(allowed(&list, &name("static.crates.io", 443)));
    assert!(allowed(&list, &name("a.b.crates.io", 443)));
    assert!(!allowed(&list, &name("crates.io", 443)));
    assert!(!allowed(&list, &name("evilcrates.io", 443)));
    assert!(!allowed(&list, &name("static.crates.io", 80)));
    assert!(allowed(&list, &name("github.com", 443)));
    assert!(!allowed(&list, &name("api.github.com", 443)));
    assert!(!allowed(&list, &name("github.com.evil.test", 443)));
}

#[test]
fn resolve_entries_map_a_name_to_an_address() {
    assert_eq!(
        parse_resolve("Registry.test=127.0.0.1").unwrap(),
        ("registry.test".into(), IpAddr::V4(Ipv4Addr::LOCALHOST))
    );
    assert_eq!(
        parse_resolve("v6.test=[::1]").unwrap().1,
        "::1".parse::<IpAddr>().unwrap()
    );
    for bad in [
        "registry.test",
        "registry.test=",
        "registry.test=localhost",
        "1.2.3.4=1.2.3.4",
        "a.test:443=1.2.3.4",
        "=1.2.3.4",
    ] {
        let why = parse_resolve(bad).unwrap_err();
        assert!(why.contains("expected HOST=IP"), "{bad}: {why}");
    }
}

#[test]
fn the_decision_denies_unlisted_dials_listed_literals_and_mapped_names() {
    let list: Vec<AllowEntry> = ["registry.test:443", "127.0.0.1:8080", "lookup.test:443"]
        .iter()
        .map(|e| parse_allow(e).unwrap())
        .collect();
    let mut resolve = BTreeMap::new();
    resolve.insert("registry.test".to_string(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!(
        decide(&list, &resolve, &name("registry.test", 443)),
        Verdict::Dial(IpAddr::V4(Ipv4Addr::LOCALHOST))
    );
    assert_eq!(
        decide(&list, &resolve, &name("lookup.test", 443)),
        Verdict::Lookup("lookup.test".into())
    );
    assert_eq!(
        decide(&list, &resolve, &name("denied.test", 443)),
        Verdict::Denied("denied.test:443 is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow denied.test:443".into())
    );
    // The same address in another spelling is the listed literal; unlisted literals are not.
    let hex = parse_authority("0x7f.1:8080", None).unwrap();
    assert!(matches!(decide(&list, &resolve, &hex), Verdict::Dial(_)));
    let meta = parse_authority("169.254.169.254:80", None).unwrap();
    assert_eq!(
        decide(&list, &resolve, &meta),
        Verdict::Denied("169.254.169.254:80 is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow 169.254.169.254:80".into())
    );
    // A mapping does not allow a name by itself.
    let mut r2 = resolve.clone();
    r2.insert("other.test".into(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert!(matches!(
        decide(&list, &r2, &name("other.test", 443)),
        Verdict::Denied(_)
    ));
}

#[test]
fn non_public_addresses_are_named() {
    for (ip, kind) in [
        ("127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("169.254.169.254", "link-local (cloud metadata)"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast or reserved"),
        ("255.255.255.255", "multicast or reserved"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00::1", "private (unique local)"),
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "link-local (cloud metadata)"),
        ("64:ff9b::a9fe:a9fe", "link-local (cloud metadata)"),
        ("::127.0.0.1", "loopback"),
    ] {
        assert_eq!(non_public(ip.parse().unwrap()), Some(kind), "{ip}");
    }
    for ip in [
        "1.1.1.1",
        "172.32.0.1",
        "100.128.0.1",
        "151.101.0.1",
        "2606:4700::1111",
    ] {
        assert_eq!(non_public(ip.parse().unwrap()), None, "{ip}");
    }
}

#[test]
fn relayed_ranges_and_the_hosts_own_addresses_are_refused() {
    let relay = "6to4 (relayed to an IPv4 address)";
    let teredo = "Teredo (relayed to an IPv4 address)";
    let nat64 = "local-use NAT64 (translated to an IPv4 address)";
    // Public addresses stand in for the host's own: a pure check, nothing is dialled.
    let own: Vec<IpAddr> = ["93.184.216.34", "2606:2800:220:1::1"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let local = "local (this host's own)";
    for (ip, kind) in [
        ("2002::1", relay),
        ("2002:5db8:d822::1", relay),
        ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", relay),
        ("2001::1", teredo),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", teredo),
        ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", teredo),
        ("64:ff9b:1::1", nat64),
        ("64:ff9b:1:ffff:ffff:ffff:5db8:d822", nat64),
        ("93.184.216.34", local),
        ("::ffff:93.184.216.34", local),
        ("::ffff:5db8:d822", local),
        ("2606:2800:220:1::1", local),
        // The compatible and NAT64 forms of any IPv4 address were refused already.
        ("::93.184.216.34", "reserved"),
        ("64:ff9b::5db8:d822", "reserved"),
        ("10.1.2.3", "private"),
    ] {
        assert_eq!(refused(ip.parse().unwrap(), &own), Some(kind), "{ip}");
    }
    for ip in [
        "2001:1::1",
        "2001:4860::8888",
        "2003::1",
        "64:ff9b:2::1",
        "93.184.216.35",
        "::ffff:93.184.216.35",
        "2606:2800:220:1::2",
    ] {
        assert_eq!(refused(ip.parse().unwrap(), &own), None, "{ip}");
    }
    // Without the host's addresses, its own is a public address like any other.
    assert_eq!(refused("93.184.216.34".parse().unwrap(), &[]), None);
}

#[test]
fn the_host_header_must_be_one_and_name_the_target() {
    let t = name("registry.test", 80);
    assert!(host_header(&[b"registry.test"], &t, 80).is_ok());
    assert!(host_header(&[b"REGISTRY.test.:80"], &t, 80).is_ok());
    assert!(host_header(&[], &t, 80).unwrap_err().contains("no Host"));
    assert!(
        host_header(&[b"registry.test", b"registry.test"], &t, 80)
            .unwrap_err()
            .contains("more than one")
    );
    for other in [
        &b"evil.test"[..],
        b"registry.test:8080",
        b"user@registry.test",
        b"127.0.0.1",
        b"registry.test%2e",
    ] {
        assert!(host_header(&[other], &t, 80).is_err(), "{other:?}");
    }
    let why = host_header(&[b"evil.test"], &t, 80).unwrap_err();
    assert_eq!(
        why,
        "the Host header evil.test:80 does not match the target registry.test:80"
    );
}

#[test]
fn the_server_name_must_be_the_connect_host() {
    let t = name("registry.test", 443);
    assert!(sni_matches(Some("registry.test"), &t).is_ok());
    assert!(sni_matches(Some("Registry.Test."), &t).is_ok());
    assert!(sni_matches(None, &t).unwrap_err().contains("no SNI"));
    assert!(
        sni_matches(Some("evil.test"), &t)
            .unwrap_err()
            .contains("not the CONNECT host")
    );
    assert!(sni_matches(Some("127.0.0.1"), &t).is_err());
    let ip = v4([127, 0, 0, 1], 443);
    assert!(sni_matches(None, &ip).is_ok());
    assert!(sni_matches(Some("registry.test"), &ip).is_err());
}

#[test]
fn the_sni_of_a_real_client_hello_meets_the_rule() {
    let t = name("registry.test", 443);
    let hello = super::super::sni::tests::rustls_hello("registry.test");
    match super::super::sni::client_hello(&hello) {
        super::super::sni::Hello::Parsed(sni) => assert!(sni_matches(sni.as_deref(), &t).is_ok()),
        other => panic!("{other:?}"),
    }
    let hello = super::super::sni::tests::rustls_hello("elsewhere.test");
    match super::super::sni::client_hello(&hello) {
        super::super::sni::Hello::Parsed(sni) => assert!(sni_matches(sni.as_deref(), &t).is_err()),
        other => panic!("{other:?}"),
    }
}
