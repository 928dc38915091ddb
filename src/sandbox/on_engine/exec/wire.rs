//! The framing of a fast exec (see [`spawner`](super::spawner)) over one Unix socket
//! connection: `[kind u8][length u32 BE][payload]`, both ways. The host sends one `REQUEST`
//! (the command, its environment and folder as JSON), then its stdin as `STDIN` frames and
//! `STDIN_END`; the spawner sends `STDOUT` and `STDERR` frames, then one `EXIT` (the code as
//! i32 BE). Pure: table-tested here, spoken by `spawner.js` on the other side.
// Only Linux hosts use a spawner (its checks read /proc): elsewhere this is compiled, unused.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use serde::Serialize;

/// The command, once, first.
pub const REQUEST: u8 = 1;
/// Bytes for the command's stdin.
pub const STDIN: u8 = 2;
/// The command's stdin ends.
pub const STDIN_END: u8 = 3;
/// Bytes the command wrote to stdout.
pub const STDOUT: u8 = 4;
/// Bytes the command wrote to stderr.
pub const STDERR: u8 = 5;
/// The command ended: its exit code (128 + the signal's number when a signal ended it).
pub const EXIT: u8 = 6;

/// The longest frame either side accepts (a request's command and environment fit).
pub const MAX_FRAME: usize = 1 << 20;
/// The head of every frame.
pub const HEAD: usize = 5;

/// What the spawner runs: the command in `cwd` with `env` (`NAME=value`) over its own.
#[derive(Debug, Serialize)]
pub struct Request<'a> {
    pub argv: &'a [String],
    pub env: &'a [String],
    pub cwd: &'a str,
}

/// One frame's bytes.
pub fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD + payload.len());
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The request frame.
pub fn request(req: &Request) -> Vec<u8> {
    encode(
        REQUEST,
        &serde_json::to_vec(req).expect("strings serialize"),
    )
}

/// What the host reads from the spawner.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exit(i64),
}

/// Why the spawner's bytes are not frames the host takes.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("a frame of kind {0} the host does not read")]
    Kind(u8),
    #[error("a frame of {0} bytes, over the {MAX_FRAME} a frame may hold")]
    TooLong(usize),
    #[error("an exit frame of {0} bytes, not 4")]
    BadExit(usize),
}

/// Splits the spawner's bytes into frames as they come, in any pieces.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// Takes more bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, `None` until one is whole; an error for a frame no spawner sends
    /// (the connection is then dropped).
    pub fn next(&mut self) -> Result<Option<Output>, WireError> {
        if self.buf.len() < HEAD {
            return Ok(None);
        }
        let kind = self.buf[0];
        let len = u32::from_be_bytes(self.buf[1..HEAD].try_into().expect("4 bytes")) as usize;
        if len > MAX_FRAME {
            return Err(WireError::TooLong(len));
        }
        if !matches!(kind, STDOUT | STDERR | EXIT) {
            return Err(WireError::Kind(kind));
        }
        if kind == EXIT && len != 4 {
            return Err(WireError::BadExit(len));
        }
        if self.buf.len() < HEAD + len {
            return Ok(None);
        }
        let payload: Vec<u8> = self.buf.drain(..HEAD + len).skip(HEAD).collect();
        Ok(Some(match kind {
            STDOUT => Output::Stdout(payload),
            STDERR => Output::Stderr(payload),
            _ => Output::Exit(i32::from_be_bytes(payload[..4].try_into().expect("4 bytes")) as i64),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8], piece: usize) -> Result<Vec<Output>, WireError> {
        let mut d = Decoder::default();
        let mut got = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            d.push(chunk);
            while let Some(f) = d.next()? {
                got.push(f);
            }
        }
        Ok(got)
    }

    #[test]
    fn frames_come_whole_from_any_pieces() {
        let mut bytes = encode(STDOUT, b"hello");
        bytes.extend(encode(STDERR, b""));
        bytes.extend(encode(STDOUT, &vec![7u8; 70_000]));
        bytes.extend(encode(EXIT, &(-1i32).to_be_bytes()));
        for piece in [1, 2, 4, 5, 6, 1000, bytes.len()] {
            let got = frames(&bytes, piece).unwrap();
            assert_eq!(got.len(), 4, "piece {piece}");
            assert_eq!(got[0], Output::Stdout(b"hello".to_vec()));
            assert_eq!(got[1], Output::Stderr(vec![]));
            assert_eq!(got[2], Output::Stdout(vec![7u8; 70_000]));
            assert_eq!(got[3], Output::Exit(-1));
        }
        // A frame cut short is not one yet.
        assert_eq!(frames(&encode(STDOUT, b"abc")[..7], 3).unwrap(), vec![]);
        assert_eq!(
            frames(&encode(EXIT, &143i32.to_be_bytes()), 1).unwrap(),
            vec![Output::Exit(143)]
        );
    }

    #[test]
    fn what_no_spawner_sends_is_refused_from_its_head() {
        let long = {
            let mut b = vec![STDOUT];
            b.extend(((MAX_FRAME + 1) as u32).to_be_bytes());
            b
        };
        let cases: Vec<(Vec<u8>, WireError)> = vec![
            // The host's own kinds, and unknown ones, coming back.
            (encode(REQUEST, b"{}"), WireError::Kind(REQUEST)),
            (encode(STDIN, b"x"), WireError::Kind(STDIN)),
            (encode(STDIN_END, b""), WireError::Kind(STDIN_END)),
            (encode(0, b""), WireError::Kind(0)),
            (encode(200, b""), WireError::Kind(200)),
            // Refused before its payload is waited for.
            (long, WireError::TooLong(MAX_FRAME + 1)),
            (encode(EXIT, b"12345"), WireError::BadExit(5)),
            (encode(EXIT, b""), WireError::BadExit(0)),
        ];
        for (bytes, want) in cases {
            let head_only = &bytes[..HEAD];
            assert_eq!(frames(head_only, 1).unwrap_err(), want, "{bytes:?}");
        }
        // A good frame followed by a bad one: the good one is read first.
        let mut bytes = encode(STDOUT, b"ok");
        bytes.extend(encode(9, b""));
        let mut d = Decoder::default();
        d.push(&bytes);
        assert_eq!(d.next(), Ok(Some(Output::Stdout(b"ok".to_vec()))));
        assert_eq!(d.next(), Err(WireError::Kind(9)));
    }

    #[test]
    fn the_request_is_json_the_spawner_reads() {
        let argv = vec!["echo".to_string(), "a \"b\"\n".into()];
        let env = vec!["PO_BROKER_ADDRESS=1.2.3.4:5".to_string()];
        let bytes = request(&Request {
            argv: &argv,
            env: &env,
            cwd: "/w",
        });
        assert_eq!(bytes[0], REQUEST);
        let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        assert_eq!(len, bytes.len() - HEAD);
        let v: serde_json::Value = serde_json::from_slice(&bytes[HEAD..]).unwrap();
        assert_eq!(v["argv"][1], "a \"b\"\n");
        assert_eq!(v["env"][0], "PO_BROKER_ADDRESS=1.2.3.4:5");
        assert_eq!(v["cwd"], "/w");
    }
}
