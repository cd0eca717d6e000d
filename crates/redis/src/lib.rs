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
//! ```no_run
//! let store = ragctx_redis::RedisSessionStore::connect("redis://127.0.0.1:6379")?;
//! # Ok::<(), ragctx_core::Error>(())
//! ```

use ragctx_core::{Error, Result, Retention, SessionId, SessionState, SessionStore, Trace, TurnCommit, TurnRecord};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Client, Connection, ConnectionLike, Script};
use std::collections::BTreeMap;
use std::sync::Mutex;
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

/// KEYS: meta, turns, markers, used. ARGV: now (µs).
const RESET: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
redis.call('HSET', KEYS[1], 'version', math.max(version + 1, tonumber(ARGV[1])))
return 1
"#;

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

pub struct RedisSessionStore {
    target: Target,
    url: String,
    idle: Mutex<Vec<Conn>>,
    commit: Script,
    reset: Script,
    load: Script,
}

/// The five keys of a session, hash-tagged to one cluster slot.
fn keys(id: &SessionId) -> [String; 5] {
    let tag = format!("{{ragctx:{id}}}");
    ["meta", "turns", "markers", "used", "traces"].map(|k| format!("{tag}:{k}"))
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
    pub fn connect(url: &str) -> Result<Self> {
        if url.starts_with("rediss") {
            return Err(Error::InvalidInput(format!(
                "redis URL {url:?}: TLS (rediss://) is not built into ragctx; use redis:// on a trusted network, or a local TLS tunnel"
            )));
        }
        let target = match cluster_nodes(url) {
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
                Target::Single(Client::open(url).map_err(|e| Error::InvalidInput(format!("redis URL {url:?}: {e}")))?)
            }
        };
        let store = RedisSessionStore {
            target,
            url: url.to_owned(),
            idle: Mutex::new(Vec::new()),
            commit: Script::new(COMMIT),
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
        let pooled = self.idle.lock().expect("pool lock").pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect_one()?,
        };
        let out = f(conn.get());
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
        self.with_raw(|c| {
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
            inv.invoke::<u64>(c)
        })
        .map_err(|e| match e.code() {
            Some("CONFLICT") => Error::Conflict(format!(
                "session {id} moved on (from version {}) while the turn was planned",
                commit.read_version
            )),
            _ => self.error(e),
        })
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
    use redis::{ErrorKind, RedisError, ServerErrorKind};

    #[test]
    fn a_loading_or_failing_over_server_is_unavailable_a_refusal_is_not() {
        for kind in [ServerErrorKind::BusyLoading, ServerErrorKind::MasterDown, ServerErrorKind::TryAgain] {
            assert!(super::is_unavailable(&RedisError::from((ErrorKind::Server(kind), "x"))), "{kind:?}");
        }
        let refused = RedisError::from((ErrorKind::Server(ServerErrorKind::ResponseError), "ERR wrong type"));
        assert!(!super::is_unavailable(&refused));
    }
}
