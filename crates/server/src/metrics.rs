//! Prometheus text-format metrics, kept in process.

use ragctx_core::Trace;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

const LATENCY_BUCKETS_MS: [f64; 10] = [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 250.0, 1000.0];
const COUNT_BUCKETS: [f64; 9] = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
const TOKEN_BUCKETS: [f64; 8] = [0.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0, 6000.0, 10000.0];

#[derive(Default, Clone)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    n: u64,
}

impl Histogram {
    fn observe(&mut self, buckets: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; buckets.len()];
        }
        for (i, b) in buckets.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.n += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str, buckets: &[f64]) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, b) in buckets.iter().enumerate() {
            let c = self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.n);
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.n);
    }
}

#[derive(Default)]
struct Data {
    stage_ms: BTreeMap<String, Histogram>,
    candidates: Histogram,
    unique_documents: Histogram,
    fragments: Histogram,
    context_tokens: Histogram,
    excluded: Histogram,
    turns_by_intent: BTreeMap<String, u64>,
    search_path: BTreeMap<String, u64>,
    errors: BTreeMap<String, u64>,
    /// Answers by route template and status.
    requests: BTreeMap<(String, String), u64>,
    request_ms: BTreeMap<String, Histogram>,
}

#[derive(Default)]
pub struct Metrics {
    data: Mutex<Data>,
}

impl Metrics {
    pub fn turn(&self, out: &Trace) {
        let t = &out.trace;
        let mut d = self.data.lock().expect("metrics lock");
        for (stage, ms) in &t.timings_ms {
            d.stage_ms.entry(stage.clone()).or_default().observe(&LATENCY_BUCKETS_MS, *ms);
        }
        d.candidates.observe(&COUNT_BUCKETS, t.candidates as f64);
        d.unique_documents.observe(&COUNT_BUCKETS, t.unique_documents as f64);
        d.fragments.observe(&COUNT_BUCKETS, t.context_fragments as f64);
        d.context_tokens.observe(&TOKEN_BUCKETS, t.context_tokens as f64);
        d.excluded.observe(&COUNT_BUCKETS, t.excluded as f64);
        *d.turns_by_intent.entry(t.intent.as_str().to_owned()).or_default() += 1;
        let path =
            serde_json::to_value(t.search_path).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        *d.search_path.entry(path).or_default() += 1;
    }

    /// One answered request: `route` is the route's template (`/v1/sessions/{id}/turns`), so
    /// the series stay few whatever the ids.
    pub fn request(&self, route: &str, status: &str, ms: f64) {
        let mut d = self.data.lock().expect("metrics lock");
        *d.requests.entry((route.to_owned(), status.to_owned())).or_default() += 1;
        d.request_ms.entry(route.to_owned()).or_default().observe(&LATENCY_BUCKETS_MS, ms);
    }

    pub fn error(&self, code: &str) {
        *self.data.lock().expect("metrics lock").errors.entry(code.to_owned()).or_default() += 1;
    }

    pub fn render(&self) -> String {
        let d = self.data.lock().expect("metrics lock");
        let mut s = String::new();
        s.push_str("# HELP ragctx_turn_stage_ms Turn latency by pipeline stage, milliseconds.\n# TYPE ragctx_turn_stage_ms histogram\n");
        for (stage, h) in &d.stage_ms {
            h.render(&mut s, "ragctx_turn_stage_ms", &format!("stage=\"{stage}\""), &LATENCY_BUCKETS_MS);
        }
        for (name, h, buckets, help) in [
            ("ragctx_candidates", &d.candidates, &COUNT_BUCKETS[..], "Chunks returned by the search per turn."),
            ("ragctx_unique_documents", &d.unique_documents, &COUNT_BUCKETS[..], "Documents after dedupe per turn."),
            ("ragctx_context_fragments", &d.fragments, &COUNT_BUCKETS[..], "Blocks in the context per turn."),
            ("ragctx_context_tokens", &d.context_tokens, &TOKEN_BUCKETS[..], "Context tokens per turn."),
            ("ragctx_excluded", &d.excluded, &COUNT_BUCKETS[..], "Size of the exclusion set per turn."),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} histogram");
            h.render(&mut s, name, "", buckets);
        }
        s.push_str("# HELP ragctx_turns_total Turns by intent.\n# TYPE ragctx_turns_total counter\n");
        for (k, v) in &d.turns_by_intent {
            let _ = writeln!(s, "ragctx_turns_total{{intent=\"{k}\"}} {v}");
        }
        s.push_str(
            "# HELP ragctx_search_path_total Searches by path chosen.\n# TYPE ragctx_search_path_total counter\n",
        );
        for (k, v) in &d.search_path {
            let _ = writeln!(s, "ragctx_search_path_total{{path=\"{k}\"}} {v}");
        }
        s.push_str("# HELP ragctx_http_requests_total Answers by route and status.\n# TYPE ragctx_http_requests_total counter\n");
        for ((route, status), v) in &d.requests {
            let _ = writeln!(s, "ragctx_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {v}");
        }
        s.push_str("# HELP ragctx_http_request_ms Time to answer by route, milliseconds (a stream: to its first byte).\n# TYPE ragctx_http_request_ms histogram\n");
        for (route, h) in &d.request_ms {
            h.render(&mut s, "ragctx_http_request_ms", &format!("route=\"{route}\""), &LATENCY_BUCKETS_MS);
        }
        s.push_str("# HELP ragctx_errors_total Error responses by code.\n# TYPE ragctx_errors_total counter\n");
        for (k, v) in &d.errors {
            let _ = writeln!(s, "ragctx_errors_total{{code=\"{k}\"}} {v}");
        }
        s
    }
}
