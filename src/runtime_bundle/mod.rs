//! The Linux Po runtime bundle: where it lives, and whether its container-runtime.json is valid.
//!
//! A bundle is a folder `<poHome>/container-runtime/<version>/` that is bind-mounted read-only at
//! [`MOUNT_POINT`] in every sandbox container. Its [`FILE_NAME`] says how to start the contained
//! server. The file comes from outside the layer, so every value is checked by hand against
//! explicit rules before any of it reaches a container's command line or environment, and each
//! failure names the key at fault and what is expected.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The mount point of the bundle folder inside the container; every path in the file lies below it.
pub const MOUNT_POINT: &str = "/opt/po";

/// The bundle's description file, directly inside the version folder.
pub const FILE_NAME: &str = "container-runtime.json";

/// The cap on [`FILE_NAME`]'s size: the file is a short description, and anything bigger is a
/// mistake that should not be read into memory.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The folder under a Po home that holds one sub-folder per bundle version.
pub const ROOT_DIR_NAME: &str = "container-runtime";

/// The health path used when the file names none.
pub const DEFAULT_HEALTH_PATH: &str = "/api/health";

/// The interpreter used when the file names none: `node` from the image's `PATH`.
pub const DEFAULT_INTERPRETER: &str = "node";

/// The keys the file may hold; anything else is refused so that typos do not pass silently.
pub const KNOWN_KEYS: [&str; 6] = ["entry", "port", "args", "env", "healthPath", "interpreter"];

/// Variables the layer sets itself in every container; the bundle may not override them.
pub const RESERVED_ENV: [&str; 8] = [
    "PO_SANDBOX",
    "PO_HOME",
    "PO_WORKSPACE",
    "PO_SANDBOX_TOKEN_FILE",
    "PO_BROKER_PROVIDERS",
    "PO_BROKER_SOCKET",
    "PO_BROKER_ADDRESS",
    "HOME",
];

/// Every variable with this prefix is the broker's, set by the layer (today
/// `PO_BROKER_PROVIDERS`, `PO_BROKER_SOCKET`, `PO_BROKER_ADDRESS`).
pub const RESERVED_ENV_PREFIX: &str = "PO_BROKER_";

/// The most `args` items, so that a command line stays well within exec limits.
pub const MAX_ARGS: usize = 64;
/// The most bytes in one `args` item.
pub const MAX_ARG_BYTES: usize = 4096;
/// The most `env` entries.
pub const MAX_ENV_ENTRIES: usize = 128;
/// The most bytes in one `env` value.
pub const MAX_ENV_VALUE_BYTES: usize = 32 * 1024;
/// The most bytes in `healthPath`.
pub const MAX_HEALTH_PATH_BYTES: usize = 1024;
/// The most characters in a version folder name.
pub const MAX_VERSION_CHARS: usize = 64;

/// The `key` of errors about the file as a whole rather than one of its keys.
const FILE_KEY: &str = "(file)";

/// The validated contents of a container-runtime.json, without where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRuntime {
    /// The server's entry script: a normalised absolute path below [`MOUNT_POINT`].
    pub entry: String,
    /// The port the contained server listens on.
    pub port: u16,
    /// Arguments after the entry script.
    pub args: Vec<String>,
    /// Extra variables for the server; never one of [`RESERVED_ENV`].
    pub env: BTreeMap<String, String>,
    /// The HTTP path that answers once the server is up.
    pub health_path: String,
    /// A normalised absolute path below [`MOUNT_POINT`], or `None` for [`DEFAULT_INTERPRETER`].
    pub interpreter: Option<String>,
}

/// A validated runtime bundle: where it was found, and what its file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeBundle {
    /// The version folder's name.
    pub version: String,
    /// The host folder mounted at [`MOUNT_POINT`].
    pub dir: PathBuf,
    /// The container-runtime.json that was read.
    pub json_path: PathBuf,
    /// The checked contents of that file.
    pub server: ParsedRuntime,
}

impl RuntimeBundle {
    /// Joins where a bundle was found with what its file says.
    pub fn new(version: String, dir: PathBuf, json_path: PathBuf, server: ParsedRuntime) -> Self {
        RuntimeBundle {
            version,
            dir,
            json_path,
            server,
        }
    }

    /// The interpreter that runs the entry: the bundle's, or [`DEFAULT_INTERPRETER`].
    pub fn interpreter(&self) -> &str {
        self.server
            .interpreter
            .as_deref()
            .unwrap_or(DEFAULT_INTERPRETER)
    }

    /// The container's command: interpreter, entry, args.
    pub fn command(&self) -> Vec<String> {
        let s = &self.server;
        let mut cmd = Vec::with_capacity(2 + s.args.len());
        cmd.push(self.interpreter().to_string());
        cmd.push(s.entry.clone());
        cmd.extend(s.args.iter().cloned());
        cmd
    }
}

/// Where bundles live under a Po home.
pub fn runtime_root(po_home: &Path) -> PathBuf {
    po_home.join(ROOT_DIR_NAME)
}

/// Whether `version` can be a bundle folder name: one path segment of `[A-Za-z0-9._+-]`, not
/// starting with '.', at most [`MAX_VERSION_CHARS`] long. This keeps `..`, separators and hidden
/// or temporary folders out of the path that gets mounted into containers.
pub fn is_safe_version(version: &str) -> bool {
    !version.is_empty()
        && version.len() <= MAX_VERSION_CHARS
        && !version.starts_with('.')
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// Orders version folder names so that the newest sorts last: dot-separated parts compare
/// numerically when both are digits (`1.10.0` > `1.9.3`), otherwise as strings; a name with
/// more parts wins a tie, and names equal so far (`1.01` vs `1.1`) fall back to string order so
/// that the order is total and the pick deterministic.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let (mut pa, mut pb) = (a.split('.'), b.split('.'));
    loop {
        match (pa.next(), pb.next()) {
            (None, None) => return a.cmp(b),
            (Some(_), None) => return Ordering::Greater,
            (None, Some(_)) => return Ordering::Less,
            (Some(x), Some(y)) => {
                let o = compare_part(x, y);
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

fn compare_part(x: &str, y: &str) -> Ordering {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if numeric(x) && numeric(y) {
        // Compare without parsing so that no part is too long to compare.
        let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
        x.len().cmp(&y.len()).then_with(|| x.cmp(y))
    } else {
        x.cmp(y)
    }
}

/// Finds and validates the bundle: `version`'s folder when given, else the highest version
/// under [`runtime_root`]. Fails with `RUNTIME_NOT_INSTALLED` naming the exact path looked at
/// when there is none, and with `RUNTIME_INVALID` when the version name or the file breaks a rule.
pub fn locate(po_home: &Path, version: Option<&str>) -> Result<RuntimeBundle> {
    let root = runtime_root(po_home);
    let version = match version {
        Some(v) if is_safe_version(v) => v.to_string(),
        Some(v) => {
            return Err(invalid(
                &root,
                "version",
                format!(
                    "{} is not a safe folder name: use 1 to {MAX_VERSION_CHARS} characters from A-Z, a-z, 0-9, '.', '_', '+', '-', not starting with '.'",
                    shown(v)
                ),
            ));
        }
        None => highest_version(&root)?,
    };
    let dir = root.join(&version);
    let json_path = dir.join(FILE_NAME);
    let bytes = read_capped(&json_path)?;
    let parsed = parse(&json_path, &bytes)?;
    Ok(RuntimeBundle::new(version, dir, json_path, parsed))
}

/// The newest safe-named folder under `root`.
fn highest_version(root: &Path) -> Result<String> {
    let not_installed = || Error::RuntimeNotInstalled {
        path: root.join("<version>").join(FILE_NAME),
    };
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if is_missing(&e) => return Err(not_installed()),
        Err(e) => {
            return Err(invalid(root, "(folder)", format!("cannot be listed: {e}")));
        }
    };
    let mut best: Option<String> = None;
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        // Follows links, so a version folder may be a link to a folder.
        if !is_safe_version(&name) || !entry.path().is_dir() {
            continue;
        }
        if best
            .as_deref()
            .is_none_or(|b| compare_versions(&name, b) == Ordering::Greater)
        {
            best = Some(name);
        }
    }
    best.ok_or_else(not_installed)
}

fn is_missing(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// Reads `json_path` when it is a regular file (not a link) of at most [`MAX_FILE_BYTES`].
fn read_capped(json_path: &Path) -> Result<Vec<u8>> {
    let not_installed = || Error::RuntimeNotInstalled {
        path: json_path.to_path_buf(),
    };
    let file_err = |rule: String| invalid(json_path, FILE_KEY, rule);
    let meta = match fs::symlink_metadata(json_path) {
        Ok(m) => m,
        Err(e) if is_missing(&e) => return Err(not_installed()),
        Err(e) => return Err(file_err(format!("cannot be read: {e}"))),
    };
    if meta.file_type().is_symlink() {
        return Err(file_err("must be a regular file, not a link".into()));
    }
    if !meta.is_file() {
        return Err(file_err("must be a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(file_err(too_big(meta.len())));
    }
    let mut opts = fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        // Refuse a link swapped in after the check above.
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW);
    }
    let file = match opts.open(json_path) {
        Ok(f) => f,
        Err(e) if is_missing(&e) => return Err(not_installed()),
        Err(e) => return Err(file_err(format!("cannot be opened: {e}"))),
    };
    // The file may have grown since the check: read one byte past the cap to notice.
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_err(format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(file_err(too_big(bytes.len() as u64)));
    }
    Ok(bytes)
}

fn too_big(len: u64) -> String {
    if len > MAX_FILE_BYTES + 1 {
        format!("is {len} bytes; the limit is {MAX_FILE_BYTES} bytes (64 KiB)")
    } else {
        format!("is over the limit of {MAX_FILE_BYTES} bytes (64 KiB)")
    }
}

/// Validates container-runtime.json bytes (pure; `path` only for messages). The first rule
/// broken is reported as `RUNTIME_INVALID` with the key at fault (`entry`, `args[2]`,
/// `env.FOO`…) or `(file)`. A leading UTF-8 byte order mark is ignored, as RFC 8259 allows.
pub fn parse(json_path: &Path, bytes: &[u8]) -> Result<ParsedRuntime> {
    let file_err = |rule: String| invalid(json_path, FILE_KEY, rule);
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(file_err(too_big(bytes.len() as u64)));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| {
        file_err(format!(
            "is not valid UTF-8 (first bad byte at offset {}); save it as UTF-8 JSON",
            e.valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(file_err(
            "is empty; it must hold a JSON object with at least entry and port".into(),
        ));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| file_err(format!("is not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(file_err(format!(
            "must hold a JSON object at the top level, found {}",
            kind(&value)
        )));
    };
    check(&obj).map_err(|(key, rule)| invalid(json_path, key, rule))
}

/// A broken rule: the key at fault and what is wrong with it.
type Broken = (String, String);

fn check(obj: &Map<String, Value>) -> std::result::Result<ParsedRuntime, Broken> {
    check_known_keys(obj)?;
    let entry = parse_entry(obj.get("entry"))?;
    let port = parse_port(obj.get("port"))?;
    let args = parse_args(obj.get("args"))?;
    let env = parse_env(obj.get("env"))?;
    let health_path = parse_health_path(obj.get("healthPath"))?;
    let interpreter = parse_interpreter(obj.get("interpreter"))?;
    Ok(ParsedRuntime {
        entry,
        port,
        args,
        env,
        health_path,
        interpreter,
    })
}

fn broken(key: &str, rule: String) -> Broken {
    (key.to_string(), rule)
}

/// Refuses the first unknown key in sorted order, so that typos do not pass silently.
fn check_known_keys(obj: &Map<String, Value>) -> std::result::Result<(), Broken> {
    let mut unknown: Vec<&String> = obj
        .keys()
        .filter(|k| !KNOWN_KEYS.contains(&k.as_str()))
        .collect();
    unknown.sort();
    if let Some(k) = unknown.first() {
        return Err((
            shown_key(k),
            format!(
                "is not a known key; the known keys are {}",
                KNOWN_KEYS.join(", ")
            ),
        ));
    }
    Ok(())
}

/// `entry`: required, a file path below [`MOUNT_POINT`].
fn parse_entry(value: Option<&Value>) -> std::result::Result<String, Broken> {
    match value {
        None => Err(broken(
            "entry",
            format!(
                "is required: the absolute path of the server's entry script inside {MOUNT_POINT}, e.g. {MOUNT_POINT}/server/main.js"
            ),
        )),
        Some(v) => mounted_path("entry", v),
    }
}

/// `port`: required, 1 to 65535.
fn parse_port(value: Option<&Value>) -> std::result::Result<u16, Broken> {
    const PORT_RULE: &str =
        "must be a whole number from 1 to 65535: the port the server listens on";
    match value {
        None => Err(broken("port", format!("is required; it {PORT_RULE}"))),
        Some(v) => v
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|&n| n != 0)
            .ok_or_else(|| broken("port", format!("{PORT_RULE}, got {}", brief(v)))),
    }
}

/// `args`: optional, at most [`MAX_ARGS`] strings of at most [`MAX_ARG_BYTES`] each.
fn parse_args(value: Option<&Value>) -> std::result::Result<Vec<String>, Broken> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            if items.len() > MAX_ARGS {
                return Err(broken(
                    "args",
                    format!("has {} items; the limit is {MAX_ARGS}", items.len()),
                ));
            }
            let mut args = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                args.push(bounded_string(format!("args[{i}]"), item, MAX_ARG_BYTES)?);
            }
            Ok(args)
        }
        Some(v) => Err(broken(
            "args",
            format!("must be an array of strings, got {}", kind(v)),
        )),
    }
}

/// `env`: optional, at most [`MAX_ENV_ENTRIES`] variables, each checked by [`parse_env_entry`].
fn parse_env(value: Option<&Value>) -> std::result::Result<BTreeMap<String, String>, Broken> {
    match value {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(vars)) => {
            if vars.len() > MAX_ENV_ENTRIES {
                return Err(broken(
                    "env",
                    format!("has {} entries; the limit is {MAX_ENV_ENTRIES}", vars.len()),
                ));
            }
            let mut env = BTreeMap::new();
            for (name, value) in vars {
                env.insert(name.clone(), parse_env_entry(name, value)?);
            }
            Ok(env)
        }
        Some(v) => Err(broken(
            "env",
            format!(
                "must be an object of variable names to string values, got {}",
                kind(v)
            ),
        )),
    }
}

/// One `env` variable: a valid name, not reserved, with a bounded string value.
fn parse_env_entry(name: &str, value: &Value) -> std::result::Result<String, Broken> {
    let key = format!("env.{}", shown_key(name));
    if !is_env_name(name) {
        return Err((
            key,
            "is not a valid variable name: use letters, digits and '_', not starting with a digit"
                .into(),
        ));
    }
    if RESERVED_ENV.contains(&name) || name.starts_with(RESERVED_ENV_PREFIX) {
        return Err((
            key,
            format!(
                "is set by the sandbox layer itself and cannot be overridden; reserved names: {}, {RESERVED_ENV_PREFIX}*",
                RESERVED_ENV.join(", ")
            ),
        ));
    }
    bounded_string(key, value, MAX_ENV_VALUE_BYTES)
}

/// `healthPath`: optional ([`DEFAULT_HEALTH_PATH`]), checked by [`check_health_path`].
fn parse_health_path(value: Option<&Value>) -> std::result::Result<String, Broken> {
    match value {
        None => Ok(DEFAULT_HEALTH_PATH.to_string()),
        Some(Value::String(s)) => {
            check_health_path(s).map_err(|rule| broken("healthPath", rule.to_string()))?;
            Ok(s.clone())
        }
        Some(v) => Err(broken(
            "healthPath",
            format!(
                "must be a string such as {DEFAULT_HEALTH_PATH} (omit it for that default), got {}",
                kind(v)
            ),
        )),
    }
}

/// `interpreter`: optional, a file path below [`MOUNT_POINT`].
fn parse_interpreter(value: Option<&Value>) -> std::result::Result<Option<String>, Broken> {
    value.map(|v| mounted_path("interpreter", v)).transpose()
}

/// Checks a path value and normalises it: absolute, below [`MOUNT_POINT`], naming a file, with
/// no `..` segment at all (even one that would normalise back inside), no NUL; empty and `.`
/// segments are dropped.
fn mounted_path(key: &str, value: &Value) -> std::result::Result<String, Broken> {
    let broken = |rule: String| (key.to_string(), rule);
    let expected = format!("an absolute file path inside {MOUNT_POINT}");
    let Value::String(raw) = value else {
        return Err(broken(format!(
            "must be a string: {expected}, got {}",
            kind(value)
        )));
    };
    if raw.is_empty() {
        return Err(broken(format!("must not be empty: give {expected}")));
    }
    if raw.contains('\0') {
        return Err(broken("must not contain a NUL character".into()));
    }
    if !raw.starts_with('/') {
        return Err(broken(format!(
            "must be {expected} (where the bundle is mounted), got relative path {}",
            shown(raw)
        )));
    }
    if raw.split('/').any(|s| s == "..") {
        return Err(broken(format!(
            "must not contain a '..' segment, got {}",
            shown(raw)
        )));
    }
    let segments: Vec<&str> = raw
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let normalised = format!("/{}", segments.join("/"));
    if normalised == MOUNT_POINT {
        return Err(broken(format!(
            "must name a file below {MOUNT_POINT}, not {MOUNT_POINT} itself"
        )));
    }
    let mount: Vec<&str> = MOUNT_POINT.split('/').filter(|s| !s.is_empty()).collect();
    if !segments.starts_with(&mount) {
        return Err(broken(format!(
            "must be inside {MOUNT_POINT} (where the bundle is mounted), got {}",
            shown(raw)
        )));
    }
    if raw.ends_with('/') || raw.ends_with("/.") {
        return Err(broken(format!(
            "must name a file, not a folder, got {}",
            shown(raw)
        )));
    }
    Ok(normalised)
}

/// Why a `healthPath` cannot go into an HTTP request line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BadHealthPath {
    /// It does not start with `/`.
    NotRooted(String),
    /// It starts with `//`.
    HostLike,
    /// Over [`MAX_HEALTH_PATH_BYTES`]; its length.
    TooLong(usize),
    /// It has a `#`.
    Fragment,
    /// A space, a control character or non-ASCII.
    NotPrintable(String),
}

impl std::fmt::Display for BadHealthPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadHealthPath::NotRooted(s) => write!(
                f,
                "must start with '/', e.g. {DEFAULT_HEALTH_PATH}, got {}",
                shown(s)
            ),
            BadHealthPath::HostLike => {
                f.write_str("must not start with '//', which would read as a host name")
            }
            BadHealthPath::TooLong(len) => {
                write!(f, "is {len} bytes; the limit is {MAX_HEALTH_PATH_BYTES}")
            }
            BadHealthPath::Fragment => {
                f.write_str("must not contain '#': a fragment is never sent to the server")
            }
            BadHealthPath::NotPrintable(s) => write!(
                f,
                "must be printable ASCII without spaces or control characters (percent-encode anything else), got {}",
                shown(s)
            ),
        }
    }
}

impl std::error::Error for BadHealthPath {}

/// Checks `healthPath`: it goes verbatim into an HTTP request line, so it must be an
/// origin-form path of printable ASCII.
fn check_health_path(s: &str) -> std::result::Result<(), BadHealthPath> {
    if !s.starts_with('/') {
        return Err(BadHealthPath::NotRooted(s.to_string()));
    }
    if s.starts_with("//") {
        return Err(BadHealthPath::HostLike);
    }
    if s.len() > MAX_HEALTH_PATH_BYTES {
        return Err(BadHealthPath::TooLong(s.len()));
    }
    if s.contains('#') {
        return Err(BadHealthPath::Fragment);
    }
    if !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(BadHealthPath::NotPrintable(s.to_string()));
    }
    Ok(())
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`.
fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn invalid(path: &Path, key: impl Into<String>, rule: impl Into<String>) -> Error {
    Error::RuntimeInvalid {
        path: path.to_path_buf(),
        key: key.into(),
        rule: rule.into(),
    }
}

/// A JSON value's type, as the messages name it.
/// A string value of at most `max` bytes without NUL, or the key and the rule it breaks.
fn bounded_string(
    key: String,
    value: &Value,
    max: usize,
) -> std::result::Result<String, (String, String)> {
    let Value::String(s) = value else {
        return Err((key, format!("must be a string, got {}", kind(value))));
    };
    if s.len() > max {
        return Err((key, format!("is {} bytes; the limit is {max}", s.len())));
    }
    if s.contains('\0') {
        return Err((key, "must not contain a NUL character".into()));
    }
    Ok(s.clone())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value for a message: numbers as written, anything else by its type.
fn brief(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string {}", shown(s)),
        _ => kind(v).to_string(),
    }
}

/// A user string for a message: quoted, escaped, and cut short.
fn shown(s: &str) -> String {
    const MAX: usize = 120;
    if s.chars().count() > MAX {
        let cut: String = s.chars().take(MAX).collect();
        format!("'{}…'", cut.escape_debug())
    } else {
        format!("'{}'", s.escape_debug())
    }
}

/// A user-supplied key for an error's `key`: escaped and cut short, but unquoted.
fn shown_key(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() > MAX {
        let cut: String = s.chars().take(MAX).collect();
        format!("{}…", cut.escape_debug())
    } else {
        s.escape_debug().to_string()
    }
}

pub(crate) mod demo;

#[cfg(test)]
mod tests;

/// The digest of a runtime bundle's folder (what names its volume on an engine on another
/// machine) as its files are (names, kinds, sizes, modes and
/// times; not their bytes: a bundle is installed whole, not edited), 12 hex digits.
pub fn files_digest(dir: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> =
            std::fs::read_dir(dir.join(&rel))?.collect::<std::io::Result<Vec<_>>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let meta = std::fs::symlink_metadata(e.path())?;
            let path = rel.join(e.file_name());
            let when = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            let line = format!(
                "{}\0{}\0{}\0{}\0{}\n",
                path.to_string_lossy(),
                kind_of(&meta),
                meta.len(),
                mode_of(&meta),
                when.map_or(0, |d| d.as_nanos())
            );
            h.update(line.as_bytes());
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(hex::encode(&h.finalize()[..6]))
}

/// `d`, `l` or `f`.
fn kind_of(meta: &std::fs::Metadata) -> char {
    match () {
        _ if meta.is_dir() => 'd',
        _ if meta.file_type().is_symlink() => 'l',
        _ => 'f',
    }
}

/// A file's permission bits (elsewhere than Unix: the usual ones for its kind).
pub(crate) fn mode_of(meta: &std::fs::Metadata) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.mode() & 0o7777
    }
    #[cfg(not(unix))]
    {
        if meta.is_dir() { 0o755 } else { 0o644 }
    }
}
