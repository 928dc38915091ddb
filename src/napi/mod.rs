//! The JS surface: thin wrappers that convert types and errors. No logic lives here.
//! What JS passes in, and the classes, are `Js*` types here, converted with `From`/`TryFrom`;
//! the shapes the core builds and hands out unchanged (status, events, reports) keep their
//! `#[napi]` in the core, so no field is copied into a mirror (see the README's Development).
// napi-derive registers exports only outside `cargo test`, where they would read as dead code.
#![cfg_attr(test, allow(dead_code))]

mod broker;
mod contained;
mod engine;
mod errors;
mod events;
mod inventory;
mod options;
mod provider;

#[napi_derive::module_init]
fn init() {
    crate::logging::init_from_env();
}
