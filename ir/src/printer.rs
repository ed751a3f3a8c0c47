//! The canonical textual form of the IR (`.aisir`).
//!
//! Flow parameters print by name (`%topic`); every other value prints as
//! `%N`, numbered per flow in definition order (an op's results, then the
//! arguments and ops of its regions, in pre-order). The grammar is in
//! `docs/ir.md`; `parse(print(m))` reproduces `m` up to value numbering.

use crate::entity::{Region, Value};
use crate::module::{AgentData, Attr, BeliefInit, Dfg, FlowData, Module};
use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write;

/// Prints a whole module.
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    for (i, (_, agent)) in m.agents.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print_agent(&mut out, agent);
    }
    out
}

/// Printer-visible names (`%topic`, `%3`) of every value defined in a flow.
pub fn value_names(flow: &FlowData) -> HashMap<Value, String> {
    let mut names = HashMap::default();
    for (name, v) in &flow.params {
        names.insert(*v, format!("%{name}"));
    }
    let mut next = 0usize;
    number_region(&flow.dfg, flow.body, &mut names, &mut next, &mut Vec::new());
    names
}

fn number_region(
    dfg: &Dfg,
    region: Region,
    names: &mut HashMap<Value, String>,
    next: &mut usize,
    stack: &mut Vec<Region>,
) {
    if stack.contains(&region) {
        return;
    }
    let Some(rd) = dfg.regions.get(region) else {
        return;
    };
    stack.push(region);
    for &a in &rd.args {
        names.entry(a).or_insert_with(|| fresh(next));
    }
    for &op in &rd.ops {
        let Some(od) = dfg.ops.get(op) else { continue };
        for &r in &od.results {
            names.entry(r).or_insert_with(|| fresh(next));
        }
        for &r in &od.regions {
            number_region(dfg, r, names, next, stack);
        }
    }
    stack.pop();
}

fn fresh(next: &mut usize) -> String {
    let s = format!("%{next}");
    *next += 1;
    s
}

fn print_agent(out: &mut String, a: &AgentData) {
    let _ = writeln!(out, "agent @{} {{", a.name);
    for m in &a.memory {
        let _ = writeln!(out, "  memory @{} : {}", m.name, m.tier.name());
    }
    for b in &a.beliefs {
        let init = match &b.init {
            BeliefInit::Const(v) => format!("json {}", json_text(v)),
            BeliefInit::Flow(f) => match a.flows.get(*f) {
                Some(fd) => format!("@{}", fd.name),
                None => format!("@<bad {f}>"),
            },
        };
        let _ = writeln!(out, "  belief @{} = {init}", b.name);
    }
    for g in &a.goals {
        let _ = writeln!(
            out,
            "  goal @{} priority {} {}",
            g.name,
            g.priority,
            quote(&g.description)
        );
    }
    for c in &a.capabilities {
        let params: Vec<String> = c.params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
        // `@name`, or the quoted name when it is no identifier (`"ev.get-sum"`).
        let name = if crate::verifier::is_ident(&c.name) {
            format!("@{}", c.name)
        } else {
            quote(&c.name)
        };
        let _ = writeln!(
            out,
            "  capability {name}({}) -> {}",
            params.join(", "),
            c.result
        );
    }
    for h in &a.handlers {
        let flow = a
            .flows
            .get(h.flow)
            .map_or_else(|| format!("<bad {}>", h.flow), |f| f.name.clone());
        let _ = writeln!(out, "  on {} @{flow}", quote(&h.event));
    }
    for (_, f) in a.flows.iter() {
        print_flow(out, f);
    }
    out.push_str("}\n");
}

/// Prints one flow (at agent indentation).
pub fn print_flow(out: &mut String, f: &FlowData) {
    let names = value_names(f);
    let params: Vec<String> = f
        .params
        .iter()
        .map(|(n, v)| {
            let ty = f
                .dfg
                .values
                .get(*v)
                .map_or_else(|| "<bad>".to_string(), |d| d.ty.to_string());
            format!("%{n}: {ty}")
        })
        .collect();
    let _ = write!(
        out,
        "  flow @{}({}) -> {}",
        f.name,
        params.join(", "),
        f.result
    );
    if f.entry {
        out.push_str(" entry");
    }
    if f.discoverable {
        out.push_str(" discoverable");
    }
    out.push_str(" {\n");
    let p = Printer {
        dfg: &f.dfg,
        names: &names,
    };
    if let Some(rd) = f.dfg.regions.get(f.body) {
        let mut stack = vec![f.body];
        for &op in &rd.ops {
            p.op(out, op, 2, &mut stack);
        }
    }
    out.push_str("  }\n");
}

struct Printer<'a> {
    dfg: &'a Dfg,
    names: &'a HashMap<Value, String>,
}

impl Printer<'_> {
    fn name(&self, v: Value) -> String {
        self.names
            .get(&v)
            .cloned()
            .unwrap_or_else(|| format!("%undef_{}", v.as_u32()))
    }

    fn ty(&self, v: Value) -> String {
        self.dfg
            .values
            .get(v)
            .map_or_else(|| "<bad>".to_string(), |d| d.ty.to_string())
    }

    fn op(&self, out: &mut String, op: crate::Op, depth: usize, stack: &mut Vec<Region>) {
        indent(out, depth);
        let Some(od) = self.dfg.ops.get(op) else {
            let _ = writeln!(out, "<bad {op}>");
            return;
        };
        if !od.results.is_empty() {
            let rs: Vec<String> = od.results.iter().map(|&v| self.name(v)).collect();
            let _ = write!(out, "{} = ", rs.join(", "));
        }
        out.push_str(od.opcode.mnemonic());
        if !od.operands.is_empty() {
            let os: Vec<String> = od.operands.iter().map(|&v| self.name(v)).collect();
            let _ = write!(out, " {}", os.join(", "));
        }
        if !od.attrs.is_empty() {
            let attrs: Vec<String> = od.attrs.iter().map(|(n, a)| attr_text(n, a)).collect();
            let _ = write!(out, " {{{}}}", attrs.join(", "));
        }
        if !od.results.is_empty() {
            let ts: Vec<String> = od.results.iter().map(|&v| self.ty(v)).collect();
            let _ = write!(out, " : {}", ts.join(", "));
        }
        if od.regions.is_empty() {
            out.push('\n');
            return;
        }
        out.push_str(" {\n");
        for &r in &od.regions {
            self.region(out, r, depth + 1, stack);
        }
        indent(out, depth);
        out.push_str("}\n");
    }

    fn region(&self, out: &mut String, r: Region, depth: usize, stack: &mut Vec<Region>) {
        indent(out, depth);
        let Some(rd) = self.dfg.regions.get(r).filter(|_| !stack.contains(&r)) else {
            let _ = writeln!(out, "<bad {r}> {{}}");
            return;
        };
        out.push_str(&rd.label);
        if let Some(k) = &rd.key {
            let _ = write!(out, " {}", quote(k));
        }
        if !rd.args.is_empty() {
            let args: Vec<String> = rd
                .args
                .iter()
                .map(|&v| format!("{}: {}", self.name(v), self.ty(v)))
                .collect();
            let _ = write!(out, "({})", args.join(", "));
        }
        out.push_str(" {\n");
        stack.push(r);
        for &op in &rd.ops {
            self.op(out, op, depth + 1, stack);
        }
        stack.pop();
        indent(out, depth);
        out.push_str("}\n");
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// A JSON-escaped, double-quoted string.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn json_text(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_string())
}

/// Prints a number so that the lexer reads back the same `f64`.
pub fn number_text(n: f64) -> String {
    if n.is_nan() {
        "NaN".to_string()
    } else {
        format!("{n}")
    }
}

/// `name = value` (or just `name` for flags).
pub fn attr_text(name: &str, a: &Attr) -> String {
    let v = match a {
        Attr::Flag => return name.to_string(),
        Attr::Str(s) => quote(s),
        Attr::Number(n) => number_text(*n),
        Attr::Bool(b) => b.to_string(),
        Attr::Symbol { agent, flow } => format!("@{agent}.{flow}"),
        Attr::Type(t) => format!("type {t}"),
        Attr::Json(j) => format!("json {}", json_text(j)),
    };
    format!("{name} = {v}")
}
