//! A small SVG bar chart (no plotting library): grouped bars with error
//! whiskers on a logarithmic axis, one panel per metric.

use std::fmt::Write;

/// One bar: mean and standard deviation (ms); `None` leaves a gap.
pub type Bar = Option<(f64, f64)>;

/// One panel: a title and, per group (workload), one bar per series.
pub struct Panel {
    pub title: String,
    pub bars: Vec<Vec<Bar>>,
}

/// Renders panels stacked vertically, sharing the group labels and series.
pub fn grouped_bars(
    title: &str,
    groups: &[String],
    series: &[(&str, &str)],
    panels: &[Panel],
    y_label: &str,
) -> String {
    const W_GROUP: f64 = 64.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    const PANEL_H: f64 = 230.0;
    const PANEL_GAP: f64 = 70.0;
    const TOP: f64 = 60.0;
    let width = LEFT + RIGHT + W_GROUP * groups.len().max(1) as f64;
    let height = TOP + panels.len() as f64 * (PANEL_H + PANEL_GAP) + 10.0;
    let mut values: Vec<f64> = panels
        .iter()
        .flat_map(|p| p.bars.iter().flatten().flatten())
        .flat_map(|&(m, s)| [m, m + s])
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    values.sort_by(f64::total_cmp);
    let lo = values.first().copied().unwrap_or(1.0);
    let hi = values.last().copied().unwrap_or(10.0);
    let mut min_exp = lo.log10().floor() as i32;
    if lo < 2.0 * 10f64.powi(min_exp) {
        // Keep the shortest bar visible above the axis.
        min_exp -= 1;
    }
    let max_exp = (hi.log10().ceil() as i32).max(min_exp + 1);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{:.0}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        width / 2.0,
        esc(title)
    );
    // Legend.
    let mut lx = LEFT;
    for (name, color) in series {
        let _ = writeln!(
            o,
            r#"<rect x="{lx:.0}" y="32" width="12" height="12" fill="{color}"/><text x="{:.0}" y="42">{}</text>"#,
            lx + 16.0,
            esc(name)
        );
        lx += 30.0 + 7.0 * name.len() as f64;
    }
    for (pi, panel) in panels.iter().enumerate() {
        let y0 = TOP + pi as f64 * (PANEL_H + PANEL_GAP) + 20.0;
        let y = |v: f64| {
            let e = v.max(10f64.powi(min_exp)).log10();
            y0 + PANEL_H - (e - min_exp as f64) / (max_exp - min_exp) as f64 * PANEL_H
        };
        let _ = writeln!(
            o,
            r#"<text x="{LEFT:.0}" y="{:.0}" font-size="12" font-weight="bold">{}</text>"#,
            y0 - 6.0,
            esc(&panel.title)
        );
        for e in min_exp..=max_exp {
            let v = 10f64.powi(e);
            let yy = y(v);
            let _ = writeln!(
                o,
                r##"<line x1="{LEFT:.0}" x2="{:.0}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"##,
                width - RIGHT,
                LEFT - 6.0,
                yy + 4.0,
                fmt_ms(v)
            );
        }
        let _ = writeln!(
            o,
            r#"<text transform="translate(14,{:.0}) rotate(-90)" text-anchor="middle">{}</text>"#,
            y0 + PANEL_H / 2.0,
            esc(y_label)
        );
        let n = series.len().max(1) as f64;
        let bw = (W_GROUP - 12.0) / n;
        for (gi, g) in groups.iter().enumerate() {
            let gx = LEFT + gi as f64 * W_GROUP + 6.0;
            for (si, (_, color)) in series.iter().enumerate() {
                let Some(Some((m, s))) = panel.bars.get(gi).and_then(|b| b.get(si)).copied() else {
                    continue;
                };
                if !(m.is_finite() && m > 0.0) {
                    continue;
                }
                let x = gx + si as f64 * bw;
                let top = y(m);
                let _ = writeln!(
                    o,
                    r#"<rect x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {m:.1} ± {s:.1} ms</title></rect>"#,
                    bw - 1.0,
                    (y0 + PANEL_H - top).max(0.0),
                    esc(g)
                );
                if s > 0.0 {
                    let cx = x + (bw - 1.0) / 2.0;
                    let _ = writeln!(
                        o,
                        r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="black"/>"#,
                        y(m + s),
                        y((m - s).max(f64::MIN_POSITIVE))
                    );
                }
            }
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                gx + (W_GROUP - 12.0) / 2.0,
                y0 + PANEL_H + 14.0,
                esc(g)
            );
        }
        let _ = writeln!(
            o,
            r#"<line x1="{LEFT:.0}" x2="{:.0}" y1="{:.1}" y2="{:.1}" stroke="black"/>"#,
            width - RIGHT,
            y0 + PANEL_H,
            y0 + PANEL_H
        );
    }
    o.push_str("</svg>\n");
    o
}

fn fmt_ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{} s", v / 1000.0)
    } else {
        format!("{v} ms")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bars_and_gaps() {
        let svg = grouped_bars(
            "t",
            &["1".into(), "2".into()],
            &[("ours", "#1f77b4"), ("them", "#d62728")],
            &[Panel {
                title: "p".into(),
                bars: vec![
                    vec![Some((100.0, 5.0)), None],
                    vec![Some((1000.0, 0.0)), Some((2000.0, 10.0))],
                ],
            }],
            "ms",
        );
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
