//! Speculation does not change results (issue 36): the golden corpus
//! (`tests/differential/*.ais`) and a routing program run on the oracle and
//! on the VM *with* a speculation budget, at -O0/-O1/-O2 with 1, 2 and 8
//! workers, must agree on results, printed lines, memory, beliefs and tool
//! calls. LLM requests: the VM's include every one the oracle made; the
//! extra ones are the discarded arms' (by design).
#![allow(clippy::unwrap_used)]

mod support;

use ais_compiler::driver::compile_source;
use ais_ir::passes::OptLevel;
use ais_oracle::Program;
use serde_json::{json, Value as Json};
use std::path::Path;
use support::{compile, describe, run_oracle, run_vm_speculating, Replies, Request};

const ROUTING: &str = r#"agent Router {
    @entry flow main(ticket: str) -> str {
        let category = ask("Classify this ticket: {ticket}")
        let plan = switch category {
            case "billing" => ask("Billing answer for {ticket}")
            case "technical" => {
                let d = think("Diagnose {ticket}")
                ask("Steps for {d}")
            }
            default => ask("Escalation for {ticket}")
        }
        print("routed")
        return "{category}: {plan}"
    }
}
"#;

/// `want` as a multiset is contained in `got`.
fn contained(want: &[Request], got: &[Request]) -> bool {
    let mut rest: Vec<&Request> = got.iter().collect();
    want.iter()
        .all(|w| match rest.iter().position(|g| *g == w) {
            Some(i) => {
                rest.swap_remove(i);
                true
            }
            None => false,
        })
}

/// Returns how many VM runs made more LLM requests than the oracle (at
/// -O0, where requests are compared): runs that speculated.
fn agrees(name: &str, source: &str, args: &[(String, Json)]) -> usize {
    let mut speculated = 0;
    let program = Program::load(source).unwrap();
    let lowered = compile_source(source).unwrap().module;
    let budget = Some(ais_vm::Speculate {
        max_extra_calls: 64,
        max_extra_cost_usd: 1.0,
    });
    for (level, replies) in [
        (OptLevel::O0, Replies::Hashed),
        (OptLevel::O1, Replies::FixedText),
        (OptLevel::O2, Replies::FixedText),
    ] {
        let code = compile(&lowered, level);
        let mut want = run_oracle(&program, args, replies);
        for workers in [1, 2, 8] {
            let mut got = run_vm_speculating(&program, &code, args, workers, replies, budget);
            if let (Some(w), Some(g)) = (&want.llm, &got.llm) {
                assert!(
                    contained(w, g),
                    "{name} {level:?} {workers} workers: a request the oracle made is missing\noracle: {w:?}\nvm: {g:?}"
                );
                speculated += usize::from(g.len() > w.len());
            }
            got.llm = None;
            let llm = want.llm.take();
            let diff = describe(&want, &got);
            want.llm = llm;
            assert!(
                diff.is_none(),
                "{name} {level:?} {workers} workers: {}",
                diff.unwrap_or_default()
            );
        }
    }
    speculated
}

#[test]
fn routing_with_speculation_agrees_with_the_oracle() {
    let speculated = agrees(
        "routing",
        ROUTING,
        &[("ticket".into(), json!("my printer is on fire"))],
    );
    // The arms were speculated at every worker count (-O0 compares
    // requests): the taken one's call was not repeated, the others'
    // are the extra requests.
    assert_eq!(speculated, 3);
}

#[test]
fn the_corpus_with_speculation_agrees_with_the_oracle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/differential");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ais"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "corpus missing in {}", dir.display());
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let args: Json =
            serde_json::from_str(ais_testkit::golden::directive(&source, "ARGS").unwrap()).unwrap();
        let args: Vec<(String, Json)> = args
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let _ = agrees(&path.display().to_string(), &source, &args);
    }
}
