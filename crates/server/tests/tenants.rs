//! Tenants, scoped keys and filters over HTTP (DESIGN §8), on the real engine.
//!
//! The authorization matrix: every endpoint × caller (read, write, admin, no key, revoked
//! key) × target (the caller's own id, an id only the other tenant has, a missing id). Two
//! tenants hold the SAME document ids with different texts; every cell asserts the status,
//! that the body holds nothing of the other tenant, that a foreign id answers exactly as a
//! missing one, and (mutating calls) that the other tenant's documents and sessions are
//! untouched — and, for a refused call, the caller's own too.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::state_with;
use ragctx_server::{AppState, Keys};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const A: &str = "tenant-alpha";
const B: &str = "tenant-bravo";
const A_READ: &str = "key-alpha-read-0001";
const A_WRITE: &str = "key-alpha-write-0002";
const B_WRITE: &str = "key-bravo-write-0003";
const ADMIN: &str = "key-admin-0004";
const GONE: &str = "key-alpha-gone-0005";

/// Strings only the other tenant's data holds: never in an answer to a caller of `A`.
const B_MARKS: [&str; 6] = ["Blueberr", "blueberr", "Bravo", "b-only", "acidic", B];

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The keys file: the admin key by its digest, the others in clear; `GONE` while `with_gone`.
fn keys_toml(with_gone: bool) -> String {
    use sha2::Digest;
    let admin = hex(&sha2::Sha256::digest(ADMIN.as_bytes()));
    let mut s = format!(
        "[[keys]]\nkey = \"{A_READ}\"\ntenant = \"{A}\"\nrole = \"read\"\n\n\
         [[keys]]\nkey = \"{A_WRITE}\"\ntenant = \"{A}\"\nrole = \"write\"\n\n\
         [[keys]]\nkey = \"{B_WRITE}\"\ntenant = \"{B}\"\nrole = \"write\"\n\n\
         [[keys]]\nsha256 = \"{admin}\"\nrole = \"admin\"\n"
    );
    if with_gone {
        s += &format!("\n[[keys]]\nkey = \"{GONE}\"\ntenant = \"{A}\"\nrole = \"write\"\n");
    }
    s
}

/// Replaces the file by a rename, as editors and deploy tools do.
fn write_keys(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

struct Fx {
    app: axum::Router,
    state: Arc<AppState>,
    keys: PathBuf,
    _dir: tempfile::TempDir,
}

/// One answer: status and body text.
async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    key: Option<&str>,
    tenant: Option<&str>,
    body: Option<&Value>,
) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(uri).header("content-type", "application/json");
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    if let Some(t) = tenant {
        req = req.header("x-ragctx-tenant", t);
    }
    let req = req.body(body.map(|b| Body::from(b.to_string())).unwrap_or_else(Body::empty)).unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

async fn ok(app: &axum::Router, method: &str, uri: &str, key: &str, body: Value) -> Value {
    let (s, b) = call(app, method, uri, Some(key), None, Some(&body)).await;
    assert_eq!(s, StatusCode::OK, "{method} {uri}: {b}");
    serde_json::from_str(&b).unwrap()
}

const A_QUESTION: &str = "When do apricot trees bloom?";
const B_QUESTION: &str = "What soil do blueberry bushes want?";

/// Two tenants with the same document ids (`shared`, `c1`, `c2`) and different texts;
/// sessions `sa` (A only), `sb` (B only) and `both` (one in each).
async fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    write_keys(&keys, &keys_toml(true));
    let state = state_with(Keys::new(&[] as &[&str], Some(&keys)).unwrap(), dir.path(), Duration::from_secs(30));
    let app = ragctx_server::router(state.clone());
    let a = json!([
        {"_id": "c1", "document_id": "shared", "title": "Orchard notes", "text": "Apricot trees in the orchard bloom early in April and need frost protection.", "metadata": {"crop": "apricot"}},
        {"_id": "c2", "document_id": "a-only", "title": "Apricot harvest", "text": "Apricots are harvested by hand in late June."}
    ]);
    let b = json!([
        {"_id": "c1", "document_id": "shared", "title": "Bravo berries", "text": "Blueberry bushes want acidic soil and a sunny corner.", "metadata": {"crop": "blueberry"}},
        {"_id": "c2", "document_id": "b-only", "title": "Bravo harvest", "text": "Blueberries ripen over several weeks in July."}
    ]);
    ok(&app, "POST", "/v1/documents", A_WRITE, a).await;
    ok(&app, "POST", "/v1/documents", B_WRITE, b).await;
    for (key, session, q) in [
        (A_WRITE, "sa", A_QUESTION),
        (A_WRITE, "both", A_QUESTION),
        (B_WRITE, "sb", B_QUESTION),
        (B_WRITE, "both", B_QUESTION),
    ] {
        ok(&app, "POST", &format!("/v1/sessions/{session}/turns"), key, json!({"question": q})).await;
    }
    // The key to revoke works until the file drops it.
    let (s, _) = call(&app, "GET", "/v1/documents", Some(GONE), None, None).await;
    assert_eq!(s, StatusCode::OK);
    write_keys(&keys, &keys_toml(false));
    state.keys.reload();
    Fx { app, state, keys, _dir: dir }
}

/// What a tenant holds, read by the admin: its documents and its sessions' traces.
async fn snapshot(fx: &Fx, tenant: &str) -> String {
    let mut out = String::new();
    let (_, docs) = call(&fx.app, "GET", "/v1/documents", Some(ADMIN), Some(tenant), None).await;
    out += &docs;
    for s in ["sa", "sb", "both", "nobody"] {
        let (status, traces) =
            call(&fx.app, "GET", &format!("/v1/sessions/{s}/turns"), Some(ADMIN), Some(tenant), None).await;
        out += &format!("\n{s} {status} {traces}");
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Read,
    Write,
    Admin,
    NoKey,
    Revoked,
}

impl Who {
    /// The key, and the tenant header (the admin names `A`).
    fn key(self) -> (Option<&'static str>, Option<&'static str>) {
        match self {
            Who::Read => (Some(A_READ), None),
            Who::Write => (Some(A_WRITE), None),
            Who::Admin => (Some(ADMIN), Some(A)),
            Who::NoKey => (None, None),
            Who::Revoked => (Some(GONE), None),
        }
    }
    fn rank(self) -> u8 {
        match self {
            Who::NoKey | Who::Revoked => 0,
            Who::Read => 1,
            Who::Write => 2,
            Who::Admin => 3,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    Own,
    Foreign,
    Missing,
}

/// Which right an endpoint needs: 0 public, 1 read, 2 write, 3 admin.
struct Endpoint {
    name: &'static str,
    method: &'static str,
    /// The path for a target id (`{}`), or a fixed path.
    path: &'static str,
    need: u8,
    mutates: bool,
    /// The ids of the own, foreign and missing targets; `None`: no id, one cell per caller.
    ids: Option<[&'static str; 3]>,
    /// Status when allowed, per target.
    allowed: [u16; 3],
    body: fn(&str) -> Option<Value>,
}

fn no_body(_: &str) -> Option<Value> {
    None
}

fn endpoints() -> Vec<Endpoint> {
    let sessions = Some(["sa", "sb", "nobody"]);
    vec![
        Endpoint {
            name: "turn",
            method: "POST",
            path: "/v1/sessions/{}/turns",
            need: 1,
            mutates: true,
            ids: sessions,
            allowed: [200, 200, 200],
            body: |_| Some(json!({"question": A_QUESTION})),
        },
        Endpoint {
            name: "traces",
            method: "GET",
            path: "/v1/sessions/{}/turns",
            need: 1,
            mutates: false,
            ids: sessions,
            allowed: [200, 404, 404],
            body: no_body,
        },
        Endpoint {
            name: "trace page data: one turn",
            method: "GET",
            path: "/v1/sessions/{}/turns/1",
            need: 1,
            mutates: false,
            ids: sessions,
            allowed: [200, 404, 404],
            body: no_body,
        },
        Endpoint {
            name: "session reset",
            method: "POST",
            path: "/v1/sessions/{}/reset",
            need: 1,
            mutates: true,
            ids: sessions,
            allowed: [204, 404, 404],
            body: no_body,
        },
        Endpoint {
            name: "session delete",
            method: "DELETE",
            path: "/v1/sessions/{}",
            need: 1,
            mutates: true,
            ids: sessions,
            allowed: [204, 404, 404],
            body: no_body,
        },
        Endpoint {
            name: "documents post",
            method: "POST",
            path: "/v1/documents",
            need: 2,
            mutates: true,
            ids: Some(["shared", "b-only", "fresh"]),
            allowed: [200, 200, 200],
            // The own document's chunk keeps its id (`c1`, which the other tenant has too).
            body: |doc| {
                let id = if doc == "shared" { "c1" } else { "c9" };
                Some(
                    json!([{"_id": id, "document_id": doc, "title": "Apricot jam", "text": "Apricot jam needs ripe fruit."}]),
                )
            },
        },
        Endpoint {
            name: "documents delete",
            method: "DELETE",
            path: "/v1/documents/{}",
            need: 2,
            mutates: true,
            ids: Some(["a-only", "b-only", "nothing"]),
            allowed: [204, 404, 404],
            body: no_body,
        },
        Endpoint {
            name: "chat completions",
            method: "POST",
            path: "/v1/chat/completions",
            need: 1,
            mutates: true,
            ids: sessions,
            allowed: [200, 200, 200],
            body: |user| Some(json!({"user": user, "messages": [{"role": "user", "content": A_QUESTION}]})),
        },
        Endpoint {
            name: "documents list",
            method: "GET",
            path: "/v1/documents",
            need: 1,
            mutates: false,
            ids: None,
            allowed: [200; 3],
            body: no_body,
        },
        Endpoint {
            name: "models",
            method: "GET",
            path: "/v1/models",
            need: 1,
            mutates: false,
            ids: None,
            allowed: [200; 3],
            body: no_body,
        },
        Endpoint {
            name: "metrics",
            method: "GET",
            path: "/metrics",
            need: 3,
            mutates: false,
            ids: None,
            allowed: [200; 3],
            body: no_body,
        },
        Endpoint {
            name: "tenants",
            method: "GET",
            path: "/v1/tenants",
            need: 3,
            mutates: false,
            ids: None,
            allowed: [200; 3],
            body: no_body,
        },
        Endpoint {
            name: "trace page",
            method: "GET",
            path: "/",
            need: 0,
            mutates: false,
            ids: None,
            allowed: [200; 3],
            body: no_body,
        },
        Endpoint {
            name: "healthz",
            method: "GET",
            path: "/healthz",
            need: 0,
            mutates: false,
            ids: None,
            allowed: [200; 3],
            body: no_body,
        },
    ]
}

/// The turn number an answer reports (turns and chat completions).
fn turn_of(v: &Value) -> Option<u64> {
    v["turn"].as_u64().or_else(|| v["ragctx"]["turn"].as_u64())
}

#[tokio::test(flavor = "multi_thread")]
async fn authorization_matrix() {
    let shared = fixture().await;
    let whos = [Who::Read, Who::Write, Who::Admin, Who::NoKey, Who::Revoked];
    let mut cells = 0;
    for ep in endpoints() {
        for who in whos {
            let targets: &[Target] =
                if ep.ids.is_some() { &[Target::Own, Target::Foreign, Target::Missing] } else { &[Target::Own] };
            // Bodies of the foreign and missing cells, to compare.
            let mut unseen: Vec<(Target, StatusCode, String, &str)> = Vec::new();
            for &target in targets {
                cells += 1;
                let i = target as usize;
                let id = ep.ids.map_or("", |ids| ids[i]);
                let uri = ep.path.replace("{}", id);
                let body = (ep.body)(id);
                let fresh = if ep.mutates { Some(fixture().await) } else { None };
                let fx = fresh.as_ref().unwrap_or(&shared);
                let before = if ep.mutates { Some((snapshot(fx, A).await, snapshot(fx, B).await)) } else { None };
                let (key, tenant) = who.key();
                let (status, text) = call(&fx.app, ep.method, &uri, key, tenant, body.as_ref()).await;
                let cell = format!("{} {} as {who:?}, {target:?} id {id:?}", ep.name, uri);
                let expected = if ep.need == 0 {
                    ep.allowed[i]
                } else if matches!(who, Who::NoKey | Who::Revoked) {
                    401
                } else if who.rank() < ep.need {
                    403
                } else {
                    ep.allowed[i]
                };
                assert_eq!(status.as_u16(), expected, "{cell}: {text}");
                // Nothing of the other tenant, whatever the answer (the id asked for aside).
                let shown = if id.is_empty() { text.clone() } else { text.replace(id, "<id>") };
                if ep.name != "tenants" {
                    for mark in B_MARKS {
                        assert!(!shown.contains(mark), "{cell}: the other tenant's {mark:?} leaked: {text}");
                    }
                }
                if let Ok(v) = serde_json::from_str::<Value>(&text) {
                    if status.is_client_error() {
                        assert!(v["code"].is_string() && v["message"].is_string(), "{cell}: {text}");
                        if status == StatusCode::FORBIDDEN {
                            assert!(v["message"].as_str().unwrap().contains("role"), "{cell}: a clear 403: {text}");
                        }
                    }
                    if status == StatusCode::OK && matches!(ep.name, "turn" | "chat completions") {
                        // A foreign session is a new one here: nothing of the other's carried.
                        let n = turn_of(&v);
                        assert_eq!(n, Some(if target == Target::Own { 2 } else { 1 }), "{cell}: {text}");
                    }
                    if status == StatusCode::OK && ep.name == "documents post" {
                        // The other tenant's document or chunk of the same id is not "updated" here.
                        let counts = (v["new"].as_u64(), v["updated"].as_u64(), v["removed"].as_u64());
                        let own = if target == Target::Own { (0, 1, 0) } else { (1, 0, 0) };
                        assert_eq!(counts, (Some(own.0), Some(own.1), Some(own.2)), "{cell}: {text}");
                    }
                    if status == StatusCode::OK && ep.name == "documents list" {
                        let ids: Vec<&str> =
                            v.as_array().unwrap().iter().filter_map(|d| d["document_id"].as_str()).collect();
                        assert_eq!(ids.len(), 2, "{cell}: {text}");
                        assert!(ids.contains(&"shared") && ids.contains(&"a-only"), "{cell}: {text}");
                    }
                    if status == StatusCode::OK && ep.name == "tenants" {
                        let names: Vec<&str> =
                            v.as_array().unwrap().iter().filter_map(|t| t["tenant"].as_str()).collect();
                        assert_eq!(names, [A, B], "{cell}: {text}");
                    }
                    if status == StatusCode::OK && ep.name == "healthz" {
                        assert_eq!(
                            v["chunks"].is_number(),
                            who == Who::Admin,
                            "{cell}: counts for admins only: {text}"
                        );
                    }
                }
                if let Some((a, b)) = before {
                    assert_eq!(snapshot(fx, B).await, b, "{cell}: the other tenant changed");
                    if !status.is_success() {
                        assert_eq!(snapshot(fx, A).await, a, "{cell}: a refused call changed the caller's tenant");
                    }
                }
                if target != Target::Own {
                    unseen.push((target, status, text, id));
                }
            }
            // A foreign id answers exactly as a missing one: same status, same body.
            if let [(Target::Foreign, fs, ftext, fid), (Target::Missing, ms, mtext, mid)] = &unseen[..] {
                assert_eq!(fs, ms, "{} as {who:?}: foreign {ftext} vs missing {mtext}", ep.name);
                if !fs.is_success() {
                    assert_eq!(ftext.replace(fid, "<id>"), mtext.replace(mid, "<id>"), "{} as {who:?}", ep.name);
                }
            }
        }
    }
    assert_eq!(cells, 8 * 5 * 3 + 6 * 5, "every cell ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn tenant_header_and_admin_scope() {
    let fx = fixture().await;
    // A non-admin key cannot name another tenant (its own is fine).
    let (s, b) = call(&fx.app, "GET", "/v1/documents", Some(A_READ), Some(B), None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    assert!(!b.contains("Bravo"), "{b}");
    let (s, _) = call(&fx.app, "GET", "/v1/documents", Some(A_READ), Some(A), None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = call(&fx.app, "GET", "/v1/documents", Some(A_READ), Some("no such/tenant"), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    let (s, _) = call(&fx.app, "GET", "/v1/documents", None, Some("no such/tenant"), None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "no key: 401 before anything else");
    // The admin acts in the tenant it names; without a header, in `default` (empty here).
    let (s, b) = call(&fx.app, "GET", "/v1/documents", Some(ADMIN), Some(B), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(b.contains("Bravo") && b.contains("b-only") && !b.contains("a-only"), "{b}");
    let (s, b) = call(&fx.app, "GET", "/v1/documents", Some(ADMIN), None, None).await;
    assert_eq!((s, b.as_str()), (StatusCode::OK, "[]"));
    // The same session id in two tenants is two sessions.
    let (_, a) = call(&fx.app, "GET", "/v1/sessions/both/turns", Some(A_READ), None, None).await;
    let (_, b) = call(&fx.app, "GET", "/v1/sessions/both/turns", Some(ADMIN), Some(B), None).await;
    assert!(a.contains("Apricot") && !a.contains("Blueberr"), "{a}");
    assert!(b.contains("Blueberr") && !b.contains("Apricot"), "{b}");
    // Chunk metadata rode in through POST /v1/documents and comes back with the blocks.
    let t = ok(&fx.app, "POST", "/v1/sessions/meta/turns", A_READ, json!({"question": A_QUESTION, "limit": 1})).await;
    assert_eq!(t["context"][0]["document_id"], "shared", "{t}");
    assert_eq!(t["context"][0]["metadata"]["crop"], "apricot", "{t}");
    // Deleting A's `shared` leaves B's `shared`.
    let (s, _) = call(&fx.app, "DELETE", "/v1/documents/shared", Some(A_WRITE), None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, b) = call(&fx.app, "GET", "/v1/documents", Some(B_WRITE), None, None).await;
    assert!(b.contains("\"shared\""), "{b}");
    // No key, tenant or document id in the metric labels.
    let (s, m) = call(&fx.app, "GET", "/metrics", Some(ADMIN), None, None).await;
    assert_eq!(s, StatusCode::OK);
    for secret in [A, B, A_READ, A_WRITE, B_WRITE, ADMIN, GONE, "shared", "a-only", "b-only"] {
        assert!(!m.contains(secret), "{secret} in the metrics: {m}");
    }
    assert!(m.contains("route=\"/v1/sessions/{id}/turns\""), "{m}");
}

/// Rewriting the keys file revokes a key within about a second, without a restart; a file
/// that does not parse keeps the last good keys (never falls open); an empty one lets no
/// key in.
#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_key_is_refused_within_a_second() {
    let fx = fixture().await;
    let (s, _) = call(&fx.app, "GET", "/v1/documents", Some(A_READ), None, None).await;
    assert_eq!(s, StatusCode::OK);
    // Revoke A_READ: every key but it.
    let without =
        keys_toml(false).replace(&format!("[[keys]]\nkey = \"{A_READ}\"\ntenant = \"{A}\"\nrole = \"read\"\n"), "");
    assert!(!without.contains(A_READ));
    write_keys(&fx.keys, &without);
    let started = Instant::now();
    loop {
        let (s, _) = call(&fx.app, "GET", "/v1/documents", Some(A_READ), None, None).await;
        if s == StatusCode::UNAUTHORIZED {
            break;
        }
        assert_eq!(s, StatusCode::OK);
        assert!(started.elapsed() < Duration::from_millis(1500), "still accepted after {:?}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let (s, _) = call(&fx.app, "GET", "/v1/documents", Some(A_WRITE), None, None).await;
    assert_eq!(s, StatusCode::OK, "the other keys still work (revoked after {took:?})");

    // A broken file: the last good keys stay (A_WRITE in, A_READ out).
    write_keys(&fx.keys, "[[keys]\nkey = ");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (s, _) = call(&fx.app, "GET", "/v1/documents", Some(A_WRITE), None, None).await;
    assert_eq!(s, StatusCode::OK, "a broken file keeps the last good keys");
    let (s, _) = call(&fx.app, "GET", "/v1/documents", Some(A_READ), None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "and never falls open");

    // An empty file: no key at all is accepted (the server does not become open).
    write_keys(&fx.keys, "# no keys\n");
    fx.state.keys.reload();
    for key in [Some(A_WRITE), Some(ADMIN), None] {
        let (s, _) = call(&fx.app, "GET", "/v1/documents", key, None, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{key:?}");
    }
}

/// A turn's `filter` restricts its blocks (with the standing filter: both hold); a malformed
/// filter is a 400 naming its JSON path; the OpenAI front takes it as an extra field.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_filter_restricts_blocks_and_a_bad_one_names_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = state_with(Keys::none(), dir.path(), Duration::from_secs(30));
    // The standing filter: year 2020 or later.
    Arc::get_mut(&mut state).unwrap().settings.filter = serde_json::from_value(json!({"year": {"gte": 2020}})).unwrap();
    let app = ragctx_server::router(state);
    let corpus = json!([
        {"_id": "p1", "document_id": "aphids", "title": "Aphids", "text": "Aphids are garden pests on roses; spray soapy water.", "metadata": {"topic": "pests", "year": 2024}},
        {"_id": "p2", "document_id": "slugs", "title": "Slugs", "text": "Slugs are garden pests that eat lettuce at night.", "metadata": {"topic": "pests", "year": 2012}},
        {"_id": "p3", "document_id": "roses", "title": "Roses", "text": "Roses in the garden want sun and mulch against pests.", "metadata": {"topic": "care", "year": 2023}},
        {"_id": "p4", "document_id": "mites", "title": "Mites", "text": "Spider mites are garden pests in dry weather.", "metadata": {"topic": "pests", "year": 2021}}
    ]);
    let (s, b) = call(&app, "POST", "/v1/documents", None, None, Some(&corpus)).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let passes =
        |block: &Value| block["metadata"]["topic"] == "pests" && block["metadata"]["year"].as_f64().unwrap() >= 2020.0;

    let t = ok(
        &app,
        "POST",
        "/v1/sessions/f/turns",
        "",
        json!({"question": "garden pests", "limit": 10, "filter": {"topic": "pests"}}),
    )
    .await;
    let blocks = t["context"].as_array().unwrap();
    let docs: Vec<&str> = blocks.iter().map(|b| b["document_id"].as_str().unwrap()).collect();
    assert!(!blocks.is_empty() && blocks.iter().all(passes), "only blocks that pass both filters: {docs:?}");
    assert!(docs.contains(&"aphids") && docs.contains(&"mites"), "{docs:?}");
    assert!(!docs.contains(&"slugs"), "the standing filter still holds: {docs:?}");
    // `document_id` is filterable too.
    let t = ok(
        &app,
        "POST",
        "/v1/sessions/g/turns",
        "",
        json!({"question": "garden pests", "filter": {"document_id": {"in": ["mites"]}}}),
    )
    .await;
    let docs: Vec<&str> = t["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap()).collect();
    assert_eq!(docs, ["mites"]);

    let bad = json!({"question": "garden pests", "filter": {"and": [{"topic": "pests"}, {"year": {"gt": "x"}}]}});
    let (s, b) = call(&app, "POST", "/v1/sessions/h/turns", None, None, Some(&bad)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    let v: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["code"], "bad_request");
    assert!(v["message"].as_str().unwrap().contains("filter.and[1].year.gt"), "{b}");
    let (s, _) = call(&app, "GET", "/v1/sessions/h/turns", None, None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a refused turn records nothing");

    // The OpenAI-compatible front: `filter` as an extra body field.
    let chat =
        json!({"user": "c", "filter": {"topic": "care"}, "messages": [{"role": "user", "content": "garden pests"}]});
    let c = ok(&app, "POST", "/v1/chat/completions", "", chat).await;
    let docs: Vec<&str> =
        c["ragctx"]["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap()).collect();
    assert_eq!(docs, ["roses"], "{c}");
    let chat = json!({"user": "c", "filter": {"not": {"year": {"between": 1}}}, "messages": [{"role": "user", "content": "pests"}]});
    let (s, b) = call(&app, "POST", "/v1/chat/completions", None, None, Some(&chat)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b.contains("filter.not.year"), "{b}");
}

/// The embedding cache is shared on disk but read through the caller's tenant: an ingest's
/// report (`embedded`, `cached`) never tells a tenant that another already ingested the
/// same text, while a tenant's own re-ingest still finds its vectors.
#[tokio::test(flavor = "multi_thread")]
async fn an_ingest_report_never_tells_what_another_tenant_ingested() {
    let fx = fixture().await;
    let same = |id: &str| json!([{"_id": id, "document_id": id, "title": "Probe", "text": "A text only tenant alpha has written so far."}]);
    let first = ok(&fx.app, "POST", "/v1/documents", A_WRITE, same("probe-a")).await;
    assert_eq!((first["embedded"].as_u64(), first["cached"].as_u64()), (Some(1), Some(0)), "{first}");
    let again = ok(&fx.app, "POST", "/v1/documents", A_WRITE, same("probe-a2")).await;
    assert_eq!((again["embedded"].as_u64(), again["cached"].as_u64()), (Some(0), Some(1)), "own cache: {again}");
    let other = ok(&fx.app, "POST", "/v1/documents", B_WRITE, same("probe-b")).await;
    assert_eq!(
        (other["embedded"].as_u64(), other["cached"].as_u64()),
        (Some(1), Some(0)),
        "tenant bravo learned that tenant alpha holds this text: {other}"
    );
}
