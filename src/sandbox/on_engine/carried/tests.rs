//! The carried parts' tar files, and their fill through a fill container on the fake engine.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::engine::fake::{FakeEngine, Fault};

/// (path, kind, mode, uid, bytes or link target) of each entry of a tar file.
fn entries(tar: &Path) -> Vec<(String, char, u32, u64, String)> {
    let mut archive = tar::Archive::new(std::fs::File::open(tar).unwrap());
    let mut out = Vec::new();
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header().clone();
        let kind = match h.entry_type() {
            tar::EntryType::Directory => 'd',
            tar::EntryType::Symlink => 'l',
            _ => 'f',
        };
        let mut text = String::new();
        match kind {
            'l' => text = h.link_name().unwrap().unwrap().display().to_string(),
            _ => drop(e.read_to_string(&mut text)),
        }
        let path = e.path().unwrap().display().to_string();
        out.push((path, kind, h.mode().unwrap(), h.uid().unwrap(), text));
    }
    out
}

/// A bundle folder (a file group-writable, a link, a subfolder), a token file and a seed file.
fn host_parts(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let bundle = dir.join("bundle");
    std::fs::create_dir_all(bundle.join("lib")).unwrap();
    std::fs::write(bundle.join("server.js"), "serve()").unwrap();
    std::fs::set_permissions(
        bundle.join("server.js"),
        std::fs::Permissions::from_mode(0o664),
    )
    .unwrap();
    std::fs::write(bundle.join("lib/a.js"), "a").unwrap();
    std::os::unix::fs::symlink("lib/a.js", bundle.join("link.js")).unwrap();
    let token = dir.join("acme.token");
    std::fs::write(&token, "t0ken").unwrap();
    let seed = dir.join("modes.yaml");
    std::fs::write(&seed, "modes: []\n").unwrap();
    (bundle, token, seed)
}

#[test]
fn the_token_is_the_users_alone_p_its_folder_the_seeds_and_bundle_roots() {
    let dir = tempfile::tempdir().unwrap();
    let (bundle, token, seed) = host_parts(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let user = UserIds {
        uid: 1000,
        gid: 1000,
    };
    let seeds = [("modes.yaml", seed)];
    let tars = prepare_tars(&out, user, &token, "acme", &seeds, Some(&bundle)).unwrap();
    let f = |p: &str, k, m, u, t: &str| (p.to_string(), k, m, u, t.to_string());
    assert_eq!(
        entries(&tars.token),
        [f("token", 'f', 0o400, 1000, "t0ken")]
    );
    assert_eq!(
        entries(&tars.p),
        [
            // Root's and sticky: the user writes there, the seed files stay.
            f("acme/", 'd', 0o1777, 0, ""),
            f("acme/modes.yaml", 'f', 0o444, 0, "modes: []\n"),
        ]
    );
    let bundle_entries = entries(tars.bundle.as_ref().unwrap());
    assert_eq!(
        bundle_entries,
        [
            f("lib", 'd', 0o755, 0, ""),
            f("lib/a.js", 'f', 0o644, 0, "a"),
            f("link.js", 'l', 0o777, 0, "lib/a.js"),
            // Group-writable on the host: nobody's but root's inside.
            f("server.js", 'f', 0o644, 0, "serve()"),
        ]
    );
    // No bundle asked: none written.
    let again = prepare_tars(&out, user, &token, "acme", &[], None).unwrap();
    assert!(again.bundle.is_none());
}

/// A spec with the three carried volumes (the fields the fill reads).
fn spec() -> ContainerSpec {
    let volumes =
        spec::carried_volumes("hub1", "acme", "/home/u/.po/sandboxes/acme", "0123abcd").to_vec();
    ContainerSpec {
        name: "po-hub1-acme".into(),
        image: "po-sandbox:x".into(),
        labels: BTreeMap::from([
            (LABEL_OWNER.to_string(), "hub1".to_string()),
            (spec::LABEL_WORKSPACE.to_string(), "acme".to_string()),
        ]),
        env: BTreeMap::from([(
            "PO_HOME".to_string(),
            "/home/u/.po/sandboxes/acme".to_string(),
        )]),
        volumes,
        ..crate::sandbox::on_engine::container::tests::spec(vec![])
    }
}

#[tokio::test]
async fn a_fill_uploads_into_a_fill_container_it_removes_and_a_failed_one_takes_the_new_bundle_away()
 {
    let dir = tempfile::tempdir().unwrap();
    let (bundle, token, seed) = host_parts(dir.path());
    let engine = FakeEngine::default();
    let s = spec();
    let bundle_volume = s.volumes[0].name.clone();
    assert_eq!(bundle_volume, "po-hub1-acme-bundle-0123abcd");
    let carried = |bundle: Option<&'static Path>| Carried {
        workspace: "acme",
        token: Box::leak(token.clone().into_boxed_path()),
        bundle,
        seeds: vec![("modes.yaml", seed.clone())],
        user: UserIds {
            uid: 1000,
            gid: 1000,
        },
    };
    let new_bundle: &'static Path = Box::leak(bundle.into_boxed_path());
    fill(&engine, &s, &carried(Some(new_bundle))).await.unwrap();
    let targets: Vec<String> = engine.state().uploads.iter().map(|u| u.1.clone()).collect();
    assert_eq!(targets, ["/po-fill/token", "/po-fill/p", "/po-fill/bundle"]);
    let ids: Vec<String> = engine.state().uploads.iter().map(|u| u.0.clone()).collect();
    assert!(
        ids.iter().all(|id| id == &ids[0]),
        "one fill container: {ids:?}"
    );
    assert!(
        engine.state().containers.is_empty(),
        "the fill container is removed"
    );
    // Not new: token and P only.
    engine.state().uploads.clear();
    fill(&engine, &s, &carried(None)).await.unwrap();
    let targets: Vec<String> = engine.state().uploads.iter().map(|u| u.1.clone()).collect();
    assert_eq!(targets, ["/po-fill/token", "/po-fill/p"]);
    // A failed upload of a new bundle: an error naming the remote engine, the half-filled
    // bundle volume gone, no fill container left.
    engine
        .state()
        .volumes
        .insert(bundle_volume.clone(), Default::default());
    engine.fault("upload_archive", "", Fault::Fail(500), Some(1));
    let e = fill(&engine, &s, &carried(Some(new_bundle)))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("engine on another machine"), "{e}");
    assert!(!engine.state().volumes.contains_key(&bundle_volume));
    assert!(engine.state().containers.is_empty());
}

#[test]
fn the_machines_addresses_are_its_routing_tables_local_ones_and_its_ipv6_list() {
    let out = "203.0.113.5\n127.0.0.1\n172.17.0.1\n203.0.113.5\n\
               v6 20010db8000000000000000000000001\nv6 00000000000000000000000000000001\n\
               v6 fe80000000000000021122fffe334455\nnot an address\nv6 12\n";
    let want = [
        "172.17.0.1",
        "203.0.113.5",
        "2001:db8::1",
        "fe80::211:22ff:fe33:4455",
    ];
    let want: Vec<std::net::IpAddr> = want.iter().map(|a| a.parse().unwrap()).collect();
    assert_eq!(parse_addresses(out), want);
    assert!(parse_addresses("").is_empty());
}
