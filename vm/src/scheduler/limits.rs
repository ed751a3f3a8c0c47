//! Per-run resource limits.
//!
//! The call-depth limit bounds how deep calls nest, not how many frames are
//! alive at once: a flow that calls itself twice doubles its frames at every
//! level and, on a dataflow VM that starts every ready call, exhausts the
//! process's memory long before the depth limit. The live-frame limit
//! bounds that: every frame (call, branch, loop iteration, `try`/`catch`,
//! handler) counts while it exists. Its slots hold the frame's values, so
//! the limit also bounds the values a run keeps. Exceeding it stops the run
//! with [`FRAMES_CODE`]: not catchable by `try` (catching it would let the
//! program keep growing), and resumable like any failed run (the journal
//! keeps what completed; resume with a higher limit).
//!
//! The value-size limit bounds what one value may hold: a string doubled in
//! a loop (`s = s + s`) reaches a terabyte in forty iterations. Every value
//! an op computes or a tool returns is measured (text length, list length)
//! and one over the limit stops the run with [`VALUE_CODE`], also fatal.

use crate::exec::OpError;
use crate::value::Val;

/// The failure code of the live-frame limit.
pub const FRAMES_CODE: &str = "LIMIT_FRAMES";

/// Default for `RunOptions::max_live_frames`: far more than any program
/// without runaway recursion needs, far less than what exhausts memory
/// (a frame takes a few hundred bytes plus its values).
pub const DEFAULT_MAX_LIVE_FRAMES: usize = 200_000;

/// The failure code of the value-size limit.
pub const VALUE_CODE: &str = "LIMIT_VALUE_BYTES";

/// Default for `RunOptions::max_value_bytes`: 64 MiB of text in one value.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 64 << 20;

/// Failures that end the run instead of being caught by a `try`.
pub fn is_fatal(code: &str) -> bool {
    code == FRAMES_CODE
        || code == VALUE_CODE
        || code == crate::exec::PAUSED
        // Another worker owns the run now: nothing more may be done.
        || code == crate::store::FENCED
}

/// The size one value is measured by, in O(1): a text's bytes, a list's
/// items (8 bytes each, the least an item takes), a JSON string's bytes or
/// array's items. Nested values were measured when they were made.
fn size(v: &Val) -> usize {
    match v {
        Val::Str(s) => s.len(),
        Val::List(xs) => xs.len().saturating_mul(8),
        Val::Json(j) => match &**j {
            serde_json::Value::String(s) => s.len(),
            serde_json::Value::Array(a) => a.len().saturating_mul(8),
            serde_json::Value::Object(o) => o.len().saturating_mul(8),
            _ => 0,
        },
        _ => 0,
    }
}

/// `Err` with [`VALUE_CODE`] when `v` is over `max` bytes.
pub fn check_value(v: &Val, max: usize) -> Result<(), OpError> {
    let n = size(v);
    if n <= max {
        return Ok(());
    }
    Err(OpError::new(
        VALUE_CODE,
        format!("a value of {n} bytes is over the run's limit of {max} bytes per value"),
    )
    .with_payload(serde_json::json!({"limit": max, "size": n})))
}

pub(crate) use crate::frame::FrameCount;
