//! Errors as data: a failing op gives an [`OracleError`] with the same kind
//! of `code` the VM reports (`arith.div_by_zero`, `tool.unknown`, ...), so
//! `catch (e)` sees a comparable value.

use serde_json::{json, Value as Json};

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct OracleError {
    pub code: String,
    pub message: String,
}

impl OracleError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> OracleError {
        OracleError {
            code: code.into(),
            message: message.into(),
        }
    }

    /// The value a `catch (e)` handler binds.
    pub fn to_value(&self) -> Json {
        json!({ "code": self.code, "message": self.message })
    }
}
