//! The parts a local engine's container binds from this host (the runtime bundle, P with its
//! seed files, the token file), carried instead to an engine on another machine: each in a
//! volume of the workspace's ([`spec::carried_volumes`]), filled through the engine's archive
//! upload into a short-lived fill container (created, never started, removed at once: the
//! workspace container mounts the bundle and the token read-only, where the engine takes no
//! upload). The token and the seed files are written at every create (a fresh token per
//! container); the bundle once per bundle (its volume's name carries its digest).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};

use crate::engine::api::EngineApi;
use crate::engine::{Operation, Resource};
use crate::error::{Error, Result};
use crate::host::UserIds;
use crate::sandbox::blueprint::spec::{
    self, CARRIED_BUNDLE, CARRIED_P, CARRIED_TOKEN, ContainerSpec, LABEL_OWNER, LABEL_SANDBOX,
    VolumeMount,
};
use crate::sandbox::on_engine::container::engine_err;

/// Label: on a fill container, the workspace whose volumes it fills (no `po.workspace`: it is
/// never one).
pub const LABEL_FILL_OF: &str = "po.fill-of";
/// Where the fill container mounts each volume.
const FILL_ROOT: &str = "/po-fill";

/// What one create carries.
pub struct Carried<'a> {
    /// The workspace.
    pub workspace: &'a str,
    /// The host's token file of the new container.
    pub token: &'a Path,
    /// The bundle's folder, when its volume is new (else it is filled already).
    pub bundle: Option<&'a Path>,
    /// The seed files of the Po home that exist: (name, host path).
    pub seeds: Vec<(&'static str, PathBuf)>,
    /// The container's user, who owns P and the token file.
    pub user: UserIds,
}

/// The spec's carried volume with `suffix` (`bundle`, `po`, `token`).
pub fn volume<'s>(spec: &'s ContainerSpec, suffix: &str) -> Option<&'s VolumeMount> {
    let prefix = format!("{}-{suffix}", spec.name);
    spec.volumes
        .iter()
        .find(|v| v.name == prefix || v.name.starts_with(&format!("{prefix}-")))
}

/// The name of P inside its volume: the last part of its path in the container.
fn p_name(spec: &ContainerSpec) -> Option<String> {
    let p = spec.env.get("PO_HOME")?;
    p.rsplit('/').next().map(str::to_string)
}

/// Whether the volume `name` exists (labelled with the owner and workspace).
pub async fn volume_exists(
    engine: &impl EngineApi,
    owner: &str,
    workspace: &str,
    name: &str,
) -> Result<bool> {
    let names = super::fill::volumes_of(engine, owner, workspace, None).await?;
    Ok(names.iter().any(|n| n == name))
}

/// Removes the workspace's bundle volumes of other bundles (their containers are gone).
pub async fn remove_other_bundles(engine: &impl EngineApi, owner: &str, spec: &ContainerSpec) {
    let Some(current) = volume(spec, CARRIED_BUNDLE) else {
        return;
    };
    let workspace = spec
        .labels
        .get(spec::LABEL_WORKSPACE)
        .cloned()
        .unwrap_or_default();
    let prefix = format!("{}-{CARRIED_BUNDLE}-", spec.name);
    let names = super::fill::volumes_of(engine, owner, &workspace, None).await;
    for name in names.unwrap_or_default() {
        if name.starts_with(&prefix)
            && name != current.name
            && let Err(e) = engine.remove_volume(&name).await
        {
            tracing::debug!(%name, error = %e, "an earlier bundle's volume stays");
        }
    }
}

/// Fills the spec's carried volumes through a fill container: the token file, P (the
/// container user's) with the seed files, and the bundle when `carried.bundle` says it is new.
/// The fill container is removed whatever happens; a bundle volume whose fill failed too.
pub async fn fill(
    engine: &impl EngineApi,
    spec: &ContainerSpec,
    carried: &Carried<'_>,
) -> Result<()> {
    let ws = carried.workspace;
    let fail = |doing: &str, e: &dyn std::fmt::Display| {
        Error::container(
            ws,
            format!("cannot {doing} for the engine on another machine: {e}"),
        )
    };
    let (Some(token_vol), Some(p_vol), Some(bundle_vol)) = (
        volume(spec, CARRIED_TOKEN),
        volume(spec, CARRIED_P),
        volume(spec, CARRIED_BUNDLE),
    ) else {
        return Err(fail("fill its volumes", &"the spec carries none"));
    };
    let p = p_name(spec).ok_or_else(|| fail("fill P", &"PO_HOME is not set"))?;
    let dir = crate::sandbox::folder::clone::private_temp_dir("carried")
        .map_err(|e| fail("prepare its carried parts", &e))?;
    let _cleanup = RemoveDir(dir.clone());
    let (user, token, seeds, bundle) = (
        carried.user,
        carried.token.to_path_buf(),
        carried.seeds.clone(),
        carried.bundle.map(Path::to_path_buf),
    );
    let tars_dir = dir.clone();
    let tars = tokio::task::spawn_blocking(move || {
        prepare_tars(&tars_dir, user, &token, &p, &seeds, bundle.as_deref())
    })
    .await
    .map_err(|e| fail("prepare its carried parts", &e))?
    .map_err(|e| fail("prepare its carried parts", &e))?;
    let mut mounts = vec![(token_vol, "token"), (p_vol, "p")];
    if tars.bundle.is_some() {
        mounts.push((bundle_vol, "bundle"));
    }
    // `pof-`: no workspace container's name (`po-<owner>-<id>`) can be a fill container's.
    let name = format!("pof{}", spec.name.trim_start_matches("po"));
    let id = create_fill(engine, spec, &name, ws, &mounts).await?;
    let uploads = async {
        let at = |what: &str| format!("{FILL_ROOT}/{what}");
        engine
            .upload_archive(&id, &at("token"), tars.token.clone())
            .await?;
        engine.upload_archive(&id, &at("p"), tars.p.clone()).await?;
        if let Some(b) = &tars.bundle {
            engine.upload_archive(&id, &at("bundle"), b.clone()).await?;
        }
        Ok::<(), crate::engine::EngineError>(())
    }
    .await;
    let _ = engine.remove_container(&id).await;
    if let Err(e) = uploads {
        if tars.bundle.is_some() {
            let _ = engine.remove_volume(&bundle_vol.name).await;
        }
        return Err(fail("upload its runtime bundle, P and token", &e));
    }
    Ok(())
}

/// Creates the fill container `name` (a leftover of that name removed first) with each volume
/// at `<FILL_ROOT>/<what>`, on no network, never started.
async fn create_fill(
    engine: &impl EngineApi,
    spec: &ContainerSpec,
    name: &str,
    ws: &str,
    mounts: &[(&VolumeMount, &str)],
) -> Result<String> {
    let _ = engine.remove_container(name).await;
    let owner = spec.labels.get(LABEL_OWNER).cloned().unwrap_or_default();
    let labels = HashMap::from([
        (LABEL_OWNER.to_string(), owner),
        (LABEL_SANDBOX.to_string(), "1".to_string()),
        (LABEL_FILL_OF.to_string(), ws.to_string()),
    ]);
    let mounts = mounts
        .iter()
        .map(|(v, what)| Mount {
            typ: Some(MountType::VOLUME),
            source: Some(v.name.clone()),
            target: Some(format!("{FILL_ROOT}/{what}")),
            read_only: Some(false),
            ..Default::default()
        })
        .collect();
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(vec!["/bin/true".into()]),
        entrypoint: Some(vec![]),
        labels: Some(labels),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            network_mode: Some("none".into()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    engine
        .create_container(Some(name), body)
        .await
        .map_err(engine_err(
            engine,
            Operation::Create(Resource::Container, name.into()),
        ))
}

/// What the addresses helper prints: the machine's own IPv4 addresses (its routing table's
/// local entries) and IPv6 addresses (`v6 <32 hex digits>`), read from `/proc/net` in the
/// engine's host network namespace.
const ADDRESSES_SCRIPT: &str = r#"p=
while read -r a b c d; do
  [ "$a $b $c" = "/32 host LOCAL" ] && echo "$p"
  [ "$a" = "|--" ] && p=$b
done </proc/net/fib_trie
while read -r h rest; do echo "v6 $h"; done </proc/net/if_inet6 2>/dev/null
true"#;

/// The addresses of the machine the engine runs on, as seen from its host network namespace:
/// a helper container of `image` (no capability, read-only, never privileged) in the host's
/// network reads them from `/proc/net` and is removed. An engine whose "host" network is not
/// the machine's (rootless engines: their own namespace) gives that namespace's.
pub async fn machine_addresses(
    engine: &impl EngineApi,
    image: &str,
    owner: &str,
) -> Result<Vec<std::net::IpAddr>> {
    // `poa-`: no workspace container's name (`po-<owner>-<id>`) can be this helper's.
    let name = format!("poa-{owner}");
    let _ = engine.remove_container(&name).await;
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(vec!["-c".into(), ADDRESSES_SCRIPT.into()]),
        entrypoint: Some(vec!["/bin/sh".into()]),
        user: Some("65534:65534".into()),
        labels: Some(HashMap::from([
            (LABEL_OWNER.to_string(), owner.to_string()),
            (LABEL_SANDBOX.to_string(), "1".to_string()),
        ])),
        host_config: Some(HostConfig {
            network_mode: Some("host".into()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let create = Operation::Create(Resource::Container, name.clone());
    let id =
        (engine.create_container(Some(&name), body).await).map_err(engine_err(engine, create))?;
    let ran = async {
        engine.start_container(&id).await?;
        engine.wait_container(&id).await
    }
    .await;
    let out = engine.logs_tail(&id, 512).await;
    let _ = engine.remove_container(&id).await;
    let code = ran.map_err(engine_err(engine, Operation::Wait(id)))?;
    let found = parse_addresses(&out);
    if code != 0 || found.is_empty() {
        return Err(Error::container(
            "",
            format!(
                "cannot learn the addresses of the engine's machine for the network rules (its helper {name} exited {code} and printed: {}); its sandboxes are not made without them",
                out.trim()
            ),
        ));
    }
    Ok(found)
}

/// The addresses [`ADDRESSES_SCRIPT`] printed, loopback and duplicates left out.
pub fn parse_addresses(out: &str) -> Vec<std::net::IpAddr> {
    let mut found: Vec<std::net::IpAddr> = out
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            match l.strip_prefix("v6 ") {
                Some(hex) if hex.len() == 32 => u128::from_str_radix(hex, 16)
                    .ok()
                    .map(|n| std::net::IpAddr::V6(n.into())),
                Some(_) => None,
                None => l.parse::<std::net::Ipv4Addr>().ok().map(Into::into),
            }
        })
        .filter(|a| !a.is_loopback() && !a.is_unspecified())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The tar files of one fill.
struct Tars {
    token: PathBuf,
    p: PathBuf,
    bundle: Option<PathBuf>,
}

/// Writes the fill's tar files into `dir`: the token file (0400, the user's); P with the seed
/// files (0444, root's), P itself root's and sticky (1777): the container user makes what it
/// likes there but cannot remove or replace the seed files (unless it is root); the bundle's
/// tree (root's, nothing writable but by root), when given.
fn prepare_tars(
    dir: &Path,
    user: UserIds,
    token: &Path,
    p: &str,
    seeds: &[(&'static str, PathBuf)],
    bundle: Option<&Path>,
) -> io::Result<Tars> {
    let tars = Tars {
        token: dir.join("token.tar"),
        p: dir.join("p.tar"),
        bundle: bundle.map(|_| dir.join("bundle.tar")),
    };
    let mut t = tar::Builder::new(std::fs::File::create(&tars.token)?);
    let bytes = std::fs::read(token)?;
    append(&mut t, "token", &bytes, 0o400, user)?;
    t.into_inner()?.sync_all()?;
    let mut t = tar::Builder::new(std::fs::File::create(&tars.p)?);
    let root = UserIds { uid: 0, gid: 0 };
    let mut head = header(tar::EntryType::Directory, 0o1777, root, 0);
    t.append_data(&mut head, format!("{p}/"), io::empty())?;
    for (name, path) in seeds {
        append(
            &mut t,
            &format!("{p}/{name}"),
            &std::fs::read(path)?,
            0o444,
            root,
        )?;
    }
    t.into_inner()?.sync_all()?;
    if let (Some(src), Some(out)) = (bundle, &tars.bundle) {
        let mut t = tar::Builder::new(std::fs::File::create(out)?);
        tree(&mut t, src, Path::new(""))?;
        t.into_inner()?.sync_all()?;
    }
    Ok(tars)
}

/// A header of `kind` with `mode`, owned by `user`, of `size` bytes.
fn header(kind: tar::EntryType, mode: u32, user: UserIds, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(u64::from(user.uid));
    h.set_gid(u64::from(user.gid));
    h.set_size(size);
    h.set_mtime(0);
    h
}

/// One file of `bytes`.
fn append<W: io::Write>(
    t: &mut tar::Builder<W>,
    path: &str,
    bytes: &[u8],
    mode: u32,
    user: UserIds,
) -> io::Result<()> {
    let mut h = header(tar::EntryType::Regular, mode, user, bytes.len() as u64);
    t.append_data(&mut h, path, bytes)
}

/// The folder `src` as `rel` and below, root's: files keep their modes but for group and other
/// writes; links are kept as links.
fn tree<W: io::Write>(t: &mut tar::Builder<W>, src: &Path, rel: &Path) -> io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(src.join(rel))?.collect::<io::Result<Vec<_>>>()?;
    entries.sort_by_key(|e| e.file_name());
    let root = UserIds { uid: 0, gid: 0 };
    for e in entries {
        let path = rel.join(e.file_name());
        let meta = std::fs::symlink_metadata(e.path())?;
        let mode = crate::runtime_bundle::mode_of(&meta) & 0o755;
        if meta.file_type().is_symlink() {
            let mut h = header(tar::EntryType::Symlink, 0o777, root, 0);
            t.append_link(&mut h, &path, std::fs::read_link(e.path())?)?;
        } else if meta.is_dir() {
            let mut h = header(tar::EntryType::Directory, mode, root, 0);
            t.append_data(&mut h, &path, io::empty())?;
            tree(t, src, &path)?;
        } else if meta.is_file() {
            let mut h = header(tar::EntryType::Regular, mode, root, meta.len());
            t.append_data(&mut h, &path, std::fs::File::open(e.path())?)?;
        }
    }
    Ok(())
}

/// Removes its folder when dropped.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(all(test, unix))]
mod tests;
