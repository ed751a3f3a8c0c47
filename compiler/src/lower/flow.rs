//! Lowering one flow body to SSA with structured regions.
//!
//! Variables map to SSA values in a scope stack. Everything that a region
//! can change and its surroundings must see afterwards is a *slot*: a
//! variable of an enclosing scope, an effect chain's token, or the pending
//! early-return state. `if`/`switch`/`try` lower each branch from the same
//! starting state, then yield the slots any branch changed; `loop` carries
//! the slots its body may change (found by scanning the body first).
//!
//! Early `return` inside a region sets a return flag and value (both slots);
//! the statements after a statement that may have returned run under
//! `if (!flag)`, and the flow ends with `return value`.

use super::effects::{tool_access, Chain, Providers, Scan, Scanner, Summaries, ToolAccess};
use super::ty_to_ir;
use crate::sema::builtins::{self, BuiltinKind};
use crate::sema::index::AgentInfo;
use crate::sema::reply::ReplyArg;
use crate::sema::{resolve_tier, ProgramIndex, Ty};
use crate::syntax::ast::*;
use crate::syntax::lexer::{StrLit, StrPart};
use ais_ir::{Attr, AttrName, Attrs, FlowData, Op, Opcode, Region, Span, Type, Value};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::rc::Rc;

pub(super) struct Ctx<'a> {
    pub index: &'a ProgramIndex,
    pub agent: &'a AgentInfo,
    pub summaries: &'a Summaries,
    pub providers: &'a Providers,
}

#[derive(Clone, Debug)]
struct Binding {
    /// Shared with the `by_name` key: one allocation per distinct name.
    name: Rc<str>,
    value: Value,
    ty: Type,
}

/// Tokens of one chain: the last write and the reads since it. A read
/// waits for the write; a write waits for the write and all reads.
///
/// The reads are a shared list (newest first), so the copy of the chains
/// each branch starts from costs O(1) per chain, however many reads a long
/// flow has made since the last write.
#[derive(Clone, Debug, Default)]
struct ChainState {
    write: Option<Value>,
    reads: Option<Rc<ReadNode>>,
    n_reads: usize,
}

#[derive(Debug)]
struct ReadNode {
    token: Value,
    next: Option<Rc<ReadNode>>,
}

impl Drop for ReadNode {
    // Unlinks iteratively: the default drop recurses once per read.
    fn drop(&mut self) {
        let mut next = self.next.take();
        while let Some(node) = next {
            match Rc::try_unwrap(node) {
                Ok(mut n) => next = n.next.take(),
                Err(_) => break,
            }
        }
    }
}

impl PartialEq for ChainState {
    // Reads are only ever added, so the same newest node and count mean the
    // same list.
    fn eq(&self, other: &ChainState) -> bool {
        self.write == other.write
            && self.n_reads == other.n_reads
            && match (&self.reads, &other.reads) {
                (Some(a), Some(b)) => Rc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

impl ChainState {
    fn written(token: Value) -> ChainState {
        ChainState {
            write: Some(token),
            reads: None,
            n_reads: 0,
        }
    }

    fn push_read(&mut self, token: Value) {
        let next = self.reads.take();
        self.reads = Some(Rc::new(ReadNode { token, next }));
        self.n_reads += 1;
    }

    /// The write, then the reads in program order.
    fn tokens(&self) -> Vec<Value> {
        let mut out = Vec::with_capacity(self.n_reads + 1);
        let mut node = self.reads.as_deref();
        while let Some(n) = node {
            out.push(n.token);
            node = n.next.as_deref();
        }
        out.extend(self.write);
        out.reverse();
        out
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    /// Variable `idx` of scope `scope` (scopes existing when the region began).
    Var(usize, usize),
    Chain(Chain),
    RetFlag,
    RetVal,
}

struct State {
    scopes: Vec<Vec<Binding>>,
    /// Name → (scope, index) of its visible bindings, innermost last (a scan
    /// of the scopes per name made long flows quadratic).
    by_name: HashMap<Rc<str>, SmallVec<[(usize, usize); 1]>>,
    chains: BTreeMap<Chain, ChainState>,
    ret_flag: Option<Value>,
    ret_val: Option<Value>,
    /// While a region is being lowered: `(scope, index, previous value)` of
    /// every variable assignment, so the region's end can undo them. Copying
    /// every binding per branch made long flows with branches quadratic.
    undo: Vec<(usize, usize, Value)>,
    /// Regions being lowered (assignments are logged only inside one).
    open_regions: usize,
}

/// The part of [`State`] a branch starts from by copy: small (one entry per
/// chain), unlike the bindings.
#[derive(Clone)]
struct Snapshot {
    chains: BTreeMap<Chain, ChainState>,
    ret_flag: Option<Value>,
    ret_val: Option<Value>,
}

/// A branch's end: its region, value, copied state and the end values of
/// the outer variables it assigned.
type BranchEnd = (Region, Option<Value>, Snapshot, Vec<(usize, usize, Value)>);

pub(super) struct FlowLowerer<'a> {
    ctx: Ctx<'a>,
    pub flow: FlowData,
    region: Region,
    st: State,
    /// The `const false` the return flag starts as (so "may have returned"
    /// is `ret_flag != initial`).
    ret_initial: Option<Value>,
    span: Span,
}

impl<'a> FlowLowerer<'a> {
    pub fn new(ctx: Ctx<'a>, name: &str, result: Type, span: Span) -> FlowLowerer<'a> {
        let mut flow = FlowData::new(name, result);
        flow.span = span;
        let region = flow.body;
        FlowLowerer {
            ctx,
            flow,
            region,
            st: State {
                scopes: vec![Vec::new()],
                by_name: HashMap::default(),
                chains: BTreeMap::new(),
                ret_flag: None,
                ret_val: None,
                undo: Vec::new(),
                open_regions: 0,
            },
            ret_initial: None,
            span,
        }
    }

    pub fn param(&mut self, name: &str, ty: Type) {
        let v = self.flow.add_param(name, ty.clone());
        self.bind(name, v, ty);
    }

    /// Lowers a flow (or handler) body and terminates it with `return`.
    pub fn body(mut self, body: &Block) -> FlowData {
        if nested_return(body) {
            let f = self.const_attr(Attr::Bool(false), Type::Bool);
            self.ret_initial = Some(f);
            self.st.ret_flag = Some(f);
            if self.flow.result.is_data() {
                let placeholder = self.null_of(&self.flow.result.clone());
                self.st.ret_val = Some(placeholder);
            }
        }
        self.reserve(body.stmts.len());
        let done = self.stmts(&body.stmts, true);
        if !done {
            self.span = Span::new(
                body.span.end.saturating_sub(1) as usize,
                body.span.end as usize,
            );
            let value = if self.flow.result.is_data() {
                self.st.ret_val
            } else {
                None
            };
            self.ins(
                Opcode::Return,
                &value.into_iter().collect::<Vec<_>>(),
                vec![],
                &[],
            );
        }
        // Built: the arenas' spare room would stay allocated to the end.
        self.flow.dfg.shrink_to_fit();
        self.flow
    }

    /// Sizes the arenas, the body's op list and the name index for a body
    /// of `stmts` top-level statements, so a long flow allocates each once
    /// instead of doubling them (each doubling a copy, and a free that
    /// made glibc consolidate its free lists: issue 40). Two ops and
    /// values per statement is what a `let` of a binary expression
    /// lowers to; nested blocks and long expressions grow past it as
    /// before, and [`ais_ir::Dfg::shrink_to_fit`] returns what is unused.
    fn reserve(&mut self, stmts: usize) {
        let ops = stmts.saturating_mul(2);
        self.flow.dfg.reserve(ops, ops);
        if let Some(region) = self.flow.dfg.regions.get_mut(self.region) {
            region.ops.reserve(ops);
        }
        self.st.by_name.reserve(stmts);
        if let Some(scope) = self.st.scopes.last_mut() {
            scope.reserve(stmts);
        }
    }

    // ------------------------------------------------------------ op creation

    fn ins(
        &mut self,
        opcode: Opcode,
        operands: &[Value],
        attrs: Vec<(AttrName, Attr)>,
        results: &[Type],
    ) -> Op {
        ais_ir::work::add(1 + operands.len());
        let dfg = &mut self.flow.dfg;
        let op = dfg.create_op(opcode, operands, results);
        dfg.ops[op].attrs = Attrs(attrs);
        dfg.append_op(self.region, op);
        if !self.span.is_dummy() {
            dfg.set_span(op, self.span);
        }
        op
    }

    fn ins1(
        &mut self,
        opcode: Opcode,
        operands: &[Value],
        attrs: Vec<(AttrName, Attr)>,
        ty: Type,
    ) -> Value {
        let op = self.ins(opcode, operands, attrs, &[ty]);
        self.flow.dfg.ops[op].results[0]
    }

    fn result(&self, op: Op, i: usize) -> Value {
        self.flow.dfg.ops[op].results[i]
    }

    fn ty(&self, v: Value) -> Type {
        self.flow.dfg.value_type(v).clone()
    }

    fn const_attr(&mut self, a: Attr, ty: Type) -> Value {
        self.ins1(Opcode::Const, &[], vec![("value".into(), a)], ty)
    }

    fn const_str(&mut self, s: &str) -> Value {
        self.const_attr(Attr::Str(s.to_string()), Type::Str)
    }

    /// `null` at type `ty` (a `cast` keeps the verifier's types exact).
    fn null_of(&mut self, ty: &Type) -> Value {
        let n = self.const_attr(Attr::Json(serde_json::Value::Null), Type::Null);
        if *ty == Type::Null || *ty == Type::Json {
            n
        } else {
            self.ins1(Opcode::Cast, &[n], vec![], ty.clone())
        }
    }

    /// Converts `v` for use where `target` is expected.
    fn coerce(&mut self, v: Value, target: &Type) -> Value {
        let src = self.ty(v);
        if src == *target || target.accepts(&src) {
            return v;
        }
        match target {
            Type::Str if matches!(src, Type::Number | Type::Bool) => {
                self.ins1(Opcode::ToStr, &[v], vec![], Type::Str)
            }
            Type::Bool if !src.is_dynamic() && src != Type::Null => {
                self.ins1(Opcode::ToBool, &[v], vec![], Type::Bool)
            }
            _ => self.ins1(Opcode::Cast, &[v], vec![], target.clone()),
        }
    }

    fn truthy(&mut self, v: Value) -> Value {
        if self.ty(v) == Type::Bool {
            v
        } else {
            self.ins1(Opcode::ToBool, &[v], vec![], Type::Bool)
        }
    }

    fn number(&mut self, v: Value) -> Value {
        self.coerce(v, &Type::Number)
    }

    // ------------------------------------------------------------ scopes

    fn bind(&mut self, name: &str, value: Value, ty: Type) {
        let depth = self.st.scopes.len().saturating_sub(1);
        if let Some(scope) = self.st.scopes.last_mut() {
            // A key is allocated only for a name not seen before.
            let at = (depth, scope.len());
            let key = match self.st.by_name.get_key_value(name) {
                Some((key, _)) => key.clone(),
                None => Rc::from(name),
            };
            self.st.by_name.entry(key.clone()).or_default().push(at);
            scope.push(Binding {
                name: key,
                value,
                ty,
            });
        }
    }

    /// `expr -> name`. Inside a block of an `if`, `switch`, `loop` or
    /// `try` (any scope but the flow's own), a name bound outside the block
    /// is rebound, as an assignment: its value after the construct is the
    /// taken branch's (the reference language merges branch variables).
    /// Otherwise a new binding, as `let`.
    fn bind_arrow(&mut self, name: &str, v: Value, ty: Type) {
        let inner = self.st.scopes.len().saturating_sub(1);
        match self.lookup(name) {
            Some((s, _)) if inner >= 1 && s < inner => self.assign(name, v),
            _ => self.bind(name, v, ty),
        }
    }

    fn lookup(&self, name: &str) -> Option<(usize, usize)> {
        self.st.by_name.get(name)?.last().copied()
    }

    /// Leaves the innermost scope, forgetting its names.
    fn pop_scope(&mut self) {
        if let Some(scope) = self.st.scopes.pop() {
            for b in &scope {
                if let Some(stack) = self.st.by_name.get_mut(&*b.name) {
                    stack.pop();
                }
            }
        }
    }

    // ------------------------------------------------------------ chains

    fn chain(&mut self, c: Chain) -> &mut ChainState {
        self.st.chains.entry(c).or_default()
    }

    fn chain_write(&self, c: Chain) -> Option<Value> {
        self.st.chains.get(&c).and_then(|s| s.write)
    }

    /// One token standing for everything on the chain so far.
    fn chain_token(&mut self, c: Chain) -> Value {
        let tokens = self.chain(c).tokens();
        match tokens.as_slice() {
            [one] => *one,
            _ => {
                let t = self.ins1(Opcode::Fence, &tokens, vec![], Type::Ord);
                *self.chain(c) = ChainState::written(t);
                t
            }
        }
    }

    fn read_after(&mut self, c: Chain) -> Vec<Value> {
        self.chain_write(c).into_iter().collect()
    }

    fn record_read(&mut self, c: Chain, token: Value) {
        self.chain(c).push_read(token);
    }

    fn write_after(&mut self, chains: &[Chain]) -> Vec<Value> {
        let mut out = Vec::new();
        for c in chains {
            for t in self.chain(*c).tokens() {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        out
    }

    fn record_write(&mut self, chains: &[Chain], token: Value) {
        for c in chains {
            *self.chain(*c) = ChainState::written(token);
        }
    }

    // ------------------------------------------------------------ slots

    fn slot_value(&mut self, slot: Slot) -> Value {
        match slot {
            Slot::Var(s, b) => self.st.scopes[s][b].value,
            Slot::Chain(c) => self.chain_token(c),
            Slot::RetFlag => match self.st.ret_flag {
                Some(v) => v,
                None => self.const_attr(Attr::Bool(false), Type::Bool),
            },
            Slot::RetVal => match self.st.ret_val {
                Some(v) => v,
                None => {
                    let ty = self.flow.result.clone();
                    self.null_of(&ty)
                }
            },
        }
    }

    fn slot_type(&self, slot: Slot) -> Type {
        match slot {
            Slot::Var(s, b) => self.st.scopes[s][b].ty.clone(),
            Slot::Chain(_) => Type::Ord,
            Slot::RetFlag => Type::Bool,
            Slot::RetVal => self.flow.result.clone(),
        }
    }

    fn set_slot(&mut self, slot: Slot, v: Value) {
        match slot {
            Slot::Var(s, b) => self.set_var(s, b, v),
            Slot::Chain(c) => *self.chain(c) = ChainState::written(v),
            Slot::RetFlag => self.st.ret_flag = Some(v),
            Slot::RetVal => self.st.ret_val = Some(v),
        }
    }

    /// Assigns variable `b` of scope `s`, logged while a region is open.
    fn set_var(&mut self, s: usize, b: usize, v: Value) {
        let binding = &mut self.st.scopes[s][b];
        if self.st.open_regions > 0 {
            self.st.undo.push((s, b, binding.value));
        }
        binding.value = v;
    }

    /// Undoes the assignments logged since `mark` to variables of the
    /// `outer` scopes (the others are gone); returns those variables' values
    /// before the undo, one entry per variable.
    fn undo_to(&mut self, mark: usize, outer: usize) -> Vec<(usize, usize, Value)> {
        let mut ends: Vec<(usize, usize, Value)> = Vec::new();
        let mut seen: HashSet<(usize, usize)> = HashSet::default();
        ais_ir::work::add(self.st.undo.len() - mark);
        for &(s, b, _) in &self.st.undo[mark..] {
            if s < outer && seen.insert((s, b)) {
                ends.push((s, b, self.st.scopes[s][b].value));
            }
        }
        let log: Vec<_> = self.st.undo.drain(mark..).collect();
        for (s, b, old) in log.into_iter().rev() {
            if s < outer {
                self.st.scopes[s][b].value = old;
            }
        }
        ends
    }

    fn snapshot(&self) -> Snapshot {
        ais_ir::work::add(1 + self.st.chains.len());
        Snapshot {
            chains: self.st.chains.clone(),
            ret_flag: self.st.ret_flag,
            ret_val: self.st.ret_val,
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.st.chains = s.chains;
        self.st.ret_flag = s.ret_flag;
        self.st.ret_val = s.ret_val;
    }

    /// Slots whose value differs between `before` and now: the assigned
    /// outer variables `vars` (with their end values; now restored), the
    /// chains and the return state.
    fn changed_slots(
        &self,
        before: &Snapshot,
        vars: &[(usize, usize, Value)],
        out: &mut Vec<Slot>,
    ) {
        let mut push = |s: Slot| {
            if !out.contains(&s) {
                out.push(s);
            }
        };
        for &(s, b, end) in vars {
            if self.st.scopes[s][b].value != end {
                push(Slot::Var(s, b));
            }
        }
        let keys: std::collections::BTreeSet<Chain> = before
            .chains
            .keys()
            .chain(self.st.chains.keys())
            .copied()
            .collect();
        for c in keys {
            let was = before.chains.get(&c).cloned().unwrap_or_default();
            let now = self.st.chains.get(&c).cloned().unwrap_or_default();
            if was != now {
                push(Slot::Chain(c));
            }
        }
        if before.ret_flag != self.st.ret_flag {
            push(Slot::RetFlag);
        }
        if before.ret_val != self.st.ret_val {
            push(Slot::RetVal);
        }
    }

    fn may_have_returned(&self) -> bool {
        self.st.ret_flag.is_some() && self.st.ret_flag != self.ret_initial
    }

    // ------------------------------------------------------------ regions

    /// Lowers the branches of a control op from the same starting state, then
    /// yields (branch value if `value_ty`, then every slot any branch changed)
    /// and appends the op. Returns the op and the value result if any.
    fn branches(
        &mut self,
        opcode: Opcode,
        operands: &[Value],
        attrs: Vec<(AttrName, Attr)>,
        labels: &[(&str, Option<String>)],
        value_ty: Option<Type>,
        lower: &mut dyn FnMut(&mut Self, usize, Region) -> Option<Value>,
    ) -> (Op, Option<Value>) {
        let span = self.span;
        let outer = self.region;
        let depth = self.st.scopes.len();
        let before = self.snapshot();
        let mark = self.st.undo.len();
        self.st.open_regions += 1;
        let mut ends: Vec<BranchEnd> = Vec::new();
        let mut changed: Vec<Slot> = Vec::new();
        for (i, (label, key)) in labels.iter().enumerate() {
            let r = self.flow.dfg.create_region(*label, key.clone());
            self.region = r;
            self.restore(before.clone());
            self.st.scopes.push(Vec::new());
            let v = lower(self, i, r);
            self.pop_scope();
            let vars = self.undo_to(mark, depth);
            self.changed_slots(&before, &vars, &mut changed);
            ends.push((r, v, self.snapshot(), vars));
        }
        changed.sort();
        // Yields, at the end of each branch.
        for (r, v, st, vars) in &ends {
            self.region = *r;
            self.restore(st.clone());
            for &(s, b, end) in vars {
                self.set_var(s, b, end);
            }
            self.span = span;
            let mut ys = Vec::new();
            if let Some(t) = &value_ty {
                let y = match v {
                    Some(v) => self.coerce(*v, t),
                    None => self.null_of(t),
                };
                ys.push(y);
            }
            for s in &changed {
                let ty = self.slot_type(*s);
                let v = self.slot_value(*s);
                let v = self.coerce(v, &ty);
                ys.push(v);
            }
            self.ins(Opcode::Yield, &ys, vec![], &[]);
            self.undo_to(mark, depth);
        }
        self.st.open_regions -= 1;
        // The op itself, in the outer region.
        self.region = outer;
        self.restore(before);
        self.span = span;
        let mut types: Vec<Type> = value_ty.iter().cloned().collect();
        types.extend(changed.iter().map(|s| self.slot_type(*s)));
        let op = self.ins(opcode, operands, attrs, &types);
        for (r, _, _, _) in &ends {
            self.flow.dfg.attach_region(op, *r);
        }
        let offset = usize::from(value_ty.is_some());
        for (i, s) in changed.iter().enumerate() {
            let v = self.result(op, offset + i);
            self.set_slot(*s, v);
        }
        let value = value_ty.map(|_| self.result(op, 0));
        (op, value)
    }

    /// Runs `f` only when `cond` holds, carrying changed slots out.
    fn guarded(&mut self, cond: Value, f: &mut dyn FnMut(&mut Self)) {
        self.branches(
            Opcode::If,
            &[cond],
            vec![],
            &[("then", None), ("else", None)],
            None,
            &mut |this, i, _| {
                if i == 0 {
                    f(this);
                }
                None
            },
        );
    }

    // ------------------------------------------------------------ statements

    /// Lowers statements; returns true when a `return` terminated the flow
    /// (only at the top level of the body).
    fn stmts(&mut self, stmts: &[Stmt], top: bool) -> bool {
        for (i, stmt) in stmts.iter().enumerate() {
            // Compare the flag itself, not "may have returned": inside the
            // guard of an earlier statement the flag is already a region
            // result, and a later statement that may return must guard the
            // rest again (guard clauses one after another).
            let flag_before = self.st.ret_flag;
            if let Some(done) = self.stmt(stmt, top) {
                return done;
            }
            let rest = &stmts[i + 1..];
            if self.st.ret_flag != flag_before && self.may_have_returned() && !rest.is_empty() {
                // The rest runs only if nothing returned.
                let flag = self.slot_value(Slot::RetFlag);
                self.span = rest[0].span;
                let go = self.ins1(Opcode::Not, &[flag], vec![], Type::Bool);
                self.guarded(go, &mut |this| {
                    this.stmts(rest, false);
                });
                return false;
            }
        }
        false
    }

    /// `Some(done)` when the statement ends the block: a `return` (`done` is
    /// true when it terminated the flow itself).
    fn stmt(&mut self, stmt: &Stmt, top: bool) -> Option<bool> {
        self.span = stmt.span;
        match &stmt.kind {
            StmtKind::Let { name, ty, value } => {
                let v = self.value(value);
                let (v, t) = match ty {
                    Some(t) => {
                        let t = ty_to_ir(&Ty::from_ast(t));
                        (self.coerce(v, &t), t)
                    }
                    None => (v, self.ty(v)),
                };
                self.bind(&name.name, v, t);
            }
            StmtKind::Bind { value, name } => {
                let v = self.value(value);
                let t = self.ty(v);
                self.bind_arrow(&name.name, v, t);
            }
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => self.expr(e),
                    None => None,
                };
                self.span = stmt.span;
                let result = self.flow.result.clone();
                let v = match (v, result.is_data()) {
                    (Some(v), true) => Some(self.coerce(v, &result)),
                    (None, true) => Some(self.null_of(&result)),
                    (_, false) => None,
                };
                if top && !self.may_have_returned() {
                    self.ins(
                        Opcode::Return,
                        &v.into_iter().collect::<Vec<_>>(),
                        vec![],
                        &[],
                    );
                    return Some(true);
                }
                let t = self.const_attr(Attr::Bool(true), Type::Bool);
                self.st.ret_flag = Some(t);
                if let Some(v) = v {
                    self.st.ret_val = Some(v);
                }
                return Some(false);
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.value(cond);
                let c = self.truthy(c);
                self.span = stmt.span;
                self.branches(
                    Opcode::If,
                    &[c],
                    vec![],
                    &[("then", None), ("else", None)],
                    None,
                    &mut |this, i, _| {
                        match (i, otherwise) {
                            (0, _) => this.block(then),
                            (_, Some(o)) => this.block(o),
                            _ => {}
                        }
                        None
                    },
                );
            }
            StmtKind::Parallel(block) => {
                // Not a scope and not a region: dataflow already runs the
                // independent statements in parallel.
                return match self.stmts(&block.stmts, top) {
                    true => Some(true),
                    false => None,
                };
            }
            StmtKind::Loop { var, iter, body } => self.lower_loop(var, iter, body, stmt.span),
            StmtKind::Try { body, err, handler } => {
                self.branches(
                    Opcode::TryCatch,
                    &[],
                    vec![],
                    &[("try", None), ("catch", None)],
                    None,
                    &mut |this, i, region| {
                        if i == 0 {
                            this.block(body);
                        } else {
                            let e = this.flow.dfg.add_region_arg(region, Type::Json);
                            if let Some(name) = err {
                                this.bind(&name.name, e, Type::Json);
                            }
                            this.block(handler);
                        }
                        None
                    },
                );
            }
            StmtKind::Expr(e) => {
                self.expr(e);
            }
            StmtKind::Error(_) => {}
        }
        None
    }

    /// A nested block in its own scope (inside a region being lowered).
    fn block(&mut self, b: &Block) {
        self.st.scopes.push(Vec::new());
        self.stmts(&b.stmts, false);
        self.pop_scope();
    }

    fn lower_loop(&mut self, var: &Ident, iter: &Expr, body: &Block, span: Span) {
        let list = self.value(iter);
        self.span = span;
        let list = match self.ty(list) {
            // A string is iterated by the loop itself (a JSON array it
            // holds, else its non-empty lines).
            Type::List(_) | Type::Str => list,
            _ => self.ins1(Opcode::Cast, &[list], vec![], Type::list(Type::Json)),
        };
        let item_ty = self.ty(list).element().unwrap_or(Type::Json);
        // What the body may change is carried from one iteration to the next.
        let mut scan = Scan::default();
        Scanner {
            agent: self.ctx.agent,
            index: self.ctx.index,
            providers: self.ctx.providers,
        }
        .block(body, &mut scan);
        let mut carried: Vec<Slot> = Vec::new();
        for name in &scan.assigned {
            if let Some((s, b)) = self.lookup(name) {
                carried.push(Slot::Var(s, b));
            }
        }
        carried.extend(scan.chains.iter().map(|c| Slot::Chain(*c)));
        // Chains touched by the flows the body calls.
        for (agent, flow) in &scan.calls {
            let same_agent = *agent == self.ctx.agent.name;
            if let Some(cs) = self.ctx.summaries.get(&(agent.clone(), flow.clone())) {
                carried.extend(
                    cs.iter()
                        .filter(|c| same_agent || c.shared_across_agents())
                        .map(|c| Slot::Chain(*c)),
                );
            }
        }
        if scan.returns {
            carried.push(Slot::RetFlag);
            if self.flow.result.is_data() {
                carried.push(Slot::RetVal);
            }
        }
        carried.sort();
        carried.dedup();
        let mut operands = vec![list];
        let mut types = Vec::new();
        for s in &carried {
            let t = self.slot_type(*s);
            let v = self.slot_value(*s);
            let v = self.coerce(v, &t);
            operands.push(v);
            types.push(t);
        }
        let outer = self.region;
        let r = self.flow.dfg.create_region("body", None);
        let item = self.flow.dfg.add_region_arg(r, item_ty.clone());
        let _index = self.flow.dfg.add_region_arg(r, Type::Number);
        let mut args = Vec::with_capacity(carried.len());
        for (s, t) in carried.iter().zip(&types) {
            let a = self.flow.dfg.add_region_arg(r, t.clone());
            self.set_slot(*s, a);
            args.push(a);
        }
        self.region = r;
        self.st.scopes.push(Vec::new());
        self.bind(&var.name, item, item_ty);
        if scan.returns {
            // Once the flow has returned, the remaining iterations do nothing.
            let flag = self.slot_value(Slot::RetFlag);
            let go = self.ins1(Opcode::Not, &[flag], vec![], Type::Bool);
            self.guarded(go, &mut |this| this.block(body));
        } else {
            self.stmts(&body.stmts, false);
        }
        self.pop_scope();
        self.span = span;
        let mut ys = Vec::new();
        for ((s, t), a) in carried.iter().zip(&types).zip(&args) {
            // A chain the body only read passes its token through unchanged,
            // so the next iteration's reads do not wait for this one's (reads
            // stay parallel). Later writes still wait for every read: the
            // loop delivers its results only once all iterations are done.
            if let Slot::Chain(c) = s {
                if self.chain_write(*c) == Some(*a) {
                    ys.push(*a);
                    continue;
                }
            }
            let v = self.slot_value(*s);
            ys.push(self.coerce(v, t));
        }
        self.ins(Opcode::Yield, &ys, vec![], &[]);
        self.region = outer;
        let op = self.ins(Opcode::Loop, &operands, vec![], &types);
        self.flow.dfg.attach_region(op, r);
        for (i, s) in carried.iter().enumerate() {
            let v = self.result(op, i);
            self.set_slot(*s, v);
        }
    }

    // ------------------------------------------------------------ expressions

    /// An expression whose value is used.
    fn value(&mut self, e: &Expr) -> Value {
        match self.expr(e) {
            Some(v) => v,
            // Checked programs never use a void value; keep the IR well formed anyway.
            None => self.null_of(&Type::Json),
        }
    }

    fn expr(&mut self, e: &Expr) -> Option<Value> {
        self.span = e.span;
        Some(match &e.kind {
            ExprKind::Str(lit) => self.string(lit),
            ExprKind::Number(n) => self.const_attr(Attr::Number(*n), Type::Number),
            ExprKind::Bool(b) => self.const_attr(Attr::Bool(*b), Type::Bool),
            ExprKind::Null => self.const_attr(Attr::Json(serde_json::Value::Null), Type::Null),
            ExprKind::List(items) => {
                let vs: Vec<Value> = items.iter().map(|i| self.value(i)).collect();
                let elem = list_element_type(&vs.iter().map(|v| self.ty(*v)).collect::<Vec<_>>());
                let vs: Vec<Value> = vs.into_iter().map(|v| self.coerce(v, &elem)).collect();
                self.span = e.span;
                self.ins1(Opcode::List, &vs, vec![], Type::list(elem))
            }
            ExprKind::Var(id) => self.read_var(&id.name),
            ExprKind::Index(x, i) => {
                let xv = self.value(x);
                let iv = self.value(i);
                self.span = e.span;
                let ty = match self.ty(xv) {
                    Type::List(t) => *t,
                    Type::Str => Type::Str,
                    _ => Type::Json,
                };
                self.ins1(Opcode::Index, &[xv, iv], vec![], ty)
            }
            ExprKind::Member(x, field) => {
                let xv = self.value(x);
                self.span = e.span;
                self.ins1(
                    Opcode::Member,
                    &[xv],
                    vec![("field".into(), Attr::Str(field.name.clone()))],
                    Type::Json,
                )
            }
            ExprKind::Call { callee, args } => return self.call(callee, args, e.span),
            ExprKind::Unary(op, x) => {
                let v = self.value(x);
                self.span = e.span;
                match op {
                    UnaryOp::Neg => {
                        let n = self.number(v);
                        self.ins1(Opcode::Neg, &[n], vec![], Type::Number)
                    }
                    UnaryOp::Not => {
                        let b = self.truthy(v);
                        self.ins1(Opcode::Not, &[b], vec![], Type::Bool)
                    }
                }
            }
            // Along the chain, not down it (see `Expr::binary_chain`).
            ExprKind::Binary(..) => {
                let (first, steps) = e.binary_chain();
                let mut av = self.value(first);
                for (op, b, node) in steps {
                    av = self.binary(op, av, b, node.span);
                }
                return Some(av);
            }
            ExprKind::Assign(target, value) => {
                let v = self.value(value);
                self.span = e.span;
                if let ExprKind::Var(id) = &target.kind {
                    self.assign(&id.name, v);
                }
                return None;
            }
            ExprKind::Switch(s) => return self.switch(s),
            ExprKind::Error => self.null_of(&Type::Json),
            // Consumed by the call it belongs to; elsewhere the checker
            // has reported it.
            ExprKind::Named(_, v) => return self.expr(v),
        })
    }

    fn string(&mut self, lit: &StrLit) -> Value {
        if !lit.has_holes() {
            return self.const_str(&lit.text());
        }
        // Holes naming no variable stay literal text (W0004).
        let mut template = String::new();
        let mut operands = Vec::new();
        for part in &lit.parts {
            match part {
                StrPart::Text(t) => template.push_str(&t.replace('{', "{{").replace('}', "}}")),
                StrPart::Interp(hole, _) => {
                    let (name, fields) = crate::syntax::lexer::hole_path(hole);
                    if self.lookup(name).is_some() || self.ctx.agent.beliefs.contains_key(name) {
                        let mut v = self.read_var(name);
                        for f in fields {
                            self.span = lit.span;
                            v = self.ins1(
                                Opcode::Member,
                                &[v],
                                vec![("field".into(), Attr::Str(f.to_string()))],
                                Type::Json,
                            );
                        }
                        template.push_str(&format!("{{{}}}", operands.len()));
                        operands.push(v);
                    } else {
                        template.push_str(&format!("{{{{{hole}}}}}"));
                    }
                }
            }
        }
        self.span = lit.span;
        self.ins1(
            Opcode::Template,
            &operands,
            vec![("template".into(), Attr::Str(template))],
            Type::Str,
        )
    }

    fn read_var(&mut self, name: &str) -> Value {
        if let Some((s, b)) = self.lookup(name) {
            return self.st.scopes[s][b].value;
        }
        // A belief of the agent.
        let after = self.read_after(Chain::Beliefs);
        let op = self.ins(
            Opcode::BeliefGet,
            &after,
            vec![("name".into(), Attr::Str(name.to_string()))],
            &[Type::Json, Type::Ord],
        );
        let (v, t) = (self.result(op, 0), self.result(op, 1));
        self.record_read(Chain::Beliefs, t);
        let ty = self
            .ctx
            .agent
            .beliefs
            .get(name)
            .map_or(Type::Json, |b| ty_to_ir(&b.ty));
        self.coerce(v, &ty)
    }

    fn assign(&mut self, name: &str, v: Value) {
        if let Some((s, b)) = self.lookup(name) {
            let ty = self.st.scopes[s][b].ty.clone();
            let v = self.coerce(v, &ty);
            self.set_var(s, b, v);
            return;
        }
        let mut operands = vec![v];
        operands.extend(self.write_after(&[Chain::Beliefs]));
        let t = self.ins1(
            Opcode::BeliefSet,
            &operands,
            vec![("name".into(), Attr::Str(name.to_string()))],
            Type::Ord,
        );
        self.record_write(&[Chain::Beliefs], t);
    }

    /// `a op b`, `a` already lowered to `av`.
    fn binary(&mut self, op: BinaryOp, av: Value, b: &Expr, span: Span) -> Value {
        if matches!(op, BinaryOp::And | BinaryOp::Or) && has_call(b) {
            return self.short_circuit(op, av, b, span);
        }
        let bv = self.value(b);
        self.span = span;
        let (ta, tb) = (self.ty(av), self.ty(bv));
        let num = |this: &mut Self, opc: Opcode, x: Value, y: Value| {
            let x = this.number(x);
            let y = this.number(y);
            this.ins1(opc, &[x, y], vec![], Type::Number)
        };
        let cmp = |this: &mut Self, opc: Opcode, x: Value, y: Value| {
            this.ins1(opc, &[x, y], vec![], Type::Bool)
        };
        match op {
            BinaryOp::Add if ta == Type::Str || tb == Type::Str => {
                self.ins1(Opcode::Concat, &[av, bv], vec![], Type::Str)
            }
            BinaryOp::Add => num(self, Opcode::Add, av, bv),
            BinaryOp::Sub => num(self, Opcode::Sub, av, bv),
            BinaryOp::Mul => num(self, Opcode::Mul, av, bv),
            BinaryOp::Div => num(self, Opcode::Div, av, bv),
            BinaryOp::Rem => num(self, Opcode::Mod, av, bv),
            BinaryOp::Lt => cmp(self, Opcode::Lt, av, bv),
            BinaryOp::Le => cmp(self, Opcode::Le, av, bv),
            BinaryOp::Gt => cmp(self, Opcode::Gt, av, bv),
            BinaryOp::Ge => cmp(self, Opcode::Ge, av, bv),
            BinaryOp::Eq => cmp(self, Opcode::Eq, av, bv),
            BinaryOp::Ne => cmp(self, Opcode::Ne, av, bv),
            BinaryOp::And | BinaryOp::Or => {
                let x = self.truthy(av);
                let y = self.truthy(bv);
                let opc = if op == BinaryOp::And {
                    Opcode::And
                } else {
                    Opcode::Or
                };
                self.ins1(opc, &[x, y], vec![], Type::Bool)
            }
        }
    }

    /// `a && b` / `a || b` where `b` makes calls: `b` runs only when needed.
    fn short_circuit(&mut self, op: BinaryOp, av: Value, b: &Expr, span: Span) -> Value {
        self.span = span;
        let c = self.truthy(av);
        let (_, v) = self.branches(
            Opcode::If,
            &[c],
            vec![],
            &[("then", None), ("else", None)],
            Some(Type::Bool),
            &mut |this, i, _| {
                let evaluate_rhs = (i == 0) == (op == BinaryOp::And);
                Some(if evaluate_rhs {
                    let bv = this.value(b);
                    this.truthy(bv)
                } else {
                    this.const_attr(Attr::Bool(op == BinaryOp::Or), Type::Bool)
                })
            },
        );
        v.unwrap_or(c)
    }

    fn switch(&mut self, s: &Switch) -> Option<Value> {
        let disc = self.value(&s.scrutinee);
        self.span = s.span;
        let mut arms: Vec<&Case> = s.cases.iter().filter(|c| c.pattern.is_some()).collect();
        let default = s.cases.iter().find(|c| c.pattern.is_none());
        // First occurrence wins for duplicated patterns (an error anyway).
        let mut seen = Vec::new();
        arms.retain(|c| {
            let k = c.pattern.as_ref().and_then(case_key);
            let fresh = !seen.contains(&k);
            seen.push(k);
            fresh
        });
        let mut labels: Vec<(&str, Option<String>)> = arms
            .iter()
            .map(|c| ("case", c.pattern.as_ref().and_then(case_key)))
            .collect();
        // Without a written `default`, no match fails at run time
        // (`switch.no_match`), so no default region is made up.
        if default.is_some() {
            labels.push(("default", None));
        }
        // The switch's value type: what the arms produce.
        let value_ty = self.switch_type(s);
        let (_, v) = self.branches(
            Opcode::Switch,
            &[disc],
            vec![],
            &labels,
            value_ty,
            &mut |this, i, _| {
                let body = if i < arms.len() {
                    Some(&arms[i].body)
                } else {
                    default.map(|d| &d.body)
                };
                match body {
                    Some(CaseBody::Expr(e)) => this.expr(e),
                    Some(CaseBody::Block(b)) => this.block_value(b),
                    None => None,
                }
            },
        );
        v
    }

    /// The IR type of a switch's value, from the arms' language types.
    fn switch_type(&self, s: &Switch) -> Option<Type> {
        let mut tys: Vec<Option<Type>> = Vec::new();
        for c in &s.cases {
            let e = match &c.body {
                CaseBody::Expr(e) => Some(e),
                CaseBody::Block(b) => b.stmts.last().and_then(|st| match &st.kind {
                    StmtKind::Expr(e) | StmtKind::Bind { value: e, .. } => Some(e),
                    _ => None,
                }),
            };
            tys.push(e.and_then(|e| self.static_type(e)));
        }
        let present: Vec<Type> = tys.iter().flatten().cloned().collect();
        if present.is_empty() {
            return None;
        }
        let first = present[0].clone();
        if present.iter().all(|t| *t == first) && tys.iter().all(Option::is_some) {
            Some(first)
        } else {
            Some(Type::Json)
        }
    }

    /// The value type of an expression without lowering it (None for void).
    fn static_type(&self, e: &Expr) -> Option<Type> {
        match &e.kind {
            ExprKind::Str(_) => Some(Type::Str),
            ExprKind::Number(_) => Some(Type::Number),
            ExprKind::Bool(_) => Some(Type::Bool),
            ExprKind::Null => Some(Type::Null),
            ExprKind::Var(id) => match self.lookup(&id.name) {
                Some((s, b)) => Some(self.st.scopes[s][b].ty.clone()),
                None => Some(
                    self.ctx
                        .agent
                        .beliefs
                        .get(&id.name)
                        .map_or(Type::Json, |b| ty_to_ir(&b.ty)),
                ),
            },
            // What `call` lowers each callee to (a tool's `inv` is JSON
            // unless its capability declares data).
            ExprKind::Call { callee, .. } => match &callee.kind {
                ExprKind::Var(id) => {
                    if let Some(f) = self.ctx.agent.flows.get(&id.name) {
                        ir_result(&f.ret)
                    } else if let Some(c) = self.ctx.agent.capabilities.get(&id.name) {
                        Some(ir_result(&c.ret).unwrap_or(Type::Json))
                    } else if let Some(b) = builtins::lookup(&id.name) {
                        ir_result(&(b.result)())
                    } else {
                        self.ctx.index.tool_params(&id.name).map(|_| Type::Json)
                    }
                }
                ExprKind::Member(t, _) if matches!(&t.kind, ExprKind::Var(a) if self.ctx.index.is_remote_agent(&a.name)) => {
                    Some(Type::Json)
                }
                ExprKind::Member(t, f) => match &t.kind {
                    ExprKind::Var(a) => self
                        .ctx
                        .index
                        .agents
                        .get(&a.name)
                        .and_then(|ag| ag.flows.get(&f.name))
                        .and_then(|sig| ir_result(&sig.ret)),
                    _ => Some(Type::Json),
                },
                _ => Some(Type::Json),
            },
            ExprKind::Assign(..) => None,
            ExprKind::Binary(..) => {
                let (first, steps) = e.binary_chain();
                let mut t = self.static_type(first);
                for (op, b, _) in steps {
                    t = Some(match op {
                        BinaryOp::Add => {
                            if t == Some(Type::Str) || self.static_type(b) == Some(Type::Str) {
                                Type::Str
                            } else {
                                Type::Number
                            }
                        }
                        BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                            Type::Number
                        }
                        _ => Type::Bool,
                    });
                }
                t
            }
            ExprKind::Unary(UnaryOp::Neg, _) => Some(Type::Number),
            ExprKind::Unary(UnaryOp::Not, _) => Some(Type::Bool),
            _ => Some(Type::Json),
        }
    }

    /// A case block's value: its last expression (or bound) statement.
    fn block_value(&mut self, b: &Block) -> Option<Value> {
        self.st.scopes.push(Vec::new());
        let (init, last) = match b.stmts.split_last() {
            Some((last, init)) => (init, Some(last)),
            None => (&b.stmts[..], None),
        };
        // Whether this block's own statements may have returned: a return
        // flag set before the block (a guard clause earlier in the flow) does
        // not make the block's value unreachable.
        let flag_before = self.st.ret_flag;
        self.stmts(init, false);
        let returned_here = self.st.ret_flag != flag_before && self.may_have_returned();
        let v = match last.map(|s| &s.kind) {
            Some(StmtKind::Expr(e)) if !returned_here => self.expr(e),
            // A guard in the block may have returned: the value is computed
            // only if nothing did (like the rest of a flow after a guard).
            Some(StmtKind::Expr(e)) if self.static_type(e).is_some() => {
                let ty = self.static_type(e);
                let flag = self.slot_value(Slot::RetFlag);
                let go = self.ins1(Opcode::Not, &[flag], vec![], Type::Bool);
                let labels = [("then", None), ("else", None)];
                let lower_value = &mut |this: &mut Self, i: usize, _: Region| {
                    if i == 0 {
                        this.expr(e)
                    } else {
                        None
                    }
                };
                self.branches(Opcode::If, &[go], vec![], &labels, ty, lower_value)
                    .1
            }
            Some(StmtKind::Bind { value, name }) if !returned_here => {
                let v = self.value(value);
                let t = self.ty(v);
                self.bind_arrow(&name.name, v, t);
                Some(v)
            }
            Some(_) => {
                if let Some(l) = last {
                    self.stmts(std::slice::from_ref(l), false);
                }
                None
            }
            None => None,
        };
        self.pop_scope();
        v
    }

    // ------------------------------------------------------------ calls

    fn call(&mut self, callee: &Expr, all_args: &[Expr], span: Span) -> Option<Value> {
        // Flow and capability arguments in parameter order (named ones
        // placed by name; the checker has reported any that do not fit).
        let in_order = |params: &[&str]| -> Vec<Expr> {
            let (positional, named) = crate::sema::arguments::split(all_args);
            let (ordered, _) = crate::sema::arguments::by_parameter(params, &positional, &named);
            ordered.into_iter().cloned().collect()
        };
        match &callee.kind {
            ExprKind::Var(id) => {
                let agent = self.ctx.agent;
                if let Some(sig) = agent.flows.get(&id.name) {
                    let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
                    let args = &in_order(&names)[..];
                    let params: Vec<Type> = sig.params.iter().map(|p| ty_to_ir(&p.ty)).collect();
                    let ret = ir_result(&sig.ret);
                    return self.flow_call(&agent.name, &id.name, &params, ret, args, span);
                }
                if let Some(cap) = agent.capabilities.get(&id.name) {
                    let names: Vec<&str> = cap.params.iter().map(|p| p.name.as_str()).collect();
                    let args = &in_order(&names)[..];
                    let keys: Vec<serde_json::Value> = cap
                        .params
                        .iter()
                        .map(|p| serde_json::Value::String(p.name.clone()))
                        .collect();
                    let mut vs = Vec::new();
                    for (a, p) in args.iter().zip(&cap.params) {
                        let v = self.value(a);
                        vs.push(self.coerce(v, &ty_to_ir(&p.ty)));
                    }
                    self.span = span;
                    let obj = self.ins1(
                        Opcode::Object,
                        &vs,
                        vec![("keys".into(), Attr::Json(serde_json::Value::Array(keys)))],
                        Type::Json,
                    );
                    let ret = ty_to_ir(&cap.ret);
                    let ret = if ret.is_data() { ret } else { Type::Json };
                    return Some(self.inv(&id.name, obj, ret));
                }
                if let Some(b) = builtins::lookup(&id.name) {
                    // Built-ins with parameter names take them in that order.
                    if let Some(ps) = builtins::param_names(b.kind) {
                        let args = in_order(ps);
                        return self.builtin(b.kind, &args, span);
                    }
                    return self.builtin(b.kind, all_args, span);
                }
                // A built-in tool called by name: an object of its
                // arguments, keyed by its schema's parameters.
                let params = self.ctx.index.tool_params(&id.name)?;
                let (positional, named) = crate::sema::arguments::split(all_args);
                let mut keyed: Vec<(String, &Expr)> = positional
                    .iter()
                    .zip(&params)
                    .map(|(a, p)| (p.clone(), *a))
                    .collect();
                keyed.extend(named.iter().map(|(n, v)| (n.name.clone(), *v)));
                let mut vs = Vec::new();
                for (_, a) in &keyed {
                    vs.push(self.value(a));
                }
                let keys = keyed
                    .iter()
                    .map(|(k, _)| serde_json::Value::String(k.clone()))
                    .collect();
                self.span = span;
                let obj = self.ins1(
                    Opcode::Object,
                    &vs,
                    vec![("keys".into(), Attr::Json(serde_json::Value::Array(keys)))],
                    Type::Json,
                );
                Some(self.inv(&id.name, obj, Type::Json))
            }
            ExprKind::Member(target, flow) => {
                let ExprKind::Var(agent_name) = &target.kind else {
                    return None;
                };
                if self.ctx.index.is_remote_agent(&agent_name.name) {
                    // `{skill, arguments}` or `{skill, message}` (checked).
                    let (positional, named) = crate::sema::arguments::split(all_args);
                    let skill = self.const_str(&format!("{}.{}", agent_name.name, flow.name));
                    let mut keyed = vec![("skill".to_string(), skill)];
                    if let Some(m) = positional.first() {
                        let v = self.value(m);
                        keyed.push(("message".into(), v));
                    } else {
                        let mut fields = Vec::new();
                        for (n, v) in &named {
                            let v = self.value(v);
                            fields.push((n.name.clone(), v));
                        }
                        let keys = fields
                            .iter()
                            .map(|(k, _)| serde_json::Value::String(k.clone()))
                            .collect();
                        let vs: Vec<Value> = fields.into_iter().map(|(_, v)| v).collect();
                        self.span = span;
                        let args = self.ins1(
                            Opcode::Object,
                            &vs,
                            vec![("keys".into(), Attr::Json(serde_json::Value::Array(keys)))],
                            Type::Json,
                        );
                        keyed.push(("arguments".into(), args));
                    }
                    self.span = span;
                    return Some(self.remote_call(&agent_name.name, keyed));
                }
                let sig = self
                    .ctx
                    .index
                    .agents
                    .get(&agent_name.name)?
                    .flows
                    .get(&flow.name)?;
                let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
                let args = &in_order(&names)[..];
                let params: Vec<Type> = sig.params.iter().map(|p| ty_to_ir(&p.ty)).collect();
                let ret = ir_result(&sig.ret);
                self.flow_call(&agent_name.name, &flow.name, &params, ret, args, span)
            }
            _ => None,
        }
    }

    fn flow_call(
        &mut self,
        agent: &str,
        flow: &str,
        params: &[Type],
        ret: Option<Type>,
        args: &[Expr],
        span: Span,
    ) -> Option<Value> {
        let mut operands = Vec::new();
        for (a, t) in args.iter().zip(params) {
            let v = self.value(a);
            operands.push(self.coerce(v, t));
        }
        self.span = span;
        // Order the call with the caller's effects on the chains it touches.
        let same_agent = agent == self.ctx.agent.name;
        let chains: Vec<Chain> = self
            .ctx
            .summaries
            .get(&(agent.to_string(), flow.to_string()))
            .map(|cs| {
                cs.iter()
                    .copied()
                    .filter(|c| same_agent || c.shared_across_agents())
                    .collect()
            })
            .unwrap_or_default();
        let tokens = self.write_after(&chains);
        // With no earlier effect on those chains the call starts them.
        let ordered = !chains.is_empty();
        operands.extend(tokens);
        let mut types: Vec<Type> = ret.iter().cloned().collect();
        if ordered {
            types.push(Type::Ord);
        }
        let op = self.ins(
            Opcode::FlowCall,
            &operands,
            vec![(
                "callee".into(),
                Attr::Symbol {
                    agent: agent.to_string(),
                    flow: flow.to_string(),
                },
            )],
            &types,
        );
        if ordered {
            let t = self.result(op, types.len() - 1);
            self.record_write(&chains, t);
        }
        ret.map(|_| self.result(op, 0))
    }

    /// `inv` of `tool`, ordered on its provider's chain (see `effects`).
    fn inv(&mut self, tool: &str, arg: Value, ret: Type) -> Value {
        let access = tool_access(self.ctx.agent, self.ctx.providers, tool);
        self.inv_with(tool, arg, ret, access)
    }

    /// A message to a remote agent (`[[remote_agents]]`): a call of the
    /// tool named after it. Messages to one agent are not ordered with each
    /// other (like LLM calls, they are independent requests), so a fan-out
    /// to it overlaps.
    fn remote_call(&mut self, agent: &str, keyed: Vec<(String, Value)>) -> Value {
        let keys = keyed
            .iter()
            .map(|(k, _)| serde_json::Value::String(k.clone()))
            .collect();
        let vs: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
        let obj = self.ins1(
            Opcode::Object,
            &vs,
            vec![("keys".into(), Attr::Json(serde_json::Value::Array(keys)))],
            Type::Json,
        );
        let access = ToolAccess::Read(self.ctx.providers.id(&format!("remote:{agent}")));
        self.inv_with(agent, obj, Type::Json, access)
    }

    fn inv_with(&mut self, tool: &str, arg: Value, ret: Type, access: ToolAccess) -> Value {
        let mut operands = vec![arg];
        operands.extend(self.tool_tokens(access));
        let op = self.ins(
            Opcode::Inv,
            &operands,
            vec![("tool".into(), Attr::Str(tool.to_string()))],
            &[ret, Type::Ord],
        );
        let (v, t) = (self.result(op, 0), self.result(op, 1));
        self.record_tool(access, t);
        v
    }

    /// The tokens a tool call waits for: a read waits for its provider's
    /// last write, a write for everything on its provider's chain; both
    /// wait for the last call of unknown provider (the write on `Tools`),
    /// which itself waits for every tool call so far.
    fn tool_tokens(&mut self, access: ToolAccess) -> Vec<Value> {
        let mut out = match access {
            ToolAccess::Read(p) => self.read_after(Chain::Tool(p)),
            ToolAccess::Write(p) => self.write_after(&[Chain::Tool(p)]),
            ToolAccess::Any => return self.write_after(&[Chain::Tools]),
        };
        for t in self.read_after(Chain::Tools) {
            if !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    fn record_tool(&mut self, access: ToolAccess, token: Value) {
        match access {
            ToolAccess::Read(p) => {
                self.record_read(Chain::Tool(p), token);
                self.record_read(Chain::Tools, token);
            }
            ToolAccess::Write(p) => {
                self.record_write(&[Chain::Tool(p)], token);
                self.record_read(Chain::Tools, token);
            }
            ToolAccess::Any => self.record_write(&[Chain::Tools], token),
        }
    }

    /// An LLM op's named arguments as its attributes; `tools:` becomes
    /// what the model is offered: each tool's name, description, JSON
    /// Schema of its parameters and whether it only reads.
    fn named_attrs(&self, named: &[(&str, &Expr)]) -> Vec<(AttrName, Attr)> {
        let mut attrs = Vec::new();
        for &(name, v) in named {
            let attr = match (name, &v.kind) {
                ("model" | "system" | "backend", ExprKind::Str(s)) => Attr::Str(s.text()),
                // The checker has parsed it: a JSON object.
                ("schema", ExprKind::Str(s)) => match serde_json::from_str(&s.text()) {
                    Ok(j @ serde_json::Value::Object(_)) => Attr::Json(j),
                    _ => continue,
                },
                ("budget" | "budget_tokens", ExprKind::Number(x)) => {
                    attrs.push(("budget_tokens".into(), Attr::Number(*x)));
                    continue;
                }
                (_, ExprKind::Number(x)) => Attr::Number(*x),
                ("tools", ExprKind::List(items)) => Attr::Json(serde_json::Value::Array(
                    items
                        .iter()
                        .filter_map(|i| match &i.kind {
                            ExprKind::Var(t) => Some(self.offered_tool(&t.name)),
                            _ => None,
                        })
                        .collect(),
                )),
                _ => continue,
            };
            attrs.push((name.into(), attr));
        }
        attrs
    }

    /// A tool as an LLM op offers it: a capability of the agent (schema
    /// from its parameters) or a built-in (its own schema).
    fn offered_tool(&self, name: &str) -> serde_json::Value {
        use serde_json::json;
        if let Some(c) = self.ctx.agent.capabilities.get(name) {
            let mut props = serde_json::Map::new();
            for p in &c.params {
                props.insert(p.name.clone(), ty_schema(&p.ty));
            }
            let required: Vec<&str> = c.params.iter().map(|p| p.name.as_str()).collect();
            let access = tool_access(self.ctx.agent, self.ctx.providers, name);
            return json!({
                "name": name,
                "description": format!("capability {name} of agent {}", self.ctx.agent.name),
                "parameters": {"type": "object", "properties": props, "required": required},
                "read_only": matches!(access, ToolAccess::Read(_)),
            });
        }
        builtin_offer(name)
    }

    fn builtin(&mut self, kind: BuiltinKind, all_args: &[Expr], span: Span) -> Option<Value> {
        use BuiltinKind as K;
        // `prompt:` and `context:` are operands, the other named arguments
        // the op's attributes; the checker has accepted them (only LLM
        // operations take any).
        let (positional, named) = crate::sema::arguments::split(all_args);
        let (operands, options, _) = crate::sema::arguments::llm_operands(&positional, &named);
        let args: Vec<Expr> = operands.into_iter().cloned().collect();
        let args = &args[..];
        let named: Vec<(&str, &Expr)> =
            options.iter().map(|(n, v)| (n.name.as_str(), *v)).collect();
        // An LLM built-in is the LLM op of the same name; its result type
        // is the op table's.
        let llm = |k: K| {
            let b = builtins::BUILTINS.iter().find(|b| b.kind == k)?;
            let op = Opcode::from_mnemonic(b.name).filter(|op| op.info().llm.is_some())?;
            match op.info().result_rule {
                ais_ir::ResultRule::Fixed([c]) => Some((op, c.to_type())),
                _ => None,
            }
        };
        if let Some((opc, ty)) = llm(kind) {
            let vs: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
            self.span = span;
            // Context blocks are labelled with the variable (or field) each
            // context argument names; `""` leaves the default `context N`.
            let labels: Vec<String> = args.iter().skip(1).map(context_label).collect();
            let mut attrs = if labels.iter().any(|l| !l.is_empty()) {
                let labels = labels.into_iter().map(serde_json::Value::String).collect();
                vec![(
                    "context".into(),
                    Attr::Json(serde_json::Value::Array(labels)),
                )]
            } else {
                vec![]
            };
            attrs.extend(self.named_attrs(&named));
            // The agent's `context: "..."`, unless the op sets its own system prompt.
            if let (Some(c), false) = (
                &self.ctx.agent.context,
                named.iter().any(|(n, _)| *n == "system"),
            ) {
                attrs.push(("system".into(), Attr::Str(c.clone())));
            }
            // The agent's `tools: [...]` member, unless the op names its own.
            if !named.iter().any(|(n, _)| *n == "tools") && !self.ctx.agent.tools.is_empty() {
                let tools = self
                    .ctx
                    .agent
                    .tools
                    .iter()
                    .map(|t| self.offered_tool(t))
                    .collect();
                attrs.push(("tools".into(), Attr::Json(serde_json::Value::Array(tools))));
            }
            // `schema:` makes the value the reply's JSON.
            let ty = if named.iter().any(|(n, _)| *n == "schema") {
                Type::Json
            } else {
                ty
            };
            return Some(self.ins1(opc, &vs, attrs, ty));
        }
        match kind {
            K::Inv => {
                let tool = match args.first().map(|a| &a.kind) {
                    Some(ExprKind::Str(s)) => s.text(),
                    _ => return None,
                };
                let a = match args.get(1) {
                    Some(a) => self.value(a),
                    None => self.const_attr(Attr::Json(serde_json::Value::Null), Type::Null),
                };
                self.span = span;
                let ret = self
                    .ctx
                    .agent
                    .capabilities
                    .get(&tool)
                    .map(|c| ty_to_ir(&c.ret))
                    .filter(Type::is_data)
                    .unwrap_or(Type::Json);
                Some(self.inv(&tool, a, ret))
            }
            K::Exec => {
                let mut vs: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
                self.span = span;
                // The tool is named at run time: ordered with every provider.
                vs.extend(self.tool_tokens(ToolAccess::Any));
                let op = self.ins(Opcode::Exec, &vs, vec![], &[Type::Json, Type::Ord]);
                let (v, t) = (self.result(op, 0), self.result(op, 1));
                self.record_tool(ToolAccess::Any, t);
                Some(v)
            }
            K::Qmem => {
                let q = self.value(args.first()?);
                let tier = resolve_tier(self.ctx.agent, args.get(1)?)?;
                self.span = span;
                let chain = Chain::of_tier(tier);
                let mut operands = vec![q];
                operands.extend(self.read_after(chain));
                let mut attrs = vec![("tier".into(), Attr::Str(tier.to_string()))];
                if let Some(ExprKind::Number(n)) = args.get(2).map(|a| &a.kind) {
                    attrs.push(("limit".into(), Attr::Number(*n)));
                }
                let op = self.ins(Opcode::Qmem, &operands, attrs, &[Type::Json, Type::Ord]);
                let (v, t) = (self.result(op, 0), self.result(op, 1));
                self.record_read(chain, t);
                Some(v)
            }
            K::Umem => {
                let v = self.value(args.first()?);
                let tier = resolve_tier(self.ctx.agent, args.get(1)?)?;
                let mut operands = vec![v];
                if let Some(k) = args.get(2) {
                    operands.push(self.value(k));
                }
                self.span = span;
                let chain = Chain::of_tier(tier);
                operands.extend(self.write_after(&[chain]));
                let t = self.ins1(
                    Opcode::Umem,
                    &operands,
                    vec![("tier".into(), Attr::Str(tier.to_string()))],
                    Type::Ord,
                );
                self.record_write(&[chain], t);
                None
            }
            K::Fence => {
                self.span = span;
                let tokens = self.write_after(&Chain::FENCE);
                let t = self.ins1(Opcode::Fence, &tokens, vec![], Type::Ord);
                self.record_write(&Chain::FENCE, t);
                None
            }
            K::Merge | K::WaitAll => {
                let vs: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
                self.span = span;
                let (opc, ty) = if kind == K::Merge {
                    (Opcode::Merge, Type::Str)
                } else {
                    (Opcode::WaitAll, Type::Json)
                };
                Some(self.ins1(opc, &vs, vec![], ty))
            }
            K::Print => {
                let mut vs: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
                self.span = span;
                vs.extend(self.write_after(&[Chain::Io]));
                let t = self.ins1(Opcode::Print, &vs, vec![], Type::Ord);
                self.record_write(&[Chain::Io], t);
                None
            }
            K::Guard => {
                let cond = self.value(args.first()?);
                let cond = self.coerce(cond, &Type::Bool);
                let mut vs = vec![cond, self.value(args.get(1)?)];
                self.span = span;
                vs.extend(self.write_after(&[Chain::Io]));
                let t = self.ins1(Opcode::Guard, &vs, vec![], Type::Ord);
                self.record_write(&[Chain::Io], t);
                None
            }
            K::ToNum => {
                let x = self.value(args.first()?);
                if self.ty(x) == Type::Number {
                    // Already a number (a guard's value usually is).
                    return Some(x);
                }
                let who = match args.get(1) {
                    Some(a) => {
                        let w = self.value(a);
                        self.coerce(w, &Type::Str)
                    }
                    None => self.const_str("to_num"),
                };
                self.span = span;
                Some(self.ins1(Opcode::ToNum, &[x, who], vec![], Type::Number))
            }
            K::Pause => {
                let mut vs = vec![self.value(args.first()?)];
                self.span = span;
                vs.extend(self.write_after(&[Chain::Io]));
                let op = self.ins(Opcode::Pause, &vs, vec![], &[Type::Json, Type::Ord]);
                let (v, t) = (self.result(op, 0), self.result(op, 1));
                self.record_write(&[Chain::Io], t);
                Some(v)
            }
            K::Communicate => {
                // To an agent with a reply flow: a call of that flow, whose
                // answer is the value (`sema::reply`).
                if let Some(ExprKind::Str(to)) = args.first().map(|a| &a.kind) {
                    let index = self.ctx.index;
                    if let (false, Some((sig, wants))) = (
                        to.has_holes(),
                        crate::sema::reply::reply_flow(index, &self.ctx.agent.name, &to.text()),
                    ) {
                        let lit = |text: &str| Expr {
                            kind: ExprKind::Str(crate::syntax::lexer::StrLit {
                                parts: vec![crate::syntax::lexer::StrPart::Text(text.into())],
                                span,
                            }),
                            span,
                        };
                        let call_args: Vec<Expr> = wants
                            .iter()
                            .map(|w| match w {
                                ReplyArg::Message => {
                                    args.get(1).cloned().unwrap_or_else(|| lit(""))
                                }
                                ReplyArg::Sender => lit(&self.ctx.agent.name),
                                ReplyArg::Protocol => {
                                    args.get(2).cloned().unwrap_or_else(|| lit("message"))
                                }
                            })
                            .collect();
                        let params: Vec<Type> =
                            sig.params.iter().map(|p| ty_to_ir(&p.ty)).collect();
                        let ret = ir_result(&sig.ret);
                        let (agent, flow) = (to.text(), sig.name.clone());
                        return match self.flow_call(&agent, &flow, &params, ret, &call_args, span) {
                            Some(v) => Some(v),
                            None => Some(
                                self.const_attr(Attr::Json(serde_json::Value::Null), Type::Null),
                            ),
                        };
                    }
                }
                // To a remote agent: over A2A, answered with its reply.
                if let Some(ExprKind::Str(to)) = args.first().map(|a| &a.kind) {
                    if !to.has_holes() && self.ctx.index.is_remote_agent(&to.text()) {
                        let mut keyed = Vec::new();
                        if let Some(m) = args.get(1) {
                            let v = self.value(m);
                            keyed.push(("message".to_string(), v));
                        }
                        if let Some(p) = args.get(2) {
                            let v = self.value(p);
                            keyed.push(("protocol".to_string(), v));
                        }
                        self.span = span;
                        return Some(self.remote_call(&to.text(), keyed));
                    }
                }
                let mut vs: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
                self.span = span;
                if vs.len() < 3 {
                    let p = self.const_str("message");
                    vs.push(p);
                }
                vs.extend(self.write_after(&[Chain::Io]));
                let t = self.ins1(Opcode::Communicate, &vs, vec![], Type::Ord);
                self.record_write(&[Chain::Io], t);
                // Fire-and-forget: no reply.
                Some(self.const_attr(Attr::Json(serde_json::Value::Null), Type::Null))
            }
            _ => None,
        }
    }
}

/// The IR result type of a callee, `None` for `void`.
fn ir_result(t: &Ty) -> Option<Type> {
    let t = ty_to_ir(t);
    t.is_data().then_some(t)
}

fn list_element_type(tys: &[Type]) -> Type {
    match tys.split_first() {
        Some((first, rest))
            if rest.iter().all(|t| t == first) && first.is_data() && *first != Type::Null =>
        {
            first.clone()
        }
        _ => Type::Json,
    }
}

/// The key a case is printed and matched with: the literal's text.
fn case_key(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Str(s) => Some(s.text()),
        ExprKind::Number(n) => Some(serde_json::Number::from_f64(*n).map_or_else(
            || n.to_string(),
            |x| {
                if n.fract() == 0.0 && n.abs() < 1e15 {
                    format!("{}", *n as i64)
                } else {
                    x.to_string()
                }
            },
        )),
        ExprKind::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn has_call(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Call { .. } | ExprKind::Switch(_) | ExprKind::Assign(..) => true,
        ExprKind::List(items) => items.iter().any(has_call),
        ExprKind::Binary(..) => {
            let (first, steps) = e.binary_chain();
            has_call(first) || steps.iter().any(|(_, b, _)| has_call(b))
        }
        ExprKind::Index(a, b) => has_call(a) || has_call(b),
        ExprKind::Member(a, _) | ExprKind::Unary(_, a) => has_call(a),
        _ => false,
    }
}

/// Is there a `return` anywhere but at the top level of the body?
fn nested_return(body: &Block) -> bool {
    fn in_block(b: &Block) -> bool {
        b.stmts.iter().any(|s| {
            let mut scan = false;
            walk(s, &mut scan);
            scan
        })
    }
    fn walk(s: &Stmt, found: &mut bool) {
        match &s.kind {
            StmtKind::If {
                then, otherwise, ..
            } => {
                *found |= contains_return(then) || otherwise.as_ref().is_some_and(contains_return);
            }
            StmtKind::Loop { body, .. } => *found |= contains_return(body),
            StmtKind::Try { body, handler, .. } => {
                *found |= contains_return(body) || contains_return(handler);
            }
            StmtKind::Parallel(b) => *found |= in_block(b),
            StmtKind::Let { value, .. } | StmtKind::Bind { value, .. } | StmtKind::Expr(value) => {
                *found |= expr_contains_return(value);
            }
            _ => {}
        }
    }
    in_block(body)
}

fn contains_return(b: &Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Return(_) => true,
        StmtKind::If {
            then, otherwise, ..
        } => contains_return(then) || otherwise.as_ref().is_some_and(contains_return),
        StmtKind::Loop { body, .. } | StmtKind::Parallel(body) => contains_return(body),
        StmtKind::Try { body, handler, .. } => contains_return(body) || contains_return(handler),
        StmtKind::Let { value, .. } | StmtKind::Bind { value, .. } | StmtKind::Expr(value) => {
            expr_contains_return(value)
        }
        StmtKind::Error(_) => false,
    })
}

/// A `return` inside a switch arm's block.
fn expr_contains_return(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Switch(s) => s.cases.iter().any(|c| match &c.body {
            CaseBody::Block(b) => contains_return(b),
            CaseBody::Expr(e) => expr_contains_return(e),
        }),
        ExprKind::Call { callee, args } => {
            expr_contains_return(callee) || args.iter().any(expr_contains_return)
        }
        ExprKind::List(items) => items.iter().any(expr_contains_return),
        ExprKind::Binary(..) => {
            let (first, steps) = e.binary_chain();
            expr_contains_return(first) || steps.iter().any(|(_, b, _)| expr_contains_return(b))
        }
        ExprKind::Index(a, b) | ExprKind::Assign(a, b) => {
            expr_contains_return(a) || expr_contains_return(b)
        }
        ExprKind::Member(a, _) | ExprKind::Unary(_, a) => expr_contains_return(a),
        _ => false,
    }
}

/// The label of a context argument: the variable or field path it names
/// (`report`, `r.summary`), else `""`.
fn context_label(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Var(id) => id.name.clone(),
        ExprKind::Member(base, field) => match context_label(base) {
            b if b.is_empty() => b,
            b => format!("{b}.{}", field.name),
        },
        _ => String::new(),
    }
}

/// The JSON Schema of a value of type `t` (a tool parameter).
fn ty_schema(t: &crate::sema::Ty) -> serde_json::Value {
    use crate::sema::Ty;
    use serde_json::json;
    match t {
        Ty::Str => json!({"type": "string"}),
        Ty::Number => json!({"type": "number"}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::List(inner) => json!({"type": "array", "items": ty_schema(inner)}),
        _ => json!({}),
    }
}

/// A tool that is not a capability of the agent, as an LLM op offers it: a
/// built-in with its own schema, else a host tool taking an object (also
/// the graph-JSON reader's, for the reference's `tools` names).
pub(crate) fn builtin_offer(name: &str) -> serde_json::Value {
    use serde_json::json;
    match ais_stdlib::builtin(name) {
        Some(b) => json!({
            "name": name,
            "description": b.description,
            "parameters": b.input_schema.clone(),
            "read_only": b.class == ais_stdlib::ToolClass::ReadOnly,
        }),
        None => json!({
            "name": name,
            "parameters": {"type": "object"},
            "read_only": ais_stdlib::HOST_TOOLS
                .iter()
                .any(|h| h.name == name && h.class == ais_stdlib::ToolClass::ReadOnly),
        }),
    }
}
