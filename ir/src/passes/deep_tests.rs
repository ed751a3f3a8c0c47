//! Passes on regions nested deeper than any fixed cutoff: the walks here
//! used to recurse with the nesting and stop silently (CSE at 256 levels,
//! erasing at 4096), leaving deep regions unmerged or still listing ops
//! that were erased with their parent.

use super::util::erase_ops;
use super::PassManager;
use crate::{parse_module, print_module, verify_errors};

/// A flow of `depth` nested `if`s; the innermost region computes the same
/// template twice. Text, because that is how a deep graph arrives from
/// outside (IR text or graph JSON) past the source language's own limit.
fn nested(depth: usize) -> String {
    let mut s = String::from(
        "agent @A {\n  flow @main(%x: str) -> str entry {\n    %0 = const {value = true} : bool\n",
    );
    for i in 0..depth {
        s.push_str(&format!(
            "    %{} = if %0 : str {{\n      then {{\n",
            10 + i
        ));
    }
    s.push_str("    %1 = template %x {template = \"a {0}\"} : str\n");
    s.push_str("    %2 = template %x {template = \"a {0}\"} : str\n");
    s.push_str("    %3 = concat %1, %2 : str\n    yield %3\n");
    for i in (0..depth).rev() {
        s.push_str("      }\n      else {\n        yield %x\n      }\n    }\n");
        if i > 0 {
            s.push_str(&format!("    yield %{}\n", 10 + i));
        }
    }
    s.push_str("    return %10\n  }\n}\n");
    s
}

/// Runs `f` on a thread with a large stack: the parser and printer used to
/// build and show these modules are not what is under test here.
fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(f)
        .expect("thread")
        .join()
        .expect("no panic")
}

#[test]
fn cse_merges_below_256_levels() {
    let (merged, out) = big_stack(|| {
        let mut m = parse_module(&nested(400)).expect("parses");
        assert!(verify_errors(&m).is_empty(), "{:?}", verify_errors(&m));
        let mut pm = PassManager::parse("cse").expect("pipeline");
        let stats = pm.run(&mut m).expect("verifies");
        (stats.passes[0].removed, print_module(&m))
    });
    assert_eq!(merged, 1, "the duplicate 400 levels down is merged");
    assert_eq!(out.matches("= template").count(), 1);
}

#[test]
fn erasing_empties_every_nested_region() {
    let regions_listing_ops = big_stack(|| {
        let mut m = parse_module(&nested(6000)).expect("parses");
        let (_, agent) = m.agents.iter_mut().next().expect("agent");
        let (_, flow) = agent.flows.iter_mut().next().expect("flow");
        let body = flow.body;
        let outer = flow.dfg.regions[body]
            .ops
            .iter()
            .copied()
            .find(|&o| !flow.dfg.ops[o].regions.is_empty())
            .expect("the outer if");
        erase_ops(&mut flow.dfg, &[(body, outer)]);
        flow.dfg
            .regions
            .iter()
            .filter(|&(r, rd)| r != body && !rd.ops.is_empty())
            .count()
    });
    assert_eq!(regions_listing_ops, 0, "no detached region lists an op");
}

/// `n` flows, each calling the next; the last asks.
fn call_chain(n: usize) -> String {
    let mut s = String::from("agent @A {\n");
    for i in 0..n {
        let entry = if i == 0 { " entry" } else { "" };
        s.push_str(&format!("  flow @f{i}(%x: str) -> str{entry} {{\n"));
        if i + 1 < n {
            s.push_str(&format!(
                "    %0 = flow.call %x {{callee = @A.f{}}} : str\n    return %0\n  }}\n",
                i + 1
            ));
        } else {
            s.push_str("    %0 = ask %x : str\n    return %0\n  }\n");
        }
    }
    s.push_str("}\n");
    s
}

#[test]
fn critical_path_of_a_long_call_chain_on_a_small_stack() {
    let m = parse_module(&call_chain(20_000)).expect("parses");
    // 4 MiB: analysing each callee inside its caller's frame overflowed this
    // (one chain link per few hundred bytes of stack).
    let makespan = std::thread::Builder::new()
        .stack_size(4 << 20)
        .spawn(move || super::critical_path(&m).entry().map(|f| f.makespan_ms))
        .expect("thread")
        .join()
        .expect("no overflow, no panic");
    assert_eq!(makespan, Some(1000), "one ask at the end of the chain");
}

#[test]
fn critical_path_says_when_it_leaves_deep_regions_out() {
    let (deeper_than, text) = big_stack(|| {
        let m = parse_module(&nested(300)).expect("parses");
        let est = super::critical_path(&m);
        (est.entry().and_then(|f| f.deeper_than), est.render())
    });
    assert_eq!(deeper_than, Some(super::critical_path::MAX_REGION_DEPTH));
    assert!(
        text.contains("nested deeper than 256 levels counted as 0 ms"),
        "{text}"
    );
}
