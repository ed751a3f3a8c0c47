//! A backend's `hedge` and `fallback` keys (the wrappers themselves are
//! `crate::llm::resilience`; docs/backends.md, "Hedged requests and
//! fallback chains").

use super::BackendConfig;
use crate::config::error::{ConfigError, Source};
use crate::config::schema::{BackendKind, FileHedge};
use crate::llm::resilience::{HedgeAfter, HedgeConfig};
use toml::Spanned;

/// Checks one backend's keys and stores them in `b`.
pub(crate) fn resolve(
    src: &Source,
    b: &mut BackendConfig,
    hedge: Option<Spanned<FileHedge>>,
    fallback: Option<Spanned<Vec<Spanned<String>>>>,
) -> Result<(), ConfigError> {
    if let Some(h) = hedge {
        if b.kind == BackendKind::Sim {
            return Err(ConfigError::at(
                src,
                h.span(),
                "hedge applies to HTTP backends (openai, anthropic, ollama)",
                Some(
                    "the simulator's latency is a fixed wait: a second request could not be faster"
                        .into(),
                ),
            ));
        }
        let h = h.into_inner();
        let mut cfg = HedgeConfig::default();
        if let Some(a) = &h.after {
            cfg.after = HedgeAfter::parse(a.get_ref()).ok_or_else(|| {
                ConfigError::at(
                    src,
                    a.span(),
                    format!("hedge.after must be a quantile or a delay (found `{}`)", a.get_ref()),
                    Some("for example \"p95\" (the backend's observed 95th percentile), \"p99\" or \"800ms\"".into()),
                )
            })?;
        }
        if let Some(m) = &h.max_extra {
            let v = *m.get_ref();
            if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                return Err(ConfigError::at(
                    src,
                    m.span(),
                    "hedge.max_extra must be above 0 and at most 1",
                    Some(
                        "extra requests per request sent; 0.1 allows one hedge per ten calls"
                            .into(),
                    ),
                ));
            }
            cfg.max_extra = v;
        }
        b.hedge = Some(cfg);
    }
    if let Some(f) = fallback {
        b.fallback_span = Some(f.span());
        for name in f.into_inner() {
            let n = name.get_ref().trim().to_string();
            if n == b.name || b.fallback.contains(&n) {
                return Err(ConfigError::at(
                    src,
                    name.span(),
                    format!(
                        "backend `{n}` appears twice in the fallback chain of `{}`",
                        b.name
                    ),
                    Some("a chain names each backend once, the backend itself not at all".into()),
                ));
            }
            b.fallback.push(n);
        }
    }
    Ok(())
}

/// Every name in a fallback chain is a defined backend, and following the
/// chains never comes back to where it started.
pub(crate) fn check_chains(src: &Source, backends: &[BackendConfig]) -> Result<(), ConfigError> {
    let find = |n: &str| backends.iter().find(|b| b.name == n);
    for b in backends {
        for n in &b.fallback {
            if find(n).is_none() {
                return Err(ConfigError::at(
                    src,
                    b.fallback_span.clone().unwrap_or(0..0),
                    format!(
                        "the fallback chain of `{}` names `{n}`, which is not defined",
                        b.name
                    ),
                    Some(format!(
                        "defined backends: {}",
                        crate::config::list(backends)
                    )),
                ));
            }
        }
        // Depth-first over the chains reachable from `b`.
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(b.name.as_str(), vec![b.name.as_str()])];
        while let Some((at, path)) = stack.pop() {
            for n in find(at).map(|x| x.fallback.as_slice()).unwrap_or(&[]) {
                if n == &b.name {
                    let mut cycle = path.clone();
                    cycle.push(n);
                    return Err(ConfigError::at(
                        src,
                        b.fallback_span.clone().unwrap_or(0..0),
                        format!("fallback chains loop: {}", cycle.join(" → ")),
                        Some("a backend's fallbacks may have fallbacks of their own, but never lead back".into()),
                    ));
                }
                if !path.contains(&n.as_str()) {
                    let mut p = path.clone();
                    p.push(n);
                    stack.push((n, p));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("c.toml")).map_err(|e| e.to_string())
    }

    const TWO: &str = r#"
[[llm_backends]]
name = "a"
protocol = "openai"
base_url = "http://127.0.0.1:1/v1"
hedge = { after = "p95", max_extra = 0.1 }
fallback = ["b"]
[[llm_backends]]
name = "b"
protocol = "anthropic"
base_url = "http://127.0.0.1:2"
"#;

    #[test]
    fn hedge_and_fallback_are_read() {
        let c = parse(TWO).unwrap_or_else(|e| panic!("{e}"));
        let a = c.backend("a").unwrap_or_else(|| panic!("a"));
        let h = a.hedge.unwrap_or_else(|| panic!("hedge"));
        assert_eq!(h.max_extra, 0.1);
        assert_eq!(h.after, crate::llm::resilience::HedgeAfter::Quantile(0.95));
        assert_eq!(a.fallback, vec!["b".to_string()]);
    }

    #[test]
    fn bad_values_are_errors_at_their_line() {
        for (from, to, needle) in [
            ("\"p95\"", "\"soon\"", "hedge.after"),
            ("max_extra = 0.1", "max_extra = 2.0", "max_extra"),
            ("[\"b\"]", "[\"c\"]", "not defined"),
            ("[\"b\"]", "[\"a\"]", "twice"),
            (
                "max_extra = 0.1 }",
                "max_extra = 0.1, sometimes = 1 }",
                "unknown field",
            ),
        ] {
            let e = parse(&TWO.replacen(from, to, 1)).expect_err(to);
            assert!(e.contains(needle), "{to}: {e}");
        }
    }

    #[test]
    fn a_chain_that_loops_is_an_error() {
        let text = format!("{TWO}fallback = [\"a\"]\n");
        let e = parse(&text).expect_err("loop");
        assert!(e.contains("loop"), "{e}");
    }

    #[test]
    fn the_simulator_is_not_hedged() {
        let e = parse(
            "[[llm_backends]]\nname = \"s\"\nprotocol = \"sim\"\nhedge = { after = \"p95\" }\n",
        )
        .expect_err("sim");
        assert!(e.contains("HTTP backends"), "{e}");
    }
}
