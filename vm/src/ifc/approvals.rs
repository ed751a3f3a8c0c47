//! Approval instead of denial where a person is present: a denied flow
//! is put to the run's approver (the CLI's prompt, a served run's pause)
//! once per sink, argument and set of sources.

use crate::exec::OpError;

/// Asks whoever runs the program whether a denied flow may happen once
/// more (the CLI: a `[y/N]` prompt when stdin is a terminal). The edge
/// provides it; without one every denial stands. `--yes` does not answer
/// it: approving untrusted data for a side effect is a decision a person
/// makes, looking at the path.
pub trait FlowApprover: Send + Sync + std::fmt::Debug {
    /// `true` lets this flow (the `sink`, `argument` and `sources` of the
    /// denial's payload) through for the rest of the run.
    fn approve(&self, agent: &str, denial: &OpError) -> bool;
}

/// The approvals of one run: one question per sink, argument and set of
/// sources.
#[derive(Default)]
pub struct Approvals {
    approver: Option<std::sync::Arc<dyn FlowApprover>>,
    answers: crate::sync::AskOnce<String>,
}

impl Approvals {
    pub fn new(approver: Option<std::sync::Arc<dyn FlowApprover>>) -> Approvals {
        Approvals {
            approver,
            ..Approvals::default()
        }
    }

    /// `Ok` when `denial` (a `policy.denied` error of `agent`'s op) is
    /// approved, else the denial, saying it was refused when asked.
    pub fn review(&self, agent: &str, denial: OpError) -> Result<(), OpError> {
        let Some(approver) = &self.approver else {
            return Err(denial);
        };
        let p = &denial.payload;
        // `on_deny = "deny"`: the policy's author wants nobody asked.
        if p["on_deny"] == "deny" {
            return Err(denial);
        }
        let key = format!(
            "{}\u{0}{}\u{0}{}",
            p["sink"].as_str().unwrap_or(""),
            p["argument"].as_str().unwrap_or(""),
            p["sources"]
        );
        let yes = self
            .answers
            .answer(key, || approver.approve(agent, &denial));
        if yes {
            Ok(())
        } else {
            let message = format!("{} (not approved)", denial.message);
            Err(OpError { message, ..denial })
        }
    }
}
