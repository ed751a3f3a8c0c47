//! API keys that never print.
//!
//! A [`Secret`] masks itself in `Debug` and `Display`; the only way to read it
//! is [`Secret::expose`], used when building the request header. Text coming
//! back from a provider goes through [`redact`] before it lands in an error,
//! a log or a recording, because servers sometimes echo (parts of) the key.

use std::fmt;

/// A credential read from the environment.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The raw value, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(****)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

/// Removes `secret` (and any 8+ character piece of it, since providers echo
/// keys partially) plus anything shaped like a well-known API key from
/// `text`.
pub fn redact(text: &str, secret: Option<&Secret>) -> String {
    let mut out = text.to_string();
    if let Some(s) = secret {
        let key = s.expose();
        if !key.is_empty() {
            out = out.replace(key, "****");
            // Partial echoes ("sk-abc...wxyz", "Incorrect API key provided:
            // sk-pro************wxyz"): drop every window of 8+ chars of the key.
            if key.len() >= 8 && key.is_ascii() {
                let bytes = key.as_bytes();
                let mut len = bytes.len() - 1;
                while len >= 8 {
                    for start in 0..=bytes.len() - len {
                        let piece = &key[start..start + len];
                        if out.contains(piece) {
                            out = out.replace(piece, "****");
                        }
                    }
                    len -= 1;
                }
            }
        }
    }
    redact_key_shapes(&out)
}

/// `url` with its credentials masked: the user-info (`user:password@`) and
/// every query value (`?key=…`), so a key pasted into `base_url` never
/// shows in `config show`, `doctor`, errors or events.
pub fn redact_url(url: &str) -> String {
    let (head, fragment) = match url.split_once('#') {
        Some((h, f)) => (h, Some(f)),
        None => (url, None),
    };
    let (head, query) = match head.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (head, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let (scheme, rest) = head.split_at(scheme_end);
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let mut out = String::from(scheme);
    match authority.rsplit_once('@') {
        Some((_, host)) => {
            out.push_str("****@");
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    out.push_str(path);
    if let Some(q) = query {
        let masked: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) => format!("{k}=****"),
                None => pair.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&masked.join("&"));
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// Masks every occurrence of `url` (and of its credential parts) in
/// `text` by [`redact_url`].
pub fn redact_url_in(text: &str, url: &str) -> String {
    let masked = redact_url(url);
    if masked == url {
        return text.to_string();
    }
    let mut out = text.replace(url, &masked);
    // Pieces of the URL a message may quote on their own (a transport
    // error naming the host with its user-info, a query value).
    let secrets = url_secrets(url);
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s.as_str(), "****");
    }
    out
}

/// The user-info and query values of `url`.
fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let head = url.split('#').next().unwrap_or(url);
    let (head, query) = match head.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (head, None),
    };
    let rest = head.split_once("://").map_or(head, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some((info, _)) = authority.rsplit_once('@') {
        found.push(format!("{info}@"));
        found.extend(info.split(':').map(str::to_string));
    }
    if let Some(q) = query {
        found.extend(
            q.split('&')
                .filter_map(|p| p.split_once('='))
                .map(|(_, v)| v.to_string()),
        );
    }
    found.retain(|s| !s.is_empty());
    // Longest first, so a piece never leaves part of a longer one behind.
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found
}

/// Masks words that look like provider keys (`sk-...`, `sk-ant-...`,
/// `Bearer ...`), whatever their origin.
fn redact_key_shapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = find_key_start(rest) {
        out.push_str(&rest[..pos.0]);
        let tail = &rest[pos.0 + pos.1..];
        let end = tail
            .find(|c: char| {
                !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' || c == '*')
            })
            .unwrap_or(tail.len());
        if end >= 6 {
            out.push_str(&rest[pos.0..pos.0 + pos.1]);
            out.push_str("****");
        } else {
            out.push_str(&rest[pos.0..pos.0 + pos.1 + end]);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Position and prefix length of the next key-shaped word.
fn find_key_start(text: &str) -> Option<(usize, usize)> {
    let candidates = [("sk-", 3), ("Bearer ", 7)];
    candidates
        .iter()
        .filter_map(|(p, n)| {
            let mut from = 0;
            while let Some(i) = text[from..].find(p) {
                let at = from + i;
                let boundary = at == 0
                    || !text[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_ascii_alphanumeric());
                if boundary {
                    return Some((at, *n));
                }
                from = at + p.len();
            }
            None
        })
        .min_by_key(|(at, _)| *at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_full_partial_and_shaped_keys() {
        let s = Secret::new("sk-test-1234567890abcdef");
        assert_eq!(format!("{s:?} {s}"), "Secret(****) ****");
        let r = redact("bad key sk-test-1234567890abcdef here", Some(&s));
        assert!(!r.contains("1234567890"), "{r}");
        let r = redact(
            "Incorrect API key provided: sk-test-12********cdef.",
            Some(&s),
        );
        assert!(!r.contains("test-12"), "{r}");
        assert_eq!(redact("Bearer abcdefghijkl", None), "Bearer ****");
        assert_eq!(redact("task-list is fine", None), "task-list is fine");
    }
}
