//! Time on the wire: RFC 3339 timestamps (A2A tasks, run listings, the
//! AAM's records) and HTTP dates (`Retry-After`, `Date`), both on
//! `httpdate`'s calendar (the crate hyper already links) instead of
//! hand-written date arithmetic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The last instant `httpdate` can represent (9999-12-31T23:59:59Z).
const MAX_SECS: u64 = 253_402_300_799;

/// `ms` milliseconds since the epoch as RFC 3339 UTC with milliseconds
/// (`2024-02-29T23:59:59.123Z`). Times after the year 9999 read as its
/// last second.
pub fn rfc3339(ms: u64) -> String {
    let secs = (ms / 1000).min(MAX_SECS);
    let millis = if ms / 1000 > MAX_SECS { 999 } else { ms % 1000 };
    // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`, fixed widths.
    let imf = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
    let f: Vec<&str> = imf.split(' ').collect();
    let month = MONTHS
        .iter()
        .position(|m| Some(m) == f.get(2))
        .map_or(0, |i| i + 1);
    let field = |i: usize| f.get(i).copied().unwrap_or("");
    format!(
        "{}-{month:02}-{}T{}.{millis:03}Z",
        field(3),
        field(1),
        field(4)
    )
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Now as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339(unix_ms())
}

/// Milliseconds since the epoch (0 before it).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// An HTTP date (IMF-fixdate, and the obsolete RFC 850 and asctime forms
/// RFC 9110 says a recipient must accept) as seconds since the epoch.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let t = httpdate::parse_http_date(s.trim()).ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// Seconds since the epoch as an IMF-fixdate.
pub fn http_date(secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs.min(MAX_SECS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_709_251_199_123), "2024-02-29T23:59:59.123Z");
        assert_eq!(rfc3339(1_735_689_599_000), "2024-12-31T23:59:59.000Z");
        assert_eq!(rfc3339(u64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(now_rfc3339().len(), "1970-01-01T00:00:00.000Z".len());
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date("Sun Nov  6 08:49:37 1994"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("yesterday"), None);
        assert_eq!(parse_http_date("Sun, 32 Nov 1994 08:49:37 GMT"), None);
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(
            parse_http_date(&http_date(1_700_000_000)),
            Some(1_700_000_000)
        );
    }
}
