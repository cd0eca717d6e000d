use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

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
    #[error("storage error: {0}")]
    Storage(String),
    /// The session moved on while a turn was being planned, and re-planning did not settle
    /// within the bounded retries (many turns of one session at once).
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("unsupported filter for {backend}: {message}")]
    UnsupportedFilter { backend: String, message: String },
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
            Error::Model(_) | Error::Storage(_) | Error::UnsupportedFilter { .. } => ErrorKind::Internal,
        }
    }

    pub fn storage(e: impl std::fmt::Display) -> Self {
        Error::Storage(e.to_string())
    }
}
