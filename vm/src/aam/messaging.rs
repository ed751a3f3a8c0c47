//! Which `on` handlers a message runs, and with which arguments.
//!
//! `communicate(to, msg, protocol)` delivers a message to agent `to`. The
//! event it raises there:
//!
//! 1. `protocol` itself, when `to` has a handler for an event of that name
//!    (`communicate("Triage", "{...}", "ticket.created")`);
//! 2. else the body's `event` field, when the body is an object (or JSON
//!    text of one) with a string `event` that `to` handles;
//! 3. else `message.received`.
//!
//! Handler fields are bound by name: for (1) and (2) from the body object's
//! members, plus `sender` and `protocol`; for (3) `sender`, `content` (the
//! body) and `protocol`. A field the message does not carry is `null`.
//! Every handler of the event runs (each checks its own guard).

use crate::host::{HostError, Message};
use crate::store::agent::Received;
use ais_ir::bytecode::Program;
use serde_json::{json, Map, Value as Json};
use std::time::Instant;

/// One handler to start.
#[derive(Clone, Debug, PartialEq)]
pub struct Dispatch {
    /// Index into `Program::flows`.
    pub flow: u32,
    pub agent: String,
    pub event: String,
    /// Arguments in parameter order.
    pub args: Vec<Json>,
}

fn body_object(body: &Json) -> Option<Map<String, Json>> {
    match body {
        Json::Object(m) => Some(m.clone()),
        Json::String(s) => match serde_json::from_str::<Json>(s) {
            Ok(Json::Object(m)) => Some(m),
            _ => None,
        },
        _ => None,
    }
}

/// The handlers `message` runs in `program` (empty when the recipient is
/// not an agent of the program, or handles nothing that matches).
pub fn dispatch(program: &Program, message: &Message) -> Vec<Dispatch> {
    let Some(agent) = program.agents.iter().find(|a| a.name == message.to) else {
        return Vec::new();
    };
    let handles = |e: &str| agent.handlers.iter().any(|h| h.event == e);
    let obj = body_object(&message.body);
    let (event, mut fields) = if handles(&message.protocol) {
        (
            message.protocol.clone(),
            obj.unwrap_or_else(|| {
                let mut m = Map::new();
                m.insert("content".into(), message.body.clone());
                m
            }),
        )
    } else if let Some(e) = obj
        .as_ref()
        .and_then(|o| o.get("event"))
        .and_then(Json::as_str)
        .filter(|e| handles(e))
    {
        (e.to_string(), obj.clone().unwrap_or_default())
    } else {
        let mut m = Map::new();
        m.insert("content".into(), message.body.clone());
        ("message.received".to_string(), m)
    };
    fields
        .entry("sender")
        .or_insert_with(|| Json::String(message.from.clone()));
    fields
        .entry("protocol")
        .or_insert_with(|| Json::String(message.protocol.clone()));
    agent
        .handlers
        .iter()
        .filter(|h| h.event == event)
        .filter_map(|h| {
            let flow = program.flows.get(h.flow as usize)?;
            Some(Dispatch {
                flow: h.flow,
                agent: agent.name.clone(),
                event: event.clone(),
                args: flow
                    .params
                    .iter()
                    .map(|(name, _)| fields.get(name).cloned().unwrap_or(Json::Null))
                    .collect(),
            })
        })
        .collect()
}

impl super::AamHost {
    /// Messages `agent` has received.
    pub fn received(&self, agent: &str) -> Vec<Received> {
        self.ltm.inbox(agent, false).unwrap_or_else(|e| {
            self.warn(&format!("inbox of agent `{agent}`: {e}"));
            Vec::new()
        })
    }

    /// `communicate`: the message goes to the recipient's mailbox in the
    /// agent store; both sides' transitions are logged.
    pub(super) fn deliver(&self, message: Message) -> Result<(), HostError> {
        let t0 = Instant::now();
        let m = Received {
            from: message.from.clone(),
            protocol: message.protocol.clone(),
            body: message.body.clone(),
            time_ms: ais_stdlib::time::unix_ms(),
            labels: crate::host::flow::writing(),
        };
        if let Err(e) = self.ltm.send(&message.to, &m) {
            let inputs = json!({"to": message.to, "protocol": message.protocol});
            self.log(&message.from, "send", inputs, Err(&e), t0);
            return Err(e);
        }
        let inputs = json!({"to": message.to, "protocol": message.protocol, "body": message.body});
        self.log(&message.from, "send", inputs, Ok(&Json::Null), t0);
        let inputs =
            json!({"from": message.from, "protocol": message.protocol, "body": message.body});
        self.log(&message.to, "receive", inputs, Ok(&Json::Null), t0);
        Ok(())
    }

    /// The `inbox` tool: the agent's messages, oldest first; `{"clear":
    /// true}` takes them.
    pub(super) fn inbox_tool(&self, agent: &str, args: &Json) -> Result<Json, HostError> {
        let clear = args.get("clear").and_then(Json::as_bool).unwrap_or(false);
        let list = self.ltm.inbox(agent, clear)?;
        for m in &list {
            crate::host::flow::read(&m.labels);
        }
        Ok(Json::Array(
            list.iter()
                .map(|m| {
                    json!({"from": m.from, "protocol": m.protocol, "body": m.body,
                           "time": ais_stdlib::time::rfc3339(m.time_ms)})
                })
                .collect(),
        ))
    }
}
