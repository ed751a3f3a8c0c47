//! The AIS language front end and the `aisc` / `ais-opt` command-line tools.
//!
//! Pipeline: `syntax` (lex + parse) → `sema` (names, types, checks) → lowering
//! to `ais_ir`. Diagnostics are data until `diagnostics::render` prints them.

pub mod cli;
pub mod diagnostics;
pub mod driver;
pub mod lower;
pub mod opt;
pub mod sema;
pub mod syntax;
