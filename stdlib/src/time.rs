//! `now`: RFC 3339 timestamps. The formatting is the wire layer's
//! (`ais_wire::time`, on `httpdate`'s calendar): one formatter for the
//! tool, the AAM's records, the run listings and A2A tasks.

pub use ais_wire::time::{now_rfc3339, rfc3339, unix_ms};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_735_689_599_000), "2024-12-31T23:59:59.000Z");
    }
}
