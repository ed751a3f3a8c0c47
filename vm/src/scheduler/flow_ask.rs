//! `on_deny = "ask"` where no terminal answers (`aisc serve`, A2A, a
//! detached run): a denied flow pauses the run with a question, as a
//! `pause` op does, and the person's answer decides it when the run
//! resumes (`aisc resume RUN --input yes`, serve's resume, an A2A
//! `input-required` reply). The question and the answer are journaled
//! under the sink call's key with `#approval`, so a resumed run reads the
//! answer instead of asking again (`docs/security.md`).

use super::gate::{record_results, EffectId};
use super::Run;
use crate::exec::OpError;
use crate::frame::Frame;
use crate::value::Val;
use ais_ir::bytecode::Instr;
use serde_json::Value as Json;

/// Is `answer` a yes?
fn approves(answer: &Json) -> bool {
    match answer {
        Json::Bool(b) => *b,
        Json::String(s) => matches!(
            s.trim().to_lowercase().as_str(),
            "y" | "yes" | "true" | "allow" | "approve" | "approved" | "ok"
        ),
        _ => false,
    }
}

impl<'r> Run<'r> {
    /// After `denial` stood (no terminal approved it): when its payload
    /// says `on_deny = "ask"` and the run is journaled, the journaled
    /// answer decides (`Ok`: approved), or the run pauses with the
    /// question. Otherwise the denial stands.
    pub(super) fn ask_in_journal(
        &self,
        frame: &Frame<'r>,
        op: u32,
        instr: &Instr,
        args: &[Val],
        denial: OpError,
    ) -> Result<(), OpError> {
        let id = self
            .journal_key(frame, op, instr, args)
            .map(|id| EffectId::new(format!("{}#approval", id.key), id.hash));
        self.ask_at(id, denial)
    }

    /// The same for the journal identity `id` of a call (`None`: not
    /// journaled, the denial stands).
    pub(super) fn ask_at(&self, id: Option<EffectId>, denial: OpError) -> Result<(), OpError> {
        if denial.code != crate::ifc::DENIED || denial.payload["on_deny"] != "ask" {
            return Err(denial);
        }
        let Some(id) = id else {
            return Err(denial);
        };
        match self.gate_replay(&id, None)? {
            Some(record) => {
                let answer = record_results(&id, record)?
                    .first()
                    .map(Val::to_json)
                    .unwrap_or(Json::Null);
                if approves(&answer) {
                    Ok(())
                } else {
                    let message = format!("{} (not approved)", denial.message);
                    Err(OpError { message, ..denial })
                }
            }
            None => {
                let p = &denial.payload;
                let question = format!(
                    "allow untrusted data from {} into `{}` argument `{}`? (yes/no)",
                    p["sources"]
                        .as_array()
                        .map(|s| s
                            .iter()
                            .filter_map(Json::as_str)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default(),
                    p["sink"].as_str().unwrap_or_default(),
                    p["argument"].as_str().unwrap_or_default(),
                );
                let paused = OpError::new(crate::exec::PAUSED, format!("paused: {question}"))
                    .with_payload(serde_json::json!({
                        "message": question,
                        "denial": denial.payload,
                    }));
                Err(self.note_pause(paused, Some(&id)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_is_yes_and_everything_else_is_no() {
        assert!(approves(&Json::from("Yes ")) && approves(&Json::Bool(true)));
        assert!(!approves(&Json::from("no")) && !approves(&Json::Null));
        assert!(!approves(&Json::from("yes, to attacker@evil.test")));
    }
}
