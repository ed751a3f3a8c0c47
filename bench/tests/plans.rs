//! `ais-bench plans` runs every shape in every style: each run completes,
//! with the number of model turns and tool calls its style implies (the
//! timings are the benchmark's business, not a test's).

use ais_bench::plans::{run_once, Latency, Style, SHAPES};
use std::time::Duration;

#[test]
fn every_shape_runs_in_every_style_with_the_expected_calls() {
    let latency = Latency {
        turn: Duration::from_millis(1),
        planner: Duration::from_millis(1),
        tool: Duration::from_millis(1),
    };
    for &shape in SHAPES {
        let steps = shape.lookups + usize::from(shape.arithmetic);
        for style in [
            Style::React,
            Style::ParallelCalls,
            Style::Plan,
            Style::StreamingPlan,
        ] {
            let m = run_once(shape, style, latency, &ais_bench::plans::ModelAt::InProcess)
                .unwrap_or_else(|e| panic!("{} / {}: {e}", shape.name, style.name()));
            let turns = match style {
                // One turn per call, then the answer.
                Style::React => steps + 1,
                // The lookups together, the arithmetic, the answer.
                Style::ParallelCalls => 2 + usize::from(shape.arithmetic),
                // The planner, then the plan's one `ask`; streamed, the
                // lookups start early and the plan's ops take their
                // results (no call made twice).
                Style::Plan | Style::StreamingPlan => 2,
            };
            assert_eq!(m.model_turns, turns, "{} / {}", shape.name, style.name());
            assert_eq!(m.tool_calls, steps, "{} / {}", shape.name, style.name());
        }
    }
}
