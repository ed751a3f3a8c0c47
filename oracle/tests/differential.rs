//! Differential test: random well-typed programs (`gen`) run on the
//! source-level oracle and on the VM at -O0/-O1/-O2 with 1, 2 and 8 workers
//! must agree (comparison rules in `support`). `PROPTEST_CASES` scales the
//! run (default 5,000 cases).
#![allow(clippy::unwrap_used)]

mod gen;
mod support;

use proptest::prelude::*;

/// The feature set. On by default: `effects_in_try` (prints, memory and
/// belief writes, messages in `try` bodies, failing or not) and
/// `side_effecting_tools` (the order-sensitive `t.record` tool). Off unless
/// named in `ORACLE_FEATURES` (comma-separated, or `all`), because the VM's
/// behaviour there is schedule-dependent by design and a sequential oracle
/// cannot mirror it (see docs/runtime.md, "Reference interpreter and
/// tests"): `calls_in_failing_try` (calls in a failing body that are not
/// ordered after the failing call may or may not be made) and
/// `effects_in_calls` (effects of concurrently running calls interleave).
/// `ORACLE_FEATURES=none` switches the default ones off.
fn features() -> gen::Features {
    let on = std::env::var("ORACLE_FEATURES").unwrap_or_default();
    let named = |name: &str| on.split(',').any(|f| f.trim() == name || f.trim() == "all");
    let default_on = |name: &str| named(name) || on.trim() != "none";
    gen::Features {
        effects_in_try: default_on("effects_in_try"),
        calls_in_failing_try: named("calls_in_failing_try"),
        effects_in_calls: named("effects_in_calls"),
        side_effecting_tools: default_on("side_effecting_tools"),
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
