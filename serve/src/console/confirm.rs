//! Confirming destructive tools over HTTP (`aisc serve --ask`): the tool
//! call waits, its run's event log says what it waits for (`confirm`), and
//! `POST /v1/runs/{id}/confirm` (the console's Approve / Deny) answers it.
//! A cancelled run stops waiting and the tool is refused.

use crate::cancel::Cancel;
use crate::error::ApiError;
use crate::events::EventLog;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The confirmations of one run: questions asked, answers given.
pub struct Asker {
    log: Arc<EventLog>,
    cancel: Cancel,
    state: Mutex<Asked>,
    cv: Condvar,
}

#[derive(Default)]
struct Asked {
    next: u64,
    /// Open questions by number: what is asked, and `None` until answered.
    open: BTreeMap<u64, (Json, Option<bool>)>,
}

impl Asker {
    pub fn new(log: Arc<EventLog>, cancel: Cancel) -> Arc<Asker> {
        Arc::new(Asker {
            log,
            cancel,
            state: Mutex::default(),
            cv: Condvar::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Asked> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers question `n` (the only open one when `None`).
    pub fn answer(&self, n: Option<u64>, allow: bool) -> Result<u64, ApiError> {
        let mut s = self.lock();
        let waiting: Vec<u64> = s
            .open
            .iter()
            .filter(|(_, (_, a))| a.is_none())
            .map(|(k, _)| *k)
            .collect();
        let n = match (n, waiting.as_slice()) {
            (Some(n), _) if waiting.contains(&n) => n,
            (Some(n), _) => {
                return Err(ApiError::conflict(
                    "run.not_asking",
                    format!("confirmation {n} is not waiting for an answer"),
                    "the run's `confirm` events number the open questions",
                ))
            }
            (None, [one]) => *one,
            (None, []) => {
                return Err(ApiError::conflict(
                    "run.not_asking",
                    "the run waits for no confirmation",
                    "a run asks (event `confirm`) when it calls a destructive tool under `aisc serve --ask`",
                ))
            }
            (None, _) => {
                return Err(ApiError::bad_request(
                    "request.invalid",
                    format!("{} confirmations are open: say which", waiting.len()),
                    "send {\"allow\": true, \"request\": N} with N from the `confirm` event",
                ))
            }
        };
        if let Some(q) = s.open.get_mut(&n) {
            q.1 = Some(allow);
        }
        self.cv.notify_all();
        Ok(n)
    }

    /// The questions waiting for an answer (`GET /v1/runs/{id}`'s
    /// `confirm`), as their `confirm` events say them.
    pub fn open(&self) -> Vec<Json> {
        self.lock()
            .open
            .values()
            .filter(|(_, a)| a.is_none())
            .map(|(q, _)| q.clone())
            .collect()
    }
}

impl ais_vm::aam::Confirmer for Asker {
    fn confirm(&self, agent: &str, tool: &str, args: &Json) -> bool {
        let (n, question) = {
            let mut s = self.lock();
            s.next += 1;
            let n = s.next;
            let question = json!({"request": n, "agent": agent, "tool": tool, "args": args});
            s.open.insert(n, (question.clone(), None));
            (n, question)
        };
        self.log.push("confirm", question);
        let mut s = self.lock();
        let allow = loop {
            if let Some((_, Some(a))) = s.open.get(&n) {
                break *a;
            }
            if self.cancel.is_cancelled() {
                break false;
            }
            // Cancelling does not notify: look again now and then.
            s = self
                .cv
                .wait_timeout(s, Duration::from_millis(200))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        s.open.remove(&n);
        drop(s);
        self.log.push(
            "confirmed",
            json!({"request": n, "agent": agent, "tool": tool, "allow": allow}),
        );
        allow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ais_vm::aam::Confirmer;

    #[test]
    fn a_question_waits_for_its_answer_and_a_cancel_refuses() {
        let log = Arc::new(EventLog::new());
        let cancel = Cancel::new();
        let asker = Asker::new(log.clone(), cancel.clone());
        assert_eq!(
            asker.answer(None, true).err().map(|e| e.code),
            Some("run.not_asking")
        );
        let a = asker.clone();
        let t = std::thread::spawn(move || a.confirm("A", "rm", &json!({"path": "x"})));
        while asker.open().is_empty() {
            std::thread::yield_now();
        }
        assert_eq!(asker.open()[0]["tool"], "rm");
        assert_eq!(
            asker.answer(Some(7), true).err().map(|e| e.code),
            Some("run.not_asking")
        );
        assert_eq!(asker.answer(None, true).ok(), Some(1));
        assert!(t.join().expect("joins"));
        let a = asker.clone();
        let t = std::thread::spawn(move || a.confirm("A", "rm", &json!({})));
        while log.all().iter().filter(|e| e.kind == "confirm").count() < 2 {
            std::thread::yield_now();
        }
        cancel.cancel();
        assert!(!t.join().expect("joins"));
        let kinds: Vec<String> = log.all().iter().map(|e| e.kind.clone()).collect();
        assert_eq!(kinds, ["confirm", "confirmed", "confirm", "confirmed"]);
    }
}
