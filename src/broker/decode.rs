//! Percent-decoding as the request rules and the forwarded paths see it: every decoding of the
//! input in turn, up to a depth. Pure.

/// How deep percent-encoding may nest before a target is refused (`%252e` is two deep).
pub const DECODE_DEPTH: usize = 3;

/// `input`, then each percent-decoding of the one before, until nothing changes or there are
/// `max` of them; also whether one more decoding would still change the last.
pub(super) fn decodings(input: &[u8], max: usize) -> (Vec<Vec<u8>>, bool) {
    let mut layers = vec![input.to_vec()];
    loop {
        let next = percent_decode(layers.last().expect("one layer at least"));
        if next == *layers.last().expect("one layer at least") {
            return (layers, false);
        }
        if layers.len() == max {
            return (layers, true);
        }
        layers.push(next);
    }
}

/// `%XX` decoded once; a `%` not followed by two hex digits is kept as it is.
pub fn percent_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%'
            && i + 2 < input.len()
            && let (Some(hi), Some(lo)) = (hex_digit(input[i + 1]), hex_digit(input[i + 2]))
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}
