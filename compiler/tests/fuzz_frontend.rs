//! Fuzzing the lexer, parser and checker with proptest: random text, random
//! token soup, and mutations of the real examples. The front end must never
//! panic and must always finish; every diagnostic must carry an in-bounds span.
//! `PROPTEST_CASES` scales the run (CI uses the default, a few seconds).

use ais_compiler::driver::check_source;
use proptest::prelude::*;
use std::path::Path;

/// The fuzz vocabulary: the reserved words, then operations, names,
/// literals (some malformed) and punctuation.
fn vocab() -> &'static [&'static str] {
    static V: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let mut v = ais_compiler::syntax::lexer::RESERVED_WORDS.to_vec();
        v.push("@entry");
        v.extend_from_slice(OTHER_WORDS);
        v
    })
}

const OTHER_WORDS: &[&str] = &[
    "ask", "think", "reason", "inv", "qmem", "umem", "fence", "merge", "wait_all", "print", "A",
    "B.f", "x", "y", "\"s\"", "\"{x}\"", "\"\\q\"", "\"", "'t'", "42", "3.5", "1e", "(", ")", "{",
    "}", "[", "]", ",", ":", ";", ".", "->", "=>", "|>", "=", "==", "!=", "<", "<=", ">", ">=",
    "&&", "||", "+", "-", "*", "/", "%", "!", "\n", "//c\n", "/*", "*/", "$", "é", "\t",
];

fn examples() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut out: Vec<String> = std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    if out.is_empty() {
        out.push("agent A { @entry flow main() -> str { return ask(\"hi\") } }".into());
    }
    out
}

fn assert_sane(src: &str) {
    ais_compiler::driver::with_deep_stack(|| sane(src));
}

fn sane(src: &str) {
    let fe = check_source(src);
    for d in &fe.diagnostics {
        let s = d.primary.span;
        assert!(s.start <= s.end, "inverted span {s:?}");
        assert!(
            s.end as usize <= src.len(),
            "span {s:?} past end {}",
            src.len()
        );
        // Rendering must not panic either.
        let _ = ais_compiler::diagnostics::render_human(d, "f.ais", src, false);
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Duplicate(usize, usize),
    Insert(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), 0usize..80).prop_map(|(a, n)| Mutation::Duplicate(a, n)),
        (any::<usize>(), 0usize..vocab().len()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn boundary(s: &str, i: usize) -> usize {
    let mut i = i % (s.len() + 1);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(mut s: String, m: &Mutation) -> String {
    match *m {
        Mutation::Delete(a, n) => {
            let a = boundary(&s, a);
            let b = boundary(&s, a + n);
            s.replace_range(a..b.max(a), "");
        }
        Mutation::Duplicate(a, n) => {
            let a = boundary(&s, a);
            let b = boundary(&s, a + n).max(a);
            let piece = s[a..b].to_string();
            s.insert_str(b, &piece);
        }
        Mutation::Insert(a, t) => {
            let a = boundary(&s, a);
            s.insert_str(a, vocab()[t]);
        }
        Mutation::Truncate(a) => {
            let a = boundary(&s, a);
            s.truncate(a);
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text(src in any::<String>()) {
        assert_sane(&src);
    }

    #[test]
    fn token_soup(toks in proptest::collection::vec(0..vocab().len(), 0..200)) {
        let src: String = toks.iter().map(|&i| vocab()[i]).collect::<Vec<_>>().join(" ");
        assert_sane(&src);
    }

    #[test]
    fn mutated_examples(which in any::<usize>(), muts in proptest::collection::vec(mutation(), 1..6)) {
        let ex = examples();
        let mut src = ex[which % ex.len()].clone();
        for m in &muts {
            src = apply(src, m);
        }
        assert_sane(&src);
    }
}

#[test]
fn deeply_nested_input_does_not_overflow() {
    // Nested lists, unary chains and blocks, far deeper than any real program.
    let depth = 20_000;
    let lists = format!(
        "agent A {{ flow f() -> json {{ return {}1{} }} }}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    assert_sane(&lists);
    let unary = format!(
        "agent A {{ flow f() -> number {{ return {}1 }} }}",
        "-".repeat(depth)
    );
    assert_sane(&unary);
    let blocks = format!(
        "agent A {{ flow f() {{ {} print(1) {} }} }}",
        "if (true) {".repeat(depth / 4),
        "}".repeat(depth / 4)
    );
    assert_sane(&blocks);
    // Past the nesting limit the rest of the file is rejected with one error.
    let too_deep = format!(
        "agent A {{ flow f() {{ print({}) }} }}",
        "[".repeat(200_000)
    );
    let fe = ais_compiler::driver::with_deep_stack(|| check_source(&too_deep).diagnostics);
    assert!(
        fe.iter().any(|d| d.message.contains("nested too deeply")),
        "{fe:?}"
    );
}
