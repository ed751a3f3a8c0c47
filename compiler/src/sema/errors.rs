//! Semantic errors and warnings as data. Codes are stable; long explanations
//! live in `diagnostics::explain`.

use super::types::Ty;
use ais_ir::{Diagnostic, IntoDiagnostic, Severity, Span};

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SemaError {
    #[error("undefined variable `{name}`")]
    UndefinedVariable {
        name: String,
        span: Span,
        suggestion: Option<String>,
    },
    #[error("invalid memory tier `{found}`")]
    InvalidTier { found: String, span: Span },
    #[error("empty tool name in `{op}`")]
    EmptyToolName { op: String, span: Span },
    #[error("`{callee}` takes no named argument `{name}`")]
    UnknownNamedArgument {
        callee: String,
        name: String,
        /// What the callee accepts (empty: no named arguments at all).
        accepted: Vec<String>,
        suggestion: Option<String>,
        span: Span,
    },
    #[error("named argument `{name}` given twice")]
    DuplicateNamedArgument {
        name: String,
        span: Span,
        first: Span,
    },
    #[error("positional argument after a named one")]
    PositionalAfterNamed { span: Span, named: Span },
    #[error("`{name}:` {expected}")]
    BadNamedArgument {
        name: String,
        expected: String,
        suggestion: Option<String>,
        span: Span,
    },
    #[error("empty prompt in `{op}`")]
    EmptyPrompt { op: String, span: Span },
    #[error("switch has no cases")]
    SwitchWithoutCases { span: Span },
    #[error("more than one @entry flow in agent `{agent}`")]
    MultipleEntries {
        agent: String,
        span: Span,
        first: Span,
    },
    #[error("unknown agent `{name}`")]
    UnknownAgent {
        name: String,
        span: Span,
        suggestion: Option<String>,
    },
    #[error("unknown flow `{flow}` in agent `{agent}`")]
    UnknownFlow {
        agent: String,
        flow: String,
        span: Span,
        suggestion: Option<String>,
    },
    #[error("flow `{flow}` of agent `{agent}` is not discoverable")]
    NotDiscoverable {
        agent: String,
        flow: String,
        /// What the agent lists as `discoverable`.
        listed: Vec<String>,
        span: Span,
    },
    #[error("wrong number of arguments: `{callee}` expects {expected}, found {found}")]
    ArgumentCount {
        callee: String,
        expected: String,
        found: usize,
        span: Span,
        decl: Option<Span>,
    },
    #[error("mismatched types: expected `{expected}`, found `{found}`")]
    TypeMismatch {
        expected: Ty,
        found: Ty,
        span: Span,
        context: String,
        decl: Option<Span>,
    },
    #[error("value of type `void` used{}", .what.as_ref().map(|w| format!(" (`{w}` returns nothing)")).unwrap_or_default())]
    VoidUse { what: Option<String>, span: Span },
    #[error("duplicate definition of {kind} `{name}`")]
    Duplicate {
        kind: &'static str,
        name: String,
        span: Span,
        first: Span,
    },
    #[error("return type mismatch: flow `{flow}` returns `{expected}`, found `{found}`")]
    ReturnMismatch {
        flow: String,
        expected: Ty,
        found: Ty,
        span: Span,
        decl: Option<Span>,
    },
    #[error("missing return: flow `{flow}` declares result `{expected}` but can reach its end without returning")]
    MissingReturn {
        flow: String,
        expected: Ty,
        /// The declared result type.
        span: Span,
        /// The end of the body, reachable without a return.
        end: Span,
    },
    #[error("unknown operation `{name}`")]
    UnknownOperation {
        name: String,
        span: Span,
        suggestion: Option<String>,
    },
    #[error("tool name must be a string literal")]
    ToolNameNotLiteral { span: Span },
    #[error("invalid memory declaration: `{found}` is not a memory tier")]
    InvalidMemoryDecl { found: String, span: Span },
    #[error("invalid assignment target")]
    InvalidAssignTarget { span: Span },
    #[error("unknown attribute `@{name}`")]
    UnknownDecorator { name: String, span: Span },
    #[error("case pattern must be a string, number or boolean literal")]
    NonLiteralPattern { span: Span },
    #[error("duplicate case `{pattern}`")]
    DuplicateCase {
        pattern: String,
        span: Span,
        first: Span,
    },
    #[error("operator `{op}` cannot be applied to `{lhs}` and `{rhs}`")]
    BadOperands {
        op: &'static str,
        lhs: Ty,
        rhs: Ty,
        span: Span,
    },
    #[error("invalid result limit")]
    InvalidLimit { span: Span },
    // ---- warnings
    #[error("unused variable `{name}`")]
    UnusedVariable { name: String, span: Span },
    #[error("`communicate` here calls agent `{agent}`'s flow `communicate`, not the built-in that sends a message")]
    CommunicateShadowed {
        agent: String,
        span: Span,
        flow: Span,
    },
    #[error("`communicate` to `{agent}` is used for its reply, but `{agent}` has no reply flow")]
    NoReplyFlow {
        agent: String,
        span: Span,
        recipient: Span,
    },
    #[error("`communicate` with `protocol: \"broadcast\"` goes to its one recipient here, and its value is used: the reference answers with every agent's reply as a list")]
    BroadcastValueUsed { span: Span },
    #[error("`merge` joins its inputs into one text here (the reference's is a list), and this result is {how}")]
    MergeUsedAsList {
        how: &'static str,
        span: Span,
        merge: Span,
    },
    #[error("unreachable statement")]
    Unreachable { span: Span, after: Span },
    #[error("tool `{tool}` is not declared as a capability of agent `{agent}`")]
    UndeclaredTool {
        tool: String,
        agent: String,
        span: Span,
    },
    #[error("no variable named `{name}` is in scope; `{{{name}}}` stays literal text")]
    TemplateHole { name: String, span: Span },
    #[error("`let {name}` shadows the `{name}` bound outside this block; its value is lost after the block")]
    ShadowsOuter {
        name: String,
        span: Span,
        outer: Span,
    },
    #[error("`{{{name}}}` is interpolated here, but is literal text in the reference, and this program also writes the reference's `{{{{...}}}}` holes")]
    SingleBraceHole { name: String, span: Span },
    #[error("the second argument of `guard` is its failure message, yet `{text}` reads as the reference's condition")]
    GuardTextCondition { text: String, span: Span },
    #[error(
        "no flow is marked `@entry` and the program has {flows} flows: `aisc run` needs `--entry`"
    )]
    NoEntryFlow { flows: usize, span: Span },
    #[error("{} agents have an `@entry` flow ({}): `aisc run` needs `--entry`", .entries.len(), .entries.join(", "))]
    SeveralEntryAgents {
        entries: Vec<String>,
        span: Span,
        first: Span,
    },
}

impl SemaError {
    pub fn code(&self) -> &'static str {
        use SemaError::*;
        match self {
            UndefinedVariable { .. } => "E0100",
            InvalidTier { .. } => "E0101",
            EmptyToolName { .. } => "E0102",
            EmptyPrompt { .. } => "E0103",
            SwitchWithoutCases { .. } => "E0104",
            MultipleEntries { .. } => "E0105",
            UnknownAgent { .. } => "E0106",
            UnknownFlow { .. } => "E0107",
            NotDiscoverable { .. } => "E0125",
            ArgumentCount { .. } => "E0108",
            TypeMismatch { .. } | BadOperands { .. } => "E0109",
            VoidUse { .. } => "E0110",
            Duplicate { .. } | DuplicateCase { .. } => "E0111",
            ReturnMismatch { .. } => "E0112",
            MissingReturn { .. } => "E0113",
            UnknownOperation { .. } => "E0114",
            ToolNameNotLiteral { .. } => "E0115",
            InvalidMemoryDecl { .. } => "E0116",
            InvalidAssignTarget { .. } => "E0117",
            UnknownDecorator { .. } => "E0118",
            NonLiteralPattern { .. } => "E0119",
            InvalidLimit { .. } => "E0120",
            UnknownNamedArgument { .. } => "E0121",
            DuplicateNamedArgument { .. } => "E0122",
            PositionalAfterNamed { .. } => "E0123",
            BadNamedArgument { .. } => "E0124",
            CommunicateShadowed { .. } => "E0127",
            NoReplyFlow { .. } => "E0128",
            UnusedVariable { .. } => "W0001",
            Unreachable { .. } => "W0002",
            UndeclaredTool { .. } => "W0003",
            TemplateHole { .. } => "W0004",
            NoEntryFlow { .. } => "W0005",
            SeveralEntryAgents { .. } => "W0006",
            ShadowsOuter { .. } => "W0007",
            SingleBraceHole { .. } => "W0008",
            GuardTextCondition { .. } => "W0009",
            MergeUsedAsList { .. } => "W0010",
            BroadcastValueUsed { .. } => "W0011",
        }
    }

    pub fn severity(&self) -> Severity {
        if self.code().starts_with('W') {
            Severity::Warning
        } else {
            Severity::Error
        }
    }

    pub fn span(&self) -> Span {
        use SemaError::*;
        match self {
            UndefinedVariable { span, .. }
            | InvalidTier { span, .. }
            | EmptyToolName { span, .. }
            | EmptyPrompt { span, .. }
            | SwitchWithoutCases { span }
            | MultipleEntries { span, .. }
            | UnknownAgent { span, .. }
            | UnknownFlow { span, .. }
            | NotDiscoverable { span, .. }
            | ArgumentCount { span, .. }
            | TypeMismatch { span, .. }
            | VoidUse { span, .. }
            | Duplicate { span, .. }
            | ReturnMismatch { span, .. }
            | MissingReturn { span, .. }
            | UnknownOperation { span, .. }
            | ToolNameNotLiteral { span }
            | InvalidMemoryDecl { span, .. }
            | InvalidAssignTarget { span }
            | UnknownDecorator { span, .. }
            | NonLiteralPattern { span }
            | InvalidLimit { span }
            | UnknownNamedArgument { span, .. }
            | DuplicateNamedArgument { span, .. }
            | PositionalAfterNamed { span, .. }
            | BadNamedArgument { span, .. }
            | CommunicateShadowed { span, .. }
            | NoReplyFlow { span, .. }
            | MergeUsedAsList { span, .. }
            | BroadcastValueUsed { span }
            | DuplicateCase { span, .. }
            | BadOperands { span, .. }
            | UnusedVariable { span, .. }
            | Unreachable { span, .. }
            | UndeclaredTool { span, .. }
            | TemplateHole { span, .. }
            | SingleBraceHole { span, .. }
            | GuardTextCondition { span, .. }
            | NoEntryFlow { span, .. }
            | ShadowsOuter { span, .. }
            | SeveralEntryAgents { span, .. } => *span,
        }
    }
}

fn did_you_mean(d: Diagnostic, suggestion: &Option<String>) -> Diagnostic {
    match suggestion {
        Some(s) => d.with_help(format!("did you mean `{s}`?")),
        None => d,
    }
}

impl IntoDiagnostic for SemaError {
    fn into_diagnostic(self) -> Diagnostic {
        use SemaError::*;
        let d = Diagnostic::new(self.severity(), self.code(), self.to_string(), self.span());
        match self {
            UndefinedVariable { suggestion, .. } => did_you_mean(
                d.with_label("not defined here or in an enclosing block"),
                &suggestion,
            )
            .with_note("variables are introduced by `let x = ...`, `expr -> x`, flow parameters and beliefs"),
            InvalidTier { .. } => d
                .with_label("not a memory tier")
                .with_help("use \"stm\", \"ltm\" or \"episodic\" (or a name declared in `memory { }`)"),
            UnknownNamedArgument {
                accepted,
                suggestion,
                ..
            } => {
                let d = d.with_label("not accepted here");
                match (suggestion, accepted.is_empty()) {
                    (Some(s), _) => d.with_help(format!("did you mean `{s}`?")),
                    (None, true) => d.with_help("pass its arguments by position"),
                    (None, false) => d.with_help(format!("it accepts: {}", accepted.join(", "))),
                }
            }
            DuplicateNamedArgument { first, .. } => d
                .with_label("given again here")
                .with_secondary(first, "first given here")
                .with_help("give each named argument once"),
            PositionalAfterNamed { named, .. } => d
                .with_label("positional argument")
                .with_secondary(named, "after this named one")
                .with_help("write positional arguments first, then the named ones"),
            BadNamedArgument { suggestion, .. } => did_you_mean(
                d.with_label("the value must be written here, as a literal"),
                &suggestion,
            ),
            CommunicateShadowed { agent, flow, .. } => d
                .with_label("ambiguous: the agent's reply flow, or a message")
                .with_secondary(flow, "the reply flow, which messages to this agent run")
                .with_help(format!(
                    "to send a message write `talk(...)` (the built-in's other name); to call the flow write `{agent}.communicate(...)`"
                )),
            NoReplyFlow { agent, recipient, .. } => d
                .with_label("its value would be `null` here; the reference fails or waits for an answer")
                .with_secondary(recipient, "an agent of this program without a flow named `communicate` or a `main` a message can call")
                .with_help(format!(
                    "to send without waiting, write the `communicate(...)` as a statement (its value unused); to get an answer, give `{agent}` a reply flow: `flow communicate(message: str, sender: str) -> str {{ ... }}`"
                )),
            MergeUsedAsList { merge, span, .. } => {
                let d = d.with_label("used as a list");
                if merge == span {
                    d
                } else {
                    d.with_secondary(merge, "one text: the inputs joined by blank lines")
                }
            }
            .with_help("for the list of the inputs (the reference's `MERGE`), write `[a, b]` or `wait_all(a, b)`; to keep the text, use it as text"),
            BroadcastValueUsed { .. } => d
                .with_label("the recipient's reply, or `null`, here")
                .with_help("for every agent's reply, call their reply flows: `[A.main(m), B.main(m)]`; to send only, write the `communicate(...)` as a statement"),
            EmptyToolName { .. } => d
                .with_label("this names no tool")
                .with_help("write the tool's name, e.g. inv(\"web_search\", args)"),
            EmptyPrompt { .. } => d
                .with_label("the model would receive nothing to answer")
                .with_help("write the instruction for the model here"),
            SwitchWithoutCases { .. } => d
                .with_label("needs at least one `case \"value\" => ...`")
                .with_help("a switch with nothing to choose between is a plain expression; drop the switch"),
            MultipleEntries { first, .. } => d
                .with_label("second @entry here")
                .with_secondary(first, "first @entry here")
                .with_help("an agent has one entry flow; remove `@entry` from all but one"),
            UnknownAgent { suggestion, .. } => {
                did_you_mean(d.with_label("no agent with this name in the program"), &suggestion)
            }
            UnknownFlow { suggestion, .. } => {
                did_you_mean(d.with_label("no flow with this name"), &suggestion)
            }
            NotDiscoverable { agent, listed, .. } => d
                .with_label("not in the agent's `discoverable` list")
                .with_help(format!(
                    "other agents may call {}; add it to `discoverable: [...]` in agent `{agent}`",
                    if listed.is_empty() {
                        "nothing".to_string()
                    } else {
                        listed.join(", ")
                    }
                )),
            ArgumentCount { decl, .. } => {
                let d = d.with_label("called here");
                match decl {
                    Some(s) => d.with_secondary(s, "declared here"),
                    None => d,
                }
            }
            TypeMismatch { context, decl, .. } => {
                let d = d.with_label(context);
                match decl {
                    Some(s) => d.with_secondary(s, "expected because of this"),
                    None => d,
                }
            }
            VoidUse { .. } => d
                .with_label("this produces no value")
                .with_help("only use the result of operations that return a value"),
            Duplicate { first, .. } => d
                .with_label("defined again here")
                .with_secondary(first, "first defined here"),
            DuplicateCase { first, .. } => d
                .with_label("this case can never be taken")
                .with_secondary(first, "first handled here"),
            ReturnMismatch { decl, .. } => {
                let d = d.with_label("returned here");
                match decl {
                    Some(s) => d.with_secondary(s, "declared result type"),
                    None => d.with_help("add `-> TYPE` to the flow signature to return a value"),
                }
            }
            MissingReturn { end, .. } => d
                .with_label("result declared here")
                .with_secondary(end, "the flow can end here without a `return`")
                .with_help("add `return VALUE` at the end of the flow"),
            UnknownOperation { suggestion, .. } => did_you_mean(
                d.with_label("not a flow, capability or built-in operation"),
                &suggestion,
            ),
            ToolNameNotLiteral { .. } => d
                .with_label("must be known at compile time")
                .with_help("tools are checked against declared capabilities before the run; write the name as \"text\""),
            InvalidMemoryDecl { .. } => d
                .with_label("unknown tier")
                .with_help("memory tiers are STM, LTM and Episodic"),
            InvalidAssignTarget { .. } => d
                .with_label("cannot assign to this")
                .with_help("only variables and beliefs can be assigned: `name = value`"),
            UnknownDecorator { .. } => d
                .with_label("not a known attribute")
                .with_help("the only flow attribute is `@entry`"),
            NonLiteralPattern { .. } => d.with_label("not a literal"),
            InvalidLimit { .. } => d
                .with_label("not a positive whole number literal")
                .with_help("write how many results to return, e.g. qmem(query, \"ltm\", 5)"),
            BadOperands { .. } => d.with_label("invalid operands"),
            UnusedVariable { name, .. } => d
                .with_label("never read")
                .with_help(format!("if this is intentional, name it `_{name}`")),
            Unreachable { after, .. } => d
                .with_label("never runs")
                .with_secondary(after, "the flow returns here"),
            UndeclaredTool { tool, .. } if !is_identifier(&tool) => d
                .with_label("not in the agent's capabilities")
                .with_help(format!(
                    "declare it with its name quoted: `capability {tool:?}(args: json) -> json;` so its arguments can be checked"
                )),
            UndeclaredTool { .. } => d
                .with_label("not in the agent's capabilities")
                .with_help("declare it: `capability NAME(args: json) -> json;` so its arguments can be checked"),
            TemplateHole { .. } => d
                .with_label("not a variable in scope")
                .with_help("write `\\{` and `\\}` for literal braces, or define the variable"),
            SingleBraceHole { name, .. } => d
                .with_label("the reference sends this literally")
                .with_help(format!("write `{{{{{name}}}}}` (both languages interpolate it), or `\\{{{name}\\}}` for literal text")),
            GuardTextCondition { text, .. } => d
                .with_label("a message, not a condition")
                .with_help(format!("to test the value, write `guard(value, condition: {text:?})`; the first argument alone is the condition here")),
            ShadowsOuter { name, outer, .. } => d
                .with_label("a new variable, local to this block")
                .with_secondary(outer, "the outer binding")
                .with_help(format!("to change the outer `{name}`, write `{name} = …` or `… -> {name}`; to keep a separate local, rename it")),
            NoEntryFlow { .. } => d
                .with_label("the first flow")
                .with_help("mark the flow to run with `@entry`, or name it: `aisc run FILE --entry Agent.flow`"),
            SeveralEntryAgents { first, .. } => d
                .with_label("another `@entry` flow")
                .with_secondary(first, "first `@entry` flow")
                .with_help("keep `@entry` on one flow, or name the flow to run: `aisc run FILE --entry Agent.flow`"),
        }
    }
}

/// Can `name` be written as an identifier (`capability name(...)`)?
fn is_identifier(name: &str) -> bool {
    let mut cs = name.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
