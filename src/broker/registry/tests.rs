use std::collections::HashMap;

use super::*;

fn env_with_npmrc(
    text: &str,
    extra: &[(&str, &str)],
) -> (tempfile::TempDir, HashMap<String, String>) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".npmrc"), text).unwrap();
    let mut env: HashMap<String, String> =
        [("HOME".to_string(), home.path().display().to_string())].into();
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    (home, env)
}

#[test]
fn the_hosts_npm_config_gives_each_registry_with_a_credential() {
    let (_home, env) = env_with_npmrc(
        "; comment\n@acme:registry=http://127.0.0.1:4873/\n//127.0.0.1:4873/:_authToken=${ACME_TOKEN}\n@nocred:registry=https://npm.nocred.test/\n@deep:registry=https://art.test/api/npm/npm\n//art.test/api/:_authToken=short\n//art.test/api/npm/npm/:_auth=dXNlcjpwYXNz\n",
        &[("ACME_TOKEN", "acme-secret"), ("NPM_TOKEN", "npm-secret")],
    );
    let found = from_host(&env);
    let view: Vec<(Option<&str>, String, &str)> = found
        .iter()
        .map(|r| (r.scope.as_deref(), r.url(), r.source.as_str()))
        .collect();
    assert_eq!(
        view,
        [
            (None, "https://registry.npmjs.org/".to_string(), "NPM_TOKEN"),
            (
                Some("@acme"),
                "http://127.0.0.1:4873/".to_string(),
                "the host's npm config (//127.0.0.1:4873/:_authToken)"
            ),
            (
                Some("@deep"),
                "https://art.test/api/npm/npm/".to_string(),
                "the host's npm config (//art.test/api/npm/npm/:_auth)"
            ),
        ]
    );
    assert_eq!(found[1].credential.header().unwrap(), "Bearer acme-secret");
    assert_eq!(
        found[2].credential.header().unwrap(),
        crate::broker::git::credential::basic("user", "pass")
    );
    // No secret in what is shown.
    assert!(!format!("{found:?}").contains("secret"));
    // Nothing configured, nothing brokered.
    let (_home, env) = env_with_npmrc("", &[]);
    assert!(from_host(&env).is_empty());
}

#[test]
fn pips_index_is_brokered_when_its_url_carries_a_user_and_password() {
    let env: HashMap<String, String> = [(
        "PIP_INDEX_URL".to_string(),
        "http://me:p%40ss@127.0.0.1:8080/simple".to_string(),
    )]
    .into();
    let found = from_host(&env);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].kind, found[0].url()),
        (Kind::Pip, "http://127.0.0.1:8080/simple/".to_string())
    );
    assert_eq!(
        found[0].credential.header().unwrap(),
        crate::broker::git::credential::basic("me", "p@ss")
    );
    let env: HashMap<String, String> = [(
        "PIP_INDEX_URL".to_string(),
        "https://pypi.org/simple".to_string(),
    )]
    .into();
    assert!(from_host(&env).is_empty());
}

#[test]
fn the_containers_npm_config_names_the_routes_and_the_placeholder_by_its_variable() {
    let (_home, env) = env_with_npmrc(
        "@acme:registry=http://127.0.0.1:4873/\n//127.0.0.1:4873/:_authToken=t\n",
        &[("NPM_TOKEN", "n")],
    );
    let found = from_host(&env);
    let routes: Vec<(&Registry, String)> = found
        .iter()
        .enumerate()
        .map(|(i, r)| (r, format!("http://127.0.0.1:{}/", FIRST_PORT + i as u16)))
        .collect();
    let text = npmrc::container_config(&routes);
    assert!(text.contains("\nregistry=http://127.0.0.1:47400/\n//127.0.0.1:47400/:_authToken=${PO_BROKER_REGISTRY_TOKEN}\n"), "{text}");
    assert!(text.contains("\n@acme:registry=http://127.0.0.1:47401/\n//127.0.0.1:47401/:_authToken=${PO_BROKER_REGISTRY_TOKEN}\n"), "{text}");
    assert!(text.ends_with("replace-registry-host=always\n"), "{text}");
    assert!(
        !text.contains("4873") || !text.contains(":_authToken=t"),
        "{text}"
    );
}

#[test]
fn a_registry_url_is_an_origin_and_a_path() {
    assert_eq!(
        split_url("https://R.test/a/b"),
        Some(("https://r.test".into(), "/a/b/".into()))
    );
    assert_eq!(
        split_url("http://127.0.0.1:4873"),
        Some(("http://127.0.0.1:4873".into(), "/".into()))
    );
    for bad in ["ftp://x/", "https://u:p@x/", "https://x/?q", "x/"] {
        assert_eq!(split_url(bad), None, "{bad}");
    }
}

#[cfg(unix)]
mod live {
    use super::*;
    use crate::broker::grant::GrantRoute;
    use crate::broker::server::{Broker, BrokerOptions};
    use crate::broker::test_support::{Seen, exchange, socket_request, upstream};

    /// A registry on 127.0.0.1 that records each request's head; `/redirect` sends to `to`.
    async fn registry(to: Option<String>) -> (u16, Seen) {
        upstream(move |head| match (&to, head.contains(" /redirect ")) {
            (Some(to), true) => format!("HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"),
            _ => "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nset-cookie: s=1\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_string(),
        })
        .await
    }

    #[tokio::test]
    async fn a_registry_route_swaps_the_placeholder_for_the_hosts_token_and_refuses_the_rest() {
        let (cdn, cdn_seen) = registry(None).await;
        let (port, seen) = registry(Some(format!("http://127.0.0.1:{cdn}/tarball"))).await;
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry {
            kind: Kind::Npm,
            scope: Some("@acme".into()),
            origin: format!("http://127.0.0.1:{port}"),
            prefix: "/".into(),
            credential: Credential::Bearer(Secret::new("real-npm-token")),
            source: "test".into(),
        };
        let b = Broker::start(BrokerOptions {
            host_env: HashMap::new(),
            socket_dir: dir.path().into(),
            tcp: false,
            egress: None,
            fetch_screen: false,
            registries: vec![reg],
            git: None,
        })
        .await
        .unwrap();
        let grant = b.grant(socket_request("w")).unwrap();
        let other = b.grant(socket_request("v")).unwrap();
        let token = grant.env[TOKEN_VAR].expose().to_string();
        let others = other.env[TOKEN_VAR].expose().to_string();
        assert_eq!(
            grant.env[PORTS_VAR].expose(),
            "47400=/run/po-broker/reg-0.sock"
        );
        assert!(
            grant.env[NPMRC_VAR]
                .expose()
                .contains("@acme:registry=http://127.0.0.1:47400/")
        );
        let Some(GrantRoute::Socket { host_dir, .. }) = &grant.route else {
            panic!("socket route")
        };
        let socket = host_dir.join("reg-0.sock");
        let get = |target: &str, headers: &str| {
            format!(
                "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:47400\r\n{headers}Connection: close\r\n\r\n"
            )
        };
        let bearer = |t: &str| format!("Authorization: Bearer {t}\r\n");
        let ok = exchange(&socket, get("/@acme%2fprivate", &bearer(&token)).as_bytes()).await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(!ok.to_ascii_lowercase().contains("set-cookie"), "{ok}");
        let sent = seen.lock().unwrap()[0].clone();
        assert!(
            sent.starts_with("GET /@acme%2fprivate HTTP/1.1\r\n"),
            "{sent}"
        );
        assert!(
            sent.contains("authorization: Bearer real-npm-token"),
            "{sent}"
        );
        assert!(!sent.contains(&token), "{sent}");
        // pip's form: the placeholder as a Basic password.
        let basic = format!(
            "Authorization: {}\r\n",
            crate::broker::git::credential::basic("po", &token)
        );
        assert!(
            exchange(&socket, get("/simple/x/", &basic).as_bytes())
                .await
                .starts_with("HTTP/1.1 200")
        );
        // A redirect elsewhere goes back to the client as it is: the broker asks no address a
        // registry names, and the credential goes nowhere else.
        let redirected = exchange(&socket, get("/redirect", &bearer(&token)).as_bytes()).await;
        assert!(redirected.starts_with("HTTP/1.1 302"), "{redirected}");
        assert!(
            redirected.contains(&format!("location: http://127.0.0.1:{cdn}/tarball")),
            "{redirected}"
        );
        assert!(cdn_seen.lock().unwrap().is_empty());
        let before = seen.lock().unwrap().len();
        for (req, status) in [
            (get("/x", ""), "401"),
            (get("/x", &bearer(&others)), "401"),
            (get(&format!("/x?t={token}"), &bearer(&token)), "400"),
            (
                get("/x", &format!("{}X-T: {token}\r\n", bearer(&token))),
                "400",
            ),
            (get("/a/%2e%2e/b", &bearer(&token)), "400"),
            (
                format!(
                    "PUT /@acme%2fprivate HTTP/1.1\r\nHost: x\r\n{}Content-Length: 0\r\nConnection: close\r\n\r\n",
                    bearer(&token)
                ),
                "405",
            ),
        ] {
            let answer = exchange(&socket, req.as_bytes()).await;
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {status}")),
                "{req}\n{answer}"
            );
        }
        assert_eq!(seen.lock().unwrap().len(), before);
        b.revoke(&grant.id);
        assert!(!socket.exists());
        b.close().await;
    }
}

#[test]
fn with_a_scope_brokered_the_default_registry_is_too_read_as_the_public_reads_it() {
    let (_home, env) = env_with_npmrc(
        "@acme:registry=http://127.0.0.1:4873/\n//127.0.0.1:4873/:_authToken=t\n",
        &[],
    );
    let found = from_host(&env);
    assert_eq!(found.len(), 2);
    assert_eq!(
        (found[0].scope.as_deref(), found[0].url()),
        (None, npmrc::DEFAULT_REGISTRY.to_string())
    );
    assert!(found[0].credential.header().is_none());
    assert_eq!(found[0].source, "none (public reads)");
}

#[test]
fn a_credential_goes_only_to_its_own_registry_path_and_npm_token_only_to_npmjs() {
    // `//host/a` is no ancestor of `//host/ab/`; the bare host form no ancestor of a longer name.
    let (_home, env) = env_with_npmrc(
        "@ab:registry=https://r.test/ab/\n//r.test/a:_authToken=for-a\n@ev:registry=https://npm.acme.test.evil.test/\n//npm.acme.test:_authToken=acme\n",
        &[],
    );
    assert!(from_host(&env).is_empty(), "{:?}", from_host(&env));
    // NPM_TOKEN is npmjs's: another default registry does not get it.
    let (_home, env) = env_with_npmrc("registry=https://mirror.test/\n", &[("NPM_TOKEN", "n")]);
    assert!(from_host(&env).is_empty());
    let (_home, env) = env_with_npmrc("", &[("NPM_TOKEN", "n")]);
    assert_eq!(from_host(&env)[0].source, "NPM_TOKEN");
}
