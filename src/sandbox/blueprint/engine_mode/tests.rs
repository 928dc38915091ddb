use super::*;
use crate::host::HostOs;

#[test]
fn keep_id_only_for_rootless_podman() {
    let keep = |podman, rootless| EngineMode::decide(podman, rootless, false, "2", None).keep_id;
    assert!(keep(true, true));
    assert!(!keep(true, false));
    assert!(!keep(false, true), "rootless Docker maps the user itself");
    assert!(!keep(false, false));
    assert!(
        !EngineMode::decide(true, true, true, "2", None).keep_id,
        "a Podman machine shares files through its VM"
    );
}

#[test]
fn limits_are_unenforced_only_rootless_on_cgroup_v1() {
    for (rootless, version, enforced) in [
        (true, "1", false),
        (true, "v1", false),
        (true, "2", true),
        (true, "v2", true),
        (true, "", true),
        (false, "1", true),
        (false, "v1", true),
        (false, "2", true),
    ] {
        assert_eq!(
            limits_enforceable(rootless, version),
            enforced,
            "rootless {rootless}, cgroup {version:?}"
        );
        let mode = EngineMode::decide(true, rootless, false, version, Some(RouteKind::Socket));
        assert_eq!(mode.limits_enforced, enforced);
        assert_eq!(mode.limits_warning().is_some(), !enforced);
    }
    let warning = EngineMode::decide(true, true, false, "1", None)
        .limits_warning()
        .unwrap();
    assert!(warning.contains("cgroup v1") && warning.contains("cgroup v2"));
    assert!(warning.contains("Delegate=yes"), "{warning}");
}

#[test]
fn slirp4netns_only_for_the_tcp_route_on_rootless_podman() {
    use NetworkMode::*;
    for (podman, rootless, vm, route, mode) in [
        (true, true, false, Some(RouteKind::Tcp), SlirpHostLoopback),
        (true, true, false, Some(RouteKind::Socket), PerHub),
        (true, true, false, None, PerHub),
        (true, true, true, Some(RouteKind::Tcp), PerHub),
        (true, false, false, Some(RouteKind::Tcp), PerHub),
        (false, true, false, Some(RouteKind::Tcp), PerHub),
        (false, false, false, Some(RouteKind::Tcp), PerHub),
    ] {
        assert_eq!(
            EngineMode::decide(podman, rootless, vm, "2", route).network,
            mode,
            "podman {podman}, rootless {rootless}, vm {vm}, {route:?}"
        );
    }
    let slirp = EngineMode::decide(true, true, false, "2", Some(RouteKind::Tcp));
    assert_eq!(slirp.broker_host_entry(), "host.docker.internal:10.0.2.2");
    assert_eq!(
        EngineMode::default().broker_host_entry(),
        "host.docker.internal:host-gateway"
    );
}

#[test]
fn the_default_is_rootful() {
    assert_eq!(
        EngineMode::decide(false, false, false, "2", Some(RouteKind::Socket)),
        EngineMode::default()
    );
    assert!(EngineMode::default().limits_enforced);
}

#[test]
fn route_choice_parses_and_routes() {
    assert_eq!(RouteChoice::parse(None, "x").unwrap(), RouteChoice::Auto);
    for (v, c) in [
        ("", RouteChoice::Auto),
        ("auto", RouteChoice::Auto),
        ("socket", RouteChoice::Socket),
        (" tcp ", RouteChoice::Tcp),
    ] {
        assert_eq!(RouteChoice::parse(Some(v), "x").unwrap(), c, "{v:?}");
    }
    for bad in ["TCP", "udp", "sock", "1"] {
        let e = RouteChoice::parse(Some(bad), "brokerTransport").unwrap_err();
        assert_eq!(e.code(), "OPTIONS_INVALID");
        let text = e.to_string();
        assert!(
            text.contains("brokerTransport") && text.contains(bad),
            "{text}"
        );
        assert!(text.contains("'auto', 'socket' or 'tcp'"), "{text}");
    }
    for os in [HostOs::Linux, HostOs::MacOs, HostOs::Windows] {
        for vm in [false, true] {
            assert_eq!(
                RouteChoice::Auto.route(os, vm),
                crate::broker::grant::route_for(os, vm)
            );
            assert_eq!(RouteChoice::Tcp.route(os, vm), RouteKind::Tcp);
            assert_eq!(RouteChoice::Socket.route(os, vm), RouteKind::Socket);
        }
    }
    assert_eq!(
        RouteChoice::Auto.route(HostOs::Linux, false),
        RouteKind::Socket
    );
}
