//! po-sandbox: the sandbox layer of the Po coding-agent distribution. The crate is a Node.js
//! addon: every module is private and the JS surface (`src/napi/`) is the API.
// napi-derive registers exports only outside `cargo test`; there, what only JS calls reads as dead.
#![cfg_attr(test, allow(dead_code))]

mod broker;
mod contained;
mod doctor;
mod engine;
mod error;
mod events;
mod host;
mod image;
mod lock;
mod logging;
mod names;
mod napi;
mod platform;
mod policy;
mod provider;
mod relay;
mod runtime_bundle;
mod safe_read;
mod sandbox;
mod single_flight;
mod write_aside;
