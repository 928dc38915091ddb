use super::*;

/// An environment whose global git configuration is a file of the test's own (no system file).
fn env(home: &Path) -> HashMap<String, String> {
    HashMap::from([
        ("HOME".to_string(), home.display().to_string()),
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        ),
        ("GIT_CONFIG_NOSYSTEM".to_string(), "1".to_string()),
    ])
}

fn global(home: &Path) -> String {
    std::fs::read_to_string(home.join(".gitconfig")).unwrap_or_default()
}

/// Plants a bare repository's shape at `dir` whose config runs `marker` through the pager and
/// fsmonitor, runs host git there (`status`, `log` through the pager), and says whether it ran.
fn bare_shape_runs(vars: &HashMap<String, String>, dir: &Path) -> bool {
    let marker = dir.join("ran");
    for d in ["objects", "refs/heads"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let run = format!("touch {}", marker.display());
    let config = format!(
        "[core]\n\tbare = true\n\tfsmonitor = \"{run}; false\"\n\tpager = \"{run}; cat\"\n[alias]\n\tst = \"!{run}\"\n"
    );
    std::fs::write(dir.join("config"), config).unwrap();
    for args in [&["status"][..], &["-p", "log"], &["st"]] {
        let _ = Command::new("git")
            .env_clear()
            .envs(vars)
            .args(args)
            .current_dir(dir)
            .output();
    }
    marker.exists()
}

#[test]
fn an_open_route_is_named_with_its_one_command_and_the_opt_in_closes_it_and_undoes_it() {
    let home = tempfile::tempdir().unwrap();
    let po_home = tempfile::tempdir().unwrap();
    let vars = env(home.path());
    assert_eq!(check(&vars), Bare::Open(None));
    // Today's hole, checked for real: a bare shape in a folder is taken and run.
    let shape = tempfile::tempdir().unwrap();
    assert!(
        bare_shape_runs(&vars, shape.path()),
        "the route this closes is open without it"
    );
    // Without the opt-in: the warning, and nothing changed.
    let w = ensure(&vars, false, po_home.path(), "o").unwrap();
    assert!(
        w.contains("git config --global safe.bareRepository explicit") && w.contains(SET_VAR),
        "{w}"
    );
    assert_eq!(global(home.path()), "");
    // With it: set, recorded, and a planted shape runs nothing.
    assert_eq!(ensure(&vars, true, po_home.path(), "o"), None);
    assert_eq!(check(&vars), Bare::Closed);
    assert!(po_home.path().join("git-safety/o.json").is_file());
    let shape = tempfile::tempdir().unwrap();
    assert!(
        !bare_shape_runs(&vars, shape.path()),
        "a bare shape ran with safe.bareRepository=explicit"
    );
    // Again (a second start): nothing more; then the undo puts it back.
    assert_eq!(ensure(&vars, true, po_home.path(), "o"), None);
    assert!(undo(&vars, po_home.path(), "o"));
    assert_eq!(check(&vars), Bare::Open(None));
    assert!(!po_home.path().join("git-safety/o.json").exists());
    assert!(
        !undo(&vars, po_home.path(), "o"),
        "nothing recorded: nothing to undo"
    );
}

#[test]
fn the_undo_restores_an_old_value_and_leaves_one_the_person_set_since() {
    let home = tempfile::tempdir().unwrap();
    let po_home = tempfile::tempdir().unwrap();
    let vars = env(home.path());
    std::fs::write(
        home.path().join(".gitconfig"),
        "[safe]\n\tbareRepository = all\n",
    )
    .unwrap();
    assert_eq!(check(&vars), Bare::Open(Some("all".into())));
    assert!(warning(&check(&vars)).unwrap().contains("\"all\""));
    assert_eq!(ensure(&vars, true, po_home.path(), "o"), None);
    assert!(undo(&vars, po_home.path(), "o"));
    assert_eq!(check(&vars), Bare::Open(Some("all".into())));
    // The person changes it while sandboxes run: the undo leaves theirs.
    assert_eq!(ensure(&vars, true, po_home.path(), "o"), None);
    let person = Command::new("git")
        .env_clear()
        .envs(&vars)
        .args(["config", "--global", KEY, "all"])
        .output()
        .unwrap();
    assert!(person.status.success());
    assert!(!undo(&vars, po_home.path(), "o"));
    assert_eq!(check(&vars), Bare::Open(Some("all".into())));
}

#[test]
fn the_opt_in_reads_its_option_then_its_variable() {
    let vars = |v: &str| HashMap::from([(SET_VAR.to_string(), v.to_string())]);
    assert!(!opted_in(None, &HashMap::new()).unwrap());
    assert!(opted_in(Some(true), &vars("0")).unwrap());
    assert!(!opted_in(Some(false), &vars("1")).unwrap());
    for yes in ["1", "true", "YES", " yes "] {
        assert!(opted_in(None, &vars(yes)).unwrap(), "{yes}");
    }
    for no in ["0", "false", "no", ""] {
        assert!(!opted_in(None, &vars(no)).unwrap(), "{no}");
    }
    let err = opted_in(None, &vars("maybe")).unwrap_err();
    assert_eq!(err.code(), "OPTIONS_INVALID");
    assert!(err.to_string().contains(SET_VAR), "{err}");
    assert_eq!(
        check(&HashMap::from([(
            "PATH".to_string(),
            "/nonexistent".to_string()
        )])),
        Bare::NoGit
    );
    assert_eq!(warning(&Bare::NoGit), None);
    assert_eq!(warning(&Bare::Closed), None);
}
