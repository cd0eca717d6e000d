use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as text, as stored and as `Display` prints it.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// A chunk (passage) id: the unit the index stores. Any UTF-8 string, quotes included.
    ChunkId
);
string_id!(
    /// A source document id: the unit of grouping, dedupe, citation and exclusion.
    DocumentId
);
string_id!(
    /// A conversation id chosen by the caller.
    SessionId
);

impl SessionId {
    /// Session ids are 1..=128 characters of `[A-Za-z0-9._:-]`, so they are safe as keys
    /// and in URLs.
    pub fn parse(s: &str) -> crate::Result<Self> {
        let ok = !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(crate::Error::InvalidInput(format!(
                "session id {s:?} is invalid: use 1 to 128 characters of letters, digits, '.', '_', ':' or '-'"
            )))
        }
    }

    /// This caller's session as stored for a key that keeps its sessions private (a bare API
    /// key): `{namespace}~{id}`. No caller's id holds `~`, so no other key — of this tenant or
    /// any — can name it, and every id a caller may use (up to 128 characters) fits.
    pub fn private_to(&self, namespace: &str) -> SessionId {
        SessionId(format!("{namespace}~{}", self.0))
    }
}
