//! Signatures of the Standard Webhooks spec
//! (<https://www.standardwebhooks.com>): `webhook-signature: v1,<base64 of
//! HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`. A secret written as
//! `whsec_<base64>` (the spec's form) signs with the decoded bytes, so the
//! receivers' libraries verify it as is; any other text signs with its
//! UTF-8 bytes.
//!
//! HMAC (RFC 2104) is written out here over `sha2` rather than pulling in
//! another crate: it is a dozen lines, checked against RFC 4231's vectors.

use crate::llm::secret::{base64, STANDARD};
use sha2::{Digest, Sha256};

/// The signing key. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    key: Vec<u8>,
    /// The text as configured, for masking it in messages.
    text: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(****)")
    }
}

impl Secret {
    /// A secret as configured; `None` when empty or a `whsec_` text whose
    /// rest is not base64.
    pub fn parse(text: &str) -> Option<Secret> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let key = match text.strip_prefix("whsec_") {
            Some(b64) => decode_base64(b64)?,
            None => text.as_bytes().to_vec(),
        };
        (!key.is_empty()).then(|| Secret {
            key,
            text: text.to_string(),
        })
    }

    /// The text as configured (to add to a masker; never to print).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The `webhook-signature` header value for this message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        let mac = hmac_sha256(&self.key, format!("{id}.{timestamp}.{body}").as_bytes());
        format!("v1,{}", base64(&mac, STANDARD, true))
    }

    /// Whether `header` (space-separated `v1,<sig>` entries) holds a valid
    /// signature of this message (for receivers and tests).
    pub fn verify(&self, id: &str, timestamp: i64, body: &str, header: &str) -> bool {
        let want = self.sign(id, timestamp, body);
        header
            .split(' ')
            .any(|s| constant_time_eq(s.as_bytes(), want.as_bytes()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Standard base64 (padding optional); `None` on any other character.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = STANDARD.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 1.
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn signs_like_the_standard_webhooks_reference() {
        // The example of the Standard Webhooks reference libraries.
        let s = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
        let sig = s.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(s.verify(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
            &format!("v1,bogus {sig}")
        ));
        assert!(!s.verify("msg_other", 1614265330, r#"{"test": 2432232314}"#, &sig));
        assert_eq!(format!("{s:?}"), "Secret(****)");
        assert!(Secret::parse("whsec_***").is_none());
        assert!(Secret::parse("  ").is_none());
    }
}
