use crate::bert::{Bert, BertConfig, Scratch, Sequence};
use ragctx_core::{Embedder, Error, Result};
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationParams};

/// Tokens per text when the model directory does not say (`sentence_bert_config.json`'s
/// `max_seq_length`; 256 for all-MiniLM-L6-v2).
pub const MAX_TOKENS: usize = 256;
/// Tokens per forward pass when embedding many texts: the texts of a batch are packed
/// into one matrix, so this bounds the batch's memory, not its padding.
pub const BATCH_TOKENS: usize = 4_096;

/// Worker threads for embedding many texts: `RAGCTX_EMBED_THREADS`, else every core.
fn threads() -> usize {
    std::env::var("RAGCTX_EMBED_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// all-MiniLM-L6-v2 run in process: mean pooling over the attention mask, L2-normalised,
/// 384 dimensions.
pub struct MiniLmEmbedder {
    model: Bert,
    tokenizer: Tokenizer,
    dim: usize,
    /// The model without prefixes: directory name, sequence length, pooling, normalisation.
    base_id: String,
    model_id: String,
    prefixes: Prefixes,
    precision: Precision,
}

/// What the encoder's dense layers compute in: `f32` (the default), or int8 weights and
/// activations with exact integer sums (about twice as fast; vectors differ slightly, so the
/// model id says which, and cached vectors of one are never used for the other).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    #[default]
    F32,
    Int8,
}

impl std::str::FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fp32" | "f32" => Ok(Precision::F32),
            "int8" => Ok(Precision::Int8),
            other => Err(Error::InvalidInput(format!("embedder precision {other:?}: expected fp32 or int8"))),
        }
    }
}

impl Precision {
    /// What the precision adds to a model id (nothing for `f32`, so ids stay as they were).
    fn id_suffix(self) -> &'static str {
        match self {
            Precision::F32 => "",
            Precision::Int8 => "/int8",
        }
    }
}

/// Text put before each query and each passage before embedding, for models trained with
/// them (e5: `query: ` / `passage: `; bge: an instruction before queries only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prefixes {
    pub query: String,
    pub passage: String,
}

impl Prefixes {
    /// `texts` with `prefix` before each, borrowed as they are when there is none.
    pub fn apply<'a>(prefix: &str, texts: &[&'a str]) -> Vec<std::borrow::Cow<'a, str>> {
        texts.iter().map(|&t| if prefix.is_empty() { t.into() } else { format!("{prefix}{t}").into() }).collect()
    }

    /// What the prefixes add to a model id (nothing when there are none, so ids of models
    /// run without prefixes stay as they were).
    pub fn id_suffix(&self) -> String {
        if self.query.is_empty() && self.passage.is_empty() {
            String::new()
        } else {
            format!("/q={:?}/p={:?}", self.query, self.passage)
        }
    }
}

/// The embedding dimension of the model in `dir`, from its `config.json` alone (for
/// commands that open a vector store without embedding anything).
pub fn model_dimension(dir: &Path) -> Result<usize> {
    let config = dir.join("config.json");
    let bytes = std::fs::read(&config).map_err(|_| Error::ModelMissing { path: dir.display().to_string() })?;
    let cfg: BertConfig =
        serde_json::from_slice(&bytes).map_err(|e| Error::Model(format!("config.json in {}: {e}", dir.display())))?;
    Ok(cfg.hidden_size)
}

impl MiniLmEmbedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `dir`. A missing
    /// directory or file is [`Error::ModelMissing`], whose message names the setup command.
    pub fn load(dir: &Path) -> Result<Self> {
        let file = |name: &str| -> Result<PathBuf> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(Error::ModelMissing { path: dir.display().to_string() })
            }
        };
        let (weights, tok, config) = (file("model.safetensors")?, file("tokenizer.json")?, file("config.json")?);
        let model_err =
            |what: &str, e: &dyn std::fmt::Display| Error::Model(format!("{what} in {}: {e}", dir.display()));
        let cfg: BertConfig =
            serde_json::from_slice(&std::fs::read(&config).map_err(|e| model_err("config.json", &e))?)
                .map_err(|e| model_err("config.json", &e))?;
        if cfg.hidden_act.as_deref().is_some_and(|a| a != "gelu") {
            return Err(model_err("config.json", &"only the gelu activation is supported"));
        }
        let max_tokens = sentence_transformers_layout(dir, cfg.hidden_size)?;
        let file = std::fs::File::open(&weights).map_err(|e| model_err("model.safetensors", &e))?;
        // SAFETY: the weights file is mapped read-only and copied into the model before the
        // map is dropped; ragctx never writes to it and the setup script replaces the model
        // directory only by an atomic rename.
        let bytes = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| model_err("model.safetensors", &e))?;
        let model = Bert::load(&bytes, &cfg).map_err(|e| model_err("model.safetensors", &e))?;
        let mut tokenizer = Tokenizer::from_file(&tok).map_err(|e| model_err("tokenizer.json", &e))?;
        // The shipped tokenizer.json pads and truncates at 128; sentence-transformers
        // truncates at 256 (and the encoder needs no padding).
        tokenizer.with_padding(None);
        let max = max_tokens.min(model.max_positions());
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max, ..Default::default() }))
            .map_err(|e| model_err("tokenizer.json", &e))?;
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(MiniLmEmbedder {
            model,
            tokenizer,
            dim: cfg.hidden_size,
            base_id: format!("{name}/{max_tokens}/mean/l2"),
            model_id: format!("{name}/{max_tokens}/mean/l2"),
            prefixes: Prefixes::default(),
            precision: Precision::F32,
        })
    }

    /// Puts `prefixes` before queries and passages from now on (the model id says so).
    pub fn with_prefixes(mut self, prefixes: Prefixes) -> Self {
        self.prefixes = prefixes;
        self.set_id();
        self
    }

    /// Computes in `precision` from now on (the model id says so). Once int8, always int8:
    /// the `f32` weights are gone.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        if precision == Precision::Int8 && self.precision == Precision::F32 {
            self.model.quantise(crate::int8::Kernel::detect());
            self.precision = Precision::Int8;
        }
        self.set_id();
        self
    }

    fn set_id(&mut self) {
        self.model_id = format!("{}{}{}", self.base_id, self.precision.id_suffix(), self.prefixes.id_suffix());
    }

    /// Tokens the encoder sees for each text (special tokens included, after truncation).
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>> {
        Ok(self.tokenize(texts)?.iter().map(|e| e.get_ids().len()).collect())
    }

    /// Tokenised texts, in input order.
    fn tokenize(&self, texts: &[&str]) -> Result<Vec<tokenizers::Encoding>> {
        let enc = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| embed_err(&e))?;
        if let Some(i) = enc.iter().position(|e| e.get_ids().is_empty()) {
            return Err(Error::Model(format!("text {i} has no tokens")));
        }
        Ok(enc)
    }
}

/// Checks what the model directory's sentence-transformers files say against what this
/// encoder runs — a BERT transformer, mean pooling over the attention mask, L2 normalisation
/// — and returns the sequence length to truncate at (`sentence_bert_config.json`'s
/// `max_seq_length`, else [`MAX_TOKENS`]). A model described otherwise (CLS or max pooling,
/// no normalisation, extra modules such as a dense projection) is refused: run with this
/// encoder it would give other vectors than sentence-transformers, without any error.
/// Files that are absent are not checked (a bare BERT directory is taken as mean + L2).
fn sentence_transformers_layout(dir: &Path, hidden: usize) -> Result<usize> {
    let refuse = |file: &str, why: String| {
        Error::Model(format!(
            "{file} in {}: {why}; ragctx's in-process encoder runs BERT models with mean pooling and L2 \
             normalisation only",
            dir.display()
        ))
    };
    let read = |file: &str| -> Result<Option<serde_json::Value>> {
        match std::fs::read(dir.join(file)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| refuse(file, e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(refuse(file, e.to_string())),
        }
    };
    if let Some(modules) = read("modules.json")? {
        let kinds: Vec<&str> = modules
            .as_array()
            .ok_or_else(|| refuse("modules.json", "not a list".into()))?
            .iter()
            .map(|m| m["type"].as_str().unwrap_or("").rsplit('.').next().unwrap_or(""))
            .collect();
        if kinds != ["Transformer", "Pooling", "Normalize"] {
            return Err(refuse("modules.json", format!("modules {kinds:?}, expected Transformer, Pooling, Normalize")));
        }
    }
    if let Some(pooling) = read("1_Pooling/config.json")? {
        let on = |k: &str| pooling[k].as_bool().unwrap_or(false);
        let modes = ["pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens"];
        if !on("pooling_mode_mean_tokens") || modes.iter().any(|m| on(m)) {
            return Err(refuse("1_Pooling/config.json", format!("pooling {pooling}, expected mean tokens only")));
        }
        if pooling["word_embedding_dimension"].as_u64().is_some_and(|d| d as usize != hidden) {
            return Err(refuse("1_Pooling/config.json", format!("dimension differs from config.json's {hidden}")));
        }
    }
    match read("sentence_bert_config.json")? {
        Some(st) => match st.get("max_seq_length") {
            None => Ok(MAX_TOKENS),
            Some(v) => v
                .as_u64()
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| refuse("sentence_bert_config.json", format!("max_seq_length {v}"))),
        },
        None => Ok(MAX_TOKENS),
    }
}

fn embed_err(e: &dyn std::fmt::Display) -> Error {
    Error::Model(format!("embedding failed: {e}"))
}

impl Embedder for MiniLmEmbedder {
    fn dimension(&self) -> usize {
        self.dim
    }
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let texts = Prefixes::apply(&self.prefixes.passage, texts);
        self.encode(&texts.iter().map(|t| t.as_ref()).collect::<Vec<_>>())
    }
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let texts = Prefixes::apply(&self.prefixes.query, texts);
        self.encode(&texts.iter().map(|t| t.as_ref()).collect::<Vec<_>>())
    }
    /// Each span pooled from its passage's encoding (the tokens wholly inside it); a span
    /// that runs past what the encoding read (the passage's truncation cuts or leaves it out),
    /// or holds no whole token, is embedded alone.
    fn embed_spans(&self, texts: &[&str], spans: &[Vec<(usize, usize)>]) -> Result<Vec<ragctx_core::SpanVectors>> {
        let prefix = self.prefixes.passage.len();
        let prefixed = Prefixes::apply(&self.prefixes.passage, texts);
        let (whole, parts) =
            self.encode_spans(&prefixed.iter().map(|t| t.as_ref()).collect::<Vec<_>>(), |enc, i| {
                let offsets = enc.get_offsets();
                let special = enc.get_special_tokens_mask();
                // Where the encoding's text ends (short of the passage's end when truncated).
                let read_to = (0..offsets.len()).filter(|&k| special[k] == 0).map(|k| offsets[k].1).max().unwrap_or(0);
                spans[i]
                    .iter()
                    .map(|&(a, b)| {
                        let (a, b) = (a + prefix, b + prefix);
                        if read_to < b {
                            return (0, 0);
                        }
                        let inside = |k: usize| special[k] == 0 && offsets[k].0 >= a && offsets[k].1 <= b;
                        let first = (0..offsets.len()).find(|&k| inside(k));
                        first.map_or((0, 0), |f| {
                            (f, (f..offsets.len()).take_while(|&k| inside(k)).last().unwrap_or(f) + 1)
                        })
                    })
                    .collect()
            })?;
        // Spans with no token of their own in the encoding: embedded alone.
        let alone: Vec<(usize, usize)> = parts
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.iter().enumerate().filter(|(_, v)| v.is_none()).map(move |(j, _)| (i, j)))
            .collect();
        let texts_alone: Vec<&str> =
            alone.iter().map(|&(i, j)| texts[i].get(spans[i][j].0..spans[i][j].1).unwrap_or(" ")).collect();
        let mut filled = if texts_alone.is_empty() { Vec::new() } else { self.embed(&texts_alone)? }.into_iter();
        let mut parts = parts;
        for &(i, j) in &alone {
            parts[i][j] = filled.next();
        }
        Ok(whole
            .into_iter()
            .zip(parts)
            .map(|(w, p)| (w, p.into_iter().map(Option::unwrap_or_default).collect()))
            .collect())
    }
}

impl MiniLmEmbedder {
    /// Packs the texts into batches of at most [`BATCH_TOKENS`] tokens (longest first) and
    /// encodes the batches on [`threads`] workers; vectors come back in input order.
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(self.encode_spans(texts, |_, _| Vec::new())?.0)
    }

    /// [`Self::encode`], and per text the mean of each of the token ranges `ranges` names
    /// for its encoding (`None` for an empty range).
    #[allow(clippy::type_complexity)]
    fn encode_spans(
        &self,
        texts: &[&str],
        ranges: impl Fn(&tokenizers::Encoding, usize) -> Vec<(usize, usize)> + Sync,
    ) -> Result<(Vec<Vec<f32>>, Vec<Vec<Option<Vec<f32>>>>)> {
        let enc = self.tokenize(texts)?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(enc[i].get_ids().len()));
        let mut batches: Vec<Vec<usize>> = Vec::new();
        let mut tokens = 0;
        for i in order {
            let len = enc[i].get_ids().len();
            match batches.last_mut() {
                Some(b) if tokens + len <= BATCH_TOKENS => b.push(i),
                _ => {
                    batches.push(vec![i]);
                    tokens = 0;
                }
            }
            tokens += len;
        }
        let encoded = crate::workers::in_parallel(batches.len(), threads(), Scratch::default, |scratch, b| {
            let seqs: Vec<Sequence<'_>> =
                batches[b].iter().map(|&i| Sequence { ids: enc[i].get_ids(), types: enc[i].get_type_ids() }).collect();
            // The whole sequence first (its mean over every token, as sentence-transformers
            // pools it), then the asked ranges.
            let pools: Vec<Vec<(usize, usize)>> = batches[b]
                .iter()
                .map(|&i| std::iter::once((0, enc[i].get_ids().len())).chain(ranges(&enc[i], i)).collect())
                .collect();
            self.model.encode_pooled(&seqs, &pools, scratch).map_err(|e| embed_err(&e))
        })?;
        let mut out = vec![Vec::new(); texts.len()];
        let mut parts = vec![Vec::new(); texts.len()];
        for (batch, vectors) in batches.iter().zip(encoded) {
            for (&i, mut v) in batch.iter().zip(vectors) {
                out[i] = v.remove(0).unwrap_or_default();
                parts[i] = v;
            }
        }
        Ok((out, parts))
    }
}
