//! The served programs: finding one by name, checking a run request
//! against it (entry flow, arguments), listing them for the console, and
//! drawing a run's graph.

use super::Registry;
use crate::engine::{BudgetSpec, RunSpec, Served};
use crate::error::ApiError;
use serde_json::{json, Value as Json};

impl Registry {
    /// The served program called `name`.
    pub fn find_program(&self, name: &str) -> Result<Served, ApiError> {
        let programs = self.programs();
        let hits: Vec<&Served> = programs.iter().filter(|p| p.answers_to(name)).collect();
        match hits.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ApiError::not_found(
                "program.unknown",
                format!("no served program is called `{name}`"),
                &format!("served programs: {}", self.program_names().join(", ")),
            )),
            _ => Err(ApiError::bad_request(
                "program.ambiguous",
                format!("`{name}` names several served programs"),
                "name the program by its file name",
            )),
        }
    }

    fn program_names(&self) -> Vec<String> {
        self.programs()
            .iter()
            .map(|p| {
                let agents: Vec<&str> = p.agents().collect();
                format!("{} (agents {})", p.file, agents.join(", "))
            })
            .collect()
    }

    /// Checks a run request: the program, its entry flow and the arguments.
    pub fn check(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
    ) -> Result<(Served, RunSpec), ApiError> {
        let served = self.find_program(program)?;
        let entry = entry
            .map(str::to_string)
            .or_else(|| served.agent_entry(program));
        let flow = served.program.find_entry(entry.as_deref()).map_err(|e| {
            ApiError::bad_request(
                "run.bad_entry",
                e.to_string(),
                "pass `entry` as `Agent.flow`, or mark one flow @entry",
            )
        })?;
        let args: Vec<(String, Json)> = match args {
            Json::Null => Vec::new(),
            Json::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            other => {
                return Err(ApiError::bad_request(
                    "run.bad_args",
                    format!("`args` must be an object of the entry flow's parameters, got {other}"),
                    "send `\"args\": {\"name\": value}`",
                ))
            }
        };
        if let Err(e) = ais_vm::exec::entry_args(&served.program, flow, &args) {
            let params: Vec<String> = served
                .program
                .flows
                .get(flow as usize)
                .map(|f| {
                    f.params
                        .iter()
                        .map(|(n, t)| format!("{n}: {}", served.program.type_of(*t)))
                        .collect()
                })
                .unwrap_or_default();
            let mut message = match e {
                ais_vm::RunError::Argument(m) => m,
                other => other.to_string(),
            };
            // The VM's hint is the command line's (`--arg`).
            if let Some(i) = message.find(" (pass --arg") {
                message.truncate(i);
            }
            return Err(ApiError::bad_request(
                "run.bad_args",
                message,
                &format!(
                    "@{} takes ({}); pass each in `args`",
                    served.program.flow_name(flow),
                    params.join(", ")
                ),
            ));
        }
        Ok((
            served,
            RunSpec {
                entry,
                args,
                budget: BudgetSpec::default(),
                queue: Default::default(),
                webhooks: Vec::new(),
            },
        ))
    }

    /// The served programs with their exposed flows and parameters (the
    /// console's form to start a run).
    pub fn programs_json(&self) -> Json {
        let programs = self.programs();
        let list: Vec<Json> = programs
            .iter()
            .map(|s| {
                let p = &s.program;
                let flows: Vec<Json> = s
                    .exposed_flows()
                    .into_iter()
                    .filter_map(|i| {
                        let f = p.flows.get(i as usize)?;
                        Some(json!({
                            "name": p.flow_name(i),
                            "entry": f.entry,
                            "params": f.params.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
                        }))
                    })
                    .collect();
                json!({"file": s.file, "flows": flows})
            })
            .collect();
        json!({"programs": list})
    }

    /// The dataflow graph of a run's program (`<svg>`), when the engine
    /// draws graphs and the program is still served.
    pub fn graph(&self, id: &str) -> Result<String, ApiError> {
        let name = match self.get(id) {
            Some(e) => e.program.clone(),
            None => self.describe(id)?["program"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        };
        let served = self.find_program(&name)?;
        self.engine.graph_svg(&served.program).ok_or_else(|| {
            ApiError::not_found(
                "graph.unavailable",
                "this server draws no graphs",
                "`aisc graph FILE` draws one",
            )
        })
    }
}
