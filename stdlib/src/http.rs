//! `http_get` over ureq (blocking). Loopback URLs bypass environment proxies.
//!
//! The URL comes from the program or a model, so it may be an attacker's
//! choice: a destination inside the machine or its network (loopback,
//! private, link-local: a local admin port, a cloud metadata service) is
//! refused (`http.private_address`) unless `[tools] allow_private_network`
//! names it. The check is made on the resolved addresses, by the resolver
//! the connection uses (so a name cannot resolve to a public address for
//! the check and a private one for the connection), and again for every
//! redirect, which `http_get` follows itself. Through an HTTP proxy from
//! the environment the proxy connects: the check is then on this
//! machine's resolution of each hop's host.

use crate::{Settings, ToolError};
use serde_json::{json, Value as Json};
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::DefaultConnector;

fn is_loopback(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

/// A client for `url`: statuses are values, one timeout for the whole
/// exchange, no proxy for loopback.
pub(crate) fn agent_for(url: &str, timeout: Duration) -> ureq::Agent {
    let mut builder = ureq::Agent::config_builder();
    if is_loopback(url) {
        builder = builder.proxy(None);
    }
    ureq::Agent::new_with_config(
        builder
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .user_agent(concat!("apxm-ais/", env!("CARGO_PKG_VERSION")))
            .build(),
    )
}

/// Is `ip` a destination inside the machine or its networks, or no public
/// unicast address at all: loopback, unspecified, private (RFC 1918,
/// unique-local), carrier-grade NAT, link-local (cloud metadata services
/// live there), broadcast, multicast, documentation and reserved ranges?
/// The one SSRF rule: `http_get` and webhook deliveries both ask it.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            a.is_loopback()
                || a.is_unspecified()
                || a.is_private()
                || a.is_link_local()
                || a.is_broadcast()
                || a.is_multicast()
                || a.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                // Benchmarking 198.18.0.0/15, reserved 240.0.0.0/4.
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
                || o[0] >= 240
        }
        IpAddr::V6(a) => {
            if let Some(v4) = a.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let s = a.segments();
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                // 6to4 and NAT64 forms embed an IPv4 address.
                || s[0] == 0x2002
                || s[0] == 0x0064
                // Documentation 2001:db8::/32.
                || (s[0] == 0x2001 && s[1] == 0x0db8)
        }
    }
}

/// Does `[tools] allow_private_network` let `http_get` reach `host:port`?
fn private_allowed(allow: &[String], host: &str, port: u16) -> bool {
    allow
        .iter()
        .any(|a| a == "*" || a.eq_ignore_ascii_case(host) || *a == format!("{host}:{port}"))
}

/// A refused destination (found by the resolver, reported as `http.private_address`).
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

fn refusal(host: &str, port: u16, ip: IpAddr) -> String {
    format!(
        "`{host}:{port}` resolves to {ip}, a loopback, private or link-local address; \
         add it to `[tools] allow_private_network` in .apxm/config.toml to allow it"
    )
}

/// The addresses of `host:port`, refused when any is private and the
/// configuration does not allow it.
fn check_destination(host: &str, port: u16, allow: &[String]) -> Result<(), String> {
    if private_allowed(allow, host, port) {
        return Ok(());
    }
    let addrs: Vec<std::net::SocketAddr> = match (host, port).to_socket_addrs() {
        Ok(a) => a.collect(),
        // Unresolvable: the request fails on its own.
        Err(_) => return Ok(()),
    };
    match addrs.iter().find(|a| is_private(a.ip())) {
        Some(a) => Err(refusal(host, port, a.ip())),
        None => Ok(()),
    }
}

/// Resolves like ureq's default resolver, then refuses private addresses
/// (so the address connected to is the one checked: a name that resolves
/// differently the second time gains nothing). The proxy's own address
/// is the environment's choice and passes.
#[derive(Debug)]
struct GuardedResolver {
    allow: Vec<String>,
    proxy_host: Option<String>,
}

impl Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        let host = uri.host().unwrap_or("").trim_matches(['[', ']']);
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        if self.proxy_host.as_deref() == Some(host) || private_allowed(&self.allow, host, port) {
            return Ok(addrs);
        }
        if let Some(a) = addrs.iter().find(|a| is_private(a.ip())) {
            return Err(ureq::Error::Other(Box::new(Refused(refusal(
                host,
                port,
                a.ip(),
            )))));
        }
        Ok(addrs)
    }
}

/// Redirects `http_get` follows, each checked like the first request.
const MAX_REDIRECTS: usize = 10;

fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_matches(['[', ']']).to_string();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    Some((host, port))
}

/// `location` (a redirect's target) against `base`.
fn join(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let auth_end = base[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(base.len(), |i| scheme_end + i);
    if let Some(rest) = location.strip_prefix("//") {
        return format!("{}{rest}", &base[..scheme_end]);
    }
    if location.starts_with('/') {
        return format!("{}{location}", &base[..auth_end]);
    }
    let path = &base[auth_end..];
    let path = path.split(['?', '#']).next().unwrap_or("");
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    format!("{}{dir}{location}", &base[..auth_end])
}

pub fn http_get(args: &Json, settings: &Settings) -> Result<Json, ToolError> {
    let url = match args {
        Json::String(s) => s.as_str(),
        _ => crate::str_arg(args, "http_get", "url")?,
    };
    let timeout = args
        .get("timeout_s")
        .and_then(Json::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map_or(settings.http_timeout, Duration::from_secs_f64);
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let url = current.as_str();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(
                ToolError::new("http.bad_url", format!("`{url}` is not an http(s) URL"))
                    .with_payload(json!({"url": url})),
            );
        }
        let Some((host, port)) = host_port(url) else {
            return Err(
                ToolError::new("http.bad_url", format!("`{url}` is not a valid URL"))
                    .with_payload(json!({"url": url})),
            );
        };
        let private =
            |m: String| ToolError::new("http.private_address", m).with_payload(json!({"url": url}));
        check_destination(&host, port, &settings.allow_private_network).map_err(private)?;
        let agent = guarded_agent(url, timeout, &settings.allow_private_network);
        let mut req = agent.get(url);
        if let Some(Json::Object(h)) = args.get("headers") {
            for (k, v) in h {
                let v = match v {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                req = req.header(k.as_str(), v.as_str());
            }
        }
        let mut resp = req.call().map_err(|e| {
            if let ureq::Error::Other(inner) = &e {
                if let Some(r) = inner.downcast_ref::<Refused>() {
                    return private(r.0.clone());
                }
            }
            let code = match e {
                ureq::Error::Timeout(_) => "http.timeout",
                _ => "http.transport",
            };
            ToolError::new(code, format!("GET {url} failed: {e}")).with_payload(json!({"url": url}))
        })?;
        let status = resp.status().as_u16();
        if (300..400).contains(&status) {
            if let Some(loc) = resp.headers().get("location").and_then(|l| l.to_str().ok()) {
                current = join(url, loc);
                continue;
            }
        }
        let body = resp
            .body_mut()
            .with_config()
            .limit(settings.max_bytes)
            .read_to_string()
            .map_err(|e| {
                ToolError::new("http.body", format!("reading the body of {url}: {e}"))
                    .with_payload(json!({"url": url, "status": status}))
            })?;
        if !(200..300).contains(&status) {
            let excerpt: String = body.chars().take(500).collect();
            return Err(
                ToolError::new("http.status", format!("GET {url} returned HTTP {status}"))
                    .with_payload(json!({"url": url, "status": status, "body": excerpt})),
            );
        }
        return Ok(serde_json::from_str::<Json>(&body).unwrap_or(Json::String(body)));
    }
    Err(ToolError::new(
        "http.redirects",
        format!("GET {url}: more than {MAX_REDIRECTS} redirects"),
    )
    .with_payload(json!({"url": url})))
}

/// `agent_for`'s client with the private-address guard, following no
/// redirect itself (`http_get` checks and follows each).
fn guarded_agent(url: &str, timeout: Duration, allow: &[String]) -> ureq::Agent {
    let mut builder = ureq::Agent::config_builder();
    if is_loopback(url) {
        builder = builder.proxy(None);
    }
    let config = builder
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(timeout))
        .user_agent(concat!("apxm-ais/", env!("CARGO_PKG_VERSION")))
        .build();
    let proxy_host = config.proxy().map(|p| p.host().to_string());
    ureq::Agent::with_parts(
        config,
        DefaultConnector::default(),
        GuardedResolver {
            allow: allow.to_vec(),
            proxy_host,
        },
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn serve(status: &'static str, body: &'static str) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        format!("http://{addr}/x")
    }

    fn loopback_allowed() -> Settings {
        Settings {
            allow_private_network: vec!["127.0.0.1".into()],
            ..Settings::default()
        }
    }

    #[test]
    fn get_json_text_and_status() {
        let s = loopback_allowed();
        let u = serve("200 OK", "{\"a\": 1}");
        assert_eq!(http_get(&json!({"url": u}), &s).unwrap(), json!({"a": 1}));
        let u = serve("200 OK", "plain");
        assert_eq!(http_get(&json!({"url": u}), &s).unwrap(), json!("plain"));
        let u = serve("404 Not Found", "nope");
        let e = http_get(&json!({"url": u}), &s).unwrap_err();
        assert_eq!(e.code, "http.status");
        assert_eq!(e.payload["status"], 404);
        assert_eq!(
            http_get(&json!({"url": "file:///etc/passwd"}), &s)
                .unwrap_err()
                .code,
            "http.bad_url"
        );
        assert!(is_loopback("http://127.0.0.1:80/x") && is_loopback("http://[::1]:8/"));
        assert!(!is_loopback("https://example.com/127.0.0.1"));
    }

    #[test]
    fn private_destinations_are_refused_unless_allowed() {
        let u = serve("200 OK", "secret admin page");
        let e = http_get(&json!({"url": u}), &Settings::default()).unwrap_err();
        assert_eq!(e.code, "http.private_address", "{e:?}");
        assert!(e.message.contains("allow_private_network"), "{}", e.message);
        // `localhost` resolves to loopback: the same.
        let port = u.rsplit(':').next().unwrap().trim_end_matches("/x");
        let by_name = format!("http://localhost:{port}/x");
        let e = http_get(&json!({"url": by_name}), &Settings::default()).unwrap_err();
        assert_eq!(e.code, "http.private_address");
        // The opt-in, by host or by host and port.
        let u = serve("200 OK", "fine");
        assert_eq!(
            http_get(&json!({"url": u}), &loopback_allowed()).unwrap(),
            json!("fine")
        );
        let u = serve("200 OK", "fine");
        let hp = u
            .trim_start_matches("http://")
            .trim_end_matches("/x")
            .to_string();
        let s = Settings {
            allow_private_network: vec![hp],
            ..Settings::default()
        };
        assert_eq!(http_get(&json!({"url": u}), &s).unwrap(), json!("fine"));
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_redirect_to_a_private_address_is_refused() {
        // An allowed server redirects to another loopback port that is not.
        let target = serve("200 OK", "internal");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let to = target.clone();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        let s = Settings {
            allow_private_network: vec![addr.to_string()],
            ..Settings::default()
        };
        let e = http_get(&json!({"url": format!("http://{addr}/start")}), &s).unwrap_err();
        assert_eq!(e.code, "http.private_address", "{e:?}");
        assert_eq!(e.payload["url"], json!(target));
        assert_eq!(join("http://h:1/a/b?q", "c"), "http://h:1/a/c");
        assert_eq!(join("http://h:1/a/b", "/z"), "http://h:1/z");
    }
}
