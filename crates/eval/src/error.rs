//! The evaluation's one error type: what failed, with its cause kept as the source.

use ragctx_core::ErrorKind;
use std::path::{Path, PathBuf};

/// `Result` with the evaluation's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an evaluation or a benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file the caller named could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A report, export or folder could not be written (permissions, a full disk).
    #[error("writing {}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A line of an input file is not the JSON it should be.
    #[error("{}:{line}: invalid JSON", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// An argument or an input file's content the evaluation cannot use: the message says
    /// what to fix.
    #[error("{0}")]
    Input(String),
    /// A check the run was asked to make failed (accuracy under `--min-accuracy`, turns
    /// lost or failed under load).
    #[error("{0}")]
    Failed(String),
    /// Encoding a report as JSON failed.
    #[error("encoding the report as JSON")]
    Encode(#[from] serde_json::Error),
    /// The engine, a store or the model failed.
    #[error(transparent)]
    Engine(#[from] ragctx_core::Error),
}

impl Error {
    /// How the binary classifies it: the caller's input files and arguments are bad input;
    /// a failed check, a write that failed or an encoding error is internal; an engine error
    /// keeps its own kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Read { .. } | Error::Json { .. } | Error::Input(_) => ErrorKind::BadInput,
            Error::Failed(_) | Error::Write { .. } | Error::Encode(_) => ErrorKind::Internal,
            Error::Engine(e) => e.kind(),
        }
    }

    pub(crate) fn json(path: &Path, line: usize, source: serde_json::Error) -> Self {
        Error::Json { path: path.to_path_buf(), line, source }
    }
}

impl From<ragctx_ingest::InputError> for Error {
    fn from(e: ragctx_ingest::InputError) -> Self {
        Error::Input(e.to_string())
    }
}

/// Reads a file the caller named.
pub(crate) fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_path_buf(), source })
}

/// Writes a report or export file.
pub(crate) fn write_file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, bytes).map_err(|source| Error::Write { path: path.to_path_buf(), source })
}

/// `bail!("…")`: returns [`Error::Input`] with the formatted message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Input(format!($($arg)*)))
    };
}
pub(crate) use bail;
