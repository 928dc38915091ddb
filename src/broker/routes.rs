//! The broker's route table: which model providers it can carry, where their real keys live on
//! the host, where their requests go, which header carries the key, and what the per-grant token
//! that stands in for the key inside a container looks like. Pure: no I/O beyond the system
//! random source in [`mint_token`].
//!
//! The table follows the provider library of the pi coding agent, `@earendil-works/pi-ai`
//! 1.3.0: `env-api-keys.js` (the variable that holds each provider's key, in its precedence),
//! the generated model catalogue (each model's `baseUrl`) and the API implementations (the
//! header each SDK puts the key in). It carries a provider only when pi sends one static key in
//! a header to a fixed public HTTPS origin, or (Azure OpenAI) to an origin the host names; every
//! other credential pi reads is listed by [`withheld`].

use std::collections::HashMap;

use crate::error::{Error, Result};

pub mod paths;
mod upstream;
use paths::{Api, ApiPaths};
pub(crate) use upstream::split_host_port;
pub use upstream::upstream;

/// How a provider's key travels on the wire. The broker checks the token in, and writes the real
/// key into, the same header, so the container's requests keep their shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthScheme {
    /// `Authorization: Bearer <key>` (the OpenAI, Mistral and most other SDKs; the Anthropic SDK
    /// for `sk-ant-oat…` subscription tokens and `ANTHROPIC_AUTH_TOKEN`).
    Bearer,
    /// The raw key in this header (lower case): `x-api-key` (Anthropic Messages API),
    /// `x-goog-api-key` (Gemini API), `api-key` (Azure OpenAI).
    Header(&'static str),
}

impl AuthScheme {
    /// The header's name, lower case, as HTTP/2 and header maps spell it.
    pub fn header(self) -> &'static str {
        match self {
            AuthScheme::Bearer => "authorization",
            AuthScheme::Header(name) => name,
        }
    }

    /// The header value that carries `key`.
    pub fn encode(self, key: &str) -> String {
        match self {
            AuthScheme::Bearer => format!("Bearer {key}"),
            AuthScheme::Header(_) => key.to_string(),
        }
    }

    /// The key inside a header value of this scheme (surrounding space ignored; the `Bearer`
    /// word is case-insensitive); `None` when the value does not have the scheme's form.
    pub fn decode(self, value: &str) -> Option<&str> {
        let value = value.trim();
        let key = match self {
            AuthScheme::Bearer => {
                let (word, key) = value.split_once(' ')?;
                if !word.eq_ignore_ascii_case("bearer") {
                    return None;
                }
                key.trim()
            }
            AuthScheme::Header(_) => value,
        };
        (!key.is_empty() && !key.contains(char::is_whitespace)).then_some(key)
    }
}

/// How a per-grant token must look so pi treats it exactly as it would the real key (pi picks
/// code paths by key prefix: Anthropic's `sk-ant-oat` switches to subscription auth, OpenAI keys
/// not starting `sk-` count as ChatGPT sign-ins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenShape {
    /// Random hex only: pi does not look at the key.
    Plain,
    /// This prefix, then random hex.
    Prefix(&'static str),
    /// `marked` when the real key contains `marker`, otherwise `unmarked`, then random hex: the
    /// token takes the same branch in pi as the key it stands for.
    ByKey {
        marker: &'static str,
        marked: &'static str,
        unmarked: &'static str,
    },
}

impl TokenShape {
    /// The prefix a token for `real_key` gets.
    pub fn prefix(self, real_key: &str) -> &'static str {
        match self {
            TokenShape::Plain => "",
            TokenShape::Prefix(p) => p,
            TokenShape::ByKey {
                marker,
                marked,
                unmarked,
            } => {
                if real_key.contains(marker) {
                    marked
                } else {
                    unmarked
                }
            }
        }
    }
}

/// A provider whose upstream is the customer's own resource (Azure OpenAI) rather than one
/// public origin. Mirrors pi-ai's `resolveAzureBaseUrl`: the base URL variable wins, else the
/// resource name makes `https://<name><host_suffix><api_path>`, and a bare URL on one of the
/// service's own hosts gets `api_path` as its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceOrigin {
    /// Host variable holding the resource name (`AZURE_OPENAI_RESOURCE_NAME`).
    pub name_var: &'static str,
    /// Appended to the resource name to make the host (`.openai.azure.com`).
    pub host_suffix: &'static str,
    /// Host suffixes of the service, where pi rewrites a bare path to `api_path`.
    pub service_hosts: &'static [&'static str],
    /// The paths (trailing `/` removed) pi rewrites to `api_path` on those hosts.
    pub bare_paths: &'static [&'static str],
    /// The API's base path (`/openai/v1`).
    pub api_path: &'static str,
}

/// One provider the broker can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderRoute {
    /// pi's provider id, and the first path segment of the broker's routes (`/<id>/…`).
    pub id: &'static str,
    /// Host variables holding its key, in pi-ai's precedence order; the grant puts the token in
    /// the variable the key came from. Some routes share a variable (`MOONSHOT_API_KEY`,
    /// `OPENCODE_API_KEY`, `QWEN_TOKEN_PLAN_API_KEY`): one token then stands for both routes.
    pub key_vars: &'static [&'static str],
    /// `scheme://host[:port]` of the upstream, no path (the container keeps each model's path).
    /// Empty where the upstream is per-resource ([`ProviderRoute::resource`]).
    pub default_origin: &'static str,
    /// Headers the key may arrive in (token) and is sent in (real key); the first is the one
    /// most of the provider's models use. pi speaks several APIs to some providers (OpenRouter:
    /// OpenAI completions with Bearer, Anthropic messages with `x-api-key`).
    pub auth: &'static [AuthScheme],
    /// The host variable that overrides the upstream (`<ID>_BASE_URL`; Azure: pi-ai's own
    /// `AZURE_OPENAI_BASE_URL`). pi-ai itself reads no other such variable.
    pub base_url_var: &'static str,
    /// How a per-grant token must look.
    pub token_shape: TokenShape,
    /// The APIs pi speaks to it, each at its base path: the broker forwards their model
    /// endpoints only ([`paths::allowed`]).
    pub apis: ApiPaths,
    /// Set where the upstream is per-resource (Azure OpenAI).
    pub resource: Option<ResourceOrigin>,
}

const BEARER: &[AuthScheme] = &[AuthScheme::Bearer];
const X_API_KEY: AuthScheme = AuthScheme::Header("x-api-key");
const X_GOOG_API_KEY: AuthScheme = AuthScheme::Header("x-goog-api-key");

/// A provider that pi reaches with one Bearer key on a fixed origin.
const fn bearer(
    id: &'static str,
    key_var: &'static [&'static str],
    default_origin: &'static str,
    base_url_var: &'static str,
    apis: ApiPaths,
) -> ProviderRoute {
    ProviderRoute {
        id,
        key_vars: key_var,
        default_origin,
        auth: BEARER,
        base_url_var,
        token_shape: TokenShape::Plain,
        apis,
        resource: None,
    }
}

/// OpenAI's API at `/v1`, the most common shape.
const OPENAI_V1: ApiPaths = &[("/v1", Api::OpenAi)];
/// OpenAI's API at `/v1` and Anthropic's at `/anthropic`.
const OPENAI_V1_ANTHROPIC: ApiPaths = &[("/v1", Api::OpenAi), ("/anthropic", Api::Anthropic)];
/// Z.ai's coding and general OpenAI-style APIs and its Anthropic API.
const ZAI: ApiPaths = &[
    ("/api/coding/paas/v4", Api::OpenAi),
    ("/api/paas/v4", Api::OpenAi),
    ("/api/anthropic", Api::Anthropic),
];
/// Alibaba Model Studio's OpenAI-compatible mode and its Anthropic API.
const QWEN: ApiPaths = &[
    ("/compatible-mode/v1", Api::OpenAi),
    ("/apps/anthropic", Api::Anthropic),
];

/// Like [`bearer`], with other headers.
const fn with_auth(mut route: ProviderRoute, auth: &'static [AuthScheme]) -> ProviderRoute {
    route.auth = auth;
    route
}

/// Anthropic subscription (OAuth) tokens contain this; pi then sends Bearer and Claude Code
/// identity headers.
const ANTHROPIC_SUBSCRIPTION_MARKER: &str = "sk-ant-oat";

static PROVIDERS: &[ProviderRoute] = &[
    ProviderRoute {
        id: "anthropic",
        // pi: ANTHROPIC_AUTH_TOKEN (sent as Bearer), then ANTHROPIC_OAUTH_TOKEN, then
        // ANTHROPIC_API_KEY (Bearer when the value contains sk-ant-oat, else x-api-key).
        key_vars: &[
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_OAUTH_TOKEN",
            "ANTHROPIC_API_KEY",
        ],
        default_origin: "https://api.anthropic.com",
        auth: &[X_API_KEY, AuthScheme::Bearer],
        base_url_var: "ANTHROPIC_BASE_URL",
        token_shape: TokenShape::ByKey {
            marker: ANTHROPIC_SUBSCRIPTION_MARKER,
            marked: "sk-ant-oat01-",
            unmarked: "sk-ant-api03-",
        },
        apis: &[("", Api::Anthropic)],
        resource: None,
    },
    // pi treats an OpenAI key not starting `sk-` as a ChatGPT sign-in token.
    ProviderRoute {
        token_shape: TokenShape::Prefix("sk-"),
        ..bearer(
            "openai",
            &["OPENAI_API_KEY"],
            "https://api.openai.com",
            "OPENAI_BASE_URL",
            OPENAI_V1,
        )
    },
    with_auth(
        bearer(
            "google",
            &["GEMINI_API_KEY"],
            "https://generativelanguage.googleapis.com",
            "GOOGLE_BASE_URL",
            &[
                ("/v1beta", Api::Gemini),
                ("/v1", Api::Gemini),
                ("/v1beta/openai", Api::OpenAi),
            ],
        ),
        &[X_GOOG_API_KEY],
    ),
    bearer(
        "mistral",
        &["MISTRAL_API_KEY"],
        "https://api.mistral.ai",
        "MISTRAL_BASE_URL",
        OPENAI_V1,
    ),
    bearer(
        "groq",
        &["GROQ_API_KEY"],
        "https://api.groq.com",
        "GROQ_BASE_URL",
        &[("/openai/v1", Api::OpenAi)],
    ),
    bearer(
        "cerebras",
        &["CEREBRAS_API_KEY"],
        "https://api.cerebras.ai",
        "CEREBRAS_BASE_URL",
        OPENAI_V1,
    ),
    bearer(
        "xai",
        &["XAI_API_KEY"],
        "https://api.x.ai",
        "XAI_BASE_URL",
        &[("/v1", Api::OpenAi), ("", Api::Anthropic)],
    ),
    // Chat models at /api/v1 (OpenAI completions), Anthropic-API models at /api.
    with_auth(
        bearer(
            "openrouter",
            &["OPENROUTER_API_KEY"],
            "https://openrouter.ai",
            "OPENROUTER_BASE_URL",
            &[("/api/v1", Api::OpenAi), ("/api", Api::Anthropic)],
        ),
        &[AuthScheme::Bearer, X_API_KEY],
    ),
    bearer(
        "deepseek",
        &["DEEPSEEK_API_KEY"],
        "https://api.deepseek.com",
        "DEEPSEEK_BASE_URL",
        &[
            ("", Api::OpenAi),
            ("/v1", Api::OpenAi),
            ("/beta", Api::OpenAi),
            ("/anthropic", Api::Anthropic),
        ],
    ),
    // Per-resource: https://<resource>.openai.azure.com/openai/v1. The Azure SDK sends
    // `api-key`; pi's one Azure chat-completions model goes through the plain OpenAI SDK (Bearer).
    ProviderRoute {
        id: "azure",
        key_vars: &["AZURE_OPENAI_API_KEY"],
        default_origin: "",
        auth: &[AuthScheme::Header("api-key"), AuthScheme::Bearer],
        base_url_var: "AZURE_OPENAI_BASE_URL",
        token_shape: TokenShape::Plain,
        // Below the resource's base path, or with it when the model's base URL names it.
        apis: &[("", Api::OpenAi), ("/openai/v1", Api::OpenAi)],
        resource: Some(ResourceOrigin {
            name_var: "AZURE_OPENAI_RESOURCE_NAME",
            host_suffix: ".openai.azure.com",
            service_hosts: &[
                ".openai.azure.com",
                ".cognitiveservices.azure.com",
                ".ai.azure.com",
            ],
            bare_paths: &["", "/openai", "/openai/v1/responses"],
            api_path: "/openai/v1",
        }),
    },
    // Anthropic-API models at /inference, OpenAI completions at /inference/v1.
    with_auth(
        bearer(
            "fireworks",
            &["FIREWORKS_API_KEY"],
            "https://api.fireworks.ai",
            "FIREWORKS_BASE_URL",
            &[
                ("/inference/v1", Api::OpenAi),
                ("/inference", Api::Anthropic),
            ],
        ),
        &[X_API_KEY, AuthScheme::Bearer],
    ),
    bearer(
        "together",
        &["TOGETHER_API_KEY"],
        "https://api.together.ai",
        "TOGETHER_BASE_URL",
        OPENAI_V1,
    ),
    // OpenAI (/inference/v1), Anthropic (/inference) and Gemini (/inference/v1) APIs.
    with_auth(
        bearer(
            "opencode",
            &["OPENCODE_API_KEY"],
            "https://opencode.ai",
            "OPENCODE_BASE_URL",
            &[
                ("/inference/v1", Api::OpenAi),
                ("/inference", Api::Anthropic),
                ("/inference/v1", Api::Gemini),
            ],
        ),
        &[AuthScheme::Bearer, X_API_KEY, X_GOOG_API_KEY],
    ),
    // The same three APIs under /inference/go.
    with_auth(
        bearer(
            "opencode-go",
            &["OPENCODE_API_KEY"],
            "https://opencode.ai",
            "OPENCODE_GO_BASE_URL",
            &[
                ("/inference/go/v1", Api::OpenAi),
                ("/inference/go", Api::Anthropic),
                ("/inference/go/v1", Api::Gemini),
            ],
        ),
        &[AuthScheme::Bearer, X_API_KEY, X_GOOG_API_KEY],
    ),
    bearer(
        "zai",
        &["ZAI_API_KEY"],
        "https://api.z.ai",
        "ZAI_BASE_URL",
        ZAI,
    ),
    bearer(
        "zai-coding-cn",
        &["ZAI_CODING_CN_API_KEY"],
        "https://open.bigmodel.cn",
        "ZAI_CODING_CN_BASE_URL",
        ZAI,
    ),
    bearer(
        "moonshotai",
        &["MOONSHOT_API_KEY"],
        "https://api.moonshot.ai",
        "MOONSHOTAI_BASE_URL",
        OPENAI_V1_ANTHROPIC,
    ),
    bearer(
        "moonshotai-cn",
        &["MOONSHOT_API_KEY"],
        "https://api.moonshot.cn",
        "MOONSHOTAI_CN_BASE_URL",
        OPENAI_V1_ANTHROPIC,
    ),
    // Anthropic-API only (/anthropic).
    with_auth(
        bearer(
            "minimax",
            &["MINIMAX_API_KEY"],
            "https://api.minimax.io",
            "MINIMAX_BASE_URL",
            OPENAI_V1_ANTHROPIC,
        ),
        &[X_API_KEY],
    ),
    with_auth(
        bearer(
            "minimax-cn",
            &["MINIMAX_CN_API_KEY"],
            "https://api.minimaxi.com",
            "MINIMAX_CN_BASE_URL",
            OPENAI_V1_ANTHROPIC,
        ),
        &[X_API_KEY],
    ),
    bearer(
        "nvidia",
        &["NVIDIA_API_KEY"],
        "https://integrate.api.nvidia.com",
        "NVIDIA_BASE_URL",
        OPENAI_V1,
    ),
    // Anthropic-API chat models at /, TypeSafe classifiers (Bearer) at /typesafe/v1.
    with_auth(
        bearer(
            "vercel-ai-gateway",
            &["AI_GATEWAY_API_KEY"],
            "https://ai-gateway.vercel.sh",
            "VERCEL_AI_GATEWAY_BASE_URL",
            &[
                ("", Api::Anthropic),
                ("/v1", Api::OpenAi),
                ("/typesafe/v1", Api::Decisions),
            ],
        ),
        &[X_API_KEY, AuthScheme::Bearer],
    ),
    bearer(
        "huggingface",
        &["HF_TOKEN"],
        "https://router.huggingface.co",
        "HUGGINGFACE_BASE_URL",
        OPENAI_V1,
    ),
    bearer(
        "baseten",
        &["BASETEN_API_KEY"],
        "https://inference.baseten.co",
        "BASETEN_BASE_URL",
        OPENAI_V1,
    ),
    bearer(
        "ant-ling",
        &["ANT_LING_API_KEY"],
        "https://api.ant-ling.com",
        "ANT_LING_BASE_URL",
        OPENAI_V1,
    ),
    bearer(
        "kimi-coding",
        &["KIMI_API_KEY"],
        "https://api.kimi.com",
        "KIMI_CODING_BASE_URL",
        &[("/coding/v1", Api::OpenAi), ("/coding", Api::Anthropic)],
    ),
    bearer(
        "meta",
        &["META_API_KEY"],
        "https://api.meta.ai",
        "META_BASE_URL",
        OPENAI_V1,
    ),
    bearer(
        "typesafe",
        &["TYPESAFE_API_KEY"],
        "https://api.typesafe.ai",
        "TYPESAFE_BASE_URL",
        &[("/v1", Api::Decisions)],
    ),
    bearer(
        "qwen-token-plan",
        &["QWEN_TOKEN_PLAN_API_KEY"],
        "https://token-plan.ap-southeast-1.maas.aliyuncs.com",
        "QWEN_TOKEN_PLAN_BASE_URL",
        QWEN,
    ),
    bearer(
        "qwen-token-plan-cn",
        &["QWEN_TOKEN_PLAN_CN_API_KEY"],
        "https://token-plan.cn-beijing.maas.aliyuncs.com",
        "QWEN_TOKEN_PLAN_CN_BASE_URL",
        QWEN,
    ),
    bearer(
        "qwen-token-plan-individual",
        &["QWEN_TOKEN_PLAN_API_KEY"],
        "https://token-plan.ap-southeast-1.maas.aliyuncs.com",
        "QWEN_TOKEN_PLAN_INDIVIDUAL_BASE_URL",
        QWEN,
    ),
    bearer(
        "xiaomi",
        &["XIAOMI_API_KEY"],
        "https://api.xiaomimimo.com",
        "XIAOMI_BASE_URL",
        OPENAI_V1_ANTHROPIC,
    ),
    bearer(
        "xiaomi-token-plan-ams",
        &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "https://token-plan-ams.xiaomimimo.com",
        "XIAOMI_TOKEN_PLAN_AMS_BASE_URL",
        OPENAI_V1_ANTHROPIC,
    ),
    bearer(
        "xiaomi-token-plan-cn",
        &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "https://token-plan-cn.xiaomimimo.com",
        "XIAOMI_TOKEN_PLAN_CN_BASE_URL",
        OPENAI_V1_ANTHROPIC,
    ),
    bearer(
        "xiaomi-token-plan-sgp",
        &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        "https://token-plan-sgp.xiaomimimo.com",
        "XIAOMI_TOKEN_PLAN_SGP_BASE_URL",
        OPENAI_V1_ANTHROPIC,
    ),
];

/// Every provider the broker can carry, in a stable order.
pub fn providers() -> &'static [ProviderRoute] {
    PROVIDERS
}

/// The route for pi's provider id (exact, case-sensitive, as pi spells ids).
pub fn find(id: &str) -> Option<&'static ProviderRoute> {
    PROVIDERS.iter().find(|r| r.id == id)
}

/// Which credentials on the host the broker cannot carry, so they must never reach a container:
/// AWS (Bedrock: SigV4 signing, per-region endpoints), Google Cloud (Vertex AI: Application
/// Default Credentials, per-location endpoints), Anthropic workload identity federation, and the
/// key variables of pi-ai providers outside [`providers`] (GitHub Copilot, Cloudflare, Radius).
/// pi's OAuth logins live in its `auth.json`, not in variables; static subscription tokens in
/// variables (`ANTHROPIC_OAUTH_TOKEN`) are carried. Returns (variable, reason) for the variables
/// set (non-empty) in `host_env`, sorted by variable.
pub fn withheld(host_env: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = WITHHELD
        .iter()
        .filter(|(name, _)| var(host_env, name).is_some())
        .map(|(name, reason)| (name.to_string(), reason.to_string()))
        .collect();
    out.sort();
    out
}

const AWS_SIGV4: &str = "AWS credentials for Amazon Bedrock: its requests are signed per request (SigV4) against per-region endpoints, which the broker cannot do";
const VERTEX_ADC: &str = "Google Vertex AI with Application Default Credentials: pi mints OAuth tokens from gcloud credential files against per-location endpoints, which the broker cannot carry";

/// Every variable [`withheld`] knows, with its reason.
const WITHHELD: &[(&str, &str)] = &[
    ("AWS_ACCESS_KEY_ID", AWS_SIGV4),
    ("AWS_SECRET_ACCESS_KEY", AWS_SIGV4),
    ("AWS_SESSION_TOKEN", AWS_SIGV4),
    (
        "AWS_PROFILE",
        "names an AWS profile (~/.aws) for Amazon Bedrock: SigV4-signed, per-region requests the broker cannot carry",
    ),
    (
        "AWS_BEARER_TOKEN_BEDROCK",
        "Amazon Bedrock API key: Bedrock's endpoint is per region (bedrock-runtime.<region>.amazonaws.com), the broker has no Bedrock route",
    ),
    (
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "ECS task-role credentials for Amazon Bedrock: SigV4-signed, per-region requests the broker cannot carry",
    ),
    (
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "ECS task-role credentials for Amazon Bedrock: SigV4-signed, per-region requests the broker cannot carry",
    ),
    (
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "ECS task-role credentials for Amazon Bedrock: SigV4-signed, per-region requests the broker cannot carry",
    ),
    (
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "web-identity (IRSA) credentials for Amazon Bedrock: SigV4-signed, per-region requests the broker cannot carry",
    ),
    ("GOOGLE_APPLICATION_CREDENTIALS", VERTEX_ADC),
    ("GOOGLE_CLOUD_PROJECT", VERTEX_ADC),
    ("GCLOUD_PROJECT", VERTEX_ADC),
    ("GOOGLE_CLOUD_LOCATION", VERTEX_ADC),
    (
        "GOOGLE_CLOUD_API_KEY",
        "Google Vertex AI API key: Vertex's endpoint depends on the location ({location}-aiplatform.googleapis.com), the broker has no Vertex route (Gemini API keys in GEMINI_API_KEY are carried)",
    ),
    (
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
        "Anthropic workload identity federation: the SDK exchanges this identity token for short-lived access tokens, which the broker does not do",
    ),
    (
        "ANTHROPIC_FEDERATION_RULE_ID",
        "Anthropic workload identity federation: the SDK exchanges an identity token for short-lived access tokens, which the broker does not do",
    ),
    (
        "COPILOT_GITHUB_TOKEN",
        "GitHub Copilot subscription token: Copilot's API host depends on the account's plan and the token is a GitHub login, the broker has no Copilot route",
    ),
    (
        "CLOUDFLARE_API_KEY",
        "Cloudflare API token (Workers AI, AI Gateway): it is valid for the whole Cloudflare API and its URLs are per account, the broker has no Cloudflare route",
    ),
    (
        "RADIUS_API_KEY",
        "Radius: its gateway hands out the models' base URL at run time (/v1/config), so there is no fixed upstream to route to",
    ),
];

/// Where a provider's real key is on this host: the first set (non-empty) variable of
/// [`ProviderRoute::key_vars`], as pi would pick it.
pub fn host_key<'a>(
    route: &ProviderRoute,
    host_env: &'a HashMap<String, String>,
) -> Option<(&'static str, &'a str)> {
    route
        .key_vars
        .iter()
        .find_map(|name| var_raw(host_env, name).map(|value| (*name, value)))
}

/// A fresh per-grant token in the provider's shape: the shape's prefix for `real_key`, then 32
/// random bytes as hex (256 bits). An Anthropic `sk-ant-oat…` key gets an `sk-ant-oat01-` token,
/// any other Anthropic key one that does not contain `sk-ant-oat`.
pub fn mint_token(route: &ProviderRoute, real_key: &str) -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        let doing = format!("no randomness for a {} broker token", route.id);
        Error::container_caused("", doing, e)
    })?;
    Ok(format!(
        "{}{}",
        route.token_shape.prefix(real_key),
        hex::encode(bytes)
    ))
}

/// Splits a request path `/<provider>/<rest>` into the route and the rest, which keeps its
/// leading `/` (`""` becomes `"/"`) and any query. `None` for an unknown provider, a path
/// without a provider segment, a query right after the provider (`/openai?x`), or a rest with a
/// `.`/`..` segment (plain or percent-encoded), which could climb out of an upstream's prefix.
pub fn route_path(path: &str) -> Option<(&'static ProviderRoute, &str)> {
    let after = path.strip_prefix('/')?;
    let (id, rest) = match after.find('/') {
        Some(i) => after.split_at(i),
        None => (after, ""),
    };
    let route = find(id)?;
    let rest = if rest.is_empty() { "/" } else { rest };
    let path_part = rest.split(['?', '#']).next().unwrap_or_default();
    let climbs = path_part.split('/').any(|seg| {
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        seg == "." || seg == ".."
    });
    (!climbs).then_some((route, rest))
}

/// A variable's value, trimmed; blank counts as unset.
fn var<'a>(env: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// A variable's value as is; empty counts as unset (pi's `env[name] || …`).
fn var_raw<'a>(env: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    env.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests;
