//! A folder without git's copy: its manifest, the copy's listing, the comparison, what `apply`
//! decides and how it writes the host folder.

use std::collections::BTreeMap;

use super::hostfs::{HostSide, mode_for};
use super::ignore::IgnoreRules;
use super::*;
use crate::sandbox::folder::review::ReviewChangeKind;

fn file(text: &str) -> Entry {
    Entry::file(text.as_bytes(), false)
}

#[test]
fn paths_from_the_container_must_be_plain() {
    for ok in ["a", "a/b.txt", "dir/.hidden", "ü/名前"] {
        assert_eq!(check_path(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "/etc/passwd",
        "a//b",
        "a/",
        "./a",
        "a/./b",
        "../x",
        "a/../../x",
        ".git/config",
        "x/.git/hooks/pre-commit",
        "a\\b",
        "a\nb",
        "bad\u{fffd}name",
        "\u{1b}[2J",
    ] {
        assert!(check_path(bad).is_err(), "{bad:?} accepted");
    }
    assert!(check_path(&"x".repeat(256)).is_err());
    assert!(check_path(&format!("{}/y", "x".repeat(255))).is_ok());
}

#[test]
fn links_out_of_the_folder_are_found() {
    assert!(!link_escapes("a/l", "b"));
    assert!(!link_escapes("a/l", "../b"));
    assert!(link_escapes("a/l", "../../b"));
    assert!(link_escapes("l", "/etc/passwd"));
    assert!(link_escapes("l", ""));
}

#[test]
fn a_path_is_ignored_when_a_folder_on_its_way_is() {
    let rules = IgnoreRules::parse("node_modules/\n*.log\n/build\n");
    assert!(ignored_path(&rules, "node_modules/x/i.js"));
    assert!(ignored_path(&rules, "web/node_modules/y.js"));
    assert!(ignored_path(&rules, "a/x.log"));
    assert!(ignored_path(&rules, "build/out"));
    assert!(!ignored_path(&rules, "src/build/out"));
    assert!(!ignored_path(&rules, "src/main.rs"));
    assert!(!ignored_path(&rules, "node_modules"), "a file of that name");
}

#[test]
fn the_listing_is_read_and_checked_against_the_rules() {
    let rules = IgnoreRules::parse("node_modules/\n");
    let rec = |f: [&str; 5]| format!("{}\0", f.join("\0"));
    let h = file("x").value;
    let out = [
        rec(["f", &h, "x", "1", "run.sh"]),
        rec(["f", "", "-", "0", "secret"]),
        rec(["l", "../outside", "-", "0", "link"]),
        rec(["p", "", "-", "0", "node_modules"]),
        rec(["f", &h, "-", "1", "node_modules/late.js"]),
    ]
    .concat();
    let l = parse_listing(out.as_bytes(), &rules).unwrap();
    assert_eq!(l.entries.len(), 2);
    assert_eq!(l.entries["run.sh"], Entry::file(b"x", true));
    assert_eq!(l.entries["link"], Entry::link("../outside"));
    assert_eq!(l.unreadable, vec!["secret".to_string()]);
    assert_eq!(l.sizes["run.sh"], 1);
    // A folder the host's rules keep may not be left out by the container.
    let pruned = rec(["p", "", "-", "0", "src"]);
    assert!(parse_listing(pruned.as_bytes(), &rules).is_err());
    assert!(parse_listing(b"f\0x\0", &rules).is_err());
    assert!(parse_listing(b"", &rules).unwrap().entries.is_empty());
}

#[test]
fn the_comparison_finds_added_modified_and_removed() {
    let base = BTreeMap::from([
        ("same".to_string(), file("s")),
        ("edit".to_string(), file("old")),
        ("gone".to_string(), file("g")),
        ("mode".to_string(), file("m")),
    ]);
    let copy = BTreeMap::from([
        ("same".to_string(), file("s")),
        ("edit".to_string(), file("new")),
        ("new".to_string(), file("n")),
        ("mode".to_string(), Entry::file(b"m", true)),
    ]);
    let got: Vec<_> = compare(&base, &copy)
        .into_iter()
        .map(|c| (c.path, c.change))
        .collect();
    use ReviewChangeKind::*;
    assert_eq!(
        got,
        vec![
            ("edit".into(), Modified),
            ("gone".into(), Removed),
            ("mode".into(), Modified),
            ("new".into(), Added),
        ]
    );
}

fn change(path: &str, base: Option<Entry>, copy: Option<Entry>) -> Change {
    let change = match (&base, &copy) {
        (None, _) => ReviewChangeKind::Added,
        (_, None) => ReviewChangeKind::Removed,
        _ => ReviewChangeKind::Modified,
    };
    Change {
        path: path.into(),
        change,
        base,
        copy,
    }
}

fn has(e: Entry) -> HostSide {
    HostSide::Has {
        entry: e,
        mode: 0o644,
        owner: (0, 0),
    }
}

fn rules(include_executable: bool, yes: bool) -> ApplyRules {
    ApplyRules {
        yes,
        include_executable,
        guarded: vec!["secrets".into()],
    }
}

#[test]
fn apply_decides_per_file_and_never_writes_over_the_persons_edit() {
    use CloneOutcome::*;
    let edit = change("a.txt", Some(file("old")), Some(file("new")));
    let cases = [
        (&edit, has(file("old")), false, true, Written),
        (&edit, has(file("old")), false, false, Pending),
        (&edit, has(file("new")), false, true, Present),
        (&edit, has(file("mine")), true, true, Conflict),
        (&edit, HostSide::Absent, true, true, Conflict),
        (
            &edit,
            HostSide::Other("a folder".into()),
            true,
            true,
            Conflict,
        ),
    ];
    for (c, host, exec, yes, want) in cases {
        assert_eq!(
            decide(c, &host, &rules(exec, yes)).0,
            want,
            "{host:?} exec={exec} yes={yes}"
        );
    }
    let added = change("new.txt", None, Some(file("n")));
    assert_eq!(
        decide(&added, &HostSide::Absent, &rules(false, true)).0,
        Written
    );
    assert_eq!(
        decide(&added, &has(file("x")), &rules(true, true)).0,
        Conflict
    );
    let gone = change("gone.txt", Some(file("g")), None);
    assert_eq!(
        decide(&gone, &has(file("g")), &rules(false, true)).0,
        Removed
    );
    assert_eq!(
        decide(&gone, &HostSide::Absent, &rules(false, true)).0,
        Present
    );
    // Host-executed classes, executable files and links: only with includeExecutable.
    for c in [
        change(
            "package.json",
            Some(file("{}")),
            Some(file("{\"scripts\":{}}")),
        ),
        change("sub/Makefile", None, Some(file("all:"))),
        change("run.sh", None, Some(Entry::file(b"#!/bin/sh", true))),
        change("link", None, Some(Entry::link("src/main.txt"))),
        change("Makefile", Some(file("all:")), None),
        change(".envrc", None, Some(file("echo planted"))),
        change("sub/.vscode/tasks.json", None, Some(file("{}"))),
        change(".pi/extensions/x.ts", None, Some(file("x"))),
        change("secrets/key", None, Some(file("k"))),
    ] {
        let host = if c.base.is_some() {
            has(c.base.clone().unwrap())
        } else {
            HostSide::Absent
        };
        let (outcome, note) = decide(&c, &host, &rules(false, true));
        assert_eq!(outcome, Held, "{}", c.path);
        assert!(note.unwrap().contains("--include-executable"));
        assert_ne!(decide(&c, &host, &rules(true, true)).0, Held, "{}", c.path);
    }
    // Never: a link out of the folder, an odd path.
    for c in [
        change("leak", None, Some(Entry::link("/etc/passwd"))),
        change("a/leak", None, Some(Entry::link("../../x"))),
        change("../x", None, Some(file("x"))),
        change(".git/hooks/pre-commit", None, Some(file("x"))),
    ] {
        assert_eq!(
            decide(&c, &HostSide::Absent, &rules(true, true)).0,
            Refused,
            "{}",
            c.path
        );
    }
}

#[test]
fn guarded_paths_are_found_by_name_and_by_the_configured_list() {
    let configured = vec!["conf/".to_string(), "tools/run".to_string()];
    for yes in [
        ".envrc",
        "a/.envrc",
        ".claude/settings.json",
        "x/.husky/pre-commit",
        "conf/a",
        "tools/run",
        "tools/run/x",
    ] {
        assert!(guarded(yes, &configured), "{yes}");
    }
    for no in [
        "src/main.rs",
        "envrc",
        "confx/a",
        "tools/runner",
        "a/.envrc.bak",
    ] {
        assert!(!guarded(no, &configured), "{no}");
    }
}

#[test]
fn written_files_get_no_special_bits() {
    assert_eq!(mode_for(None, false), 0o644);
    assert_eq!(mode_for(None, true), 0o755);
    assert_eq!(mode_for(Some(0o104_755), false), 0o644);
    assert_eq!(mode_for(Some(0o106_640), true), 0o750);
    assert_eq!(mode_for(Some(0o100_600), true), 0o700);
}

#[test]
fn fetches_are_batched_to_fit_a_command_line() {
    let long: Vec<String> = (0..3000).map(|i| format!("{i:0>60}")).collect();
    let paths: Vec<&str> = long.iter().map(String::as_str).collect();
    let commands = fetch_commands(&paths);
    assert!(commands.len() > 1);
    let mut all = Vec::new();
    for c in &commands {
        assert_eq!(&c[..2], &["node".to_string(), "-e".to_string()]);
        let size: usize = c.iter().map(|a| a.len() + 1).sum();
        assert!(size <= crate::names::paths::MAX_COMMAND_BYTES, "{size}");
        all.extend(c[3..].iter().cloned());
    }
    assert_eq!(all, long);
    assert!(fetch_commands(&[]).is_empty());
    let out = b"1\nf3\nabc2\nfx2\nhi1\nl3\n../1\nn0\n";
    let got = parse_fetched(&["a", "b", "c", "d"], out).unwrap();
    assert_eq!(got[0].1.as_ref().unwrap().0, file("abc"));
    assert_eq!(got[1].1.as_ref().unwrap().0, Entry::file(b"hi", true));
    assert_eq!(got[2].1.as_ref().unwrap().0, Entry::link("../"));
    assert!(got[3].1.is_none());
    assert!(parse_fetched(&["a"], out).is_none());
}

#[cfg(unix)]
#[test]
fn the_copy_of_a_folder_is_recorded_as_it_goes_into_the_tar() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
    std::fs::write(root.join("src/main.txt"), "main").unwrap();
    std::fs::write(root.join("node_modules/x/i.js"), "i").unwrap();
    std::fs::write(root.join("run.sh"), "#!/bin/sh").unwrap();
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("src/main.txt", root.join("link")).unwrap();
    symlink("../../outside", root.join("src/out")).unwrap();
    let user = crate::host::UserIds {
        uid: 1000,
        gid: 1000,
    };
    let copy = prepare(root, user).unwrap();
    let m = copy.manifest.clone().unwrap();
    let keys: Vec<&str> = m.entries.keys().map(String::as_str).collect();
    assert_eq!(keys, ["link", "run.sh", "src/main.txt"]);
    assert_eq!(m.entries["src/main.txt"], file("main"));
    assert_eq!(m.entries["run.sh"], Entry::file(b"#!/bin/sh", true));
    assert_eq!(m.entries["link"], Entry::link("src/main.txt"));
    assert!(m.rules().ignored("node_modules", true));
    let path = manifest_path(root, "hub1", "w");
    let mut m = m;
    m.workspace_id = "w".into();
    write_manifest(&path, &m).unwrap();
    assert_eq!(read_manifest(&path), Some(m));
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    remove_manifests(root, "hub1", Some("w"));
    assert!(read_manifest(&path).is_none());
}

#[cfg(unix)]
#[test]
fn the_host_folder_is_written_without_following_links() {
    use std::os::unix::fs::{MetadataExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let (root, outside) = (dir.path().join("ws"), dir.path().join("outside"));
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("a/old.txt"), "old").unwrap();
    symlink(&outside, root.join("linked")).unwrap();
    symlink(outside.join("target"), root.join("leaf")).unwrap();
    let host = super::hostfs::HostFolder::open(&root).unwrap();
    let (side, bytes) = host.state("a/old.txt", 10);
    assert_eq!(bytes.as_deref(), Some(&b"old"[..]));
    assert!(side.is(Some(&file("old"))));
    assert!(host.state("missing/x", 10).0.is(None));
    // A link on the way is never followed, for reading or writing.
    assert!(matches!(host.state("linked/x", 10).0, HostSide::Other(_)));
    let new = file("new");
    assert!(
        host.put(
            "linked/x",
            &HostSide::Absent,
            Some((&new, b"new")),
            &super::hostfs::aside_name().unwrap()
        )
        .is_err()
    );
    assert!(!outside.join("x").exists());
    // Nor does a path that climbs, even one the caller did not check.
    assert!(matches!(
        host.state("../outside/x", 10).0,
        HostSide::Other(_)
    ));
    assert!(
        host.put(
            "../outside/x",
            &HostSide::Absent,
            Some((&new, b"new")),
            &super::hostfs::aside_name().unwrap()
        )
        .is_err()
    );
    assert!(!outside.join("x").exists());
    // A link at the end is replaced, not written through.
    let (leaf, _) = host.state("leaf", 10);
    host.put(
        "leaf",
        &leaf,
        Some((&new, b"new")),
        &super::hostfs::aside_name().unwrap(),
    )
    .unwrap();
    assert!(!outside.join("target").exists());
    assert_eq!(std::fs::read_to_string(root.join("leaf")).unwrap(), "new");
    // Written only over what was seen; folders made on the way.
    assert!(
        host.put(
            "a/old.txt",
            &has(file("other")),
            Some((&new, b"new")),
            &super::hostfs::aside_name().unwrap()
        )
        .is_err()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a/old.txt")).unwrap(),
        "old"
    );
    host.put(
        "a/old.txt",
        &side,
        Some((&new, b"new")),
        &super::hostfs::aside_name().unwrap(),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("a/old.txt")).unwrap(),
        "new"
    );
    host.put(
        "b/c/new.txt",
        &HostSide::Absent,
        Some((&new, b"new")),
        &super::hostfs::aside_name().unwrap(),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("b/c/new.txt")).unwrap(),
        "new"
    );
    let link = Entry::link("a/old.txt");
    host.put(
        "l",
        &HostSide::Absent,
        Some((&link, b"")),
        &super::hostfs::aside_name().unwrap(),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_link(root.join("l")).unwrap().to_str(),
        Some("a/old.txt")
    );
    let (now, _) = host.state("b/c/new.txt", 0);
    host.put(
        "b/c/new.txt",
        &now,
        None,
        &super::hostfs::aside_name().unwrap(),
    )
    .unwrap();
    assert!(!root.join("b/c/new.txt").exists());
    let meta = std::fs::metadata(root.join("a/old.txt")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o644);
    let names: Vec<_> = std::fs::read_dir(root.join("a")).unwrap().collect();
    assert_eq!(names.len(), 1, "no aside left behind");
}

#[cfg(unix)]
#[test]
fn an_apply_killed_mid_write_leaves_nothing_the_next_one_does_not_sweep() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let (root, outside) = (dir.path().join("ws"), dir.path().join("outside"));
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    symlink(&outside, root.join("linked")).unwrap();
    // A process that is gone wrote its asides, then was killed before renaming them.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let aside = |n: &str| format!(".po-sandbox-{gone}-{n}");
    let (a1, a2, a3) = (
        aside("aaaaaaaaaaaa"),
        aside("bbbbbbbbbbbb"),
        aside("cccccccccccc"),
    );
    std::fs::write(root.join("a/b").join(&a1), "half").unwrap();
    symlink("/etc/passwd", root.join(&a2)).unwrap();
    std::fs::write(outside.join(&a3), "not the folder's").unwrap();
    std::fs::write(root.join("a/b/mine.txt"), "the person's").unwrap();
    let journal = dir.path().join("copies/w.applying");
    std::fs::create_dir_all(journal.parent().unwrap()).unwrap();
    let record = Journal {
        pid: gone,
        folder: root.clone(),
        asides: vec![
            ("a/b/f.txt".into(), a1.clone()),
            ("top.txt".into(), a2.clone()),
            // Through a link: never reached.
            ("linked/x".into(), a3.clone()),
            // Not a name the layer makes: never removed.
            ("a/b/mine".into(), "mine.txt".into()),
        ],
    };
    std::fs::write(&journal, serde_json::to_vec(&record).unwrap()).unwrap();
    // The next apply (with nothing to write) sweeps them first.
    write(&root, &mut [], &Default::default(), &journal).unwrap();
    assert!(!root.join("a/b").join(&a1).exists());
    assert!(std::fs::symlink_metadata(root.join(&a2)).is_err());
    assert!(
        outside.join(&a3).exists(),
        "a link on the way is never followed"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a/b/mine.txt")).unwrap(),
        "the person's"
    );
    assert!(!journal.exists());
    // A journal of a process that still runs (this test's parent) is left to it.
    let running = Journal {
        pid: std::os::unix::process::parent_id(),
        folder: root.clone(),
        asides: vec![("a/b/mine.txt".into(), aside("dddddddddddd"))],
    };
    std::fs::write(&journal, serde_json::to_vec(&running).unwrap()).unwrap();
    assert!(sweep_asides(&journal).is_empty());
    assert!(journal.exists());
    // The next apply's own run leaves no journal behind.
    std::fs::remove_file(&journal).unwrap();
    write(&root, &mut [], &Default::default(), &journal).unwrap();
    assert!(!journal.exists());
}

#[test]
fn aside_names_are_recognised() {
    let name = super::hostfs::aside_name().unwrap();
    assert!(super::hostfs::is_aside_name(&name), "{name}");
    for bad in [
        ".po-sandbox-",
        ".po-sandbox-12-abc",
        ".po-sandbox-x-aaaaaaaaaaaa",
        "mine.txt",
        ".po-sandbox-12-aaaaaaaaaaaaa",
    ] {
        assert!(!super::hostfs::is_aside_name(bad), "{bad}");
    }
}

#[test]
fn guarded_and_git_names_are_folded_as_a_case_insensitive_host_folds_them() {
    for path in [
        ".Claude/settings.json",
        ".VSCode/tasks.json",
        ".PI/extensions/x.ts",
        "sub/.IDEA/workspace.xml",
        ".ENVRC",
        ".MCP.JSON",
    ] {
        assert!(guarded(path, &[]), "{path}");
    }
    assert!(guarded(
        "Tools/Hooks/pre-commit",
        &["tools/hooks".to_string()]
    ));
    assert!(!guarded("toolsx/hooks", &["tools/hooks".to_string()]));
    assert!(!guarded("src/claude.rs", &[]));
    for bad in [
        ".GIT/config",
        "x/.Git/hooks/pre-commit",
        ".git./config",
        ".git /x",
        "a/.GIT",
    ] {
        assert!(check_path(bad).is_err(), "{bad}");
    }
    assert_eq!(check_path("a/.gitignore"), Ok(()));
    assert_eq!(check_path("a/git/x"), Ok(()));
}
