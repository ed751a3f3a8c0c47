//! The AIS virtual machine: artifact loader, dataflow scheduler, Agent
//! Abstract Machine, memory tiers, LLM backends, tools and telemetry.

pub mod config;
pub mod llm;
