//! Shared by the AAM host tests: a host from a config text, and a tool call
//! as an agent makes it.
#![allow(dead_code, clippy::unwrap_used)]

use ais_vm::aam::config::AamConfig;
use ais_vm::aam::{AamHost, AamOptions, Confirm, Storage};
use ais_vm::llm::CancelToken;
use ais_vm::{Host, HostError};
use serde_json::Value as Json;
use std::path::Path;

/// An ephemeral host configured by `config` (TOML); opening may fail.
pub fn open_host(config: &str, confirm: Confirm) -> Result<AamHost, HostError> {
    AamHost::open(AamOptions {
        storage: Storage::Ephemeral,
        config: AamConfig::parse(config, None).unwrap(),
        confirm,
        console: None,
    })
}

/// An ephemeral host configured by `config` (TOML).
pub fn host(config: &str, confirm: Confirm) -> AamHost {
    open_host(config, confirm).unwrap()
}

/// `agent` calls `tool` with `args`.
pub fn inv(h: &AamHost, agent: &str, tool: &str, args: Json) -> Result<Json, HostError> {
    h.invoke_tool(agent, tool, &args, &CancelToken::new())
}

/// A path as a TOML basic string's contents.
pub fn toml_str(p: &Path) -> String {
    p.display().to_string().replace('\\', "\\\\")
}
