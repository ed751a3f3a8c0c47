//! Shared by the tests of model-driven tool calls and inner plans: hosts
//! whose tools count the calls that reach them.
#![allow(dead_code, clippy::unwrap_used)]

use ais_testkit::MemoryHost;
use ais_vm::host::HostError;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// `lookup(key)` (knows `capital`) and `add(a, b)`, counting the calls
/// that reach them.
pub fn lookup_add_host() -> (Arc<MemoryHost>, Arc<AtomicUsize>) {
    let host = Arc::new(MemoryHost::new());
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    host.register_tool("lookup", move |args| {
        c.fetch_add(1, Ordering::SeqCst);
        match args["key"].as_str() {
            Some("capital") => Ok(json!("Paris")),
            Some(k) => Err(HostError::new("lookup.missing", format!("no fact `{k}`"))),
            None => Err(HostError::new("lookup.usage", "key must be a string")),
        }
    });
    let c = n.clone();
    host.register_tool("add", move |args| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(json!(
            args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0)
        ))
    });
    (host, n)
}

/// The AAM host with `dir` as its workspace and the default access rules:
/// writes need an explicit allow, which no agent has.
pub fn aam_host(dir: &std::path::Path) -> Arc<ais_vm::aam::AamHost> {
    let cfg = format!(
        "[tools]\nworkspace = \"{}\"\n",
        dir.display().to_string().replace('\\', "\\\\")
    );
    let config = ais_vm::aam::config::AamConfig::parse(&cfg, None).unwrap();
    Arc::new(
        ais_vm::aam::AamHost::open(ais_vm::aam::AamOptions {
            storage: ais_vm::aam::Storage::Ephemeral,
            config,
            confirm: ais_vm::aam::Confirm::Deny,
            console: None,
        })
        .unwrap(),
    )
}
