use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The cause an [`Error`](enum@Error) keeps as its [`source`](std::error::Error::source).
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The one error type of the core traits. Each variant has a [`ErrorKind`] that the CLI
/// maps to an exit status and the server to an HTTP status, in one place each.
#[derive(Debug, Error)]
pub enum Error {
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("wrong embedding dimension: expected {expected}, got {got}")]
    WrongDimension { expected: usize, got: usize },
    #[error("embedding model not found at {path}: run `scripts/setup` to install it (or pass --model-dir / set RAGCTX_MODEL_DIR)")]
    ModelMissing { path: String },
    #[error("model error: {0}")]
    Model(String),
    /// The store holds vectors of another embedding model: searching them with this one's
    /// query vectors, or adding this one's vectors beside them, would rank by noise.
    #[error(
        "this store's vectors were made by embedding model {stored:?}, but ragctx is set to embed with {configured:?}; \
         vectors of two models cannot be mixed: go back to the first model, or ingest the documents again into a new \
         data dir (--data-dir) or collection (--collection) with the new one"
    )]
    ModelMismatch { stored: String, configured: String },
    #[error("{backend} is unavailable: {message}")]
    Unavailable { backend: String, message: String },
    /// A store failed or holds what it should not. `message` says what ragctx was doing;
    /// the cause (a database, network or codec error) is the source, printed after it by
    /// [`Error::report`].
    #[error("storage error{}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    Storage {
        /// What failed, without the cause's own text.
        message: String,
        /// The backend's error, kept whole.
        #[source]
        source: Option<Source>,
    },
    /// The session moved on while a turn was being planned, and re-planning did not settle
    /// within the bounded retries (many turns of one session at once).
    #[error("conflict: {0}")]
    Conflict(String),
}

/// What kind of failure an [`Error`](enum@Error) is, for status mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller's mistake: fix the input and retry.
    BadInput,
    NotFound,
    /// A backend or model is missing or down: retry later or fix the deployment.
    Unavailable,
    /// Another request changed the same session at the same time: retry.
    Conflict,
    Internal,
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) | Error::WrongDimension { .. } | Error::ModelMismatch { .. } => ErrorKind::BadInput,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::ModelMissing { .. } | Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::Model(_) | Error::Storage { .. } => ErrorKind::Internal,
        }
    }

    /// A storage failure caused by `source`, kept as the error's source.
    pub fn storage(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Storage { message: String::new(), source: Some(Box::new(source)) }
    }

    /// A storage failure while doing `message`, caused by `source`.
    pub fn storage_in(message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Storage { message: message.into(), source: Some(Box::new(source)) }
    }

    /// A store that holds what it should not (two tables that disagree, a field of the
    /// wrong type): no underlying error, only what was found.
    pub fn inconsistent(message: impl Into<String>) -> Self {
        Error::Storage { message: message.into(), source: None }
    }

    /// The error with every source after it: `storage error: reading x: permission denied`.
    pub fn report(&self) -> Report<'_> {
        Report(self)
    }
}

/// Displays an error followed by its chain of sources, `: `-separated.
pub struct Report<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_error_keeps_its_cause_as_the_source() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
        let e = Error::storage_in("opening ragctx.redb", io);
        assert_eq!(e.to_string(), "storage error: opening ragctx.redb");
        let source = std::error::Error::source(&e).expect("the cause is kept");
        assert_eq!(
            source.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::PermissionDenied)
        );
        assert_eq!(e.report().to_string(), "storage error: opening ragctx.redb: permission denied");
        assert_eq!(Error::inconsistent("tables disagree").report().to_string(), "storage error: tables disagree");
        assert_eq!(e.kind(), ErrorKind::Internal);
    }
}
