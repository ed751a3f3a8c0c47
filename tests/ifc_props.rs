//! Run-time enforcement against the static flow check (issue 19), on
//! random programs with random sources and a random policy:
//! (a) every `policy.denied` at run time is a flow the static check
//!     (`ais_compiler::flows`, W0020) reported for that sink op and argument;
//! (b) no denied flow reaches a sink: a recording tool double sees every
//!     argument a sink receives, and none the policy protects carries an
//!     untrusted source's marker.
//!
//! Programs: agent `A` with source tools `src0..src3` (each trusted or
//! untrusted at random; each answers a marker `<T:srcK>` / `<U:srcK>`
//! that string ops carry along), a list source `lst` (untrusted or not),
//! sink tools `snk0..snk2(a, b)` with a random rule each, a helper flow,
//! and a body of `let`s, branches, loops, LLM ops, long-term memory
//! writes (a sink too) and sink calls each in a `try` whose `catch`
//! prints the error with the call's site number.
//!
//! `PROPTEST_CASES` sets the number of programs (256 by default).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ais_ir::bytecode::Program;
use ais_ir::ifc::{FlowPolicy, Mode, SinkRule};
use ais_testkit::MemoryHost;
use ais_vm::llm::sim::SimBackend;
use ais_vm::{Host, RunOptions};
use proptest::prelude::*;
use serde_json::{json, Value as Json};
use std::sync::{Arc, Mutex};

const SOURCES: usize = 4;
const SINKS: usize = 3;

#[derive(Clone, Debug)]
enum E {
    Lit(u8),
    Param,
    Var(u8),
    Src(u8, Box<E>),
    Concat(Box<E>, Box<E>),
    Template(u8),
    Ask(Box<E>, Box<E>),
    Helper(Box<E>),
    /// `"" + qmem("k", tier)` (stm, ltm or episodic: an episodic read
    /// also carries every tool call's labels, which the host logs there).
    Recall(u8),
    /// The belief `mood`.
    Mood,
}

#[derive(Clone, Debug)]
enum S {
    Let(E),
    /// `vK = E` (an existing variable; a `let` when there is none).
    Assign(u8, E),
    /// A sink call `snkJ(a, b)` in a `try`.
    Sink(u8, E, E),
    /// `umem(E, "ltm", "k")`: a sink by default.
    Remember(E),
    /// `umem(E, "stm", "k")`: not a sink by default.
    Note(E),
    /// `mood = E`.
    Believe(E),
    /// `print("tlN", ask(P, C, tools: [srcK, snkJ]))`: the simulated model
    /// calls each offered tool once; a refused call is in its reply.
    ToolLoop(u8, u8, E, E),
    If(E, Vec<S>, Vec<S>),
    /// Over `lst(...)` (possibly untrusted items) or a literal list.
    Loop(bool, Vec<S>),
}

fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![
        any::<u8>().prop_map(E::Lit),
        Just(E::Param),
        any::<u8>().prop_map(E::Var),
        any::<u8>().prop_map(E::Template),
        (0u8..3).prop_map(E::Recall),
        Just(E::Mood),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (0..SOURCES as u8, inner.clone()).prop_map(|(k, e)| E::Src(k, Box::new(e))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| E::Concat(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| E::Ask(Box::new(a), Box::new(b))),
            inner.prop_map(|e| E::Helper(Box::new(e))),
        ]
    })
}

fn simple() -> impl Strategy<Value = S> {
    prop_oneof![
        2 => (any::<u8>(), expr()).prop_map(|(k, e)| S::Assign(k, e)),
        3 => (0..SINKS as u8, expr(), expr()).prop_map(|(j, a, b)| S::Sink(j, a, b)),
        1 => expr().prop_map(S::Remember),
        1 => expr().prop_map(S::Note),
        1 => expr().prop_map(S::Believe),
        1 => (0..SOURCES as u8, 0..SINKS as u8, expr(), expr())
            .prop_map(|(k, j, p, c)| S::ToolLoop(k, j, p, c)),
    ]
}

fn stmt() -> impl Strategy<Value = S> {
    prop_oneof![
        4 => expr().prop_map(S::Let),
        4 => simple(),
        1 => (expr(), prop::collection::vec(simple(), 0..3), prop::collection::vec(simple(), 0..2))
            .prop_map(|(c, t, e)| S::If(c, t, e)),
        1 => (any::<bool>(), prop::collection::vec(simple(), 1..3)).prop_map(|(u, b)| S::Loop(u, b)),
    ]
}

/// A source's trust, a sink's rule.
#[derive(Clone, Debug)]
struct Policy {
    untrusted: [bool; SOURCES],
    list_untrusted: bool,
    /// 0: both args checked; 1: `b` may be untrusted; 2: only `a` checked
    /// (`require_trusted`); 3: not a sink; 4: anything allowed.
    sinks: [u8; SINKS],
    /// `memory.ltm` writes: checked or allowed.
    ltm_allowed: bool,
}

fn policy_strategy() -> impl Strategy<Value = Policy> {
    (
        prop::array::uniform4(any::<bool>()),
        any::<bool>(),
        prop::array::uniform3(0u8..5),
        any::<bool>(),
    )
        .prop_map(|(untrusted, list_untrusted, sinks, ltm_allowed)| Policy {
            untrusted,
            list_untrusted,
            sinks,
            ltm_allowed,
        })
}

impl Policy {
    fn flow_policy(&self) -> FlowPolicy {
        let mut p = FlowPolicy {
            mode: Mode::Enforce,
            ..FlowPolicy::default()
        };
        let mut names: Vec<String> = (0..SOURCES).map(|k| format!("src{k}")).collect();
        names.push("lst".into());
        for (i, n) in names.iter().enumerate() {
            let bad = self
                .untrusted
                .get(i)
                .copied()
                .unwrap_or(self.list_untrusted);
            if bad {
                p.untrusted.push(n.clone());
            }
            p.sinks.insert(
                n.clone(),
                SinkRule {
                    sink: Some(false),
                    ..SinkRule::default()
                },
            );
        }
        for (j, r) in self.sinks.iter().enumerate() {
            let rule = match r {
                0 => SinkRule::default(),
                1 => SinkRule {
                    allow_untrusted: vec!["b".into()],
                    ..SinkRule::default()
                },
                2 => SinkRule {
                    require_trusted: vec!["a".into()],
                    ..SinkRule::default()
                },
                3 => SinkRule {
                    sink: Some(false),
                    ..SinkRule::default()
                },
                _ => SinkRule {
                    allow_untrusted: vec!["*".into()],
                    ..SinkRule::default()
                },
            };
            p.sinks.insert(format!("snk{j}"), rule);
        }
        if self.ltm_allowed {
            p.sinks.insert(
                "memory.ltm".into(),
                SinkRule {
                    allow_untrusted: vec!["*".into()],
                    ..SinkRule::default()
                },
            );
        }
        p
    }

    /// Whether argument `arg` of sink `j` must be trusted.
    fn protects(&self, j: usize, arg: &str) -> bool {
        match self.sinks[j] {
            0 => true,
            1 | 2 => arg == "a",
            _ => false,
        }
    }
}

/// Renders a program; variables resolve modulo those in scope.
struct Render {
    vars: usize,
    sites: usize,
    out: String,
}

impl Render {
    fn e(&self, e: &E) -> String {
        match e {
            E::Lit(n) => format!("\"l{n}\""),
            E::Param => "p".into(),
            E::Var(i) if self.vars > 0 => format!("v{}", *i as usize % self.vars),
            E::Template(i) if self.vars > 0 => format!("\"t{{v{}}}\"", *i as usize % self.vars),
            E::Var(_) | E::Template(_) => "\"none\"".into(),
            E::Src(k, a) => format!("src{k}({})", self.e(a)),
            E::Concat(a, b) => format!("{} + {}", self.e(a), self.e(b)),
            E::Ask(a, b) => format!("ask({}, {})", self.e(a), self.e(b)),
            E::Helper(a) => format!("helper({})", self.e(a)),
            E::Recall(t) => {
                let tier = ["stm", "ltm", "episodic"][usize::from(*t % 3)];
                format!("\"\" + qmem(\"k\", \"{tier}\")")
            }
            E::Mood => "mood".into(),
        }
    }

    fn line(&mut self, depth: usize, s: &str) {
        self.out.push_str(&"    ".repeat(depth + 2));
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn s(&mut self, s: &S, depth: usize) {
        match s {
            S::Let(e) => {
                let t = format!("let v{} = {}", self.vars, self.e(e));
                self.line(depth, &t);
                self.vars += 1;
            }
            S::Assign(k, e) if self.vars > 0 => {
                let t = format!("v{} = {}", *k as usize % self.vars, self.e(e));
                self.line(depth, &t);
            }
            S::Assign(_, e) => {
                // Nothing to assign yet: evaluate for its effects.
                let t = format!("print({})", self.e(e));
                self.line(depth, &t);
            }
            S::Sink(j, a, b) => {
                let site = self.sites;
                self.sites += 1;
                let call = format!("snk{j}({}, \"s{site}|\" + {})", self.e(a), self.e(b));
                self.line(depth, "try {");
                self.line(depth + 1, &call);
                self.line(depth, "} catch (e) {");
                self.line(depth + 1, &format!("print(\"site{site}\", e)"));
                self.line(depth, "}");
            }
            S::Remember(e) => {
                let site = self.sites;
                self.sites += 1;
                self.line(depth, "try {");
                let t = format!("umem({}, \"ltm\", \"k{site}\")", self.e(e));
                self.line(depth + 1, &t);
                self.line(depth, "} catch (e) {");
                self.line(depth + 1, &format!("print(\"site{site}\", e)"));
                self.line(depth, "}");
            }
            S::ToolLoop(k, j, p, c) => {
                let site = self.sites;
                self.sites += 1;
                let t = format!(
                    "print(\"tl{site}\", ask(\"tl{site}|\" + {}, {}, tools: [src{k}, snk{j}], max_steps: 3))",
                    self.e(p),
                    self.e(c)
                );
                self.line(depth, &t);
            }
            S::Note(e) => {
                let t = format!("umem({}, \"stm\", \"k\")", self.e(e));
                self.line(depth, &t);
            }
            S::Believe(e) => {
                let t = format!("mood = {}", self.e(e));
                self.line(depth, &t);
            }
            S::If(c, t, f) => {
                let head = format!("if ({} == \"l7\") {{", self.e(c));
                self.line(depth, &head);
                for x in t {
                    self.s(x, depth + 1);
                }
                self.line(depth, "} else {");
                for x in f {
                    self.s(x, depth + 1);
                }
                self.line(depth, "}");
            }
            S::Loop(untrusted_list, body) => {
                let items = if *untrusted_list {
                    "lst(\"q\")".to_string()
                } else {
                    "[\"i1\", \"i2\"]".to_string()
                };
                self.line(depth, &format!("loop (it in {items}) {{"));
                for x in body {
                    self.s(x, depth + 1);
                }
                self.line(depth, "}");
            }
        }
    }
}

fn render(body: &[S]) -> String {
    let mut r = Render {
        vars: 0,
        sites: 0,
        out: String::new(),
    };
    for s in body {
        r.s(s, 0);
    }
    let mut src =
        String::from("agent A {\n    memory { notes: LTM }\n    beliefs { mood: \"calm\" }\n");
    for k in 0..SOURCES {
        src.push_str(&format!("    capability src{k}(q: str) -> str;\n"));
    }
    src.push_str("    capability lst(q: str) -> json;\n");
    for j in 0..SINKS {
        src.push_str(&format!("    capability snk{j}(a: str, b: str) -> json;\n"));
    }
    src.push_str("\n    flow helper(x: str) -> str {\n        return \"h\" + x\n    }\n\n");
    src.push_str("    @entry flow main(p: str) -> str {\n");
    src.push_str(&r.out);
    src.push_str("        return \"end\"\n    }\n}\n");
    src
}

/// A `policy.denied` error a run raised.
#[derive(Debug)]
struct Denial {
    sink: String,
    argument: String,
    /// The sink op's span start.
    at: u64,
    /// Inside a tool-calling exchange: text the LLM op's source holds
    /// (`argument` is then `*`: the reply shortens the message).
    site: Option<String>,
}

/// What a run did at its sinks.
struct Observed {
    denied: Vec<Denial>,
    /// `(sink index, args)` of every sink call made.
    calls: Vec<(usize, Json)>,
}

fn run(program: &Program, pol: &Policy) -> Observed {
    let host = Arc::new(MemoryHost::new());
    for k in 0..SOURCES {
        let tag = if pol.untrusted[k] { "U" } else { "T" };
        let v = json!(format!("<{tag}:src{k}>"));
        host.register_tool(&format!("src{k}"), move |_| Ok(v.clone()));
    }
    let tag = if pol.list_untrusted { "U" } else { "T" };
    let items = json!([format!("<{tag}:lst>"), "x"]);
    host.register_tool("lst", move |_| Ok(items.clone()));
    let calls = Arc::new(Mutex::new(Vec::new()));
    for j in 0..SINKS {
        let c = calls.clone();
        host.register_tool(&format!("snk{j}"), move |a| {
            c.lock().unwrap().push((j, a.clone()));
            Ok(json!({"ok": true}))
        });
    }
    let options = RunOptions {
        args: vec![("p".into(), json!("<T:args>"))],
        workers: Some(2),
        flow_policy: pol.flow_policy(),
        ..RunOptions::default()
    };
    let report = ais_vm::run(
        program,
        &options,
        Arc::new(SimBackend::new()),
        host.clone() as Arc<dyn Host>,
    );
    // Each sink call's `catch` prints `siteN` and the error.
    let mut denied = Vec::new();
    for line in host.printed() {
        let Some((site, err)) = line.split_once(' ') else {
            continue;
        };
        // A tool call the model asked for, refused back to it: the
        // simulated reply lists `snkJ failed → error [policy.denied]`.
        if let Some(n) = site.strip_prefix("tl") {
            for j in 0..SINKS {
                if err.contains(&format!("snk{j} failed → error [{}]", ais_vm::ifc::DENIED)) {
                    denied.push(Denial {
                        sink: format!("snk{j}"),
                        argument: "*".into(),
                        at: u64::MAX,
                        site: Some(format!("\"tl{n}|\"")),
                    });
                }
            }
            continue;
        }
        let Ok(e) = serde_json::from_str::<Json>(err) else {
            continue;
        };
        if e["code"] == ais_vm::ifc::DENIED {
            let p = &e["payload"];
            denied.push(Denial {
                sink: p["sink"].as_str().unwrap_or_default().to_string(),
                argument: p["argument"].as_str().unwrap_or_default().to_string(),
                at: e["span"]["start"].as_u64().unwrap_or(u64::MAX),
                site: None,
            });
        }
    }
    if let Err(e) = &report.outcome {
        denied.push(Denial {
            sink: "(run failed)".into(),
            argument: e.to_string(),
            at: u64::MAX,
            site: None,
        });
    }
    let calls = calls.lock().unwrap().clone();
    Observed { denied, calls }
}

fn check(body: &[S], pol: &Policy) -> Result<(), TestCaseError> {
    let src = render(body);
    let module = ais_compiler::driver::lower_source(&src)
        .map_err(|d| TestCaseError::fail(format!("does not compile: {d:?}\n{src}")))?;
    let program = ais_ir::bytecode::compile(&module)
        .map_err(|e| TestCaseError::fail(format!("{e:?}\n{src}")))?;
    let fp = pol.flow_policy();
    let findings = ais_compiler::flows::check(&program, &fp);
    let seen = run(&program, pol);
    // (a) a run-time denial is a reported flow at that sink op.
    for d in &seen.denied {
        let reported = findings.iter().any(|f| match &d.site {
            Some(text) => {
                let at = src.get(f.span.start as usize..f.span.end as usize);
                f.sink == d.sink && at.is_some_and(|t| t.contains(text.as_str()))
            }
            None => f.sink == d.sink && f.argument == d.argument && u64::from(f.span.start) == d.at,
        });
        prop_assert!(
            reported,
            "denied at run time but not reported: {d:?}\n{src}\nfindings: {findings:?}"
        );
    }
    // (b) no protected argument received untrusted data.
    for (j, args) in &seen.calls {
        for arg in ["a", "b"] {
            let v = args[arg].as_str().unwrap_or_default();
            prop_assert!(
                !(pol.protects(*j, arg) && v.contains("<U:")),
                "snk{j}.{arg} received untrusted data {v:?}\n{src}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn runtime_enforcement_agrees_with_the_static_check(
        body in prop::collection::vec(stmt(), 1..8),
        pol in policy_strategy(),
    ) {
        check(&body, &pol)?;
    }
}

/// The harness itself: an untrusted source fed to a checked sink argument
/// is seen denied (and reported); allowed by the policy, it is seen at the
/// tool with its marker.
#[test]
fn the_harness_sees_denials_and_calls() {
    let body = vec![
        S::Let(E::Src(0, Box::new(E::Param))),
        S::Sink(0, E::Var(0), E::Lit(1)),
    ];
    let mut pol = Policy {
        untrusted: [true, false, false, false],
        list_untrusted: false,
        sinks: [0, 0, 0],
        ltm_allowed: false,
    };
    let src = render(&body);
    let program =
        ais_ir::bytecode::compile(&ais_compiler::driver::lower_source(&src).unwrap()).unwrap();
    let seen = run(&program, &pol);
    assert_eq!(seen.denied.len(), 1, "{src}");
    assert!(seen.calls.is_empty());
    assert!(check(&body, &pol).is_ok());
    pol.sinks[0] = 4;
    let seen = run(&program, &pol);
    assert!(seen.denied.is_empty());
    assert_eq!(seen.calls.len(), 1);
    assert_eq!(seen.calls[0].1["a"], "<U:src0>");
    // A model offered an untrusted source and a sink calls both in its
    // first turn, before it has read anything: the exchange is judged on
    // what it read, so the sink call runs (with no untrusted data), and
    // the static check still reports the possible flow.
    let body = vec![S::ToolLoop(0, 1, E::Lit(2), E::Param)];
    let src = render(&body);
    let program =
        ais_ir::bytecode::compile(&ais_compiler::driver::lower_source(&src).unwrap()).unwrap();
    let seen = run(&program, &pol);
    assert!(seen.denied.is_empty(), "{src}");
    assert_eq!(seen.calls.len(), 1);
    assert!(!seen.calls[0].1.to_string().contains("<U:"));
    assert!(check(&body, &pol).is_ok());
}
