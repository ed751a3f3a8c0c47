//! Test doubles and harnesses for the AIS workspace, kept out of the
//! product crates. A dev-dependency only (the benchmark tool `ais-bench`
//! also links it: it is a tool, not the product).
//!
//! - [`mock`]: a loopback server speaking the OpenAI, Anthropic and Ollama
//!   protocols, with scripted faults and latencies;
//! - [`choices`]: generators driven by a proptest-drawn, shrinkable tape;
//! - [`fake`]: a deterministic in-process [`LlmBackend`](ais_vm::llm::LlmBackend);
//! - [`host`]: the in-memory [`Host`](ais_vm::Host);
//! - [`fault`]: the journal fault switch of the `aisc-fault` binary;
//! - [`golden`]: the golden corpora's annotation dialect, bless switch and
//!   corpus helpers;
//! - [`llm`]: request and HTTP-backend fixtures of the provider tests.

pub use ais_choices as choices;
pub mod fake;
pub mod fault;
pub mod golden;
pub mod host;
pub mod llm;
pub mod mock;
pub mod otlp;
pub mod pg;

/// The plan compiler `aisc run` uses (the product's, not a double): VM tests of
/// `solve` link plans checked by the real front end.
pub use ais_planner::FrontEndPlanner;
pub use fake::FakeBackend;
pub use host::{MemEntry, MemoryHost};
pub use mock::{MockReply, MockServer};
