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
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};

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
) -> ProviderRoute {
    ProviderRoute {
        id,
        key_vars: key_var,
        default_origin,
        auth: BEARER,
        base_url_var,
        token_shape: TokenShape::Plain,
        resource: None,
    }
}

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
        )
    },
    with_auth(
        bearer(
            "google",
            &["GEMINI_API_KEY"],
            "https://generativelanguage.googleapis.com",
            "GOOGLE_BASE_URL",
        ),
        &[X_GOOG_API_KEY],
    ),
    bearer(
        "mistral",
        &["MISTRAL_API_KEY"],
        "https://api.mistral.ai",
        "MISTRAL_BASE_URL",
    ),
    bearer(
        "groq",
        &["GROQ_API_KEY"],
        "https://api.groq.com",
        "GROQ_BASE_URL",
    ),
    bearer(
        "cerebras",
        &["CEREBRAS_API_KEY"],
        "https://api.cerebras.ai",
        "CEREBRAS_BASE_URL",
    ),
    bearer("xai", &["XAI_API_KEY"], "https://api.x.ai", "XAI_BASE_URL"),
    // Chat models at /api/v1 (OpenAI completions), Anthropic-API models at /api.
    with_auth(
        bearer(
            "openrouter",
            &["OPENROUTER_API_KEY"],
            "https://openrouter.ai",
            "OPENROUTER_BASE_URL",
        ),
        &[AuthScheme::Bearer, X_API_KEY],
    ),
    bearer(
        "deepseek",
        &["DEEPSEEK_API_KEY"],
        "https://api.deepseek.com",
        "DEEPSEEK_BASE_URL",
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
        ),
        &[X_API_KEY, AuthScheme::Bearer],
    ),
    bearer(
        "together",
        &["TOGETHER_API_KEY"],
        "https://api.together.ai",
        "TOGETHER_BASE_URL",
    ),
    // OpenAI (/inference/v1), Anthropic (/inference) and Gemini (/inference/v1) APIs.
    with_auth(
        bearer(
            "opencode",
            &["OPENCODE_API_KEY"],
            "https://opencode.ai",
            "OPENCODE_BASE_URL",
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
        ),
        &[AuthScheme::Bearer, X_API_KEY, X_GOOG_API_KEY],
    ),
    bearer("zai", &["ZAI_API_KEY"], "https://api.z.ai", "ZAI_BASE_URL"),
    bearer(
        "zai-coding-cn",
        &["ZAI_CODING_CN_API_KEY"],
        "https://open.bigmodel.cn",
        "ZAI_CODING_CN_BASE_URL",
    ),
    bearer(
        "moonshotai",
        &["MOONSHOT_API_KEY"],
        "https://api.moonshot.ai",
        "MOONSHOTAI_BASE_URL",
    ),
    bearer(
        "moonshotai-cn",
        &["MOONSHOT_API_KEY"],
        "https://api.moonshot.cn",
        "MOONSHOTAI_CN_BASE_URL",
    ),
    // Anthropic-API only (/anthropic).
    with_auth(
        bearer(
            "minimax",
            &["MINIMAX_API_KEY"],
            "https://api.minimax.io",
            "MINIMAX_BASE_URL",
        ),
        &[X_API_KEY],
    ),
    with_auth(
        bearer(
            "minimax-cn",
            &["MINIMAX_CN_API_KEY"],
            "https://api.minimaxi.com",
            "MINIMAX_CN_BASE_URL",
        ),
        &[X_API_KEY],
    ),
    bearer(
        "nvidia",
        &["NVIDIA_API_KEY"],
        "https://integrate.api.nvidia.com",
        "NVIDIA_BASE_URL",
    ),
    // Anthropic-API chat models at /, TypeSafe classifiers (Bearer) at /typesafe/v1.
    with_auth(
        bearer(
            "vercel-ai-gateway",
            &["AI_GATEWAY_API_KEY"],
            "https://ai-gateway.vercel.sh",
            "VERCEL_AI_GATEWAY_BASE_URL",
        ),
        &[X_API_KEY, AuthScheme::Bearer],
    ),
    bearer(
        "huggingface",
        &["HF_TOKEN"],
        "https://router.huggingface.co",
        "HUGGINGFACE_BASE_URL",
    ),
    bearer(
        "baseten",
        &["BASETEN_API_KEY"],
        "https://inference.baseten.co",
        "BASETEN_BASE_URL",
    ),
    bearer(
        "ant-ling",
        &["ANT_LING_API_KEY"],
        "https://api.ant-ling.com",
        "ANT_LING_BASE_URL",
    ),
    bearer(
        "kimi-coding",
        &["KIMI_API_KEY"],
        "https://api.kimi.com",
        "KIMI_CODING_BASE_URL",
    ),
    bearer(
        "meta",
        &["META_API_KEY"],
        "https://api.meta.ai",
        "META_BASE_URL",
    ),
    bearer(
        "typesafe",
        &["TYPESAFE_API_KEY"],
        "https://api.typesafe.ai",
        "TYPESAFE_BASE_URL",
    ),
    bearer(
        "qwen-token-plan",
        &["QWEN_TOKEN_PLAN_API_KEY"],
        "https://token-plan.ap-southeast-1.maas.aliyuncs.com",
        "QWEN_TOKEN_PLAN_BASE_URL",
    ),
    bearer(
        "qwen-token-plan-cn",
        &["QWEN_TOKEN_PLAN_CN_API_KEY"],
        "https://token-plan.cn-beijing.maas.aliyuncs.com",
        "QWEN_TOKEN_PLAN_CN_BASE_URL",
    ),
    bearer(
        "qwen-token-plan-individual",
        &["QWEN_TOKEN_PLAN_API_KEY"],
        "https://token-plan.ap-southeast-1.maas.aliyuncs.com",
        "QWEN_TOKEN_PLAN_INDIVIDUAL_BASE_URL",
    ),
    bearer(
        "xiaomi",
        &["XIAOMI_API_KEY"],
        "https://api.xiaomimimo.com",
        "XIAOMI_BASE_URL",
    ),
    bearer(
        "xiaomi-token-plan-ams",
        &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "https://token-plan-ams.xiaomimimo.com",
        "XIAOMI_TOKEN_PLAN_AMS_BASE_URL",
    ),
    bearer(
        "xiaomi-token-plan-cn",
        &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "https://token-plan-cn.xiaomimimo.com",
        "XIAOMI_TOKEN_PLAN_CN_BASE_URL",
    ),
    bearer(
        "xiaomi-token-plan-sgp",
        &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        "https://token-plan-sgp.xiaomimimo.com",
        "XIAOMI_TOKEN_PLAN_SGP_BASE_URL",
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

/// An upstream URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port a URL of this scheme means when it names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Where the broker sends one provider's requests on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// `https`, or `http` for a loopback host.
    pub scheme: Scheme,
    /// Lower-case host name or IP address (IPv6 without brackets).
    pub host: String,
    /// The TCP port (the scheme's default when the URL named none).
    pub port: u16,
    /// Put before every request path: `""` or `/v1`-style, no trailing slash.
    pub path_prefix: String,
}

impl Upstream {
    /// `host[:port]` as the `Host` header must read: IPv6 in brackets, the default port omitted.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.scheme.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// `scheme://authority`, for logs and TLS set-up.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme.as_str(), self.authority())
    }

    /// The upstream request target for `rest` (a path from [`route_path`], starting `/`).
    pub fn target(&self, rest: &str) -> String {
        format!("{}{rest}", self.path_prefix)
    }
}

/// The upstream origin for a provider on this host: the default, or the host's base URL variable
/// when set (Azure: the base URL variable, else the resource name variable). The override must
/// be an absolute URL with scheme https, or http only when its host is loopback (127.0.0.0/8,
/// ::1, localhost); its path (if any) is kept as a prefix; user info, query and fragment are
/// refused, so is a `.`/`..` path segment. Empty or blank variables count as unset.
pub fn upstream(route: &ProviderRoute, host_env: &HashMap<String, String>) -> Result<Upstream> {
    if let Some(value) = var(host_env, route.base_url_var) {
        let mut up = parse_url(route.base_url_var, value)?;
        if let Some(res) = &route.resource {
            let on_service = res.service_hosts.iter().any(|s| up.host.ends_with(s));
            if on_service && res.bare_paths.contains(&up.path_prefix.as_str()) {
                up.path_prefix = res.api_path.to_string();
            }
        }
        return Ok(up);
    }
    if let Some(res) = &route.resource {
        if let Some(name) = var(host_env, res.name_var) {
            if !is_dns_label(name) {
                return Err(invalid(
                    res.name_var,
                    "must be a resource name: 1 to 63 letters, digits or '-', not starting or ending with '-'",
                ));
            }
            return Ok(Upstream {
                scheme: Scheme::Https,
                host: format!("{}{}", name.to_ascii_lowercase(), res.host_suffix),
                port: Scheme::Https.default_port(),
                path_prefix: res.api_path.to_string(),
            });
        }
        return Err(invalid(
            route.base_url_var,
            &format!(
                "{} has no public default upstream: set {} (https://<resource>{}) or {}",
                route.id, route.base_url_var, res.host_suffix, res.name_var
            ),
        ));
    }
    parse_url(route.base_url_var, route.default_origin)
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
    getrandom::fill(&mut bytes).map_err(|e| Error::ContainerFailed {
        workspace: String::new(),
        reason: format!("no randomness for a {} broker token: {e}", route.id),
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

fn invalid(option: &str, reason: &str) -> Error {
    Error::OptionsInvalid {
        option: option.to_string(),
        reason: reason.to_string(),
    }
}

const LOOPBACK_RULE: &str = "127.0.0.0/8, ::1 or localhost";

/// Parses an upstream URL by the rules of [`upstream`]. Never echoes the value whole: it may
/// carry a password.
fn parse_url(option: &str, value: &str) -> Result<Upstream> {
    let bad = |reason: String| invalid(option, &reason);
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("must not contain spaces or control characters".into()));
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Err(bad(
            "must be an absolute URL such as https://host[:port][/path]".into(),
        ));
    };
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => {
            return Err(bad(format!(
                "must use https (http only for a loopback host: {LOOPBACK_RULE}); got scheme '{other}'"
            )));
        }
    };
    if rest.contains('#') {
        return Err(bad("must not carry a fragment (#…)".into()));
    }
    if rest.contains('?') {
        return Err(bad("must not carry a query (?…)".into()));
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(bad(
            "must not carry user info (user:password@); the key comes from the provider's key variable".into(),
        ));
    }
    let (host, port) = split_host_port(authority).ok_or_else(|| {
        bad("must name a valid host: a DNS name, an IPv4 address or an IPv6 address in brackets, with an optional port 1-65535".into())
    })?;
    if scheme == Scheme::Http && !is_loopback(&host) {
        return Err(bad(format!(
            "must use https: http is allowed only for a loopback host ({LOOPBACK_RULE}), not '{host}'"
        )));
    }
    if path.contains('\\') || !path.is_ascii() {
        return Err(bad(
            "path must be ASCII without backslashes (percent-encode anything else)".into(),
        ));
    }
    let path = path.trim_end_matches('/');
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(bad("path must not contain '.' or '..' segments".into()));
    }
    Ok(Upstream {
        port: port.unwrap_or(scheme.default_port()),
        scheme,
        host,
        path_prefix: path.to_string(),
    })
}

/// `host[:port]` → (lower-case host, IPv6 unbracketed; port). `None` when either is invalid.
pub(crate) fn split_host_port(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (v6, after) = inner.split_once(']')?;
        let ip: Ipv6Addr = v6.parse().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (ip.to_string(), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        let host = host.to_ascii_lowercase();
        if !is_host_name(&host) {
            return None;
        }
        (host, port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok().filter(|&n| n != 0)?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

/// A DNS name or dotted IPv4 address (lower case).
fn is_host_name(host: &str) -> bool {
    if host.is_empty() || host.len() > 253 {
        return false;
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return host.parse::<Ipv4Addr>().is_ok();
    }
    host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// One DNS label: what an Azure resource name must be.
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// 127.0.0.0/8, ::1 or `localhost` (host already lower case, IPv6 unbracketed).
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
        || host.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn route(id: &str) -> &'static ProviderRoute {
        find(id).unwrap_or_else(|| panic!("no route {id}"))
    }

    fn reason_of(err: Error) -> (String, String) {
        match err {
            Error::OptionsInvalid { option, reason } => (option, reason),
            other => panic!("expected OptionsInvalid, got {other:?}"),
        }
    }

    fn override_err(id: &str, value: &str) -> String {
        let r = route(id);
        let (option, reason) =
            reason_of(upstream(r, &env(&[(r.base_url_var, value)])).unwrap_err());
        assert_eq!(option, r.base_url_var);
        reason
    }

    /// pi-ai 1.3.0 `getApiKeyEnvVars` / `envMap`, plus the ambient credentials
    /// `getEnvApiKey` checks (Bedrock, Vertex).
    const PI_AI_KEY_VARS: &[&str] = &[
        "COPILOT_GITHUB_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_OAUTH_TOKEN",
        "ANTHROPIC_API_KEY",
        "ANT_LING_API_KEY",
        "QWEN_TOKEN_PLAN_API_KEY",
        "QWEN_TOKEN_PLAN_CN_API_KEY",
        "OPENAI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "NVIDIA_API_KEY",
        "DEEPSEEK_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_CLOUD_API_KEY",
        "GROQ_API_KEY",
        "CEREBRAS_API_KEY",
        "XAI_API_KEY",
        "TYPESAFE_API_KEY",
        "RADIUS_API_KEY",
        "OPENROUTER_API_KEY",
        "AI_GATEWAY_API_KEY",
        "ZAI_API_KEY",
        "ZAI_CODING_CN_API_KEY",
        "MISTRAL_API_KEY",
        "MINIMAX_API_KEY",
        "MINIMAX_CN_API_KEY",
        "MOONSHOT_API_KEY",
        "HF_TOKEN",
        "FIREWORKS_API_KEY",
        "TOGETHER_API_KEY",
        "BASETEN_API_KEY",
        "OPENCODE_API_KEY",
        "KIMI_API_KEY",
        "META_API_KEY",
        "CLOUDFLARE_API_KEY",
        "XIAOMI_API_KEY",
        "XIAOMI_TOKEN_PLAN_CN_API_KEY",
        "XIAOMI_TOKEN_PLAN_AMS_API_KEY",
        "XIAOMI_TOKEN_PLAN_SGP_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ];

    fn carried_vars() -> Vec<&'static str> {
        providers()
            .iter()
            .flat_map(|r| r.key_vars.iter().copied())
            .collect()
    }

    // --- the table ---

    #[test]
    fn ids_are_distinct_and_findable() {
        let mut ids: Vec<&str> = providers().iter().map(|r| r.id).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate provider ids");
        for r in providers() {
            assert!(std::ptr::eq(find(r.id).unwrap(), r));
        }
        assert!(find("Anthropic").is_none());
        assert!(find("").is_none());
        assert!(find("amazon-bedrock").is_none());
    }

    #[test]
    fn covers_the_required_providers() {
        for id in [
            "anthropic",
            "openai",
            "google",
            "mistral",
            "groq",
            "cerebras",
            "xai",
            "openrouter",
            "deepseek",
            "azure",
            "fireworks",
            "together",
            "opencode",
            "zai",
            "moonshotai",
            "minimax",
            "nvidia",
            "vercel-ai-gateway",
        ] {
            assert!(find(id).is_some(), "{id} missing");
        }
    }

    #[test]
    fn uncarried_pi_providers_are_absent() {
        for id in [
            "amazon-bedrock",
            "google-vertex",
            "github-copilot",
            "openai-codex",
            "cloudflare-workers-ai",
            "cloudflare-ai-gateway",
            "radius",
            "faux",
        ] {
            assert!(find(id).is_none(), "{id} should not be carried");
        }
    }

    #[test]
    fn every_route_has_key_vars_auth_and_a_base_url_var() {
        for r in providers() {
            assert!(!r.key_vars.is_empty(), "{}", r.id);
            assert!(r.key_vars.iter().all(|v| !v.is_empty()), "{}", r.id);
            assert!(!r.auth.is_empty(), "{}", r.id);
            assert!(r.base_url_var.ends_with("_BASE_URL"), "{}", r.id);
        }
    }

    #[test]
    fn base_url_vars_follow_the_id_and_are_distinct() {
        let mut seen = Vec::new();
        for r in providers() {
            let derived = format!("{}_BASE_URL", r.id.to_ascii_uppercase().replace('-', "_"));
            if r.id == "azure" {
                // pi-ai's own variable, which it reads itself.
                assert_eq!(r.base_url_var, "AZURE_OPENAI_BASE_URL");
            } else {
                assert_eq!(r.base_url_var, derived);
            }
            assert!(!seen.contains(&r.base_url_var));
            seen.push(r.base_url_var);
        }
    }

    #[test]
    fn default_origins_are_https_without_path() {
        for r in providers() {
            if r.resource.is_some() {
                // Azure OpenAI lives on the customer's own resource host: no public default.
                assert_eq!(r.default_origin, "", "{}", r.id);
                continue;
            }
            assert!(r.default_origin.starts_with("https://"), "{}", r.id);
            let up = upstream(r, &HashMap::new()).unwrap();
            assert_eq!(up.scheme, Scheme::Https, "{}", r.id);
            assert_eq!(up.port, 443, "{}", r.id);
            assert_eq!(up.path_prefix, "", "{}", r.id);
            assert_eq!(up.origin(), r.default_origin, "{}", r.id);
        }
    }

    #[test]
    fn only_azure_is_per_resource() {
        let per_resource: Vec<&str> = providers()
            .iter()
            .filter(|r| r.resource.is_some())
            .map(|r| r.id)
            .collect();
        assert_eq!(per_resource, ["azure"]);
    }

    #[test]
    fn auth_headers_of_the_main_providers() {
        assert_eq!(
            route("anthropic").auth,
            [AuthScheme::Header("x-api-key"), AuthScheme::Bearer]
        );
        assert_eq!(route("openai").auth, [AuthScheme::Bearer]);
        assert_eq!(route("google").auth, [AuthScheme::Header("x-goog-api-key")]);
        assert_eq!(
            route("azure").auth,
            [AuthScheme::Header("api-key"), AuthScheme::Bearer]
        );
        assert_eq!(
            route("openrouter").auth,
            [AuthScheme::Bearer, AuthScheme::Header("x-api-key")]
        );
        assert_eq!(route("minimax").auth, [AuthScheme::Header("x-api-key")]);
        assert_eq!(route("mistral").auth, [AuthScheme::Bearer]);
    }

    #[test]
    fn header_names_are_lower_case_and_not_repeated() {
        for r in providers() {
            let mut names: Vec<&str> = r.auth.iter().map(|a| a.header()).collect();
            for n in &names {
                assert_eq!(*n, n.to_ascii_lowercase(), "{}", r.id);
            }
            let len = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), len, "{}", r.id);
        }
    }

    #[test]
    fn key_vars_follow_pi_ai() {
        assert_eq!(
            route("anthropic").key_vars,
            [
                "ANTHROPIC_AUTH_TOKEN",
                "ANTHROPIC_OAUTH_TOKEN",
                "ANTHROPIC_API_KEY"
            ]
        );
        assert_eq!(route("openai").key_vars, ["OPENAI_API_KEY"]);
        assert_eq!(route("google").key_vars, ["GEMINI_API_KEY"]);
        assert_eq!(route("azure").key_vars, ["AZURE_OPENAI_API_KEY"]);
        assert_eq!(route("vercel-ai-gateway").key_vars, ["AI_GATEWAY_API_KEY"]);
        assert_eq!(route("huggingface").key_vars, ["HF_TOKEN"]);
        for v in carried_vars() {
            assert!(
                PI_AI_KEY_VARS.contains(&v),
                "{v} is not a pi-ai key variable"
            );
        }
    }

    #[test]
    fn routes_sharing_a_key_var_take_the_same_token() {
        for a in providers() {
            for b in providers() {
                if a.id < b.id && a.key_vars.iter().any(|v| b.key_vars.contains(v)) {
                    assert_eq!(a.token_shape, b.token_shape, "{} / {}", a.id, b.id);
                }
            }
        }
        let sharing = |var: &str| -> Vec<&str> {
            providers()
                .iter()
                .filter(|r| r.key_vars.contains(&var))
                .map(|r| r.id)
                .collect()
        };
        assert_eq!(sharing("MOONSHOT_API_KEY"), ["moonshotai", "moonshotai-cn"]);
        assert_eq!(sharing("OPENCODE_API_KEY"), ["opencode", "opencode-go"]);
        assert_eq!(
            sharing("QWEN_TOKEN_PLAN_API_KEY"),
            ["qwen-token-plan", "qwen-token-plan-individual"]
        );
    }

    #[test]
    fn every_pi_ai_credential_is_carried_or_withheld() {
        let carried = carried_vars();
        let held: Vec<&str> = WITHHELD.iter().map(|(v, _)| *v).collect();
        for v in PI_AI_KEY_VARS {
            assert!(
                carried.contains(v) != held.contains(v),
                "{v} must be exactly one of carried or withheld"
            );
        }
    }

    // --- AuthScheme ---

    #[test]
    fn auth_scheme_encodes_and_decodes() {
        assert_eq!(AuthScheme::Bearer.header(), "authorization");
        assert_eq!(AuthScheme::Bearer.encode("k1"), "Bearer k1");
        assert_eq!(AuthScheme::Bearer.decode("Bearer k1"), Some("k1"));
        assert_eq!(AuthScheme::Bearer.decode("bearer  k1 "), Some("k1"));
        assert_eq!(AuthScheme::Bearer.decode("Basic k1"), None);
        assert_eq!(AuthScheme::Bearer.decode("k1"), None);
        assert_eq!(AuthScheme::Bearer.decode("Bearer "), None);
        assert_eq!(AuthScheme::Bearer.decode("Bearer a b"), None);
        let h = AuthScheme::Header("x-api-key");
        assert_eq!(h.header(), "x-api-key");
        assert_eq!(h.encode("k1"), "k1");
        assert_eq!(h.decode(" k1 "), Some("k1"));
        assert_eq!(h.decode(""), None);
        assert_eq!(h.decode("a b"), None);
    }

    // --- upstream ---

    #[test]
    fn upstream_without_override_is_the_default() {
        let up = upstream(
            route("anthropic"),
            &env(&[("OPENAI_BASE_URL", "https://x.test")]),
        )
        .unwrap();
        assert_eq!(
            up,
            Upstream {
                scheme: Scheme::Https,
                host: "api.anthropic.com".into(),
                port: 443,
                path_prefix: String::new(),
            }
        );
        assert_eq!(up.authority(), "api.anthropic.com");
        assert_eq!(up.target("/v1/messages"), "/v1/messages");
    }

    #[test]
    fn blank_override_counts_as_unset() {
        for v in ["", "   "] {
            let up = upstream(route("openai"), &env(&[("OPENAI_BASE_URL", v)])).unwrap();
            assert_eq!(up.host, "api.openai.com");
        }
    }

    #[test]
    fn https_override_keeps_its_path_as_prefix() {
        let up = upstream(
            route("anthropic"),
            &env(&[(
                "ANTHROPIC_BASE_URL",
                " HTTPS://Gateway.Example.com:8443/anthropic/ ",
            )]),
        )
        .unwrap();
        assert_eq!(up.scheme, Scheme::Https);
        assert_eq!(up.host, "gateway.example.com");
        assert_eq!(up.port, 8443);
        assert_eq!(up.path_prefix, "/anthropic");
        assert_eq!(up.authority(), "gateway.example.com:8443");
        assert_eq!(up.origin(), "https://gateway.example.com:8443");
        assert_eq!(up.target("/v1/messages"), "/anthropic/v1/messages");

        let up = upstream(
            route("openrouter"),
            &env(&[("OPENROUTER_BASE_URL", "https://eu.openrouter.ai")]),
        )
        .unwrap();
        assert_eq!(up.path_prefix, "");
        assert_eq!(up.authority(), "eu.openrouter.ai");
        let up = upstream(
            route("openai"),
            &env(&[("OPENAI_BASE_URL", "https://h.test:443/")]),
        )
        .unwrap();
        assert_eq!((up.port, up.path_prefix.as_str()), (443, ""));
        assert_eq!(up.authority(), "h.test");
    }

    #[test]
    fn http_override_allowed_for_loopback() {
        let cases = [
            (
                "http://127.0.0.1:4000/v1",
                "127.0.0.1",
                4000,
                "127.0.0.1:4000",
                "/v1",
            ),
            ("http://127.8.9.10", "127.8.9.10", 80, "127.8.9.10", ""),
            (
                "http://localhost:11434",
                "localhost",
                11434,
                "localhost:11434",
                "",
            ),
            ("http://LOCALHOST/", "localhost", 80, "localhost", ""),
            ("http://[::1]:8080/api", "::1", 8080, "[::1]:8080", "/api"),
            ("http://[0:0:0:0:0:0:0:1]", "::1", 80, "[::1]", ""),
        ];
        for (url, host, port, authority, prefix) in cases {
            let up = upstream(route("openai"), &env(&[("OPENAI_BASE_URL", url)])).unwrap();
            assert_eq!(up.scheme, Scheme::Http, "{url}");
            assert_eq!(up.host, host, "{url}");
            assert_eq!(up.port, port, "{url}");
            assert_eq!(up.authority(), authority, "{url}");
            assert_eq!(up.path_prefix, prefix, "{url}");
        }
    }

    #[test]
    fn ipv6_https_override_is_bracketed() {
        let up = upstream(
            route("openai"),
            &env(&[("OPENAI_BASE_URL", "https://[2001:db8::1]:8443")]),
        )
        .unwrap();
        assert_eq!(up.host, "2001:db8::1");
        assert_eq!(up.authority(), "[2001:db8::1]:8443");
        let up = upstream(
            route("openai"),
            &env(&[("OPENAI_BASE_URL", "https://[2001:db8::1]")]),
        )
        .unwrap();
        assert_eq!(up.authority(), "[2001:db8::1]");
    }

    #[test]
    fn http_override_refused_off_loopback() {
        for url in [
            "http://example.com",
            "http://10.0.0.1:8080",
            "http://[2001:db8::1]",
            "http://localhost.example.com",
            "http://128.0.0.1",
        ] {
            let reason = override_err("openai", url);
            assert!(reason.contains("loopback"), "{url}: {reason}");
        }
    }

    #[test]
    fn override_refuses_other_schemes_and_relative_urls() {
        assert!(override_err("openai", "ftp://example.com").contains("scheme 'ftp'"));
        assert!(override_err("openai", "ws://localhost").contains("https"));
        for url in [
            "example.com/v1",
            "/v1",
            "//example.com",
            "https:example.com",
        ] {
            assert!(
                override_err("openai", url).contains("absolute URL"),
                "{url}"
            );
        }
    }

    #[test]
    fn override_refuses_userinfo_query_and_fragment() {
        let reason = override_err("openai", "https://user:secret@example.com/v1");
        assert!(reason.contains("user info"));
        assert!(
            !reason.contains("secret"),
            "the password must not be echoed"
        );
        assert!(override_err("openai", "https://example.com/v1?key=1").contains("query"));
        assert!(override_err("openai", "https://example.com?x").contains("query"));
        assert!(override_err("openai", "https://example.com/v1#frag").contains("fragment"));
    }

    #[test]
    fn override_refuses_bad_hosts_ports_and_paths() {
        for url in [
            "https://",
            "https:///v1",
            "https://exa mple.com",
            "https://-bad.example",
            "https://a..b",
            "https://host:",
            "https://host:0",
            "https://host:65536",
            "https://host:12x",
            "https://[::1",
            "https://[fe80::1%25eth0]",
            "https://[::1]x",
            "https://999.1.1.1",
            "http://127.1",
            "https://ex\u{e4}mple.com",
        ] {
            assert!(
                upstream(route("openai"), &env(&[("OPENAI_BASE_URL", url)])).is_err(),
                "{url}"
            );
        }
        assert!(override_err("openai", "https://h.test/a/../b").contains("'..'"));
        assert!(override_err("openai", "https://h.test/./b").contains("'..'"));
        assert!(override_err("openai", "https://h.test/a\\b").contains("backslash"));
    }

    #[test]
    fn azure_needs_a_base_url_or_resource_name() {
        let (option, reason) = reason_of(upstream(route("azure"), &HashMap::new()).unwrap_err());
        assert_eq!(option, "AZURE_OPENAI_BASE_URL");
        assert!(reason.contains("AZURE_OPENAI_RESOURCE_NAME"));
    }

    #[test]
    fn azure_resource_name_makes_the_upstream() {
        let up = upstream(
            route("azure"),
            &env(&[("AZURE_OPENAI_RESOURCE_NAME", "My-Res")]),
        )
        .unwrap();
        assert_eq!(up.origin(), "https://my-res.openai.azure.com");
        assert_eq!(up.path_prefix, "/openai/v1");
        let long = "a".repeat(64);
        for bad in ["-x", "x-", "a.b", "a/b", long.as_str()] {
            let (option, _) = reason_of(
                upstream(route("azure"), &env(&[("AZURE_OPENAI_RESOURCE_NAME", bad)])).unwrap_err(),
            );
            assert_eq!(option, "AZURE_OPENAI_RESOURCE_NAME", "{bad}");
        }
    }

    #[test]
    fn azure_base_url_wins_and_bare_service_urls_get_the_api_path() {
        let both = env(&[
            ("AZURE_OPENAI_RESOURCE_NAME", "ignored"),
            ("AZURE_OPENAI_BASE_URL", "https://res.openai.azure.com/"),
        ]);
        let up = upstream(route("azure"), &both).unwrap();
        assert_eq!(up.host, "res.openai.azure.com");
        assert_eq!(up.path_prefix, "/openai/v1");
        for (url, prefix) in [
            ("https://res.openai.azure.com/openai", "/openai/v1"),
            (
                "https://res.openai.azure.com/openai/v1/responses",
                "/openai/v1",
            ),
            ("https://res.cognitiveservices.azure.com", "/openai/v1"),
            ("https://res.services.ai.azure.com", "/openai/v1"),
            ("https://res.openai.azure.com/openai/v1", "/openai/v1"),
            ("https://res.openai.azure.com/custom", "/custom"),
            ("https://proxy.example.com", ""),
            ("http://127.0.0.1:9000/azure", "/azure"),
        ] {
            let up = upstream(route("azure"), &env(&[("AZURE_OPENAI_BASE_URL", url)])).unwrap();
            assert_eq!(up.path_prefix, prefix, "{url}");
        }
        // The bare-path rewrite is Azure's alone.
        let up = upstream(
            route("openai"),
            &env(&[("OPENAI_BASE_URL", "https://res.openai.azure.com")]),
        )
        .unwrap();
        assert_eq!(up.path_prefix, "");
    }

    // --- withheld ---

    #[test]
    fn withheld_lists_set_uncarriable_credentials_sorted_with_reasons() {
        let host = env(&[
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SESSION_TOKEN", "t"),
            ("AWS_PROFILE", "dev"),
            ("AWS_BEARER_TOKEN_BEDROCK", "b"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
            ("GOOGLE_CLOUD_PROJECT", "p"),
            ("GOOGLE_CLOUD_API_KEY", "g"),
            ("COPILOT_GITHUB_TOKEN", "gho_x"),
            ("CLOUDFLARE_API_KEY", "cf"),
            ("RADIUS_API_KEY", "r"),
            ("ANTHROPIC_IDENTITY_TOKEN_FILE", "/id"),
            ("ANTHROPIC_API_KEY", "sk-ant-api03-x"),
            ("OPENAI_API_KEY", "sk-x"),
            ("PATH", "/bin"),
        ]);
        let got = withheld(&host);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "ANTHROPIC_IDENTITY_TOKEN_FILE",
                "AWS_ACCESS_KEY_ID",
                "AWS_BEARER_TOKEN_BEDROCK",
                "AWS_PROFILE",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "CLOUDFLARE_API_KEY",
                "COPILOT_GITHUB_TOKEN",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "GOOGLE_CLOUD_API_KEY",
                "GOOGLE_CLOUD_PROJECT",
                "RADIUS_API_KEY",
            ]
        );
        for (name, reason) in &got {
            assert!(reason.len() > 20, "{name} needs a reason");
        }
        let reason = |n: &str| got.iter().find(|(v, _)| v == n).unwrap().1.clone();
        assert!(reason("AWS_ACCESS_KEY_ID").contains("SigV4"));
        assert!(
            reason("GOOGLE_APPLICATION_CREDENTIALS").contains("Application Default Credentials")
        );
    }

    #[test]
    fn withheld_ignores_unset_and_empty() {
        assert!(withheld(&HashMap::new()).is_empty());
        assert!(
            withheld(&env(&[
                ("AWS_PROFILE", ""),
                ("GOOGLE_APPLICATION_CREDENTIALS", " ")
            ]))
            .is_empty()
        );
    }

    #[test]
    fn withheld_never_lists_carried_key_vars() {
        let carried = carried_vars();
        let all: Vec<(&str, &str)> = carried
            .iter()
            .map(|v| (*v, "value"))
            .chain(WITHHELD.iter().map(|(v, _)| (*v, "value")))
            .collect();
        let got = withheld(&env(&all));
        assert_eq!(got.len(), WITHHELD.len());
        for (name, _) in got {
            assert!(!carried.contains(&name.as_str()), "{name} is carried");
        }
        // Static subscription tokens in variables are carried, not withheld.
        assert!(carried.contains(&"ANTHROPIC_OAUTH_TOKEN"));
    }

    // --- host_key ---

    #[test]
    fn host_key_takes_the_first_set_variable_in_pi_order() {
        let anthropic = route("anthropic");
        assert_eq!(host_key(anthropic, &HashMap::new()), None);
        let host = env(&[
            ("ANTHROPIC_API_KEY", "sk-ant-api03-k"),
            ("ANTHROPIC_OAUTH_TOKEN", "sk-ant-oat01-o"),
        ]);
        assert_eq!(
            host_key(anthropic, &host),
            Some(("ANTHROPIC_OAUTH_TOKEN", "sk-ant-oat01-o"))
        );
        let host = env(&[
            ("ANTHROPIC_AUTH_TOKEN", "gw"),
            ("ANTHROPIC_API_KEY", "sk-ant-api03-k"),
        ]);
        assert_eq!(
            host_key(anthropic, &host),
            Some(("ANTHROPIC_AUTH_TOKEN", "gw"))
        );
        let host = env(&[("ANTHROPIC_AUTH_TOKEN", ""), ("ANTHROPIC_API_KEY", "k")]);
        assert_eq!(host_key(anthropic, &host), Some(("ANTHROPIC_API_KEY", "k")));
        assert_eq!(
            host_key(route("openai"), &env(&[("OPENAI_API_KEY", "sk-1")])),
            Some(("OPENAI_API_KEY", "sk-1"))
        );
        assert_eq!(
            host_key(route("openai"), &env(&[("OPENAI_API_KEY", "")])),
            None
        );
    }

    // --- mint_token ---

    fn is_hex(s: &str) -> bool {
        s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    }

    #[test]
    fn openai_tokens_start_sk() {
        let t = mint_token(route("openai"), "sk-proj-real").unwrap();
        let rest = t.strip_prefix("sk-").unwrap();
        assert!(is_hex(rest), "{t}");
    }

    #[test]
    fn anthropic_api_key_tokens_never_look_like_subscriptions() {
        for real in ["sk-ant-api03-real", "gateway-token", ""] {
            let t = mint_token(route("anthropic"), real).unwrap();
            assert!(t.starts_with("sk-ant-api03-"), "{t}");
            assert!(!t.contains("sk-ant-oat"), "{t}");
            assert!(is_hex(&t["sk-ant-api03-".len()..]));
        }
    }

    #[test]
    fn anthropic_subscription_tokens_stay_subscriptions() {
        for real in ["sk-ant-oat01-real", "xx-sk-ant-oat99"] {
            let t = mint_token(route("anthropic"), real).unwrap();
            assert!(t.starts_with("sk-ant-oat01-"), "{t}");
            assert!(is_hex(&t["sk-ant-oat01-".len()..]));
        }
    }

    #[test]
    fn plain_tokens_are_hex_and_never_trip_pi_key_checks() {
        let t = mint_token(route("openrouter"), "sk-or-v1-real").unwrap();
        assert!(is_hex(&t), "{t}");
        assert!(!t.contains("sk-ant-oat"));
    }

    #[test]
    fn tokens_are_long_and_differ() {
        for r in providers() {
            let a = mint_token(r, "key").unwrap();
            let b = mint_token(r, "key").unwrap();
            assert_ne!(a, b, "{}", r.id);
            let prefix = r.token_shape.prefix("key");
            assert!(a.starts_with(prefix));
            assert!(a.len() >= prefix.len() + 32, "{}", r.id);
            assert!(is_hex(&a[prefix.len()..]), "{}", r.id);
        }
    }

    // --- route_path ---

    #[test]
    fn route_path_splits_provider_and_rest() {
        let (r, rest) = route_path("/anthropic/v1/messages").unwrap();
        assert_eq!((r.id, rest), ("anthropic", "/v1/messages"));
        let (r, rest) = route_path("/openrouter/api/v1/chat/completions").unwrap();
        assert_eq!((r.id, rest), ("openrouter", "/api/v1/chat/completions"));
        let (r, rest) = route_path("/anthropic").unwrap();
        assert_eq!((r.id, rest), ("anthropic", "/"));
        let (r, rest) = route_path("/anthropic/").unwrap();
        assert_eq!((r.id, rest), ("anthropic", "/"));
        let (r, rest) =
            route_path("/google/v1beta/models/x:streamGenerateContent?alt=sse").unwrap();
        assert_eq!(
            (r.id, rest),
            ("google", "/v1beta/models/x:streamGenerateContent?alt=sse")
        );
        let (r, rest) = route_path("/vercel-ai-gateway/typesafe/v1/systemone").unwrap();
        assert_eq!(
            (r.id, rest),
            ("vercel-ai-gateway", "/typesafe/v1/systemone")
        );
    }

    #[test]
    fn route_path_refuses_unknown_and_malformed() {
        for p in [
            "/unknown/x",
            "/",
            "",
            "//x",
            "//anthropic/v1",
            "anthropic/v1",
            "/Anthropic/v1",
            "/anthropic?x=1",
            "/anthr%6fpic/v1",
        ] {
            assert!(route_path(p).is_none(), "{p}");
        }
    }

    #[test]
    fn route_path_refuses_dot_segments() {
        for p in [
            "/openai/../anthropic/v1",
            "/openai/v1/..",
            "/openai/./v1",
            "/openai/%2e%2e/x",
            "/openai/.%2E/x",
            "/openai/%2E/x",
        ] {
            assert!(route_path(p).is_none(), "{p}");
        }
        // Dots inside a segment, and in the query, are fine.
        assert!(route_path("/openai/v1/a..b").is_some());
        assert!(route_path("/openai/v1/x?p=..").is_some());
    }
}
