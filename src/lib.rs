//! po-sandbox: the sandbox layer of the Po coding-agent distribution.

pub mod broker;
pub mod container;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod events;
pub mod identity;
pub mod image;
pub mod inventory;
pub mod logging;
mod napi;
pub mod provider;
pub mod runtime;
pub mod spec;
pub mod workspace;
pub mod workspaces;
