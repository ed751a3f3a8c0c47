//! Record/replay of LLM calls.
//!
//! `--record DIR` wraps the run's backend in [`RecordingBackend`]: each
//! request and its outcome (response or final error) is written to
//! `DIR/<key>.json`, where the key is [`request_key`], the SHA-256 of the
//! request's canonical JSON (sorted keys, every field of [`LlmRequest`]).
//! `--replay DIR` uses [`ReplayBackend`]: it answers from those files and
//! never touches the network; a request with no file is an
//! [`LlmErrorKind::Replay`] error.
//!
//! Recordings hold requests and replies only: never keys or headers.

use super::{
    AttemptObserver, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmRequest, LlmResponse,
    TextEvent,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Format version of recording files; part of the key.
pub const FORMAT_VERSION: u32 = 1;

/// Serializes `v` with object keys sorted, no whitespace.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(x) = map.get(k) {
                    write_canonical(x, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The stable key of a request: hex SHA-256 of its canonical JSON.
pub fn request_key(request: &LlmRequest) -> String {
    let v = serde_json::json!({"format": FORMAT_VERSION, "request": request});
    let digest = Sha256::digest(canonical_json(&v).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// One recording file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recording {
    pub format: u32,
    pub key: String,
    /// Name of the backend that answered.
    pub backend: String,
    pub request: LlmRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<LlmResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<LlmError>,
}

/// Path of the recording of `key` in `dir`.
pub fn recording_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.json"))
}

/// Passes calls to `inner` and writes each outcome to the directory.
pub struct RecordingBackend {
    inner: Arc<dyn LlmBackend>,
    dir: PathBuf,
    seq: AtomicU64,
}

impl RecordingBackend {
    /// Creates `dir` if needed.
    pub fn new(
        inner: Arc<dyn LlmBackend>,
        dir: impl Into<PathBuf>,
    ) -> std::io::Result<RecordingBackend> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(RecordingBackend {
            inner,
            dir,
            seq: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(
        &self,
        request: &LlmRequest,
        outcome: &Result<LlmResponse, LlmError>,
    ) -> Result<(), LlmError> {
        let key = request_key(request);
        let rec = Recording {
            format: FORMAT_VERSION,
            key: key.clone(),
            backend: self.inner.name().to_string(),
            request: request.clone(),
            response: outcome.as_ref().ok().cloned(),
            error: outcome.as_ref().err().cloned(),
        };
        let fail = |what: String| LlmError::new(self.inner.name(), LlmErrorKind::Replay, what);
        let text = serde_json::to_string_pretty(&rec)
            .map_err(|e| fail(format!("cannot encode the recording: {e}")))?;
        let path = recording_path(&self.dir, &key);
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            self.seq.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                fail(format!(
                    "cannot write the recording {}: {e}",
                    path.display()
                ))
            })
    }
}

impl LlmBackend for RecordingBackend {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }
    fn is_simulated(&self) -> bool {
        self.inner.is_simulated()
    }
    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        let outcome = self.inner.complete(request, cancel);
        self.finish(request, outcome)
    }
    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        let outcome = self.inner.complete_observed(request, cancel, observer);
        self.finish(request, outcome)
    }
}

impl RecordingBackend {
    fn finish(
        &self,
        request: &LlmRequest,
        outcome: Result<LlmResponse, LlmError>,
    ) -> Result<LlmResponse, LlmError> {
        // A cancelled call says nothing about the provider: not recorded.
        if matches!(&outcome, Err(e) if e.kind == LlmErrorKind::Cancelled) {
            return outcome;
        }
        self.write(request, &outcome)?;
        outcome
    }
}

/// Answers from a recording directory; never calls a provider.
#[derive(Clone, Debug)]
pub struct ReplayBackend {
    name: String,
    dir: PathBuf,
}

impl ReplayBackend {
    /// Fails when `dir` is not a readable directory.
    pub fn new(dir: impl Into<PathBuf>) -> std::io::Result<ReplayBackend> {
        let dir = dir.into();
        if !std::fs::metadata(&dir)?.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(ReplayBackend {
            name: "replay".into(),
            dir,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lookup(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let key = request_key(request);
        let path = recording_path(&self.dir, &key);
        let fail = |m: String| LlmError::new(&self.name, LlmErrorKind::Replay, m);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(fail(format!(
                    "no recording for this {} request (key {}) in {}; record it with --record, replay never calls a live model",
                    request.kind.name(),
                    &key[..16],
                    self.dir.display()
                )))
            }
            Err(e) => return Err(fail(format!("cannot read {}: {e}", path.display()))),
        };
        let rec: Recording = serde_json::from_str(&text)
            .map_err(|e| fail(format!("{} is not a valid recording: {e}", path.display())))?;
        if rec.format != FORMAT_VERSION || rec.key != key {
            return Err(fail(format!(
                "{} does not match this request (format or key differ)",
                path.display()
            )));
        }
        match (rec.response, rec.error) {
            (Some(r), _) => Ok(r),
            (None, Some(e)) => Err(e),
            (None, None) => Err(fail(format!(
                "{} holds neither a response nor an error",
                path.display()
            ))),
        }
    }
}

impl LlmBackend for ReplayBackend {
    fn name(&self) -> &str {
        &self.name
    }
    fn concurrency(&self) -> usize {
        64
    }
    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        if cancel.is_cancelled() {
            return Err(LlmError::new(
                &self.name,
                LlmErrorKind::Cancelled,
                "cancelled",
            ));
        }
        let result = self.lookup(request);
        // A replayed reply streams as one piece, so a run that shows text
        // as it comes shows it on replay too.
        if let (Ok(r), Some(sink)) = (&result, &request.on_text) {
            if !r.text.is_empty() {
                sink.send(&TextEvent::Delta {
                    attempt: 1,
                    text: r.text.clone(),
                });
            }
        }
        result
    }
}
