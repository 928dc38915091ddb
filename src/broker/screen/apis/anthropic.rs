//! Anthropic Messages' body shape (and its token count's).

use super::super::shape::{FREE, Grammar, MODEL, Node, Text, VALUE};
use super::{CACHE_CONTROL, CHOICE_TYPE, RESPONSES_FORMAT, ROLE, obj, typed};

pub(in crate::broker::screen) static MESSAGES: Grammar = Grammar {
    name: "Anthropic Messages",
    root: &MESSAGES_REQUEST,
    snake_case_too: false,
};

static MESSAGES_REQUEST: Node = obj(
    "the request",
    &[
        ("model", &MODEL),
        ("messages", &ANTHROPIC_MESSAGE),
        ("max_tokens", &VALUE),
        ("stream", &VALUE),
        ("system", &ANTHROPIC_BLOCK),
        ("temperature", &VALUE),
        ("top_p", &VALUE),
        ("top_k", &VALUE),
        ("stop_sequences", &VALUE),
        ("tools", &ANTHROPIC_TOOL),
        ("tool_choice", &TOOL_CHOICE),
        ("thinking", &THINKING),
        ("output_config", &OUTPUT_CONFIG),
        ("metadata", &METADATA),
        ("fallbacks", &FALLBACK),
        ("service_tier", &VALUE),
    ],
);

static ANTHROPIC_MESSAGE: Node = obj(
    "a message",
    &[
        ("role", &ROLE),
        ("content", &ANTHROPIC_BLOCK),
        ("output_config", &OUTPUT_CONFIG),
    ],
);

static ANTHROPIC_BLOCK: Node = obj(
    "a content block",
    &[
        ("type", &BLOCK_TYPE),
        ("text", &VALUE),
        ("source", &SOURCE),
        ("cache_control", &CACHE_CONTROL),
        ("citations", &FREE),
        ("title", &VALUE),
        ("context", &VALUE),
        ("id", &VALUE),
        ("name", &VALUE),
        ("input", &FREE),
        ("tool_use_id", &VALUE),
        ("content", &ANTHROPIC_BLOCK),
        ("is_error", &VALUE),
        ("thinking", &VALUE),
        ("signature", &VALUE),
        ("data", &VALUE),
        ("tool", &TOOL_CHANGE),
    ],
);

static BLOCK_TYPE: Node = typed(
    "a content block's type",
    &[],
    Text::OneOf(&[
        "text",
        "image",
        "document",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "tool_removal",
        "tool_addition",
    ]),
);

/// An image's or document's source: inline (base64, text, content blocks) or an uploaded file,
/// never a URL.
static SOURCE: Node = obj(
    "a source",
    &[
        ("type", &SOURCE_TYPE),
        ("media_type", &VALUE),
        ("data", &VALUE),
        ("file_id", &VALUE),
        ("content", &ANTHROPIC_BLOCK),
    ],
);

static SOURCE_TYPE: Node = typed(
    "a source's type",
    &[],
    Text::OneOf(&["base64", "text", "content", "file"]),
);

static TOOL_CHANGE: Node = obj(
    "a tool change",
    &[
        ("type", &VALUE),
        ("name", &VALUE),
        ("definition", &ANTHROPIC_TOOL),
    ],
);

/// A tool pi defines, or one of Anthropic's tools the client runs (bash, text editor, computer,
/// memory); never a server tool (web search or fetch, code execution, MCP).
static ANTHROPIC_TOOL: Node = obj(
    "a tool",
    &[
        ("type", &TOOL_TYPE),
        ("name", &VALUE),
        ("description", &VALUE),
        ("input_schema", &FREE),
        ("cache_control", &CACHE_CONTROL),
        ("strict", &VALUE),
        ("eager_input_streaming", &VALUE),
        ("defer_loading", &VALUE),
        ("display_width_px", &VALUE),
        ("display_height_px", &VALUE),
        ("display_number", &VALUE),
    ],
);

static TOOL_TYPE: Node = typed(
    "a tool's type",
    &[],
    Text::OneOf(&[
        "custom",
        "bash_*",
        "text_editor_*",
        "computer_*",
        "memory_*",
    ]),
);

static TOOL_CHOICE: Node = obj(
    "tool_choice",
    &[
        ("type", &CHOICE_TYPE),
        ("name", &VALUE),
        ("disable_parallel_tool_use", &VALUE),
    ],
);

static THINKING: Node = obj(
    "thinking",
    &[
        ("type", &VALUE),
        ("budget_tokens", &VALUE),
        ("display", &VALUE),
        ("block_binding", &FREE),
    ],
);

static OUTPUT_CONFIG: Node = obj(
    "output_config",
    &[("effort", &VALUE), ("format", &RESPONSES_FORMAT)],
);

static METADATA: Node = obj("metadata", &[("user_id", &VALUE)]);

static FALLBACK: Node = obj("a fallback", &[("model", &MODEL)]);
