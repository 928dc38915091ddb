//! The JS surface: thin wrappers that convert types and errors. No logic lives here.

mod doctor;
mod engine;
mod errors;
mod identity;

#[napi_derive::module_init]
fn init() {
    crate::logging::init_from_env();
}
