//! `search` (the reference's `search_web` too): web search through a
//! configured provider speaking the SearXNG JSON API (`GET
//! {url}/search?q=…&format=json` → `{"results": [{title, url, content}]}`),
//! which self-hosted SearXNG instances and compatible gateways serve.
//! Without a provider the call fails with `search.unconfigured`; a run on
//! the offline simulator gets simulated results instead, each labelled.

use crate::{Settings, ToolError};
use serde_json::{json, Value as Json};
use std::time::Duration;

/// Where `search` goes.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum SearchProvider {
    /// No provider configured: calls fail with a hint.
    #[default]
    None,
    /// The offline simulator's stand-in: labelled, deterministic results.
    Simulated,
    /// A SearXNG-compatible JSON API.
    Http {
        /// Base URL (`http://127.0.0.1:8888`); `/search` is appended.
        url: String,
        /// Sent as `Authorization: Bearer …`; never shown in errors.
        api_key: Option<String>,
        /// The configured key variable, when it is not set: calls fail
        /// naming it.
        key_missing: Option<String>,
        timeout: Duration,
    },
}

/// Results a call returns at most, whatever it asks for.
pub const MAX_RESULTS: u64 = 50;

pub fn search(args: &Json, settings: &Settings) -> Result<Json, ToolError> {
    let query = match args {
        Json::String(s) => s.as_str(),
        _ => crate::str_arg(args, "search", "query")?,
    };
    if query.trim().is_empty() {
        return Err(ToolError::new(
            "tool.invalid_args",
            "`search` needs a non-empty `query`",
        ));
    }
    let limit = args
        .get("limit")
        .and_then(Json::as_u64)
        .unwrap_or(5)
        .clamp(1, MAX_RESULTS);
    match &settings.search {
        SearchProvider::None => Err(ToolError::new(
            "search.unconfigured",
            "no web-search provider is configured: add `[tools.search] url = \"http://…\"` (a SearXNG-compatible JSON API) to .apxm/config.toml",
        )),
        SearchProvider::Simulated => Ok(simulated(query, limit)),
        SearchProvider::Http {
            key_missing: Some(var),
            ..
        } => Err(ToolError::new(
            "search.key_missing",
            format!("environment variable {var} (api_key_env of [tools.search]) is not set"),
        )),
        SearchProvider::Http {
            url,
            api_key,
            timeout,
            key_missing: None,
        } => http(url, api_key.as_deref(), *timeout, query, limit, settings),
    }
}

/// Labelled stand-in results, the same for the same query.
fn simulated(query: &str, limit: u64) -> Json {
    let n = limit.min(3);
    Json::Array(
        (1..=n)
            .map(|i| {
                json!({
                    "title": format!("[simulated search] {query} ({i})"),
                    "url": format!("https://search.invalid/simulated/{i}"),
                    "snippet": format!("[simulated] result {i} for: {query}"),
                    "simulated": true,
                })
            })
            .collect(),
    )
}

#[cfg(feature = "http")]
fn http(
    base: &str,
    api_key: Option<&str>,
    timeout: Duration,
    query: &str,
    limit: u64,
    settings: &Settings,
) -> Result<Json, ToolError> {
    let url = format!("{}/search", base.trim_end_matches('/'));
    let mut req = crate::http::agent_for(&url, timeout)
        .get(&url)
        .query("q", query)
        .query("format", "json")
        .header("accept", "application/json");
    if let Some(k) = api_key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let fail = |code: &str, message: String| {
        ToolError::new(code, message).with_payload(json!({"provider": base}))
    };
    let mut resp = req.call().map_err(|e| {
        let code = match e {
            ureq::Error::Timeout(_) => "search.timeout",
            _ => "search.transport",
        };
        fail(
            code,
            format!("the search provider {base} did not answer: {e}"),
        )
    })?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(settings.max_bytes)
        .read_to_string()
        .map_err(|e| fail("search.body", format!("reading the reply of {base}: {e}")))?;
    if !(200..300).contains(&status) {
        return Err(fail(
            "search.status",
            format!("the search provider {base} answered HTTP {status}"),
        ));
    }
    let reply: Json = serde_json::from_str(&body).map_err(|e| {
        fail(
            "search.invalid_reply",
            format!("the search provider {base} did not answer JSON: {e}"),
        )
    })?;
    let Some(results) = reply.get("results").and_then(Json::as_array) else {
        return Err(fail(
            "search.invalid_reply",
            format!("the reply of {base} has no `results` list (is it a SearXNG JSON API with format=json enabled?)"),
        ));
    };
    let text = |r: &Json, k: &str| r.get(k).and_then(Json::as_str).unwrap_or("").to_string();
    Ok(Json::Array(
        results
            .iter()
            .filter(|r| r.is_object())
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|r| json!({"title": text(r, "title"), "url": text(r, "url"), "snippet": text(r, "content")}))
            .collect(),
    ))
}

#[cfg(not(feature = "http"))]
fn http(
    _: &str,
    _: Option<&str>,
    _: Duration,
    _: &str,
    _: u64,
    _: &Settings,
) -> Result<Json, ToolError> {
    Err(ToolError::new(
        "http.unavailable",
        "ais-stdlib was built without its `http` feature",
    ))
}

#[cfg(all(test, feature = "http"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::mpsc;

    /// One request answered with `body`; the request line and headers are sent back.
    fn serve(status: &'static str, body: &'static str) -> (String, mpsc::Receiver<String>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).unwrap_or(0);
                let _ = tx.send(String::from_utf8_lossy(&buf[..n]).into_owned());
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (format!("http://{addr}"), rx)
    }

    fn with(provider: SearchProvider) -> Settings {
        Settings {
            search: provider,
            ..Settings::default()
        }
    }

    #[test]
    fn searxng_results_are_mapped_and_the_key_is_sent_not_shown() {
        let (url, rx) = serve(
            "200 OK",
            r#"{"results": [{"title": "A", "url": "https://a", "content": "about a"}, {"title": "B", "url": "https://b", "content": "b"}]}"#,
        );
        let s = with(SearchProvider::Http {
            url,
            api_key: Some("sekret-key".into()),
            key_missing: None,
            timeout: Duration::from_secs(5),
        });
        let r = search(&json!({"query": "solid state", "limit": 1}), &s).unwrap();
        assert_eq!(
            r,
            json!([{"title": "A", "url": "https://a", "snippet": "about a"}])
        );
        let req = rx.recv().unwrap();
        assert!(
            req.starts_with("GET /search?q=solid+state&format=json")
                || req.starts_with("GET /search?q=solid%20state&format=json"),
            "{req}"
        );
        assert!(req
            .to_ascii_lowercase()
            .contains("authorization: bearer sekret-key"));
    }

    #[test]
    fn bad_replies_and_no_provider_are_coded_errors() {
        let (url, _rx) = serve("200 OK", r#"{"answers": []}"#);
        let s = with(SearchProvider::Http {
            url,
            api_key: Some("sekret-key".into()),
            key_missing: None,
            timeout: Duration::from_secs(5),
        });
        let e = search(&json!({"query": "x"}), &s).unwrap_err();
        assert_eq!(e.code, "search.invalid_reply");
        assert!(!e.message.contains("sekret"));
        let (url, _rx) = serve("503 Service Unavailable", "down");
        let s = with(SearchProvider::Http {
            url,
            api_key: None,
            key_missing: None,
            timeout: Duration::from_secs(5),
        });
        assert_eq!(
            search(&json!({"query": "x"}), &s).unwrap_err().code,
            "search.status"
        );
        let e = search(&json!({"query": "x"}), &Settings::default()).unwrap_err();
        assert_eq!(e.code, "search.unconfigured");
        assert!(e.message.contains("[tools.search]"));
    }

    #[test]
    fn simulated_results_are_labelled_and_stable() {
        let s = with(SearchProvider::Simulated);
        let a = search(&json!({"query": "tea"}), &s).unwrap();
        assert_eq!(a, search(&json!("tea"), &s).unwrap());
        assert_eq!(a.as_array().unwrap().len(), 3);
        assert_eq!(a[0]["simulated"], true);
        assert!(a[0]["title"]
            .as_str()
            .unwrap()
            .starts_with("[simulated search]"));
    }
}
