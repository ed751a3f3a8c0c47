//! Codegen, artifact and loader tests, including a bounded fuzz of the
//! loader (set `PROPTEST_CASES` for a longer run).
#![allow(clippy::unwrap_used)]

use super::*;
use proptest::prelude::*;

/// Large graphs are memory-bound on reading instructions: keep `Instr`
/// small (rare, bulky immediates go behind a box).
#[test]
fn instr_stays_small() {
    eprintln!(
        "Instr: {} bytes, Imm: {} bytes",
        std::mem::size_of::<Instr>(),
        std::mem::size_of::<Imm>()
    );
    assert!(std::mem::size_of::<Instr>() <= 112);
}

const SRC: &str = r#"
agent @A {
  belief @mood = json "calm"
  capability @search(query: str) -> json
  on "user.message" @main
  flow @main(%x: str, %xs: list<str>) -> str entry {
    %0 = template %x {template = "Q: {0}"} : str
    %1 = ask %0 {model = "fast", temperature = 0.5} : str
    %2 = flow.call %1 {callee = @B.helper} : str
    %3, %4 = qmem %1 {tier = "ltm", limit = 2} : json, ord
    %5 = umem %2, %4 {tier = "ltm"} : ord
    %6 = switch %1 : str {
      case "a" {
        %7 = think %2, %x : str
        yield %7
      }
      default {
        yield %2
      }
    }
    %8 = loop %xs, %6 {max_iters = 4} : str {
      body(%9: str, %10: number, %11: str) {
        %12 = concat %11, %9, %x : str
        yield %12
      }
    }
    %13, %14 = try_catch : str, json {
      try {
        %15 = const {value = json {"query":"q"}} : json
        %16 = inv %15 {tool = "search"} : json
        %17 = to_str %16 : str
        yield %17, %16
      }
      catch(%18: json) {
        %19 = to_str %18 : str
        yield %19, %18
      }
    }
    %20 = print %8, %13, %5 : ord
    return %8
  }
}
agent @B {
  flow @helper(%q: str) -> str {
    %0 = reason %q : str
    return %0
  }
}
"#;

fn program() -> Program {
    let m = crate::parse_module(SRC).unwrap();
    assert!(
        crate::verify_errors(&m).is_empty(),
        "{:?}",
        crate::verify_errors(&m)
    );
    compile(&m).unwrap()
}

fn with_checksum(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.len() >= HEADER_LEN {
        let crc = crc32fast::hash(&bytes[HEADER_LEN..]);
        bytes[12..16].copy_from_slice(&crc.to_le_bytes());
        let len = (bytes.len() - HEADER_LEN) as u64;
        bytes[16..24].copy_from_slice(&len.to_le_bytes());
    }
    bytes
}

fn reencode(p: &Program) -> Vec<u8> {
    // Bypasses `encode`'s callers' validation: writes whatever `p` is.
    let payload = postcard::to_stdvec(p).unwrap();
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 12]);
    out.extend_from_slice(&payload);
    with_checksum(out)
}

/// The consuming code generator (which frees each flow's graph as it goes)
/// gives the same program, calls across agents resolved, and reports the
/// same error for a module `compile` rejects.
#[test]
fn compile_owned_matches_compile() {
    let m = crate::parse_module(SRC).unwrap();
    let by_ref = compile(&m).unwrap();
    assert_eq!(compile_owned(m).unwrap(), by_ref);

    // `@A.main` calls `@B.helper`: renamed, the call no longer resolves.
    let mut m = crate::parse_module(SRC).unwrap();
    let (_, b) = m.agents.iter_mut().nth(1).unwrap();
    let (_, h) = b.flows.iter_mut().next().unwrap();
    h.name = "gone".into();
    let err = compile(&m).unwrap_err();
    assert!(matches!(err, CompileError::UnknownCallee { .. }), "{err}");
    assert_eq!(compile_owned(m).unwrap_err(), err);
}

#[test]
fn compiles_regions_slots_and_consumers() {
    let p = program();
    assert_eq!(p.flows.len(), 2);
    let main = &p.flows[0];
    assert!(main.entry);
    // body, case "a", default, loop body, try, catch
    let kinds: Vec<&RegionKind> = main.regions.iter().map(|r| &r.kind).collect();
    assert_eq!(
        kinds,
        [
            &RegionKind::Body,
            &RegionKind::Case("a".into()),
            &RegionKind::Default,
            &RegionKind::LoopBody,
            &RegionKind::Try,
            &RegionKind::Catch
        ]
    );
    let body = &main.regions[0];
    // The switch captures %2 and %x: they are deps of the switch op.
    let sw = body
        .ops
        .iter()
        .find(|o| o.opcode == Opcode::Switch)
        .unwrap();
    assert_eq!(body.deps(sw).len(), 2);
    assert_eq!(main.regions[1].captures.len(), 2);
    // The loop body captures %x (slot 0 of the body).
    assert_eq!(main.regions[3].captures, [0]);
    assert_eq!(main.regions[3].n_args, 3);
    // The template consumes the parameter %x.
    assert!(body.consumers_of(0).contains(&0));
    // The try_catch captures nothing: it is ready at once.
    assert_eq!(body.roots, [7]);
    // Critical path: ask (1000) → call (reason 10000) → ... ≥ 11000.
    assert!(main.cp_ms >= 11_000, "{}", main.cp_ms);
    assert_eq!(p.flows[1].cp_ms, 10_000);
    assert!(matches!(
        body.ops[3].imm,
        Imm::Query {
            tier: TierCode::Ltm,
            limit: Some(2)
        }
    ));
    assert_eq!(p.find_entry(None), Ok(0));
    assert_eq!(p.find_entry(Some("B.helper")), Ok(1));
    assert_eq!(p.find_entry(Some("helper")), Ok(1));
    assert!(p.find_entry(Some("B.nope")).is_err());
}

#[test]
fn artifact_round_trips_and_inspects() {
    let p = program();
    let bytes = encode(&p).unwrap();
    assert_eq!(&bytes[..8], b"APXMOBJ\0");
    assert_eq!(decode(&bytes).unwrap(), p);
    let dump = inspect(&p);
    for needle in [
        &format!(
            "apxmobj format {} · 2 agent(s) · 2 flow(s)",
            super::artifact::FORMAT_VERSION
        ),
        "flow #0 @A.main(x: str, xs: list<str>) -> str entry",
        "region 1 case \"a\"",
        "flow.call s3 {callee = @B.helper}",
        "qmem s3 {tier = \"ltm\", limit = 2}",
        "belief @mood = \"calm\"",
        "7: s10: str, s11: json = try_catch regions[4, 5]",
        "0: s0: json = const {value = json {\"query\":\"q\"}}",
        "on \"user.message\" @A.main",
    ] {
        assert!(dump.contains(needle), "missing {needle:?} in\n{dump}");
    }
}

#[test]
fn every_corpus_file_compiles_and_round_trips() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ir-text");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "aisir") {
            let src = std::fs::read_to_string(&path).unwrap();
            let m = crate::parse_module(&src).unwrap();
            let p = compile(&m).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(decode(&encode(&p).unwrap()).unwrap(), p);
            n += 1;
        }
    }
    assert!(n >= 2);
}

#[test]
fn loader_rejects_bad_containers() {
    let good = encode(&program()).unwrap();
    let code = |b: &[u8]| decode(b).unwrap_err().code();
    assert_eq!(code(&good[..10]), "L0001");
    assert_eq!(code(b"hello world, this is not an artifact"), "L0002");
    let mut v = good.clone();
    v[8] = 9;
    assert_eq!(code(&v), "L0003");
    assert!(decode(&v).unwrap_err().to_string().contains("version 9"));
    assert_eq!(code(&good[..good.len() - 1]), "L0004");
    let mut v = good.clone();
    v.push(0);
    assert_eq!(code(&v), "L0005");
    let mut v = good.clone();
    let last = v.len() - 1;
    v[last] ^= 0x40;
    assert_eq!(code(&v), "L0006");
    // A valid checksum over garbage.
    let mut v = good[..HEADER_LEN].to_vec();
    v.extend_from_slice(&[0xff; 40]);
    assert_eq!(code(&with_checksum(v)), "L0007");
    let d = crate::IntoDiagnostic::into_diagnostic(decode(&good[..good.len() - 1]).unwrap_err());
    assert_eq!(d.code, "L0004");
}

#[test]
fn loader_rejects_bad_indices_and_ill_typed_code() {
    let p = program();
    let code = |p: &Program| decode(&reencode(p)).unwrap_err().code();
    let mut q = p.clone();
    q.flows[0].regions[0].operands[0] = 9999;
    assert_eq!(code(&q), "L0008");
    let mut q = p.clone();
    q.flows[0].regions[0].ops[2].imm = Imm::Callee(77);
    assert_eq!(code(&q), "L0008");
    let mut q = p.clone();
    q.agents[0].flows.push(42);
    assert_eq!(code(&q), "L0008");
    // `ask` turned into `add`: operand and result types no longer fit.
    let mut q = p.clone();
    q.flows[0].regions[0].ops[1].opcode = Opcode::Add;
    assert_eq!(code(&q), "L0009");
    // The return moved before the end of the body.
    let mut q = p.clone();
    let ops = &mut q.flows[0].regions[0].ops;
    let n = ops.len();
    ops.swap(n - 1, n - 2);
    assert!(decode(&reencode(&q)).is_err());
    // A consumer list that disagrees with the operands.
    let mut q = p.clone();
    q.flows[0].regions[0].consumers.reverse();
    assert_eq!(code(&q), "L0010");
    // A list type that refers to itself.
    let mut q = p.clone();
    q.types.push(TypeEntry::List(q.types.len() as u32));
    assert_eq!(code(&q), "L0008");
}

#[test]
fn loader_rejects_a_belief_initialiser_with_an_effect() {
    // Flow 0 asks a model: as a belief initialiser it would run before the
    // run, outside the journal and the flow policy (`crate::effects`).
    let mut q = program();
    q.agents[0].beliefs.push(BeliefEntry {
        name: "mood".into(),
        init: BeliefInitCode::Flow(0),
    });
    let e = decode(&reencode(&q)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("belief \"mood\"") && text.contains("`ask`"),
        "{text}"
    );
    // A constant initialiser is fine.
    let mut q = program();
    q.agents[0].beliefs.push(BeliefEntry {
        name: "mood".into(),
        init: BeliefInitCode::Const(0),
    });
    assert!(decode(&reencode(&q)).is_ok());
}

/// A structural mutation of a program: one numeric field set to `v`.
fn mutate(p: &mut Program, which: u8, a: usize, b: usize, v: u32) {
    let nf = p.flows.len().max(1);
    let f = &mut p.flows[a % nf];
    let nr = f.regions.len().max(1);
    let r = &mut f.regions[b % nr];
    let no = r.ops.len().max(1);
    let pick = |len: usize| if len == 0 { 0 } else { (v as usize) % len };
    match which % 12 {
        0 => {
            let i = pick(r.operands.len());
            if let Some(x) = r.operands.get_mut(i) {
                *x = v;
            }
        }
        1 => r.ops[a % no].first_operand = v,
        2 => r.ops[a % no].n_data = v % 8,
        3 => r.ops[a % no].result = v,
        4 => r.ops[a % no].regions.push(v % 8),
        5 => {
            let i = pick(r.consumers.len());
            if let Some(x) = r.consumers.get_mut(i) {
                *x = v;
            }
        }
        6 => {
            let i = pick(r.pending.len());
            if let Some(x) = r.pending.get_mut(i) {
                *x = v % 4;
            }
        }
        7 => r.captures.push(v % 16),
        8 => {
            let i = pick(r.slot_types.len());
            if let Some(x) = r.slot_types.get_mut(i) {
                *x = v % 12;
            }
        }
        9 => r.n_args = v % 5,
        10 => {
            let ops = Opcode::ALL;
            r.ops[a % no].opcode = ops[(v as usize) % ops.len()];
        }
        _ => r.ops[a % no].n_deps = v % 4,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
        let mut with_header = MAGIC.to_vec();
        with_header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        with_header.extend_from_slice(&[0; 12]);
        with_header.extend_from_slice(&bytes);
        let _ = decode(&with_checksum(with_header));
    }

    #[test]
    fn flipped_payload_bytes_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let good = encode(&program()).unwrap();
        let mut v = good.clone();
        for (at, x) in flips {
            let i = HEADER_LEN + at % (v.len() - HEADER_LEN);
            v[i] ^= x | 1;
        }
        // Checksum fixed so the payload reaches postcard and the validator.
        let _ = decode(&with_checksum(v.clone()));
        let keep = HEADER_LEN + cut % (v.len() - HEADER_LEN);
        let _ = decode(&with_checksum(v[..keep].to_vec()));
    }

    #[test]
    fn structural_mutations_are_rejected_or_valid(
        muts in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), any::<u32>()), 1..4)
    ) {
        let mut p = program();
        for (w, a, b, v) in muts {
            mutate(&mut p, w, a, b, v);
        }
        if let Ok(q) = decode(&reencode(&p)) {
            // Whatever passes validation can be inspected and re-encoded.
            let _ = inspect(&q);
            prop_assert_eq!(decode(&encode(&q).unwrap()).unwrap(), q);
        }
    }
}

#[test]
fn sure_llm_calls_count_the_body_and_its_callees_not_arms_or_loops() {
    let p = program();
    let main = p.find_entry(None).unwrap();
    let helper = p.find_entry(Some("B.helper")).unwrap();
    // `ask` and the helper's `reason`; the `think` in a switch arm may not run.
    assert_eq!(p.sure_llm_calls(main), 2);
    assert_eq!(p.sure_llm_calls(helper), 1);
    // A flow that calls itself counts that call as 0, and ends.
    let m = crate::parse_module(
        r#"
agent @A {
  flow @r(%q: str) -> str entry {
    %0 = ask %q : str
    %1 = flow.call %0 {callee = @A.s} : str
    return %1
  }
  flow @s(%q: str) -> str {
    %0 = think %q : str
    %1 = flow.call %0 {callee = @A.r} : str
    return %1
  }
}
"#,
    )
    .unwrap();
    let p = compile(&m).unwrap();
    let r = p.find_entry(None).unwrap();
    assert_eq!(p.sure_llm_calls(r), 2);
}
