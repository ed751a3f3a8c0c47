//! The AIS intermediate representation.
//!
//! - [`entity`]: `u32` entity references and typed arenas.
//! - [`types`]: value types.
//! - [`ops`]: the op table (single source of truth for every opcode).
//! - [`module`]: modules, agents, flows, the data-flow graph and a builder.
//! - [`printer`] / [`parser`]: the canonical textual form (`.aisir`).
//! - [`verifier`]: structural and semantic checks, collecting all errors.
//! - [`graph`]: Graphviz and Mermaid renderings of flows.
//! - [`diag`]: diagnostics shared by all phases.

pub mod bytecode;
pub mod catalogue;
pub mod diag;
pub mod effects;
pub mod entity;
pub mod graph;
pub mod ifc;
pub mod lexer;
pub mod module;
pub mod ops;
pub mod parser;
pub mod passes;
pub mod printer;
pub mod source_map;
pub mod types;
pub mod verifier;
pub mod work;

pub use diag::{Diagnostic, IntoDiagnostic, Label, Severity, Span};
pub use entity::{AgentId, Arena, DenseSet, EntityRef, FlowId, Op, Region, Value};
pub use graph::{to_dot, to_mermaid};
pub use module::{
    AgentData, AgentIndex, Attr, AttrName, Attrs, BeliefDecl, BeliefInit, Capability, Dfg,
    FlowBuilder, FlowData, GoalDecl, Handler, MemResource, MemoryDecl, Module, OpData, OpSpans,
    RegionData, Tier, ValueData, ValueDef,
};
pub use ops::{
    Arity, ChainKind, Effect, ExecClass, ImmKind, Latency, LlmKind, OpInfo, Opcode, RegionSpec,
    ResultRule,
};
pub use parser::{parse_module, parse_module_recovering, ParseError};
pub use passes::{critical_path, OptLevel, PassManager, Pipeline};
pub use printer::{print_flow, print_module, value_names};
pub use source_map::{SourceFile, SourceMap};
pub use types::Type;
pub use verifier::{verify, verify_diagnostics, verify_errors, VerifyError};
