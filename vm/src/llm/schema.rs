//! JSON schemas of the structured LLM operations. `plan`, `verify` and
//! `reflect` replies are validated against these before the VM hands them to
//! consumers, so downstream ops can rely on their shape.

use super::LlmOpKind;
use serde_json::{json, Value};

/// `plan(goal, ctx...)`: steps with dependencies (a DAG by step id).
pub fn plan() -> Value {
    json!({
        "type": "object",
        "required": ["steps"],
        "properties": {
            "goal": {"type": "string"},
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "description", "depends_on"],
                    "properties": {
                        "id": {"type": "string"},
                        "description": {"type": "string"},
                        "depends_on": {"type": "array", "items": {"type": "string"}}
                    }
                }
            }
        }
    })
}

/// `verify(claim, evidence...)`: a verdict and the reason for it.
pub fn verify() -> Value {
    json!({
        "type": "object",
        "required": ["verdict", "reason"],
        "properties": {
            "verdict": {"type": "boolean"},
            "reason": {"type": "string"},
            "confidence": {"type": "number"}
        }
    })
}

/// `reflect(content, ctx...)`: a critique and concrete suggestions.
pub fn reflect() -> Value {
    json!({
        "type": "object",
        "required": ["critique", "suggestions"],
        "properties": {
            "critique": {"type": "string"},
            "suggestions": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "number"}
        }
    })
}

/// The schema a reply to `kind` must satisfy, if the op is structured.
pub fn schema_for(kind: LlmOpKind) -> Option<Value> {
    match kind {
        LlmOpKind::Plan => Some(plan()),
        LlmOpKind::Reflect => Some(reflect()),
        LlmOpKind::Verify => Some(verify()),
        LlmOpKind::Ask
        | LlmOpKind::Llm
        | LlmOpKind::Think
        | LlmOpKind::Reason
        | LlmOpKind::Solve => None,
    }
}
