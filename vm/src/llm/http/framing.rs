//! HTTP/1.1 framing for the event transport, by `ureq-proto` (the sans-IO
//! protocol crate under ureq): the request's bytes, and whether the bytes
//! read so far hold a whole reply.
//!
//! The transport reads replies as the socket yields them and asks again
//! each time; a reply is parsed from the start of the buffer every time
//! (replies from local servers arrive in one or two reads).

use ureq_proto::client::{
    state::RecvResponse, Call, RecvBodyResult, RecvResponseResult, SendRequestResult,
};
use ureq_proto::http::{Request, Response};
use ureq_proto::BodyMode;

/// Largest reply head and body read.
pub(super) const MAX_HEAD: usize = 64 << 10;
pub(super) const MAX_BODY: usize = 16 << 20;

/// What the start of a connection's buffer holds.
#[derive(Debug, PartialEq)]
pub(super) enum Parsed {
    Incomplete,
    Invalid(String),
    Reply {
        status: u16,
        /// Names lower-cased, values as sent, in order.
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        keep_alive: bool,
        /// Bytes of the buffer the reply took.
        used: usize,
    },
    /// The head and the body decoded so far of a reply not yet whole
    /// (only when asked for, by [`parse_partial`]).
    Partial {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
}

/// The bytes of a POST of `body` to `path` on `authority`. Header values
/// with line breaks are refused (they would split the request); the
/// message names the header, never its value.
pub(super) fn request_bytes(
    authority: &str,
    path: &str,
    headers: &[(String, String)],
    body: &str,
) -> Result<Vec<u8>, String> {
    for (name, value) in headers {
        if value.contains(['\r', '\n']) {
            return Err(format!(
                "the `{name}` header value contains a line break; check the backend's settings"
            ));
        }
    }
    let mut req = Request::post(format!("http://{authority}{path}"))
        .header("host", authority)
        .header(
            "user-agent",
            concat!("apxm-ais/", env!("CARGO_PKG_VERSION")),
        )
        .header("accept", "*/*")
        .header("content-type", "application/json")
        .header("content-length", body.len());
    for (name, value) in headers {
        req = req.header(name.as_str(), value.as_str());
    }
    let req = req
        .body(())
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let bad = |e: ureq_proto::Error| format!("cannot write the request: {e}");
    let mut call = Call::new(req).map_err(bad)?.proceed();
    // The head, then the body: one buffer, so one write on the socket.
    let mut out = vec![0u8; 1024 + body.len()];
    let mut used = loop {
        match call.write(&mut out) {
            Ok(n) => break n,
            Err(ureq_proto::Error::OutputOverflow) if out.len() < MAX_HEAD + body.len() => {
                out.resize(out.len() * 2, 0);
            }
            Err(e) => return Err(bad(e)),
        }
    };
    match call.proceed().map_err(bad)? {
        Some(SendRequestResult::SendBody(mut send)) => {
            let mut input = body.as_bytes();
            while !input.is_empty() {
                let (taken, n) = send.write(input, &mut out[used..]).map_err(bad)?;
                if taken == 0 && n == 0 {
                    return Err("cannot write the request: no progress".into());
                }
                input = &input[taken..];
                used += n;
            }
        }
        Some(SendRequestResult::RecvResponse(_)) if body.is_empty() => {}
        _ => return Err("cannot write the request: unexpected protocol state".into()),
    }
    out.truncate(used);
    Ok(out)
}

/// A call waiting for the reply to a POST (what every event-transport
/// request is): the state `ureq-proto` reads a reply in.
fn awaiting_reply() -> Result<Call<RecvResponse>, String> {
    let bad = |e: ureq_proto::Error| format!("protocol state: {e}");
    let req = Request::post("http://localhost/")
        .header("content-length", 0)
        .body(())
        .map_err(|e| format!("protocol state: {e}"))?;
    let mut call = Call::new(req).map_err(bad)?.proceed();
    let mut scratch = [0u8; 256];
    call.write(&mut scratch).map_err(bad)?;
    match call.proceed().map_err(bad)? {
        Some(SendRequestResult::RecvResponse(c)) => Ok(c),
        Some(SendRequestResult::SendBody(mut b)) => {
            b.write(&[], &mut scratch).map_err(bad)?;
            b.proceed()
                .ok_or_else(|| "protocol state: the body did not end".to_string())
        }
        _ => Err("protocol state: no reply expected".into()),
    }
}

fn not_http(buf: &[u8]) -> Parsed {
    let line = buf.split(|b| *b == b'\r').next().unwrap_or(buf);
    let shown: String = String::from_utf8_lossy(line).chars().take(60).collect();
    Parsed::Invalid(format!("not an HTTP/1 reply: `{shown}`"))
}

fn too_large() -> Parsed {
    Parsed::Invalid("the reply body is over 16 MiB".into())
}

/// Parses the reply at the start of `buf` (`eof`: no more bytes will come,
/// which ends a body framed by the connection's close). Interim (1xx)
/// replies are skipped.
pub(super) fn parse_reply(buf: &[u8], eof: bool) -> Parsed {
    parse(buf, eof, false)
}

/// Like [`parse_reply`], but a reply whose head is in and whose body is
/// not whole yet is [`Parsed::Partial`] with the body decoded so far (for
/// streamed replies, whose bytes are wanted as they come). The buffer is
/// decoded from its start on every call, which is cheap for the replies
/// of local servers this transport serves.
pub(super) fn parse_partial(buf: &[u8], eof: bool) -> Parsed {
    parse(buf, eof, true)
}

fn parse(buf: &[u8], eof: bool, partial: bool) -> Parsed {
    let mut call = match awaiting_reply() {
        Ok(c) => c,
        Err(m) => return Parsed::Invalid(m),
    };
    // The head, after any interim replies.
    let mut at = 0;
    let (head_len, response): (usize, Response<()>) = loop {
        match call.try_response(&buf[at..], false) {
            Ok((n, Some(r))) => break (n, r),
            Ok((0, None)) => {
                return if buf.len() - at > MAX_HEAD {
                    Parsed::Invalid("the reply head is over 64 KiB".into())
                } else {
                    Parsed::Incomplete
                };
            }
            Ok((n, None)) => at += n,
            Err(ureq_proto::Error::HttpParseFail(_)) => return not_http(&buf[at..]),
            Err(e) => return Parsed::Invalid(format!("bad reply head: {e}")),
        }
    };
    if head_len > MAX_HEAD {
        return Parsed::Invalid("the reply head is over 64 KiB".into());
    }
    let body_at = at + head_len;
    let status = response.status().as_u16();
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).trim().to_string(),
            )
        })
        .collect();
    let reply = |body, keep_alive, used| Parsed::Reply {
        status,
        headers: headers.clone(),
        body,
        keep_alive,
        used,
    };
    let so_far = |body: Vec<u8>| {
        if partial {
            Parsed::Partial {
                status,
                headers: headers.clone(),
                body,
            }
        } else {
            Parsed::Incomplete
        }
    };
    let mut recv = match call.proceed() {
        Some(RecvResponseResult::RecvBody(b)) => b,
        Some(RecvResponseResult::Cleanup(c)) => {
            return reply(Vec::new(), !c.must_close_connection(), body_at)
        }
        Some(RecvResponseResult::Redirect(r)) => {
            return reply(Vec::new(), !r.must_close_connection(), body_at)
        }
        None => return Parsed::Incomplete,
    };
    let rest = &buf[body_at..];
    match recv.body_mode() {
        BodyMode::LengthDelimited(n) if n > MAX_BODY as u64 => return too_large(),
        // Not all there yet: no decoding (the buffer is parsed again on
        // every read, so a large body would be copied over and over).
        BodyMode::LengthDelimited(n) if (rest.len() as u64) < n => {
            return so_far(if partial { rest.to_vec() } else { Vec::new() })
        }
        BodyMode::CloseDelimited => {
            // Framed by the end of the connection.
            if !eof {
                return if rest.len() > MAX_BODY {
                    too_large()
                } else {
                    so_far(if partial { rest.to_vec() } else { Vec::new() })
                };
            }
            return reply(rest.to_vec(), false, buf.len());
        }
        _ => {}
    }
    // Decoded bytes never outnumber the encoded ones.
    let mut body = vec![0u8; rest.len().min(MAX_BODY + 1)];
    let (mut taken, mut made) = (0, 0);
    while taken < rest.len() && made < body.len() {
        match recv.read(&rest[taken..], &mut body[made..]) {
            Ok((0, 0)) => break,
            Ok((i, o)) => {
                taken += i;
                made += o;
            }
            Err(e) => return Parsed::Invalid(format!("malformed reply body: {e}")),
        }
    }
    if made > MAX_BODY {
        return too_large();
    }
    body.truncate(made);
    match recv.proceed() {
        Some(RecvBodyResult::Cleanup(c)) => {
            reply(body, !c.must_close_connection(), body_at + taken)
        }
        Some(RecvBodyResult::Redirect(r)) => {
            reply(body, !r.must_close_connection(), body_at + taken)
        }
        None if rest.len() > MAX_BODY + MAX_HEAD => too_large(),
        None => so_far(body),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn reply(p: Parsed) -> (u16, Vec<u8>, bool, usize) {
        match p {
            Parsed::Reply {
                status,
                body,
                keep_alive,
                used,
                ..
            } => (status, body, keep_alive, used),
            other => panic!("not a whole reply: {other:?}"),
        }
    }

    #[test]
    fn a_partial_chunked_reply_gives_its_body_so_far() {
        let raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let cut = raw.len() - 12;
        match parse_partial(&raw[..cut], false) {
            Parsed::Partial { status, body, .. } => {
                assert_eq!(status, 200);
                assert_eq!(body, b"abc");
            }
            other => panic!("not partial: {other:?}"),
        }
        assert_eq!(parse_reply(&raw[..cut], false), Parsed::Incomplete);
        assert_eq!(reply(parse_partial(raw, false)).1, b"abcde".to_vec());
    }

    #[test]
    fn a_reply_is_whole_only_with_its_whole_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for cut in 0..raw.len() {
            assert_eq!(
                parse_reply(&raw[..cut], false),
                Parsed::Incomplete,
                "cut {cut}"
            );
        }
        assert_eq!(
            reply(parse_reply(raw, false)),
            (200, b"hello".to_vec(), true, raw.len())
        );
    }

    #[test]
    fn interim_replies_are_skipped_and_chunked_bodies_joined() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many\r\ntransfer-encoding: chunked\r\nretry-after: 2\r\n\r\n2\r\nab\r\n0\r\n\r\n";
        let (status, body, keep, used) = reply(parse_reply(raw, false));
        assert_eq!(
            (status, body, keep, used),
            (429, b"ab".to_vec(), true, raw.len())
        );
    }

    #[test]
    fn close_framed_bodies_end_at_eof_and_close_the_connection() {
        let raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"a\":1}";
        assert_eq!(parse_reply(raw, false), Parsed::Incomplete);
        assert_eq!(
            reply(parse_reply(raw, true)),
            (200, b"{\"a\":1}".to_vec(), false, raw.len())
        );
        let old = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(!reply(parse_reply(old, false)).2);
    }

    proptest::proptest! {
        /// Any bytes, whole or not, parse without a panic, and a reply
        /// parsed from a prefix never claims more bytes than it has.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512), eof in proptest::prelude::any::<bool>()) {
            if let Parsed::Reply { used, .. } = parse_reply(&bytes, eof) {
                proptest::prop_assert!(used <= bytes.len());
            }
        }

        /// Replies framed with a length or in chunks come out whole from
        /// any split of their bytes.
        #[test]
        fn framed_bodies_survive_any_split(body in "[ -~]{0,200}", chunk in 1usize..40, cut in 0usize..400) {
            let mut chunked = String::new();
            for piece in body.as_bytes().chunks(chunk) {
                chunked.push_str(&format!("{:x}\r\n{}\r\n", piece.len(), String::from_utf8_lossy(piece)));
            }
            chunked.push_str("0\r\n\r\n");
            for raw in [
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len()),
                format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{chunked}"),
            ] {
                let raw = raw.as_bytes();
                let cut = cut.min(raw.len());
                if cut < raw.len() {
                    proptest::prop_assert_eq!(parse_reply(&raw[..cut], false), Parsed::Incomplete);
                }
                let (status, got, keep, used) = reply(parse_reply(raw, false));
                proptest::prop_assert_eq!((status, keep, used), (200, true, raw.len()));
                proptest::prop_assert_eq!(got, body.as_bytes().to_vec());
            }
        }
    }

    #[test]
    fn garbage_and_oversized_replies_are_invalid() {
        for bad in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 abc\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert!(
                matches!(parse_reply(bad, false), Parsed::Invalid(_)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(matches!(
            parse_reply(&vec![b'a'; MAX_HEAD + 1], false),
            Parsed::Invalid(_)
        ));
    }

    #[test]
    fn requests_are_one_buffer_head_then_body() {
        let headers = vec![("authorization".to_string(), "Bearer k".to_string())];
        let bytes = request_bytes("127.0.0.1:9", "/v1/chat", &headers, "{\"a\":1}").unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("POST /v1/chat HTTP/1.1\r\n"), "{text}");
        assert!(text.contains("\r\nhost: 127.0.0.1:9\r\n"), "{text}");
        assert!(text.contains("\r\ncontent-length: 7\r\n"), "{text}");
        assert!(text.contains("\r\nauthorization: Bearer k\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n{\"a\":1}"), "{text}");
        let bad = vec![("x-key".to_string(), "a\r\nb".to_string())];
        let e = request_bytes("127.0.0.1:9", "/", &bad, "").unwrap_err();
        assert!(e.contains("`x-key`") && !e.contains("a\r\nb"), "{e}");
    }
}
