//! The JS surface: thin wrappers that convert types and errors. No logic lives here.
// napi-derive registers exports only outside `cargo test`, where they would read as dead code.
#![cfg_attr(test, allow(dead_code))]

/// `From` both ways between a `#[napi(string_enum)]` mirror and its core enum: one arm per
/// variant, so a variant added on one side and not the other does not compile.
macro_rules! mirror_enum {
    ($name:ident = $core:path { $($variant:ident),+ $(,)? }) => {
        impl From<$core> for $name {
            fn from(v: $core) -> Self {
                match v {
                    $(<$core>::$variant => $name::$variant),+
                }
            }
        }

        impl From<$name> for $core {
            fn from(v: $name) -> Self {
                match v {
                    $($name::$variant => <$core>::$variant),+
                }
            }
        }
    };
}

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
