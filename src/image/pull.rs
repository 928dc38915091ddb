//! The base pulled again from its registry (`po-sandbox up --pull`, the `pullBase` option): the
//! engine's pull, bounded by its progress as a build is, and whether the base's ID changed.
//! A changed ID is a new digest ([`super::pin`]): the next image check builds on it, and a
//! container on the old base is replaced at its start.

use futures_util::StreamExt;

use super::{ImageRecipe, strip_ansi};
use crate::engine::EngineApi;
use crate::error::{Error, Result};
use crate::events::{EventBus, ImagePhase};
use crate::names::vars::BUILD_IDLE_VAR;

/// The layer statuses a pull repeats for every chunk: not one event each.
const CHUNK_STATUSES: [&str; 3] = ["Downloading", "Extracting", "Waiting"];

/// Pulls the recipe's base on `engine`, with `pulling`, `progress` and `pulled` (or `failed`)
/// events on the base's name; whether its ID there changed (a base the engine did not have
/// counts as changed). A pull the engine refuses or whose progress stops for the build's idle
/// bound is `IMAGE_PULL_FAILED`, with the engine's words.
pub async fn pull_base(
    engine: &impl EngineApi,
    recipe: &ImageRecipe,
    events: &EventBus,
    bounds: &crate::engine::Bounds,
) -> Result<bool> {
    let base = recipe.base.as_str();
    let before = engine.inspect_image(base).await.ok().map(|facts| facts.id);
    events.image(ImagePhase::Pulling, base, None);
    let failed = |detail: String| {
        events.image(ImagePhase::Failed, base, Some(detail.clone()));
        Error::ImagePullFailed {
            image: base.to_string(),
            detail,
        }
    };
    let puller = crate::engine::for_changes(engine, bounds);
    let mut stream = puller.pull_image(base);
    loop {
        let Ok(next) = tokio::time::timeout(bounds.build_idle, stream.next()).await else {
            let idle = bounds.build_idle.as_millis();
            return Err(failed(format!(
                "the engine sent no pull progress for {idle} ms ({BUILD_IDLE_VAR})"
            )));
        };
        match next {
            None => break,
            Some(Ok(line)) => {
                let line = strip_ansi(&line);
                let status = line.rsplit(": ").next().unwrap_or_default();
                if !CHUNK_STATUSES.iter().any(|s| status.starts_with(s)) {
                    events.image(ImagePhase::Progress, base, Some(line));
                }
            }
            Some(Err(e)) => {
                return Err(failed(match e.answer() {
                    Some(answer) => answer.message.clone(),
                    None => e.to_string(),
                }));
            }
        }
    }
    let after = match engine.inspect_image(base).await {
        Ok(facts) => facts.id,
        Err(e) => {
            return Err(failed(format!(
                "the pull ended but {base} is not there ({e})"
            )));
        }
    };
    let changed = before.as_deref() != Some(after.as_str());
    let short = &after.trim_start_matches("sha256:")[..12.min(after.len())];
    let said = match changed {
        true => format!("a newer image ({short}): the sandbox image is built on it"),
        false => format!("up to date ({short})"),
    };
    events.image(ImagePhase::Pulled, base, Some(said));
    Ok(changed)
}
