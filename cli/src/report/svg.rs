//! The graph as SVG: each flow laid out on its own (`layout::layered`),
//! flows side by side in rows, calls drawn from the call op to its callee's
//! first ops. Every text is escaped (prompts and names are user text).

use super::data::{Edge, Graph};
use super::layout::{layered, NODE_H, NODE_W};
use std::fmt::Write as _;

/// `<`, `>`, `&`, `"` and `'` as entities (text and attribute values).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

const PAD: f64 = 18.0;
const HEAD: f64 = 26.0;
const ROW_WIDTH: f64 = 1500.0;

fn clip(s: &str, n: usize) -> String {
    let mut t: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        t.push('…');
    }
    t
}

/// The graph as one `<svg>` element (with its own `<style>`).
pub fn graph_svg(g: &Graph) -> String {
    // Lay out each flow, then place the flow boxes in rows.
    let mut pos = vec![(0.0f64, 0.0f64); g.nodes.len()];
    let mut boxes: Vec<(usize, f64, f64, f64, f64)> = Vec::new();
    let (mut x, mut y, mut row_h, mut total_w) = (PAD, PAD, 0.0f64, 0.0f64);
    for &f in &g.order {
        let members: Vec<usize> = (0..g.nodes.len())
            .filter(|&i| g.nodes[i].flow as usize == f)
            .collect();
        if members.is_empty() {
            continue;
        }
        let local: std::collections::HashMap<usize, usize> =
            members.iter().enumerate().map(|(k, &i)| (i, k)).collect();
        let edges: Vec<(usize, usize)> = g
            .edges
            .iter()
            .filter(|e| e.kind != "call")
            .filter_map(|e| Some((*local.get(&e.from)?, *local.get(&e.to)?)))
            .collect();
        let l = layered(members.len(), &edges);
        let (w, h) = (l.width + 2.0 * PAD, l.height + 2.0 * PAD + HEAD);
        if x > PAD && x + w > ROW_WIDTH {
            x = PAD;
            y += row_h + PAD * 2.0;
            row_h = 0.0;
        }
        for (k, &i) in members.iter().enumerate() {
            pos[i] = (x + PAD + l.pos[k].0, y + HEAD + PAD + l.pos[k].1);
        }
        boxes.push((f, x, y, w, h));
        x += w + PAD * 2.0;
        total_w = total_w.max(x);
        row_h = row_h.max(h);
    }
    let (width, height) = (total_w.max(200.0), y + row_h + PAD);
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="system-ui, sans-serif">"#
    );
    o.push_str(STYLE);
    o.push_str(r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="grey"/></marker></defs>"#);
    for &(f, bx, by, w, h) in &boxes {
        let _ = write!(
            o,
            r#"<g class="flow"><rect x="{bx:.1}" y="{by:.1}" width="{w:.1}" height="{h:.1}" rx="8"/><text x="{:.1}" y="{:.1}" class="flow-name">{}</text></g>"#,
            bx + 10.0,
            by + 18.0,
            esc(&g.flows[f])
        );
    }
    for e in &g.edges {
        edge(&mut o, e, pos[e.from], pos[e.to]);
    }
    for (i, n) in g.nodes.iter().enumerate() {
        let (nx, ny) = pos[i];
        let runs = if n.runs > 1 {
            format!(" ×{}", n.runs)
        } else {
            String::new()
        };
        let _ = write!(
            o,
            r#"<g class="node kind-{} st-{}" data-key="{}" tabindex="0"><title>{} {} ({}){}</title><rect x="{nx:.1}" y="{ny:.1}" width="{NODE_W}" height="{NODE_H}" rx="6"/><text x="{:.1}" y="{:.1}" class="op">{}{}</text><text x="{:.1}" y="{:.1}" class="sub">{}</text></g>"#,
            n.kind,
            n.status,
            esc(&n.key),
            esc(&n.label),
            esc(&n.sub),
            n.status.replace('_', " "),
            esc(&runs),
            nx + 8.0,
            ny + 16.0,
            esc(&n.label),
            esc(&runs),
            nx + 8.0,
            ny + 31.0,
            esc(&clip(&n.sub, 20)),
        );
    }
    o.push_str("</svg>");
    o
}

fn edge(o: &mut String, e: &Edge, a: (f64, f64), b: (f64, f64)) {
    let (x1, y1) = (a.0 + NODE_W / 2.0, a.1 + NODE_H);
    let (x2, y2) = (b.0 + NODE_W / 2.0, b.1);
    let class = match (e.kind, e.taken) {
        ("region", true) => "edge region taken",
        (k, _) => match k {
            "region" => "edge region",
            "call" => "edge call",
            _ => "edge data",
        },
    };
    let path = if e.kind == "call" {
        // From the call's right side to the callee's first op, curved.
        let (sx, sy) = (a.0 + NODE_W, a.1 + NODE_H / 2.0);
        let mid = (sx + x2) / 2.0;
        format!(
            "M{sx:.1},{sy:.1} C{mid:.1},{sy:.1} {mid:.1},{:.1} {x2:.1},{y2:.1}",
            y2 - 40.0
        )
    } else {
        let dy = ((y2 - y1) / 2.0).max(12.0);
        format!(
            "M{x1:.1},{y1:.1} C{x1:.1},{:.1} {x2:.1},{:.1} {x2:.1},{y2:.1}",
            y1 + dy,
            y2 - dy
        )
    };
    let _ = write!(
        o,
        r#"<path class="{class}" d="{path}" marker-end="url(#arrow)"/>"#
    );
    if !e.label.is_empty() {
        let _ = write!(
            o,
            r#"<text class="edge-label{}" x="{:.1}" y="{:.1}">{}{}</text>"#,
            if e.taken { " taken" } else { "" },
            // Just above the region's first op: labels of a switch's
            // cases sit over their own columns.
            x2 - NODE_W / 2.0 + 4.0,
            y2 - 5.0,
            esc(&e.label),
            if e.taken { " ✓" } else { "" }
        );
    }
}

const STYLE: &str = r#"<style>
.flow rect{fill:#f7f8fa;stroke:#c9ced6}
.flow-name{font-size:13px;font-weight:600;fill:#333}
.node rect{stroke:#555;stroke-width:1.2}
.node{cursor:pointer}
.node .op{font-size:12px;font-weight:600;fill:#111}
.node .sub{font-size:10px;fill:#333}
.kind-llm rect{fill:#cfe3ff}.kind-tool rect{fill:#ffe2b8}.kind-call rect{fill:#e3d4ff}
.kind-control rect{fill:#d8f0dc}.kind-effect rect{fill:#fff4b0}.kind-data rect{fill:#eceff3}
.st-ok rect{stroke:#1d8a3a;stroke-width:2}
.st-failed rect{stroke:#d0021b;stroke-width:3}
.st-cancelled rect{stroke:#888;stroke-dasharray:4 3}
.st-not_run{opacity:.38}
.node.selected rect{stroke:#0050d0;stroke-width:3.5}
.edge{fill:none;stroke:#999;stroke-width:1.2}
.edge.region{stroke:#4a7bd0;stroke-dasharray:5 3}
.edge.region.taken{stroke:#1d8a3a;stroke-width:2.6;stroke-dasharray:none}
.edge.call{stroke:#8a4fd0;stroke-dasharray:2 3;stroke-width:1.6}
.edge-label{font-size:10px;fill:#4a7bd0}.edge-label.taken{fill:#1d8a3a;font-weight:600}
</style>"#;
