//! The router on the real engine (MiniLM loaded once per test binary, cl100k_base, the
//! embedded index and session store), called without opening a port (`oneshot`).
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use ragctx_app::{App, RawConfig, Settings};
use ragctx_core::Tenant;
use ragctx_engine::{Engine, TurnSettings};
use ragctx_models::{Cl100kCounter, ExtractiveGenerator, MiniLmEmbedder};
use ragctx_server::{AppState, Keys};
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tower::ServiceExt;

/// The model `scripts/setup` installs.
fn model_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2")
}

pub fn embedder() -> Arc<MiniLmEmbedder> {
    static E: OnceLock<Arc<MiniLmEmbedder>> = OnceLock::new();
    E.get_or_init(|| Arc::new(MiniLmEmbedder::load(&model_dir()).expect("model installed by scripts/setup"))).clone()
}

pub fn state(keys: &[&str], dir: &std::path::Path) -> Arc<AppState> {
    state_with(Keys::bare(keys), dir, Duration::from_secs(30))
}

/// [`state`] whose turns must finish within `turn_timeout`.
pub fn state_with_deadline(keys: &[&str], dir: &std::path::Path, turn_timeout: Duration) -> Arc<AppState> {
    state_with(Keys::bare(keys), dir, turn_timeout)
}

/// The server state `ragctx serve` builds, from the same factory (`App::open` over the data
/// dir `dir`, the installed model, the default settings) and the same constructor, with
/// `keys` and a turn deadline.
pub fn state_with(keys: Keys, dir: &std::path::Path, turn_timeout: Duration) -> Arc<AppState> {
    let raw = RawConfig { data_dir: Some(dir.to_path_buf()), model_dir: Some(model_dir()), ..Default::default() };
    let app = App::open(Settings::from_raw(raw).unwrap()).unwrap();
    Arc::new(AppState::new(
        app.unscoped.clone(),
        app.settings.tenant().clone(),
        app.settings.turn().clone(),
        keys,
        turn_timeout,
        Some(app.embedding_cache()),
    ))
}

/// The server state over the (unscoped) vector store `vectors`, the data dir's session store
/// and the installed model, through the server's one constructor.
pub fn state_over(vectors: Arc<dyn ragctx_core::VectorStore>, keys: Keys, dir: &std::path::Path) -> Arc<AppState> {
    let data = ragctx_store::DataDir::open(dir, 384).unwrap();
    let engine = Engine::new(
        vectors,
        Arc::new(data.session_store()),
        embedder(),
        Arc::new(Cl100kCounter::new()),
        Arc::new(ExtractiveGenerator::default()),
    );
    let cache: Arc<dyn ragctx_core::EmbeddingCache> = Arc::new(data.embedding_cache());
    Arc::new(AppState::new(
        engine,
        Tenant::default(),
        TurnSettings::default(),
        keys,
        Duration::from_secs(30),
        Some(cache),
    ))
}

pub async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    key: Option<&str>,
    body: Option<Vec<u8>>,
) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let req =
        req.header("content-type", "application/json").body(body.map(Body::from).unwrap_or_else(Body::empty)).unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
    (status, bytes.to_vec())
}

pub async fn call_json(
    app: &axum::Router,
    method: &str,
    uri: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (s, b) = call(app, method, uri, key, body.map(|v| v.to_string().into_bytes())).await;
    (s, serde_json::from_slice(&b).unwrap_or(Value::Null))
}
