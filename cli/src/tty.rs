//! What the VM asks of the terminal, implemented at the edge: the `[y/N]`
//! confirmation of destructive tools, program output and run-time warnings
//! ([`TtyConsole`]), and the progress bar ([`progress_bar`]).

use ais_vm::aam::{Confirm, Confirmer, Console};
use serde_json::Value as Json;
use std::io::{IsTerminal, Write};
use std::sync::Arc;

/// `--yes` wins; otherwise ask only when stdin is a terminal, and refuse
/// when there is nobody to ask.
pub fn confirm_mode(yes: bool) -> Confirm {
    if yes {
        Confirm::Yes
    } else if std::io::stdin().is_terminal() {
        Confirm::Ask(Arc::new(TtyConfirmer))
    } else {
        Confirm::Deny
    }
}

/// Asks on stderr, reads the answer from stdin.
struct TtyConfirmer;

impl Confirmer for TtyConfirmer {
    fn confirm(&self, agent: &str, tool: &str, args: &Json) -> bool {
        let shown: String = args.to_string().chars().take(300).collect();
        ask_yes_no(&format!(
            "agent `{agent}` wants to run the destructive tool `{tool}` with {shown}\nallow it for this run? [y/N] "
        ))
    }
}

/// The progress bar being drawn, if any: a question hides it while it
/// waits for the answer.
static SPINNER: std::sync::Mutex<Option<indicatif::ProgressBar>> = std::sync::Mutex::new(None);

/// Shows `question` on stderr (the progress bar hidden meanwhile) and
/// reads `y`/`yes` from stdin; anything else, or no input, is no.
fn ask_yes_no(question: &str) -> bool {
    let ask = || {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{question}");
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).is_ok()
            && matches!(line.trim().to_lowercase().as_str(), "y" | "yes")
    };
    let bar = SPINNER.lock().ok().and_then(|s| s.clone());
    match bar {
        Some(bar) => bar.suspend(ask),
        None => ask(),
    }
}

/// Asks about denied information flows when stdin is a terminal (`--yes`
/// does not answer for them); otherwise denials stand.
pub fn flow_approver() -> Option<Arc<dyn ais_vm::ifc::FlowApprover>> {
    std::io::stdin()
        .is_terminal()
        .then(|| Arc::new(TtyFlowApprover) as Arc<dyn ais_vm::ifc::FlowApprover>)
}

/// Shows the denial (sink, argument, untrusted sources, path) on stderr
/// and reads `y`/`n` from stdin.
#[derive(Debug)]
struct TtyFlowApprover;

impl ais_vm::ifc::FlowApprover for TtyFlowApprover {
    fn approve(&self, agent: &str, denial: &ais_vm::exec::OpError) -> bool {
        let p = &denial.payload;
        let list = |v: &Json| -> String {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Json::as_str)
                        .collect::<Vec<_>>()
                        .join(" -> ")
                })
                .unwrap_or_default()
        };
        ask_yes_no(&format!(
            "policy: agent `{agent}` would send untrusted data to `{}` argument `{}`\n  from: {}\n  path: {}\nallow this flow for this run? [y/N] ",
            p["sink"].as_str().unwrap_or("?"),
            p["argument"].as_str().unwrap_or("?"),
            list(&p["sources"]).replace(" -> ", ", "),
            list(&p["path"]),
        ))
    }
}

/// Printed lines on stdout, warnings on stderr.
pub struct TtyConsole;

impl Console for TtyConsole {
    fn print(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
    }

    fn warn(&self, message: &str) {
        let _ = writeln!(std::io::stderr(), "warning: {message}");
    }
}

/// A spinner on stderr with the run's op count and calls in flight; `None`
/// when `quiet` or stderr is not a terminal (nothing to draw on).
pub fn progress_bar(quiet: bool) -> Option<ais_vm::progress::ProgressSink> {
    (!quiet && std::io::stderr().is_terminal())
        .then(|| ais_vm::progress::ProgressSink(Arc::new(Spinner::new())))
}

struct Spinner(indicatif::ProgressBar);

impl Spinner {
    fn new() -> Spinner {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        if let Ok(mut s) = SPINNER.lock() {
            *s = Some(bar.clone());
        }
        Spinner(bar)
    }
}

impl ais_vm::progress::ProgressObserver for Spinner {
    fn update(&self, p: &ais_vm::progress::Progress) {
        self.0.set_message(format!(
            "ops {} (program has {}) · LLM calls in flight {} (queued {}) · tools {}",
            p.ops_done, p.ops_total, p.llm_busy, p.llm_queued, p.tools_busy,
        ));
        self.0.tick();
    }

    fn finish(&self) {
        if let Ok(mut s) = SPINNER.lock() {
            *s = None;
        }
        self.0.finish_and_clear();
    }
}
