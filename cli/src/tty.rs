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
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "agent `{agent}` wants to run the destructive tool `{tool}` with {shown}\nallow it for this run? [y/N] "
        );
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).is_ok()
            && matches!(line.trim().to_lowercase().as_str(), "y" | "yes")
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
        self.0.finish_and_clear();
    }
}
