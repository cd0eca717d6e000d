//! The evaluation's query embeddings, remembered across strategies, and its own `weighted`
//! query (a mix of the question's and the earlier user turns' embeddings).

use ragctx_core::Embedder;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Weights of the current question and the user turns before it in the eval's own
/// `weighted` query (a fixed mix kept for comparison; the engine's `conversation_query`
/// weights are `QueryWeights`, fitted into `crates/engine/query-weights.json`).
pub const WEIGHTED_QUERY: [f32; 3] = [1.0, 0.5, 0.25];

/// Remembers query embeddings: every strategy asks the same questions.
pub struct MemoEmbedder {
    /// The embedder asked for what the memo lacks, and for every passage.
    pub inner: Arc<dyn Embedder>,
    /// Query vectors by text, and the mixes of [`MemoEmbedder::mix`] by their key.
    pub memo: Mutex<HashMap<String, Vec<f32>>>,
    /// Sentences embedded alone as passages ([`MemoEmbedder::passages`]), by text.
    pub passages: Mutex<HashMap<String, Vec<f32>>>,
}

/// The vectors of `texts` from `memo`, embedding with `embed` (once, each distinct text
/// once) those it lacks.
fn remembered(
    memo: &Mutex<HashMap<String, Vec<f32>>>,
    texts: &[&str],
    embed: impl Fn(&[&str]) -> ragctx_core::Result<Vec<Vec<f32>>>,
) -> ragctx_core::Result<Vec<Vec<f32>>> {
    let mut missing: Vec<&str> = {
        let memo = memo.lock().expect("memo");
        texts.iter().copied().filter(|t| !memo.contains_key(*t)).collect()
    };
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        let v = embed(&missing)?;
        let mut memo = memo.lock().expect("memo");
        for (t, v) in missing.into_iter().zip(v) {
            memo.insert(t.to_owned(), v);
        }
    }
    let memo = memo.lock().expect("memo");
    Ok(texts.iter().map(|t| memo[*t].clone()).collect())
}

impl MemoEmbedder {
    /// Texts embedded alone as passages, each distinct one once per run (the sentences
    /// `semantic_support` compares).
    pub fn passages(&self, texts: &[&str]) -> ragctx_core::Result<Vec<Vec<f32>>> {
        remembered(&self.passages, texts, |t| self.inner.embed(t))
    }

    /// Remembers under `key` the normalised weighted sum of the embeddings of `turns`
    /// (current question first), so the engine's embed of `key` returns the mix.
    pub fn mix(&self, key: &str, turns: &[&str]) -> ragctx_core::Result<()> {
        let mut vectors = self.embed_queries(turns)?;
        let question = vectors.remove(0);
        let mix = ragctx_engine::mix_vectors(&question, &vectors, &WEIGHTED_QUERY);
        self.memo.lock().expect("memo").insert(key.to_owned(), mix);
        Ok(())
    }
}

impl Embedder for MemoEmbedder {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn embed(&self, texts: &[&str]) -> ragctx_core::Result<Vec<Vec<f32>>> {
        self.inner.embed(texts)
    }
    fn embed_spans(
        &self,
        texts: &[&str],
        spans: &[Vec<(usize, usize)>],
    ) -> ragctx_core::Result<Vec<ragctx_core::SpanVectors>> {
        self.inner.embed_spans(texts, spans)
    }
    fn embed_queries(&self, texts: &[&str]) -> ragctx_core::Result<Vec<Vec<f32>>> {
        remembered(&self.memo, texts, |t| self.inner.embed_queries(t))
    }
}
