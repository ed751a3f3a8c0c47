//! Source text to AST: `lexer` (logos) → `grammar.lalrpop` → `ast`.

pub mod ast;
pub mod dump;
pub mod erase;
pub mod lexer;
pub mod parser;
pub mod refargs;
pub mod resume;

pub use parser::{parse, Parsed, SyntaxError};
