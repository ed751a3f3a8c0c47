//! `communicate` as request and reply, the reference's meaning: a message
//! to an agent of the program that has a *reply flow* runs that flow and the
//! call's value is its answer. The reply flow is the recipient's flow named
//! `communicate`, else its flow named `main`, when the flow's parameters can
//! all be given from the message: none, one (the message), or parameters
//! named after what a message carries (`message`/`content`/`msg`,
//! `sender`, `protocol`). A recipient without one, and an agent
//! messaging itself (which raises its own `on` handlers), gets the message
//! as before (inbox, `on` handlers) and the value is `null`. Shared by the
//! checker (result type) and lowering (the call it becomes).

use super::index::{FlowSig, ProgramIndex};

/// What a reply flow's parameter receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyArg {
    Message,
    /// The sending agent's name.
    Sender,
    Protocol,
}

/// The reply flow of agent `recipient` for a message from `sender`, and what each of its parameters
/// receives; `None`: the message is fire-and-forget.
pub fn reply_flow<'i>(
    index: &'i ProgramIndex,
    sender: &str,
    recipient: &str,
) -> Option<(&'i FlowSig, Vec<ReplyArg>)> {
    if sender == recipient {
        return None;
    }
    let agent = index.agents.get(recipient)?;
    ["communicate", "main"].iter().find_map(|name| {
        let sig = agent.flows.get(*name)?;
        let args = reply_args(sig)?;
        Some((sig, args))
    })
}

fn reply_args(sig: &FlowSig) -> Option<Vec<ReplyArg>> {
    if sig.params.len() == 1 {
        return Some(vec![match sig.params[0].name.as_str() {
            "sender" => ReplyArg::Sender,
            "protocol" => ReplyArg::Protocol,
            _ => ReplyArg::Message,
        }]);
    }
    sig.params
        .iter()
        .map(|p| match p.name.as_str() {
            "message" | "content" | "msg" => Some(ReplyArg::Message),
            "sender" => Some(ReplyArg::Sender),
            "protocol" => Some(ReplyArg::Protocol),
            _ => None,
        })
        .collect()
}

/// The recipient of a `communicate` call's (unarranged) arguments, when it
/// is a string literal: the first positional argument or `recipient:`.
pub fn literal_recipient(args: &[crate::syntax::ast::Expr]) -> Option<String> {
    use crate::syntax::ast::ExprKind;
    let expr = args
        .iter()
        .find(|a| !matches!(a.kind, ExprKind::Named(..)))
        .or_else(|| {
            args.iter().find_map(|a| match &a.kind {
                ExprKind::Named(n, v) if n.name == "recipient" => Some(&**v),
                _ => None,
            })
        })?;
    match &expr.kind {
        ExprKind::Str(s) if !s.has_holes() => Some(s.text()),
        _ => None,
    }
}
