//! Bytecode and the `.apxmobj` artifact.
//!
//! [`compile`] lowers a verified [`Module`](crate::Module) to a [`Program`]:
//! per flow, one [`RegionCode`] per region (the flow body and every region
//! owned by a control op), each a self-contained sub-graph that the VM
//! instantiates as a *frame*. A region's values live in numbered *slots*:
//!
//! ```text
//! slot 0 .. n_args                 region arguments (flow parameters for a body;
//!                                  item, index, carried… for a loop body; err for catch)
//! n_args .. n_args + captures      values captured from the enclosing region
//! …                                results of the region's ops, in op order
//! ```
//!
//! Each op names its operands by slot (data operands, then ordering tokens,
//! then — for control ops — the *deps*: every value its regions capture, so
//! the op fires only when a child frame can be filled). The consumer lists
//! (CSR: `consumer_offsets`/`consumers`, one list per slot) and initial
//! pending counts (`pending`, one per op) give the VM O(1) readiness: a value
//! arriving in a slot decrements the counters of its consumers, and an op
//! whose counter reaches zero is ready. `roots` lists the ops with no inputs.
//!
//! Types are interned in a flat table (`Program::types`, lists refer to an
//! earlier entry) so the payload has no recursive structure; constants live in
//! a pool (`Program::consts`, JSON as text).
//!
//! [`encode`] writes the artifact: a 24-byte header (magic `APXMOBJ\0`,
//! format version, CRC-32 of the payload, payload length) followed by the
//! postcard-encoded program. [`decode`] checks all of it and then runs
//! [`validate`], so a loaded program is safe to execute: every index is in
//! range, the graph is acyclic and ops are well typed. [`inspect`] renders a
//! readable dump.

mod artifact;
mod calls;
mod codegen;
mod inspect;
mod validate;

pub use artifact::{decode, encode, EncodeError, LoadError, FORMAT_VERSION, HEADER_LEN, MAGIC};
pub use codegen::{compile, compile_owned, CompileError};
pub use inspect::inspect;
pub use validate::validate;

use crate::ops::Opcode;
use crate::types::Type;
use crate::Span;
use serde::{Deserialize, Serialize};

/// A whole compiled module: what an `.apxmobj` file holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Name of the source file, if the producer set one (for diagnostics).
    pub source: Option<String>,
    /// Interned types; `TypeEntry::List(i)` refers to an earlier entry.
    pub types: Vec<TypeEntry>,
    /// Constant pool (`const` values, constant belief initialisers).
    pub consts: Vec<Const>,
    pub agents: Vec<AgentCode>,
    /// All flows of all agents; `AgentCode::flows` and call sites index here.
    pub flows: Vec<FlowCode>,
}

/// A type-table entry (the flat form of [`Type`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TypeEntry {
    Str,
    Number,
    Bool,
    Json,
    Void,
    Null,
    Ord,
    /// `list<types[i]>`, `i` smaller than this entry's index.
    List(u32),
    Opaque(String),
}

/// A constant-pool entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Const {
    Null,
    Bool(bool),
    Number(f64),
    Str(String),
    /// Compact JSON text (arrays and objects).
    Json(String),
}

impl Const {
    /// The constant as JSON (`None` for JSON text that does not parse or a
    /// non-finite number).
    pub fn to_json(&self) -> Option<serde_json::Value> {
        Some(match self {
            Const::Null => serde_json::Value::Null,
            Const::Bool(b) => serde_json::Value::Bool(*b),
            Const::Number(n) => serde_json::Value::Number(serde_json::Number::from_f64(*n)?),
            Const::Str(s) => serde_json::Value::String(s.clone()),
            Const::Json(t) => serde_json::from_str(t).ok()?,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TierCode {
    Stm,
    Ltm,
    Episodic,
}

impl TierCode {
    pub fn tier(self) -> crate::Tier {
        match self {
            TierCode::Stm => crate::Tier::Stm,
            TierCode::Ltm => crate::Tier::Ltm,
            TierCode::Episodic => crate::Tier::Episodic,
        }
    }

    pub fn from_tier(t: crate::Tier) -> TierCode {
        match t {
            crate::Tier::Stm => TierCode::Stm,
            crate::Tier::Ltm => TierCode::Ltm,
            crate::Tier::Episodic => TierCode::Episodic,
        }
    }

    pub fn name(self) -> &'static str {
        self.tier().name()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentCode {
    pub name: String,
    pub memory: Vec<MemoryEntry>,
    pub beliefs: Vec<BeliefEntry>,
    pub goals: Vec<GoalEntry>,
    pub capabilities: Vec<CapabilityEntry>,
    pub handlers: Vec<HandlerEntry>,
    /// Indices into `Program::flows`.
    pub flows: Vec<u32>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub name: String,
    pub tier: TierCode,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BeliefInitCode {
    /// Index into the constant pool.
    Const(u32),
    /// A flow (index into `Program::flows`) computing the initial value.
    Flow(u32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeliefEntry {
    pub name: String,
    pub init: BeliefInitCode,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalEntry {
    pub name: String,
    pub priority: i64,
    pub description: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapabilityEntry {
    pub name: String,
    /// Parameter names and type-table indices.
    pub params: Vec<(String, u32)>,
    pub result: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HandlerEntry {
    pub event: String,
    pub flow: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowCode {
    /// Owning agent (index into `Program::agents`).
    pub agent: u32,
    pub name: String,
    /// Parameter names and type-table indices (slots `0..params.len()` of the body).
    pub params: Vec<(String, u32)>,
    pub result: u32,
    pub entry: bool,
    /// Listed in its agent's `discoverable: [...]`.
    pub discoverable: bool,
    /// Regions; region 0 is the body. Other regions are owned by exactly one
    /// control op of the flow (`Instr::regions`).
    pub regions: Vec<RegionCode>,
    pub span: Span,
    /// Critical-path estimate of one execution, from latency classes (ms).
    pub cp_ms: u64,
}

/// What a region is, which fixes its arguments and terminator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegionKind {
    /// A flow body: args are the parameters, ends with `return`.
    Body,
    Then,
    Else,
    /// A switch case with its literal key.
    Case(String),
    Default,
    /// A loop body: args are item, index, carried values.
    LoopBody,
    Try,
    /// Catch region: one arg, the structured error.
    Catch,
}

impl RegionKind {
    pub fn label(&self) -> &str {
        match self {
            RegionKind::Body => "body",
            RegionKind::Then => "then",
            RegionKind::Else => "else",
            RegionKind::Case(_) => "case",
            RegionKind::Default => "default",
            RegionKind::LoopBody => "loop body",
            RegionKind::Try => "try",
            RegionKind::Catch => "catch",
        }
    }
}

/// One region: a sub-graph instantiated as a frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionCode {
    pub kind: RegionKind,
    pub n_args: u32,
    /// For each captured value, its slot in the *parent* region (the region
    /// holding the owning control op). Empty for a body.
    pub captures: Vec<u32>,
    /// Type-table index of every slot.
    pub slot_types: Vec<u32>,
    pub ops: Vec<Instr>,
    /// Operand pool: `Instr::first_operand ..` (data, tokens, deps).
    pub operands: Vec<u32>,
    /// CSR offsets, `n_slots + 1` entries: consumers of slot `s` are
    /// `consumers[consumer_offsets[s] .. consumer_offsets[s + 1]]` (op indices;
    /// an op appears once per use).
    pub consumer_offsets: Vec<u32>,
    pub consumers: Vec<u32>,
    /// Initial pending count of each op: its number of slot uses.
    pub pending: Vec<u32>,
    /// Ops with no inputs (pending 0): ready when the frame starts.
    pub roots: Vec<u32>,
}

impl RegionCode {
    pub fn n_slots(&self) -> usize {
        self.slot_types.len()
    }

    /// First slot holding op results.
    pub fn first_result_slot(&self) -> u32 {
        self.n_args.saturating_add(self.captures.len() as u32)
    }

    /// Consumers of `slot` (empty when out of range).
    pub fn consumers_of(&self, slot: u32) -> &[u32] {
        let s = slot as usize;
        match (
            self.consumer_offsets.get(s),
            self.consumer_offsets.get(s + 1),
        ) {
            (Some(&a), Some(&b)) => self.consumers.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn pool(&self, start: u32, len: u32) -> &[u32] {
        let a = start as usize;
        let b = a.saturating_add(len as usize);
        self.operands.get(a..b).unwrap_or(&[])
    }

    /// Data operand slots of op `i`.
    pub fn data(&self, op: &Instr) -> &[u32] {
        self.pool(op.first_operand, op.n_data)
    }

    /// Ordering-token operand slots.
    pub fn tokens(&self, op: &Instr) -> &[u32] {
        self.pool(op.first_operand.saturating_add(op.n_data), op.n_tokens)
    }

    /// Captured-value deps of a control op.
    pub fn deps(&self, op: &Instr) -> &[u32] {
        self.pool(
            op.first_operand
                .saturating_add(op.n_data)
                .saturating_add(op.n_tokens),
            op.n_deps,
        )
    }

    /// Every input slot of an op (data, tokens, deps).
    pub fn inputs(&self, op: &Instr) -> &[u32] {
        self.pool(op.first_operand, op.n_inputs())
    }
}

/// One op of a region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instr {
    pub opcode: Opcode,
    /// Start of this op's inputs in `RegionCode::operands`.
    pub first_operand: u32,
    pub n_data: u32,
    pub n_tokens: u32,
    /// Captured values the op's regions need (control ops only).
    pub n_deps: u32,
    /// First result slot; results are `result .. result + n_results`.
    pub result: u32,
    pub n_results: u32,
    /// Owned regions (indices into `FlowCode::regions`), in IR order.
    pub regions: Vec<u32>,
    pub imm: Imm,
    pub span: Span,
    /// Estimated duration from the latency class (a call: the callee's
    /// critical path; a control op: its longest region), ms.
    pub est_ms: u64,
    /// Estimated remaining path from this op to the end of its region,
    /// including itself, ms (the `critical-path` queue policy's priority).
    pub rem_ms: u64,
}

impl Instr {
    pub fn n_inputs(&self) -> u32 {
        self.n_data
            .saturating_add(self.n_tokens)
            .saturating_add(self.n_deps)
    }

    pub fn results(&self) -> std::ops::Range<u32> {
        self.result..self.result.saturating_add(self.n_results)
    }
}

/// Decoded attributes of an op (its immediates).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Imm {
    None,
    /// `const`: constant-pool index.
    Const(u32),
    /// `template`: text with `{N}` placeholders.
    Template(String),
    /// `member`: field name.
    Field(String),
    /// `inv`: tool name.
    Tool(String),
    /// `umem`.
    Tier(TierCode),
    /// `qmem`: tier and optional result limit (the most recent `limit` hits).
    Query {
        tier: TierCode,
        limit: Option<u64>,
    },
    /// `object`: the key of each operand.
    Keys(Vec<String>),
    /// `cast`: the target type (type-table index).
    Cast(u32),
    /// `belief.get` / `belief.set`.
    Belief(String),
    /// `flow.call`: callee index into `Program::flows`.
    Callee(u32),
    /// LLM ops. Boxed: the largest variant would otherwise make every
    /// `Instr` ~50 bytes bigger, and large graphs are memory-bound on
    /// reading instructions (postcard encodes a box like its content).
    Llm(Box<LlmAttrs>),
    /// `loop`.
    Loop {
        max_iters: Option<u64>,
    },
}

impl Imm {
    /// Its kind, as the op table names it ([`crate::OpInfo::imm`]).
    pub fn kind(&self) -> crate::ImmKind {
        use crate::ImmKind as K;
        match self {
            Imm::None => K::None,
            Imm::Const(_) => K::Const,
            Imm::Template(_) => K::Template,
            Imm::Field(_) => K::Field,
            Imm::Tool(_) => K::Tool,
            Imm::Tier(_) => K::Tier,
            Imm::Query { .. } => K::Query,
            Imm::Keys(_) => K::Keys,
            Imm::Cast(_) => K::Cast,
            Imm::Belief(_) => K::Belief,
            Imm::Callee(_) => K::Callee,
            Imm::Llm(_) => K::Llm,
            Imm::Loop { .. } => K::Loop,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmAttrs {
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub system: Option<String>,
    pub cacheable: bool,
    pub no_fuse: bool,
    /// Labels of the context operands, by position (`""`, or past the end:
    /// `context N`).
    pub context: Vec<String>,
    /// Tools offered to the model; empty: none.
    pub tools: Vec<ToolDecl>,
    /// Most model turns of a tool-calling exchange.
    pub max_steps: Option<u32>,
    /// `solve`: rounds of repair after a plan fails to check.
    pub repairs: Option<u32>,
    /// Completion or thinking-token budget (`budget:`).
    pub budget_tokens: Option<u32>,
    /// A configured backend by name (`backend:`); `None`: the run's.
    pub backend: Option<String>,
    /// JSON Schema the reply must satisfy (`schema:`), as JSON text (the
    /// artifact encoding stores no free-form JSON values).
    pub schema: Option<String>,
    /// Prompt-cache key (`cache_key:`).
    pub cache_key: Option<String>,
    /// Prompt-cache breakpoints (`cache_points:`): `tools`, `system`,
    /// `context`, `context:N`.
    pub cache_points: Vec<String>,
    /// Context blocks rendered before the prompt (`cache_prefix:`), by
    /// their 1-based numbers, in render order.
    pub cache_prefix: Vec<u32>,
    /// `schema` parsed, once per loaded program (not stored: the artifact
    /// keeps the text).
    #[serde(skip)]
    pub parsed_schema: ParsedJson,
}

impl LlmAttrs {
    /// The op's `schema:` as JSON, parsed on first use and kept. An
    /// artifact whose schema text is not a JSON object (codegen writes
    /// only objects; a hand-edited artifact may not) is an error, never a
    /// schema silently dropped.
    pub fn schema_value(&self) -> Result<Option<&serde_json::Value>, String> {
        let Some(text) = &self.schema else {
            return Ok(None);
        };
        self.parsed_schema
            .0
            .get_or_init(|| match serde_json::from_str::<serde_json::Value>(text) {
                Ok(v) if v.is_object() => Ok(v),
                Ok(_) => Err("the schema is not a JSON object".to_string()),
                Err(e) => Err(format!("the schema is not JSON: {e}")),
            })
            .as_ref()
            .map(Some)
            .map_err(Clone::clone)
    }
}

/// A value derived from the attributes once, when first needed; attributes
/// are equal whatever it holds.
#[derive(Clone, Debug, Default)]
pub struct ParsedJson(std::sync::OnceLock<Result<serde_json::Value, String>>);

impl PartialEq for ParsedJson {
    fn eq(&self, _: &ParsedJson) -> bool {
        true
    }
}

/// A tool an LLM op offers its model (from its `tools` attribute).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDecl {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments, as JSON text (the artifact encoding
    /// stores no free-form JSON values).
    pub parameters: String,
    /// Declared `@read_only`: its calls need not wait for each other.
    pub read_only: bool,
}

/// Why an entry flow could not be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("the program has no entry flow (mark one flow `@entry`, or name one)")]
    NoEntry,
    #[error("the program has several entry flows ({0}); name one")]
    Ambiguous(String),
    #[error("no flow `{0}` in the program (use `Agent.flow` or a flow name)")]
    NotFound(String),
}

impl Program {
    /// The backends the program's LLM ops name (`backend:`), which a run
    /// must build before it starts.
    pub fn named_backends(&self) -> std::collections::BTreeSet<String> {
        self.flows
            .iter()
            .flat_map(|f| &f.regions)
            .flat_map(|r| &r.ops)
            .filter_map(|i| match &i.imm {
                Imm::Llm(a) => a.backend.clone(),
                _ => None,
            })
            .collect()
    }

    /// The type of table entry `i` (`json` when out of range, which a
    /// validated program never is).
    pub fn type_of(&self, i: u32) -> Type {
        let mut depth = 0usize;
        let mut cur = i;
        // Lists nest through earlier entries; unwind iteratively.
        let base = loop {
            match self.types.get(cur as usize) {
                Some(TypeEntry::List(inner)) if depth < 1024 && *inner < cur => {
                    depth += 1;
                    cur = *inner;
                }
                Some(TypeEntry::List(_)) | None => break Type::Json,
                Some(t) => break scalar_type(t),
            }
        };
        (0..depth).fold(base, |t, _| Type::list(t))
    }

    /// `Agent.flow` of flow `i`.
    pub fn flow_name(&self, i: u32) -> String {
        match self.flows.get(i as usize) {
            Some(f) => {
                let agent = self
                    .agents
                    .get(f.agent as usize)
                    .map(|a| a.name.as_str())
                    .unwrap_or("?");
                format!("{agent}.{}", f.name)
            }
            None => format!("flow#{i}"),
        }
    }

    /// Picks the entry flow: `name` may be `Agent.flow` or a bare flow name;
    /// without a name, the single flow marked `entry`.
    pub fn find_entry(&self, name: Option<&str>) -> Result<u32, EntryError> {
        let all = 0..self.flows.len() as u32;
        match name {
            Some(n) => {
                let n = n.trim_start_matches('@');
                let hits: Vec<u32> = all
                    .filter(|&i| {
                        self.flow_name(i) == n
                            || self.flows.get(i as usize).is_some_and(|f| f.name == n)
                    })
                    .collect();
                match hits.as_slice() {
                    [one] => Ok(*one),
                    [] => Err(EntryError::NotFound(n.to_string())),
                    many => {
                        // Prefer the entry-marked one among several same-named flows.
                        let entries: Vec<u32> = many
                            .iter()
                            .copied()
                            .filter(|&i| self.flows[i as usize].entry)
                            .collect();
                        match entries.as_slice() {
                            [one] => Ok(*one),
                            _ => Err(EntryError::Ambiguous(
                                many.iter()
                                    .map(|&i| self.flow_name(i))
                                    .collect::<Vec<_>>()
                                    .join(", "),
                            )),
                        }
                    }
                }
            }
            None => {
                let entries: Vec<u32> = all
                    .filter(|&i| self.flows.get(i as usize).is_some_and(|f| f.entry))
                    .collect();
                match entries.as_slice() {
                    [one] => Ok(*one),
                    [] => Err(EntryError::NoEntry),
                    many => Err(EntryError::Ambiguous(
                        many.iter()
                            .map(|&i| self.flow_name(i))
                            .collect::<Vec<_>>()
                            .join(", "),
                    )),
                }
            }
        }
    }

    /// Total op count over all regions of all flows.
    pub fn op_count(&self) -> usize {
        self.flows
            .iter()
            .flat_map(|f| f.regions.iter())
            .map(|r| r.ops.len())
            .sum()
    }
}

fn scalar_type(t: &TypeEntry) -> Type {
    match t {
        TypeEntry::Str => Type::Str,
        TypeEntry::Number => Type::Number,
        TypeEntry::Bool => Type::Bool,
        TypeEntry::Json => Type::Json,
        TypeEntry::Void => Type::Void,
        TypeEntry::Null => Type::Null,
        TypeEntry::Ord => Type::Ord,
        TypeEntry::Opaque(n) => Type::Opaque(n.clone()),
        TypeEntry::List(_) => Type::Json,
    }
}

#[cfg(test)]
mod tests;
