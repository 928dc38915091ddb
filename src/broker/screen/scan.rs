//! The fetch scan: a byte-at-a-time state machine over a JSON request body that finds what asks
//! a provider to fetch a URL for the caller. Fed in pieces split anywhere; memory is a few
//! dozen bytes whatever the body's size. Keys and string values are compared after JSON
//! unescaping (`"\u0075rl"` is `"url"`); a string is a key when the next byte after it, past
//! white space, is `:`, so a key's name inside a string value is never a key.
//!
//! The rules (case as JSON spells the APIs' fields):
//! 1. A key naming a server-side fetcher: [`FETCH_KEYS`] (Anthropic `mcp_servers`, OpenAI
//!    `server_url` and `web_search_options`, Gemini's search and URL-context tools).
//! 2. A `type` whose string value names a fetching tool or a URL source: `mcp`, `url`, or one
//!    starting `web_search` or `web_fetch` (Anthropic `web_fetch_20250910`, OpenAI
//!    `web_search_preview`).
//! 3. A URL-carrying key ([`URL_KEYS`]) whose string value, leading white space skipped, starts
//!    (in any case) with `http:`, `https:`, `ftp:`, `ws:`, `wss:` or `//`: a `data:` URL passes.
//! 4. OpenRouter's web search: an `id` of `web` (its web plugin) or a `model` ending `:online`.

/// Keys whose presence anywhere asks the provider to reach out.
pub const FETCH_KEYS: &[&str] = &[
    "mcp_servers",
    "server_url",
    "web_search_options",
    "googleSearch",
    "google_search",
    "googleSearchRetrieval",
    "google_search_retrieval",
    "urlContext",
    "url_context",
];

/// Keys whose value may be a URL the provider fetches.
pub const URL_KEYS: &[&str] = &[
    "url",
    "image_url",
    "file_url",
    "document_url",
    "fileUri",
    "file_uri",
];

/// URL starts that make a provider fetch (compared in lower case).
const FETCHED_SCHEMES: &[&str] = &["http:", "https:", "ftp:", "ws:", "wss:", "//"];

/// The longest key or value prefix kept: longer keys match none of the rules.
const KEEP: usize = 24;

/// What the scan found, for the refusal's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// A [`FETCH_KEYS`] key.
    Key(&'static str),
    /// A `type` naming a fetching tool or a URL source.
    Type(&'static str),
    /// A [`URL_KEYS`] key with a URL to fetch.
    Url(&'static str),
    /// OpenRouter's web search (`"id":"web"`, a `model` ending `:online`).
    WebSearch,
}

impl Finding {
    /// Said in a refusal.
    pub fn describe(self) -> String {
        match self {
            Finding::Key(k) => format!("the key \"{k}\""),
            Finding::Type(t) => format!("a \"type\" of \"{t}\""),
            Finding::Url(k) => format!("the key \"{k}\" with a URL to fetch"),
            Finding::WebSearch => {
                "OpenRouter's web search (an \"id\" of \"web\" or a model ending \":online\")"
                    .into()
            }
        }
    }
}

/// What the last key (before a `:`) means for the value after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Other,
    Type,
    Url(&'static str),
    Id,
    Model,
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
    /// After a string's closing quote, before the next token: key or value?
    AfterString,
}

/// The scan's state. Feed it with [`FetchScan::feed`], then [`FetchScan::finish`].
#[derive(Debug, Clone)]
pub struct FetchScan {
    lex: Lex,
    /// The string being read, unescaped, its first [`KEEP`] bytes.
    text: [u8; KEEP],
    len: usize,
    /// It had more than [`KEEP`] bytes.
    long: bool,
    /// Its last [`KEEP`] bytes, in order, once it is long (for `:online`).
    tail: [u8; KEEP],
    /// Leading white space of the string skipped so far (for URL values).
    leading: bool,
    /// The role of the value about to start (set by `key :`).
    pending: Role,
    /// The role of the string being read, when it is a value.
    role: Role,
    found: Option<Finding>,
}

impl Default for FetchScan {
    fn default() -> Self {
        FetchScan {
            lex: Lex::Outside,
            text: [0; KEEP],
            len: 0,
            long: false,
            tail: [0; KEEP],
            leading: true,
            pending: Role::Other,
            role: Role::Other,
            found: None,
        }
    }
}

impl FetchScan {
    /// Scans the next piece; the first finding, once there is one (later bytes are not read).
    pub fn feed(&mut self, bytes: &[u8]) -> Option<Finding> {
        let mut i = 0;
        while i < bytes.len() && self.found.is_none() {
            if self.lex == Lex::InString && self.long && self.role != Role::Model {
                // Past the kept prefix only the string's end matters: skip to a quote or escape.
                match bytes[i..].iter().position(|&b| b == b'"' || b == b'\\') {
                    Some(n) => i += n,
                    None => break,
                }
            }
            self.step(bytes[i]);
            i += 1;
        }
        self.found
    }

    /// The end of the body: a string value just closed is judged.
    pub fn finish(&mut self) -> Option<Finding> {
        if self.found.is_none() && self.lex == Lex::AfterString {
            self.value_ended();
        }
        self.found
    }

    fn step(&mut self, b: u8) {
        match self.lex {
            Lex::Outside => self.outside(b),
            Lex::InString => match b {
                b'\\' => self.lex = Lex::Escape,
                b'"' => self.lex = Lex::AfterString,
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
                    // Not JSON: keep the byte so nothing after it is missed.
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
            Lex::AfterString => match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b':' => {
                    self.key_ended();
                    self.lex = Lex::Outside;
                }
                _ => {
                    self.value_ended();
                    self.lex = Lex::Outside;
                    self.outside(b);
                }
            },
        }
    }

    fn outside(&mut self, b: u8) {
        match b {
            b'"' => {
                self.role = std::mem::replace(&mut self.pending, Role::Other);
                self.len = 0;
                self.long = false;
                self.leading = true;
                self.lex = Lex::InString;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            // Any other token ends the wait for the key's value: it is not a string.
            _ => self.pending = Role::Other,
        }
    }

    fn push(&mut self, b: u8) {
        if self.leading && self.role != Role::Other && b.is_ascii_whitespace() {
            return;
        }
        self.leading = false;
        if self.len < KEEP {
            self.text[self.len] = b;
            self.len += 1;
        } else {
            if !self.long {
                self.tail = self.text;
            }
            self.long = true;
            self.tail.copy_within(1.., 0);
            self.tail[KEEP - 1] = b;
        }
    }

    /// The string just read is a key: a fetch key is a finding; `type` and URL keys set the
    /// role of the value that follows.
    fn key_ended(&mut self) {
        if self.long {
            self.pending = Role::Other;
            return;
        }
        let key = &self.text[..self.len];
        if let Some(k) = FETCH_KEYS.iter().find(|k| k.as_bytes() == key) {
            self.found = Some(Finding::Key(k));
        }
        self.pending = if key == b"type" {
            Role::Type
        } else if key == b"id" {
            Role::Id
        } else if key == b"model" {
            Role::Model
        } else if let Some(k) = URL_KEYS.iter().find(|k| k.as_bytes() == key) {
            Role::Url(k)
        } else {
            Role::Other
        };
    }

    /// The string just read is a value: judged by its key's role.
    fn value_ended(&mut self) {
        let value = &self.text[..self.len];
        match self.role {
            Role::Type if !self.long && value == b"mcp" => self.found = Some(Finding::Type("mcp")),
            Role::Type if !self.long && value == b"url" => self.found = Some(Finding::Type("url")),
            Role::Type if value.starts_with(b"web_search") => {
                self.found = Some(Finding::Type("web_search…"))
            }
            Role::Type if value.starts_with(b"web_fetch") => {
                self.found = Some(Finding::Type("web_fetch…"))
            }
            Role::Id if !self.long && value == b"web" => self.found = Some(Finding::WebSearch),
            Role::Model if self.model_online() => self.found = Some(Finding::WebSearch),
            Role::Url(k) => {
                let lower = value.to_ascii_lowercase();
                if FETCHED_SCHEMES
                    .iter()
                    .any(|s| lower.starts_with(s.as_bytes()))
                {
                    self.found = Some(Finding::Url(k));
                }
            }
            _ => {}
        }
        self.role = Role::Other;
    }

    /// The `model` value just read ends `:online` (its last bytes are kept when it is long).
    fn model_online(&self) -> bool {
        let end = if self.long { self.tail } else { self.text };
        let len = if self.long { KEEP } else { self.len };
        end[..len].ends_with(b":online")
    }
}

#[cfg(test)]
mod tests;
