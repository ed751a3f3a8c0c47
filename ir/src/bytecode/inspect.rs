//! Human-readable dump of a program (`aisc inspect`).

use super::*;
use std::fmt::Write;

fn const_text(p: &Program, c: u32) -> String {
    match p.consts.get(c as usize) {
        Some(Const::Str(s)) => format!("{s:?}"),
        Some(Const::Json(t)) => format!("json {t}"),
        Some(Const::Number(n)) => format!("{n}"),
        Some(Const::Bool(b)) => format!("{b}"),
        Some(Const::Null) => "null".into(),
        None => format!("#{c}?"),
    }
}

fn imm_text(p: &Program, imm: &Imm) -> String {
    match imm {
        Imm::None => String::new(),
        Imm::Const(c) => format!(" {{value = {}}}", const_text(p, *c)),
        Imm::Template(t) => format!(" {{template = {t:?}}}"),
        Imm::Field(f) => format!(" {{field = {f:?}}}"),
        Imm::Tool(t) => format!(" {{tool = {t:?}}}"),
        Imm::Tier(t) => format!(" {{tier = {:?}}}", t.name()),
        Imm::Query { tier, limit } => match limit {
            Some(l) => format!(" {{tier = {:?}, limit = {l}}}", tier.name()),
            None => format!(" {{tier = {:?}}}", tier.name()),
        },
        Imm::Keys(ks) => format!(" {{keys = {ks:?}}}"),
        Imm::Cast(t) => format!(" {{to = {}}}", p.type_of(*t)),
        Imm::Belief(n) => format!(" {{name = {n:?}}}"),
        Imm::Callee(c) => format!(" {{callee = @{}}}", p.flow_name(*c)),
        Imm::Llm(a) => {
            let mut parts = Vec::new();
            if let Some(m) = &a.model {
                parts.push(format!("model = {m:?}"));
            }
            if let Some(t) = a.temperature {
                parts.push(format!("temperature = {t}"));
            }
            if let Some(t) = a.max_tokens {
                parts.push(format!("max_tokens = {t}"));
            }
            if let Some(s) = &a.system {
                parts.push(format!("system = {s:?}"));
            }
            if a.cacheable {
                parts.push("cacheable".into());
            }
            if a.no_fuse {
                parts.push("no_fuse".into());
            }
            if !a.context.is_empty() {
                parts.push(format!("context = {:?}", a.context));
            }
            if !a.tools.is_empty() {
                let names: Vec<&str> = a.tools.iter().map(|t| t.name.as_str()).collect();
                parts.push(format!("tools = {names:?}"));
            }
            if let Some(n) = a.max_steps {
                parts.push(format!("max_steps = {n}"));
            }
            if let Some(n) = a.repairs {
                parts.push(format!("repairs = {n}"));
            }
            if let Some(n) = a.budget_tokens {
                parts.push(format!("budget_tokens = {n}"));
            }
            if let Some(b) = &a.backend {
                parts.push(format!("backend = {b:?}"));
            }
            if let Some(j) = &a.schema {
                parts.push(format!("schema = {j}"));
            }
            if let Some(k) = &a.cache_key {
                parts.push(format!("cache_key = {k:?}"));
            }
            if !a.cache_prefix.is_empty() {
                parts.push(format!("cache_prefix = {:?}", a.cache_prefix));
            }
            if !a.cache_points.is_empty() {
                parts.push(format!("cache_points = {:?}", a.cache_points));
            }
            if parts.is_empty() {
                String::new()
            } else {
                format!(" {{{}}}", parts.join(", "))
            }
        }
        Imm::Loop { max_iters } => match max_iters {
            Some(n) => format!(" {{max_iters = {n}}}"),
            None => String::new(),
        },
    }
}

fn slots(list: &[u32]) -> String {
    list.iter()
        .map(|s| format!("s{s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A readable dump: header facts, agents with their tables, then every
/// flow's regions with slots, ops, pending counts and consumers.
pub fn inspect(p: &Program) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "apxmobj format {} · {} agent(s) · {} flow(s) · {} op(s) · {} constant(s) · {} type(s)",
        super::FORMAT_VERSION,
        p.agents.len(),
        p.flows.len(),
        p.op_count(),
        p.consts.len(),
        p.types.len()
    );
    if let Some(s) = &p.source {
        let _ = writeln!(o, "source: {s}");
    }
    for a in &p.agents {
        let _ = writeln!(o, "\nagent @{}", a.name);
        for m in &a.memory {
            let _ = writeln!(o, "  memory @{} : {}", m.name, m.tier.name());
        }
        for b in &a.beliefs {
            let init = match b.init {
                BeliefInitCode::Const(c) => const_text(p, c),
                BeliefInitCode::Flow(f) => format!("@{}", p.flow_name(f)),
            };
            let _ = writeln!(o, "  belief @{} = {init}", b.name);
        }
        for g in &a.goals {
            let _ = writeln!(
                o,
                "  goal @{} priority {} {:?}",
                g.name, g.priority, g.description
            );
        }
        for c in &a.capabilities {
            let ps: Vec<String> = c
                .params
                .iter()
                .map(|(n, t)| format!("{n}: {}", p.type_of(*t)))
                .collect();
            let _ = writeln!(
                o,
                "  capability @{}({}) -> {}",
                c.name,
                ps.join(", "),
                p.type_of(c.result)
            );
        }
        for h in &a.handlers {
            let _ = writeln!(o, "  on {:?} @{}", h.event, p.flow_name(h.flow));
        }
        for &fi in &a.flows {
            if let Some(f) = p.flows.get(fi as usize) {
                flow(&mut o, p, fi, f);
            }
        }
    }
    o
}

fn flow(o: &mut String, p: &Program, fi: u32, f: &FlowCode) {
    let ps: Vec<String> = f
        .params
        .iter()
        .map(|(n, t)| format!("{n}: {}", p.type_of(*t)))
        .collect();
    let _ = writeln!(
        o,
        "  flow #{fi} @{}({}) -> {}{} · critical path ≈ {} ms",
        p.flow_name(fi),
        ps.join(", "),
        p.type_of(f.result),
        if f.entry { " entry" } else { "" },
        f.cp_ms
    );
    for (ri, r) in f.regions.iter().enumerate() {
        let key = match &r.kind {
            RegionKind::Case(k) => format!(" {k:?}"),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "    region {ri} {}{key}: args {}, captures [{}], slots {}, roots [{}]",
            r.kind.label(),
            r.n_args,
            slots(&r.captures),
            r.n_slots(),
            r.roots
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (oi, op) in r.ops.iter().enumerate() {
            let res: Vec<String> = op
                .results()
                .map(|s| {
                    let t = r.slot_types.get(s as usize).map(|&t| p.type_of(t));
                    format!("s{s}: {}", t.map(|t| t.to_string()).unwrap_or_default())
                })
                .collect();
            let lhs = if res.is_empty() {
                String::new()
            } else {
                format!("{} = ", res.join(", "))
            };
            let mut ins = slots(r.data(op));
            if op.n_tokens > 0 {
                let _ = write!(ins, " ord[{}]", slots(r.tokens(op)));
            }
            if op.n_deps > 0 {
                let _ = write!(ins, " deps[{}]", slots(r.deps(op)));
            }
            let regions = if op.regions.is_empty() {
                String::new()
            } else {
                format!(
                    " regions[{}]",
                    op.regions
                        .iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let cons: Vec<String> = op
                .results()
                .flat_map(|s| r.consumers_of(s).iter().map(|c| c.to_string()))
                .collect();
            let head = format!(
                "{}{}{}",
                op.opcode,
                if ins.is_empty() { "" } else { " " },
                ins
            );
            let _ = writeln!(
                o,
                "      {oi:>4}: {lhs}{head}{}{regions}   ; pending {} → [{}] est {} ms, rem {} ms @{}..{}",
                imm_text(p, &op.imm),
                r.pending.get(oi).copied().unwrap_or(0),
                cons.join(", "),
                op.est_ms,
                op.rem_ms,
                op.span.start,
                op.span.end
            );
        }
    }
}
