//! The backend factory: builds the [`LlmBackend`]s a configuration names
//! ([`Settings::build_backend`]) and the wrapped backend of a run
//! ([`Settings::build_run`]: replay or record). Budgets are not a backend
//! concern: the scheduler enforces them before each call. It lives with
//! the configuration so that `crate::llm` needs none.

use super::{list, ConfigError, HeaderValue, Settings};
use crate::llm::http::{HttpBackend, HttpOptions};
use crate::llm::record::{RecordingBackend, ReplayBackend};
use crate::llm::resilience::{Fallback, Hedge};
use crate::llm::route::Router;
use crate::llm::secret::Secret;
use crate::llm::sim::SimBackend;
use crate::llm::LlmBackend;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// The backend a run uses, wrapped for replay/record.
pub struct RunBackend {
    pub backend: Arc<dyn LlmBackend>,
    /// One line for the CLI to print (e.g. that replies are simulated).
    pub notice: Option<String>,
    pub simulated: bool,
}

impl fmt::Debug for RunBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunBackend")
            .field("backend", &self.backend.name())
            .field("notice", &self.notice)
            .field("simulated", &self.simulated)
            .finish()
    }
}

impl Settings {
    /// Builds one backend by name with its `hedge` and `fallback`
    /// (`llm::resilience`), without record/replay. Reads its key from the
    /// environment; a missing key is an error pointing at `api_key_env`.
    pub fn build_backend(&self, name: &str) -> Result<Arc<dyn LlmBackend>, ConfigError> {
        let b = self.build_plain(name)?;
        let Some(cfg) = self.config.backend(name) else {
            return Ok(b);
        };
        let b: Arc<dyn LlmBackend> = match cfg.hedge {
            Some(h) => Arc::new(Hedge::new(b, h)),
            None => b,
        };
        if cfg.fallback.is_empty() {
            return Ok(b);
        }
        // The configuration has no loops in its chains (checked on load).
        let rest = cfg
            .fallback
            .iter()
            .map(|n| self.build_backend(n))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Fallback::new(b, rest)))
    }

    /// One backend by name, without wrappers (`aisc doctor` checks each
    /// backend itself, never its fallbacks).
    pub fn build_plain(&self, name: &str) -> Result<Arc<dyn LlmBackend>, ConfigError> {
        let b = self.config.backend(name).ok_or_else(|| {
            ConfigError::plain(
                format!("unknown backend `{name}`"),
                Some(format!("defined backends: {}", list(&self.config.backends))),
            )
        })?;
        let Some(protocol) = b.kind.http() else {
            let scale = self.sim_delay_scale.unwrap_or(b.delay_scale);
            return Ok(Arc::new(
                SimBackend::named(&b.name)
                    .with_delay_scale(scale)
                    .with_concurrency(b.concurrency)
                    .with_models(b.models.clone())
                    .with_instructions(self.config.instructions.clone()),
            ));
        };
        let api_key = match &b.api_key_env {
            Some(var) => match self.env.var(var) {
                Some(v) => Some(Secret::new(v.trim())),
                None => {
                    return Err(self.config.error_at(
                        b.api_key_env_span.clone(),
                        format!(
                            "environment variable {var} (api_key_env of backend `{}`) is not set",
                            b.name
                        ),
                        Some(format!(
                        "export {var}=... before running, or pick another backend with --backend"
                    )),
                    ))
                }
            },
            None => None,
        };
        let mut headers = Vec::with_capacity(b.headers.len());
        for (name, value) in &b.headers {
            let v = match value {
                HeaderValue::Literal(v) => v.clone(),
                HeaderValue::Env { var, span } => match self.env.var(var) {
                    Some(v) if !v.trim().contains(['\r', '\n']) => v.trim().to_string(),
                    Some(_) => {
                        return Err(self.config.error_at(
                            Some(span.clone()),
                            format!("the value of header `{name}` (from {var}) contains a line break"),
                            None,
                        ))
                    }
                    None => {
                        return Err(self.config.error_at(
                            Some(span.clone()),
                            format!("environment variable {var} (header `{name}` of backend `{}`) is not set", b.name),
                            Some(format!("export {var}=... before running")),
                        ))
                    }
                },
            };
            headers.push((name.clone(), Secret::new(v)));
        }
        let opts = HttpOptions {
            name: b.name.clone(),
            protocol,
            base_url: b.base_url.clone(),
            api_key,
            models: b.models.clone(),
            instructions: self.config.instructions.clone(),
            temperature: b.temperature,
            max_tokens: b.max_tokens,
            op_max_tokens: self.config.max_tokens.clone(),
            probe: b.probe,
            concurrency: b.concurrency,
            connect_timeout: b.connect_timeout,
            timeout: b.timeout,
            retry: b.retry,
            structured: b.structured,
            transport: b.transport,
            accept_incomplete: b.accept_incomplete,
            reasoning_model: b.reasoning_model,
            headers,
            stream: b.stream,
            cache_warmup: b.cache_warmup,
        };
        Ok(Arc::new(HttpBackend::new(opts)))
    }

    /// The backend for a run: the selected one (or the replay directory),
    /// recording if asked, counting tokens against the budget.
    pub fn build_run(&self) -> Result<RunBackend, ConfigError> {
        let (inner, simulated, notice): (Arc<dyn LlmBackend>, bool, Option<String>) =
            match &self.replay {
                Some(dir) => {
                    let r = ReplayBackend::new(dir).map_err(|e| {
                        ConfigError::plain(
                            format!("cannot replay from {}: {e}", dir.display()),
                            Some("pass the directory written by --record".into()),
                        )
                    })?;
                    (
                        Arc::new(r),
                        false,
                        Some(format!(
                            "note: replaying recorded LLM replies from {}",
                            dir.display()
                        )),
                    )
                }
                None => {
                    let b = self.build_backend(&self.backend)?;
                    let sim = b.is_simulated();
                    (b, sim, self.notice())
                }
            };
        let inner: Arc<dyn LlmBackend> = match &self.record {
            Some(dir) => Arc::new(RecordingBackend::new(inner, dir).map_err(|e| {
                ConfigError::plain(format!("cannot record to {}: {e}", dir.display()), None)
            })?),
            None => inner,
        };
        Ok(RunBackend {
            backend: inner,
            notice,
            simulated,
        })
    }

    /// The backend a run of a program calls: the run's, or, when the
    /// program's ops name other configured backends (`backend:`), a
    /// [`Router`] over the run's and those, each built now so a name that is
    /// not configured (or lacks its key) fails before any call. Replay
    /// answers every call from the recording, so it routes nothing.
    pub fn route(
        &self,
        run: &RunBackend,
        names: &BTreeSet<String>,
    ) -> Result<Arc<dyn LlmBackend>, ConfigError> {
        if self.replay.is_some() || names.iter().all(|n| *n == self.backend) {
            return Ok(run.backend.clone());
        }
        let mut named = BTreeMap::new();
        for n in names.iter().filter(|n| **n != self.backend) {
            let b = self
                .build_backend(n)
                .map_err(|e| match self.config.backend(n) {
                    Some(_) => e,
                    None => ConfigError::plain(
                        format!(
                            "the program names backend `{n}` (`backend:`), which is not configured"
                        ),
                        Some(format!(
                            "configured backends: {}; add a [[llm_backends]] entry named `{n}`",
                            list(&self.config.backends)
                        )),
                    ),
                })?;
            let b: Arc<dyn LlmBackend> = match &self.record {
                Some(dir) => Arc::new(RecordingBackend::new(b, dir).map_err(|e| {
                    ConfigError::plain(format!("cannot record to {}: {e}", dir.display()), None)
                })?),
                None => b,
            };
            named.insert(n.clone(), b);
        }
        Ok(Arc::new(Router::new(run.backend.clone(), named)))
    }
}
