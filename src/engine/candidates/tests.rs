use super::*;

fn host(vars: &[(&str, &str)]) -> HostEnv {
    let mut h = HostEnv::with_vars(vars);
    h.os = HostOs::Linux;
    h.uid = 1000;
    h
}

fn engines(list: &[Candidate]) -> Vec<&'static str> {
    let mut seen: Vec<&'static str> = Vec::new();
    for c in list {
        if seen.last() != Some(&c.engine.as_str()) {
            seen.push(c.engine.as_str());
        }
    }
    seen
}

#[test]
fn order_is_docker_podman_nerdctl_finch() {
    let list = candidates(&host(&[("HOME", "/home/u")]), None).unwrap();
    assert_eq!(engines(&list), ["docker", "podman", "nerdctl", "finch"]);
    assert_eq!(
        list[0].endpoint,
        Endpoint::Unix("/var/run/docker.sock".into())
    );
    assert_eq!(list[0].source, "rootful");
}

#[test]
fn docker_locations_cover_rootless_desktop_and_colima() {
    let list = candidates(
        &host(&[("HOME", "/home/u"), ("XDG_RUNTIME_DIR", "/run/user/1000")]),
        Some("docker"),
    )
    .unwrap();
    let paths: Vec<String> = list.iter().map(|c| c.endpoint.to_string()).collect();
    assert_eq!(
        paths,
        [
            "unix:///var/run/docker.sock",
            "unix:///run/user/1000/docker.sock",
            "unix:///home/u/.docker/run/docker.sock",
            "unix:///home/u/.docker/desktop/docker.sock",
            "unix:///home/u/.colima/default/docker.sock",
            "unix:///home/u/.colima/docker.sock",
            "unix:///home/u/.orbstack/run/docker.sock",
            "unix:///home/u/.rd/docker.sock",
        ]
    );
    assert!(list[1].rootless && !list[1].vm);
    assert!(list[2..].iter().all(|c| c.vm));
}

#[test]
fn rootless_dir_defaults_to_run_user_uid() {
    let list = candidates(&host(&[]), Some("podman")).unwrap();
    assert_eq!(
        list[0].endpoint,
        Endpoint::Unix("/run/podman/podman.sock".into())
    );
    assert_eq!(
        list[1].endpoint,
        Endpoint::Unix("/run/user/1000/podman/podman.sock".into())
    );
    assert!(list[1].rootless);
    // No HOME: no home-relative places, and nothing relative either.
    assert!(
        list.iter()
            .all(|c| c.endpoint.socket_path().is_none_or(|p| p.is_absolute()))
    );
}

#[test]
fn docker_host_replaces_docker_defaults_only() {
    let list = candidates(
        &host(&[("DOCKER_HOST", "unix:///tmp/d.sock"), ("HOME", "/h")]),
        None,
    )
    .unwrap();
    let docker: Vec<_> = list
        .iter()
        .filter(|c| c.engine == EngineKind::Docker)
        .collect();
    assert_eq!(docker.len(), 1);
    assert_eq!(docker[0].endpoint, Endpoint::Unix("/tmp/d.sock".into()));
    assert_eq!(docker[0].source, "DOCKER_HOST");
    assert!(
        list.iter()
            .any(|c| c.engine == EngineKind::Podman && c.source == "rootful")
    );
}

#[test]
fn container_host_replaces_podman_defaults() {
    let list = candidates(
        &host(&[("CONTAINER_HOST", "unix:///tmp/p.sock")]),
        Some("podman"),
    )
    .unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].endpoint, Endpoint::Unix("/tmp/p.sock".into()));
    assert_eq!(list[0].source, "CONTAINER_HOST");
}

#[test]
fn engine_variable_and_option_pick_one_engine() {
    let h = host(&[("PO_SANDBOX_ENGINE", "Podman")]);
    assert_eq!(engines(&candidates(&h, None).unwrap()), ["podman"]);
    // The option wins over the variable.
    assert_eq!(
        engines(&candidates(&h, Some("docker")).unwrap()),
        ["docker"]
    );
    // An empty variable means detect.
    let h = host(&[("PO_SANDBOX_ENGINE", "")]);
    assert_eq!(candidates(&h, None).unwrap()[0].engine, EngineKind::Docker);
}

#[test]
fn unknown_engine_is_a_coded_error_listing_valid_ones() {
    let err = candidates(&host(&[("PO_SANDBOX_ENGINE", "bogus")]), None).unwrap_err();
    assert_eq!(err.code(), "ENGINE_UNKNOWN");
    let msg = err.to_string();
    assert!(
        msg.contains("'bogus'") && msg.contains("PO_SANDBOX_ENGINE"),
        "{msg}"
    );
    assert!(msg.contains("docker, podman, nerdctl, finch"), "{msg}");
    let err = candidates(&host(&[]), Some("lxc")).unwrap_err();
    assert!(err.to_string().contains("the engine option"));
}

#[test]
fn tls_docker_host_is_read_as_the_docker_cli_reads_it() {
    let docker_host = |vars: &[(&str, &str)]| {
        let mut all = vec![("DOCKER_HOST", "tcp://10.0.0.5"), ("HOME", "/home/me")];
        all.extend_from_slice(vars);
        candidates(&host(&all), Some("docker")).unwrap()[0]
            .endpoint
            .clone()
    };
    // DOCKER_TLS_VERIFY on for any non-empty value (the CLI's rule, "0" included); the
    // certificates from DOCKER_CERT_PATH, else the CLI's config folder.
    for on in ["1", "0", "yes"] {
        assert_eq!(
            docker_host(&[("DOCKER_TLS_VERIFY", on), ("DOCKER_CERT_PATH", "/certs")]),
            Endpoint::Tls {
                host: "10.0.0.5".into(),
                port: 2376,
                certs: "/certs".into()
            },
            "{on}"
        );
    }
    assert_eq!(
        docker_host(&[("DOCKER_TLS_VERIFY", "1")]),
        Endpoint::Tls {
            host: "10.0.0.5".into(),
            port: 2376,
            certs: "/home/me/.docker".into()
        }
    );
    assert_eq!(
        docker_host(&[("DOCKER_TLS_VERIFY", "")]),
        Endpoint::Tcp {
            host: "10.0.0.5".into(),
            port: 2375
        }
    );
    let Endpoint::Unsupported { why, .. } = docker_host(&[("DOCKER_TLS", "1")]) else {
        panic!("TLS without verification accepted")
    };
    assert!(why.contains("DOCKER_TLS_VERIFY=1"), "{why}");
}

#[test]
fn macos_marks_everything_vm() {
    let mut h = host(&[("HOME", "/Users/u"), ("TMPDIR", "/var/folders/x/T/")]);
    h.os = HostOs::MacOs;
    let list = candidates(&h, None).unwrap();
    assert!(list.iter().all(|c| c.vm));
    assert!(list.iter().any(|c| {
        c.endpoint
            .to_string()
            .ends_with("podman-machine-default-api.sock")
    }));
    assert!(!list.iter().any(|c| c.source == "rootless"));
}

/// Runs one engine's step alone on `h`.
fn step(h: &HostEnv, engine: EngineKind, f: fn(&mut Places)) -> Vec<Candidate> {
    let mut out = Vec::new();
    f(&mut Places {
        host: h,
        engine,
        out: &mut out,
    });
    out
}

#[test]
fn places_in_home_need_an_absolute_home() {
    for vars in [&[][..], &[("HOME", "home/u")][..]] {
        let h = host(vars);
        let list = step(&h, EngineKind::Docker, |p| p.push_in_home(&DOCKER_IN_HOME));
        assert!(list.is_empty(), "{list:?}");
    }
    let h = host(&[("HOME", "/home/u")]);
    let list = step(&h, EngineKind::Podman, |p| {
        p.push_in_home(&PODMAN_MACHINE_IN_HOME)
    });
    assert_eq!(list.len(), 3);
    assert!(
        list.iter()
            .all(|c| c.vm && !c.rootless && c.source == "Podman machine")
    );
    assert_eq!(
        list[0].endpoint,
        Endpoint::Unix("/home/u/.local/share/containers/podman/machine/podman.sock".into())
    );
}

#[test]
fn nerdctl_and_finch_steps_add_native_sockets_on_linux_only() {
    let mut h = host(&[("XDG_RUNTIME_DIR", "/run/user/7")]);
    let nerdctl = step(&h, EngineKind::Nerdctl, nerdctl_places);
    assert_eq!(
        nerdctl
            .iter()
            .map(|c| (c.source, c.rootless))
            .collect::<Vec<_>>(),
        [("containerd", false), ("rootless containerd", true)]
    );
    assert_eq!(
        nerdctl[1].endpoint,
        Endpoint::Unix("/run/user/7/containerd-rootless/containerd.sock".into())
    );
    let finch = step(&h, EngineKind::Finch, finch_places);
    assert_eq!(
        finch.iter().map(|c| c.vm).collect::<Vec<_>>(),
        [true, false]
    );
    h.os = HostOs::MacOs;
    assert_eq!(step(&h, EngineKind::Nerdctl, nerdctl_places).len(), 1);
    let finch = step(&h, EngineKind::Finch, finch_places);
    assert_eq!(finch.len(), 1);
    assert!(finch[0].vm);
}

#[test]
fn windows_uses_named_pipes_and_no_unix_sockets() {
    let mut h = host(&[("HOME", r"C:\Users\u")]);
    h.os = HostOs::Windows;
    let list = candidates(&h, None).unwrap();
    let docker: Vec<String> = list
        .iter()
        .filter(|c| c.engine == EngineKind::Docker)
        .map(|c| c.endpoint.to_string())
        .collect();
    assert_eq!(
        docker,
        [
            "npipe:////./pipe/docker_engine",
            "npipe:////./pipe/dockerDesktopLinuxEngine"
        ]
    );
    let podman: Vec<String> = list
        .iter()
        .filter(|c| c.engine == EngineKind::Podman)
        .map(|c| c.endpoint.to_string())
        .collect();
    assert_eq!(podman, ["npipe:////./pipe/podman-machine-default"]);
    assert!(
        list.iter()
            .filter(|c| c.engine.has_docker_api())
            .all(|c| c.vm && matches!(c.endpoint, Endpoint::NamedPipe(_))),
        "{list:?}"
    );
    // DOCKER_HOST still wins there.
    let mut h = host(&[("DOCKER_HOST", "npipe:////./pipe/custom")]);
    h.os = HostOs::Windows;
    let list = candidates(&h, Some("docker")).unwrap();
    assert_eq!(
        list[0].endpoint,
        Endpoint::NamedPipe("//./pipe/custom".into())
    );
}

#[test]
fn macos_has_no_rootful_linux_podman_socket() {
    let mut h = host(&[("HOME", "/Users/u"), ("TMPDIR", "/var/folders/x/T")]);
    h.os = HostOs::MacOs;
    let list = candidates(&h, Some("podman")).unwrap();
    let places: Vec<String> = list.iter().map(|c| c.endpoint.to_string()).collect();
    assert!(
        !places.iter().any(|p| p.contains("/run/podman")),
        "{places:?}"
    );
    assert!(
        places
            .iter()
            .any(|p| p.ends_with("podman-machine-default-api.sock"))
    );
    assert!(list.iter().all(|c| c.vm));
}
