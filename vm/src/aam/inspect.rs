//! Inspection of a memory directory: `aisc memory show|search|clear` and
//! `aisc trace RUN_ID`. Everything returns text (or JSON) for the CLI.

use super::{episodic, ltm::Ltm, Storage, DB_FILE, LOG_FILE, LTM_NS};
use crate::host::HostError;
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};

fn dir_of(storage: &Storage) -> Result<&Path, HostError> {
    match storage {
        Storage::Dir(d) => Ok(d),
        Storage::Ephemeral => Err(HostError::new(
            "memory.ephemeral",
            "`:memory:` storage ends with its run; there is nothing to inspect",
        )),
    }
}

fn open_ltm(dir: &Path) -> Result<Option<Ltm>, HostError> {
    let db = dir.join(DB_FILE);
    if !db.exists() {
        return Ok(None);
    }
    Ltm::open(Some(&db)).map(Some)
}

/// The episodic log of a memory directory (`None` when it has neither a
/// database nor a legacy log file), with the warning of a legacy import.
fn open_log(dir: &Path) -> Result<Option<(episodic::Episodic, Option<String>)>, HostError> {
    let db = dir.join(DB_FILE);
    if !db.exists() && !dir.join(LOG_FILE).exists() {
        return Ok(None);
    }
    // The LTM's migration creates the table and checks the schema version.
    Ltm::open(Some(&db))?;
    episodic::Episodic::open(&db).map(Some)
}

/// The records matching `filter`, with the warning of a legacy import.
fn records(
    dir: &Path,
    filter: &episodic::Filter<'_>,
) -> Result<(Vec<Json>, Option<String>), HostError> {
    match open_log(dir)? {
        Some((log, warn)) => Ok((log.select(filter)?, warn)),
        None => Ok((Vec::new(), None)),
    }
}

fn one_line(v: &Json, max: usize) -> String {
    let s = match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    let s = s.replace('\n', " ");
    if s.chars().count() > max {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    } else {
        s
    }
}

/// Which tier(s) an inspection command covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Ltm,
    Episodic,
    All,
}

/// `aisc memory show`: LTM entries (per agent) and an episodic summary.
pub fn show(
    storage: &Storage,
    agent: Option<&str>,
    which: Which,
    as_json: bool,
) -> Result<String, HostError> {
    let dir = dir_of(storage)?;
    let mut out = String::new();
    let mut js = json!({"dir": dir.display().to_string()});
    if which != Which::Episodic {
        let mut entries = Vec::new();
        if let Some(ltm) = open_ltm(dir)? {
            let agents: Vec<String> = match agent {
                Some(a) => vec![a.to_string()],
                None => ltm.agents(LTM_NS)?.into_iter().map(|(a, _)| a).collect(),
            };
            for a in agents {
                for e in ltm.all(&a, LTM_NS)? {
                    entries.push(e);
                }
            }
        }
        out.push_str(&format!(
            "LTM ({}): {} entries\n",
            dir.join(DB_FILE).display(),
            entries.len()
        ));
        for e in &entries {
            out.push_str(&format!(
                "  {}  {} = {}\n",
                e.agent,
                e.key,
                one_line(&e.value, 100)
            ));
        }
        js["ltm"] = Json::Array(
            entries
                .iter()
                .map(|e| json!({"agent": e.agent, "key": e.key, "value": e.value, "seq": e.seq,
                                "updated": ais_stdlib::time::rfc3339(u64::try_from(e.updated_ms).unwrap_or(0))}))
                .collect(),
        );
    }
    if which != Which::Ltm {
        let (recs, warn) = records(
            dir,
            &episodic::Filter {
                agent,
                ..episodic::Filter::default()
            },
        )?;
        let recs: Vec<&Json> = recs.iter().collect();
        let mut runs: Vec<(String, usize, String)> = Vec::new();
        for r in &recs {
            let run = r
                .get("run")
                .and_then(Json::as_str)
                .unwrap_or("?")
                .to_string();
            let time = r
                .get("time")
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_string();
            match runs.iter_mut().find(|x| x.0 == run) {
                Some(x) => x.1 += 1,
                None => runs.push((run, 1, time)),
            }
        }
        let notes: Vec<&&Json> = recs
            .iter()
            .filter(|r| r.get("op").and_then(Json::as_str) == Some("note"))
            .collect();
        out.push_str(&format!(
            "episodic ({}): {} records in {} runs, {} notes\n",
            dir.join(DB_FILE).display(),
            recs.len(),
            runs.len(),
            notes.len()
        ));
        for (run, n, time) in &runs {
            out.push_str(&format!("  run {run}  {time}  {n} records\n"));
        }
        for n in &notes {
            out.push_str(&format!(
                "  note  {}  {}{}\n",
                n.get("agent").and_then(Json::as_str).unwrap_or("?"),
                n.get("key")
                    .and_then(Json::as_str)
                    .map(|k| format!("{k} = "))
                    .unwrap_or_default(),
                one_line(n.get("value").unwrap_or(&Json::Null), 100)
            ));
        }
        if let Some(w) = &warn {
            out.push_str(&format!("warning: {w}\n"));
        }
        js["episodic"] = json!({
            "records": recs.len(),
            "runs": runs.iter().map(|(r, n, t)| json!({"run": r, "records": n, "start": t})).collect::<Vec<_>>(),
            "notes": notes.iter().map(|n| (**n).clone()).collect::<Vec<_>>(),
            "warning": warn,
        });
    }
    Ok(if as_json { format!("{js:#}\n") } else { out })
}

/// `aisc memory search QUERY`: LTM entries matching any word, best first.
pub fn search(
    storage: &Storage,
    query: &str,
    agent: Option<&str>,
    limit: usize,
    as_json: bool,
) -> Result<String, HostError> {
    let dir = dir_of(storage)?;
    match open_ltm(dir)? {
        Some(l) => search_in(&l, query, agent, limit, as_json),
        None => search_in(&Ltm::open(None)?, query, agent, limit, as_json),
    }
}

/// [`search`] in an open LTM (the shared store's, with `--store`).
pub fn search_in(
    ltm: &Ltm,
    query: &str,
    agent: Option<&str>,
    limit: usize,
    as_json: bool,
) -> Result<String, HostError> {
    let hits = ltm.search_ranked(agent, LTM_NS, query, limit)?;
    if as_json {
        let v: Vec<Json> = hits
            .iter()
            .map(|(e, s)| json!({"agent": e.agent, "key": e.key, "value": e.value, "score": s}))
            .collect();
        return Ok(format!("{:#}\n", Json::Array(v)));
    }
    let mut out = format!("{} matches for `{query}`\n", hits.len());
    for (e, s) in &hits {
        out.push_str(&format!(
            "  {s:6.2}  {}  {} = {}\n",
            e.agent,
            e.key,
            one_line(&e.value, 100)
        ));
    }
    Ok(out)
}

/// `aisc memory clear`: deletes LTM entries and/or the episodic log.
pub fn clear(storage: &Storage, agent: Option<&str>, which: Which) -> Result<String, HostError> {
    let dir = dir_of(storage)?;
    let mut out = String::new();
    if which != Which::Episodic {
        let n = match open_ltm(dir)? {
            Some(l) => l.clear(agent, LTM_NS)?,
            None => 0,
        };
        out.push_str(&format!("cleared {n} LTM entries\n"));
    }
    if which != Which::Ltm {
        if agent.is_some() {
            return Err(HostError::new(
                "memory.clear",
                "the episodic log is append-only: it can only be cleared as a whole (drop --agent, or use --tier ltm)",
            ));
        }
        let n = match open_log(dir)? {
            Some((log, _)) => log.clear()?,
            None => 0,
        };
        out.push_str(&format!("cleared {n} episodic records\n"));
    }
    Ok(out)
}

/// The run ids in a log, oldest first.
pub fn runs(storage: &Storage) -> Result<Vec<String>, HostError> {
    let dir = dir_of(storage)?;
    match open_log(dir)? {
        Some((log, _)) => log.runs(),
        None => Ok(Vec::new()),
    }
}

/// `aisc trace RUN_ID` (`last` is the most recent run): one line per record.
pub fn trace(storage: &Storage, run: &str, as_json: bool) -> Result<String, HostError> {
    let dir = dir_of(storage)?;
    let path: PathBuf = dir.join(DB_FILE);
    let (log, warn) = match open_log(dir)? {
        Some(l) => l,
        None => (episodic::Episodic::ephemeral()?, None),
    };
    trace_in(&log, &path.display().to_string(), run, as_json, warn)
}

/// `aisc trace` on the episodic log `log` (a memory directory's, or the
/// shared store's), named `place` in messages.
pub fn trace_in(
    log: &episodic::Episodic,
    place: &str,
    run: &str,
    as_json: bool,
    warn: Option<String>,
) -> Result<String, HostError> {
    let id = if run == "last" {
        log.runs()?
            .pop()
            .ok_or_else(|| HostError::new("trace.empty", format!("`{place}` has no runs")))?
    } else {
        run.to_string()
    };
    let recs = log.select(&episodic::Filter {
        run: Some(&id),
        ..episodic::Filter::default()
    })?;
    let mine: Vec<&Json> = recs.iter().collect();
    if mine.is_empty() {
        let known = log.runs()?;
        let tail: Vec<&String> = known.iter().rev().take(5).collect();
        return Err(HostError::new(
            "trace.unknown_run",
            format!(
                "no run `{id}` in `{place}`{}",
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (recent runs: {})",
                        tail.iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
        ));
    }
    if as_json {
        let mut s = String::new();
        for r in &mine {
            s.push_str(&r.to_string());
            s.push('\n');
        }
        return Ok(s);
    }
    let mut out = format!("run {id}: {} records\n", mine.len());
    for r in mine {
        let g = |k: &str| r.get(k).cloned().unwrap_or(Json::Null);
        let time = g("time");
        let time = time.as_str().unwrap_or("");
        let clock = time.get(11..23).unwrap_or(time);
        let op = g("op");
        let op = op.as_str().unwrap_or("?");
        let detail = match op {
            "note" => format!(
                "{}{}",
                g("key")
                    .as_str()
                    .map(|k| format!("{k} = "))
                    .unwrap_or_default(),
                one_line(&g("value"), 80)
            ),
            "inv" | "exec" => format!(
                "{}({})",
                g("inputs")
                    .get("tool")
                    .and_then(Json::as_str)
                    .unwrap_or("?"),
                one_line(g("inputs").get("args").unwrap_or(&Json::Null), 60)
            ),
            "qmem" => format!(
                "{} {}",
                g("inputs")
                    .get("tier")
                    .and_then(Json::as_str)
                    .unwrap_or("?"),
                one_line(g("inputs").get("query").unwrap_or(&Json::Null), 60)
            ),
            _ => one_line(&g("inputs"), 80),
        };
        let detail = if op == "umem" {
            format!(
                "{} {} = {}",
                g("inputs")
                    .get("tier")
                    .and_then(Json::as_str)
                    .unwrap_or("?"),
                g("inputs")
                    .get("key")
                    .map_or("-".to_string(), |k| one_line(k, 30)),
                one_line(g("inputs").get("value").unwrap_or(&Json::Null), 60)
            )
        } else {
            detail
        };
        let result = match r.get("error") {
            Some(e) => format!(
                "  ERROR {}: {}",
                e.get("code").and_then(Json::as_str).unwrap_or("?"),
                one_line(e.get("message").unwrap_or(&Json::Null), 80)
            ),
            None => match r.get("outputs") {
                Some(Json::Null) | None => String::new(),
                Some(v) => format!("  -> {}", one_line(v, 60)),
            },
        };
        let dur = r
            .get("dur_us")
            .and_then(Json::as_u64)
            .map(|d| format!(" ({:.2} ms)", d as f64 / 1000.0))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:>4} {clock} {:<12} {:<10} {detail}{result}{dur}\n",
            r.get("seq").and_then(Json::as_u64).unwrap_or(0),
            r.get("agent").and_then(Json::as_str).unwrap_or("?"),
            op,
        ));
    }
    if let Some(w) = warn {
        out.push_str(&format!("warning: {w}\n"));
    }
    Ok(out)
}
