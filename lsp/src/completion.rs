//! Completion: inside a call's parentheses, the named arguments it accepts
//! (first); after `Agent.`, that agent's flows; elsewhere the variables in
//! scope, the agent's flows and capabilities, agents, operations and
//! keywords.

use crate::analysis::{flow_signature, op_doc, op_names, Analysis};
use crate::calls::call_at;
use crate::signature::{named_arguments, resolve};
use lsp_types::{CompletionItem, CompletionItemKind, Documentation, MarkupContent, MarkupKind};

const KEYWORDS: &[&str] = &[
    "let",
    "return",
    "if",
    "else",
    "loop",
    "parallel",
    "try",
    "catch",
    "switch",
    "case",
    "default",
    "flow",
    "agent",
    "capability",
    "memory",
    "beliefs",
    "goals",
    "on",
];

pub fn item(label: &str, kind: CompletionItemKind, detail: String) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: Some(detail),
        ..CompletionItem::default()
    }
}

pub fn items(a: &Analysis, text: &str, offset: usize) -> Vec<CompletionItem> {
    let bytes = text.as_bytes();
    let offset = offset.min(bytes.len());
    let is_name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut start = offset;
    while start > 0 && is_name(bytes[start - 1]) {
        start -= 1;
    }
    let mut items = Vec::new();
    // `Agent.` completes that agent's flows.
    if start > 0 && bytes[start - 1] == b'.' {
        let mut s = start - 1;
        while s > 0 && is_name(bytes[s - 1]) {
            s -= 1;
        }
        let target = text.get(s..start - 1).unwrap_or("");
        if let Some(info) = a.index.agents.get(target) {
            for (name, sig) in &info.flows {
                items.push(item(
                    name,
                    CompletionItemKind::FUNCTION,
                    flow_signature(target, sig),
                ));
            }
        }
        return items;
    }
    items.extend(named_argument_items(a, text, offset));
    for b in a.visible(offset) {
        items.push(item(
            &b.name,
            CompletionItemKind::VARIABLE,
            b.ty.to_string(),
        ));
    }
    if let Some(agent) = a.agent_at(offset) {
        if let Some(info) = a.index.agents.get(&agent.name.name) {
            for (name, sig) in &info.flows {
                items.push(item(
                    name,
                    CompletionItemKind::FUNCTION,
                    flow_signature(&info.name, sig),
                ));
            }
            for (name, sig) in &info.capabilities {
                items.push(item(
                    name,
                    CompletionItemKind::METHOD,
                    format!("capability -> {}", sig.ret),
                ));
            }
        }
    }
    for name in a.index.agents.keys() {
        items.push(item(name, CompletionItemKind::CLASS, "agent".into()));
    }
    for (name, b) in op_names() {
        let mut it = item(name, CompletionItemKind::FUNCTION, b.summary.into());
        it.documentation = Some(Documentation::MarkupContent(MarkupContent {
            kind: MarkupKind::Markdown,
            value: op_doc(b),
        }));
        items.push(it);
    }
    for kw in KEYWORDS {
        items.push(item(kw, CompletionItemKind::KEYWORD, "keyword".into()));
    }
    items
}

/// `ask(pro|`: the named arguments the call accepts and does not have yet,
/// inserted as `name: `, sorted before everything else. Only where an
/// argument's name can be written: at the start of an argument.
fn named_argument_items(a: &Analysis, text: &str, offset: usize) -> Vec<CompletionItem> {
    let Some(site) = call_at(text, offset) else {
        return Vec::new();
    };
    let at_name = site.named.is_none()
        && site
            .typed
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_');
    if !at_name {
        return Vec::new();
    }
    let Some(callee) = resolve(a, &site.callee, offset) else {
        return Vec::new();
    };
    named_arguments(&callee)
        .into_iter()
        .filter(|n| !site.names_written.contains(n))
        .map(|n| CompletionItem {
            insert_text: Some(format!("{n}: ")),
            sort_text: Some(format!("0_{n}")),
            filter_text: Some(n.clone()),
            ..item(
                &format!("{n}:"),
                CompletionItemKind::FIELD,
                format!("named argument of `{}`", site.callee),
            )
        })
        .collect()
}
