use crate::bert::{cpu, mean_pool_normalised, Bert, BertConfig};
use candle_core::{DType, Tensor};
use candle_nn::VarBuilder;
use ragctx_core::{Embedder, Error, Result};
use std::path::{Path, PathBuf};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Tokens per text, as sentence-transformers uses for this model (its `max_seq_length`).
pub const MAX_TOKENS: usize = 256;
/// Texts per forward pass when embedding many (override: `RAGCTX_EMBED_BATCH`).
pub const BATCH: usize = 8;

fn batch_size() -> usize {
    std::env::var("RAGCTX_EMBED_BATCH").ok().and_then(|v| v.parse().ok()).filter(|&b| b > 0).unwrap_or(BATCH)
}

/// all-MiniLM-L6-v2 run in process: mean pooling over the attention mask, L2-normalised,
/// 384 dimensions.
pub struct MiniLmEmbedder {
    model: Bert,
    tokenizer: Tokenizer,
    dim: usize,
    model_id: String,
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
        // SAFETY: the weights file is memory-mapped read-only; ragctx never writes to it and
        // the setup script replaces the model directory only by an atomic rename.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &cpu()) }
            .map_err(|e| model_err("model.safetensors", &e))?;
        let model = Bert::load(vb, &cfg).map_err(|e| model_err("model.safetensors", &e))?;
        let mut tokenizer = Tokenizer::from_file(&tok).map_err(|e| model_err("tokenizer.json", &e))?;
        // The shipped tokenizer.json pads and truncates at 128; sentence-transformers pads
        // dynamically and truncates at 256.
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| model_err("tokenizer.json", &e))?;
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(MiniLmEmbedder { model, tokenizer, dim: cfg.hidden_size, model_id: format!("{name}/{MAX_TOKENS}/mean/l2") })
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let err = |e: &dyn std::fmt::Display| Error::Model(format!("embedding failed: {e}"));
        let enc = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| err(&e))?;
        let t = enc.first().map_or(0, |e| e.get_ids().len());
        let flat = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            enc.iter().flat_map(|e| f(e).iter().copied()).collect()
        };
        let shape = (enc.len(), t);
        let dev = cpu();
        let tensor = |v: Vec<u32>| Tensor::from_vec(v, shape, &dev).map_err(|e| err(&e));
        let ids = tensor(flat(&|e| e.get_ids()))?;
        let types = tensor(flat(&|e| e.get_type_ids()))?;
        let mask = tensor(flat(&|e| e.get_attention_mask()))?;
        let hidden = self.model.forward(&ids, &types, &mask).map_err(|e| err(&e))?;
        let pooled = mean_pool_normalised(&hidden, &mask).map_err(|e| err(&e))?;
        pooled.to_vec2::<f32>().map_err(|e| err(&e))
    }
}

impl Embedder for MiniLmEmbedder {
    fn dimension(&self) -> usize {
        self.dim
    }
    fn model_id(&self) -> &str {
        &self.model_id
    }
    /// Embeds in batches of similar length (less padding), returning vectors in input order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        let mut out = vec![Vec::new(); texts.len()];
        for group in order.chunks(batch_size()) {
            let batch: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            for (&i, v) in group.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}
