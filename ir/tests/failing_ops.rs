//! Issue 32, defect 1: optimization must never change which ops fail. An
//! unused op that may fail at run time (`1 / 0`, `xs[7]`, a cast, `if` on a
//! value that may not be a bool) is not dead; rewrites must not make one
//! disappear either. Ops proved unable to fail still go.

use ais_ir::passes::{OptLevel, PassManager};
use ais_ir::{parse_module, print_module, verify_errors, Module};

fn parse(src: &str) -> Module {
    match parse_module(src) {
        Ok(m) => m,
        Err(e) => panic!("test IR does not parse: {e:?}"),
    }
}

fn run(src: &str, pipeline: &str) -> String {
    let mut m = parse(src);
    assert!(verify_errors(&m).is_empty(), "{:?}", verify_errors(&m));
    let mut pm = PassManager::parse(pipeline).expect("pipeline");
    pm.verify_each(true);
    pm.run(&mut m).expect("verifies after each pass");
    print_module(&m)
}

fn at_level(src: &str, level: OptLevel) -> String {
    let mut m = parse(src);
    let mut pm = PassManager::new(level);
    pm.verify_each(true);
    pm.run(&mut m).expect("verifies after each pass");
    print_module(&m)
}

#[test]
fn dce_kept_unused_division_by_zero() {
    let src = r#"agent @A {
  flow @main(%x: number, %b: bool) -> number entry {
    %0 = const {value = 0} : number
    %1 = div %x, %0 : number
    return %x
  }
}
"#;
    let out = run(src, "dce");
    assert!(out.contains("div"), "{out}");
}

#[test]
fn dce_kept_unused_failing_ops_and_removed_proved_safe_ones() {
    let src = r#"agent @A {
  flow @main(%x: number, %j: json) -> number entry {
    %zero = const {value = 0} : number
    %two = const {value = 2} : number
    %l = list %two, %x : list<number>
    %bad = index %l, %two : number
    %cast = cast %j : str
    %field = member %j {field = "a"} : json
    %ok = div %two, %two : number
    %in = index %l, %zero : number
    return %x
  }
}
"#;
    let out = run(src, "dce");
    assert_eq!(out.matches("= index").count(), 1, "{out}");
    assert!(
        out.contains("index %1, %0"),
        "out-of-range index kept: {out}"
    );
    assert!(out.contains("cast"), "{out}");
    assert!(out.contains("member"), "{out}");
    assert!(!out.contains("div"), "2 / 2 cannot fail: {out}");
}

/// The minimal program of the issue at IR level: the failing op sits in a
/// `try` body whose result is unused; at every level the `try_catch` (and
/// the division in it) must survive, or the `catch` would never run.
#[test]
fn optimization_kept_the_failing_op_of_a_try_body_at_every_level() {
    let src = r#"agent @A {
  flow @main(%topic: str) -> str entry {
    %start = const {value = "start"} : str
    %r = try_catch : str {
      try {
        %one = const {value = 1} : number
        %zero = const {value = 0} : number
        %z = div %one, %zero : number
        %done = const {value = "no failure"} : str
        yield %done
      }
      catch(%e: json) {
        %c = const {value = "caught"} : str
        yield %c
      }
    }
    return %r
  }
}
"#;
    for level in [OptLevel::O1, OptLevel::O2] {
        let out = at_level(src, level);
        assert!(out.contains("div"), "{level:?}: {out}");
        assert!(out.contains("try_catch"), "{level:?}: {out}");
    }
}
