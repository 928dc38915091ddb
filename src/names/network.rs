//! The network modes a workspace runs in: shared by the sandbox (its rules) and the broker
//! (which refuses fetch requests outside `open`).

use crate::error::{Error, Result};
use crate::names::vars::NETWORK_VAR;

/// What a workspace may reach beyond the isolation every mode has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NetworkMode {
    /// The public internet (the default).
    #[default]
    Open,
    /// Nothing but loopback and the broker route.
    None,
    /// Only listed hosts, through the host-side forward proxy reached over the broker route.
    /// At packet level it is exactly [`NetworkMode::None`]: the proxy is the only way out.
    Allowlist,
}

/// The accepted values, for messages.
pub const MODES: &str = "'open', 'none' or 'allowlist'";

impl NetworkMode {
    /// Parses a mode name (surrounding blanks ignored).
    pub fn parse(s: &str) -> Option<NetworkMode> {
        match s.trim() {
            "open" => Some(NetworkMode::Open),
            "none" => Some(NetworkMode::None),
            "allowlist" => Some(NetworkMode::Allowlist),
            _ => None,
        }
    }

    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Open => "open",
            NetworkMode::None => "none",
            NetworkMode::Allowlist => "allowlist",
        }
    }

    /// Whether packets may leave for the public internet.
    pub fn internet(self) -> bool {
        self == NetworkMode::Open
    }

    /// `network`, else `PO_SANDBOX_NETWORK` (blank: unset), else `open`; `OPTIONS_INVALID`
    /// naming the option or variable and the accepted values otherwise.
    pub fn resolve(option: Option<&str>, var: Option<&str>) -> Result<NetworkMode> {
        let (name, value) = match (option, var) {
            (Some(v), _) => ("network", v),
            (None, Some(v)) if !v.trim().is_empty() => (NETWORK_VAR, v),
            _ => return Ok(NetworkMode::Open),
        };
        NetworkMode::parse(value).ok_or_else(|| Error::OptionsInvalid {
            option: name.into(),
            reason: format!("{value:?} is not a network mode: use {MODES}"),
        })
    }
}
