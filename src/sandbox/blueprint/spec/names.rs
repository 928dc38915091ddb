//! Names and paths of a workspace's container: its labels, where things are inside it, and the
//! names of the container, its volumes, its network and its token file.

use std::path::{Path, PathBuf};

use crate::names::paths::{GIT_DIR, HOME_DIR, RUNTIME_DIR, TOKEN_DIR};

/// Label: the hub that owns the container.
pub const LABEL_OWNER: &str = "po.owner";
/// Label: the workspace id.
pub const LABEL_WORKSPACE: &str = "po.workspace";
/// Label: marks every container and volume this layer makes.
pub const LABEL_SANDBOX: &str = "po.sandbox";
/// Label: the image digest the container was made from.
pub const LABEL_IMAGE_DIGEST: &str = "po.image-digest";
/// Label: the hash of the spec, for drift detection.
pub const LABEL_SPEC_HASH: &str = "po.spec-hash";
/// Label: the workspace folder (for `po-sandbox ls`).
pub const LABEL_WORKSPACE_PATH: &str = "po.workspace-path";
/// Label: the run flags the container was made with, space-separated (for `po-sandbox ls`;
/// only when there are any).
pub const LABEL_RUN_FLAGS: &str = "po.run-flags";
/// Label (on the image, so on its containers): the base image the recipe built on.
pub const LABEL_IMAGE_BASE: &str = "po.image-base";
/// Label (on the image, so on its containers): the recipe's variant, `full` or `minimal`.
pub const LABEL_IMAGE_VARIANT: &str = "po.image-variant";

/// Label: marks the per-hub network (`workspaces`).
pub const LABEL_NETWORK: &str = "po.network";
/// Label: on a namespace holder, the workspace whose network namespace it holds (holders carry
/// no `po.workspace`: they are part of a workspace, never one).
pub const LABEL_HOLDER_OF: &str = "po.holder-of";
/// Label: on a namespace holder, the egress mode of its rules.
pub const LABEL_NET_MODE: &str = "po.net-mode";
/// Label: on a namespace holder, the hash of the ruleset it carries (its helper loads it).
pub const LABEL_NET_RULES: &str = "po.net-rules";
/// Label: on a namespace holder, the shape of its rules (`firewall::shape`): the version of
/// the code that made them, as far as the rules go.
pub const LABEL_NET_SHAPE: &str = "po.net-shape";

/// The seed files copied read-only from `<poHome>` into P when they exist.
pub const SEED_FILES: [&str; 3] = ["modes.yaml", "domains.yaml", "config.yaml"];
/// The writable places on the read-only root file system (CIS 5.13), as tmpfs: path and
/// options. Everything else that is written goes to the workspace, P, or a volume (`HOME`,
/// the package caches, git worktrees).
pub const WRITABLE_TMPFS: [(&str, &str); 3] = [
    ("/tmp", "rw,exec,nosuid,nodev,mode=1777"),
    ("/var/tmp", "rw,exec,nosuid,nodev,mode=1777"),
    ("/run", "rw,noexec,nosuid,nodev,mode=1777"),
];

/// A bind mount from the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bind {
    /// Host path.
    pub source: PathBuf,
    /// Container path.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A named volume.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VolumeMount {
    /// Volume name.
    pub name: String,
    /// Container path.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// The per-hub network of an owner: a labelled bridge every container of the owner joins
/// (never the engine's default bridge).
pub fn network_name(owner: &str) -> String {
    format!("po-net-{owner}")
}

/// The deterministic container name of a workspace.
pub fn container_name(owner: &str, workspace_id: &str) -> String {
    format!("po-{owner}-{workspace_id}")
}

/// The named volumes of a workspace: (suffix, mount point).
pub fn volume_names(owner: &str, workspace_id: &str) -> [VolumeMount; 3] {
    let name = |suffix: &str| format!("po-{owner}-{workspace_id}-{suffix}");
    [
        VolumeMount {
            name: name("home"),
            target: HOME_DIR.into(),
            read_only: false,
        },
        VolumeMount {
            name: name("cache"),
            target: RUNTIME_DIR.into(),
            read_only: false,
        },
        VolumeMount {
            name: name("git"),
            target: GIT_DIR.into(),
            read_only: false,
        },
    ]
}

/// The volumes that carry, on an engine that sees none of this host's files, what a local
/// engine's containers bind: the runtime bundle (read-only at `/opt/po`), P's folder (`p`, its
/// volume mounted at P's parent so that P itself is a folder of the container user's), and the
/// token file's folder (read-only). They are filled through the engine (see
/// `on_engine::carried`); the bundle's name ends with its digest, so another bundle is another
/// volume (and another spec).
pub fn carried_volumes(owner: &str, workspace_id: &str, p: &str, bundle: &str) -> [VolumeMount; 3] {
    let name = |suffix: &str| format!("po-{owner}-{workspace_id}-{suffix}");
    let parent = match p.rsplit_once('/') {
        Some(("", _)) | None => "/".to_string(),
        Some((parent, _)) => parent.to_string(),
    };
    [
        VolumeMount {
            name: format!("{}-{bundle}", name(CARRIED_BUNDLE)),
            target: crate::runtime_bundle::MOUNT_POINT.into(),
            read_only: true,
        },
        VolumeMount {
            name: name(CARRIED_P),
            target: parent,
            read_only: false,
        },
        VolumeMount {
            name: name(CARRIED_TOKEN),
            target: TOKEN_DIR.into(),
            read_only: true,
        },
    ]
}

/// The suffixes of [`carried_volumes`]' names.
pub const CARRIED_BUNDLE: &str = "bundle";
pub const CARRIED_P: &str = "po";
pub const CARRIED_TOKEN: &str = "token";

/// The host folder of a workspace's guard copies (see `guards::Resolved::copies`): under
/// `<poHome>/sandbox-guards`, outside P and the workspace, mounted into no container.
pub fn guard_copies(po_home: &Path, owner: &str, workspace_id: &str) -> PathBuf {
    po_home
        .join("sandbox-guards")
        .join(owner)
        .join(workspace_id)
}

/// Where every owner's token files are: `<poHome>/sandbox-tokens`, outside P.
pub fn tokens_root(po_home: &Path) -> PathBuf {
    po_home.join("sandbox-tokens")
}

/// Where an owner's token files (and their spawner records) are.
pub fn tokens_dir(po_home: &Path, owner: &str) -> PathBuf {
    tokens_root(po_home).join(owner)
}

/// The host path of a workspace's token file: in its owner's [`tokens_dir`].
pub fn token_file(po_home: &Path, owner: &str, workspace_id: &str) -> PathBuf {
    tokens_dir(po_home, owner).join(format!("{workspace_id}.token"))
}
