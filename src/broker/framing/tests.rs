use proptest::prelude::*;

use super::*;

fn fed(input: &[u8]) -> Option<FramingFault> {
    Framing::default().feed(input)
}

const GOOD: &[u8] = b"POST /openai/v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc\
GET /openai/v1/models HTTP/1.1\r\nHost: a\r\n\r\n\
POST /openai/v1/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nx-trailer: 1\r\n\r\n\
\r\nGET / HTTP/1.1\r\n\r\n";

#[test]
fn well_formed_requests_pass_in_sequence() {
    assert_eq!(fed(GOOD), None);
}

#[test]
fn each_framing_rule_in_its_variants() {
    use FramingFault::*;
    let big = format!(
        "GET / HTTP/1.1\r\nx-big: {}\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES)
    );
    let cases: Vec<(Vec<u8>, Option<FramingFault>)> = vec![
        // Bare LF anywhere in a head, also mixed with CRLF.
        (b"GET / HTTP/1.1\nHost: a\n\n".to_vec(), Some(BareLf)),
        (b"GET / HTTP/1.1\r\nHost: a\n\r\n".to_vec(), Some(BareLf)),
        (
            b"POST / HTTP/1.1\nContent-Length: 5\nTransfer-Encoding: chunked\n\n0\r\n\r\n".to_vec(),
            Some(BareLf),
        ),
        (b"\n".to_vec(), Some(BareLf)),
        // Content-Length with Transfer-Encoding, either order, any case, any spacing.
        (
            b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            Some(LengthAndChunked),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n".to_vec(),
            Some(LengthAndChunked),
        ),
        (
            b"POST / HTTP/1.1\r\ntransfer-ENCODING:   Chunked  \r\ncontent-length:0\r\n\r\n"
                .to_vec(),
            Some(LengthAndChunked),
        ),
        // Transfer-Encoding other than one 'chunked'.
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec(),
            Some(NotChunked),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n".to_vec(),
            Some(NotChunked),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec(),
            Some(NotChunked),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n".to_vec(),
            Some(NotChunked),
        ),
        // Content-Length: once, one decimal number.
        (
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n".to_vec(),
            Some(LengthRepeated),
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n".to_vec(),
            Some(LengthInvalid),
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n".to_vec(),
            Some(LengthInvalid),
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 0x2\r\n\r\n".to_vec(),
            Some(LengthInvalid),
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n".to_vec(),
            Some(LengthInvalid),
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n".to_vec(),
            Some(LengthInvalid),
        ),
        // Folding and malformed lines.
        (
            b"GET / HTTP/1.1\r\nx-a: 1\r\n continued\r\n\r\n".to_vec(),
            Some(Folded),
        ),
        (
            b"GET / HTTP/1.1\r\nx-a: 1\r\n\tcontinued\r\n\r\n".to_vec(),
            Some(Folded),
        ),
        (
            b"GET / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n".to_vec(),
            Some(MalformedHeader),
        ),
        (
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n".to_vec(),
            Some(MalformedHeader),
        ),
        (
            b"GET / HTTP/1.1\r\n: empty\r\n\r\n".to_vec(),
            Some(MalformedHeader),
        ),
        // Head bound.
        (big.into_bytes(), Some(HeadTooLarge)),
        // Chunked bodies.
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n".to_vec(),
            Some(BadChunk),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc".to_vec(),
            Some(BadChunk),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n".to_vec(),
            Some(BadChunk),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx-t: 1\n\r\n".to_vec(),
            Some(BadChunk),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n bad\r\n\r\n".to_vec(),
            Some(BadChunk),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n".to_vec(),
            Some(BadChunk),
        ),
    ];
    for (input, want) in &cases {
        assert_eq!(
            fed(input),
            *want,
            "{}",
            String::from_utf8_lossy(&input[..input.len().min(120)])
        );
    }
}

#[test]
fn a_request_smuggled_in_a_body_is_a_body() {
    // Under Content-Length the second "request" is body bytes; then a real one follows.
    let input = b"POST / HTTP/1.1\r\nContent-Length: 23\r\n\r\nGET /x HTTP/1.1\nBad\n\n\nGET / HTTP/1.1\r\n\r\n";
    assert_eq!(fed(input), None);
    // The same bytes without the body length: the smuggled head is a head, and refused.
    let input = b"POST / HTTP/1.1\r\n\r\nGET /x HTTP/1.1\nBad\n\n";
    assert_eq!(fed(input), Some(FramingFault::BareLf));
}

#[test]
fn a_fault_is_kept_for_the_rest_of_the_connection() {
    let mut f = Framing::default();
    assert_eq!(f.feed(b"GET / HTTP/1.1\n"), Some(FramingFault::BareLf));
    assert_eq!(
        f.feed(b"GET / HTTP/1.1\r\n\r\n"),
        Some(FramingFault::BareLf)
    );
    assert_eq!(f.fault(), Some(FramingFault::BareLf));
}

#[test]
fn the_head_bound_holds_however_the_bytes_arrive() {
    let head = format!(
        "GET / HTTP/1.1\r\nx-big: {}\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES)
    );
    for piece in [1, 7, 1024, MAX_HEAD_BYTES, head.len()] {
        let mut f = Framing::default();
        let mut got = None;
        for chunk in head.as_bytes().chunks(piece) {
            got = f.feed(chunk);
        }
        assert_eq!(got, Some(FramingFault::HeadTooLarge), "pieces of {piece}");
    }
    // Just under the bound passes.
    let fits = format!(
        "GET / HTTP/1.1\r\nx: {}\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES - 40)
    );
    assert_eq!(fed(fits.as_bytes()), None);
}

#[test]
fn fault_codes_round_trip() {
    for f in FramingFault::ALL {
        assert_eq!(FramingFault::from_u8(f as u8), Some(f));
    }
    assert_eq!(FramingFault::from_u8(0), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Split anywhere, a connection's bytes give the same verdict as in one piece.
    #[test]
    fn the_verdict_does_not_depend_on_how_bytes_arrive(
        cuts in prop::collection::vec(0usize..GOOD.len(), 0..12),
        bad in prop::sample::select(vec![
            &b""[..],
            b"GET / HTTP/1.1\nHost: a\n\n",
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ]),
    ) {
        let mut input = GOOD.to_vec();
        input.extend_from_slice(bad);
        let whole = fed(&input);
        let mut cuts = cuts;
        cuts.sort();
        let mut f = Framing::default();
        let mut last = 0;
        let mut got = None;
        for c in cuts.into_iter().chain([input.len()]) {
            if c >= last {
                got = f.feed(&input[last..c]).or(got);
                last = c;
            }
        }
        prop_assert_eq!(got, whole);
    }

    /// Arbitrary bytes never panic, and a fault once found stays.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let mut f = Framing::default();
        let first = f.feed(&bytes);
        if first.is_some() {
            prop_assert_eq!(f.feed(b"GET / HTTP/1.1\r\n\r\n"), first);
        }
    }
}
