//! What the VM does differently per LLM operation, in one place: the
//! default system prompt, the completion limit and the simulator's lead
//! word (the reply schema of structured ops is `super::schema`). Every other fact about an LLM op (its name, model
//! class, latency, reply type) is in the op table (`ais_ir::LlmKind`).

use super::LlmOpKind;

/// The per-kind behaviour of the LLM layer.
pub struct Semantics {
    /// The default system prompt (`[instruction]` in the configuration
    /// overrides it).
    pub instruction: &'static str,
    /// How the simulator's text reply starts.
    pub sim_lead: &'static str,
    /// The completion limit (`max_tokens`) sent when neither the op, the
    /// backend nor `[max_tokens]` in the configuration sets one. Without
    /// a limit a local server lets a small model write until its context
    /// is full (tens of seconds, then `llm.truncated`); these leave room
    /// for the op's usual answer: a sentence or paragraph for `ask`, a
    /// longer analysis for `think`, a chain of reasoning for `reason`, a
    /// plan or critique in JSON, a verdict.
    pub max_tokens: u32,
}

pub fn semantics(kind: LlmOpKind) -> Semantics {
    let s = |instruction, sim_lead, max_tokens| Semantics {
        instruction,
        sim_lead,
        max_tokens,
    };
    match kind {
        LlmOpKind::Ask | LlmOpKind::Llm => s(
            "You are a helpful assistant inside an agent workflow. Answer the request directly and concisely.",
            "Answer",
            1024,
        ),
        LlmOpKind::Think => s(
            "You are a careful analyst inside an agent workflow. Think the problem through, then give a clear, well-organised answer.",
            "Analysis",
            2048,
        ),
        LlmOpKind::Reason => s(
            "You are an expert reasoner inside an agent workflow. Reason step by step about the problem and state your conclusion explicitly.",
            "Reasoned conclusion",
            4096,
        ),
        LlmOpKind::Plan => s(
            "You are a planner inside an agent workflow. Break the goal into concrete steps; each step has a short id, a description, and the ids of the steps it depends on.",
            "Plan",
            2048,
        ),
        LlmOpKind::Reflect => s(
            "You are a reviewer inside an agent workflow. Critique the content honestly and give concrete suggestions to improve it.",
            "Critique",
            1024,
        ),
        LlmOpKind::Solve => s(
            "You are a planner inside an agent workflow. Write a plan in AIS that reaches the goal using the listed tools and LLM operations; independent steps run in parallel.",
            "Plan result",
            2048,
        ),
        LlmOpKind::Verify => s(
            "You are a verifier inside an agent workflow. Decide whether the claim is supported by the evidence and explain why.",
            "Verdict",
            512,
        ),
    }
}
