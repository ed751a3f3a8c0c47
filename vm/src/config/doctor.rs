//! `aisc doctor`: sends every configured backend a tiny request and reports
//! which answer. Never panics; problems are in the [`DoctorReport`].

use super::{BackendConfig, BackendKind, Settings};
use crate::llm::secret::{redact_url, redact_url_in};
use crate::llm::{CancelToken, ContextBlock, LlmOpKind, LlmRequest};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

impl Settings {
    /// Checks that every backend answers a tiny request. Never panics;
    /// problems are in the report.
    pub fn doctor(&self) -> DoctorReport {
        let mut entries = Vec::new();
        for b in &self.config.backends {
            entries.push(self.check_backend(b));
        }
        DoctorReport {
            config: self.config.path().map(Path::to_path_buf),
            selected: self.backend.clone(),
            entries,
        }
    }

    fn check_backend(&self, b: &BackendConfig) -> DoctorEntry {
        let target = if b.kind == BackendKind::Sim {
            "offline".to_string()
        } else {
            redact_url(&b.base_url)
        };
        let mut entry = DoctorEntry {
            backend: b.name.clone(),
            protocol: b.kind.name(),
            target,
            ok: false,
            detail: String::new(),
        };
        // A doctor probe does not retry and waits at most 30 s.
        let mut probe_settings = self.clone();
        if let Some(pb) = probe_settings
            .config
            .backends
            .iter_mut()
            .find(|x| x.name == b.name)
        {
            pb.retry.max_retries = 0;
            pb.timeout = pb.timeout.min(Duration::from_secs(30));
            // The probe checks that the model answers, not that a short
            // answer fits: a cut-off reply still proves it.
            pb.accept_incomplete = true;
        }
        // Reasoning models spend tokens thinking before any text: a tiny
        // cap would leave them nothing to answer with.
        let reasoning = b.kind == BackendKind::Http(crate::llm::http::Protocol::OpenAi)
            && b.reasoning_model.unwrap_or_else(|| {
                b.models
                    .for_class(crate::llm::prompt::ModelClass::Ask)
                    .is_some_and(crate::llm::openai::is_reasoning_model)
            });
        probe_settings.sim_delay_scale = Some(0.0);
        let backend = match probe_settings.build_plain(&b.name) {
            Ok(x) => x,
            Err(e) => {
                entry.detail = e.message().to_string();
                if let Some(h) = e.hint() {
                    entry.detail.push_str(&format!(" (hint: {h})"));
                }
                return entry;
            }
        };
        let request = LlmRequest {
            cache: Default::default(),
            kind: LlmOpKind::Ask,
            agent: "doctor".into(),
            system: Some("You are a health check. Reply with the single word OK.".into()),
            prompt: "Reply with the single word OK.".into(),
            context: Vec::<ContextBlock>::new(),
            model: None,
            temperature: Some(0.0),
            max_tokens: if reasoning { None } else { Some(8) },
            json_schema: None,
            budget_tokens: None,
            backend: None,
            tools: Vec::new(),
            turns: Vec::new(),
            on_text: None,
            critical: false,
            attained: Default::default(),
        };
        let started = Instant::now();
        match backend.complete(&request, &CancelToken::new()) {
            Ok(r) => {
                entry.ok = true;
                entry.detail = format!(
                    "model {} answered in {} ms ({} tokens){}",
                    r.model,
                    started.elapsed().as_millis(),
                    r.usage.total(),
                    if r.simulated { ", simulated" } else { "" }
                );
                // Asked of local and hosted servers alike (`probe` only
                // decides whether runs ask).
                if let Some(info) = backend.server_info() {
                    entry.detail.push_str(&server_facts(&info));
                }
            }
            Err(e) => {
                // Backends redact their errors; this also covers messages
                // built before any request (e.g. an invalid URL).
                entry.detail = redact_url_in(&e.to_string(), &b.base_url);
            }
        }
        entry
    }
}

/// What the server stated, for the doctor's line: its context and whether
/// its chat template renders tools (a model offered tools it cannot see
/// answers without them, so this is the check that matters for `tools:`).
fn server_facts(info: &crate::llm::providers::ServerInfo) -> String {
    let Some(source) = &info.source else {
        return "; the server states no limits (not probed: context, tool support)".into();
    };
    let mut parts = Vec::new();
    if let Some(c) = info.context {
        parts.push(format!("context {c} tokens per request"));
    }
    match info.tools {
        Some(true) => parts.push("tools: supported".into()),
        Some(false) => parts.push(
            "tools: NOT supported by the chat template (ops with `tools:` fail with llm.unsupported)"
                .into(),
        ),
        None => {}
    }
    format!("; {source}: {}", parts.join(", "))
}

/// Result of `aisc doctor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoctorReport {
    pub config: Option<PathBuf>,
    pub selected: String,
    pub entries: Vec<DoctorEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoctorEntry {
    pub backend: String,
    pub protocol: &'static str,
    pub target: String,
    pub ok: bool,
    pub detail: String,
}

impl DoctorReport {
    pub fn all_ok(&self) -> bool {
        self.entries.iter().all(|e| e.ok)
    }

    /// The entry of the selected backend.
    pub fn selected_ok(&self) -> bool {
        self.entries
            .iter()
            .any(|e| e.backend == self.selected && e.ok)
    }
}

impl fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.config {
            Some(p) => writeln!(f, "config: {}", p.display())?,
            None => writeln!(f, "config: none (built-in defaults)")?,
        }
        for e in &self.entries {
            let mark = if e.ok { "ok  " } else { "FAIL" };
            let sel = if e.backend == self.selected {
                " (selected)"
            } else {
                ""
            };
            writeln!(
                f,
                "{mark} {}{sel} [{} {}]: {}",
                e.backend, e.protocol, e.target, e.detail
            )?;
        }
        let failed = self.entries.iter().filter(|e| !e.ok).count();
        write!(
            f,
            "{} backend(s) checked, {failed} failed",
            self.entries.len()
        )
    }
}
