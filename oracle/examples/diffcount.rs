//! Counts, instead of stopping at the first, the differences between the
//! oracle and the VM on random programs (the generator of
//! `tests/differential.rs`, from a fixed seed): how many programs, runs,
//! and runs whose outcome or printed lines differ, per optimization level.
//! The figures in docs/reliability.md come from it:
//!
//! ```sh
//! cargo run -p ais-oracle --example diffcount -- 5000
//! ```
//!
//! `ORACLE_FEATURES` selects the generated features as for the test.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

#[path = "../tests/gen/mod.rs"]
mod gen;
#[path = "../tests/support/mod.rs"]
mod support;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeMap;

fn main() {
    let programs: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    let on = std::env::var("ORACLE_FEATURES").unwrap_or_default();
    let named = |name: &str| on.split(',').any(|f| f.trim() == name || f.trim() == "all");
    let default_on = |name: &str| named(name) || on.trim() != "none";
    let features = gen::Features {
        effects_in_try: default_on("effects_in_try"),
        calls_in_failing_try: named("calls_in_failing_try"),
        effects_in_calls: named("effects_in_calls"),
        side_effecting_tools: default_on("side_effecting_tools"),
    };
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = gen::case();
    let (mut runs, mut with_fail, mut failing_runs) = (0usize, 0usize, 0usize);
    // Per level: (runs with an outcome difference, with a print difference,
    // programs with any difference).
    let mut by_level: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    let mut programs_differing = 0usize;
    let mut first: Option<String> = None;
    for _ in 0..programs {
        let case = strategy.new_tree(&mut runner).unwrap().current();
        if gen::may_fail(&case.main) {
            with_fail += 1;
        }
        let source = gen::render(&case, features);
        if std::env::var("DIFFCOUNT_SHOW").is_ok() && gen::may_fail(&case.main) {
            println!("{source}");
        }
        let (oracle, diffs) = match support::compare_runs(&source, &case.args()) {
            Ok(r) => r,
            Err(e) => panic!("{e}\n{source}"),
        };
        if oracle.result.is_err() {
            failing_runs += 1;
        }
        let mut any = false;
        let mut levels_hit = std::collections::BTreeSet::new();
        for d in &diffs {
            runs += 1;
            let e = by_level.entry(format!("{:?}", d.level)).or_default();
            e.0 += usize::from(d.outcome);
            e.1 += usize::from(d.printed);
            if let Some(diff) = &d.diff {
                any = true;
                levels_hit.insert(format!("{:?}", d.level));
                first.get_or_insert_with(|| {
                    format!("{:?}, {} workers: {diff}\n{source}", d.level, d.workers)
                });
            }
        }
        for l in levels_hit {
            by_level.entry(l).or_default().2 += 1;
        }
        programs_differing += usize::from(any);
    }
    println!(
        "{programs} programs ({with_fail} with pure ops that may fail in main, \
         {failing_runs} failing on the oracle), {runs} VM runs (-O0/-O1/-O2 x 1/2/8 workers)"
    );
    println!("programs with any difference: {programs_differing}");
    for (level, (outcome, printed, progs)) in &by_level {
        println!(
            "{level}: {outcome} runs with a different outcome, {printed} with different printed lines, {progs} programs"
        );
    }
    if let Some(f) = first {
        println!("first difference: {f}");
    }
}
