//! `aisc report RUN_ID|last -o run.html` and `aisc graph FILE -o
//! graph.svg|graph.html`: a run (or a program) drawn as one self-contained
//! file. `data` reads what a run kept and builds the graph, `layout` places
//! it (layered, no Graphviz), `svg` draws it, `html` makes the page.

pub mod data;
mod html;
pub mod keep;
mod layout;
pub mod otlp;
mod svg;

use super::aam::MemoryArgs;
use super::output::Output;
use super::OptArgs;
use std::path::Path;

fn write(path: &Path, text: &str) -> i32 {
    match super::load::write_atomic(path, text.as_bytes()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            1
        }
    }
}

/// The report page of run `id` (or `last`), as HTML text, with the notes
/// it shows above the run (an incomplete attempt, earlier attempts).
/// The program's dataflow graph as one `<svg>` (`aisc serve`'s console
/// lights its nodes up as a run goes).
pub fn graph_svg(program: &ais_ir::bytecode::Program) -> String {
    svg::graph_svg(&data::graph(program, None))
}

pub fn report_html(
    dir: &Path,
    store: Option<&dyn ais_vm::store::Store>,
    id: &str,
) -> Result<(String, Vec<String>), data::ReportError> {
    let run = data::load(dir, store, id)?;
    let g = data::graph(&run.program, Some(&run.events));
    let critical = data::critical_path(&run.events);
    let totals = data::totals(&run.summary, &run.events, &critical);
    let notes = run.notes();
    let title = if run.attempt > 1 {
        format!("aisc report · run {} · attempt {}", run.id, run.attempt)
    } else {
        format!("aisc report · run {}", run.id)
    };
    // The run's webhook deliveries, from the store it is journaled in.
    let deliveries = match store {
        Some(s) => s.deliveries(&run.id),
        None => ais_vm::store::open(&dir.display().to_string()).and_then(|s| s.deliveries(&run.id)),
    }
    .unwrap_or_default();
    let page = html::page(
        &title,
        &svg::graph_svg(&g),
        Some((&run.events, &critical, &totals)),
        &notes,
        &html::webhooks_section(&deliveries),
    );
    Ok((page, notes))
}

/// `aisc report`.
pub fn report(run_id: &str, mem: &MemoryArgs, out: &Path) -> i32 {
    let Some(dir) = ais_vm::journal::dir_of(&mem.storage()) else {
        eprintln!("error: `--memory :memory:` keeps no runs to report on");
        return 2;
    };
    // A run a worker took from a shared `--store` is journaled there; its
    // telemetry is in the memory directory of the worker that ran it.
    let store = match mem.store_url() {
        Some(_) => match mem.run_store() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        },
        None => None,
    };
    match report_html(&dir, store.as_deref(), run_id) {
        Ok((page, notes)) => {
            // Said here too: a page from partial telemetry must not pass
            // for a whole run's.
            for n in &notes {
                eprintln!("note: {n}");
            }
            write(out, &page)
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `aisc graph`: the static graph, as SVG or (`.html`) a page.
/// Any other extension is a usage error (exit 2), not an SVG under a name
/// that says otherwise.
pub fn graph(out: &mut Output, file: &Path, opt: &OptArgs, dest: &Path) -> i32 {
    let ext = dest
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let html =
        match ext.as_deref() {
            Some("html" | "htm") => true,
            Some("svg") => false,
            _ => {
                eprintln!(
                "error: `{}`: aisc graph writes SVG (`.svg`) or an HTML page (`.html`), not {}\n  \
                 = help: write `.svg` and convert it (e.g. `rsvg-convert -o graph.png graph.svg`), \
                 or open the `.html` page in a browser",
                dest.display(),
                ext.map_or_else(|| "a file without an extension".to_string(), |e| format!("`.{e}`"))
            );
                return 2;
            }
        };
    let Some(loaded) = super::load::load(out, file, opt) else {
        return 1;
    };
    let g = data::graph(&loaded.program, None);
    let svg = svg::graph_svg(&g);
    if html {
        let title = format!("aisc graph · {}", file.display());
        write(dest, &html::page(&title, &svg, None, &[], ""))
    } else {
        write(
            dest,
            &format!("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n{svg}\n"),
        )
    }
}
