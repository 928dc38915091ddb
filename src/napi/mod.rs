//! The JS surface: thin wrappers that convert types and errors. No logic lives here.
//! What JS passes in and reads back as plain objects are `Js*` types here (their JS names set
//! with `js_name`), converted with `From`/`TryFrom`; classes keep their JS names in Rust, as
//! napi exports a class's Rust name too (an alias type and an `undefined` export);
//! the shapes the core builds and hands out unchanged (status, events, reports) keep their
//! `#[napi]` in the core, so no field is copied into a mirror (see the README's Development).
// napi-derive registers exports only outside `cargo test`, where they would read as dead code.
#![cfg_attr(test, allow(dead_code))]

mod broker;
mod contained;
mod engine;
mod errors;
mod events;
mod forward;
mod inventory;
mod options;
mod provider;

#[napi_derive::module_init]
fn init() {
    crate::logging::init_from_env();
}
