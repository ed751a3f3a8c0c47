//! `aisc new NAME`: a project to start from (configuration with the
//! offline simulator and commented real backends, an example agent, a test
//! script, a README and a `.gitignore`), and `aisc completions SHELL`.

use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct NewArgs {
    /// The folder to create (its last component names the project).
    pub path: PathBuf,
}

/// The configuration: the simulator is the default backend; real backends
/// are commented examples (their keys are those of docs/backends.md; a test
/// uncomments them and loads the file).
pub const CONFIG: &str = r#"# Configuration of `aisc run`, `aisc config show` and `aisc doctor` in this
# folder (docs/backends.md lists every key). Keys never live here: a backend
# names the environment variable that holds its key.

default_backend = "sim"     # `--backend NAME` or $APXM_BACKEND choose another

# The offline simulator: no network, no key; replies are labelled simulated.
[[llm_backends]]
name = "sim"
protocol = "sim"
delay_scale = 0.01          # scales the simulated latencies (0 = instant)

# An OpenAI-compatible server (OpenAI, vLLM, llama.cpp, LM Studio, OpenRouter).
# [[llm_backends]]
# name = "openai"
# protocol = "openai"
# base_url = "https://api.openai.com/v1"
# api_key_env = "OPENAI_API_KEY"
# [llm_backends.models]
# ask = "gpt-4o-mini"
# think = "gpt-4o-mini"
# reason = "gpt-4o"

# Anthropic's Messages API.
# [[llm_backends]]
# name = "anthropic"
# protocol = "anthropic"
# base_url = "https://api.anthropic.com"
# api_key_env = "ANTHROPIC_API_KEY"
# [llm_backends.models]
# ask = "claude-3-5-haiku-latest"
# reason = "claude-3-7-sonnet-latest"

# A local Ollama server (no key).
# [[llm_backends]]
# name = "ollama"
# protocol = "ollama"
# base_url = "http://127.0.0.1:11434"
# [llm_backends.models]
# ask = "llama3.2"
"#;

pub const AGENT: &str = r#"// An example agent: two independent questions run in parallel, a third
// call combines their answers.
//
// Run:  aisc run main.ais --arg topic="tide pools"

agent Assistant {
    @entry flow main(topic: str) -> str {
        let facts = ask("List three surprising facts about {topic}.")
        let doubts = ask("What do people often get wrong about {topic}?")
        return think("Write a short, friendly explanation of {topic}.", facts, doubts)
    }
}
"#;

pub const TEST: &str = r#"#!/bin/sh
# The project's checks: the program type-checks, is formatted, and runs to
# the end on the offline simulator (no network, nothing kept in memory).
set -e
cd "$(dirname "$0")"
aisc check main.ais
aisc fmt --check main.ais
aisc run main.ais --backend sim --memory :memory: --sim-delay-scale 0 --arg topic="tide pools"
"#;

pub const GITIGNORE: &str = r#"# Agent memory, run journals and recordings live in .apxm/; the
# configuration there is part of the project.
.apxm/*
!.apxm/config.toml
*.apxmobj
"#;

fn readme(name: &str) -> String {
    format!(
        "# {name}\n\nAn AIS project. `main.ais` holds the agent; `.apxm/config.toml` chooses the\n\
         LLM backend (the offline simulator until you uncomment a real one).\n\n\
         | command | does |\n|---|---|\n\
         | `aisc check main.ais` | type-check, report every error |\n\
         | `aisc run main.ais --arg topic=\"tide pools\"` | run (on the simulator unless configured otherwise) |\n\
         | `aisc fmt main.ais` | format |\n\
         | `sh test.sh` | the checks: check, format check, a run on the simulator |\n"
    )
}

#[derive(Debug, thiserror::Error)]
pub enum NewError {
    #[error("`{0}` already exists and is not an empty folder; nothing was written")]
    Exists(PathBuf),
    #[error("cannot create `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The files of a new project, relative to its folder.
pub fn files(name: &str) -> Vec<(&'static str, String)> {
    vec![
        (".apxm/config.toml", CONFIG.to_string()),
        ("main.ais", AGENT.to_string()),
        ("test.sh", TEST.to_string()),
        ("README.md", readme(name)),
        (".gitignore", GITIGNORE.to_string()),
    ]
}

/// Creates the project at `path`; refuses an existing file or non-empty
/// folder.
pub fn create(path: &Path) -> Result<Vec<PathBuf>, NewError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NewError::Io { path, source }
    };
    if path.exists() {
        let empty = path.is_dir() && std::fs::read_dir(path).map_err(io(path))?.next().is_none();
        if !empty {
            return Err(NewError::Exists(path.to_path_buf()));
        }
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "project".into());
    let mut written = Vec::new();
    for (rel, content) in files(&name) {
        let file = path.join(rel);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        std::fs::write(&file, content).map_err(io(&file))?;
        #[cfg(unix)]
        if rel.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
                .map_err(io(&file))?;
        }
        written.push(file);
    }
    Ok(written)
}

pub fn new(args: &NewArgs) -> i32 {
    match create(&args.path) {
        Ok(files) => {
            for f in files {
                println!("created {}", f.display());
            }
            println!(
                "next: cd {} && aisc run main.ais --arg topic=\"tide pools\"",
                args.path.display()
            );
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `aisc completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    use clap::CommandFactory;
    let mut cmd = crate::Cli::command();
    // Into a buffer, then printed: a closed stdout ends aisc quietly
    // (`output::exit_quietly_when_stdout_closes`), which clap_complete's own
    // write (it panics with its own message) would not.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "aisc", &mut script);
    print!("{}", String::from_utf8_lossy(&script));
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use ais_vm::config::{Env, Flags, Settings};

    fn load(dir: &Path, text: &str) -> Result<Settings, String> {
        let path = dir.join("config.toml");
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        let flags = Flags {
            config: Some(path),
            ..Flags::default()
        };
        Settings::load(&flags, &Env::empty(dir)).map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn the_config_selects_the_simulator() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = load(dir.path(), CONFIG).expect("the generated config loads");
        assert_eq!(s.backend, "sim");
    }

    #[test]
    fn every_commented_backend_is_valid_config() {
        // Uncommenting the examples gives a file the loader accepts, with
        // one backend per example.
        let uncommented: String = CONFIG
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest) if rest.starts_with('[') || rest.contains(" = ") => rest,
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let s = load(dir.path(), &uncommented).expect("the uncommented config loads");
        for name in ["sim", "openai", "anthropic", "ollama"] {
            assert!(s.config.backend(name).is_some(), "no backend {name}");
        }
    }

    #[test]
    fn an_existing_non_empty_folder_is_refused_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let keep = dir.path().join("keep.txt");
        std::fs::write(&keep, "mine").expect("write");
        assert!(matches!(create(dir.path()), Err(NewError::Exists(_))));
        assert_eq!(std::fs::read_to_string(&keep).expect("read"), "mine");
        assert!(!dir.path().join("main.ais").exists());
    }

    #[test]
    fn the_example_agent_is_formatted() {
        assert_eq!(
            ais_compiler::format::format_source(AGENT).as_deref(),
            Ok(AGENT)
        );
    }
}
