//! Reading what users ingest into chunks, before anything is embedded or written:
//! pre-chunked JSONL ([`parse_jsonl`]), records sent as a JSON array or JSONL
//! ([`read_records`]), and documents chunked here ([`chunk_document`]: `.md`, `.txt`,
//! `.html`). Pure functions over bytes; every error names the file and, where there is one,
//! the line. The engine embeds and stores what this crate reads (`ragctx_engine::ingest`).
//!
//! ```
//! use ragctx_ingest::read_records;
//! let chunks = read_records("request body", br#"[{"_id": "a#0", "text": "Water weekly."}]"#).unwrap();
//! assert_eq!(chunks[0].chunk.document_id.as_str(), "a#0");
//! assert!(read_records("request body", b"[]").is_err());
//! ```

mod chunker;
mod jsonl;

pub use chunker::{chunk_document, html_to_text, DocumentFormat, CHUNK_CHARS};
pub use jsonl::parse_jsonl;

use ragctx_core::Chunk;
use std::collections::HashMap;

/// A problem with the input, located.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    /// The file at fault, as it was named or found in a folder.
    pub file: String,
    /// The 1-based line at fault, when there is one (a JSONL line, invalid UTF-8).
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for InputError {}

impl From<InputError> for ragctx_core::Error {
    fn from(e: InputError) -> Self {
        ragctx_core::Error::InvalidInput(e.to_string())
    }
}

/// A chunk and where it came from, for duplicate reports.
#[derive(Clone, Debug, PartialEq)]
pub struct SourcedChunk {
    /// The chunk as read, before its tokens are counted.
    pub chunk: Chunk,
    /// The file it was read from.
    pub file: String,
    /// Its JSONL line; `None` for a chunked document.
    pub line: Option<usize>,
}

/// Rejects two chunks with one id in the same input: an upsert would silently keep only
/// the later one.
pub fn check_unique_ids(chunks: &[SourcedChunk]) -> Result<(), InputError> {
    let mut seen: HashMap<&str, &SourcedChunk> = HashMap::new();
    for c in chunks {
        if let Some(first) = seen.insert(c.chunk.id.as_str(), c) {
            let at = |s: &SourcedChunk| match s.line {
                Some(l) => format!("{}:{l}", s.file),
                None => s.file.clone(),
            };
            return Err(InputError {
                file: c.file.clone(),
                line: c.line,
                message: format!("duplicate id {:?} (first at {})", c.chunk.id.as_str(), at(first)),
            });
        }
    }
    Ok(())
}

/// Records sent rather than read from files (`POST /v1/documents`, Python's
/// `ingest_records`): a JSON array of chunk objects or JSONL lines, each read as a JSONL line
/// of a file is, ids unique; none at all is refused. `source` names them in errors.
pub fn read_records(source: &str, bytes: &[u8]) -> Result<Vec<SourcedChunk>, InputError> {
    let first = bytes.iter().find(|c| !c.is_ascii_whitespace()).copied();
    let chunks = if first == Some(b'[') {
        let items: Vec<serde_json::Value> = serde_json::from_slice(bytes).map_err(|e| InputError {
            file: source.to_owned(),
            line: None,
            message: format!("not a JSON array of chunks: {e}"),
        })?;
        let mut chunks = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            // Each element read as a JSONL line; an error names its index.
            let one = parse_jsonl(source, item.to_string().as_bytes()).map_err(|e| InputError {
                file: source.to_owned(),
                line: None,
                message: format!("element {i}: {}", e.message),
            })?;
            chunks.extend(one);
        }
        chunks
    } else {
        parse_jsonl(source, bytes)?
    };
    check_unique_ids(&chunks)?;
    if chunks.is_empty() {
        return Err(InputError {
            file: source.to_owned(),
            line: None,
            message: "no chunks (nothing was changed)".into(),
        });
    }
    Ok(chunks)
}
