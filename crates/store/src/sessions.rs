use crate::schema::{SESSIONS, TRACES};
use ragctx_core::{Error, Result, Retention, SessionId, SessionState, SessionStore, Trace, TurnCommit};
use redb::{Database, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The embedded default [`SessionStore`]: sessions and traces in the data dir's redb
/// database. Each commit is one write transaction (redb serialises writers), so concurrent
/// turns of one session each land with their own turn number.
#[derive(Clone)]
pub struct EmbeddedSessionStore {
    db: Arc<Database>,
}

#[derive(Serialize, Deserialize)]
struct StoredSession {
    state: SessionState,
    /// Unix ms after which the session is gone; 0 = never.
    expires_at_unix_ms: u64,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The version after a write: above the last one and at least the clock in µs, so a session
/// deleted (or expired) and begun again never reuses a version a turn may have read before.
pub(crate) fn next_version(version: u64) -> u64 {
    let now_us = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
    (version + 1).max(now_us)
}

impl StoredSession {
    fn live(self, now: u64) -> Option<Self> {
        (self.expires_at_unix_ms == 0 || self.expires_at_unix_ms > now).then_some(self)
    }
}

impl EmbeddedSessionStore {
    pub(crate) fn new(db: Arc<Database>) -> Self {
        EmbeddedSessionStore { db }
    }

    fn read(&self, id: &SessionId) -> Result<Option<StoredSession>> {
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let t = rx.open_table(SESSIONS).map_err(Error::storage)?;
        let raw = t.get(id.as_str()).map_err(Error::storage)?;
        match raw {
            Some(v) => Ok(serde_json::from_slice::<StoredSession>(v.value()).map_err(Error::storage)?.live(now_ms())),
            None => Ok(None),
        }
    }

    fn delete_traces(tx: &WriteTransaction, id: &SessionId) -> Result<()> {
        let mut t = tx.open_table(TRACES).map_err(Error::storage)?;
        t.extract_from_if((id.as_str(), 0)..=(id.as_str(), u64::MAX), |_, _| true)
            .map_err(Error::storage)?
            .for_each(drop);
        Ok(())
    }
}

impl SessionStore for EmbeddedSessionStore {
    fn load(&self, id: &SessionId) -> Result<Option<SessionState>> {
        Ok(self.read(id)?.map(|s| s.state))
    }

    fn commit_turn(&self, id: &SessionId, commit: TurnCommit, retention: Retention) -> Result<u64> {
        let now = now_ms();
        let tx = self.db.begin_write().map_err(Error::storage)?;
        let stored = {
            let t = tx.open_table(SESSIONS).map_err(Error::storage)?;
            let raw = t.get(id.as_str()).map_err(Error::storage)?;
            match raw {
                Some(v) => Some(serde_json::from_slice::<StoredSession>(v.value()).map_err(Error::storage)?),
                None => None,
            }
        };
        let mut state = match stored {
            Some(s) if s.expires_at_unix_ms != 0 && s.expires_at_unix_ms <= now => {
                // Expired: the old turns and traces go with it.
                Self::delete_traces(&tx, id)?;
                SessionState::default()
            }
            Some(s) => s.state,
            None => SessionState::default(),
        };
        if state.version != commit.read_version {
            // Dropping `tx` unapplied keeps an expired session's traces too.
            return Err(Error::Conflict(format!(
                "session {id} moved on (version {} → {}) while the turn was planned",
                commit.read_version, state.version
            )));
        }
        let turn = state.turn_count + 1;
        let mut record = commit.record;
        record.turn = turn;
        state.turns.push(record);
        if retention.window > 0 && state.turns.len() > retention.window {
            let cut = state.turns.len() - retention.window;
            state.turns.drain(..cut);
        }
        for (doc, marker) in commit.new_markers {
            // The turn planned against this very state: a taken marker is a planning bug,
            // and storing it would make the trace disagree with the session.
            if state.markers.contains_key(&doc) || state.markers.values().any(|&v| v == marker) {
                return Err(Error::inconsistent(format!("turn of session {id} hands out marker {marker} twice")));
            }
            state.markers.insert(doc, marker);
        }
        state.turn_count = turn;
        state.version = next_version(state.version);
        state.updated_at_unix_ms = now;
        let expires = if retention.ttl_secs == 0 { 0 } else { now + retention.ttl_secs * 1000 };
        let mut trace = commit.trace;
        trace.turn = turn;
        {
            let mut t = tx.open_table(SESSIONS).map_err(Error::storage)?;
            let bytes =
                serde_json::to_vec(&StoredSession { state, expires_at_unix_ms: expires }).map_err(Error::storage)?;
            t.insert(id.as_str(), bytes.as_slice()).map_err(Error::storage)?;
            let mut tr = tx.open_table(TRACES).map_err(Error::storage)?;
            tr.insert((id.as_str(), turn), serde_json::to_vec(&trace).map_err(Error::storage)?.as_slice())
                .map_err(Error::storage)?;
        }
        ragctx_index::failpoint::pause("sessions.before-commit");
        tx.commit().map_err(Error::storage)?;
        Ok(turn)
    }

    fn traces(&self, id: &SessionId) -> Result<Vec<Trace>> {
        if self.read(id)?.is_none() {
            return Ok(Vec::new());
        }
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let t = rx.open_table(TRACES).map_err(Error::storage)?;
        let mut out = Vec::new();
        for row in t.range((id.as_str(), 0)..=(id.as_str(), u64::MAX)).map_err(Error::storage)? {
            let (_, v) = row.map_err(Error::storage)?;
            out.push(serde_json::from_slice(v.value()).map_err(Error::storage)?);
        }
        Ok(out)
    }

    fn reset(&self, id: &SessionId) -> Result<bool> {
        // Read and write in one transaction: a turn committed meanwhile is not undone.
        let tx = self.db.begin_write().map_err(Error::storage)?;
        let found = {
            let mut t = tx.open_table(SESSIONS).map_err(Error::storage)?;
            let stored = match t.get(id.as_str()).map_err(Error::storage)? {
                Some(v) => serde_json::from_slice::<StoredSession>(v.value()).map_err(Error::storage)?.live(now_ms()),
                None => None,
            };
            match stored {
                Some(mut s) => {
                    s.state.turns.clear();
                    s.state.markers.clear();
                    // A turn planned before the reset must not commit what it excluded.
                    s.state.version = next_version(s.state.version);
                    t.insert(id.as_str(), serde_json::to_vec(&s).map_err(Error::storage)?.as_slice())
                        .map_err(Error::storage)?;
                    true
                }
                None => false,
            }
        };
        tx.commit().map_err(Error::storage)?;
        Ok(found)
    }

    fn delete(&self, id: &SessionId) -> Result<bool> {
        let tx = self.db.begin_write().map_err(Error::storage)?;
        let existed = {
            let mut t = tx.open_table(SESSIONS).map_err(Error::storage)?;
            let removed = t.remove(id.as_str()).map_err(Error::storage)?;
            removed.is_some()
        };
        Self::delete_traces(&tx, id)?;
        tx.commit().map_err(Error::storage)?;
        Ok(existed)
    }
}
