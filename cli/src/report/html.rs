//! The self-contained HTML page: inline CSS, SVG and script, no network.
//! The run's events travel as JSON in a `<script type="application/json">`
//! element with `<`, `>` and `&` escaped, and the script shows them with
//! `textContent` only: no user text is ever parsed as HTML.

use super::svg::esc;
use serde_json::{Map, Value as Json};
use std::fmt::Write as _;

/// JSON safe inside a `<script>` element.
fn script_json(v: &Json) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

const TL_W: f64 = 960.0;
const TL_ROW: f64 = 22.0;
const TL_LEFT: f64 = 80.0;

/// The timeline: one row per track, one bar per event, critical-path bars
/// marked.
fn timeline_svg(events: &[Map<String, Json>], critical: &[usize]) -> String {
    let n = |e: &Map<String, Json>, k: &str| e.get(k).and_then(Json::as_u64).unwrap_or(0);
    let mut tracks: Vec<String> = events
        .iter()
        .map(|e| {
            e.get("track")
                .and_then(Json::as_str)
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    let order = |t: &str| -> (u8, u64) {
        let (kind, i) = t.split_once(':').unwrap_or((t, "0"));
        let k = match kind {
            "worker" => 0,
            "llm" => 1,
            _ => 2,
        };
        (k, i.parse().unwrap_or(0))
    };
    tracks.sort_by_key(|t| order(t));
    tracks.dedup();
    let end = events
        .iter()
        .map(|e| n(e, "end_ns"))
        .max()
        .unwrap_or(0)
        .max(1);
    let scale = TL_W / end as f64;
    let height = tracks.len() as f64 * TL_ROW + 30.0;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{:.0}" height="{height:.0}" font-family="system-ui, sans-serif">"#,
        TL_LEFT + TL_W + 50.0
    );
    for (r, t) in tracks.iter().enumerate() {
        let y = r as f64 * TL_ROW;
        let _ = write!(
            o,
            r#"<text class="track" x="4" y="{:.1}">{}</text><line class="lane" x1="{TL_LEFT}" x2="{:.0}" y1="{:.1}" y2="{:.1}"/>"#,
            y + 15.0,
            esc(t),
            TL_LEFT + TL_W,
            y + TL_ROW,
            y + TL_ROW
        );
    }
    for (i, e) in events.iter().enumerate() {
        let t = e.get("track").and_then(Json::as_str).unwrap_or("?");
        let row = tracks.iter().position(|x| x == t).unwrap_or(0);
        let x = TL_LEFT + n(e, "start_ns") as f64 * scale;
        let w = (n(e, "end_ns").saturating_sub(n(e, "start_ns")) as f64 * scale).max(1.5);
        let opcode = e.get("opcode").and_then(Json::as_str).unwrap_or("?");
        let kind = ais_ir::Opcode::from_mnemonic(opcode).map_or("data", super::data::kind_of);
        let status = e.get("status").and_then(Json::as_str).unwrap_or("ok");
        let key = super::data::node_key(n(e, "flow_id"), n(e, "region"), n(e, "op"));
        let crit = if critical.contains(&i) { " crit" } else { "" };
        let flow = e.get("flow").and_then(Json::as_str).unwrap_or("");
        let _ = write!(
            o,
            r#"<rect class="bar kind-{kind} st-{}{crit}" data-ev="{i}" data-key="{}" x="{x:.2}" y="{:.1}" width="{w:.2}" height="{:.1}"><title>{} {} · {:.3} ms</title></rect>"#,
            esc(status),
            esc(&key),
            row as f64 * TL_ROW + 3.0,
            TL_ROW - 6.0,
            esc(opcode),
            esc(flow),
            (n(e, "end_ns").saturating_sub(n(e, "start_ns"))) as f64 / 1e6,
        );
    }
    let axis_y = tracks.len() as f64 * TL_ROW + 18.0;
    for k in 0..=4 {
        let x = TL_LEFT + TL_W * k as f64 / 4.0;
        let _ = write!(
            o,
            r#"<text class="axis" x="{x:.1}" y="{axis_y:.1}">{:.1} ms</text>"#,
            end as f64 / 1e6 * k as f64 / 4.0
        );
    }
    o.push_str("</svg>");
    o
}

fn total_line(totals: &Json) -> String {
    let f = |k: &str| totals.get(k).and_then(Json::as_f64).unwrap_or(0.0);
    let u = |k: &str| totals.get(k).and_then(Json::as_u64).unwrap_or(0);
    let items = [
        ("makespan", format!("{:.2} ms", f("makespan_ms"))),
        (
            "critical path",
            format!(
                "{:.2} ms over {} ops (estimate {} ms)",
                f("critical_path_ms"),
                u("critical_path_ops"),
                u("critical_path_estimate_ms")
            ),
        ),
        ("ops", u("ops").to_string()),
        ("LLM calls", u("llm_calls").to_string()),
        ("tool calls", u("tool_calls").to_string()),
        (
            "tokens",
            match (u("cache_read_tokens"), u("cache_write_tokens")) {
                (0, 0) => format!("{} in / {} out", u("input_tokens"), u("output_tokens")),
                (cached, 0) => format!(
                    "{} in ({cached} cached) / {} out",
                    u("input_tokens"),
                    u("output_tokens")
                ),
                (cached, written) => format!(
                    "{} in ({cached} cached, {written} written to cache) / {} out",
                    u("input_tokens"),
                    u("output_tokens")
                ),
            },
        ),
        ("cost", format!("${:.6}", f("cost_usd"))),
        ("LLM requests", u("requests").to_string()),
        ("retries", u("retries").to_string()),
        ("failed ops", u("failed_ops").to_string()),
    ];
    let spec = speculation_line(totals.get("speculation"));
    let mut o = String::from(r#"<dl class="totals">"#);
    for (k, v) in items.into_iter().chain(spec.map(|v| ("speculation", v))) {
        let _ = write!(o, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(&v));
    }
    o.push_str("</dl>");
    o
}

/// What speculation of branch arms did (`None`: it was off): calls
/// started early (LLM and read-only tool calls, the tool calls also
/// apart), adopted and discarded, the time adopted calls had
/// already run, and the discarded calls' cost against the budget.
fn speculation_line(s: Option<&Json>) -> Option<String> {
    let s = s.filter(|s| s.is_object())?;
    let f = |k: &str| s.get(k).and_then(Json::as_f64).unwrap_or(0.0);
    let u = |k: &str| s.get(k).and_then(Json::as_u64).unwrap_or(0);
    // Read-only tool calls among them (absent in older summaries).
    let tools = match u("tool_speculated") {
        0 => String::new(),
        n => format!(
            " (tool calls: {n} started, {} adopted, {} discarded)",
            u("tool_adopted"),
            u("tool_discarded")
        ),
    };
    Some(format!(
        "{} calls started early: {} adopted, {} discarded{tools}; {:.1} ms saved; extra ${:.6} (budget {} calls, ${:.4})",
        u("speculated"),
        u("adopted"),
        u("discarded"),
        f("saved_ms"),
        f("extra_cost_usd"),
        u("max_extra_calls"),
        f("max_extra_cost_usd"),
    ))
}

/// A run's part of the page: its events, the critical path (indices into
/// `events`) and its totals.
pub type RunView<'a> = (&'a [Map<String, Json>], &'a [usize], &'a Json);

/// The whole page; `run` is `None` for a static graph. `notes` are shown
/// above everything (partial telemetry, earlier attempts).
/// The run's webhook deliveries and each attempt (number, HTTP status,
/// error, duration) from the store: URLs with their credentials masked;
/// the errors were masked when recorded; no signature or secret is kept.
/// Empty when the run has none.
pub fn webhooks_section(list: &[ais_vm::store::webhook::DeliveryInfo]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<h2>Webhooks</h2><p class="hint">Deliveries of this run's events (sent after the run; read from the store when this page was made).</p><table class="webhooks"><tr><th>delivery</th><th>event</th><th>status</th><th>URL</th><th>attempt</th><th>HTTP</th><th>error</th><th>ms</th></tr>"#,
    );
    for d in list {
        let url = ais_vm::llm::secret::redact_url(&d.url);
        let head = format!(
            "<td>{}</td><td>run.{}</td><td>{}</td><td>{}</td>",
            esc(&d.id),
            esc(&d.event),
            esc(&d.status),
            esc(&url)
        );
        if d.attempts.is_empty() {
            let _ = write!(
                out,
                "<tr>{head}<td>none yet</td><td></td><td></td><td></td></tr>"
            );
        }
        for a in &d.attempts {
            let _ = write!(
                out,
                "<tr>{head}<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                a.n,
                a.http_status.map(|s| s.to_string()).unwrap_or_default(),
                esc(a.error.as_deref().unwrap_or("")),
                a.duration_ms
            );
        }
    }
    out.push_str("</table>");
    out
}

pub fn page(
    title: &str,
    graph_svg: &str,
    run: Option<RunView<'_>>,
    notes: &[String],
    webhooks: &str,
) -> String {
    let mut body = String::new();
    for n in notes {
        let _ = write!(body, r#"<p class="notice">{}</p>"#, esc(n));
    }
    let data = match run {
        Some((events, critical, totals)) => {
            body.push_str(&total_line(totals));
            body.push_str(webhooks);
            let _ = write!(
                body,
                r#"<h2>Dataflow graph</h2><p class="hint">Colour: kind of op; border: status (green ok, red failed, dashed cancelled, faded: did not run). A green solid arrow marks the branch taken. Click an op for its prompt, reply and tool arguments.</p><div id="graph" class="scroll">{graph_svg}</div><h2>Timeline</h2><p class="hint">One row per worker and call lane; outlined in red: the critical path.</p><div id="timeline" class="scroll">{}</div>"#,
                timeline_svg(events, critical)
            );
            serde_json::json!({"events": events, "critical": critical, "totals": totals})
        }
        None => {
            let _ = write!(body, r#"<div id="graph" class="scroll">{graph_svg}</div>"#);
            serde_json::json!({"events": [], "critical": [], "totals": null})
        }
    };
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title><style>{CSS}</style></head>
<body><header><h1>{title}</h1></header><main>{body}</main>
<aside id="detail"><p class="hint">Select an op in the graph or the timeline.</p></aside>
<script type="application/json" id="ais-data">{data}</script>
<script>{JS}</script></body></html>
"#,
        title = esc(title),
        data = script_json(&data),
    )
}

const CSS: &str = r#"
body{margin:0;font:14px system-ui,sans-serif;color:#222;display:grid;grid-template-columns:1fr 380px;grid-template-rows:auto 1fr;height:100vh}
header{grid-column:1/3;padding:8px 16px;background:#23324a;color:#fff}
h1{font-size:17px;margin:0}h2{font-size:15px;margin:14px 0 4px}
main{overflow:auto;padding:0 16px 16px}
aside{overflow:auto;border-left:1px solid #ccd;padding:8px 14px;background:#fbfbfd}
.scroll{overflow:auto;border:1px solid #dde;background:#fff;max-height:62vh}
.hint{color:#666;font-size:12px;margin:2px 0 6px}
.notice{background:#fff4d6;border:1px solid #e0b84a;border-radius:6px;padding:6px 10px;margin:10px 0}
.totals{display:flex;flex-wrap:wrap;gap:6px 18px;margin:10px 0}
.totals div{background:#eef2f8;border-radius:6px;padding:4px 10px}
.totals dt{font-size:11px;color:#556}.totals dd{margin:0;font-weight:600}
.webhooks{font-size:12px;border-collapse:collapse}.webhooks td,.webhooks th{padding:1px 8px 1px 0;text-align:left}
.timeline .track{font-size:11px;fill:#445}.timeline .lane{stroke:#eee}
.timeline .axis{font-size:10px;fill:#667}
.bar{cursor:pointer;stroke:#fff;stroke-width:.5}
.bar.kind-llm{fill:#5b8fdc}.bar.kind-tool{fill:#e69a2e}.bar.kind-call{fill:#9a6fdc}
.bar.kind-control{fill:#5cae6c}.bar.kind-effect{fill:#d6c13a}.bar.kind-data{fill:#aab2bd}
.bar.st-failed{fill:#d0021b}.bar.st-cancelled{fill:#ccc}
.bar.crit{stroke:#d0021b;stroke-width:2}
.bar.selected{stroke:#0050d0;stroke-width:3}
#detail h3{font-size:14px;margin:8px 0 4px}
#detail pre{white-space:pre-wrap;word-break:break-word;background:#f0f2f6;padding:6px;border-radius:4px;font-size:12px;max-height:320px;overflow:auto}
#detail .role{font-size:11px;color:#556;font-weight:600;margin-top:6px}
#detail table{font-size:12px;border-collapse:collapse}#detail td{padding:1px 8px 1px 0;vertical-align:top}
"#;

const JS: &str = r#"
(function(){
  var data = JSON.parse(document.getElementById('ais-data').textContent);
  var detail = document.getElementById('detail');
  function el(tag, text, cls){var e=document.createElement(tag); if(text!==undefined&&text!==null){e.textContent=String(text);} if(cls){e.className=cls;} return e;}
  function row(t,k,v){if(v===undefined||v===null||v==='')return; var tr=el('tr'); tr.appendChild(el('td',k)); tr.appendChild(el('td',v)); t.appendChild(tr);}
  function showEvent(ev, i){
    var box=el('div','', 'event');
    box.appendChild(el('h3', ev.opcode+' · '+ev.flow+(i!==undefined?' · event '+i:'')));
    var t=el('table');
    row(t,'status',ev.status+(ev.error?' ('+ev.error+')':''));
    if(ev.replayed){row(t,'replayed','from the journal: an earlier attempt ran it');}
    row(t,'track',ev.track);
    row(t,'duration',((ev.end_ns-ev.start_ns)/1e6).toFixed(3)+' ms (waited '+(ev.queue_wait_ns/1e6).toFixed(3)+' ms)');
    row(t,'agent',ev.agent);
    row(t,'backend',ev['gen_ai.provider.name']);
    row(t,'model',ev['gen_ai.request.model']);
    var fr=ev['gen_ai.response.finish_reasons']; if(fr){row(t,'finish reason',fr.join(', '));}
    if(ev['gen_ai.usage.input_tokens']!==undefined){row(t,'tokens',ev['gen_ai.usage.input_tokens']+' in / '+ev['gen_ai.usage.output_tokens']+' out');}
    if(ev.cost_usd!==undefined){row(t,'cost','$'+Number(ev.cost_usd).toFixed(6));}
    var att=ev.attempts; if(att&&att.length>1){row(t,'attempts',att.length);}
    row(t,'tool',ev.tool);
    box.appendChild(t);
    if(ev.arguments){box.appendChild(el('div','arguments','role')); box.appendChild(el('pre',ev.arguments,'args'));}
    function text(m){return (m.parts||[]).map(function(p){return p.content;}).join('\n');}
    var p=ev['gen_ai.input.messages'];
    if(p&&p.length){box.appendChild(el('h3','Prompt')); p.forEach(function(m){box.appendChild(el('div',m.role,'role')); box.appendChild(el('pre',text(m),'prompt'));});}
    var o=ev['gen_ai.output.messages'];
    if(o&&o.length){box.appendChild(el('h3','Reply')); box.appendChild(el('pre',text(o[0]),'reply'));}
    var tc=ev.tool_calls;
    if(tc&&tc.length){box.appendChild(el('h3','Tool calls')); tc.forEach(function(c){box.appendChild(el('div','turn '+c.turn+' · '+c.tool+' · '+c.status+(c.code?' ('+c.code+')':''),'role')); if(c.arguments){box.appendChild(el('pre',c.arguments,'args'));}});}
    return box;
  }
  function clearSel(){document.querySelectorAll('.selected').forEach(function(n){n.classList.remove('selected');});}
  function mark(key){document.querySelectorAll('[data-key="'+key+'"]').forEach(function(n){n.classList.add('selected');});}
  function showKey(key, title){
    clearSel(); mark(key);
    detail.textContent='';
    detail.appendChild(el('h3', title));
    var evs=data.events.map(function(e,i){return [e,i];}).filter(function(p){return 'f'+p[0].flow_id+'r'+p[0].region+'o'+p[0].op===key;});
    if(!evs.length){detail.appendChild(el('p', data.totals?'This op did not run.':'A static graph: run the program and use aisc report to see what ran.','hint'));}
    evs.forEach(function(p){detail.appendChild(showEvent(p[0],p[1]));});
  }
  document.querySelectorAll('.node').forEach(function(n){
    var go=function(){var t=n.querySelector('title'); showKey(n.getAttribute('data-key'), t?t.textContent:'');};
    n.addEventListener('click',go);
    n.addEventListener('keydown',function(e){if(e.key==='Enter'){go();}});
  });
  document.querySelectorAll('.bar').forEach(function(b){
    b.addEventListener('click',function(){
      var i=Number(b.getAttribute('data-ev')); clearSel(); mark(b.getAttribute('data-key'));
      detail.textContent=''; detail.appendChild(showEvent(data.events[i], i));
      if(data.critical.indexOf(i)>=0){detail.appendChild(el('p','On the critical path.','hint'));}
    });
  });
})();
"#;
