//! Information-flow policy: which sources are trusted and which sink
//! arguments refuse untrusted data (issue 19, `docs/security.md`).
//!
//! Shared by the static check (`ais_compiler::flows`) and the VM's run-time
//! enforcement (`ais_vm::ifc`) so both decide with the same rules; the
//! `[policy]` section of `.apxm/config.toml` deserializes into [`FlowPolicy`].
//!
//! Source names: a tool by its name (`http_get`, `search`, `mail.read`),
//! and `@args` (entry arguments), `@llm` (model output with no untrusted
//! input), `@message` (messages from other agents), `@plan` (inner plans),
//! `@memory.stm` / `@memory.ltm` / `@memory.episodic` (memory read with no
//! label recorded in this run), `@belief`, `@input` (a `pause` answer),
//! `@bash` (`exec` output).
//!
//! Sink names: a tool by its name, `communicate`, `bash` (`exec`),
//! `memory.ltm` / `memory.episodic` / `memory.stm` (writes), `belief`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the runtime does with a denied flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Fail the op with `policy.denied` (or ask on a TTY).
    #[default]
    Enforce,
    /// Let the flow happen; the static check still reports it.
    Warn,
    /// No labels checked at sinks.
    Off,
}

/// `[policy]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowPolicy {
    #[serde(default)]
    pub mode: Mode,
    /// Sources trusted in addition to (or overriding) the defaults;
    /// patterns: `name`, `prefix*`.
    #[serde(default)]
    pub trusted: Vec<String>,
    /// Sources untrusted in addition to the defaults.
    #[serde(default)]
    pub untrusted: Vec<String>,
    /// Per-sink rules (`[policy.sinks.send_email]`).
    #[serde(default)]
    pub sinks: BTreeMap<String, SinkRule>,
    /// `[policy.quarantine]`.
    #[serde(default)]
    pub quarantine: Quarantine,
    /// What the tool catalogue declares (trust, sinks, aliases): the base
    /// the keys above override. Not a key of `[policy]`: attached when the
    /// configuration is resolved (`ais_vm::catalogue::declarations`); the
    /// built-in tools' alone by default.
    #[serde(skip)]
    pub catalogue: std::sync::Arc<crate::catalogue::Declarations>,
    /// What a denied flow does: unset, a person on a terminal is asked
    /// and elsewhere the op fails with `policy.denied`; `deny`: it fails,
    /// nobody is asked; `ask`: a person present is asked. A sink or an
    /// argument may override it.
    pub on_deny: Option<OnDeny>,
    /// Sources whose data is private (patterns: `name`, `prefix*`; `@args`:
    /// the run's input). Private data reaches no tool that leaves the
    /// machine unless the tool's `private_to` trusts the destination.
    #[serde(default)]
    pub private: Vec<String>,
    /// `[policy.answer]`: what the entry flow's answer, shown to the
    /// user, may carry from untrusted sources.
    #[serde(default)]
    pub answer: AnswerRule,
}

/// `[policy.answer]`: the entry flow's answer is the one output no tool
/// call carries, but an injection that only wants the user told
/// something (a recommendation, a link, a false claim) needs nothing
/// else. Judged when the run ends (`ais_vm::ifc::answer`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerRule {
    #[serde(default)]
    pub untrusted: AnswerMode,
    /// Fields of records the request selected, as for an argument's
    /// `selected` (`TOOL:FIELD`, `?KEY=PATTERN`, `?KEY=@key`): with
    /// `untrusted = "values"` the answer may repeat their phrases.
    #[serde(default)]
    pub selected: Vec<String>,
}

/// What an answer that carries untrusted data becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerMode {
    /// Returned as it is (the answer is no sink).
    #[default]
    Allow,
    /// Returned with the values it relays from what was read (names,
    /// numbers, addresses: whole items of an untrusted text) but without
    /// the phrases it lifts from inside untrusted text, which are
    /// replaced by a notice naming their sources.
    Values,
    /// Replaced by a notice naming the untrusted sources.
    Withhold,
}

/// `on_deny`: what happens to a flow the rules deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDeny {
    /// The op fails with `policy.denied`; nobody is asked.
    Deny,
    /// A person present is asked whether the flow may happen.
    Ask,
}

/// `[policy.sinks.NAME.args.ARG]`: which untrusted values argument `ARG`
/// accepts, by the value's provenance (CaMeL-style capabilities): a
/// recipient, an amount, a URL or an IBAN the user gave, that a trusted
/// list holds, or that a quarantined extraction chose among declared
/// values. A value none of these vouch for is judged by its label as
/// before.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgRule {
    /// Where the value may come from: `@args` (the run's input: the user's
    /// request) or the name of a trusted tool (its results in this run: a
    /// contact list, the user's own accounts). The value passes when it
    /// equals one of those inputs or results, a field of them, or a word
    /// of their text (an address in a sentence). Untrusted sources named
    /// here vouch for nothing.
    #[serde(default)]
    pub from: Vec<String>,
    /// A trusted list in the config: the value passes when it is one of
    /// these (strings compare case-insensitively, numbers by value).
    #[serde(default)]
    pub values: Vec<serde_json::Value>,
    /// A value a quarantined call extracted (`[policy.quarantine]`: a
    /// number, a boolean, a member of the schema's `enum`) is acceptable
    /// here: every value of that shape is. Without it such a value is
    /// untrusted (source `@quarantine`): the attacker chose it.
    #[serde(default)]
    pub quarantined: bool,
    /// Untrusted text is acceptable here when it relays what was read
    /// only as values (a name, a number, an address: a whole item of an
    /// untrusted text) and lifts no phrase or address from inside one:
    /// the judgement `[policy.answer] untrusted = "values"` makes of an
    /// answer (`ais_vm::ifc::answer`). For a title or a message body
    /// that may name what the agent found but must not say what an
    /// injection wrote.
    #[serde(default)]
    pub relayed: bool,
    /// Trusted tools whose results are the user's own collection (an
    /// address book, a channel's members): a whole field of their result
    /// vouches for the value even when the call was keyed by untrusted
    /// data (`search_contacts(name)` with a name read from an e-mail).
    /// The rule's author states that the tool never echoes its key; only
    /// whole fields count, never a word of a sentence. The attacker can
    /// then pick any item of the collection.
    #[serde(default)]
    pub lookup: Vec<String>,
    /// Listings that are the complete set of legitimate options (the
    /// user's channels, the senders of messages the platform
    /// authenticates): `TOOL` (any field of its result) or `TOOL:FIELD`
    /// (only the fields named `FIELD`). A value equal to a whole such
    /// field passes as a *choice*, even when the tool is untrusted and
    /// its call keyed by anything: the attacker can steer the choice to
    /// another item of the listing, never outside it.
    #[serde(default)]
    pub choice: Vec<String>,
    /// Fields of records the user's request selected: `TOOL:FIELD`. When
    /// every argument of a call to `TOOL` was trusted data (the request's
    /// words: `read_inbox("Bob")`, `search_calendar_events("Introductory
    /// meeting")`), the fields named `FIELD` of its result vouch as a
    /// `from` source does (whole, an item, a word, words in a row), even
    /// though the tool is untrusted. The attacker can pick only among
    /// what those fields of the selected records hold: an injection
    /// elsewhere cannot, one inside such a field can (`docs/security.md`).
    #[serde(default)]
    pub selected: Vec<String>,
    /// Overrides the sink's and the policy's `on_deny` for this argument.
    pub on_deny: Option<OnDeny>,
}

/// `[policy.sinks.NAME]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkRule {
    /// `false`: not a sink at all (a read-only tool); default: a sink.
    pub sink: Option<bool>,
    /// Arguments that must be trusted; empty: every argument not in
    /// `allow_untrusted`.
    #[serde(default)]
    pub require_trusted: Vec<String>,
    /// Arguments that may carry untrusted data (`"*"`: all).
    #[serde(default)]
    pub allow_untrusted: Vec<String>,
    /// Which untrusted values an argument accepts, by provenance
    /// (`[policy.sinks.NAME.args.ARG]`).
    #[serde(default)]
    pub args: BTreeMap<String, ArgRule>,
    /// Overrides the policy's `on_deny` for this sink.
    pub on_deny: Option<OnDeny>,
    /// Destinations trusted with private data, per argument
    /// (`private_to = { to = ["*@corp.test"] }`): a call carrying private
    /// data is allowed when each argument named here holds a value
    /// matching one of its patterns (`*`: any characters), and `true`
    /// for a tool that keeps data on the machine (`local = true`).
    #[serde(default)]
    pub private_to: BTreeMap<String, Vec<String>>,
    /// The tool keeps data on the machine: private data may reach it.
    pub local: Option<bool>,
}

/// `[policy.quarantine]`: CaMeL's quarantined LLM.
///
/// A quarantined op reads untrusted data but yields a value that cannot
/// carry an instruction, so its result keeps only its control context's
/// label. Off by default: the attacker still chooses *which* value comes
/// out (a number, an enum member), which is only safe when every value of
/// that shape is acceptable where it goes (`docs/security.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quarantine {
    /// A `cast` to `number` or `bool` (`let n: number = ask(...)`).
    #[serde(default)]
    pub scalars: bool,
    /// An LLM op with no tools whose `schema:` admits only
    /// instruction-free data (see [`instruction_free`]).
    #[serde(default)]
    pub schemas: bool,
    /// The longest free string such a schema may admit (its `maxLength`);
    /// 0 (the default): strings only as `enum`/`const` members.
    #[serde(default)]
    pub max_string: u64,
}

impl Quarantine {
    /// Does op `instr` of `program` release its inputs' labels (its result
    /// carries only the control context)? The one rule the static check
    /// and the VM share.
    #[inline]
    pub fn releases(
        &self,
        program: &crate::bytecode::Program,
        instr: &crate::bytecode::Instr,
    ) -> bool {
        use crate::bytecode::Imm;
        // Asked for every op the VM completes: the common case (no
        // quarantine configured) costs one branch.
        if !self.scalars && !self.schemas {
            return false;
        }
        match &instr.imm {
            Imm::Cast(t) if self.scalars && instr.opcode == crate::Opcode::Cast => {
                matches!(program.type_of(*t), crate::Type::Number | crate::Type::Bool)
            }
            Imm::Llm(a) if self.schemas && a.tools.is_empty() => {
                self.schema_problem(a.schema.as_deref()).is_none()
            }
            _ => false,
        }
    }

    /// Why an LLM op's `schema:` (JSON text) is not quarantined, or `None`
    /// when it is; for the static check's hints.
    pub fn schema_problem(&self, schema: Option<&str>) -> Option<String> {
        let Some(text) = schema else {
            return Some("it has no `schema:`".into());
        };
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) => instruction_free(&v, self.max_string).err(),
            Err(e) => Some(format!("its schema is not JSON ({e})")),
        }
    }
}

/// Checks that every value valid against `schema` is instruction-free
/// data: numbers, integers, booleans, null, members of an `enum`/`const`
/// (written by the program's author), strings of at most `max_string`
/// characters, arrays with a `maxItems` of such items, and objects with
/// `additionalProperties: false` whose properties are such values.
/// Conservative: keywords it does not analyse (`$ref`, `anyOf`,
/// `patternProperties`, ...) make the schema not quarantined. `Err` says
/// where and why.
pub fn instruction_free(schema: &serde_json::Value, max_string: u64) -> Result<(), String> {
    free_at(schema, "$", max_string)
}

fn free_at(schema: &serde_json::Value, at: &str, max_string: u64) -> Result<(), String> {
    use serde_json::Value;
    let Some(s) = schema.as_object() else {
        return Err(format!(
            "{at}: a schema that is not an object admits anything"
        ));
    };
    const UNANALYSED: &[&str] = &[
        "$ref",
        "$dynamicRef",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "additionalItems",
        "prefixItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "dependentSchemas",
        "contains",
    ];
    if let Some(k) = UNANALYSED.iter().find(|k| s.contains_key(**k)) {
        return Err(format!("{at}: `{k}` is not analysed for quarantine"));
    }
    // The validator admits only the listed constants.
    if s.contains_key("const") {
        return Ok(());
    }
    if let Some(e) = s.get("enum") {
        return match e {
            Value::Array(_) => Ok(()),
            _ => Err(format!("{at}: `enum` is not a list")),
        };
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return Err(format!("{at}: no `type` (any value is admitted)")),
    };
    if types.is_empty() {
        return Err(format!("{at}: no `type` (any value is admitted)"));
    }
    for t in types {
        match t {
            "number" | "integer" | "boolean" | "null" => {}
            "string" => match s.get("maxLength").and_then(Value::as_u64) {
                Some(n) if n <= max_string => {}
                Some(n) => {
                    return Err(format!(
                        "{at}: a string of up to {n} characters (quarantine allows {max_string}: `max_string`)"
                    ))
                }
                None => return Err(format!("{at}: a string with no `maxLength`")),
            },
            "array" => {
                if s.get("maxItems").and_then(Value::as_u64).is_none() {
                    return Err(format!("{at}: an array with no `maxItems`"));
                }
                match s.get("items") {
                    Some(items) => free_at(items, &format!("{at}[*]"), max_string)?,
                    None => return Err(format!("{at}: an array with no `items`")),
                }
            }
            "object" => {
                if s.get("additionalProperties") != Some(&Value::Bool(false)) {
                    return Err(format!(
                        "{at}: an object without `additionalProperties: false`"
                    ));
                }
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    for (k, v) in props {
                        free_at(v, &format!("{at}.{k}"), max_string)?;
                    }
                }
            }
            other => return Err(format!("{at}: type `{other}` is not analysed")),
        }
    }
    Ok(())
}

/// The source of a value a quarantined call extracted from untrusted data:
/// untrusted (the attacker chose among the shapes the schema admits) unless
/// a sink argument accepts it (`ArgRule::quarantined`) or `[policy]
/// trusted` names it (every such choice is acceptable everywhere).
pub const QUARANTINE: &str = "@quarantine";

/// Sources (other than tools) untrusted unless the policy says otherwise.
/// Tools are trusted or not as the catalogue declares them
/// (`crate::catalogue`).
pub const DEFAULT_UNTRUSTED: &[&str] = &["@message", QUARANTINE];

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

impl FlowPolicy {
    pub fn enforced(&self) -> bool {
        self.mode == Mode::Enforce
    }

    /// Is data from `source` trusted? Explicit `trusted` wins over
    /// `untrusted`, which wins over the catalogue's declaration (an alias
    /// is its tool; a tool no one declared follows
    /// `Declarations::unknown_trusted`).
    pub fn trusted(&self, source: &str) -> bool {
        let canonical = self.catalogue.canonical(source);
        let listed = |ps: &[String]| {
            ps.iter()
                .any(|p| matches(p, source) || matches(p, canonical))
        };
        if listed(&self.trusted) {
            return true;
        }
        if listed(&self.untrusted) {
            return false;
        }
        if source.starts_with('@') {
            return !DEFAULT_UNTRUSTED.contains(&source);
        }
        self.catalogue.trusted(source)
    }

    /// `[policy.sinks.NAME]` for `sink` or the tool it is an alias of.
    fn rule(&self, sink: &str) -> Option<&SinkRule> {
        self.sinks
            .get(sink)
            .or_else(|| self.sinks.get(self.catalogue.canonical(sink)))
    }

    /// Is `sink` a sink? Tools: as the catalogue declares them (whatever
    /// is not read-only, and whatever sends an argument off the machine:
    /// `http_get`'s URL, `search`'s query), remote agents included (a
    /// message to one is a call of the tool named after it), and any tool
    /// it does not know; `bash` and `memory.ltm` writes (shared) unless
    /// `sink = false`; `communicate` (a message between agents of the
    /// program, whose handlers are checked in turn: labels travel with the
    /// message), `memory.stm`, `memory.episodic` and `belief` only if listed.
    pub fn is_sink(&self, sink: &str) -> bool {
        if let Some(r) = self.rule(sink) {
            return r.sink.unwrap_or(true);
        }
        match sink {
            "bash" | "memory.ltm" => true,
            // Inside the program: the agent's own log and working memory,
            // and messages to its other agents.
            "communicate" | "memory.stm" | "memory.episodic" | "belief" => false,
            t => self.catalogue.get(t).is_none_or(|d| d.is_sink()),
        }
    }

    /// Must argument `arg` of `sink` be trusted? (`arg` is a tool
    /// argument's field name, or an op operand's name: `to`, `body`,
    /// `value`, `command`; `args` when the argument object is not known
    /// field by field.) Of a read-only tool, only the arguments it sends
    /// away (and `args`, which may hold them).
    pub fn arg_checked(&self, sink: &str, arg: &str) -> bool {
        if !self.is_sink(sink) {
            return false;
        }
        let declared = || match self.catalogue.get(sink).and_then(|d| d.checked_args()) {
            Some(leaves) => arg == "args" || leaves.iter().any(|a| a == arg),
            None => true,
        };
        let Some(rule) = self.rule(sink) else {
            return declared();
        };
        if rule.allow_untrusted.iter().any(|a| a == arg || a == "*") {
            return false;
        }
        if rule.require_trusted.is_empty() {
            declared()
        } else {
            rule.require_trusted.iter().any(|a| a == arg)
        }
    }

    /// Is data from `source` private?
    pub fn private(&self, source: &str) -> bool {
        self.private.iter().any(|p| matches(p, source))
    }

    /// Does `tool` keep data on the machine (private data may reach it)?
    /// As the catalogue declares it, unless `[policy.sinks.T] local` says.
    pub fn local(&self, tool: &str) -> bool {
        match self.sinks.get(tool).and_then(|r| r.local) {
            Some(l) => l,
            None => self.catalogue.get(tool).is_some_and(|d| d.local),
        }
    }

    /// The provenance rule of argument `arg` of `sink`, if any.
    pub fn arg_rule(&self, sink: &str, arg: &str) -> Option<&ArgRule> {
        self.sinks.get(sink)?.args.get(arg)
    }

    /// Does argument `arg` of `sink` accept quarantined values?
    pub fn accepts_quarantined(&self, sink: &str, arg: &str) -> bool {
        self.arg_rule(sink, arg).is_some_and(|r| r.quarantined)
    }

    /// Is `arg` of `sink` vouched for by the value it holds (a `from` or
    /// `values` rule)? Then only the run time can judge it: the static
    /// check does not report it.
    pub fn judged_by_value(&self, sink: &str, arg: &str) -> bool {
        self.arg_rule(sink, arg).is_some_and(|r| {
            r.relayed
                || !r.values.is_empty()
                || !r.choice.is_empty()
                || !r.selected.is_empty()
                || r.from.iter().chain(&r.lookup).any(|s| self.trusted(s))
        })
    }

    /// Does some rule judge text by what it repeats from what the run
    /// read (`[policy.answer] untrusted = "values"`, `relayed = true`)?
    /// Then the run keeps the text it reads.
    pub fn judges_relayed_text(&self) -> bool {
        self.answer.untrusted == AnswerMode::Values
            || self
                .sinks
                .values()
                .any(|r| r.args.values().any(|a| a.relayed))
    }

    /// The sources whose values some argument rule names in `from` (and
    /// that are trusted): the runtime keeps their values to compare.
    pub fn value_sources(&self) -> Vec<String> {
        let mut out = self.named_by_arg_rules(|a| &a.from);
        out.retain(|s| self.trusted(s));
        out
    }

    /// The trusted tools some argument rule names in `lookup`: the
    /// runtime keeps the whole fields of their results, however keyed.
    pub fn lookup_sources(&self) -> Vec<String> {
        let mut out = self.named_by_arg_rules(|a| &a.lookup);
        out.retain(|s| self.trusted(s));
        out
    }

    /// The listings some argument rule names in `choice` (`TOOL` or
    /// `TOOL:FIELD`): the runtime keeps the whole fields of their results.
    pub fn choice_sources(&self) -> Vec<String> {
        self.named_by_arg_rules(|a| &a.choice)
    }

    /// The `TOOL:FIELD` entries some argument rule names in `selected`:
    /// the runtime keeps those fields of the calls the request keyed.
    pub fn selected_sources(&self) -> Vec<String> {
        self.named_by_arg_rules(|a| &a.selected)
    }

    /// Every name one list of the argument rules holds, sorted, once each.
    fn named_by_arg_rules(&self, list: impl Fn(&ArgRule) -> &Vec<String>) -> Vec<String> {
        let mut out: Vec<String> = self
            .sinks
            .values()
            .flat_map(|r| r.args.values())
            .flat_map(|a| list(a).iter())
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// What a denied flow of `arg` of `sink` does (`None`: ask on a
    /// terminal only).
    pub fn on_deny(&self, sink: &str, arg: &str) -> Option<OnDeny> {
        self.arg_rule(sink, arg)
            .and_then(|r| r.on_deny)
            .or_else(|| self.sinks.get(sink).and_then(|r| r.on_deny))
            .or(self.on_deny)
    }
}

/// Does `value` match `pattern` (`*`: any characters; case-insensitive)?
pub fn glob(pattern: &str, value: &str) -> bool {
    let (p, v) = (pattern.to_lowercase(), value.to_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == v;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !v.starts_with(first) || v.len() < first.len() + last.len() || !v.ends_with(last) {
        return false;
    }
    let mut rest = &v[first.len()..v.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// The sink an op is, with the names of its data operands; `None`: not a
/// sink op. `tool` is the tool name of an `inv` op.
pub fn sink_of(op: crate::Opcode, tool: Option<&str>, tier: Option<&str>) -> Option<SinkOp> {
    use crate::Opcode as O;
    Some(match op {
        O::Inv => SinkOp {
            name: tool?.to_string(),
            operands: &["args"],
            fields: true,
        },
        O::Exec => SinkOp {
            name: "bash".into(),
            operands: &["command"],
            fields: false,
        },
        O::Communicate => SinkOp {
            name: "communicate".into(),
            operands: &["to", "body", "protocol"],
            fields: false,
        },
        O::Umem => SinkOp {
            name: format!("memory.{}", tier?),
            operands: &["value", "key"],
            fields: false,
        },
        O::BeliefSet => SinkOp {
            name: "belief".into(),
            operands: &["value"],
            fields: false,
        },
        _ => return None,
    })
}

/// A sink op: its policy name and how its operands are named.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkOp {
    pub name: String,
    /// Names of its data operands, by position (extra operands: the last
    /// name).
    pub operands: &'static [&'static str],
    /// Operand 0 is an object whose fields are the arguments (`inv`).
    pub fields: bool,
}

impl SinkOp {
    pub fn operand_name(&self, i: usize) -> &'static str {
        self.operands
            .get(i)
            .or(self.operands.last())
            .copied()
            .unwrap_or("args")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut p = FlowPolicy::default();
        assert!(p.trusted("@args") && p.trusted("read_file"));
        assert!(!p.trusted("http_get") && !p.trusted("@message") && !p.trusted("search_web"));
        assert!(p.is_sink("send_email") && !p.is_sink("read_file") && !p.is_sink("communicate"));
        // Network reads: the URL and the query leave the machine.
        assert!(p.arg_checked("http_get", "url") && !p.arg_checked("http_get", "timeout_s"));
        assert!(p.arg_checked("search", "query") && p.arg_checked("http_get", "args"));
        // An alias is its tool: rules and trust follow it.
        assert!(p.is_sink("write"));
        assert!(p.arg_checked("send_email", "body"));
        p.sinks.insert(
            "send_email".into(),
            SinkRule {
                allow_untrusted: vec!["body".into()],
                ..SinkRule::default()
            },
        );
        assert!(!p.arg_checked("send_email", "body") && p.arg_checked("send_email", "to"));
        p.trusted.push("http_*".into());
        assert!(p.trusted("http_get"));
        p.untrusted.push("read_file".into());
        assert!(!p.trusted("read_file"));
    }

    #[test]
    fn globs_and_private_sources() {
        assert!(glob("*@corp.test", "Bob@corp.test"));
        assert!(!glob("*@corp.test", "bob@corp.test.evil.test"));
        assert!(glob(
            "https://api.corp.test/*",
            "https://api.corp.test/v1?q=1"
        ));
        assert!(!glob(
            "https://api.corp.test/*",
            "https://evil.test/?https://api.corp.test/"
        ));
        assert!(glob("a*b*c", "axxbyyc") && !glob("a*b*c", "axxcyyb"));
        let p = FlowPolicy {
            private: vec!["get_*".into(), "@args".into()],
            ..FlowPolicy::default()
        };
        assert!(p.private("get_balance") && p.private("@args") && !p.private("http_get"));
        assert!(p.local("read_file") && !p.local("http_get") && !p.local("send_email"));
        // From the catalogue: an alias is its tool; a shell may reach the network.
        assert!(p.local("write") && p.local("store_fact") && p.local("inbox"));
        assert!(!p.local("bash") && !p.local("search") && !p.local("dojo_send_email"));
    }

    #[test]
    fn instruction_free_schemas() {
        let free = |s: serde_json::Value, n| instruction_free(&s, n);
        let open_at = |s: serde_json::Value, n| instruction_free(&s, n).err().unwrap_or_default();
        let verdict = serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "amount": {"type": "number"},
                "ok": {"type": "boolean"},
                "kind": {"type": "string", "enum": ["refund", "fee"]},
                "tags": {"type": "array", "maxItems": 3, "items": {"enum": ["a", "b"]}},
                "code": {"type": "string", "maxLength": 8}
            }
        });
        assert_eq!(free(verdict.clone(), 8), Ok(()));
        let e = open_at(verdict, 4);
        assert!(e.contains("$.code") && e.contains("max_string"), "{e}");
        let open = serde_json::json!({"type": "object", "properties": {"n": {"type": "number"}}});
        assert!(open_at(open, 0).contains("additionalProperties"));
        let text = serde_json::json!({"type": "string"});
        assert!(open_at(text, 100).contains("maxLength"));
        let unbounded = serde_json::json!({"type": "array", "items": {"type": "number"}});
        assert!(open_at(unbounded, 0).contains("maxItems"));
        let any = serde_json::json!({"anyOf": [{"type": "number"}]});
        assert!(open_at(any, 0).contains("anyOf"));
        assert!(open_at(serde_json::json!({}), 0).contains("no `type`"));
        assert_eq!(free(serde_json::json!({"const": "yes"}), 0), Ok(()));
    }
}
