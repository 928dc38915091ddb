use super::*;

fn repo(dir: &Path) {
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(dir.join("config"), "[core]\n\tbare = false\n").unwrap();
}

fn has(g: &GitGuards, p: &str) -> bool {
    g.guards.iter().any(|x| x == p)
}

#[test]
fn config_keys_are_read_as_git_reads_them() {
    let text = r#"
[core]
	bare = false
	hooksPath = first
[CORE]
	HOOKSPATH = "./.husky/_" ; husky
[core "x"]
	hooksPath = ignored
[include]
	path = ../shared.gitconfig # a comment
[includeIf "gitdir:~/work/"]
	path = work.gitconfig
[remote "origin"]
	path = not-an-include
"#;
    let c = Config::parse(text);
    assert_eq!(c.hooks_paths, ["first", "./.husky/_"]);
    assert_eq!(c.includes, ["../shared.gitconfig", "work.gitconfig"]);
    assert_eq!(Config::parse(""), Config::default());
    // A value on the section's own line, an escaped quote, a continued line, subsection forms.
    let text = "[core] hooksPath = \"on the line\"\n[include] path = a.gitconfig\n[core]\n\thooksPath = con\\\ntinued\n[INCLUDEIF \"onbranch:main\"]\n\tPATH = b.gitconfig\n[include \"x\"]\n\tpath = not-an-include\n";
    let c = Config::parse(text);
    assert_eq!(c.hooks_paths, ["on the line", "continued"]);
    assert_eq!(c.includes, ["a.gitconfig", "b.gitconfig"]);
    assert_eq!(
        Config::value("[diff] ignoreSubmodules = dirty\n", "diff.ignoreSubmodules").as_deref(),
        Some("dirty")
    );
}

/// The person's own configuration (system and global files, and what they include) is read as
/// git reads it: run in a child process of the test binary with its own `GIT_CONFIG_*`, so no
/// other test sees them.
#[test]
fn the_persons_system_and_global_config_and_their_includes_are_read() {
    const CHILD: &str = "PO_SANDBOX_TEST_GLOBAL_CONFIG";
    if std::env::var_os(CHILD).is_some() {
        let hooks = global_config().hooks_paths;
        assert_eq!(
            hooks.first().map(String::as_str),
            Some("from-system"),
            "{hooks:?}"
        );
        assert!(hooks.iter().any(|h| h == "from-include"), "{hooks:?}");
        assert_eq!(
            hooks.last().map(String::as_str),
            Some("from-global"),
            "{hooks:?}"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("system"),
        "[core] hooksPath = from-system\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("inc.gitconfig"),
        "[core]\n\thooksPath = from-include\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("global"),
        "[include]\n\tpath = inc.gitconfig\n[core]\n\thooksPath = from-global\n",
    )
    .unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sandbox::folder::guards::git::tests::the_persons_system_and_global_config_and_their_includes_are_read", "--nocapture"])
        .env(CHILD, "1")
        .env("GIT_CONFIG_SYSTEM", dir.path().join("system"))
        .env("GIT_CONFIG_GLOBAL", dir.path().join("global"))
        .env("HOME", dir.path())
        .env_remove("GIT_CONFIG_NOSYSTEM")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_git_folder_of_a_repository_is_guarded_with_its_indirections() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    let git = ws.join(".git");
    repo(&git);
    // A linked worktree's pointer files, a submodule and a submodule of it.
    std::fs::create_dir_all(git.join("worktrees/wt")).unwrap();
    std::fs::write(git.join("worktrees/wt/commondir"), "../..\n").unwrap();
    std::fs::write(git.join("worktrees/wt/gitdir"), "/po-git/wt/.git\n").unwrap();
    repo(&git.join("modules/lib"));
    repo(&git.join("modules/lib/modules/inner"));
    // A submodule whose name has a slash.
    repo(&git.join("modules/deps/tool"));
    let g = guards(&ws, &["hooks", "config", "info"]);
    for p in [
        ".git/hooks",
        ".git/config",
        ".git/info",
        ".git/commondir",
        ".git/config.worktree",
        ".git/worktrees/wt/commondir",
        ".git/worktrees/wt/gitdir",
        ".git/worktrees/wt/config.worktree",
        ".git/modules/lib/hooks",
        ".git/modules/lib/config",
        ".git/modules/lib/commondir",
        ".git/modules/lib/modules/inner/hooks",
        ".git/modules/deps/tool/config",
    ] {
        assert!(has(&g, p), "{p} in {:#?}", g.guards);
    }
    assert!(g.files.is_empty());
}

#[test]
fn nested_repositories_are_found_but_not_in_dependencies_or_through_links() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    repo(&ws.join(".git"));
    repo(&ws.join("tools/vendored/.git"));
    repo(&ws.join("node_modules/pkg/.git"));
    repo(&ws.join("a/target/x/.git"));
    // A submodule checkout: its `.git` file names the superproject's modules folder, relative
    // to the checkout.
    repo(&ws.join(".git/modules/sub"));
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
    // A link to a repository elsewhere is not walked into.
    let elsewhere = tempfile::tempdir().unwrap();
    repo(&elsewhere.path().join("r/.git"));
    std::os::unix::fs::symlink(elsewhere.path(), ws.join("linked")).unwrap();
    // Deeper than the walk goes (a work tree MAX_DEPTH folders down is still found).
    let deep: String = (0..=MAX_DEPTH).map(|i| format!("d{i}/")).collect();
    let found: String = (1..MAX_DEPTH).map(|i| format!("e{i}/")).collect();
    repo(&ws.join(format!("e0/{found}")).join(".git"));
    repo(&ws.join(&deep).join(".git"));
    let at_limit = format!("e0/{}", found.trim_end_matches('/'));
    assert_eq!(
        work_trees(&ws),
        ["", "sub", "tools/vendored", at_limit.as_str()]
    );
    let g = guards(&ws, &["hooks", "config"]);
    for p in [
        "tools/vendored/.git/hooks",
        "tools/vendored/.git/config",
        "tools/vendored/.git/commondir",
        "sub/.git",
        ".git/modules/sub/hooks",
    ] {
        assert!(has(&g, p), "{p} in {:#?}", g.guards);
    }
    assert!(
        !g.guards
            .iter()
            .any(|p| p.contains("node_modules") || p.contains("target") || p.starts_with("linked"))
    );
}

#[test]
fn the_hooks_path_and_included_files_inside_the_workspace_are_guarded() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    repo(&ws.join(".git"));
    std::fs::write(
        ws.join(".git/config"),
        "[core]\n\thooksPath = .husky/_\n[include]\n\tpath = ../team.gitconfig\n\tpath = /etc/gitconfig\n\tpath = ~/.gitconfig-x\n",
    )
    .unwrap();
    let g = guards(&ws, &["hooks"]);
    assert!(has(&g, ".husky/_"), "{:#?}", g.guards);
    assert!(has(&g, "team.gitconfig"), "{:#?}", g.guards);
    assert_eq!(g.files, ["team.gitconfig"]);
    assert!(
        !g.guards
            .iter()
            .any(|p| p.contains("etc") || p.contains('~'))
    );
    // A hooks path outside the workspace is not mounted at all; one climbing out neither.
    for outside in ["/usr/share/hooks", "../../elsewhere", "~/hooks"] {
        std::fs::write(
            ws.join(".git/config"),
            format!("[core]\n\thooksPath = {outside}\n"),
        )
        .unwrap();
        let g = guards(&ws, &["hooks"]);
        assert_eq!(
            g.guards,
            [".git/hooks", ".git/commondir", ".git/config.worktree"],
            "{outside}"
        );
    }
}

#[test]
fn without_a_repository_at_the_top_git_itself_is_guarded() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    assert_eq!(guards(&ws, &["hooks"]).guards, [".git"]);
    // An empty `.git` placeholder is no repository either.
    std::fs::create_dir(ws.join(".git")).unwrap();
    assert_eq!(guards(&ws, &["hooks"]).guards, [".git"]);
}

#[test]
fn a_submodules_config_is_copied_without_core_worktree_and_the_host_file_is_kept() {
    let text = "[core]\n\trepositoryformatversion = 0\n\tworktree = ../../../sub\n\tWorkTree=x\n[remote \"origin\"]\n\tworktree = kept\n[core \"sub\"]\n\tbare = false\n";
    let copy = config_without_worktree(text);
    assert_eq!(
        copy,
        "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\tworktree = kept\n[core \"sub\"]\n\tbare = false\n"
    );
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    repo(&ws.join(".git"));
    repo(&ws.join(".git/modules/sub"));
    let g = guards(&ws, &["hooks", "config"]);
    // The top repository's config is mounted as it is; a submodule's from its copy.
    assert_eq!(g.copies, [".git/modules/sub/config"]);
    let r = super::super::resolve(&ws, &[".git/hooks".to_string(), ".git/config".to_string()]);
    let copies = tempfile::tempdir().unwrap();
    let dir = copies.path().join("c");
    std::fs::write(ws.join(".git/modules/sub/config"), text).unwrap();
    super::super::write_copies("w", &ws, &r, &dir).unwrap();
    let b = super::super::binds(&ws, &r, crate::host::HostOs::Linux, &dir);
    let sub = b
        .iter()
        .find(|b| b.target.ends_with(".git/modules/sub/config"))
        .unwrap();
    assert!(sub.read_only && sub.source.starts_with(&dir), "{sub:?}");
    assert_eq!(std::fs::read_to_string(&sub.source).unwrap(), copy);
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/modules/sub/config")).unwrap(),
        text
    );
    // Written afresh each time.
    super::super::write_copies("w", &ws, &r, &dir).unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    // A link planted at the submodule's config is refused, its target never read.
    std::fs::remove_file(ws.join(".git/modules/sub/config")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", ws.join(".git/modules/sub/config")).unwrap();
    assert!(super::super::write_copies("w", &ws, &r, &dir).is_err());
}
