//! Where a git host's credential comes from, on the host, in this order: the person's own
//! `git credential fill` for the host's origin (their credential helper or keychain; never
//! prompting), then `GH_TOKEN` / `GITHUB_TOKEN` (github.com) or `GITLAB_TOKEN` (gitlab.com),
//! then the command in `PO_SANDBOX_GIT_CREDENTIAL_COMMAND` (run by `sh -c` with the host's name
//! as `$1`; it prints a token, or `username=`/`password=` lines). A credential found is kept for
//! [`KEEP`] (none found, for [`KEEP_NONE`]) and asked again after that, or at once when the host
//! refuses it, so a rotated token is used without the container noticing.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::GitHost;
use crate::broker::secret::Secret;
use crate::lock::Locked;

/// How long a credential found is used before it is asked for again.
pub const KEEP: Duration = Duration::from_secs(300);
/// How long "none found" is kept.
pub const KEEP_NONE: Duration = Duration::from_secs(30);
/// A credential found is kept at least this long, whatever the host says of it (so a
/// container cannot make the host's sources run without end).
pub const MIN_KEPT: Duration = Duration::from_secs(1);
/// How long one source may take.
const SOURCE_TIMEOUT: Duration = Duration::from_secs(10);
/// The variable naming a credential command.
pub const COMMAND_VAR: &str = "PO_SANDBOX_GIT_CREDENTIAL_COMMAND";

/// A host's credential and where it came from (never the secret itself in `source`).
#[derive(Clone)]
pub struct Credential {
    pub username: String,
    pub password: Secret,
    pub source: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}, from {})", self.username, self.source)
    }
}

impl Credential {
    /// The `Authorization` value the host gets.
    pub fn basic(&self) -> String {
        basic(&self.username, self.password.expose())
    }
}

/// `Basic base64(user:password)`.
pub fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}").into_bytes();
    let mut out = String::from("Basic ");
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(match i <= chunk.len() {
                true => ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char,
                false => '=',
            });
        }
    }
    out
}

/// The bytes of a base64 text (standard alphabet, padding optional); `None` when it is not one.
pub fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return None,
        }
    }
    Some(out)
}

/// The host credentials a broker has found, by host (name and origin).
pub struct Credentials {
    env: HashMap<String, String>,
    found: Mutex<HashMap<String, (Option<Credential>, Instant)>>,
    /// One search at a time (a burst of requests asks the sources once).
    searching: tokio::sync::Mutex<()>,
}

impl Credentials {
    /// Sources run with `env` (the hub's environment record) as their whole environment.
    pub fn new(env: HashMap<String, String>) -> Credentials {
        Credentials {
            env,
            found: Mutex::new(HashMap::new()),
            searching: tokio::sync::Mutex::new(()),
        }
    }

    /// The credential for `host`, from what was found lately or from its sources now.
    pub async fn get(&self, host: &GitHost) -> Option<Credential> {
        if let Some(c) = self.kept(host) {
            return c;
        }
        let _one = self.searching.lock().await;
        if let Some(c) = self.kept(host) {
            return c;
        }
        let found = self.find(host).await;
        self.found
            .locked()
            .insert(host.entry(), (found.clone(), Instant::now()));
        found
    }

    /// What was found for `host` lately, while it is kept.
    fn kept(&self, host: &GitHost) -> Option<Option<Credential>> {
        let found = self.found.locked();
        let (c, at) = found.get(&host.entry())?;
        let keep = if c.is_some() { KEEP } else { KEEP_NONE };
        (at.elapsed() < keep).then(|| c.clone())
    }

    /// Forgets the credential found for `host` (the host refused it as not valid), unless it
    /// was found in the last [`MIN_KEPT`]; "none found" is kept its whole time.
    pub fn forget(&self, host: &GitHost) {
        let mut found = self.found.locked();
        if found
            .get(&host.entry())
            .is_some_and(|(c, at)| c.is_some() && at.elapsed() >= MIN_KEPT)
        {
            found.remove(&host.entry());
        }
    }

    async fn find(&self, host: &GitHost) -> Option<Credential> {
        if let Some(c) = self.fill(host).await {
            return Some(c);
        }
        for var in token_vars(&host.origin) {
            if let Some(token) = self
                .env
                .get(*var)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
            {
                let username = match host.name.as_str() {
                    "gitlab.com" => "oauth2",
                    _ => "x-access-token",
                };
                return Some(Credential {
                    username: username.into(),
                    password: Secret::new(token),
                    source: (*var).to_string(),
                });
            }
        }
        self.command(host).await
    }

    /// `git credential fill` for the host's origin, with every prompt off.
    async fn fill(&self, host: &GitHost) -> Option<Credential> {
        let (protocol, authority) = host.origin.split_once("://")?;
        let mut cmd = tokio::process::Command::new("git");
        cmd.args(["-c", "core.askPass=", "credential", "fill"]);
        let input = format!("protocol={protocol}\nhost={authority}\n\n");
        let out = self.run(cmd, &input).await?;
        let c = parse(&out, "git credential fill")?;
        (!c.username.is_empty()).then_some(c)
    }

    /// The configured command, when there is one.
    async fn command(&self, host: &GitHost) -> Option<Credential> {
        let command = self
            .env
            .get(COMMAND_VAR)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())?;
        let mut cmd = tokio::process::Command::new("sh");
        cmd.args(["-c", command, "po-git-credential", &host.name]);
        let out = self.run(cmd, "").await?;
        let source = COMMAND_VAR.to_string();
        match out.contains("password=") {
            true => parse(&out, &source).map(|c| Credential {
                username: if c.username.is_empty() {
                    "x-access-token".into()
                } else {
                    c.username
                },
                ..c
            }),
            false => Some(out.trim())
                .filter(|t| !t.is_empty() && !t.contains('\n'))
                .map(|t| Credential {
                    username: "x-access-token".into(),
                    password: Secret::new(t),
                    source,
                }),
        }
    }

    /// Runs `cmd` with the hub's environment, `input` on its stdin; its stdout when it
    /// succeeds within [`SOURCE_TIMEOUT`].
    async fn run(&self, mut cmd: tokio::process::Command, input: &str) -> Option<String> {
        // Not in the hub's folder (which may be a repository with its own config).
        let neutral = self.env.get("HOME").filter(|h| h.starts_with('/'));
        cmd.current_dir(neutral.map_or("/", String::as_str))
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // No prompt, whatever the record says: no terminal, no askpass program, no window.
        for (k, v) in [
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_ASKPASS", ""),
            ("SSH_ASKPASS", ""),
            ("GCM_INTERACTIVE", "never"),
        ] {
            cmd.env(k, v);
        }
        let work = async {
            let mut child = cmd.spawn().ok()?;
            let mut stdin = child.stdin.take()?;
            let _ = stdin.write_all(input.as_bytes()).await;
            drop(stdin);
            let mut out = String::new();
            child.stdout.take()?.read_to_string(&mut out).await.ok()?;
            child.wait().await.ok()?.success().then_some(out)
        };
        tokio::time::timeout(SOURCE_TIMEOUT, work)
            .await
            .ok()
            .flatten()
    }
}

/// `username=` / `password=` lines.
fn parse(out: &str, source: &str) -> Option<Credential> {
    let get = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .map(str::to_string)
    };
    let password = get("password").filter(|p| !p.is_empty())?;
    Some(Credential {
        username: get("username").unwrap_or_default(),
        password: Secret::new(password),
        source: source.to_string(),
    })
}

/// The token variables for a git host's origin, in order: only for github.com's and
/// gitlab.com's own origins (never a host mapped elsewhere).
pub fn token_vars(origin: &str) -> &'static [&'static str] {
    match origin {
        "https://github.com" => &["GH_TOKEN", "GITHUB_TOKEN"],
        "https://gitlab.com" => &["GITLAB_TOKEN"],
        _ => &[],
    }
}
