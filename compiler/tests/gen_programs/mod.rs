//! The random program generator shared by the property tests of this
//! crate (`lower_props.rs`, `fmt_props.rs`): one tape of choices gives one
//! valid program (nested control flow, assignments, early returns, memory
//! and output effects, calls).

use ais_choices::Choices;

/// The program generator: one tape of choices gives one program.
struct Gen {
    choices: Choices,
    next_var: usize,
    out: String,
}

impl Gen {
    fn rand(&mut self, n: usize) -> usize {
        self.choices.below(n)
    }

    fn pick<'a>(&mut self, xs: &'a [String]) -> &'a str {
        &xs[self.rand(xs.len())]
    }

    fn tier(&mut self) -> &'static str {
        ["stm", "ltm", "episodic", "notes"][self.rand(4)]
    }

    fn text(&mut self, vars: &[String], depth: usize) -> String {
        let v = self.pick(vars).to_string();
        match self.rand(if depth > 2 { 3 } else { 7 }) {
            0 => v,
            1 => format!("\"note on {{{v}}}\""),
            2 => format!("{v} + \" and more\""),
            3 => format!("ask(\"Summarize.\", {v})"),
            4 => format!("helper({v})"),
            5 => format!("Other.work({v})"),
            _ => format!(
                "think(\"Expand on this.\", {}, {v})",
                self.text(vars, depth + 1)
            ),
        }
    }

    fn cond(&mut self, vars: &[String]) -> String {
        let v = self.pick(vars).to_string();
        match self.rand(4) {
            0 => format!("{v} == \"yes\""),
            1 => format!("qmem({v}, \"{}\")", self.tier()),
            2 => format!("!({v} == \"no\") && {v} != \"\""),
            _ => format!("ask(\"yes or no?\", {v}) == \"yes\""),
        }
    }

    fn line(&mut self, indent: usize, s: &str) {
        self.out.push_str(&"    ".repeat(indent));
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// Statements; `vars` are the text variables in scope (mutated by `let`).
    fn stmts(&mut self, vars: &mut Vec<String>, indent: usize, depth: usize, budget: &mut usize) {
        let n = 1 + self.rand(4);
        for _ in 0..n {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let choice = self.rand(if depth >= 3 { 6 } else { 12 });
            match choice {
                0 | 1 => {
                    let name = format!("v{}", self.next_var);
                    self.next_var += 1;
                    let e = self.text(vars, 0);
                    self.line(indent, &format!("let {name} = {e}"));
                    vars.push(name);
                }
                2 => {
                    let target = self.pick(vars).to_string();
                    let e = self.text(vars, 0);
                    self.line(indent, &format!("{target} = {e}"));
                }
                3 => {
                    let e = self.text(vars, 0);
                    let t = self.tier();
                    self.line(indent, &format!("umem({e}, \"{t}\")"));
                }
                4 => {
                    let e = self.text(vars, 0);
                    self.line(indent, &format!("print(\"step\", {e})"));
                }
                5 => self.line(indent, "fence()"),
                6 | 7 => {
                    let c = self.cond(vars);
                    self.line(indent, &format!("if ({c}) {{"));
                    self.stmts(&mut vars.clone(), indent + 1, depth + 1, budget);
                    if self.rand(2) == 0 {
                        self.line(indent, "} else {");
                        self.stmts(&mut vars.clone(), indent + 1, depth + 1, budget);
                    }
                    self.line(indent, "}");
                }
                8 => {
                    let item = format!("it{}", self.next_var);
                    self.next_var += 1;
                    let (a, b) = (self.text(vars, 1), self.text(vars, 1));
                    self.line(indent, &format!("loop ({item} in [{a}, {b}]) {{"));
                    let mut inner = vars.clone();
                    inner.push(item);
                    self.stmts(&mut inner, indent + 1, depth + 1, budget);
                    self.line(indent, "}");
                }
                9 => {
                    self.line(indent, "try {");
                    self.stmts(&mut vars.clone(), indent + 1, depth + 1, budget);
                    let e = format!("e{}", self.next_var);
                    self.next_var += 1;
                    self.line(indent, &format!("}} catch ({e}) {{"));
                    let mut inner = vars.clone();
                    inner.push(e.clone());
                    self.line(indent + 1, &format!("print(\"failed\", {e})"));
                    self.stmts(&mut inner, indent + 1, depth + 1, budget);
                    self.line(indent, "}");
                }
                10 => {
                    let name = format!("v{}", self.next_var);
                    self.next_var += 1;
                    let s = self.text(vars, 1);
                    let (a, b) = (self.text(vars, 1), self.text(vars, 1));
                    self.line(indent, &format!("switch {s} {{"));
                    self.line(indent + 1, &format!("case \"a\" => {a}"));
                    self.line(indent + 1, "case \"b\" => {");
                    self.stmts(&mut vars.clone(), indent + 2, depth + 1, budget);
                    self.line(indent + 2, &b);
                    self.line(indent + 1, "}");
                    if self.rand(2) == 0 {
                        self.line(indent + 1, "default => \"other\"");
                    }
                    self.line(indent, &format!("}} -> {name}"));
                    vars.push(name);
                }
                _ => {
                    let c = self.cond(vars);
                    let e = self.text(vars, 0);
                    self.line(indent, &format!("if ({c}) {{"));
                    self.line(indent + 1, &format!("return {e}"));
                    self.line(indent, "}");
                }
            }
        }
    }
}

pub fn program(choices: Choices) -> String {
    let mut g = Gen {
        choices,
        next_var: 0,
        out: String::new(),
    };
    g.out.push_str("agent Other {\n    memory { scratch: STM }\n    flow work(x: str) -> str {\n        umem(x, \"scratch\")\n        print(\"working\")\n        return ask(\"Work on it.\", x)\n    }\n}\n");
    g.out
        .push_str("agent A {\n    memory { notes: LTM }\n    beliefs { mood: \"calm\" }\n");
    g.out.push_str("    flow helper(x: str) -> str {\n");
    let mut vars = vec!["x".to_string(), "mood".to_string()];
    let mut budget = 6;
    g.stmts(&mut vars, 2, 1, &mut budget);
    let r = g.text(&vars, 0);
    g.line(2, &format!("return {r}"));
    g.out
        .push_str("    }\n    @entry flow main(topic: str) -> str {\n");
    let mut vars = vec!["topic".to_string(), "mood".to_string()];
    let mut budget = 25;
    g.stmts(&mut vars, 2, 0, &mut budget);
    let r = g.text(&vars, 0);
    g.line(2, &format!("return {r}"));
    g.out.push_str("    }\n}\n");
    g.out
}
