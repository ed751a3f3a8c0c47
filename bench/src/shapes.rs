//! Generated programs of a given shape and size, for compile-time scaling
//! (issue 40): `bench/compile-scale.sh` writes them with `ais-bench shape`
//! and times `aisc check` and `aisc build -O1` on them; `tests/scale.rs`
//! checks that doubling one at most doubles the compiler's work counter.
//!
//! Each shape repeats a *unit* of source; [`Shape::program`] takes a unit
//! count, [`Shape::units_for`] the units for about a number of IR ops
//! (measured on a small instance, so it follows the lowering).

/// How deep the `deep` shape nests its `if`s.
pub const DEEP_NESTING: usize = 400;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One flow: a long chain of `let`s.
    Lets,
    /// One `return` of a `+` chain (a flat binary chain, no nesting).
    Plus,
    /// Many small flows in one agent, each calling the next.
    Flows,
    /// Nested `if`s [`DEEP_NESTING`] deep, a `let` at each level, repeated.
    Deep,
    /// Many agents, each with memory, beliefs, a capability and flows using
    /// every statement form (the front-end benchmark's program).
    Agents,
    /// One long flow of `let`s with an `if` every 10 of them.
    Branchy,
}

impl Shape {
    pub const ALL: [Shape; 6] = [
        Shape::Lets,
        Shape::Plus,
        Shape::Flows,
        Shape::Deep,
        Shape::Agents,
        Shape::Branchy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Shape::Lets => "lets",
            Shape::Plus => "plus",
            Shape::Flows => "flows",
            Shape::Deep => "deep",
            Shape::Agents => "agents",
            Shape::Branchy => "branchy",
        }
    }

    pub fn parse(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The program of `units` repetitions of the shape's unit.
    pub fn program(self, units: usize) -> String {
        let units = units.max(1);
        match self {
            Shape::Lets => lets(units, 0),
            Shape::Branchy => lets(units, 10),
            Shape::Plus => plus(units),
            Shape::Flows => flows(units),
            Shape::Deep => deep(units),
            Shape::Agents => agents(units),
        }
    }

    /// Units for about `ops` IR ops, given the ops of a small instance
    /// (`probe_ops` for [`Shape::PROBE_UNITS`] units).
    pub fn units_for(ops: usize, probe_ops: usize) -> usize {
        ((ops as f64) * (Shape::PROBE_UNITS as f64) / (probe_ops.max(1) as f64)).round() as usize
    }

    /// The size of the instance [`Shape::units_for`] scales from.
    pub const PROBE_UNITS: usize = 400;
}

/// `main(x)`: `let v{i} = v{i-1} + "{i}"`; with `branch_every > 0`, an `if`
/// binding a variable of its own every `branch_every` lets (a branch that
/// changes nothing outside, as most do).
fn lets(n: usize, branch_every: usize) -> String {
    let mut s = String::with_capacity(n * 40);
    s.push_str("agent A {\n    @entry flow main(x: str) -> str {\n        let v0 = x\n");
    for i in 1..n {
        s.push_str(&format!("        let v{i} = v{} + \"{i}\"\n", i - 1));
        if branch_every > 0 && i % branch_every == 0 {
            s.push_str(&format!(
                "        if (v{i} == \"stop\") {{\n            let w{i} = v{i} + \"!\"\n            print(w{i})\n        }}\n"
            ));
        }
    }
    s.push_str(&format!("        return v{}\n    }}\n}}\n", n - 1));
    s
}

/// `return x + "t1" + x + "t3" + ...` of `n` terms.
fn plus(n: usize) -> String {
    let mut s = String::with_capacity(n * 8 + 100);
    s.push_str("agent A {\n    @entry flow main(x: str) -> str {\n        return x");
    for i in 1..n {
        if i % 2 == 0 {
            s.push_str(" + x");
        } else {
            s.push_str(&format!(" + \"t{i}\""));
        }
    }
    s.push_str("\n    }\n}\n");
    s
}

/// `f{i}(x)`: three lets, then calls `f{i+1}`; `main` calls `f0`.
fn flows(n: usize) -> String {
    let mut s = String::with_capacity(n * 150);
    s.push_str("agent A {\n    @entry flow main(x: str) -> str {\n        return f0(x)\n    }\n");
    for i in 0..n {
        let tail = if i + 1 < n {
            format!("f{}(c)", i + 1)
        } else {
            "c".to_string()
        };
        s.push_str(&format!(
            "    flow f{i}(x: str) -> str {{\n        let a = x + \"a{i}\"\n        let b = a + \"b\"\n        let c = b + \"c\"\n        return {tail}\n    }}\n"
        ));
    }
    s.push_str("}\n");
    s
}

/// `n` levels of nesting in all, in blocks of [`DEEP_NESTING`] nested
/// `if`s; each level binds a variable and assigns the flow's `acc`.
fn deep(n: usize) -> String {
    let mut s = String::with_capacity(n * 120);
    s.push_str("agent A {\n    @entry flow main(x: str) -> str {\n        let acc = x\n");
    let mut left = n;
    let mut block = 0;
    while left > 0 {
        let depth = left.min(DEEP_NESTING);
        for d in 0..depth {
            s.push_str(&format!(
                "if (acc != \"b{block}d{d}\") {{\nlet n{d} = acc + \"{d}\"\nacc = n{d}\n"
            ));
        }
        for _ in 0..depth {
            s.push_str("}\n");
        }
        left -= depth;
        block += 1;
    }
    s.push_str("        return acc\n    }\n}\n");
    s
}

/// One agent using every statement form (`WorkerN` renamed per copy), shared
/// with the front-end benchmark (`cli/benches/frontend.rs`).
const WORKER_AGENT: &str = include_str!("../programs/worker_agent.ais");

/// The front-end benchmark's agent, `n` times.
fn agents(n: usize) -> String {
    let mut s = String::with_capacity(n * 1100);
    for i in 0..n {
        s.push_str(&WORKER_AGENT.replace("WorkerN", &format!("Worker{i}")));
    }
    s
}

/// IR ops of a module after lowering (every flow, nested regions included).
pub fn op_count(m: &ais_ir::Module) -> usize {
    m.agents
        .values()
        .flat_map(|a| a.flows.values())
        .map(|f| f.dfg.walk_region(f.body).len())
        .sum()
}

/// The IR ops `source` lowers to (`None` if it does not compile).
pub fn lowered_ops(source: &str) -> Option<usize> {
    ais_compiler::driver::with_deep_stack(|| {
        ais_compiler::driver::compile_source(source)
            .ok()
            .map(|c| op_count(&c.module))
    })
}

/// The shape's program of about `ops` IR ops, and its unit count.
pub fn program_of_ops(shape: Shape, ops: usize) -> Option<(String, usize)> {
    let probe = lowered_ops(&shape.program(Shape::PROBE_UNITS))?;
    let units = Shape::units_for(ops, probe).max(1);
    Some((shape.program(units), units))
}
