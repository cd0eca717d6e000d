//! A BERT encoder (the architecture of all-MiniLM-L6-v2) on candle, inference only.

use candle_core::{DType, Device, Module, Result, Tensor, D};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};

#[derive(Clone, Debug, serde::Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub hidden_act: Option<String>,
}

fn default_eps() -> f64 {
    1e-12
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

pub struct Bert {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
}

impl Bert {
    pub fn load(vb: VarBuilder<'_>, cfg: &BertConfig) -> Result<Self> {
        let h = cfg.hidden_size;
        let e = vb.pp("embeddings");
        let ln = |vb: VarBuilder<'_>| layer_norm(h, cfg.layer_norm_eps, vb);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let att = l.pp("attention");
            layers.push(Layer {
                query: linear(h, h, att.pp("self.query"))?,
                key: linear(h, h, att.pp("self.key"))?,
                value: linear(h, h, att.pp("self.value"))?,
                attention_out: linear(h, h, att.pp("output.dense"))?,
                attention_norm: ln(att.pp("output.LayerNorm"))?,
                intermediate: linear(h, cfg.intermediate_size, l.pp("intermediate.dense"))?,
                output: linear(cfg.intermediate_size, h, l.pp("output.dense"))?,
                output_norm: ln(l.pp("output.LayerNorm"))?,
            });
        }
        Ok(Bert {
            words: embedding(cfg.vocab_size, h, e.pp("word_embeddings"))?,
            positions: embedding(cfg.max_position_embeddings, h, e.pp("position_embeddings"))?,
            token_types: embedding(cfg.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            embedding_norm: ln(e.pp("LayerNorm"))?,
            layers,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
        })
    }

    /// Hidden states `[batch, tokens, hidden]` for ids, token types and attention mask
    /// (all `[batch, tokens]`, u32).
    pub fn forward(&self, ids: &Tensor, types: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let pos = Tensor::arange(0u32, t as u32, ids.device())?.unsqueeze(0)?.broadcast_as((b, t))?;
        let x = (self.words.forward(ids)? + self.positions.forward(&pos)?)?;
        let x = (x + self.token_types.forward(types)?)?;
        let mut x = self.embedding_norm.forward(&x)?;
        // Additive mask: 0 where attended, a large negative number on padding.
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((b, 1, 1, t))?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        for l in &self.layers {
            let split = |y: Tensor| -> Result<Tensor> {
                y.reshape((b, t, self.heads, self.head_dim))?.transpose(1, 2)?.contiguous()
            };
            let q = split(l.query.forward(&x)?)?;
            let k = split(l.key.forward(&x)?)?;
            let v = split(l.value.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, t, self.heads * self.head_dim))?;
            x = l.attention_norm.forward(&(l.attention_out.forward(&ctx)? + &x)?)?;
            let inner = l.intermediate.forward(&x)?.gelu_erf()?;
            x = l.output_norm.forward(&(l.output.forward(&inner)? + &x)?)?;
        }
        Ok(x)
    }
}

/// Mean of the hidden states over attended tokens, then L2-normalised: `[batch, hidden]`.
pub fn mean_pool_normalised(hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&m)?.sum(1)?;
    let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
    let mean = summed.broadcast_div(&counts)?;
    let norm = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    mean.broadcast_div(&norm)
}

pub fn cpu() -> Device {
    Device::Cpu
}
