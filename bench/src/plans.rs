//! `ais-bench plans`: the LLMCompiler shapes (Kim et al., ICML 2024) on our
//! runtime, a model that calls tools one per turn (ReAct) against one that
//! writes an inner plan (`solve`), in process, with fixed latencies for
//! model turns and tools.
//!
//! The shapes: `hotpot` (2 independent lookups, then an answer),
//! `parallel-qa` (4 lookups, then arithmetic over them, then an answer),
//! `movies` (8 independent lookups, then an answer). The model is scripted
//! (the benchmark measures the runtime, not a model): as ReAct it asks for
//! the next lookup each turn and for the arithmetic once all are in; as
//! ReAct with parallel function calling it asks for all lookups in one
//! turn; as a planner it writes the whole plan, which the front end checks
//! and the VM runs. Every tool call sleeps the tool latency; every model
//! turn the model latency (the planner's turn the planner latency).
//!
//! As a streaming planner it writes the same plan a line at a time, the
//! planner latency spread evenly over the lines (a model's output arrives
//! token by token), and the VM starts each checked lookup as its line
//! arrives (`scheduler::early_calls`).

use ais_testkit::fake::FakeBackend;
use ais_testkit::{FrontEndPlanner, MemoryHost};
use ais_vm::llm::http::{HttpBackend, HttpOptions, Protocol};
use ais_vm::llm::{
    LlmBackend, LlmOpKind, LlmRequest, LlmResponse, TextEvent, ToolCall, Turn, Usage,
};
use ais_vm::RunOptions;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One LLMCompiler shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub name: &'static str,
    /// Independent lookups.
    pub lookups: usize,
    /// Whether an arithmetic step over all lookups follows.
    pub arithmetic: bool,
    /// The speed-up LLMCompiler reports over ReAct for this shape.
    pub reported: f64,
}

pub const SHAPES: &[Shape] = &[
    Shape {
        name: "hotpot (2 lookups)",
        lookups: 2,
        arithmetic: false,
        reported: 1.8,
    },
    Shape {
        name: "parallel-qa (4 lookups + arithmetic)",
        lookups: 4,
        arithmetic: true,
        reported: 2.2,
    },
    Shape {
        name: "movies (8 lookups)",
        lookups: 8,
        arithmetic: false,
        reported: 3.7,
    },
];

/// Latencies of the scripted model and tools.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    pub turn: Duration,
    pub planner: Duration,
    pub tool: Duration,
}

/// How the model goes about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// One tool call per turn.
    React,
    /// All independent calls of a step in one turn.
    ParallelCalls,
    /// An inner plan (`solve`).
    Plan,
    /// An inner plan streamed line by line.
    StreamingPlan,
}

impl Style {
    pub fn name(self) -> &'static str {
        match self {
            Style::React => "tool calls, one per turn (ReAct)",
            Style::ParallelCalls => "tool calls, parallel in one turn",
            Style::Plan => "inner plan (solve)",
            Style::StreamingPlan => "inner plan, streamed",
        }
    }
}

const TOOLS: &str = r#"[{"name":"lookup","read_only":true,"parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}},{"name":"calc","read_only":true,"parameters":{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}}]"#;

fn program(style: Style) -> Result<ais_ir::bytecode::Program, String> {
    let op = if matches!(style, Style::Plan | Style::StreamingPlan) {
        "solve"
    } else {
        "ask"
    };
    let src = format!(
        "agent @Bench {{\n  flow @main(%q: str) -> str entry {{\n    %0 = {op} %q {{tools = json {TOOLS}, max_steps = 16}} : str\n    return %0\n  }}\n}}\n"
    );
    let m = ais_ir::parse_module(&src).map_err(|e| format!("{e:?}"))?;
    ais_ir::bytecode::compile(&m).map_err(|e| e.to_string())
}

/// The scripted model of one shape and style.
struct Model {
    shape: Shape,
    style: Style,
    latency: Latency,
}

fn reply(text: String, calls: Vec<ToolCall>) -> LlmResponse {
    LlmResponse {
        text,
        json: None,
        usage: Usage {
            prompt_tokens: 100,
            completion_tokens: 20,
            ..Default::default()
        },
        finish_reason: if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .into(),
        model: "scripted".into(),
        latency: Duration::ZERO,
        simulated: false,
        tool_calls: calls,
    }
}

fn lookup(i: usize) -> ToolCall {
    ToolCall {
        id: format!("l{i}"),
        name: "lookup".into(),
        arguments: json!({"q": format!("item {i}")}).to_string(),
    }
}

fn calc() -> ToolCall {
    ToolCall {
        id: "c".into(),
        name: "calc".into(),
        arguments: json!({"expression": "sum"}).to_string(),
    }
}

impl Model {
    /// The plan a planner writes for the shape.
    fn plan(&self) -> String {
        let mut p = String::from("```ais\n");
        let names: Vec<String> = (0..self.shape.lookups).map(|i| format!("r{i}")).collect();
        for i in 0..self.shape.lookups {
            p.push_str(&format!("let r{i} = lookup(\"item {i}\")\n"));
        }
        let mut ctx = names.join(", ");
        if self.shape.arithmetic {
            let holes: Vec<String> = names.iter().map(|n| format!("{{{n}}}")).collect();
            p.push_str(&format!("let total = calc(\"{}\")\n", holes.join(" + ")));
            ctx = "total".into();
        }
        p.push_str(&format!(
            "let answer = ask(\"Answer from the results\", {ctx})\nreturn answer\n```"
        ));
        p
    }

    /// The next step of a tool-calling model, from the turns so far.
    fn next(&self, r: &LlmRequest) -> LlmResponse {
        let done_lookups = r
            .turns
            .iter()
            .filter(|t| matches!(t, Turn::ToolResult { name, .. } if name == "lookup"))
            .count();
        let done_calc = r
            .turns
            .iter()
            .any(|t| matches!(t, Turn::ToolResult { name, .. } if name == "calc"));
        let n = self.shape.lookups;
        if done_lookups < n {
            let calls = match self.style {
                Style::ParallelCalls => (done_lookups..n).map(lookup).collect(),
                _ => vec![lookup(done_lookups)],
            };
            return reply(String::new(), calls);
        }
        if self.shape.arithmetic && !done_calc {
            return reply(String::new(), vec![calc()]);
        }
        reply("the answer".into(), Vec::new())
    }
}

impl Model {
    /// The model as the scriptable fake backend: a planning round takes
    /// the planner latency, any other turn the turn latency (both waited
    /// out by the fake, cancellably); a streaming plan is written a line
    /// at a time over the planner latency instead. Called as a remote
    /// provider is (blocking), with the HTTP backends' concurrency.
    fn into_backend(self) -> FakeBackend {
        let streams = self.style == Style::StreamingPlan;
        let planner_wait = if streams {
            Duration::ZERO
        } else {
            self.latency.planner
        };
        FakeBackend::new()
            .named("scripted")
            .with_concurrency(16)
            .blocking()
            .with_latency(self.latency.turn)
            .with_kind_latency(LlmOpKind::Solve, planner_wait)
            .with_script(move |r, _| Some(Ok(self.answer(r))))
    }

    fn answer(&self, r: &LlmRequest) -> LlmResponse {
        let planning = r.kind == LlmOpKind::Solve;
        if planning && self.style == Style::StreamingPlan {
            // The same plan in the same time, a line at a time.
            let start = Instant::now();
            let wait = self.latency.planner;
            let plan = self.plan();
            let lines: Vec<&str> = plan.split_inclusive('\n').collect();
            let n = lines.len().max(1) as u32;
            for (i, line) in lines.iter().enumerate() {
                let end = start + wait * (i as u32 + 1) / n;
                while Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(1).min(end - Instant::now()));
                }
                if let Some(sink) = &r.on_text {
                    sink.send(&TextEvent::Delta {
                        attempt: 1,
                        text: (*line).to_string(),
                    });
                }
            }
            return reply(plan, Vec::new());
        }
        if planning {
            reply(self.plan(), Vec::new())
        } else if r.tools.is_empty() {
            // The plan's own `ask`.
            reply("the answer".into(), Vec::new())
        } else {
            self.next(r)
        }
    }
}

/// Where the model is: scripted in process, or the scripted model server
/// (`bench/langgraph/model_server.py`) that the LangGraph baselines call
/// too, reached through the OpenAI-protocol HTTP backend.
#[derive(Clone, Debug)]
pub enum ModelAt {
    InProcess,
    Server(String),
}

/// The question for a shape and style: the server reads the shape from it.
fn question(shape: Shape, style: Style) -> String {
    format!(
        "the question (SHAPE lookups={} arithmetic={}{})",
        shape.lookups,
        u8::from(shape.arithmetic),
        if style == Style::ParallelCalls {
            " PARALLEL"
        } else {
            ""
        }
    )
}

/// One measured run.
pub struct Measured {
    pub makespan: Duration,
    pub model_turns: usize,
    pub tool_calls: usize,
}

/// Runs `shape` in `style` once.
pub fn run_once(
    shape: Shape,
    style: Style,
    latency: Latency,
    at: &ModelAt,
) -> Result<Measured, String> {
    let p = program(style)?;
    let model = Arc::new(
        Model {
            shape,
            style,
            latency,
        }
        .into_backend(),
    );
    let backend: Arc<dyn LlmBackend> = match at {
        ModelAt::InProcess => model.clone(),
        ModelAt::Server(url) => {
            let mut o = HttpOptions::new("scripted", Protocol::OpenAi, url);
            o.stream = style == Style::StreamingPlan;
            o.retry.max_retries = 0;
            Arc::new(HttpBackend::new(o))
        }
    };
    let host = Arc::new(MemoryHost::new());
    let tools = Arc::new(AtomicUsize::new(0));
    for name in ["lookup", "calc"] {
        let n = tools.clone();
        let wait = latency.tool;
        host.register_tool(name, move |_| {
            n.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(wait);
            Ok(json!(7))
        });
    }
    let o = RunOptions {
        args: vec![("q".into(), json!(question(shape, style)))],
        planner: Some(Arc::new(FrontEndPlanner::default())),
        ..RunOptions::default()
    };
    let t = Instant::now();
    let r = ais_vm::run(&p, &o, backend, host);
    let makespan = t.elapsed();
    r.outcome.map_err(|e| e.to_string())?;
    let attempts: usize = r
        .events
        .iter()
        .filter_map(|e| e.llm.as_ref())
        .map(|l| l.attempts.len())
        .sum();
    Ok(Measured {
        makespan,
        model_turns: match at {
            ModelAt::InProcess => usize::try_from(model.calls()).unwrap_or(usize::MAX),
            ModelAt::Server(_) => attempts,
        },
        tool_calls: tools.load(Ordering::SeqCst),
    })
}

/// `ais-bench plans`: every shape in every style, `runs` times each; a
/// Markdown report. `baseline`: LangGraph's figures on the same model
/// server (`bench/langgraph/plans.py`), compared with ours.
pub fn report(
    latency: Latency,
    runs: usize,
    at: &ModelAt,
    baseline: Option<&serde_json::Value>,
) -> Result<String, String> {
    let mut out = format!(
        "Latencies: model turn {} ms, planner turn {} ms, tool call {} ms; {runs} runs per cell (mean ± std of the makespan, ms). Model: {}.\n\n",
        latency.turn.as_millis(),
        latency.planner.as_millis(),
        latency.tool.as_millis(),
        match at {
            ModelAt::InProcess => "scripted, in process".to_string(),
            ModelAt::Server(_) => "the scripted model server (bench/langgraph/model_server.py) on a loopback port, over the OpenAI protocol".to_string(),
        }
    );
    out.push_str("| shape | how | makespan | model turns | tool calls | speed-up over ReAct | LLMCompiler reports | target met |\n|---|---|---:|---:|---:|---:|---:|---|\n");
    let mut versus = String::new();
    for &shape in SHAPES {
        let mut react_mean = None;
        let mut plan_mean = None;
        let mut ours: Vec<(Style, f64)> = Vec::new();
        for style in [
            Style::React,
            Style::ParallelCalls,
            Style::Plan,
            Style::StreamingPlan,
        ] {
            let mut ms = Vec::with_capacity(runs);
            let mut last = None;
            for _ in 0..runs {
                let m = run_once(shape, style, latency, at)?;
                ms.push(m.makespan.as_secs_f64() * 1e3);
                last = Some(m);
            }
            let (mean, std) = mean_std(&ms);
            ours.push((style, mean));
            let (turns, calls) = last.map_or((0, 0), |m| (m.model_turns, m.tool_calls));
            let react = *react_mean.get_or_insert(mean);
            let speedup = react / mean;
            if style == Style::Plan {
                plan_mean = Some(mean);
            }
            let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
            let (reported, met) = match style {
                Style::StreamingPlan => (
                    "faster than the whole plan".into(),
                    yes_no(plan_mean.is_some_and(|p| mean < p)),
                ),
                Style::Plan => (
                    format!("{:.1}×", shape.reported),
                    yes_no(speedup >= shape.reported),
                ),
                _ => ("".into(), "".into()),
            };
            out.push_str(&format!(
                "| {} | {} | {mean:.1} ± {std:.1} | {turns} | {calls} | {speedup:.2}× | {reported} | {met} |\n",
                shape.name,
                style.name(),
            ));
        }
        let Some(b) = baseline else { continue };
        let key = format!("{}/{}", shape.lookups, u8::from(shape.arithmetic));
        for (lg, name, ours_styles) in [
            ("react", "LangGraph create_react_agent", &[Style::React][..]),
            (
                "plan",
                "LangGraph plan-and-execute graph (LLMCompiler-style)",
                &[Style::Plan, Style::StreamingPlan][..],
            ),
        ] {
            let cell = &b[&key][lg];
            let (Some(mean), Some(std)) = (cell["mean"].as_f64(), cell["std"].as_f64()) else {
                return Err(format!("the baseline has no `{key}`.`{lg}` mean and std"));
            };
            let react = react_mean.unwrap_or(mean);
            out.push_str(&format!(
                "| {} | {name} | {mean:.1} ± {std:.1} | {} | {} | {:.2}× | | |\n",
                shape.name,
                cell["turns"],
                cell["calls"],
                react / mean
            ));
            for style in ours_styles {
                if let Some((_, m)) = ours.iter().find(|(s, _)| s == style) {
                    let ratio = mean / m;
                    versus.push_str(&format!(
                        "| {} | {} | {m:.1} | {name} | {mean:.1} | {ratio:.2}× | {} |\n",
                        shape.name,
                        style.name(),
                        if ratio >= 1.0 { "yes" } else { "no" }
                    ));
                }
            }
        }
    }
    if !versus.is_empty() {
        out.push_str("\nOurs against the LangGraph equivalent on the same model server (target: ours ≥ 1.0×, i.e. not slower):\n\n| shape | ours | ms | LangGraph | ms | ours faster by | target met |\n|---|---|---:|---|---:|---:|---|\n");
        out.push_str(&versus);
    }
    Ok(out)
}

fn mean_std(ms: &[f64]) -> (f64, f64) {
    let n = ms.len().max(1) as f64;
    let mean = ms.iter().sum::<f64>() / n;
    let var = ms.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}
