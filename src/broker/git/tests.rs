use std::collections::HashMap;
use std::path::Path;
use std::process::Command as Run;

use super::path::{Endpoint, Service};
use super::pkt::{self, Command};
use super::push::{self, Context, PushRule, Verdict, judge, matches};
use super::*;

const ZERO: &str = "0000000000000000000000000000000000000000";
const A: &str = "1111111111111111111111111111111111111111";
const B: &str = "2222222222222222222222222222222222222222";

#[test]
fn only_smart_http_requests_of_plain_repository_paths_are_the_git_routes() {
    let t = path::parse(
        "GET",
        "/git/github.com/acme/app.git/info/refs",
        Some("service=git-upload-pack"),
    )
    .unwrap();
    assert_eq!(
        (t.host.as_str(), t.repo.as_str()),
        ("github.com", "acme/app.git")
    );
    assert_eq!(t.endpoint, Endpoint::Refs(Service::UploadPack));
    assert_eq!(t.repository(), "github.com/acme/app");
    // github.com and gitlab.com read names without case and `.git`; another host as written.
    assert_eq!(
        path::repository("github.com", "Acme/App.git/"),
        "github.com/acme/app"
    );
    assert_eq!(
        path::repository("git.test", "Acme/App.git"),
        "git.test/Acme/App.git"
    );
    assert!(push::repo_matches(
        "GitHub.com/Acme/*",
        "github.com/acme/app"
    ));
    assert!(!push::repo_matches("git.test/acme/*", "git.test/Acme/app"));
    let t = path::parse(
        "POST",
        "/git/git.test:8080/g/sub/app/git-receive-pack",
        None,
    )
    .unwrap();
    assert_eq!(t.endpoint, Endpoint::Rpc(Service::ReceivePack));
    assert_eq!(t.endpoint.target(), "git-receive-pack");
    for (method, p, q) in [
        ("GET", "/git/github.com/acme/app/info/refs", None),
        (
            "GET",
            "/git/github.com/acme/app/info/refs",
            Some("service=git-upload-pack&x=1"),
        ),
        (
            "POST",
            "/git/github.com/acme/app/info/refs",
            Some("service=git-upload-pack"),
        ),
        ("GET", "/git/github.com/acme/app/git-upload-pack", None),
        (
            "POST",
            "/git/github.com/acme/app/git-upload-pack",
            Some("a=b"),
        ),
        ("GET", "/git/github.com/acme/app/objects/info/packs", None),
        ("GET", "/git/github.com/acme/app/HEAD", None),
        ("POST", "/git/github.com/acme/%2e%2e/git-upload-pack", None),
        ("POST", "/git/github.com/acme/../x/git-upload-pack", None),
        ("POST", "/git/github.com/.git/x/git-upload-pack", None),
        ("POST", "/git/github.com/acme/./git-upload-pack", None),
        ("POST", "/git/github.com//x/git-upload-pack", None),
        ("POST", "/git/github.com/git-upload-pack", None),
        ("POST", "/git/GitHub.com/a/git-upload-pack", None),
        ("POST", "/git/evil.com@github.com/a/git-upload-pack", None),
        ("POST", "/git/github.com/a%2fb/git-upload-pack", None),
        ("POST", "/api/github.com/a/git-upload-pack", None),
    ] {
        assert!(path::parse(method, p, q).is_err(), "{method} {p} {q:?}");
    }
}

#[test]
fn hosts_are_names_with_an_origin_that_is_only_a_scheme_host_and_port() {
    assert_eq!(
        GitHost::parse("github.com").unwrap(),
        GitHost {
            name: "github.com".into(),
            origin: "https://github.com".into()
        }
    );
    let h = GitHost::parse(" git.test=http://127.0.0.1:8080/ ").unwrap();
    assert_eq!(
        (h.name.as_str(), h.origin.as_str()),
        ("git.test", "http://127.0.0.1:8080")
    );
    assert_eq!(h.entry(), "git.test=http://127.0.0.1:8080");
    for bad in [
        "",
        "Git.Test",
        "a b",
        "git.test=ftp://x",
        "git.test=https://x/path",
        "git.test=https://u@x",
        "x:0",
    ] {
        assert!(GitHost::parse(bad).is_err(), "{bad}");
    }
    let hosts = parse_hosts(["github.com", "github.com=http://127.0.0.1:1"]).unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].origin, "http://127.0.0.1:1");
}

#[test]
fn the_container_is_pointed_at_the_broker_by_its_environment_alone() {
    let hosts = parse_hosts(["github.com", "git.test:8443"]).unwrap();
    let env: std::collections::BTreeMap<String, String> =
        container_env("http://127.0.0.1:47390", &hosts)
            .into_iter()
            .collect();
    let count: usize = env["GIT_CONFIG_COUNT"].parse().unwrap();
    let pairs: Vec<(String, String)> = (0..count)
        .map(|i| {
            (
                env[&format!("GIT_CONFIG_KEY_{i}")].clone(),
                env[&format!("GIT_CONFIG_VALUE_{i}")].clone(),
            )
        })
        .collect();
    let gh = "url.http://127.0.0.1:47390/git/github.com/.insteadOf";
    assert!(pairs.contains(&(gh.into(), "https://github.com/".into())));
    assert!(pairs.contains(&(gh.into(), "git@github.com:".into())));
    assert!(pairs.contains(&(gh.into(), "ssh://git@github.com/".into())));
    let other = "url.http://127.0.0.1:47390/git/git.test:8443/.insteadOf";
    assert!(pairs.contains(&(other.into(), "https://git.test:8443/".into())));
    assert!(pairs.contains(&(other.into(), "git@git.test:".into())));
    // The helpers before are reset, then the placeholder's own (the value names the variable,
    // never a token).
    let helper = "credential.http://127.0.0.1:47390/git/.helper";
    let helpers: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == helper)
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(helpers[0], "");
    assert!(
        helpers[1].contains("$PO_BROKER_GIT_TOKEN"),
        "{}",
        helpers[1]
    );
}

#[test]
fn a_workspaces_remotes_name_repositories_on_the_carried_hosts_only() {
    let hosts = parse_hosts(["github.com", "git.test=http://127.0.0.1:9"]).unwrap();
    let urls: Vec<String> = [
        "https://github.com/Acme/App.git",
        "git@github.com:acme/lib.git",
        "ssh://git@github.com/acme/ssh-form",
        "https://git.test/g/sub/repo.git/",
        "https://gitlab.com/acme/app.git",
        "/srv/local.git",
        "git@github.com:acme/lib",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        remotes_on(&urls, &hosts),
        [
            "git.test/g/sub/repo.git",
            "github.com/acme/app",
            "github.com/acme/lib",
            "github.com/acme/ssh-form"
        ]
    );
}

fn command(old: &str, new: &str, name: &str) -> Command {
    Command {
        old: old.into(),
        new: new.into(),
        name: name.into(),
    }
}

#[test]
fn by_default_new_branches_of_the_workspaces_remotes_and_their_forward_moves_only() {
    let remotes = vec!["github.com/acme/app".to_string()];
    let created = |name: &str| name == "refs/heads/agent/mine";
    let ctx = Context {
        repository: "github.com/acme/app",
        remotes: &remotes,
        rules: &[],
        default_branch: Some("refs/heads/trunk"),
        created: &created,
    };
    assert_eq!(
        judge(&ctx, &command(ZERO, A, "refs/heads/agent/new")),
        Verdict::Allow
    );
    assert_eq!(
        judge(&ctx, &command(A, B, "refs/heads/agent/mine")),
        Verdict::FastForward
    );
    // The default branch (the host's, so main is just a branch here), a branch it did not
    // make, a tag, another kind of ref, a deletion.
    for (c, said) in [
        (command(A, B, "refs/heads/trunk"), "is the default branch"),
        (
            command(ZERO, A, "refs/heads/trunk"),
            "is the default branch",
        ),
        (
            command(A, B, "refs/heads/someone-else"),
            "was not created from this sandbox",
        ),
        (
            command(ZERO, A, "refs/tags/v1"),
            "only branches are pushed by default",
        ),
        (
            command(ZERO, A, "refs/notes/x"),
            "only branches are pushed by default",
        ),
        (
            command(A, ZERO, "refs/heads/agent/mine"),
            "deleting refs/heads/agent/mine",
        ),
    ] {
        match judge(&ctx, &c) {
            Verdict::Refuse(why) => {
                assert!(why.contains(said), "{why}");
                assert!(why.contains("git: push:"), "{why}");
            }
            other => panic!("{c:?}: {other:?}"),
        }
    }
    // Without the host's word, main and master are the default branch.
    let unknown = Context {
        default_branch: None,
        ..ctx
    };
    assert!(matches!(
        judge(&unknown, &command(ZERO, A, "refs/heads/main")),
        Verdict::Refuse(_)
    ));
    assert!(matches!(
        judge(&unknown, &command(ZERO, A, "refs/heads/master")),
        Verdict::Refuse(_)
    ));
    // Another repository: not a remote of the workspace.
    let other = Context {
        repository: "github.com/acme/other",
        ..unknown
    };
    match judge(&other, &command(ZERO, A, "refs/heads/agent/new")) {
        Verdict::Refuse(why) => assert!(
            why.starts_with("github.com/acme/other is not a remote of this workspace"),
            "{why}"
        ),
        v => panic!("{v:?}"),
    }
}

#[test]
fn a_push_rule_allows_more_and_force_allows_anything_it_matches() {
    let rules = vec![
        PushRule {
            repo: "github.com/acme/*".into(),
            refs: "refs/tags/v*".into(),
            force: false,
        },
        PushRule {
            repo: "github.com/acme/**".into(),
            refs: "refs/heads/main".into(),
            force: true,
        },
    ];
    let created = |_: &str| false;
    let ctx = Context {
        repository: "github.com/acme/other",
        remotes: &[],
        rules: &rules,
        default_branch: Some("refs/heads/main"),
        created: &created,
    };
    assert_eq!(
        judge(&ctx, &command(ZERO, A, "refs/tags/v1")),
        Verdict::Allow
    );
    assert_eq!(
        judge(&ctx, &command(A, B, "refs/tags/v1")),
        Verdict::FastForward
    );
    assert!(matches!(
        judge(&ctx, &command(A, ZERO, "refs/tags/v1")),
        Verdict::Refuse(_)
    ));
    assert_eq!(
        judge(&ctx, &command(A, B, "refs/heads/main")),
        Verdict::Allow
    );
    assert_eq!(
        judge(&ctx, &command(A, ZERO, "refs/heads/main")),
        Verdict::Allow
    );
    // `*` stays within a segment.
    let deeper = Context {
        repository: "github.com/acme/group/app",
        ..ctx
    };
    assert!(matches!(
        judge(&deeper, &command(ZERO, A, "refs/tags/v1")),
        Verdict::Refuse(_)
    ));
    assert!(matches("refs/heads/*", "refs/heads/x"));
    assert!(!matches("refs/heads/*", "refs/heads/x/y"));
    assert!(matches("refs/heads/**", "refs/heads/x/y"));
}

fn pkts(lines: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        if l.is_empty() {
            out.extend_from_slice(b"0000");
        } else {
            out.extend(pkt::line(l));
        }
    }
    out
}

#[test]
fn a_push_head_is_read_from_any_split_and_its_lies_are_refused() {
    let body = pkts(&[
        format!("{ZERO} {A} refs/heads/x\0report-status side-band-64k agent=git/2\n").as_bytes(),
        format!("{A} {B} refs/heads/y\n").as_bytes(),
        b"",
        b"PACK",
    ]);
    // Every split of the bytes before the flush needs more; from it on, the head is read.
    let flush_end = body.len() - 8;
    for cut in 0..flush_end {
        assert_eq!(pkt::head(&body[..cut]).unwrap(), None, "cut at {cut}");
    }
    let head = pkt::head(&body[..flush_end]).unwrap().unwrap();
    assert_eq!(
        head.commands,
        [
            command(ZERO, A, "refs/heads/x"),
            command(A, B, "refs/heads/y")
        ]
    );
    assert!(head.has("side-band-64k") && !head.sha256);
    assert_eq!(head.rest, flush_end);
    // A flush alone (git's probe) has no updates.
    assert_eq!(pkt::head(b"0000").unwrap().unwrap().commands, []);
    for bad in [
        pkts(&[format!("{ZERO} {A}\n").as_bytes(), b""]),
        pkts(&[
            format!("{ZERO} {} refs/heads/x\n", &A[..39]).as_bytes(),
            b"",
        ]),
        pkts(&[
            format!(
                "{ZERO} {} refs/heads/x\n",
                A.to_uppercase().replace('1', "A")
            )
            .as_bytes(),
            b"",
        ]),
        pkts(&[format!("{ZERO} {A} refs/heads/x y\n").as_bytes(), b""]),
        pkts(&[
            format!("{ZERO} {A} refs/heads/x\n").as_bytes(),
            format!("{ZERO} {A} refs/heads/y\0caps\n").as_bytes(),
            b"",
        ]),
        pkts(&[b"push-cert\0report-status\n", b""]),
        b"00zz".to_vec(),
        b"0002".to_vec(),
    ] {
        assert!(
            pkt::head(&bad).is_err(),
            "{}",
            String::from_utf8_lossy(&bad)
        );
    }
}

#[test]
fn a_refusal_is_a_report_git_reads_in_its_side_band() {
    let body = pkts(&[
        format!("{ZERO} {A} refs/tags/v1\0report-status side-band-64k\n").as_bytes(),
        format!("{ZERO} {A} refs/heads/x\n").as_bytes(),
        b"",
    ]);
    let head = pkt::head(&body).unwrap().unwrap();
    let report = pkt::refusal_report(
        &head,
        &[("refs/tags/v1".into(), "tags are not pushed".into())],
        "Po sandbox refused refs/tags/v1",
    );
    let text = String::from_utf8_lossy(&report);
    assert!(
        text.starts_with("0025\x02Po sandbox refused refs/tags/v1\n"),
        "{text:?}"
    );
    assert!(
        text.contains("\x01000eunpack ok\n0028ng refs/tags/v1 tags are not pushed\n"),
        "{text:?}"
    );
    assert!(
        text.contains("ng refs/heads/x another update of this push was refused\n"),
        "{text:?}"
    );
    assert!(text.ends_with("00000000"), "{text:?}");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Run::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `git <args>` in `dir` with `input` on its standard input; its standard output.
fn git_fed(dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Run::new("git")
        .current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap().stdout
}

fn pack_of(dir: &Path, revs: &str) -> Vec<u8> {
    let args = [
        "pack-objects",
        "--stdout",
        "--revs",
        "--thin",
        "--delta-base-offset",
    ];
    git_fed(dir, &args, revs.as_bytes())
}

#[test]
fn the_commits_of_a_real_pack_show_a_forward_move_and_not_a_rewritten_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    let mut ids = Vec::new();
    for i in 0..3 {
        std::fs::write(d.join("f"), format!("{i}\n").repeat(200)).unwrap();
        git(d, &["add", "f"]);
        git(d, &["commit", "-q", "-m", &format!("c{i}")]);
        ids.push(git(d, &["rev-parse", "HEAD"]));
    }
    let (c0, c1, c2) = (&ids[0], &ids[1], &ids[2]);
    // c0 -> c1 -> c2: pushing c2 onto c0 carries c1 and c2.
    let commits = pack::commits(&pack_of(d, &format!("{c2}\n^{c0}\n")), false).unwrap();
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[c2.as_str()], std::slice::from_ref(c1));
    assert!(pack::descends(&commits, c2, c0));
    // c1 rewritten (amended): it does not reach c1.
    git(d, &["reset", "-q", "--hard", c0]);
    std::fs::write(d.join("f"), "other\n").unwrap();
    git(d, &["commit", "-q", "-am", "rewritten"]);
    let rewritten = git(d, &["rev-parse", "HEAD"]);
    let commits = pack::commits(&pack_of(d, &format!("{rewritten}\n^{c1}\n")), false).unwrap();
    assert!(commits.contains_key(&rewritten));
    assert!(!pack::descends(&commits, &rewritten, c1));
    // Not a pack, or cut short: an error, so the push is refused.
    assert!(pack::commits(b"nope", false).is_err());
    let whole = pack_of(d, &format!("{c2}\n^{c0}\n"));
    assert!(pack::commits(&whole[..whole.len() / 2], false).is_err());
}

#[tokio::test]
async fn a_credential_comes_from_git_credential_fill_then_the_token_variables_then_the_command() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".gitconfig"),
        "[credential]\n\thelper = store\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join(".git-credentials"),
        "http://po-test:from-store@127.0.0.1:9\n",
    )
    .unwrap();
    let env = |extra: &[(&str, &str)]| {
        let mut env: HashMap<String, String> = [
            ("HOME", home.path().to_str().unwrap()),
            ("PATH", std::env::var("PATH").unwrap().as_str()),
            ("GIT_CONFIG_NOSYSTEM", "1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    };
    let stored = GitHost::parse("github.com=http://127.0.0.1:9").unwrap();
    let elsewhere = GitHost::parse("github.com=http://127.0.0.1:10").unwrap();
    let creds = Credentials::new(env(&[("GH_TOKEN", "from-gh-token")]));
    // The person's own helper first, for the origin the broker sends to.
    let c = creds.get(&stored).await.unwrap();
    assert_eq!(
        (c.username.as_str(), c.password.expose(), c.source.as_str()),
        ("po-test", "from-store", "git credential fill")
    );
    // Nothing stored for it, no prompt: then GH_TOKEN, for github.com's own origin only (never
    // for a name mapped elsewhere).
    assert!(creds.get(&elsewhere).await.is_none());
    let github = GitHost::parse("github.com").unwrap();
    let c = creds.get(&github).await.unwrap();
    assert_eq!(
        (c.username.as_str(), c.password.expose(), c.source.as_str()),
        ("x-access-token", "from-gh-token", "GH_TOKEN")
    );
    let other = GitHost::parse("git.test=http://127.0.0.1:10").unwrap();
    assert!(creds.get(&other).await.is_none());
    // Then the command, given the host's name.
    let creds = Credentials::new(env(&[(COMMAND_VAR, "echo \"token-for-$1\"")]));
    let c = creds.get(&other).await.unwrap();
    assert_eq!(
        (c.password.expose(), c.username.as_str()),
        ("token-for-git.test", "x-access-token")
    );
    assert!(c.source.starts_with(COMMAND_VAR), "{}", c.source);
    // A found credential is kept; forgotten, the sources are asked again (a rotated token).
    std::fs::write(
        home.path().join(".git-credentials"),
        "http://po-test:rotated@127.0.0.1:9\n",
    )
    .unwrap();
    let creds = Credentials::new(env(&[]));
    assert_eq!(
        creds.get(&stored).await.unwrap().password.expose(),
        "rotated"
    );
    std::fs::write(
        home.path().join(".git-credentials"),
        "http://po-test:rotated-again@127.0.0.1:9\n",
    )
    .unwrap();
    assert_eq!(
        creds.get(&stored).await.unwrap().password.expose(),
        "rotated"
    );
    // Kept at least a second whatever the host says; then forgotten, asked again.
    creds.forget(&stored);
    assert_eq!(
        creds.get(&stored).await.unwrap().password.expose(),
        "rotated"
    );
    tokio::time::sleep(MIN_KEPT + std::time::Duration::from_millis(100)).await;
    creds.forget(&stored);
    assert_eq!(
        creds.get(&stored).await.unwrap().password.expose(),
        "rotated-again"
    );
    assert!(!format!("{c:?}").contains("token-for-git.test"));
}

#[cfg(unix)]
mod live {
    use super::*;
    use tokio::net::UnixStream;

    use crate::broker::grant::{GrantRequest, GrantRoute};
    use crate::broker::server::{Broker, BrokerOptions};
    use crate::broker::test_support::{Seen, exchange, socket_request, upstream};

    /// A git host on 127.0.0.1 that records each request's head and answers an advertisement.
    async fn host() -> (u16, Seen) {
        upstream(|_| {
            let body = "001e# service=git-upload-pack\n0000";
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/x-git-upload-pack-advertisement\r\nset-cookie: x=1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        })
        .await
    }

    async fn broker(port: u16, dir: &std::path::Path) -> Broker {
        let env: HashMap<String, String> = [
            (COMMAND_VAR.to_string(), "echo real-host-token".to_string()),
            ("PATH".to_string(), std::env::var("PATH").unwrap()),
            ("HOME".to_string(), dir.display().to_string()),
        ]
        .into();
        Broker::start(BrokerOptions {
            host_env: env,
            socket_dir: dir.into(),
            tcp: false,
            egress: None,
            fetch_screen: false,
            registries: Vec::new(),
            git: Some(GitPolicy {
                hosts: parse_hosts([format!("git.test=http://127.0.0.1:{port}").as_str()]).unwrap(),
                push: vec![],
            }),
        })
        .await
        .unwrap()
    }

    fn request(workspace: &str) -> GrantRequest {
        GrantRequest {
            git_remotes: vec!["https://git.test/acme/app.git".into()],
            ..socket_request(workspace)
        }
    }

    #[tokio::test]
    async fn the_placeholder_is_swapped_for_the_host_credential_and_every_misplaced_one_refused() {
        let (port, seen) = host().await;
        let dir = tempfile::tempdir().unwrap();
        let b = broker(port, dir.path()).await;
        let grant = b.grant(request("w")).unwrap();
        let other = b.grant(request("v")).unwrap();
        let token = grant.env[TOKEN_VAR].expose().to_string();
        let others = other.env[TOKEN_VAR].expose().to_string();
        assert_eq!(grant.env["GIT_CONFIG_COUNT"].expose(), "6");
        let Some(GrantRoute::Socket { host_socket, .. }) = &grant.route else {
            panic!("socket route")
        };
        let refs = "/git/git.test/acme/app.git/info/refs?service=git-upload-pack";
        let get = |target: &str, headers: &str| {
            format!(
                "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n"
            )
        };
        let auth = |t: &str| format!("Authorization: {}\r\n", credential::basic("po", t));
        // The placeholder in Basic auth: sent on with the host's credential, never the
        // placeholder; the host's own headers (a cookie) stay with the broker.
        let ok = exchange(host_socket, get(refs, &auth(&token)).as_bytes()).await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(!ok.to_ascii_lowercase().contains("set-cookie"), "{ok}");
        let sent = seen.lock().unwrap()[0].clone();
        assert!(
            sent.starts_with("GET /acme/app.git/info/refs?service=git-upload-pack HTTP/1.1\r\n"),
            "{sent}"
        );
        assert!(
            sent.contains(&credential::basic("x-access-token", "real-host-token")),
            "{sent}"
        );
        assert!(
            !sent.contains(&token) && !sent.to_ascii_lowercase().contains("cookie"),
            "{sent}"
        );
        // No credentials: git is asked for them (its helper gives the placeholder).
        let none = exchange(host_socket, get(refs, "").as_bytes()).await;
        assert!(none.starts_with("HTTP/1.1 401"), "{none}");
        assert!(
            none.contains("www-authenticate: Basic realm=\"po-sandbox git\""),
            "{none}"
        );
        let refused = [
            // Another grant's placeholder on this grant's socket; a made-up one.
            (get(refs, &auth(&others)), "401"),
            (
                get(refs, &auth(&format!("po-git-{}", "0".repeat(64)))),
                "401",
            ),
            // The placeholder in the URL, in a second header, twice, or as Bearer.
            (get(&format!("{refs}&t={token}"), &auth(&token)), "400"),
            (
                get(
                    &format!("/git/git.test/{token}/info/refs?service=git-upload-pack"),
                    &auth(&token),
                ),
                "400",
            ),
            (
                get(refs, &format!("{}X-Token: {token}\r\n", auth(&token))),
                "400",
            ),
            (
                get(refs, &format!("{}{}", auth(&token), auth(&token))),
                "400",
            ),
            (
                get(refs, &format!("Authorization: Bearer {token}\r\n")),
                "401",
            ),
            // Not a smart-HTTP request, another host, an encoded climb.
            (get("/git/git.test/acme/app.git/HEAD", &auth(&token)), "404"),
            (
                get(
                    "/git/evil.test/acme/app.git/info/refs?service=git-upload-pack",
                    &auth(&token),
                ),
                "404",
            ),
            (
                get(
                    "/git/git.test/acme/%2e%2e/info/refs?service=git-upload-pack",
                    &auth(&token),
                ),
                "400",
            ),
            (
                format!(
                    "TRACE {refs} HTTP/1.1\r\nHost: x\r\n{}Connection: close\r\n\r\n",
                    auth(&token)
                ),
                "405",
            ),
        ];
        for (req, status) in &refused {
            let answer = exchange(host_socket, req.as_bytes()).await;
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {status}")),
                "{req}\n{answer}"
            );
        }
        // A smuggled second request after a framing lie: refused, the host sees neither.
        let smuggled = format!(
            "POST /git/git.test/acme/app.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n{}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{}",
            auth(&token),
            get(refs, &auth(&token))
        );
        let answer = exchange(host_socket, smuggled.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert_eq!(seen.lock().unwrap().len(), 1);
        // The git placeholder is no model token, and a revoked grant's is nothing.
        let model = exchange(host_socket, format!("GET /openai/v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").as_bytes()).await;
        assert!(!model.starts_with("HTTP/1.1 200"), "{model}");
        b.revoke(&grant.id);
        assert!(UnixStream::connect(host_socket).await.is_err());
        b.close().await;
    }

    #[tokio::test]
    async fn a_push_is_judged_whole_and_a_refused_one_never_reaches_the_host() {
        let (port, seen) = host().await;
        let dir = tempfile::tempdir().unwrap();
        let b = broker(port, dir.path()).await;
        let grant = b.grant(request("w")).unwrap();
        let token = grant.env[TOKEN_VAR].expose().to_string();
        let Some(GrantRoute::Socket { host_socket, .. }) = &grant.route else {
            panic!("socket route")
        };
        let post = |body: &[u8]| {
            let mut req = format!(
                "POST /git/git.test/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/x-git-receive-pack-request\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                format_args!("Authorization: {}\r\n", credential::basic("po", &token)),
                body.len()
            )
            .into_bytes();
            req.extend_from_slice(body);
            req
        };
        // A tag, split across two pkt-lines' worth of writes: refused in git's report.
        let body = pkts(&[
            format!("{ZERO} {A} refs/tags/v1\0report-status side-band-64k\n").as_bytes(),
            b"",
        ]);
        let answer = exchange(host_socket, &post(&body)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            answer.contains("ng refs/tags/v1 only branches are pushed by default"),
            "{answer}"
        );
        // An update of a branch it did not create; a body that lies about its head.
        let body = pkts(&[
            format!("{A} {B} refs/heads/feature\0report-status\n").as_bytes(),
            b"",
        ]);
        let answer = exchange(host_socket, &post(&body)).await;
        assert!(
            answer.contains(
                "ng refs/heads/feature refs/heads/feature was not created from this sandbox"
            ),
            "{answer}"
        );
        let answer = exchange(host_socket, &post(b"0032zzzz")).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        // Only the default-branch probes reached the host, never a receive-pack.
        assert!(
            seen.lock()
                .unwrap()
                .iter()
                .all(|s| !s.contains("git-receive-pack")),
            "{:?}",
            seen.lock().unwrap()
        );
        b.close().await;
    }
}

#[test]
fn a_parent_line_git_would_not_read_shows_no_forward_move() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("f"), "x\n").unwrap();
    git(d, &["add", "f"]);
    git(d, &["commit", "-q", "-m", "base"]);
    let old = git(d, &["rev-parse", "HEAD"]);
    let tree = git(d, &["rev-parse", "HEAD^{tree}"]);
    // A root commit whose `parent` line comes after its committer: git reads no parent.
    let text = format!(
        "tree {tree}\nauthor a <a@t> 0 +0000\ncommitter a <a@t> 0 +0000\nparent {old}\n\nlie\n"
    );
    let args = [
        "hash-object",
        "-t",
        "commit",
        "-w",
        "--literally",
        "--stdin",
    ];
    let out = git_fed(d, &args, text.as_bytes());
    let lie = String::from_utf8(out).unwrap().trim().to_string();
    let commits = pack::commits(&pack_of(d, &format!("{lie}\n^{old}\n")), false).unwrap();
    assert_eq!(commits.get(&lie).map(Vec::len), Some(0), "{commits:?}");
    assert!(!pack::descends(&commits, &lie, &old));
}
