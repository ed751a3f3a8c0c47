//! Diagnostic rendering and explanations. The diagnostics themselves are
//! data (`ais_ir::Diagnostic`), produced by each phase's error enum.

pub mod explain;
pub mod render;

pub use render::{render_human, render_json, render_json_plain, render_plain};
