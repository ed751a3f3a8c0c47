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

/// Top-level module → the top-level modules its files name through
/// `crate::` (anywhere in the crate) or `super::` (from a file one level down).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let top = parts[0].trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" || top == "bin" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        let text = strip_comments(&text);
        let entry = graph.entry(top.clone()).or_default();
        // `super` steps out of the file's module: `a/b.rs` is `a::b` (two
        // steps to the root), `a/mod.rs` and `a.rs` are `a` (one step).
        let is_mod = parts.last().is_some_and(|p| p == "mod.rs");
        let steps = parts.len() - usize::from(is_mod);
        for target in referenced_top_modules(&text, steps) {
            if target != top {
                entry.insert(target);
            }
        }
    }
    let names: BTreeSet<String> = graph.keys().cloned().collect();
    for targets in graph.values_mut() {
        targets.retain(|t| names.contains(t));
    }
    graph
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

/// The top-level modules named by `crate::NAME` and by `super::NAME` where
/// `steps` repetitions of `super` reach the crate root.
fn referenced_top_modules(text: &str, steps: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    // `crate::x` and grouped `crate::{x, y::z}`.
    for (i, _) in text.match_indices("crate::") {
        let before = text[..i].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in split_top_level(&group[..end]) {
                let name = ident(item.trim());
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    if steps >= 1 {
        let prefix = "super::".repeat(steps);
        for (i, _) in text.match_indices(&prefix) {
            let before = text[..i].chars().last();
            if before.is_some_and(|c| c == ':') {
                continue;
            }
            let rest = &text[i + prefix.len()..];
            if rest.starts_with("super::") {
                continue;
            }
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
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

/// Strongly connected components with more than one module (Tarjan).
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
    let refs = referenced_top_modules(
        "use crate::{journal::Row, store::{A, B}};\nuse super::super::llm::X;",
        2,
    );
    assert_eq!(
        refs,
        BTreeSet::from(["journal".into(), "store".into(), "llm".into()])
    );
}

#[test]
fn serve_has_no_module_cycle() {
    assert_eq!(crate_cycles("serve"), Vec::<Vec<String>>::new());
}
