//! The provider's options: what the hub passes, checked without I/O into [`ProviderOptions`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::engine::{self, DetectOptions};
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::image::ImageRecipe;
use crate::runtime_bundle;
use crate::sandbox::spec::DEFAULT_PIDS_LIMIT;
use crate::sandbox::workspace;

/// Default bound on the server's health answer.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(60);
/// Default number of workspaces started at once.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// A workspace as the hub describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRequest {
    /// The workspace id.
    pub id: String,
    /// Its folder.
    pub path: String,
    /// Its sandbox is `container`.
    pub container: bool,
}

/// Options as given by the caller, before checks.
#[derive(Debug, Clone, Default)]
pub struct RawOptions {
    pub po_home: Option<String>,
    pub owner: Option<String>,
    pub workspaces: Vec<(String, String, Option<String>)>,
    pub runtime_version: Option<String>,
    pub base_image: Option<String>,
    pub image_variant: Option<String>,
    pub user: Option<String>,
    pub pids_limit: Option<f64>,
    pub health_timeout_ms: Option<f64>,
    pub concurrency: Option<f64>,
    pub engine: Option<String>,
    pub engine_timeout_ms: Option<f64>,
    pub broker: Option<bool>,
    pub broker_socket_dir: Option<String>,
}

/// Checked options.
#[derive(Debug, Clone)]
pub struct ProviderOptions {
    pub po_home: PathBuf,
    pub owner: String,
    pub workspaces: Vec<WorkspaceRequest>,
    pub runtime_version: Option<String>,
    pub recipe: ImageRecipe,
    pub user: String,
    pub pids_limit: i64,
    pub health_timeout: Duration,
    pub concurrency: usize,
    pub detect: DetectOptions,
    pub host: HostEnv,
    /// Run a credential broker for the containers (off with `broker: false` or
    /// `PO_SANDBOX_BROKER=0`).
    pub broker: bool,
    /// Where per-container broker sockets go.
    pub broker_socket_dir: PathBuf,
}

fn invalid(option: &str, reason: impl Into<String>) -> Error {
    Error::OptionsInvalid {
        option: option.into(),
        reason: reason.into(),
    }
}

fn whole(
    value: Option<f64>,
    option: &str,
    range: std::ops::RangeInclusive<f64>,
    default: f64,
) -> Result<f64> {
    match value {
        None => Ok(default),
        Some(v) if v.fract() == 0.0 && range.contains(&v) => Ok(v),
        Some(v) => Err(invalid(
            option,
            format!(
                "{v} is not a whole number from {} to {}",
                range.start(),
                range.end()
            ),
        )),
    }
}

/// Containers never nest: managing them from inside a sandbox container (`PO_SANDBOX=1`) is
/// refused.
pub fn refuse_nesting(host: &HostEnv) -> Result<()> {
    match host.var(crate::contained::identity::SANDBOX_VAR) {
        Some(v) if v.trim() == "1" => Err(Error::NestingRefused),
        _ => Ok(()),
    }
}

/// The default owner id of a Po home: 12 hex digits of its path's sha256.
pub fn default_owner(po_home: &std::path::Path) -> String {
    hex::encode(&Sha256::digest(po_home.to_string_lossy().as_bytes())[..6])
}

impl ProviderOptions {
    /// Checks everything that can be checked without I/O.
    pub fn resolve(raw: RawOptions, host: HostEnv) -> Result<ProviderOptions> {
        let po_home = match raw.po_home.filter(|s| !s.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => host.home().map(|h| h.join(".po")).ok_or_else(|| {
                invalid(
                    "poHome",
                    "not given and HOME is not set; pass the Po home folder",
                )
            })?,
        };
        workspace::check_po_home(&po_home)?;
        let owner = raw
            .owner
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| default_owner(&po_home));
        if owner.is_empty()
            || owner.len() > 32
            || !owner
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err(invalid(
                "owner",
                format!("{owner:?} must be 1-32 lowercase letters or digits"),
            ));
        }
        let mut workspaces = Vec::new();
        for (id, path, sandbox) in raw.workspaces {
            workspace::check_id(&id)?;
            if workspaces.iter().any(|w: &WorkspaceRequest| w.id == id) {
                return Err(Error::WorkspaceInvalid {
                    what: format!("id {id:?}"),
                    reason: "it is listed twice".into(),
                });
            }
            let container = match sandbox.as_deref() {
                None | Some("container") => true,
                Some("none") | Some("host") => false,
                Some(other) => {
                    return Err(invalid(
                        "workspaces[].sandbox",
                        format!("{other:?} is neither 'container' nor 'none'"),
                    ));
                }
            };
            workspaces.push(WorkspaceRequest {
                id,
                path,
                container,
            });
        }
        if let Some(v) = &raw.runtime_version
            && !runtime_bundle::is_safe_version(v)
        {
            return Err(invalid(
                "runtimeVersion",
                format!("{v:?} is not a plain version folder name"),
            ));
        }
        let env: HashMap<String, String> = host.vars().clone();
        let recipe = ImageRecipe::resolve(
            raw.base_image.as_deref(),
            raw.image_variant.as_deref(),
            &env,
        )?;
        let user = match raw.user.filter(|s| !s.is_empty()) {
            Some(u) => u,
            None if host.os == crate::host::HostOs::Linux => {
                format!("{}:{}", host.uid, host.gid)
            }
            None => "1000:1000".into(),
        };
        let ok_user = user
            .split_once(':')
            .is_some_and(|(u, g)| u.parse::<u32>().is_ok() && g.parse::<u32>().is_ok());
        if !ok_user {
            return Err(invalid(
                "user",
                format!("{user:?} must be numeric uid:gid, like 1000:1000"),
            ));
        }
        let pids_limit = whole(
            raw.pids_limit,
            "pidsLimit",
            16.0..=1_000_000.0,
            DEFAULT_PIDS_LIMIT as f64,
        )? as i64;
        let health_ms = whole(
            raw.health_timeout_ms,
            "healthTimeoutMs",
            100.0..=3_600_000.0,
            DEFAULT_HEALTH_TIMEOUT.as_millis() as f64,
        )?;
        let concurrency = whole(
            raw.concurrency,
            "concurrency",
            1.0..=64.0,
            DEFAULT_CONCURRENCY as f64,
        )? as usize;
        let timeout = match raw.engine_timeout_ms {
            Some(ms) => Some(engine::timeout_from_ms(ms, "engineTimeoutMs")?),
            None => None,
        };
        if let Some(name) = raw.engine.as_deref() {
            engine::candidates(&host, Some(name))?;
        }
        let broker_socket_dir = match raw.broker_socket_dir.filter(|s| !s.is_empty()) {
            Some(d) if d.starts_with('/') => PathBuf::from(d),
            Some(d) => {
                return Err(invalid(
                    "brokerSocketDir",
                    format!("{d:?} is not an absolute path"),
                ));
            }
            None => match host.var("XDG_RUNTIME_DIR").filter(|d| d.starts_with('/')) {
                Some(d) => PathBuf::from(d).join("po-broker"),
                None => std::env::temp_dir().join(format!("po-broker-{}", host.uid)),
            },
        };
        Ok(ProviderOptions {
            broker: raw.broker.unwrap_or(true),
            broker_socket_dir,
            po_home,
            owner,
            workspaces,
            runtime_version: raw.runtime_version,
            recipe,
            user,
            pids_limit,
            health_timeout: Duration::from_millis(health_ms as u64),
            concurrency,
            detect: DetectOptions {
                engine: raw.engine,
                timeout,
                probe_all: false,
            },
            host,
        })
    }
}
