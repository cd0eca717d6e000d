//! Reports of `eval mtrag`: a text table for the terminal and a self-contained HTML page
//! (tables and inline SVG charts; nothing loads from outside).

use serde_json::Value;
use std::fmt::Write;

const COLUMNS: [(&str, &str); 10] = [
    ("fresh_recall", "fresh recall"),
    ("doc_recall", "doc recall"),
    ("available_recall", "available recall"),
    ("repeat_rate", "repeat rate"),
    ("doc_repeat_rate", "doc repeat rate"),
    ("context_tokens", "context tokens"),
    ("prompt_tokens", "prompt tokens"),
    ("new_gold_per_1k_tokens", "new gold / 1k tokens"),
    ("duplicate_text_slots", "duplicate slots"),
    ("invalid_citations", "invalid citations"),
];

fn cell(v: &Value, key: &str) -> String {
    let x = v[key].as_f64().unwrap_or(0.0);
    if key == "context_tokens" || key == "prompt_tokens" {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

/// Markdown table of the overall means, one row per strategy.
pub fn mtrag_table(report: &Value) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| strategy | {} | docs | fragments | turns |", COLUMNS.map(|c| c.1).join(" | "));
    let _ = writeln!(s, "|---|{}---:|---:|---:|", "---:|".repeat(COLUMNS.len()));
    if let Some(map) = report["strategies"].as_object() {
        for (name, r) in map {
            let o = &r["overall"];
            let cells: Vec<String> = COLUMNS.iter().map(|c| cell(o, c.0)).collect();
            let _ = writeln!(
                s,
                "| {name} | {} | {:.2} | {:.2} | {} |",
                cells.join(" | "),
                o["unique_documents"].as_f64().unwrap_or(0.0),
                o["context_fragments"].as_f64().unwrap_or(0.0),
                o["turns"]
            );
        }
    }
    s
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const PALETTE: [&str; 12] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939",
];

/// One line per strategy of `metric` over the turn index.
fn chart(report: &Value, metric: &str, title: &str) -> String {
    let Some(map) = report["strategies"].as_object() else { return String::new() };
    let series: Vec<(&String, Vec<(f64, f64)>)> = map
        .iter()
        .map(|(name, r)| {
            let pts = r["by_turn"]
                .as_object()
                .map(|t| {
                    let mut p: Vec<(f64, f64)> =
                        t.iter().filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, v[metric].as_f64()?))).collect();
                    p.sort_by(|a, b| a.0.total_cmp(&b.0));
                    p
                })
                .unwrap_or_default();
            (name, pts)
        })
        .collect();
    let xmax = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).fold(1.0, f64::max);
    let ymax = series.iter().flat_map(|s| s.1.iter().map(|p| p.1)).fold(1e-9, f64::max) * 1.05;
    let (w, h, l, b) = (560.0, 260.0, 60.0, 30.0);
    let x = |v: f64| l + (v - 1.0) / (xmax - 1.0).max(1.0) * (w - l - 20.0);
    let y = |v: f64| h - b - v / ymax * (h - b - 20.0);
    let mut svg = format!(
        "<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\">",
        escape(title)
    );
    let _ = write!(svg, "<line x1=\"{l}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#999\"/>", h - b, w - 20.0);
    let _ = write!(svg, "<line x1=\"{l}\" y1=\"20\" x2=\"{l}\" y2=\"{}\" stroke=\"#999\"/>", h - b);
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
            l - 4.0,
            y(v) + 3.0,
            if ymax > 10.0 { format!("{v:.0}") } else { format!("{v:.2}") }
        );
    }
    for t in 1..=(xmax as usize) {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{t}</text>",
            x(t as f64),
            h - b + 14.0
        );
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let path: Vec<String> = pts.iter().map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1))).collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>",
            path.join(" "),
            escape(name)
        );
    }
    svg.push_str("</svg><div class=\"legend\">");
    for (i, (name, _)) in series.iter().enumerate() {
        let _ = write!(svg, "<span style=\"color:{}\">&#9632; {}</span> ", PALETTE[i % PALETTE.len()], escape(name));
    }
    svg.push_str("</div></figure>");
    svg
}

fn table(rows: Vec<(String, &Value)>) -> String {
    let mut s = String::from("<table><tr><th>strategy</th>");
    for c in COLUMNS {
        let _ = write!(s, "<th>{}</th>", c.1);
    }
    s.push_str("<th>docs</th><th>fragments</th><th>turns</th></tr>");
    for (name, o) in rows {
        let _ = write!(s, "<tr><td>{}</td>", escape(&name));
        for c in COLUMNS {
            let _ = write!(s, "<td>{}</td>", cell(o, c.0));
        }
        let _ = write!(
            s,
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            cell(o, "unique_documents"),
            cell(o, "context_fragments"),
            o["turns"]
        );
    }
    s.push_str("</table>");
    s
}

/// The HTML report: overall table, a table per domain, and charts per turn index.
pub fn mtrag_html(report: &Value) -> String {
    let map = report["strategies"].as_object().cloned().unwrap_or_default();
    let mut body = format!(
        "<h1>ragctx: multi-turn evaluation on MTRAG</h1><p>{} conversations, domains {}, budget {} tokens, limit {}.</p>",
        report["conversations"], escape(&report["domains"].to_string()), report["budget"], report["limit"]
    );
    body.push_str("<h2>All domains</h2>");
    body.push_str(&table(map.iter().map(|(k, v)| (k.clone(), &v["overall"])).collect()));
    for d in report["domains"].as_array().cloned().unwrap_or_default() {
        let d = d.as_str().unwrap_or_default().to_owned();
        let _ = write!(body, "<h2>{}</h2>", escape(&d));
        body.push_str(&table(map.iter().map(|(k, v)| (k.clone(), &v["by_domain"][&d])).collect()));
    }
    body.push_str("<h2>Per turn index</h2><div class=\"charts\">");
    for (m, t) in [
        ("prompt_tokens", "prompt tokens"),
        ("repeat_rate", "repeat rate"),
        ("available_recall", "available recall"),
        ("fresh_recall", "fresh recall"),
    ] {
        body.push_str(&chart(report, m, t));
    }
    body.push_str("</div>");
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>ragctx MTRAG evaluation</title><style>\
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse;margin:1em 0}}\
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
.charts{{display:flex;flex-wrap:wrap;gap:1em}}figcaption{{font-weight:bold}}.legend{{font-size:12px;max-width:560px}}\
</style></head><body>{body}</body></html>\n"
    )
}
