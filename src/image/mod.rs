//! The sandbox image `po-sandbox:<digest>`: its recipe (data in the crate), its digest over the
//! recipe, every file it copies, the base reference and the base's ID on the engine ([`pin`]),
//! and its one-time build. A base pulled again under the same name (security fixes) has another
//! ID, so the next start builds the image anew on it and replaces the containers.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::engine::{BuildOptions, EngineApi, EngineError};
use crate::error::{Error, Result};
use crate::events::{EventBus, ImagePhase};
use crate::names::vars::{BASE_VAR, VARIANT_VAR};
use crate::single_flight::SingleFlight;

/// The base image of the full recipe.
pub const DEFAULT_BASE: &str = "node:24-bookworm-slim";
/// The repository of every sandbox image.
pub const REPOSITORY: &str = "po-sandbox";
/// The label of an image (and of its containers) that names its base's ID.
pub const LABEL_BASE_ID: &str = "po.image-base-id";
/// The label of an image that names its recipe's digest without the base's ID: the images of
/// one recipe on any base.
pub const LABEL_RECIPE: &str = "po.image-recipe";

/// The full image's environment (CloakBrowser lives in `/opt/cloak`: its npm package and, under
/// `browser/`, the browser build), set before its toolchain is installed so the build and every
/// container share it: CloakBrowser finds the browser build the image holds and never
/// downloads one (no update check either: `/opt/cloak` is read-only to the container user),
/// its CLI is on `PATH` and `require('cloakbrowser')` resolves from anywhere.
pub const FULL_RUNTIME_ENV: [(&str, &str); 4] = [
    ("CLOAKBROWSER_CACHE_DIR", "/opt/cloak/browser"),
    ("CLOAKBROWSER_AUTO_UPDATE", "false"),
    ("NODE_PATH", "/opt/cloak/node_modules"),
    ("PATH", "/opt/cloak/node_modules/.bin:$PATH"),
];

const SETUP_DIRS: &str = include_str!("recipe/setup-dirs.sh");
const SETUP_FULL: &str = include_str!("recipe/setup-full.sh");

/// Which recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// git, procps, ripgrep, Chromium libraries and fonts, corepack, CloakBrowser.
    Full,
    /// Only the volume folders: for bases that already carry what sessions need, and for tests.
    Minimal,
}

impl Variant {
    /// Parses `full` or `minimal`.
    pub fn parse(s: &str) -> Option<Variant> {
        match s.trim() {
            "full" => Some(Variant::Full),
            "minimal" => Some(Variant::Minimal),
            _ => None,
        }
    }

    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Full => "full",
            Variant::Minimal => "minimal",
        }
    }
}

/// The image definition: a base and a variant; everything else is fixed data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecipe {
    /// The `FROM` reference.
    pub base: String,
    /// Which recipe.
    pub variant: Variant,
    /// The base's ID on the engine the image is built on, once known ([`pin`]); part of the
    /// digest.
    pub base_id: Option<String>,
}

impl ImageRecipe {
    /// A recipe from options, falling back to `PO_SANDBOX_BASE_IMAGE`, `PO_SANDBOX_IMAGE_VARIANT`
    /// and the defaults.
    pub fn resolve(
        base: Option<&str>,
        variant: Option<&str>,
        env: &HashMap<String, String>,
    ) -> Result<ImageRecipe> {
        let pick = |opt: Option<&str>, var: &str| {
            opt.map(str::to_string)
                .or_else(|| env.get(var).cloned())
                .filter(|s| !s.trim().is_empty())
        };
        let base = pick(base, BASE_VAR).unwrap_or_else(|| DEFAULT_BASE.to_string());
        if base.chars().any(|c| c.is_whitespace() || c.is_control()) || base.starts_with('-') {
            return Err(Error::OptionsInvalid {
                option: "baseImage".into(),
                reason: format!("{base:?} is not an image reference"),
            });
        }
        let variant = match pick(variant, VARIANT_VAR) {
            None => Variant::Full,
            Some(v) => Variant::parse(&v).ok_or_else(|| Error::OptionsInvalid {
                option: "imageVariant".into(),
                reason: format!("{v:?} is neither 'full' nor 'minimal'"),
            })?,
        };
        Ok(ImageRecipe {
            base: base.trim().to_string(),
            variant,
            base_id: None,
        })
    }

    /// The Dockerfile.
    pub fn dockerfile(&self) -> String {
        let mut d = format!("FROM {}\n", self.base);
        match self.variant {
            Variant::Full => {
                d.push_str("ENV");
                for (name, value) in FULL_RUNTIME_ENV {
                    d.push_str(&format!(" {name}={value}"));
                }
                d.push('\n');
                d.push_str("COPY setup-full.sh setup-dirs.sh /usr/local/lib/po-sandbox/\n");
                d.push_str("RUN sh /usr/local/lib/po-sandbox/setup-full.sh\n");
            }
            Variant::Minimal => d.push_str("COPY setup-dirs.sh /usr/local/lib/po-sandbox/\n"),
        }
        d.push_str("RUN sh /usr/local/lib/po-sandbox/setup-dirs.sh\n");
        d.push_str("ENV HOME=/po-home\n");
        d
    }

    /// Every file the Dockerfile copies: (name, mode, content).
    pub fn files(&self) -> Vec<(&'static str, u32, &'static str)> {
        match self.variant {
            Variant::Full => vec![
                ("setup-full.sh", 0o755, SETUP_FULL),
                ("setup-dirs.sh", 0o755, SETUP_DIRS),
            ],
            Variant::Minimal => vec![("setup-dirs.sh", 0o755, SETUP_DIRS)],
        }
    }

    /// sha256 over the base reference, the variant, the base's ID when known, the Dockerfile
    /// and every copied file.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        let mut field = |b: &[u8]| {
            h.update((b.len() as u64).to_be_bytes());
            h.update(b);
        };
        field(b"po-sandbox-image/1");
        field(self.base.as_bytes());
        field(self.variant.as_str().as_bytes());
        if let Some(id) = &self.base_id {
            field(b"base-id");
            field(id.as_bytes());
        }
        field(self.dockerfile().as_bytes());
        for (name, mode, content) in self.files() {
            field(name.as_bytes());
            field(&mode.to_be_bytes());
            field(content.as_bytes());
        }
        hex::encode(h.finalize())
    }

    /// `po-sandbox:<first 24 hex digits of the digest>`.
    pub fn tag(&self) -> String {
        format!("{REPOSITORY}:{}", &self.digest()[..24])
    }

    /// The build context: an in-memory tar of the Dockerfile and the copied files.
    pub fn context(&self) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &str, mode: u32, content: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(mode);
            header.set_mtime(0);
            header.set_cksum();
            tar.append_data(&mut header, name, content)
                .expect("writing to a Vec cannot fail");
        };
        add("Dockerfile", 0o644, self.dockerfile().as_bytes());
        for (name, mode, content) in self.files() {
            add(name, mode, content.as_bytes());
        }
        tar.into_inner().expect("writing to a Vec cannot fail")
    }
}

/// How the image came to be there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// It was already there.
    Cached,
    /// This call built it.
    Built,
}

/// A build's outcome, the same for every caller that waited on it.
type SharedBuild = std::result::Result<Provenance, Arc<Error>>;

/// Builds in flight by tag, each with the bus its progress goes to; every caller waiting on
/// one listens.
fn builds() -> &'static SingleFlight<String, SharedBuild, EventBus> {
    static BUILDS: OnceLock<SingleFlight<String, SharedBuild, EventBus>> = OnceLock::new();
    BUILDS.get_or_init(Default::default)
}

impl ImageRecipe {
    /// This recipe on the base a container's (or image's) labels name, when they name this
    /// recipe's base and variant and the base's ID.
    pub fn on_base_of(&self, labels: &HashMap<String, String>) -> Option<ImageRecipe> {
        let label = |k: &str| labels.get(k).map(String::as_str);
        let same = label("po.image-base") == Some(self.base.as_str())
            && label("po.image-variant") == Some(self.variant.as_str());
        let id = label(LABEL_BASE_ID).filter(|_| same)?;
        Some(ImageRecipe {
            base_id: Some(id.to_string()),
            ..self.clone()
        })
    }

    /// The digest without the base's ID: the same for this recipe on every base.
    fn recipe_digest(&self) -> String {
        ImageRecipe {
            base_id: None,
            ..self.clone()
        }
        .digest()
    }
}

/// The recipe on `engine`: with its base's ID there, when the engine has the base; else on the
/// base of the newest image of this recipe the engine keeps (a base removed since, as
/// `docker image prune -a` does: its sandbox image is still good); else not pinned (the build
/// pulls the base, [`ensure`] pins it after).
pub async fn pin(engine: &impl EngineApi, recipe: &ImageRecipe) -> Result<ImageRecipe> {
    let mut pinned = recipe.clone();
    pinned.base_id = match engine.inspect_image(&recipe.base).await {
        Ok(base) => Some(base.id),
        Err(EngineError::NotFound(_)) => {
            let label = format!("{LABEL_RECIPE}={}", recipe.recipe_digest());
            let kept = engine.list_images(vec![label]).await.unwrap_or_default();
            kept.into_iter()
                .filter_map(|(labels, made)| Some((made, labels.get(LABEL_BASE_ID)?.clone())))
                .max()
                .map(|(_, id)| id)
        }
        Err(source) => {
            return Err(Error::engine(
                engine.timeout(),
                crate::engine::Operation::Inspect(
                    crate::engine::Resource::Image,
                    recipe.base.clone(),
                ),
                source,
            ));
        }
    };
    Ok(pinned)
}

/// Makes sure the image of `recipe` on its base as the engine has it now exists ([`pin`]),
/// building it once if missing; the recipe it made sure of, pinned. A base the engine did
/// not have is pulled by the build; the image is then made sure of on it, pinned (from the
/// build's cache). Concurrent calls in one process for the same tag share one build, and each
/// gets its progress on its own `events` (a caller that joins late is first replayed what it
/// missed).
pub async fn ensure(
    engine: &impl EngineApi,
    recipe: &ImageRecipe,
    events: &EventBus,
    bounds: &crate::engine::Bounds,
) -> Result<(Provenance, ImageRecipe)> {
    let pinned = match recipe.base_id {
        Some(_) => recipe.clone(),
        None => pin(engine, recipe).await?,
    };
    let made = ensure_pinned(engine, &pinned, events, bounds).await?;
    if pinned.base_id.is_none() {
        let now = pin(engine, recipe).await?;
        if now.base_id.is_some() {
            let again = ensure_pinned(engine, &now, events, bounds).await?;
            let built = made == Provenance::Built || again == Provenance::Built;
            let provenance = if built {
                Provenance::Built
            } else {
                Provenance::Cached
            };
            return Ok((provenance, now));
        }
    }
    Ok((made, pinned))
}

/// [`ensure`] of a recipe as it is.
async fn ensure_pinned(
    engine: &impl EngineApi,
    recipe: &ImageRecipe,
    events: &EventBus,
    bounds: &crate::engine::Bounds,
) -> Result<Provenance> {
    let build = builds().join(recipe.tag(), || {
        let engine = engine.clone();
        let bounds = *bounds;
        let recipe = recipe.clone();
        let progress = EventBus::default();
        let bus = progress.clone();
        let build = async move {
            ensure_uncached(&engine, &recipe, &bus, &bounds)
                .await
                .map_err(Arc::new)
        };
        (build, progress)
    });
    let mine = events.clone();
    build
        .shared
        .subscribe(Arc::new(move |e| mine.emit(e.clone())));
    // A finished build is forgotten so a later call checks the engine again.
    let outcome = build.outcome().await;
    outcome.map_err(Error::from_shared)
}

async fn ensure_uncached(
    engine: &impl EngineApi,
    recipe: &ImageRecipe,
    events: &EventBus,
    bounds: &crate::engine::Bounds,
) -> Result<Provenance> {
    let tag = recipe.tag();
    events.image(ImagePhase::Checking, &tag, None);
    if is_cached(engine, &tag).await? {
        events.image(ImagePhase::Cached, &tag, None);
        return Ok(Provenance::Cached);
    }
    events.image(
        ImagePhase::Building,
        &tag,
        Some(format!(
            "{} recipe on {}",
            recipe.variant.as_str(),
            recipe.base
        )),
    );
    match build(engine, recipe, &tag, events, bounds).await {
        Ok(()) => {
            events.image(ImagePhase::Built, &tag, None);
            Ok(Provenance::Built)
        }
        Err(e) => {
            let message = match &e {
                Error::ImageBuildFailed { step, detail, .. } => format!("{step}: {detail}"),
                other => other.to_string(),
            };
            events.image(ImagePhase::Failed, &tag, Some(message));
            Err(e)
        }
    }
}

/// Whether the engine has the tag already.
async fn is_cached(engine: &impl EngineApi, tag: &str) -> Result<bool> {
    match engine.inspect_image(tag).await {
        Ok(_) => Ok(true),
        Err(EngineError::NotFound(_)) => Ok(false),
        Err(source) => Err(Error::engine(
            engine.timeout(),
            crate::engine::Operation::Inspect(crate::engine::Resource::Image, tag.to_string()),
            source,
        )),
    }
}

/// The build's options: the tag, intermediate containers always removed, and the labels that
/// say what the image was built from (its containers carry them too).
fn build_options(recipe: &ImageRecipe, tag: &str) -> BuildOptions {
    let mut labels = HashMap::from([
        ("po.sandbox".to_string(), "1".to_string()),
        ("po.image-digest".to_string(), recipe.digest()),
        (
            "po.image-variant".to_string(),
            recipe.variant.as_str().to_string(),
        ),
        ("po.image-base".to_string(), recipe.base.clone()),
    ]);
    if let Some(id) = &recipe.base_id {
        labels.insert(LABEL_BASE_ID.to_string(), id.clone());
        labels.insert(LABEL_RECIPE.to_string(), recipe.recipe_digest());
    }
    BuildOptions {
        tag: tag.to_string(),
        labels,
    }
}

/// Where a build is: the current step and the last lines of its output.
struct BuildLog {
    step: String,
    tail: Vec<String>,
}

impl BuildLog {
    const TAIL_LINES: usize = 30;

    fn new() -> BuildLog {
        BuildLog {
            step: String::from("the start of the build"),
            tail: Vec::new(),
        }
    }

    /// Records one output line; a `Step …` line starts a new step.
    fn line(&mut self, line: &str) {
        if line.starts_with("Step ") || line.starts_with("STEP ") {
            self.step = line.to_string();
            self.tail.clear();
        }
        self.tail.push(line.to_string());
        if self.tail.len() > Self::TAIL_LINES {
            self.tail.remove(0);
        }
    }

    /// The failure at the current step, with a hint when the base could not be pulled.
    fn failed(&self, recipe: &ImageRecipe, tag: &str, mut detail: String) -> Error {
        if self.step.contains("FROM")
            || detail.contains("pull access denied")
            || detail.contains("manifest unknown")
        {
            detail.push_str(&format!(
                ". The base image {} is not on this engine and could not be pulled; build or load it locally, or choose another with {BASE_VAR}",
                recipe.base
            ));
        }
        Error::ImageBuildFailed {
            tag: tag.to_string(),
            step: self.step.clone(),
            detail,
            tail: self.tail.join("\n"),
        }
    }
}

/// Runs the build, streaming every output line as a `progress` event, and checks the tag
/// exists at the end. Its start gets the change bound; then each message must follow the one
/// before within the build's idle bound, however long the build takes in all.
async fn build(
    engine: &impl EngineApi,
    recipe: &ImageRecipe,
    tag: &str,
    events: &EventBus,
    bounds: &crate::engine::Bounds,
) -> Result<()> {
    let builder = crate::engine::for_changes(engine, bounds);
    let mut stream = builder.build_image(build_options(recipe, tag), recipe.context());
    let mut log = BuildLog::new();
    loop {
        let Ok(next) = tokio::time::timeout(bounds.build_idle, stream.next()).await else {
            let idle = bounds.build_idle.as_millis();
            let why = format!(
                "the engine sent no build output for {idle} ms ({}); the build may be hung: restart the engine, or raise the bound for a slow step",
                crate::names::vars::BUILD_IDLE_VAR
            );
            return Err(log.failed(recipe, tag, why));
        };
        let Some(item) = next else { break };
        let info = match item {
            Ok(info) => info,
            Err(e) => {
                let said = match e.answer() {
                    Some(answer) if answer.status == 0 => answer.message.clone(),
                    _ => e.to_string(),
                };
                return Err(log.failed(recipe, tag, said));
            }
        };
        if let Some(err) = info.error_detail.and_then(|d| d.message) {
            return Err(log.failed(recipe, tag, err));
        }
        if let Some(text) = info.stream {
            let text = strip_ansi(&text);
            for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
                log.line(line);
                events.image(ImagePhase::Progress, tag, Some(line.to_string()));
            }
        }
    }
    match engine.inspect_image(tag).await {
        Ok(_) => Ok(()),
        Err(e) => Err(log.failed(
            recipe,
            tag,
            format!("the build ended but {tag} is not there ({e})"),
        )),
    }
}

/// Build output carries terminal colour codes (`ESC [ 91 m`); events and errors do not.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

mod pull;
pub use pull::pull_base;

#[cfg(test)]
mod tests;
