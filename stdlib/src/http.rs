//! `http_get` over ureq (blocking). Loopback URLs bypass environment proxies.

use crate::{Settings, ToolError};
use serde_json::{json, Value as Json};
use std::time::Duration;

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

pub fn http_get(args: &Json, settings: &Settings) -> Result<Json, ToolError> {
    let url = match args {
        Json::String(s) => s.as_str(),
        _ => crate::str_arg(args, "http_get", "url")?,
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(
            ToolError::new("http.bad_url", format!("`{url}` is not an http(s) URL"))
                .with_payload(json!({"url": url})),
        );
    }
    let timeout = args
        .get("timeout_s")
        .and_then(Json::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map_or(settings.http_timeout, Duration::from_secs_f64);
    let mut req = agent_for(url, timeout).get(url);
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
        let code = match e {
            ureq::Error::Timeout(_) => "http.timeout",
            _ => "http.transport",
        };
        ToolError::new(code, format!("GET {url} failed: {e}")).with_payload(json!({"url": url}))
    })?;
    let status = resp.status().as_u16();
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
    Ok(serde_json::from_str::<Json>(&body).unwrap_or(Json::String(body)))
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

    #[test]
    fn get_json_text_and_status() {
        let s = Settings::default();
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
}
