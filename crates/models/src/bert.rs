//! A BERT encoder (the architecture of all-MiniLM-L6-v2), inference only, on packed
//! sequences: the tokens of every text in a batch are rows of one matrix, so the dense
//! layers are a single matrix product each and no work is spent on padding; attention runs
//! per text and head. Matrix products by `gemm` on one thread (callers run batches on
//! several threads); GELU and softmax (`ops.rs`) use vectorisable `erf`/`exp` approximations accurate
//! to a few units in the last place of `f32`.

use crate::int8::{Kernel, QLinear, QScratch};
use crate::ops::{gelu, layer_norm, softmax_rows, Norm};
use safetensors::{Dtype, SafeTensors};

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

/// `y = x·Wᵀ + b` with `W` stored `[outputs, inputs]`, row-major (PyTorch's layout, which
/// gemm packs by reading rows front to back).
struct Linear {
    w: Vec<f32>,
    b: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

/// A dense layer in `f32`, or quantised to int8 ([`Bert::quantise`]).
enum Dense {
    F32(Linear),
    Int8(QLinear),
}

impl Dense {
    fn apply(&self, x: &[f32], rows: usize, residual: Option<&[f32]>, out: &mut Vec<f32>, q: &mut QScratch) {
        match self {
            Dense::F32(l) => l.apply(x, rows, residual, out),
            Dense::Int8(l) => l.apply(x, rows, residual, out, q),
        }
    }

    fn quantise(&mut self, kernel: Kernel) {
        if let Dense::F32(l) = self {
            *self = Dense::Int8(QLinear::new(&l.w, &l.b, l.inputs, l.outputs, kernel));
        }
    }
}

struct Layer {
    /// Query, key and value side by side: `[hidden, 3 × hidden]`.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

pub struct Bert {
    words: Vec<f32>,
    positions: Vec<f32>,
    token_types: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    max_positions: usize,
    type_vocab: usize,
    vocab: usize,
    eps: f32,
}

/// One text to encode: token ids and token-type ids of equal length.
pub struct Sequence<'a> {
    pub ids: &'a [u32],
    pub types: &'a [u32],
}

/// Buffers reused across batches by one worker.
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    inner: Vec<f32>,
    scores: Vec<f32>,
    quantised: QScratch,
}

impl Bert {
    /// Reads the weights (`f32`) of a BERT checkpoint in safetensors format, names with or
    /// without a `bert.` prefix.
    pub fn load(bytes: &[u8], cfg: &BertConfig) -> Result<Self, String> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let prefix = if st.names().iter().any(|n| n.starts_with("bert.")) { "bert." } else { "" };
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, String> {
            let full = format!("{prefix}{name}");
            let t = st.tensor(&full).map_err(|_| format!("tensor {full} is missing"))?;
            if t.dtype() != Dtype::F32 {
                return Err(format!("tensor {full} is {:?}; only f32 weights are supported", t.dtype()));
            }
            if t.shape() != shape {
                return Err(format!("tensor {full} has shape {:?}, expected {shape:?}", t.shape()));
            }
            Ok(t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
        };
        let h = cfg.hidden_size;
        if cfg.num_attention_heads == 0 || !h.is_multiple_of(cfg.num_attention_heads) {
            return Err(format!("hidden size {h} is not a multiple of {} heads", cfg.num_attention_heads));
        }
        let norm = |name: &str| -> Result<Norm, String> {
            Ok(Norm { gain: get(&format!("{name}.weight"), &[h])?, bias: get(&format!("{name}.bias"), &[h])? })
        };
        // Several layers of the same input (query, key, value) become one: their weight rows
        // one after another.
        let linear = |names: &[String], inputs: usize, outputs: usize| -> Result<Dense, String> {
            let total: usize = outputs * names.len();
            let (mut w, mut b) = (Vec::with_capacity(inputs * total), Vec::with_capacity(total));
            for name in names {
                w.extend(get(&format!("{name}.weight"), &[outputs, inputs])?);
                b.extend(get(&format!("{name}.bias"), &[outputs])?);
            }
            Ok(Dense::F32(Linear { w, b, inputs, outputs: total }))
        };
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = format!("encoder.layer.{i}");
            let att = format!("{l}.attention");
            let qkv: Vec<String> = ["query", "key", "value"].iter().map(|p| format!("{att}.self.{p}")).collect();
            layers.push(Layer {
                qkv: linear(&qkv, h, h)?,
                attention_out: linear(&[format!("{att}.output.dense")], h, h)?,
                attention_norm: norm(&format!("{att}.output.LayerNorm"))?,
                intermediate: linear(&[format!("{l}.intermediate.dense")], h, cfg.intermediate_size)?,
                output: linear(&[format!("{l}.output.dense")], cfg.intermediate_size, h)?,
                output_norm: norm(&format!("{l}.output.LayerNorm"))?,
            });
        }
        Ok(Bert {
            words: get("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?,
            positions: get("embeddings.position_embeddings.weight", &[cfg.max_position_embeddings, h])?,
            token_types: get("embeddings.token_type_embeddings.weight", &[cfg.type_vocab_size, h])?,
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
            hidden: h,
            heads: cfg.num_attention_heads,
            max_positions: cfg.max_position_embeddings,
            type_vocab: cfg.type_vocab_size,
            vocab: cfg.vocab_size,
            eps: cfg.layer_norm_eps as f32,
        })
    }

    /// Quantises every dense layer to int8 for `kernel` (attention products, embeddings,
    /// norms and activations stay `f32`).
    pub fn quantise(&mut self, kernel: Kernel) {
        for l in &mut self.layers {
            for d in [&mut l.qkv, &mut l.attention_out, &mut l.intermediate, &mut l.output] {
                d.quantise(kernel);
            }
        }
    }

    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Per sequence, the mean of the last hidden states over each of its token ranges,
    /// L2-normalised (`None` for an empty range): the whole range `(0, len)` is the sequence's
    /// embedding (mean pooling over the attention mask), a sentence's range pools it from its
    /// passage's own encoding ("late chunking"), one pass for the passage and its parts.
    /// Sequences must be non-empty and no longer than [`Bert::max_positions`].
    pub fn encode_pooled(
        &self,
        seqs: &[Sequence<'_>],
        ranges: &[Vec<(usize, usize)>],
        s: &mut Scratch,
    ) -> Result<Vec<Vec<Option<Vec<f32>>>>, String> {
        self.encode_hidden(seqs, s)?;
        let h = self.hidden;
        let mut out = Vec::with_capacity(seqs.len());
        let mut start = 0;
        for (q, ranges) in seqs.iter().zip(ranges) {
            let rows = &s.x[start * h..(start + q.ids.len()) * h];
            out.push(
                ranges
                    .iter()
                    .map(|&(a, b)| {
                        let b = b.min(q.ids.len());
                        if a >= b {
                            return None;
                        }
                        let mut mean = vec![0.0f32; h];
                        for row in rows[a * h..b * h].chunks_exact(h) {
                            for (m, v) in mean.iter_mut().zip(row) {
                                *m += v;
                            }
                        }
                        // The mean's direction is the sum's: normalising the sum is the same vector.
                        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                        Some(mean.iter().map(|v| v / norm).collect())
                    })
                    .collect(),
            );
            start += q.ids.len();
        }
        Ok(out)
    }

    /// The last hidden states of every token of `seqs`, one row after another, left in `s.x`.
    fn encode_hidden(&self, seqs: &[Sequence<'_>], s: &mut Scratch) -> Result<(), String> {
        let h = self.hidden;
        let n: usize = seqs.iter().map(|q| q.ids.len()).sum();
        // Every element of these buffers is written before it is read: only a longer buffer
        // needs filling first.
        let resize = |v: &mut Vec<f32>, len: usize| v.resize(len, 0.0);
        resize(&mut s.x, n * h);
        let mut row = 0;
        for q in seqs {
            if q.ids.is_empty() || q.ids.len() > self.max_positions || q.types.len() != q.ids.len() {
                return Err(format!("a sequence of {} tokens (1 to {} allowed)", q.ids.len(), self.max_positions));
            }
            for (p, (&id, &ty)) in q.ids.iter().zip(q.types).enumerate() {
                let (id, ty) = (id as usize, ty as usize);
                if id >= self.vocab || ty >= self.type_vocab {
                    return Err(format!("token id {id} or type {ty} outside the model's vocabulary"));
                }
                let out = &mut s.x[row * h..(row + 1) * h];
                let (w, pos, t) =
                    (&self.words[id * h..][..h], &self.positions[p * h..][..h], &self.token_types[ty * h..][..h]);
                for j in 0..h {
                    out[j] = w[j] + pos[j] + t[j];
                }
                row += 1;
            }
        }
        layer_norm(&mut s.x, &self.embedding_norm, self.eps);
        let dh = h / self.heads;
        let scale = 1.0 / (dh as f32).sqrt();
        for l in &self.layers {
            l.qkv.apply(&s.x, n, None, &mut s.qkv, &mut s.quantised);
            resize(&mut s.ctx, n * h);
            let mut start = 0;
            for q in seqs {
                let len = q.ids.len();
                s.scores.resize(len * len, 0.0);
                for head in 0..self.heads {
                    let base = start * 3 * h + head * dh;
                    // scores = scale · Q Kᵀ, then softmax by row, then ctx = scores · V.
                    // SAFETY: every matrix stays inside its buffer: rows start..start+len of
                    // `qkv` (this head's columns of Q, K and V), `scores` (len × len), and the
                    // same rows and head columns of `ctx`.
                    let qkv = s.qkv.as_ptr();
                    unsafe {
                        matmul(
                            (len, len, dh),
                            (s.scores.as_mut_ptr(), len, false),
                            (qkv.add(base), 3 * h as isize, 1),
                            (qkv.add(base + h), 1, 3 * h as isize),
                            scale,
                        );
                    }
                    softmax_rows(&mut s.scores, len);
                    unsafe {
                        matmul(
                            (len, dh, len),
                            (s.ctx.as_mut_ptr().add(start * h + head * dh), h, false),
                            (s.scores.as_ptr(), len as isize, 1),
                            (qkv.add(base + 2 * h), 3 * h as isize, 1),
                            1.0,
                        );
                    }
                }
                start += len;
            }
            l.attention_out.apply(&s.ctx, n, Some(&s.x), &mut s.tmp, &mut s.quantised);
            layer_norm(&mut s.tmp, &l.attention_norm, self.eps);
            std::mem::swap(&mut s.x, &mut s.tmp);
            l.intermediate.apply(&s.x, n, None, &mut s.inner, &mut s.quantised);
            gelu(&mut s.inner);
            l.output.apply(&s.inner, n, Some(&s.x), &mut s.tmp, &mut s.quantised);
            layer_norm(&mut s.tmp, &l.output_norm, self.eps);
            std::mem::swap(&mut s.x, &mut s.tmp);
        }
        Ok(())
    }
}

impl Linear {
    /// `out = x·W + b (+ residual)` for `rows` rows of `x`.
    fn apply(&self, x: &[f32], rows: usize, residual: Option<&[f32]>, out: &mut Vec<f32>) {
        assert_eq!(x.len(), rows * self.inputs, "input rows");
        out.clear();
        out.reserve(rows * self.outputs);
        for r in 0..rows {
            match residual {
                Some(res) => {
                    out.extend(self.b.iter().zip(&res[r * self.outputs..][..self.outputs]).map(|(b, x)| b + x))
                }
                None => out.extend_from_slice(&self.b),
            }
        }
        // SAFETY: out is rows × outputs and x rows × inputs, row-major; w is outputs × inputs
        // row-major, read as its transpose (row stride 1, column stride `inputs`).
        unsafe {
            matmul(
                (rows, self.outputs, self.inputs),
                (out.as_mut_ptr(), self.outputs, true),
                (x.as_ptr(), self.inputs as isize, 1),
                (self.w.as_ptr(), 1, self.inputs as isize),
                1.0,
            );
        }
    }
}

/// `dst = scale · lhs · rhs` (`dst += …` when `accumulate`) on one thread, for an `m × n`
/// destination with unit column stride and row stride `dst.1`; `lhs` (`m × k`) and `rhs`
/// (`k × n`) are given as (pointer, row stride, column stride).
///
/// # Safety
/// Every element the shapes and strides address must lie inside its allocation, and `dst`
/// must not overlap `lhs` or `rhs`.
unsafe fn matmul(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs, accumulate): (*mut f32, usize, bool),
    (lhs, lhs_rs, lhs_cs): (*const f32, isize, isize),
    (rhs, rhs_rs, rhs_cs): (*const f32, isize, isize),
    scale: f32,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs as isize,
            accumulate,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_layer_matches_a_plain_loop() {
        let (rows, inputs, outputs) = (5, 7, 3);
        let l = Linear {
            w: (0..inputs * outputs).map(|i| (i as f32 * 0.37).sin()).collect(),
            b: vec![0.5, -1.0, 2.0],
            inputs,
            outputs,
        };
        let x: Vec<f32> = (0..rows * inputs).map(|i| (i as f32 * 0.11).cos()).collect();
        let res: Vec<f32> = (0..rows * outputs).map(|i| i as f32).collect();
        let mut out = Vec::new();
        l.apply(&x, rows, Some(&res), &mut out);
        for r in 0..rows {
            for o in 0..outputs {
                let want = l.b[o]
                    + res[r * outputs + o]
                    + (0..inputs).map(|i| x[r * inputs + i] * l.w[o * inputs + i]).sum::<f32>();
                assert!((out[r * outputs + o] - want).abs() < 1e-5, "row {r} col {o}");
            }
        }
    }
}
