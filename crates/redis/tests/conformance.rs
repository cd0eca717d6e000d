//! The Redis session store against a real server on 127.0.0.1 (started by
//! `scripts/redis-up`; URL overridable with RAGCTX_TEST_REDIS).

use ragctx_core::{Error, SessionId, SessionStore};
use ragctx_redis::RedisSessionStore;
use std::sync::Arc;

fn url() -> String {
    std::env::var("RAGCTX_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn store() -> RedisSessionStore {
    RedisSessionStore::connect(&url()).unwrap_or_else(|e| panic!("{e}: start Redis with scripts/redis-up"))
}

fn prefix() -> String {
    format!("test-{}-", std::process::id())
}

#[test]
fn redis_session_store_conforms() {
    let s: Arc<dyn SessionStore> = Arc::new(store());
    ragctx_testkit::session_store_conformance(s.clone(), &prefix());
    ragctx_testkit::ttl_expiry(s, &prefix());
}

#[test]
fn keys_share_one_hash_tag_and_carry_the_ttl() {
    let s = store();
    let id = SessionId::parse(&format!("{}slot", prefix())).unwrap();
    s.delete(&id).unwrap();
    let commit = ragctx_testkit::sample_commit("q", &["doc \"1\"", "doc [2]"]);
    s.commit_turn(&id, commit, ragctx_core::Retention { window: 0, ttl_secs: 600 }).unwrap();
    let mut c = redis::Client::open(url()).unwrap().get_connection().unwrap();
    let found: Vec<String> = redis::cmd("KEYS").arg(format!("*ragctx:{id}*")).query(&mut c).unwrap();
    assert_eq!(found.len(), 5, "{found:?}");
    let tag = format!("{{ragctx:{id}}}");
    for k in &found {
        // Redis Cluster hashes only the part inside the first braces: one slot for all five.
        assert!(k.starts_with(&tag), "{k} carries the session's hash tag");
        let ttl: i64 = redis::cmd("PTTL").arg(k).query(&mut c).unwrap();
        assert!(ttl > 590_000 && ttl <= 600_000, "{k}: ttl {ttl}");
    }
    assert!(s.delete(&id).unwrap());
    let left: Vec<String> = redis::cmd("KEYS").arg(format!("*ragctx:{id}*")).query(&mut c).unwrap();
    assert!(left.is_empty());
}

#[test]
fn a_server_that_is_down_is_a_clear_unavailable_error() {
    // Nothing listens on port 1 of the loopback.
    let err = RedisSessionStore::connect("redis://127.0.0.1:1").err().expect("refused");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("redis at redis://127.0.0.1:1"), "{err}");
    let err = RedisSessionStore::connect("not a url").err().unwrap();
    assert!(matches!(err, Error::InvalidInput(_)));
}
