//! LLM ops: the request an op sends (prompt, context blocks, attributes,
//! tools, cache hints), its tool-loop settings, and the value its reply
//! becomes.

use super::{llm_kind, OpError};
use crate::llm::{schema, ContextBlock, LlmRequest, LlmResponse};
use crate::value::Val;
use ais_ir::bytecode::{Imm, Instr};
use serde_json::Value as Json;

/// The request an LLM op sends: the first operand is the prompt, the others
/// are context blocks, each labelled with the name of the variable it came
/// from, else `context 1`, `context 2`, ... by position.
pub fn llm_request(agent: &str, instr: &Instr, args: &[Val]) -> Result<LlmRequest, OpError> {
    let kind = llm_kind(instr.opcode).ok_or_else(|| {
        OpError::new(
            "internal.not_llm",
            format!("`{}` is not an LLM op", instr.opcode),
        )
    })?;
    let attrs = match &instr.imm {
        Imm::Llm(a) => Some(&**a),
        _ => None,
    };
    // Parsed once per program; an unreadable schema fails the op.
    let own_schema = match attrs.map(|a| a.schema_value()) {
        Some(Err(e)) => {
            return Err(OpError::new(
                "llm.invalid_schema",
                format!("`{}`'s schema: {e}", instr.opcode),
            ))
        }
        Some(Ok(s)) => s.cloned(),
        None => None,
    };
    Ok(LlmRequest {
        kind,
        agent: agent.to_string(),
        system: attrs.and_then(|a| a.system.clone()),
        prompt: args.first().map(Val::text).unwrap_or_default(),
        context: args
            .iter()
            .skip(1)
            .enumerate()
            .map(|(i, v)| ContextBlock {
                label: attrs
                    .and_then(|a| a.context.get(i))
                    .filter(|l| !l.is_empty())
                    .cloned()
                    .unwrap_or_else(|| format!("context {}", i + 1)),
                text: v.text(),
            })
            .collect(),
        model: attrs.and_then(|a| a.model.clone()),
        temperature: attrs.and_then(|a| a.temperature),
        max_tokens: attrs.and_then(|a| a.max_tokens),
        json_schema: own_schema.or_else(|| schema::schema_for(kind)),
        budget_tokens: attrs.and_then(|a| a.budget_tokens),
        backend: attrs.and_then(|a| a.backend.clone()),
        tools: attrs
            .map(|a| a.tools.iter().map(tool_spec).collect())
            .unwrap_or_default(),
        turns: Vec::new(),
        cache: attrs.map(cache_hints).unwrap_or_default(),
        on_text: None,
        critical: false,
        attained: Default::default(),
    })
}

/// The op's prompt-cache hints (`cache_key:`, `cache_points:`; codegen
/// has checked the points' spelling).
fn cache_hints(a: &ais_ir::bytecode::LlmAttrs) -> crate::llm::CacheHints {
    crate::llm::CacheHints {
        key: a.cache_key.clone(),
        points: a
            .cache_points
            .iter()
            .filter_map(|p| crate::llm::CachePoint::parse(p))
            .collect(),
        prefix: a
            .cache_prefix
            .iter()
            .filter_map(|&n| usize::try_from(n).ok()?.checked_sub(1))
            .collect(),
    }
}

/// A tool as offered to the model. Parameters that are not valid JSON
/// (a hand-edited artifact) offer any object.
fn tool_spec(t: &ais_ir::bytecode::ToolDecl) -> crate::llm::ToolSpec {
    crate::llm::ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: serde_json::from_str(&t.parameters)
            .unwrap_or_else(|_| serde_json::json!({"type": "object"})),
    }
}

/// The most model turns an LLM op's tool-calling exchange may take.
pub fn max_steps(instr: &Instr) -> u32 {
    match &instr.imm {
        Imm::Llm(a) => a.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
        _ => DEFAULT_MAX_STEPS,
    }
}

/// Rounds of repair a `solve` op gives a plan that fails to check.
pub fn repairs(instr: &Instr) -> u32 {
    match &instr.imm {
        Imm::Llm(a) => a.repairs.unwrap_or(DEFAULT_REPAIRS),
        _ => DEFAULT_REPAIRS,
    }
}

/// Repair rounds when a `solve` op sets no `repairs`.
pub const DEFAULT_REPAIRS: u32 = 2;

/// Model turns of a tool-calling exchange when the op sets no `max_steps`.
pub const DEFAULT_MAX_STEPS: u32 = 8;

/// Whether an LLM op offers its model tools (it then runs its exchange on
/// the agent lane, see `scheduler::tool_loop`).
pub fn offers_tools(instr: &Instr) -> bool {
    matches!(&instr.imm, Imm::Llm(a) if !a.tools.is_empty())
}

/// Whether an op asks the model for an inner plan (`solve`, see
/// `scheduler::inner_plan`).
pub fn plans(instr: &Instr) -> bool {
    instr.opcode.info().llm == Some(ais_ir::LlmKind::Solve)
}

/// Whether an LLM op holds an agent-lane thread for a multi-turn exchange
/// (tools, or an inner plan) instead of being one call.
pub fn on_agent_lane(instr: &Instr) -> bool {
    offers_tools(instr) || plans(instr)
}

/// The value of a finished LLM op.
pub fn llm_value(request: &LlmRequest, response: &LlmResponse) -> Result<Val, OpError> {
    if request.json_schema.is_none() {
        return Ok(Val::str(&response.text));
    }
    let value = match &response.json {
        Some(j) => j.clone(),
        None => serde_json::from_str::<Json>(&response.text).map_err(|e| {
            OpError::new(
                "llm.invalid_response",
                format!("the reply to `{}` is not JSON: {e}", request.kind.name()),
            )
        })?,
    };
    // A program's own `schema:` is checked here whatever the backend (the
    // quarantine relies on it: `ais_ir::ifc::Quarantine`); the built-in
    // ops' schemas are the backends' concern.
    if let Some(s) = request
        .json_schema
        .as_ref()
        .filter(|_| schema::schema_for(request.kind).is_none())
    {
        if let Err(e) = crate::llm::jsonschema::validate(s, &value) {
            return Err(OpError::new(
                "llm.invalid_response",
                format!(
                    "the reply to `{}` does not match its schema at {e}",
                    request.kind.name()
                ),
            ));
        }
    }
    Ok(Val::from_json(value))
}
