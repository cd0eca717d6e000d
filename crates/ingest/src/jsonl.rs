use crate::{InputError, SourcedChunk};
use ragctx_core::{Chunk, Json, Metadata};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(rename = "_id", alias = "id")]
    id: String,
    document_id: Option<String>,
    #[serde(default)]
    title: String,
    text: String,
    start: Option<u64>,
    end: Option<u64>,
    ordinal: Option<u32>,
    weight: Option<f32>,
    /// Checked by [`Metadata::from_json`] (the error names the key).
    #[serde(default)]
    metadata: Option<Json>,
}

/// Parses pre-chunked JSONL: one object a line with `_id`, `text`, and optionally
/// `document_id` (defaults to `_id`), `title`, `start`/`end`, `ordinal`, `weight`, `metadata`
/// (an object of strings, numbers, bools and lists of strings; DESIGN §8).
/// Blank lines are skipped. The first bad line fails the whole file.
pub fn parse_jsonl(file: &str, bytes: &[u8]) -> Result<Vec<SourcedChunk>, InputError> {
    let mut out = Vec::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let lineno = i + 1;
        let err = |message: String| InputError { file: file.to_owned(), line: Some(lineno), message };
        let text = std::str::from_utf8(raw).map_err(|e| err(format!("invalid UTF-8 ({e})")))?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(text).map_err(|e| err(format!("invalid chunk: {e}")))?;
        out.push(l.into_chunk(file, Some(lineno)).map_err(err)?);
    }
    Ok(out)
}

/// A JSON array of chunk objects, each as a JSONL line is read (duplicate and unknown keys
/// refused as they are there); an error names the element by its 0-based index.
pub(crate) fn parse_array(file: &str, bytes: &[u8]) -> Result<Vec<SourcedChunk>, InputError> {
    let err = |message: String| InputError { file: file.to_owned(), line: None, message };
    let lines: Vec<Line> =
        serde_json::from_slice(bytes).map_err(|e| err(format!("not a JSON array of chunks: {e}")))?;
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| l.into_chunk(file, None).map_err(|m| err(format!("element {i}: {m}"))))
        .collect()
}

impl Line {
    /// The chunk this line gives, checked; the error is the message alone (the caller
    /// locates it).
    fn into_chunk(self, file: &str, line: Option<usize>) -> Result<SourcedChunk, String> {
        let l = self;
        if l.id.is_empty() {
            return Err("empty _id".into());
        }
        if l.text.trim().is_empty() {
            return Err(format!("chunk {:?} has empty text", l.id));
        }
        if let (Some(s), Some(e)) = (l.start, l.end) {
            if e < s {
                return Err(format!("chunk {:?}: end {e} is before start {s}", l.id));
            }
        }
        let weight = l.weight.unwrap_or(1.0);
        if !weight.is_finite() || weight <= 0.0 {
            return Err(format!("chunk {:?}: weight must be a positive number", l.id));
        }
        let metadata = match &l.metadata {
            None | Some(Json::Null) => Metadata::default(),
            Some(m) => Metadata::from_json(m, "metadata").map_err(|m| format!("chunk {:?}: {m}", l.id))?,
        };
        let document_id = match l.document_id {
            Some(d) if d.is_empty() => return Err(format!("chunk {:?} has an empty document_id", l.id)),
            Some(d) => d,
            None => l.id.clone(),
        };
        Ok(SourcedChunk {
            chunk: Chunk {
                id: l.id.into(),
                document_id: document_id.into(),
                title: l.title,
                text: l.text,
                ordinal: l.ordinal,
                start: l.start,
                end: l.end,
                weight,
                tokens: None,
                metadata,
            },
            file: file.to_owned(),
            line,
            page_starts: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mtrag_format_and_odd_ids() {
        let input = concat!(
            r#"{"_id": "d-1-0-10", "document_id": "d", "start": 0, "end": 10, "title": "T", "text": "hello"}"#,
            "\n\n",
            r#"{"_id": "zz\"] or id >= 0 or doc_id in [\"zz", "text": "x", "weight": 2}"#,
            "\n"
        );
        let c = parse_jsonl("f.jsonl", input.as_bytes()).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].chunk.start, Some(0));
        assert_eq!(c[1].chunk.id.as_str(), "zz\"] or id >= 0 or doc_id in [\"zz");
        assert_eq!(c[1].chunk.document_id.as_str(), c[1].chunk.id.as_str());
        assert_eq!(c[1].line, Some(3));
    }

    #[test]
    fn errors_name_the_line() {
        let bad = b"{\"_id\":\"a\",\"text\":\"ok\"}\n{\"_id\":\"b\",\"text\":\n";
        let e = parse_jsonl("f.jsonl", bad).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.to_string().starts_with("f.jsonl:2: invalid chunk"), "{e}");
        let e = parse_jsonl("f.jsonl", b"{\"_id\":\"a\",\"text\":\"  \"}").unwrap_err();
        assert!(e.message.contains("empty text"));
        let e = parse_jsonl("f.jsonl", b"{\"_id\":\"a\",\"text\":\"x\"}\n\xff\xfe\n").unwrap_err();
        assert_eq!((e.line, e.message.contains("UTF-8")), (Some(2), true));
        let e = parse_jsonl(
            "f.jsonl",
            b"{\"_id\":\"a\",\"text\":\"x\"}\n{\"_id\":\"b\",\"text\":\"x\",\"metadata\":{\"k\":{\"x\":1}}}",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("metadata.k is an object"), "{e}");
        let ok = parse_jsonl("f.jsonl", b"{\"_id\":\"a\",\"text\":\"x\",\"metadata\":{\"topic\":\"pests\",\"n\":2}}")
            .unwrap();
        assert_eq!(ok[0].chunk.metadata.get("n"), Some(&ragctx_core::MetaValue::Number(2.0)));
        let e = parse_jsonl("f.jsonl", b"{\"_id\":\"a\",\"text\":\"x\",\"colour\":1}").unwrap_err();
        assert!(e.message.contains("unknown field"), "{e}");
    }

    #[test]
    fn duplicate_ids_are_rejected_with_both_places() {
        let c = parse_jsonl("f.jsonl", b"{\"_id\":\"a\",\"text\":\"x\"}\n{\"_id\":\"a\",\"text\":\"y\"}").unwrap();
        let e = super::super::check_unique_ids(&c).unwrap_err();
        assert_eq!(e.to_string(), "f.jsonl:2: duplicate id \"a\" (first at f.jsonl:1)");
    }
}
