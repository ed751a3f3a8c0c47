//! The in-memory [`Host`]: a test double for tests and benchmarks.
//!
//! It lives here, not in the VM, because the product never uses it: `aisc`
//! runs on the AAM host (`ais_vm::aam::AamHost`).

use ais_ir::Tier;
use ais_vm::host::{Host, HostError, Message, ToolFn};
use ais_vm::llm::CancelToken;
use ais_vm::store::MemQuery;
use ais_vm::sync::lock;
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// One stored memory entry.
#[derive(Clone, Debug, PartialEq)]
pub struct MemEntry {
    pub key: String,
    pub value: Json,
}

/// One lock per tier (STM, LTM, episodic) of one agent.
type TierStores = Arc<[Mutex<Vec<MemEntry>>; 3]>;

/// In-memory host.
///
/// - **Memory**: per agent and tier, an ordered list of `(key, value)`
///   entries, each tier behind its own lock. `umem(v, key)` replaces the
///   entry with that key (STM/LTM) or appends; `umem(v)` appends under the
///   key `#n`. The episodic tier only appends. `qmem(q)`: a string equal to a
///   key returns that value; `"*"` or `""` returns every value (oldest first);
///   otherwise the values whose key or text contains `q` (case-insensitive),
///   as a JSON array.
/// - **Beliefs**: a map per agent; reading an unset belief is `belief.unknown`.
/// - **Tools**: in-process functions registered with [`MemoryHost::register_tool`];
///   built in: `echo` (returns its arguments). Unknown tools fail with `tool.unknown`.
///   `exec(name, args...)` calls the tool `name` with the JSON array of the
///   remaining arguments.
/// - **print** collects lines ([`MemoryHost::printed`]) and echoes them to
///   stdout when built with [`MemoryHost::echo`].
/// - **communicate** records messages ([`MemoryHost::outbox`]).
pub struct MemoryHost {
    memory: Mutex<HashMap<String, TierStores>>,
    beliefs: Mutex<HashMap<(String, String), Json>>,
    tools: Mutex<HashMap<String, ToolFn>>,
    printed: Mutex<Vec<String>>,
    outbox: Mutex<Vec<Message>>,
    /// Sources written into LTM and the episodic tier (which live as long
    /// as the host, across runs): `Host::stored_labels`.
    stored_labels: Mutex<HashMap<String, Vec<String>>>,
    echo: bool,
    /// Beliefs outlive a run, as in a shared store ([`MemoryHost::keeping_beliefs`]).
    keeps_beliefs: bool,
}

fn tier_index(t: Tier) -> usize {
    match t {
        Tier::Stm => 0,
        Tier::Ltm => 1,
        Tier::Episodic => 2,
    }
}

impl Default for MemoryHost {
    fn default() -> Self {
        MemoryHost::new()
    }
}

impl MemoryHost {
    /// A host that keeps printed lines to itself.
    pub fn new() -> MemoryHost {
        let host = MemoryHost {
            memory: Mutex::default(),
            beliefs: Mutex::default(),
            tools: Mutex::default(),
            printed: Mutex::default(),
            outbox: Mutex::default(),
            stored_labels: Mutex::default(),
            echo: false,
            keeps_beliefs: false,
        };
        host.register_tool("echo", |args| Ok(args.clone()));
        host
    }

    /// A host that also writes printed lines to stdout.
    pub fn echo() -> MemoryHost {
        MemoryHost {
            echo: true,
            ..MemoryHost::new()
        }
    }

    /// A host whose beliefs outlive a run, as a shared store's do: a run's
    /// initial value does not replace one already there.
    pub fn keeping_beliefs(self) -> MemoryHost {
        MemoryHost {
            keeps_beliefs: true,
            ..self
        }
    }

    pub fn register_tool(
        &self,
        name: &str,
        f: impl Fn(&Json) -> Result<Json, HostError> + Send + Sync + 'static,
    ) {
        lock(&self.tools).insert(name.to_string(), Arc::new(f));
    }

    pub fn printed(&self) -> Vec<String> {
        lock(&self.printed).clone()
    }

    pub fn outbox(&self) -> Vec<Message> {
        lock(&self.outbox).clone()
    }

    /// A snapshot of one agent's tier.
    pub fn entries(&self, agent: &str, tier: Tier) -> Vec<MemEntry> {
        let tiers = lock(&self.memory).get(agent).cloned();
        match tiers {
            Some(t) => lock(&t[tier_index(tier)]).clone(),
            None => Vec::new(),
        }
    }

    fn tiers(&self, agent: &str) -> TierStores {
        lock(&self.memory)
            .entry(agent.to_string())
            .or_insert_with(|| Arc::new(Default::default()))
            .clone()
    }

    fn tool(&self, name: &str) -> Result<ToolFn, HostError> {
        lock(&self.tools).get(name).cloned().ok_or_else(|| {
            HostError::new("tool.unknown", format!("no tool named `{name}`"))
                .with_payload(json!({ "tool": name }))
        })
    }
}

fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Host for MemoryHost {
    fn invoke_tool(
        &self,
        _agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
    ) -> Result<Json, HostError> {
        if cancel.is_cancelled() {
            return Err(HostError::new("cancelled", "the run was cancelled"));
        }
        // `inv` arguments may arrive as JSON text (templates produce strings).
        let parsed;
        let args = match args {
            Json::String(s) => match serde_json::from_str::<Json>(s) {
                Ok(v) => {
                    parsed = v;
                    &parsed
                }
                Err(_) => args,
            },
            _ => args,
        };
        (self.tool(tool)?)(args)
    }

    fn exec(&self, agent: &str, args: &[Json], cancel: &CancelToken) -> Result<Json, HostError> {
        let Some((cmd, rest)) = args.split_first() else {
            return Err(HostError::new("exec.usage", "exec needs a command"));
        };
        let name = text_of(cmd);
        let rest = Json::Array(rest.to_vec());
        self.invoke_tool(agent, &name, &rest, cancel)
    }

    fn mem_query(&self, agent: &str, tier: Tier, query: &Json) -> Result<Json, HostError> {
        let tiers = self.tiers(agent);
        let store = lock(&tiers[tier_index(tier)]);
        let q = text_of(query);
        let query = MemQuery::parse(&q);
        if let Some(k) = query.exact_key() {
            if let Some(e) = store.iter().rev().find(|e| e.key == k) {
                return Ok(e.value.clone());
            }
        }
        let hits: Vec<Json> = store
            .iter()
            .filter(|e| query.matches(&e.key, &e.value))
            .map(|e| e.value.clone())
            .collect();
        Ok(Json::Array(hits))
    }

    fn mem_update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<(), HostError> {
        let tiers = self.tiers(agent);
        let mut store = lock(&tiers[tier_index(tier)]);
        let key = match key {
            Some(k) => text_of(k),
            None => format!("#{}", store.len()),
        };
        if tier != Tier::Episodic {
            if let Some(e) = store.iter_mut().find(|e| e.key == key) {
                e.value = value.clone();
                return Ok(());
            }
        }
        store.push(MemEntry {
            key,
            value: value.clone(),
        });
        Ok(())
    }

    fn belief_get(&self, agent: &str, name: &str) -> Result<Json, HostError> {
        lock(&self.beliefs)
            .get(&(agent.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| {
                HostError::new(
                    "belief.unknown",
                    format!("agent `{agent}` has no belief `{name}`"),
                )
            })
    }

    fn belief_set(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        lock(&self.beliefs).insert((agent.to_string(), name.to_string()), value.clone());
        Ok(())
    }

    fn belief_init(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        let mut all = lock(&self.beliefs);
        let key = (agent.to_string(), name.to_string());
        if !(self.keeps_beliefs && all.contains_key(&key)) {
            all.insert(key, value.clone());
        }
        Ok(())
    }

    fn beliefs_outlive_run(&self) -> bool {
        self.keeps_beliefs
    }

    fn stored_labels(&self, tier: &str) -> Result<Vec<String>, HostError> {
        Ok(lock(&self.stored_labels)
            .get(tier)
            .cloned()
            .unwrap_or_default())
    }

    fn store_labels(&self, tier: &str, names: &[String]) -> Result<(), HostError> {
        // Beliefs are set again at every run's start here: not kept.
        if matches!(tier, "ltm" | "episodic") {
            let mut all = lock(&self.stored_labels);
            let kept = all.entry(tier.to_string()).or_default();
            for n in names {
                if !kept.contains(n) {
                    kept.push(n.clone());
                }
            }
        }
        Ok(())
    }

    fn print(&self, _agent: &str, line: &str) {
        if self.echo {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
        }
        lock(&self.printed).push(line.to_string());
    }

    fn communicate(&self, message: Message) -> Result<(), HostError> {
        lock(&self.outbox).push(message);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn memory_tiers_store_and_query() {
        let h = MemoryHost::new();
        h.mem_update("A", Tier::Stm, &json!("alpha note"), None)
            .unwrap();
        h.mem_update("A", Tier::Stm, &json!({"x": 1}), Some(&json!("k")))
            .unwrap();
        h.mem_update("A", Tier::Stm, &json!(2), Some(&json!("k")))
            .unwrap();
        assert_eq!(h.mem_query("A", Tier::Stm, &json!("k")).unwrap(), json!(2));
        assert_eq!(
            h.mem_query("A", Tier::Stm, &json!("ALPHA")).unwrap(),
            json!(["alpha note"])
        );
        assert_eq!(
            h.mem_query("A", Tier::Stm, &json!("*")).unwrap(),
            json!(["alpha note", 2])
        );
        assert_eq!(h.mem_query("B", Tier::Stm, &json!("*")).unwrap(), json!([]));
        h.mem_update("A", Tier::Episodic, &json!(1), Some(&json!("e")))
            .unwrap();
        h.mem_update("A", Tier::Episodic, &json!(2), Some(&json!("e")))
            .unwrap();
        assert_eq!(h.entries("A", Tier::Episodic).len(), 2);
    }

    #[test]
    fn tools_beliefs_and_exec() {
        let h = MemoryHost::new();
        let c = CancelToken::new();
        assert_eq!(
            h.invoke_tool("A", "echo", &json!("{\"a\":1}"), &c).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            h.invoke_tool("A", "nope", &json!({}), &c).unwrap_err().code,
            "tool.unknown"
        );
        h.register_tool("len", |a| Ok(json!(a.as_array().map_or(0, |x| x.len()))));
        assert_eq!(
            h.exec("A", &[json!("len"), json!(1), json!(2)], &c)
                .unwrap(),
            json!(2)
        );
        assert_eq!(h.belief_get("A", "m").unwrap_err().code, "belief.unknown");
        h.belief_set("A", "m", &json!("calm")).unwrap();
        assert_eq!(h.belief_get("A", "m").unwrap(), json!("calm"));
    }
}
