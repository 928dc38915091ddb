//! The shape scan: a byte-at-a-time walk of a JSON request body against the allowlist of body
//! shapes of the endpoint it goes to ([`super::apis`]). Fed in pieces split anywhere; memory is
//! the open containers' nodes (at most [`MAX_DEPTH`]) and a [`KEEP`]-byte string buffer,
//! whatever the body's size.
//!
//! A shape says, for each place in a body, which keys an object there may have (each with the
//! shape of its value), and what a string there may be: anything, a value that is not a URL to
//! fetch, one of a few words (a content part's or a tool's `type`), or a model that does not
//! browse the web by itself. Arrays take the shape of the place they stand in, so `content` may
//! be a string or a list of parts. Anything not in the allowlist is refused: a key the shape does
//! not list, a `type` it does not name, a URL where a provider would fetch it, a browsing model,
//! a body nested deeper than [`MAX_DEPTH`], or a body that is not a JSON object. Below a place
//! marked free (a tool's parameter schema, a call's arguments, opaque data the provider sent
//! earlier) everything passes: the provider reads it as data, never as a request to reach out.
//!
//! Keys and string values are compared after JSON unescaping (`"\u0075rl"` is `"url"`). Which
//! string is a key is known from the structure (the first string after `{` or `,` in an
//! object), never guessed from the text, and every key of an object is judged, so a repeated
//! key cannot hide behind an allowed one.

/// What a string at a place may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    /// Anything (free text, numbers' neighbours, ids).
    Any,
    /// Not a URL to fetch: a `data:` URL, or text without a scheme (`https:`, `gs:`, `//`).
    NotFetched,
    /// One of these words; one ending `*` is a prefix (versioned tool types).
    OneOf(&'static [&'static str]),
    /// A model name, refused when the model browses the web by itself (see [`browses`]).
    Model,
}

/// Which keys an object at a place may have.
#[derive(Debug, Clone, Copy)]
pub enum Keys {
    /// Any: everything below passes (free data).
    Any,
    /// Only these, each with the shape of its value.
    Only(&'static [(&'static str, &'static Node)]),
}

/// A place in a body.
#[derive(Debug)]
pub struct Node {
    /// What it is, for a refusal's message ("a content part").
    pub what: &'static str,
    pub keys: Keys,
    pub text: Text,
}

/// The shape of one endpoint's request bodies.
#[derive(Debug)]
pub struct Grammar {
    /// The API and endpoint, for a refusal's message.
    pub name: &'static str,
    pub root: &'static Node,
    /// The Gemini API reads `snake_case` keys as their `camelCase` form (proto3 JSON).
    pub snake_case_too: bool,
}

/// Free data: any keys, any values, below.
pub static FREE: Node = Node {
    what: "free data",
    keys: Keys::Any,
    text: Text::Any,
};

/// A plain value (a string, number, boolean or null, or a list of them): no object keys.
pub static VALUE: Node = Node {
    what: "a plain value",
    keys: Keys::Only(&[]),
    text: Text::Any,
};

/// A model name.
pub static MODEL: Node = Node {
    what: "a model name",
    keys: Keys::Only(&[]),
    text: Text::Model,
};

/// A value that is not a URL to fetch.
pub static NOT_FETCHED: Node = Node {
    what: "an inline value",
    keys: Keys::Only(&[]),
    text: Text::NotFetched,
};

/// The deepest nesting judged; deeper bodies are refused (free data below a place counts too).
pub const MAX_DEPTH: usize = 128;
/// The longest key or judged string kept: a longer key is not in any shape; a longer judged
/// value is refused.
const KEEP: usize = 128;

/// Why a body was refused, for the 403's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A key the shape does not list, in `within`.
    Key { key: String, within: &'static str },
    /// A string the place's rule refuses: a `type` not named, a URL to fetch.
    Value {
        value: String,
        within: &'static str,
        rule: Text,
    },
    /// A model that browses the web by itself.
    Browsing(String),
    /// Nested deeper than [`MAX_DEPTH`].
    Deep,
    /// Not a JSON object at the top.
    NotAnObject,
    /// A body sent to an endpoint with no known body shape (a model list, a path the host added).
    NoShape,
}

impl Finding {
    /// Said in a refusal.
    pub fn describe(&self, grammar: Option<&Grammar>) -> String {
        let api = grammar.map_or("this path", |g| g.name);
        match self {
            Finding::Key { key, within } => {
                format!("the field \"{key}\" in {within}, which is not one of {api}'s fields for a plain model call")
            }
            Finding::Value { value, within, rule } => match rule {
                Text::NotFetched => format!("a URL to fetch in {within} (\"{value}\"); only inline data (data: URLs, base64) passes"),
                Text::Model => format!("the model \"{value}\""),
                _ => format!("\"{value}\" in {within}, which is not one of {api}'s kinds for a plain model call"),
            },
            Finding::Browsing(model) => {
                format!("the model \"{model}\", which searches or browses the web by itself")
            }
            Finding::Deep => format!("a body nested deeper than {MAX_DEPTH} levels"),
            Finding::NotAnObject => format!("a body to {api} that is not a JSON object"),
            Finding::NoShape => {
                "a request body to a path whose bodies the screen does not know (a model list, or a path the host added)".into()
            }
        }
    }
}

/// Whether a model name names one that searches or browses the web by itself: one of its words
/// (split at `/ : - _ . @` and space, compared in lower case) is `search`, `sonar`, `online` or
/// `compound`, or two of them are `deep` then `research` (OpenAI's search and deep-research
/// models, Perplexity's Sonar, OpenRouter's `:online`, Groq's Compound).
pub fn browses(model: &str) -> bool {
    let lower = model.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(['/', ':', '-', '_', '.', '@', ' '])
        .filter(|w| !w.is_empty())
        .collect();
    words
        .iter()
        .any(|w| matches!(*w, "search" | "sonar" | "online" | "compound"))
        || words.windows(2).any(|w| w == ["deep", "research"])
}

/// Whether `value` (lower case, leading white space skipped) would make a provider fetch it:
/// `//…`, or a scheme (`letter (letter | digit | + - .)* :`) other than `data:`.
fn fetched(value: &[u8]) -> bool {
    if value.starts_with(b"//") || value.starts_with(b"\\\\") {
        return true;
    }
    let Some(colon) = value.iter().position(|&b| b == b':') else {
        return false;
    };
    let scheme = &value[..colon];
    let is_scheme = scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b));
    is_scheme && !scheme.eq_ignore_ascii_case(b"data")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Between tokens.
    Outside,
    /// Inside a string.
    InString,
    /// After a `\` in a string.
    Escape,
    /// In a `\uXXXX` escape: hex digits still to come, the code so far.
    Unicode(u8, u32),
}

/// An open object or array and the node it stands for.
#[derive(Debug, Clone, Copy)]
struct Frame {
    node: &'static Node,
    array: bool,
}

/// What the string being read is.
#[derive(Debug, Clone, Copy)]
enum Reading {
    Key,
    /// A value at this node, its text judged at its end.
    Judged(&'static Node),
    /// A value nobody judges: only its end matters.
    Skipped,
}

/// The scan's state. Feed it with [`ShapeScan::feed`], then [`ShapeScan::finish`].
#[derive(Debug, Clone)]
pub struct ShapeScan {
    grammar: Option<&'static Grammar>,
    lex: Lex,
    text: [u8; KEEP],
    len: usize,
    long: bool,
    leading: bool,
    reading: Reading,
    stack: Vec<Frame>,
    /// Containers open below a free place.
    free_depth: usize,
    /// The node of the value after the last key.
    pending: &'static Node,
    expect_key: bool,
    started: bool,
    found: Option<Finding>,
}

impl ShapeScan {
    /// A scan of bodies of `grammar`'s shape; `None`: no body may have any content.
    pub fn new(grammar: Option<&'static Grammar>) -> ShapeScan {
        ShapeScan {
            grammar,
            lex: Lex::Outside,
            text: [0; KEEP],
            len: 0,
            long: false,
            leading: true,
            reading: Reading::Skipped,
            stack: Vec::new(),
            free_depth: 0,
            pending: &VALUE,
            expect_key: false,
            started: false,
            found: None,
        }
    }

    /// Scans the next piece; the first finding, once there is one (later bytes are not read).
    pub fn feed(&mut self, bytes: &[u8]) -> Option<&Finding> {
        let mut i = 0;
        while i < bytes.len() && self.found.is_none() {
            if self.lex == Lex::InString && matches!(self.reading, Reading::Skipped) {
                // Only the string's end matters: skip to a quote or escape.
                match bytes[i..].iter().position(|&b| b == b'"' || b == b'\\') {
                    Some(n) => i += n,
                    None => break,
                }
            }
            self.step(bytes[i]);
            i += 1;
        }
        self.found.as_ref()
    }

    /// The end of the body.
    pub fn finish(&mut self) -> Option<&Finding> {
        self.found.as_ref()
    }

    fn step(&mut self, b: u8) {
        match self.lex {
            Lex::Outside => self.outside(b),
            Lex::InString => match b {
                b'\\' => self.lex = Lex::Escape,
                b'"' => {
                    self.lex = Lex::Outside;
                    self.string_ended();
                }
                _ => self.push(b),
            },
            Lex::Escape => {
                self.lex = Lex::InString;
                match b {
                    b'u' => self.lex = Lex::Unicode(4, 0),
                    b'b' => self.push(0x08),
                    b'f' => self.push(0x0c),
                    b'n' => self.push(b'\n'),
                    b'r' => self.push(b'\r'),
                    b't' => self.push(b'\t'),
                    other => self.push(other),
                }
            }
            Lex::Unicode(left, code) => {
                let Some(d) = (b as char).to_digit(16) else {
                    // Not JSON: keep a byte no rule's word has, so nothing after it is missed.
                    self.push(0xff);
                    self.lex = Lex::InString;
                    return self.step(b);
                };
                let code = code << 4 | d;
                if left > 1 {
                    self.lex = Lex::Unicode(left - 1, code);
                } else {
                    self.lex = Lex::InString;
                    // Only ASCII can spell a rule's word; anything else is a non-matching byte.
                    self.push(u8::try_from(code).ok().filter(u8::is_ascii).unwrap_or(0xff));
                }
            }
        }
    }

    fn outside(&mut self, b: u8) {
        if b.is_ascii_whitespace() {
            return;
        }
        let Some(grammar) = self.grammar else {
            self.found = Some(Finding::NoShape);
            return;
        };
        if !self.started {
            self.started = true;
            if b != b'{' {
                self.found = Some(Finding::NotAnObject);
                return;
            }
            self.open(grammar.root, false);
            return;
        }
        match b {
            b'"' => {
                self.len = 0;
                self.long = false;
                self.leading = true;
                self.lex = Lex::InString;
                self.reading = if self.in_object() && self.expect_key {
                    Reading::Key
                } else {
                    let node = self.value_node();
                    if self.free_depth > 0 || node.text == Text::Any {
                        Reading::Skipped
                    } else {
                        Reading::Judged(node)
                    }
                };
            }
            b'{' | b'[' => {
                let node = self.value_node();
                self.open(node, b == b'[');
            }
            b'}' | b']' => self.close(),
            b':' => self.expect_key = false,
            b',' => self.expect_key = self.in_object(),
            // A number, true, false or null: nothing to judge.
            _ => {}
        }
    }

    /// Whether the innermost open container is an object judged by its node.
    fn in_object(&self) -> bool {
        self.free_depth == 0 && self.stack.last().is_some_and(|f| !f.array)
    }

    /// The node of the value starting now.
    fn value_node(&mut self) -> &'static Node {
        if self.free_depth > 0 {
            return &FREE;
        }
        match self.stack.last() {
            Some(f) if f.array => f.node,
            Some(_) => std::mem::replace(&mut self.pending, &VALUE),
            None => &VALUE,
        }
    }

    fn open(&mut self, node: &'static Node, array: bool) {
        if self.stack.len() + self.free_depth >= MAX_DEPTH {
            self.found = Some(Finding::Deep);
            return;
        }
        if self.free_depth > 0 || matches!(node.keys, Keys::Any) {
            self.free_depth += 1;
            return;
        }
        self.stack.push(Frame { node, array });
        self.expect_key = !array;
    }

    fn close(&mut self) {
        if self.free_depth > 0 {
            self.free_depth -= 1;
        } else {
            self.stack.pop();
        }
        self.expect_key = false;
    }

    fn push(&mut self, b: u8) {
        if matches!(self.reading, Reading::Skipped) {
            return;
        }
        if self.leading && matches!(self.reading, Reading::Judged(_)) && b.is_ascii_whitespace() {
            return;
        }
        self.leading = false;
        if self.len < KEEP {
            self.text[self.len] = b;
            self.len += 1;
        } else {
            self.long = true;
        }
    }

    fn string_ended(&mut self) {
        match self.reading {
            Reading::Key => self.key_ended(),
            Reading::Judged(node) => self.value_ended(node),
            Reading::Skipped => {}
        }
        self.reading = Reading::Skipped;
    }

    /// A key of the innermost object: its value's node, or a finding when the node does not
    /// list it.
    fn key_ended(&mut self) {
        let Some(frame) = self.stack.last() else {
            return;
        };
        let Keys::Only(keys) = frame.node.keys else {
            return;
        };
        let key = &self.text[..self.len];
        let snake = self.grammar.is_some_and(|g| g.snake_case_too);
        let found = (!self.long).then(|| lookup(keys, key, snake)).flatten();
        match found {
            Some(node) => self.pending = node,
            None => {
                self.found = Some(Finding::Key {
                    key: shown(key, self.long),
                    within: frame.node.what,
                })
            }
        }
    }

    /// A string value at `node`: judged by the node's rule.
    fn value_ended(&mut self, node: &'static Node) {
        let value = &self.text[..self.len];
        let refused = match node.text {
            Text::Any => false,
            Text::NotFetched => fetched(&value.to_ascii_lowercase()),
            Text::OneOf(words) => self.long || !words.iter().any(|w| word_matches(w, value)),
            Text::Model => {
                if !self.long && browses(&String::from_utf8_lossy(value)) {
                    self.found = Some(Finding::Browsing(shown(value, false)));
                    return;
                }
                self.long
            }
        };
        if refused {
            self.found = Some(Finding::Value {
                value: shown(value, self.long),
                within: node.what,
                rule: node.text,
            });
        }
    }
}

/// `key`'s node among `keys`; with `snake`, a `snake_case` key is looked up as its `camelCase`.
fn lookup(
    keys: &'static [(&'static str, &'static Node)],
    key: &[u8],
    snake: bool,
) -> Option<&'static Node> {
    if let Some((_, node)) = keys.iter().find(|(k, _)| k.as_bytes() == key) {
        return Some(node);
    }
    if !snake || !key.contains(&b'_') {
        return None;
    }
    let mut camel = Vec::with_capacity(key.len());
    let mut upper = false;
    for &b in key {
        match b {
            b'_' => upper = true,
            _ if upper => {
                camel.push(b.to_ascii_uppercase());
                upper = false;
            }
            _ => camel.push(b),
        }
    }
    keys.iter()
        .find(|(k, _)| k.as_bytes() == camel.as_slice())
        .map(|(_, node)| *node)
}

/// Whether `value` is `word`, or starts with it when `word` ends `*`.
fn word_matches(word: &str, value: &[u8]) -> bool {
    match word.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix.as_bytes()),
        None => word.as_bytes() == value,
    }
}

/// A key or value for a message: at most 64 bytes, control characters escaped.
fn shown(bytes: &[u8], long: bool) -> String {
    let cut = &bytes[..bytes.len().min(64)];
    let text: String = String::from_utf8_lossy(cut)
        .chars()
        .flat_map(|c| {
            if c.is_control() || c == '"' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if long || bytes.len() > 64 {
        format!("{text}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
