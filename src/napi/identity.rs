//! `DefaultSandboxExtensionService`.

use std::collections::HashMap;

use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;

use super::errors::{env_vars, object_arg};
use crate::contained::help;
use crate::contained::identity::{self as core, SandboxState};

/// Reports sandbox state from the environment it is given: whether this process is contained,
/// its workspace, and its brokered providers and route. Never throws on odd variables; they
/// are listed in `problems`.
#[napi]
pub struct DefaultSandboxExtensionService {
    state: core::SandboxState,
    facts: help::HelpFacts,
}

#[napi]
impl DefaultSandboxExtensionService {
    /// Reads `PO_SANDBOX`, `PO_WORKSPACE`, `PO_BROKER_PROVIDERS`, `PO_BROKER_SOCKET`,
    /// `PO_BROKER_ADDRESS`, `PO_SANDBOX_GUARDED_PATHS`, and for the help skill `PO_HOME`, `HOME`
    /// and `PO_SANDBOX_TOKEN_FILE`, from `env` (default: the process environment), once.
    /// Throws `OPTIONS_INVALID` when `env` is given but is not an object.
    #[napi(
        constructor,
        ts_args_type = "env?: Record<string, string | undefined | null> | undefined | null"
    )]
    pub fn new(env: &Env, vars: Option<Unknown>) -> napi::Result<Self> {
        let vars: Option<HashMap<String, Option<String>>> = object_arg(env, vars, "env")?;
        let vars = env_vars(vars);
        Ok(DefaultSandboxExtensionService {
            state: core::read_state(&vars),
            facts: help::read_facts(&vars),
        })
    }

    /// Whether this process runs inside a sandbox container.
    #[napi(getter)]
    pub fn contained(&self) -> bool {
        self.state.contained
    }

    /// The full state.
    #[napi]
    pub fn state(&self) -> SandboxState {
        self.state.clone()
    }

    /// The text `/po-sandbox` shows a person.
    #[napi]
    pub fn report(&self) -> String {
        core::report(&self.state)
    }

    /// The help skill of a contained session: the `SKILL.md` of the pi skill `po-sandbox`
    /// (what is mounted where — the workspace, `HOME`, `PO_HOME`, `/opt/po`, the guarded paths —,
    /// the brokered providers, the network, and what cannot be done here), from the same
    /// variables as `report()`, also `PO_HOME`, `HOME` and `PO_SANDBOX_TOKEN_FILE`. `cwd` is
    /// the session's working directory. `null` on the host (not contained).
    #[napi]
    pub fn help_skill(&self, cwd: Option<String>) -> Option<String> {
        help::skill(&self.state, &self.facts, cwd.as_deref())
    }
}
