//! The structurizer (issue 37) on deep flat control flow: branches nested
//! N deep (each true arm holds the next branch, each level joined by a
//! `MERGE`) are read without recursion that follows the input, into N
//! nested `if`s, and reading twice the depth costs about twice the work
//! (`ais_ir::work`, counted, not timed).

use ais_compiler::{driver, graph_json};
use serde_json::json;

/// Level `d` (ids 4d+1 .. 4d+4): a condition, the branch, the false arm's
/// constant, the join of the inner level (or the leaf) and the false arm.
fn nested(n: u64) -> String {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let leaf = 4 * n + 1;
    for d in 0..n {
        let (c, b, e, j) = (4 * d + 1, 4 * d + 2, 4 * d + 3, 4 * d + 4);
        let inner_first = if d + 1 < n { c + 4 } else { leaf };
        let inner_last = if d + 1 < n { j + 4 } else { leaf };
        nodes.push(json!({"id": c, "name": format!("c{d}"), "op": "CONST_STR", "attributes": {"value": "a"}}));
        nodes.push(
            json!({"id": b, "name": format!("b{d}"), "op": "BRANCH_ON_VALUE",
            "attributes": {"value": "a", "label_true": inner_first, "label_false": e}}),
        );
        nodes.push(json!({"id": e, "name": format!("e{d}"), "op": "CONST_STR", "attributes": {"value": format!("else {d}")}}));
        nodes.push(json!({"id": j, "name": format!("j{d}"), "op": "MERGE", "attributes": {"strategy": "array"}}));
        edges.push(json!({"from": c, "to": b, "dependency": "Data"}));
        edges.push(json!({"from": b, "to": inner_first, "dependency": "Control"}));
        edges.push(json!({"from": b, "to": e, "dependency": "Control"}));
        edges.push(json!({"from": inner_last, "to": j, "dependency": "Data"}));
        edges.push(json!({"from": e, "to": j, "dependency": "Data"}));
    }
    nodes.push(
        json!({"id": leaf, "name": "leaf", "op": "CONST_STR", "attributes": {"value": "leaf"}}),
    );
    nodes.push(json!({"id": leaf + 1, "name": "done", "op": "RETURN", "attributes": {"token": "{{node_4}}"}}));
    edges.push(json!({"from": 4, "to": leaf + 1, "dependency": "Data"}));
    json!({"name": "deep", "nodes": nodes, "edges": edges, "parameters": []}).to_string()
}

/// The work of reading `nested(n)`, and how many `if`s it became.
fn read(n: u64) -> (u64, usize) {
    driver::with_deep_stack(move || {
        let text = nested(n);
        ais_ir::work::take();
        let module = match graph_json::compile(&text) {
            Ok(m) => m,
            Err(d) => panic!("reads: {:?}", d.first()),
        };
        let work = ais_ir::work::take();
        let ifs = ais_ir::printer::print_module(&module)
            .matches(" = if ")
            .count();
        (work, ifs)
    })
}

#[test]
fn deep_flat_branches_become_nested_ifs_in_near_linear_work() {
    let (w1, i1) = read(250);
    let (w2, i2) = read(500);
    let (w4, i4) = read(1000);
    assert_eq!((i1, i2, i4), (250, 500, 1000), "one `if` per branch");
    eprintln!("work: 250 deep {w1}, 500 deep {w2}, 1000 deep {w4}");
    assert!(w1 > 0, "reading counted no work");
    for (small, big) in [(w1, w2), (w2, w4)] {
        let ratio = big as f64 / small as f64;
        assert!(
            ratio <= 2.3,
            "work grew {ratio:.2}x for 2x the depth ({small} -> {big})"
        );
    }
}

/// The structure is right, not only its size: four levels, each true
/// branch taken, give the leaf nested in four one-element arrays (the
/// join of a branch is the taken arm's value).
#[test]
fn deep_flat_branches_keep_their_meaning() {
    let module = graph_json::compile(&nested(4)).expect("reads");
    let ir = ais_ir::printer::print_module(&module);
    assert_eq!(ir.matches(" = if ").count(), 4, "{ir}");
    // Each level's join (`list`) is outside its `if`, inside the outer
    // level's then-arm: four lists, the outermost in the flow body.
    assert_eq!(ir.matches(" = list ").count(), 4, "{ir}");
    let body_lines: Vec<&str> = ir.lines().filter(|l| l.starts_with("    %")).collect();
    assert!(
        body_lines.iter().any(|l| l.contains(" = list ")),
        "the outermost join is in the body: {ir}"
    );
}
