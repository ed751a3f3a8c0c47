//! A webhook URL is an outbound destination chosen by whoever starts a run:
//! without a guard it reaches the services on the worker's own network
//! (SSRF). Loopback, private, link-local (cloud metadata), shared,
//! multicast and unspecified addresses are refused unless the operator
//! allows them (`AIS_WEBHOOK_ALLOW_PRIVATE=1`, `[webhooks] allow_private`). The check runs when a URL
//! is declared (literal addresses) and again on every connection, on the
//! addresses the name resolves to then ([`GuardedResolver`]), so a name
//! that later resolves to a private address is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};

/// Whether `ip` is a public unicast address (one a webhook may reach when
/// private ones are not allowed).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public_v4(v4);
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // Unique local fc00::/7, link-local fe80::/10.
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                // NAT64 of a private v4 is not worth telling apart.
                || s[0] == 0x0064
                // Documentation 2001:db8::/32.
                || (s[0] == 0x2001 && s[1] == 0x0db8))
        }
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        // Shared address space 100.64.0.0/10 (carrier NAT).
        || (o[0] == 100 && (o[1] & 0xc0) == 64)
        // Reserved 240.0.0.0/4 and benchmarking 198.18.0.0/15.
        || o[0] >= 240
        || (o[0] == 198 && (o[1] & 0xfe) == 18))
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
