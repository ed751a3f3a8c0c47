//! The reference A-PXM graph format's op names (`ASK`, `CONST_STR`,
//! `WAIT_ALL`, ...) for each of our opcodes, and the reference ops that
//! have no equivalent here. Part of the op table: the graph-JSON front end
//! and emitter (`ais_compiler::graph_json`) read these, nothing else.

use super::Opcode;

impl Opcode {
    /// The op's name in graph JSON: the reference's name where it has the
    /// op, otherwise our mnemonic upper-cased (`belief.get` → `BELIEF_GET`).
    pub fn graph_name(self) -> String {
        match self {
            Opcode::Const => "CONST_STR".to_string(),
            Opcode::Exec => "EXC".to_string(),
            op => op.mnemonic().replace('.', "_").to_ascii_uppercase(),
        }
    }

    /// The opcode a graph-JSON op name denotes (case-sensitive, as in the
    /// reference).
    pub fn from_graph_name(name: &str) -> Option<Opcode> {
        Opcode::ALL
            .iter()
            .copied()
            .find(|op| op.graph_name() == name)
    }
}

/// Reference ops with no op of their own in our IR: its flat control-flow
/// markers (we nest regions instead), its agent declaration and the
/// coordination ops we run as AAM tools. The graph-JSON reader lowers each
/// to the ops that do what it does (`compiler/src/graph_json/refonly.rs`).
pub const REFERENCE_ONLY_OPS: &[&str] = &[
    "AGENT",
    "JUMP",
    "BRANCH_ON_VALUE",
    "LOOP_START",
    "LOOP_END",
    "ERR",
    "UPDATE_GOAL",
    "CLAIM",
    "RESUME",
];

/// The reference's ops and the attributes its validator requires of each
/// (its op definitions' `required` fields).
pub const REFERENCE_OPS: &[(&str, &[&str])] = &[
    ("AGENT", &[]),
    ("QMEM", &["query"]),
    ("UMEM", &["key", "value"]),
    ("ASK", &["template_str"]),
    ("THINK", &["template_str"]),
    ("REASON", &["template_str"]),
    ("PLAN", &["goal"]),
    ("REFLECT", &["trace_query"]),
    ("VERIFY", &["claim", "evidence"]),
    ("INV", &["capability"]),
    ("EXC", &["code"]),
    ("PRINT", &["message"]),
    ("JUMP", &["label"]),
    (
        "BRANCH_ON_VALUE",
        &["token", "value", "label_true", "label_false"],
    ),
    ("LOOP_START", &["count_token"]),
    ("LOOP_END", &[]),
    ("RETURN", &["token"]),
    ("SWITCH", &["discriminant", "cases"]),
    ("FLOW_CALL", &["agent_name", "flow_name"]),
    ("MERGE", &["tokens"]),
    ("FENCE", &[]),
    ("WAIT_ALL", &["tokens"]),
    ("TRY_CATCH", &["try_subgraph", "catch_subgraph"]),
    ("ERR", &["error_handler"]),
    ("COMMUNICATE", &["target_agent", "message"]),
    ("UPDATE_GOAL", &["goal_id"]),
    ("GUARD", &["condition"]),
    ("CLAIM", &["queue"]),
    ("PAUSE", &["message"]),
    ("RESUME", &["checkpoint"]),
    ("CONST_STR", &["value"]),
    ("YIELD", &["value"]),
];

/// The attributes the reference requires of a node written as `op`
/// (`None`: not one of its ops).
pub fn reference_required(op: &str) -> Option<&'static [&'static str]> {
    REFERENCE_OPS
        .iter()
        .find(|(n, _)| *n == op)
        .map(|(_, r)| *r)
}

/// LLM options the reference's code generator spells another way, and
/// ours: read under both names in graph JSON and as named arguments.
pub const REFERENCE_LLM_RENAMES: &[(&str, &str)] = &[
    ("system_prompt", "system"),
    ("token_budget", "budget_tokens"),
    ("budget", "budget_tokens"),
    ("output_schema", "schema"),
];

impl Opcode {
    /// The flat form's attributes of a control op of ours (the reference's
    /// markers, structured into it by the graph-JSON reader).
    pub fn reference_flat_attrs(self) -> &'static [&'static str] {
        match self {
            Opcode::Switch => &["discriminant", "cases", "case_labels", "default"],
            Opcode::If => &[
                "token",
                "value",
                "label_true",
                "true_label",
                "label_false",
                "false_label",
            ],
            Opcode::Loop => &["count_token", "max_iterations", "count"],
            _ => &[],
        }
    }

    /// The reference's attribute names of an op we have (both spellings: its
    /// op definitions' and its code generator's).
    pub fn reference_attrs(self) -> &'static [&'static str] {
        use Opcode as O;
        match self {
            O::Ask | O::Think | O::Llm | O::Solve => &["template_str", "prompt"],
            O::Reason => &["template_str", "prompt", "structured"],
            O::Plan => &["template_str", "prompt", "goal", "constraints"],
            O::Reflect => &[
                "template_str",
                "prompt",
                "trace_query",
                "trace_id",
                "trace",
                "reflection_prompt",
            ],
            O::Verify => &["template_str", "prompt", "claim", "evidence"],
            O::Inv => &["capability", "parameters", "params_json", "timeout_ms"],
            O::Exec => &["code", "sandbox_config"],
            O::Qmem => &["query", "memory_tier", "space"],
            O::Umem => &["key", "value", "memory_tier", "space"],
            O::Print => &["message"],
            O::Return => &["token"],
            O::Yield => &["value"],
            O::Merge => &["tokens", "strategy"],
            O::WaitAll => &["tokens"],
            O::Fence => &["ordering"],
            O::Communicate => &["target_agent", "recipient", "target", "message", "protocol"],
            O::Guard => &["condition", "on_fail", "error_message"],
            O::Pause => &[
                "message",
                "checkpoint_id",
                "timeout_ms",
                "poll_interval_ms",
                "notification_url",
                "server_url",
            ],
            O::FlowCall => &["agent_name", "flow_name", "args"],
            O::TryCatch => &["try_subgraph", "catch_subgraph", "try_label", "catch_label"],
            _ => &[],
        }
    }

    /// The reference op a node of ours is written as in graph JSON: its
    /// own graph name where the reference has the op; otherwise the
    /// reference op closest in shape (`MERGE` for pure ops over inputs,
    /// `ASK` for our other LLM ops, `QMEM`/`UMEM` for beliefs,
    /// `BRANCH_ON_VALUE`/`LOOP_START` for `if`/`loop`), with the op itself
    /// in the node's `ais_op` attribute.
    pub fn reference_form(self) -> &'static str {
        use Opcode as O;
        match self {
            O::Const => "CONST_STR",
            O::Exec => "EXC",
            O::Ask | O::Llm | O::Solve => "ASK",
            O::Think => "THINK",
            O::Reason => "REASON",
            O::Plan => "PLAN",
            O::Reflect => "REFLECT",
            O::Verify => "VERIFY",
            O::Inv => "INV",
            O::Qmem | O::BeliefGet => "QMEM",
            O::Umem | O::BeliefSet => "UMEM",
            O::Fence => "FENCE",
            O::Print => "PRINT",
            O::Communicate => "COMMUNICATE",
            O::Pause => "PAUSE",
            O::Guard => "GUARD",
            O::FlowCall => "FLOW_CALL",
            O::If => "BRANCH_ON_VALUE",
            O::Switch => "SWITCH",
            O::Loop => "LOOP_START",
            O::TryCatch => "TRY_CATCH",
            O::Yield => "YIELD",
            O::Return => "RETURN",
            O::WaitAll => "WAIT_ALL",
            _ => "MERGE",
        }
    }
}

/// What each reference op without an op of its own is read as (graph JSON)
/// and written as (source), for `aisc ops NAME`.
pub const REFERENCE_ONLY_READ_AS: &[(&str, &str)] = &[
    ("AGENT", "declarations of the graph's agent: `beliefs` (object), `goals` (texts); `memory` and `capabilities` need none"),
    ("JUMP", "its first input, passed on; a `label` naming a node it depends on (a backward jump) is G0013"),
    ("BRANCH_ON_VALUE", "an `if` on whether the text of `token` (or its input) equals `value`, when `label_true`/`true_label` and `label_false`/`false_label` name nodes (the arms); else that comparison's value"),
    ("LOOP_START", "with a `LOOP_END` after it: a `loop` over its input, or over 0..`max_iterations` (or a numeric `count_token`/`count`, default 100); alone: that number"),
    ("LOOP_END", "closes the `LOOP_START` it follows (the loop's value); alone: whether its input is above 0"),
    ("ERR", "the text \"Error: \" + `message` (else `error_handler`, else `recovery_template`: the reference's runtime runs neither); in a `TRY_CATCH` catch arm, the arm's value"),
    ("UPDATE_GOAL", "the AAM tool `update_goal` with `goal_id`, `action` (set|remove|clear), `priority`; source: `update_goal(goal_id:, action:, priority:)`"),
    ("CLAIM", "the AAM tool `claim` on `queue`: the job leased for `lease_ms` (default: for good), waiting up to `max_wait_ms` (default: none) for one; `task_data`, `task_id`, `claim_token`; `server_url` read, not used; source: `claim(queue:, lease_ms:, max_wait_ms:, server_url:)`"),
    ("RESUME", "the answer of the `PAUSE` whose `checkpoint_id` is `checkpoint`; `poll_max_attempts`, `poll_interval_ms`, `server_url` read, not used; source: `resume(checkpoint:)`"),
];
