//! The graph-JSON front end (`ais_compiler::graph_json`):
//! - every example and reference-style program survives `.ais` → graph
//!   JSON → IR with the same textual IR as compiling it directly;
//! - `tests/graph-json/ok/` (reference-shaped graphs) compile;
//! - each `tests/graph-json/errors/GXXXX_*.json` fails with its code, and
//!   the rendered report matches its `.stderr` golden (`AIS_BLESS=1`
//!   rewrites them: read each before committing);
//! - mutated graph JSON gives coded errors, never a panic.

use ais_compiler::diagnostics::{explain, render_human};
use ais_compiler::{driver, graph_json};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

#[test]
fn every_program_round_trips_through_graph_json() {
    let mut programs = files("examples", "ais");
    programs.extend(files("tests/reference-style", "ais"));
    assert!(programs.len() >= 30, "only {} programs", programs.len());
    for p in programs {
        let source = std::fs::read_to_string(&p).expect("source");
        let direct =
            driver::lower_source(&source).unwrap_or_else(|d| panic!("{}: {d:?}", p.display()));
        let json = graph_json::emit(&direct).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let back = graph_json::compile(&json).unwrap_or_else(|d| {
            panic!("{}: the emitted graph does not compile: {d:?}", p.display())
        });
        assert_eq!(
            ais_ir::print_module(&back),
            ais_ir::print_module(&direct),
            "{}",
            p.display()
        );
        // And emission is stable: the graph of the graph is the graph.
        assert_eq!(
            graph_json::emit(&back).expect("emits"),
            json,
            "{}",
            p.display()
        );
    }
}

#[test]
fn reference_shaped_graphs_compile() {
    let ok = files("tests/graph-json/ok", "json");
    assert!(!ok.is_empty());
    for p in ok {
        let text = std::fs::read_to_string(&p).expect("graph");
        let m = graph_json::compile(&text).unwrap_or_else(|d| panic!("{}: {d:?}", p.display()));
        let entry = m.agents.iter().any(|(_, a)| a.entry().is_some());
        assert!(entry, "{}: no entry flow", p.display());
    }
}

#[test]
fn reference_prompts_become_templates_over_the_inputs() {
    let text = std::fs::read_to_string(root().join("tests/graph-json/ok/reference_chain.json"))
        .expect("graph");
    let m = graph_json::compile(&text).expect("compiles");
    let ir = ais_ir::print_module(&m);
    assert!(
        ir.contains("template %0 {template = \"Answer briefly: {0}\"}"),
        "{ir}"
    );
    assert!(ir.contains("wait_all"), "{ir}");
    // The last sink is the flow's result.
    assert!(ir.contains("flow @main() -> str entry"), "{ir}");
}

#[test]
fn error_cases_match_their_goldens() {
    let bless = std::env::var_os("AIS_BLESS").is_some();
    let cases = files("tests/graph-json/errors", "json");
    assert!(cases.len() >= 11, "only {} error cases", cases.len());
    let mut codes = std::collections::BTreeSet::new();
    for p in cases {
        let name = p.file_name().expect("name").to_string_lossy().into_owned();
        let code = &name[..5];
        let text = std::fs::read_to_string(&p).expect("graph");
        let diags = graph_json::compile(&text).expect_err(&name);
        assert_eq!(diags[0].code, code, "{name}: {diags:?}");
        assert!(explain::explain(code).is_some(), "{code} is not explained");
        codes.insert(code.to_string());
        let file = format!("tests/graph-json/errors/{name}");
        let rendered: String = diags
            .iter()
            .map(|d| render_human(d, &file, &text, false))
            .collect();
        let golden = p.with_extension("stderr");
        if bless {
            std::fs::write(&golden, &rendered).expect("bless");
        } else {
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e} (bless with AIS_BLESS=1)", golden.display()));
            assert_eq!(rendered, want, "{name}");
        }
    }
    for c in 1..=11 {
        assert!(
            codes.contains(&format!("G{c:04}")),
            "no error case for G{c:04}"
        );
    }
}

#[test]
fn a_program_without_an_entry_cannot_be_emitted() {
    let mut m = ais_ir::Module::new();
    let mut a = ais_ir::AgentData::new("Lib");
    let mut f = ais_ir::FlowData::new("helper", ais_ir::Type::Void);
    f.builder();
    let body = f.body;
    let ret = f.dfg.create_op(ais_ir::Opcode::Return, &[], &[]);
    f.dfg.append_op(body, ret);
    a.add_flow(f);
    m.add_agent(a);
    let e = graph_json::emit(&m).expect_err("no entry");
    assert_eq!(e.code(), "G0012");
}

/// A valid document to mutate: a program with regions, tokens and calls.
fn seed() -> String {
    let source =
        std::fs::read_to_string(root().join("examples/11_verify_fix_retry.ais")).expect("example");
    let m = driver::lower_source(&source).expect("compiles");
    graph_json::emit(&m).expect("emits")
}

fn assert_coded(text: &str) -> Result<(), TestCaseError> {
    if let Err(diags) = graph_json::compile(text) {
        prop_assert!(!diags.is_empty());
        for d in &diags {
            prop_assert!(
                explain::explain(d.code).is_some(),
                "uncoded diagnostic {} {}",
                d.code,
                d.message
            );
            prop_assert!(d.primary.span.end as usize <= text.len());
        }
    }
    Ok(())
}

/// Every JSON value of a document, by path, to pick one to change.
fn paths(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                paths(
                    x,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                paths(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn replacement(k: u8, n: u64) -> Option<serde_json::Value> {
    use serde_json::json;
    Some(match k % 8 {
        0 => return None, // drop the field or element
        1 => json!(n),
        2 => json!(format!("x{n}")),
        3 => json!(null),
        4 => json!([n]),
        5 => json!({"id": n}),
        6 => json!(true),
        _ => json!(-1.5),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_graphs_give_coded_errors(pick in any::<usize>(), k in any::<u8>(), n in 0u64..40) {
        let text = seed();
        let mut doc: serde_json::Value = serde_json::from_str(&text).expect("json");
        let mut all = Vec::new();
        paths(&doc, String::new(), &mut all);
        let at = all[pick % all.len()].clone();
        if at.is_empty() {
            return Ok(());
        }
        let (parent, last) = at.rsplit_once('/').expect("a path");
        let last = last.replace("~1", "/").replace("~0", "~");
        if let Some(container) = doc.pointer_mut(parent) {
            match (container, replacement(k, n)) {
                (serde_json::Value::Object(o), None) => { o.remove(&last); }
                (serde_json::Value::Object(o), Some(v)) => { o.insert(last, v); }
                (serde_json::Value::Array(a), r) => {
                    let i: usize = last.parse().expect("index");
                    match r {
                        None => { a.remove(i); }
                        Some(v) => a[i] = v,
                    }
                }
                _ => {}
            }
        }
        let mutated = serde_json::to_string_pretty(&doc).expect("json");
        assert_coded(&mutated)?;
    }

    /// The structurizer on mutated flat control flow (labels pointing
    /// anywhere, edges gone): a coded error or a graph, never a panic.
    #[test]
    fn mutated_flat_control_flow_gives_coded_errors(pick in any::<usize>(), k in any::<u8>(), n in 0u64..12) {
        let text = std::fs::read_to_string(root().join("tests/reference/graphs/flat_nested.json")).expect("seed");
        prop_assert!(graph_json::compile(&text).is_ok());
        let mut doc: serde_json::Value = serde_json::from_str(&text).expect("json");
        let mut all = Vec::new();
        paths(&doc, String::new(), &mut all);
        let at = all[pick % all.len()].clone();
        if let Some((parent, last)) = at.rsplit_once('/') {
            let label = replacement(k, n).map(|v| match v {
                serde_json::Value::String(_) => serde_json::json!(n.to_string()),
                v => v,
            });
            if let Some(container) = doc.pointer_mut(parent) {
                match (container, label) {
                    (serde_json::Value::Object(o), None) => { o.remove(last); }
                    (serde_json::Value::Object(o), Some(v)) => { o.insert(last.to_string(), v); }
                    (serde_json::Value::Array(a), r) => {
                        let i: usize = last.parse().expect("index");
                        match r {
                            None => { a.remove(i); }
                            Some(v) => a[i] = v,
                        }
                    }
                    _ => {}
                }
            }
        }
        assert_coded(&serde_json::to_string_pretty(&doc).expect("json"))?;
    }

    #[test]
    fn truncated_graphs_give_coded_errors(cut in any::<usize>()) {
        let text = seed();
        let mut at = cut % text.len();
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let r = graph_json::compile(&text[..at]);
        prop_assert!(r.is_err());
        assert_coded(&text[..at])?;
    }

    #[test]
    fn edited_bytes_give_coded_errors(at in any::<usize>(), bytes in proptest::collection::vec(any::<u8>(), 1..6)) {
        let text = seed();
        let mut b = text.into_bytes();
        let i = at % b.len();
        b.splice(i..i, bytes);
        let text = String::from_utf8_lossy(&b).into_owned();
        assert_coded(&text)?;
    }

    #[test]
    fn random_edges_give_coded_errors(from in 0u64..60, to in 0u64..60, dep in 0u8..3, operand in proptest::option::of(0usize..5)) {
        let text = seed();
        let mut doc: serde_json::Value = serde_json::from_str(&text).expect("json");
        let dependency = ["Data", "Effect", "Control"][dep as usize];
        let mut edge = serde_json::json!({"from": from, "to": to, "dependency": dependency});
        if let Some(k) = operand {
            edge["operand"] = k.into();
        }
        doc["edges"].as_array_mut().expect("edges").push(edge);
        let mutated = serde_json::to_string(&doc).expect("json");
        assert_coded(&mutated)?;
    }
}

/// The reference validator's rules (its CLI's `validate`, read as a
/// specification): a name, at least one node, ids above 0 and unique, node
/// names, every op in its op list with the attributes it requires, edges
/// between existing nodes, no self-loop, no cycle.
fn reference_rule_breaks(g: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if g["name"].as_str().is_none_or(str::is_empty) {
        out.push("empty graph name".to_string());
    }
    let nodes = g["nodes"].as_array().cloned().unwrap_or_default();
    if nodes.is_empty() {
        out.push("no nodes".into());
    }
    let mut ids = std::collections::HashSet::new();
    for n in &nodes {
        let id = n["id"].as_u64().unwrap_or(0);
        let op = n["op"].as_str().unwrap_or("");
        if id == 0 || !ids.insert(id) {
            out.push(format!("bad or duplicate id {id}"));
        }
        if n["name"].as_str().is_none_or(|s| s.trim().is_empty()) {
            out.push(format!("node {id} has no name"));
        }
        match ais_ir::ops::reference_required(op) {
            None => out.push(format!("node {id}: `{op}` is not a reference op")),
            Some(req) => {
                for r in req {
                    if n["attributes"].get(*r).is_none() {
                        out.push(format!("node {id} ({op}) lacks `{r}`"));
                    }
                }
            }
        }
    }
    let mut succ: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    let mut indeg: std::collections::HashMap<u64, usize> = ids.iter().map(|&i| (i, 0)).collect();
    for e in g["edges"].as_array().cloned().unwrap_or_default() {
        let (from, to) = (
            e["from"].as_u64().unwrap_or(0),
            e["to"].as_u64().unwrap_or(0),
        );
        if from == to || !ids.contains(&from) || !ids.contains(&to) {
            out.push(format!("bad edge {from} -> {to}"));
            continue;
        }
        if !matches!(
            e["dependency"].as_str(),
            Some("Data" | "Control" | "Effect")
        ) {
            out.push(format!("edge {from} -> {to}: bad dependency"));
        }
        succ.entry(from).or_default().push(to);
        *indeg.entry(to).or_default() += 1;
    }
    let mut ready: Vec<u64> = indeg
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(i, _)| *i)
        .collect();
    let mut seen = 0;
    while let Some(x) = ready.pop() {
        seen += 1;
        for y in succ.get(&x).cloned().unwrap_or_default() {
            let d = indeg.get_mut(&y).expect("node");
            *d -= 1;
            if *d == 0 {
                ready.push(y);
            }
        }
    }
    if seen != ids.len() {
        out.push("cycle".into());
    }
    out
}

#[test]
fn emitted_graphs_pass_the_reference_validator_rules() {
    let mut programs = files("examples", "ais");
    programs.extend(files("tests/reference-style", "ais"));
    let mut checked = 0;
    for p in programs {
        let source = std::fs::read_to_string(&p).expect("source");
        let m = driver::lower_source(&source).unwrap_or_else(|d| panic!("{}: {d:?}", p.display()));
        let doc: serde_json::Value =
            serde_json::from_str(&graph_json::emit(&m).expect("emits")).expect("json");
        let mut graphs = vec![doc.clone()];
        graphs.extend(doc["graphs"].as_array().cloned().unwrap_or_default());
        for g in graphs {
            let breaks = reference_rule_breaks(&g);
            assert!(
                breaks.is_empty(),
                "{}: {}: {breaks:?}",
                p.display(),
                g["name"]
            );
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} graphs");
}
