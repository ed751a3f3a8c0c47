//! HTTP/1.1 requests parsed from a connection's buffered bytes: the mock
//! reads whatever a socket has and asks here whether a whole request is in.

use super::{MAX_BODY, MAX_HEAD};
use ais_vm::llm::wire::{self, find};

/// A request head: method, path, headers (names lower-cased, in order).
#[derive(Debug, PartialEq)]
pub(super) struct Head {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Head {
    fn get(&self, name: &str) -> Option<&str> {
        wire::header(&self.headers, name)
    }
}

/// What the start of a buffer holds.
#[derive(Debug, PartialEq)]
pub(super) enum Parsed {
    /// Not a whole request yet.
    Incomplete,
    /// Not HTTP, or over the size limits: the connection is dropped.
    Invalid,
    /// A request and the number of bytes it took.
    Request {
        head: Head,
        body: Vec<u8>,
        used: usize,
    },
}

/// Parses the request at the start of `buf`.
pub(super) fn parse_request(buf: &[u8]) -> Parsed {
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD {
            Parsed::Invalid
        } else {
            Parsed::Incomplete
        };
    };
    if head_end > MAX_HEAD {
        return Parsed::Invalid;
    }
    let Some(head) = parse_head(&buf[..head_end]) else {
        return Parsed::Invalid;
    };
    let rest = &buf[head_end + 4..];
    let chunked = head
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let (body, body_len) = if chunked {
        match wire::parse_chunked(rest, MAX_BODY, MAX_HEAD) {
            Ok(Some(x)) => x,
            Ok(None) => return Parsed::Incomplete,
            Err(_) => return Parsed::Invalid,
        }
    } else {
        let len = match head.get("content-length").map(str::parse::<usize>) {
            None => 0,
            Some(Ok(n)) if n <= MAX_BODY => n,
            Some(_) => return Parsed::Invalid,
        };
        if rest.len() < len {
            return Parsed::Incomplete;
        }
        (rest[..len].to_vec(), len)
    };
    Parsed::Request {
        head,
        body,
        used: head_end + 4 + body_len,
    }
}

fn parse_head(bytes: &[u8]) -> Option<Head> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers = wire::header_lines(lines);
    Some(Head {
        method,
        path,
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(p: Parsed) -> (Head, Vec<u8>, usize) {
        match p {
            Parsed::Request { head, body, used } => (head, body, used),
            other => panic!("not a whole request: {other:?}"),
        }
    }

    #[test]
    fn a_request_is_whole_only_with_its_whole_body() {
        let raw =
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
        for cut in 0..raw.len() {
            assert_eq!(
                parse_request(&raw[..cut]),
                Parsed::Incomplete,
                "cut at {cut}"
            );
        }
        let mut two = raw.to_vec();
        two.extend_from_slice(b"GET /");
        let (head, body, used) = request(parse_request(&two));
        assert_eq!(head.method, "POST");
        assert_eq!(head.path, "/v1/chat/completions");
        assert_eq!(head.get("host"), Some("x"));
        assert_eq!(body, b"hello");
        assert_eq!(used, raw.len());
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let raw = b"POST /api/chat HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        for cut in 0..raw.len() {
            assert_eq!(
                parse_request(&raw[..cut]),
                Parsed::Incomplete,
                "cut at {cut}"
            );
        }
        let (_, body, used) = request(parse_request(raw));
        assert_eq!(body, b"abcde");
        assert_eq!(used, raw.len());
    }

    #[test]
    fn oversized_or_malformed_requests_are_invalid() {
        let big = format!(
            "POST / HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(parse_request(big.as_bytes()), Parsed::Invalid);
        assert_eq!(parse_request(&vec![b'a'; MAX_HEAD + 1]), Parsed::Invalid);
        assert_eq!(parse_request(b"\r\n\r\n"), Parsed::Invalid);
        assert_eq!(
            parse_request(b"POST / HTTP/1.1\r\ncontent-length: x\r\n\r\n"),
            Parsed::Invalid
        );
        assert_eq!(
            parse_request(b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"),
            Parsed::Invalid
        );
    }
}
