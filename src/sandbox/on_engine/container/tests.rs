use super::*;
use crate::sandbox::blueprint::spec::{Bind, VolumeMount};
use std::collections::BTreeMap;

pub(in crate::sandbox) fn spec(extra_hosts: Vec<String>) -> ContainerSpec {
    ContainerSpec {
        name: "po-o-w".into(),
        image: "po-sandbox:x".into(),
        labels: BTreeMap::from([("po.owner".to_string(), "o".to_string())]),
        env: BTreeMap::from([("PO_SANDBOX".to_string(), "1".to_string())]),
        cmd: vec!["node".into(), "/opt/po/s.js".into()],
        interpreter: "node".into(),
        working_dir: "/w".into(),
        user: "1000:1000".into(),
        binds: vec![Bind {
            source: "/opt/bundle".into(),
            target: "/opt/po".into(),
            read_only: true,
        }],
        volumes: vec![VolumeMount {
            name: "po-o-w-home".into(),
            target: "/po-home".into(),
            read_only: false,
        }],
        container_port: 7300,
        pids_limit: 2048,
        extra_hosts,
        run_flags: Default::default(),
        limits: crate::sandbox::blueprint::spec::Limits {
            memory: 1 << 30,
            nano_cpus: 1_000_000_000,
            cpu_shares: 512,
        },
        read_only_root: true,
        network_mode: Default::default(),
        workspace_mode: Default::default(),
        tmpfs: crate::sandbox::blueprint::spec::WRITABLE_TMPFS
            .iter()
            .map(|(p, o)| (p.to_string(), o.to_string()))
            .collect(),
        health: crate::sandbox::blueprint::spec::HealthProbe {
            test: vec!["CMD".into(), "node".into(), "-e".into(), "probe".into()],
            interval_ns: 15_000_000_000,
            timeout_ns: 5_000_000_000,
            retries: 3,
            start_period_ns: 60_000_000_000,
        },
        network: "po-net-o".into(),
        per_hub_network: true,
        keep_id: false,
        limits_enforced: true,
        seccomp_file: "/po-home/seccomp/x.json".into(),
        spec_hash: "h".into(),
    }
}

#[test]
fn the_engine_body_carries_the_hardening() {
    let body = create_body(&spec(vec![]), false);
    let hc = body.host_config.unwrap();
    assert_eq!(hc.cap_drop.unwrap(), ["ALL"]);
    let opts = hc.security_opt.unwrap();
    assert_eq!(opts[0], "no-new-privileges");
    assert!(
        crate::sandbox::blueprint::spec::seccomp::is_ours(&opts[1]),
        "{}",
        &opts[1][..40]
    );
    assert!(
        opts[1].starts_with("seccomp={"),
        "Docker takes the profile's text"
    );
    assert_eq!(opts.len(), 2);
    // Podman's Docker API takes a path.
    let podman = create_body(&spec(vec![]), true).host_config.unwrap();
    assert_eq!(
        podman.security_opt.unwrap(),
        ["no-new-privileges", "seccomp=/po-home/seccomp/x.json"]
    );
    assert_eq!(hc.pids_limit, Some(2048));
    assert_eq!(hc.privileged, Some(false));
    assert!(hc.ulimits.is_none() && hc.extra_hosts.is_none());
    assert_eq!(hc.init, Some(true));
    // Its namespace holder publishes the port; the container joins it and publishes nothing.
    assert!(hc.port_bindings.is_none() && body.exposed_ports.is_none());
    let mounts = hc.mounts.unwrap();
    assert_eq!(mounts.len(), 2);
    assert_eq!(mounts[0].read_only, Some(true));
    assert_eq!(body.user.as_deref(), Some("1000:1000"));
    assert_eq!(body.entrypoint, Some(vec![]));
    // CIS 5.11-5.13, 5.27 and the per-hub network.
    assert_eq!(hc.memory, Some(1 << 30));
    assert_eq!(hc.nano_cpus, Some(1_000_000_000));
    assert_eq!(hc.cpu_shares, Some(512));
    assert_eq!(hc.readonly_rootfs, Some(true));
    let tmpfs = hc.tmpfs.unwrap();
    let mut paths: Vec<&str> = tmpfs.keys().map(String::as_str).collect();
    paths.sort();
    assert_eq!(paths, ["/run", "/tmp", "/var/tmp"]);
    assert_eq!(hc.network_mode.as_deref(), Some("po-net-o"));
    let health = body.healthcheck.unwrap();
    assert_eq!(health.test.unwrap()[..3], ["CMD", "node", "-e"]);
    assert_eq!(
        (health.interval, health.retries),
        (Some(15_000_000_000), Some(3))
    );
}

#[test]
fn vm_engines_get_the_gateway_host_and_podman_its_ulimits() {
    let body = create_body(
        &spec(vec!["host.docker.internal:host-gateway".into()]),
        true,
    );
    let hc = body.host_config.unwrap();
    // The holder carries the host entry: a `container:` network mode takes none.
    assert!(hc.extra_hosts.is_none());
    let rules = crate::sandbox::on_engine::holder::Rules {
        text: "rules".into(),
        hash: "0123456789abcdef".into(),
        broker_host: Some("host.docker.internal".into()),
    };
    let holder = crate::sandbox::on_engine::holder::create_body(
        &spec(vec!["host.docker.internal:host-gateway".into()]),
        &rules,
        true,
        "net-id",
    );
    // No capability, nobody, idle; healthy while the rules' marker is refused.
    assert_eq!(holder.user.as_deref(), Some("65534:65534"));
    let probe = holder.healthcheck.as_ref().unwrap().test.clone().unwrap();
    assert_eq!(
        probe[2..],
        [
            "-e".to_string(),
            crate::sandbox::blueprint::firewall::mark_probe(false)
        ]
    );
    let hh = holder.host_config.unwrap();
    assert_eq!(hh.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(hh.cap_add, None);
    assert_eq!(hh.privileged, Some(false));
    assert_eq!(
        hh.extra_hosts.unwrap(),
        ["host.docker.internal:host-gateway"]
    );
    assert!(hh.ulimits.is_some());
    assert!(
        holder
            .env
            .unwrap()
            .contains(&"PO_NET_BROKER_HOST=host.docker.internal".to_string())
    );
    assert_eq!(hc.init, None, "Podman's init is often not installed");
    let limits = hc.ulimits.unwrap();
    assert_eq!(
        limits
            .iter()
            .map(|l| l.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["nofile", "nproc"]
    );
    assert!(
        limits
            .iter()
            .all(|l| l.soft == l.hard && l.soft.unwrap() > 0)
    );
}

/// Inspect data as an engine sends it.
fn inspected() -> ContainerInspectResponse {
    serde_json::from_value(serde_json::json!({
        "Id": "abc123",
        "Name": "/po-o-w",
        "Created": "2025-01-02T03:04:05Z",
        "State": { "Status": "running" },
        "Config": {
            "Image": "po-sandbox:x",
            "User": "1000:1000",
            "Labels": { "po.spec-hash": "h", "po.owner": "o" }
        },
        "HostConfig": {
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "PidsLimit": 2048,
            "NetworkMode": "bridge",
            "PidMode": "host",
            "PortBindings": { "7300/tcp": [{ "HostIp": "127.0.0.1", "HostPort": "" }] },
            "Devices": [{ "PathOnHost": "/dev/fuse" }]
        },
        "Mounts": [
            { "Type": "volume", "Name": "po-o-w-home", "Source": "/var/lib/x", "Destination": "/po-home", "RW": true },
            { "Type": "bind", "Source": "/opt/bundle", "Destination": "/opt/po", "RW": false }
        ],
        "NetworkSettings": {
            "Ports": {
                "22/tcp": null,
                "7300/tcp": [{ "HostIp": "127.0.0.1", "HostPort": "49153" }]
            }
        }
    }))
    .unwrap()
}

#[test]
fn inspect_data_reads_as_a_live_from() {
    let c = live_from(inspected(), Some(7300));
    assert_eq!(
        (
            c.id.as_str(),
            c.name.as_str(),
            c.image.as_str(),
            c.state.as_str()
        ),
        ("abc123", "po-o-w", "po-sandbox:x", "running")
    );
    assert!(c.running());
    assert_eq!(c.host_port, Some(49153));
    assert_eq!(c.labels["po.owner"], "o");
    assert!(c.created.is_some());
    let p = &c.posture;
    assert_eq!(p.cap_drop, ["ALL"]);
    assert!(p.cap_add.is_empty() && !p.privileged);
    assert_eq!(p.pids_limit, Some(2048));
    assert_eq!(p.user, "1000:1000");
    assert_eq!(p.spec_hash.as_deref(), Some("h"));
    assert_eq!(p.devices, 1);
    assert_eq!(
        p.namespaces[..2],
        [
            ("network".to_string(), "bridge".to_string()),
            ("pid".to_string(), "host".to_string())
        ]
    );
    assert_eq!(p.namespaces.len(), 5);
}

#[test]
fn mounts_and_ports_read_as_posture_tuples() {
    let info = inspected();
    assert_eq!(
        live_mounts(&info),
        [
            (
                "volume".into(),
                "po-o-w-home".into(),
                "/po-home".into(),
                true
            ),
            ("bind".into(), "/opt/bundle".into(), "/opt/po".into(), false)
        ]
    );
    let hc = info.host_config.clone().unwrap();
    assert_eq!(
        port_bindings(&hc),
        [("7300/tcp".to_string(), "127.0.0.1".to_string())]
    );
    assert_eq!(published_host_port(&info, Some(7300)), Some(49153));
    assert_eq!(published_host_port(&info, Some(22)), None);
    assert_eq!(published_host_port(&info, Some(1)), None);
    let empty = ContainerInspectResponse::default();
    assert_eq!(published_host_port(&empty, None), None);
    assert!(live_mounts(&empty).is_empty() && port_bindings(&HostConfig::default()).is_empty());
    let c = live_from(empty, None);
    assert_eq!((c.state.as_str(), c.posture.devices), ("", 0));
}

#[test]
fn run_flags_map_onto_the_host_config_and_keep_the_hardening() {
    let mut s = spec(vec![]);
    let flags: Vec<String> = [
        "--runtime=runsc",
        "--memory=512m",
        "--memory-swap=1g",
        "--cpus=0.5",
        "--cpu-shares=256",
        "--pids-limit=100",
        "--shm-size=64m",
        "--ulimit=nofile=1024:2048",
        "--gpus=device=0,1",
        "--dns=192.0.2.53",
        "--dns-search=example.test",
        "--dns-option=ndots:1",
        "--tmpfs=/scratch:size=1m",
        "--label=team=x",
        "--security-opt=label=level:s0",
    ]
    .iter()
    .map(|f| f.to_string())
    .collect();
    s.run_flags = crate::sandbox::blueprint::run_flags::parse(&flags, 2048).unwrap();
    s.pids_limit = 100;
    let hc = create_body(&s, false).host_config.unwrap();
    assert_eq!(hc.runtime.as_deref(), Some("runsc"));
    assert_eq!(hc.memory, Some(512 << 20));
    assert_eq!(hc.memory_swap, Some(1 << 30));
    assert_eq!(hc.nano_cpus, Some(500_000_000));
    assert_eq!(hc.cpu_shares, Some(256));
    assert_eq!(hc.pids_limit, Some(100));
    assert_eq!(hc.shm_size, Some(64 << 20));
    let u = hc.ulimits.unwrap();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].name.as_deref(), u[0].soft, u[0].hard),
        (Some("nofile"), Some(1024), Some(2048))
    );
    let gpu = &hc.device_requests.unwrap()[0];
    assert_eq!(
        gpu.device_ids.as_deref(),
        Some(&["0".to_string(), "1".to_string()][..])
    );
    assert_eq!(gpu.capabilities, Some(vec![vec!["gpu".to_string()]]));
    // DNS flags go to the namespace holder, whose network the container shares.
    assert!(hc.dns.is_none() && hc.dns_search.is_none() && hc.dns_options.is_none());
    let mut flagged = spec(vec![]);
    flagged.run_flags = s.run_flags.clone();
    let rules = crate::sandbox::on_engine::holder::Rules {
        text: "r".into(),
        hash: "h".into(),
        broker_host: None,
    };
    let holder = crate::sandbox::on_engine::holder::create_body(&flagged, &rules, false, "n")
        .host_config
        .unwrap();
    assert_eq!(holder.dns.unwrap(), ["192.0.2.53"]);
    assert_eq!(holder.dns_search.unwrap(), ["example.test"]);
    assert_eq!(holder.dns_options.unwrap(), ["ndots:1"]);
    let tmpfs = hc.tmpfs.unwrap();
    assert_eq!(tmpfs["/scratch"], "size=1m");
    assert!(tmpfs.contains_key("/tmp"), "the writable places stay");
    let opts = hc.security_opt.unwrap();
    assert_eq!(opts[0], "no-new-privileges");
    assert!(opts[1].starts_with("seccomp="));
    assert_eq!(opts[2..], ["label=level:s0"]);
    // The hardening is untouched.
    assert_eq!(hc.cap_drop.unwrap(), ["ALL"]);
    assert_eq!(hc.privileged, Some(false));
    assert!(hc.devices.is_none() && hc.binds.is_none());
    assert_eq!(hc.network_mode.as_deref(), Some("po-net-o"));
    assert_eq!(hc.readonly_rootfs, Some(true));
}

#[test]
fn no_run_flags_leave_the_body_as_it_was_and_a_ulimit_flag_replaces_podmans() {
    let hc = create_body(&spec(vec![]), false).host_config.unwrap();
    assert!(hc.runtime.is_none() && hc.memory_swap.is_none());
    // Without flags the limits and tmpfs mounts are the spec's own.
    assert_eq!(
        (hc.memory, hc.nano_cpus),
        (Some(1 << 30), Some(1_000_000_000))
    );
    assert_eq!(hc.tmpfs.unwrap().len(), 3);
    assert!(hc.dns.is_none() && hc.device_requests.is_none());
    let mut s = spec(vec![]);
    s.run_flags =
        crate::sandbox::blueprint::run_flags::parse(&["--ulimit=nofile=512".to_string()], 2048)
            .unwrap();
    let u = create_body(&s, true).host_config.unwrap().ulimits.unwrap();
    let names: Vec<_> = u
        .iter()
        .map(|u| (u.name.clone().unwrap(), u.soft.unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("nproc".to_string(), names[0].1),
            ("nofile".to_string(), 512)
        ]
    );
    let all =
        crate::sandbox::blueprint::run_flags::parse(&["--gpus=all".to_string()], 2048).unwrap();
    s.run_flags = all;
    let gpu = &create_body(&s, false)
        .host_config
        .unwrap()
        .device_requests
        .unwrap()[0];
    assert_eq!((gpu.count, gpu.driver.as_deref()), (Some(-1), Some("")));
}

#[test]
fn engine_times_compare_across_zones_and_precisions() {
    assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
    assert_eq!(
        rfc3339("2026-12-01T10:00:00.5Z"),
        Some((1_796_119_200, 500_000_000))
    );
    assert_eq!(
        rfc3339("2026-12-01T11:00:00.000000001+01:00"),
        Some((1_796_119_200, 1))
    );
    assert_eq!(
        rfc3339("2026-12-01T05:30:00-04:30"),
        rfc3339("2026-12-01T10:00:00Z")
    );
    assert!(rfc3339("2026-12-01T10:00:00.1Z") < rfc3339("2026-12-01T10:00:00.123Z"));
    assert_eq!(
        rfc3339("0001-01-01T00:00:00Z").map(|t| t.0),
        Some(-62_135_596_800)
    );
    for bad in [
        "",
        "yesterday",
        "2026-12-01",
        "2026-12-01T10:00:00",
        "2026-12-01T10:00Z",
    ] {
        assert_eq!(rfc3339(bad), None, "{bad}");
    }
}
