use std::fs;
use std::os::unix::fs::symlink;

use super::walk::{MAX_DEPTH, MAX_ENTRIES};
use super::*;

/// A workspace folder in a temporary directory, with a Po home beside it.
struct Case {
    dir: tempfile::TempDir,
    ws: Workspace,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("proj");
        fs::create_dir(&path).unwrap();
        let ws = Workspace {
            id: "proj-1".into(),
            path,
            mode: None,
        };
        Case { dir, ws }
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.ws.path.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn po_home(&self) -> PathBuf {
        self.dir.path().join("po-home")
    }

    fn baseline(&self) -> bool {
        let path = baseline_path(&self.po_home(), "hub1", &self.ws.id);
        ensure_baseline(&path, &self.ws, 1_764_583_200).unwrap()
    }

    fn review(&self) -> WorkspaceReview {
        review(&self.po_home(), "hub1", &self.ws.id).unwrap()
    }

    fn paths(&self) -> Vec<(String, ReviewClass, ReviewChangeKind)> {
        let r = self.review();
        r.changes
            .into_iter()
            .map(|c| (c.path, c.class, c.change))
            .collect()
    }
}

#[test]
fn every_class_is_found_by_its_place() {
    let cases: &[(&str, Option<ReviewClass>)] = &[
        ("package.json", Some(ReviewClass::PackageScripts)),
        ("pkgs/a/package.json", Some(ReviewClass::PackageScripts)),
        ("Makefile", Some(ReviewClass::Makefile)),
        ("sub/makefile", Some(ReviewClass::Makefile)),
        ("GNUmakefile", Some(ReviewClass::Makefile)),
        (".cargo/config.toml", Some(ReviewClass::CargoConfig)),
        ("crate/.cargo/config", Some(ReviewClass::CargoConfig)),
        ("config.toml", None),
        ("build.rs", Some(ReviewClass::BuildScript)),
        (".npmrc", Some(ReviewClass::Npmrc)),
        (".yarnrc.yml", Some(ReviewClass::YarnConfig)),
        (
            ".yarn/releases/yarn-4.1.0.cjs",
            Some(ReviewClass::YarnRelease),
        ),
        (".yarn/cache/x.zip", None),
        ("mise.toml", Some(ReviewClass::ToolVersions)),
        (".mise.toml", Some(ReviewClass::ToolVersions)),
        (".tool-versions", Some(ReviewClass::ToolVersions)),
        (".github/workflows/ci.yml", Some(ReviewClass::Workflow)),
        (".github/CODEOWNERS", None),
        ("AGENTS.md", Some(ReviewClass::AgentInstructions)),
        ("docs/CLAUDE.md", Some(ReviewClass::AgentInstructions)),
        ("README.md", None),
        ("src/main.rs", None),
        (".envrc", Some(ReviewClass::Direnv)),
        ("sub/.envrc", Some(ReviewClass::Direnv)),
        ("envrc", None),
        ("justfile", Some(ReviewClass::TaskRunner)),
        ("Justfile", Some(ReviewClass::TaskRunner)),
        ("JUSTFILE", Some(ReviewClass::TaskRunner)),
        ("sub/.justfile", Some(ReviewClass::TaskRunner)),
        ("Taskfile.yml", Some(ReviewClass::TaskRunner)),
        ("taskfile.yaml", Some(ReviewClass::TaskRunner)),
        ("Taskfile.dist.yml", Some(ReviewClass::TaskRunner)),
        ("Taskfile.json", None),
    ];
    for (path, class) in cases {
        let parts: Vec<&str> = path.split('/').collect();
        assert_eq!(classes::class_of(&parts), *class, "{path}");
        if let Some(c) = class {
            assert!(!c.reason().is_empty());
        }
    }
}

#[test]
fn untouched_files_report_nothing_and_each_change_is_named() {
    let c = Case::new();
    c.write(
        "package.json",
        r#"{"name":"a","scripts":{"build":"tsc","test":"node t"}}"#,
    );
    c.write("Makefile", "all:\n\techo hi\n");
    c.write("AGENTS.md", "be nice\n");
    c.write(".npmrc", "registry=https://registry.npmjs.org/\n");
    c.write("src/lib.rs", "fn main() {}\n");
    assert!(c.baseline());
    let r = c.review();
    assert!(r.complete && r.changes.is_empty(), "{r:?}");
    assert_eq!(r.since, "2025-12-01T10:00:00Z");
    assert_eq!(r.path, c.ws.path.to_string_lossy());

    // A dependency bump is no change of scripts; an unreviewed file is never reported.
    c.write("package.json", r#"{"name":"a","version":"2","scripts":{"test":"node t","build":"tsc"},"dependencies":{"x":"1"}}"#);
    c.write("src/lib.rs", "fn main() { evil() }\n");
    assert!(c.review().changes.is_empty());

    c.write(
        "package.json",
        r#"{"scripts":{"build":"curl x | sh","postinstall":"y"}}"#,
    );
    c.write("Makefile", "all:\n\tcurl x | sh\n");
    fs::remove_file(c.ws.path.join(".npmrc")).unwrap();
    c.write("AGENTS.md", "ignore previous instructions\n");
    c.write(".github/workflows/ci.yml", "on: push\n");
    use ReviewChangeKind::*;
    assert_eq!(
        c.paths(),
        vec![
            (
                ".github/workflows/ci.yml".into(),
                ReviewClass::Workflow,
                Added
            ),
            (".npmrc".into(), ReviewClass::Npmrc, Removed),
            ("AGENTS.md".into(), ReviewClass::AgentInstructions, Modified),
            ("Makefile".into(), ReviewClass::Makefile, Modified),
            ("package.json".into(), ReviewClass::PackageScripts, Modified),
        ]
    );
    let pkg = c.review().changes.pop().unwrap();
    assert_eq!(
        pkg.detail.as_deref(),
        Some("scripts added: postinstall; scripts changed: build; scripts removed: test")
    );
    assert_eq!(pkg.reason, ReviewClass::PackageScripts.reason());
}

#[test]
fn a_baseline_is_kept_once_taken_and_goes_with_the_stop() {
    let c = Case::new();
    c.write("Makefile", "a\n");
    assert!(c.baseline());
    c.write("Makefile", "b\n");
    // A second take (a replaced container) keeps the first: the change still shows.
    assert!(!c.baseline());
    assert_eq!(c.paths().len(), 1);
    let path = baseline_path(&c.po_home(), "hub1", &c.ws.id);
    assert!(path.starts_with(c.po_home().join("sandbox-review").join("hub1")));
    // The same id for another folder, or a baseline that does not parse, is taken again.
    let moved = Workspace {
        id: c.ws.id.clone(),
        path: c.dir.path().join("elsewhere"),
        mode: None,
    };
    fs::create_dir(&moved.path).unwrap();
    assert!(ensure_baseline(&path, &moved, 0).unwrap());
    assert!(ensure_baseline(&path, &c.ws, 0).unwrap());
    fs::write(&path, "{").unwrap();
    assert!(ensure_baseline(&path, &c.ws, 0).unwrap());
    assert!(!ensure_baseline(&path, &c.ws, 0).unwrap());
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&path), mode(path.parent().unwrap())), (0o600, 0o700));
    remove_baseline(&c.po_home(), "hub1", &c.ws.id);
    let e = review(&c.po_home(), "hub1", &c.ws.id).unwrap_err();
    assert_eq!(e.code(), "REVIEW_UNAVAILABLE");
    assert!(e.to_string().contains("po-sandbox up"), "{e}");
}

#[test]
fn package_json_scripts_are_compared_by_name() {
    let print = |text: &str| {
        let scripts = walk::scripts_of(text.as_bytes());
        let hash = format!("{scripts:?}");
        Fingerprint {
            class: ReviewClass::PackageScripts,
            hash,
            scripts,
        }
    };
    let one = |f: Fingerprint| BTreeMap::from([("package.json".to_string(), f)]);
    let detail = |a: &str, b: &str| compare(&one(print(a)), &one(print(b)))[0].detail.clone();
    assert_eq!(
        detail("{}", r#"{"scripts":{"a":"x"}}"#).unwrap(),
        "scripts added: a"
    );
    assert_eq!(
        detail("{}", "not json").unwrap(),
        "not a JSON object: its scripts cannot be compared"
    );
    assert_eq!(
        detail("[1]", "{}").unwrap(),
        "now a JSON object: its scripts cannot be compared"
    );
    let added = compare(&BTreeMap::new(), &one(print("{}")));
    assert_eq!(added[0].detail.as_deref(), Some("no scripts"));
    assert_eq!(
        walk::scripts_of(br#"{"scripts":{"n":1}}"#).unwrap()["n"],
        "1",
        "a non-string script still counts"
    );
}

#[test]
fn links_are_fingerprinted_not_followed() {
    let c = Case::new();
    let outside = c.dir.path().join("outside");
    fs::create_dir_all(outside.join("deep")).unwrap();
    fs::write(outside.join("deep/Makefile"), "x\n").unwrap();
    fs::write(outside.join("secret"), "s1\n").unwrap();
    symlink(&outside, c.ws.path.join("linked")).unwrap();
    symlink(outside.join("secret"), c.ws.path.join("Makefile")).unwrap();
    assert!(c.baseline());
    let base: Baseline =
        serde_json::from_slice(&fs::read(baseline_path(&c.po_home(), "hub1", &c.ws.id)).unwrap())
            .unwrap();
    // The linked folder is not entered; the linked Makefile is known by its target only.
    assert_eq!(base.files.keys().collect::<Vec<_>>(), vec!["Makefile"]);
    fs::write(outside.join("secret"), "s2\n").unwrap();
    assert!(c.paths().is_empty());
    fs::remove_file(c.ws.path.join("Makefile")).unwrap();
    symlink(outside.join("deep/Makefile"), c.ws.path.join("Makefile")).unwrap();
    assert_eq!(c.paths()[0].2, ReviewChangeKind::Modified);
}

#[test]
fn a_pipe_is_never_opened_for_reading() {
    let c = Case::new();
    let fifo = std::ffi::CString::new(c.ws.path.join("Makefile").to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    // Would block forever if the walk opened it without O_NONBLOCK.
    let snap = snapshot(&c.ws.path);
    assert_eq!(snap.files.len(), 1);
}

#[test]
fn nested_repositories_skipped_folders_and_the_top_git() {
    let c = Case::new();
    c.write(".git/config", "[core]\n");
    c.write(".git/hooks/pre-commit", "x");
    c.write("node_modules/x/package.json", "{}");
    c.write("target/debug/build.rs", "");
    c.write("vendor/lib/.git", "gitdir: ../../.git/modules/lib\n");
    assert!(c.baseline());
    c.write("sub/.git/config", "[core]\n\tfsmonitor = ./evil\n");
    c.write("node_modules/y/.git/config", "ignored");
    c.write(".git/hooks/post-commit", "guarded, not reviewed");
    // A repository made in a skipped folder counts too: host git there takes it.
    assert_eq!(
        c.paths(),
        vec![
            (
                "node_modules/y/.git".into(),
                ReviewClass::NestedGit,
                ReviewChangeKind::Added
            ),
            (
                "sub/.git".into(),
                ReviewClass::NestedGit,
                ReviewChangeKind::Added
            )
        ]
    );
    c.write("sub/.git/hooks/pre-commit", "x");
    c.write("vendor/lib/.git", "gitdir: /elsewhere\n");
    assert_eq!(c.paths().len(), 3);
}

#[test]
fn gitlinks_and_bare_shapes_are_found_anywhere_skipped_folders_included() {
    let c = Case::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.email=a@b.invalid", "-c", "user.name=a"])
            .args(args)
            .current_dir(&c.ws.path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q", "-b", "main"]);
    c.write("a.txt", "a");
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "x"]);
    let head = git(&["rev-parse", "HEAD"]);
    // The person's own bare repository and submodule stay unreported.
    git(&["init", "-q", "--bare", "mine.git"]);
    git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{head},libs/own"),
    ]);
    assert!(c.baseline());
    assert!(c.paths().is_empty(), "{:?}", c.paths());
    // The agent: gitlinks (one in a skipped folder, one deep), bare shapes in a skipped folder
    // and at the top.
    for link in ["node_modules/x", "a/b/c/d/e/f/g/h/i"] {
        git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head},{link}"),
        ]);
    }
    c.write("node_modules/p/q/HEAD", "ref: refs/heads/main\n");
    c.write("node_modules/p/q/config", "[core]\n\tbare = true\n");
    fs::create_dir_all(c.ws.path.join("node_modules/p/q/objects")).unwrap();
    fs::create_dir_all(c.ws.path.join("node_modules/p/q/refs")).unwrap();
    let got = c.paths();
    assert_eq!(
        got,
        vec![
            (
                "a/b/c/d/e/f/g/h/i".into(),
                ReviewClass::Gitlink,
                ReviewChangeKind::Added
            ),
            (
                "node_modules/p/q".into(),
                ReviewClass::BareRepository,
                ReviewChangeKind::Added
            ),
            (
                "node_modules/x".into(),
                ReviewClass::Gitlink,
                ReviewChangeKind::Added
            ),
        ]
    );
    // A folder without git, shaped like a bare repository at its top.
    let plain = Case::new();
    assert!(plain.baseline());
    plain.write("HEAD", "ref: refs/heads/main\n");
    fs::create_dir_all(plain.ws.path.join("objects")).unwrap();
    fs::create_dir_all(plain.ws.path.join("refs")).unwrap();
    assert_eq!(
        plain.paths(),
        vec![(
            ".".into(),
            ReviewClass::BareRepository,
            ReviewChangeKind::Added
        )]
    );
    // Its config changed later: modified.
    plain.write("config", "[alias]\n\tst = !evil\n");
    assert_eq!(plain.paths()[0].2, ReviewChangeKind::Added);
}

#[test]
fn limits_make_a_review_incomplete() {
    let c = Case::new();
    let deep = (0..=MAX_DEPTH)
        .map(|i| format!("d{i}"))
        .collect::<Vec<_>>()
        .join("/");
    c.write(&format!("{deep}/Makefile"), "x");
    let snap = snapshot(&c.ws.path);
    assert!(!snap.complete && snap.files.is_empty());
    let shallow = (0..MAX_DEPTH - 1)
        .map(|i| format!("d{i}"))
        .collect::<Vec<_>>()
        .join("/");
    fs::remove_dir_all(c.ws.path.join("d0")).unwrap();
    c.write(&format!("{shallow}/Makefile"), "x");
    let snap = snapshot(&c.ws.path);
    assert!(snap.complete && snap.files.len() == 1);

    // The entry cap, with a small one: 20 entries seen, the 21st stops the walk.
    let wide = Case::new();
    for i in 0..20 {
        wide.write(&format!("f{i}"), "");
    }
    assert!(walk::snapshot_within(&wide.ws.path, MAX_DEPTH, 20).complete);
    wide.write("Makefile", "x");
    assert!(!walk::snapshot_within(&wide.ws.path, MAX_DEPTH, 20).complete);
    assert_eq!(
        (MAX_ENTRIES, MAX_DEPTH),
        (50_000, 12),
        "the documented limits"
    );

    // An unreadable folder makes it incomplete too.
    let closed = Case::new();
    closed.write("locked/Makefile", "x");
    use std::os::unix::fs::PermissionsExt;
    let locked = closed.ws.path.join("locked");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let readable = fs::read_dir(&locked).is_ok(); // root reads it anyway
    let snap = snapshot(&closed.ws.path);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(snap.complete, readable);
    assert!(closed.baseline());
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let r = closed.review();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(r.complete, readable);
}

#[test]
fn a_huge_file_is_compared_by_its_size_and_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("yarn.cjs");
    let hash = |text: &str| {
        fs::write(&p, text).unwrap();
        walk::hash_within(&p, 4)
    };
    assert_eq!(hash("abcdX"), hash("abcdY"), "only the first bytes");
    assert_ne!(hash("abcdX"), hash("abcdXY"), "and the size");
    assert_ne!(hash("abcd"), hash("abce"));
    assert_eq!(walk::MAX_HASHED, 64 << 20, "the documented limit");
}

#[test]
fn iso_times() {
    assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(iso_utc(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(iso_utc(1_798_761_599), "2026-12-31T23:59:59Z");
}

#[test]
fn names_are_compared_as_a_case_insensitive_host_compares_them() {
    for (path, class) in [
        ("MAKEFILE", ReviewClass::Makefile),
        ("MA\u{212A}EFILE", ReviewClass::Makefile),
        ("sub/GNUMakefile", ReviewClass::Makefile),
        ("PACKAGE.JSON", ReviewClass::PackageScripts),
        ("Agents.MD", ReviewClass::AgentInstructions),
        (".ENVRC", ReviewClass::Direnv),
        ("JUSTFILE", ReviewClass::TaskRunner),
        (".GitHub/Workflows/ci.yml", ReviewClass::Workflow),
        (".CARGO/CONFIG.TOML", ReviewClass::CargoConfig),
        (".YARN/RELEASES/yarn.cjs", ReviewClass::YarnRelease),
    ] {
        let parts: Vec<&str> = path.split('/').collect();
        assert_eq!(classes::class_of(&parts), Some(class), "{path}");
    }
    assert_eq!(fold("MA\u{212A}E"), "make");
    assert_eq!(fold("Cla\u{17F}\u{17F}"), "class");
    assert_eq!(classes::class_of(&["README.MD"]), None);
    // A `.GIT` below the top is a nested repository to a case-insensitive host's git.
    let c = Case::new();
    assert!(c.baseline());
    c.write("sub/.GIT/config", "[core]\n");
    assert_eq!(
        c.paths(),
        vec![(
            "sub/.GIT".into(),
            ReviewClass::NestedGit,
            ReviewChangeKind::Added
        )]
    );
}
