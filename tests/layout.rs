//! The workspace's layout rules, checked on the sources themselves:
//!
//! - which crates a crate's own tests build (`cargo test -p ais-vm` must not
//!   compile the command line, the servers or the language server);
//! - no module cycle inside a runtime crate, following `crate::` and
//!   `super::` paths between its top-level modules.
//!
//! Both read `Cargo.toml` files and `.rs` sources as text: no `cargo`
//! subprocess, no network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// Workspace crate name → (normal deps, dev deps) among workspace crates.
type CrateDeps = BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>;

fn workspace_crates() -> CrateDeps {
    let root = root();
    let ws: toml::Value = toml::from_str(
        &std::fs::read_to_string(root.join("Cargo.toml")).expect("workspace manifest"),
    )
    .expect("workspace manifest parses");
    let members = ws["workspace"]["members"]
        .as_array()
        .expect("members is a list");
    let mut out = CrateDeps::new();
    for m in members {
        let dir = root.join(m.as_str().expect("member is a path"));
        let manifest: toml::Value = toml::from_str(
            &std::fs::read_to_string(dir.join("Cargo.toml")).expect("member manifest"),
        )
        .expect("member manifest parses");
        let name = manifest["package"]["name"]
            .as_str()
            .expect("package name")
            .to_string();
        let deps = |table: &str| -> BTreeSet<String> {
            manifest
                .get(table)
                .and_then(|t| t.as_table())
                .map(|t| {
                    t.keys()
                        .filter(|k| k.starts_with("ais-"))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        };
        out.insert(name, (deps("dependencies"), deps("dev-dependencies")));
    }
    out
}

/// The workspace crates `cargo test -p NAME` compiles: NAME's normal and dev
/// dependencies, then the normal dependencies of each of those.
fn test_closure(crates: &CrateDeps, name: &str) -> BTreeSet<String> {
    let (normal, dev) = &crates[name];
    let mut todo: Vec<String> = normal.iter().chain(dev).cloned().collect();
    let mut seen = BTreeSet::new();
    while let Some(c) = todo.pop() {
        if c == name || !seen.insert(c.clone()) {
            continue;
        }
        if let Some((n, _)) = crates.get(&c) {
            todo.extend(n.iter().cloned());
        }
    }
    seen
}

#[test]
fn library_tests_do_not_build_the_edge() {
    let crates = workspace_crates();
    let edge = ["ais-cli", "ais-serve", "ais-lsp"];
    for lib in [
        "ais-ir",
        "ais-compiler",
        "ais-vm",
        "ais-stdlib",
        "ais-testkit",
    ] {
        assert!(crates.contains_key(lib), "{lib} is a workspace member");
        let closure = test_closure(&crates, lib);
        let built: Vec<_> = edge.iter().filter(|e| closure.contains(**e)).collect();
        assert!(
            built.is_empty(),
            "`cargo test -p {lib}` would build {built:?} (through {closure:?})"
        );
    }
}

// ---------------------------------------------------------------------------
// Module graph and file sizes of the runtime crates.

/// Every crate that is not the compiler (`compiler`, `ir`) nor a test
/// harness (`tests`, `bench`): the module-cycle and file-size rules hold
/// in each.
const RUNTIME_CRATES: &[&str] = &[
    "vm",
    "serve",
    "cli",
    "wire",
    "planner",
    "stdlib",
    "lsp",
    "oracle",
    "testkit",
    "testkit/choices",
    "testkit/fault-cli",
];

/// The longest a hand-written source file may be.
const MAX_LINES: usize = 800;

/// Module cycles tolerated: none (the last seven were untied by moving
/// what both sides used below them). A cycle found must lie inside one of
/// these; any other cycle fails. This list only shrinks.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// Source files over [`MAX_LINES`] known today, to be split by concept.
/// Any other file over the limit fails. This list only shrinks.
const KNOWN_OVERSIZED: &[&str] = &[];

/// A module path (`aam::mcp`; the crate root is empty).
type ModPath = Vec<String>;

/// The module a file under `src/` defines: `a/b.rs` and `a/b/mod.rs` are
/// `a::b`; `lib.rs` and `main.rs` are the root. `None` for `bin/` files
/// (crates of their own) and for test modules in files of their own
/// (`tests.rs`, `tests/`): like an inline `#[cfg(test)] mod tests`, tests
/// may reach anywhere.
fn module_of(rel: &Path) -> Option<ModPath> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if parts.first().is_some_and(|p| p == "bin") || parts.iter().any(|p| p == "tests") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    Some(parts)
}

/// The sibling-level dependency graph of a crate, at every depth: an edge
/// `a::x → a::y` when anything in `a::x` names anything in `a::y` through
/// a `crate::` or `super::` path. A module naming its own ancestor or
/// descendant adds no edge (a parent uses its children; a child uses its
/// parent's items).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    let mut modules: Vec<(ModPath, PathBuf)> = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src").to_path_buf();
        if let Some(m) = module_of(&rel) {
            modules.push((m, file));
        }
    }
    let known: BTreeSet<ModPath> = modules.iter().map(|(m, _)| m.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (me, file) in &modules {
        let text = std::fs::read_to_string(file).expect("readable source");
        for path in referenced_paths(&without_tests(&strip_comments(&text)), me) {
            let target = longest_module(&known, &path);
            let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == me.len() || common == target.len() {
                continue; // itself, an ancestor or a descendant
            }
            let from = me[..=common].join("::");
            let to = target[..=common].join("::");
            graph.entry(to.clone()).or_default();
            graph.entry(from).or_default().insert(to);
        }
    }
    graph
}

/// The longest prefix of `path` that is a module of the crate.
fn longest_module(known: &BTreeSet<ModPath>, path: &[String]) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains(p))
        .unwrap_or_default()
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("readable dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Line comments and doc comments removed (a path in prose is not a use).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text before a trailing inline `#[cfg(test)] mod … {` (an inline
/// test module has a `super` one level deeper than its file, and tests may
/// reach anywhere). A test module in a file of its own (`mod tests;`)
/// ends nothing: the code after it is still the module's.
fn without_tests(text: &str) -> String {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if l.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.contains("mod ") && !n.trim_end().ends_with(';'))
        {
            break;
        }
        out.push(l);
    }
    out.join("\n")
}

/// Every path named through `crate::…` or `super::…` (grouped imports
/// expanded), as an absolute module path from the crate root. `me` is the
/// module of the file the text is in.
fn referenced_paths(text: &str, me: &[String]) -> Vec<ModPath> {
    let mut out = Vec::new();
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for (i, _) in text.match_indices("crate::") {
        if text[..i]
            .chars()
            .last()
            .is_some_and(|c| ident_char(c) || c == '$' || c == ':')
        {
            continue;
        }
        expand(Vec::new(), &text[i + "crate::".len()..], &mut out);
    }
    for (i, _) in text.match_indices("super::") {
        if text[..i]
            .chars()
            .last()
            .is_some_and(|c| ident_char(c) || c == ':')
        {
            continue;
        }
        let mut rest = &text[i..];
        let mut steps = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            steps += 1;
            rest = r;
        }
        if steps > me.len() {
            continue;
        }
        expand(me[..me.len() - steps].to_vec(), rest, &mut out);
    }
    out
}

/// The paths `s` names after `prefix::`: `a::b::c`, or a group
/// `a::{b, c::{d, e}}`.
fn expand(prefix: ModPath, s: &str, out: &mut Vec<ModPath>) {
    let mut path = prefix;
    let mut rest = s.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in split_top_level(&group[..end]) {
                expand(path.clone(), item.trim(), out);
            }
            return;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || name == "self" {
            break;
        }
        rest = &rest[name.len()..];
        path.push(name);
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out.push(path);
}

fn matching_brace(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    s.len()
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'g> {
        g: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'g> T<'g> {
        fn visit(&mut self, v: &'g str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on.insert(v);
            for w in &self.g[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

fn crate_cycles(dir: &str) -> Vec<Vec<String>> {
    cycles(&module_graph(&root().join(dir).join("src")))
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
    let me: Vec<String> = vec!["scheduler".into(), "io".into()];
    let refs = referenced_paths(
        "use crate::{journal::Row, store::{A, b::B}};\nuse super::super::llm::X;\nuse super::gate;\nlet x = foo::super::y;",
        &me,
    );
    let refs: Vec<String> = refs.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        refs,
        [
            "journal::Row",
            "store::A",
            "store::b::B",
            "llm::X",
            "scheduler::gate"
        ]
    );
    assert_eq!(
        module_of(Path::new("llm/http/mod.rs")),
        Some(vec!["llm".to_string(), "http".to_string()])
    );
    assert_eq!(module_of(Path::new("lib.rs")), Some(vec![]));
    assert_eq!(module_of(Path::new("bin/aisc.rs")), None);
    assert_eq!(module_of(Path::new("telemetry/otlp/tests.rs")), None);
}

#[test]
fn the_graph_lifts_edges_to_siblings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write("lib.rs", "mod a;\nmod b;\n");
    write("a/mod.rs", "mod x;\nmod y;\nuse self::x::X;\n");
    write("a/x.rs", "use super::y::Y;\nuse crate::a::Top;\n");
    write(
        "a/y.rs",
        "use crate::b::B;\n#[cfg(test)]\nmod tests {\n    use super::super::x::X;\n}\n",
    );
    write("b.rs", "use crate::a::x::X;\n");
    // A test module in a file of its own: its file is left out, the code
    // after its declaration is not.
    write("c/mod.rs", "#[cfg(test)]\nmod tests;\nuse crate::b::B;\n");
    write("c/tests.rs", "use crate::a::x::X;\n");
    let g = module_graph(src);
    assert_eq!(g["c"], BTreeSet::from(["b".to_string()]));
    assert_eq!(g["a::x"], BTreeSet::from(["a::y".to_string()]));
    assert!(g["a::y"].is_empty(), "test modules are left out: {g:?}");
    assert_eq!(g["a"], BTreeSet::from(["b".to_string()]));
    assert_eq!(g["b"], BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&g), vec![vec!["a", "b"]]);
}

#[test]
fn serve_has_no_module_cycle() {
    assert_eq!(crate_cycles("serve"), Vec::<Vec<String>>::new());
}

/// No module cycle in any runtime crate, but those of [`KNOWN_CYCLES`]
/// (printed while they last).
#[test]
fn runtime_crates_have_no_new_module_cycle() {
    let mut new = Vec::new();
    for dir in RUNTIME_CRATES {
        for cycle in crate_cycles(dir) {
            let known = KNOWN_CYCLES
                .iter()
                .any(|(d, k)| d == dir && cycle.iter().all(|m| k.contains(&m.as_str())));
            if known {
                println!("known cycle in {dir} (to be broken): {}", cycle.join(" ↔ "));
            } else {
                new.push(format!("{dir}: {}", cycle.join(" ↔ ")));
            }
        }
    }
    assert!(
        new.is_empty(),
        "module cycles (follow the `crate::`/`super::` paths between these modules and move what both use below them):\n{}",
        new.join("\n")
    );
}

/// The length of a hand-written source file: `None` for generated code.
fn hand_written_lines(path: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(path).expect("readable source");
    let head: String = text.lines().take(5).collect::<Vec<_>>().join("\n");
    if head.contains("@generated") || head.contains("DO NOT EDIT") {
        return None;
    }
    Some(text.lines().count())
}

/// No source file of a runtime crate over [`MAX_LINES`] lines, but those
/// of [`KNOWN_OVERSIZED`] (printed while they last).
#[test]
fn runtime_sources_stay_under_the_line_limit() {
    let root = root();
    let mut over = Vec::new();
    for dir in RUNTIME_CRATES {
        let mut files = Vec::new();
        collect_rs(&root.join(dir).join("src"), &mut files);
        for file in files {
            let rel = file
                .strip_prefix(&root)
                .expect("under the workspace")
                .to_string_lossy()
                .replace('\\', "/");
            let Some(n) = hand_written_lines(&file) else {
                continue;
            };
            if n <= MAX_LINES {
                continue;
            }
            if KNOWN_OVERSIZED.contains(&rel.as_str()) {
                println!("known oversized file (to be split): {rel}: {n} lines");
            } else {
                over.push(format!("{rel}: {n} lines"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "source files over {MAX_LINES} lines (split them by concept):\n{}",
        over.join("\n")
    );
}
