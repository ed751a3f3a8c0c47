//! Summaries of a journal's steps (`aisc runs show`, `aisc trace`).

use ais_vm::journal;

/// Counts of journaled steps by op (`ask ×3, inv ×1`), in first-seen order.
fn steps_by_op(steps: &[journal::Step]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for s in steps {
        match out.iter_mut().find(|(op, _)| *op == s.op) {
            Some((_, n)) => *n += 1,
            None => out.push((s.op.clone(), 1)),
        }
    }
    out
}

pub fn steps_summary_json(steps: &[journal::Step]) -> serde_json::Value {
    let by_op: serde_json::Map<String, serde_json::Value> = steps_by_op(steps)
        .into_iter()
        .map(|(op, n)| (op, n.into()))
        .collect();
    serde_json::json!({
        "steps": steps.len(),
        "completed": steps.iter().filter(|s| s.kind == "done").count(),
        "in_doubt": steps.iter().filter(|s| s.kind == "intent").count(),
        "failed": steps.iter().filter(|s| s.kind == "failed").count(),
        "by_op": by_op,
        "tokens": steps.iter().map(|s| s.tokens).sum::<i64>(),
    })
}

/// One line: `5 journaled steps (ask ×3, inv ×2), 812 tokens`.
pub fn steps_line(steps: &[journal::Step]) -> String {
    let ops: Vec<String> = steps_by_op(steps)
        .into_iter()
        .map(|(op, n)| format!("{op} ×{n}"))
        .collect();
    let tokens: i64 = steps.iter().map(|s| s.tokens).sum();
    format!(
        "{} journaled step{}{}, {tokens} tokens",
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
        if ops.is_empty() {
            String::new()
        } else {
            format!(" ({})", ops.join(", "))
        }
    )
}
