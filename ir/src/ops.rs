//! The op table: the single source of truth about every opcode.
//!
//! Printer, parser, verifier (and later passes and the VM) read [`Opcode::info`]
//! rather than matching on opcodes themselves. Operands are split in two
//! parts: the *data operands* (counted by [`OpInfo::operands`], typed by
//! [`OpInfo::operand_types`]) followed, for effectful ops, by zero or more
//! trailing *ordering tokens* (operands of type `ord`).

mod kinds;
mod reference;

pub use kinds::*;
pub use reference::{
    reference_required, REFERENCE_LLM_RENAMES, REFERENCE_ONLY_OPS, REFERENCE_ONLY_READ_AS,
    REFERENCE_OPS,
};
use serde::{Deserialize, Serialize};
use std::fmt;

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
    // Tools the model may call: `[{"name", "description", "parameters"}]`.
    opt("tools", AttrKind::Json),
    // Most model turns of a tool-calling exchange (default 8).
    opt("max_steps", AttrKind::Number),
    // `solve`: rounds of repair after a plan fails to check (default 2).
    opt("repairs", AttrKind::Number),
    // Completion or thinking-token budget, honoured by each provider in
    // its own way (`budget:` / `budget_tokens:`).
    opt("budget_tokens", AttrKind::Number),
    // A configured backend by name (`backend:`), checked at run start;
    // otherwise the run's backend.
    opt("backend", AttrKind::Str),
    // A JSON Schema the reply must satisfy (`schema:`): the op's value is
    // then the reply's JSON.
    opt("schema", AttrKind::Json),
    // Prompt caching (`docs/backends.md`): requests with the same key
    // share a cached prefix (OpenAI `prompt_cache_key`)...
    opt("cache_key", AttrKind::Str),
    // ...and where stable prefixes end: a list of `"tools"`, `"system"`,
    // `"context"` (after every context block) or `"context:N"` (after the
    // prompt and the first N blocks): Anthropic `cache_control`
    // breakpoints. A compiler pass may set both.
    opt("cache_points", AttrKind::Json),
    // Context blocks rendered before the prompt, as a stable prefix
    // (`[2, 1]`: block 2, then block 1, then the prompt and the other
    // blocks in order; numbers as in the default labels `context N`). The
    // request carries the same prompt and labelled blocks: only where they
    // appear in the message changes. Set by the `cache-layout` pass.
    opt("cache_prefix", AttrKind::Json),
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
    /// The bytecode immediate (codegen, bytecode validation).
    pub imm: ImmKind,
    /// Where the VM runs it (derived from `effect` and `terminator`).
    pub exec: ExecClass,
    /// The LLM operation it is (`Some` exactly for `Effect::Llm` ops).
    pub llm: Option<LlmKind>,
    /// The ordering chain its tokens thread through.
    pub chain: ChainKind,
    /// Whether the first data operand is a prompt (must not be an empty
    /// literal; the checker's `E0103`).
    pub prompt: bool,
    /// Whether the run journal records its results (effect ops but `fence`):
    /// on resume they are replayed instead of executed again.
    pub journaled: bool,
    /// Whether it can fail at run time (so it is not dead when unused).
    pub fails: Failure,
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

    /// The facts every LLM op shares.
    const fn llm_op(
        &mut self,
        kind: LlmKind,
        reply: &'static [Canon],
        latency: Latency,
        prompt: bool,
    ) {
        self.prompt = prompt;
        self.operands = Arity::AtLeast(1);
        self.effect = Effect::Llm;
        self.attrs = LLM_ATTRS;
        self.imm = ImmKind::Llm;
        self.llm = Some(kind);
        self.result_rule = ResultRule::Fixed(reply);
        self.latency = latency;
    }
}

macro_rules! opcodes {
    ($( $variant:ident = $mnem:literal ),* $(,)?) => {
        /// Every operation of the IR.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Opcode { $($variant),* }

        impl Opcode {
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),*];

            pub const fn mnemonic(self) -> &'static str {
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
    ToNum = "to_num", Cast = "cast", Object = "object",
    Ask = "ask", Think = "think", Reason = "reason", Llm = "llm",
    Plan = "plan", Reflect = "reflect", Verify = "verify", Solve = "solve",
    Inv = "inv", Exec = "exec",
    Qmem = "qmem", Umem = "umem", Fence = "fence",
    BeliefGet = "belief.get", BeliefSet = "belief.set",
    Print = "print", Communicate = "communicate", Pause = "pause", Guard = "guard",
    FlowCall = "flow.call",
    If = "if", Switch = "switch", Loop = "loop", TryCatch = "try_catch",
    Yield = "yield", Return = "return",
}

/// Every op's facts, indexed by `Opcode as usize`.
static TABLE: [OpInfo; Opcode::ALL.len()] = {
    let mut t = [Opcode::Const.build(); Opcode::ALL.len()];
    let mut k = 0;
    while k < Opcode::ALL.len() {
        t[k] = Opcode::ALL[k].build();
        k += 1;
    }
    t
};

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

    /// The op's row of the table.
    pub fn info(self) -> &'static OpInfo {
        &TABLE[self as usize]
    }

    /// The op table, evaluated at compile time into [`TABLE`].
    const fn build(self) -> OpInfo {
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
            imm: ImmKind::None,
            exec: ExecClass::Pure,
            llm: None,
            chain: ChainKind::None,
            prompt: false,
            journaled: false,
            fails: Failure::Effect,
        };
        match self {
            // ---- pure ----
            O::Const => {
                i.imm = ImmKind::Const;
                i.result_rule = ResultRule::Declared;
                i.attrs = const { &[req("value", AttrKind::Literal)] };
            }
            O::Template => {
                i.imm = ImmKind::Template;
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
                i.imm = ImmKind::Field;
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
            // A number, or text that reads as one (trimmed), as the reference's
            // `GUARD` reads an LLM reply; `true`/`false` are 1/0. Anything
            // else fails `type.not_a_number`, its message led by operand 1
            // (what wanted the number, e.g. the guard).
            O::ToNum => {
                i.operands = Fixed(2);
                i.operand_types = &[T::Value, T::Str];
                i.result_rule = ResultRule::Fixed(&[C::Number]);
            }
            // `{keys[0]: operand 0, keys[1]: operand 1, ...}` (capability arguments).
            O::Object => {
                i.imm = ImmKind::Keys;
                i.operands = AtLeast(0);
                i.result_rule = ResultRule::Fixed(&[C::Json]);
                i.attrs = const { &[req("keys", AttrKind::Json)] };
            }
            // A dynamic value (json, opaque) used at a static type: checked at
            // run time; `null` passes through unchanged.
            O::Cast => {
                i.imm = ImmKind::Cast;
                i.operands = Fixed(1);
                i.result_rule = ResultRule::Declared;
            }
            // ---- llm ----
            // One arm per op: its kind, reply type and latency class.
            O::Ask => i.llm_op(LlmKind::Ask, &[C::Str], Latency::Ask, true),
            O::Think => i.llm_op(LlmKind::Think, &[C::Str], Latency::Think, true),
            O::Reason => i.llm_op(LlmKind::Reason, &[C::Str], Latency::Reason, true),
            O::Llm => i.llm_op(LlmKind::Llm, &[C::Str], Latency::Ask, true),
            O::Plan => i.llm_op(LlmKind::Plan, &[C::Json], Latency::Think, false),
            O::Reflect => i.llm_op(LlmKind::Reflect, &[C::Json], Latency::Think, false),
            O::Verify => i.llm_op(LlmKind::Verify, &[C::Json], Latency::Think, false),
            // The model writes an AIS plan; the runtime checks, links and
            // runs it (`vm/src/scheduler/inner_plan.rs`); its value is the
            // plan's result, as text.
            O::Solve => i.llm_op(LlmKind::Solve, &[C::Str], Latency::Think, true),
            // ---- tool ----
            // The optional `ord` result orders later calls after this one on
            // its provider's chain (the compiler always emits it).
            O::Inv => {
                i.imm = ImmKind::Tool;
                i.chain = ChainKind::Tool;
                i.operands = Fixed(1);
                i.effect = Effect::Tool;
                i.latency = Latency::Tool;
                i.results = Range(1, 2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
                i.attrs = const { &[req("tool", AttrKind::NonEmptyStr)] };
            }
            O::Exec => {
                i.chain = ChainKind::Tool;
                i.operands = AtLeast(1);
                i.effect = Effect::Tool;
                i.latency = Latency::Tool;
                i.results = Range(1, 2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
            }
            // ---- memory ----
            O::Qmem => {
                i.imm = ImmKind::Query;
                i.chain = ChainKind::Memory;
                i.operands = Fixed(1);
                i.effect = Effect::MemRead;
                i.latency = Latency::Mem;
                i.results = Fixed(2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
                i.attrs = const { &[req("tier", AttrKind::Tier), opt("limit", AttrKind::Number)] };
            }
            O::Umem => {
                i.imm = ImmKind::Tier;
                i.chain = ChainKind::Memory;
                i.operands = Range(1, 2);
                i.effect = Effect::MemWrite;
                i.latency = Latency::Mem;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
                i.attrs = const { &[req("tier", AttrKind::Tier)] };
            }
            O::Fence => {
                i.chain = ChainKind::All;
                i.effect = Effect::Io;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
            }
            O::BeliefGet => {
                i.imm = ImmKind::Belief;
                i.chain = ChainKind::Beliefs;
                i.effect = Effect::MemRead;
                i.latency = Latency::Mem;
                i.results = Fixed(2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
                i.attrs = const { &[req("name", AttrKind::NonEmptyStr)] };
            }
            O::BeliefSet => {
                i.imm = ImmKind::Belief;
                i.chain = ChainKind::Beliefs;
                i.operands = Fixed(1);
                i.effect = Effect::MemWrite;
                i.latency = Latency::Mem;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
                i.attrs = const { &[req("name", AttrKind::NonEmptyStr)] };
            }
            // ---- io ----
            O::Print => {
                i.chain = ChainKind::Io;
                i.operands = AtLeast(0);
                i.effect = Effect::Io;
                i.latency = Latency::Io;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
            }
            O::Communicate => {
                i.chain = ChainKind::Io;
                i.operands = Fixed(3);
                i.effect = Effect::Io;
                i.latency = Latency::Io;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
            }
            // A precondition: fails with its message when the condition is
            // false. Ordered like output so it is never dropped as unused.
            O::Guard => {
                i.chain = ChainKind::Io;
                i.operands = Fixed(2);
                i.operand_types = &[T::Bool, T::Value];
                i.effect = Effect::Io;
                i.latency = Latency::Io;
                i.result_rule = ResultRule::Fixed(&[C::Ord]);
            }
            // Stops the run durably until a person gives its input (the
            // op's value on resume).
            O::Pause => {
                i.chain = ChainKind::Io;
                i.operands = Fixed(1);
                i.effect = Effect::Io;
                i.latency = Latency::Io;
                i.results = Fixed(2);
                i.result_rule = ResultRule::Fixed(&[C::Json, C::Ord]);
            }
            // ---- call ----
            O::FlowCall => {
                i.imm = ImmKind::Callee;
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
                i.imm = ImmKind::Loop;
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
        i.exec = match i.effect {
            Effect::Pure => ExecClass::Pure,
            Effect::Llm => ExecClass::Llm,
            Effect::Tool => ExecClass::Tool,
            Effect::MemRead | Effect::MemWrite | Effect::Io => ExecClass::Inline,
            Effect::Call => ExecClass::Call,
            Effect::Control if i.terminator => ExecClass::Terminator,
            Effect::Control => ExecClass::Control,
        };
        i.fails = Self::failure(self, i.effect);
        // `fence` only orders: nothing to replay.
        i.journaled = matches!(i.exec, ExecClass::Inline | ExecClass::Llm | ExecClass::Tool)
            && !matches!(i.chain, ChainKind::All);
        if let (ResultRule::Fixed(ts), Fixed(_)) = (i.result_rule, i.results) {
            i.results = Fixed(ts.len());
        }
        i
    }
}

impl Opcode {
    /// The op's [`Failure`] fact. Kept apart from the arms above so that the
    /// pure ops that can fail are listed in one place (`eval_pure` in
    /// `vm/src/exec.rs` is the semantics); an op not listed is treated as
    /// one that may fail.
    const fn failure(self, effect: Effect) -> Failure {
        use Opcode as O;
        match self {
            O::Const | O::Template | O::Concat | O::Merge | O::WaitAll | O::List => Failure::Never,
            O::Eq | O::Ne | O::ToStr | O::ToBool | O::Object => Failure::Never,
            O::Yield | O::Return => Failure::Never,
            O::Add | O::Sub | O::Mul | O::Div | O::Mod | O::Neg => Failure::OnValues,
            O::Lt | O::Le | O::Gt | O::Ge | O::And | O::Or | O::Not => Failure::OnValues,
            O::Index | O::Member | O::Cast | O::ToNum => Failure::OnValues,
            O::If | O::Switch | O::Loop | O::TryCatch => Failure::Control,
            _ => match effect {
                Effect::Pure => Failure::OnValues,
                Effect::Control => Failure::Control,
                _ => Failure::Effect,
            },
        }
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

    /// Only pure ops can be proved not to fail; effects and calls always
    /// may (defect 1 of issue 32: DCE dropped unused failing ops).
    #[test]
    fn failure_facts_are_consistent_with_effects() {
        for &op in Opcode::ALL {
            let info = op.info();
            match info.fails {
                Failure::Never | Failure::OnValues => {
                    assert!(info.effect == Effect::Pure || info.terminator, "{op}")
                }
                Failure::Control => assert_eq!(info.effect, Effect::Control, "{op}"),
                Failure::Effect => {
                    assert!(
                        !matches!(info.effect, Effect::Pure | Effect::Control),
                        "{op}"
                    )
                }
            }
        }
        for op in [
            Opcode::Div,
            Opcode::Mod,
            Opcode::Index,
            Opcode::Member,
            Opcode::Cast,
        ] {
            assert_eq!(op.info().fails, Failure::OnValues, "{op}");
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
