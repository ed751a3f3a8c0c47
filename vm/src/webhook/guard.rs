//! A webhook URL is an outbound destination chosen by whoever starts a run:
//! without a guard it reaches the services on the worker's own network
//! (SSRF). Loopback, private, link-local (cloud metadata), shared,
//! multicast and unspecified addresses are refused unless the operator
//! allows them (`AIS_WEBHOOK_ALLOW_PRIVATE=1`, `[webhooks] allow_private`). The check runs when a URL
//! is declared (literal addresses) and again on every connection, on the
//! addresses the name resolves to then ([`GuardedResolver`]), so a name
//! that later resolves to a private address is refused too.

use std::net::{IpAddr, Ipv6Addr};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};

/// Whether `ip` is a public unicast address (one a webhook may reach when
/// private ones are not allowed): the same rule as `http_get`'s.
pub fn is_public(ip: IpAddr) -> bool {
    !ais_stdlib::http::is_private(ip)
}

/// The address a URL's host names literally (`127.0.0.1`, `[::1]`), if it
/// is one; `localhost` counts as loopback.
pub fn literal_host(host: &str) -> Option<IpAddr> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if h.eq_ignore_ascii_case("localhost") || h.to_ascii_lowercase().ends_with(".localhost") {
        return Some(IpAddr::V6(Ipv6Addr::LOCALHOST));
    }
    h.parse().ok()
}

/// Resolves as usual, then refuses names that resolve to a non-public
/// address (unless `allow_private`).
#[derive(Debug, Default)]
pub struct GuardedResolver {
    pub allow_private: bool,
    inner: DefaultResolver,
}

impl GuardedResolver {
    pub fn new(allow_private: bool) -> GuardedResolver {
        GuardedResolver {
            allow_private,
            inner: DefaultResolver::default(),
        }
    }
}

impl Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = self.inner.resolve(uri, config, timeout)?;
        if !self.allow_private {
            if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
                return Err(ureq::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "refused: {} resolves to the non-public address {} (AIS_WEBHOOK_ALLOW_PRIVATE=1 or `[webhooks] allow_private = true` allows it)",
                        uri.host().unwrap_or_default(),
                        bad.ip()
                    ),
                )));
            }
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            let ip: IpAddr = a.parse().expect("address");
            assert!(!is_public(ip), "{a} is not public");
        }
        for a in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            let ip: IpAddr = a.parse().expect("address");
            assert!(is_public(ip), "{a} is public");
        }
        assert_eq!(
            literal_host("localhost"),
            Some(IpAddr::V6(Ipv6Addr::LOCALHOST))
        );
        assert_eq!(literal_host("[::1]"), Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
        assert_eq!(literal_host("example.com"), None);
    }
}
