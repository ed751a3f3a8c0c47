//! The AAM's half of `aisc config show` and `aisc doctor`: the tool, memory,
//! access, remote-agent, policy, telemetry and store sections as they take
//! effect, and a live check of each tool provider (MCP servers started,
//! subprocess commands found, the search provider and remote agents asked).
//! The backends' half is `ais_vm::config::Settings::{show, doctor}`.

use ais_vm::aam::config::AamConfig;
use ais_vm::config::Settings;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| q(s)).collect();
    format!("[{}]", quoted.join(", "))
}

/// The sections `Settings::show` does not print.
pub fn show(settings: &Settings, aam: &AamConfig) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n[memory]");
    let _ = writeln!(o, "stm_capacity = {}", aam.memory.stm_capacity);
    let _ = writeln!(o, "lru_k = {}", aam.memory.lru_k);
    let _ = writeln!(o, "\n[tools]");
    let _ = writeln!(o, "workspace = {}", q(&aam.workspace.display().to_string()));
    let _ = writeln!(o, "http_timeout_s = {}", aam.http_timeout.as_secs_f64());
    let _ = writeln!(o, "destructive = {}", list(&aam.destructive));
    if !aam.concurrency.is_empty() {
        let per: Vec<String> = aam
            .concurrency
            .iter()
            .map(|(k, v)| format!("{} = {v}", q(k)))
            .collect();
        let _ = writeln!(o, "concurrency = {{ {} }}", per.join(", "));
    }
    for s in &aam.subprocess {
        let _ = writeln!(o, "\n[[tools.subprocess]]");
        let _ = writeln!(o, "name = {}", q(&s.name));
        let _ = writeln!(o, "command = {}", list(&s.command));
        let _ = writeln!(o, "timeout_s = {}", s.timeout_s);
        if !s.env.is_empty() {
            // Values may be secrets: names only.
            let names: Vec<String> = s.env.keys().cloned().collect();
            let _ = writeln!(o, "# env: {} (values hidden)", names.join(", "));
        }
    }
    match &aam.search {
        Some(s) => {
            let _ = writeln!(o, "\n[tools.search]");
            let _ = writeln!(o, "url = {}", q(&s.url));
            if let Some(v) = &s.api_key_env {
                let set = if std::env::var_os(v).is_some() {
                    "set"
                } else {
                    "NOT SET"
                };
                let _ = writeln!(o, "api_key_env = {}  # {set}", q(v));
            }
        }
        None => {
            let _ = writeln!(
                o,
                "\n# [tools.search]: none (search is simulated on the simulator, refused otherwise)"
            );
        }
    }
    for m in &aam.mcp_servers {
        let _ = writeln!(o, "\n[[mcp_servers]]");
        let _ = writeln!(o, "name = {}", q(&m.name));
        let _ = writeln!(o, "command = {}", list(&m.command));
        let _ = writeln!(o, "# tools named {}*", m.prefix());
        let _ = writeln!(o, "timeout_s = {}", m.timeout_s);
        if let Some(c) = m.concurrency {
            let _ = writeln!(o, "concurrency = {c}");
        }
        if !m.destructive.is_empty() {
            let _ = writeln!(o, "destructive = {}", list(&m.destructive));
        }
    }
    let _ = writeln!(o, "\n[access]");
    let _ = writeln!(o, "readonly_default = {}", aam.access.readonly_default);
    for (name, map) in [("allow", &aam.access.allow), ("deny", &aam.access.deny)] {
        for (agent, tools) in map {
            let _ = writeln!(o, "{name}.{} = {}", q(agent), list(tools));
        }
    }
    for r in &aam.remote_agents {
        let _ = writeln!(o, "\n[[remote_agents]]");
        let _ = writeln!(o, "name = {}", q(&r.name));
        let _ = writeln!(o, "url = {}", q(&r.url));
        let _ = writeln!(o, "protocol = {}", q(&r.protocol));
        if let Some(v) = &r.api_key_env {
            let set = if std::env::var_os(v).is_some() {
                "set"
            } else {
                "NOT SET"
            };
            let _ = writeln!(o, "api_key_env = {}  # {set}", q(v));
        }
    }
    let p = &settings.config.policy;
    let _ = writeln!(o, "\n[policy]");
    let _ = writeln!(o, "mode = {}", q(&format!("{:?}", p.mode).to_lowercase()));
    let _ = writeln!(o, "trusted = {}", list(&p.trusted));
    let _ = writeln!(o, "untrusted = {}", list(&p.untrusted));
    if !p.sinks.is_empty() {
        let names: Vec<String> = p.sinks.keys().cloned().collect();
        let _ = writeln!(o, "# sink rules for: {}", names.join(", "));
    }
    let t = &settings.config.telemetry;
    let _ = writeln!(o, "\n[telemetry]");
    let _ = writeln!(o, "text_limit = {}", t.limit);
    let _ = writeln!(o, "redact = {}", t.redact);
    match &settings.config.store {
        Some(url) => {
            let _ = writeln!(o, "\nstore = {}", q(&ais_vm::store::postgres::redact(url)));
        }
        None => {
            let _ = writeln!(o, "\n# store: the memory directory's runs.db (SQLite)");
        }
    }
    o
}

/// One provider's check: `ok` and what was seen.
struct Check {
    ok: bool,
    line: String,
}

/// Starts each MCP server, looks for each subprocess command, asks the
/// search provider and each remote agent; a line per provider and whether
/// all answered.
pub fn doctor(aam: &AamConfig) -> (String, bool) {
    let mut checks = Vec::new();
    for s in &aam.subprocess {
        let cmd = s.command.first().map(String::as_str).unwrap_or("");
        checks.push(match find_command(cmd, s.cwd.as_deref()) {
            Some(p) => Check {
                ok: true,
                line: format!("tool {} [subprocess]: {} found", s.name, p),
            },
            None => Check {
                ok: false,
                line: format!("tool {} [subprocess]: command `{cmd}` not found", s.name),
            },
        });
    }
    if !aam.mcp_servers.is_empty() {
        match ais_vm::aam::AamHost::open(ais_vm::aam::AamOptions {
            storage: ais_vm::aam::Storage::Ephemeral,
            config: aam.clone(),
            confirm: ais_vm::aam::Confirm::Deny,
            console: None,
        }) {
            Ok(host) => {
                let _ = host.start_mcp_servers();
                let tools = host.tool_list();
                for s in host.mcp_status() {
                    let name = s["name"].as_str().unwrap_or("?");
                    let prefix = aam
                        .mcp_servers
                        .iter()
                        .find(|m| m.name == name)
                        .map(|m| m.prefix())
                        .unwrap_or_default();
                    let n = tools
                        .iter()
                        .filter(|t| {
                            t["origin"] == "mcp"
                                && t["name"].as_str().is_some_and(|x| x.starts_with(&prefix))
                        })
                        .count();
                    checks.push(if s["state"] == "running" {
                        Check {
                            ok: true,
                            line: format!("mcp {name}: running, {n} tools"),
                        }
                    } else {
                        Check {
                            ok: false,
                            line: format!(
                                "mcp {name}: {} {}",
                                s["state"].as_str().unwrap_or("?"),
                                s["error"].as_str().unwrap_or("")
                            ),
                        }
                    });
                }
            }
            Err(e) => checks.push(Check {
                ok: false,
                line: format!("mcp: cannot open a host: {e}"),
            }),
        }
    }
    if let Some(s) = &aam.search {
        let url = format!("{}/search", s.url.trim_end_matches('/'));
        checks.push(match get_json(&url, &[("q", "aisc doctor"), ("format", "json")]) {
            Ok(j) if j.get("results").is_some_and(|r| r.is_array()) => Check {
                ok: true,
                line: format!("search {}: answered ({} results)", s.url, j["results"].as_array().map_or(0, Vec::len)),
            },
            Ok(_) => Check {
                ok: false,
                line: format!("search {}: the reply has no `results` list (is JSON enabled in its formats?)", s.url),
            },
            Err(e) => Check {
                ok: false,
                line: format!("search {}: {e}", s.url),
            },
        });
    }
    for r in &aam.remote_agents {
        let url = format!(
            "{}/.well-known/agent-card.json",
            r.url.trim_end_matches('/')
        );
        checks.push(match get_json(&url, &[]) {
            Ok(card) => Check {
                ok: true,
                line: format!(
                    "remote agent {}: card of `{}`, {} skills",
                    r.name,
                    card["name"].as_str().unwrap_or("?"),
                    card["skills"].as_array().map_or(0, Vec::len)
                ),
            },
            Err(e) => Check {
                ok: false,
                line: format!("remote agent {} ({}): {e}", r.name, r.url),
            },
        });
    }
    let mut o = String::new();
    for c in &checks {
        let _ = writeln!(o, "{}  {}", if c.ok { "ok  " } else { "FAIL" }, c.line);
    }
    if !checks.is_empty() {
        let failed = checks.iter().filter(|c| !c.ok).count();
        let _ = writeln!(
            o,
            "{} tool provider(s) checked, {failed} failed",
            checks.len()
        );
    }
    (o, checks.iter().all(|c| c.ok))
}

/// `cmd` as a path (relative to `cwd`), or found on `PATH`.
fn find_command(cmd: &str, cwd: Option<&Path>) -> Option<String> {
    if cmd.is_empty() {
        return None;
    }
    if cmd.contains('/') {
        let p = match cwd {
            Some(d) if !Path::new(cmd).is_absolute() => d.join(cmd),
            _ => Path::new(cmd).to_path_buf(),
        };
        return p.is_file().then(|| p.display().to_string());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
            .map(|p| p.display().to_string())
    })
}

fn get_json(url: &str, query: &[(&str, &str)]) -> Result<serde_json::Value, String> {
    let mut b = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)));
    if ["http://127.", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| url.starts_with(p))
    {
        b = b.proxy(None);
    }
    let agent = ureq::Agent::new_with_config(b.build());
    let mut req = agent.get(url);
    for (k, v) in query {
        req = req.query(*k, *v);
    }
    let mut resp = req.call().map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(format!("HTTP {status}"));
    }
    resp.body_mut()
        .with_config()
        .limit(1 << 20)
        .read_json()
        .map_err(|e| format!("not JSON: {e}"))
}
