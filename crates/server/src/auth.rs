//! Who is calling (DESIGN §8): API keys with a tenant and a role, the keys file re-read when
//! it changes, and the one place a request's tenant is decided.
//!
//! The keys file is TOML:
//!
//! ```toml
//! [[keys]]
//! key = "a-long-random-secret"   # or: sha256 = "<64 hex digits of sha256(key)>"
//! tenant = "acme"                # required for read and write keys
//! role = "read"                  # read | write | admin
//!
//! [[keys]]
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! role = "admin"                 # any tenant, named per call by `X-Ragctx-Tenant`
//! ```
//!
//! Keys are kept as SHA-256 digests only and compared in constant time. The file is checked
//! at most once a second (on requests) and re-read when its modification time, size or inode
//! changed, or at once by [`Keys::reload`] (`ragctx serve` calls it on SIGHUP); a file
//! that cannot be read or parsed keeps the last good keys and logs a warning — a keys file
//! never falls open, even one that lists no key.

use crate::ApiError;
use axum::http::{header, HeaderMap, StatusCode};
use ragctx_core::Tenant;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The header an `admin` key names the tenant of a call with (absent: the key's own tenant,
/// `default` unless the file says otherwise).
pub const TENANT_HEADER: &str = "x-ragctx-tenant";

/// How often, at most, the keys file is looked at.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// What a key may do. Each role includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Turns, sessions, traces, the document list, the OpenAI-compatible front.
    Read,
    /// And ingest, replace and delete the documents of its tenant.
    Write,
    /// Any tenant (`X-Ragctx-Tenant`), the metrics and the tenant listing.
    Admin,
}

impl Role {
    /// The role's name in the keys file.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }
}

type Digest32 = [u8; 32];

/// One key of the keys file, as kept in memory.
#[derive(Clone, Debug)]
struct Entry {
    digest: Digest32,
    tenant: Tenant,
    role: Role,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    keys: Vec<FileKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKey {
    key: Option<String>,
    sha256: Option<String>,
    tenant: Option<String>,
    role: Role,
}

/// Parses a keys file's text. Errors never quote a key.
fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| {
        // The error's own rendering quotes the offending line, which may hold a key.
        let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        match line {
            Some(l) => format!("line {l}: {}", e.message()),
            None => e.message().to_owned(),
        }
    })?;
    let mut out: Vec<Entry> = Vec::with_capacity(doc.keys.len());
    for (i, k) in doc.keys.into_iter().enumerate() {
        let at = format!("[[keys]] number {}", i + 1);
        let digest = match (k.key, k.sha256) {
            (Some(key), None) if !key.trim().is_empty() => digest(&key),
            (Some(_), None) => return Err(format!("{at}: `key` is empty")),
            (None, Some(hex)) => from_hex(hex.trim()).ok_or_else(|| format!("{at}: `sha256` is not 64 hex digits"))?,
            (Some(_), Some(_)) => return Err(format!("{at}: give `key` or `sha256`, not both")),
            (None, None) => return Err(format!("{at}: give `key` or `sha256`")),
        };
        let tenant = match (k.tenant, k.role) {
            (Some(t), _) => Tenant::parse(&t).map_err(|e| format!("{at}: {e}"))?,
            (None, Role::Admin) => Tenant::default(),
            (None, role) => return Err(format!("{at}: a `{}` key needs a `tenant`", role.as_str())),
        };
        if out.iter().any(|e| same(&e.digest, &digest)) {
            return Err(format!("{at}: the same key is listed twice"));
        }
        out.push(Entry { digest, tenant, role: k.role });
    }
    Ok(out)
}

fn digest(key: &str) -> Digest32 {
    Sha256::digest(key.as_bytes()).into()
}

/// The namespace of a bare key's sessions (`RAGCTX_API_KEYS`): a short digest, never the key.
fn namespace_of(d: &Digest32) -> String {
    d[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// A bare API key's session `id` as it is stored ([`SessionId::private_to`] its namespace):
/// what an operator who holds the key gives `ragctx trace --key`.
///
/// [`SessionId::private_to`]: ragctx_core::SessionId::private_to
pub fn bare_key_session(key: &str, id: &ragctx_core::SessionId) -> ragctx_core::SessionId {
    id.private_to(&namespace_of(&digest(key)))
}

fn from_hex(s: &str) -> Option<Digest32> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Constant-time equality, so a key cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What identifies a version of the file without reading it.
type Stamp = (Option<SystemTime>, u64, u64);

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    let m = std::fs::metadata(path)?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Ok((m.modified().ok(), m.len(), ino))
}

struct Watch {
    entries: Arc<Vec<Entry>>,
    /// The version last read (good or bad): a bad one is reported once, not every second.
    seen: Option<Stamp>,
    checked: Instant,
}

struct KeysFile {
    path: PathBuf,
    watch: Mutex<Watch>,
    force: AtomicBool,
}

impl KeysFile {
    fn open(path: &Path) -> ragctx_core::Result<KeysFile> {
        let bad = |m: String| ragctx_core::Error::InvalidInput(format!("keys file {}: {m}", path.display()));
        let seen = stamp(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let entries = parse(&text).map_err(bad)?;
        Ok(KeysFile {
            path: path.to_owned(),
            watch: Mutex::new(Watch { entries: Arc::new(entries), seen: Some(seen), checked: Instant::now() }),
            force: AtomicBool::new(false),
        })
    }

    /// The keys now in force: the file looked at again if a second has passed.
    fn current(&self) -> Arc<Vec<Entry>> {
        let mut w = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let forced = self.force.swap(false, Ordering::Relaxed);
        if forced || w.checked.elapsed() >= RELOAD_INTERVAL {
            w.checked = Instant::now();
            self.check(&mut w, forced);
        }
        w.entries.clone()
    }

    fn check(&self, w: &mut Watch, forced: bool) {
        let now = match stamp(&self.path) {
            Ok(s) => s,
            Err(e) => {
                if w.seen.is_some() {
                    tracing::warn!(path = %self.path.display(), error = %e, "keys file unreadable: keeping the last good keys");
                    w.seen = None;
                }
                return;
            }
        };
        if !forced && w.seen == Some(now) {
            return;
        }
        w.seen = Some(now);
        let parsed = std::fs::read_to_string(&self.path).map_err(|e| e.to_string()).and_then(|t| parse(&t));
        match parsed {
            Ok(entries) => {
                tracing::info!(path = %self.path.display(), keys = entries.len(), "keys file reloaded");
                w.entries = Arc::new(entries);
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "keys file invalid: keeping the last good keys")
            }
        }
    }
}

/// The keys a server accepts: the bare list (`RAGCTX_API_KEYS`: each `write` in tenant
/// `default`, with sessions private to the key, as before tenants) and the keys file. With
/// neither, there is no authentication (bind to loopback only).
pub struct Keys {
    bare: Vec<Digest32>,
    file: Option<KeysFile>,
}

impl Keys {
    /// No authentication.
    pub fn none() -> Keys {
        Keys { bare: Vec::new(), file: None }
    }

    /// The bare list only.
    pub fn bare<S: AsRef<str>>(keys: &[S]) -> Keys {
        Keys { bare: keys.iter().map(|k| digest(k.as_ref())).collect(), file: None }
    }

    /// The bare list and, when given, the keys file (read now: a file that cannot be read or
    /// parsed at start is an error; later it keeps the last good keys).
    pub fn new<S: AsRef<str>>(bare: &[S], file: Option<&Path>) -> ragctx_core::Result<Keys> {
        let file = file.map(KeysFile::open).transpose()?;
        Ok(Keys { file, ..Keys::bare(bare) })
    }

    /// Whether calls need a key (a keys file counts even when it lists none).
    pub fn configured(&self) -> bool {
        !self.bare.is_empty() || self.file.is_some()
    }

    /// How many keys are in force now.
    pub fn count(&self) -> usize {
        self.bare.len() + self.file.as_ref().map_or(0, |f| f.current().len())
    }

    /// Re-reads the keys file now, whatever its stamp (SIGHUP).
    pub fn reload(&self) {
        if let Some(f) = &self.file {
            f.force.store(true, Ordering::Relaxed);
            f.current();
        }
    }

    /// The key's tenant, role and session namespace; `None` for an unknown key. Every key
    /// in force is compared, each in constant time.
    fn find(&self, given: &str) -> Option<(Tenant, Role, Option<String>)> {
        let d = digest(given);
        let mut found = None;
        if let Some(f) = &self.file {
            for e in f.current().iter() {
                if same(&e.digest, &d) {
                    found = Some((e.tenant.clone(), e.role, None));
                }
            }
        }
        let mut bare = false;
        for b in &self.bare {
            bare |= same(b, &d);
        }
        if bare && found.is_none() {
            found = Some((Tenant::default(), Role::Write, Some(namespace_of(&d))));
        }
        found
    }
}

/// The caller of one request: the tenant it acts in, its role, and (bare keys) the prefix
/// of its sessions.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The tenant every store call of the request is scoped to.
    pub tenant: Tenant,
    /// What the key may do.
    pub role: Role,
    pub(crate) ns: Option<String>,
}

impl Caller {
    /// 403 unless the caller's role includes `role`; `what` says what was refused.
    pub fn require(&self, role: Role, what: &str) -> Result<(), ApiError> {
        if self.role >= role {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("this key's role `{}` may not {what}: that needs a `{}` key", self.role.as_str(), role.as_str()),
        ))
    }
}

/// Resolves the caller: 401 without a known key (where keys are configured), 400 for a
/// malformed `X-Ragctx-Tenant`, 403 for a non-admin key naming another tenant. Without keys
/// the caller is an admin of `home` (the server's tenant) or of the tenant it names.
pub fn resolve(keys: &Keys, home: &Tenant, headers: &HeaderMap) -> Result<Caller, ApiError> {
    // Read only once the key is known: an unknown caller learns nothing but 401.
    let named = || match headers.get(TENANT_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| Tenant::parse(s.trim()).ok())
            .map(Some)
            .ok_or_else(|| ApiError::bad_request("X-Ragctx-Tenant: a tenant is 1 to 64 of [A-Za-z0-9_.-]")),
    };
    if !keys.configured() {
        return Ok(Caller { tenant: named()?.unwrap_or_else(|| home.clone()), role: Role::Admin, ns: None });
    }
    let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token).unwrap_or("");
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or unknown API key: send Authorization: Bearer KEY",
        )
    };
    if given.is_empty() {
        return Err(unauthorized());
    }
    let (tenant, role, ns) = keys.find(given).ok_or_else(unauthorized)?;
    let tenant = match named()? {
        Some(t) if role == Role::Admin => t,
        Some(t) if t != tenant => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "X-Ragctx-Tenant: only an `admin` key may name another tenant than its own",
            ))
        }
        _ => tenant,
    };
    tracing::debug!(tenant = %tenant, role = role.as_str(), "caller");
    Ok(Caller { tenant, role, ns })
}

/// The token of an `Authorization: Bearer TOKEN` value; the scheme is case-insensitive
/// (RFC 9110 §11.1), as `bearer` or `BEARER` from some clients.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer k1", "bearer k1", "BEARER  k1 "] {
            assert_eq!(super::bearer_token(v), Some("k1"), "{v}");
        }
        assert_eq!(super::bearer_token("Basic k1"), None);
        assert_eq!(super::bearer_token("Bearerk1"), None);
    }

    #[test]
    fn the_file_format_and_its_errors() {
        let hex: String = digest("s3").iter().map(|b| format!("{b:02x}")).collect();
        let text = format!(
            "[[keys]]\nkey = \"s1\"\ntenant = \"a\"\nrole = \"read\"\n\n[[keys]]\nkey = \"s2\"\ntenant = \"b\"\nrole = \"write\"\n\n[[keys]]\nsha256 = \"{hex}\"\nrole = \"admin\"\n"
        );
        let e = parse(&text).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!((e[2].tenant.as_str(), e[2].role), ("default", Role::Admin));
        assert!(same(&e[2].digest, &digest("s3")));
        for (bad, says) in [
            ("[[keys]]\nkey = \"secret-xyz\"\nrole = \"read\"\n", "needs a `tenant`"),
            ("[[keys]]\nkey = \"secret-xyz\"\ntenant = \"a\"\nrole = \"owner\"\n", "line"),
            ("[[keys]]\nsha256 = \"abc\"\ntenant = \"a\"\nrole = \"read\"\n", "64 hex"),
            ("[[keys]]\nkey = \"secret-xyz\"\ntenant = \"a b\"\nrole = \"read\"\n", "tenant"),
            ("[[keys]]\nkey = \"secret-xyz\"\ntenant = \"a\"\nrole = \"read\"\n[[keys]]\nkey = \"secret-xyz\"\ntenant = \"b\"\nrole = \"read\"\n", "twice"),
            ("[[keys]]\nkey = \"secret-xyz\" tenant = \"a\"\n", "line 2"),
            ("[[keys]]\ntenant = \"a\"\nrole = \"read\"\n", "`key` or `sha256`"),
        ] {
            let m = parse(bad).unwrap_err();
            assert!(m.contains(says), "{bad:?}: {m}");
            assert!(!m.contains("secret-xyz"), "a parse error never quotes a key: {m}");
        }
        assert!(parse("").unwrap().is_empty(), "an empty file: no key is accepted (not open)");
    }
}
