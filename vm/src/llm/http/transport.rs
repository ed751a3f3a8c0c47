//! Plain HTTP of the thread transport: one POST with ureq, its transport
//! errors named, `Retry-After` read (seconds, milliseconds or an HTTP
//! date), cancellable sleeps.

use super::Exchange;
use crate::llm::{CancelToken, LlmErrorKind};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest response body read (bytes).
pub(super) const MAX_BODY: u64 = 16 << 20;

/// True for `http://127.0.0.1…`, `http://localhost…`, `http://[::1]…`.
pub(super) fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(authority);
    host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
}

/// Sleeps `d` in short slices; false when cancelled meanwhile.
pub(crate) fn sleep_cancellable(d: Duration, cancel: &CancelToken) -> bool {
    let end = Instant::now() + d;
    loop {
        if cancel.is_cancelled() {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(10)));
    }
}

pub(super) fn send(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    body: String,
) -> Exchange {
    let mut req = agent.post(url).content_type("application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    match req.send(body) {
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            let headers = resp.headers();
            let retry_after = retry_after(|k| headers.get(k).and_then(|v| v.to_str().ok()));
            match resp
                .body_mut()
                .with_config()
                .limit(MAX_BODY)
                .read_to_string()
            {
                Ok(body) => Exchange::Status {
                    status,
                    retry_after,
                    body,
                },
                Err(e) => {
                    let (kind, message) = transport_error(&e);
                    Exchange::Transport {
                        kind,
                        message: format!("reading the reply body: {message}"),
                    }
                }
            }
        }
        Err(e) => {
            let (kind, message) = transport_error(&e);
            Exchange::Transport { kind, message }
        }
    }
}

pub(super) fn transport_error(e: &ureq::Error) -> (LlmErrorKind, String) {
    match e {
        ureq::Error::Timeout(t) => (LlmErrorKind::Timeout, format!("timed out ({t})")),
        ureq::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            (LlmErrorKind::Timeout, format!("timed out: {io}"))
        }
        // What the server sent is not a valid HTTP reply (status line,
        // headers, framing, text): named as the event transport names it.
        ureq::Error::Protocol(p) => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {p}"),
        ),
        ureq::Error::Http(h) => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {h}"),
        ),
        ureq::Error::LargeResponseHeader(..) | ureq::Error::Decompress(..) => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {e}"),
        ),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {io}"),
        ),
        ureq::Error::HostNotFound => (LlmErrorKind::Connect, "host not found".into()),
        ureq::Error::ConnectionFailed => (LlmErrorKind::Connect, "connection failed".into()),
        other => (LlmErrorKind::Connect, format!("connection error: {other}")),
    }
}

/// `retry-after-ms` (OpenAI), else `Retry-After` as seconds or HTTP date.
pub(super) fn retry_after<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<Duration> {
    let get = |k: &str| header(k).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e6)));
    }
    let at = parse_http_date(v)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// An HTTP date (IMF-fixdate, RFC 850 or asctime) to Unix seconds, by the
/// one parser in `ais_wire::time` (the `httpdate` crate).
pub use ais_wire::time::parse_http_date;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("soon"), None);
    }
}
