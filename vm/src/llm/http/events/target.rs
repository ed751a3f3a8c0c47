//! Which endpoints the event transport serves: plain `http://` on a
//! loopback host, with no credentials in the URL.

use std::net::SocketAddr;

/// Where requests go: the server's addresses (`localhost`: IPv4, then
/// IPv6) and what the request line and `Host` header say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::llm::http) struct Target {
    pub addrs: Vec<SocketAddr>,
    pub authority: String,
    pub path: String,
}

impl Target {
    /// The target of `endpoint` when the event transport can serve it:
    /// `http://` on a loopback host, with no credentials in the URL.
    pub fn of(endpoint: &str) -> Option<Target> {
        let rest = endpoint.strip_prefix("http://")?;
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return None;
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => (h, p.parse::<u16>().ok()?),
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<std::net::IpAddr> = if host.eq_ignore_ascii_case("localhost") {
            vec![
                std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::Ipv6Addr::LOCALHOST.into(),
            ]
        } else {
            vec![host.parse().ok()?]
        };
        if !ips.iter().all(|ip| ip.is_loopback()) {
            return None;
        }
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        Some(Target {
            addrs: ips
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect(),
            authority: authority.to_string(),
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_loopback_endpoints_are_served() {
        let t = Target::of("http://127.0.0.1:8080/v1/chat/completions");
        assert_eq!(
            t,
            Some(Target {
                addrs: vec!["127.0.0.1:8080".parse().unwrap_or_else(|_| unreachable!())],
                authority: "127.0.0.1:8080".into(),
                path: "/v1/chat/completions".into(),
            })
        );
        let t = Target::of("http://localhost:11434/api/chat").map(|t| t.addrs);
        let both: Vec<String> = t
            .unwrap_or_default()
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(both, ["127.0.0.1:11434", "[::1]:11434"]);
        let t = Target::of("http://[::1]:9/x").map(|t| t.addrs[0].to_string());
        assert_eq!(t.as_deref(), Some("[::1]:9"));
        assert_eq!(
            Target::of("http://127.0.0.1").map(|t| (t.addrs[0].port(), t.path)),
            Some((80, "/".to_string()))
        );
        for other in [
            "https://127.0.0.1:8080/v1",
            "http://api.example.com/v1",
            "http://10.0.0.5:8000/v1",
            "http://user:pw@127.0.0.1:8080/v1",
            "http://127.0.0.1:notaport/v1",
            "ftp://127.0.0.1/",
        ] {
            assert_eq!(Target::of(other), None, "{other}");
        }
    }
}
