//! The AIS language front end. The `aisc` / `ais-opt` command-line tools
//! are in the `ais-cli` crate.
//!
//! Pipeline: `syntax` (lex + parse) → `sema` (names, types, checks) → lowering
//! to `ais_ir`. Diagnostics are data until `diagnostics::render` prints them.

pub mod diagnostics;
pub mod driver;
pub mod flows;
pub mod format;
pub mod graph_json;
pub mod guard_cond;
pub mod lower;
pub mod plan;
pub mod program;
pub mod sema;
pub mod syntax;
