//! The connection's bytes as the client wrote them, followed request by request (head, then a
//! Content-Length or chunked body), so the broker can refuse what hyper resolves silently: a
//! bare-LF head (where hyper drops Content-Length beside Transfer-Encoding), Content-Length with
//! Transfer-Encoding, a head over the bound however it arrives, obsolete line folding.
//! [`Framing`] is pure; [`Watched`] feeds it every byte hyper reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Bound on a request's head (request line and header fields), and on a chunked body's trailer.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A framing rule a connection broke. Once broken, every later request on it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FramingFault {
    /// A line of the head ends in LF without CR.
    BareLf = 1,
    /// The head is over [`MAX_HEAD_BYTES`].
    HeadTooLarge,
    /// A header line starts with a space or tab (obsolete line folding).
    Folded,
    /// A header line without a name and colon, or with space before the colon.
    MalformedHeader,
    /// Content-Length and Transfer-Encoding both.
    LengthAndChunked,
    /// Content-Length more than once.
    LengthRepeated,
    /// A Content-Length that is not one decimal number.
    LengthInvalid,
    /// A Transfer-Encoding other than exactly `chunked`, or more than one.
    NotChunked,
    /// A chunk size line, a chunk's end or a trailer that is not well formed.
    BadChunk,
}

impl FramingFault {
    const ALL: [FramingFault; 9] = [
        FramingFault::BareLf,
        FramingFault::HeadTooLarge,
        FramingFault::Folded,
        FramingFault::MalformedHeader,
        FramingFault::LengthAndChunked,
        FramingFault::LengthRepeated,
        FramingFault::LengthInvalid,
        FramingFault::NotChunked,
        FramingFault::BadChunk,
    ];

    fn from_u8(v: u8) -> Option<FramingFault> {
        FramingFault::ALL.into_iter().find(|f| *f as u8 == v)
    }

    /// What the client is told.
    pub fn describe(self) -> &'static str {
        match self {
            FramingFault::BareLf => "the request head has a line ending in LF without CR",
            FramingFault::HeadTooLarge => "the request head is over 64 KiB",
            FramingFault::Folded => "a header line is folded (starts with a space or tab)",
            FramingFault::MalformedHeader => "a header line is not 'name: value'",
            FramingFault::LengthAndChunked => "both Content-Length and Transfer-Encoding are set",
            FramingFault::LengthRepeated => "more than one Content-Length",
            FramingFault::LengthInvalid => "a Content-Length that is not one decimal number",
            FramingFault::NotChunked => "a Transfer-Encoding other than one 'chunked'",
            FramingFault::BadChunk => "a malformed chunked body",
        }
    }
}

/// Where in a request the next byte falls.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Collecting a head into the buffer.
    Head,
    /// This many body bytes to go.
    Body(u64),
    /// A chunk size line (collected in the buffer).
    ChunkSize,
    /// This many chunk data bytes to go.
    ChunkData(u64),
    /// The CRLF after a chunk's data: how many of its two bytes were seen.
    ChunkEnd(u8),
    /// The trailer section after the last chunk (collected in the buffer).
    Trailer,
    /// A rule was broken: nothing more is followed.
    Failed(FramingFault),
}

/// Follows one connection's requests byte by byte.
#[derive(Debug)]
pub struct Framing {
    state: State,
    buf: Vec<u8>,
}

impl Default for Framing {
    fn default() -> Self {
        Framing {
            state: State::Head,
            buf: Vec::new(),
        }
    }
}

impl Framing {
    /// The fault found so far, if any.
    pub fn fault(&self) -> Option<FramingFault> {
        match self.state {
            State::Failed(f) => Some(f),
            _ => None,
        }
    }

    /// Follows `bytes`, the next ones the client sent. Returns the fault once there is one.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Option<FramingFault> {
        while !bytes.is_empty() {
            let used = match self.step(bytes) {
                Ok(used) => used,
                Err(fault) => {
                    self.state = State::Failed(fault);
                    self.buf = Vec::new();
                    return Some(fault);
                }
            };
            bytes = &bytes[used..];
        }
        self.fault()
    }

    /// Consumes a prefix of `bytes` (at least one byte) in the current state.
    fn step(&mut self, bytes: &[u8]) -> Result<usize, FramingFault> {
        match self.state {
            State::Failed(_) => Ok(bytes.len()),
            State::Body(left) => {
                let used = (bytes.len() as u64).min(left);
                self.state = if used == left {
                    State::Head
                } else {
                    State::Body(left - used)
                };
                Ok(used as usize)
            }
            State::ChunkData(left) => {
                let used = (bytes.len() as u64).min(left);
                self.state = if used == left {
                    State::ChunkEnd(0)
                } else {
                    State::ChunkData(left - used)
                };
                Ok(used as usize)
            }
            State::ChunkEnd(seen) => {
                let want = if seen == 0 { b'\r' } else { b'\n' };
                if bytes[0] != want {
                    return Err(FramingFault::BadChunk);
                }
                self.state = if seen == 0 {
                    State::ChunkEnd(1)
                } else {
                    State::ChunkSize
                };
                Ok(1)
            }
            State::Head | State::ChunkSize | State::Trailer => self.line_bytes(bytes),
        }
    }

    /// Collects bytes up to and including the next LF; acts on a complete line.
    fn line_bytes(&mut self, bytes: &[u8]) -> Result<usize, FramingFault> {
        let (take, line_end) = match bytes.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (bytes.len(), false),
        };
        let bound = match self.state {
            State::ChunkSize => 1024,
            _ => MAX_HEAD_BYTES,
        };
        if self.buf.len() + take > bound {
            return Err(match self.state {
                State::Head => FramingFault::HeadTooLarge,
                _ => FramingFault::BadChunk,
            });
        }
        self.buf.extend_from_slice(&bytes[..take]);
        if line_end {
            let n = self.buf.len();
            if n < 2 || self.buf[n - 2] != b'\r' {
                return Err(match self.state {
                    State::Head => FramingFault::BareLf,
                    _ => FramingFault::BadChunk,
                });
            }
            self.line_done()?;
        }
        Ok(take)
    }

    /// The buffer ends in CRLF.
    fn line_done(&mut self) -> Result<(), FramingFault> {
        match self.state {
            State::Head => {
                if self.buf == b"\r\n" {
                    // Empty lines before a request line are skipped, as hyper does.
                    self.buf.clear();
                } else if self.buf.ends_with(b"\r\n\r\n") {
                    let body = head_body(&self.buf)?;
                    self.buf.clear();
                    self.state = body;
                }
                Ok(())
            }
            State::ChunkSize => {
                let size = chunk_size(&self.buf[..self.buf.len() - 2])?;
                self.buf.clear();
                self.state = match size {
                    0 => State::Trailer,
                    n => State::ChunkData(n),
                };
                Ok(())
            }
            State::Trailer => {
                if self.buf.ends_with(b"\r\n\r\n") || self.buf == b"\r\n" {
                    self.buf.clear();
                    self.state = State::Head;
                } else {
                    let line_start = self.buf[..self.buf.len() - 2]
                        .windows(2)
                        .rposition(|w| w == b"\r\n")
                        .map_or(0, |i| i + 2);
                    header_line(&self.buf[line_start..self.buf.len() - 2])
                        .map_err(|_| FramingFault::BadChunk)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// One header field line (no CRLF): its name (lower case) and value (trimmed).
fn header_line(line: &[u8]) -> Result<(Vec<u8>, &[u8]), FramingFault> {
    if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err(FramingFault::Folded);
    }
    let colon = line
        .iter()
        .position(|b| *b == b':')
        .ok_or(FramingFault::MalformedHeader)?;
    let name = &line[..colon];
    if name.is_empty() || name.iter().any(|b| !is_token_char(*b)) {
        return Err(FramingFault::MalformedHeader);
    }
    Ok((name.to_ascii_lowercase(), line[colon + 1..].trim_ascii()))
}

/// What follows a complete head (request line, fields, blank line): its body's framing.
fn head_body(head: &[u8]) -> Result<State, FramingFault> {
    let mut lengths: Vec<&[u8]> = Vec::new();
    let mut encodings = 0;
    let mut chunked = false;
    let lines = head[..head.len() - 4].split(|b| *b == b'\n').skip(1);
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let (name, value) = header_line(line)?;
        match name.as_slice() {
            b"content-length" => lengths.push(value),
            b"transfer-encoding" => {
                encodings += 1;
                chunked = value.eq_ignore_ascii_case(b"chunked");
            }
            _ => {}
        }
    }
    match (lengths.as_slice(), encodings) {
        ([], 0) => Ok(State::Head),
        ([], 1) if chunked => Ok(State::ChunkSize),
        ([], _) => Err(FramingFault::NotChunked),
        (_, 1..) => Err(FramingFault::LengthAndChunked),
        ([one], 0) => match content_length(one)? {
            0 => Ok(State::Head),
            n => Ok(State::Body(n)),
        },
        _ => Err(FramingFault::LengthRepeated),
    }
}

fn content_length(value: &[u8]) -> Result<u64, FramingFault> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return Err(FramingFault::LengthInvalid);
    }
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or(FramingFault::LengthInvalid)
}

/// A chunk size line without its CRLF: hex digits, optional space, optional `;extensions`.
fn chunk_size(line: &[u8]) -> Result<u64, FramingFault> {
    let size_end = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    let (digits, rest) = line.split_at(size_end);
    if digits.is_empty() || digits.len() > 15 {
        return Err(FramingFault::BadChunk);
    }
    let rest = rest.trim_ascii_start();
    if !(rest.is_empty() || rest[0] == b';') || rest.iter().any(|b| *b == b'\r' || *b == b'\n') {
        return Err(FramingFault::BadChunk);
    }
    let digits = std::str::from_utf8(digits).map_err(|_| FramingFault::BadChunk)?;
    u64::from_str_radix(digits, 16).map_err(|_| FramingFault::BadChunk)
}

/// RFC 9110 `tchar`.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A connection's read side, feeding every byte read to a [`Framing`]; the fault it finds is
/// shared with the request handler, which refuses every request on the connection from then on.
pub struct Watched<S> {
    inner: S,
    framing: Framing,
    fault: Arc<AtomicU8>,
}

impl<S> Watched<S> {
    pub fn new(inner: S) -> (Watched<S>, FaultFlag) {
        let fault = Arc::new(AtomicU8::new(0));
        let watched = Watched {
            inner,
            framing: Framing::default(),
            fault: fault.clone(),
        };
        (watched, FaultFlag(fault))
    }
}

/// The fault a [`Watched`] connection found, read by the handler.
#[derive(Clone)]
pub struct FaultFlag(Arc<AtomicU8>);

impl FaultFlag {
    pub fn get(&self) -> Option<FramingFault> {
        FramingFault::from_u8(self.0.load(Ordering::SeqCst))
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled {
            let this = &mut *self;
            if this.framing.fault().is_none()
                && let Some(fault) = this.framing.feed(&buf.filled()[before..])
            {
                this.fault.store(fault as u8, Ordering::SeqCst);
            }
        }
        polled
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
