//! Issue 38's observer property, through the binary: two tenants share one server; a random
//! script of ingests, deletes and turns runs in tenant `b` between the requests of tenant
//! `a`. Every answer `a` gets — turn bodies with their traces and search reasons, traces read
//! back, ingest reports, lists, MCP search results, the errors of foreign or missing ids, the
//! admin routes it may not read — is compared with the same script run with `b` idle. They
//! must be identical but for timings, on the embedded store and on Milvus Lite + Redis
//! (private servers on loopback, stopped when the test ends).
//!
//! The one documented exception (docs/filters.md): Milvus computes BM25's statistics over
//! the whole collection, so on Milvus `a`'s lexical and hybrid turns are not compared but
//! counted, and the count is printed (`OBSERVER milvus lexical …`). On the embedded store
//! every retrieval is compared.
//!
//! `RAGCTX_OBSERVER_SEED` picks another script (default 38), `RAGCTX_OBSERVER_STEPS` its
//! length (default 120).

mod common;

use common::{http_key, milvus_lite, redis, Daemon, Env, Server};
use serde_json::{json, Value};

const KEYS: &str = "[[keys]]\nkey = \"ka\"\ntenant = \"a\"\nrole = \"write\"\n\n[[keys]]\nkey = \"kb\"\ntenant = \"b\"\nrole = \"write\"\n";

/// Both tenants write from these words, so `b`'s documents share `a`'s vocabulary (and
/// would shift store-wide term statistics); two of them are rare.
const WORDS: [&str; 26] = [
    "leaves", "pale", "water", "light", "soil", "roots", "humid", "mist", "fern", "cactus", "repot", "drain", "yellow",
    "brown", "tips", "sun", "shade", "winter", "feed", "prune", "pests", "mites", "pothos", "orchid", "quuxfrob",
    "blarnitz",
];

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
    fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| WORDS[self.below(WORDS.len())]).collect::<Vec<_>>().join(" ")
    }
    fn text(&mut self) -> String {
        let n = 1 + self.below(3);
        let mut out = Vec::new();
        for _ in 0..n {
            let len = 5 + self.below(6);
            out.push(format!("The {}.", self.words(len)));
        }
        out.join(" ")
    }
}

/// One request of the script; `Tenant` says whose key sends it.
#[derive(Clone, Debug)]
enum Step {
    Ingest {
        doc: usize,
        chunks: Vec<String>,
    },
    Delete {
        doc: usize,
    },
    Turn {
        session: usize,
        question: String,
        retrieval: &'static str,
    },
    Traces {
        session: usize,
    },
    List,
    Mcp {
        session: usize,
        query: String,
    },
    /// A route of the admin role, or of nobody (`/v1/documents/…` of the other tenant).
    Refused {
        method: &'static str,
        path: String,
    },
}

fn script(seed: u64, steps: usize) -> Vec<(char, Step)> {
    let mut r = Rng(seed | 1);
    let mut out = Vec::new();
    for _ in 0..steps {
        let tenant = if r.below(5) < 2 { 'b' } else { 'a' };
        let step = match r.below(if tenant == 'a' { 9 } else { 4 }) {
            0 | 1 => {
                let (doc, n) = (r.below(8), 1 + r.below(3));
                Step::Ingest { doc, chunks: (0..n).map(|_| r.text()).collect() }
            }
            2 => Step::Delete { doc: r.below(8) },
            3..=5 => {
                let (session, len) = (r.below(3), 2 + r.below(3));
                let question = format!("Why are the {}?", r.words(len));
                Step::Turn { session, question, retrieval: ["dense", "lexical", "hybrid"][r.below(3)] }
            }
            6 => Step::Traces { session: r.below(4) },
            7 => match r.below(3) {
                0 => Step::List,
                _ => Step::Mcp { session: r.below(3), query: r.words(3) },
            },
            _ => match r.below(3) {
                0 => Step::Refused { method: "GET", path: "/metrics".into() },
                1 => Step::Refused { method: "GET", path: "/v1/tenants".into() },
                _ => Step::Refused { method: "DELETE", path: format!("/v1/documents/b-doc{}", r.below(8)) },
            },
        };
        out.push((tenant, step));
    }
    out
}

/// The request `step` is for `tenant`: method, path, body.
fn request(tenant: char, step: &Step) -> (&'static str, String, String) {
    match step {
        Step::Ingest { doc, chunks } => {
            let records: Vec<Value> = chunks
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    json!({"_id": format!("{tenant}-doc{doc}#{i}"), "document_id": format!("{tenant}-doc{doc}"),
                           "title": format!("Note {doc}"), "text": t})
                })
                .collect();
            ("POST", "/v1/documents".into(), Value::Array(records).to_string())
        }
        Step::Delete { doc } => ("DELETE", format!("/v1/documents/{tenant}-doc{doc}"), String::new()),
        Step::Turn { session, question, retrieval } => (
            "POST",
            format!("/v1/sessions/s{session}/turns"),
            json!({"question": question, "retrieval": retrieval}).to_string(),
        ),
        Step::Traces { session } => ("GET", format!("/v1/sessions/s{session}/turns"), String::new()),
        Step::List => ("GET", "/v1/documents".into(), String::new()),
        Step::Mcp { session, query } => (
            "POST",
            "/mcp".into(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "search", "arguments": {"session": format!("m{session}"), "query": query}}})
            .to_string(),
        ),
        Step::Refused { method, path } => (method, path.clone(), String::new()),
    }
}

/// `v` without what differs between two runs of the same requests: timings.
fn without_timings(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !(k == "ms" || k.ends_with("_ms") || k == "seconds"));
            m.values_mut().for_each(without_timings);
        }
        Value::Array(a) => a.iter_mut().for_each(without_timings),
        _ => {}
    }
}

/// What tenant `a` saw at each of its steps (status and body), and whether the step is a
/// lexical-side turn (the Milvus exception).
fn run(server: &Server, script: &[(char, Step)], with_b: bool) -> Vec<(usize, bool, u16, Value)> {
    let mut seen = Vec::new();
    for (i, (tenant, step)) in script.iter().enumerate() {
        if *tenant == 'b' && !with_b {
            continue;
        }
        let (method, path, body) = request(*tenant, step);
        let key = if *tenant == 'a' { "ka" } else { "kb" };
        let (status, text) = http_key(&server.addr, key, method, &path, &body);
        assert_ne!(status, 0, "step {i} ({tenant}): no answer");
        assert!(status < 500, "step {i} ({tenant} {method} {path}): {status} {text}");
        if *tenant == 'a' {
            let mut v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            without_timings(&mut v);
            let lexical = matches!(step, Step::Turn { retrieval, .. } if *retrieval != "dense");
            seen.push((i, lexical, status, v));
        }
    }
    assert_eq!(server.panics(), 0, "{}", server.stderr.lock().unwrap());
    seen
}

/// Issue 38's oracle as a probe: `a` holds two notes that differ by one rare word each and
/// asks for both words, lexically, before and after `b` ingests six notes full of one of
/// them. The lexical side's ranking `a` sees each time.
fn oracle(server: &Server) -> (Value, Value) {
    let notes = json!([{"_id": "w1", "document_id": "w1", "title": "w1", "text": "quuxfrob leaves turn pale"},
                       {"_id": "w2", "document_id": "w2", "title": "w2", "text": "blarnitz leaves turn pale"}]);
    assert_eq!(http_key(&server.addr, "ka", "POST", "/v1/documents", &notes.to_string()).0, 200);
    let ask = |session: &str| {
        let body = json!({"question": "quuxfrob blarnitz", "retrieval": "lexical", "memory": "client"}).to_string();
        let (s, t) = http_key(&server.addr, "ka", "POST", &format!("/v1/sessions/{session}/turns"), &body);
        assert_eq!(s, 200, "{t}");
        let t: Value = serde_json::from_str(&t).unwrap();
        t["trace"]["retrieval"]["lexical"].clone()
    };
    let before = ask("oracle-1");
    let flood: Vec<Value> = (0..6)
        .map(|i| json!({"_id": format!("e{i}"), "document_id": format!("e{i}"), "title": "n", "text": "quuxfrob notes quuxfrob"}))
        .collect();
    assert_eq!(http_key(&server.addr, "kb", "POST", "/v1/documents", &Value::Array(flood).to_string()).0, 200);
    (before, ask("oracle-2"))
}

fn seed_and_steps() -> (u64, usize) {
    let var = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    (var("RAGCTX_OBSERVER_SEED", 38), var("RAGCTX_OBSERVER_STEPS", 120) as usize)
}

/// Compares the two runs; the steps of `exempt` kind are counted instead (returned:
/// (exempt steps, of which differ)).
fn compare(
    backend: &str,
    quiet: &[(usize, bool, u16, Value)],
    busy: &[(usize, bool, u16, Value)],
    exempt_lexical: bool,
) -> (usize, usize) {
    assert_eq!(quiet.len(), busy.len());
    let (mut exempt, mut moved) = (0, 0);
    for (q, b) in quiet.iter().zip(busy) {
        if exempt_lexical && q.1 {
            exempt += 1;
            moved += usize::from(q.3 != b.3);
            continue;
        }
        assert_eq!(
            (q.2, &q.3),
            (b.2, &b.3),
            "{backend}, step {}: tenant a's answer moved because tenant b acted\nquiet: {}\nbusy:  {}",
            q.0,
            q.3,
            b.3
        );
    }
    (exempt, moved)
}

fn served(env: &Env, flags: &[&str]) -> Server {
    let keys = env.write("keys.toml", KEYS);
    let mut cmd = env.cmd();
    cmd.args(flags).args(["serve", "--addr", "127.0.0.1:0"]);
    cmd.env_remove("RAGCTX_API_KEYS").env("RAGCTX_KEYS_FILE", keys);
    Server::spawn(cmd)
}

#[test]
fn another_tenants_actions_change_nothing_a_tenant_observes_on_the_embedded_store() {
    let (seed, steps) = seed_and_steps();
    let script = script(seed, steps);
    let (quiet_env, busy_env) = (Env::new(), Env::new());
    let quiet = run(&served(&quiet_env, &[]), &script, false);
    let server = served(&busy_env, &[]);
    let busy = run(&server, &script, true);
    check_coverage(&quiet);
    compare("embedded", &quiet, &busy, false);
    let (before, after) = oracle(&server);
    assert_eq!(before, after, "another tenant's words moved a's lexical ranking");
}

#[test]
fn another_tenants_actions_change_nothing_a_tenant_observes_on_milvus_and_redis() {
    let (seed, steps) = seed_and_steps();
    let script = script(seed, steps);
    let dir = tempfile::tempdir().unwrap();
    let milvus = milvus_lite(&dir.path().join("milvus"));
    let serve = |name: &str, sessions: &Daemon, env: &Env| {
        let uri = milvus.url("http");
        let collection = format!("observer_{name}");
        let redis_url = sessions.url("redis");
        let flags = [
            "--backend",
            "milvus",
            "--milvus-uri",
            uri.as_str(),
            "--collection",
            collection.as_str(),
            "--milvus-consistency",
            "strong",
            "--sessions",
            redis_url.as_str(),
        ];
        served(env, &flags)
    };
    let (quiet_redis, busy_redis) = (redis(&dir.path().join("r1")), redis(&dir.path().join("r2")));
    let (quiet_env, busy_env) = (Env::new(), Env::new());
    let quiet = run(&serve("quiet", &quiet_redis, &quiet_env), &script, false);
    let server = serve("busy", &busy_redis, &busy_env);
    let busy = run(&server, &script, true);
    check_coverage(&quiet);
    let (exempt, moved) = compare("milvus", &quiet, &busy, true);
    let (before, after) = oracle(&server);
    eprintln!("OBSERVER milvus lexical: {moved} of {exempt} lexical or hybrid turns of tenant a moved when tenant b acted; the oracle probe {}: {before} then {after}",
        if before == after { "held" } else { "moved" });
}

/// The script exercises what it claims: turns that found something on every retrieval,
/// ingests, a refused route, an MCP search, a trace read.
fn check_coverage(seen: &[(usize, bool, u16, Value)]) {
    let found = |v: &Value| v["context"].as_array().is_some_and(|c| !c.is_empty());
    let turns: Vec<&Value> = seen.iter().map(|s| &s.3).filter(|v| v["trace"].is_object()).collect();
    for retrieval in ["dense", "lexical", "hybrid"] {
        let n = turns.iter().filter(|t| t["trace"]["settings"]["retrieval"] == retrieval && found(t)).count();
        assert!(n >= 2, "fewer than 2 {retrieval} turns found something: lengthen the script");
    }
    assert!(seen.iter().any(|s| s.2 == 403), "no refused route");
    assert!(seen.iter().any(|s| s.3["result"].is_object()), "no MCP search");
    assert!(
        seen.iter().any(|s| s.3.as_array().is_some_and(|a| a.iter().any(|t| t["trace"].is_object()))),
        "no trace read"
    );
}
