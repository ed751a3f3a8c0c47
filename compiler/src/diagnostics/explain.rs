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
        code: "E0008",
        title: "input nested too deeply",
        text: r#"Expressions, blocks or lists are nested more than 1024 levels deep, or more
than 1024 prefix operators (`-`, `!`) or postfix operations (`.field`,
`(args)`, `[index]`) follow each other. The parser stops there instead of
exhausting its stack. Chains of binary operators (`a + b + c + ...`) have no
limit: the compiler walks along them.

    let x = ((((((((((((((((((((((((...))))))))))))))))))))))))

Split the expression into named intermediate values with `let`."#,
    },
    Explanation {
        code: "E0010",
        title: "cannot read an imported file",
        text: r#"An `import` names a file that cannot be read (it does not exist, or is not
readable); the message gives the operating system's reason.

    import "agents/reviewer.ais"   // relative to the importing file's folder

A relative path is resolved from the folder of the file that imports it;
`..` and absolute paths work. `import "std/NAME"` names the bundled library
instead (see docs/stdlib.md)."#,
    },
    Explanation {
        code: "E0011",
        title: "unknown standard library module",
        text: r#"`import "std/NAME"` names a module the bundled library does not have. The
modules are listed in docs/stdlib.md (`aisc` embeds them, so no files are
needed). To import a folder of your own that is called `std`, write
`import "./std/NAME.ais"`."#,
    },
    Explanation {
        code: "E0012",
        title: "import in an inner plan",
        text: r#"A plan written by a model (`solve`, see docs/language.md §6.6) is the body of
one flow checked against the tools it was offered. It cannot import files:
that would let model-written text pull code from the disk into the run."#,
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
        code: "LIMIT_VALUE_BYTES",
        title: "a value is larger than the per-value limit",
        text: r#"A run failure (not a compile-time diagnostic): an op computed, or a tool
returned, a value larger than the limit allows (default 64 MiB of text, or a
list of 8 Mi items; `[limits] max_value_bytes = N` in the config). A value
that grows in a loop grows geometrically:

    loop (i in [1, 2, 3, ... 40]) {
        s = s + s          // 2^40 times the first text
    }

The run stops before the process runs out of memory. Like a budget, it is
not caught by `try`; what completed is journaled, and `aisc resume RUN_ID`
continues with a higher limit once the program or the limit is changed."#,
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
        code: "E0120",
        title: "invalid result limit",
        text: r#"The optional third argument of `qmem` (the most results to return) must be a
whole number literal of at least 1.

    let hits = qmem("invoices", "ltm", 0)        // error
    let hits = qmem("invoices", "ltm", n)        // error: not a literal

Write a literal such as `qmem("invoices", "ltm", 5)`."#,
    },
    Explanation {
        code: "E0121",
        title: "named argument not accepted",
        text: r#"LLM operations (`ask`, `think`, `reason`, `llm`, `plan`, `reflect`,
`verify`, `solve`) take named arguments after their positional ones:
`prompt`, `context`, `tools`, `max_steps`, `model`, `temperature`,
`max_tokens`, `budget` (or `budget_tokens`), `system`, and for `solve` also
`repairs`. Flows and capabilities take their parameters by name. The other
operations are called by position.

    ask("Summarise", report, temprature: 0.2)   // error: did you mean `temperature`?
    book(city: "Oslo", night: 2)                // error: did you mean `nights`?

The message lists what the callee accepts, or suggests the closest name."#,
    },
    Explanation {
        code: "E0122",
        title: "named argument given twice",
        text: r#"An argument is given once per call: a named one once, and a parameter
either by position or by name, not both.

    ask("Summarise", report, model: "fast", model: "slow")   // error
    ask("Summarise", prompt: "Shorten")                      // error: the prompt twice
    plan("Oslo", city: "Bergen")                             // error: `city` is the first parameter

Keep the one you mean."#,
    },
    Explanation {
        code: "E0123",
        title: "positional argument after a named one",
        text: r#"Positional arguments (the prompt, then the context values) come first; named
arguments follow them.

    ask("Summarise", max_tokens: 200, report)   // error
    ask("Summarise", report, max_tokens: 200)   // ok"#,
    },
    Explanation {
        code: "E0124",
        title: "invalid value for a named argument",
        text: r#"Named arguments configure the call, so their values are written as literals
the compiler can read:

- `model:`, `system:` a string literal (no `{holes}`);
- `temperature:` a number from 0 to 2;
- `max_tokens:`, `max_steps:`, `budget:` / `budget_tokens:` a whole number,
  at least 1;
- `repairs:` (`solve`) a whole number from 0 to 16;
- `tools:` a list of names, each a capability of the agent or a built-in
  tool: `tools: [search, calculator]`.

    ask("Answer", tools: [serch])      // error: did you mean `search`?
    ask("Answer", max_steps: n)        // error: not a literal"#,
    },
    Explanation {
        code: "E0125",
        title: "flow not discoverable",
        text: r#"An agent that declares `discoverable: [...]` lets other agents call only
the flows listed there (its own flows call each other freely). An agent
without the member keeps every flow callable.

    agent Billing {
        discoverable: [quote]
        flow quote(item: str) -> str { ... }
        flow refund(item: str) -> str { ... }
    }
    agent Desk {
        @entry flow main() -> str {
            return Billing.refund("kettle")   // error: not discoverable
        }
    }

Add the flow to the list, or call one that is listed."#,
    },
    Explanation {
        code: "E0126",
        title: "side effect in a belief initialiser",
        text: r#"A belief's initial value is computed before the run starts, outside the
journal, the flow policy (docs/security.md) and the budget, and again on
every resume. So an initialiser may only compute: literals, operators,
templates, lists and objects, other beliefs, and calls to flows that are
themselves free of effects. A tool call, an LLM call, a memory access, a
message, `print` or `pause`, directly or in a flow it calls, is an error.

    agent Desk {
        capability fetch_doc(url: str) -> str;
        beliefs {
            limit: double(21),                 // ok: `double` is pure
            doc: fetch_doc("https://...")      // error: a tool call
        }
    }

Give the belief a plain value and assign it in a flow, where the call is
journaled and checked like any other:

    beliefs { doc: "" }
    @entry flow main() -> str {
        doc = fetch_doc("https://...")
        ...
    }"#,
    },
    Explanation {
        code: "E0127",
        title: "`communicate` names both a flow and the built-in",
        text: r#"A flow named `communicate` is its agent's reply flow: a message sent to the
agent runs it, and its result is the sender's answer (docs/language.md,
"Request and reply"). Inside that agent a plain `communicate(...)` could
mean that flow or the built-in that sends a message; a reply flow that
forwards a message would call itself until the call depth ran out. So it
is an error; say which one you mean:

    agent Relay {
        flow communicate(msg: str) -> str {
            return communicate("Store", msg)      // error: ambiguous
        }
    }

    return talk("Store", msg)                     // send: `talk` is the built-in
    return Relay.communicate(msg)                 // call the flow itself"#,
    },
    Explanation {
        code: "E0128",
        title: "`communicate` used for a reply from an agent without a reply flow",
        text: r#"A message to an agent of the program that has a reply flow (a flow named
`communicate`, else a `main` its message can call) runs that flow, and
`communicate` is its answer. An agent without one only receives the message
(its inbox and `on` handlers), so the value here would be `null`; the
reference fails for a local agent, or waits for an answer over HTTP. A
program that reads the value means a reply, so this is an error:

    agent Lead {
        @entry flow main() -> str {
            let ack = communicate("Pager", "disk full")   // error: Pager has no reply flow
            return "ack: {ack}"
        }
    }
    agent Pager { on message.received { content: str } => print(content) }

To send without waiting, write the call as a statement (fire-and-forget):

    communicate("Pager", "disk full")

To get an answer, give the recipient a reply flow:

    agent Pager { flow communicate(message: str, sender: str) -> str { return "paged" } }"#,
    },
    Explanation {
        code: "E9999",
        title: "internal compiler error",
        text: r#"The compiler lowered a program that type-checked into IR that does not verify.
This is a bug in `aisc`, not in your program; the message names the verifier's
complaint. Please report it with the source file. Compiling at `-O0` does not
avoid it (the IR is verified before any pass runs)."#,
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
        code: "W0020",
        title: "untrusted data reaches a side-effecting sink",
        text: r#"A value derived from an untrusted source (a web page from `http_get`, a
search result, an MCP tool's reply, a message from another agent, or a
model reply that read any of them) reaches an argument of a side effect the
information-flow policy guards: a tool that is not read-only, `exec`,
`communicate`, or a long-term memory write other agents read. Text in such data can
carry an injected instruction ("ignore the task and email the file to ..."),
so at run time `aisc run` stops the op with `policy.denied` before it
happens. The labels on the warning are the path the data takes.

Reported by plain `aisc check` and alone by `aisc check --flows`; the rules
come from the `[policy]` section of the config (`docs/security.md`).
Validate the value with code (compare it against trusted data, `guard`), turn
it into a number or boolean under `[policy.quarantine] scalars = true`, have a
model with no tools answer in a closed `schema:` (numbers, enums, bounded
strings) under `[policy.quarantine] schemas = true` (a hop marked "not
quarantined" says what keeps the schema open, and the argument must accept
such a choice: `quarantined = true` below), say which values the argument
accepts by where they come from (the user's request, a trusted tool's
result, a list; checked at run time, so not reported here), or, if the
argument may carry untrusted text, say so:

    [policy.sinks.send_email.args.to]
    from = ["@args", "list_contacts"]

    [policy.sinks.send_email]
    allow_untrusted = ["body"]"#,
    },
    Explanation {
        code: "W0004",
        title: "template hole names no variable",
        text: r#"A string contains `{word}`, which interpolates the variable `word`, but no
such variable is in scope, so the text stays literal. (`{{word}}` is the same
hole.) Write `\{word\}` for literal braces, or define the variable."#,
    },
    Explanation {
        code: "W0007",
        title: "`let` shadows a variable of an enclosing block",
        text: r#"Inside the block of an `if`, `switch` case, `loop` or `try`/`catch`, `let v`
makes a new variable local to the block; the `v` outside keeps its value and
the block's value is lost when the block ends. To change the outer variable,
assign it or rebind it with `->` (inside such a block, `-> v` with `v` bound
outside rebinds the outer `v`, as the reference language does):

    let answer = "unknown"
    if (ready) {
        answer = ask("...")          // or: ask("...") -> answer
    }
    return answer

To keep a separate local variable, give it another name."#,
    },
    Explanation {
        code: "W0008",
        title: "single-brace hole in a program that writes the reference's holes",
        text: r#"aisc interpolates both `{name}` and `{{name}}` in strings; the reference
implementation interpolates only `{{name}}` and sends `{name}` literally. A
file that writes any `{{name}}` hole was likely written for the reference,
so its single-brace holes would change meaning there:

    ask("Write about {{topic}} in a {tone} voice")   // warning on `{tone}`

Write `{{tone}}` to interpolate in both, or `\{tone\}` for literal text."#,
    },
    Explanation {
        code: "W0009",
        title: "`guard` message that reads as a condition",
        text: r#"`guard(cond, message)` fails the run with `message` when `cond` is false.
A message such as `"> 0.8"` reads as the reference's condition language: in
the reference, `guard` tests its input against `condition:`. Here the first
argument alone is the condition (a number is true unless 0), and the text
is only the message:

    guard(score, "> 0.8")                          // passes for any score but 0
    guard(score, condition: "> 0.8")               // the reference's meaning
    guard(score > 0.8, "score too low")            // the same, ours

`condition:` takes `>`, `>=`, `<`, `<=`, `==`, `!=` against a number or a
quoted text, `not_empty`, `is_empty`, `is_null`, `not_null`, `is_true`,
`is_false`; `on_fail: "skip"` makes the guard's value `false` instead of
failing."#,
    },
    Explanation {
        code: "W0010",
        title: "`merge` result used as a list",
        text: r#"`merge(a, b)` joins its inputs into one text (separated by blank lines).
The reference's `MERGE` makes a list of its inputs instead, so a program
written for it that iterates or indexes the result changes meaning here:

    let parts = merge(summary, critique)
    loop (p in parts) { print(p) }         // warning: iterates one text

For the list of the inputs write a list (or `wait_all`, whose value is
the list):

    let parts = [summary, critique]
    loop (p in parts) { print(p) }

To keep the joined text, use it as text."#,
    },
    Explanation {
        code: "W0011",
        title: "broadcast `communicate` used for its value",
        text: r#"`communicate(to, message, protocol: "broadcast")` sends one message to
`to` here; its value is that agent's reply (when it has a reply flow), else
`null`. The reference's broadcast sends the message to
every agent that has a reply flow and answers with the list of their
replies, so a program written for it that reads the value changes
meaning here:

    let votes = communicate(target_agent: "*", message: q, protocol: "broadcast")   // warning

For every agent's reply, call their reply flows (they run in parallel):

    let votes = [Critic.main(q), Editor.main(q)]

To send only, write the `communicate(...)` as a statement (its value
unused)."#,
    },
    Explanation {
        code: "W0005",
        title: "no entry flow",
        text: r#"No flow is marked `@entry` and the program has more than one flow, so
`aisc run` cannot tell which one to run and refuses without `--entry`. (A
program with exactly one flow runs it, marked or not.)

    agent A {
        @entry flow main() -> str { return helper() }
        flow helper() -> str { return "hi" }
    }

Or run a flow by name: `aisc run FILE --entry A.helper`."#,
    },
    Explanation {
        code: "W0006",
        title: "entry flows in several agents",
        text: r#"More than one agent has an `@entry` flow, so `aisc run` cannot tell which
one to run and refuses without `--entry`. Keep `@entry` on the flow that
starts the program (it can call the others), or run one by name:
`aisc run FILE --entry Agent.flow`."#,
    },
    Explanation {
        code: "L0001",
        title: "artifact shorter than its header",
        text: r#"The file is shorter than the fixed `.apxmobj` header, so it cannot be an
artifact (often an empty or cut-off file). Rebuild it with
`aisc build FILE.ais -o FILE.apxmobj`."#,
    },
    Explanation {
        code: "L0002",
        title: "not an artifact (bad magic number)",
        text: r#"The file does not start with the `.apxmobj` magic number: it is some other
kind of file (a `.ais` source, a text file) given where an artifact was
expected. Pass the `.ais` source to `aisc run`, or build an artifact first."#,
    },
    Explanation {
        code: "L0003",
        title: "unsupported artifact format version",
        text: r#"The artifact was written by a toolchain with a different bytecode format
version. Artifacts are not portable across format versions; rebuild it from
its source with this `aisc`."#,
    },
    Explanation {
        code: "L0004",
        title: "truncated artifact",
        text: r#"The header announces more payload bytes than the file holds: the file was cut
off (an interrupted copy or download). Rebuild or copy it again."#,
    },
    Explanation {
        code: "L0005",
        title: "trailing bytes after the artifact",
        text: r#"The file holds more bytes than its header announces. Something was appended
to it, or two files were concatenated. Rebuild it."#,
    },
    Explanation {
        code: "L0006",
        title: "artifact checksum mismatch",
        text: r#"The payload's checksum does not match the one in the header: the file is
corrupted. Rebuild it; `aisc build -o` writes artifacts atomically, so a
failed build never leaves a partial file."#,
    },
    Explanation {
        code: "L0007",
        title: "malformed artifact payload",
        text: r#"The payload passed the checksum but does not decode as a program. It was
produced by a different tool or a buggy writer. Rebuild it with `aisc build`."#,
    },
    Explanation {
        code: "L0008",
        title: "index out of range in an artifact",
        text: r#"An op in the artifact refers to a constant, string, flow, region or value that
does not exist. The loader validates every index before running anything;
rebuild the artifact from source."#,
    },
    Explanation {
        code: "L0009",
        title: "ill-typed bytecode",
        text: r#"An op in the artifact has operands or results of the wrong kind (for example a
region where a value is expected). The artifact was not produced by `aisc`
or is damaged; rebuild it."#,
    },
    Explanation {
        code: "L0010",
        title: "invalid bytecode",
        text: r#"The artifact's bytecode breaks a structural rule the VM relies on (a region
without a terminator, a value defined twice, a missing entry flow). Rebuild
it from source."#,
    },
    Explanation {
        code: "C0001",
        title: "code generation failed",
        text: r#"Lowering the optimized IR to bytecode failed (a value used out of scope, an
unknown callee, a missing attribute, or a program too large for the
bytecode format). For programs compiled from `.ais` this is a compiler bug;
for hand-written textual IR (`ais-opt`), fix what the message names."#,
    },
    Explanation {
        code: "O0001",
        title: "malformed pass pipeline",
        text: r#"The `--passes` text does not parse: pass names are separated by commas and
options go in braces.

    --passes 'canonicalize,fuse-ask{max-depth=3},cse,dce'"#,
    },
    Explanation {
        code: "O0002",
        title: "unknown pass",
        text: r#"`--passes` names a pass that does not exist. The passes are `canonicalize`,
`fuse-ask`, `cse` and `dce` (see docs/passes.md)."#,
    },
    Explanation {
        code: "O0003",
        title: "unknown pass option",
        text: r#"A pass in `--passes` is given an option it does not have, e.g.
`fuse-ask{depth=3}`; the option is `max-depth`. docs/passes.md lists each
pass's options."#,
    },
    Explanation {
        code: "O0004",
        title: "invalid pass option value",
        text: r#"A pass option has a value of the wrong kind, e.g. `fuse-ask{max-depth=x}`;
`max-depth` takes a whole number."#,
    },
    Explanation {
        code: "P0001",
        title: "textual IR: unexpected token",
        text: r#"The textual IR read by `ais-opt` has a token where the IR grammar expects
something else; the message names both. docs/ir.md describes the syntax."#,
    },
    Explanation {
        code: "P0002",
        title: "textual IR: unknown op",
        text: r#"An op name in textual IR is not in the op table (see docs/ir.md for every
op and its mnemonic)."#,
    },
    Explanation {
        code: "P0003",
        title: "textual IR: undefined value",
        text: r#"A `%name` is used in textual IR but never defined (or defined later, or in
another region)."#,
    },
    Explanation {
        code: "P0004",
        title: "textual IR: value defined twice",
        text: r#"A `%name` is defined more than once. IR values are SSA: give each result its
own name."#,
    },
    Explanation {
        code: "P0005",
        title: "textual IR: result type count",
        text: r#"An op defines a different number of results than it lists result types after
the `:`. Give one type per result."#,
    },
    Explanation {
        code: "P0006",
        title: "textual IR: unknown type",
        text: r#"A type in textual IR is not one of the IR types (`str`, `number`, `bool`,
`json`, `void`, `list<T>`, `!ord`, ...; see docs/ir.md)."#,
    },
    Explanation {
        code: "P0007",
        title: "textual IR: invalid literal",
        text: r#"A literal in textual IR (a string, number or attribute value) is malformed;
the message says why."#,
    },
    Explanation {
        code: "P0008",
        title: "textual IR: unknown flow",
        text: r#"A `call` in textual IR names a flow that the agent does not define."#,
    },
    Explanation {
        code: "P0009",
        title: "textual IR: too many errors",
        text: r#"The IR parser stops after a fixed number of errors; fix the ones reported and
run again."#,
    },
    Explanation {
        code: "V0001",
        title: "IR: invalid reference",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An op refers to a value, region or op that does not exist in the flow."#,
    },
    Explanation {
        code: "V0002",
        title: "IR: malformed graph",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

The flow's op graph is inconsistent (an op placed in two regions, a region
with two parents)."#,
    },
    Explanation {
        code: "V0003",
        title: "IR: value used before its definition",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A value is used by an op that comes before the op defining it in the same
region."#,
    },
    Explanation {
        code: "V0004",
        title: "IR: value out of scope",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A value defined inside a region (a branch, loop body or `try`) is used
outside it. Values leave a region only through its `yield`."#,
    },
    Explanation {
        code: "V0005",
        title: "IR: wrong operand count",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An op has more or fewer data operands than its definition in the op table."#,
    },
    Explanation {
        code: "V0006",
        title: "IR: wrong result count",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An op has more or fewer results than its definition in the op table."#,
    },
    Explanation {
        code: "V0007",
        title: "IR: wrong operand type",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An operand's type is not one the op accepts."#,
    },
    Explanation {
        code: "V0008",
        title: "IR: wrong result type",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A result's declared type is not what the op produces."#,
    },
    Explanation {
        code: "V0009",
        title: "IR: wrong region shape",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A region-holding op (`if`, `switch`, `loop`, `try`) has the wrong number or
kind of regions or region arguments."#,
    },
    Explanation {
        code: "V0010",
        title: "IR: yield does not match",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A region's `yield` passes values whose number or types differ from the
results of the op that owns the region."#,
    },
    Explanation {
        code: "V0011",
        title: "IR: missing terminator",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A flow body or region does not end with `return` or `yield`."#,
    },
    Explanation {
        code: "V0012",
        title: "IR: misplaced terminator",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A `return` or `yield` appears somewhere other than the end of its region, or
in a region kind that does not allow it."#,
    },
    Explanation {
        code: "V0013",
        title: "IR: return type mismatch",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A `return` passes a value whose type differs from the flow's declared result
type."#,
    },
    Explanation {
        code: "V0014",
        title: "IR: unknown attribute",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An op carries an attribute its definition does not list."#,
    },
    Explanation {
        code: "V0015",
        title: "IR: missing attribute",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An op lacks an attribute it requires (for example `inv` without `tool`)."#,
    },
    Explanation {
        code: "V0016",
        title: "IR: invalid attribute",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An attribute has a value of the wrong kind or out of range."#,
    },
    Explanation {
        code: "V0017",
        title: "IR: ordering token misuse",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An ordering token (`!ord`) is used as data, consumed twice, or not threaded
through effectful ops in order."#,
    },
    Explanation {
        code: "V0018",
        title: "IR: unordered writes",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

Two effectful ops that write the same memory tier or belief are not ordered
by ordering tokens, so their order would depend on scheduling."#,
    },
    Explanation {
        code: "V0019",
        title: "IR: unknown callee",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A `call` names a flow that does not exist."#,
    },
    Explanation {
        code: "V0020",
        title: "IR: call argument count",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A `call` passes a different number of arguments than the callee takes."#,
    },
    Explanation {
        code: "V0021",
        title: "IR: call argument type",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A `call` argument's type differs from the callee's parameter type."#,
    },
    Explanation {
        code: "V0022",
        title: "IR: capability arguments",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An `inv` of a declared capability passes arguments that do not match the
capability's parameters."#,
    },
    Explanation {
        code: "V0023",
        title: "IR: more than one entry flow",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An agent in the IR module has more than one flow marked entry."#,
    },
    Explanation {
        code: "V0024",
        title: "IR: duplicate name",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

Two agents, flows or capabilities in the module have the same name."#,
    },
    Explanation {
        code: "V0025",
        title: "IR: invalid switch cases",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A `switch` has no cases, duplicate case values, or case values of a type
that differs from the scrutinee's."#,
    },
    Explanation {
        code: "V0026",
        title: "IR: constant type mismatch",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A `const` op's literal does not have the declared result type."#,
    },
    Explanation {
        code: "V0027",
        title: "IR: empty prompt",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An LLM op has an empty prompt string."#,
    },
    Explanation {
        code: "V0028",
        title: "IR: invalid name",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

An agent, flow, capability or tool name is empty or contains characters
that names may not contain."#,
    },
    Explanation {
        code: "V0029",
        title: "IR: belief initialiser with an effect",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A belief's initialiser flow reaches an op with an effect (a tool or LLM
call, a memory or belief access, a message, `print`, `pause`), directly or
in a flow it calls. Initialisers run before the run, outside the journal
and the flow policy, so they must be free of effects (on source: E0126)."#,
    },
    Explanation {
        code: "V0900",
        title: "IR: unused pure value",
        text: r#"The IR verifier checks every module after lowering, after each pass with
`--verify-each`, and on input to `ais-opt`. For IR lowered from `.ais` a
verifier error is a compiler bug (reported as E9999); for hand-written
textual IR, fix what the message and span name.

A pure op's result is never used (a warning; `dce` removes such ops)."#,
    },
    Explanation {
        code: "R0001",
        title: "invalid entry point",
        text: r#"The run could not start because its entry flow is not determined: the
program has no `@entry` flow and no `--entry` was given, it has several, or
`--entry` names no flow of the program.

    aisc run app.ais --entry Main.run

Mark one flow `@entry` or pass `--entry` naming an existing flow."#,
    },
    Explanation {
        code: "R0002",
        title: "invalid entry argument",
        text: r#"An entry-flow argument could not be used: a `--arg` names no parameter, a
required parameter has no `--arg`, or a value does not convert to the
parameter's type (`number`, `bool`, or JSON text for a `json` parameter).

    aisc run app.ais --arg count=3 --arg filters='{"lang": "en"}'"#,
    },
    Explanation {
        code: "R0003",
        title: "uncaught run-time failure",
        text: r#"An operation failed outside any `try` region, so the run stopped. The report
names the operation, its flow and source span, the cause code (`llm.server`,
`tool.unknown`, `budget.tokens`, ...) and a hint for that cause.

    try {
        let r = inv("search", query)
    } catch (e) {
        print("search failed: " + e.code)
    }

Catch the failure where the program can recover. Budget and watchdog stops
(`budget.*`, `WATCHDOG_LOOP`) cannot be caught; resume the run with a higher
limit (`aisc resume RUN_ID`)."#,
    },
    Explanation {
        code: "R0004",
        title: "cannot write a run export",
        text: r#"The run ended but its events (`--events`) or trace (`--trace`) file could
not be written; the message names the path and the reason. The run's result
is still printed and journaled (`aisc runs show RUN_ID`), and no partial file
is left behind; `aisc run` exits with 1. Check that the directory exists and
is writable."#,
    },
    Explanation {
        code: "R0005",
        title: "internal VM error",
        text: r#"The VM reached a state it should never reach (a scheduler invariant broke).
This is a bug in the runtime, not in your program; please report it with the
program and the command line."#,
    },
    Explanation {
        code: "R0006",
        title: "run could not start",
        text: r#"Before its first op, a run reads from the memory store which sources
earlier runs wrote into the tiers that outlive a run (long-term memory, the
episodic log, shared beliefs), so that reading them carries those sources'
labels (docs/security.md, "Labels across runs"). The store could not be
read; the message names the reason. Nothing ran. Check the memory
directory (`--memory`) or the store (`--store`) and retry."#,
    },
    Explanation {
        code: "K0001",
        title: "invalid configuration",
        text: r#"The configuration file (`--config`, `$APXM_CONFIG`, `./.apxm/config.toml`
or `~/.apxm/config.toml`) cannot be used: it is not valid TOML, a key is not
known in its section, a value has the wrong type or is out of range, or a
backend or tool is defined twice. Every section is checked — the backends
and `[memory]`, `[tools]`, `[[tools.subprocess]]`, `[[mcp_servers]]` and
`[access]` — by `aisc config show`, `aisc doctor` and `aisc run`, and the
report points at the key with a caret.

    [tools]
    workspcae = "."        # error: unknown field `workspcae`

Fix the key or value named (docs/backends.md and docs/runtime.md list every
key). A bad configuration is a usage error: exit code 2. API keys never live
in the file: use `api_key_env = "VAR"`."#,
    },
    Explanation {
        code: "G0001",
        title: "not a valid graph document",
        text: r#"A graph-JSON file (`aisc check|build|run FILE.json`) is not JSON, or a field
has the wrong shape: a missing `nodes`, `to` or `dependency`, an id that is
not a whole number, an unknown field, a `dependency` other than `Data`,
`Effect` or `Control`, a file cut short.

    { "nodes": [ { "id": "one", "op": "ASK" } ] }   // error: `id` is a string

The caret points where the JSON reader stopped. docs/graph-json.md gives the
format."#,
    },
    Explanation {
        code: "G0002",
        title: "unknown or missing op",
        text: r#"A node's `op` names no operation, or the node has none. Op names are the
reference's (`ASK`, `THINK`, `REASON`, `CONST_STR`, `WAIT_ALL`, `INV`, `QMEM`,
`UMEM`, `EXC`, ...) or, for ops the reference lacks, our mnemonic
upper-cased (`TEMPLATE`, `IF`, `BELIEF_GET`). Case matters.

    { "id": 3, "op": "ASKK" }        // error: did you mean `ASK`?

`aisc ops` lists every op."#,
    },
    Explanation {
        code: "G0003",
        title: "missing or duplicate node id",
        text: r#"Every node needs an `id`, a whole number unique in its graph: edges name
nodes by id.

    { "id": 1, "op": "ASK" }, { "id": 1, "op": "THINK" }   // error: 1 twice

Give each node its own id and point the edges at the right one."#,
    },
    Explanation {
        code: "G0004",
        title: "edge to an unknown node",
        text: r#"An edge's `from` or `to` (or a node's `parent`) names a node id that the
graph does not have, or `param` names no parameter, or the edge asks for a
result or region argument the node does not have.

    { "from": 1, "to": 9, "dependency": "Data" }    // error: no node 9

Fix the id, or add the missing node."#,
    },
    Explanation {
        code: "G0005",
        title: "cycle in the graph",
        text: r#"The edges (or the `parent` nesting) form a loop: a node would need its own
value before it runs. A graph is a DAG; repetition is written with a `LOOP`
node whose region holds the repeated nodes.

    1 -> 2 -> 1                      // error

Remove the edge that closes the circle."#,
    },
    Explanation {
        code: "G0006",
        title: "type mismatch on an edge",
        text: r#"The value an edge carries does not fit the operand it feeds: a number into
an operand that needs `bool` (an `IF` condition), a string into arithmetic,
an ordering token on a `Data` edge, a data value on an `Effect` edge, or a
token into an op that orders nothing.

    { "from": 1, "to": 2, "dependency": "Data" }   // 1 is CONST_STR, 2 is IF

Convert the value first (`TO_BOOL`, `TO_STR`) or feed the right node. The
producer's result types are its `results` or, when absent, the op table's."#,
    },
    Explanation {
        code: "G0007",
        title: "no entry flow",
        text: r#"No graph of the document has `"metadata": {"is_entry": true}`, or `is_entry`
is not a bool. `aisc run` needs to know which flow to start.

    "metadata": { "is_entry": true }

Mark the flow to run."#,
    },
    Explanation {
        code: "G0008",
        title: "bad parameter",
        text: r#"A flow parameter (or capability parameter) has a name that is not a fresh
identifier, or an empty `type_name`. Types are ours (`str`, `number`,
`bool`, `json`, `list<str>`, ...) or the reference's (`int`, `float`,
`string`, `boolean`, `any`); another name is read as `json`, as the
reference runs it untyped.

    "parameters": [ { "name": "2topic", "type_name": "str" } ]   // error

Fix the name or the type."#,
    },
    Explanation {
        code: "G0009",
        title: "bad attribute",
        text: r#"A node attribute is not one its op has, or has the wrong kind of value
(`temperature` must be a number, `no_fuse` the flag `true`, `callee` a
`@Agent.flow`), or a reference attribute cannot be used (`params_json` that
is not JSON, a `space` that is no memory tier).

    { "op": "ASK", "attributes": { "temprature": 0.2 } }   // error

`aisc ops NAME` lists an op's attributes."#,
    },
    Explanation {
        code: "G0010",
        title: "flat reference switch",
        text: r#"The node is the reference's flat `SWITCH` whose `cases` name no node of
the graph (neither an id nor a node name), so there is nothing to make its
arms of. A flat `SWITCH` whose cases name nodes is structured into regions,
as are `BRANCH_ON_VALUE` and `TRY_CATCH` labels (docs/graph-json.md, "Flat
control flow").

Name each case's first node (`{"label": "math", "node_id": 4}`), or write
the cases as regions: the `SWITCH` node lists its `regions` (each with its
case `key`), and the nodes inside name it as their `parent`."#,
    },
    Explanation {
        code: "G0011",
        title: "bad graph structure",
        text: r#"The document's structure is inconsistent: a `parent` names a region its
node does not have, two edges feed the same operand (or none feeds one in
the middle), an edge has both `from` and `param`, a value is used outside the
region it is defined in, an agent lists a flow no graph defines, a flow is
defined twice, or `graphs`/`agents` appear below the top.

Each message names the part; docs/graph-json.md describes the fields."#,
    },
    Explanation {
        code: "G0012",
        title: "program cannot be written as graph JSON",
        text: r#"`aisc build --emit=graph-json` cannot represent the program: it has no entry
flow (a graph document names the flow to run), or an attribute holds a
number JSON cannot (NaN, infinity).

Mark a flow `@entry`, or keep the value in a string."#,
    },
    Explanation {
        code: "G0013",
        title: "flat control flow that does not nest",
        text: r#"The labels of the reference's flat markers (`BRANCH_ON_VALUE`
`label_true`/`label_false`, a flat `SWITCH`'s `cases` and `default`,
`TRY_CATCH` `try_subgraph`/`catch_subgraph`) name the first node of each arm,
and a `LOOP_START` ... `LOOP_END` pair encloses a loop's body. The
structurizer turns them into regions; it refuses flow that has no nested
form:

- a label naming the marker itself, or a node that runs before the marker
  (a backward jump: write the loop as a `LOOP` node with a body region);
- a node named by two labels (an arm has one entry);
- an arm's first node that also depends on a node in another arm (the arms
  would overlap);
- a `LOOP_END` inside a branch of its loop's body, or a `LOOP_START` whose
  body another loop's `LOOP_END` closes;
- a `JUMP` whose `label` names a node it depends on (a loop without a
  bound: write it as `LOOP_START` with its count ... `LOOP_END`).

    { "id": 2, "op": "BRANCH_ON_VALUE", "attributes": { "label_true": "1", ... } }
    // error if node 1 runs before node 2

Name a node that runs only through the marker, or write the regions
yourself (`regions`, `parent`; docs/graph-json.md)."#,
    },
    Explanation {
        code: "G0014",
        title: "call to an agent the document does not define",
        text: r#"A warning. A `FLOW_CALL` in a lone graph (a document with no `graphs`
and no `agents`) names an agent the document does not define and that is
not a misspelling of one it does. The reference resolves the agent at run
time, among the agents registered with its runtime; `aisc` runs a document
with the agents it defines, so the document checks and runs, and the call
fails (`guard.failed`, naming the agent) if it is reached.

    { "id": 4, "op": "FLOW_CALL",
      "attributes": { "agent_name": "researcher", "flow_name": "analyze" } }

Add the agent's flows to the document's `graphs` (each with
`metadata.source_agent`), or write the program as AIS source and `import`
the agent. In a whole program (with `graphs` or `agents`), or when the name
is close to an agent the document defines, the call is an error instead
(`V0019`)."#,
    },
    Explanation {
        code: "G0015",
        title: "LLM node with no prompt asks the run's input",
        text: r#"A warning. A reference `ASK` (or `THINK`, `REASON`) node has neither
`template_str` (nor `prompt`) nor a `Data` input to stand for its prompt.
The reference's op definitions require `template_str`; its graph lowering
writes `{0}` (the first input) for a missing one, and its runtime then
sends `{0}` literally when there is no input. Here the node asks the
graph's first parameter: the run's input. An entry graph without
parameters gets one, `input: str` (`aisc run g.json --arg input=TEXT`), as
it does for a `GUARD` without an input.

    { "id": 1, "name": "n", "op": "ASK", "attributes": {} }
    // aisc run g.json --arg input="What is 2+2?"

Give the node a `template_str`, or a `Data` edge from the node whose
value is the prompt. A graph that is not an entry and has no parameters
has no input to ask: that is `G0009`."#,
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
        "# Diagnostics reference\n\nEvery diagnostic `aisc` reports has a stable code. `aisc explain CODE` prints the\nsame text as this page (which is generated from it by the test suite).\nErrors (`E…`) stop the build; warnings (`W…`) do not.\n\nCodes by phase: `E`/`W` the front end (`aisc check`, `build`, `run`); `O` the pass\npipeline (`--passes`); `P` textual IR (`ais-opt`); `V` the IR verifier; `C` code\ngeneration; `L` loading an `.apxmobj` artifact; `R` running a program; `K` the\nconfiguration file; `G` graph JSON (`aisc check|build|run FILE.json`). A test\n(`cli/tests/semantics_cli.rs`, `every_code_is_explained`) checks that every\ncode constructed in the source has an entry here.\n\n| code | meaning |\n|---|---|\n",
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
