//! Property tests: random builder-made modules round-trip through the
//! textual form and verify clean; the parser never panics on junk.

use ais_choices::{tape, Choices};
use ais_ir::parser::parse_module_recovering;
use ais_ir::{
    graph, parse_module, print_module, verifier, AgentData, Attr, FlowData, Module, Opcode, Type,
    Value,
};
use proptest::prelude::*;
use proptest::sample::Index;

/// The module generator's decisions, from a proptest-drawn tape (so a
/// failing module shrinks: choice 0 is always the smaller option).
struct Rng(Choices);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        *self.0.pick(xs)
    }
    fn text(&mut self) -> String {
        let alphabet = [
            'a',
            'Z',
            ' ',
            '"',
            '\\',
            '\n',
            '\t',
            'é',
            '}',
            '{',
            '%',
            '@',
            '\u{1F600}',
        ];
        (0..self.below(8)).map(|_| self.pick(&alphabet)).collect()
    }
    fn number(&mut self) -> f64 {
        self.pick(&[
            0.0,
            -0.0,
            1.0,
            -2.5,
            1e300,
            3.0e-9,
            42.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            0.1,
        ])
    }
}

fn random_flow(rng: &mut Rng, name: String, callees: &[(String, String, usize)]) -> FlowData {
    let mut flow = FlowData::new(name, Type::Str);
    let mut strs: Vec<Value> = Vec::new();
    for i in 0..rng.below(3) {
        strs.push(flow.add_param(format!("p{i}"), Type::Str));
    }
    let mut b = flow.builder();
    if strs.is_empty() {
        let s = rng.text();
        strs.push(b.const_str(&format!("seed{s}")));
    }
    let mut nums: Vec<Value> = vec![];
    let mut token: Option<Value> = None;
    for _ in 0..rng.below(12) {
        let s = rng.pick(&strs);
        match rng.below(11) {
            0 => {
                // Non-empty: an empty prompt is a verifier error.
                let t = rng.text();
                strs.push(b.const_str(&format!("c{t}")));
            }
            1 => {
                let n = rng.number();
                nums.push(b.const_number(n));
            }
            2 => {
                let t = rng.text().replace(['{', '}'], "");
                strs.push(b.template(&format!("{t}{{0}}"), &[s]));
            }
            3 => {
                let op = rng.pick(&[Opcode::Ask, Opcode::Think, Opcode::Reason, Opcode::Llm]);
                let o = b.ins(op, &[s], &[Type::Str]);
                if rng.below(2) == 0 {
                    b.set_attr(o, "temperature", Attr::Number(0.5));
                    b.set_attr(o, "no_fuse", Attr::Flag);
                }
                strs.push(b.result(o, 0));
            }
            4 if nums.len() >= 2 => {
                let (x, y) = (rng.pick(&nums), rng.pick(&nums));
                nums.push(b.ins1(Opcode::Add, &[x, y], Type::Number));
            }
            5 => {
                let tier = rng.pick(&["stm", "ltm", "episodic"]);
                let mut ops = vec![s];
                ops.extend(token);
                let o = b.ins_attrs(
                    Opcode::Qmem,
                    &ops,
                    vec![("tier".into(), Attr::Str(tier.into()))],
                    &[Type::Json, Type::Ord],
                );
                token = Some(b.result(o, 1));
                let j = b.result(o, 0);
                strs.push(b.ins1(Opcode::ToStr, &[j], Type::Str));
            }
            6 => {
                let mut ops = vec![s];
                ops.extend(token);
                let o = b.ins_attrs(
                    Opcode::Umem,
                    &ops,
                    vec![("tier".into(), Attr::Str("stm".into()))],
                    &[Type::Ord],
                );
                token = Some(b.result(o, 0));
            }
            7 => {
                let c = b.const_bool(rng.below(2) == 0);
                let o = b.ins(Opcode::If, &[c], &[Type::Str]);
                let other = rng.pick(&strs);
                b.with_region(o, "then", None, |b, _| {
                    let a = b.ins1(Opcode::Ask, &[s], Type::Str);
                    b.yield_(&[a]);
                });
                b.with_region(o, "else", None, |b, _| {
                    b.yield_(&[other]);
                });
                strs.push(b.result(o, 0));
            }
            8 => {
                let xs = b.ins1(Opcode::List, &[s, s], Type::list(Type::Str));
                let o = b.ins(Opcode::Loop, &[xs, s], &[Type::Str]);
                b.with_region(o, "body", None, |b, r| {
                    let item = b.add_region_arg(r, Type::Str);
                    let _index = b.add_region_arg(r, Type::Number);
                    let acc = b.add_region_arg(r, Type::Str);
                    let c = b.ins1(Opcode::Concat, &[acc, item], Type::Str);
                    b.yield_(&[c]);
                });
                strs.push(b.result(o, 0));
            }
            9 if !callees.is_empty() => {
                let (agent, f, arity) = callees[rng.below(callees.len())].clone();
                let args: Vec<Value> = (0..arity).map(|_| rng.pick(&strs)).collect();
                let o = b.ins_attrs(
                    Opcode::FlowCall,
                    &args,
                    vec![("callee".into(), Attr::Symbol { agent, flow: f })],
                    &[Type::Str],
                );
                strs.push(b.result(o, 0));
            }
            _ => {
                let key = rng.text();
                let o = b.ins(Opcode::Switch, &[s], &[Type::Str]);
                b.with_region(o, "case", Some(key), |b, _| {
                    b.yield_(&[s]);
                });
                b.with_region(o, "default", None, |b, _| {
                    let t = b.ins1(Opcode::ToStr, &[s], Type::Str);
                    b.yield_(&[t]);
                });
                strs.push(b.result(o, 0));
            }
        }
    }
    let mut printed = vec![rng.pick(&strs)];
    printed.extend(token);
    b.ins(Opcode::Print, &printed, &[Type::Ord]);
    let last = *strs.last().unwrap_or(&printed[0]);
    b.ret(Some(last));
    flow
}

fn random_module(choices: Choices) -> Module {
    let mut rng = Rng(choices);
    let mut m = Module::new();
    // Callees are flows made earlier (so the call graph is acyclic).
    let mut callees: Vec<(String, String, usize)> = Vec::new();
    for a in 0..1 + rng.below(2) {
        let name = format!("Agent{a}");
        let mut agent = AgentData::new(name.clone());
        for f in 0..1 + rng.below(3) {
            let fname = format!("f{f}");
            let flow = random_flow(&mut rng, fname.clone(), &callees);
            callees.push((name.clone(), fname, flow.params.len()));
            agent.add_flow(flow);
        }
        m.add_agent(agent);
    }
    m
}

/// One edit of the mutated-text test: what, where, and how much.
#[derive(Clone, Debug)]
struct Edit {
    kind: Kind,
    at: Index,
    len: usize,
    from: Index,
    junk: Index,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Delete,
    Insert,
    Copy,
}

fn edit() -> impl Strategy<Value = Edit> {
    (
        prop_oneof![Just(Kind::Delete), Just(Kind::Insert), Just(Kind::Copy)],
        any::<Index>(),
        0usize..40,
        any::<Index>(),
        any::<Index>(),
    )
        .prop_map(|(kind, at, len, from, junk)| Edit {
            kind,
            at,
            len,
            from,
            junk,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn builder_modules_round_trip_and_verify(choices in tape()) {
        let m = random_module(choices);
        let errors = verifier::verify_errors(&m);
        prop_assert!(errors.is_empty(), "{errors:#?}\n{}", print_module(&m));
        let text = print_module(&m);
        let parsed = parse_module(&text);
        prop_assert!(parsed.is_ok(), "{:?}\n{text}", parsed.err());
        if let Ok(p) = parsed {
            prop_assert_eq!(print_module(&p), text.clone());
            prop_assert!(verifier::verify_errors(&p).is_empty());
        }
    }

    #[test]
    fn parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let (m, _) = parse_module_recovering(&text);
        let _ = verifier::verify(&m);
        let _ = print_module(&m);
    }

    #[test]
    fn parser_never_panics_on_mutated_text(edits in proptest::collection::vec(edit(), 1..6)) {
        let base = include_str!("../../tests/ir-text/coordinator.aisir");
        let mut text: Vec<char> = base.chars().collect();
        let junk = ['{', '}', '%', '@', '"', ':', ',', '=', '(', ')', '<', '>', '\n', '1', 'x', '!', '\\', '-'];
        for e in edits {
            let at = e.at.index(text.len() + 1);
            match e.kind {
                Kind::Delete if at < text.len() => {
                    let n = e.len.min(20).min(text.len() - at);
                    text.drain(at..at + n);
                }
                Kind::Insert => text.insert(at, *e.junk.get(&junk)),
                // Deleting at the end copies instead.
                Kind::Delete | Kind::Copy => {
                    let from = e.from.index(text.len().max(1));
                    let n = e.len.min(text.len().saturating_sub(from));
                    let chunk: Vec<char> = text[from..from + n].to_vec();
                    let at = at.min(text.len());
                    text.splice(at..at, chunk);
                }
            }
        }
        let text: String = text.into_iter().collect();
        let (m, _) = parse_module_recovering(&text);
        let _ = verifier::verify_diagnostics(&m);
        let printed = print_module(&m);
        let _ = graph::to_dot(&m);
        let _ = graph::to_mermaid(&m);
        let _ = parse_module_recovering(&printed);
    }
}
