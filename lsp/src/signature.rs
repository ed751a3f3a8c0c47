//! Signature help: the parameters of the operation, flow or capability
//! whose call holds the cursor, with the active one marked (by position, or
//! by name for a named argument).

use crate::analysis::Analysis;
use crate::calls::CallSite;
use ais_compiler::sema::builtins::{self, ArgRole, Builtin};
use ais_compiler::sema::index::ParamSig;
use lsp_types::{
    Documentation, MarkupContent, MarkupKind, ParameterInformation, ParameterLabel, SignatureHelp,
    SignatureInformation,
};

/// What a call's callee resolves to.
pub enum Callee<'a> {
    Op(&'static Builtin),
    /// (agent, flow or capability name, is a capability, parameters, result)
    Declared {
        agent: &'a str,
        name: &'a str,
        capability: bool,
        params: &'a [ParamSig],
        ret: String,
    },
}

/// Resolves `ask`, `summarize` (a flow or capability of the agent at
/// `offset`) or `Agent.flow`.
pub fn resolve<'a>(a: &'a Analysis, callee: &str, offset: usize) -> Option<Callee<'a>> {
    if let Some((agent, flow)) = callee.split_once('.') {
        let (agent, info) = a.index.agents.get_key_value(agent)?;
        let (name, sig) = info.flows.get_key_value(flow)?;
        return Some(Callee::Declared {
            agent,
            name,
            capability: false,
            params: &sig.params,
            ret: sig.ret.to_string(),
        });
    }
    if let Some(agent) = a.agent_at(offset) {
        if let Some((agent, info)) = a.index.agents.get_key_value(&agent.name.name) {
            if let Some((name, sig)) = info.flows.get_key_value(callee) {
                return Some(Callee::Declared {
                    agent,
                    name,
                    capability: false,
                    params: &sig.params,
                    ret: sig.ret.to_string(),
                });
            }
            if let Some((name, sig)) = info.capabilities.get_key_value(callee) {
                return Some(Callee::Declared {
                    agent,
                    name,
                    capability: true,
                    params: &sig.params,
                    ret: sig.ret.to_string(),
                });
            }
        }
    }
    builtins::lookup(callee).map(Callee::Op)
}

/// The names a call accepts as named arguments.
pub fn named_arguments(callee: &Callee<'_>) -> Vec<String> {
    match callee {
        Callee::Op(b) => ais_compiler::sema::named_arguments(b.name)
            .map(|n| n.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default(),
        Callee::Declared { params, .. } => params.iter().map(|p| p.name.clone()).collect(),
    }
}

fn role_name(r: ArgRole) -> &'static str {
    match r {
        ArgRole::Prompt => "prompt",
        ArgRole::ToolName => "tool",
        ArgRole::Tier => "tier",
        ArgRole::Limit => "limit",
        ArgRole::Value => "value",
    }
}

/// Builds `label(p1, p2, ...)` and the offsets of each parameter in it.
struct Label {
    text: String,
    params: Vec<ParameterInformation>,
}

impl Label {
    fn new(head: &str) -> Label {
        Label {
            text: format!("{head}("),
            params: Vec::new(),
        }
    }

    fn param(&mut self, p: &str, doc: Option<String>) {
        if !self.params.is_empty() {
            self.text.push_str(", ");
        }
        // Labels are ASCII apart from user names; offsets count UTF-16 units.
        let start = self.text.encode_utf16().count() as u32;
        self.text.push_str(p);
        let end = self.text.encode_utf16().count() as u32;
        self.params.push(ParameterInformation {
            label: ParameterLabel::LabelOffsets([start, end]),
            documentation: doc.map(Documentation::String),
        });
    }
}

pub fn signature_help(a: &Analysis, site: &CallSite, offset: usize) -> Option<SignatureHelp> {
    let callee = resolve(a, &site.callee, offset)?;
    let (label, active, doc) = match &callee {
        Callee::Op(b) => {
            let mut l = Label::new(b.name);
            let positional = b.min_args.max(b.roles.len());
            for i in 0..positional {
                let name = role_name(b.role(i));
                let p = if i < b.min_args {
                    name.to_string()
                } else {
                    format!("{name}?")
                };
                l.param(&p, None);
            }
            let variadic = b.max_args.is_none();
            if variadic {
                l.param("value...", Some("more context values".into()));
            }
            let named = named_arguments(&callee);
            for n in &named {
                l.param(&format!("{n}:"), Some("named argument".into()));
            }
            let fixed = positional + usize::from(variadic);
            let active = match &site.named {
                Some(n) => named.iter().position(|x| x == n).map(|i| fixed + i),
                None if site.arg < positional => Some(site.arg),
                None if variadic => Some(positional),
                None => None,
            };
            l.text.push_str(&format!(") -> {}", (b.result)()));
            (l, active, b.summary.to_string())
        }
        Callee::Declared {
            agent,
            name,
            capability,
            params,
            ret,
        } => {
            let head = if *capability {
                format!("capability {name}")
            } else {
                format!("flow {agent}.{name}")
            };
            let mut l = Label::new(&head);
            for p in params.iter() {
                l.param(&format!("{}: {}", p.name, p.ty), None);
            }
            l.text.push_str(&format!(") -> {ret}"));
            let active = match &site.named {
                Some(n) => params.iter().position(|p| &p.name == n),
                None => (site.arg < params.len()).then_some(site.arg),
            };
            let doc = if *capability {
                format!("capability of agent `{agent}`")
            } else {
                format!("flow of agent `{agent}`")
            };
            (l, active, doc)
        }
    };
    let active = active.map(|i| i as u32);
    Some(SignatureHelp {
        signatures: vec![SignatureInformation {
            label: label.text,
            documentation: Some(Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: doc,
            })),
            parameters: Some(label.params),
            active_parameter: active,
        }],
        active_signature: Some(0),
        active_parameter: active,
    })
}
