//! Reading what users ingest into chunks, before anything is embedded or written:
//! pre-chunked JSONL ([`parse_jsonl`]), records sent as a JSON array or JSONL
//! ([`read_records`]), and documents chunked here ([`chunk_document`]: `.md`, `.txt`,
//! `.html`, `.docx`, `.pdf`). Pure functions over bytes; every error names the file and, where there is one,
//! the line. The engine embeds and stores what this crate reads (`ragctx_engine::ingest`).
//!
//! ```
//! use ragctx_ingest::read_records;
//! let chunks = read_records("request body", br#"[{"_id": "a#0", "text": "Water weekly."}]"#).unwrap();
//! assert_eq!(chunks[0].chunk.document_id.as_str(), "a#0");
//! assert!(read_records("request body", b"[]").is_err());
//! ```

mod chunker;
mod docx;
mod guard;
mod jsonl;
mod panics;
mod pdf;
mod structure;
mod titles;

pub use chunker::{chunk_document, read_document, DocumentFormat, ReadDocument, CHUNK_CHARS};
pub use guard::read_document_guarded;
pub use jsonl::parse_jsonl;
pub use ragctx_core::{SECTION_KEY, SECTION_SEPARATOR};

use ragctx_core::Chunk;
use std::collections::HashMap;

/// A problem with the input, located.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InputError {
    /// The file at fault, as it was named or found in a folder.
    pub file: String,
    /// The 1-based line at fault, when there is one (a JSONL line, invalid UTF-8).
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    /// A problem with a file as a whole (no line to name).
    pub(crate) fn whole(file: &str, message: impl Into<String>) -> Self {
        InputError { file: file.to_owned(), line: None, message: message.into() }
    }
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
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourcedChunk {
    /// The chunk as read, before its tokens are counted.
    pub chunk: Chunk,
    /// The file it was read from.
    pub file: String,
    /// Its JSONL line; `None` for a chunked document.
    pub line: Option<usize>,
    /// Where pages begin in the chunk's text (byte offset, page number), the first at 0, for
    /// a document with pages (PDF); empty otherwise. The sentence index takes each sentence's
    /// page from it.
    pub page_starts: Vec<(usize, u32)>,
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
/// `ingest_records`): a JSON array of chunk objects (read straight from the bytes) or JSONL
/// lines, each checked as a JSONL line of a file is (a key given twice or unknown refused),
/// ids unique; none at all is refused. `source` names them in errors.
pub fn read_records(source: &str, bytes: &[u8]) -> Result<Vec<SourcedChunk>, InputError> {
    let first = bytes.iter().find(|c| !c.is_ascii_whitespace()).copied();
    let chunks = if first == Some(b'[') { jsonl::parse_array(source, bytes)? } else { parse_jsonl(source, bytes)? };
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

#[cfg(test)]
mod tests {
    use super::read_records;

    #[test]
    fn records_as_an_array_or_jsonl_are_checked_as_a_file_s_lines() {
        let array =
            br#"[{"_id": "a#0", "text": "Water weekly."}, {"_id": "a#1", "document_id": "a", "text": "Mist."}]"#;
        let jsonl = b"{\"_id\": \"a#0\", \"text\": \"Water weekly.\"}\n{\"_id\": \"a#1\", \"document_id\": \"a\", \"text\": \"Mist.\"}\n";
        let (a, j) = (read_records("body", array).unwrap(), read_records("body", jsonl).unwrap());
        let ids = |c: &[super::SourcedChunk]| c.iter().map(|c| c.chunk.id.as_str().to_owned()).collect::<Vec<_>>();
        assert_eq!((ids(&a), ids(&j)), (vec!["a#0".to_owned(), "a#1".into()], vec!["a#0".to_owned(), "a#1".into()]));
        assert_eq!(a[1].chunk.document_id.as_str(), "a");
        // A key given twice or unknown is refused in an array as on a line.
        let twice = read_records("body", br#"[{"_id": "x", "text": "a", "text": "b"}]"#).unwrap_err();
        assert!(twice.to_string().contains("duplicate field `text`"), "{twice}");
        let unknown = read_records("body", br#"[{"_id": "x", "text": "a", "colour": 1}]"#).unwrap_err();
        assert!(unknown.to_string().contains("unknown field `colour`"), "{unknown}");
        // A bad element is named by its index; duplicate ids and an empty input are refused.
        let empty_text =
            read_records("body", br#"[{"_id": "x", "text": "a"}, {"_id": "y", "text": " "}]"#).unwrap_err();
        assert_eq!(empty_text.to_string(), "body: element 1: chunk \"y\" has empty text");
        let dup = read_records("body", br#"[{"_id": "x", "text": "a"}, {"_id": "x", "text": "b"}]"#).unwrap_err();
        assert!(dup.to_string().contains("duplicate id \"x\""), "{dup}");
        assert_eq!(read_records("body", b"  [] ").unwrap_err().to_string(), "body: no chunks (nothing was changed)");
    }
}
