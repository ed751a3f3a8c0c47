//! Static information-flow check (issue 19, `docs/security.md`): every
//! path in a program's dataflow graph from an untrusted source to a sink
//! argument the policy ([`ais_ir::ifc::FlowPolicy`]) denies.
//!
//! It runs on the compiled [`Program`] (the code the VM runs) and follows
//! the run-time rules of `ais_vm::ifc` over-approximately: a value's
//! untrusted sources are those of its operands, of its op (a tool, the
//! tools an LLM op offers, memory written with untrusted data) and of its
//! region's control context (branch conditions, loop items, the callers'
//! contexts); calls pass labels to parameters and back from returns. A
//! fixpoint over the whole program; each source keeps the first path
//! that reached a value (hops: spans with what happened there).

use ais_ir::bytecode::{FlowCode, Imm, Instr, Program, RegionCode};
use ais_ir::ifc::{sink_of, FlowPolicy, QUARANTINE};
use ais_ir::{Diagnostic, Effect, Opcode, RegionSpec, Span};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The code of the flow warning.
pub const CODE: &str = "W0020";

/// Longest path kept per source (the source end is kept).
const MAX_HOPS: usize = 12;

/// One step of a path: where, and what happened there.
#[derive(Clone, Debug, PartialEq)]
pub struct Hop {
    pub span: Span,
    pub what: String,
}

/// A flow the policy denies.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub flow: String,
    pub sink: String,
    pub argument: String,
    /// The untrusted sources reaching the argument, each with its path.
    pub sources: BTreeMap<String, Vec<Hop>>,
    /// The sink op.
    pub span: Span,
}

impl Finding {
    /// A warning with a label on each hop of the first source's path.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let names: Vec<&str> = self.sources.keys().map(String::as_str).collect();
        let mut d = Diagnostic::warning(
            CODE,
            format!(
                "untrusted data from {} reaches argument `{}` of sink `{}`",
                names.join(", "),
                self.argument,
                self.sink
            ),
            self.span,
        )
        .with_label(format!("`{}` is denied untrusted data here", self.sink));
        if let Some(path) = self.sources.values().next() {
            for (i, h) in path.iter().enumerate() {
                if h.span != self.span {
                    d = d.with_secondary(h.span, format!("{}. {}", i + 1, h.what));
                }
            }
        }
        d.with_help(format!(
            "validate the value first, say which values it accepts ([policy.sinks.{0}.args.{1}] from = [\"@args\", \"A_TRUSTED_TOOL\"]), or allow it: [policy.sinks.{0}] allow_untrusted = [\"{1}\"]",
            self.sink, self.argument
        ))
    }
}

/// A hop while the analysis runs: most texts are fixed (an op's mnemonic,
/// "memory read"), and one is made for every op on every sweep, so they
/// are not copied into a `String` until a finding reports them.
#[derive(Clone, Debug)]
struct Step {
    span: Span,
    what: Cow<'static, str>,
}

/// A path: its newest hop and the path before it, shared by every label
/// that extends it. Labels used to copy each path (hop texts and all) into
/// every value it reached: most of `aisc check`'s memory on programs with
/// tools (issue 40).
#[derive(Debug)]
struct PathNode {
    hop: Step,
    /// Hops in the path, this one included (at most [`MAX_HOPS`]).
    len: usize,
    prev: Option<Path>,
}

type Path = Rc<PathNode>;

impl PathNode {
    fn start(hop: Step) -> Path {
        Rc::new(PathNode {
            hop,
            len: 1,
            prev: None,
        })
    }

    /// The path extended by `hop` (itself when full, or when it already
    /// ends there).
    fn extend(path: &Path, hop: Option<&Step>) -> Path {
        match hop {
            Some(h) if path.len < MAX_HOPS && path.hop.span != h.span => Rc::new(PathNode {
                hop: h.clone(),
                len: path.len + 1,
                prev: Some(path.clone()),
            }),
            _ => path.clone(),
        }
    }

    /// The hops, source first.
    fn hops(path: &Path) -> Vec<Hop> {
        let mut out = Vec::with_capacity(path.len);
        let mut at = Some(path);
        while let Some(n) = at {
            out.push(Hop {
                span: n.hop.span,
                what: n.hop.what.to_string(),
            });
            at = n.prev.as_ref();
        }
        out.reverse();
        out
    }
}

/// Untrusted sources by name (sorted, as a map would be), each with the
/// first path that reached it. A sorted vector: values carry a few sources
/// at most, and a map's node cost more than the entries. Shared, copied on
/// write: most values carry their operands' label unchanged, and every op
/// reads its inputs' labels on every sweep (a copy each was most of
/// `aisc check`'s allocations on programs with tools; issue 40). `None`
/// is the empty label, without an allocation.
#[derive(Clone, Debug, Default)]
struct Lab(Option<Rc<Vec<Source>>>);

/// A source's name and the first path from it.
type Source = (Rc<str>, Path);

impl Lab {
    fn new() -> Lab {
        Lab(None)
    }

    fn entries(&self) -> &[Source] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries().iter().map(|(k, _)| &**k)
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries().binary_search_by(|(k, _)| (**k).cmp(key))
    }

    fn insert(&mut self, at: usize, entry: Source) {
        Rc::make_mut(self.0.get_or_insert_with(Default::default)).insert(at, entry);
    }

    /// The sources with their paths, for a finding.
    fn sources(&self) -> BTreeMap<String, Vec<Hop>> {
        self.entries()
            .iter()
            .map(|(k, p)| (k.to_string(), PathNode::hops(p)))
            .collect()
    }
}

/// Adds `src`'s sources to `dst` (paths extended by `hop`); true if new.
fn merge(dst: &mut Lab, src: &Lab, hop: Option<&Step>) -> bool {
    let entries = src.entries();
    if entries.is_empty() {
        return false;
    }
    if hop.is_none() && dst.is_empty() {
        // What the loop below would build: the same entries, shared.
        *dst = src.clone();
        return true;
    }
    if let (Some(d), Some(s)) = (&dst.0, &src.0) {
        if Rc::ptr_eq(d, s) {
            return false;
        }
    }
    let mut changed = false;
    for (k, path) in entries {
        if let Err(at) = dst.find(k) {
            dst.insert(at, (k.clone(), PathNode::extend(path, hop)));
            changed = true;
        }
    }
    changed
}

struct State<'p> {
    program: &'p Program,
    policy: &'p FlowPolicy,
    /// [flow][region][slot]
    slots: Vec<Vec<Vec<Lab>>>,
    pc: Vec<Vec<Lab>>,
    ylab: Vec<Vec<Lab>>,
    /// stm, ltm, episodic, beliefs, and the workspace (what tools the
    /// catalogue declares as writing it wrote: `WORKSPACE`).
    mem: [Lab; 5],
    /// Everything the host logs to the episodic log (tool, memory, belief
    /// and message ops' inputs and results), which the agent's trace
    /// returns: an episodic read carries it (as in `ais_vm::ifc`).
    seen_by_host: Lab,
    findings: Vec<Finding>,
}

/// The workspace's index in `State::mem` (as in `ais_vm::ifc`).
const WORKSPACE: usize = 4;

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

fn hop(instr: &Instr, what: impl Into<Cow<'static, str>>) -> Step {
    Step {
        span: instr.span,
        what: what.into(),
    }
}

/// Labels the caller knows for a program's entry flow, instead of the
/// whole-program assumption that its arguments are `@args`: what an inner
/// plan's inputs carry at run time when the plan is about to start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EntryLabels {
    /// Source names per entry parameter, in order (missing: none).
    pub params: Vec<Vec<String>>,
    /// Source names of the entry flow's control context: every value it
    /// computes depends on them (a plan's code was written from its
    /// inputs).
    pub context: Vec<String>,
    /// What the hops these sources start with say (`the plan's inputs`).
    pub origin: String,
}

/// Every denied flow of `program` under `policy`.
pub fn check(program: &Program, policy: &FlowPolicy) -> Vec<Finding> {
    analyse(program, policy, None)
}

/// Every denied flow of `program` under `policy`, its entry flow (the
/// program's `entry`, [`Program::find_entry`]) starting with `entry`'s
/// labels; only the untrusted ones among them count. Other flows and
/// message handlers are seeded as in [`check`].
pub fn check_with_entry(
    program: &Program,
    policy: &FlowPolicy,
    entry: &EntryLabels,
) -> Vec<Finding> {
    analyse(program, policy, Some(entry))
}

fn analyse(program: &Program, policy: &FlowPolicy, entry: Option<&EntryLabels>) -> Vec<Finding> {
    if policy.mode == ais_ir::ifc::Mode::Off {
        return Vec::new();
    }
    let mut st = State {
        program,
        policy,
        slots: program
            .flows
            .iter()
            .map(|f| {
                f.regions
                    .iter()
                    .map(|r| vec![Lab::new(); r.n_slots()])
                    .collect()
            })
            .collect(),
        pc: program
            .flows
            .iter()
            .map(|f| vec![Lab::new(); f.regions.len()])
            .collect(),
        ylab: program
            .flows
            .iter()
            .map(|f| vec![Lab::new(); f.regions.len()])
            .collect(),
        mem: Default::default(),
        seen_by_host: Lab::new(),
        findings: Vec::new(),
    };
    st.seed(entry);
    // Monotone over finite sets: converges; the bound is a safety net.
    for _ in 0..64 {
        if !st.pass(false) {
            break;
        }
    }
    st.pass(true);
    st.findings
}

impl State<'_> {
    fn source(&self, name: &str, h: Step) -> Lab {
        if self.policy.trusted(name) {
            return Lab::new();
        }
        Lab(Some(Rc::new(vec![(Rc::from(name), PathNode::start(h))])))
    }

    /// Entry arguments and messages (handler parameters); `entry`: the
    /// entry flow's known labels instead of `@args`.
    fn seed(&mut self, entry: Option<&EntryLabels>) {
        let given = entry.and_then(|e| Some((self.program.find_entry(None).ok()? as usize, e)));
        if let Some((fi, e)) = given {
            let f = &self.program.flows[fi];
            let h = |name: &str| Step {
                span: f.span,
                what: format!("{} carry data from `{name}`", e.origin).into(),
            };
            for (p, names) in e.params.iter().enumerate().take(f.params.len()) {
                for n in names {
                    let l = self.source(n, h(n));
                    merge(&mut self.slots[fi][0][p], &l, None);
                }
            }
            for n in &e.context {
                let l = self.source(n, h(n));
                merge(&mut self.pc[fi][0], &l, None);
            }
        }
        for (fi, f) in self.program.flows.iter().enumerate() {
            if f.entry && given.is_none_or(|(g, _)| g != fi) {
                let h = Step {
                    span: f.span,
                    what: "entry argument".into(),
                };
                let l = self.source("@args", h);
                for p in 0..f.params.len() {
                    merge(&mut self.slots[fi][0][p], &l, None);
                }
            }
        }
        // A message sent inside a `try` body is delivered when the body
        // commits, without its labels: its handlers read `@message`. Other
        // messages carry what was sent ([`State::message_sent`]).
        let buffered = self.program.flows.iter().any(|f| {
            f.regions.iter().any(|r| {
                r.ops
                    .iter()
                    .any(|i| i.opcode.info().regions == RegionSpec::TryCatch)
            })
        });
        if !buffered {
            return;
        }
        for a in &self.program.agents {
            for h in &a.handlers {
                let Some(f) = self.program.flows.get(h.flow as usize) else {
                    continue;
                };
                let hp = Step {
                    span: f.span,
                    what: format!("a message from another agent (`on {}`)", h.event).into(),
                };
                let l = self.source("@message", hp);
                for p in 0..f.params.len() {
                    merge(&mut self.slots[h.flow as usize][0][p], &l, None);
                }
            }
        }
    }

    /// A message between agents of the program: every handler's
    /// parameters carry what any `communicate` sent (over-approximated:
    /// any message may reach any handler).
    fn message_sent(&mut self, input: &Lab, at: &Step) -> bool {
        let mut changed = false;
        for a in &self.program.agents {
            for h in &a.handlers {
                let Some(f) = self.program.flows.get(h.flow as usize) else {
                    continue;
                };
                for p in 0..f.params.len() as u32 {
                    changed |= self.set(h.flow as usize, 0, p, input, Some(at));
                }
            }
        }
        changed
    }

    fn lab(&self, f: usize, r: usize, s: u32) -> Lab {
        self.slots[f][r]
            .get(s as usize)
            .cloned()
            .unwrap_or_default()
    }

    fn set(&mut self, f: usize, r: usize, s: u32, l: &Lab, h: Option<&Step>) -> bool {
        match self.slots[f][r].get_mut(s as usize) {
            Some(d) => merge(d, l, h),
            None => false,
        }
    }

    /// One sweep over every op; true if any label grew.
    fn pass(&mut self, report: bool) -> bool {
        let mut changed = false;
        let program = self.program;
        for (fi, flow) in program.flows.iter().enumerate() {
            for (ri, region) in flow.regions.iter().enumerate() {
                for (oi, instr) in region.ops.iter().enumerate() {
                    changed |= self.op(fi, flow, ri, region, oi, instr, report);
                }
            }
        }
        changed
    }

    /// How tool `name` uses the workspace, as the catalogue declares it.
    fn workspace_use(&self, name: &str) -> ais_ir::catalogue::WorkspaceUse {
        self.policy
            .catalogue
            .get(name)
            .map_or(ais_ir::catalogue::WorkspaceUse::None, |d| d.workspace)
    }

    /// The untrusted sources an op adds itself.
    fn op_source(&self, instr: &Instr) -> Lab {
        match (instr.opcode, &instr.imm) {
            (Opcode::Inv, Imm::Tool(t)) => {
                let mut l = self.source(t, hop(instr, format!("`{t}` returns data")));
                if self.workspace_use(t).reads() {
                    let h = hop(instr, format!("`{t}` reads the workspace"));
                    merge(&mut l, &self.mem[WORKSPACE], Some(&h));
                }
                l
            }
            (Opcode::Exec, _) => {
                let mut l = self.source("@bash", hop(instr, "`exec` output"));
                let h = hop(instr, "`exec` reads the workspace");
                merge(&mut l, &self.mem[WORKSPACE], Some(&h));
                l
            }
            (Opcode::Qmem | Opcode::BeliefGet, _) => {
                let i = tier_index(instr);
                let name = ["@memory.stm", "@memory.ltm", "@memory.episodic", "@belief"][i];
                let mut l = self.source(name, hop(instr, "memory read"));
                merge(
                    &mut l,
                    &self.mem[i],
                    Some(&hop(instr, "read back from memory")),
                );
                if i == 2 {
                    merge(
                        &mut l,
                        &self.seen_by_host,
                        Some(&hop(instr, "read back from the agent's trace")),
                    );
                }
                l
            }
            (Opcode::Pause, _) => self.source("@input", hop(instr, "a person's answer")),
            (op, imm) if op.info().llm.is_some() => {
                let own = if op == Opcode::Solve { "@plan" } else { "@llm" };
                let mut l = self.source(own, hop(instr, "model output"));
                if let Imm::Llm(a) = imm {
                    for t in &a.tools {
                        let h = hop(instr, format!("the model reads `{}` replies", t.name));
                        merge(&mut l, &self.source(&t.name, h), None);
                        if self.workspace_use(&t.name).reads() {
                            let h = hop(instr, format!("`{}` reads the workspace", t.name));
                            merge(&mut l, &self.mem[WORKSPACE], Some(&h));
                        }
                    }
                }
                l
            }
            _ => Lab::new(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn op(
        &mut self,
        fi: usize,
        flow: &FlowCode,
        ri: usize,
        region: &RegionCode,
        oi: usize,
        instr: &Instr,
        report: bool,
    ) -> bool {
        let _ = oi;
        let data = region.data(instr);
        let pc = self.pc[fi][ri].clone();
        let mut input = pc.clone();
        for &s in data {
            merge(&mut input, &self.lab(fi, ri, s), None);
        }
        let here = hop(instr, self.hop_text(instr));
        let mut changed = false;
        if report {
            self.check_sink(flow, fi, ri, region, instr, &pc, &input);
        }
        match instr.opcode.info().exec {
            ais_ir::ExecClass::Pure
            | ais_ir::ExecClass::Inline
            | ais_ir::ExecClass::Llm
            | ais_ir::ExecClass::Tool => {
                if instr.opcode == Opcode::Communicate && !input.is_empty() {
                    let h = hop(instr, "sent to another agent of the program");
                    changed |= self.message_sent(&input, &h);
                }
                let out = if self.quarantined(instr) {
                    // The attacker chose among the values the schema admits.
                    let mut out = pc;
                    let h = hop(instr, "a value a quarantined call chose");
                    merge(&mut out, &self.source(QUARANTINE, h), None);
                    out
                } else {
                    let mut out = input.clone();
                    merge(&mut out, &self.op_source(instr), None);
                    out
                };
                if matches!(instr.opcode, Opcode::Umem | Opcode::BeliefSet) {
                    changed |= merge(&mut self.mem[tier_index(instr)], &input, Some(&here));
                }
                let writes_workspace = match (instr.opcode, &instr.imm) {
                    (Opcode::Inv, Imm::Tool(t)) => self.workspace_use(t).writes(),
                    (Opcode::Exec, _) => true,
                    // A model may call an offered tool that writes it,
                    // with anything the exchange read.
                    (_, Imm::Llm(a)) => {
                        a.tools.iter().any(|t| self.workspace_use(&t.name).writes())
                    }
                    _ => false,
                };
                if writes_workspace {
                    let written = if matches!(instr.imm, Imm::Llm(_)) {
                        &out
                    } else {
                        &input
                    };
                    changed |= merge(&mut self.mem[WORKSPACE], written, Some(&here));
                }
                if matches!(
                    instr.opcode.effect(),
                    Effect::Tool | Effect::MemRead | Effect::MemWrite | Effect::Io
                ) {
                    let mut logged = input.clone();
                    merge(&mut logged, &out, None);
                    changed |= merge(&mut self.seen_by_host, &logged, Some(&here));
                }
                for i in 0..instr.n_results {
                    changed |= self.set(fi, ri, instr.result + i, &out, Some(&here));
                }
            }
            ais_ir::ExecClass::Terminator => {
                changed |= merge(&mut self.ylab[fi][ri], &input, Some(&here));
            }
            ais_ir::ExecClass::Call => {
                if let Imm::Callee(c) = instr.imm {
                    let c = c as usize;
                    if c < self.slots.len() {
                        let h = hop(
                            instr,
                            format!("passed to @{}", self.program.flow_name(c as u32)),
                        );
                        for (i, &s) in data.iter().enumerate() {
                            let l = self.lab(fi, ri, s);
                            changed |= self.set(c, 0, i as u32, &l, Some(&h));
                        }
                        changed |= merge(&mut self.pc[c][0], &pc, None);
                        let mut back = self.ylab[c][0].clone();
                        merge(&mut back, &self.pc[c][0], None);
                        let h = hop(instr, "returned");
                        for i in 0..instr.n_results {
                            changed |= self.set(fi, ri, instr.result + i, &back, Some(&h));
                        }
                    }
                }
            }
            ais_ir::ExecClass::Control => {
                changed |= self.control(fi, flow, ri, region, instr, &pc);
            }
        }
        changed
    }

    /// What a hop through `instr` says: its mnemonic, and for an LLM op
    /// with a `schema:` under `[policy.quarantine] schemas`, why it is not
    /// quarantined (the hint a user needs to make it so).
    fn hop_text(&self, instr: &Instr) -> Cow<'static, str> {
        let m = instr.opcode.mnemonic();
        match &instr.imm {
            Imm::Llm(a) if self.policy.quarantine.schemas && a.schema.is_some() => {
                let why = if a.tools.is_empty() {
                    self.policy.quarantine.schema_problem(a.schema.as_deref())
                } else {
                    Some("it offers tools".into())
                };
                match why {
                    Some(w) => format!("{m} (not quarantined: {w})").into(),
                    None => m.into(),
                }
            }
            _ => m.into(),
        }
    }

    fn quarantined(&self, instr: &Instr) -> bool {
        self.policy.quarantine.releases(self.program, instr)
    }

    fn control(
        &mut self,
        fi: usize,
        flow: &FlowCode,
        ri: usize,
        region: &RegionCode,
        instr: &Instr,
        pc: &Lab,
    ) -> bool {
        let data = region.data(instr);
        let mut changed = false;
        let spec = instr.opcode.info().regions;
        let cond = data
            .first()
            .map(|&s| self.lab(fi, ri, s))
            .unwrap_or_default();
        let what = match spec {
            RegionSpec::Loop => "loop over it (values inside depend on it)",
            _ => "branch on it (values inside depend on it)",
        };
        let h = hop(instr, what);
        for &cr in &instr.regions {
            let cr = cr as usize;
            let Some(child) = flow.regions.get(cr) else {
                continue;
            };
            changed |= merge(&mut self.pc[fi][cr], pc, None);
            if !matches!(spec, RegionSpec::TryCatch) {
                changed |= merge(&mut self.pc[fi][cr], &cond, Some(&h));
            }
            for (k, &ps) in child.captures.iter().enumerate() {
                let l = self.lab(fi, ri, ps);
                changed |= self.set(fi, cr, child.n_args + k as u32, &l, None);
            }
            if matches!(spec, RegionSpec::Loop) {
                changed |= self.set(fi, cr, 0, &cond, Some(&h));
                changed |= self.set(fi, cr, 1, &cond, None);
                let carried = self.ylab[fi][cr].clone();
                for (k, &s) in data.iter().enumerate().skip(1) {
                    let l = self.lab(fi, ri, s);
                    changed |= self.set(fi, cr, 1 + k as u32, &l, None);
                    changed |= self.set(fi, cr, 1 + k as u32, &carried, None);
                }
            }
            let mut out = self.ylab[fi][cr].clone();
            merge(&mut out, &self.pc[fi][cr], None);
            if matches!(spec, RegionSpec::Loop) {
                for &s in data {
                    let l = self.lab(fi, ri, s);
                    merge(&mut out, &l, None);
                }
            }
            for i in 0..instr.n_results {
                changed |= self.set(fi, ri, instr.result + i, &out, None);
            }
        }
        changed
    }

    #[allow(clippy::too_many_arguments)]
    fn check_sink(
        &mut self,
        flow: &FlowCode,
        fi: usize,
        ri: usize,
        region: &RegionCode,
        instr: &Instr,
        pc: &Lab,
        input: &Lab,
    ) {
        let finding = |sink: &str, argument: &str, sources: Lab| Finding {
            flow: flow.name.clone(),
            sink: sink.to_string(),
            argument: argument.to_string(),
            sources: sources.sources(),
            span: instr.span,
        };
        // A model's own tool calls: the exchange reads its inputs and every
        // offered tool's replies.
        if let Imm::Llm(a) = &instr.imm {
            let mut ex = input.clone();
            merge(&mut ex, &self.op_source(instr), None);
            if ex.is_empty() {
                return;
            }
            for t in &a.tools {
                let args = param_names(&t.parameters);
                if let Some(arg) = args.iter().find(|x| self.denies(&t.name, x, &ex)) {
                    self.findings.push(finding(&t.name, arg, ex.clone()));
                }
            }
            return;
        }
        let (tool, tier) = match &instr.imm {
            Imm::Tool(t) => (Some(t.as_str()), None),
            Imm::Tier(t) => (None, Some(t.name())),
            _ => (None, None),
        };
        let Some(sink) = sink_of(instr.opcode, tool, tier) else {
            return;
        };
        if !self.policy.is_sink(&sink.name) {
            return;
        }
        for (i, &s) in region.data(instr).iter().enumerate() {
            let fields = if sink.fields {
                object_fields(region, s)
            } else {
                None
            };
            let args: Vec<(String, u32)> =
                fields.unwrap_or_else(|| vec![(sink.operand_name(i).to_string(), s)]);
            for (arg, slot) in args {
                let mut l = pc.clone();
                merge(&mut l, &self.lab(fi, ri, slot), None);
                if self.denies(&sink.name, &arg, &l) {
                    self.findings.push(finding(&sink.name, &arg, l));
                }
            }
        }
    }
}

impl State<'_> {
    /// Does the policy deny data labelled `l` at argument `arg` of `sink`?
    /// An argument judged by its value's provenance (`from`, `values`) is
    /// left to the run time, which sees the value; a quarantined choice
    /// only where the argument accepts it.
    fn denies(&self, sink: &str, arg: &str, l: &Lab) -> bool {
        if l.is_empty() || !self.policy.arg_checked(sink, arg) {
            return false;
        }
        if self.policy.judged_by_value(sink, arg) {
            return false;
        }
        if self.policy.accepts_quarantined(sink, arg) {
            return l.keys().any(|k| k != QUARANTINE);
        }
        true
    }
}

/// The property names of a JSON Schema given as text (`args` if none).
fn param_names(schema: &str) -> Vec<String> {
    let names: Vec<String> = serde_json::from_str::<serde_json::Value>(schema)
        .ok()
        .and_then(|v| {
            v.get("properties")
                .and_then(|p| p.as_object())
                .map(|o| o.keys().cloned().collect())
        })
        .unwrap_or_default();
    if names.is_empty() {
        vec!["args".into()]
    } else {
        names
    }
}

/// `(key, slot)` of the `object` op producing `s` in `code`, if it is one.
fn object_fields(code: &RegionCode, s: u32) -> Option<Vec<(String, u32)>> {
    let p = code
        .ops
        .iter()
        .find(|i| s >= i.result && s < i.result.saturating_add(i.n_results))?;
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

/// The flow warnings of a source file under `policy` (none if it does not
/// compile: the other diagnostics say why).
pub fn check_source(
    source: &str,
    env: &crate::sema::Environment,
    policy: &FlowPolicy,
) -> Vec<Diagnostic> {
    let Ok(c) = crate::driver::compile_source_in(source, env) else {
        return Vec::new();
    };
    match ais_ir::bytecode::compile(&c.module) {
        Ok(p) => check(&p, policy)
            .iter()
            .map(Finding::to_diagnostic)
            .collect(),
        Err(_) => Vec::new(),
    }
}
