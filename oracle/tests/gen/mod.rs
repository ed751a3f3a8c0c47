//! Random well-typed AIS programs as proptest strategies.
//!
//! A program is a small tree of our own ([`Stmt`], [`NumE`], [`StrE`],
//! [`Cond`]) rendered to source by [`render`]. Variables are referred to by
//! an index that [`render`] resolves against the variables of the right type
//! in scope (a literal when there is none), so every tree renders to a
//! program that checks, and shrinking any part keeps it well typed.
//!
//! Shape: agent `A` (beliefs `mood: str`, `count: number`) with the entry
//! `main(n: number, s: str) -> str` and a helper `step(x: number) -> number`;
//! agent `B` with `B.work(t: str) -> str`. `main` may call both, the others
//! call nothing (no recursion). Every flow ends with a `return`.

use proptest::prelude::*;

/// Features that can be switched off because the VM does not agree with the
/// documented semantics yet (owned by another branch); see docs/runtime.md.
/// Pure ops that may fail (`/`, `%`, an index; used and unused, in and out
/// of `try` bodies, in `main` only) are always generated.
#[derive(Clone, Copy, Debug)]
pub struct Features {
    /// Effects (print, memory, beliefs, effectful calls) inside `try`
    /// bodies. The lead's semantics: discarded when the body fails.
    pub effects_in_try: bool,
    /// LLM and tool calls inside a `try` body that fails: the VM abandons
    /// the body at the first failure, so whether a call independent of the
    /// failure was made depends on the schedule.
    pub calls_in_failing_try: bool,
    /// Effects (print, memory, beliefs) in called flows (`step`, `B.work`):
    /// the VM runs data-independent calls concurrently and does not order
    /// their effects on a chain by program order.
    pub effects_in_calls: bool,
    /// Calls of the side-effecting tool `record` (needs tool effect tokens).
    pub side_effecting_tools: bool,
}

#[derive(Clone, Debug)]
pub enum NumE {
    Lit(i8),
    Var(u8),
    Add(Box<NumE>, Box<NumE>),
    Sub(Box<NumE>, Box<NumE>),
    Times(Box<NumE>, i8),
    /// `step(x)` (from `main` only).
    Step(Box<NumE>),
    /// `record(...)` tool result as a number.
    Record,
}

#[derive(Clone, Debug)]
pub enum StrE {
    Lit(u8),
    Var(u8),
    /// `"t{v}"` for any variable v.
    Template(u8),
    Concat(Box<StrE>, Box<StrE>),
    ConcatNum(Box<StrE>, Box<NumE>),
    /// An LLM text op (kind index) with a prompt and maybe a context value.
    Llm(u8, Box<StrE>, Option<Box<StrE>>),
    /// `"" + reflect/verify/plan(...)` field: a structured op.
    Structured(u8, Box<StrE>),
    /// `B.work(t)` (from `main` only).
    Work(Box<StrE>),
    /// `"" + inv("lookup", ...)` on a variable.
    Lookup(u8),
    /// `"" + qmem(query, tier)`.
    Qmem(u8, u8),
}

#[derive(Clone, Debug)]
pub enum Cond {
    Less(NumE, NumE),
    NumEq(NumE, NumE),
    StrEq(StrE, u8),
    Not(Box<Cond>),
    And(Box<Cond>, Box<Cond>),
    Truthy(StrE),
}

/// A pure op that may fail (`arith.div_by_zero`, `index.out_of_range`),
/// bound by `let`: unused (`let _fN = ...`, which no pass may drop) or
/// added to the variables in scope.
#[derive(Clone, Debug)]
pub enum FailE {
    /// `a / b`.
    Div(NumE, NumE),
    /// `a % b`.
    Mod(NumE, NumE),
    /// `[10, 20, ...][i]` with 1 to 3 items.
    Index(u8, NumE),
}

#[derive(Clone, Debug)]
pub enum Stmt {
    /// `let` of a pure op that may fail; `true`: left unused.
    Fail(FailE, bool),
    LetNum(NumE),
    LetStr(StrE),
    SetNum(u8, NumE),
    SetStr(u8, StrE),
    Print(StrE, Option<NumE>),
    Umem(StrE, u8, Option<u8>),
    /// `count = count + k` / `mood = s` (belief effects, agent A only).
    Belief(NumE, StrE),
    If(Cond, Vec<Stmt>, Vec<Stmt>),
    /// `if (c) { return e }`: a guard clause.
    Guard(Cond, StrE, NumE),
    Return(StrE, NumE),
    Loop(u8, Vec<Stmt>),
    /// `try { body } catch { handler }`; `fails` puts a failing tool call at
    /// the given position of the body.
    Try(Vec<Stmt>, Option<u8>, Vec<Stmt>),
    Switch(StrE, Vec<Vec<Stmt>>, StrE),
}

#[derive(Clone, Debug)]
pub struct Case {
    pub main: Vec<Stmt>,
    pub step: Vec<Stmt>,
    pub work: Vec<Stmt>,
    pub n: i8,
    pub s: u8,
}

const WORDS: [&str; 8] = [
    "billing",
    "Billing.",
    " BUG: crash",
    "bug",
    "other",
    "",
    "x y",
    "**billing**",
];
const CASES: [&str; 3] = ["billing", "bug", "other"];
const TEXT_OPS: [&str; 4] = ["ask", "think", "reason", "llm"];
const TIERS: [&str; 3] = ["stm", "ltm", "episodic"];

fn num(depth: u32) -> BoxedStrategy<NumE> {
    let leaf = prop_oneof![
        (-3i8..6).prop_map(NumE::Lit),
        any::<u8>().prop_map(NumE::Var),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let sub = num(depth - 1);
    prop_oneof![
        3 => leaf,
        1 => (sub.clone(), sub.clone()).prop_map(|(a, b)| NumE::Add(Box::new(a), Box::new(b))),
        1 => (sub.clone(), sub.clone()).prop_map(|(a, b)| NumE::Sub(Box::new(a), Box::new(b))),
        1 => (sub.clone(), -2i8..3).prop_map(|(a, k)| NumE::Times(Box::new(a), k)),
        1 => sub.prop_map(|a| NumE::Step(Box::new(a))),
        1 => Just(NumE::Record),
    ]
    .boxed()
}

fn text(depth: u32) -> BoxedStrategy<StrE> {
    let leaf = prop_oneof![
        any::<u8>().prop_map(StrE::Lit),
        any::<u8>().prop_map(StrE::Var),
        any::<u8>().prop_map(StrE::Template),
        any::<u8>().prop_map(StrE::Lookup),
        (any::<u8>(), any::<u8>()).prop_map(|(q, t)| StrE::Qmem(q, t)),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let sub = text(depth - 1);
    prop_oneof![
        4 => leaf,
        1 => (sub.clone(), sub.clone()).prop_map(|(a, b)| StrE::Concat(Box::new(a), Box::new(b))),
        1 => (sub.clone(), num(depth - 1)).prop_map(|(a, b)| StrE::ConcatNum(Box::new(a), Box::new(b))),
        2 => (0u8..4, sub.clone(), proptest::option::of(sub.clone()))
            .prop_map(|(k, p, c)| StrE::Llm(k, Box::new(p), c.map(Box::new))),
        1 => (0u8..3, sub.clone()).prop_map(|(k, p)| StrE::Structured(k, Box::new(p))),
        1 => sub.prop_map(|a| StrE::Work(Box::new(a))),
    ]
    .boxed()
}

fn cond() -> BoxedStrategy<Cond> {
    let leaf = prop_oneof![
        (num(1), num(1)).prop_map(|(a, b)| Cond::Less(a, b)),
        (num(1), num(1)).prop_map(|(a, b)| Cond::NumEq(a, b)),
        (text(1), any::<u8>()).prop_map(|(a, w)| Cond::StrEq(a, w)),
        text(1).prop_map(Cond::Truthy),
    ];
    leaf.prop_recursive(2, 4, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            (inner.clone(), inner).prop_map(|(a, b)| Cond::And(Box::new(a), Box::new(b))),
        ]
    })
    .boxed()
}

fn fail() -> BoxedStrategy<FailE> {
    prop_oneof![
        (num(1), num(1)).prop_map(|(a, b)| FailE::Div(a, b)),
        (num(1), num(1)).prop_map(|(a, b)| FailE::Mod(a, b)),
        (1u8..4, num(1)).prop_map(|(n, i)| FailE::Index(n, i)),
    ]
    .boxed()
}

/// Whether `stmts` hold a pure op that may fail (anywhere: nested bodies
/// and handlers too, conservatively).
pub fn may_fail(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::Fail(..) => true,
        Stmt::If(_, t, e) => may_fail(t) || may_fail(e),
        Stmt::Loop(_, b) => may_fail(b),
        Stmt::Try(b, _, h) => may_fail(b) || may_fail(h),
        Stmt::Switch(_, arms, _) => arms.iter().any(|a| may_fail(a)),
        _ => false,
    })
}

fn stmts(depth: u32) -> BoxedStrategy<Vec<Stmt>> {
    let simple = prop_oneof![
        2 => (fail(), any::<bool>()).prop_map(|(f, unused)| Stmt::Fail(f, unused)),
        1 => num(2).prop_map(Stmt::LetNum),
        1 => text(2).prop_map(Stmt::LetStr),
        1 => (any::<u8>(), num(2)).prop_map(|(v, e)| Stmt::SetNum(v, e)),
        1 => (any::<u8>(), text(2)).prop_map(|(v, e)| Stmt::SetStr(v, e)),
        1 => (text(1), proptest::option::of(num(1))).prop_map(|(a, b)| Stmt::Print(a, b)),
        1 => (text(1), 0u8..3, proptest::option::of(0u8..3)).prop_map(|(v, t, k)| Stmt::Umem(v, t, k)),
        1 => (num(1), text(1)).prop_map(|(a, b)| Stmt::Belief(a, b)),
        1 => (cond(), text(1), num(1)).prop_map(|(c, s, n)| Stmt::Guard(c, s, n)),
        1 => (text(1), num(1)).prop_map(|(s, n)| Stmt::Return(s, n)),
    ];
    if depth == 0 {
        return proptest::collection::vec(simple, 0..4).boxed();
    }
    let inner = stmts(depth - 1);
    let compound = prop_oneof![
        (cond(), inner.clone(), inner.clone()).prop_map(|(c, t, e)| Stmt::If(c, t, e)),
        (0u8..4, inner.clone()).prop_map(|(n, b)| Stmt::Loop(n, b)),
        (
            inner.clone(),
            proptest::option::of(any::<u8>()),
            inner.clone(),
            // An unused failing pure op somewhere in the body, often.
            proptest::option::of((any::<u8>(), fail())),
        )
            .prop_map(|(mut b, f, h, pure)| {
                if let Some((at, e)) = pure {
                    let at = at as usize % (b.len() + 1);
                    b.insert(at, Stmt::Fail(e, true));
                }
                Stmt::Try(b, f, h)
            }),
        (text(1), proptest::collection::vec(inner, 1..4), text(1))
            .prop_map(|(s, arms, d)| Stmt::Switch(s, arms, d)),
    ];
    proptest::collection::vec(prop_oneof![3 => simple, 1 => compound], 0..4).boxed()
}

pub fn case() -> impl Strategy<Value = Case> {
    (stmts(2), stmts(1), stmts(1), -3i8..6, any::<u8>()).prop_map(|(main, step, work, n, s)| Case {
        main,
        step,
        work,
        n,
        s,
    })
}

impl Case {
    pub fn args(&self) -> Vec<(String, serde_json::Value)> {
        vec![
            ("n".into(), serde_json::json!(self.n)),
            (
                "s".into(),
                serde_json::json!(WORDS[self.s as usize % WORDS.len()]),
            ),
        ]
    }
}

mod render;
pub use render::render;
