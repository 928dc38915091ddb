//! An engine call as errors name it: what it does to which thing. Its kind picks the bound it
//! is held to (and the variable that sets that bound), with no text to parse.

use std::fmt;

use crate::names::vars::{CALL_TIMEOUT_VAR, CHANGE_TIMEOUT_VAR};

/// The kind of thing an engine call is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// A container (a workspace's, a holder, a rules helper).
    Container,
    /// A network (the per-hub one).
    Network,
    /// A named volume.
    Volume,
    /// An image (the sandbox image).
    Image,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::Container => "container",
            Resource::Network => "network",
            Resource::Volume => "volume",
            Resource::Image => "image",
        })
    }
}

/// One engine call, with the name or id of what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// Lists every thing of a kind (with filters).
    List(Resource),
    /// Reads one thing.
    Inspect(Resource, String),
    /// Makes one thing.
    Create(Resource, String),
    /// Makes the network rules helper of a workspace.
    CreateHelper(String),
    /// Starts a container.
    Start(String),
    /// Stops a container.
    Stop(String),
    /// Restarts a container.
    Restart(String),
    /// Removes one thing.
    Remove(Resource, String),
    /// Waits for a container's exit.
    Wait(String),
}

impl Operation {
    /// Whether the call changes something (held to the change bound) rather than reads.
    pub fn changes(&self) -> bool {
        match self {
            Operation::List(_) | Operation::Inspect(..) | Operation::Wait(_) => false,
            Operation::Create(..)
            | Operation::CreateHelper(_)
            | Operation::Start(_)
            | Operation::Stop(_)
            | Operation::Restart(_)
            | Operation::Remove(..) => true,
        }
    }

    /// The variable whose bound the call is held to: [`CHANGE_TIMEOUT_VAR`] for one that
    /// changes something, [`CALL_TIMEOUT_VAR`] for one that reads.
    pub fn bound_variable(&self) -> &'static str {
        match self.changes() {
            true => CHANGE_TIMEOUT_VAR,
            false => CALL_TIMEOUT_VAR,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::List(r) => write!(f, "list {r}s"),
            Operation::Inspect(r, name) => write!(f, "inspect {r} {name}"),
            Operation::Create(r, name) => write!(f, "create {r} {name}"),
            Operation::CreateHelper(ws) => write!(f, "create the network rules helper of {ws}"),
            Operation::Start(id) => write!(f, "start container {id}"),
            Operation::Stop(id) => write!(f, "stop container {id}"),
            Operation::Restart(id) => write!(f, "restart container {id}"),
            Operation::Remove(r, name) => write!(f, "remove {r} {name}"),
            Operation::Wait(id) => write!(f, "wait for container {id}"),
        }
    }
}
