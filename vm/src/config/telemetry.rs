//! `[telemetry.otlp]`: where a run's OpenTelemetry traces go
//! (`crate::observe::otlp`), and the standard `OTEL_*` variables that
//! override it. Documented in `docs/telemetry.md`.
//!
//! ```toml
//! [telemetry.otlp]
//! endpoint = "http://127.0.0.1:6006"        # spans go to {endpoint}/v1/traces
//! headers = { authorization = "$PHOENIX_AUTH" }  # "$VAR": read from the environment
//! capture_content = false                    # prompts, replies, tool arguments
//! sample_ratio = 1.0                         # runs traced (by trace id)
//! queue_size = 2048                          # spans waiting to be sent
//! ```

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The section as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpSection {
    /// Base URL of the collector (`/v1/traces` is added).
    pub endpoint: Option<String>,
    /// Extra request headers; a value `"$VAR"` is read from that variable
    /// (a secret: never written anywhere).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Export prompts, replies and tool arguments (as the run's events keep
    /// them: cut and scrubbed by `[telemetry]`'s `text_limit`/`redact`).
    pub capture_content: Option<bool>,
    /// Fraction of runs traced, decided by the trace id (so every worker
    /// of a run decides alike).
    pub sample_ratio: Option<f64>,
    /// Most spans waiting to be sent; more are dropped and counted.
    pub queue_size: Option<usize>,
    /// `service.name` of the resource (`OTEL_SERVICE_NAME` wins).
    pub service_name: Option<String>,
    /// Time allowed for one export request.
    pub timeout_ms: Option<u64>,
    /// `false` turns export off whatever the environment says.
    pub enabled: Option<bool>,
}

/// Export settings, resolved.
#[derive(Clone, PartialEq)]
pub struct OtlpSettings {
    /// The URL spans are POSTed to.
    pub traces_url: String,
    /// Header names and values (values may be secrets).
    pub headers: Vec<(String, String)>,
    pub capture_content: bool,
    pub sample_ratio: f64,
    pub queue_size: usize,
    pub service_name: String,
    pub timeout: Duration,
}

impl std::fmt::Debug for OtlpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values may be keys: names only.
        f.debug_struct("OtlpSettings")
            .field("traces_url", &self.traces_url)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("capture_content", &self.capture_content)
            .field("sample_ratio", &self.sample_ratio)
            .field("queue_size", &self.queue_size)
            .field("service_name", &self.service_name)
            .finish()
    }
}

pub const DEFAULT_QUEUE_SIZE: usize = 2048;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_SERVICE_NAME: &str = "ais";

/// Why the export settings are unusable (the run goes on without export).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OtlpConfigError {
    #[error("telemetry.bad_endpoint: `{0}` is not an http:// or https:// URL")]
    BadEndpoint(String),
    #[error("telemetry.unset_header_var: header `{header}` reads ${var}, which is not set")]
    UnsetHeaderVar { header: String, var: String },
    #[error("telemetry.bad_header: `{0}` in OTEL_EXPORTER_OTLP_HEADERS is not `name=value`")]
    BadHeader(String),
    #[error("telemetry.bad_sample_ratio: sample_ratio must be between 0 and 1, not {0}")]
    BadSampleRatio(f64),
}

impl OtlpConfigError {
    pub fn code(&self) -> &'static str {
        match self {
            OtlpConfigError::BadEndpoint(_) => "telemetry.bad_endpoint",
            OtlpConfigError::UnsetHeaderVar { .. } => "telemetry.unset_header_var",
            OtlpConfigError::BadHeader(_) => "telemetry.bad_header",
            OtlpConfigError::BadSampleRatio(_) => "telemetry.bad_sample_ratio",
        }
    }
}

fn truthy(v: &str) -> bool {
    v.trim().eq_ignore_ascii_case("true")
}

/// `%XX` escapes of an `OTEL_EXPORTER_OTLP_HEADERS` value.
fn percent_decode(s: &str) -> String {
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

fn parse_header_list(v: &str, into: &mut Vec<(String, String)>) -> Result<(), OtlpConfigError> {
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, val) = item.split_once('=').ok_or_else(|| {
            OtlpConfigError::BadHeader(item.split('=').next().unwrap_or("").into())
        })?;
        set_header(into, k.trim(), percent_decode(val.trim()));
    }
    Ok(())
}

fn set_header(into: &mut Vec<(String, String)>, k: &str, v: String) {
    into.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
    into.push((k.to_string(), v));
}

fn check_url(u: &str) -> Result<(), OtlpConfigError> {
    if u.starts_with("http://") || u.starts_with("https://") {
        Ok(())
    } else {
        Err(OtlpConfigError::BadEndpoint(u.to_string()))
    }
}

impl OtlpSettings {
    /// The settings from the file's section and the environment (`var`
    /// reads one variable), or `None` when nothing asks for export or it
    /// is turned off. The environment wins over the file:
    /// `OTEL_SDK_DISABLED=true` turns export off;
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is the full URL,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` a base URL (`/v1/traces` added);
    /// `OTEL_EXPORTER_OTLP_HEADERS` / `..._TRACES_HEADERS` add headers
    /// (`k=v,k2=v2`, values percent-decoded); `OTEL_SERVICE_NAME`.
    pub fn resolve(
        section: Option<&OtlpSection>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpSettings>, OtlpConfigError> {
        let empty = OtlpSection::default();
        let s = section.unwrap_or(&empty);
        if s.enabled == Some(false) || var("OTEL_SDK_DISABLED").is_some_and(|v| truthy(&v)) {
            return Ok(None);
        }
        let nonempty = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let base = |b: &str| format!("{}/v1/traces", b.trim().trim_end_matches('/'));
        let traces_url = if let Some(u) = nonempty("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            u.trim().to_string()
        } else if let Some(u) = nonempty("OTEL_EXPORTER_OTLP_ENDPOINT") {
            base(&u)
        } else if let Some(u) = &s.endpoint {
            base(u)
        } else {
            return Ok(None);
        };
        check_url(&traces_url)?;
        let mut headers = Vec::new();
        for (k, v) in &s.headers {
            let value = match v.strip_prefix('$') {
                Some(name) => var(name).ok_or_else(|| OtlpConfigError::UnsetHeaderVar {
                    header: k.clone(),
                    var: name.to_string(),
                })?,
                None => v.clone(),
            };
            set_header(&mut headers, k, value);
        }
        for k in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(v) = var(k) {
                parse_header_list(&v, &mut headers)?;
            }
        }
        let sample_ratio = s.sample_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&sample_ratio) {
            return Err(OtlpConfigError::BadSampleRatio(sample_ratio));
        }
        Ok(Some(OtlpSettings {
            traces_url,
            headers,
            capture_content: s.capture_content.unwrap_or(false),
            sample_ratio,
            queue_size: s.queue_size.unwrap_or(DEFAULT_QUEUE_SIZE).max(1),
            service_name: nonempty("OTEL_SERVICE_NAME")
                .or_else(|| s.service_name.clone())
                .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string()),
            timeout: s.timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn nothing_configured_means_no_export() {
        assert_eq!(OtlpSettings::resolve(None, &env(&[])), Ok(None));
    }

    #[test]
    fn the_environment_wins_and_can_turn_export_off() {
        let file = OtlpSection {
            endpoint: Some("http://file:4318/".into()),
            headers: [("x-key".to_string(), "$KEY".to_string())].into(),
            capture_content: Some(true),
            ..Default::default()
        };
        let s = OtlpSettings::resolve(Some(&file), &env(&[("KEY", "k1")]))
            .expect("ok")
            .expect("on");
        assert_eq!(s.traces_url, "http://file:4318/v1/traces");
        assert_eq!(s.headers, [("x-key".to_string(), "k1".to_string())]);
        assert!(s.capture_content);
        assert!(!format!("{s:?}").contains("k1"), "secret in Debug");

        let e = env(&[
            ("KEY", "k1"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-key=k2,other=a%20b"),
            ("OTEL_SERVICE_NAME", "svc"),
        ]);
        let s = OtlpSettings::resolve(Some(&file), &e)
            .expect("ok")
            .expect("on");
        assert_eq!(s.traces_url, "http://env:4318/v1/traces");
        assert_eq!(
            s.headers,
            [
                ("x-key".to_string(), "k2".to_string()),
                ("other".to_string(), "a b".to_string())
            ]
        );
        assert_eq!(s.service_name, "svc");
        let e = env(&[
            ("KEY", "k1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom"),
        ]);
        let s = OtlpSettings::resolve(Some(&file), &e)
            .expect("ok")
            .expect("on");
        assert_eq!(s.traces_url, "http://t:1/custom");
        let off = env(&[("KEY", "k1"), ("OTEL_SDK_DISABLED", "TRUE")]);
        assert_eq!(OtlpSettings::resolve(Some(&file), &off), Ok(None));
    }

    #[test]
    fn mistakes_are_named() {
        let file = OtlpSection {
            endpoint: Some("collector:4318".into()),
            ..Default::default()
        };
        let e = OtlpSettings::resolve(Some(&file), &env(&[])).expect_err("bad url");
        assert_eq!(e.code(), "telemetry.bad_endpoint");
        let file = OtlpSection {
            endpoint: Some("http://c".into()),
            headers: [("auth".to_string(), "$NOPE".to_string())].into(),
            ..Default::default()
        };
        let e = OtlpSettings::resolve(Some(&file), &env(&[])).expect_err("unset");
        assert_eq!(e.code(), "telemetry.unset_header_var");
        let e = OtlpSettings::resolve(
            None,
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
            ]),
        )
        .expect_err("bad header");
        assert_eq!(e.code(), "telemetry.bad_header");
    }
}
