use super::*;
use serde_json::json;

fn p() -> PathBuf {
    PathBuf::from("/home/u/.po/container-runtime/1.0.0/container-runtime.json")
}

fn parse_value(v: Value) -> Result<ParsedRuntime> {
    parse(&p(), v.to_string().as_bytes())
}

/// A valid file with `key` set to `value` (or removed when `value` is None).
fn with(key: &str, value: Option<Value>) -> Value {
    let mut v = json!({ "entry": "/opt/po/server/main.js", "port": 7300 });
    let obj = v.as_object_mut().unwrap();
    match value {
        Some(x) => {
            obj.insert(key.to_string(), x);
        }
        None => {
            obj.remove(key);
        }
    }
    v
}

/// Asserts a RUNTIME_INVALID error with exactly `key`, and returns its message.
fn assert_invalid(r: Result<impl std::fmt::Debug>, want_key: &str) -> String {
    let err = r.expect_err("expected an error");
    assert_eq!(err.code(), "RUNTIME_INVALID", "{err}");
    let msg = err.to_string();
    match &err {
        Error::RuntimeInvalid { key, .. } => assert_eq!(key, want_key, "{msg}"),
        other => panic!("wrong variant: {other:?}"),
    }
    assert!(msg.contains(&format!(": {want_key}: ")), "{msg}");
    msg
}

fn bad(key: &str, value: Value, want_key: &str) -> String {
    assert_invalid(parse_value(with(key, Some(value))), want_key)
}

// ---- parse: whole file ----

#[test]
fn full_example_parses_to_exact_values() {
    let text = r#"{
        "entry": "/opt/po/server/main.js",
        "port": 7300,
        "args": ["--listen", "0.0.0.0"],
        "env": { "NODE_ENV": "production", "PATH": "/opt/po/node/bin:/usr/bin" },
        "healthPath": "/api/health",
        "interpreter": "/opt/po/node/bin/node"
    }"#;
    let parsed = parse(&p(), text.as_bytes()).unwrap();
    assert_eq!(
        parsed,
        ParsedRuntime {
            entry: "/opt/po/server/main.js".into(),
            port: 7300,
            args: vec!["--listen".into(), "0.0.0.0".into()],
            env: BTreeMap::from([
                ("NODE_ENV".to_string(), "production".to_string()),
                ("PATH".to_string(), "/opt/po/node/bin:/usr/bin".to_string()),
            ]),
            health_path: "/api/health".into(),
            interpreter: Some("/opt/po/node/bin/node".into()),
        }
    );
}

#[test]
fn minimal_file_gets_defaults() {
    let parsed = parse_value(json!({ "entry": "/opt/po/main.js", "port": 1 })).unwrap();
    assert_eq!(parsed.health_path, DEFAULT_HEALTH_PATH);
    assert_eq!(parsed.health_path, "/api/health");
    assert!(parsed.args.is_empty() && parsed.env.is_empty());
    assert_eq!(parsed.interpreter, None);
    assert_eq!(parsed.port, 1);
    let parsed = parse_value(with("port", Some(json!(65535)))).unwrap();
    assert_eq!(parsed.port, 65535);
}

#[test]
fn command_with_and_without_interpreter() {
    let parsed = parse_value(with("args", Some(json!(["--listen", "0.0.0.0"])))).unwrap();
    let mut bundle = RuntimeBundle::new("1.0.0".into(), "/d".into(), "/d/c.json".into(), parsed);
    assert_eq!(
        bundle.command(),
        ["node", "/opt/po/server/main.js", "--listen", "0.0.0.0"]
    );
    bundle.server.interpreter = Some("/opt/po/node/bin/node".into());
    bundle.server.args.clear();
    assert_eq!(
        bundle.command(),
        ["/opt/po/node/bin/node", "/opt/po/server/main.js"]
    );
}

#[test]
fn oversized_bytes_are_refused_with_the_cap() {
    let mut bytes = with("x", None).to_string().into_bytes();
    bytes.resize(MAX_FILE_BYTES as usize + 1, b' ');
    let msg = assert_invalid(parse(&p(), &bytes), "(file)");
    assert!(msg.contains("65536"), "{msg}");
    // Exactly at the cap is fine.
    bytes.pop();
    assert!(parse(&p(), &bytes).is_ok());
}

#[test]
fn invalid_utf8_is_refused() {
    let msg = assert_invalid(parse(&p(), b"{\"entry\": \"\xff\"}"), "(file)");
    assert!(msg.contains("UTF-8") && msg.contains("offset 11"), "{msg}");
}

#[test]
fn invalid_json_names_line_and_column() {
    let msg = assert_invalid(parse(&p(), b"{\n  \"entry\": ,\n}"), "(file)");
    assert!(msg.contains("not valid JSON"), "{msg}");
    assert!(msg.contains("line 2 column"), "{msg}");
    assert!(msg.contains("container-runtime.json"), "{msg}");
}

#[test]
fn empty_file_is_refused() {
    let msg = assert_invalid(parse(&p(), b""), "(file)");
    assert!(msg.contains("empty"), "{msg}");
    assert_invalid(parse(&p(), b" \n\t"), "(file)");
}

#[test]
fn top_level_must_be_an_object() {
    for (text, found) in [
        ("[]", "an array"),
        ("\"x\"", "a string"),
        ("7300", "a number"),
        ("null", "null"),
    ] {
        let msg = assert_invalid(parse(&p(), text.as_bytes()), "(file)");
        assert!(msg.contains("JSON object") && msg.contains(found), "{msg}");
    }
}

#[test]
fn byte_order_mark_is_ignored() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(with("x", None).to_string().bytes());
    assert_eq!(parse(&p(), &bytes).unwrap().port, 7300);
}

#[test]
fn unknown_key_is_named_with_the_known_ones() {
    let msg = bad("healthpath", json!("/x"), "healthpath");
    assert!(
        msg.contains("entry, port, args, env, healthPath, interpreter"),
        "{msg}"
    );
    // Reported in a stable order, before any other rule.
    let v = json!({ "zz": 1, "aa": 1, "port": 0 });
    assert_invalid(parse_value(v), "aa");
    // A hostile key is escaped and cut short.
    let err = parse_value(with(&format!("a\n{}", "b".repeat(500)), Some(json!(1))))
        .unwrap_err()
        .to_string();
    assert!(!err.contains('\n') && err.len() < 400, "{err}");
}

// ---- entry and interpreter ----

#[test]
fn entry_is_required_and_must_be_a_string() {
    let msg = assert_invalid(parse_value(with("entry", None)), "entry");
    assert!(msg.contains("required"), "{msg}");
    for v in [json!(1), json!(null), json!(["/opt/po/a"]), json!({})] {
        let msg = bad("entry", v, "entry");
        assert!(msg.contains("must be a string"), "{msg}");
    }
}

#[test]
fn paths_are_normalised() {
    for (raw, want) in [
        ("/opt/po/server/main.js", "/opt/po/server/main.js"),
        ("/opt/po//server/./main.js", "/opt/po/server/main.js"),
        ("//opt/po/main.js", "/opt/po/main.js"),
        ("/opt/./po/x", "/opt/po/x"),
    ] {
        let parsed = parse_value(with("entry", Some(json!(raw)))).unwrap();
        assert_eq!(parsed.entry, want, "{raw}");
        let parsed = parse_value(with("interpreter", Some(json!(raw)))).unwrap();
        assert_eq!(parsed.interpreter.as_deref(), Some(want), "{raw}");
    }
}

#[test]
fn paths_outside_the_mount_are_refused() {
    for key in ["entry", "interpreter"] {
        for (raw, says) in [
            ("", "must not be empty"),
            ("server/main.js", "relative"),
            ("opt/po/main.js", "relative"),
            ("/opt/poison/x", "inside /opt/po"),
            ("/opt/pox", "inside /opt/po"),
            ("/etc/passwd", "inside /opt/po"),
            ("/opt", "inside /opt/po"),
            ("/", "inside /opt/po"),
            ("/opt/po", "not /opt/po itself"),
            ("/opt/po/", "not /opt/po itself"),
            ("/opt/po/.", "not /opt/po itself"),
            ("/opt/po/server/", "not a folder"),
            ("/opt/po/server/.", "not a folder"),
            ("/opt/po/../po/main.js", "'..'"),
            ("/opt/po/a/../b.js", "'..'"),
            ("/opt/po/a/..", "'..'"),
            ("/opt/po/../../etc/passwd", "'..'"),
            ("/opt/po/a\0b", "NUL"),
        ] {
            let msg = bad(key, json!(raw), key);
            assert!(msg.contains(says), "{raw:?}: {msg}");
        }
        let msg = bad(key, json!(false), key);
        assert!(msg.contains("must be a string"), "{msg}");
    }
    // Names that merely contain dots are fine.
    let parsed = parse_value(with("entry", Some(json!("/opt/po/..x/.y/a..b")))).unwrap();
    assert_eq!(parsed.entry, "/opt/po/..x/.y/a..b");
}

// ---- port ----

#[test]
fn port_is_required_and_in_range() {
    let msg = assert_invalid(parse_value(with("port", None)), "port");
    assert!(msg.contains("required"), "{msg}");
    for v in [
        json!(0),
        json!(65536),
        json!(-1),
        json!(7300.5),
        json!(7300.0),
        json!(1e3),
        json!("7300"),
        json!(true),
        json!(null),
    ] {
        let msg = bad("port", v.clone(), "port");
        assert!(
            msg.contains("must be a whole number from 1 to 65535"),
            "{v}: {msg}"
        );
    }
    let msg = bad("port", json!(70000), "port");
    assert!(msg.contains("got 70000"), "{msg}");
}

// ---- args ----

#[test]
fn args_must_be_an_array_of_short_strings() {
    for v in [json!("--listen"), json!({}), json!(null), json!(1)] {
        let msg = bad("args", v, "args");
        assert!(msg.contains("must be an array of strings"), "{msg}");
    }
    let msg = bad("args", json!(["a", "b", 3]), "args[2]");
    assert!(msg.contains("must be a string, got a number"), "{msg}");
    bad("args", json!([null]), "args[0]");
    let msg = bad("args", json!(["ok", "x".repeat(4097)]), "args[1]");
    assert!(msg.contains("4096"), "{msg}");
    bad("args", json!(["a\0b"]), "args[0]");
    let msg = bad("args", json!(vec!["a"; 65]), "args");
    assert!(msg.contains("65 items") && msg.contains("64"), "{msg}");
    // At the limits is fine.
    // (64 items of 4096 bytes would break the 64 KiB file cap, so check each limit alone.)
    let parsed = parse_value(with("args", Some(json!(vec!["x"; 64])))).unwrap();
    assert_eq!(parsed.args.len(), 64);
    let parsed = parse_value(with("args", Some(json!(["x".repeat(4096)])))).unwrap();
    assert_eq!(parsed.args[0].len(), 4096);
    let parsed = parse_value(with("args", Some(json!([])))).unwrap();
    assert!(parsed.args.is_empty());
}

// ---- env ----

#[test]
fn env_must_be_an_object_of_strings() {
    for v in [json!([]), json!("A=B"), json!(null)] {
        let msg = bad("env", v, "env");
        assert!(msg.contains("must be an object"), "{msg}");
    }
    let msg = bad("env", json!({ "FOO": 1 }), "env.FOO");
    assert!(msg.contains("must be a string"), "{msg}");
    bad("env", json!({ "FOO": null }), "env.FOO");
    let msg = bad("env", json!({ "BIG": "x".repeat(32769) }), "env.BIG");
    assert!(msg.contains("32768"), "{msg}");
    let msg = bad("env", json!({ "NUL": "a\0b" }), "env.NUL");
    assert!(msg.contains("NUL"), "{msg}");
    let many: Map<String, Value> = (0..129).map(|i| (format!("V{i}"), json!("x"))).collect();
    let msg = bad("env", Value::Object(many), "env");
    assert!(msg.contains("129 entries") && msg.contains("128"), "{msg}");
    let ok: Map<String, Value> = (0..128).map(|i| (format!("V{i}"), json!("x"))).collect();
    assert_eq!(
        parse_value(with("env", Some(Value::Object(ok))))
            .unwrap()
            .env
            .len(),
        128
    );
    let parsed = parse_value(with(
        "env",
        Some(json!({ "BIG": "x".repeat(32768), "E": "" })),
    ))
    .unwrap();
    assert_eq!(parsed.env["E"], "");
}

#[test]
fn env_names_are_checked() {
    for name in ["1ABC", "A-B", "", "FOO BAR", "É", "A=B"] {
        let key = format!("env.{name}");
        let msg = bad("env", json!({ name: "v" }), &key);
        assert!(msg.contains("not a valid variable name"), "{msg}");
    }
    for name in ["_", "_x1", "a", "Node_ENV_2", "PATH", "PO_OTHER", "home"] {
        let parsed = parse_value(with("env", Some(json!({ name: "v" })))).unwrap();
        assert_eq!(parsed.env[name], "v");
    }
}

#[test]
fn reserved_env_names_are_refused() {
    for name in [
        "PO_SANDBOX",
        "PO_HOME",
        "PO_WORKSPACE",
        "PO_SANDBOX_TOKEN_FILE",
        "PO_BROKER_PROVIDERS",
        "PO_BROKER_SOCKET",
        "PO_BROKER_ADDRESS",
        "HOME",
        "PO_BROKER_",
        "PO_BROKER_TOKEN",
        "PO_BROKER_ANYTHING_ELSE",
    ] {
        let msg = bad("env", json!({ name: "x" }), &format!("env.{name}"));
        assert!(msg.contains("set by the sandbox layer"), "{msg}");
        assert!(msg.contains("PO_BROKER_*"), "{msg}");
    }
    // Only the exact prefix: other names that merely contain it are the bundle's.
    for name in ["PO_BROKERX", "MY_PO_BROKER_X", "po_broker_x"] {
        let env = json!({ name: "x" });
        let parsed = parse_value(with("env", Some(env))).unwrap();
        assert_eq!(
            parsed.env.get(name).map(String::as_str),
            Some("x"),
            "{name}"
        );
    }
}

// ---- healthPath ----

#[test]
fn health_path_rules() {
    for (v, says) in [
        (json!("api/health"), "start with '/'"),
        (json!(""), "start with '/'"),
        (json!("//evil.example/x"), "'//'"),
        (json!("/api health"), "printable ASCII"),
        (json!("/api\thealth"), "printable ASCII"),
        (json!("/api\u{7f}"), "printable ASCII"),
        (json!("/api\nHost: x"), "printable ASCII"),
        (json!("/gesundheit/ü"), "printable ASCII"),
        (json!("/api#x"), "'#'"),
        (json!(format!("/{}", "a".repeat(1024))), "1024"),
        (json!(null), "must be a string"),
        (json!(1), "must be a string"),
    ] {
        let msg = bad("healthPath", v.clone(), "healthPath");
        assert!(msg.contains(says), "{v}: {msg}");
    }
    for ok in ["/", "/healthz", "/api/health?probe=1&x=%20", "/a/b-c_d~e"] {
        let parsed = parse_value(with("healthPath", Some(json!(ok)))).unwrap();
        assert_eq!(parsed.health_path, ok);
    }
    let at_limit = format!("/{}", "a".repeat(1023));
    let parsed = parse_value(with("healthPath", Some(json!(at_limit)))).unwrap();
    assert_eq!(parsed.health_path.len(), 1024);
}

// ---- one step per key ----

#[test]
fn each_key_step_defaults_when_absent() {
    assert_eq!(check_known_keys(&Map::new()), Ok(()));
    assert_eq!(parse_args(None), Ok(Vec::new()));
    assert_eq!(parse_env(None), Ok(BTreeMap::new()));
    assert_eq!(parse_health_path(None).unwrap(), DEFAULT_HEALTH_PATH);
    assert_eq!(parse_interpreter(None), Ok(None));
    assert_eq!(parse_entry(None).unwrap_err().0, "entry");
    assert_eq!(parse_port(None).unwrap_err().0, "port");
}

#[test]
fn each_key_step_names_its_own_key() {
    let unknown = json!({ "port": 1, "b": 1, "a": 1 });
    assert_eq!(
        check_known_keys(unknown.as_object().unwrap())
            .unwrap_err()
            .0,
        "a"
    );
    assert_eq!(
        parse_entry(Some(&json!("/opt/po/./m.js"))).unwrap(),
        "/opt/po/m.js"
    );
    assert_eq!(parse_port(Some(&json!(65535))), Ok(65535));
    assert_eq!(
        parse_port(Some(&json!(65536))).unwrap_err().1,
        "must be a whole number from 1 to 65535: the port the server listens on, got 65536"
    );
    assert_eq!(parse_args(Some(&json!(["a", 1]))).unwrap_err().0, "args[1]");
    assert_eq!(
        parse_health_path(Some(&json!("x"))).unwrap_err().0,
        "healthPath"
    );
    assert_eq!(
        parse_interpreter(Some(&json!("/opt/po/bin/node"))),
        Ok(Some("/opt/po/bin/node".to_string()))
    );
    assert_eq!(
        parse_interpreter(Some(&json!(1))).unwrap_err().0,
        "interpreter"
    );
}

#[test]
fn env_entry_checks_name_then_reservation_then_value() {
    assert_eq!(parse_env_entry("FOO", &json!("v")), Ok("v".to_string()));
    let (key, rule) = parse_env_entry("1X", &json!(1)).unwrap_err();
    assert_eq!(key, "env.1X");
    assert!(rule.contains("not a valid variable name"), "{rule}");
    let (key, rule) = parse_env_entry("HOME", &json!(1)).unwrap_err();
    assert_eq!(key, "env.HOME");
    assert!(rule.contains("set by the sandbox layer"), "{rule}");
    let (key, rule) = parse_env_entry("FOO", &json!(1)).unwrap_err();
    assert_eq!(
        (key.as_str(), rule.as_str()),
        ("env.FOO", "must be a string, got a number")
    );
}

// ---- versions ----

#[test]
fn safe_versions() {
    for ok in [
        "1.0.0",
        "1.10.0-rc.1",
        "2024_01+build",
        "v1",
        "a",
        &"9".repeat(64),
    ] {
        assert!(is_safe_version(ok), "{ok}");
    }
    for no in [
        "",
        ".",
        "..",
        ".hidden",
        "../x",
        "a/b",
        "a\\b",
        "a b",
        "1.0\0",
        "é",
        &"9".repeat(65),
    ] {
        assert!(!is_safe_version(no), "{no:?}");
    }
}

#[test]
fn versions_compare_numerically_by_part() {
    use Ordering::*;
    for (a, b, want) in [
        ("1.10.0", "1.9.3", Greater),
        ("1.9.3", "1.10.0", Less),
        ("2.0.0", "10.0.0", Less),
        ("1.0.0", "1.0.0", Equal),
        ("1.0.0", "1.0", Greater),
        ("1.0.10", "1.0.9", Greater),
        ("1.a", "1.b", Less),
        ("1.10a", "1.9a", Less), // non-numeric parts compare as strings
        ("1.01", "1.1", Less),   // numerically equal: string order decides
        ("1.1", "1.01", Greater),
        (
            "99999999999999999999999.0",
            "99999999999999999999998.9",
            Greater,
        ),
    ] {
        assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
    }
}

// ---- locate ----

fn home() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn install(home: &Path, version: &str, contents: &[u8]) -> PathBuf {
    let dir = runtime_root(home).join(version);
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join(FILE_NAME);
    fs::write(&file, contents).unwrap();
    file
}

fn valid(port: u16) -> Vec<u8> {
    json!({ "entry": "/opt/po/server/main.js", "port": port })
        .to_string()
        .into_bytes()
}

fn assert_not_installed(r: Result<RuntimeBundle>) -> PathBuf {
    let err = r.expect_err("expected an error");
    assert_eq!(err.code(), "RUNTIME_NOT_INSTALLED", "{err}");
    assert!(err.to_string().contains("container-runtime"), "{err}");
    match err {
        Error::RuntimeNotInstalled { path } => path,
        other => panic!("wrong variant: {other:?}"),
    }
}

#[test]
fn runtime_root_is_under_po_home() {
    assert_eq!(
        runtime_root(Path::new("/h/.po")),
        PathBuf::from("/h/.po/container-runtime")
    );
}

#[test]
fn missing_root_is_not_installed() {
    let h = home();
    let path = assert_not_installed(locate(h.path(), None));
    assert_eq!(
        path,
        h.path()
            .join("container-runtime/<version>/container-runtime.json")
    );
}

#[test]
fn empty_root_is_not_installed() {
    let h = home();
    let root = runtime_root(h.path());
    fs::create_dir_all(&root).unwrap();
    assert_not_installed(locate(h.path(), None));
    // Files and unsafe names are not versions.
    fs::write(root.join("2.0.0"), "not a folder").unwrap();
    fs::create_dir(root.join(".3.0.0")).unwrap();
    fs::create_dir(root.join("4 0")).unwrap();
    assert_not_installed(locate(h.path(), None));
}

#[test]
fn root_that_is_a_file_is_not_installed() {
    let h = home();
    fs::write(runtime_root(h.path()), "x").unwrap();
    assert_not_installed(locate(h.path(), None));
    assert_not_installed(locate(h.path(), Some("1.0.0")));
}

#[test]
fn picks_the_highest_version() {
    let h = home();
    install(h.path(), "1.9.3", &valid(1));
    install(h.path(), "1.10.0", &valid(2));
    install(h.path(), "1.2.0", &valid(3));
    fs::create_dir(runtime_root(h.path()).join(".9.9.9")).unwrap();
    let b = locate(h.path(), None).unwrap();
    assert_eq!(b.version, "1.10.0");
    assert_eq!(b.server.port, 2);
    assert_eq!(b.dir, runtime_root(h.path()).join("1.10.0"));
    assert_eq!(b.json_path, b.dir.join(FILE_NAME));
    assert_eq!(b.server.health_path, "/api/health");
    assert_eq!(b.command(), ["node", "/opt/po/server/main.js"]);
}

#[test]
fn highest_version_without_file_is_not_installed_there() {
    let h = home();
    install(h.path(), "1.0.0", &valid(1));
    fs::create_dir_all(runtime_root(h.path()).join("2.0.0")).unwrap();
    let path = assert_not_installed(locate(h.path(), None));
    assert_eq!(path, runtime_root(h.path()).join("2.0.0").join(FILE_NAME));
}

#[test]
fn explicit_version_is_used() {
    let h = home();
    install(h.path(), "1.9.3", &valid(1));
    install(h.path(), "1.10.0", &valid(2));
    let b = locate(h.path(), Some("1.9.3")).unwrap();
    assert_eq!((b.version.as_str(), b.server.port), ("1.9.3", 1));
    let path = assert_not_installed(locate(h.path(), Some("3.0.0")));
    assert_eq!(path, runtime_root(h.path()).join("3.0.0").join(FILE_NAME));
}

#[test]
fn unsafe_version_is_refused() {
    let h = home();
    install(h.path(), "1.0.0", &valid(1));
    for v in [
        "../x",
        "..",
        ".",
        "",
        "a/b",
        "/abs",
        ".hidden",
        &"1".repeat(65),
    ] {
        let msg = assert_invalid(locate(h.path(), Some(v)), "version");
        assert!(msg.contains("not a safe folder name"), "{msg}");
    }
}

#[cfg(unix)]
#[test]
fn symlinked_json_is_refused() {
    let h = home();
    let real = h.path().join("elsewhere.json");
    fs::write(&real, valid(1)).unwrap();
    let dir = runtime_root(h.path()).join("1.0.0");
    fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&real, dir.join(FILE_NAME)).unwrap();
    let msg = assert_invalid(locate(h.path(), None), "(file)");
    assert!(msg.contains("must be a regular file, not a link"), "{msg}");
    // A dangling link too: it is not "missing".
    fs::remove_file(&real).unwrap();
    assert_invalid(locate(h.path(), None), "(file)");
}

#[cfg(unix)]
#[test]
fn symlinked_version_folder_is_followed() {
    let h = home();
    install(h.path(), "1.0.0", &valid(1));
    std::os::unix::fs::symlink(
        runtime_root(h.path()).join("1.0.0"),
        runtime_root(h.path()).join("2.0.0"),
    )
    .unwrap();
    assert_eq!(locate(h.path(), None).unwrap().version, "2.0.0");
}

#[test]
fn non_regular_json_is_refused() {
    let h = home();
    fs::create_dir_all(runtime_root(h.path()).join("1.0.0").join(FILE_NAME)).unwrap();
    let msg = assert_invalid(locate(h.path(), None), "(file)");
    assert!(msg.contains("must be a regular file"), "{msg}");
}

#[test]
fn oversized_file_is_refused() {
    let h = home();
    let mut bytes = valid(1);
    bytes.resize(MAX_FILE_BYTES as usize + 1, b' ');
    install(h.path(), "1.0.0", &bytes);
    let msg = assert_invalid(locate(h.path(), None), "(file)");
    assert!(msg.contains("65536") && msg.contains("64 KiB"), "{msg}");
    bytes.pop();
    install(h.path(), "1.0.0", &bytes);
    assert_eq!(locate(h.path(), None).unwrap().server.port, 1);
}

#[test]
fn invalid_json_file_is_refused() {
    let h = home();
    let file = install(h.path(), "1.0.0", b"{ \"entry\": \"/opt/po/a\", }");
    let err = locate(h.path(), None).unwrap_err();
    let msg = assert_invalid(Err::<(), _>(err), "(file)");
    assert!(
        msg.contains("not valid JSON") && msg.contains("line 1"),
        "{msg}"
    );
    assert!(msg.contains(&file.display().to_string()), "{msg}");
}

#[test]
fn top_level_array_file_is_refused() {
    let h = home();
    install(
        h.path(),
        "1.0.0",
        b"[{\"entry\": \"/opt/po/a\", \"port\": 1}]",
    );
    let msg = assert_invalid(locate(h.path(), None), "(file)");
    assert!(msg.contains("an array"), "{msg}");
}

#[test]
fn rule_errors_from_locate_name_the_file_and_key() {
    let h = home();
    let file = install(
        h.path(),
        "1.0.0",
        json!({ "entry": "/opt/po/a", "port": 1, "env": { "HOME": "/x" } })
            .to_string()
            .as_bytes(),
    );
    let err = locate(h.path(), None).unwrap_err();
    match &err {
        Error::RuntimeInvalid { path, key, .. } => {
            assert_eq!(path, &file);
            assert_eq!(key, "env.HOME");
        }
        other => panic!("wrong variant: {other:?}"),
    }
}
