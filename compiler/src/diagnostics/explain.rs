//! Long explanations for every diagnostic code (`aisc explain CODE`).
//! `docs/diagnostics.md` is generated from this table by a test, so the two
//! never drift apart.

pub struct Explanation {
    pub code: &'static str,
    pub title: &'static str,
    pub text: &'static str,
}

pub static EXPLANATIONS: &[Explanation] = &[
    Explanation {
        code: "E0001",
        title: "unterminated string literal",
        text: r#"A string literal was opened with a quote but never closed.

    let p = "Summarize the report     // error: no closing quote

Close the string on the same logical string. Strings may span lines, so the
missing quote is reported at the opening quote; the rest of that line is
skipped and checking continues on the next line. Write `\n` for a line break.

    let p = "Summarize the report""#,
    },
    Explanation {
        code: "E0002",
        title: "invalid escape sequence",
        text: r#"A backslash in a string is followed by a character that is not a known escape.

    ask("C:\data\notes")        // error: `\d` is not an escape

Known escapes: \n \t \r \0 \\ \" \' \{ \} and \u{HEX}. Write `\\` for a
literal backslash:

    ask("C:\\data\\notes")"#,
    },
    Explanation {
        code: "E0003",
        title: "unexpected character",
        text: r#"The source contains a character that is not part of the AIS language, such as
`$`, `#` or `~` outside a string or comment.

    let cost = $5        // error

Remove it, or put it inside a string. A run of such characters is reported
once, with its length."#,
    },
    Explanation {
        code: "E0004",
        title: "syntax error",
        text: r#"The parser found a token where the grammar does not allow it. The message names
the token found and what could appear there instead.

    flow main( -> str { ... }      // error: unexpected `->`, expected `)`

After a syntax error the parser skips to the end of the statement (or agent
member) and continues, so one run reports every syntax error it can."#,
    },
    Explanation {
        code: "E0005",
        title: "unexpected end of file",
        text: r#"The file ended while a construct was still open, usually a `{` or `(` that was
never closed.

    agent A {
        flow main() { print("hi")
    // error: file ends inside the flow and the agent

Add the missing closing delimiters."#,
    },
    Explanation {
        code: "E0006",
        title: "unterminated block comment",
        text: r#"A `/*` comment is never closed with `*/`. Block comments nest, so every `/*`
needs its own `*/`.

    /* draft
    flow old() { }      // error: everything after /* is a comment"#,
    },
    Explanation {
        code: "E0007",
        title: "invalid number literal",
        text: r#"A token starts with a digit but is not a number, for example `12ab` or `1e`.
Numbers look like `42`, `3.14`, `1_000` or `1e-3`. Names cannot start with a
digit."#,
    },
    Explanation {
        code: "E0100",
        title: "undefined variable",
        text: r#"A name is used that is not defined in this block or an enclosing one.

    flow main() -> str {
        ask("Summarize", notes) -> summary   // error: `notes` is not defined
        return summary
    }

Variables come from `let x = ...`, `expr -> x`, flow parameters, loop
variables, `catch (e)` and the agent's beliefs. Bindings inside `if`, `loop`
and `try` blocks are not visible after the block; bindings inside `parallel`
blocks are."#,
    },
    Explanation {
        code: "E0101",
        title: "invalid memory tier",
        text: r#"`qmem`/`umem` address one of three memory tiers: "stm" (short-term, in
memory), "ltm" (long-term, SQLite) and "episodic" (append-only log). The tier
must be known at compile time so the compiler can order memory operations.

    umem(fact, "disk")       // error
    umem(fact, "ltm")        // ok

A name declared in the agent's `memory { notes: LTM }` block may be used
instead, as "notes" or notes."#,
    },
    Explanation {
        code: "E0102",
        title: "empty tool name",
        text: r#"`inv("", args)` names no tool. Write the tool's name:

    inv("web_search", query)"#,
    },
    Explanation {
        code: "E0103",
        title: "empty prompt",
        text: r#"An LLM operation (`ask`, `think`, `reason`, `llm`, `plan`) was given an empty or
blank prompt literal. The call would spend tokens and latency on nothing.

    ask("")                        // error
    ask("Classify this ticket", ticket)"#,
    },
    Explanation {
        code: "E0104",
        title: "switch has no cases",
        text: r#"A `switch` needs at least one `case "value" => ...` arm. A switch with only a
`default` (or nothing) always takes the same path; write that expression
directly."#,
    },
    Explanation {
        code: "E0105",
        title: "more than one @entry flow",
        text: r#"An agent may mark at most one flow with `@entry`; it is where `aisc run`
starts. Remove `@entry` from all but one flow."#,
    },
    Explanation {
        code: "E0106",
        title: "unknown agent",
        text: r#"`Agent.flow(...)` names an agent that is not defined in the program.

    Reviewer.review(draft)     // error if there is no `agent Reviewer { }`

Check the spelling (agent names are case-sensitive) or define the agent."#,
    },
    Explanation {
        code: "E0107",
        title: "unknown flow",
        text: r#"The agent exists but has no flow with this name.

    Researcher.reserch(topic)    // error: did you mean `research`?"#,
    },
    Explanation {
        code: "E0108",
        title: "wrong number of arguments",
        text: r#"A flow, capability or operation was called with the wrong number of arguments.

    flow research(topic: str, depth: number) -> str { ... }
    research(topic)             // error: expects 2, found 1

Built-in operations have fixed arities too, e.g. `qmem(query, tier)` takes 2
or 3 arguments and `fence()` none."#,
    },
    Explanation {
        code: "E0109",
        title: "mismatched types",
        text: r#"A value of one type is used where another is required. `str`, `number` and
`bool` are strict; `json` and user-named types are dynamic and accept any
value (they are checked at run time).

    flow score(n: number) -> number { return n * 2 }
    score("high")               // error: expected `number`, found `str`

The same code is used for operators applied to values they cannot combine,
such as `true - 1`."#,
    },
    Explanation {
        code: "E0110",
        title: "value of type void used",
        text: r#"An operation that produces no value (`print`, `umem`, `fence`,
`communicate`, or a flow without `-> TYPE`) was used where a value is needed.

    let r = umem(fact, "ltm")   // error: umem returns nothing
    ask("Summarize", print(x))   // error

Use the operation as a statement on its own."#,
    },
    Explanation {
        code: "E0111",
        title: "duplicate definition",
        text: r#"Two agents, flows, capabilities, parameters, memories, beliefs, goals or
switch cases share a name (or a case value). The second one is reported; the
first is shown for reference. Local variables may be rebound and are not
affected."#,
    },
    Explanation {
        code: "E0112",
        title: "return type mismatch",
        text: r#"A `return` does not match the flow's declared result type.

    flow title(doc: str) -> str { return 42 }     // error: returns `number`
    flow log(x: str) { return x }                 // error: flow returns `void`

Declare the result with `-> TYPE`, or return a value of that type."#,
    },
    Explanation {
        code: "E0113",
        title: "missing return",
        text: r#"A flow declares a result type but some path reaches the end of the body
without a `return`.

    flow pick(x: str) -> str {
        if (x == "a") { return "A" }
    }                                // error: nothing returned when x != "a"

Add a `return` on every path (for example after the `if`)."#,
    },
    Explanation {
        code: "E0114",
        title: "unknown operation",
        text: r#"A call names something that is not a flow of this agent, a declared
capability, or a built-in operation (ask, think, reason, llm, plan, reflect,
verify, inv/tool, qmem/mem, umem, fence, merge, wait_all/wait, print,
communicate/talk, exec/exc).

    summarise(text)     // error: did you mean a flow named `summarize`?

To call another agent's flow write `Agent.flow(args)`."#,
    },
    Explanation {
        code: "E0115",
        title: "tool name must be a string literal",
        text: r#"The first argument of `inv`/`tool` must be the tool's name written as a
string literal, so the compiler can check it against the agent's capabilities
and the runtime's access policy before anything runs.

    inv(tool_name, args)          // error
    inv("calculator", args)       // ok"#,
    },
    Explanation {
        code: "E0116",
        title: "invalid memory declaration",
        text: r#"A `memory { }` entry names a tier that does not exist.

    memory { cache: Disk }        // error
    memory { cache: STM, facts: LTM, log: Episodic }"#,
    },
    Explanation {
        code: "E0117",
        title: "invalid assignment target",
        text: r#"Only variables and beliefs can be assigned with `=`.

    summary.title = "x"     // error
    summary = "x"           // ok if `summary` is defined"#,
    },
    Explanation {
        code: "E0118",
        title: "unknown attribute",
        text: r#"A flow is decorated with an attribute other than `@entry`."#,
    },
    Explanation {
        code: "E0119",
        title: "case pattern must be a literal",
        text: r#"`case` arms compare the switch value with a string, number or boolean
literal. Variables and computed values are not allowed as patterns.

    switch kind { case label => ... }      // error
    switch kind { case "bug" => ... }      // ok"#,
    },
    Explanation {
        code: "LIMIT_FRAMES",
        title: "the run has too many frames alive at once",
        text: r#"A run failure (not a compile-time diagnostic): the program had more frames
alive at once than the limit allows (default 200000; `aisc run --max-frames N`,
or `[limits] max_live_frames = N` in the config). Every call, branch taken,
loop iteration, `try`/`catch` region and `on` handler is a frame while it
runs. The call-depth limit does not catch a flow that calls itself twice per
call: its depth grows slowly while its frames double at every level, and the
VM starts every call whose inputs are ready.

    flow grow(n: number) -> number {
        if n <= 0 { return 1 }
        return grow(n - 1) + grow(n - 1)     // 2^n calls
    }

The run stops at once (a `try` does not catch it, or the program would keep
growing), with the op that tried to create the frame. Bound the recursion
(e.g. a smaller `n`, or a `loop` over a list), or, if the program really is
that wide, raise the limit and `aisc resume` the run: what completed is kept
in the run journal."#,
    },
    Explanation {
        code: "W0001",
        title: "unused variable",
        text: r#"A variable is bound but never read. Often a sign of a typo or a forgotten
step. Prefix the name with `_` to silence the warning. An unused LLM result
still costs a call; the optimizer never removes calls."#,
    },
    Explanation {
        code: "W0002",
        title: "unreachable statement",
        text: r#"A statement follows a `return` in the same block and can never run."#,
    },
    Explanation {
        code: "W0003",
        title: "tool not declared as a capability",
        text: r#"`inv("name", ...)` calls a tool the agent does not declare and that is not
one of the toolchain's built-in tools (`http_get`, `read_file`, `write_file`,
`json_query`, `calculator`, `now`, `memory_search`, `goals_list`,
`goals_next`, `goals_add`, `goals_complete`, `inbox`). Declare it so its
arguments and result are type-checked and the access policy can name it:

    capability web_search(query: str) -> json;

A tool whose name is not an identifier, such as an MCP server's prefixed
tool, is declared with its name quoted; `inv` and `tool` calls of that
name then do not warn:

    capability "ev.get-sum"(a: number, b: number) -> number;"#,
    },
    Explanation {
        code: "W0004",
        title: "template hole names no variable",
        text: r#"A string contains `{word}`, which interpolates the variable `word`, but no
such variable is in scope, so the text stays literal. Write `{{word}}` for
literal braces, or define the variable."#,
    },
];

pub fn explain(code: &str) -> Option<&'static str> {
    lookup(code).map(|e| e.text)
}

pub fn lookup(code: &str) -> Option<&'static Explanation> {
    let code = code.trim().to_ascii_uppercase();
    EXPLANATIONS.iter().find(|e| e.code == code)
}

/// The Markdown reference of every code, as written to `docs/diagnostics.md`.
pub fn markdown() -> String {
    let mut s = String::from(
        "# Diagnostics reference\n\nEvery diagnostic `aisc` reports has a stable code. `aisc explain CODE` prints the\nsame text as this page (which is generated from it by the test suite).\nErrors (`E…`) stop the build; warnings (`W…`) do not.\n\n| code | meaning |\n|---|---|\n",
    );
    for e in EXPLANATIONS {
        s.push_str(&format!(
            "| [{}](#{}) | {} |\n",
            e.code,
            e.code.to_lowercase(),
            e.title
        ));
    }
    for e in EXPLANATIONS {
        s.push_str(&format!(
            "\n## {}\n\n**{}**\n\n```text\n{}\n```\n",
            e.code, e.title, e.text
        ));
    }
    s
}
