//! [`SessionStore`] over Redis: the production session memory of ragctx.
//!
//! One session is five keys sharing the hash tag `{ragctx:<session id>}` (so they live in
//! one slot on Redis Cluster): `meta` (turn counter, highest marker), `turns` (the window
//! of turn records), `markers` (document → marker), `used` (markers handed out) and
//! `traces` (turn → trace). A turn is committed by one Lua script — version check, append,
//! window trim, markers, trace and TTL refresh happen atomically: a turn planned against a
//! version the session has left writes nothing (the engine plans it again). One server
//! (`redis://`) or a Redis Cluster (`redis+cluster://seed1,seed2`).
//!
//! A sixth key, `lease`, makes the turns of one session plan one at a time across processes
//! ([`SessionStore::lease_turns`]): `SET NX PX` with a token, renewed while its turn runs,
//! given back on drop by a script that deletes only its own token, and gone by itself
//! [`LEASE_TTL`] after a process that died holding it. The lease spares turns planning again; the version check keeps them
//! race-free without it (a turn that outlives its lease is still checked). `?turn_lease=off` on
//! the URL leaves them to the version check alone.
//!
//! Redis replicates asynchronously: a commit the master acknowledged can be lost with it in
//! a fail-over. `?min_replicas=N` on the URL makes every turn commit wait (Redis `WAIT`, on
//! the master that holds the session) until N replicas have it, at most `replica_timeout_ms`
//! (default 1,000, at most 2,000); when fewer confirm, the turn fails as unavailable (503):
//! it is on the master but not acknowledged, so an acknowledged turn survives the master's
//! death (`tests/replication.rs` measures both sides).
//!
//! ```no_run
//! let store = ragctx_redis::RedisSessionStore::connect("redis://127.0.0.1:6379")?;
//! # Ok::<(), ragctx_core::Error>(())
//! ```

use ragctx_core::{Error, Result, Retention, SessionId, SessionState, SessionStore, Trace, TurnCommit, TurnRecord};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Client, Connection, ConnectionLike, Script};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Connect, read and write time-outs.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// Idle connections kept for reuse.
const POOL: usize = 16;

/// KEYS: meta, turns, markers, used, traces. ARGV: now (µs), record, window, trace, ttl ms,
/// read version, commit id, then (document, marker) pairs. Returns the turn number, or an
/// error reply `CONFLICT <version>` when the session is no longer at the read version. A
/// commit id already applied (a cluster client resending after a lost reply) returns its
/// turn instead of committing twice.
const COMMIT: &str = r#"
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[6]) then
  if redis.call('HGET', KEYS[1], 'last_commit') == ARGV[7] then
    return tonumber(redis.call('HGET', KEYS[1], 'turn_count'))
  end
  return redis.error_reply('CONFLICT ' .. version)
end
for i = 8, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 1 or redis.call('SISMEMBER', KEYS[4], ARGV[i + 1]) == 1 then
    return redis.error_reply('MARKER ' .. ARGV[i + 1])
  end
end
local turn = redis.call('HINCRBY', KEYS[1], 'turn_count', 1)
-- Never a version used before, even by a deleted or expired session of the same id.
redis.call('HSET', KEYS[1], 'version', math.max(version + 1, tonumber(ARGV[1])), 'last_commit', ARGV[7])
redis.call('HSET', KEYS[1], 'updated_at', math.floor(tonumber(ARGV[1]) / 1000))
redis.call('RPUSH', KEYS[2], turn .. '\t' .. ARGV[2])
local window = tonumber(ARGV[3])
if window > 0 then redis.call('LTRIM', KEYS[2], -window, -1) end
for i = 8, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], tonumber(ARGV[i + 1]))
  redis.call('SADD', KEYS[4], tonumber(ARGV[i + 1]))
end
redis.call('HSET', KEYS[5], turn, ARGV[4])
local ttl = tonumber(ARGV[5])
for i = 1, 5 do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) else redis.call('PERSIST', KEYS[i]) end
end
return turn
"#;

/// KEYS: meta, turns, markers, used, traces. ARGV: now (µs), commit id, turn, then the
/// (document, marker) pairs the commit handed out. Takes back a commit too few replicas
/// confirmed, if it is still the session's last (the session never began: all its keys; else
/// the turn, its trace and markers, the version moved on so a turn planned against it plans
/// again). Returns 1 when taken back, 0 when another commit came after it.
const UNDO: &str = r#"
if redis.call('HGET', KEYS[1], 'last_commit') ~= ARGV[2]
   or tonumber(redis.call('HGET', KEYS[1], 'turn_count') or '0') ~= tonumber(ARGV[3]) then
  return 0
end
if tonumber(ARGV[3]) == 1 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
  return 1
end
local last = redis.call('LINDEX', KEYS[2], -1)
if last and string.sub(last, 1, #ARGV[3] + 1) == ARGV[3] .. '\t' then redis.call('RPOP', KEYS[2]) end
redis.call('HDEL', KEYS[5], ARGV[3])
for i = 4, #ARGV, 2 do
  redis.call('HDEL', KEYS[3], ARGV[i])
  redis.call('SREM', KEYS[4], tonumber(ARGV[i + 1]))
end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
redis.call('HSET', KEYS[1], 'turn_count', tonumber(ARGV[3]) - 1, 'version', math.max(version + 1, tonumber(ARGV[1])), 'last_commit', '')
return 1
"#;

/// KEYS: meta, turns, markers, used. ARGV: now (µs).
const RESET: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
redis.call('HSET', KEYS[1], 'version', math.max(version + 1, tonumber(ARGV[1])))
return 1
"#;

/// KEYS: lease. ARGV: token. Gives the lease back only if it is still this holder's.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#;

/// KEYS: lease. ARGV: token, ttl ms. Extends the lease only if it is still this holder's.
const RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"#;

/// How long a session's turn lease lasts unless its holder renews it (every third of it,
/// for as long as its turn runs): a process that died holding it, or a lease whose release
/// a Redis outage lost (an append-only file keeps it over a restart), keeps the next turn of
/// that session waiting at most this long.
pub const LEASE_TTL: Duration = Duration::from_secs(2);

/// KEYS: meta, turns, markers. Returns them in one atomic read, so the version read is the
/// version of these turns and markers (a pipeline would do on one server, but Redis
/// Cluster connections do not pipeline).
const LOAD: &str = r#"
return {redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], 0, -1), redis.call('HGETALL', KEYS[3])}
"#;

/// A connection to one server, or to a cluster (which routes each call by its keys'
/// hash slot and follows redirections and fail-overs).
enum Conn {
    Single(Connection),
    Cluster(Box<ClusterConnection>),
}

impl Conn {
    fn get(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Conn::Single(c) => c,
            Conn::Cluster(c) => c.as_mut(),
        }
    }
}

enum Target {
    Single(Client),
    Cluster(ClusterClient),
}

/// Replicas that must confirm a turn commit (`WAIT numreplicas timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaWait {
    /// How many replicas must hold the commit.
    pub replicas: u32,
    /// How long to wait for them, in milliseconds (1..=2,000: below the read time-out).
    pub timeout_ms: u64,
}

/// The longest `replica_timeout_ms`: the wait must end before the connection's read time-out.
pub const MAX_REPLICA_TIMEOUT_MS: u64 = 2_000;

/// Splits ragctx's own parameters off a Redis URL: the replicas a commit waits for
/// (`min_replicas`, `replica_timeout_ms`) and whether turns take the session's lease
/// (`turn_lease=on|off`, default on; off leaves a session's turns in different processes to
/// the version check alone, as the scale-out suites race them). The rest goes to the Redis
/// client as it was.
fn split_params(url: &str) -> Result<(String, Option<ReplicaWait>, bool)> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), None, true)) };
    let (mut replicas, mut timeout_ms, mut lease, mut rest) = (None, None, true, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let number = |what: &str| {
            v.parse::<u64>().map_err(|_| {
                Error::InvalidInput(format!("redis URL {url:?}: {what} must be a whole number, not {v:?}"))
            })
        };
        match k {
            "min_replicas" => replicas = Some(number("min_replicas")?),
            "replica_timeout_ms" => timeout_ms = Some(number("replica_timeout_ms")?),
            "turn_lease" => {
                lease = match v {
                    "on" => true,
                    "off" => false,
                    _ => {
                        return Err(Error::InvalidInput(format!(
                            "redis URL {url:?}: turn_lease must be on or off, not {v:?}"
                        )))
                    }
                }
            }
            _ => rest.push(pair),
        }
    }
    let wait = match (replicas, timeout_ms) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(Error::InvalidInput(format!(
                "redis URL {url:?}: replica_timeout_ms needs min_replicas (how many replicas must confirm a commit)"
            )))
        }
        (Some(0), _) => None,
        (Some(n), t) => {
            let timeout_ms = t.unwrap_or(1_000);
            if !(1..=MAX_REPLICA_TIMEOUT_MS).contains(&timeout_ms) {
                return Err(Error::InvalidInput(format!(
                    "redis URL {url:?}: replica_timeout_ms must be 1..={MAX_REPLICA_TIMEOUT_MS} (the wait ends before the connection's read time-out)"
                )));
            }
            let replicas = u32::try_from(n)
                .map_err(|_| Error::InvalidInput(format!("redis URL {url:?}: min_replicas {n} is too large")))?;
            Some(ReplicaWait { replicas, timeout_ms })
        }
    };
    let base = if rest.is_empty() { base.to_owned() } else { format!("{base}?{}", rest.join("&")) };
    Ok((base, wait, lease))
}

pub struct RedisSessionStore {
    target: Target,
    url: String,
    wait: Option<ReplicaWait>,
    /// Whether turns take the session's lease ([`SessionStore::lease_turns`]).
    turn_lease: bool,
    /// Idle connections, shared with the leases that hold one while their turn runs.
    idle: Arc<Mutex<Vec<Conn>>>,
    commit: Script,
    undo: Script,
    reset: Script,
    load: Script,
}

/// A session's turn lease in Redis ([`RedisSessionStore`]'s `lease_turns`): a thread that
/// renews it every third of [`LEASE_TTL`] while the turn runs and gives it back when the
/// lease is dropped (on the connection it was taken with, then returned to the pool).
struct Lease {
    stop: Option<std::sync::mpsc::Sender<()>>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    fn keep(mut conn: Conn, key: String, token: String, idle: Arc<Mutex<Vec<Conn>>>) -> Lease {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let keeper = std::thread::Builder::new().name("ragctx-lease".into()).spawn(move || {
            let (ttl, renew) = (LEASE_TTL.as_millis() as u64, Script::new(RENEW));
            // Renewed until the lease drops (its sender with it); a renewal that fails leaves
            // the lease to expire, and the version check to order the turns.
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(LEASE_TTL / 3) {
                let renewed: redis::RedisResult<i64> = renew.key(&key).arg(&token).arg(ttl).invoke(conn.get());
                if renewed.is_err() {
                    break;
                }
            }
            let released: redis::RedisResult<i64> = Script::new(RELEASE).key(&key).arg(&token).invoke(conn.get());
            if released.is_ok() {
                let mut idle = idle.lock().expect("pool lock");
                if idle.len() < POOL {
                    idle.push(conn);
                }
            }
        });
        match keeper {
            Ok(keeper) => Lease { stop: Some(stop), keeper: Some(keeper) },
            // No thread: the lease stands until it expires.
            Err(_) => Lease { stop: None, keeper: None },
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Wakes the keeper, which gives the lease back before the next turn looks for it.
        drop(self.stop.take());
        if let Some(keeper) = self.keeper.take() {
            let _ = keeper.join();
        }
    }
}

/// The five keys of a session, hash-tagged to one cluster slot.
fn keys(id: &SessionId) -> [String; 5] {
    let tag = format!("{{ragctx:{id}}}");
    ["meta", "turns", "markers", "used", "traces"].map(|k| format!("{tag}:{k}"))
}

/// The session's turn-lease key, in the same slot as its five keys.
fn lease_key(id: &SessionId) -> String {
    format!("{{ragctx:{id}}}:lease")
}

/// Microseconds since the epoch: versions start there (exact in Lua's doubles until 2255).
fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// An id for one commit call, unique across processes (pid, clock, counter).
fn commit_id() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}-{nanos}-{n}", std::process::id())
}

/// `redis+cluster://h1:p1,h2:p2` → the seed nodes as `redis://` URLs.
fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    let rest = url.strip_prefix("redis+cluster://")?;
    Some(rest.split(',').map(str::trim).filter(|n| !n.is_empty()).map(|n| format!("redis://{n}")).collect())
}

impl RedisSessionStore {
    /// Checks the URL and that the server answers `PING`. `redis://HOST:PORT` is one
    /// server; `redis+cluster://HOST:PORT[,HOST:PORT...]` a Redis Cluster reached through
    /// those seed nodes. `rediss://` (TLS) is refused: this build has no TLS.
    /// `?min_replicas=N[&replica_timeout_ms=T]` makes each turn commit wait for N replicas;
    /// `?turn_lease=off` leaves a session's turns in different processes to the version
    /// check alone (see the crate docs).
    pub fn connect(url: &str) -> Result<Self> {
        if url.starts_with("rediss") {
            return Err(Error::InvalidInput(format!(
                "redis URL {url:?}: TLS (rediss://) is not built into ragctx; use redis:// on a trusted network, or a local TLS tunnel"
            )));
        }
        let (plain, wait, turn_lease) = split_params(url)?;
        let target = match cluster_nodes(&plain) {
            Some(nodes) if nodes.is_empty() => {
                return Err(Error::InvalidInput(format!("redis URL {url:?}: name at least one cluster node")))
            }
            Some(nodes) => Target::Cluster(
                ClusterClient::builder(nodes)
                    .connection_timeout(TIMEOUT)
                    .response_timeout(TIMEOUT)
                    .retries(4)
                    .min_retry_wait(50)
                    .max_retry_wait(1_000)
                    .build()
                    .map_err(|e| Error::InvalidInput(format!("redis URL {url:?}: {e}")))?,
            ),
            None => {
                Target::Single(Client::open(plain).map_err(|e| Error::InvalidInput(format!("redis URL {url:?}: {e}")))?)
            }
        };
        let store = RedisSessionStore {
            target,
            url: url.to_owned(),
            wait,
            turn_lease,
            idle: Arc::new(Mutex::new(Vec::new())),
            commit: Script::new(COMMIT),
            undo: Script::new(UNDO),
            reset: Script::new(RESET),
            load: Script::new(LOAD),
        };
        store.with(|c| redis::cmd("PING").query::<String>(c))?;
        Ok(store)
    }

    fn unavailable(&self, e: impl std::fmt::Display) -> Error {
        Error::Unavailable { backend: format!("redis at {}", self.url), message: e.to_string() }
    }

    /// Runs `f` on a pooled connection; a connection that broke is dropped, not reused.
    fn with<T>(&self, f: impl FnOnce(&mut dyn ConnectionLike) -> redis::RedisResult<T>) -> Result<T> {
        self.with_raw(f).map_err(|e| self.error(e))
    }

    fn connect_one(&self) -> redis::RedisResult<Conn> {
        Ok(match &self.target {
            Target::Single(client) => {
                let c = client.get_connection_with_timeout(TIMEOUT)?;
                c.set_read_timeout(Some(TIMEOUT))?;
                c.set_write_timeout(Some(TIMEOUT))?;
                Conn::Single(c)
            }
            Target::Cluster(client) => Conn::Cluster(Box::new(client.get_connection()?)),
        })
    }

    fn with_raw<T>(&self, f: impl FnOnce(&mut dyn ConnectionLike) -> redis::RedisResult<T>) -> redis::RedisResult<T> {
        self.with_conn(|c| f(c.get()))
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Conn) -> redis::RedisResult<T>) -> redis::RedisResult<T> {
        let pooled = self.idle.lock().expect("pool lock").pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect_one()?,
        };
        let out = f(&mut conn);
        // An error reply from the server (CONFLICT, say) leaves the connection usable; any
        // other error (I/O, time-out, a reply that did not parse) may leave it out of step.
        let broken = out.as_ref().err().is_some_and(|e| e.code().is_none());
        if !broken {
            let mut idle = self.idle.lock().expect("pool lock");
            if idle.len() < POOL {
                idle.push(conn);
            }
        }
        out
    }

    fn error(&self, e: redis::RedisError) -> Error {
        if is_unavailable(&e) {
            self.unavailable(e)
        } else {
            Error::storage_in(format!("redis at {}", self.url), e)
        }
    }

    /// [`Self::with`] for reads, which are safe to repeat: when the connection broke (closed
    /// or reset, not slow) the read runs once more on a fresh connection.
    fn read<T>(&self, f: impl Fn(&mut dyn ConnectionLike) -> redis::RedisResult<T>) -> Result<T> {
        match self.with_raw(&f) {
            Err(e) if !e.is_timeout() && (e.is_connection_dropped() || e.is_io_error()) => self.with(&f),
            r => r.map_err(|e| self.error(e)),
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(&self, what: &str, s: &str) -> Result<T> {
        serde_json::from_str(s).map_err(|e| Error::storage_in(format!("redis at {}: bad {what}", self.url), e))
    }
}

impl SessionStore for RedisSessionStore {
    fn load(&self, id: &SessionId) -> Result<Option<SessionState>> {
        let k = keys(id);
        let (meta, turns, markers): (BTreeMap<String, String>, Vec<String>, BTreeMap<String, u32>) =
            self.read(|c| self.load.key(&k[0]).key(&k[1]).key(&k[2]).invoke(c))?;
        if meta.is_empty() {
            return Ok(None);
        }
        let mut state = SessionState {
            turn_count: meta.get("turn_count").and_then(|v| v.parse().ok()).unwrap_or(0),
            updated_at_unix_ms: meta.get("updated_at").and_then(|v| v.parse().ok()).unwrap_or(0),
            version: meta.get("version").and_then(|v| v.parse().ok()).unwrap_or(0),
            markers: markers.into_iter().map(|(d, m)| (d.into(), m)).collect(),
            turns: Vec::with_capacity(turns.len()),
        };
        for entry in turns {
            let (n, json) = entry.split_once('\t').ok_or_else(|| Error::inconsistent("redis: bad turn entry"))?;
            let mut r: TurnRecord = self.parse("turn record", json)?;
            r.turn = n.parse().map_err(|_| Error::inconsistent("redis: bad turn number"))?;
            state.turns.push(r);
        }
        Ok(Some(state))
    }

    fn commit_turn(&self, id: &SessionId, commit: TurnCommit, retention: Retention) -> Result<u64> {
        let k = keys(id);
        let record = serde_json::to_string(&commit.record).map_err(Error::storage)?;
        let trace = serde_json::to_string(&commit.trace).map_err(Error::storage)?;
        let commit_id = commit_id();
        let committed = self.with_conn(|conn| {
            let c = conn.get();
            let mut inv = self.commit.prepare_invoke();
            for key in &k {
                inv.key(key);
            }
            inv.arg(now_us())
                .arg(record.as_str())
                .arg(retention.window)
                .arg(trace.as_str())
                .arg(retention.ttl_secs * 1000)
                .arg(commit.read_version)
                .arg(commit_id.as_str());
            for (doc, m) in &commit.new_markers {
                inv.arg(doc.as_str()).arg(*m);
            }
            let turn = inv.invoke::<u64>(c)?;
            // On the connection that wrote, to the master of the session's slot: WAIT counts
            // the replicas holding this connection's writes.
            let confirmed = match (self.wait, &mut *conn) {
                (None, _) => None,
                (Some(w), Conn::Single(c)) => {
                    Some(redis::cmd("WAIT").arg(w.replicas).arg(w.timeout_ms).query::<u64>(c)?)
                }
                (Some(w), Conn::Cluster(c)) => {
                    use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                    let at = SingleNodeRoutingInfo::SpecificNode(Route::with_key(&k[0], SlotAddr::Master));
                    let v = c.route_command(
                        redis::cmd("WAIT").arg(w.replicas).arg(w.timeout_ms),
                        RoutingInfo::SingleNode(at),
                    )?;
                    Some(redis::from_redis_value::<u64>(v)?)
                }
            };
            // Too few replicas: take the turn back on the same connection, so the session does
            // not go on from a turn its client was told failed.
            let taken_back = match (self.wait, confirmed) {
                (Some(w), Some(n)) if n < u64::from(w.replicas) => {
                    let mut undo = self.undo.prepare_invoke();
                    for key in &k {
                        undo.key(key);
                    }
                    undo.arg(now_us()).arg(commit_id.as_str()).arg(turn);
                    for (doc, m) in &commit.new_markers {
                        undo.arg(doc.as_str()).arg(*m);
                    }
                    Some(undo.invoke::<i64>(conn.get())? == 1)
                }
                _ => None,
            };
            Ok((turn, confirmed, taken_back))
        });
        match committed {
            Ok((turn, None, _)) => Ok(turn),
            Ok((turn, Some(confirmed), taken_back)) => {
                let w = self.wait.expect("a wait was asked");
                if confirmed >= u64::from(w.replicas) {
                    Ok(turn)
                } else {
                    let what = if taken_back == Some(true) {
                        "it was taken back: nothing of it is recorded".to_owned()
                    } else {
                        format!("a later turn followed it, so it stays recorded as turn {turn}")
                    };
                    Err(self.unavailable(format!(
                        "turn {turn} of session {id}: {confirmed} of {} replicas confirmed it within {} ms (min_replicas), so it is not acknowledged; {what}",
                        w.replicas, w.timeout_ms
                    )))
                }
            }
            Err(e) => Err(match e.code() {
                Some("CONFLICT") => Error::Conflict(format!(
                    "session {id} moved on (from version {}) while the turn was planned",
                    commit.read_version
                )),
                _ => self.error(e),
            }),
        }
    }

    fn traces(&self, id: &SessionId) -> Result<Vec<Trace>> {
        let k = keys(id);
        let raw: BTreeMap<u64, String> = self.read(|c| redis::cmd("HGETALL").arg(&k[4]).query(c))?;
        raw.into_iter()
            .map(|(n, json)| {
                let mut t: Trace = self.parse("trace", &json)?;
                t.turn = n;
                Ok(t)
            })
            .collect()
    }

    fn reset(&self, id: &SessionId) -> Result<bool> {
        let k = keys(id);
        let done: i64 =
            self.with(|c| self.reset.key(&k[0]).key(&k[1]).key(&k[2]).key(&k[3]).arg(now_us()).invoke(c))?;
        Ok(done == 1)
    }

    fn delete(&self, id: &SessionId) -> Result<bool> {
        let k = keys(id);
        let removed: i64 = self.with(|c| redis::cmd("DEL").arg(&k[..]).query(c))?;
        Ok(removed > 0)
    }

    /// Polls `SET lease token NX PX ttl` (a few ms apart, jittered, at most 20 ms) until it
    /// is this turn's or `wait` runs out; held, it is renewed until dropped. A server that
    /// cannot be reached or refuses the lease gives none (said once in the log): the turn's
    /// own reads then say why, and the version check orders its commit.
    fn lease_turns(&self, id: &SessionId, wait: Duration) -> Result<Option<ragctx_core::TurnLease>> {
        if !self.turn_lease {
            return Ok(None);
        }
        let key = lease_key(id);
        let token = commit_id();
        let until = std::time::Instant::now() + wait;
        // A pooled connection, held by the lease until it gives the lease back.
        let pooled = self.idle.lock().expect("pool lock").pop();
        let Some(mut conn) = pooled.map_or_else(|| self.connect_one().ok(), Some) else { return Ok(None) };
        let ttl = LEASE_TTL.as_millis() as u64;
        let mut round = 0u64;
        loop {
            let set: redis::RedisResult<Option<String>> =
                redis::cmd("SET").arg(&key).arg(&token).arg("NX").arg("PX").arg(ttl).query(conn.get());
            match set {
                Ok(Some(_)) => return Ok(Some(Box::new(Lease::keep(conn, key, token, self.idle.clone())))),
                Ok(None) => {}
                Err(e) => {
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| {
                        tracing::warn!("redis at {}: no turn lease ({e}); turns rely on the version check", self.url)
                    });
                    // A SET that reached the server but whose reply was lost must not leave a
                    // lease nobody gives back (on a fresh connection: this one may be out of step).
                    if let Ok(mut fresh) = self.connect_one() {
                        let _: redis::RedisResult<i64> = Script::new(RELEASE).key(&key).arg(&token).invoke(fresh.get());
                    }
                    return Ok(None);
                }
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
            let pause = Duration::from_micros(1_000 * (1 + round.min(9)) + u64::from(nanos) % 10_000);
            std::thread::sleep(pause.min(left));
            round += 1;
        }
    }
}

/// Whether `e` means the server cannot serve now (503), rather than that it refused the
/// request.
fn is_unavailable(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        // A cluster mid-fail-over: slots moving, no master for a slot, a replica syncing.
        || e.is_cluster_error()
        || e.kind() == ErrorKind::Server(ServerErrorKind::MasterDown)
        // A restarted server still reading its append-only file answers LOADING.
        || e.kind() == ErrorKind::Server(ServerErrorKind::BusyLoading)
}

#[cfg(test)]
mod tests {
    use super::{split_params, ReplicaWait};

    fn split_replica_wait(url: &str) -> ragctx_core::Result<(String, Option<ReplicaWait>)> {
        split_params(url).map(|(url, wait, _)| (url, wait))
    }

    fn split_turn_lease(url: &str) -> ragctx_core::Result<(String, bool)> {
        split_params(url).map(|(url, _, lease)| (url, lease))
    }
    use redis::{ErrorKind, RedisError, ServerErrorKind};

    #[test]
    fn replica_parameters_are_taken_off_the_url_and_checked() {
        let (url, w) = split_replica_wait("redis://h:1/0?min_replicas=1&protocol=resp2").unwrap();
        assert_eq!(
            (url.as_str(), w),
            ("redis://h:1/0?protocol=resp2", Some(ReplicaWait { replicas: 1, timeout_ms: 1_000 }))
        );
        let (url, w) = split_replica_wait("redis+cluster://a:1,b:2?min_replicas=2&replica_timeout_ms=250").unwrap();
        assert_eq!((url.as_str(), w), ("redis+cluster://a:1,b:2", Some(ReplicaWait { replicas: 2, timeout_ms: 250 })));
        assert_eq!(split_replica_wait("redis://h:1?min_replicas=0").unwrap(), ("redis://h:1".to_owned(), None));
        assert_eq!(split_replica_wait("redis://h:1").unwrap(), ("redis://h:1".to_owned(), None));
        for (bad, says) in [
            ("redis://h?min_replicas=x", "min_replicas must be a whole number"),
            ("redis://h?replica_timeout_ms=5", "needs min_replicas"),
            ("redis://h?min_replicas=1&replica_timeout_ms=0", "1..=2000"),
            ("redis://h?min_replicas=1&replica_timeout_ms=5000", "1..=2000"),
        ] {
            let e = split_replica_wait(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_turn_lease_is_on_unless_the_url_turns_it_off() {
        assert_eq!(split_turn_lease("redis://h:1").unwrap(), ("redis://h:1".to_owned(), true));
        // Every parameter of ragctx's is taken off in one pass; the client's stay.
        let off = split_params("redis://h:1/0?min_replicas=1&turn_lease=off&protocol=resp2").unwrap();
        let wait = Some(ReplicaWait { replicas: 1, timeout_ms: 1_000 });
        assert_eq!(off, ("redis://h:1/0?protocol=resp2".to_owned(), wait, false));
        assert_eq!(split_turn_lease("redis://h:1?turn_lease=on").unwrap(), ("redis://h:1".to_owned(), true));
        let e = split_turn_lease("redis://h?turn_lease=maybe").unwrap_err().to_string();
        assert!(e.contains("turn_lease must be on or off"), "{e}");
    }

    #[test]
    fn a_loading_or_failing_over_server_is_unavailable_a_refusal_is_not() {
        for kind in [ServerErrorKind::BusyLoading, ServerErrorKind::MasterDown, ServerErrorKind::TryAgain] {
            assert!(super::is_unavailable(&RedisError::from((ErrorKind::Server(kind), "x"))), "{kind:?}");
        }
        let refused = RedisError::from((ErrorKind::Server(ServerErrorKind::ResponseError), "ERR wrong type"));
        assert!(!super::is_unavailable(&refused));
    }
}
