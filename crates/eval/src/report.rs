//! Reports of `eval mtrag`: a text table for the terminal and a self-contained HTML page
//! (tables and inline SVG charts; nothing loads from outside).

use serde_json::Value;
use std::fmt::Write;

const COLUMNS: [(&str, &str); 19] = [
    ("evidence_recall", "evidence recall"),
    ("answer_support", "answer support"),
    ("semantic_support", "semantic support"),
    ("answer_sentences_recall", "answer sentences recall"),
    ("fresh_recall", "fresh recall"),
    ("doc_recall", "doc recall"),
    ("available_recall", "available recall"),
    ("repeat_rate", "repeat rate"),
    ("doc_repeat_rate", "doc repeat rate"),
    ("context_tokens", "context tokens"),
    ("prompt_tokens", "prompt tokens"),
    ("turn_tokens", "turn tokens"),
    ("conversation_tokens", "conversation tokens"),
    ("new_gold_per_1k_tokens", "new gold / 1k tokens"),
    ("duplicate_tokens", "duplicate tokens"),
    ("resent_rate", "re-sent blocks"),
    ("carried", "carried"),
    ("pointers", "pointers"),
    ("invalid_citations", "invalid citations"),
];

fn cell(v: &Value, key: &str) -> String {
    // `null`: nothing measured (answer support where no turn had a reference answer).
    let Some(x) = v[key].as_f64() else { return "—".to_owned() };
    if key.ends_with("_tokens") && !key.contains("per_1k") {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

/// The curves of a run over several budgets as a Markdown table: per strategy and budget,
/// prompt tokens and evidence recall overall, from turn 5 on and per domain.
fn curves_table(report: &Value) -> String {
    let mut s = String::new();
    let Some(curves) = report["curves"].as_object() else { return s };
    let domains: Vec<&str> =
        report["domains"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let _ = writeln!(
        s,
        "| strategy | budget | prompt tokens | evidence recall | answer support | semantic support | turns ≥ 5: prompt tokens | turns ≥ 5: evidence recall | turns ≥ 5: answer support | turns ≥ 5: semantic support | {} | {} |",
        domains.iter().map(|d| format!("{d}: evidence")).collect::<Vec<_>>().join(" | "),
        domains.iter().map(|d| format!("{d}: support")).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|{}", "---:|".repeat(2 * domains.len()));
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    // A share, or "—" where nothing was measured (answer support without a reference answer).
    let share = |v: &Value| v.as_f64().map_or("—".to_owned(), |x| format!("{x:.3}"));
    for (name, points) in curves {
        for p in points.as_array().into_iter().flatten() {
            let budget = p["budget"].as_u64().map_or("unbounded".to_owned(), |b| b.to_string());
            let per_domain = |k: &str| -> String {
                domains.iter().map(|d| share(&p["by_domain"][*d][k])).collect::<Vec<_>>().join(" | ")
            };
            let _ = writeln!(
                s,
                "| {name} | {budget} | {:.0} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} |",
                num(&p["prompt_tokens"]),
                share(&p["evidence_recall"]),
                share(&p["answer_support"]),
                share(&p["semantic_support"]),
                num(&p["from_turn_5"]["prompt_tokens"]),
                share(&p["from_turn_5"]["evidence_recall"]),
                share(&p["from_turn_5"]["answer_support"]),
                share(&p["from_turn_5"]["semantic_support"]),
                per_domain("evidence_recall"),
                per_domain("answer_support")
            );
        }
    }
    s.push('\n');
    s
}

/// Markdown table of the overall means, one row per strategy (after the curves, when the run
/// had several budgets).
pub fn mtrag_table(report: &Value) -> String {
    let mut s = curves_table(report);
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

/// Colours of the strategies without one of their own (the memory modes and the two
/// baselines keep theirs in every chart).
const PALETTE: [&str; 10] =
    ["#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#637939", "#843c39", "#7b4173"];

/// One colour per strategy, the same in every chart and in the picker.
fn colour(report: &Value, name: &str) -> &'static str {
    match name.strip_suffix("@chunk").unwrap_or(name) {
        "engine" => "#ff7f0e",
        "client" => "#2ca02c",
        "none" => "#1f77b4",
        "history" => "#222266",
        _ => {
            // A curve's name (`none+conv`) is not a strategy key (`none+conv@2000`): place it
            // among the curves.
            let among = if report["strategies"].get(name).is_some() { "strategies" } else { "curves" };
            let others = report[among].as_object().map(|m| {
                m.keys()
                    .filter(|k| {
                        !matches!(k.strip_suffix("@chunk").unwrap_or(k), "engine" | "client" | "none" | "history")
                    })
                    .position(|k| k == name)
            });
            PALETTE[others.flatten().unwrap_or(0) % PALETTE.len()]
        }
    }
}

/// Strategies drawn in the per-turn charts until the reader picks others.
const SHOWN_FIRST: [&str; 3] = ["engine", "none", "history"];

/// The default and the two baselines (at the default granularity) are drawn first.
fn shown_first(name: &str) -> bool {
    SHOWN_FIRST.contains(&name.strip_suffix("@chunk").unwrap_or(name))
}

fn series_id(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// Axes of an evidence-recall-against-prompt-tokens chart of size `(w, h)` with left and
/// bottom margins `(l, b)`: lines, five ticks each way (recall with `digits` decimals), labels.
fn tokens_recall_axes(svg: &mut String, (w, h, l, b): (f64, f64, f64, f64), xmax: f64, ymax: f64, digits: usize) {
    let x = |v: f64| l + v / xmax * (w - l - 20.0);
    let y = |v: f64| h - b - v / ymax * (h - b - 20.0);
    let _ = write!(svg, "<line x1=\"{l}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#999\"/>", h - b, w - 20.0);
    let _ = write!(svg, "<line x1=\"{l}\" y1=\"20\" x2=\"{l}\" y2=\"{}\" stroke=\"#999\"/>", h - b);
    for i in 0..=5 {
        let v = ymax * i as f64 / 5.0;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{v:.digits$}</text>",
            l - 4.0,
            y(v) + 3.0
        );
        let t = xmax * i as f64 / 5.0;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{t:.0}</text>",
            x(t),
            h - b + 14.0
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">prompt tokens</text>",
        (l + w) / 2.0,
        h - 6.0
    );
    let _ = write!(svg, "<text x=\"14\" y=\"{}\" font-size=\"11\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\">evidence recall</text>", (h - b) / 2.0);
}

/// The trade-off the reader came for: evidence recall against prompt tokens, one labelled
/// point per strategy (up and to the left is better).
fn pareto(report: &Value) -> String {
    let Some(map) = report["strategies"].as_object() else { return String::new() };
    let pts: Vec<(&String, f64, f64)> = map
        .iter()
        .map(|(k, r)| {
            let o = &r["overall"];
            (k, o["prompt_tokens"].as_f64().unwrap_or(0.0), o["evidence_recall"].as_f64().unwrap_or(0.0))
        })
        .collect();
    let xmax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let (w, h, l, b) = (720.0, 360.0, 60.0, 40.0);
    let x = |v: f64| l + v / xmax * (w - l - 20.0);
    let y = |v: f64| h - b - v * (h - b - 20.0);
    let mut svg = format!(
        "<figure id=\"pareto\"><figcaption>Evidence recall against prompt tokens (means over gold turns; up and left is better)</figcaption>\
<svg viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\">"
    );
    tokens_recall_axes(&mut svg, (w, h, l, b), xmax, 1.0, 1);
    // Strategies that land on the same point (e.g. `none` at both granularities) share a label.
    let mut merged: Vec<(String, f64, f64, bool, &str)> = Vec::new();
    for (name, px, py) in &pts {
        let same = merged.iter_mut().find(|m| (m.1 - px).abs() < 0.5 && (m.2 - py).abs() < 5e-4);
        match same {
            Some(m) => {
                m.0.push_str(&format!(" = {name}"));
                m.3 |= shown_first(name);
            }
            None => merged.push((name.to_string(), *px, *py, shown_first(name), colour(report, name))),
        }
    }
    for (name, px, py, main, color) in &merged {
        let main = *main;
        let right = *px > xmax / 2.0;
        let anchor = if right { "end" } else { "start" };
        let _ = write!(
            svg,
            "<g class=\"point\" data-name=\"{n}\"><circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{}\" fill=\"{color}\"><title>{n}: {py:.3} evidence recall, {px:.0} prompt tokens</title></circle>\
<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{}\" fill=\"{color}\" text-anchor=\"{anchor}\">{n}</text></g>",
            x(*px),
            y(*py),
            if main { 6 } else { 4 },
            // Labels of points in the right half go to their left, inside the chart.
            if right { x(*px) - 8.0 } else { x(*px) + 8.0 },
            y(*py) + 4.0,
            if main { 13 } else { 10 },
            n = escape(name)
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

/// Evidence recall against prompt tokens, one line per strategy through its budgets
/// (labelled), `pick` choosing the point's numbers (overall, from turn 5, a domain).
fn curve_chart(report: &Value, id: &str, title: &str, pick: &dyn Fn(&Value) -> Value) -> String {
    let Some(curves) = report["curves"].as_object() else { return String::new() };
    // Per strategy: (prompt tokens, evidence recall, budget label) per point.
    type Line<'a> = (&'a String, Vec<(f64, f64, String)>);
    let lines: Vec<Line> = curves
        .iter()
        .map(|(name, points)| {
            let pts = points
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let m = pick(p);
                    let label = p["budget"].as_u64().map_or("unbounded".to_owned(), |b| b.to_string());
                    (m["prompt_tokens"].as_f64().unwrap_or(0.0), m["evidence_recall"].as_f64().unwrap_or(0.0), label)
                })
                .collect();
            (name, pts)
        })
        .collect();
    let xmax = lines.iter().flat_map(|l| l.1.iter().map(|p| p.0)).fold(1.0, f64::max) * 1.1;
    let ymax = (lines.iter().flat_map(|l| l.1.iter().map(|p| p.1)).fold(0.0, f64::max) * 1.15).clamp(0.1, 1.0);
    let (w, h, l, b) = (720.0, 360.0, 60.0, 40.0);
    let x = |v: f64| l + v / xmax * (w - l - 20.0);
    let y = |v: f64| h - b - v / ymax * (h - b - 20.0);
    let mut svg = format!(
        "<figure id=\"{id}\" class=\"curves\"><figcaption>{}</figcaption><svg viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\">",
        escape(title)
    );
    tokens_recall_axes(&mut svg, (w, h, l, b), xmax, ymax, 2);
    for (name, pts) in &lines {
        let color = colour(report, name);
        let path: Vec<String> = pts.iter().map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1))).collect();
        let _ = write!(
            svg,
            "<g class=\"curve\" data-name=\"{n}\"><polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" "),
            n = escape(name)
        );
        for (px, py, label) in pts {
            let _ = write!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{color}\"><title>{n} at budget {label}: {py:.3} evidence recall, {px:.0} prompt tokens</title></circle>",
                x(*px),
                y(*py),
                n = escape(name)
            );
        }
        if let Some((px, py, _)) = pts.last() {
            let right = *px > xmax / 2.0;
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" fill=\"{color}\" text-anchor=\"{}\">{}</text>",
                if right { x(*px) - 8.0 } else { x(*px) + 8.0 },
                y(*py) - 6.0,
                if right { "end" } else { "start" },
                escape(name)
            );
        }
        svg.push_str("</g>");
    }
    svg.push_str("</svg></figure>");
    svg
}

/// One line per strategy of `metric` over the turn index; all but [`SHOWN_FIRST`] start
/// hidden and are switched on with the checkboxes above the charts.
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
    for (name, pts) in &series {
        let color = colour(report, name);
        let path: Vec<String> = pts.iter().map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1))).collect();
        let hidden = if shown_first(name) { "" } else { " style=\"display:none\"" };
        let _ = write!(
            svg,
            "<polyline class=\"s-{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"{hidden}><title>{}</title></polyline>",
            series_id(name),
            path.join(" "),
            escape(name)
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

/// Checkboxes that show or hide a strategy's lines in every per-turn chart.
fn series_picker(report: &Value) -> String {
    let Some(map) = report["strategies"].as_object() else { return String::new() };
    let mut s = String::from("<div class=\"picker\">");
    for name in map.keys() {
        let checked = if shown_first(name) { " checked" } else { "" };
        let _ = write!(
            s,
            "<label style=\"color:{}\"><input type=\"checkbox\" data-series=\"s-{}\"{checked}> {}</label> ",
            colour(report, name),
            series_id(name),
            escape(name)
        );
    }
    s.push_str("</div><script>document.querySelectorAll('.picker input').forEach(function(b){b.addEventListener('change',function(){\
document.querySelectorAll('polyline.'+b.dataset.series).forEach(function(l){l.style.display=b.checked?'':'none';});});});</script>");
    s
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

/// The HTML report: the trade-off first (evidence recall against prompt tokens), then
/// per-turn curves of the default and the two baselines (others selectable), then tables.
pub fn mtrag_html(report: &Value) -> String {
    let map = report["strategies"].as_object().cloned().unwrap_or_default();
    let mut body =
        format!(
        "<h1>ragctx: multi-turn evaluation on MTRAG</h1><p>{} conversations, domains {}, budget {} tokens, limit {}. \
`engine` and `client` are the memory modes with their defaults; the others are the seed's strategies \
(one chunk per document). Evidence recall counts gold passages whose text the model reads at that turn.</p>",
        report["conversations"], escape(&report["domains"].to_string()), report["budget"], report["limit"]
    );
    if report["curves"].is_object() {
        // Runs over several budgets open with the curves: overall, from turn 5, per domain.
        let _ = write!(
            body,
            "<p>Budgets {}: every strategy but unbounded <code>history</code> ran at each; each line joins a \
strategy's points (evidence recall against the prompt tokens it used).</p>",
            escape(&report["budgets"].to_string())
        );
        body.push_str(&curve_chart(
            report,
            "curves",
            "Evidence recall against prompt tokens, one curve per strategy",
            &|p| p.clone(),
        ));
        body.push_str(&curve_chart(report, "curves-late", "Turns 5 and later", &|p| p["from_turn_5"].clone()));
        body.push_str("<div class=\"charts\">");
        for d in report["domains"].as_array().cloned().unwrap_or_default() {
            let d = d.as_str().unwrap_or_default().to_owned();
            body.push_str(&curve_chart(report, &format!("curves-{}", series_id(&d)), &d, &|p| {
                p["by_domain"][&d].clone()
            }));
        }
        body.push_str("</div>");
    }
    body.push_str(&pareto(report));
    body.push_str("<h2>Per turn index</h2>");
    body.push_str(&series_picker(report));
    body.push_str("<div class=\"charts\">");
    for (m, t) in [
        ("evidence_recall", "evidence recall"),
        ("answer_support", "answer support"),
        ("prompt_tokens", "prompt tokens"),
        ("fresh_recall", "fresh recall"),
        ("repeat_rate", "repeat rate"),
    ] {
        body.push_str(&chart(report, m, t));
    }
    body.push_str("</div>");
    body.push_str("<h2>All domains</h2>");
    body.push_str(&table(map.iter().map(|(k, v)| (k.clone(), &v["overall"])).collect()));
    body.push_str("<h2>Turns 5 and later</h2>");
    body.push_str(&table(map.iter().map(|(k, v)| (k.clone(), &v["from_turn_5"])).collect()));
    for d in report["domains"].as_array().cloned().unwrap_or_default() {
        let d = d.as_str().unwrap_or_default().to_owned();
        let _ = write!(body, "<h2>{}</h2>", escape(&d));
        body.push_str(&table(map.iter().map(|(k, v)| (k.clone(), &v["by_domain"][&d])).collect()));
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>ragctx MTRAG evaluation</title><style>\
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse;margin:1em 0}}\
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
.charts{{display:flex;flex-wrap:wrap;gap:1em}}figcaption{{font-weight:bold}}.picker label{{margin-right:1em;font-size:13px}}\
</style></head><body>{body}</body></html>\n"
    )
}
