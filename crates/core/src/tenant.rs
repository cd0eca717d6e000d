//! Tenants (DESIGN §8): every chunk, document, session and trace belongs to one. Below the
//! API a tenant has one encoding: whatever it owns is stored under its qualified id —
//! `tenant` + U+001F + id ([`Tenant::qualify`]) — chunk and document ids, session ids, and
//! the model key of its embedding-cache entries, so two tenants may use the same ids; the
//! `default` tenant's ids are stored as given, so stores made before tenants existed are the
//! default tenant's. The tenant of a stored id is read off it ([`tenant_of`]), and every
//! search states the tenant it is for ([`crate::SearchRequest::tenant`]).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Between a tenant and an id inside a store. Ids given by callers may not contain it.
pub const TENANT_SEPARATOR: char = '\u{1f}';

/// The tenant of everything not given one.
pub const DEFAULT_TENANT: &str = "default";

/// A tenant's name: 1 to 64 characters of `[A-Za-z0-9_.-]`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Tenant(String);

impl Tenant {
    /// Checks a tenant name.
    pub fn parse(s: &str) -> Result<Tenant> {
        let ok = !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if ok {
            Ok(Tenant(s.to_owned()))
        } else {
            Err(Error::InvalidInput(format!(
                "tenant {s:?} is invalid: use 1 to 64 characters of letters, digits, '_', '.' or '-'"
            )))
        }
    }
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// Whether this is the `default` tenant.
    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_TENANT
    }

    /// The stored form of a caller's id: refused when it holds [`TENANT_SEPARATOR`] (it could
    /// name another tenant's id).
    pub fn qualify(&self, id: &str) -> Result<String> {
        if id.contains(TENANT_SEPARATOR) {
            return Err(Error::InvalidInput(format!("id {id:?} contains the control character U+001F")));
        }
        Ok(self.qualify_unchecked(id))
    }

    /// The stored form of an id known to be free of the separator.
    pub fn qualify_unchecked(&self, id: &str) -> String {
        if self.is_default() {
            id.to_owned()
        } else {
            format!("{}{TENANT_SEPARATOR}{id}", self.0)
        }
    }

    /// The caller's id of a stored one, when it belongs to this tenant.
    pub fn unqualify<'a>(&self, stored: &'a str) -> Option<&'a str> {
        match stored.split_once(TENANT_SEPARATOR) {
            Some((t, id)) if t == self.0 => Some(id),
            Some(_) => None,
            None if self.is_default() => Some(stored),
            None => None,
        }
    }
}

impl Default for Tenant {
    fn default() -> Self {
        Tenant(DEFAULT_TENANT.to_owned())
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Tenant {
    type Error = Error;
    fn try_from(s: String) -> Result<Tenant> {
        Tenant::parse(&s)
    }
}

impl From<Tenant> for String {
    fn from(t: Tenant) -> String {
        t.0
    }
}

impl std::str::FromStr for Tenant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Tenant> {
        Tenant::parse(s)
    }
}

/// The tenant a stored id belongs to.
pub fn tenant_of(stored_id: &str) -> &str {
    stored_id.split_once(TENANT_SEPARATOR).map_or(DEFAULT_TENANT, |(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_never_cross() {
        let a = Tenant::parse("plants-en").unwrap();
        let d = Tenant::default();
        let stored = a.qualify("watering.md#0").unwrap();
        assert_eq!(tenant_of(&stored), "plants-en");
        assert_eq!(a.unqualify(&stored), Some("watering.md#0"));
        assert_eq!(d.unqualify(&stored), None);
        assert_eq!(d.qualify("x").unwrap(), "x");
        assert_eq!(a.unqualify("x"), None);
        assert_eq!(tenant_of("x"), "default");
        assert!(d.qualify("plants-en\u{1f}watering.md").is_err());
        assert!(Tenant::parse("a b").is_err());
        assert!(Tenant::parse("").is_err());
    }
}
