//! Bytecode validation: everything the VM relies on, checked once at load.
//!
//! Order: tables (types, constants, agents), then per flow the region tree,
//! then per region indices, operand ordering (every input is an argument, a
//! capture or a result of an *earlier* op, so every region is a DAG), the
//! consumer lists and pending counts, and finally op typing against the op
//! table. The first problem found is returned.

use super::*;
use crate::ops::{Arity, RegionSpec, ResultRule};

/// Checks a decoded (or freshly compiled) program.
pub fn validate(p: &Program) -> Result<(), LoadError> {
    let types = check_types(p)?;
    for (i, c) in p.consts.iter().enumerate() {
        let ok = match c {
            Const::Number(n) => n.is_finite(),
            Const::Json(t) => serde_json::from_str::<serde_json::Value>(t).is_ok(),
            _ => true,
        };
        if !ok {
            return Err(LoadError::Invalid {
                at: format!("constant {i}"),
                message: "not a valid JSON value".into(),
            });
        }
    }
    let nf = p.flows.len();
    let nt = p.types.len();
    let nc = p.consts.len();
    let mut owner = vec![None; nf];
    for (ai, a) in p.agents.iter().enumerate() {
        let at = || format!("agent {ai} ({})", a.name);
        for &f in &a.flows {
            range(at, "flow", f, nf)?;
            if owner[f as usize].replace(ai).is_some() {
                return Err(invalid(at(), format!("flow {f} listed twice")));
            }
            if p.flows[f as usize].agent as usize != ai {
                return Err(invalid(at(), format!("flow {f} belongs to another agent")));
            }
        }
        for b in &a.beliefs {
            match b.init {
                BeliefInitCode::Const(c) => range(at, "constant", c, nc)?,
                BeliefInitCode::Flow(f) => range(at, "flow", f, nf)?,
            }
        }
        for c in &a.capabilities {
            for (_, t) in &c.params {
                range(at, "type", *t, nt)?;
            }
            range(at, "type", c.result, nt)?;
        }
        for h in &a.handlers {
            range(at, "flow", h.flow, nf)?;
        }
    }
    for (fi, f) in p.flows.iter().enumerate() {
        if owner[fi].is_none() {
            return Err(invalid(
                format!("flow {fi} ({})", f.name),
                "not listed by its agent".into(),
            ));
        }
        FlowCheck {
            p,
            types: &types,
            flow: f,
            fi,
        }
        .run()?;
    }
    // A belief initialiser runs before the run, outside the journal and the
    // flow policy: it must be free of effects (`crate::effects`).
    if let Some((agent, belief, op)) = crate::effects::bytecode_belief_effects(p)
        .into_iter()
        .next()
    {
        return Err(invalid(
            format!("agent {agent:?}, belief {belief:?}"),
            format!(
                "its initialiser reaches `{}`, an op with an effect; belief initialisers must be free of effects",
                op.mnemonic()
            ),
        ));
    }
    Ok(())
}

/// `at` names the place only when the index is out of range: formatting
/// it for every check was most of the validator's allocations (issue 40).
fn range(
    at: impl FnOnce() -> String,
    what: &'static str,
    index: u32,
    len: usize,
) -> Result<(), LoadError> {
    if (index as usize) < len {
        Ok(())
    } else {
        Err(LoadError::IndexOutOfRange {
            at: at(),
            what,
            index: u64::from(index),
            len: len as u64,
        })
    }
}

fn invalid(at: String, message: String) -> LoadError {
    LoadError::Invalid { at, message }
}

/// Converts the type table, rejecting forward/self references and absurd nesting.
fn check_types(p: &Program) -> Result<Vec<Type>, LoadError> {
    let mut out: Vec<Type> = Vec::with_capacity(p.types.len());
    let mut depth: Vec<u32> = Vec::with_capacity(p.types.len());
    for (i, t) in p.types.iter().enumerate() {
        let at = || format!("type {i}");
        let (ty, d) = match t {
            TypeEntry::List(inner) => {
                if *inner as usize >= i {
                    return Err(LoadError::IndexOutOfRange {
                        at: at(),
                        what: "earlier type",
                        index: u64::from(*inner),
                        len: i as u64,
                    });
                }
                let d = depth[*inner as usize] + 1;
                if d > 64 {
                    return Err(invalid(at(), "list nesting deeper than 64".into()));
                }
                (Type::list(out[*inner as usize].clone()), d)
            }
            TypeEntry::Opaque(n) if !crate::types::is_type_name(n) => {
                return Err(invalid(at(), format!("invalid type name {n:?}")));
            }
            other => (super::scalar_type(other), 0),
        };
        out.push(ty);
        depth.push(d);
    }
    Ok(out)
}

struct FlowCheck<'a> {
    p: &'a Program,
    types: &'a [Type],
    flow: &'a FlowCode,
    fi: usize,
}

impl FlowCheck<'_> {
    fn at(&self, r: usize, op: Option<usize>) -> String {
        let name = self.p.flow_name(self.fi as u32);
        match op {
            Some(o) => format!("flow {} (@{name}) region {r} op {o}", self.fi),
            None => format!("flow {} (@{name}) region {r}", self.fi),
        }
    }

    fn ty(&self, t: u32) -> &Type {
        self.types.get(t as usize).unwrap_or(&Type::Json)
    }

    fn run(&self) -> Result<(), LoadError> {
        let f = self.flow;
        let fat = || format!("flow {} ({})", self.fi, f.name);
        range(fat, "agent", f.agent, self.p.agents.len())?;
        for (_, t) in &f.params {
            range(fat, "type", *t, self.types.len())?;
        }
        range(fat, "type", f.result, self.types.len())?;
        let nr = f.regions.len();
        if nr == 0 {
            return Err(invalid(fat(), "no body region".into()));
        }
        // Region tree: every region but the body owned exactly once, by an op
        // of a region that is itself reachable from the body.
        let mut parent: Vec<Option<(usize, usize)>> = vec![None; nr];
        for (ri, r) in f.regions.iter().enumerate() {
            for (oi, op) in r.ops.iter().enumerate() {
                for &c in &op.regions {
                    range(|| self.at(ri, Some(oi)), "region", c, nr)?;
                    if c == 0 || parent[c as usize].replace((ri, oi)).is_some() {
                        return Err(invalid(
                            self.at(ri, Some(oi)),
                            format!("region {c} is owned twice"),
                        ));
                    }
                }
            }
        }
        let mut reached = vec![false; nr];
        let mut stack = vec![0usize];
        reached[0] = true;
        while let Some(r) = stack.pop() {
            for op in &f.regions[r].ops {
                for &c in &op.regions {
                    if !reached[c as usize] {
                        reached[c as usize] = true;
                        stack.push(c as usize);
                    }
                }
            }
        }
        if let Some(r) = reached.iter().position(|x| !x) {
            return Err(invalid(self.at(r, None), "unreachable region".into()));
        }
        if f.regions[0].kind != RegionKind::Body {
            return Err(invalid(
                self.at(0, None),
                "region 0 must be the body".into(),
            ));
        }
        for (ri, r) in f.regions.iter().enumerate() {
            self.region_structure(ri, r, parent[ri])?;
        }
        for (ri, r) in f.regions.iter().enumerate() {
            self.region_types(ri, r)?;
        }
        Ok(())
    }

    fn region_structure(
        &self,
        ri: usize,
        r: &RegionCode,
        parent: Option<(usize, usize)>,
    ) -> Result<(), LoadError> {
        let at = |o: Option<usize>| self.at(ri, o);
        let ns = r.slot_types.len();
        for &t in &r.slot_types {
            range(|| at(None), "type", t, self.types.len())?;
        }
        // Captures index the parent region's slots.
        let parent_slots = match parent {
            Some((pr, _)) => self.flow.regions[pr].slot_types.len(),
            None => 0,
        };
        if parent.is_none() && !r.captures.is_empty() {
            return Err(invalid(at(None), "a body cannot capture values".into()));
        }
        for &c in &r.captures {
            range(|| at(None), "parent slot", c, parent_slots)?;
        }
        let first = r.n_args as usize + r.captures.len();
        if first > ns {
            return Err(invalid(
                at(None),
                "fewer slots than arguments and captures".into(),
            ));
        }
        if r.ops.is_empty() {
            return Err(invalid(at(None), "empty region (no terminator)".into()));
        }
        if r.pending.len() != r.ops.len() {
            return Err(invalid(
                at(None),
                "pending counts do not match the ops".into(),
            ));
        }
        if r.consumer_offsets.len() != ns + 1 {
            return Err(invalid(
                at(None),
                "consumer offsets do not match the slots".into(),
            ));
        }
        // Ops: inputs come before the op, results are laid out in order.
        let mut next = first;
        let mut roots = Vec::new();
        for (oi, op) in r.ops.iter().enumerate() {
            let end = op.first_operand as u64
                + u64::from(op.n_data)
                + u64::from(op.n_tokens)
                + u64::from(op.n_deps);
            if end > r.operands.len() as u64 {
                return Err(LoadError::IndexOutOfRange {
                    at: at(Some(oi)),
                    what: "operand pool entry",
                    index: end.saturating_sub(1),
                    len: r.operands.len() as u64,
                });
            }
            if op.result as usize != next {
                return Err(invalid(
                    at(Some(oi)),
                    format!("results start at slot {}, expected {next}", op.result),
                ));
            }
            for &s in r.inputs(op) {
                if s as usize >= next {
                    return Err(LoadError::IndexOutOfRange {
                        at: at(Some(oi)),
                        what: "operand slot defined earlier",
                        index: u64::from(s),
                        len: next as u64,
                    });
                }
            }
            next += op.n_results as usize;
            if next > ns {
                return Err(LoadError::IndexOutOfRange {
                    at: at(Some(oi)),
                    what: "result slot",
                    index: next as u64 - 1,
                    len: ns as u64,
                });
            }
            if r.pending[oi] != op.n_inputs() {
                return Err(invalid(
                    at(Some(oi)),
                    format!(
                        "pending count {} but {} inputs",
                        r.pending[oi],
                        op.n_inputs()
                    ),
                ));
            }
            if op.n_inputs() == 0 {
                roots.push(oi as u32);
            }
            let terminator = op.opcode.is_terminator();
            let last = oi + 1 == r.ops.len();
            if terminator != last {
                return Err(LoadError::IllTyped {
                    at: at(Some(oi)),
                    message: if last {
                        "region does not end with a terminator".into()
                    } else {
                        format!("terminator `{}` before the end of the region", op.opcode)
                    },
                });
            }
        }
        if next != ns {
            return Err(invalid(at(None), format!("{ns} slots but {next} defined")));
        }
        if roots != r.roots {
            return Err(invalid(at(None), "root list does not match the ops".into()));
        }
        // Consumer lists must be exactly the canonical ones (op order, one
        // entry per use).
        let canonical = super::codegen::build_consumers(&r.ops, &r.operands, ns)
            .map_err(|_| invalid(at(None), "operand pool overflow".into()))?;
        if canonical.0 != r.consumer_offsets || canonical.1 != r.consumers {
            return Err(invalid(
                at(None),
                "consumer lists do not match the operands".into(),
            ));
        }
        Ok(())
    }

    fn region_types(&self, ri: usize, r: &RegionCode) -> Result<(), LoadError> {
        let f = self.flow;
        let st = |s: u32| self.ty(r.slot_types.get(s as usize).copied().unwrap_or(u32::MAX));
        let ill = |oi: usize, message: String| LoadError::IllTyped {
            at: self.at(ri, Some(oi)),
            message,
        };
        // Region arguments by kind.
        let want_args = match r.kind {
            RegionKind::Body => {
                if ri != 0 {
                    return Err(invalid(self.at(ri, None), "only region 0 is a body".into()));
                }
                for (i, (_, t)) in f.params.iter().enumerate() {
                    if st(i as u32) != self.ty(*t) {
                        return Err(ill(0, format!("parameter {i} slot type")));
                    }
                }
                f.params.len()
            }
            RegionKind::Catch => 1,
            RegionKind::LoopBody => (r.n_args as usize).max(2),
            _ => 0,
        };
        if r.n_args as usize != want_args {
            return Err(LoadError::IllTyped {
                at: self.at(ri, None),
                message: format!(
                    "`{}` region takes {want_args} argument(s), has {}",
                    r.kind.label(),
                    r.n_args
                ),
            });
        }
        for (oi, op) in r.ops.iter().enumerate() {
            let info = op.opcode.info();
            let data = r.data(op);
            if !info.operands.allows(data.len()) {
                return Err(ill(
                    oi,
                    format!(
                        "`{}` takes {} data operand(s), has {}",
                        op.opcode,
                        info.operands,
                        data.len()
                    ),
                ));
            }
            if op.n_tokens > 0 && !info.takes_ord {
                return Err(ill(oi, format!("`{}` takes no ordering tokens", op.opcode)));
            }
            for &t in r.tokens(op) {
                if *st(t) != Type::Ord {
                    return Err(ill(oi, "ordering token operand is not `ord`".into()));
                }
            }
            for (i, &s) in data.iter().enumerate() {
                let con = info.operand_type(i);
                if !con.admits(st(s)) {
                    return Err(ill(
                        oi,
                        format!("operand {i} of `{}` must be {con}, is {}", op.opcode, st(s)),
                    ));
                }
            }
            if op.n_deps > 0 && op.regions.is_empty() {
                return Err(ill(oi, "deps on an op without regions".into()));
            }
            let results: Vec<&Type> = op.results().map(st).collect();
            self.check_results(ri, r, oi, op, &results)?;
            self.check_imm(ri, oi, op)?;
            self.check_regions(ri, r, oi, op, &results)?;
            if op.opcode == Opcode::Return {
                if r.kind != RegionKind::Body {
                    return Err(ill(oi, "`return` outside a flow body".into()));
                }
                let want = self.ty(f.result);
                match data.first() {
                    None if *want == Type::Void => {}
                    Some(&s) if *want != Type::Void && want.accepts(st(s)) || want == st(s) => {}
                    _ => {
                        return Err(ill(
                            oi,
                            format!("`return` does not match the flow result `{want}`"),
                        ))
                    }
                }
            }
            if op.opcode == Opcode::Yield && r.kind == RegionKind::Body {
                return Err(ill(oi, "`yield` in a flow body".into()));
            }
        }
        Ok(())
    }

    fn check_results(
        &self,
        ri: usize,
        _r: &RegionCode,
        oi: usize,
        op: &Instr,
        results: &[&Type],
    ) -> Result<(), LoadError> {
        let info = op.opcode.info();
        let ill = |message: String| LoadError::IllTyped {
            at: self.at(ri, Some(oi)),
            message,
        };
        if results.iter().any(|t| **t == Type::Void) {
            return Err(ill("a result of type `void`".into()));
        }
        match info.result_rule {
            ResultRule::None => {
                if !results.is_empty() {
                    return Err(ill(format!("`{}` has no results", op.opcode)));
                }
            }
            ResultRule::Fixed(canon) => {
                if !op.opcode.info().results.allows(results.len()) {
                    return Err(ill(format!(
                        "`{}` has {} result(s), expected {}",
                        op.opcode,
                        results.len(),
                        canon.len()
                    )));
                }
                for (t, c) in results.iter().zip(canon) {
                    let c = c.to_type();
                    let widened = c != Type::Ord && t.accepts(&c);
                    // A `json` result may be declared at any data type
                    // (capability results); checked at run time.
                    let narrowed = c == Type::Json && t.is_data();
                    if **t != c && !widened && !narrowed {
                        return Err(ill(format!(
                            "result type `{t}` for `{}` (expected `{c}`)",
                            op.opcode
                        )));
                    }
                }
            }
            ResultRule::Declared => {
                if results.len() != 1 || !results[0].is_data() {
                    return Err(ill(format!("`{}` has one data result", op.opcode)));
                }
            }
            ResultRule::ListOf => {
                if results.len() != 1
                    || !matches!(results[0], Type::List(_)) && !results[0].is_dynamic()
                {
                    return Err(ill("`list` has one list result".into()));
                }
            }
            ResultRule::Call => {
                let Imm::Callee(c) = op.imm else {
                    return Err(ill("`flow.call` without a callee".into()));
                };
                range(|| self.at(ri, Some(oi)), "flow", c, self.p.flows.len())?;
                let callee = &self.p.flows[c as usize];
                let rt = self.ty(callee.result);
                let mut want: Vec<Type> = Vec::new();
                if *rt != Type::Void {
                    want.push(rt.clone());
                }
                let ok = match results.len().checked_sub(want.len()) {
                    Some(0) => true,
                    Some(1) => *results[results.len() - 1] == Type::Ord,
                    _ => false,
                } && want
                    .iter()
                    .zip(results.iter())
                    .all(|(w, t)| *t == w || t.accepts(w));
                if !ok {
                    return Err(ill(format!(
                        "call results do not match @{}",
                        self.p.flow_name(c)
                    )));
                }
            }
            ResultRule::Yielded => {}
        }
        if !info.results.allows(results.len()) && info.result_rule != ResultRule::Yielded {
            return Err(ill(format!(
                "`{}` result count {}",
                op.opcode,
                results.len()
            )));
        }
        Ok(())
    }

    fn check_imm(&self, ri: usize, oi: usize, op: &Instr) -> Result<(), LoadError> {
        let at = || self.at(ri, Some(oi));
        let ill = |message: String| LoadError::IllTyped { at: at(), message };
        // The op table says which immediate the op carries; its content is
        // checked per kind.
        if op.imm.kind() != op.opcode.info().imm {
            return Err(ill(format!(
                "immediate {:?} does not fit `{}`",
                op.imm, op.opcode
            )));
        }
        let ok = match &op.imm {
            Imm::Const(c) => {
                range(at, "constant", *c, self.p.consts.len())?;
                true
            }
            Imm::None | Imm::Template(_) | Imm::Field(_) | Imm::Tier(_) | Imm::Query { .. } => true,
            Imm::Llm(_) | Imm::Loop { .. } => true,
            Imm::Tool(t) => !t.is_empty(),
            Imm::Keys(ks) => {
                let r = &self.flow.regions[ri];
                if ks.len() != r.data(op).len() {
                    return Err(ill(format!(
                        "`object` has {} key(s) for {} operand(s)",
                        ks.len(),
                        r.data(op).len()
                    )));
                }
                true
            }
            Imm::Cast(t) => {
                range(at, "type", *t, self.types.len())?;
                let r = &self.flow.regions[ri];
                let res = r.slot_types.get(op.result as usize).copied();
                res.map(|x| self.ty(x)) == Some(self.ty(*t))
            }
            Imm::Belief(n) => !n.is_empty(),
            Imm::Callee(c) => {
                range(at, "flow", *c, self.p.flows.len())?;
                let callee = &self.p.flows[*c as usize];
                let r = &self.flow.regions[ri];
                let data = r.data(op);
                if data.len() != callee.params.len() {
                    return Err(ill(format!(
                        "@{} takes {} argument(s), given {}",
                        self.p.flow_name(*c),
                        callee.params.len(),
                        data.len()
                    )));
                }
                for (i, (&s, (_, pt))) in data.iter().zip(&callee.params).enumerate() {
                    let at_ = self.ty(r.slot_types.get(s as usize).copied().unwrap_or(u32::MAX));
                    let pt = self.ty(*pt);
                    if pt != at_ && !pt.accepts(at_) {
                        return Err(ill(format!(
                            "argument {i}: `{at_}` where `{pt}` is expected"
                        )));
                    }
                }
                true
            }
        };
        if ok {
            Ok(())
        } else {
            Err(ill(format!(
                "immediate {:?} does not fit `{}`",
                op.imm, op.opcode
            )))
        }
    }

    fn check_regions(
        &self,
        ri: usize,
        r: &RegionCode,
        oi: usize,
        op: &Instr,
        results: &[&Type],
    ) -> Result<(), LoadError> {
        let info = op.opcode.info();
        let f = self.flow;
        let ill = |message: String| LoadError::IllTyped {
            at: self.at(ri, Some(oi)),
            message,
        };
        let kinds: Vec<&RegionKind> = op
            .regions
            .iter()
            .map(|&c| &f.regions[c as usize].kind)
            .collect();
        let shape_ok = match info.regions {
            RegionSpec::None => kinds.is_empty(),
            RegionSpec::IfElse => kinds == [&RegionKind::Then, &RegionKind::Else],
            RegionSpec::TryCatch => kinds == [&RegionKind::Try, &RegionKind::Catch],
            RegionSpec::Loop => kinds == [&RegionKind::LoopBody],
            RegionSpec::Switch => {
                let cases = kinds
                    .iter()
                    .filter(|k| matches!(k, RegionKind::Case(_)))
                    .count();
                let defaults = kinds.iter().filter(|k| ***k == RegionKind::Default).count();
                cases >= 1
                    && cases + defaults == kinds.len()
                    && defaults <= 1
                    && (defaults == 0 || kinds.last() == Some(&&RegionKind::Default))
            }
        };
        if !shape_ok {
            return Err(ill(format!("`{}` owns regions {kinds:?}", op.opcode)));
        }
        if kinds.is_empty() {
            return Ok(());
        }
        // Every capture of a child must be among the op's deps.
        let deps = r.deps(op);
        for &c in &op.regions {
            let child = &f.regions[c as usize];
            for &s in &child.captures {
                if !deps.contains(&s) {
                    return Err(ill(format!(
                        "region {c} captures slot {s}, which is not a dep"
                    )));
                }
                let inner = child.n_args as usize
                    + child.captures.iter().position(|&x| x == s).unwrap_or(0);
                let ct = self.ty(child.slot_types.get(inner).copied().unwrap_or(u32::MAX));
                let pt = self.ty(r.slot_types.get(s as usize).copied().unwrap_or(u32::MAX));
                if ct != pt {
                    return Err(ill(format!("capture of slot {s} changes its type")));
                }
            }
            // Yields match the results.
            let Some(term) = child.ops.last() else {
                return Err(ill(format!("region {c} is empty")));
            };
            if term.opcode != Opcode::Yield {
                return Err(ill(format!("region {c} does not end with `yield`")));
            }
            let ys = child.data(term);
            if ys.len() != results.len() {
                return Err(ill(format!(
                    "region {c} yields {} value(s), the op has {} result(s)",
                    ys.len(),
                    results.len()
                )));
            }
            for (y, t) in ys.iter().zip(results) {
                let yt = self.ty(child
                    .slot_types
                    .get(*y as usize)
                    .copied()
                    .unwrap_or(u32::MAX));
                if yt != *t && !t.accepts(yt) {
                    return Err(ill(format!("region {c} yields `{yt}` for a `{t}` result")));
                }
            }
        }
        let st = |s: u32| self.ty(r.slot_types.get(s as usize).copied().unwrap_or(u32::MAX));
        if op.opcode == Opcode::Loop {
            let body = &f.regions[op.regions[0] as usize];
            let data = r.data(op);
            let carried = data.len().saturating_sub(1);
            if body.n_args as usize != carried + 2 || results.len() != carried {
                return Err(ill(format!(
                    "loop with {carried} carried value(s): body takes {} argument(s), op has {} result(s)",
                    body.n_args,
                    results.len()
                )));
            }
            let bt = |i: usize| self.ty(body.slot_types.get(i).copied().unwrap_or(u32::MAX));
            if !Type::Number.accepts(bt(1)) && !bt(1).accepts(&Type::Number) {
                return Err(ill("loop index is not a number".into()));
            }
            for (i, &s) in data.iter().skip(1).enumerate() {
                let a = bt(i + 2);
                if a != st(s) && !a.accepts(st(s)) {
                    return Err(ill(format!(
                        "carried value {i} does not match the body argument"
                    )));
                }
            }
        }
        if op.opcode == Opcode::TryCatch {
            let catch = &f.regions[op.regions[1] as usize];
            let et = self.ty(catch.slot_types.first().copied().unwrap_or(u32::MAX));
            if !et.accepts(&Type::Json) {
                return Err(ill("the catch argument must accept `json`".into()));
            }
        }
        let _ = Arity::Fixed(0);
        Ok(())
    }
}
