//! `aisc config show`: the effective configuration as TOML-like text, with
//! where each value came from; keys and literal header values are hidden.

use super::backend::{HeaderValue, Origin};
use super::load::Settings;
use super::schema::BackendKind;
use crate::llm::http::HttpTransport;
use crate::llm::providers::StructuredMode;
use crate::llm::secret::redact_url;
use crate::llm::LlmOpKind;
use std::fmt::Write as _;

impl Settings {
    pub fn show(&self) -> String {
        let mut o = String::new();
        let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let _ = writeln!(o, "# effective configuration (flags > environment > file)");
        match self.config.path() {
            Some(p) => {
                let _ = writeln!(o, "# file: {}", p.display());
            }
            None => {
                let _ = writeln!(o, "# file: none (built-in defaults)");
            }
        }
        let _ = writeln!(
            o,
            "# selected backend: {} ({})",
            self.backend, self.backend_from
        );
        if let Some(n) = self.notice() {
            let _ = writeln!(o, "# {n}");
        }
        let _ = writeln!(o, "default_backend = {}", q(&self.backend));
        match self.token_budget {
            Some(t) => {
                let _ = writeln!(o, "token_budget = {t}  # from {}", self.token_budget_from);
            }
            None => {
                let _ = writeln!(o, "# token_budget: unlimited");
            }
        }
        match (&self.record, &self.replay) {
            (Some(d), _) => {
                let _ = writeln!(o, "# record: {}", d.display());
            }
            (_, Some(d)) => {
                let _ = writeln!(o, "# replay: {} (no network)", d.display());
            }
            _ => {}
        }
        for b in &self.config.backends {
            let _ = writeln!(o, "\n[[llm_backends]]");
            let origin = match b.origin {
                Origin::File { line } => format!("line {line}"),
                Origin::Builtin => "built in".into(),
            };
            let _ = writeln!(o, "name = {}  # {origin}", q(&b.name));
            let _ = writeln!(o, "protocol = {}", q(b.kind.name()));
            if b.kind == BackendKind::Sim {
                let scale = self.sim_delay_scale.unwrap_or(b.delay_scale);
                let _ = writeln!(o, "delay_scale = {scale}");
            } else {
                let _ = writeln!(o, "base_url = {}", q(&redact_url(&b.base_url)));
                match &b.api_key_env {
                    Some(var) => {
                        let state = if self.env.var(var).is_some() {
                            "set, value hidden"
                        } else {
                            "NOT SET"
                        };
                        let _ = writeln!(o, "api_key_env = {}  # {state}", q(var));
                    }
                    None => {
                        let _ = writeln!(o, "# api_key_env: none (no key sent)");
                    }
                }
                let _ = writeln!(o, "timeout_s = {}", b.timeout.as_secs_f64());
                let _ = writeln!(o, "connect_timeout_s = {}", b.connect_timeout.as_secs_f64());
                let _ = writeln!(o, "retries = {}", b.retry.max_retries);
                let _ = writeln!(o, "backoff_ms = {}", b.retry.base_delay.as_millis());
                let _ = writeln!(o, "max_backoff_ms = {}", b.retry.max_delay.as_millis());
                let _ = writeln!(
                    o,
                    "max_retry_after_s = {}",
                    b.retry.max_retry_after.as_secs_f64()
                );
                let mode = match b.structured {
                    StructuredMode::JsonSchema => "json_schema",
                    StructuredMode::JsonObject => "json_object",
                    StructuredMode::Prompt => "prompt",
                };
                let _ = writeln!(o, "structured_output = {}", q(mode));
                let transport = match b.transport {
                    HttpTransport::Auto => "auto",
                    HttpTransport::Threads => "threads",
                };
                let _ = writeln!(o, "transport = {}", q(transport));
                let _ = writeln!(o, "accept_incomplete = {}", b.accept_incomplete);
                let _ = writeln!(o, "stream = {}", b.stream);
                let _ = writeln!(o, "cache_warmup = \"{}\"", b.cache_warmup.name());
                let _ = writeln!(o, "probe = {}", b.probe);
                if !b.headers.is_empty() {
                    // Literal values are hidden too: they are often keys.
                    let shown: Vec<String> = b
                        .headers
                        .iter()
                        .map(|(name, value)| match value {
                            HeaderValue::Literal(_) => format!("{} = \"****\"", q(name)),
                            HeaderValue::Env { var, .. } => {
                                format!("{} = {}", q(name), q(&format!("${var}")))
                            }
                        })
                        .collect();
                    let _ = writeln!(o, "headers = {{ {} }}", shown.join(", "));
                }
                match b.reasoning_model {
                    Some(r) => {
                        let _ = writeln!(o, "reasoning_model = {r}");
                    }
                    None => {
                        let _ = writeln!(o, "# reasoning_model: by model name (o1, o3, o4, gpt-5)");
                    }
                }
            }
            let _ = writeln!(o, "concurrency = {}", b.concurrency);
            for (key, v) in [
                ("fleet_concurrency", b.fleet.concurrency),
                ("requests_per_minute", b.fleet.requests_per_minute),
                ("tokens_per_minute", b.fleet.tokens_per_minute),
            ] {
                if let Some(n) = v {
                    let _ = writeln!(o, "{key} = {n}");
                }
            }
            if let Some(t) = b.temperature {
                let _ = writeln!(o, "temperature = {t}");
            }
            if let Some(m) = b.max_tokens {
                let _ = writeln!(o, "max_tokens = {m}");
            }
            if let Some(h) = &b.hedge {
                let _ = writeln!(
                    o,
                    "hedge = {{ after = {}, max_extra = {} }}",
                    q(&h.after.label()),
                    h.max_extra
                );
            }
            if !b.fallback.is_empty() {
                let names: Vec<String> = b.fallback.iter().map(|n| q(n)).collect();
                let _ = writeln!(o, "fallback = [{}]", names.join(", "));
            }
            let m = &b.models;
            if m.ask.is_some() || m.think.is_some() || m.reason.is_some() {
                let _ = writeln!(o, "[llm_backends.models]");
                for (k, v) in [("ask", &m.ask), ("think", &m.think), ("reason", &m.reason)] {
                    if let Some(v) = v {
                        let _ = writeln!(o, "{k} = {}", q(v));
                    }
                }
            }
            if let Some(p) = &b.prices {
                let _ = writeln!(o, "[llm_backends.prices]");
                let _ = writeln!(o, "input_per_mtok = {}", p.input_per_mtok);
                let _ = writeln!(o, "output_per_mtok = {}", p.output_per_mtok);
                let (read, write) = p.cache_multipliers();
                let _ = writeln!(o, "cache_read_multiplier = {read}");
                let _ = writeln!(o, "cache_write_multiplier = {write}");
            }
        }
        // Every call to an HTTP backend sends a completion limit: the
        // op's, the backend's `max_tokens`, else these.
        let _ = writeln!(o, "\n[max_tokens]");
        for kind in ALL_KINDS.into_iter().chain([LlmOpKind::Solve]) {
            let (n, from) = self.config.max_tokens.for_kind(kind);
            let note = match from {
                crate::llm::prompt::LimitSource::Config => "",
                _ => "  # default",
            };
            let _ = writeln!(o, "{} = {n}{note}", kind.name());
        }
        let _ = writeln!(o, "\n[instruction]");
        for kind in ALL_KINDS {
            let over = self.config.instructions.overrides.contains_key(kind.name());
            let text = self.config.instructions.system_for(kind);
            let _ = writeln!(
                o,
                "{} = {}{}",
                kind.name(),
                q(text),
                if over { "" } else { "  # default" }
            );
        }
        o
    }
}

const ALL_KINDS: [LlmOpKind; 7] = [
    LlmOpKind::Ask,
    LlmOpKind::Think,
    LlmOpKind::Reason,
    LlmOpKind::Llm,
    LlmOpKind::Plan,
    LlmOpKind::Reflect,
    LlmOpKind::Verify,
];
