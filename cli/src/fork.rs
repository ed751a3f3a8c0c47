//! `aisc fork RUN --at STEP [--set VALUE]`: a new run of the same program
//! and arguments that replays the original's journal, with the value of
//! one journaled op replaced, and executes only what depends on it (see
//! `ais_vm::journal::fork_in`). Without `--at`, the run's steps are listed
//! to choose from.

use super::output::Output;
use super::runs::{self, ResumeArgs};
use super::BackendArgs;
use ais_vm::journal::{self, ForkAt};

/// Options of `aisc fork`.
#[derive(clap::Args, Debug, Clone)]
pub struct ForkArgs {
    /// The journal step to fork at: its number as `aisc fork RUN` lists
    /// them, or a prefix of its key (8+ hex digits).
    #[arg(long, value_name = "STEP")]
    pub at: Option<String>,
    /// The op's value in the fork (JSON, else text). Without it the fork
    /// reproduces the original (every effect replayed).
    #[arg(long, value_name = "VALUE", requires = "at")]
    pub set: Option<String>,
    /// Make the fork without running it (`aisc resume FORK` runs it).
    #[arg(long)]
    pub no_run: bool,
    #[command(flatten)]
    pub run: ResumeArgs,
}

fn preview(v: &serde_json::Value) -> String {
    let text = match v {
        serde_json::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    let mut cut: String = text.chars().take(70).collect();
    if text.chars().count() > 70 {
        cut.push('…');
    }
    cut.replace('\n', " ")
}

/// `aisc fork RUN ...`.
pub fn fork(out: &mut Output, run_id: &str, f: &ForkArgs, backend: &BackendArgs) -> i32 {
    let store = match runs::journal_store(&f.run.memory) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Some(at) = &f.at else {
        return match journal::fork_steps(store.as_ref(), run_id) {
            Ok(steps) => {
                println!("steps of run {run_id} (fork with --at STEP [--set VALUE]):");
                for s in steps {
                    println!(
                        "{:>5}  {:<10} {:<8} {:>6} tok  {}  {}",
                        s.step,
                        s.op,
                        s.kind,
                        s.tokens,
                        &s.key[..s.key.len().min(12)],
                        s.value.as_ref().map(preview).unwrap_or_default()
                    );
                }
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    };
    let value = f
        .set
        .as_ref()
        .map(|t| serde_json::from_str(t).unwrap_or_else(|_| serde_json::Value::String(t.clone())));
    let forked = match journal::fork_in(&store, run_id, &ForkAt::parse(at), value.as_ref()) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            if e.code == "fork.no_op" {
                eprintln!("help: `aisc fork {run_id}` lists the steps");
            }
            return 1;
        }
    };
    eprintln!(
        "forked run {run_id} at step {} (`{}`{}) into {}: {} journal entries copied",
        forked.at.step,
        forked.at.op,
        match &value {
            Some(v) => format!(", value set to {}", preview(v)),
            None => ", value kept".into(),
        },
        forked.id,
        forked.copied,
    );
    if f.no_run {
        println!("{}", forked.id);
        return 0;
    }
    let code = runs::resume(out, &forked.id, &f.run, backend);
    match journal::fork_cost(store.as_ref(), run_id, &forked.id) {
        Ok(c) => eprintln!(
            "fork {}: {} LLM call{} made ({} tokens); {} replayed from {run_id} ({} tokens saved)",
            forked.id,
            c.executed.0,
            if c.executed.0 == 1 { "" } else { "s" },
            c.executed.1,
            c.replayed.0,
            c.replayed.1,
        ),
        Err(e) => eprintln!("warning: cannot compare the fork with {run_id}: {e}"),
    }
    code
}
