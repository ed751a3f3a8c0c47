//! Formatter properties on generated programs (the random program
//! generators of `lower_props.rs` and of the oracle's differential tests)
//! and on the examples, each also with its layout perturbed: spaces and
//! indentation changed, empty lines, block comments between any two tokens
//! and line comments at the ends of lines. For every input:
//! - it formats (the formatter's own check passes);
//! - `fmt(fmt(x)) == fmt(x)`;
//! - the program is unchanged (equal trees once spans are erased);
//! - every comment survives, text and order;
//! - changing only spaces and indentation does not change the result (the
//!   layout is canonical).
//!
//! `PROPTEST_CASES` scales the run.

use ais_choices::{tape, Choices};
use ais_compiler::driver::with_deep_stack;
use ais_compiler::format::format_source;
use ais_compiler::syntax::erase::erase_spans;
use ais_compiler::syntax::lexer::{comments, lex, Tok};
use ais_compiler::syntax::parse;
use proptest::prelude::*;

mod gen_programs;

#[path = "../../oracle/tests/gen/mod.rs"]
#[allow(dead_code)]
mod oracle_gen;

fn comment_texts(src: &str) -> Vec<String> {
    comments(src)
        .iter()
        .map(|c| c.text(src).to_string())
        .collect()
}

/// What a perturbation may do besides changing spaces.
#[derive(Clone, Copy)]
struct Perturb {
    comments: bool,
    blank_lines: bool,
}

/// `src` with its layout changed between tokens as `choices` say.
fn perturb(src: &str, choices: &mut Choices, how: Perturb) -> String {
    let (tokens, _) = lex(src);
    // Token boundaries; line breaks are gaps, not tokens.
    let bounds: Vec<(usize, usize)> = tokens
        .iter()
        .filter(|(l, t, r)| !(*t == Tok::Sep && src.get(*l..*r) == Some("\n")))
        .map(|(l, _, r)| (*l, *r))
        .collect();
    let mut out = String::new();
    let mut at = 0usize;
    let mut n = 0usize;
    for (l, r) in bounds
        .iter()
        .copied()
        .chain(std::iter::once((src.len(), src.len())))
    {
        let gap = &src[at..l];
        // Existing comments in the gap are kept as they are.
        if gap.contains("//") || gap.contains("/*") {
            out.push_str(gap);
        } else {
            let has_newline = gap.contains('\n');
            match choices.below(6) {
                1 => {
                    // Other spaces (at least one where there were some).
                    let spaces = " ".repeat(1 + choices.below(3));
                    if has_newline {
                        let lines = gap.matches('\n').count();
                        out.push_str(&spaces);
                        out.push_str(&"\n".repeat(lines));
                        out.push_str(&" ".repeat(choices.below(9)));
                    } else if !gap.is_empty() || at > 0 {
                        out.push_str(&spaces);
                    }
                }
                2 if how.comments => {
                    n += 1;
                    out.push_str(&format!(" /* c{n} */ "));
                    out.push_str(gap);
                }
                3 if how.comments && has_newline => {
                    n += 1;
                    let (before, after) = gap.split_at(gap.find('\n').unwrap_or(0));
                    out.push_str(before);
                    out.push_str(&format!(" // l{n}"));
                    out.push_str(after);
                }
                4 if how.blank_lines && has_newline => {
                    out.push('\n');
                    out.push_str(gap);
                }
                _ => out.push_str(gap),
            }
        }
        out.push_str(&src[l..r]);
        at = r;
    }
    out
}

/// The properties for one input; `original` is the unperturbed program.
fn check(original: &str, perturbed: &str, only_spaces: bool) -> Result<(), TestCaseError> {
    let once = format_source(perturbed)
        .map_err(|e| TestCaseError::fail(format!("{e}\n--- input\n{perturbed}")))?;
    let twice = format_source(&once).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&twice, &once, "not idempotent; input:\n{}", perturbed);
    prop_assert!(
        erase_spans(&parse(&once).file) == erase_spans(&parse(original).file),
        "the program changed:\n{}",
        once
    );
    prop_assert_eq!(comment_texts(&once), comment_texts(perturbed));
    if only_spaces {
        let canonical = format_source(original).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            &once,
            &canonical,
            "spaces changed the layout; input:\n{}",
            perturbed
        );
    }
    Ok(())
}

fn examples() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "ais"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect()
}

const SPACES: Perturb = Perturb {
    comments: false,
    blank_lines: false,
};
const EVERYTHING: Perturb = Perturb {
    comments: true,
    blank_lines: true,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn generated_programs(program in tape(), layout in tape()) {
        let src = gen_programs::program(program);
        let mut layout = layout;
        with_deep_stack(|| {
            check(&src, &src, true)?;
            check(&src, &perturb(&src, &mut layout.clone(), SPACES), true)?;
            check(&src, &perturb(&src, &mut layout, EVERYTHING), false)
        })?;
    }

    #[test]
    fn oracle_programs(case in oracle_gen::case(), layout in tape()) {
        let features = oracle_gen::Features {
            effects_in_try: true,
            calls_in_failing_try: true,
            effects_in_calls: true,
            side_effecting_tools: true,
        };
        let src = oracle_gen::render(&case, features);
        let mut layout = layout;
        with_deep_stack(|| {
            check(&src, &src, true)?;
            check(&src, &perturb(&src, &mut layout, EVERYTHING), false)
        })?;
    }

    #[test]
    fn examples_with_perturbed_layout(which in any::<prop::sample::Index>(), layout in tape()) {
        let all = examples();
        prop_assert!(!all.is_empty());
        let src = which.get(&all).clone();
        let mut layout = layout;
        with_deep_stack(|| {
            check(&src, &perturb(&src, &mut layout.clone(), SPACES), true)?;
            check(&src, &perturb(&src, &mut layout, EVERYTHING), false)
        })?;
    }
}

#[test]
fn perturbation_changes_the_text_but_not_the_program() {
    let src = "agent A {\n    flow f(x: str) -> str {\n        return ask(\"q\", x)\n    }\n}\n";
    let mut c = Choices::new(vec![2, 3, 1, 4, 2, 2, 3, 1, 1, 2, 4, 3]);
    let p = perturb(src, &mut c, EVERYTHING);
    assert_ne!(p, src);
    assert!(p.contains("/* c"), "{p}");
    assert_eq!(erase_spans(&parse(&p).file), erase_spans(&parse(src).file));
}
