use super::*;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn defaults() -> Vec<String> {
    strings(&DEFAULT_GUARDED_PATHS)
}

#[test]
fn entries_are_relative_paths_inside_the_workspace() {
    let cases: &[(&str, Result<&str, &str>)] = &[
        (".git/hooks", Ok(".git/hooks")),
        ("./.vscode/", Ok(".vscode")),
        ("a//b", Ok("a/b")),
        (" .envrc ", Ok(".envrc")),
        ("", Err("empty")),
        (".", Err("the workspace itself")),
        ("./", Err("the workspace itself")),
        ("../x", Err("climbs")),
        ("a/../../x", Err("climbs")),
        ("/etc", Err("absolute")),
        ("a,b", Err("character")),
    ];
    for (entry, want) in cases {
        match (check_entry(entry), want) {
            (Ok(got), Ok(w)) => assert_eq!(got, *w, "{entry:?}"),
            (Err(got), Err(w)) => assert!(got.to_string().contains(w), "{entry:?}: {got}"),
            (got, w) => panic!("{entry:?}: {got:?}, wanted {w:?}"),
        }
    }
}

#[test]
fn the_variable_adds_removes_replaces_or_empties_the_list() {
    let mut added = defaults();
    added.push("tools/bin".into());
    assert_eq!(from_var("+tools/bin").unwrap(), added);
    let removed: Vec<String> = defaults().into_iter().filter(|p| p != ".idea").collect();
    assert_eq!(from_var("-.idea").unwrap(), removed);
    assert_eq!(
        from_var(".git/hooks, .envrc").unwrap(),
        strings(&[".git/hooks", ".envrc"])
    );
    assert_eq!(from_var("").unwrap(), Vec::<String>::new());
    assert_eq!(from_var(" , ").unwrap(), Vec::<String>::new());
    let err = from_var("+../up").unwrap_err();
    assert_eq!(err.code(), "OPTIONS_INVALID");
    assert!(err.to_string().contains(GUARDED_PATHS_VAR), "{err}");
    let err = from_option(&strings(&["/abs"])).unwrap_err();
    assert!(err.to_string().contains("guardedPaths"), "{err}");
    assert_eq!(
        from_option(&strings(&["a", "./a/"])).unwrap(),
        strings(&["a"])
    );
}

#[test]
fn a_repository_folder_guards_its_entries_and_pins_git() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    std::fs::write(ws.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let r = resolve(ws.path(), &defaults());
    // The entries, with the files git reads from its folder besides.
    let mut expected = defaults();
    expected.splice(3..3, strings(&[".git/commondir", ".git/config.worktree"]));
    // A missing .envrc is not guarded (direnv refuses a new one by itself).
    expected.retain(|g| g != ".envrc");
    assert_eq!(r.guards, expected);
    assert_eq!(r.pins, strings(&[".git"]));
    let b = binds(
        ws.path(),
        &r,
        crate::host::HostOs::Linux,
        Path::new("/copies"),
    );
    assert!(
        b.iter()
            .any(|b| b.target.ends_with("/.git") && !b.read_only)
    );
    assert!(b.iter().all(|b| b.source.to_string_lossy() == b.target));
    assert_eq!(
        b.iter().filter(|b| b.read_only).count(),
        DEFAULT_GUARDED_PATHS.len() + 1
    );
}

#[test]
fn without_a_repository_git_itself_is_guarded() {
    let ws = tempfile::tempdir().unwrap();
    let r = resolve(ws.path(), &defaults());
    assert!(r.guards.contains(&".git".to_string()));
    assert!(!r.guards.iter().any(|g| g.starts_with(".git/")));
    assert!(r.pins.is_empty());
    // Its placeholder (a `.git` file) changes nothing: the next hub resolves the same guards.
    prepare("w", ws.path(), &r, &guard_dir(&ws)).unwrap();
    assert!(ws.path().join(".git").is_file());
    let _ = std::fs::remove_dir_all(guard_dir(&ws));
    assert_eq!(resolve(ws.path(), &defaults()), r);
}

#[test]
fn a_linked_worktree_guards_its_git_file_and_its_git_folders_inside_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws.path()).unwrap();
    // The git folder inside the workspace, with a common folder inside it too.
    std::fs::create_dir_all(ws.join("meta/main/worktrees/w")).unwrap();
    std::fs::write(ws.join("meta/main/worktrees/w/commondir"), "../..\n").unwrap();
    std::fs::write(ws.join(".git"), "gitdir: meta/main/worktrees/w\n").unwrap();
    let r = resolve(&ws, &strings(&[".git/hooks", ".git/config"]));
    assert_eq!(
        r.guards,
        strings(&[
            ".git",
            "meta/main/worktrees/w/hooks",
            "meta/main/worktrees/w/config",
            "meta/main/worktrees/w/commondir",
            "meta/main/worktrees/w/config.worktree",
            "meta/main/hooks",
            "meta/main/config",
            "meta/main/commondir",
            "meta/main/config.worktree",
        ])
    );
    assert!(r.pins.contains(&"meta/main/worktrees/w".to_string()));
    // A git folder outside the workspace is not mounted: only the .git file is guarded.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.join(".git"),
        format!("gitdir: {}\n", outside.path().display()),
    )
    .unwrap();
    let r = resolve(&ws, &strings(&[".git/hooks"]));
    assert_eq!(r.guards, strings(&[".git"]));
}

#[test]
fn a_guard_inside_another_is_covered_by_it() {
    let ws = tempfile::tempdir().unwrap();
    let r = resolve(ws.path(), &strings(&["a", "a/b/c", "x/y"]));
    assert_eq!(r.guards, strings(&["a", "x/y"]));
    assert_eq!(r.pins, strings(&["x"]));
}

#[test]
fn missing_guards_get_empty_placeholders_and_files_are_excluded_from_git() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git/info")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let r = resolve(ws.path(), &defaults());
    let made = prepare("w", ws.path(), &r, &guard_dir(&ws)).unwrap();
    let dirs = [
        ".git/hooks",
        ".pi",
        ".agents",
        ".claude",
        ".cursor",
        ".codex",
        ".direnv",
        ".husky",
    ];
    for dir in dirs {
        let p = ws.path().join(dir);
        assert!(
            p.is_dir() && std::fs::read_dir(&p).unwrap().next().is_none(),
            "{dir}"
        );
    }
    // The editors' folders are empty files: no editor takes the folder for a project of its own.
    for file in [".vscode", ".idea", ".devcontainer"] {
        assert_eq!(std::fs::read(ws.path().join(file)).unwrap(), b"", "{file}");
    }
    // direnv refuses a new .envrc by itself: none is made (an empty one makes it complain).
    assert!(!ws.path().join(".envrc").exists());
    assert!(!r.guards.contains(&".envrc".to_string()));
    // The repository's config gets diff.ignoreSubmodules while the container runs (defuse).
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".git/config")).unwrap(),
        format!("[core]\n{}", super::defuse::BLOCK)
    );
    // A JSON placeholder parses: its readers on the host see no servers, not an error.
    assert_eq!(std::fs::read(ws.path().join(".mcp.json")).unwrap(), b"{}\n");
    // git's own files: `commondir` says "this folder", as git reads an absent one.
    assert_eq!(
        std::fs::read(ws.path().join(".git/commondir")).unwrap(),
        b".\n"
    );
    assert_eq!(
        std::fs::read(ws.path().join(".git/config.worktree")).unwrap(),
        b""
    );
    assert_eq!(made.len(), dirs.len() + 6);
    let exclude = std::fs::read_to_string(ws.path().join(".git/info/exclude")).unwrap();
    for file in ["/.mcp.json", "/.vscode", "/.idea", "/.devcontainer"] {
        assert!(exclude.lines().any(|l| l == file), "{file} in {exclude}");
    }
    // Again: nothing new, the exclude line is not repeated.
    assert!(
        prepare("w", ws.path(), &r, &guard_dir(&ws))
            .unwrap()
            .is_empty()
    );
    let again = std::fs::read_to_string(ws.path().join(".git/info/exclude")).unwrap();
    assert_eq!(again, exclude);
    let _ = std::fs::remove_dir_all(guard_dir(&ws));
}

/// The guard folder of a test workspace: beside it, in the same temporary folder's parent.
fn guard_dir(ws: &tempfile::TempDir) -> std::path::PathBuf {
    let mut name = ws.path().file_name().unwrap().to_os_string();
    name.push("-guards");
    ws.path().with_file_name(name)
}

/// Every entry under `dir`, relative, sorted, with the exclude file's text.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
                out.push(format!("{rel}/"));
            } else {
                out.push(format!(
                    "{rel} {:?}",
                    std::fs::read_to_string(e.path()).unwrap_or_default()
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_stop_takes_every_placeholder_away_and_the_folder_is_as_it_was() {
    for repository in [true, false] {
        let ws = tempfile::tempdir().unwrap();
        let gd = guard_dir(&ws);
        if repository {
            std::fs::create_dir_all(ws.path().join(".git/info")).unwrap();
            std::fs::write(ws.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
            std::fs::write(ws.path().join(".git/info/exclude"), "# mine\n*.log").unwrap();
        }
        std::fs::create_dir(ws.path().join(".pi")).unwrap();
        std::fs::write(ws.path().join(".pi/settings.json"), "{}").unwrap();
        let before = listing(ws.path());
        let r = resolve(ws.path(), &defaults());
        assert!(!prepare("w", ws.path(), &r, &gd).unwrap().is_empty());
        // Twice, as a replaced container's create does: the record keeps the first one's.
        prepare("w", ws.path(), &r, &gd).unwrap();
        assert_ne!(listing(ws.path()), before);
        let taken = placeholders::take_away(&gd);
        assert!(!taken.is_empty());
        assert_eq!(listing(ws.path()), before, "repository: {repository}");
        assert!(!gd.join(placeholders::RECORD).exists());
        // Nothing recorded: nothing to do.
        assert!(placeholders::take_away(&gd).is_empty());
        let _ = std::fs::remove_dir_all(&gd);
    }
}

#[test]
fn a_folder_without_git_gets_a_git_file_that_stops_discovery() {
    let ws = tempfile::tempdir().unwrap();
    let r = resolve(ws.path(), &defaults());
    prepare("w", ws.path(), &r, &guard_dir(&ws)).unwrap();
    let dot_git = ws.path().join(".git");
    assert!(dot_git.is_file());
    assert_eq!(std::fs::read(&dot_git).unwrap(), NO_REPOSITORY);
    // Resolved again with the file there, `.git` is still guarded.
    assert!(
        resolve(ws.path(), &defaults())
            .guards
            .contains(&".git".to_string())
    );
    let _ = std::fs::remove_dir_all(guard_dir(&ws));
}

#[test]
fn a_placeholder_changed_since_or_reached_through_a_link_stays() {
    let ws = tempfile::tempdir().unwrap();
    let gd = guard_dir(&ws);
    std::fs::create_dir_all(ws.path().join(".git/info")).unwrap();
    std::fs::write(ws.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let r = resolve(ws.path(), &defaults());
    prepare("w", ws.path(), &r, &gd).unwrap();
    // The person wrote into two placeholders while the container ran; a third was replaced by a
    // link (to a folder elsewhere holding a file of the same name).
    std::fs::write(ws.path().join(".claude/settings.json"), "{}").unwrap();
    std::fs::write(ws.path().join(".mcp.json"), "{\"mcpServers\":{}}").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::remove_dir(ws.path().join(".husky")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(".husky")).unwrap();
    placeholders::take_away(&gd);
    assert!(ws.path().join(".claude/settings.json").is_file());
    assert!(ws.path().join(".mcp.json").is_file());
    assert!(
        std::fs::symlink_metadata(ws.path().join(".husky"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(elsewhere.path().exists());
    // The others went; the exclude file's lines of the kept ones went too (the layer's lines).
    assert!(!ws.path().join(".pi").exists() && !ws.path().join(".vscode").exists());
    let _ = std::fs::remove_dir_all(&gd);
}

#[test]
fn the_exclude_file_and_its_folders_are_never_followed_when_links() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    let placeholder = [".mcp.json".to_string()];
    // The exclude file a link to a host file; `.git/info` a link to a host folder; `.git` a
    // link to a host folder holding an `info` folder.
    for planted in ["exclude", "info", ".git"] {
        std::fs::write(&victim, "host file\n").unwrap();
        let host_dir = outside.path().join(format!("dir-{planted}"));
        std::fs::create_dir_all(host_dir.join("info")).unwrap();
        let ws = tempfile::tempdir().unwrap();
        let git = ws.path().join(".git");
        match planted {
            "exclude" => {
                std::fs::create_dir_all(git.join("info")).unwrap();
                std::os::unix::fs::symlink(&victim, git.join("info/exclude")).unwrap();
            }
            "info" => {
                std::fs::create_dir_all(&git).unwrap();
                std::os::unix::fs::symlink(&host_dir, git.join("info")).unwrap();
            }
            _ => std::os::unix::fs::symlink(&host_dir, &git).unwrap(),
        }
        exclude(ws.path(), &placeholder);
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "host file\n",
            "{planted}"
        );
        assert!(!host_dir.join("exclude").exists(), "{planted}");
        assert!(!host_dir.join("info/exclude").exists(), "{planted}");
    }
}

#[test]
fn a_guard_through_a_symbolic_link_is_refused_and_nothing_is_made() {
    let ws = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    // The guard itself a link, and a parent of a guard a link.
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(".vscode")).unwrap();
    let r = resolve(ws.path(), &strings(&[".vscode"]));
    let err = prepare("w", ws.path(), &r, &guard_dir(&ws)).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_INVALID");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join("tools")).unwrap();
    let r = resolve(ws.path(), &strings(&["tools/hooks"]));
    let err = prepare("w", ws.path(), &r, &guard_dir(&ws)).unwrap_err();
    assert!(err.to_string().contains("tools"), "{err}");
    assert!(
        std::fs::read_dir(elsewhere.path())
            .unwrap()
            .next()
            .is_none(),
        "nothing made outside"
    );
}
