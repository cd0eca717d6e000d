//! [`SessionStore`] over Redis: the production session memory of ragctx.
//!
//! One session is five keys sharing the hash tag `{ragctx:<session id>}` (so they live in
//! one slot on Redis Cluster): `meta` (turn counter, highest marker), `turns` (the window
//! of turn records), `markers` (document → marker), `used` (markers handed out) and
//! `traces` (turn → trace). A turn is committed by one Lua script — append, window trim,
//! markers, trace and TTL refresh happen atomically, so concurrent turns of one session
//! all land with distinct numbers.
//!
//! ```no_run
//! let store = ragctx_redis::RedisSessionStore::connect("redis://127.0.0.1:6379")?;
//! # Ok::<(), ragctx_core::Error>(())
//! ```

use ragctx_core::{Error, Result, Retention, SessionId, SessionState, SessionStore, Trace, TurnCommit, TurnRecord};
use redis::{Client, Connection, Script};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Connect, read and write time-outs.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// Idle connections kept for reuse.
const POOL: usize = 16;

const COMMIT: &str = r#"
local turn = redis.call('HINCRBY', KEYS[1], 'turn_count', 1)
redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
redis.call('RPUSH', KEYS[2], turn .. '\t' .. ARGV[2])
local window = tonumber(ARGV[3])
if window > 0 then redis.call('LTRIM', KEYS[2], -window, -1) end
local maxm = tonumber(redis.call('HGET', KEYS[1], 'max_marker') or '0')
for i = 6, #ARGV, 2 do
  local doc, m = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('HEXISTS', KEYS[3], doc) == 0 then
    if redis.call('SISMEMBER', KEYS[4], m) == 1 then m = maxm + 1 end
    redis.call('HSET', KEYS[3], doc, m)
    redis.call('SADD', KEYS[4], m)
    if m > maxm then maxm = m end
  end
end
redis.call('HSET', KEYS[1], 'max_marker', maxm)
redis.call('HSET', KEYS[5], turn, ARGV[4])
local ttl = tonumber(ARGV[5])
for i = 1, 5 do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) else redis.call('PERSIST', KEYS[i]) end
end
return turn
"#;

const RESET: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'max_marker', 0)
return 1
"#;

pub struct RedisSessionStore {
    client: Client,
    url: String,
    idle: Mutex<Vec<Connection>>,
    commit: Script,
    reset: Script,
}

/// The five keys of a session, hash-tagged to one cluster slot.
fn keys(id: &SessionId) -> [String; 5] {
    let tag = format!("{{ragctx:{id}}}");
    ["meta", "turns", "markers", "used", "traces"].map(|k| format!("{tag}:{k}"))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl RedisSessionStore {
    /// Checks the URL and that the server answers `PING`.
    pub fn connect(url: &str) -> Result<Self> {
        let client = Client::open(url).map_err(|e| Error::InvalidInput(format!("redis URL {url:?}: {e}")))?;
        let store = RedisSessionStore {
            client,
            url: url.to_owned(),
            idle: Mutex::new(Vec::new()),
            commit: Script::new(COMMIT),
            reset: Script::new(RESET),
        };
        store.with(|c| redis::cmd("PING").query::<String>(c))?;
        Ok(store)
    }

    fn unavailable(&self, e: impl std::fmt::Display) -> Error {
        Error::Unavailable { backend: format!("redis at {}", self.url), message: e.to_string() }
    }

    /// Runs `f` on a pooled connection; a connection that failed is dropped, not reused.
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>) -> Result<T> {
        self.with_raw(f).map_err(|e| self.error(e))
    }

    fn with_raw<T>(&self, f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>) -> redis::RedisResult<T> {
        let pooled = self.idle.lock().expect("pool lock").pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let c = self.client.get_connection_with_timeout(TIMEOUT)?;
                c.set_read_timeout(Some(TIMEOUT))?;
                c.set_write_timeout(Some(TIMEOUT))?;
                c
            }
        };
        let out = f(&mut conn)?;
        let mut idle = self.idle.lock().expect("pool lock");
        if idle.len() < POOL {
            idle.push(conn);
        }
        Ok(out)
    }

    fn error(&self, e: redis::RedisError) -> Error {
        if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
            self.unavailable(e)
        } else {
            Error::Storage(format!("redis at {}: {e}", self.url))
        }
    }

    /// [`Self::with`] for reads, which are safe to repeat: when the connection broke (closed
    /// or reset, not slow) the read runs once more on a fresh connection.
    fn read<T>(&self, f: impl Fn(&mut Connection) -> redis::RedisResult<T>) -> Result<T> {
        match self.with_raw(&f) {
            Err(e) if !e.is_timeout() && (e.is_connection_dropped() || e.is_io_error()) => self.with(&f),
            r => r.map_err(|e| self.error(e)),
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(&self, what: &str, s: &str) -> Result<T> {
        serde_json::from_str(s).map_err(|e| Error::Storage(format!("redis at {}: bad {what}: {e}", self.url)))
    }
}

impl SessionStore for RedisSessionStore {
    fn load(&self, id: &SessionId) -> Result<Option<SessionState>> {
        let k = keys(id);
        let (meta, turns, markers): (BTreeMap<String, String>, Vec<String>, BTreeMap<String, u32>) =
            self.read(|c| redis::pipe().hgetall(&k[0]).lrange(&k[1], 0, -1).hgetall(&k[2]).query(c))?;
        if meta.is_empty() {
            return Ok(None);
        }
        let mut state = SessionState {
            turn_count: meta.get("turn_count").and_then(|v| v.parse().ok()).unwrap_or(0),
            updated_at_unix_ms: meta.get("updated_at").and_then(|v| v.parse().ok()).unwrap_or(0),
            markers: markers.into_iter().map(|(d, m)| (d.into(), m)).collect(),
            turns: Vec::with_capacity(turns.len()),
        };
        for entry in turns {
            let (n, json) = entry.split_once('\t').ok_or_else(|| Error::Storage("redis: bad turn entry".into()))?;
            let mut r: TurnRecord = self.parse("turn record", json)?;
            r.turn = n.parse().map_err(|_| Error::Storage("redis: bad turn number".into()))?;
            state.turns.push(r);
        }
        Ok(Some(state))
    }

    fn commit_turn(&self, id: &SessionId, commit: TurnCommit, retention: Retention) -> Result<u64> {
        let k = keys(id);
        let record = serde_json::to_string(&commit.record).map_err(Error::storage)?;
        let trace = serde_json::to_string(&commit.trace).map_err(Error::storage)?;
        self.with(|c| {
            let mut inv = self.commit.prepare_invoke();
            for key in &k {
                inv.key(key);
            }
            inv.arg(now_ms())
                .arg(record.as_str())
                .arg(retention.window)
                .arg(trace.as_str())
                .arg(retention.ttl_secs * 1000);
            for (doc, m) in &commit.new_markers {
                inv.arg(doc.as_str()).arg(*m);
            }
            inv.invoke::<u64>(c)
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
        let done: i64 = self.with(|c| self.reset.key(&k[0]).key(&k[1]).key(&k[2]).key(&k[3]).invoke(c))?;
        Ok(done == 1)
    }

    fn delete(&self, id: &SessionId) -> Result<bool> {
        let k = keys(id);
        let removed: i64 = self.with(|c| redis::cmd("DEL").arg(&k[..]).query(c))?;
        Ok(removed > 0)
    }
}
