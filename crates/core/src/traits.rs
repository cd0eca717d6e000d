use crate::{
    Chunk, ChunkId, ContextBlock, DocumentId, DocumentSummary, EmbeddedChunk, LexicalRequest, Pointer, Replaced,
    Result, Retention, SearchOutcome, SearchRequest, SessionId, SessionState, Trace, TurnCommit,
};

/// Stores chunks with their vectors and searches them with grouping and exclusion applied
/// inside the search.
///
/// Contract (checked by the conformance suite):
/// - `search` never returns a chunk that `request.exclusion` excludes, and excluded chunks
///   never take a result slot: with grouping, `limit` documents come back whenever that many
///   non-excluded documents exist.
/// - With grouping, no document holds more than its quota of hits.
/// - Hits are sorted by score, best first; ties keep a deterministic order.
/// - `upsert` is atomic and idempotent: after an error nothing of the batch is visible.
pub trait VectorStore: Send + Sync {
    /// Length of the vectors the store holds; every vector given to it must have it.
    fn dimension(&self) -> usize;
    /// Insert or replace chunks by id. Returns how many ids were new.
    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize>;
    /// Replaces whole documents: afterwards each of `documents` holds exactly its chunks
    /// among `chunks` — a chunk id no longer given is removed, a document given no chunks is
    /// deleted. Every chunk must belong to one of `documents`. Atomic like `upsert` where
    /// the backend has transactions; otherwise the new chunks are written before the stale
    /// ones are removed, so a crash leaves extra chunks (removed by a re-run), never a hole.
    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced>;
    /// Every stored document, by id.
    fn documents(&self) -> Result<Vec<DocumentSummary>>;
    /// The chunks nearest `request.vector` by cosine, under the contract above.
    fn search(&self, request: &SearchRequest) -> Result<SearchOutcome>;
    /// BM25 over titles and texts under the same contract as [`VectorStore::search`]
    /// (hits scored by BM25); `Ok(None)` where the backend has no lexical index, and the
    /// caller searches dense instead.
    fn search_lexical(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        let _ = request;
        Ok(None)
    }
    /// Why [`VectorStore::search_lexical`] answers `None` here, for the trace.
    fn lexical_missing(&self) -> String {
        "this backend has no lexical index".into()
    }
    /// Builds (or loads) the lexical index for the stored chunks now, so the first lexical
    /// search does not pay for it; the chunks it covers, `None` where there is none.
    fn prepare_lexical(&self) -> Result<Option<usize>> {
        Ok(None)
    }
    /// Chunks by id, in the order asked; unknown ids are skipped.
    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>>;
    /// Stored vectors by chunk id, in the order asked; `None` for unknown ids.
    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>>;
    /// The sentence index of chunks by id (DESIGN §11), in the order asked; `None` for an
    /// unknown id or a chunk stored without one (ingested before it, or by a backend that
    /// keeps none: a turn then keeps its blocks whole).
    fn sentences(&self, ids: &[ChunkId]) -> Result<Vec<Option<crate::Sentences>>> {
        Ok(vec![None; ids.len()])
    }
    /// Chunks stored.
    fn len(&self) -> Result<usize>;
    /// Chunks stored for `tenant` (DESIGN §8). The default counts through
    /// [`VectorStore::documents`]; stores that know their tenants answer without a listing.
    fn tenant_len(&self, tenant: &str) -> Result<usize> {
        Ok(self
            .documents()?
            .iter()
            .filter(|d| crate::tenant_of(d.document_id.as_str()) == tenant)
            .map(|d| d.chunks)
            .sum())
    }
    /// Whether the store holds no chunk.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// Remembers sessions and their traces.
///
/// `commit_turn` is atomic and conditional: the turn record, the window trim, new markers,
/// the TTL refresh and the trace are all written, and the version bumped, only if the
/// session is still at `commit.read_version`; otherwise nothing is written and the call
/// fails with [`crate::Error::Conflict`]. Of two commits planned against one version
/// exactly one lands; the other turn re-plans against the new state. So the markers and
/// exclusions a turn computed are exactly what is stored.
pub trait SessionStore: Send + Sync {
    /// The session's state; `None` when it never existed or expired.
    fn load(&self, id: &SessionId) -> Result<Option<SessionState>>;
    /// Appends a turn; returns its number (1-based).
    fn commit_turn(&self, id: &SessionId, commit: TurnCommit, retention: Retention) -> Result<u64>;
    /// All stored traces of a session, oldest first.
    fn traces(&self, id: &SessionId) -> Result<Vec<Trace>>;
    /// Forgets what the session has seen (turns and markers); traces stay. False if unknown.
    fn reset(&self, id: &SessionId) -> Result<bool>;
    /// Removes the session and its traces. False if unknown.
    fn delete(&self, id: &SessionId) -> Result<bool>;
    /// Makes the turns of session `id` wait for each other across every process that shares
    /// this store, waiting at most `wait` for the turn before: `Some(lease)`, held until
    /// dropped; `None` where the store has no such lock, or the wait ran out (the version
    /// check of [`SessionStore::commit_turn`] keeps turns race-free either way; the lease only
    /// spares them planning again and again).
    fn lease_turns(&self, id: &SessionId, wait: std::time::Duration) -> Result<Option<TurnLease>> {
        let _ = (id, wait);
        Ok(None)
    }
}

/// A session's turn lease ([`SessionStore::lease_turns`]): the next turn goes when it drops.
pub type TurnLease = Box<dyn Send>;

/// A passage's vector and one vector per span of it asked ([`Embedder::embed_spans`]).
pub type SpanVectors = (Vec<f32>, Vec<Vec<f32>>);

/// Turns text into L2-normalised vectors.
pub trait Embedder: Send + Sync {
    /// Length of the vectors it returns.
    fn dimension(&self) -> usize;
    /// A stable name of the model and of everything that changes its vectors (provider,
    /// prefixes, sequence length), used to key embedding caches and to refuse mixing two
    /// models' vectors in one store.
    fn model_id(&self) -> &str;
    /// Embeds passages: what is stored and searched.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
    /// Embeds search queries. Models trained with a query/passage distinction (e5's
    /// `query: ` / `passage: `, bge's instruction) embed the two differently; for the others
    /// this is [`Embedder::embed`].
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed(texts)
    }
    /// Embeds passages as [`Embedder::embed`] does and, for each, the byte spans of it given
    /// (its sentences): one vector per span. A model run in process pools each span from the
    /// passage's own encoding (one pass, each sentence read in its passage's context); the
    /// default embeds the spans' texts alone.
    fn embed_spans(&self, texts: &[&str], spans: &[Vec<(usize, usize)>]) -> Result<Vec<SpanVectors>> {
        let whole = self.embed(texts)?;
        let parts: Vec<&str> =
            texts.iter().zip(spans).flat_map(|(t, s)| s.iter().map(move |&(a, b)| t.get(a..b).unwrap_or(""))).collect();
        let mut parts = self.embed(&parts)?.into_iter();
        Ok(whole.into_iter().zip(spans).map(|(v, s)| (v, parts.by_ref().take(s.len()).collect())).collect())
    }
}

/// Embeddings already computed, by model and text (a data dir's cache): an ingest embeds only
/// what it lacks.
pub trait EmbeddingCache: Send + Sync {
    /// The cached vector of each text for `model_id`, `None` where there is none.
    fn get(&self, model_id: &str, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>>;
    /// Keeps these vectors for `model_id`.
    fn put(&self, model_id: &str, items: &[(&str, &[f32])]) -> Result<()>;
    /// Where the cache is, for messages.
    fn place(&self) -> String;
}

/// Counts tokens the way the model will.
pub trait TokenCounter: Send + Sync {
    /// The tokenizer's name, recorded in traces; token counts taken at ingest are reused only when
    /// it is [`crate::CHUNK_TOKENIZER`].
    fn name(&self) -> &str;
    /// Tokens of `text`.
    fn count(&self, text: &str) -> usize;
}

/// What a condenser is given.
#[derive(Clone, Copy, Debug)]
pub struct CondenseRequest<'a> {
    /// The conversation before the question, oldest first, on one line:
    /// `User: … Assistant: … User: …`.
    pub conversation: &'a str,
    /// The question to rewrite.
    pub question: &'a str,
}

/// Rewrites a question that leans on the conversation ("and the fees?") into a standalone
/// search query: an LLM behind a chat endpoint (`condense openai`).
pub trait Condenser: Send + Sync {
    /// The model's name, recorded in traces.
    fn name(&self) -> &str;
    /// The model's answer, as written (the engine checks it is a query).
    fn condense(&self, request: &CondenseRequest<'_>) -> Result<String>;
}

/// Scores passages against a query with a cross-encoder or any model behind a rerank
/// endpoint (`rerank remote`): one score per text, in the texts' order, higher is better.
pub trait Reranker: Send + Sync {
    /// The model's name (or the endpoint's URL), recorded in traces.
    fn name(&self) -> &str;
    /// One score per text of `texts`, in their order; an answer that leaves a text out is
    /// an error.
    fn rerank(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>>;
}

/// What a generator is given.
#[derive(Clone, Debug)]
pub struct GenerationRequest<'a> {
    /// The question to answer (for a reshow, the earlier question it shows again).
    pub question: &'a str,
    /// The context blocks, in prompt order, citable by their markers.
    pub blocks: &'a [ContextBlock],
    /// `client` memory: sources the model already holds, citable by marker.
    pub pointers: &'a [Pointer],
    /// The full prompt (instructions, conversation, pointers, context, question) as it is
    /// sent to a model.
    pub prompt: &'a str,
}

/// Writes an answer that cites context blocks as `[n]`.
pub trait Generator: Send + Sync {
    /// A short name of the generator (`extractive`, `openai`).
    fn name(&self) -> &str;
    /// The whole answer to `request`, citing its blocks and pointers as `[n]`.
    fn generate(&self, request: &GenerationRequest<'_>) -> Result<String>;
    /// [`Generator::generate`], handing each piece of the answer to `on_delta` as the model
    /// produces it; returns the whole answer. Generators that cannot stream hand over the
    /// whole answer at once.
    fn generate_streaming(&self, request: &GenerationRequest<'_>, on_delta: &(dyn Fn(&str) + Sync)) -> Result<String> {
        let answer = self.generate(request)?;
        on_delta(&answer);
        Ok(answer)
    }
}
