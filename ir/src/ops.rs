//! The op table: the single source of truth about every opcode.
//!
//! Printer, parser, verifier (and later passes and the VM) read [`Opcode::info`]
//! rather than matching on opcodes themselves. Operands are split in two
//! parts: the *data operands* (counted by [`OpInfo::operands`], typed by
//! [`OpInfo::operand_types`]) followed, for effectful ops, by zero or more
//! trailing *ordering tokens* (operands of type `ord`).

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
    pub fn takes_ord(self) -> bool {
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

const fn req(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec {
        name,
        kind,
        required: true,
    }
}

const fn opt(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec {
        name,
        kind,
        required: false,
    }
}

const LLM_ATTRS: &[AttrSpec] = &[
    opt("model", AttrKind::Str),
    opt("temperature", AttrKind::Number),
    opt("max_tokens", AttrKind::Number),
    opt("no_fuse", AttrKind::Flag),
    opt("cacheable", AttrKind::Flag),
    opt("system", AttrKind::Str),
    // Labels of the context operands (`["report", ""]`): a list of strings,
    // `""` for the default `context N`.
    opt("context", AttrKind::Json),
];

/// Everything the toolchain knows about one opcode.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    pub opcode: Opcode,
    pub mnemonic: &'static str,
    /// Count of data operands (trailing ord tokens not included).
    pub operands: Arity,
    /// Type constraint per data operand; the last entry repeats.
    pub operand_types: &'static [TypeCon],
    /// Whether trailing `ord` operands are accepted (effectful ops).
    pub takes_ord: bool,
    pub results: Arity,
    pub result_rule: ResultRule,
    pub effect: Effect,
    pub latency: Latency,
    pub regions: RegionSpec,
    pub attrs: &'static [AttrSpec],
    /// `yield` or `return`: must end its region.
    pub terminator: bool,
}

impl OpInfo {
    /// The constraint on data operand `i`.
    pub fn operand_type(&self, i: usize) -> TypeCon {
        self.operand_types
            .get(i)
            .or(self.operand_types.last())
            .copied()
            .unwrap_or(TypeCon::Data)
    }

    pub fn attr(&self, name: &str) -> Option<&'static AttrSpec> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

macro_rules! opcodes {
    ($( $variant:ident = $mnem:literal ),* $(,)?) => {
        /// Every operation of the IR.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Opcode { $($variant),* }

        impl Opcode {
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),*];

            pub fn mnemonic(self) -> &'static str {
                match self { $(Opcode::$variant => $mnem),* }
            }

            pub fn from_mnemonic(s: &str) -> Option<Opcode> {
                match s { $($mnem => Some(Opcode::$variant),)* _ => None }
            }
        }
    };
}

opcodes! {
    Const = "const", Template = "template", Concat = "concat", Merge = "merge",
    WaitAll = "wait_all", List = "list", Index = "index", Member = "member",
    Add = "add", Sub = "sub", Mul = "mul", Div = "div", Mod = "mod", Neg = "neg",
    Eq = "eq", Ne = "ne", Lt = "lt", Le = "le", Gt = "gt", Ge = "ge",
    And = "and", Or = "or", Not = "not", ToStr = "to_str", ToBool = "to_bool",
    Cast = "cast", Object = "object",
    Ask = "ask", Think = "think", Reason = "reason", Llm = "llm",
    Plan = "plan", Reflect = "reflect", Verify = "verify",
    Inv = "inv", Exec = "exec",
    Qmem = "qmem", Umem = "umem", Fence = "fence",
    BeliefGet = "belief.get", BeliefSet = "belief.set",
    Print = "print", Communicate = "communicate",
    FlowCall = "flow.call",
    If = "if", Switch = "switch", Loop = "loop", TryCatch = "try_catch",
    Yield = "yield", Return = "return",
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())
    }
}

impl Opcode {
    pub fn effect(self) -> Effect {
        self.info().effect
    }

    pub fn is_pure(self) -> bool {
        self.effect() == Effect::Pure
    }

    pub fn is_terminator(self) -> bool {
        self.info().terminator
    }

    /// The op table.
    pub fn info(self) -> OpInfo {
        use Arity::*;
        use Canon as C;
        use Opcode as O;
        use TypeCon as T;
        let mut i = OpInfo {
            opcode: self,
            mnemonic: self.mnemonic(),
            operands: Fixed(0),
            operand_types: &[T::Data],
            takes_ord: false,
            results: Fixed(1),
            result_rule: ResultRule::None,
            effect: Effect::Pure,
            latency: Latency::None,
            regions: RegionSpec::None,
            attrs: &[],
            terminator: false,
        };
        match self {
            // ---- pure ----
            O::Const => {
                i.result_rule = ResultRule::Declared;
                i.attrs = const { &[req("value", AttrKind::Literal)] };
            }
            O::Template => {
                i.operands = AtLeast(0);
                i.result_rule = ResultRule::Fixed(&[C::Str]);
                i.attrs = const { &[req("template", AttrKind::Str)] };
            }
            O::Concat | O::Merge => {
                i.operands = AtLeast(1);
                i.result_rule = ResultRule::Fixed(&[C::Str]);
            }
            O::WaitAll => {
                i.operands = AtLeast(1);
                i.result_rule = ResultRule::Fixed(&[C::Json]);
            }
            O::List => {
                i.operands = AtLeast(0);
                i.result_rule = ResultRule::ListOf;
            }
            O::Index => {
                i.operands = Fixed(2);
                i.result_rule = ResultRule::Declared;
            }
            O::Member => {
                i.operands = Fixed(1);
                i.result_rule = ResultRule::Declared;
                i.attrs = const { &[req("field", AttrKind::Str)] };
            }
            O::Add | O::Sub | O::Mul | O::Div | O::Mod => {
                i.operands = Fixed(2);
                i.operand_types = &[T::Number];
                i.result_rule = ResultRule::Fixed(&[C::Number]);
            }
            O::Neg => {
                i.operands = Fixed(1);
                i.operand_types = &[T::Number];
                i.result_rule = ResultRule::Fixed(&[C::Number]);
            }
            O::Eq | O::Ne => {
                i.operands = Fixed(2);
                i.result_rule = ResultRule::Fixed(&[C::Bool]);
            }
            // Numbers with numbers or text with text; other pairs fail at run time.
            O::Lt | O::Le | O::Gt | O::Ge => {
                i.operands = Fixed(2);
                i.result_rule = ResultRule::Fixed(&[C::Bool]);
            }
            O::And | O::Or => {
                i.operands = Fixed(2);
                i.operand_types = &[T::Bool];
                i.result_rule = ResultRule::Fixed(&[C::Bool]);
            }
            O::Not => {
                i.operands = Fixed(1);
                i.operand_types = &[T::Bool];
                i.result_rule = ResultRule::Fixed(&[C::Bool]);
            }
            O::ToStr => {
                i.operands = Fixed(1);
                i.result_rule = ResultRule::Fixed(&[C::Str]);
            }
            // Truthiness: false, null, 0, "", [] and {} are false.
            O::ToBool => {
                i.operands = Fixed(1);
                i.result_rule = ResultRule::Fixed(&[C::Bool]);
            }
            // `{keys[0]: operand 0, keys[1]: operand 1, ...}` (capability arguments).
            O::Object => {
                i.operands = AtLeast(0);
                i.result_rule = ResultRule::Fixed(&[C::Json]);
                i.attrs = const { &[req("keys", AttrKind::Json)] };
            }
            // A dynamic value (json, opaque) used at a static type: checked at
            // run time; `null` passes through unchanged.
            O::Cast => {
                i.operands = Fixed(1);
                i.result_rule = ResultRule::Declared;
            }
            // ---- llm ----
            O::Ask | O::Think | O::Reason | O::Llm | O::Plan | O::Reflect | O::Verify => {
                i.operands = AtLeast(1);
                i.effect = Effect::Llm;
                i.attrs = LLM_ATTRS;
                let (rule, lat): (&'static [Canon], _) = match self {
                    O::Ask | O::Llm => (&[C::Str], Latency::Ask),
                    O::Think => (&[C::Str], Latency::Think),
                    O::Reason => (&[C::Str], Latency::Reason),
                    _ => (&[C::Json], Latency::Think),
                };
                i.result_rule = ResultRule::Fixed(rule);
                i.latency = lat;
            }
            // ---- tool ----
            // The optional `ord` result orders later calls after this one on
            // its provider's chain (the compiler always emits it).
            O::Inv => {
                i.operands = Fixed(1);
                i.effect = Effect::Tool;
                i.latency = Latency::Tool;
                i.results = Range(1, 2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
                i.attrs = const { &[req("tool", AttrKind::NonEmptyStr)] };
            }
            O::Exec => {
                i.operands = AtLeast(1);
                i.effect = Effect::Tool;
                i.latency = Latency::Tool;
                i.results = Range(1, 2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
            }
            // ---- memory ----
            O::Qmem => {
                i.operands = Fixed(1);
                i.effect = Effect::MemRead;
                i.latency = Latency::Mem;
                i.results = Fixed(2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
                i.attrs = const { &[req("tier", AttrKind::Tier), opt("limit", AttrKind::Number)] };
            }
            O::Umem => {
                i.operands = Range(1, 2);
                i.effect = Effect::MemWrite;
                i.latency = Latency::Mem;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
                i.attrs = const { &[req("tier", AttrKind::Tier)] };
            }
            O::Fence => {
                i.effect = Effect::Io;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
            }
            O::BeliefGet => {
                i.effect = Effect::MemRead;
                i.latency = Latency::Mem;
                i.results = Fixed(2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
                i.attrs = const { &[req("name", AttrKind::NonEmptyStr)] };
            }
            O::BeliefSet => {
                i.operands = Fixed(1);
                i.effect = Effect::MemWrite;
                i.latency = Latency::Mem;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
                i.attrs = const { &[req("name", AttrKind::NonEmptyStr)] };
            }
            // ---- io ----
            O::Print => {
                i.operands = AtLeast(0);
                i.effect = Effect::Io;
                i.latency = Latency::Io;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
            }
            O::Communicate => {
                i.operands = Fixed(3);
                i.effect = Effect::Io;
                i.latency = Latency::Io;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
            }
            // ---- call ----
            O::FlowCall => {
                i.operands = AtLeast(0);
                i.effect = Effect::Call;
                i.results = Range(0, 2);
                i.result_rule = ResultRule::Call;
                i.attrs = const { &[req("callee", AttrKind::Symbol)] };
            }
            // ---- control ----
            O::If => {
                i.operands = Fixed(1);
                i.operand_types = &[T::Bool];
                i.effect = Effect::Control;
                i.results = AtLeast(0);
                i.result_rule = ResultRule::Yielded;
                i.regions = RegionSpec::IfElse;
            }
            O::Switch => {
                i.operands = Fixed(1);
                i.effect = Effect::Control;
                i.results = AtLeast(0);
                i.result_rule = ResultRule::Yielded;
                i.regions = RegionSpec::Switch;
            }
            O::Loop => {
                i.operands = AtLeast(1);
                i.operand_types = &[T::Iterable, T::Value];
                i.effect = Effect::Control;
                i.results = AtLeast(0);
                i.result_rule = ResultRule::Yielded;
                i.regions = RegionSpec::Loop;
                i.attrs = const { &[opt("max_iters", AttrKind::Number)] };
            }
            O::TryCatch => {
                i.effect = Effect::Control;
                i.results = AtLeast(0);
                i.result_rule = ResultRule::Yielded;
                i.regions = RegionSpec::TryCatch;
            }
            O::Yield => {
                i.operands = AtLeast(0);
                i.operand_types = &[T::Value];
                i.effect = Effect::Control;
                i.results = Fixed(0);
                i.terminator = true;
            }
            O::Return => {
                i.operands = Range(0, 1);
                i.operand_types = &[T::Value];
                i.effect = Effect::Control;
                i.results = Fixed(0);
                i.terminator = true;
            }
        }
        i.takes_ord = i.effect.takes_ord();
        if let (ResultRule::Fixed(ts), Fixed(_)) = (i.result_rule, i.results) {
            i.results = Fixed(ts.len());
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics_round_trip() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_mnemonic(op.mnemonic()), Some(op));
        }
    }

    #[test]
    fn pure_ops_never_take_tokens() {
        for &op in Opcode::ALL {
            let info = op.info();
            if info.effect == Effect::Pure {
                assert!(!info.takes_ord, "{op}");
                assert_eq!(info.latency, Latency::None, "{op}");
            }
        }
    }
}
