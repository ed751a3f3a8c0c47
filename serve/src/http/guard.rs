//! Who may talk to the server: the bearer token, and, for a server
//! without one (then bound to loopback), the `Host` and `Origin` checks
//! that keep web pages out. A page of another site can send a simple
//! cross-origin `POST` (`Content-Type: text/plain`) to a loopback port, and
//! a DNS-rebinding page can make its own name resolve to 127.0.0.1: the
//! first carries a foreign `Origin`, the second a foreign `Host`.

use crate::error::ApiError;
use std::net::{IpAddr, SocketAddr};

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// True when an `Authorization` header value carries `token`.
pub(crate) fn authorized(header: Option<&str>, token: &str) -> bool {
    let Some(v) = header else {
        return false;
    };
    let Some(given) = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
    else {
        return false;
    };
    same(given.trim().as_bytes(), token.as_bytes())
}

/// `host[:port]` split; `None` when it is not of that shape.
fn split_authority(a: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = a.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            p => Some((host, Some(p.strip_prefix(':')?))),
        };
    }
    match a.split_once(':') {
        Some((h, p)) => Some((h, Some(p))),
        None => Some((a, None)),
    }
}

/// True when `authority` (a `Host` value, or an origin's `host:port`)
/// names this loopback server: `localhost` or a loopback address, and its
/// port (an absent one is 80).
fn names_this_server(authority: &str, bound: SocketAddr) -> bool {
    let Some((host, port)) = split_authority(authority.trim()) else {
        return false;
    };
    let port_ok = match port {
        None => bound.port() == 80,
        Some(p) => p.parse::<u16>().is_ok_and(|p| p == bound.port()),
    };
    let host_ok = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    port_ok && host_ok
}

/// The checks of a tokenless server: `Err` (403) for a `Host` that is not
/// a loopback name of this server's port, or an `Origin` that is neither
/// this server's nor one of `allowed`.
pub(crate) fn check_tokenless(
    host: Option<&str>,
    origin: Option<&str>,
    bound: SocketAddr,
    allowed: &[String],
) -> Result<(), ApiError> {
    if let Some(h) = host {
        if !names_this_server(h, bound) {
            return Err(ApiError::new(
                403,
                "request.host",
                format!(
                    "the Host `{h}` does not name this server ({bound}): a server without a token answers only requests addressed to localhost or a loopback address with its port (a web page that made its own name resolve here, DNS rebinding, sends its own name)"
                ),
                "address the server as http://127.0.0.1:PORT or http://localhost:PORT; to serve under another name, set AIS_SERVE_TOKEN and send it as a bearer token",
            ));
        }
    }
    if let Some(o) = origin {
        let own = o
            .strip_prefix("http://")
            .is_some_and(|a| !a.contains('/') && names_this_server(a, bound));
        let normalized = o.trim_end_matches('/');
        let listed = allowed
            .iter()
            .any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(normalized));
        if !own && !listed {
            return Err(ApiError::new(
                403,
                "request.origin",
                format!(
                    "the Origin `{o}` is not this server's (http://{bound}): a server without a token refuses requests from web pages of other sites"
                ),
                "clients that are not browsers send no Origin; to let a page of that origin drive the server, start it with `--allow-origin ORIGIN`, or set AIS_SERVE_TOKEN (requests must then carry the bearer token)",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 8080))
    }

    #[test]
    fn loopback_names_with_the_port_are_this_server() {
        for h in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "127.1.2.3:8080",
        ] {
            assert!(check_tokenless(Some(h), None, bound(), &[]).is_ok(), "{h}");
        }
        for h in [
            "evil.example:8080",
            "127.0.0.1:8081",
            "localhost",
            "10.0.0.1:8080",
            "[::1]x:8080",
            "localhost.evil.example:8080",
        ] {
            let e = check_tokenless(Some(h), None, bound(), &[]).expect_err(h);
            assert_eq!((e.status, e.code), (403, "request.host"), "{h}");
        }
    }

    #[test]
    fn only_own_or_listed_origins_pass() {
        let ok = |o: &str, allowed: &[String]| check_tokenless(None, Some(o), bound(), allowed);
        assert!(ok("http://127.0.0.1:8080", &[]).is_ok());
        assert!(ok("http://localhost:8080", &[]).is_ok());
        for o in [
            "http://evil.example",
            "null",
            "https://127.0.0.1:8080",
            "http://localhost:3000",
            "http://127.0.0.1:8080/x",
        ] {
            assert_eq!(ok(o, &[]).expect_err(o).code, "request.origin", "{o}");
        }
        assert!(ok("http://localhost:3000", &["http://localhost:3000/".into()]).is_ok());
    }

    #[test]
    fn the_token_is_compared_whole() {
        assert!(authorized(Some("Bearer s3cret"), "s3cret"));
        assert!(!authorized(Some("Bearer s3cre"), "s3cret"));
        assert!(!authorized(Some("s3cret"), "s3cret"));
        assert!(!authorized(None, "s3cret"));
    }
}
