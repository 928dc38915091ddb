//! The allowlist of body shapes, by API and endpoint: the fields of a plain model call as the
//! APIs document them and as pi-ai 1.3.0 sends them (its OpenAI chat completions with every
//! provider's thinking and routing fields, OpenAI Responses with Codex and Azure, Anthropic
//! Messages, the Gemini API, OpenAI Decisions). Left out, so refused in the `none` and
//! `allowlist` modes: every server-side tool that reaches out (web search and fetch, MCP
//! servers, URL context, code execution, file search), every content part that names a URL for
//! the provider to fetch, stored prompts and cached contents (which may carry such tools), and
//! OpenRouter's plugins.

use super::shape::{FREE, Grammar, Keys, MODEL, NOT_FETCHED, Node, Text, VALUE};
use crate::broker::routes::paths::Api;

mod anthropic;
mod gemini;
use anthropic::MESSAGES;
use gemini::{EMBED, GENERATE};

/// The body shape of `endpoint` (a pattern of [`Api::endpoints`]) of `api`; `None` for an
/// endpoint that takes no body (the model list).
pub fn grammar(api: Api, endpoint: &str) -> Option<&'static Grammar> {
    Some(match (api, endpoint) {
        (Api::OpenAi, "/chat/completions") => &CHAT_COMPLETIONS,
        (Api::OpenAi, "/completions") => &COMPLETIONS,
        (Api::OpenAi, "/responses") => &RESPONSES,
        (Api::OpenAi, "/embeddings") => &EMBEDDINGS,
        (Api::Anthropic, "/v1/messages" | "/v1/messages/count_tokens") => &MESSAGES,
        (
            Api::Gemini,
            "/models/*:generateContent"
            | "/models/*:streamGenerateContent"
            | "/models/*:countTokens",
        ) => &GENERATE,
        (Api::Gemini, "/models/*:embedContent" | "/models/*:batchEmbedContents") => &EMBED,
        (Api::Decisions, "/decisions") => &DECISIONS,
        _ => return None,
    })
}

pub(super) const fn obj(
    what: &'static str,
    keys: &'static [(&'static str, &'static Node)],
) -> Node {
    Node {
        what,
        keys: Keys::Only(keys),
        text: Text::Any,
    }
}

pub(super) const fn typed(
    what: &'static str,
    keys: &'static [(&'static str, &'static Node)],
    text: Text,
) -> Node {
    Node {
        what,
        keys: Keys::Only(keys),
        text,
    }
}

pub(super) static CACHE_CONTROL: Node = obj("cache_control", &[("type", &VALUE), ("ttl", &VALUE)]);

/// Sampling and length fields any OpenAI-style body may carry (pi merges `samplingParams` in).
macro_rules! sampling {
    () => {
        [
            ("temperature", &VALUE),
            ("top_p", &VALUE),
            ("top_k", &VALUE),
            ("min_p", &VALUE),
            ("top_a", &VALUE),
            ("n", &VALUE),
            ("stop", &VALUE),
            ("seed", &VALUE),
            ("presence_penalty", &VALUE),
            ("frequency_penalty", &VALUE),
            ("repetition_penalty", &VALUE),
            ("logit_bias", &FREE),
            ("logprobs", &VALUE),
            ("top_logprobs", &VALUE),
            ("user", &VALUE),
            ("stream", &VALUE),
            ("stream_options", &STREAM_OPTIONS),
            ("store", &VALUE),
            ("metadata", &FREE),
            ("service_tier", &VALUE),
            ("safety_identifier", &VALUE),
            ("prompt_cache_key", &VALUE),
            ("prompt_cache_retention", &VALUE),
            ("parallel_tool_calls", &VALUE),
            ("priority", &VALUE),
        ]
    };
}

static STREAM_OPTIONS: Node = obj(
    "stream_options",
    &[("include_usage", &VALUE), ("include_obfuscation", &VALUE)],
);

// OpenAI chat completions (and every OpenAI-compatible provider pi speaks it to).

static CHAT_COMPLETIONS: Grammar = Grammar {
    name: "OpenAI chat completions",
    root: &CHAT_REQUEST,
    snake_case_too: false,
};

static CHAT_REQUEST: Node = obj("the request", &{
    const S: [(&str, &Node); 25] = sampling!();
    const OWN: [(&str, &Node); 34] = [
        ("model", &MODEL),
        ("models", &MODEL),
        ("messages", &CHAT_MESSAGE),
        ("max_tokens", &VALUE),
        ("max_completion_tokens", &VALUE),
        ("tools", &CHAT_TOOL),
        ("tool_choice", &CHAT_TOOL_CHOICE),
        ("functions", &CHAT_FUNCTION),
        ("function_call", &CHAT_NAMED),
        ("response_format", &RESPONSE_FORMAT),
        ("reasoning_effort", &VALUE),
        ("reasoning", &REASONING),
        ("include_reasoning", &VALUE),
        ("verbosity", &VALUE),
        ("modalities", &VALUE),
        ("audio", &AUDIO),
        ("prediction", &PREDICTION),
        ("tool_stream", &VALUE),
        ("thinking", &THINKING),
        ("enable_thinking", &VALUE),
        ("chat_template_kwargs", &FREE),
        ("chat_template_args", &FREE),
        ("thinking_token_budget", &VALUE),
        ("thinking_budget", &VALUE),
        ("thinking_budget_tokens", &VALUE),
        ("provider", &FREE),
        ("providerOptions", &FREE),
        ("transforms", &VALUE),
        ("route", &VALUE),
        ("usage", &FREE),
        ("echo", &VALUE),
        ("best_of", &VALUE),
        ("suffix", &VALUE),
        ("safe_prompt", &VALUE),
    ];
    concat::<25, 34, 59>(S, OWN)
});

/// Two lists as one (a `const fn`: the tables stay static).
const fn concat<const A: usize, const B: usize, const C: usize>(
    a: [(&'static str, &'static Node); A],
    b: [(&'static str, &'static Node); B],
) -> [(&'static str, &'static Node); C] {
    let mut out = [("", &VALUE as &Node); C];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < C {
        out[i] = b[i - A];
        i += 1;
    }
    out
}

static CHAT_MESSAGE: Node = obj(
    "a message",
    &[
        ("role", &ROLE),
        ("content", &CHAT_PART),
        ("name", &VALUE),
        ("tool_calls", &CHAT_TOOL_CALL),
        ("tool_call_id", &VALUE),
        ("function_call", &CHAT_CALLED),
        ("refusal", &VALUE),
        ("reasoning_details", &FREE),
        ("reasoning_content", &VALUE),
        ("reasoning", &VALUE),
        ("reasoning_text", &VALUE),
        ("tools", &CHAT_TOOL),
        ("audio", &FREE),
        ("prefix", &VALUE),
        ("cache_control", &CACHE_CONTROL),
    ],
);

pub(super) static ROLE: Node = typed(
    "a message's role",
    &[],
    Text::OneOf(&[
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "function",
    ]),
);

static CHAT_PART: Node = obj(
    "a content part",
    &[
        ("type", &CHAT_PART_TYPE),
        ("text", &VALUE),
        ("image_url", &IMAGE_URL),
        ("input_audio", &INPUT_AUDIO),
        ("file", &CHAT_FILE),
        ("refusal", &VALUE),
        ("cache_control", &CACHE_CONTROL),
    ],
);

static CHAT_PART_TYPE: Node = typed(
    "a content part's type",
    &[],
    Text::OneOf(&["text", "image_url", "input_audio", "file", "refusal"]),
);

/// `image_url` as `{url, detail}` or (some servers) the URL itself: inline data only.
static IMAGE_URL: Node = typed(
    "an image",
    &[("url", &NOT_FETCHED), ("detail", &VALUE)],
    Text::NotFetched,
);

static INPUT_AUDIO: Node = obj("an audio part", &[("data", &VALUE), ("format", &VALUE)]);

/// A file part: its bytes inline or an uploaded file's id; OpenRouter fetches a URL in
/// `file_data`, so that is inline data only.
static CHAT_FILE: Node = obj(
    "a file part",
    &[
        ("filename", &VALUE),
        ("file_data", &NOT_FETCHED),
        ("file_id", &VALUE),
    ],
);

static CHAT_TOOL_CALL: Node = obj(
    "a tool call",
    &[
        ("id", &VALUE),
        ("index", &VALUE),
        ("type", &FUNCTION_OR_CUSTOM),
        ("function", &CHAT_CALLED),
        ("custom", &CHAT_CALLED),
    ],
);

static CHAT_CALLED: Node = obj(
    "a called tool",
    &[("name", &VALUE), ("arguments", &FREE), ("input", &FREE)],
);

static FUNCTION_OR_CUSTOM: Node = typed("a tool's type", &[], Text::OneOf(&["function", "custom"]));

static CHAT_TOOL: Node = obj(
    "a tool",
    &[
        ("type", &FUNCTION_OR_CUSTOM),
        ("function", &CHAT_FUNCTION),
        ("custom", &CHAT_FUNCTION),
        ("cache_control", &CACHE_CONTROL),
    ],
);

static CHAT_FUNCTION: Node = obj(
    "a tool's definition",
    &[
        ("name", &VALUE),
        ("description", &VALUE),
        ("parameters", &FREE),
        ("strict", &VALUE),
        ("format", &FREE),
    ],
);

static CHAT_TOOL_CHOICE: Node = obj(
    "tool_choice",
    &[
        ("type", &CHOICE_TYPE),
        ("function", &CHAT_NAMED),
        ("custom", &CHAT_NAMED),
        ("allowed_tools", &ALLOWED_TOOLS),
    ],
);

pub(super) static CHOICE_TYPE: Node = typed(
    "tool_choice's type",
    &[],
    Text::OneOf(&[
        "function",
        "custom",
        "allowed_tools",
        "auto",
        "any",
        "none",
        "tool",
    ]),
);

static CHAT_NAMED: Node = obj("a named tool", &[("name", &VALUE)]);

static ALLOWED_TOOLS: Node = obj("allowed_tools", &[("mode", &VALUE), ("tools", &FREE)]);

static RESPONSE_FORMAT: Node = obj(
    "response_format",
    &[("type", &FORMAT_TYPE), ("json_schema", &FREE)],
);

static FORMAT_TYPE: Node = typed(
    "an output format's type",
    &[],
    Text::OneOf(&["text", "json_object", "json_schema"]),
);

static REASONING: Node = obj(
    "reasoning",
    &[
        ("effort", &VALUE),
        ("summary", &VALUE),
        ("generate_summary", &VALUE),
        ("enabled", &VALUE),
        ("max_tokens", &VALUE),
        ("exclude", &VALUE),
    ],
);

static AUDIO: Node = obj("audio", &[("voice", &VALUE), ("format", &VALUE)]);

static PREDICTION: Node = obj("prediction", &[("type", &VALUE), ("content", &CHAT_PART)]);

/// `thinking` as pi sends it to Z.ai, DeepSeek and the like, or as a plain string.
static THINKING: Node = obj(
    "thinking",
    &[
        ("type", &VALUE),
        ("clear_thinking", &VALUE),
        ("budget_tokens", &VALUE),
        ("display", &VALUE),
        ("block_binding", &FREE),
    ],
);

static COMPLETIONS: Grammar = Grammar {
    name: "OpenAI completions",
    root: &COMPLETIONS_REQUEST,
    snake_case_too: false,
};

static COMPLETIONS_REQUEST: Node = obj("the request", &{
    const S: [(&str, &Node); 25] = sampling!();
    const OWN: [(&str, &Node); 6] = [
        ("model", &MODEL),
        ("prompt", &VALUE),
        ("suffix", &VALUE),
        ("max_tokens", &VALUE),
        ("echo", &VALUE),
        ("best_of", &VALUE),
    ];
    concat::<25, 6, 31>(S, OWN)
});

static EMBEDDINGS: Grammar = Grammar {
    name: "OpenAI embeddings",
    root: &EMBEDDINGS_REQUEST,
    snake_case_too: false,
};

static EMBEDDINGS_REQUEST: Node = obj(
    "the request",
    &[
        ("model", &MODEL),
        ("input", &VALUE),
        ("encoding_format", &VALUE),
        ("dimensions", &VALUE),
        ("user", &VALUE),
    ],
);

// OpenAI Responses (pi's openai-responses, azure-openai-responses and openai-codex-responses).

static RESPONSES: Grammar = Grammar {
    name: "OpenAI Responses",
    root: &RESPONSES_REQUEST,
    snake_case_too: false,
};

static RESPONSES_REQUEST: Node = obj("the request", &{
    const S: [(&str, &Node); 25] = sampling!();
    const OWN: [(&str, &Node); 14] = [
        ("model", &MODEL),
        ("input", &RESPONSES_ITEM),
        ("instructions", &VALUE),
        ("max_output_tokens", &VALUE),
        ("max_tool_calls", &VALUE),
        ("prompt_cache_options", &FREE),
        ("tools", &RESPONSES_TOOL),
        ("tool_choice", &RESPONSES_CHOICE),
        ("reasoning", &REASONING),
        ("include", &VALUE),
        ("text", &RESPONSES_TEXT),
        ("truncation", &VALUE),
        ("previous_response_id", &VALUE),
        ("type", &VALUE),
    ];
    concat::<25, 14, 39>(S, OWN)
});

/// An input item, with the content parts and outputs below it (arrays take their place's shape).
static RESPONSES_ITEM: Node = obj(
    "an input item",
    &[
        ("type", &ITEM_TYPE),
        ("role", &ROLE),
        ("content", &RESPONSES_PART),
        ("status", &VALUE),
        ("id", &VALUE),
        ("phase", &VALUE),
        ("summary", &FREE),
        ("encrypted_content", &VALUE),
        ("call_id", &VALUE),
        ("name", &VALUE),
        ("namespace", &VALUE),
        ("arguments", &FREE),
        ("input", &VALUE),
        ("output", &RESPONSES_PART),
        ("tools", &RESPONSES_TOOL),
        ("execution", &VALUE),
        ("reasoning", &REASONING),
    ],
);

static ITEM_TYPE: Node = typed(
    "an input item's type",
    &[],
    Text::OneOf(&[
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "additional_tools",
        "tool_search_call",
        "tool_search_output",
        "configuration_update",
    ]),
);

static RESPONSES_PART: Node = obj(
    "a content part",
    &[
        ("type", &RESPONSES_PART_TYPE),
        ("text", &VALUE),
        ("image_url", &NOT_FETCHED),
        ("file_id", &VALUE),
        ("file_data", &NOT_FETCHED),
        ("filename", &VALUE),
        ("detail", &VALUE),
        ("annotations", &FREE),
        ("logprobs", &FREE),
        ("refusal", &VALUE),
    ],
);

static RESPONSES_PART_TYPE: Node = typed(
    "a content part's type",
    &[],
    Text::OneOf(&[
        "input_text",
        "input_image",
        "input_file",
        "output_text",
        "refusal",
        "reasoning_text",
        "summary_text",
    ]),
);

static RESPONSES_TOOL: Node = obj(
    "a tool",
    &[
        ("type", &FUNCTION_OR_CUSTOM),
        ("name", &VALUE),
        ("description", &VALUE),
        ("parameters", &FREE),
        ("strict", &VALUE),
        ("defer_loading", &VALUE),
        ("format", &FREE),
    ],
);

static RESPONSES_CHOICE: Node = obj(
    "tool_choice",
    &[
        ("type", &CHOICE_TYPE),
        ("name", &VALUE),
        ("mode", &VALUE),
        ("tools", &FREE),
    ],
);

static RESPONSES_TEXT: Node = obj(
    "text",
    &[("verbosity", &VALUE), ("format", &RESPONSES_FORMAT)],
);

pub(super) static RESPONSES_FORMAT: Node = obj(
    "text.format",
    &[
        ("type", &FORMAT_TYPE),
        ("name", &VALUE),
        ("schema", &FREE),
        ("strict", &VALUE),
        ("description", &VALUE),
    ],
);

// OpenAI Decisions (pi's TypeSafe classifiers).

static DECISIONS: Grammar = Grammar {
    name: "OpenAI Decisions",
    root: &DECISIONS_REQUEST,
    snake_case_too: false,
};

static DECISIONS_REQUEST: Node = obj(
    "the request",
    &[
        ("model", &MODEL),
        ("input", &RESPONSES_ITEM),
        ("questions", &FREE),
    ],
);
