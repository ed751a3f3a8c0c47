//! From source (or an artifact) to a validated program: `aisc build -o`,
//! `aisc inspect`, and the loading every run, report and server shares
//! (the tools and remote agents the configuration adds to the compiler's
//! environment; which files are libraries).

use super::output::Output;
use super::{BackendArgs, OptArgs};
use ais_compiler::driver;
use ais_compiler::graph_json;
use ais_ir::bytecode::{self, Program};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A program ready to run, with the source it came from (for error spans).
pub struct Loaded {
    pub program: Program,
    /// `(file name, source)` when compiled from `.ais`.
    pub source: Option<(String, String)>,
}

pub fn is_artifact(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "apxmobj")
}

/// Compiles `.ais` (checked, lowered, optimized, code-generated) or loads
/// and validates an `.apxmobj`. Diagnostics are rendered on the way.
pub fn load(out: &mut Output, path: &Path, opt: &OptArgs) -> Option<Loaded> {
    load_in(out, path, opt, &BackendArgs::default())
}

/// [`load`] with the configuration `backend` names: a call of a name the
/// language does not know is a tool call when that configuration provides
/// such a tool (a subprocess or MCP tool), as in the reference.
pub fn load_in(
    out: &mut Output,
    path: &Path,
    opt: &OptArgs,
    backend: &BackendArgs,
) -> Option<Loaded> {
    let name = path.display().to_string();
    if is_artifact(path) {
        return load_artifact(out, path).map(|program| Loaded {
            program,
            source: None,
        });
    }
    let source = out.read_source(path)?;
    let remote = remote_agents(backend);
    let plain = ais_compiler::sema::Environment {
        remote_agents: remote.clone(),
        ..Default::default()
    };
    let (mut sources, mut compiled) = compile_input(path, &source, &plain);
    // Only a name nothing in the language provides sends us to the
    // configuration (which may start MCP servers to list their tools).
    if let Err(diags) = &compiled {
        if diags.iter().any(|d| d.code == "E0114") {
            let mut env = configured_tools(backend);
            if !env.tools.is_empty() {
                env.remote_agents = remote;
                (sources, compiled) = compile_input(path, &source, &env);
            }
        }
    }
    let mut compiled = match compiled {
        Ok(c) => c,
        Err(diags) => {
            out.diagnostics_map(&sources, &diags);
            return None;
        }
    };
    out.diagnostics_map(&sources, &compiled.diagnostics);
    if let Err(e) = driver::optimize_unmeasured(&mut compiled.module, &opt.options()) {
        eprintln!("error: {e}");
        return None;
    }
    // Only the program is kept: each flow's graph is freed once compiled.
    match bytecode::compile_owned(compiled.module) {
        Ok(program) => Some(Loaded {
            program,
            source: Some((name, source)),
        }),
        Err(e) => {
            eprintln!("error: internal compiler error: code generation failed: {e}");
            None
        }
    }
}

/// The remote agents the configuration names (`[[remote_agents]]`); none
/// when it does not load (its error is reported when a run loads it).
pub(crate) fn remote_agents(backend: &BackendArgs) -> Vec<String> {
    super::config::load_all(backend)
        .map(|(_, aam)| aam.remote_agents.iter().map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

/// The subprocess and MCP tools the configuration provides, with their
/// parameters in positional order (required ones first, as their schema
/// lists them, then the others). A configuration that does not load gives
/// none: its error is reported when a run loads it.
pub(crate) fn configured_tools(backend: &BackendArgs) -> ais_compiler::sema::Environment {
    let Ok((_, aam)) = super::config::load_all(backend) else {
        return Default::default();
    };
    if aam.subprocess.is_empty() && aam.mcp_servers.is_empty() {
        return Default::default();
    }
    let Ok(host) = ais_vm::aam::AamHost::open(ais_vm::aam::AamOptions {
        storage: ais_vm::aam::Storage::Ephemeral,
        config: aam,
        confirm: ais_vm::aam::Confirm::Deny,
        console: None,
    }) else {
        return Default::default();
    };
    let tools = host
        .tool_list()
        .into_iter()
        .filter(|t| matches!(t["origin"].as_str(), Some("subprocess" | "mcp")))
        .filter_map(|t| {
            let name = t["name"].as_str()?.to_string();
            Some((
                name,
                positional_params(&t["input_schema"], &t["param_order"]),
            ))
        })
        .collect();
    ais_compiler::sema::Environment {
        tools,
        ..Default::default()
    }
}

/// A configured tool's parameters in the order positional arguments bind:
/// the schema's `required` names in their order, then its other
/// properties in the order the server wrote them (`param_order`, kept by
/// the MCP client: the parsed schema's keys are sorted), then any left, by
/// name.
fn positional_params(schema: &serde_json::Value, param_order: &serde_json::Value) -> Vec<String> {
    let mut params: Vec<String> = Vec::new();
    let mut add = |p: &str| {
        if !params.iter().any(|q| q == p) {
            params.push(p.to_string());
        }
    };
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|p| p.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let props = schema["properties"].as_object();
    for p in names(&schema["required"]) {
        add(&p);
    }
    for p in names(param_order) {
        if props.is_some_and(|m| m.contains_key(&p)) {
            add(&p);
        }
    }
    for p in props.into_iter().flat_map(|m| m.keys()) {
        add(p);
    }
    params
}

/// Writes `bytes` to `path` atomically, through a temporary file in the same
/// folder and a rename: a failed write never leaves a partial file behind.
/// A file that existed keeps its permissions.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{file_name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

pub fn build_artifact(out: &mut Output, file: &Path, output: &Path, opt: &OptArgs) -> i32 {
    let Some(loaded) = load(out, file, opt) else {
        return 1;
    };
    let bytes = match bytecode::encode(&loaded.program) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot encode the artifact: {e}");
            return 1;
        }
    };
    // The process ends once the artifact is written: freeing the program
    // piece by piece would only cost time (2-3 % of a large build).
    std::mem::forget(loaded);
    match write_atomic(output, &bytes) {
        Ok(()) => {
            out.summary(
                &format!("wrote {} ({} bytes)", output.display(), bytes.len()),
                serde_json::json!({"file": output.display().to_string(), "bytes": bytes.len()}),
            );
            0
        }
        Err(e) => {
            eprintln!("error: cannot write `{}`: {e}", output.display());
            1
        }
    }
}

/// Reads and validates an artifact; a file that is not one is reported as
/// its `L` diagnostic in the chosen error format.
fn load_artifact(out: &mut Output, path: &Path) -> Option<Program> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            out.io_error(path, &e.to_string());
            return None;
        }
    };
    match bytecode::decode(&bytes) {
        Ok(p) => Some(p),
        Err(e) => {
            let name = path.display().to_string();
            out.report(Some(&name), &ais_ir::IntoDiagnostic::into_diagnostic(e));
            None
        }
    }
}

pub fn inspect(out: &mut Output, path: &Path) -> i32 {
    match load_artifact(out, path) {
        Some(p) => {
            out.stdout(&bytecode::inspect(&p));
            0
        }
        None => 1,
    }
}

/// Compiles `.ais` source (with the files it imports) or a graph-JSON
/// document (by extension or content) to verified IR, with the front end's
/// warnings; and the program's files, to render the diagnostics.
pub(crate) fn compile_input(
    path: &std::path::Path,
    source: &str,
    env: &ais_compiler::sema::Environment,
) -> (
    ais_ir::SourceMap,
    Result<driver::Compiled, Vec<ais_ir::Diagnostic>>,
) {
    let name = path.display().to_string();
    if graph_json::is_graph_json(path, source) {
        let compiled = driver::with_deep_stack(|| graph_json::compile_with_warnings(source)).map(
            |(module, diagnostics)| driver::Compiled {
                module,
                diagnostics,
            },
        );
        return (ais_ir::SourceMap::single(name, source), compiled);
    }
    driver::with_deep_stack(|| {
        driver::compile_file(&name, path, source, &ais_compiler::program::FsLoader, env)
    })
}

/// The policy on top of the tool catalogue's declarations under `aam`
/// (`ais_vm::catalogue`): MCP servers and remote agents untrusted unless
/// their entry or `[policy] trusted` says otherwise.
pub(crate) fn with_remote_agents(
    policy: ais_ir::ifc::FlowPolicy,
    aam: &ais_vm::aam::config::AamConfig,
) -> ais_ir::ifc::FlowPolicy {
    ais_vm::catalogue::attach(policy, aam.declarations())
}

/// The files among `files` that another of them imports and that mark no
/// `@entry` flow: libraries, not served as programs of their own (they are
/// served as part of the programs that import them).
pub(crate) fn imported_libraries(files: &[PathBuf]) -> std::collections::HashSet<PathBuf> {
    use ais_compiler::syntax::ast::Member;
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut imported = std::collections::HashSet::new();
    let mut has_entry = std::collections::HashSet::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let file = ais_compiler::syntax::parse(&text).file;
        let dir = path.parent().unwrap_or(Path::new(""));
        for i in &file.imports {
            imported.insert(canonical(&dir.join(&i.path)));
        }
        let entry = file.agents.iter().any(|a| {
            a.members
                .iter()
                .any(|m| matches!(m, Member::Flow(f) if f.is_entry()))
        });
        if entry {
            has_entry.insert(canonical(path));
        }
    }
    files
        .iter()
        .filter(|p| {
            let c = canonical(p);
            imported.contains(&c) && !has_entry.contains(&c)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod imported_libraries_tests {
    #[test]
    fn a_served_file_imported_by_another_without_an_entry_is_a_library() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).expect("write");
            p
        };
        let main = write(
            "main.ais",
            "import \"lib.ais\"\nimport \"tool.ais\"\nagent M {\n    @entry flow main() -> str {\n        return L.f()\n    }\n}\n",
        );
        let lib = write(
            "lib.ais",
            "agent L {\n    flow f() -> str {\n        return \"x\"\n    }\n}\n",
        );
        // Imported, but with an entry of its own: still served.
        let tool = write(
            "tool.ais",
            "agent T {\n    @entry flow main() -> str {\n        return \"t\"\n    }\n}\n",
        );
        let libs = super::imported_libraries(&[main.clone(), lib.clone(), tool.clone()]);
        assert_eq!(libs.into_iter().collect::<Vec<_>>(), vec![lib]);
    }
}

#[cfg(test)]
mod positional_tests {
    use super::positional_params;
    use serde_json::json;

    #[test]
    fn required_first_then_the_servers_order_then_by_name() {
        let schema: serde_json::Value = serde_json::from_str(
            r#"{"properties": {"z_opt": {}, "m_req": {}, "a_opt": {}, "b_extra": {}}, "required": ["m_req"]}"#,
        )
        .unwrap_or_default();
        // The server wrote z_opt before a_opt; b_extra is not in the order.
        let order = json!(["z_opt", "m_req", "a_opt", "gone"]);
        assert_eq!(
            positional_params(&schema, &order),
            ["m_req", "z_opt", "a_opt", "b_extra"]
        );
        // Without an order the rest go by name.
        assert_eq!(
            positional_params(&schema, &serde_json::Value::Null),
            ["m_req", "a_opt", "b_extra", "z_opt"]
        );
    }
}
