//! git's pkt-lines, as a push speaks them: the ref updates at the head of a
//! `git-receive-pack` request (read from bytes that may arrive in any split), and the report
//! the broker writes itself when it refuses a push, which git shows as `! [remote rejected]`.

/// The most ref updates one push may carry.
pub const MAX_COMMANDS: usize = 1000;
/// The longest pkt-line (its four length digits included).
const MAX_PKT: usize = 65520;

/// One ref update: old and new ids (all zeros: none) and the ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub old: String,
    pub new: String,
    pub name: String,
}

impl Command {
    pub fn creates(&self) -> bool {
        is_zero(&self.old)
    }

    pub fn deletes(&self) -> bool {
        is_zero(&self.new)
    }
}

/// The head of a push: its updates, the client's capabilities, whether its ids are SHA-256,
/// and where the rest (push options, then the pack) starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub commands: Vec<Command>,
    pub caps: Vec<String>,
    pub sha256: bool,
    pub rest: usize,
}

impl Head {
    pub fn has(&self, cap: &str) -> bool {
        self.caps.iter().any(|c| c == cap)
    }
}

fn is_zero(id: &str) -> bool {
    id.bytes().all(|b| b == b'0')
}

fn is_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64)
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// A pkt-line read: its payload (`None`: a flush) and where the next one starts.
type Pkt<'a> = (Option<&'a [u8]>, usize);

/// The pkt-line at `at`: `Ok(None)` when more bytes are needed, `Ok(Some((None, next)))` for a
/// flush, else its payload.
fn pkt(buf: &[u8], at: usize) -> Result<Option<Pkt<'_>>, String> {
    let Some(len) = buf.get(at..at + 4) else {
        return Ok(None);
    };
    let len = std::str::from_utf8(len)
        .ok()
        .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|s| usize::from_str_radix(s, 16).ok())
        .ok_or("a pkt-line length is not four hex digits")?;
    match len {
        0 => Ok(Some((None, at + 4))),
        1..=4 => Err(format!("pkt-line length {len} is not one a push sends")),
        _ if len > MAX_PKT => Err("a pkt-line is longer than git sends".into()),
        _ => Ok(buf.get(at + 4..at + len).map(|p| (Some(p), at + len))),
    }
}

/// The head of a `git-receive-pack` request from its first bytes: `Ok(None)` until the flush
/// that ends the updates has arrived. `shallow` lines before them are passed over; a signed
/// push (`push-cert`) is refused.
pub fn head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut at = 0;
    let mut commands = Vec::new();
    let mut caps = Vec::new();
    loop {
        let Some((line, next)) = pkt(buf, at)? else {
            return Ok(None);
        };
        at = next;
        let Some(line) = line else { break };
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        if line.starts_with(b"shallow ") && commands.is_empty() {
            continue;
        }
        if line.starts_with(b"push-cert") {
            return Err("signed pushes (push-cert) do not go through the broker".into());
        }
        let (text, more) = match line.iter().position(|b| *b == 0) {
            Some(nul) if commands.is_empty() => (&line[..nul], Some(&line[nul + 1..])),
            Some(_) => return Err("capabilities after the first update".into()),
            None => (line, None),
        };
        if let Some(more) = more {
            caps = String::from_utf8_lossy(more)
                .split(' ')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
        }
        let text = std::str::from_utf8(text).map_err(|_| "an update is not UTF-8")?;
        let mut parts = text.splitn(3, ' ');
        let (Some(old), Some(new), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("{text:?} is not <old> <new> <ref>"));
        };
        if !is_id(old) || !is_id(new) || old.len() != new.len() {
            return Err(format!("{text:?} does not name two object ids"));
        }
        if name.is_empty() || name.len() > 1024 || name.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!("{name:?} is not a ref name"));
        }
        commands.push(Command {
            old: old.into(),
            new: new.into(),
            name: name.into(),
        });
        if commands.len() > MAX_COMMANDS {
            return Err(format!("more than {MAX_COMMANDS} updates in one push"));
        }
    }
    let sha256 = commands.first().is_some_and(|c| c.old.len() == 64);
    Ok(Some(Head {
        commands,
        caps,
        sha256,
        rest: at,
    }))
}

/// Where the pack starts after the head: past the push options (a second flush-ended list)
/// when the client sends them.
pub fn pack_start(buf: &[u8], head: &Head) -> Result<usize, String> {
    if !head.has("push-options") {
        return Ok(head.rest);
    }
    let mut at = head.rest;
    loop {
        match pkt(buf, at)? {
            None => return Err("the push ends inside its options".into()),
            Some((None, next)) => return Ok(next),
            Some((Some(_), next)) => at = next,
        }
    }
}

/// One pkt-line of `payload`.
pub fn line(payload: &[u8]) -> Vec<u8> {
    let mut out = format!("{:04x}", payload.len() + 4).into_bytes();
    out.extend_from_slice(payload);
    out
}

/// The report git reads after a push the broker refused: `unpack ok`, then `ng <ref> <why>` for
/// each update (`refused` names its own reason, the others that the push was refused), in the
/// side band when the client asked for one, with `message` shown as `remote:` lines.
pub fn refusal_report(head: &Head, refused: &[(String, String)], message: &str) -> Vec<u8> {
    let mut report = line(b"unpack ok\n");
    for c in &head.commands {
        let why = refused
            .iter()
            .find(|(name, _)| *name == c.name)
            .map_or("another update of this push was refused", |(_, why)| why);
        let why: String = why.chars().filter(|ch| *ch != '\n').collect();
        report.extend(line(format!("ng {} {why}\n", c.name).as_bytes()));
    }
    report.extend_from_slice(b"0000");
    let band = if head.has("side-band-64k") {
        Some(65515)
    } else if head.has("side-band") {
        Some(995)
    } else {
        None
    };
    let Some(max) = band else { return report };
    let mut out = Vec::new();
    for l in message.lines() {
        let mut payload = vec![2u8];
        payload.extend_from_slice(format!("{l}\n").as_bytes());
        payload.truncate(max);
        out.extend(line(&payload));
    }
    for chunk in report.chunks(max) {
        let mut payload = vec![1u8];
        payload.extend_from_slice(chunk);
        out.extend(line(&payload));
    }
    out.extend_from_slice(b"0000");
    out
}
