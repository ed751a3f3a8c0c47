//! Beliefs: a typed key–value store per agent, in the host's agent store
//! (for one host, or shared by a fleet where the store outlives the run).
//! A belief keeps its kind: a value of another kind (null aside) is
//! refused with `belief.type`.

use super::AamHost;
use crate::host::HostError;
use serde_json::{json, Value as Json};
use std::time::Instant;

fn kind_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "str",
        Json::Array(_) => "list",
        Json::Object(_) => "json object",
    }
}

/// Refuses a new `value` of another kind than the belief's `old` one.
fn same_kind(agent: &str, name: &str, old: Option<&Json>, value: &Json) -> Result<(), HostError> {
    match old {
        Some(old)
            if !old.is_null()
                && !value.is_null()
                && std::mem::discriminant(old) != std::mem::discriminant(value) =>
        {
            Err(HostError::new(
                "belief.type",
                format!(
                    "belief `{name}` of agent `{agent}` holds a {}; it cannot become a {}",
                    kind_name(old),
                    kind_name(value)
                ),
            )
            .with_payload(json!({"agent": agent, "belief": name})))
        }
        _ => Ok(()),
    }
}

impl AamHost {
    pub(super) fn belief_get_logged(&self, agent: &str, name: &str) -> Result<Json, HostError> {
        let t0 = Instant::now();
        let r = self.ltm.belief(agent, name).and_then(|v| {
            v.ok_or_else(|| {
                HostError::new(
                    "belief.unknown",
                    format!("agent `{agent}` has no belief `{name}`"),
                )
                .with_payload(json!({"agent": agent, "belief": name}))
            })
        });
        self.log(agent, "belief.get", json!({"name": name}), r.as_ref(), t0);
        r
    }

    pub(super) fn belief_set_logged(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
    ) -> Result<(), HostError> {
        let t0 = Instant::now();
        let check = |old: Option<&Json>| same_kind(agent, name, old, value);
        let r = self
            .ltm
            .set_belief(agent, name, value, &check)
            .map(|()| Json::Null);
        self.log(
            agent,
            "belief.set",
            json!({"name": name, "value": value}),
            r.as_ref(),
            t0,
        );
        r.map(|_| ())
    }

    pub(super) fn belief_init_logged(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
    ) -> Result<(), HostError> {
        if !self.ltm.agent_state_outlives_run() {
            return self.belief_set_logged(agent, name, value);
        }
        // Beliefs persist in the store: an earlier run's value stays.
        let t0 = Instant::now();
        let check = |old: Option<&Json>| same_kind(agent, name, old, value);
        let r = self.ltm.init_belief(agent, name, value, &check);
        let inputs = json!({"name": name, "value": value, "initial": true});
        self.log(agent, "belief.set", inputs, r.as_ref(), t0);
        r.map(|_| ())
    }
}
