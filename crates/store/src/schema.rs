//! The data dir's redb tables and how their values are encoded, in one place: every module
//! that reads or writes `ragctx.redb` takes its tables and codecs from here.

use redb::TableDefinition;

/// Counters: the store's generation and the index files' generations.
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Chunk id → the chunk as JSON.
pub(crate) const CHUNKS: TableDefinition<&str, &[u8]> = TableDefinition::new("chunks");
/// Chunk id → its vector as little-endian `f32`s ([`f32s_to_bytes`]).
pub(crate) const VECTORS: TableDefinition<&str, &[u8]> = TableDefinition::new("vectors");
/// SHA-256 of (model id, text) → its vector, as [`VECTORS`] holds it.
pub(crate) const EMBED_CACHE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("embedding_cache");
/// Session id → its state and expiry as JSON.
pub(crate) const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
/// (session id, turn) → the turn's trace as JSON.
pub(crate) const TRACES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("traces");
/// `model`: the id of the embedding model whose vectors the store holds.
pub(crate) const EMBEDDING_MODEL: TableDefinition<&str, &str> = TableDefinition::new("embedding_model");

/// Chunk id → its sentence index ([`encode_sentences`]), where the ingest made one.
pub(crate) const SENTENCES: TableDefinition<&str, &[u8]> = TableDefinition::new("sentences");

/// A chunk's sentences as `u32` count and dimension, then per sentence `u32` start, end and
/// page (`u32::MAX`: none), its `f32` scale and one byte per dimension (little-endian).
pub(crate) fn encode_sentences(s: &ragctx_core::Sentences) -> Vec<u8> {
    let dim = s.sentences.first().map_or(0, |x| x.vector.values.len());
    let mut out = Vec::with_capacity(8 + s.sentences.len() * (16 + dim));
    out.extend((s.sentences.len() as u32).to_le_bytes());
    out.extend((dim as u32).to_le_bytes());
    for x in &s.sentences {
        for v in [x.start, x.end, x.page.unwrap_or(u32::MAX)] {
            out.extend(v.to_le_bytes());
        }
        out.extend(x.vector.scale.to_le_bytes());
        out.extend(x.vector.values.iter().map(|&v| v as u8));
    }
    out
}

/// [`encode_sentences`] read back; `None` for bytes it did not write.
pub(crate) fn decode_sentences(b: &[u8]) -> Option<ragctx_core::Sentences> {
    let word = |at: usize| b.get(at..at + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    let (n, dim) = (word(0)? as usize, word(4)? as usize);
    if b.len() != 8 + n.checked_mul(16 + dim)? {
        return None;
    }
    let sentences = (0..n)
        .map(|i| {
            let at = 8 + i * (16 + dim);
            let page = word(at + 8)?;
            Some(ragctx_core::Sentence {
                start: word(at)?,
                end: word(at + 4)?,
                page: (page != u32::MAX).then_some(page),
                vector: ragctx_core::QuantizedVector {
                    scale: f32::from_bits(word(at + 12)?),
                    values: b[at + 16..at + 16 + dim].iter().map(|&v| v as i8).collect(),
                },
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(ragctx_core::Sentences { sentences })
}

pub(crate) fn f32s_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn bytes_to_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Generation → the ids that write touched (see [`encode_ids`]).
pub(crate) const CHANGES: TableDefinition<u64, &[u8]> = TableDefinition::new("changes");

/// Ids as `u32` length + UTF-8 bytes each.
pub(crate) fn encode_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::new();
    for id in ids {
        out.extend((id.len() as u32).to_le_bytes());
        out.extend(id.as_bytes());
    }
    out
}

pub(crate) fn decode_ids(mut bytes: &[u8]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let n = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let id = std::str::from_utf8(bytes.get(4..4 + n)?).ok()?;
        out.push(id.to_owned());
        bytes = &bytes[4 + n..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_a_torn_record_is_refused() {
        let ids = ["a#0", "", "t\u{1f}é#12"];
        let bytes = encode_ids(ids);
        assert_eq!(decode_ids(&bytes).unwrap(), ids);
        assert!(decode_ids(&bytes[..bytes.len() - 1]).is_none());
    }

    #[test]
    fn sentences_round_trip_and_a_torn_record_is_refused() {
        let s =
            ragctx_core::Sentences::new(&[(0, 4), (5, 9)], &[vec![0.6, -0.8, 0.0], vec![0.0, 0.5, -1.0]], &[Some(3)]);
        let bytes = encode_sentences(&s);
        assert_eq!(decode_sentences(&bytes), Some(s.clone()));
        assert_eq!(s.sentences[1].page, None, "a page only where given");
        assert!(decode_sentences(&bytes[..bytes.len() - 1]).is_none());
        assert_eq!(decode_sentences(&encode_sentences(&Default::default())), Some(Default::default()));
    }
}
