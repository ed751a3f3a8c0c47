//! Differential test: random well-typed programs (`gen`) run on the
//! source-level oracle and on the VM at -O0/-O1/-O2 with 1, 2 and 8 workers
//! must agree (comparison rules in `support`). `PROPTEST_CASES` scales the
//! run (default 5,000 cases).
#![allow(clippy::unwrap_used)]

mod gen;
mod support;

use proptest::prelude::*;

/// The feature set the VM agrees with today (see docs/runtime.md,
/// "Reference interpreter and tests"). `ORACLE_FEATURES` switches more on,
/// comma-separated: `effects_in_try`, `calls_in_failing_try`,
/// `effects_in_calls`, `side_effecting_tools` (or `all`).
fn features() -> gen::Features {
    let on = std::env::var("ORACLE_FEATURES").unwrap_or_default();
    let has = |name: &str| on.split(',').any(|f| f.trim() == name || f.trim() == "all");
    gen::Features {
        effects_in_try: has("effects_in_try"),
        calls_in_failing_try: has("calls_in_failing_try"),
        effects_in_calls: has("effects_in_calls"),
        side_effecting_tools: has("side_effecting_tools"),
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(5_000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 20_000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn oracle_and_vm_agree(case in gen::case()) {
        let source = gen::render(&case, features());
        if let Err(diff) = support::differences(&source, &case.args()) {
            prop_assert!(false, "{diff}\nargs: {:?}\nprogram:\n{source}", case.args());
        }
    }
}
