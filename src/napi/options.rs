//! The options of `ensureSandboxImage`, converted into what the core checks (the provider's own
//! options are the core's `GivenOptions`, given field for field).

use std::collections::HashMap;

use napi_derive::napi;

use crate::provider::GivenOptions;

/// Options of `ensureSandboxImage`.
#[napi(object, js_name = "ImageOptions")]
#[derive(Default)]
pub struct JsImageOptions {
    /// The base (default `PO_SANDBOX_BASE_IMAGE`, else `node:24-bookworm-slim`).
    pub base_image: Option<String>,
    /// `full` or `minimal` (default `PO_SANDBOX_IMAGE_VARIANT`, else `full`).
    #[napi(ts_type = "'full' | 'minimal'")]
    pub image_variant: Option<String>,
    /// Only this engine.
    pub engine: Option<String>,
    /// The environment to read instead of `process.env`.
    pub env: Option<HashMap<String, Option<String>>>,
}

/// [`GivenOptions`] from a JS options struct `o`: the listed fields moved as they are, the
/// `name: value` pairs after them set, the rest left unset.
macro_rules! given {
    ($o:ident { $($field:ident),* $(,)? } $($name:ident: $value:expr),* $(,)?) => {
        GivenOptions { $($field: $o.$field,)* $($name: $value,)* ..Default::default() }
    };
}
pub(super) use given;

impl From<JsImageOptions> for GivenOptions {
    fn from(o: JsImageOptions) -> GivenOptions {
        given!(o {
            base_image,
            image_variant,
            engine
        })
    }
}
