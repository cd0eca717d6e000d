use thiserror::Error;

/// The result of ragctx's fallible calls; the error is an [`Error`](enum@Error) unless given.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The cause an [`Error`](enum@Error) keeps as its [`source`](std::error::Error::source).
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The one error type of the core traits. Each variant has a [`ErrorKind`] that the CLI
/// maps to an exit status and the server to an HTTP status, in one place each.
#[derive(Debug, Error)]
pub enum Error {
    /// The caller's input or settings are wrong; the message says what to change.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Something the caller named (a session, a turn, a document) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A vector whose length is not the store's dimension.
    #[error("wrong embedding dimension: expected {expected}, got {got}")]
    WrongDimension {
        /// The store's dimension.
        expected: usize,
        /// The length of the vector given.
        got: usize,
    },
    /// The embedding model's files are not in the model directory the settings name.
    #[error("embedding model not found at {path}: run `scripts/setup` to install it (or pass --model-dir / set RAGCTX_MODEL_DIR)")]
    ModelMissing {
        /// The model directory that was looked in.
        path: String,
    },
    /// The embedding model failed: unreadable model files, or no vector returned.
    #[error("model error: {0}")]
    Model(String),
    /// The store holds vectors of another embedding model: searching them with this one's
    /// query vectors, or adding this one's vectors beside them, would rank by noise.
    #[error(
        "this store's vectors were made by embedding model {stored:?}, but ragctx is set to embed with {configured:?}; \
         vectors of two models cannot be mixed: go back to the first model, or ingest the documents again into a new \
         data dir (--data-dir) or collection (--collection) with the new one"
    )]
    ModelMismatch {
        /// The model id recorded with the store's vectors.
        stored: String,
        /// The model id of the embedder the settings name.
        configured: String,
    },
    /// A backend could not be reached or gave up (Milvus, Redis, an OpenAI-compatible server,
    /// a data dir held by another process), or a turn ran past its deadline.
    #[error("{backend} is unavailable: {message}")]
    Unavailable {
        /// What failed, with its address when it has one (`Milvus at …`); `turn` for a deadline.
        backend: String,
        /// What went wrong, with the backend's own error text.
        message: String,
    },
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
    /// What the caller named does not exist.
    NotFound,
    /// A backend or model is missing or down: retry later or fix the deployment.
    Unavailable,
    /// Another request changed the same session at the same time: retry.
    Conflict,
    /// A fault of ragctx, its model or its storage: not the caller's to fix.
    Internal,
}

impl ErrorKind {
    /// Every front's name and number for each kind, in one table: the error `code` of the
    /// HTTP API (`{"code","message"}`), its HTTP status, and the CLI's exit status (README
    /// "Exit codes"). Python raises one exception class per kind (`BadInput`, `NotFound`,
    /// `Unavailable`, `Conflict`, `RagctxError`); MCP tools answer a tool error.
    const TABLE: [(ErrorKind, &'static str, u16, i32); 5] = [
        (ErrorKind::BadInput, "bad_request", 400, 2),
        (ErrorKind::NotFound, "not_found", 404, 3),
        (ErrorKind::Unavailable, "unavailable", 503, 4),
        (ErrorKind::Conflict, "conflict", 409, 5),
        (ErrorKind::Internal, "internal", 500, 1),
    ];

    fn row(self) -> (ErrorKind, &'static str, u16, i32) {
        Self::TABLE.into_iter().find(|r| r.0 == self).expect("every kind has a row")
    }

    /// The HTTP API's error code (`bad_request`, `not_found`, `unavailable`, `conflict`,
    /// `internal`).
    pub fn code(self) -> &'static str {
        self.row().1
    }

    /// The HTTP status the server answers with.
    pub fn http_status(self) -> u16 {
        self.row().2
    }

    /// The CLI's exit status.
    pub fn exit_code(self) -> i32 {
        self.row().3
    }
}

impl Error {
    /// The kind the CLI maps to an exit status and the server to an HTTP status.
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

#[cfg(test)]
mod kind_tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_code_status_and_exit_code() {
        let kinds = [
            ErrorKind::BadInput,
            ErrorKind::NotFound,
            ErrorKind::Unavailable,
            ErrorKind::Conflict,
            ErrorKind::Internal,
        ];
        let rows: Vec<_> = kinds.iter().map(|k| (k.code(), k.http_status(), k.exit_code())).collect();
        assert_eq!(
            rows,
            [
                ("bad_request", 400, 2),
                ("not_found", 404, 3),
                ("unavailable", 503, 4),
                ("conflict", 409, 5),
                ("internal", 500, 1)
            ]
        );
        assert_eq!(Error::InvalidInput("x".into()).kind().http_status(), 400);
    }
}
