//! The built-in operations of the language: one table, read by the checker
//! (arity, argument roles, result type) and by lowering (which IR op to emit).

use super::types::Ty;

/// Which IR-level operation a built-in becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuiltinKind {
    Ask,
    Think,
    Reason,
    Llm,
    Plan,
    Reflect,
    Verify,
    Solve,
    Inv,
    Exec,
    Qmem,
    Umem,
    Fence,
    Merge,
    WaitAll,
    Print,
    Communicate,
    Pause,
    Guard,
    ToNum,
}

/// How the checker treats particular argument positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgRole {
    /// A prompt: must not be an empty literal (E0103).
    Prompt,
    /// A tool name: non-empty string literal (E0102, E0115).
    ToolName,
    /// A memory tier: "stm" | "ltm" | "episodic" or a declared memory (E0101).
    Tier,
    /// Any non-void value.
    Value,
    /// A number literal (`qmem`'s result limit).
    Limit,
}

pub struct Builtin {
    pub kind: BuiltinKind,
    /// The name shown in messages.
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub min_args: usize,
    /// `None`: variadic.
    pub max_args: Option<usize>,
    /// Roles of the leading arguments; the rest are `Value`.
    pub roles: &'static [ArgRole],
    pub result: fn() -> Ty,
    pub summary: &'static str,
}

use ArgRole::*;
use BuiltinKind as K;

pub static BUILTINS: &[Builtin] = &[
    Builtin {
        kind: K::Ask,
        name: "ask",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Prompt],
        result: || Ty::Str,
        summary: "fast LLM query (~1 s): prompt, then context values",
    },
    Builtin {
        kind: K::Think,
        name: "think",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Prompt],
        result: || Ty::Str,
        summary: "medium LLM reasoning (~3 s)",
    },
    Builtin {
        kind: K::Reason,
        name: "reason",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Prompt],
        result: || Ty::Str,
        summary: "deep LLM reasoning (~10 s)",
    },
    Builtin {
        kind: K::Llm,
        name: "llm",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Prompt],
        result: || Ty::Str,
        summary: "generic LLM call (ask latency class)",
    },
    Builtin {
        kind: K::Plan,
        name: "plan",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Prompt],
        result: || Ty::Json,
        summary: "structured plan for a goal",
    },
    Builtin {
        kind: K::Solve,
        name: "solve",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Prompt],
        result: || Ty::Str,
        summary: "the model writes an AIS plan over the given tools; it is checked, then run",
    },
    Builtin {
        kind: K::Reflect,
        name: "reflect",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Value],
        result: || Ty::Json,
        summary: "structured self-critique of content",
    },
    Builtin {
        kind: K::Verify,
        name: "verify",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[Value],
        result: || Ty::Json,
        summary: "verdict on a claim against evidence",
    },
    Builtin {
        kind: K::Inv,
        name: "inv",
        aliases: &["tool", "invoke"],
        min_args: 1,
        max_args: Some(2),
        roles: &[ToolName, Value],
        result: || Ty::Json,
        summary: "invoke a tool with JSON arguments",
    },
    Builtin {
        kind: K::Exec,
        name: "exec",
        aliases: &["exc"],
        min_args: 1,
        max_args: None,
        roles: &[Value],
        result: || Ty::Json,
        summary: "run a command through the exec capability",
    },
    Builtin {
        kind: K::Qmem,
        name: "qmem",
        aliases: &["mem", "query_memory"],
        min_args: 2,
        max_args: Some(3),
        roles: &[Value, Tier, Limit],
        result: || Ty::Json,
        summary: "query memory: query, tier[, limit]",
    },
    Builtin {
        kind: K::Umem,
        name: "umem",
        aliases: &["update_memory"],
        min_args: 2,
        max_args: Some(3),
        roles: &[Value, Tier, Value],
        result: || Ty::Void,
        summary: "update memory: value, tier[, key]",
    },
    Builtin {
        kind: K::Fence,
        name: "fence",
        aliases: &[],
        min_args: 0,
        max_args: Some(0),
        roles: &[],
        result: || Ty::Void,
        summary: "order every earlier memory op before every later one",
    },
    Builtin {
        kind: K::Merge,
        name: "merge",
        aliases: &[],
        min_args: 1,
        max_args: None,
        roles: &[],
        result: || Ty::Str,
        summary: "join parallel results into one text",
    },
    Builtin {
        kind: K::WaitAll,
        name: "wait_all",
        aliases: &["wait"],
        min_args: 1,
        max_args: None,
        roles: &[],
        result: || Ty::Json,
        summary: "wait for all values; a JSON array of them",
    },
    Builtin {
        kind: K::Print,
        name: "print",
        aliases: &[],
        min_args: 0,
        max_args: None,
        roles: &[],
        result: || Ty::Void,
        summary: "print values, in program order",
    },
    Builtin {
        kind: K::Communicate,
        name: "communicate",
        aliases: &["talk"],
        min_args: 2,
        max_args: Some(3),
        roles: &[Value, Value, Value],
        result: || Ty::Json,
        summary: "send a message to another agent: recipient, message[, protocol]; its reply flow's answer, or null (fire-and-forget)",
    },
    Builtin {
        kind: K::Guard,
        name: "guard",
        aliases: &[],
        min_args: 2,
        max_args: Some(2),
        roles: &[Value, Value],
        result: || Ty::Void,
        summary: "a precondition: fails with `guard.failed` and the message when the condition is false",
    },
    Builtin {
        kind: K::ToNum,
        name: "to_num",
        aliases: &[],
        min_args: 1,
        max_args: Some(2),
        roles: &[Value, Value],
        result: || Ty::Number,
        summary: "a number, or text that reads as one (an LLM reply \"0.93\"); else fails `type.not_a_number`, its message led by the second argument",
    },
    Builtin {
        kind: K::Pause,
        name: "pause",
        aliases: &[],
        min_args: 1,
        max_args: Some(1),
        roles: &[Value],
        result: || Ty::Json,
        summary: "stop the run until a person answers the message; the answer is the value (`aisc resume RUN --input VALUE`)",
    },
];

/// Parameter names of the built-ins that take their arguments by name too
/// (`communicate(recipient: "Peer", message: m, protocol: "http")`).
pub fn param_names(kind: BuiltinKind) -> Option<&'static [&'static str]> {
    match kind {
        BuiltinKind::Communicate => Some(&["recipient", "message", "protocol"]),
        BuiltinKind::Guard => Some(&["condition", "message"]),
        BuiltinKind::Pause => Some(&["message"]),
        _ => None,
    }
}

pub fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS
        .iter()
        .find(|b| b.name == name || b.aliases.contains(&name))
}

impl Builtin {
    pub fn role(&self, index: usize) -> ArgRole {
        self.roles.get(index).copied().unwrap_or(ArgRole::Value)
    }

    pub fn arity_text(&self) -> String {
        match self.max_args {
            Some(max) if max == self.min_args => format!("{max}"),
            Some(max) => format!("{} to {max}", self.min_args),
            None => format!("at least {}", self.min_args),
        }
    }
}

/// Normalizes a written tier (`"STM"`, `"ltm"`, `"Episodic"`) to its canonical name.
pub fn canonical_tier(text: &str) -> Option<&'static str> {
    match text.to_ascii_lowercase().as_str() {
        "stm" | "short_term" | "short-term" => Some("stm"),
        "ltm" | "long_term" | "long-term" => Some("ltm"),
        "episodic" => Some("episodic"),
        _ => None,
    }
}

/// Tools the toolchain provides to every agent (the stdlib's built-ins and
/// the AAM's goal, inbox and memory tools): calling them without a
/// `capability` declaration is not a warning.
pub fn is_builtin_tool(name: &str) -> bool {
    // The stdlib table carries JSON schemas; keep only its names, built once.
    static STDLIB: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ais_stdlib::HOST_TOOLS.iter().any(|h| h.name == name)
        || STDLIB
            .get_or_init(|| ais_stdlib::builtins().iter().map(|b| b.name).collect())
            .contains(&name)
}

/// The parameters of a built-in tool called by name like a capability
/// (`calculator("6 * 7")`, the reference's style): its schema's required
/// properties in order, then the optional ones by name. `None` for a name
/// that is no built-in tool with a schema.
pub fn builtin_tool_params(name: &str) -> Option<Vec<String>> {
    builtin_tool_schema(name).map(|(params, _)| params)
}

/// A built-in tool's parameters (see [`builtin_tool_params`]) and whether
/// its schema takes other names too (no `additionalProperties: false`).
pub fn builtin_tool_schema(name: &str) -> Option<(Vec<String>, bool)> {
    if let Some(h) = ais_stdlib::HOST_TOOLS.iter().find(|h| h.name == name) {
        return Some((h.params.iter().map(|p| p.to_string()).collect(), false));
    }
    let b = ais_stdlib::builtin(name)?;
    let schema = &b.input_schema;
    let mut params: Vec<String> = schema
        .get("required")
        .and_then(serde_json::Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(props) = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
    {
        for k in props.keys() {
            if !params.contains(k) {
                params.push(k.clone());
            }
        }
    }
    let open = schema.get("additionalProperties") != Some(&serde_json::Value::Bool(false));
    Some((params, open))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_to_their_op() {
        assert_eq!(lookup("tool").map(|b| b.kind), Some(BuiltinKind::Inv));
        assert_eq!(lookup("mem").map(|b| b.kind), Some(BuiltinKind::Qmem));
        assert_eq!(lookup("wait").map(|b| b.kind), Some(BuiltinKind::WaitAll));
        assert_eq!(
            lookup("talk").map(|b| b.kind),
            Some(BuiltinKind::Communicate)
        );
        assert_eq!(lookup("exc").map(|b| b.kind), Some(BuiltinKind::Exec));
        assert!(lookup("nope").is_none());
    }

    #[test]
    fn tiers_are_case_insensitive() {
        assert_eq!(canonical_tier("STM"), Some("stm"));
        assert_eq!(canonical_tier("Episodic"), Some("episodic"));
        assert_eq!(canonical_tier("disk"), None);
    }
}
