//! Reading graph JSON nested N deep is linear in N (issue 37): lifting an
//! edge into the region both its ends share used to walk the nesting parent
//! by parent, and each region's nodes were found by scanning every node, so
//! a deep graph cost O(N²). Counted as work (`ais_ir::work`), not timed.

use ais_compiler::{driver, graph_json};

/// `n` nested `if`s; every level reads `k`, bound in the flow body, so
/// each level has an edge from the top of the nesting to its depth.
fn nested(n: usize) -> String {
    let mut s = String::from(
        "agent A {\n    @entry flow main(x: str) -> str {\n        let k = x + \"k\"\n        let acc = x\n",
    );
    for d in 0..n {
        s.push_str(&format!(
            "if (acc != k) {{\nlet n{d} = acc + k\nacc = n{d}\n"
        ));
    }
    for _ in 0..n {
        s.push_str("}\n");
    }
    s.push_str("        return acc\n    }\n}\n");
    s
}

/// The work of reading back the graph JSON written for `nested(n)`, and
/// the document's node count.
fn read_work(n: usize) -> (u64, usize) {
    driver::with_deep_stack(move || {
        let module = match driver::lower_source(&nested(n)) {
            Ok(m) => m,
            Err(d) => panic!("lowers: {:?}", d.first()),
        };
        let json = graph_json::emit::emit(&module).expect("emits");
        let nodes = json.matches("\"op\"").count();
        ais_ir::work::take();
        let back = graph_json::compile(&json).expect("reads back");
        let work = ais_ir::work::take();
        assert_eq!(
            ais_ir::printer::print_module(&back),
            ais_ir::printer::print_module(&module),
            "the document reads back as the same IR"
        );
        (work, nodes)
    })
}

#[test]
fn reading_twice_the_nesting_at_most_doubles_the_work() {
    let (w1, n1) = read_work(250);
    let (w2, n2) = read_work(500);
    let (w4, n4) = read_work(1000);
    assert!(n2 > n1 && n4 > n2, "the documents grow: {n1} {n2} {n4}");
    eprintln!("work: {n1} nodes {w1}, {n2} nodes {w2}, {n4} nodes {w4}");
    assert!(w1 > 0, "reading counted no work");
    for (small, big) in [(w1, w2), (w2, w4)] {
        let ratio = big as f64 / small as f64;
        assert!(
            ratio <= 2.2,
            "work grew {ratio:.2}x for 2x the nesting ({small} -> {big})"
        );
    }
}

/// Nodes inside a region are ordered by their edges, not by where the
/// document lists them: the graph written for a nested program, with its
/// node list reversed, reads back (independent nodes may come in another
/// order) as the same ops.
#[test]
fn nodes_of_a_nested_region_are_ordered_by_their_edges() {
    let source = "agent A {\n    @entry flow main(x: str) -> str {\n        let acc = x\n        if (x != \"b\") {\n            let n = acc + \"1\"\n            let m = n + \"2\"\n            acc = m\n        }\n        return acc\n    }\n}\n";
    let module = match driver::lower_source(source) {
        Ok(m) => m,
        Err(d) => panic!("lowers: {:?}", d.first()),
    };
    let json = graph_json::emit::emit(&module).expect("emits");
    let mut doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let nodes = doc["nodes"].as_array_mut().expect("nodes");
    assert!(
        nodes.iter().any(|n| n.get("parent").is_some()),
        "the if's region has nodes"
    );
    nodes.reverse();
    let back = graph_json::compile(&doc.to_string()).expect("reads back");
    assert_eq!(
        ops(&ais_ir::printer::print_module(&back)),
        ops(&ais_ir::printer::print_module(&module))
    );
}

/// The lines of textual IR with value numbers left out, sorted.
fn ops(ir: &str) -> Vec<String> {
    let mut lines: Vec<String> = ir
        .lines()
        .map(|l| {
            let mut out = String::new();
            let mut after_percent = false;
            for c in l.chars() {
                if after_percent && c.is_ascii_digit() {
                    continue;
                }
                after_percent = c == '%' || (after_percent && c.is_ascii_digit());
                out.push(c);
            }
            out
        })
        .collect();
    lines.sort();
    lines
}
