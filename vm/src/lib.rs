//! The AIS virtual machine: artifact loader, dataflow scheduler, Agent
//! Abstract Machine, memory tiers, LLM backends, tools and telemetry.

pub mod aam;
pub mod catalogue;
pub mod config;
pub mod error;
pub mod exec;
mod frame;
pub mod host;
pub mod ifc;
pub mod interp;
pub mod journal;
pub mod llm;
pub mod observe;
pub mod plan;
pub(crate) mod prefetch;
pub mod progress;
pub mod scheduler;
pub mod speculation;
pub mod store;
pub mod sync;
pub mod telemetry;
pub mod tx;
pub mod value;
pub mod webhook;

pub use error::RunError;
pub use host::{Host, HostError};
pub use scheduler::{run, Policy, RunOptions, RunReport, Speculate, SpeculationSummary};
pub use telemetry::{OpEvent, RunSummary};
pub use value::Val;
