//! The benchmark suite of the A-PXM paper's workloads (§5, Tables 2–5) on
//! the AIS toolchain, side by side with LangGraph baselines.
//!
//! - [`workloads`]: the table of workloads (program, entry arguments,
//!   scripted mock replies, LangGraph script).
//! - [`env`]: the OpenAI-compatible mock server with fixed latencies per
//!   latency class, the config file pointing at it, the backend, and the
//!   host with the canned tools.
//! - [`plans`]: the LLMCompiler shapes, ReAct-style tool calls against
//!   inner plans, in process.
//! - [`ours`]: compile and run one workload in process; the critical path
//!   of a program under the configured latencies.
//! - [`serve_load`]: load on an HTTP run server (`aisc serve`, the
//!   LangGraph server baseline): runs per second, latency percentiles.
//! - [`shapes`]: generated programs of a shape and size, for compile-time
//!   scaling (`bench/compile-scale.sh`).
//! - [`steal`]: how much CPU time the host took from this machine during
//!   a run.
//! - [`stats`], [`plot`] (SVG), [`report`] (markdown).
//!
//! The driver is the `ais-bench` binary (`src/main.rs`); the smoke test
//! (`tests/smoke.rs`) runs every workload once with tiny latencies.

pub mod env;
pub mod ours;
pub mod plans;
pub mod plot;
pub mod report;
pub mod serve_load;
pub mod shapes;
pub mod stats;
pub mod steal;
pub mod store_load;
pub mod workloads;
