//! The sentence index (DESIGN §11): each chunk's sentences with their spans, pages and vectors,
//! kept beside the chunk at ingest so that a turn can judge a block sentence by sentence
//! without running the encoder.

use crate::QuantizedVector;
use serde::{Deserialize, Serialize};

/// One sentence of a chunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sentence {
    /// Where it starts in the chunk's text, in bytes.
    pub start: u32,
    /// Where it ends, exclusive, in bytes.
    pub end: u32,
    /// The page it is on (PDFs), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Its embedding with the store's embedder (L2-normalised before quantizing), one byte per
    /// dimension.
    pub vector: QuantizedVector,
}

/// A chunk's sentences, in order: what [`crate::VectorStore::sentences`] returns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sentences {
    /// The sentences ([`crate::text::sentences`] of the chunk's text), in order.
    pub sentences: Vec<Sentence>,
}

impl Sentences {
    /// The sentences at `spans` with their vectors, quantized (and pages where given).
    pub fn new(spans: &[(usize, usize)], vectors: &[Vec<f32>], pages: &[Option<u32>]) -> Sentences {
        Sentences::of(spans, vectors.iter().map(|v| QuantizedVector::quantize(v)), pages)
    }

    /// The sentences at `spans` with their quantized vectors (and pages where given).
    pub fn of(
        spans: &[(usize, usize)],
        vectors: impl IntoIterator<Item = QuantizedVector>,
        pages: &[Option<u32>],
    ) -> Sentences {
        let sentences = spans
            .iter()
            .zip(vectors)
            .enumerate()
            .map(|(i, (&(start, end), vector))| Sentence {
                start: start as u32,
                end: end as u32,
                page: pages.get(i).copied().flatten(),
                vector,
            })
            .collect();
        Sentences { sentences }
    }

    /// Whether these are the sentences of `text`: the spans [`crate::text::sentence_spans`]
    /// makes of it (an index written for another text, or by another splitter, is not used).
    pub fn fits(&self, text: &str) -> bool {
        let spans = crate::text::sentence_spans(text);
        spans.len() == self.sentences.len()
            && spans.iter().zip(&self.sentences).all(|(&(a, b), s)| (a, b) == (s.start as usize, s.end as usize))
    }

    /// The text of sentence `i` of `text`.
    pub fn text<'a>(&self, text: &'a str, i: usize) -> &'a str {
        let s = &self.sentences[i];
        text.get(s.start as usize..s.end as usize).unwrap_or("")
    }
}

impl Sentence {
    /// The cosine of this sentence to the unit vector `q`.
    pub fn cosine(&self, q: &[f32]) -> f32 {
        let dot: f32 = self.vector.values.iter().zip(q).map(|(&a, &b)| a as f32 * b).sum::<f32>() * self.vector.scale;
        let norm = self.vector.values.iter().map(|&a| (a as f32).powi(2)).sum::<f32>().sqrt() * self.vector.scale;
        if norm > 0.0 {
            dot / norm
        } else {
            0.0
        }
    }
}
