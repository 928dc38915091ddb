use std::collections::HashMap;
use std::io::{Error as IoError, ErrorKind};
use std::path::{Path, PathBuf};

use super::*;
use crate::engine::candidates::candidates_reading;
use crate::engine::endpoint::Endpoint;

/// The docker CLI's files, in memory: absent paths read as `NotFound`.
struct Files(HashMap<PathBuf, String>);

impl Files {
    fn new() -> Files {
        Files(HashMap::new())
    }
    fn with(mut self, path: impl Into<PathBuf>, text: &str) -> Files {
        self.0.insert(path.into(), text.to_string());
        self
    }
    fn context(self, config: &str, name: &str, host: &str) -> Files {
        let meta = meta_dir(Path::new(config), name).join("meta.json");
        let text = format!(
            r#"{{"Name":"{name}","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"{host}","SkipTLSVerify":false}}}}}}"#
        );
        self.with(meta, &text)
    }
    fn read(&self) -> impl Fn(&Path) -> std::io::Result<String> + '_ {
        |p: &Path| {
            self.0
                .get(p)
                .cloned()
                .ok_or_else(|| IoError::from(ErrorKind::NotFound))
        }
    }
}

fn host(vars: &[(&str, &str)]) -> HostEnv {
    let mut h = HostEnv::with_vars(vars);
    h.os = crate::host::HostOs::Linux;
    h
}

fn resolved(vars: &[(&str, &str)], files: &Files) -> Result<Option<DockerContext>> {
    resolve(&host(vars), &files.read())
}

const HOME: (&str, &str) = ("HOME", "/home/u");

fn two_contexts() -> Files {
    Files::new()
        .with(
            "/home/u/.docker/config.json",
            r#"{"auths":{},"currentContext":"colima"}"#,
        )
        .context(
            "/home/u/.docker",
            "colima",
            "unix:///home/u/.colima/default/docker.sock",
        )
        .context(
            "/home/u/.docker",
            "orbstack",
            "unix:///home/u/.orbstack/run/docker.sock",
        )
}

#[test]
fn meta_folder_is_the_sha256_of_the_name() {
    // sha256("default") and sha256("colima"), as `docker context inspect` shows them.
    assert_eq!(
        meta_dir(Path::new("/c"), "default"),
        PathBuf::from(
            "/c/contexts/meta/37a8eec1ce19687d132fe29051dca629d164e2c4958ba141d5f4133a33f0688f"
        )
    );
    let colima = meta_dir(Path::new("/c"), "colima");
    assert_eq!(colima.parent().unwrap(), Path::new("/c/contexts/meta"));
    assert_eq!(colima.file_name().unwrap().len(), 64);
}

#[test]
fn docker_host_beats_every_context() {
    let files = two_contexts();
    let vars = [
        HOME,
        ("DOCKER_HOST", "unix:///x.sock"),
        ("DOCKER_CONTEXT", "orbstack"),
    ];
    assert_eq!(resolved(&vars, &files).unwrap(), None);
    // Even a malformed config is not read then.
    let broken = Files::new().with("/home/u/.docker/config.json", "{");
    assert_eq!(
        resolved(&[HOME, ("DOCKER_HOST", "unix:///x.sock")], &broken).unwrap(),
        None
    );
}

#[test]
fn docker_context_beats_current_context() {
    let ctx = resolved(&[HOME, ("DOCKER_CONTEXT", "orbstack")], &two_contexts())
        .unwrap()
        .unwrap();
    assert_eq!(ctx.name, "orbstack");
    assert_eq!(ctx.source, "DOCKER_CONTEXT");
    assert_eq!(ctx.host, "unix:///home/u/.orbstack/run/docker.sock");
}

#[test]
fn current_context_of_the_config_file() {
    let ctx = resolved(&[HOME], &two_contexts()).unwrap().unwrap();
    assert_eq!(
        (ctx.name.as_str(), ctx.source, ctx.host.as_str()),
        (
            "colima",
            "currentContext",
            "unix:///home/u/.colima/default/docker.sock"
        )
    );
}

#[test]
fn docker_config_moves_the_folder() {
    let files = Files::new()
        .with("/etc/dc/config.json", r#"{"currentContext":"remote"}"#)
        .context("/etc/dc", "remote", "tcp://10.0.0.5:2375");
    let ctx = resolved(&[HOME, ("DOCKER_CONFIG", "/etc/dc")], &files)
        .unwrap()
        .unwrap();
    assert_eq!(ctx.host, "tcp://10.0.0.5:2375");
    // A relative DOCKER_CONFIG is ignored, as HOME's folder then has no config.
    assert_eq!(
        resolved(&[HOME, ("DOCKER_CONFIG", "dc")], &files).unwrap(),
        None
    );
}

#[test]
fn defaults_when_nothing_or_default_is_chosen() {
    let none = Files::new();
    assert_eq!(resolved(&[HOME], &none).unwrap(), None);
    assert_eq!(resolved(&[], &none).unwrap(), None);
    let files = Files::new().with("/home/u/.docker/config.json", r#"{"auths":{}}"#);
    assert_eq!(resolved(&[HOME], &files).unwrap(), None);
    let files = Files::new().with("/home/u/.docker/config.json", r#"{"currentContext":""}"#);
    assert_eq!(resolved(&[HOME], &files).unwrap(), None);
    // `default` is the defaults, from either place, without any meta file.
    let files = Files::new().with(
        "/home/u/.docker/config.json",
        r#"{"currentContext":"default"}"#,
    );
    assert_eq!(resolved(&[HOME], &files).unwrap(), None);
    assert_eq!(
        resolved(&[HOME, ("DOCKER_CONTEXT", "default")], &two_contexts()).unwrap(),
        None
    );
}

fn err(vars: &[(&str, &str)], files: &Files) -> String {
    let e = resolved(vars, files).unwrap_err();
    assert_eq!(e.code(), "ENGINE_CONTEXT_INVALID", "{e}");
    e.to_string()
}

#[test]
fn malformed_config_names_the_file_and_the_fix() {
    let files = Files::new().with("/home/u/.docker/config.json", "{\"currentContext\": ");
    let m = err(&[HOME], &files);
    assert!(
        m.contains("/home/u/.docker/config.json is not valid JSON"),
        "{m}"
    );
    assert!(m.contains("Fix or remove the file"), "{m}");
    let files = Files::new().with("/home/u/.docker/config.json", r#"{"currentContext": 7}"#);
    let m = err(&[HOME], &files);
    assert!(
        m.contains("currentContext in /home/u/.docker/config.json is 7"),
        "{m}"
    );
    assert!(m.contains("docker context use"), "{m}");
}

#[test]
fn missing_context_names_it_and_the_fix() {
    let m = err(&[HOME, ("DOCKER_CONTEXT", "gone")], &two_contexts());
    assert!(
        m.contains("the Docker context 'gone' (from DOCKER_CONTEXT=gone) does not exist"),
        "{m}"
    );
    assert!(m.contains("docker context ls"), "{m}");
    let files = Files::new().with(
        "/home/u/.docker/config.json",
        r#"{"currentContext":"lost"}"#,
    );
    let m = err(&[HOME], &files);
    assert!(
        m.contains("'lost' (from currentContext \"lost\" in /home/u/.docker/config.json)"),
        "{m}"
    );
    // DOCKER_CONTEXT without any folder to look in.
    let m = err(&[("DOCKER_CONTEXT", "colima")], &Files::new());
    assert!(m.contains("Set DOCKER_CONFIG"), "{m}");
}

#[test]
fn malformed_or_hostless_meta_names_the_file() {
    let meta = meta_dir(Path::new("/home/u/.docker"), "bad").join("meta.json");
    let files = Files::new().with(meta.clone(), "not json");
    let m = err(&[HOME, ("DOCKER_CONTEXT", "bad")], &files);
    assert!(m.contains(&format!("malformed {}", meta.display())), "{m}");
    let files = Files::new().with(meta.clone(), r#"{"Name":"bad","Endpoints":{}}"#);
    let m = err(&[HOME, ("DOCKER_CONTEXT", "bad")], &files);
    assert!(m.contains("has no Endpoints.docker.Host"), "{m}");
    assert!(m.contains("docker context update bad"), "{m}");
}

#[test]
fn unreadable_config_is_an_error_too() {
    let read = |_: &Path| -> std::io::Result<String> { Err(ErrorKind::PermissionDenied.into()) };
    let e = resolve(&host(&[HOME]), &read).unwrap_err();
    assert_eq!(e.code(), "ENGINE_CONTEXT_INVALID");
    assert!(
        e.to_string()
            .contains("cannot read /home/u/.docker/config.json"),
        "{e}"
    );
}

#[test]
fn candidates_follow_the_context() {
    let files = two_contexts();
    let list = candidates_reading(&host(&[HOME]), None, &files.read()).unwrap();
    let docker: Vec<_> = list
        .iter()
        .filter(|c| c.engine.as_str() == "docker")
        .collect();
    assert_eq!(docker.len(), 1, "{docker:?}");
    assert_eq!(
        docker[0].endpoint,
        Endpoint::Unix("/home/u/.colima/default/docker.sock".into())
    );
    assert_eq!(docker[0].source, "currentContext");
    assert_eq!(docker[0].context.as_deref(), Some("colima"));
    // Podman's places are untouched.
    assert!(list.iter().any(|c| c.engine.as_str() == "podman"));
    // DOCKER_HOST still wins over the context.
    let list = candidates_reading(
        &host(&[HOME, ("DOCKER_HOST", "tcp://127.0.0.1:2375")]),
        Some("docker"),
        &files.read(),
    )
    .unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].source, list[0].context.as_deref()),
        ("DOCKER_HOST", None)
    );
    // Only Podman: Docker's config is never read, so a broken one does not matter.
    let broken = Files::new().with("/home/u/.docker/config.json", "{");
    assert!(candidates_reading(&host(&[HOME]), Some("podman"), &broken.read()).is_ok());
    let e = candidates_reading(&host(&[HOME]), Some("docker"), &broken.read()).unwrap_err();
    assert_eq!(e.code(), "ENGINE_CONTEXT_INVALID");
}

#[test]
fn a_context_with_tls_material_is_reached_over_tls_and_one_that_skips_the_check_is_refused() {
    let config = "/home/u/.docker";
    let with_tls = Files::new()
        .context(config, "box", "tcp://10.0.0.5:2376")
        .with(tls_dir(Path::new(config), "box").join("ca.pem"), "PEM");
    let ctx = resolved(&[HOME, ("DOCKER_CONTEXT", "box")], &with_tls)
        .unwrap()
        .unwrap();
    let dir = tls_dir(Path::new(config), "box");
    assert!(dir.ends_with("docker"), "{dir:?}");
    assert_eq!(
        dir.parent().unwrap().parent().unwrap(),
        Path::new("/home/u/.docker/contexts/tls")
    );
    assert_eq!(ctx.tls, Tls::Verify(dir.clone()));
    let list = candidates_reading(
        &host(&[HOME, ("DOCKER_CONTEXT", "box")]),
        Some("docker"),
        &with_tls.read(),
    )
    .unwrap();
    assert_eq!(
        list[0].endpoint,
        Endpoint::Tls {
            host: "10.0.0.5".into(),
            port: 2376,
            certs: dir
        }
    );
    // No material: plain TCP, as the CLI does.
    let plain = Files::new().context(config, "box", "tcp://10.0.0.5:2375");
    let ctx = resolved(&[HOME, ("DOCKER_CONTEXT", "box")], &plain)
        .unwrap()
        .unwrap();
    assert_eq!(ctx.tls, Tls::Off);
    // SkipTLSVerify: refused, with the reason.
    let meta = meta_dir(Path::new(config), "box").join("meta.json");
    let skip = Files::new().with(
        meta,
        r#"{"Name":"box","Endpoints":{"docker":{"Host":"tcp://10.0.0.5:2376","SkipTLSVerify":true}}}"#,
    );
    let list = candidates_reading(
        &host(&[HOME, ("DOCKER_CONTEXT", "box")]),
        Some("docker"),
        &skip.read(),
    )
    .unwrap();
    let Endpoint::Unsupported { why, .. } = &list[0].endpoint else {
        panic!("{:?}", list[0].endpoint)
    };
    assert!(why.contains("SkipTLSVerify"), "{why}");
}
