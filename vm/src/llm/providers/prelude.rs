//! What every protocol's `mod.rs` starts with: the trait, the reply
//! types it reads into, and the request it writes from.

pub(crate) use super::{BodyOptions, ErrorDetail, Incomplete, Reply, StreamState, WireProtocol};
pub(crate) use crate::llm::prompt::Prepared;
pub(crate) use crate::llm::secret::Secret;
pub(crate) use crate::llm::Usage;
pub(crate) use serde_json::Value;
