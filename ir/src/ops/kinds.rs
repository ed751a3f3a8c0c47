//! The vocabulary of the op table: the kinds of fact each [`super::OpInfo`]
//! field holds. The per-op values live in `ops.rs`, nowhere else.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How many of something an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Fixed(usize),
    AtLeast(usize),
    /// Inclusive range.
    Range(usize, usize),
}

impl Arity {
    pub fn allows(self, n: usize) -> bool {
        match self {
            Arity::Fixed(k) => n == k,
            Arity::AtLeast(k) => n >= k,
            Arity::Range(lo, hi) => (lo..=hi).contains(&n),
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Fixed(k) => write!(f, "{k}"),
            Arity::AtLeast(k) => write!(f, "at least {k}"),
            Arity::Range(lo, hi) => write!(f, "{lo} to {hi}"),
        }
    }
}

/// A type constraint on an operand. `json` and opaque values satisfy every
/// data constraint statically (they are checked at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeCon {
    /// Any data type (not `void`, not `ord`).
    Data,
    Str,
    Number,
    Bool,
    /// `list<T>` or a dynamic value.
    List,
    /// What a `loop` iterates: a list, a string (a JSON array it holds,
    /// else its non-empty lines) or a dynamic value.
    Iterable,
    /// Any type but `void`, including `ord` (carried values, yield, return).
    Value,
}

impl TypeCon {
    pub fn admits(self, t: &crate::Type) -> bool {
        use crate::Type;
        match self {
            TypeCon::Value => *t != Type::Void,
            TypeCon::Data => t.is_data(),
            _ if t.is_dynamic() => true,
            TypeCon::Str => *t == Type::Str,
            TypeCon::Number => *t == Type::Number,
            TypeCon::Bool => *t == Type::Bool,
            TypeCon::List => matches!(t, Type::List(_)),
            TypeCon::Iterable => matches!(t, Type::List(_) | Type::Str),
        }
    }
}

impl fmt::Display for TypeCon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TypeCon::Data => "a data value",
            TypeCon::Str => "str",
            TypeCon::Number => "number",
            TypeCon::Bool => "bool",
            TypeCon::List => "a list",
            TypeCon::Iterable => "a list or a string",
            TypeCon::Value => "a non-void value",
        })
    }
}

/// How the result types of an op are determined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultRule {
    /// No results.
    None,
    /// Exactly these types (a declared result may be `json` or opaque instead,
    /// i.e. any type that accepts the canonical one).
    Fixed(&'static [Canon]),
    /// One result of any data type, as declared (`const`, `index`, `member`).
    Declared,
    /// One `list<T>` result whose element accepts every operand.
    ListOf,
    /// `[callee result if not void] [, ord]`, checked against the callee.
    Call,
    /// Control ops: the results are the values the regions yield.
    Yielded,
}

/// Canonical result types usable in the static table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Canon {
    Str,
    Number,
    Bool,
    Json,
    Ord,
}

impl Canon {
    pub fn to_type(self) -> crate::Type {
        use crate::Type;
        match self {
            Canon::Str => Type::Str,
            Canon::Number => Type::Number,
            Canon::Bool => Type::Bool,
            Canon::Json => Type::Json,
            Canon::Ord => Type::Ord,
        }
    }
}

/// Effect class of an op (see `docs/ir.md`, "Effects").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Effect {
    Pure,
    Llm,
    Tool,
    /// Reads a memory tier (from the `tier` attr) or a belief.
    MemRead,
    /// Writes a memory tier (from the `tier` attr) or a belief.
    MemWrite,
    Io,
    Call,
    Control,
}

impl Effect {
    pub fn name(self) -> &'static str {
        match self {
            Effect::Pure => "pure",
            Effect::Llm => "llm",
            Effect::Tool => "tool",
            Effect::MemRead => "mem.read",
            Effect::MemWrite => "mem.write",
            Effect::Io => "io",
            Effect::Call => "call",
            Effect::Control => "control",
        }
    }

    /// Effectful ops may consume trailing ordering tokens.
    pub const fn takes_ord(self) -> bool {
        !matches!(self, Effect::Pure | Effect::Control)
    }
}

/// Latency class with a nominal duration, used by scheduling heuristics and
/// the critical-path analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Latency {
    None,
    Mem,
    Ask,
    Think,
    Reason,
    Tool,
    Io,
}

impl Latency {
    pub fn nominal_ms(self) -> u64 {
        match self {
            Latency::None => 0,
            Latency::Mem => 1,
            Latency::Ask => 1000,
            Latency::Think => 3000,
            Latency::Reason => 10000,
            Latency::Tool => 500,
            Latency::Io => 0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Latency::None => "none",
            Latency::Mem => "mem",
            Latency::Ask => "ask",
            Latency::Think => "think",
            Latency::Reason => "reason",
            Latency::Tool => "tool",
            Latency::Io => "io",
        }
    }
}

/// Which regions an op owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionSpec {
    None,
    /// `then {..}` and `else {..}`, no arguments.
    IfElse,
    /// One or more `case "lit" {..}`, then an optional `default {..}`.
    Switch,
    /// `body(%item, %index: number, %carried...) {..}`.
    Loop,
    /// `try {..}` and `catch(%err: json) {..}`.
    TryCatch,
}

/// The kind of value an attribute holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    Str,
    /// A non-empty string.
    NonEmptyStr,
    Number,
    Bool,
    /// Present or absent, no value.
    Flag,
    /// `@Agent.flow`.
    Symbol,
    Type,
    Json,
    /// A string naming a memory tier: `stm`, `ltm` or `episodic`.
    Tier,
    /// Any literal (`const`'s `value`): string, number, bool or json.
    Literal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
    pub required: bool,
}

pub(super) const fn req(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec {
        name,
        kind,
        required: true,
    }
}

pub(super) const fn opt(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec {
        name,
        kind,
        required: false,
    }
}

/// The bytecode immediate an op carries: codegen builds it from the op's
/// attributes, the bytecode validator checks an instruction carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImmKind {
    None,
    /// A constant-pool index (`value`).
    Const,
    /// The `template` text.
    Template,
    /// A `field` name.
    Field,
    /// A `tool` name.
    Tool,
    /// A memory `tier`.
    Tier,
    /// A memory `tier` and an optional `limit`.
    Query,
    /// One key per operand (`keys`).
    Keys,
    /// The result type, as a type-table index.
    Cast,
    /// A belief `name`.
    Belief,
    /// The `callee` flow, as a flow index.
    Callee,
    /// The LLM attributes (`model`, `temperature`, ...).
    Llm,
    /// `max_iters`.
    Loop,
}

/// Where the VM runs an op (derived from [`Effect`] in the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecClass {
    /// Computed inline on a worker.
    Pure,
    /// A quick host effect (memory, beliefs, print, communicate, fence), inline.
    Inline,
    /// Off the workers, on the LLM lane of the I/O executor.
    Llm,
    /// Off the workers, on the tool lane.
    Tool,
    /// `flow.call`: starts a callee frame.
    Call,
    /// `if`, `switch`, `loop`, `try_catch`: start region frames.
    Control,
    /// `yield`, `return`.
    Terminator,
}

/// Which LLM operation an op is: selects the instruction (system prompt),
/// the model class, the reply schema and the name the journal and the
/// configuration use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmKind {
    Ask,
    Think,
    Reason,
    Llm,
    Plan,
    Reflect,
    Verify,
    Solve,
}

impl LlmKind {
    pub const ALL: &'static [LlmKind] = &[
        LlmKind::Ask,
        LlmKind::Think,
        LlmKind::Reason,
        LlmKind::Llm,
        LlmKind::Plan,
        LlmKind::Reflect,
        LlmKind::Verify,
        LlmKind::Solve,
    ];

    /// The op's mnemonic (also its key in the journal and the configuration).
    pub fn name(self) -> &'static str {
        self.opcode().mnemonic()
    }

    /// The op of this kind.
    pub fn opcode(self) -> super::Opcode {
        use super::Opcode as O;
        match self {
            LlmKind::Ask => O::Ask,
            LlmKind::Think => O::Think,
            LlmKind::Reason => O::Reason,
            LlmKind::Llm => O::Llm,
            LlmKind::Plan => O::Plan,
            LlmKind::Reflect => O::Reflect,
            LlmKind::Verify => O::Verify,
            LlmKind::Solve => O::Solve,
        }
    }

    /// Its latency class (`ask`, `think` or `reason`): the model class a
    /// backend picks and the nominal duration the scheduler assumes.
    pub fn latency(self) -> Latency {
        self.opcode().info().latency
    }

    /// Whether the reply is structured JSON (checked against a schema)
    /// rather than text.
    pub fn structured(self) -> bool {
        self.opcode().info().result_rule == ResultRule::Fixed(&[Canon::Json])
    }
}

/// The ordering chain an effect op's `ord` tokens thread through (see
/// `compiler/src/lower/effects.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainKind {
    /// Not ordered (pure, LLM calls, calls and control ops).
    None,
    /// The chain of the memory tier in the `tier` attribute.
    Memory,
    Beliefs,
    /// The chain of the tool's provider (or every provider).
    Tool,
    Io,
    /// Every chain (`fence`).
    All,
}

/// Whether an op can fail at run time (`docs/ir.md`, "Failure"). A failure
/// is observable — it fails the run or sends a `try` to its `catch` — so an
/// op that may fail is not dead even when its results are unused, and no
/// pass folds it away, unless `ais_ir::passes` proves it cannot fail on the
/// operands it has (`passes/failure.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Never fails, whatever its operands hold (`const`, `concat`, `eq`,
    /// `to_str`, `list`, `object`, `yield`, ...).
    Never,
    /// A pure op that fails on some operand values: `null` where a number
    /// or a bool is declared, division by zero, an index out of range, a
    /// member of a non-object, ordering unlike values or NaN, a cast the
    /// value does not fit.
    OnValues,
    /// A control op: fails when its own check does (an `if` on a non-bool,
    /// a `switch` with no matching case and no `default`, a `loop` over a
    /// non-list) or when an op of its regions does (of a `try_catch`: an op
    /// of its `catch` region; the `try` region's failures are caught).
    Control,
    /// An effect or a call: may fail for reasons outside the program (a
    /// provider, a tool, a budget, the callee).
    Effect,
}
