//! `ensureSandboxImage` without a hub: the image the options name, built once if missing on
//! the engine they name, exactly as start-up does.

use napi_derive::napi;

use crate::engine;
use crate::error::Result;
use crate::events::EventBus;
use crate::host::HostEnv;
use crate::image::{self, Provenance};

use super::{GivenOptions, ProviderOptions, refuse_nesting};

/// The image `ensureSandboxImage` made sure of.
#[napi(object, object_from_js = false)]
pub struct ImageResult {
    /// `po-sandbox:<digest>`.
    pub tag: String,
    /// The full sha256 digest of the recipe.
    pub digest: String,
    /// This call built it (it was missing).
    pub built: bool,
}

/// Checked options for one image.
pub struct ImageJob {
    host: HostEnv,
    options: ProviderOptions,
}

impl ImageJob {
    /// Refuses nesting and resolves the recipe and engine options (`base_image`,
    /// `image_variant`, `engine` of `raw`) as the provider does.
    pub fn new(host: HostEnv, raw: GivenOptions) -> Result<ImageJob> {
        refuse_nesting(&host)?;
        let options = ProviderOptions::resolve(raw, host.clone())?;
        Ok(ImageJob { host, options })
    }

    /// Connects and makes sure of the image, progress to `events`.
    pub async fn run(self, events: EventBus) -> Result<ImageResult> {
        let recipe = &self.options.recipe;
        let (engine, _) = engine::connect(&self.host, &self.options.detect).await?;
        let bounds = engine::bounds(&self.host)?;
        let (made, pinned) = image::ensure(&engine, recipe, &events, &bounds).await?;
        Ok(ImageResult {
            tag: pinned.tag(),
            digest: pinned.digest(),
            built: made == Provenance::Built,
        })
    }
}
