use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::Command;

use super::*;
use crate::host::UserIds;
use crate::names::vars::WORKSPACE_MODE_VAR;

#[test]
fn the_mode_comes_from_the_option_then_the_variable() {
    use WorkspaceMode::*;
    assert_eq!(WorkspaceMode::resolve(None, None).unwrap(), Bind);
    assert_eq!(WorkspaceMode::resolve(None, Some(" ")).unwrap(), Bind);
    assert_eq!(WorkspaceMode::resolve(None, Some("clone")).unwrap(), Clone);
    assert_eq!(
        WorkspaceMode::resolve(Some("bind"), Some("clone")).unwrap(),
        Bind
    );
    let e = WorkspaceMode::resolve(Some("copy"), None).unwrap_err();
    assert_eq!(e.code(), "OPTIONS_INVALID");
    assert!(e.to_string().contains("workspaceMode"), "{e}");
    assert!(e.to_string().contains("'bind'"), "{e}");
    let e = WorkspaceMode::resolve(None, Some("shadow")).unwrap_err();
    assert!(e.to_string().contains(WORKSPACE_MODE_VAR), "{e}");
    let labels = HashMap::from([(LABEL_WORKSPACE_MODE.to_string(), "clone".to_string())]);
    assert_eq!(WorkspaceMode::of_labels(&labels), Clone);
    assert_eq!(WorkspaceMode::of_labels(&HashMap::new()), Bind);
    assert_eq!(copy_volume_name("hub1", "acme"), "po-hub1-acme-copy");
}

#[test]
fn links_that_climb_out_are_found() {
    assert!(!manifest::escapes(Path::new("a/l"), Path::new("b")));
    assert!(!manifest::escapes(Path::new("a/l"), Path::new("../b")));
    assert!(manifest::escapes(Path::new("a/l"), Path::new("../../b")));
    assert!(manifest::escapes(Path::new("l"), Path::new("../x")));
    assert!(!manifest::escapes(Path::new("l"), Path::new("/etc/x")));
    assert!(manifest::escapes(Path::new("l"), Path::new("a/../../x")));
}

/// Every entry of a tar: name, uid, gid, content.
fn entries(tar_path: &Path) -> Vec<(String, u64, u64, String)> {
    let mut a = tar::Archive::new(std::fs::File::open(tar_path).unwrap());
    let mut out = vec![];
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header().clone();
        let name = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let mut text = String::new();
        let _ = e.read_to_string(&mut text);
        out.push((name, h.uid().unwrap(), h.gid().unwrap(), text));
    }
    out
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

const USER: UserIds = UserIds {
    uid: 4321,
    gid: 8765,
};

#[test]
fn a_repository_is_copied_with_a_fresh_git_and_the_work_git_sees() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["config", "user.name", "Ann"]);
    git(repo, &["config", "user.email", "ann@example.invalid"]);
    std::fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    std::fs::create_dir_all(repo.join(".vscode")).unwrap();
    std::fs::write(repo.join(".vscode/settings.json"), "{}\n").unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "c1"]);
    std::fs::write(repo.join("a.txt"), "two\n").unwrap();
    std::fs::write(repo.join("new.txt"), "new\n").unwrap();
    // Untracked files at guarded paths stay on the host; a tracked one is copied.
    std::fs::write(repo.join(".envrc"), "export KEY=host-secret\n").unwrap();
    std::fs::write(repo.join(".vscode/tasks.json"), "{}\n").unwrap();
    std::fs::create_dir_all(repo.join("sub/.pi")).unwrap();
    std::fs::write(repo.join("sub/.envrc"), "export KEY=x\n").unwrap();
    std::fs::write(repo.join("sub/.pi/settings.json"), "{}\n").unwrap();
    std::fs::write(repo.join("x.log"), "ignored\n").unwrap();
    std::fs::write(repo.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
    git(
        repo,
        &[
            "config",
            "remote.origin.url",
            "https://t:k@example.invalid/r",
        ],
    );
    let copy = prepare(repo, USER).unwrap();
    assert!(copy.git);
    let all = entries(&copy.tar);
    let names: Vec<&str> = all.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        names[0], "/",
        "the root first, so the volume's root is the user's"
    );
    assert!(all.iter().all(|e| e.1 == 4321 && e.2 == 8765), "{all:?}");
    let text = |n: &str| all.iter().find(|e| e.0 == n).map(|e| e.3.clone());
    assert_eq!(text("a.txt").as_deref(), Some("two\n"));
    assert_eq!(text("new.txt").as_deref(), Some("new\n"));
    assert_eq!(text("x.log"), None);
    assert_eq!(text(".vscode/settings.json").as_deref(), Some("{}\n"));
    for guarded in [
        ".envrc",
        ".vscode/tasks.json",
        "sub/.envrc",
        "sub/.pi/settings.json",
    ] {
        assert_eq!(
            text(guarded),
            None,
            "{guarded} (untracked, guarded) is not copied"
        );
    }
    assert!(names.contains(&".git/HEAD"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with(".git/hooks")),
        "{names:?}"
    );
    let config = text(".git/config").unwrap();
    assert!(config.contains(NO_REMOTE), "{config}");
    assert!(config.contains("ann@example.invalid"), "{config}");
    assert!(!config.contains("example.invalid/r"), "{config}");
    // The objects travel as one pack (from the bundle), not loose objects.
    assert!(names.iter().any(|n| n.ends_with(".pack")), "{names:?}");
    let tmp = copy.tar.parent().unwrap().to_path_buf();
    drop(copy);
    assert!(!tmp.exists(), "the temporary folder goes with the copy");
}

#[test]
fn a_folder_without_git_leaves_out_what_the_ignore_file_lists() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["src", "node_modules/x", "deep/target", "keep"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in ["src/a", "node_modules/x/b", "deep/target/c", "keep/d"] {
        std::fs::write(root.join(f), f).unwrap();
    }
    let copy = prepare(root, USER).unwrap();
    assert!(!copy.git);
    let mut names: Vec<String> = entries(&copy.tar).into_iter().map(|e| e.0).collect();
    names.sort();
    assert_eq!(names, ["/", "deep", "keep", "keep/d", "src", "src/a"]);
    std::fs::write(root.join(ignore::IGNORE_FILE), "keep/\n").unwrap();
    let copy = prepare(root, USER).unwrap();
    let names: Vec<String> = entries(&copy.tar).into_iter().map(|e| e.0).collect();
    assert!(names.contains(&"node_modules/x/b".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("keep")), "{names:?}");
}

#[test]
fn a_repository_without_a_commit_keeps_its_branch_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "trunk"]);
    std::fs::write(repo.join("draft.txt"), "draft\n").unwrap();
    let copy = prepare(repo, USER).unwrap();
    let all = entries(&copy.tar);
    let text = |n: &str| all.iter().find(|e| e.0 == n).map(|e| e.3.clone());
    assert_eq!(
        text(".git/HEAD").as_deref(),
        Some("ref: refs/heads/trunk\n")
    );
    assert_eq!(text("draft.txt").as_deref(), Some("draft\n"));
}

#[test]
fn script_answers_are_unframed_by_length_and_files_get_their_class() {
    let out = b"3\na\nb0\n5\n\x001\n2\n".to_vec();
    assert_eq!(
        unframe(&out).unwrap(),
        [b"a\nb".to_vec(), vec![], b"\x001\n2\n"[..5].to_vec()]
    );
    assert!(unframe(b"9\nshort").is_none());
    let files = files_of(
        b":000000 100644 0000000 1111111 A\0package.json\0:100644 100644 2222222 3333333 M\0src/x.rs\0:100644 000000 4444444 0000000 D\0.github/workflows/ci.yml\0",
    );
    let seen: Vec<_> = files
        .iter()
        .map(|f| (f.path.as_str(), f.change, f.class))
        .collect();
    use crate::sandbox::folder::review::{ReviewChangeKind as K, ReviewClass as C};
    assert_eq!(
        seen,
        [
            ("package.json", K::Added, Some(C::PackageScripts)),
            ("src/x.rs", K::Modified, None),
            (".github/workflows/ci.yml", K::Removed, Some(C::Workflow)),
        ]
    );
    let e = answers("w", 3, b"", b"", DIFF_ANSWERS).unwrap_err();
    assert_eq!(e.code(), "NOT_A_CLONE");
    let e = answers("w", 128, b"", b"fatal: bad", DIFF_ANSWERS).unwrap_err();
    assert!(e.to_string().contains("fatal: bad"), "{e}");
}

#[test]
fn repository_shapes_in_a_copys_changes_are_classed() {
    use crate::sandbox::folder::review::ReviewClass as C;
    let raw = [
        ":000000 160000 0000000 5555555 A\0vendor/lib\0",
        ":160000 000000 5555555 0000000 D\0old/lib\0",
        ":000000 100644 0000000 1111111 A\0deep/Bare/HEAD\0",
        ":000000 100644 0000000 1111111 A\0deep/Bare/config\0",
        ":000000 100644 0000000 1111111 A\0deep/Bare/Objects/info/packs\0",
        ":000000 100644 0000000 1111111 A\0deep/Bare/refs/heads/x\0",
        // A HEAD without both folders is an ordinary file.
        ":000000 100644 0000000 1111111 A\0notes/HEAD\0",
        ":000000 100644 0000000 1111111 A\0notes/objects/a\0",
    ]
    .concat();
    let files = files_of(raw.as_bytes());
    let class = |p: &str| files.iter().find(|f| f.path == p).and_then(|f| f.class);
    assert_eq!(class("vendor/lib"), Some(C::Gitlink));
    assert_eq!(
        class("old/lib"),
        None,
        "a gitlink the change removes is no longer there"
    );
    assert_eq!(class("deep/Bare/HEAD"), Some(C::BareRepository));
    assert_eq!(class("deep/Bare/config"), None);
    assert_eq!(class("notes/HEAD"), None);
    assert!(
        files
            .iter()
            .filter(|f| f.class.is_some())
            .all(|f| f.reason.is_some())
    );
}

#[test]
fn a_branch_name_is_one_git_takes_as_it_is() {
    check_branch("po-sandbox/app-0123456789ab").unwrap();
    for bad in ["", "-x", "a..b", "a b", "@{-1}", "x.lock", "HEAD@{1}"] {
        let e = check_branch(bad).unwrap_err();
        assert_eq!(e.code(), "OPTIONS_INVALID", "{bad:?}");
        assert!(e.to_string().contains("branch"), "{e}");
    }
}

#[test]
fn untracked_guarded_paths_are_left_out_of_a_repository_copy() {
    let listed = b"H .envrc\0H src/a.rs\0? .envrc.local\0? .vscode/tasks.json\0? x/.pi/a\0? notes.txt\0H ../up\0? .git/x\0? dir/\0";
    let got: Vec<String> = source::copied_paths(listed)
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert_eq!(got, [".envrc", ".envrc.local", "notes.txt", "src/a.rs"]);
}

#[test]
fn temporary_folders_are_private_and_carry_their_process_id() {
    let dir = source::private_temp_dir("unit").unwrap();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let prefix = format!("po-sandbox-unit-{}-", std::process::id());
    let rest = name
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn a_commit_is_listed_whatever_its_author_and_subject_hold() {
    let id = "a".repeat(40);
    let other = "b".repeat(40);
    // The agent's author and subject carry the field separator, escapes and a fake date.
    let log = [
        format!("{id}\x1fEve\x1f <e@x>\x1f2026-01-02T03:04:05+00:00\x1fhide\x1fme \x1b]0;t\x07"),
        format!("{other}\x1fBob <b@x>\x1f2026-01-02T03:04:05Z\x1fplain"),
        format!("{id}\x1fM\x1f2026-01-02T03:04:05+00:00\x1f1999-01-01T00:00:00+00:00\x1fx"),
    ]
    .join("\0");
    let mut parts = vec![Vec::new(); work::DIFF_ANSWERS];
    parts[2] = log.into_bytes();
    let d = work::parse_diff("w", "/f", parts);
    let listed: Vec<(&str, &str, &str, &str)> = d
        .commits
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.author.as_str(),
                c.date.as_str(),
                c.subject.as_str(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (
                id.as_str(),
                "Eve\x1f <e@x>",
                "2026-01-02T03:04:05+00:00",
                "hide\x1fme \x1b]0;t\x07"
            ),
            (other.as_str(), "Bob <b@x>", "2026-01-02T03:04:05Z", "plain"),
            (
                id.as_str(),
                "M",
                "2026-01-02T03:04:05+00:00",
                "1999-01-01T00:00:00+00:00\x1fx"
            ),
        ]
    );
}

/// The bundle an `apply` reads is written into its private folder without following a link
/// planted at its name, and never over an existing file.
#[cfg(unix)]
#[test]
fn a_bundle_is_never_written_through_a_link() {
    let root = tempfile::tempdir().unwrap();
    let target = root.path().join("host-file");
    std::fs::write(&target, "the person's").unwrap();
    let at = root.path().join("changes.bundle");
    std::os::unix::fs::symlink(&target, &at).unwrap();
    assert!(apply::write_new_private(&at, b"bundle").is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "the person's");
    let dangling = root.path().join("dangling.bundle");
    std::os::unix::fs::symlink(root.path().join("made-by-the-link"), &dangling).unwrap();
    assert!(apply::write_new_private(&dangling, b"bundle").is_err());
    assert!(!root.path().join("made-by-the-link").exists());
    let fresh = root.path().join("fresh.bundle");
    apply::write_new_private(&fresh, b"bundle").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(apply::write_new_private(&fresh, b"again").is_err());
}
