//! `aisc ops [NAME]`: the op table, as the toolchain reads it
//! (`ais_ir::Opcode::info`): operands, results, attributes, effect,
//! latency class, execution class.

use super::output::Output;
use ais_ir::ops::AttrKind;
use ais_ir::{Arity, OpInfo, Opcode, ResultRule};
use serde_json::{json, Value as Json};

fn arity(a: Arity) -> String {
    match a {
        Arity::Fixed(n) => n.to_string(),
        Arity::AtLeast(n) => format!("{n}+"),
        Arity::Range(a, b) => format!("{a}..={b}"),
    }
}

fn kind(k: AttrKind) -> String {
    format!("{k:?}").to_lowercase()
}

fn results(i: &OpInfo) -> String {
    match i.result_rule {
        ResultRule::Fixed(ts) => ts
            .iter()
            .map(|c| c.to_type().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn attrs(i: &OpInfo) -> String {
    i.attrs
        .iter()
        .map(|a| {
            format!(
                "{}{}: {}",
                a.name,
                if a.required { "" } else { "?" },
                kind(a.kind)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn as_json(op: Opcode) -> Json {
    let i = op.info();
    json!({
        "op": op.mnemonic(),
        "operands": arity(i.operands),
        "ordering_tokens": i.takes_ord,
        "results": results(i),
        "attributes": i.attrs.iter().map(|a| json!({
            "name": a.name, "kind": kind(a.kind), "required": a.required,
        })).collect::<Vec<_>>(),
        "effect": i.effect.name(),
        "latency": i.latency.name(),
        "latency_ms": i.latency.nominal_ms(),
        "exec": format!("{:?}", i.exec).to_lowercase(),
        "llm": i.llm.map(|k| k.name()),
        "journaled": i.journaled,
        "regions": format!("{:?}", i.regions).to_lowercase(),
        "reference": op.reference_form(),
        "reference_attributes": op.reference_attrs(),
        "reference_flat_attributes": op.reference_flat_attrs(),
        "reference_renames": if i.llm.is_some() { ais_ir::ops::REFERENCE_LLM_RENAMES } else { &[] },
    })
}

/// Prints the table, or one op; 1 for an unknown name (with the closest).
pub fn ops(out: &mut Output, name: Option<&str>, json_out: bool) -> i32 {
    let selected: Vec<Opcode> = match name {
        None => Opcode::ALL.to_vec(),
        Some(n) => match Opcode::from_mnemonic(n).or_else(|| Opcode::from_graph_name(n)) {
            Some(op) => vec![op],
            None if ais_ir::ops::REFERENCE_ONLY_READ_AS
                .iter()
                .any(|(r, _)| *r == n) =>
            {
                let mut text = String::new();
                for (r, what) in ais_ir::ops::REFERENCE_ONLY_READ_AS {
                    if *r == n {
                        text.push_str(&format!(
                            "{r} (the reference's op; none of ours)\n  read as:    {what}\n"
                        ));
                    }
                }
                out.stdout(&text);
                return 0;
            }
            None => {
                let names: Vec<String> = Opcode::ALL
                    .iter()
                    .map(|o| o.mnemonic().to_string())
                    .collect();
                let close = ais_compiler::sema::closest(n, names.iter());
                eprintln!("error: no op named `{n}`");
                if let Some(c) = close {
                    eprintln!("help: did you mean `{c}`? (`aisc ops` lists them all)");
                }
                return 1;
            }
        },
    };
    let mut text = String::new();
    let mut line = |l: String| {
        text.push_str(&l);
        text.push('\n');
    };
    if json_out {
        for op in selected {
            line(as_json(op).to_string());
        }
    } else if let [op] = selected[..] {
        describe(op, &mut line);
    } else {
        line(format!(
            "{:<12} {:<9} {:<14} {:<9} {:<8} attributes",
            "op", "operands", "results", "effect", "latency"
        ));
        for op in selected {
            let i = op.info();
            line(format!(
                "{:<12} {:<9} {:<14} {:<9} {:<8} {}",
                op.mnemonic(),
                arity(i.operands),
                results(i),
                i.effect.name(),
                i.latency.name(),
                attrs(i)
            ));
        }
    }
    out.stdout(&text);
    0
}

fn describe(op: Opcode, line: &mut impl FnMut(String)) {
    let i = op.info();
    line(op.mnemonic().to_string());
    line(format!(
        "  operands:   {}{}",
        arity(i.operands),
        if i.takes_ord {
            " (+ ordering tokens)"
        } else {
            ""
        }
    ));
    line(format!("  results:    {}", results(i)));
    line(format!(
        "  attributes: {}",
        if i.attrs.is_empty() {
            "none".into()
        } else {
            attrs(i)
        }
    ));
    line(format!("  effect:     {}", i.effect.name()));
    line(format!(
        "  latency:    {} ({} ms nominal)",
        i.latency.name(),
        i.latency.nominal_ms()
    ));
    line(format!(
        "  executes:   {}",
        format!("{:?}", i.exec).to_lowercase()
    ));
    if let Some(k) = i.llm {
        line(format!(
            "  LLM kind:   {} (configuration key `[instruction] {}`)",
            k.name(),
            k.name()
        ));
    }
    line(format!(
        "  journaled:  {}",
        if i.journaled { "yes" } else { "no" }
    ));
    // The reference's spelling: its op name and attribute names.
    let written = op.reference_form();
    line(format!(
        "  reference:  {written}{}{}",
        if written == op.graph_name() {
            String::new()
        } else {
            format!(" (with `ais_op: \"{}\"`)", op.mnemonic())
        },
        if op.reference_attrs().is_empty() {
            String::new()
        } else {
            format!("; attributes {}", op.reference_attrs().join(", "))
        }
    ));
    if i.llm.is_some() {
        let renames: Vec<String> = ais_ir::ops::REFERENCE_LLM_RENAMES
            .iter()
            .map(|(r, ours)| format!("{r} (= {ours})"))
            .collect();
        line(format!("  also:       {}", renames.join(", ")));
    }
    if !op.reference_flat_attrs().is_empty() {
        line(format!(
            "  flat form:  {}",
            op.reference_flat_attrs().join(", ")
        ));
    }
}
