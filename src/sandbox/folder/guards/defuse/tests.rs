use super::*;
use crate::sandbox::folder::guards::placeholders;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.email=a@b.invalid", "-c", "user.name=a"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository with files in a few folders and two gitlinks, one deep.
fn repository() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    git(d, &["init", "-q", "-b", "main"]);
    for f in [
        "a.txt",
        "src/lib/b.txt",
        "src/lib/c.txt",
        "zz/long-name-of-a-file.txt",
    ] {
        std::fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
        std::fs::write(d.join(f), f).unwrap();
    }
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "x"]);
    let commit = git(d, &["rev-parse", "HEAD"]);
    for link in ["node_modules/x", "src/lib/deep/vendored"] {
        let info = format!("160000,{commit},{link}");
        git(d, &["update-index", "--add", "--cacheinfo", &info]);
    }
    ws
}

#[test]
fn gitlinks_are_read_from_every_index_version() {
    let ws = repository();
    let d = ws.path();
    for version in ["2", "3", "4"] {
        git(d, &["update-index", "--index-version", version]);
        if version == "3" {
            // An extended flag (intent to add): its entry is two bytes longer.
            std::fs::write(d.join("new.txt"), "n").unwrap();
            git(d, &["add", "-N", "new.txt"]);
        }
        let links = gitlinks(&d.join(".git/index"), false).unwrap();
        assert_eq!(
            links,
            ["node_modules/x", "src/lib/deep/vendored"],
            "version {version}"
        );
    }
    assert_eq!(
        gitlinks(&d.join(".git/nothing"), false).unwrap(),
        Vec::<String>::new()
    );
    std::fs::write(d.join(".git/bad"), "DIRC\0\0\0\x09").unwrap();
    assert!(gitlinks(&d.join(".git/bad"), false).is_err());
    // Cut short anywhere: an error, never a panic.
    let bytes = std::fs::read(d.join(".git/index")).unwrap();
    for len in 0..bytes.len().min(400) {
        let _ = parse_gitlinks(&bytes[..len], 20);
    }
}

#[test]
fn the_setting_is_recognised_as_git_reads_it() {
    for (text, set) in [
        ("[diff]\n\tignoreSubmodules = dirty\n", true),
        ("[DIFF]\nIGNORESUBMODULES=all\n", true),
        ("[diff] ignoreSubmodules = all\n", true),
        ("[core]\n\tignoreSubmodules = all\n", false),
        ("[diff \"x\"]\n\tignoreSubmodules = all\n", false),
        ("[diff]\n\tignoreSubmodulesX = all\n", false),
        ("", false),
    ] {
        assert_eq!(sets_ignore_submodules(text), set, "{text:?}");
    }
    assert!(sets_ignore_submodules(BLOCK));
    assert_eq!(
        repository_configs(&[
            ".git/config".into(),
            "a/.git/config".into(),
            ".git/hooks".into(),
            "x/config".into()
        ]),
        [".git/config", "a/.git/config"]
    );
}

/// Host `git status` at `dir`, with a marker file that a planted `core.fsmonitor` would make.
fn status_runs_nothing(dir: &Path, marker: &Path) -> bool {
    let _ = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(dir)
        .output();
    !marker.exists()
}

#[test]
fn a_gitlink_the_agent_adds_runs_nothing_on_the_host_and_keeps_the_setting_at_the_stop() {
    let ws = repository();
    let d = ws.path();
    let config_before = std::fs::read(d.join(".git/config")).unwrap();
    let guard_dir = tempfile::tempdir().unwrap();
    let r = super::super::resolve(d, &[".git/config".to_string()]);
    super::super::prepare("w", d, &r, guard_dir.path()).unwrap();
    assert!(
        std::fs::read_to_string(d.join(".git/config"))
            .unwrap()
            .ends_with(BLOCK)
    );
    // As the agent would: a git folder of its own with an fsmonitor, a folder naming it, and a
    // gitlink for that folder in the index.
    let marker = d.join("ran");
    git(d, &["init", "-q", "--bare", "hidden/g"]);
    let cfg = d.join("hidden/g/config");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("bare = true", "bare = false");
    let fsmonitor = format!(
        "[core]\n\tfsmonitor = \"touch {}; false\"\n",
        marker.display()
    );
    std::fs::write(&cfg, text + &fsmonitor).unwrap();
    std::fs::create_dir_all(d.join("build/x")).unwrap();
    std::fs::write(d.join("build/x/.git"), "gitdir: ../../hidden/g\n").unwrap();
    let commit = git(d, &["rev-parse", "HEAD"]);
    git(
        d,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{commit},build/x"),
        ],
    );
    assert!(
        status_runs_nothing(d, &marker),
        "git status ran the planted fsmonitor"
    );
    // The stop keeps the setting: the index holds the agent's gitlink.
    placeholders::take_away(guard_dir.path());
    assert!(
        std::fs::read_to_string(d.join(".git/config"))
            .unwrap()
            .ends_with(BLOCK)
    );
    assert!(
        status_runs_nothing(d, &marker),
        "git status ran the planted fsmonitor after the stop"
    );
    // Without it, the next stop takes the setting away: the config is byte for byte as it was.
    git(d, &["rm", "-q", "--cached", "build/x"]);
    super::super::prepare("w", d, &r, guard_dir.path()).unwrap();
    placeholders::take_away(guard_dir.path());
    assert_eq!(std::fs::read(d.join(".git/config")).unwrap(), config_before);
}
