//! Which request paths the broker forwards for a provider: the model endpoints of the APIs pi
//! speaks to it (each API at the base paths of pi-ai 1.3.0's model catalogue), plus the host's
//! own additions (`PO_SANDBOX_BROKER_ALLOW_PATHS`). Pure.
//!
//! A path is matched segment by segment, exactly (letter case included), in every
//! percent-decoding the request rules looked at: an upstream that decodes once more still sees
//! an allowed path. A trailing `/`, an empty segment or a path that only starts like an allowed
//! one (`/v1/messages-evil`, `/v1/messages/x`) does not match.

use super::ProviderRoute;

/// An API a provider speaks, by its model endpoints (below one of its base paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI's chat completions, completions, Responses, embeddings and model list.
    OpenAi,
    /// Anthropic's Messages (and token count) and model list.
    Anthropic,
    /// The Gemini API's generate, stream, count and embed calls and model list.
    Gemini,
    /// OpenAI's Decisions API (pi's TypeSafe classifiers).
    Decisions,
}

impl Api {
    /// The endpoints, as patterns below the base path (see [`matches`]).
    pub fn endpoints(self) -> &'static [&'static str] {
        match self {
            Api::OpenAi => &[
                "/chat/completions",
                "/completions",
                "/responses",
                "/embeddings",
                "/models",
                "/models/*",
            ],
            Api::Anthropic => &[
                "/v1/messages",
                "/v1/messages/count_tokens",
                "/v1/models",
                "/v1/models/*",
            ],
            Api::Gemini => &[
                "/models",
                "/models/*",
                "/models/*:generateContent",
                "/models/*:streamGenerateContent",
                "/models/*:countTokens",
                "/models/*:embedContent",
                "/models/*:batchEmbedContents",
            ],
            Api::Decisions => &["/decisions"],
        }
    }
}

/// A provider's APIs, each at a base path (`""`: the origin's root), as pi-ai's model catalogue
/// and the providers' own documentation place them.
pub type ApiPaths = &'static [(&'static str, Api)];

/// Whether `path` (one decoding of a request's path after `/<provider>`, without query) is one
/// of the route's model endpoints or one of `extra` (the host's own patterns for it).
pub fn allowed(route: &ProviderRoute, extra: &[String], path: &str) -> bool {
    let built_in = route.apis.iter().any(|(base, api)| {
        under(path, base).is_some_and(|below| api.endpoints().iter().any(|p| matches(p, below)))
    });
    built_in || extra.iter().any(|p| matches(p, path))
}

/// The built-in model endpoint `path` is for `route`: its API and the endpoint's pattern.
pub fn endpoint(route: &ProviderRoute, path: &str) -> Option<(Api, &'static str)> {
    route.apis.iter().find_map(|(base, api)| {
        let below = under(path, base)?;
        let pattern = api.endpoints().iter().find(|p| matches(p, below))?;
        Some((*api, *pattern))
    })
}

/// The rest of `path` below `base` (segment-aligned), starting `/`.
fn under<'a>(path: &'a str, base: &str) -> Option<&'a str> {
    path.strip_prefix(base).filter(|r| r.starts_with('/'))
}

/// Whether `path` matches `pattern`, segment by segment: a literal segment matches itself
/// exactly; `*` any one segment of [`name`] characters; `*:suffix` such a segment followed by
/// `:suffix`; a final `**` any one or more segments.
pub fn matches(pattern: &str, path: &str) -> bool {
    let (Some(pattern), Some(path)) = (pattern.strip_prefix('/'), path.strip_prefix('/')) else {
        return false;
    };
    let mut want = pattern.split('/');
    let mut got = path.split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some("**"), Some(seg)) if want.clone().next().is_none() => {
                return !seg.is_empty() && got.all(|s| !s.is_empty());
            }
            (Some(w), Some(g)) if segment_matches(w, g) => {}
            _ => return false,
        }
    }
}

fn segment_matches(want: &str, got: &str) -> bool {
    match want.strip_prefix('*') {
        Some("") => is_name(got),
        Some(suffix) if suffix.starts_with(':') => got.strip_suffix(suffix).is_some_and(is_name),
        _ => want == got,
    }
}

/// A wildcard segment's characters: letters, digits, `-._~@+=` and `%` (a model id, maybe
/// percent-encoded); never `:` (which would reach another method: `x:batchGenerateContent`).
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~@+=%".contains(&b))
}

/// Checks one pattern of `PO_SANDBOX_BROKER_ALLOW_PATHS`: starts `/`, non-empty segments of
/// printable ASCII without `%?#\`, no `.`/`..` segment, `*` only as a whole segment (or
/// `*:suffix`), `**` only last. The reason when it is bad.
pub fn check_pattern(pattern: &str) -> Result<(), &'static str> {
    let Some(rest) = pattern.strip_prefix('/') else {
        return Err("a path must start with '/'");
    };
    let segments: Vec<&str> = rest.split('/').collect();
    for (i, seg) in segments.iter().enumerate() {
        if seg.is_empty() {
            return Err("a path must not have an empty segment ('//' or a trailing '/')");
        }
        if *seg == "." || *seg == ".." {
            return Err("a path must not have a '.' or '..' segment");
        }
        if seg
            .bytes()
            .any(|b| !(0x21..=0x7e).contains(&b) || b"%?#\\".contains(&b))
        {
            return Err("a path must be printable ASCII without '%', '?', '#' or '\\'");
        }
        let wild = seg.contains('*');
        let whole = *seg == "*" || (seg.starts_with("*:") && !seg[1..].contains('*'));
        if *seg == "**" && i + 1 != segments.len() {
            return Err("'**' may only be the last segment");
        }
        if wild && !whole && *seg != "**" {
            return Err("'*' may only be a whole segment, '*:suffix' or a final '**'");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
