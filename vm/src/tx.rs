//! `try` bodies are all-or-nothing for the program's own state.
//!
//! A [`Tx`] is the host a `try` body (and everything it calls) sees: it
//! buffers the body's `print` output, `communicate` messages, memory writes
//! (every tier) and belief updates in order, and serves the body's reads
//! from its parent with the buffered writes on top (read-your-writes). When
//! the body completes, [`Tx::commit`] hands the buffer to the parent — the
//! enclosing `try`'s `Tx` when nested, else the real host, in the order the
//! effects happened. When the body fails the buffer is dropped, so the
//! `catch` block runs from the state before the `try`.
//!
//! The journal entries of the body's buffered ops are deferred the same
//! way ([`Deferred`]): an op is journaled as done only once its effect is
//! applied, so a resumed run re-executes the effects of a body that never
//! committed instead of replaying ops whose effects never happened.
//!
//! Not buffered: LLM and tool calls (`invoke_tool`, `exec`) go straight to
//! the parent; they are not undone (their cost counts; a tool's external
//! side effect may or may not have happened, at most once, if the body
//! failed before the tool's result was used).
//!
//! Overlay rules for `qmem` inside a body: a query equal to the key of a
//! buffered keyed write returns that value; otherwise the parent's list
//! result gets the buffered values that match the query appended, oldest
//! first; matching is the AAM's ([`MemQuery`]).

use crate::aam::content_key;
use crate::host::{Host, HostError, Message};
use crate::llm::CancelToken;
use crate::store::query::{text_of, MemQuery};
use crate::value::Val;
use ais_ir::Tier;
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};

/// One buffered effect.
#[derive(Clone, Debug)]
enum Effect {
    Print {
        agent: String,
        line: String,
        /// The `print` op's journal key and input hash: the line is
        /// journaled as it is shown (`commit_with`).
        journal: Option<(String, String)>,
    },
    Mem {
        agent: String,
        tier: Tier,
        value: Json,
        key: Option<Json>,
        /// The value's labels when the write was labelled
        /// (`crate::host::flow`): kept with it when the body commits.
        labels: Option<Vec<String>>,
    },
    Belief {
        agent: String,
        name: String,
        value: Json,
    },
    /// `deliver: false`: the message reached the host in an earlier attempt
    /// (journal replay); committing only starts its `on` handlers.
    Send {
        message: Message,
        deliver: bool,
        /// The body's information-flow labels, kept with the message
        /// when it is delivered (`crate::host::flow`).
        labels: Vec<String>,
    },
    Journal(Deferred),
}

/// A journal entry written when the body's effects are applied.
#[derive(Clone, Debug)]
pub struct Deferred {
    pub key: String,
    pub op: &'static str,
    pub hash: String,
    pub results: Vec<Val>,
    /// The results' label as source names (`crate::ifc`).
    pub labels: Option<Vec<String>>,
}

/// Shows a printed line at commit: `(agent, line, the `print` op's
/// journal key and input hash)`.
pub type ShowLine<'a> =
    dyn FnMut(&str, &str, Option<&(String, String)>) -> Result<(), HostError> + 'a;

/// What a commit to the real host leaves for the scheduler to do.
#[derive(Debug, Default)]
pub struct Committed {
    /// Messages delivered: their `on` handlers start now.
    pub messages: Vec<Message>,
    /// Journal entries of the applied ops, in order.
    pub journal: Vec<Deferred>,
}

/// Where a [`Tx`] commits to.
pub enum Parent<'h> {
    Host(&'h dyn Host),
    Tx(Arc<Tx<'h>>),
}

/// The buffering host of one `try` body instance.
pub struct Tx<'h> {
    parent: Parent<'h>,
    log: Mutex<Vec<Effect>>,
}

impl<'h> Tx<'h> {
    pub fn new(parent: Parent<'h>) -> Tx<'h> {
        Tx {
            parent,
            log: Mutex::new(Vec::new()),
        }
    }

    fn parent(&self) -> &dyn Host {
        match &self.parent {
            Parent::Host(h) => *h,
            Parent::Tx(t) => t.as_ref(),
        }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Vec<Effect>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a message that an earlier attempt already delivered (journal
    /// replay): committing it only starts the recipient's handlers.
    pub fn replayed_message(&self, message: Message) {
        self.log().push(Effect::Send {
            message,
            deliver: false,
            labels: Vec::new(),
        });
    }

    /// Buffers a printed line that is journaled when it is shown (under
    /// the `print` op's key and input hash).
    pub fn print_journaled(&self, agent: &str, line: &str, journal: Option<(String, String)>) {
        self.log().push(Effect::Print {
            agent: agent.to_string(),
            line: line.to_string(),
            journal,
        });
    }

    /// Journals an op of the body when the body's effects are applied.
    pub fn defer_journal(&self, d: Deferred) {
        self.log().push(Effect::Journal(d));
    }

    /// Applies the body's effects to the parent, in order. Returns what
    /// reached the real host (messages whose `on` handlers start now, ops
    /// to journal); nothing when the parent is another body (it does that
    /// when it commits).
    pub fn commit(&self) -> Result<Committed, HostError> {
        let host = self.parent();
        self.commit_with(&mut |agent, line, _| {
            host.print(agent, line);
            Ok(())
        })
    }

    /// [`Tx::commit`], showing printed lines with `show(agent, line,
    /// journal key and hash)` (the scheduler journals them first).
    pub fn commit_with(&self, show: &mut ShowLine<'_>) -> Result<Committed, HostError> {
        let effects = std::mem::take(&mut *self.log());
        if let Parent::Tx(p) = &self.parent {
            p.log().extend(effects);
            return Ok(Committed::default());
        }
        let host = self.parent();
        let mut done = Committed::default();
        for e in effects {
            match e {
                Effect::Print {
                    agent,
                    line,
                    journal,
                } => show(&agent, &line, journal.as_ref())?,
                Effect::Mem {
                    agent,
                    tier,
                    value,
                    key,
                    labels,
                } => match labels {
                    Some(l) => {
                        crate::host::flow::with(l, || {
                            host.mem_update(&agent, tier, &value, key.as_ref())
                        })
                        .0?
                    }
                    None => host.mem_update(&agent, tier, &value, key.as_ref())?,
                },
                Effect::Belief { agent, name, value } => host.belief_set(&agent, &name, &value)?,
                Effect::Send {
                    message,
                    deliver,
                    labels,
                } => {
                    if deliver {
                        crate::host::flow::with(labels, || host.communicate(message.clone())).0?;
                    }
                    done.messages.push(message);
                }
                Effect::Journal(d) => done.journal.push(d),
            }
        }
        Ok(done)
    }

    /// Drops the body's effects (it failed).
    pub fn discard(&self) {
        self.log().clear();
    }
}

impl Host for Tx<'_> {
    fn pause(&self, agent: &str, message: &str) -> Option<Json> {
        self.parent().pause(agent, message)
    }

    // Labels are kept at once, not with the transaction: a source kept for
    // a write that is then rolled back only makes later reads stricter.
    fn stored_labels(&self, tier: &str) -> Result<Vec<String>, HostError> {
        self.parent().stored_labels(tier)
    }

    fn store_labels(&self, tier: &str, names: &[String]) -> Result<(), HostError> {
        self.parent().store_labels(tier, names)
    }

    fn invoke_tool(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
    ) -> Result<Json, HostError> {
        self.parent().invoke_tool(agent, tool, args, cancel)
    }

    fn invoke_tool_keyed(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
        idempotency_key: Option<&str>,
    ) -> Result<Json, HostError> {
        self.parent()
            .invoke_tool_keyed(agent, tool, args, cancel, idempotency_key)
    }

    fn exec(&self, agent: &str, args: &[Json], cancel: &CancelToken) -> Result<Json, HostError> {
        self.parent().exec(agent, args, cancel)
    }

    fn mem_query(&self, agent: &str, tier: Tier, query: &Json) -> Result<Json, HostError> {
        let q = text_of(query);
        let parsed = MemQuery::parse(&q);
        // A write with no key is stored under its content key (as the AAM
        // does), which a prefix query may name.
        let mine: Vec<(String, Json)> = self
            .log()
            .iter()
            .filter_map(|e| match e {
                Effect::Mem {
                    agent: a,
                    tier: t,
                    value,
                    key,
                    ..
                } if a == agent && *t == tier => Some((
                    key.as_ref().map_or_else(|| content_key(value), text_of),
                    value.clone(),
                )),
                _ => None,
            })
            .collect();
        if let Some(k) = parsed.exact_key() {
            if let Some((_, v)) = mine.iter().rev().find(|(key, _)| key == k) {
                return Ok(v.clone());
            }
        }
        let mut r = self.parent().mem_query(agent, tier, query)?;
        if let Json::Array(xs) = &mut r {
            xs.extend(
                mine.into_iter()
                    .filter(|(k, v)| parsed.matches(k, v))
                    .map(|(_, v)| v),
            );
        }
        Ok(r)
    }

    fn mem_update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<(), HostError> {
        self.log().push(Effect::Mem {
            agent: agent.to_string(),
            tier,
            value: value.clone(),
            key: key.cloned(),
            labels: crate::host::flow::active().then(crate::host::flow::writing),
        });
        Ok(())
    }

    fn belief_get(&self, agent: &str, name: &str) -> Result<Json, HostError> {
        let mine = self.log().iter().rev().find_map(|e| match e {
            Effect::Belief {
                agent: a,
                name: n,
                value,
            } if a == agent && n == name => Some(value.clone()),
            _ => None,
        });
        match mine {
            Some(v) => Ok(v),
            None => self.parent().belief_get(agent, name),
        }
    }

    fn beliefs_outlive_run(&self) -> bool {
        self.parent().beliefs_outlive_run()
    }

    fn belief_set(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        // An unknown belief fails now, as it would outside a body.
        let set_here = self.log().iter().any(
            |e| matches!(e, Effect::Belief { agent: a, name: n, .. } if a == agent && n == name),
        );
        if !set_here {
            self.parent().belief_get(agent, name)?;
        }
        self.log().push(Effect::Belief {
            agent: agent.to_string(),
            name: name.to_string(),
            value: value.clone(),
        });
        Ok(())
    }

    fn print(&self, agent: &str, line: &str) {
        self.print_journaled(agent, line, None);
    }

    fn communicate(&self, message: Message) -> Result<(), HostError> {
        self.log().push(Effect::Send {
            message,
            deliver: true,
            labels: crate::host::flow::writing(),
        });
        Ok(())
    }
}
