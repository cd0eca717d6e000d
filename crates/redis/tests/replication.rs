//! Acknowledged means kept, on Redis too: a private master and replica (two `redis-server`
//! processes on free loopback ports, no persistence, stopped by PID) lose the master while
//! the replica is behind. The replica reaches its master through a proxy of the test; the
//! proxy is cut (both directions dropped, the connection left open: a partition) so a commit
//! cannot reach the replica, the master is killed (SIGKILL) and the replica promoted
//! (`REPLICAOF NO ONE`) — what a fail-over does, at the worst moment.
//!
//! Without `min_replicas` the turn committed in that window was acknowledged and is gone:
//! the loss window is real, and the first test measures it. With `?min_replicas=1` the same
//! turn is refused as unavailable after `replica_timeout_ms`, so no acknowledged turn is lost;
//! the second test checks that and prints what the wait costs a healthy commit.

use ragctx_core::{Error, Retention, SessionId, SessionStore, TurnCommit};
use ragctx_redis::RedisSessionStore;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A TCP proxy to `port` on a free loopback port; once `cut`, it drops every byte both ways
/// and keeps the connections open.
struct Link {
    port: u16,
    cut: Arc<AtomicBool>,
}

impl Link {
    fn to(port: u16) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let link = Link { port: listener.local_addr().unwrap().port(), cut: Arc::default() };
        let cut = link.cut.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else { continue };
                // As Redis does on its own sockets: no Nagle delay on small replies.
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    let cut = cut.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n @ 1..) = from.read(&mut buf) {
                            if !cut.load(Ordering::SeqCst) && to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        link
    }
}

struct Redis {
    child: Child,
    port: u16,
    /// Its working directory (a replica writes its sync file there), removed with it.
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start(extra: &[&str]) -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/redis-up installs it)");
        let r = Redis { child, port, _dir: dir };
        let t = Instant::now();
        while r.cli(&["ping"]).trim() != "PONG" {
            assert!(t.elapsed() < Duration::from_secs(20), "redis-server on {port} did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        r
    }
    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli").args(["-h", "127.0.0.1", "-p", &self.port.to_string()]).args(args).output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    }
    fn signal(&self, sig: &str) {
        assert!(Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success());
    }
    fn url(&self, query: &str) -> String {
        format!("redis://127.0.0.1:{}{query}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A master and one replica in sync, linked through a proxy.
fn pair() -> (Redis, Redis, Link) {
    let master = Redis::start(&[]);
    let link = Link::to(master.port);
    let replica = Redis::start(&["--replicaof", "127.0.0.1", &link.port.to_string()]);
    let t = Instant::now();
    while !(replica.cli(&["info", "replication"]).contains("master_link_status:up")
        && master.cli(&["info", "replication"]).contains("connected_slaves:1"))
    {
        assert!(t.elapsed() < Duration::from_secs(30), "the replica did not sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    (master, replica, link)
}

/// The master dies while cut off from its replica; the replica takes over.
fn fail_over(mut master: Redis, replica: &Redis) {
    master.signal("-KILL");
    let _ = master.child.wait();
    assert!(replica.cli(&["replicaof", "no", "one"]).contains("OK"), "the replica is promoted");
}

fn next(store: &RedisSessionStore, id: &SessionId, question: &str) -> TurnCommit {
    let mut c = ragctx_testkit::sample_commit(question, &["doc-a"]);
    c.new_markers.clear();
    c.read_version = store.load(id).unwrap().map_or(0, |s| s.version);
    c
}

const KEEP: Retention = Retention { window: 0, ttl_secs: 0 };

#[test]
fn without_a_replica_wait_an_acknowledged_turn_dies_with_its_master() {
    let (master, replica, link) = pair();
    let store = RedisSessionStore::connect(&master.url("")).unwrap();
    let id = SessionId::parse("loss-window").unwrap();
    assert_eq!(store.commit_turn(&id, next(&store, &id, "one"), KEEP).unwrap(), 1);
    // Turn 1 reaches the replica before it is paused.
    assert!(master.cli(&["wait", "1", "2000"]).trim() == "1", "the replica has turn 1");
    link.cut.store(true, Ordering::SeqCst);
    let acked = store.commit_turn(&id, next(&store, &id, "two"), KEEP);
    assert_eq!(acked.as_ref().ok(), Some(&2), "the master acknowledged turn 2 at once: {acked:?}");
    fail_over(master, &replica);
    let after = RedisSessionStore::connect(&replica.url("")).unwrap();
    let kept = after.load(&id).unwrap().expect("the session").turn_count;
    eprintln!("RELIABILITY {{\"suite\": \"redis: acknowledged turn, master killed, no wait\", \"acknowledged\": 2, \"kept\": {kept}}}");
    // The window is real: this is what `min_replicas` closes.
    assert_eq!(kept, 1, "turn 2 was acknowledged by the master and lost with it");
}

#[test]
fn with_min_replicas_only_turns_a_replica_holds_are_acknowledged() {
    let (master, replica, link) = pair();
    let waits = RedisSessionStore::connect(&master.url("?min_replicas=1&replica_timeout_ms=300")).unwrap();
    let plain = RedisSessionStore::connect(&master.url("")).unwrap();
    // What waiting costs a healthy commit: 200 commits each way, alternating, medians.
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for i in 0..200 {
        for (store, times, tag) in [(&waits, &mut with, "w"), (&plain, &mut without, "p")] {
            let id = SessionId::parse(&format!("cost-{tag}-{i}")).unwrap();
            let t = Instant::now();
            store.commit_turn(&id, next(store, &id, "q"), KEEP).unwrap();
            times.push(t.elapsed().as_micros() as u64);
        }
    }
    with.sort_unstable();
    without.sort_unstable();
    let id = SessionId::parse("kept").unwrap();
    assert_eq!(waits.commit_turn(&id, next(&waits, &id, "one"), KEEP).unwrap(), 1, "a replica confirms turn 1");
    link.cut.store(true, Ordering::SeqCst);
    let t = Instant::now();
    let refused = waits.commit_turn(&id, next(&waits, &id, "two"), KEEP);
    let waited = t.elapsed();
    match &refused {
        Err(e @ Error::Unavailable { .. }) => {
            let e = e.to_string();
            assert!(e.contains("0 of 1 replicas confirmed it within 300 ms") && e.contains("taken back"), "{e}")
        }
        other => panic!("turn 2 cannot reach the cut-off replica, so it is not acknowledged: {other:?}"),
    }
    assert!(waited >= Duration::from_millis(300), "the commit waited for the replica: {waited:?}");
    // The master, still up, does not go on from the refused turn: the next turn is turn 2 again
    // and hands out its markers afresh (a client is never pointed to what it was not given).
    let state = waits.load(&id).unwrap().expect("the session");
    assert_eq!((state.turn_count, state.turns.len()), (1, 1), "the refused turn was taken back");
    assert_eq!(waits.traces(&id).unwrap().len(), 1, "its trace too");
    let lone = SessionId::parse("first-refused").unwrap();
    assert!(waits.commit_turn(&lone, next(&waits, &lone, "one"), KEEP).is_err());
    assert!(waits.load(&lone).unwrap().is_none(), "a session whose first turn was refused does not exist");
    fail_over(master, &replica);
    let after = RedisSessionStore::connect(&replica.url("")).unwrap();
    let kept = after.load(&id).unwrap().expect("the session").turn_count;
    eprintln!(
        "RELIABILITY {{\"suite\": \"redis: min_replicas 1, master killed\", \"acknowledged\": 1, \"refused_503\": 1, \"kept\": {kept}, \"refusal_ms\": {}, \"commit_p50_us_wait\": {}, \"commit_p50_us_no_wait\": {}}}",
        waited.as_millis(),
        with[with.len() / 2],
        without[without.len() / 2]
    );
    assert_eq!(kept, 1, "the acknowledged turn survived the master; the refused one is not there");
}
