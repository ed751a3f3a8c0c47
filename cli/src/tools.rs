//! `aisc tools`: every tool a run would have — the built-in and AAM tools,
//! the configuration's subprocess tools, the tools of its MCP servers
//! (started to list them) and its remote agents — with each one's origin,
//! description, argument schema, its catalogue declaration (effect class,
//! whether its results are trusted, which arguments are sinks, aliases) as
//! the configuration's `[policy]` applies it, and whether an agent may call
//! it under the configuration's `[access]`.

use crate::BackendArgs;
use serde_json::{json, Value as Json};
use std::io::Write;

pub fn tools(backend: &BackendArgs, agent: &str, json_out: bool) -> i32 {
    let (settings, aam) = match crate::config::load_all(backend) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}", e.message());
            return 2;
        }
    };
    let policy = ais_vm::catalogue::attach(settings.config.policy.clone(), aam.declarations());
    let host = match ais_vm::aam::AamHost::open(ais_vm::aam::AamOptions {
        storage: ais_vm::aam::Storage::Ephemeral,
        config: aam,
        confirm: ais_vm::aam::Confirm::Deny,
        console: None,
    }) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let mut list = host.tool_list();
    list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let mut failed = false;
    for s in host.mcp_status() {
        if s["state"] == "failed" {
            failed = true;
            eprintln!(
                "error: MCP server `{}` did not start: {}",
                s["name"].as_str().unwrap_or("?"),
                s["error"].as_str().unwrap_or("")
            );
        }
    }
    // A closed pipe (`aisc tools | head`) ends the listing quietly.
    let mut out = std::io::stdout().lock();
    for t in &list {
        let name = t["name"].as_str().unwrap_or("");
        let access = match host.may_call(agent, name) {
            Ok(()) => json!({"allowed": true}),
            Err(why) => json!({"allowed": false, "why": why}),
        };
        let declared = declared(&policy, name);
        if json_out {
            let mut t = t.clone();
            t["declared"] = declared;
            t["access"] = access;
            t["agent"] = agent.into();
            if writeln!(out, "{t}").is_err() {
                return i32::from(failed);
            }
            continue;
        }
        let decision = match access["why"].as_str() {
            None => "allowed".to_string(),
            Some(w) => format!("denied: {w}"),
        };
        let mut text = format!(
            "{name}  [{}]  {decision}\n",
            t["origin"].as_str().unwrap_or("")
        );
        if let Some(d) = t["description"].as_str().filter(|d| !d.is_empty()) {
            text.push_str(&format!("    {d}\n"));
        }
        text.push_str(&format!("    {}\n", declared_line(&declared)));
        if let Some(s) = t.get("input_schema").filter(|s| !s.is_null()) {
            text.push_str(&format!("    arguments: {}\n", compact(s)));
        }
        if out.write_all(text.as_bytes()).is_err() {
            return i32::from(failed);
        }
    }
    if !json_out {
        let _ = writeln!(
            out,
            "{} tools; access shown for agent `{agent}` (--agent NAME for another)",
            list.len()
        );
    }
    i32::from(failed)
}

/// Tool `name`'s declaration (`ais_vm::catalogue`) under `policy`'s
/// overrides: what the runtime and `aisc check --flows` decide with.
fn declared(policy: &ais_ir::ifc::FlowPolicy, name: &str) -> Json {
    let d = policy.catalogue.get(name);
    let canonical = policy.catalogue.canonical(name);
    let sink_args: Json = if !policy.is_sink(name) {
        json!([])
    } else {
        match d.and_then(|d| d.checked_args()) {
            Some(leaves) => json!(leaves),
            None => json!(["*"]),
        }
    };
    json!({
        "provider": d.map(|d| d.provider.as_str()),
        "alias_of": (canonical != name).then_some(canonical),
        "aliases": d.filter(|_| canonical == name).map(|d| d.aliases.clone()).unwrap_or_default(),
        "effect": d.map_or("side-effecting", |d| d.effect.name()),
        "trusted": policy.trusted(name),
        "sink_args": sink_args,
    })
}

fn declared_line(d: &Json) -> String {
    let sinks = match d["sink_args"].as_array() {
        Some(a) if a.is_empty() => "none".to_string(),
        Some(a) if a.iter().any(|x| x == "*") => "every argument".to_string(),
        Some(a) => a
            .iter()
            .filter_map(Json::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        None => "none".to_string(),
    };
    let mut line = format!(
        "effect: {}; results: {}; sink arguments: {sinks}",
        d["effect"].as_str().unwrap_or("?"),
        if d["trusted"] == true {
            "trusted"
        } else {
            "untrusted"
        },
    );
    if let Some(of) = d["alias_of"].as_str() {
        line.push_str(&format!("; alias of {of}"));
    }
    if let Some(a) = d["aliases"].as_array().filter(|a| !a.is_empty()) {
        let names: Vec<&str> = a.iter().filter_map(Json::as_str).collect();
        line.push_str(&format!("; aliases: {}", names.join(", ")));
    }
    line
}

fn compact(s: &Json) -> String {
    let text = s.to_string();
    if text.chars().count() > 160 {
        let cut: String = text.chars().take(157).collect();
        format!("{cut}...")
    } else {
        text
    }
}
