//! Property: random DAG programs give identical results on the VM with 1, 2
//! and 8 workers and on the sequential reference interpreter (return value,
//! printed lines, memory contents).
#![allow(clippy::unwrap_used)]

use ais_ir::bytecode::{self, Program};
use ais_ir::{AgentData, Attr, FlowData, Module, Opcode, Tier, Type, Value};
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::{interp, RunOptions};
use proptest::prelude::*;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Step {
    Num(u8),
    Str(u8),
    Arith(bool, usize, usize),
    Concat(usize, usize),
    Template(usize, usize),
    Ask(usize, Option<usize>),
    Less(usize, usize),
    If(usize, usize, usize),
    Switch(usize, usize),
    Loop(usize, usize),
    Try(usize, bool),
    Print(usize),
    Remember(usize),
    Recall,
    Call(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let i = || 0usize..64;
    prop_oneof![
        any::<u8>().prop_map(Step::Num),
        any::<u8>().prop_map(Step::Str),
        (any::<bool>(), i(), i()).prop_map(|(k, a, b)| Step::Arith(k, a, b)),
        (i(), i()).prop_map(|(a, b)| Step::Concat(a, b)),
        (i(), i()).prop_map(|(a, b)| Step::Template(a, b)),
        (i(), proptest::option::of(i())).prop_map(|(a, c)| Step::Ask(a, c)),
        (i(), i()).prop_map(|(a, b)| Step::Less(a, b)),
        (i(), i(), i()).prop_map(|(c, a, b)| Step::If(c, a, b)),
        (i(), i()).prop_map(|(n, s)| Step::Switch(n, s)),
        (i(), i()).prop_map(|(a, b)| Step::Loop(a, b)),
        (i(), any::<bool>()).prop_map(|(a, f)| Step::Try(a, f)),
        i().prop_map(Step::Print),
        i().prop_map(Step::Remember),
        Just(Step::Recall),
        i().prop_map(Step::Call),
    ]
}

fn pick(pool: &[Value], i: usize) -> Value {
    pool[i % pool.len()]
}

fn attr(name: &str, a: Attr) -> Vec<(String, Attr)> {
    vec![(name.to_string(), a)]
}

fn build(steps: &[Step]) -> Program {
    let mut f = FlowData::new("main", Type::Json);
    f.entry = true;
    let mut b = f.builder();
    let mut nums = vec![b.const_number(1.0)];
    let mut strs = vec![b.const_str("seed")];
    let mut bools = vec![b.const_bool(true)];
    let mut print_tok: Option<Value> = None;
    let mut mem_tok: Option<Value> = None;
    for s in steps {
        match *s {
            Step::Num(c) => nums.push(b.const_number(f64::from(c % 50))),
            Step::Str(c) => strs.push(b.const_str(&format!("s{c}"))),
            Step::Arith(add, x, y) => {
                let op = if add { Opcode::Add } else { Opcode::Sub };
                let v = b.ins1(op, &[pick(&nums, x), pick(&nums, y)], Type::Number);
                nums.push(v);
            }
            Step::Concat(x, y) => {
                let v = b.ins1(Opcode::Concat, &[pick(&strs, x), pick(&nums, y)], Type::Str);
                strs.push(v);
            }
            Step::Template(x, y) => {
                let v = b.template("T{0}-{1}", &[pick(&strs, x), pick(&nums, y)]);
                strs.push(v);
            }
            Step::Ask(x, ctx) => {
                let mut ops = vec![pick(&strs, x)];
                ops.extend(ctx.map(|c| pick(&strs, c)));
                strs.push(b.ins1(Opcode::Ask, &ops, Type::Str));
            }
            Step::Less(x, y) => {
                let v = b.ins1(Opcode::Lt, &[pick(&nums, x), pick(&nums, y)], Type::Bool);
                bools.push(v);
            }
            Step::If(c, x, y) => {
                let (sx, sy) = (pick(&strs, x), pick(&strs, y));
                let op = b.ins(Opcode::If, &[pick(&bools, c)], &[Type::Str]);
                b.with_region(op, "then", None, |b, _| {
                    let t = b.const_str("T");
                    let v = b.ins1(Opcode::Concat, &[sx, t], Type::Str);
                    b.yield_(&[v]);
                });
                b.with_region(op, "else", None, |b, _| {
                    let v = b.ins1(Opcode::Think, &[sy], Type::Str);
                    b.yield_(&[v]);
                });
                strs.push(b.result(op, 0));
            }
            Step::Switch(n, x) => {
                let three = b.const_number(3.0);
                let m = b.ins1(Opcode::Mod, &[pick(&nums, n), three], Type::Number);
                let key = b.ins1(Opcode::ToStr, &[m], Type::Str);
                let sx = pick(&strs, x);
                let op = b.ins(Opcode::Switch, &[key], &[Type::Str]);
                b.with_region(op, "case", Some("0".into()), |b, _| {
                    let v = b.const_str("zero");
                    b.yield_(&[v]);
                });
                b.with_region(op, "case", Some("1".into()), |b, _| {
                    let v = b.ins1(Opcode::Ask, &[sx], Type::Str);
                    b.yield_(&[v]);
                });
                b.with_region(op, "default", None, |b, _| {
                    let v = b.ins1(Opcode::Concat, &[sx, key], Type::Str);
                    b.yield_(&[v]);
                });
                strs.push(b.result(op, 0));
            }
            Step::Loop(x, y) => {
                let (sx, sy) = (pick(&strs, x), pick(&strs, y));
                let list = b.ins1(Opcode::List, &[sx, sy, sx], Type::list(Type::Str));
                let init = b.const_str("");
                let op = b.ins(Opcode::Loop, &[list, init], &[Type::Str]);
                b.with_region(op, "body", None, |b, r| {
                    let item = b.add_region_arg(r, Type::Str);
                    let _i = b.add_region_arg(r, Type::Number);
                    let acc = b.add_region_arg(r, Type::Str);
                    let t = b.ins1(Opcode::Ask, &[item], Type::Str);
                    let v = b.ins1(Opcode::Concat, &[acc, t], Type::Str);
                    b.yield_(&[v]);
                });
                strs.push(b.result(op, 0));
            }
            Step::Try(x, fail) => {
                let sx = pick(&strs, x);
                // The body prints independently of its (maybe failing) ask:
                // the line appears only if the body completes (`ais_vm::tx`).
                let op = b.ins(Opcode::TryCatch, &[], &[Type::Str, Type::Ord]);
                let before = print_tok;
                b.with_region(op, "try", None, |b, _| {
                    let mut ops = vec![sx];
                    ops.extend(before);
                    let printed = b.ins1(Opcode::Print, &ops, Type::Ord);
                    let p = b.template(if fail { "BOOM {0}" } else { "ok {0}" }, &[sx]);
                    let v = b.ins1(Opcode::Ask, &[p], Type::Str);
                    b.yield_(&[v, printed]);
                });
                b.with_region(op, "catch", None, |b, r| {
                    let e = b.add_region_arg(r, Type::Json);
                    let c = b.ins_attrs(
                        Opcode::Member,
                        &[e],
                        attr("field", Attr::Str("code".into())),
                        &[Type::Json],
                    );
                    let c = b.result(c, 0);
                    let o = b.ins_attrs(
                        Opcode::Member,
                        &[e],
                        attr("field", Attr::Str("op".into())),
                        &[Type::Json],
                    );
                    let o = b.result(o, 0);
                    let v = b.template("caught {0} in {1}", &[c, o]);
                    let t = match before {
                        Some(t) => t,
                        None => b.ins1(Opcode::Fence, &[], Type::Ord),
                    };
                    b.yield_(&[v, t]);
                });
                strs.push(b.result(op, 0));
                print_tok = Some(b.result(op, 1));
            }
            Step::Print(x) => {
                let mut ops = vec![pick(&strs, x)];
                ops.extend(print_tok);
                print_tok = Some(b.ins1(Opcode::Print, &ops, Type::Ord));
            }
            Step::Remember(x) => {
                let mut ops = vec![pick(&strs, x)];
                ops.extend(mem_tok);
                let op = b.ins_attrs(
                    Opcode::Umem,
                    &ops,
                    attr("tier", Attr::Str("stm".into())),
                    &[Type::Ord],
                );
                mem_tok = Some(b.result(op, 0));
            }
            Step::Recall => {
                let q = b.const_str("*");
                let mut ops = vec![q];
                ops.extend(mem_tok);
                let op = b.ins_attrs(
                    Opcode::Qmem,
                    &ops,
                    attr("tier", Attr::Str("stm".into())),
                    &[Type::Json, Type::Ord],
                );
                mem_tok = Some(b.result(op, 1));
                let v = b.result(op, 0);
                strs.push(b.ins1(Opcode::ToStr, &[v], Type::Str));
            }
            Step::Call(x) => {
                let op = b.ins_attrs(
                    Opcode::FlowCall,
                    &[pick(&strs, x)],
                    attr(
                        "callee",
                        Attr::Symbol {
                            agent: "B".into(),
                            flow: "helper".into(),
                        },
                    ),
                    &[Type::Str],
                );
                strs.push(b.result(op, 0));
            }
        }
    }
    let data: Vec<Value> = nums.iter().chain(&strs).chain(&bools).copied().collect();
    let w = b.ins1(Opcode::WaitAll, &data, Type::Json);
    b.ret(Some(w));
    let mut a = AgentData::new("A");
    a.add_flow(f);
    let mut helper = FlowData::new("helper", Type::Str);
    let s = helper.add_param("s", Type::Str);
    let mut hb = helper.builder();
    let t = hb.template("helper: {0}", &[s]);
    let r = hb.ins1(Opcode::Reason, &[t], Type::Str);
    hb.ret(Some(r));
    let mut bagent = AgentData::new("B");
    bagent.add_flow(helper);
    let mut m = Module::new();
    m.add_agent(a);
    m.add_agent(bagent);
    let errs = ais_ir::verify_errors(&m);
    assert!(errs.is_empty(), "generator produced invalid IR: {errs:?}");
    bytecode::compile(&m).unwrap()
}

type Observed = (serde_json::Value, Vec<String>, Vec<ais_testkit::MemEntry>);

fn observe_vm(p: &Program, workers: usize) -> Observed {
    let host = Arc::new(MemoryHost::new());
    let o = RunOptions {
        workers: Some(workers),
        ..RunOptions::default()
    };
    let r = ais_vm::run(
        p,
        &o,
        Arc::new(FakeBackend::new().failing_on("BOOM")),
        host.clone(),
    );
    let v = r.outcome.unwrap();
    (v, host.printed(), host.entries("A", Tier::Stm))
}

fn observe_interp(p: &Program) -> Observed {
    let host = MemoryHost::new();
    let v = interp::run(p, None, &[], &FakeBackend::new().failing_on("BOOM"), &host).unwrap();
    (v, host.printed(), host.entries("A", Tier::Stm))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn vm_matches_the_interpreter(steps in proptest::collection::vec(step(), 1..40)) {
        let p = build(&steps);
        let want = observe_interp(&p);
        for workers in [1, 2, 8] {
            let got = observe_vm(&p, workers);
            prop_assert_eq!(&got, &want, "workers = {}", workers);
        }
        // And through the artifact.
        let back = bytecode::decode(&bytecode::encode(&p).unwrap()).unwrap();
        prop_assert_eq!(observe_vm(&back, 2), want);
    }
}
