//! HTTP/1.1 framing for the mock server (`ais-testkit`), which gets request bytes as a
//! socket yields them and asks here whether a whole message is in (the
//! event-driven client transport frames replies with `ureq-proto`, in
//! `http/framing.rs`; it uses only `header` from here).

/// The first position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Header lines (`Name: value`, after the start line) with names
/// lower-cased and values trimmed, in order. Lines without a colon are
/// skipped.
pub fn header_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect()
}

/// The value of header `name` (lower-case) in `headers`.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Why a chunked body cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// A size line that is not hexadecimal, or a chunk not followed by CRLF.
    Malformed,
    /// The body would exceed the caller's limit.
    TooLarge,
}

/// A chunked body at the start of `buf`: the body and the bytes it took
/// (trailers included), `Ok(None)` while incomplete. `max_body` bounds the
/// joined body, `max_line` a size or trailer line.
pub fn parse_chunked(
    buf: &[u8],
    max_body: usize,
    max_line: usize,
) -> Result<Option<(Vec<u8>, usize)>, ChunkError> {
    // The length of the line at `at` (without its CRLF); `Ok(None)` while
    // it is incomplete.
    let line_at = |at: usize| match find(&buf[at..], b"\r\n") {
        Some(n) => Ok(Some(n)),
        None if buf.len() - at > max_line => Err(ChunkError::Malformed),
        None => Ok(None),
    };
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(line_end) = line_at(at)? else {
            return Ok(None);
        };
        let line = String::from_utf8_lossy(&buf[at..at + line_end]);
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| ChunkError::Malformed)?;
        if body.len().saturating_add(size) > max_body {
            return Err(ChunkError::TooLarge);
        }
        at += line_end + 2;
        if size == 0 {
            // Trailer lines, then an empty line.
            loop {
                let Some(end) = line_at(at)? else {
                    return Ok(None);
                };
                at += end + 2;
                if end == 0 {
                    return Ok(Some((body, at)));
                }
            }
        }
        if buf.len() < at + size + 2 {
            return Ok(None);
        }
        if &buf[at + size..at + size + 2] != b"\r\n" {
            return Err(ChunkError::Malformed);
        }
        body.extend_from_slice(&buf[at..at + size]);
        at += size + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_join_with_extensions_and_trailers() {
        let raw = b"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        let whole = raw.len() - 4;
        for cut in 0..whole {
            assert_eq!(parse_chunked(&raw[..cut], 100, 100), Ok(None), "cut {cut}");
        }
        assert_eq!(
            parse_chunked(raw, 100, 100),
            Ok(Some((b"abcde".to_vec(), whole)))
        );
    }

    #[test]
    fn bad_or_oversized_chunks_are_errors() {
        assert_eq!(
            parse_chunked(b"zz\r\n", 100, 100),
            Err(ChunkError::Malformed)
        );
        assert_eq!(
            parse_chunked(b"3\r\nabcXX0\r\n\r\n", 100, 100),
            Err(ChunkError::Malformed)
        );
        assert_eq!(
            parse_chunked(b"ff\r\n", 100, 100),
            Err(ChunkError::TooLarge)
        );
        assert_eq!(
            parse_chunked(&[b'1'; 200], 100, 100),
            Err(ChunkError::Malformed)
        );
    }
}
