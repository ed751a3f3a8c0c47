//! Information-flow labels at run time (issue 19; `docs/security.md`).
//!
//! A label is a `u64` bitset of sources, interned per run: bit `i` is the
//! `i`-th source seen (`@args`, a tool name, `@llm`, ...); sources past 63
//! share bit 63, which is untrusted if any of them is (conservative). A
//! value's label is the union of the labels of the values it was computed
//! from, of its op's own source (a tool, a model, a memory tier) and of its
//! frame's control context (`Frame::pc`). At a sink ([`ais_ir::ifc::sink_of`])
//! each argument the policy checks must carry no untrusted bit, or the op
//! fails with `policy.denied`.

use crate::exec::OpError;
use crate::sync::lock;
use ais_ir::bytecode::{Imm, Instr, RegionCode};
use ais_ir::ifc::{sink_of, FlowPolicy};
use ais_ir::Effect;
use ais_ir::Opcode;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use ais_ir::ifc::{ArgRule, Mode, OnDeny, Quarantine, SinkRule};

mod answer;
mod approvals;
mod values;

pub use approvals::{Approvals, FlowApprover};
pub use values::ValuePools;

/// The code of a denied flow.
pub const DENIED: &str = "policy.denied";

const OVERFLOW: u32 = 63;

/// One run's sources, policy and memory labels.
pub struct Labels {
    pub policy: FlowPolicy,
    names: Mutex<Vec<String>>,
    untrusted: AtomicU64,
    /// Sources whose data is private (`[policy] private`).
    private: AtomicU64,
    /// Union of the labels written to each memory tier (stm, ltm,
    /// episodic) and to beliefs, in this run and (for tiers that outlive a
    /// run, [`Labels::load_stored`]) in earlier ones: a read carries it.
    mem: [AtomicU64; 5],
    /// Union of the result labels of every op the host sees (tools,
    /// memory, beliefs, messages): the host logs them to the episodic log,
    /// where the agent's trace (`qmem("@trace", "episodic")`) reads them.
    seen_by_host: AtomicU64,
    pub args: u64,
    pub llm: u64,
    pub message: u64,
    pub plan: u64,
    pub input: u64,
    /// A quarantined call's result (`ais_ir::ifc::QUARANTINE`).
    pub quarantine: u64,
    /// The values of the sources argument rules compare against.
    pub values: ValuePools,
    /// What the run read, for judging its answer (`answer`).
    read: answer::ReadTexts,
    /// Does a rule judge text by what it repeats (then `read` is kept)?
    relays: bool,
    trace: Option<Arc<LabelTrace>>,
}

/// Where an op's result label was seen: `(inner plan, flow, region, op)`
/// of the run's code (`inner plan`: the frame runs a linked plan's code).
pub type OpSite = (bool, u32, u32, u32);

/// Every op's result label, by source name, unioned over the op's
/// executions (loop iterations, calls): what the propagation goldens dump.
#[derive(Debug, Default)]
pub struct LabelTrace {
    ops: Mutex<BTreeMap<OpSite, BTreeSet<String>>>,
    untrusted: Mutex<BTreeSet<String>>,
}

impl LabelTrace {
    /// The labels seen so far, by op.
    pub fn ops(&self) -> BTreeMap<OpSite, BTreeSet<String>> {
        lock(&self.ops).clone()
    }

    /// The sources the run's policy found untrusted.
    pub fn untrusted(&self) -> BTreeSet<String> {
        lock(&self.untrusted).clone()
    }
}

impl Labels {
    pub fn new(policy: FlowPolicy) -> Labels {
        let values = ValuePools::with_items(
            policy.value_sources(),
            policy.lookup_sources(),
            policy.choice_sources(),
        )
        .selecting(policy.selected_sources());
        let mut l = Labels {
            policy,
            names: Mutex::new(Vec::new()),
            untrusted: AtomicU64::new(0),
            private: AtomicU64::new(0),
            mem: Default::default(),
            seen_by_host: AtomicU64::new(0),
            args: 0,
            llm: 0,
            message: 0,
            plan: 0,
            input: 0,
            quarantine: 0,
            values,
            read: answer::ReadTexts::default(),
            relays: false,
            trace: None,
        };
        l.args = l.source("@args");
        l.llm = l.source("@llm");
        l.message = l.source("@message");
        l.plan = l.source("@plan");
        l.input = l.source("@input");
        l.quarantine = l.source(ais_ir::ifc::QUARANTINE);
        l.relays = l.policy.enforced() && l.policy.judges_relayed_text();
        l
    }

    /// Records every op's result label in `trace` (see [`LabelTrace`]).
    pub fn traced(mut self, trace: Option<Arc<LabelTrace>>) -> Labels {
        self.trace = trace;
        self
    }

    /// Notes op `site`'s result label when tracing (one branch otherwise).
    #[inline]
    pub fn trace(&self, site: impl FnOnce() -> OpSite, label: u64) {
        if let Some(t) = &self.trace {
            self.trace_into(t, site(), label);
        }
    }

    #[cold]
    fn trace_into(&self, t: &LabelTrace, site: OpSite, label: u64) {
        let names = self.names(label);
        let bad = self.untrusted_names(label);
        lock(&t.ops).entry(site).or_default().extend(names);
        lock(&t.untrusted).extend(bad);
    }

    /// Labels are off: nothing is checked, so nothing needs tracking.
    #[inline]
    pub fn off(&self) -> bool {
        self.policy.mode == Mode::Off
    }

    /// The bit of source `name` (interned on first use).
    pub fn source(&self, name: &str) -> u64 {
        let mut names = lock(&self.names);
        let i = match names.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                names.push(name.to_string());
                (names.len() - 1) as u32
            }
        };
        let bit = 1u64 << i.min(OVERFLOW);
        if !self.policy.trusted(name) {
            self.untrusted.fetch_or(bit, Ordering::Relaxed);
        }
        if self.policy.private(name) {
            self.private.fetch_or(bit, Ordering::Relaxed);
        }
        bit
    }

    #[inline]
    pub fn is_trusted(&self, label: u64) -> bool {
        label & self.untrusted.load(Ordering::Relaxed) == 0
    }

    /// Must an op with inputs labelled `label` be checked at its sink:
    /// untrusted or private data?
    #[inline]
    pub fn needs_check(&self, label: u64) -> bool {
        label & (self.untrusted.load(Ordering::Relaxed) | self.private.load(Ordering::Relaxed)) != 0
    }

    /// The private sources in `label`, by name.
    fn private_names(&self, label: u64) -> Vec<String> {
        let p = label & self.private.load(Ordering::Relaxed);
        self.names(p)
    }

    /// Confidentiality: may a call of `tool` whose arguments (`args`, an
    /// object) carry `label` happen? Private data reaches only tools that
    /// keep it on the machine, or whose destination arguments hold a value
    /// its `private_to` trusts.
    pub fn check_private(
        &self,
        tool: &str,
        label: u64,
        args: &dyn Fn() -> Option<serde_json::Value>,
    ) -> Result<(), OpError> {
        if label & self.private.load(Ordering::Relaxed) == 0 || self.policy.local(tool) {
            return Ok(());
        }
        let to = self.policy.sinks.get(tool).map(|r| &r.private_to);
        let trusted_destination = match (to, args()) {
            (Some(to), Some(a)) if !to.is_empty() => to.iter().all(|(arg, patterns)| {
                let mut leaves = Vec::new();
                string_leaves(a.get(arg), &mut leaves);
                !leaves.is_empty()
                    && leaves
                        .iter()
                        .all(|v| patterns.iter().any(|p| ais_ir::ifc::glob(p, v)))
            }),
            _ => false,
        };
        if trusted_destination {
            return Ok(());
        }
        let sources = self.private_names(label);
        let arg = to
            .and_then(|t| t.keys().next().cloned())
            .unwrap_or_else(|| "args".into());
        Err(self.denial(
            tool,
            &arg,
            format!(
                "`{tool}` would send private data from {} to a destination not trusted with it (set `[policy.sinks.{tool}] private_to`)",
                sources.join(", ")
            ),
            sources,
            vec![tool.to_string()],
        ))
    }

    /// The untrusted sources in `label`, by name.
    pub fn untrusted_names(&self, label: u64) -> Vec<String> {
        let bad = label & self.untrusted.load(Ordering::Relaxed);
        let names = lock(&self.names);
        let mut out: Vec<String> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| bad & (1u64 << (*i as u32).min(OVERFLOW)) != 0)
            .map(|(_, n)| n.clone())
            .collect();
        out.dedup();
        out
    }

    /// Every source in `label`, by name: what the journal records with an
    /// op's results (bit numbers differ between processes, names do not).
    pub fn names(&self, label: u64) -> Vec<String> {
        let names = lock(&self.names);
        names
            .iter()
            .enumerate()
            .filter(|(i, _)| label & (1u64 << (*i as u32).min(OVERFLOW)) != 0)
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// The label of the sources `names` (interned in this run).
    pub fn of_names(&self, names: &[String]) -> u64 {
        names.iter().fold(0, |l, n| l | self.source(n))
    }

    /// The tiers whose contents can outlive a run, by index into `mem`,
    /// with the names the host keeps their labels under.
    const STORED_TIERS: [(usize, &'static str); 3] = [(1, "ltm"), (2, "episodic"), (3, "belief")];

    /// The workspace's index in `mem`: what tools declared as writing the
    /// workspace wrote there (`crate::catalogue::labels`).
    const WORKSPACE: usize = 4;

    /// Joins into the workspace's label what earlier runs (and other
    /// processes) wrote there, before the run starts.
    pub fn load_workspace(
        &self,
        host: &dyn crate::host::Host,
    ) -> Result<(), crate::host::HostError> {
        if self.off() {
            return Ok(());
        }
        let names = host.stored_labels("workspace")?;
        self.mem[Self::WORKSPACE].fetch_or(self.of_names(&names), Ordering::Relaxed);
        Ok(())
    }

    /// What a model reads in the reply of tool `name` inside an exchange:
    /// the tool's own source, and what the workspace holds when the tool
    /// reads it (`read_file`, `bash`).
    pub fn reply_label(&self, name: &str) -> u64 {
        let ws = if self.workspace_use(name).reads() {
            self.mem[Self::WORKSPACE].load(Ordering::Relaxed)
        } else {
            0
        };
        self.source(name) | ws
    }

    /// How tool `name` uses the workspace, as the catalogue declares it.
    fn workspace_use(&self, name: &str) -> ais_ir::catalogue::WorkspaceUse {
        self.policy
            .catalogue
            .get(name)
            .map_or(ais_ir::catalogue::WorkspaceUse::None, |d| d.workspace)
    }

    /// Joins into each tier's label what earlier runs wrote there (as the
    /// host recorded it), before the run starts.
    pub fn load_stored(&self, host: &dyn crate::host::Host) -> Result<(), crate::host::HostError> {
        if self.off() {
            return Ok(());
        }
        for (i, tier) in Self::STORED_TIERS {
            let names = host.stored_labels(tier)?;
            self.mem[i].fetch_or(self.of_names(&names), Ordering::Relaxed);
        }
        Ok(())
    }

    fn tier_index(instr: &Instr) -> usize {
        match &instr.imm {
            Imm::Tier(t) | Imm::Query { tier: t, .. } => match t.name() {
                "stm" => 0,
                "ltm" => 1,
                _ => 2,
            },
            _ => 3,
        }
    }

    /// The source label an op adds to its results (beyond its inputs').
    #[inline]
    pub fn op_source(&self, instr: &Instr) -> u64 {
        // Most ops (every pure one) add none: decided from the op table
        // without a call.
        let info = instr.opcode.info();
        if info.effect == Effect::Pure {
            return 0;
        }
        self.effect_source(instr, info.llm.is_some())
    }

    fn effect_source(&self, instr: &Instr, llm: bool) -> u64 {
        match instr.opcode {
            // A tool that reads the workspace carries what was written
            // there; `exec` may run any tool.
            Opcode::Inv => match &instr.imm {
                Imm::Tool(t) if self.workspace_use(t).reads() => {
                    self.source(t) | self.mem[Self::WORKSPACE].load(Ordering::Relaxed)
                }
                Imm::Tool(t) => self.source(t),
                _ => 0,
            },
            Opcode::Exec => {
                self.source("@bash") | self.mem[Self::WORKSPACE].load(Ordering::Relaxed)
            }
            Opcode::Qmem | Opcode::BeliefGet => {
                let i = Self::tier_index(instr);
                let name = match i {
                    0 => "@memory.stm",
                    1 => "@memory.ltm",
                    2 => "@memory.episodic",
                    _ => "@belief",
                };
                let trace = if i == 2 {
                    self.seen_by_host.load(Ordering::Relaxed)
                } else {
                    0
                };
                self.source(name) | self.mem[i].load(Ordering::Relaxed) | trace
            }
            Opcode::Pause => self.input,
            Opcode::Solve => {
                // A planner may read every offered tool's replies, and
                // what a tool that reads the workspace finds there.
                let ws = self.mem[Self::WORKSPACE].load(Ordering::Relaxed);
                let tools = match &instr.imm {
                    Imm::Llm(a) => a.tools.iter().fold(0, |l, t| {
                        let read = if self.workspace_use(&t.name).reads() {
                            ws
                        } else {
                            0
                        };
                        l | self.source(&t.name) | read
                    }),
                    _ => 0,
                };
                self.plan | tools
            }
            // A tool-calling exchange adds the sources of the replies it
            // actually read, turn by turn (`scheduler::tool_loop`).
            _ if llm => self.llm,
            _ => 0,
        }
    }

    /// Records what an effect op is about to write (memory and belief
    /// writes keep their label for later reads), and notes the result
    /// label `result` of an op the host sees. Returns the tier and the
    /// sources it newly holds when the tier outlives the run: the caller
    /// has the host keep them before the write happens.
    #[inline]
    pub fn note_write(
        &self,
        instr: &Instr,
        label: u64,
        result: u64,
    ) -> Option<(&'static str, Vec<String>)> {
        let effect = instr.opcode.effect();
        if !matches!(
            effect,
            Effect::Tool | Effect::MemRead | Effect::MemWrite | Effect::Io
        ) {
            return None;
        }
        self.seen_by_host
            .fetch_or(result | label, Ordering::Relaxed);
        let writes_workspace = match (&instr.opcode, &instr.imm) {
            (Opcode::Inv, Imm::Tool(t)) => self.workspace_use(t).writes(),
            (Opcode::Exec, _) => true,
            _ => false,
        };
        if writes_workspace {
            // What a tool writes into the workspace: its inputs' label,
            // kept before the write for later reads and later runs.
            let before = self.mem[Self::WORKSPACE].fetch_or(label, Ordering::Relaxed);
            let new = label & !before;
            return (new != 0).then(|| ("workspace", self.names(new)));
        }
        if !matches!(instr.opcode, Opcode::Umem | Opcode::BeliefSet) {
            return None;
        }
        let i = Self::tier_index(instr);
        let before = self.mem[i].fetch_or(label, Ordering::Relaxed);
        let new = label & !before;
        let tier = Self::STORED_TIERS.iter().find(|(t, _)| *t == i)?.1;
        (new != 0).then(|| (tier, self.names(new)))
    }

    /// The label of op `instr`'s results given its inputs' `label`, for an
    /// op that completes at once (pure and inline ops).
    #[inline]
    pub fn result_label(
        &self,
        program: &ais_ir::bytecode::Program,
        instr: &Instr,
        label: u64,
        pc: u64,
    ) -> u64 {
        if self.policy.quarantine.releases(program, instr) {
            // Quarantine: the value cannot carry an instruction, but the
            // attacker chose it among the shapes the schema admits: it
            // keeps the control context and `@quarantine`, which only the
            // arguments that accept such a choice take.
            return pc | self.quarantine;
        }
        label | self.op_source(instr)
    }

    /// Checks a sink op's arguments against the policy: `Err(policy.denied)`
    /// naming the sink, the argument and the untrusted sources (and the
    /// producing ops within the frame) when one is denied. `value_of`
    /// gives a slot's value, for the arguments whose rule judges the value
    /// by its provenance.
    pub fn check_sink(
        &self,
        code: &RegionCode,
        instr: &Instr,
        label_of: &dyn Fn(u32) -> u64,
        value_of: &dyn Fn(u32) -> Option<serde_json::Value>,
        pc: u64,
    ) -> Result<(), OpError> {
        if !self.policy.enforced() {
            return Ok(());
        }
        let (tool, tier) = match &instr.imm {
            Imm::Tool(t) => (Some(t.as_str()), None),
            Imm::Tier(t) => (None, Some(t.name())),
            _ => (None, None),
        };
        let Some(sink) = sink_of(instr.opcode, tool, tier) else {
            return Ok(());
        };
        // Confidentiality: a tool call or `exec` (which may reach the
        // network) carrying private data.
        if matches!(instr.opcode, Opcode::Inv | Opcode::Exec) {
            let data = code.data(instr);
            let all = data.iter().fold(pc, |l, &s| l | label_of(s));
            let first = data.first().copied();
            self.check_private(&sink.name, all, &|| {
                let v = value_of(first?)?;
                Some(match instr.opcode {
                    Opcode::Exec => json!({ "command": v }),
                    _ => v,
                })
            })?;
        }
        if !self.policy.is_sink(&sink.name) {
            return Ok(());
        }
        for (i, &s) in code.data(instr).iter().enumerate() {
            let whole = label_of(s) | pc;
            if self.is_trusted(whole) {
                continue;
            }
            // An `inv`'s argument object: check field by field when the
            // object was built in this frame (`object` op).
            let fields = if sink.fields {
                object_fields(code, s)
            } else {
                None
            };
            let args: Vec<(String, u32, u64)> = match fields {
                Some(fs) => fs
                    .into_iter()
                    .map(|(k, slot)| (k, slot, label_of(slot) | pc))
                    .collect(),
                None => vec![(sink.operand_name(i).to_string(), s, whole)],
            };
            for (arg, slot, l) in args {
                if self.admits(&sink.name, &arg, l, || value_of(slot)) {
                    continue;
                }
                let sources = self.untrusted_names(l);
                let path = path_to(code, s, &|x| !self.is_trusted(label_of(x)));
                return Err(self.denial(
                    &sink.name,
                    &arg,
                    format!(
                        "`{}` argument `{arg}` carries untrusted data from {} (path: {})",
                        sink.name,
                        sources.join(", "),
                        path.join(" -> ")
                    ),
                    sources,
                    path,
                ));
            }
        }
        Ok(())
    }

    /// May argument `arg` of `sink` take a value labelled `label`? Yes when
    /// the label is trusted, the argument unchecked, its untrusted sources
    /// only a quarantined choice the argument accepts, or its value one
    /// the argument's rule vouches for (`value`: asked only then).
    pub fn admits(
        &self,
        sink: &str,
        arg: &str,
        label: u64,
        value: impl FnOnce() -> Option<serde_json::Value>,
    ) -> bool {
        if self.is_trusted(label) || !self.policy.arg_checked(sink, arg) {
            return true;
        }
        let Some(rule) = self.policy.arg_rule(sink, arg) else {
            return false;
        };
        let bad = label & self.untrusted.load(Ordering::Relaxed);
        if rule.quarantined && bad & !self.quarantine == 0 {
            return true;
        }
        if rule.values.is_empty()
            && rule.from.is_empty()
            && rule.lookup.is_empty()
            && rule.choice.is_empty()
            && rule.selected.is_empty()
            && !rule.relayed
        {
            return false;
        }
        value().is_some_and(|v| {
            self.values
                .vouches(rule, &v, &|s: &str| self.policy.trusted(s))
                || (rule.relayed && self.relays_only(&v))
        })
    }

    /// A `policy.denied` error; its payload says whether to ask a person
    /// (`on_deny`).
    fn denial(
        &self,
        sink: &str,
        arg: &str,
        message: String,
        sources: Vec<String>,
        path: Vec<String>,
    ) -> OpError {
        let on_deny = match self.policy.on_deny(sink, arg) {
            None => "terminal",
            Some(OnDeny::Ask) => "ask",
            Some(OnDeny::Deny) => "deny",
        };
        OpError::new(DENIED, message).with_payload(json!({
            "sink": sink,
            "argument": arg,
            "sources": sources,
            "path": path,
            "on_deny": on_deny,
        }))
    }

    /// Keeps the value a source produced when an argument rule compares
    /// against it (the run's input, a trusted tool's result).
    #[inline]
    pub fn note_value(&self, source: &str, v: impl FnOnce() -> serde_json::Value) {
        self.note_result(source, true, v);
    }

    /// Does every value in `args` come from trusted data this run (the
    /// request, a trusted tool's reply some rule compares against)? Then
    /// a trusted tool called with them computed its reply from trusted
    /// data, whatever else the exchange read (a contact looked up by a
    /// name the user typed).
    pub fn keyed_by_trusted(&self, args: &serde_json::Value) -> bool {
        self.policy.enforced() && self.values.held(args)
    }

    /// A call to `tool` ran: when the tool has side effects, a listing
    /// read after it ranks nothing for a `choice` by `?max=` (the run
    /// may have changed the ranking itself).
    pub fn note_tool_ran(&self, tool: &str) {
        if self.policy.enforced() && self.policy.is_sink(tool) {
            self.values.note_effect();
        }
    }

    /// Keeps what a source produced: for the argument rules that compare
    /// against it when `vouches` (it was computed from trusted data), and
    /// for judging the answer (`answer`) in any case.
    #[inline]
    pub fn note_result(&self, source: &str, vouches: bool, v: impl FnOnce() -> serde_json::Value) {
        self.note_call_result(source, None, vouches, v);
    }

    /// [`Labels::note_result`] of a tool call whose arguments were `args`
    /// (a record condition `?KEY=@key` compares the record's name with
    /// them; without them it admits no record).
    pub fn note_call_result(
        &self,
        source: &str,
        args: Option<&serde_json::Value>,
        vouches: bool,
        v: impl FnOnce() -> serde_json::Value,
    ) {
        let pool = self.values.wants(source);
        let read = self.reads_for_answer();
        if !pool && !read {
            return;
        }
        let v = v();
        if pool {
            self.values.note_keyed(source, args, &v, vouches);
        }
        if read {
            self.read_answer_text(source, &v);
            if vouches {
                self.read_selected_text(source, args, &v);
            }
        }
    }
}

impl Labels {
    /// Notes a tool call a model makes inside an exchange carrying
    /// `label`: a tool that writes the workspace writes that label there.
    /// The sources the workspace newly holds, for the host to keep before
    /// the call runs.
    pub fn note_tool_write(&self, tool: &str, label: u64) -> Option<Vec<String>> {
        if self.off() || !self.workspace_use(tool).writes() {
            return None;
        }
        let before = self.mem[Self::WORKSPACE].fetch_or(label, Ordering::Relaxed);
        let new = label & !before;
        (new != 0).then(|| self.names(new))
    }

    /// Checks a tool call a model asked for inside an LLM op whose
    /// exchange has read `label` so far (its inputs, the model, and the
    /// replies of the earlier turns' calls).
    pub fn check_tool_call(
        &self,
        tool: &str,
        args: &serde_json::Value,
        label: u64,
    ) -> Result<(), OpError> {
        if !self.policy.enforced() {
            return Ok(());
        }
        self.check_private(tool, label, &|| Some(args.clone()))?;
        if self.is_trusted(label) || !self.policy.is_sink(tool) {
            return Ok(());
        }
        let names: Vec<&str> = match args {
            serde_json::Value::Object(m) if !m.is_empty() => m.keys().map(String::as_str).collect(),
            _ => vec!["args"],
        };
        let Some(arg) = names.into_iter().find(|a| {
            !self.admits(tool, a, label, || {
                args.get(a).cloned().or_else(|| Some(args.clone()))
            })
        }) else {
            return Ok(());
        };
        let sources = self.untrusted_names(label);
        Err(self.denial(
            tool,
            arg,
            format!(
                "`{tool}` argument `{arg}` would carry untrusted data from {} (the model's conversation read it)",
                sources.join(", ")
            ),
            sources,
            vec!["llm".into(), tool.into()],
        ))
    }
}

/// The strings (and numbers, as text) in `v`.
fn string_leaves(v: Option<&serde_json::Value>, out: &mut Vec<String>) {
    match v {
        Some(serde_json::Value::String(s)) => out.push(s.clone()),
        Some(serde_json::Value::Number(n)) => out.push(n.to_string()),
        Some(serde_json::Value::Array(xs)) => {
            xs.iter().for_each(|x| string_leaves(Some(x), out));
        }
        _ => {}
    }
}

/// The op producing slot `s` in `code` (`None`: an argument or capture).
fn producer(code: &RegionCode, s: u32) -> Option<&Instr> {
    code.ops
        .iter()
        .find(|i| s >= i.result && s < i.result.saturating_add(i.n_results))
}

/// `(key, slot)` of the `object` op producing `s`, if it is one.
fn object_fields(code: &RegionCode, s: u32) -> Option<Vec<(String, u32)>> {
    let p = producer(code, s)?;
    let Imm::Keys(keys) = &p.imm else {
        return None;
    };
    Some(
        keys.iter()
            .cloned()
            .zip(code.data(p).iter().copied())
            .collect(),
    )
}

/// The ops (mnemonics, tool names) that carried untrusted data into slot
/// `s` within the frame, the source first; stops at the frame's
/// arguments and after 16 hops.
fn path_to(code: &RegionCode, s: u32, untrusted: &dyn Fn(u32) -> bool) -> Vec<String> {
    let mut path = Vec::new();
    let mut work = vec![s];
    let mut seen = Vec::new();
    while let Some(s) = work.pop() {
        if seen.contains(&s) || path.len() >= 16 {
            continue;
        }
        seen.push(s);
        match producer(code, s) {
            Some(p) => {
                path.push(match &p.imm {
                    Imm::Tool(t) => format!("inv {t}"),
                    _ => p.opcode.mnemonic().to_string(),
                });
                work.extend(code.data(p).iter().copied().filter(|&x| untrusted(x)));
            }
            None => path.push(format!("%arg{s}")),
        }
    }
    path.reverse();
    path
}
