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
            out = mask_pieces(&out, key);
        }
    }
    redact_key_shapes(&out)
}

/// Partial echoes ("sk-abc...wxyz", "Incorrect API key provided:
/// sk-pro************wxyz"): drops every window of 8+ chars of `key`.
fn mask_pieces(text: &str, key: &str) -> String {
    let mut out = text.to_string();
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
    out
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

/// Every configured secret of a backend (its key, header values, the
/// user-info and query values of its `base_url`), masked in every form a
/// server may send it back in: as written, percent-encoded, JSON-escaped,
/// and base64 (standard and URL-safe, padded or not, also inside a longer
/// base64 text such as a `Basic` credential `user:password`), plus any
/// 8+ character piece of it as written.
#[derive(Clone, Debug, Default)]
pub struct Masker {
    /// Secrets as written (for pieces).
    raw: Vec<String>,
    /// Every form to mask, longest first.
    forms: Vec<String>,
}

/// Shortest secret whose encodings are masked: shorter values (a user
/// name such as `me`) would mask ordinary text.
const MIN_SECRET: usize = 4;

impl Masker {
    pub fn new() -> Masker {
        Masker::default()
    }

    /// Adds `secret` in all its forms.
    pub fn add(&mut self, secret: &str) {
        if secret.len() < MIN_SECRET || self.raw.iter().any(|r| r == secret) {
            return;
        }
        self.raw.push(secret.to_string());
        for f in encoded_forms(secret) {
            if f.len() >= MIN_SECRET && !self.forms.contains(&f) {
                self.forms.push(f);
            }
        }
        // Longest first, so a form never leaves part of a longer one.
        self.forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    }

    /// Adds the credentials of `url` (user-info, as written and decoded,
    /// and query values).
    pub fn add_url(&mut self, url: &str) {
        for s in url_secrets(url) {
            let decoded = percent_decode(&s);
            self.add(&s);
            self.add(&decoded);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// `text` with every form of every secret masked as `****`, and
    /// key-shaped words too (for messages: errors, attempts).
    pub fn mask(&self, text: &str) -> String {
        redact_key_shapes(&self.mask_configured(text))
    }

    /// `text` with every form of every configured secret masked (for
    /// replies, whose key-shaped words are the model's own).
    pub fn mask_configured(&self, text: &str) -> String {
        let mut out = text.to_string();
        for f in &self.forms {
            if out.contains(f.as_str()) {
                out = out.replace(f.as_str(), "****");
            }
        }
        for r in &self.raw {
            out = mask_pieces(&out, r);
        }
        out
    }
}

/// The forms `secret` may come back in (see [`Masker`]).
pub fn encoded_forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    let upper = percent_encode(secret);
    // Lower-case hex digits after `%` only.
    let mut lower = String::with_capacity(upper.len());
    let mut after = 0;
    for c in upper.chars() {
        if c == '%' {
            after = 2;
            lower.push(c);
        } else if after > 0 {
            after -= 1;
            lower.push(c.to_ascii_lowercase());
        } else {
            lower.push(c);
        }
    }
    forms.push(upper);
    forms.push(lower);
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.trim_matches('"').to_string();
    forms.push(json.replace('/', "\\/"));
    forms.push(json);
    let bytes = secret.as_bytes();
    for alphabet in [STANDARD, URL_SAFE] {
        let padded = base64(bytes, alphabet, true);
        forms.push(padded.trim_end_matches('=').to_string());
        forms.push(padded);
        // Inside a longer base64 text the secret starts at any of three
        // byte offsets: the characters that encode only its bytes.
        for offset in 0..3usize {
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(bytes);
            let whole = shifted.len() / 3 * 4;
            let enc = base64(&shifted, alphabet, false);
            let from = if offset == 0 { 0 } else { 4 };
            if whole > from + 4 {
                forms.push(enc[from..whole].to_string());
            }
        }
    }
    forms.retain(|f| !f.is_empty());
    forms.sort();
    forms.dedup();
    forms
}

pub const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 of `bytes` in `alphabet`, padded with `=` when `pad`.
pub fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// The standard base64 of `user:password`, as in `Authorization: Basic`.
pub fn basic_credential(user: &str, password: &str) -> String {
    base64(format!("{user}:{password}").as_bytes(), STANDARD, true)
}

/// Every byte outside RFC 3986's unreserved set as `%XX`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` sequences decoded (others kept as they are).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user and password of `url`'s user-info, percent-decoded.
pub fn url_credentials(url: &str) -> Option<(String, String)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let (info, _) = authority.rsplit_once('@')?;
    let (user, password) = info.split_once(':').unwrap_or((info, ""));
    Some((percent_decode(user), percent_decode(password)))
}

/// `url` without its user-info (`user:password@`).
pub fn strip_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{tail}"),
        None => url.to_string(),
    }
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

    #[test]
    fn base64_matches_rfc_4648() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes(), STANDARD, true), enc);
        }
        assert_eq!(base64(&[0xfb, 0xff], URL_SAFE, false), "-_8");
    }

    #[test]
    fn a_masker_masks_every_encoding_also_inside_longer_text() {
        let key = "k3y/SECRET+value=1";
        let mut m = Masker::new();
        m.add(key);
        let mut texts = vec![
            format!("raw {key} end"),
            format!("pct {}", percent_encode(key)),
            format!("pct {}", percent_encode(key).to_ascii_lowercase()),
            format!("json {}", serde_json::to_string(key).unwrap_or_default()),
            "json k3y\\/SECRET+value=1".to_string(),
        ];
        for alphabet in [STANDARD, URL_SAFE] {
            for user in ["", "a", "ab", "abc", "user"] {
                let basic = base64(format!("{user}:{key}").as_bytes(), alphabet, true);
                texts.push(format!("Authorization: Basic {basic}"));
                texts.push(format!("b64 {}", basic.trim_end_matches('=')));
            }
        }
        for t in texts {
            let masked = m.mask(&t);
            assert!(!masked.contains("SECRET"), "{t} -> {masked}");
            for alphabet in [STANDARD, URL_SAFE] {
                // No 8 characters of the key's own base64 survive.
                let enc = base64(key.as_bytes(), alphabet, false);
                assert!(!masked.contains(&enc[4..12]), "{t} -> {masked}");
            }
        }
        assert_eq!(m.mask("nothing to see"), "nothing to see");
    }

    #[test]
    fn url_credentials_are_read_and_stripped() {
        let u = "https://me:p%40ss@h.example:8/v1?x=1";
        assert_eq!(url_credentials(u), Some(("me".into(), "p@ss".into())));
        assert_eq!(strip_credentials(u), "https://h.example:8/v1?x=1");
        assert_eq!(url_credentials("https://h/v1"), None);
        assert_eq!(
            basic_credential("Aladdin", "open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }
}
