//! The Gemini API's body shapes (keys in camelCase; the API reads snake_case too).

use super::super::shape::{FREE, Grammar, MODEL, Node, VALUE};
use super::obj;

pub(in crate::broker::screen) static GENERATE: Grammar = Grammar {
    name: "the Gemini API",
    root: &GENERATE_REQUEST,
    snake_case_too: true,
};

static GENERATE_REQUEST: Node = obj(
    "the request",
    &[
        ("model", &MODEL),
        ("contents", &CONTENT),
        ("systemInstruction", &CONTENT),
        ("tools", &TOOL),
        ("toolConfig", &TOOL_CONFIG),
        ("generationConfig", &GENERATION_CONFIG),
        ("safetySettings", &FREE),
        ("labels", &FREE),
        ("generateContentRequest", &GENERATE_REQUEST),
    ],
);

static CONTENT: Node = obj("a content", &[("role", &VALUE), ("parts", &PART)]);

static PART: Node = obj(
    "a part",
    &[
        ("text", &VALUE),
        ("thought", &VALUE),
        ("thoughtSignature", &VALUE),
        ("inlineData", &INLINE_DATA),
        ("functionCall", &FUNCTION_CALL),
        ("functionResponse", &FUNCTION_RESPONSE),
    ],
);

static INLINE_DATA: Node = obj(
    "inline data",
    &[
        ("mimeType", &VALUE),
        ("data", &VALUE),
        ("displayName", &VALUE),
    ],
);

static FUNCTION_CALL: Node = obj(
    "a function call",
    &[("id", &VALUE), ("name", &VALUE), ("args", &FREE)],
);

static FUNCTION_RESPONSE: Node = obj(
    "a function response",
    &[
        ("id", &VALUE),
        ("name", &VALUE),
        ("response", &FREE),
        ("parts", &PART),
        ("willContinue", &VALUE),
        ("scheduling", &VALUE),
    ],
);

/// Function declarations only: no search, URL context, retrieval, maps or code execution.
static TOOL: Node = obj("a tool", &[("functionDeclarations", &FUNCTION_DECLARATION)]);

static FUNCTION_DECLARATION: Node = obj(
    "a function declaration",
    &[
        ("name", &VALUE),
        ("description", &VALUE),
        ("parameters", &FREE),
        ("parametersJsonSchema", &FREE),
        ("response", &FREE),
        ("responseJsonSchema", &FREE),
        ("behavior", &VALUE),
    ],
);

static TOOL_CONFIG: Node = obj(
    "toolConfig",
    &[("functionCallingConfig", &FUNCTION_CALLING_CONFIG)],
);

static FUNCTION_CALLING_CONFIG: Node = obj(
    "functionCallingConfig",
    &[("mode", &VALUE), ("allowedFunctionNames", &VALUE)],
);

static GENERATION_CONFIG: Node = obj(
    "generationConfig",
    &[
        ("temperature", &VALUE),
        ("topP", &VALUE),
        ("topK", &VALUE),
        ("candidateCount", &VALUE),
        ("maxOutputTokens", &VALUE),
        ("stopSequences", &VALUE),
        ("presencePenalty", &VALUE),
        ("frequencyPenalty", &VALUE),
        ("seed", &VALUE),
        ("responseMimeType", &VALUE),
        ("responseSchema", &FREE),
        ("responseJsonSchema", &FREE),
        ("responseModalities", &VALUE),
        ("responseLogprobs", &VALUE),
        ("logprobs", &VALUE),
        ("mediaResolution", &VALUE),
        ("thinkingConfig", &THINKING_CONFIG),
    ],
);

static THINKING_CONFIG: Node = obj(
    "thinkingConfig",
    &[
        ("includeThoughts", &VALUE),
        ("thinkingBudget", &VALUE),
        ("thinkingLevel", &VALUE),
    ],
);

pub(in crate::broker::screen) static EMBED: Grammar = Grammar {
    name: "the Gemini API's embeddings",
    root: &EMBED_REQUEST,
    snake_case_too: true,
};

static EMBED_REQUEST: Node = obj(
    "the request",
    &[
        ("model", &MODEL),
        ("content", &CONTENT),
        ("taskType", &VALUE),
        ("title", &VALUE),
        ("outputDimensionality", &VALUE),
        ("requests", &EMBED_REQUEST),
    ],
);
