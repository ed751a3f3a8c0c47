//! Goals: the rules of the `goals_*` tools and `update_goal`, applied to one
//! agent's list, kept in the host's agent store (for one host, or shared by
//! a fleet: changed under the agent's row lock, so every host sees one
//! list).

use super::AamHost;
use crate::host::HostError;
use serde_json::{json, Value as Json};

/// A goal of an agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    pub name: String,
    /// 1 is the most important.
    pub priority: i64,
    pub description: String,
    pub done: bool,
    order: u64,
}

impl Goal {
    fn to_json(&self) -> Json {
        json!({
            "name": self.name,
            "priority": self.priority,
            "description": self.description,
            "status": if self.done { "done" } else { "active" },
        })
    }
}

/// A goal as stored (with its insertion order).
fn to_row(g: &Goal) -> Json {
    json!({"name": g.name, "priority": g.priority, "description": g.description,
           "done": g.done, "order": g.order})
}

/// Rows that do not parse (edited by hand) are left out.
fn from_row(r: &Json) -> Option<Goal> {
    Some(Goal {
        name: r.get("name")?.as_str()?.to_string(),
        priority: r.get("priority")?.as_i64()?,
        description: r
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string(),
        done: r.get("done").and_then(Json::as_bool).unwrap_or(false),
        order: r.get("order").and_then(Json::as_u64).unwrap_or(0),
    })
}

fn from_rows(rows: &Json) -> Vec<Goal> {
    rows.as_array()
        .map(|a| a.iter().filter_map(from_row).collect())
        .unwrap_or_default()
}

impl AamHost {
    /// Changes the stored list of `agent` with `f` (under the store's lock
    /// for it).
    fn with_goals<T>(
        &self,
        agent: &str,
        f: impl FnOnce(&mut Vec<Goal>, &mut dyn FnMut() -> u64) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let mut f = Some(f);
        let mut out = None;
        self.ltm.update_goals(agent, &mut |rows| {
            let Some(f) = f.take() else {
                return Ok(());
            };
            let mut gs = from_rows(rows);
            let mut next = gs.iter().map(|g| g.order + 1).max().unwrap_or(0);
            let mut next_order = || {
                next += 1;
                next - 1
            };
            out = Some(f(&mut gs, &mut next_order)?);
            *rows = Json::Array(gs.iter().map(to_row).collect());
            Ok(())
        })?;
        out.ok_or_else(|| HostError::new("internal.goals", "the goal list was not changed"))
    }

    pub(super) fn goal_op(&self, agent: &str, op: &str, args: &Json) -> Result<Json, HostError> {
        if matches!(op, "list" | "next") {
            // Reads need no lock.
            let mut gs = from_rows(&self.ltm.goals(agent)?);
            return apply(&mut gs, agent, op, args, &mut || 0);
        }
        self.with_goals(agent, |gs, next| apply(gs, agent, op, args, next))
    }

    /// Adds the goals the program declares that the agent does not have
    /// (by name, active or done): a shared list keeps what other runs did.
    pub(super) fn add_declared_goals(&self, agent: &str, declared: &[(String, i64, String)]) {
        let add = |gs: &mut Vec<Goal>, next: &mut dyn FnMut() -> u64| {
            for (name, priority, description) in declared {
                if gs.iter().any(|x| &x.name == name) {
                    continue;
                }
                gs.push(Goal {
                    name: name.clone(),
                    priority: *priority,
                    description: description.clone(),
                    done: false,
                    order: next(),
                });
            }
            Ok(())
        };
        if let Err(e) = self.with_goals(agent, add) {
            self.warn(&format!("goals of agent `{agent}`: {e}"));
        }
    }

    /// The agent's goals (active and done), most important first.
    pub fn goals(&self, agent: &str) -> Vec<Goal> {
        let mut gs = match self.ltm.goals(agent) {
            Ok(rows) => from_rows(&rows),
            Err(e) => {
                self.warn(&format!("goals of agent `{agent}`: {e}"));
                Vec::new()
            }
        };
        gs.sort_by_key(|g| (g.done, g.priority, g.order));
        gs
    }
}

pub(super) fn apply(
    gs: &mut Vec<Goal>,
    agent: &str,
    op: &str,
    args: &Json,
    next_order: &mut dyn FnMut() -> u64,
) -> Result<Json, HostError> {
    let sorted = |gs: &Vec<Goal>, done: bool| -> Vec<Goal> {
        let mut v: Vec<Goal> = gs.iter().filter(|g| done || !g.done).cloned().collect();
        v.sort_by_key(|g| (g.done, g.priority, g.order));
        v
    };
    let name = args.get("name").and_then(Json::as_str);
    match op {
        "list" => {
            let all = args.get("all").and_then(Json::as_bool).unwrap_or(false);
            Ok(Json::Array(
                sorted(gs, all).iter().map(Goal::to_json).collect(),
            ))
        }
        "next" => Ok(sorted(gs, false).first().map_or(Json::Null, Goal::to_json)),
        "add" => {
            let name = name.unwrap_or_default().to_string();
            let priority = args
                .get("priority")
                .and_then(Json::as_i64)
                .unwrap_or_else(|| {
                    gs.iter()
                        .filter(|g| !g.done)
                        .map(|g| g.priority)
                        .max()
                        .unwrap_or(0)
                        + 1
                });
            let description = args
                .get("description")
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(g) = gs.iter_mut().find(|g| g.name == name && !g.done) {
                g.priority = priority;
                if !description.is_empty() {
                    g.description = description;
                }
                return Ok(g.to_json());
            }
            let g = Goal {
                name,
                priority,
                description,
                done: false,
                order: next_order(),
            };
            let out = g.to_json();
            gs.push(g);
            Ok(out)
        }
        "update" => {
            let name = name.or_else(|| args.get("goal_id").and_then(Json::as_str));
            // The reference's form (`goal_id`) without `action` is a `set`,
            // its default.
            let action = args.get("action").and_then(Json::as_str).or_else(|| {
                args.get("goal_id")
                    .is_some_and(Json::is_string)
                    .then_some("set")
            });
            if let Some(action) = action {
                return reference_update(gs, action, name.unwrap_or_default(), args, next_order);
            }
            let name = name.unwrap_or_default().to_string();
            let status = args
                .get("status")
                .and_then(Json::as_str)
                .unwrap_or("active");
            let priority = args.get("priority").and_then(Json::as_i64);
            let description = args.get("description").and_then(Json::as_str);
            let found = gs.iter().position(|g| g.name == name && !g.done);
            if status == "dropped" {
                return match found {
                    Some(i) => {
                        let g = gs.remove(i);
                        Ok(json!({"name": g.name, "status": "dropped"}))
                    }
                    None => Err(HostError::new(
                        "goal.unknown",
                        format!("agent `{agent}` has no active goal `{name}`"),
                    )
                    .with_payload(json!({"agent": agent, "goal": name}))),
                };
            }
            let i = match found {
                Some(i) => i,
                None => {
                    let next = gs.iter().filter(|g| !g.done).map(|g| g.priority).max();
                    gs.push(Goal {
                        name,
                        priority: next.map_or(1, |p| p + 1),
                        description: String::new(),
                        done: false,
                        order: next_order(),
                    });
                    gs.len() - 1
                }
            };
            let g = &mut gs[i];
            if let Some(p) = priority {
                g.priority = p;
            }
            if let Some(d) = description {
                g.description = d.to_string();
            }
            g.done = status == "done";
            Ok(g.to_json())
        }
        "complete" => {
            let name = name.unwrap_or_default();
            match gs.iter_mut().find(|g| g.name == name && !g.done) {
                Some(g) => {
                    g.done = true;
                    Ok(g.to_json())
                }
                None => Err(HostError::new(
                    "goal.unknown",
                    format!("agent `{agent}` has no active goal `{name}`"),
                )
                .with_payload(json!({"agent": agent, "goal": name}))),
            }
        }
        _ => Err(HostError::new(
            "goal.op",
            format!("unknown goal operation `{op}`"),
        )),
    }
}

/// The reference's `update_goal` (`action: set|remove|clear`, its
/// `goal_id` and `priority`), with its results: `"set"`, `"removed"`,
/// `"not_found"` (removing an unknown goal changes nothing) or `"cleared"`.
fn reference_update(
    gs: &mut Vec<Goal>,
    action: &str,
    name: &str,
    args: &Json,
    next_order: &mut dyn FnMut() -> u64,
) -> Result<Json, HostError> {
    match action.to_ascii_lowercase().as_str() {
        "clear" => {
            gs.retain(|g| g.done);
            Ok(json!("cleared"))
        }
        "remove" => match gs.iter().position(|g| g.name == name && !g.done) {
            Some(i) => {
                gs.remove(i);
                Ok(json!("removed"))
            }
            None => Ok(json!("not_found")),
        },
        "set" => {
            let priority = args.get("priority").and_then(Json::as_i64).unwrap_or(1);
            let description = args
                .get("description")
                .and_then(Json::as_str)
                .unwrap_or(name)
                .to_string();
            gs.retain(|g| g.name != name || g.done);
            gs.push(Goal {
                name: name.to_string(),
                priority,
                description,
                done: false,
                order: next_order(),
            });
            Ok(json!("set"))
        }
        other => Err(HostError::new(
            "goal.op",
            format!("`{other}` is not an update_goal action (set, remove or clear)"),
        )),
    }
}
