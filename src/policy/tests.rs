use std::collections::HashMap;

use super::edit::{self, ListOf};
use super::effective::{Given, NetworkPolicy, Source};
use super::*;
use crate::host::HostEnv;

const GOOD: &str = "# my policy\nnetwork: allowlist\nallow:\n  - registry.npmjs.org:443   # npm\n  - \"*.github.com:443\"\nresolve:\n  allowed.test: 127.0.0.1\nworkspaces:\n  web-1:\n    allow:\n      - api.example.com:8443\n";

fn host(vars: &[(&str, &str)]) -> HostEnv {
    let vars: HashMap<String, Option<String>> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect();
    HostEnv::given(Some(vars))
}

fn entry(e: &str) -> AllowEntry {
    rules::parse_allow(e).unwrap()
}

#[test]
fn a_good_file_is_read_with_the_line_of_each_value() {
    let f = parse(GOOD).unwrap();
    assert_eq!(
        f.network,
        Some(AtLine {
            value: NetworkMode::Allowlist,
            line: 2
        })
    );
    let allow = f.allow.unwrap();
    assert_eq!(allow.line, 3);
    assert_eq!(
        allow.value,
        vec![entry("registry.npmjs.org:443"), entry("*.github.com:443")]
    );
    assert_eq!(
        f.resolve.unwrap().value["allowed.test"].to_string(),
        "127.0.0.1"
    );
    let ws = &f.workspaces["web-1"];
    assert_eq!(
        (ws.line, ws.value.clone()),
        (10, vec![entry("api.example.com:8443")])
    );
    // Empty, or only comments: no value.
    assert_eq!(parse("").unwrap(), PolicyFile::default());
    assert_eq!(parse("# nothing yet\n\n").unwrap(), PolicyFile::default());
}

/// Every problem names its line and field, and the form expected.
#[test]
fn a_bad_file_names_the_line_and_the_field() {
    let cases = [
        (
            "network: closed\n",
            Some(1),
            "network",
            "is not a network mode",
        ),
        (
            "allow:\n  - a.test:443\n  - no-port.test\n",
            Some(3),
            "allow[1]",
            "names no port",
        ),
        (
            "allow:\n  - *.github.com:443\n",
            Some(2),
            "the file",
            "must be quoted",
        ),
        (
            "network: none\nalow: []\n",
            Some(2),
            "the file",
            "unknown field `alow`",
        ),
        (
            "resolve:\n  a.test: not-an-ip\n",
            Some(2),
            "resolve.a.test",
            "NAME: ADDRESS",
        ),
        (
            "workspaces:\n  w1:\n    allow: [x.test]\n",
            Some(3),
            "workspaces.w1.allow[0]",
            "names no port",
        ),
        (
            "workspaces:\n  \"../up\":\n    allow: []\n",
            Some(2),
            "workspaces.../up",
            "Workspace id",
        ),
        ("allow: [a.test:443\n", Some(2), "the file", ""),
        (
            "allow: registry.npmjs.org:443\n",
            Some(1),
            "allow",
            "expected a sequence",
        ),
    ];
    for (text, line, field, says) in cases {
        let p = parse(text).unwrap_err();
        assert_eq!(p.line, line, "{text:?}: {p}");
        assert_eq!(p.field, field, "{text:?}: {p}");
        assert!(p.reason.contains(says), "{text:?}: {p}");
        assert!(
            p.to_string()
                .starts_with(&format!("line {}, {field}: ", line.unwrap()))
        );
    }
}

#[test]
fn an_option_beats_a_variable_beats_the_file_beats_the_default() {
    let file = parse(GOOD).unwrap();
    let none = NetworkPolicy::resolve(Given::default(), &host(&[]), None).unwrap();
    assert_eq!(none.mode, (NetworkMode::Open, Source::Default));
    assert_eq!(none.allow, (None, Source::Default));
    assert_eq!(none.allow_list(), rules::default_allow());
    let from_file = NetworkPolicy::resolve(Given::default(), &host(&[]), Some(&file)).unwrap();
    assert_eq!(from_file.mode, (NetworkMode::Allowlist, Source::File(2)));
    assert_eq!(from_file.allow.1, Source::File(3));
    assert_eq!(from_file.resolve.1, Source::File(6));
    let vars = host(&[
        ("PO_SANDBOX_NETWORK", "none"),
        ("PO_SANDBOX_NETWORK_ALLOW", "b.test:443"),
    ]);
    let from_var = NetworkPolicy::resolve(Given::default(), &vars, Some(&file)).unwrap();
    assert_eq!(
        from_var.mode,
        (NetworkMode::None, Source::Variable("PO_SANDBOX_NETWORK"))
    );
    assert_eq!(
        from_var.allow,
        (
            Some(vec![entry("b.test:443")]),
            Source::Variable("PO_SANDBOX_NETWORK_ALLOW")
        )
    );
    assert_eq!(from_var.resolve.1, Source::File(6));
    let given = Given {
        mode: Some("open".into()),
        allow: Some(vec!["c.test:80".into()]),
        resolve: Some(vec![]),
    };
    let from_option = NetworkPolicy::resolve(given, &vars, Some(&file)).unwrap();
    assert_eq!(from_option.mode.1, Source::Option("network"));
    assert_eq!(from_option.allow.1, Source::Option("networkAllow"));
    assert_eq!(
        from_option.resolve,
        (Default::default(), Source::Option("networkResolve"))
    );
    // A watching hub takes the file's new values only where the file decides.
    let changed = parse("network: none\nallow: [d.test:443]\n").unwrap();
    let next = from_var.with_file(&changed);
    assert_eq!(next.allow, from_var.allow, "the variable still decides");
    assert_eq!(next.mode, from_var.mode);
    assert_eq!(next.resolve, (Default::default(), Source::Default));
    assert!(next.workspaces.is_empty());
    let next = from_file.with_file(&changed);
    assert_eq!(
        next.allow,
        (Some(vec![entry("d.test:443")]), Source::File(2))
    );
    assert_eq!(next.mode, (NetworkMode::None, Source::File(1)));
    // A bad variable is still the variable's error.
    let bad = host(&[("PO_SANDBOX_NETWORK_ALLOW", "nope")]);
    let e = NetworkPolicy::resolve(Given::default(), &bad, Some(&file)).unwrap_err();
    assert!(e.to_string().contains("PO_SANDBOX_NETWORK_ALLOW"), "{e}");
}

/// Adding and removing keeps every other line as it was, comments too.
#[test]
fn allow_and_deny_edit_the_list_and_keep_the_rest() {
    let added = edit::allow(GOOD, ListOf::Every, &entry("new.test:443")).unwrap();
    assert!(added.changed);
    assert_eq!(
        added.text,
        GOOD.replace(
            "\"*.github.com:443\"\n",
            "\"*.github.com:443\"\n  - new.test:443\n"
        )
    );
    let again = edit::allow(&added.text, ListOf::Every, &entry("NEW.test.:443")).unwrap();
    assert!(!again.changed, "{}", again.note);
    assert!(
        again.note.contains("already in the list at line 3"),
        "{}",
        again.note
    );
    let removed = edit::deny(&added.text, ListOf::Every, &entry("new.test:443")).unwrap();
    assert_eq!(removed.text, GOOD);
    // One name under a wildcard cannot be left out: refused, naming the wildcard.
    let p = edit::deny(GOOD, ListOf::Every, &entry("api.github.com:443")).unwrap_err();
    assert!(p.reason.contains("*.github.com:443"), "{p}");
    let nothing = edit::deny(GOOD, ListOf::Every, &entry("else.test:443")).unwrap();
    assert!(!nothing.changed);
    // A workspace's own list, made where missing, then added to.
    let ws = edit::allow(GOOD, ListOf::Workspace("web-2"), &entry("*.cdn.test:443")).unwrap();
    let f = parse(&ws.text).unwrap();
    assert_eq!(f.workspaces["web-2"].value, vec![entry("*.cdn.test:443")]);
    assert_eq!(
        f.workspaces["web-1"].value,
        vec![entry("api.example.com:8443")]
    );
    let ws = edit::allow(&ws.text, ListOf::Workspace("web-1"), &entry("b.test:443")).unwrap();
    let f = parse(&ws.text).unwrap();
    assert_eq!(
        f.workspaces["web-1"].value,
        vec![entry("api.example.com:8443"), entry("b.test:443")]
    );
    assert!(ws.text.starts_with("# my policy\n"));
    let fresh = edit::allow("", ListOf::Workspace("w"), &entry("c.test:443")).unwrap();
    assert_eq!(
        parse(&fresh.text).unwrap().workspaces["w"].value,
        vec![entry("c.test:443")]
    );
}

/// With no list in the file the default list is in force: adding writes it out with the
/// new entry, denying one of it writes the rest.
#[test]
fn the_default_list_is_written_out_before_it_changes() {
    let text = "# mine\nnetwork: allowlist\n";
    let added = edit::allow(text, ListOf::Every, &entry("new.test:443")).unwrap();
    let mut want = rules::default_allow();
    want.push(entry("new.test:443"));
    assert_eq!(parse(&added.text).unwrap().allow.unwrap().value, want);
    assert!(added.text.starts_with(text));
    let denied = edit::deny(text, ListOf::Every, &entry("github.com:443")).unwrap();
    let left = parse(&denied.text).unwrap().allow.unwrap().value;
    assert_eq!(left.len(), rules::DEFAULT_ALLOW.len() - 1);
    assert!(!left.contains(&entry("github.com:443")));
    // A flow list becomes a block list, its comment kept.
    let flow = "allow: [a.test:443, \"*.b.test:443\"]  # short\n";
    let added = edit::allow(flow, ListOf::Every, &entry("c.test:443")).unwrap();
    assert_eq!(
        added.text,
        "allow: # short\n  - a.test:443\n  - \"*.b.test:443\"\n  - c.test:443\n"
    );
    let emptied = edit::deny("allow: [a.test:443]\n", ListOf::Every, &entry("a.test:443")).unwrap();
    assert_eq!(parse(&emptied.text).unwrap().allow.unwrap().value, vec![]);
}

#[test]
fn an_entry_takes_443_when_it_names_no_port_and_presets_are_good_policies() {
    assert_eq!(
        edit::entry("example.com").unwrap(),
        entry("example.com:443")
    );
    assert_eq!(
        edit::entry("example.com:80").unwrap(),
        entry("example.com:80")
    );
    assert_eq!(edit::entry("[::1]").unwrap(), entry("[::1]:443"));
    assert!(edit::entry("exa mple.com").is_err());
    for name in ["open", "balanced", "closed"] {
        let f = parse(&edit::preset(name).unwrap()).unwrap();
        assert!(f.network.is_some(), "{name}");
    }
    assert_eq!(
        parse(&edit::preset("balanced").unwrap())
            .unwrap()
            .allow
            .unwrap()
            .value,
        rules::default_allow()
    );
    assert!(edit::preset("lax").is_none());
}

/// The denials log: appended, read back oldest first, grouped by destination (the most denied
/// first, the last reason kept), rotated past its bound with the lines before kept once.
#[test]
fn denials_are_kept_grouped_and_bounded() {
    use super::denials::{self, Denial};
    let dir = tempfile::tempdir().unwrap();
    let d = |at: u64, ws: &str, host: &str, reason: &str| Denial {
        at,
        workspace: ws.into(),
        host: host.into(),
        port: 443,
        reason: reason.into(),
    };
    denials::record(dir.path(), &d(10, "w1", "a.test", "first"));
    denials::record(dir.path(), &d(20, "w2", "a.test", "second"));
    denials::record(dir.path(), &d(15, "w1", "b.test", "other"));
    std::fs::write(
        dir.path().join(denials::FILE),
        std::fs::read_to_string(dir.path().join(denials::FILE)).unwrap() + "not json\n",
    )
    .unwrap();
    let read = denials::read(dir.path());
    assert_eq!(read.len(), 3);
    let groups = denials::grouped(&read, None);
    assert_eq!(groups[0].destination, "a.test:443");
    assert_eq!((groups[0].count, groups[0].last_at), (2, 20));
    assert_eq!(groups[0].last_reason, "second");
    assert_eq!(groups[0].workspaces.len(), 2);
    let w1 = denials::grouped(&read, Some("w1"));
    assert_eq!(w1.iter().map(|g| g.count).sum::<u32>(), 2);
    // Past the bound: the file becomes .1 and a new one starts; both are read.
    let big = "x".repeat(denials::MAX_BYTES as usize + 1);
    denials::record(dir.path(), &d(30, "w1", "c.test", &big));
    denials::record(dir.path(), &d(40, "w1", "d.test", "after"));
    assert!(dir.path().join(format!("{}.1", denials::FILE)).exists());
    let all = denials::read(dir.path());
    assert_eq!(all.last().unwrap().host, "d.test");
    assert!(all.len() >= 2);
    assert_eq!(denials::ago(100, 130), "30 s ago");
    assert_eq!(denials::ago(0, 7200), "2 h ago");
}

/// What a review found: the last entry denied leaves `allow: []` (not the default list); a
/// default host allowed again changes nothing; a workspace's `allow:` with nothing under it
/// takes the entry; a name mapped twice or a workspace written twice is refused; a nested
/// `allow:` before the top-level one does not take its line.
#[test]
fn edits_keep_the_meaning_and_duplicates_are_refused() {
    let one = "network: allowlist\nallow:   # mine\n  - example.com:443\n";
    let emptied = edit::deny(one, ListOf::Every, &entry("example.com:443")).unwrap();
    assert_eq!(emptied.text, "network: allowlist\nallow: [] # mine\n");
    assert_eq!(parse(&emptied.text).unwrap().allow.unwrap().value, vec![]);
    let flow = edit::deny(
        "allow: [example.com:443]\n",
        ListOf::Every,
        &entry("example.com:443"),
    )
    .unwrap();
    assert_eq!(parse(&flow.text).unwrap().allow.unwrap().value, vec![]);
    let again = edit::allow(
        "network: allowlist\n",
        ListOf::Every,
        &entry("github.com:443"),
    )
    .unwrap();
    assert!(
        !again.changed && again.note.contains("default list"),
        "{}",
        again.note
    );
    let null = "workspaces:\n  w1:\n    allow:\n";
    let added = edit::allow(null, ListOf::Workspace("w1"), &entry("a.test:443")).unwrap();
    assert_eq!(
        parse(&added.text).unwrap().workspaces["w1"].value,
        vec![entry("a.test:443")]
    );
    let tilde = edit::allow("allow: ~\n", ListOf::Every, &entry("a.test:443")).unwrap();
    assert!(
        parse(&tilde.text)
            .unwrap()
            .allow
            .unwrap()
            .value
            .contains(&entry("a.test:443"))
    );
    let twice = parse("resolve:\n  a.test: 10.0.0.1\n  A.test.: 10.0.0.2\n").unwrap_err();
    assert_eq!(
        (twice.line, twice.field.as_str()),
        (Some(2), "resolve.a.test"),
        "{twice}"
    );
    let ws = parse("workspaces:\n  w1:\n    allow: []\n  w1:\n    allow: []\n").unwrap_err();
    assert_eq!(ws.field, "workspaces.w1", "{ws}");
    let nested_first = "workspaces:\n  w1:\n    allow: [a.test:443]\nallow:\n  - b.test:443\n";
    assert_eq!(parse(nested_first).unwrap().allow.unwrap().line, 4);
    let p = parse("allow:\n  - example.com:443\n  - example.com:4430x\n").unwrap_err();
    assert_eq!(p.line, Some(3), "{p}");
}

/// The container-side keys: checked as their options are, with their lines.
#[test]
fn container_side_values_are_checked_with_their_lines() {
    let f = parse(
        "workspaceMode: clone\nguardedPaths: [.git/hooks, .envrc]\nrunFlags:\n  - --memory=2g\n",
    )
    .unwrap();
    assert_eq!(
        f.workspace_mode,
        Some(AtLine {
            value: "clone".into(),
            line: 1
        })
    );
    assert_eq!(
        f.guarded_paths.unwrap().value,
        vec![".git/hooks".to_string(), ".envrc".into()]
    );
    assert_eq!(f.run_flags.unwrap().line, 3);
    for (text, line, field) in [
        ("network: none\nworkspaceMode: copy\n", 2, "workspaceMode"),
        ("guardedPaths:\n  - ../up\n", 1, "guardedPaths"),
        ("runFlags: [--privileged]\n", 1, "runFlags"),
    ] {
        let p = parse(text).unwrap_err();
        assert_eq!(
            (p.line, p.field.as_str()),
            (Some(line), field),
            "{text:?}: {p}"
        );
    }
}
