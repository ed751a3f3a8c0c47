//! The Server-Sent Events of `SendStreamingMessage` and `SubscribeToTask`:
//! a task's `StreamResponse`s, made from its run's events as they come.
//! The HTTP layer feeds the events ([`crate::http`]'s event streams); this
//! is only the translation, so it never blocks.

use super::{ends_stream, state_name, timestamp, to_0_3, A2a, TaskMeta, PAUSED_STATE};
use crate::events::{Event, EventLog};
use crate::registry::{RunEntry, Status};
use ais_wire::a2a::TaskState;
use ais_wire::{rpc, sse};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::sync::Arc;

/// A task whose updates are to be streamed.
pub struct TaskStream {
    pub(super) rpc_id: Json,
    pub(super) entry: Arc<RunEntry>,
    pub(super) meta: TaskMeta,
    pub(super) legacy: bool,
}

/// The `StreamResponse` frames of one task: the task, a status update per
/// change of state, LLM text as artifact chunks, the result artifact, the
/// terminal status; the stream ends once the task is in a terminal state.
pub struct TaskFrames {
    a2a: Arc<A2a>,
    s: TaskStream,
    state: Json,
    /// Streamed LLM text: one artifact per LLM call (and tool-calling
    /// turn); false until its first chunk, or after a retry reset it.
    text_started: HashMap<String, bool>,
}

impl TaskFrames {
    pub fn new(a2a: Arc<A2a>, s: TaskStream) -> TaskFrames {
        TaskFrames {
            a2a,
            s,
            state: Json::Null,
            text_started: HashMap::new(),
        }
    }

    /// The run's event log the frames follow.
    pub fn log(&self) -> &Arc<EventLog> {
        &self.s.entry.events
    }

    fn frame(&self, result: Json) -> String {
        let result = if self.s.legacy {
            to_0_3(result)
        } else {
            result
        };
        sse::data(&rpc::result(self.s.rpc_id.clone(), result))
    }

    /// The first frame (the task as it is now), and whether the stream
    /// ends with it.
    pub fn start(&mut self) -> (String, bool) {
        let first = self
            .a2a
            .task_of(&self.s.entry.to_json(), Some(&self.s.meta), None);
        self.state = first["status"]["state"].clone();
        let text = self.frame(json!({"task": first}));
        (text, ends_stream(&self.state))
    }

    /// The frames for the run's next events (`done`: its log has ended),
    /// and whether the stream ends with them.
    pub fn next(&mut self, events: &[Arc<Event>], done: bool) -> (String, bool) {
        let mut text = String::new();
        let s = &self.s;
        for e in events {
            if e.kind == "text" || e.kind == "text_reset" {
                let d = &e.data;
                let artifact_id = match d["turn"].as_u64() {
                    Some(t) => format!("llm-{}-{}-turn{t}", d["frame"], d["op"]),
                    None => format!("llm-{}-{}", d["frame"], d["op"]),
                };
                if e.kind == "text_reset" {
                    self.text_started.insert(artifact_id, false);
                    continue;
                }
                let started = self.text_started.insert(artifact_id.clone(), true) == Some(true);
                text.push_str(&self.frame(json!({"artifactUpdate": {
                    "taskId": s.entry.id,
                    "contextId": s.meta.context_id,
                    "artifact": {
                        "artifactId": artifact_id,
                        "name": "llm-text",
                        "description": format!("text streamed by an LLM op of {}", d["flow"].as_str().unwrap_or("")),
                        "parts": [{"text": d["text"], "mediaType": "text/plain"}],
                    },
                    // A retry's text replaces the failed attempt's.
                    "append": started,
                    "lastChunk": false,
                }})));
                continue;
            }
            if e.kind != "status" && e.kind != "done" {
                continue;
            }
            if e.kind == "done" || done {
                break;
            }
            let now = e.data["status"]
                .as_str()
                .and_then(Status::parse)
                .map_or(TaskState::Unspecified.name(), state_name);
            // A stop (at a `pause`, or by its server) is told by the
            // final update, from the settled run.
            if now == PAUSED_STATE {
                continue;
            }
            // The first frame (the task) stands for its submission; an
            // earlier `queued` in the log is not news.
            if self.state != now && now != TaskState::Submitted.name() {
                self.state = now.into();
                text.push_str(&self.frame(status_update(&self.s, now, None, None)));
            }
        }
        if done {
            // The run's state is settled before its `done` event.
            let run = self.s.entry.to_json();
            let task = self.a2a.task_of(&run, Some(&self.s.meta), None);
            if let Some(a) = task["artifacts"].get(0) {
                text.push_str(&self.frame(json!({"artifactUpdate": {
                    "taskId": self.s.entry.id,
                    "contextId": self.s.meta.context_id,
                    "artifact": a,
                    "append": false,
                    "lastChunk": true,
                }})));
            }
            self.state = task["status"]["state"].clone();
            let now = self
                .state
                .as_str()
                .unwrap_or(TaskState::Unspecified.name())
                .to_string();
            text.push_str(&self.frame(status_update(
                &self.s,
                &now,
                task["status"].get("message").cloned(),
                task["status"]["timestamp"].as_str(),
            )));
        }
        // Nothing follows a log's end, whatever the state says.
        (text, done || ends_stream(&self.state))
    }
}

fn status_update(s: &TaskStream, state: &str, message: Option<Json>, at: Option<&str>) -> Json {
    let mut status = json!({
        "state": state,
        "timestamp": at.map_or_else(|| timestamp(crate::now_ms()), str::to_string),
    });
    if let Some(m) = message {
        status["message"] = m;
    }
    json!({"statusUpdate": {
        "taskId": s.entry.id,
        "contextId": s.meta.context_id,
        "status": status,
    }})
}
