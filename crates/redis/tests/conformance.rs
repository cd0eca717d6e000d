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

/// Turns of one session plan one at a time across processes: a second lease waits for the
/// first (two stores stand for two processes), another session's does not, a dropped lease
/// frees the session at once, and a lease nobody gives back expires by itself.
#[test]
fn turn_leases_are_one_session_at_a_time_across_processes() {
    use std::time::{Duration, Instant};
    let (a, b) = (Arc::new(store()), store());
    let s1 = SessionId::parse(&format!("{}lease", prefix())).unwrap();
    let first = a.lease_turns(&s1, Duration::from_secs(1)).unwrap();
    assert!(first.is_some(), "a free session's lease is taken at once");
    let t = Instant::now();
    assert!(b.lease_turns(&s1, Duration::from_millis(200)).unwrap().is_none(), "taken: the wait runs out");
    assert!(t.elapsed() >= Duration::from_millis(190), "it waited its time");
    let s2 = SessionId::parse(&format!("{}lease-other", prefix())).unwrap();
    assert!(b.lease_turns(&s2, Duration::from_millis(200)).unwrap().is_some(), "another session does not wait");
    let waiter = {
        let (a, s1) = (a.clone(), s1.clone());
        std::thread::spawn(move || (a.lease_turns(&s1, Duration::from_secs(10)).unwrap().is_some(), Instant::now()))
    };
    std::thread::sleep(Duration::from_millis(150));
    let freed = Instant::now();
    drop(first);
    let (got, at) = waiter.join().unwrap();
    assert!(got && at >= freed, "the next turn goes once the first ends, not before");
    assert!(at - freed < Duration::from_millis(1_000), "and soon after: {:?}", at - freed);
    // A holder that died: its key stays until LEASE_TTL, never longer.
    let mut c = redis::Client::open(url()).unwrap().get_connection().unwrap();
    let key = format!("{{ragctx:{s1}}}:lease");
    let _: () = redis::cmd("SET").arg(&key).arg("dead-process").arg("PX").arg(300).query(&mut c).unwrap();
    let t = Instant::now();
    let last = b.lease_turns(&s1, Duration::from_secs(5)).unwrap();
    assert!(last.is_some(), "an expired lease frees the session");
    assert!(t.elapsed() >= Duration::from_millis(250), "not before it expired: {:?}", t.elapsed());
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut c).unwrap();
    assert!(ttl > 0 && ttl as u128 <= ragctx_redis::LEASE_TTL.as_millis(), "every lease expires: pttl {ttl}");
    drop(last);
    let left: i64 = redis::cmd("EXISTS").arg(&key).query(&mut c).unwrap();
    assert_eq!(left, 0, "a lease given back is gone");
    // A lease held longer than its time is renewed (a long turn keeps it) ...
    let long = a.lease_turns(&s1, Duration::from_secs(1)).unwrap();
    assert!(long.is_some());
    std::thread::sleep(ragctx_redis::LEASE_TTL + Duration::from_millis(500));
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut c).unwrap();
    assert!(ttl > 0, "renewed while held: pttl {ttl}");
    assert!(b.lease_turns(&s1, Duration::from_millis(100)).unwrap().is_none(), "and still its own");
    // ... and giving it back deletes only its own token: a lease that expired and was taken
    // by another process stays that process's.
    let _: () = redis::cmd("SET").arg(&key).arg("another-process").arg("PX").arg(5_000).query(&mut c).unwrap();
    drop(long);
    let owner: Option<String> = redis::cmd("GET").arg(&key).query(&mut c).unwrap();
    assert_eq!(owner.as_deref(), Some("another-process"), "another's lease is left alone");
    let _: () = redis::cmd("DEL").arg(&key).query(&mut c).unwrap();
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

/// The local cluster of `scripts/redis-cluster-up` (3 masters, 3 replicas), or
/// RAGCTX_TEST_REDIS_CLUSTER.
fn cluster_url() -> String {
    std::env::var("RAGCTX_TEST_REDIS_CLUSTER")
        .unwrap_or_else(|_| "redis+cluster://127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103".into())
}

fn cluster_store() -> RedisSessionStore {
    RedisSessionStore::connect(&cluster_url())
        .unwrap_or_else(|e| panic!("{e}: start the cluster with scripts/redis-cluster-up"))
}

#[test]
fn redis_cluster_session_store_conforms() {
    let s: Arc<dyn SessionStore> = Arc::new(cluster_store());
    ragctx_testkit::session_store_conformance(s.clone(), &format!("cluster-{}", prefix()));
    ragctx_testkit::ttl_expiry(s, &format!("cluster-{}", prefix()));
}

#[test]
fn on_a_cluster_sessions_spread_over_masters_and_each_stays_in_one_slot() {
    let s = cluster_store();
    let nodes: Vec<String> =
        cluster_url().trim_start_matches("redis+cluster://").split(',').map(|n| format!("redis://{n}")).collect();
    let mut c = redis::Client::open(nodes[0].as_str()).unwrap().get_connection().unwrap();
    let mut slots = std::collections::HashSet::new();
    for i in 0..12 {
        let id = SessionId::parse(&format!("{}spread-{i}", prefix())).unwrap();
        s.delete(&id).unwrap();
        s.commit_turn(
            &id,
            ragctx_testkit::sample_commit("q", &["d"]),
            ragctx_core::Retention { window: 0, ttl_secs: 60 },
        )
        .unwrap();
        let tag = format!("{{ragctx:{id}}}");
        let slot: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(format!("{tag}:meta")).query(&mut c).unwrap();
        for k in ["turns", "markers", "used", "traces"] {
            let other: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(format!("{tag}:{k}")).query(&mut c).unwrap();
            assert_eq!(slot, other, "{k} shares the session's slot");
        }
        slots.insert(slot / 5462); // the three masters' ranges
        assert_eq!(s.load(&id).unwrap().unwrap().turn_count, 1);
        s.delete(&id).unwrap();
    }
    assert!(slots.len() > 1, "12 sessions all landed on one master: {slots:?}");
}

#[test]
fn tls_urls_are_refused_with_a_clear_message() {
    let err = RedisSessionStore::connect("rediss://127.0.0.1:6380").err().expect("refused");
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("TLS"), "{err}");
}
