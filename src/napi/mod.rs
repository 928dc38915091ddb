//! The JS surface: thin wrappers that convert types and errors. No logic lives here.
// napi-derive registers exports only outside `cargo test`, where they would read as dead code.
#![cfg_attr(test, allow(dead_code))]

mod bridge;
mod broker;
mod doctor;
mod engine;
mod errors;
mod events;
mod identity;
mod inventory;
mod provider;
mod rebase;

#[napi_derive::module_init]
fn init() {
    crate::logging::init_from_env();
}
