//! The relay's framing, pure: a frame is its kind (one byte), a stream id (u32, big-endian), the
//! payload's length (u32, big-endian) and the payload. [`Decoder`] takes the bytes in chunks of
//! any size and refuses what no relay sends (an unknown kind, an over-long payload) with a
//! typed error.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The framing's version, sent by the agent in its first frame.
pub const VERSION: u32 = 2;
/// Kind, stream id and payload length.
pub const HEADER_LEN: usize = 9;
/// The longest payload either side sends; a longer one is refused.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// The longest reason a CLOSE carries (a longer one is cut at a character boundary).
pub const MAX_REASON: usize = 512;
/// The bytes of a forward's socket secret.
pub const SECRET_LEN: usize = 32;
/// The longest socket path a SOCKET frame names (Unix socket paths are shorter still).
pub const MAX_PATH: usize = 512;
/// What the agent writes first on each connection to the forward's socket: the secret and the
/// stream id (u32, big-endian; 0: the probe that proves the socket reachable).
pub const HANDSHAKE_LEN: usize = SECRET_LEN + 4;

/// A forward's socket secret; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SocketSecret(pub [u8; SECRET_LEN]);

impl std::fmt::Debug for SocketSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SocketSecret(..)")
    }
}

/// One message of the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The agent's first frame: the framing version it speaks (stream 0).
    Hello { version: u32 },
    /// Host to agent: open a connection to the forward's port for this new stream.
    Open { stream: u32 },
    /// Agent to host: the connection is open.
    Opened { stream: u32 },
    /// Bytes of the stream, within the receiver's credit.
    Data { stream: u32, bytes: Bytes },
    /// The receiver drained `credit` more bytes: the sender may send that much more.
    Window { stream: u32, credit: u32 },
    /// No more data in this direction (half-close); the other keeps flowing until its own END.
    End { stream: u32 },
    /// The stream is gone at once, with why (empty: nothing went wrong). Stream 0: the agent
    /// cannot reach the socket a SOCKET frame named.
    Close { stream: u32, reason: String },
    /// Host to agent (stream 0): carry the streams it DIALs over the Unix socket at `path`
    /// (a path inside), presenting `secret` and the stream id first; probe it now (stream 0).
    Socket { secret: SocketSecret, path: String },
    /// Host to agent: open a connection to the forward's port for this new stream and carry
    /// it over the socket (not over this stream pair).
    Dial { stream: u32 },
    /// Agent to host (the reverse relay): a process inside connected to the agent's socket
    /// `name`; the host connects to its own of that name for this new stream (the agent's
    /// ids have [`AGENT_STREAM`] set) and answers OPENED, or CLOSE with why.
    Connect { stream: u32, name: String },
}

/// The bit set in the ids of streams the agent opens (CONNECT), so they never meet the host's.
pub const AGENT_STREAM: u32 = 1 << 31;
/// The longest name a CONNECT carries.
pub const MAX_NAME: usize = 64;

/// The kind byte of each frame.
mod kind {
    pub const HELLO: u8 = 1;
    pub const OPEN: u8 = 2;
    pub const OPENED: u8 = 3;
    pub const DATA: u8 = 4;
    pub const WINDOW: u8 = 5;
    pub const END: u8 = 6;
    pub const CLOSE: u8 = 7;
    pub const SOCKET: u8 = 8;
    pub const DIAL: u8 = 9;
    pub const CONNECT: u8 = 10;
}

/// Bytes that are not a frame of this framing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A kind byte no relay sends.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// A payload longer than [`MAX_PAYLOAD`].
    #[error("a frame of kind {kind} announces {len} bytes, over the limit of {MAX_PAYLOAD}")]
    TooLong { kind: u8, len: u32 },
    /// A payload of the wrong size for its kind, or a reason or path that is not UTF-8.
    #[error("a frame of kind {kind} has a malformed payload: {reason}")]
    Malformed { kind: u8, reason: &'static str },
    /// The bytes ended inside a frame.
    #[error("the stream ended inside a frame ({0} bytes of it arrived)")]
    Truncated(usize),
}

impl Frame {
    /// The stream the frame belongs to (0 for HELLO and SOCKET).
    pub fn stream(&self) -> u32 {
        match self {
            Frame::Hello { .. } | Frame::Socket { .. } => 0,
            Frame::Dial { stream }
            | Frame::Connect { stream, .. }
            | Frame::Open { stream }
            | Frame::Opened { stream }
            | Frame::Data { stream, .. }
            | Frame::Window { stream, .. }
            | Frame::End { stream }
            | Frame::Close { stream, .. } => *stream,
        }
    }

    /// How many bytes [`encode`](Self::encode) appends.
    pub fn encoded_len(&self) -> usize {
        let payload = match self {
            Frame::Hello { .. } | Frame::Window { .. } => 4,
            Frame::Data { bytes, .. } => bytes.len(),
            Frame::Close { reason, .. } => short(reason).len(),
            Frame::Socket { path, .. } => SECRET_LEN + path.len(),
            Frame::Connect { name, .. } => name.len(),
            Frame::Open { .. } | Frame::Opened { .. } | Frame::End { .. } | Frame::Dial { .. } => 0,
        };
        HEADER_LEN + payload
    }

    /// Appends the frame's bytes to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let socket_payload;
        let (k, payload): (u8, &[u8]) = match self {
            Frame::Hello { version } => (kind::HELLO, &version.to_be_bytes()),
            Frame::Open { .. } => (kind::OPEN, &[]),
            Frame::Opened { .. } => (kind::OPENED, &[]),
            Frame::Data { bytes, .. } => (kind::DATA, bytes),
            Frame::Window { credit, .. } => (kind::WINDOW, &credit.to_be_bytes()),
            Frame::End { .. } => (kind::END, &[]),
            Frame::Close { reason, .. } => (kind::CLOSE, short(reason).as_bytes()),
            Frame::Socket { secret, path } => {
                socket_payload = [&secret.0[..], path.as_bytes()].concat();
                (kind::SOCKET, &socket_payload)
            }
            Frame::Dial { .. } => (kind::DIAL, &[]),
            Frame::Connect { name, .. } => (kind::CONNECT, name.as_bytes()),
        };
        out.reserve(HEADER_LEN + payload.len());
        out.put_u8(k);
        out.put_u32(self.stream());
        out.put_u32(payload.len() as u32);
        out.put_slice(payload);
    }
}

/// `reason` cut to at most [`MAX_REASON`] bytes, at a character boundary.
fn short(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// Frames from bytes that arrive in chunks split anywhere.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
}

impl Decoder {
    /// Adds bytes as they arrived.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole frame, `None` until one has arrived; an error for bytes that are not a
    /// frame (the decoder is then unusable: the stream has lost its framing).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let k = self.buf[0];
        let stream = u32::from_be_bytes(self.buf[1..5].try_into().expect("4 bytes"));
        let len = u32::from_be_bytes(self.buf[5..9].try_into().expect("4 bytes"));
        if !(kind::HELLO..=kind::CONNECT).contains(&k) {
            return Err(FrameError::UnknownKind(k));
        }
        if len as usize > MAX_PAYLOAD {
            return Err(FrameError::TooLong { kind: k, len });
        }
        if self.buf.len() < HEADER_LEN + len as usize {
            return Ok(None);
        }
        self.buf.advance(HEADER_LEN);
        let payload = self.buf.split_to(len as usize).freeze();
        parse(k, stream, payload).map(Some)
    }

    /// Checks that the bytes ended between frames.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(FrameError::Truncated(n)),
        }
    }
}

/// One frame from its kind, stream and whole payload.
fn parse(k: u8, stream: u32, payload: Bytes) -> Result<Frame, FrameError> {
    let malformed = |reason| FrameError::Malformed { kind: k, reason };
    let word = |p: &Bytes| -> Result<u32, FrameError> {
        let b: [u8; 4] = p[..].try_into().map_err(|_| malformed("not 4 bytes"))?;
        Ok(u32::from_be_bytes(b))
    };
    let empty = |p: &Bytes| match p.is_empty() {
        true => Ok(()),
        false => Err(malformed("a payload where none belongs")),
    };
    Ok(match k {
        kind::HELLO => Frame::Hello {
            version: word(&payload)?,
        },
        kind::OPEN => empty(&payload).map(|()| Frame::Open { stream })?,
        kind::OPENED => empty(&payload).map(|()| Frame::Opened { stream })?,
        kind::DATA => Frame::Data {
            stream,
            bytes: payload,
        },
        kind::WINDOW => Frame::Window {
            stream,
            credit: word(&payload)?,
        },
        kind::END => empty(&payload).map(|()| Frame::End { stream })?,
        kind::SOCKET => socket(&payload).map_err(malformed)?,
        kind::DIAL => empty(&payload).map(|()| Frame::Dial { stream })?,
        kind::CONNECT => Frame::Connect {
            stream,
            name: connect_name(&payload).map_err(malformed)?,
        },
        _ => Frame::Close {
            stream,
            reason: String::from_utf8(payload.to_vec()).map_err(|_| malformed("not UTF-8"))?,
        },
    })
}

/// A CONNECT frame's payload: a name of 1 to [`MAX_NAME`] letters, digits, `.`, `-` or `_`.
fn connect_name(payload: &[u8]) -> Result<String, &'static str> {
    let fine = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_');
    if payload.is_empty() || payload.len() > MAX_NAME || !payload.iter().all(fine) {
        return Err("not a socket name");
    }
    Ok(String::from_utf8_lossy(payload).into_owned())
}

/// A SOCKET frame's payload: the secret, then a UTF-8 path of 1 to [`MAX_PATH`] bytes.
fn socket(payload: &[u8]) -> Result<Frame, &'static str> {
    if payload.len() <= SECRET_LEN || payload.len() > SECRET_LEN + MAX_PATH {
        return Err("not a secret and a path");
    }
    let (secret, path) = payload.split_at(SECRET_LEN);
    Ok(Frame::Socket {
        secret: SocketSecret(secret.try_into().expect("the secret's length")),
        path: String::from_utf8(path.to_vec()).map_err(|_| "not UTF-8")?,
    })
}

/// The first bytes of a connection to the forward's socket: `secret` and `stream` (what the
/// agent sends; the host only checks them).
#[cfg(test)]
pub fn handshake(secret: &SocketSecret, stream: u32) -> [u8; HANDSHAKE_LEN] {
    let mut out = [0u8; HANDSHAKE_LEN];
    out[..SECRET_LEN].copy_from_slice(&secret.0);
    out[SECRET_LEN..].copy_from_slice(&stream.to_be_bytes());
    out
}

/// The stream a connection's first bytes claim, when they present `secret` (compared in
/// constant time); `None` for any other secret.
#[cfg_attr(not(unix), allow(dead_code))]
pub fn check_handshake(bytes: &[u8; HANDSHAKE_LEN], secret: &SocketSecret) -> Option<u32> {
    use subtle::ConstantTimeEq;
    let (presented, stream) = bytes.split_at(SECRET_LEN);
    let ok: bool = presented.ct_eq(&secret.0).into();
    ok.then(|| u32::from_be_bytes(stream.try_into().expect("4 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Frame> {
        vec![
            Frame::Hello { version: VERSION },
            Frame::Open { stream: 1 },
            Frame::Opened { stream: 2 },
            Frame::Data {
                stream: 3,
                bytes: Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n"),
            },
            Frame::Data {
                stream: u32::MAX,
                bytes: Bytes::from(vec![7u8; MAX_PAYLOAD]),
            },
            Frame::Data {
                stream: 4,
                bytes: Bytes::new(),
            },
            Frame::Window {
                stream: 5,
                credit: 256 * 1024,
            },
            Frame::End { stream: 6 },
            Frame::Close {
                stream: 7,
                reason: String::new(),
            },
            Frame::Close {
                stream: 8,
                reason: "nothing listens on 127.0.0.1:5173 in the sandbox — é".into(),
            },
            Frame::Socket {
                secret: SocketSecret([0xa5; SECRET_LEN]),
                path: "/run/po-broker/fwd-0123456789abcdef.sock".into(),
            },
            Frame::Socket {
                secret: SocketSecret([0; SECRET_LEN]),
                path: "é".repeat(MAX_PATH / 2),
            },
            Frame::Dial { stream: 9 },
            Frame::Dial {
                stream: u32::MAX - 1,
            },
            Frame::Connect {
                stream: AGENT_STREAM | 1,
                name: "broker.sock".into(),
            },
            Frame::Connect {
                stream: AGENT_STREAM | 2,
                name: "x".repeat(MAX_NAME),
            },
        ]
    }

    fn bytes_of(frames: &[Frame]) -> Vec<u8> {
        let mut out = BytesMut::new();
        frames.iter().for_each(|f| f.encode(&mut out));
        out.to_vec()
    }

    fn decode_in_chunks(bytes: &[u8], chunk: usize) -> Result<Vec<Frame>, FrameError> {
        let mut d = Decoder::default();
        let mut got = Vec::new();
        for piece in bytes.chunks(chunk.max(1)) {
            d.push(piece);
            while let Some(f) = d.next_frame()? {
                got.push(f);
            }
        }
        d.finish().map(|()| got)
    }

    #[test]
    fn every_kind_round_trips() {
        for f in every_kind() {
            assert_eq!(
                decode_in_chunks(&bytes_of(std::slice::from_ref(&f)), usize::MAX),
                Ok(vec![f])
            );
        }
    }

    #[test]
    fn a_frame_split_at_every_offset_decodes_the_same() {
        for f in every_kind().into_iter().filter(|f| f.stream() != u32::MAX) {
            let bytes = bytes_of(std::slice::from_ref(&f));
            for at in 0..=bytes.len() {
                let mut d = Decoder::default();
                d.push(&bytes[..at]);
                let early = d.next_frame().unwrap();
                d.push(&bytes[at..]);
                let got = early.or_else(|| d.next_frame().unwrap());
                assert_eq!(got.as_ref(), Some(&f), "split at {at}");
                assert_eq!(d.finish(), Ok(()));
            }
        }
    }

    #[test]
    fn concatenated_frames_decode_byte_by_byte_and_at_once() {
        let all = every_kind();
        let bytes = bytes_of(&all);
        for chunk in [1, 2, 7, 9, 10, 4096, usize::MAX] {
            assert_eq!(decode_in_chunks(&bytes, chunk), Ok(all.clone()), "{chunk}");
        }
    }

    #[test]
    fn refusals_are_typed() {
        let header = |k: u8, len: u32| {
            let mut v = vec![k, 0, 0, 0, 1];
            v.extend_from_slice(&len.to_be_bytes());
            v
        };
        let with = |mut h: Vec<u8>, p: &[u8]| {
            h.extend_from_slice(p);
            h
        };
        let cases: Vec<(Vec<u8>, FrameError)> = vec![
            (header(0, 0), FrameError::UnknownKind(0)),
            (header(11, 0), FrameError::UnknownKind(11)),
            (
                header(kind::CONNECT, 0),
                FrameError::Malformed {
                    kind: kind::CONNECT,
                    reason: "not a socket name",
                },
            ),
            (header(255, 1 << 30), FrameError::UnknownKind(255)),
            (
                header(kind::DATA, MAX_PAYLOAD as u32 + 1),
                FrameError::TooLong {
                    kind: kind::DATA,
                    len: MAX_PAYLOAD as u32 + 1,
                },
            ),
            (
                header(kind::CLOSE, u32::MAX),
                FrameError::TooLong {
                    kind: kind::CLOSE,
                    len: u32::MAX,
                },
            ),
            (
                with(header(kind::WINDOW, 3), b"abc"),
                FrameError::Malformed {
                    kind: kind::WINDOW,
                    reason: "not 4 bytes",
                },
            ),
            (
                with(header(kind::HELLO, 5), b"abcde"),
                FrameError::Malformed {
                    kind: kind::HELLO,
                    reason: "not 4 bytes",
                },
            ),
            (
                with(header(kind::END, 1), b"x"),
                FrameError::Malformed {
                    kind: kind::END,
                    reason: "a payload where none belongs",
                },
            ),
            (
                with(header(kind::CLOSE, 2), &[0xc3, 0x28]),
                FrameError::Malformed {
                    kind: kind::CLOSE,
                    reason: "not UTF-8",
                },
            ),
            (
                with(header(kind::DIAL, 1), b"x"),
                FrameError::Malformed {
                    kind: kind::DIAL,
                    reason: "a payload where none belongs",
                },
            ),
            (
                // A path, a name too long, and bytes no socket name has.
                with(header(kind::CONNECT, 6), b"../etc"),
                FrameError::Malformed {
                    kind: kind::CONNECT,
                    reason: "not a socket name",
                },
            ),
            (
                with(header(kind::CONNECT, 65), &[b'a'; 65]),
                FrameError::Malformed {
                    kind: kind::CONNECT,
                    reason: "not a socket name",
                },
            ),
            (
                with(header(kind::CONNECT, 3), b"a\0b"),
                FrameError::Malformed {
                    kind: kind::CONNECT,
                    reason: "not a socket name",
                },
            ),
            (
                // A secret and no path.
                with(header(kind::SOCKET, 32), &[1; 32]),
                FrameError::Malformed {
                    kind: kind::SOCKET,
                    reason: "not a secret and a path",
                },
            ),
            (
                with(header(kind::SOCKET, 5), b"short"),
                FrameError::Malformed {
                    kind: kind::SOCKET,
                    reason: "not a secret and a path",
                },
            ),
            (
                with(header(kind::SOCKET, 32 + 513), &[b'a'; 32 + 513]),
                FrameError::Malformed {
                    kind: kind::SOCKET,
                    reason: "not a secret and a path",
                },
            ),
            (
                with(
                    header(kind::SOCKET, 34),
                    &[[7u8; 32].as_slice(), &[0xc3, 0x28]].concat(),
                ),
                FrameError::Malformed {
                    kind: kind::SOCKET,
                    reason: "not UTF-8",
                },
            ),
        ];
        for (bytes, want) in cases {
            for chunk in [1, usize::MAX] {
                assert_eq!(
                    decode_in_chunks(&bytes, chunk),
                    Err(want.clone()),
                    "{bytes:?}"
                );
            }
        }
    }

    #[test]
    fn truncated_input_is_reported_at_the_end() {
        let bytes = bytes_of(&every_kind());
        for cut in [1, HEADER_LEN - 1, HEADER_LEN, bytes.len() - 1] {
            let mut d = Decoder::default();
            d.push(&bytes[..cut]);
            while d.next_frame().unwrap().is_some() {}
            assert!(matches!(d.finish(), Err(FrameError::Truncated(_))), "{cut}");
        }
    }

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        let reason = "é".repeat(MAX_REASON);
        let f = Frame::Close { stream: 1, reason };
        let Ok(got) = decode_in_chunks(&bytes_of(&[f]), usize::MAX) else {
            panic!("decodes")
        };
        let [Frame::Close { reason, .. }] = &got[..] else {
            panic!("{got:?}")
        };
        assert!(reason.len() <= MAX_REASON && reason.len() >= MAX_REASON - 1);
    }

    #[test]
    fn a_socket_secret_is_never_printed() {
        let f = Frame::Socket {
            secret: SocketSecret([b'k'; SECRET_LEN]),
            path: "/run/po-broker/x.sock".into(),
        };
        assert!(!format!("{f:?}").contains("107"), "{f:?}");
    }

    #[test]
    fn a_handshake_names_its_stream_only_with_the_secret() {
        let secret = SocketSecret([9; SECRET_LEN]);
        for stream in [0, 1, 77, u32::MAX] {
            assert_eq!(
                check_handshake(&handshake(&secret, stream), &secret),
                Some(stream)
            );
        }
        let mut bad = handshake(&secret, 5);
        for at in [0, SECRET_LEN / 2, SECRET_LEN - 1] {
            let mut b = bad;
            b[at] ^= 1;
            assert_eq!(check_handshake(&b, &secret), None, "byte {at} flipped");
        }
        bad[..SECRET_LEN].fill(0);
        assert_eq!(check_handshake(&bad, &secret), None);
        // Any stream id with the secret: which ones are waiting is the carrier's to check.
        let other = SocketSecret([8; SECRET_LEN]);
        assert_eq!(check_handshake(&handshake(&other, 5), &secret), None);
    }
}
