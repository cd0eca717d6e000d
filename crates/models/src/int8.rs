//! Int8 dense layers for the in-process encoder (opt-in: `embedder_precision = "int8"`).
//!
//! Weights are quantised once, per output channel and symmetric (`w ≈ s_o · q`, `q` in
//! −127..=127); activations per row and asymmetric (`x ≈ s_r · (u − z_r)`, `u` in 0..=255,
//! zero included in the range). Products are summed exactly in `i32`, so each kernel —
//! AVX-512 VNNI, AVX2, portable — gives the same bits (the rest of the encoder, attention
//! included, is the `f32` code both precisions share):
//!
//! `y[r][o] = s_r · s_o · (Σ_k u[r][k]·q[o][k] − z_r · Σ_k q[o][k]) + b[o] (+ residual)`.
//!
//! Weights are packed in panels of 16 outputs × 4 inputs (64 bytes, one `vpdpbusd` operand):
//! `[block of 16 outputs][group of 4 inputs][output][input]`, inputs padded with zeros to a
//! multiple of 4 and outputs to a multiple of [`PANEL`].

/// Outputs computed together by one pass over the inputs (four blocks of 16).
const PANEL: usize = 64;
/// Rows of activations per pass.
const ROWS: usize = 6;

/// The integer matrix product used; [`Kernel::detect`] picks the fastest the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kernel {
    Portable,
    /// 16-bit multiply-adds (`vpmaddwd`) on 8 lanes: exact, for CPUs without VNNI.
    Avx2,
    /// `vpdpbusd` on 16 lanes (AVX-512 VNNI).
    Vnni512,
}

impl Kernel {
    /// The fastest kernel this CPU runs; `RAGCTX_INT8_KERNEL=portable|avx2|vnni512` asks for
    /// a slower one (for benchmarks; a kernel the CPU lacks is not used).
    pub fn detect() -> Kernel {
        let best = Self::best();
        let wanted = match std::env::var("RAGCTX_INT8_KERNEL").as_deref() {
            Ok("portable") => Kernel::Portable,
            Ok("avx2") => Kernel::Avx2,
            // Anything else (unset, vnni512, a typo): the fastest.
            _ => best,
        };
        wanted.min(best)
    }

    fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
            {
                return Kernel::Vnni512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Kernel::Avx2;
            }
        }
        Kernel::Portable
    }
}

/// `y = x·Wᵀ + b` with `W` quantised to int8 (see the module documentation).
pub struct QLinear {
    /// The panels (see the module documentation).
    packed: Vec<i8>,
    kernel: Kernel,
    /// Σ_k q[o][k] per output (padded outputs: 0).
    colsum: Vec<i32>,
    /// s_o per output (padded outputs: 0).
    scale: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    /// Inputs rounded up to a multiple of 4.
    k_pad: usize,
    outputs: usize,
    /// Outputs rounded up to a multiple of [`PANEL`].
    o_pad: usize,
}

/// Activations of one product, quantised: reused across layers by one worker.
#[derive(Default)]
pub struct QScratch {
    u: Vec<u8>,
    /// `u` widened to `i16`, for the AVX2 kernel.
    wide: Vec<i16>,
    row_scale: Vec<f32>,
    row_zero: Vec<i32>,
}

impl QLinear {
    /// Quantises `w` (`outputs × inputs`, row-major) for `kernel`, or for the fastest
    /// kernel this CPU runs when it lacks `kernel`'s features.
    pub fn new(w: &[f32], b: &[f32], inputs: usize, outputs: usize, kernel: Kernel) -> QLinear {
        let kernel = kernel.min(Kernel::best());
        assert_eq!(w.len(), inputs * outputs, "weight shape");
        assert_eq!(b.len(), outputs, "bias shape");
        let k_pad = inputs.div_ceil(4) * 4;
        let o_pad = outputs.div_ceil(PANEL) * PANEL;
        let groups = k_pad / 4;
        let mut q = vec![0i8; o_pad * k_pad];
        let (mut colsum, mut scale) = (vec![0i32; o_pad], vec![0f32; o_pad]);
        for o in 0..outputs {
            let row = &w[o * inputs..][..inputs];
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if max > 0.0 { max / 127.0 } else { 1.0 };
            scale[o] = s;
            let (block, lane) = (o / 16, o % 16);
            for (k, v) in row.iter().enumerate() {
                let qv = (v / s).round_ties_even().clamp(-127.0, 127.0) as i8;
                colsum[o] += qv as i32;
                q[((block * groups + k / 4) * 16 + lane) * 4 + k % 4] = qv;
            }
        }
        QLinear { packed: q, kernel, colsum, scale, bias: b.to_vec(), inputs, k_pad, outputs, o_pad }
    }

    /// `out = x·Wᵀ + b (+ residual)` for `rows` rows of `x`.
    pub fn apply(&self, x: &[f32], rows: usize, residual: Option<&[f32]>, out: &mut Vec<f32>, s: &mut QScratch) {
        assert_eq!(x.len(), rows * self.inputs, "input rows");
        if let Some(res) = residual {
            assert_eq!(res.len(), rows * self.outputs, "residual rows");
        }
        match self.kernel {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the VNNI kernel is chosen only on CPUs with AVX-512 F and BW.
            Kernel::Vnni512 => unsafe { x86::quantise_rows_avx512(x, self.inputs, self.k_pad, s) },
            _ => quantise_rows(x, self.inputs, self.k_pad, s),
        }
        if self.kernel == Kernel::Avx2 {
            s.wide.clear();
            s.wide.extend(s.u.iter().map(|&v| v as i16));
        }
        // Every element is written below: only a longer buffer needs filling first.
        out.resize(rows * self.outputs, 0.0);
        let args = Args { q: self, s, residual, out: out.as_mut_slice() };
        match self.kernel {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `new` keeps a kernel only when this CPU has its features (`Kernel::best`).
            Kernel::Vnni512 => unsafe { x86::product_vnni512(args, rows) },
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { x86::product_avx2(args, rows) },
            _ => product_portable(args, rows),
        }
    }
}

/// What a kernel reads and writes.
struct Args<'a> {
    q: &'a QLinear,
    s: &'a QScratch,
    residual: Option<&'a [f32]>,
    out: &'a mut [f32],
}

impl Args<'_> {
    /// Writes rows `r0..r0 + tile.len()` × outputs `o0..o0 + PANEL` (those that exist) from
    /// their integer sums.
    #[inline(always)]
    fn finish(&mut self, r0: usize, o0: usize, tile: &[[i32; PANEL]]) {
        let q = self.q;
        let width = PANEL.min(q.outputs - o0.min(q.outputs));
        let (colsum, scale, bias) = (&q.colsum[o0..][..width], &q.scale[o0..][..width], &q.bias[o0..][..width]);
        for (i, acc) in tile.iter().enumerate() {
            let r = r0 + i;
            let (sr, zr) = (self.s.row_scale[r], self.s.row_zero[r]);
            let at = r * q.outputs + o0;
            let out = &mut self.out[at..][..width];
            for j in 0..width {
                out[j] = (acc[j] - zr * colsum[j]) as f32 * (sr * scale[j]) + bias[j];
            }
            if let Some(res) = self.residual {
                for (o, v) in out.iter_mut().zip(&res[at..][..width]) {
                    *o += v;
                }
            }
        }
    }
}

crate::ops::simd_dispatch!(quantise_rows, quantise_rows_generic, (x: &[f32], inputs: usize, k_pad: usize, s: &mut QScratch));

/// Rounds to the nearest integer, ties to even, for |v| < 2²² (adding and subtracting 1.5·2²³
/// leaves no fraction bits): branch-free, so loops over it vectorise without SSE4.1's
/// `roundps`.
#[inline(always)]
fn round(v: f32) -> f32 {
    (v + 12_582_912.0) - 12_582_912.0
}

/// Quantises each row of `x` (`inputs` wide) to `u8` with its own scale and zero point,
/// padded with the zero point to `k_pad` (padded weights are 0, so the padding adds nothing).
#[inline(always)]
fn quantise_rows_generic(x: &[f32], inputs: usize, k_pad: usize, s: &mut QScratch) {
    let rows = x.len() / inputs;
    // Every byte is written below.
    s.u.resize(rows * k_pad, 0);
    s.row_scale.clear();
    s.row_zero.clear();
    for (r, row) in x.chunks_exact(inputs).enumerate() {
        let (mut lo, mut hi) = ([0f32; 8], [0f32; 8]);
        for c in row.chunks(8) {
            for (j, &v) in c.iter().enumerate() {
                lo[j] = if v < lo[j] { v } else { lo[j] };
                hi[j] = if v > hi[j] { v } else { hi[j] };
            }
        }
        let lo = lo.iter().copied().fold(0f32, f32::min);
        let hi = hi.iter().copied().fold(0f32, f32::max);
        let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
        let zero = round(-lo / scale).clamp(0.0, 255.0);
        let inv = 1.0 / scale;
        let u = &mut s.u[r * k_pad..][..k_pad];
        for (d, &v) in u.iter_mut().zip(row) {
            // Clamped first (the rounding trick needs small values; NaN becomes 0).
            *d = round((v * inv + zero).clamp(0.0, 255.0)) as u8;
        }
        u[inputs..].fill(zero as u8);
        s.row_scale.push(scale);
        s.row_zero.push(zero as i32);
    }
}

/// Reference kernel, also the one for CPUs without AVX2.
fn product_portable(mut a: Args<'_>, rows: usize) {
    let q = a.q;
    let w = &q.packed;
    let groups = q.k_pad / 4;
    let mut tile = [[0i32; PANEL]; 1];
    for o0 in (0..q.o_pad).step_by(PANEL) {
        for r in 0..rows {
            let u = &a.s.u[r * q.k_pad..][..q.k_pad];
            for (j, acc) in tile[0].iter_mut().enumerate() {
                let (block, lane) = ((o0 + j) / 16, (o0 + j) % 16);
                let mut sum = 0i32;
                for g in 0..groups {
                    let wq = &w[((block * groups + g) * 16 + lane) * 4..][..4];
                    for k in 0..4 {
                        sum += u[g * 4 + k] as i32 * wq[k] as i32;
                    }
                }
                *acc = sum;
            }
            a.finish(r, o0, &tile);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{round, Args, QScratch, PANEL, ROWS};
    use std::arch::x86_64::*;

    /// [`super::quantise_rows`] on 16 lanes: the same scale, zero point and rounding (to
    /// nearest, ties to even), so the same bytes.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantise_rows_avx512(x: &[f32], inputs: usize, k_pad: usize, s: &mut QScratch) {
        let rows = x.len() / inputs;
        // Every byte is written below.
        s.u.resize(rows * k_pad, 0);
        s.row_scale.clear();
        s.row_zero.clear();
        let body = inputs / 16 * 16;
        for (r, row) in x.chunks_exact(inputs).enumerate() {
            let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            for c in row[..body].chunks_exact(16) {
                // SAFETY: 16 f32.
                let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
                lo = _mm512_min_ps(lo, v);
                hi = _mm512_max_ps(hi, v);
            }
            let tail = &row[body..];
            let lo = tail.iter().copied().fold(_mm512_reduce_min_ps(lo), f32::min);
            let hi = tail.iter().copied().fold(_mm512_reduce_max_ps(hi), f32::max);
            let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
            let zero = round(-lo / scale).clamp(0.0, 255.0);
            let inv = 1.0 / scale;
            let u = &mut s.u[r * k_pad..][..k_pad];
            let (vinv, vzero, vmax) = (_mm512_set1_ps(inv), _mm512_set1_ps(zero), _mm512_set1_ps(255.0));
            for (c, d) in row[..body].chunks_exact(16).zip(u.chunks_exact_mut(16)) {
                // SAFETY: 16 f32 in, 16 bytes out.
                unsafe {
                    let v = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(c.as_ptr()), vinv), vzero);
                    let v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), vmax);
                    let i = _mm512_cvtps_epi32(v);
                    _mm_storeu_si128(d.as_mut_ptr() as *mut _, _mm512_cvtusepi32_epi8(i));
                }
            }
            for (d, &v) in u[body..inputs].iter_mut().zip(tail) {
                *d = round((v * inv + zero).clamp(0.0, 255.0)) as u8;
            }
            u[inputs..].fill(zero as u8);
            s.row_scale.push(scale);
            s.row_zero.push(zero as i32);
        }
    }

    /// `ROWS` rows at a time × one panel of 64 outputs: 24 accumulators of 16 lanes.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn product_vnni512(mut a: Args<'_>, rows: usize) {
        let q = a.q;
        let w = &q.packed;
        let groups = q.k_pad / 4;
        let mut tile = [[0i32; PANEL]; ROWS];
        for o0 in (0..q.o_pad).step_by(PANEL) {
            // The panel: four blocks of 16 outputs, each `groups` × 64 bytes.
            let panel = w[(o0 / 16) * groups * 64..].as_ptr();
            let mut r0 = 0;
            while r0 < rows {
                let n = ROWS.min(rows - r0);
                let u = a.s.u[r0 * q.k_pad..].as_ptr();
                // SAFETY: rows r0..r0 + n of `u` and the panel's 4 × groups × 64 bytes exist;
                // `tile` has ROWS rows.
                unsafe {
                    match n {
                        6 => vnni_rows::<6>(u, q.k_pad, panel, groups, &mut tile),
                        5 => vnni_rows::<5>(u, q.k_pad, panel, groups, &mut tile),
                        4 => vnni_rows::<4>(u, q.k_pad, panel, groups, &mut tile),
                        3 => vnni_rows::<3>(u, q.k_pad, panel, groups, &mut tile),
                        2 => vnni_rows::<2>(u, q.k_pad, panel, groups, &mut tile),
                        _ => vnni_rows::<1>(u, q.k_pad, panel, groups, &mut tile),
                    }
                }
                a.finish(r0, o0, &tile[..n]);
                r0 += n;
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn vnni_rows<const R: usize>(
        u: *const u8,
        k_pad: usize,
        panel: *const i8,
        groups: usize,
        tile: &mut [[i32; PANEL]; ROWS],
    ) {
        let mut acc = [[_mm512_setzero_si512(); 4]; R];
        let block = groups * 64;
        for g in 0..groups {
            // SAFETY: (caller) every block has `groups` groups of 64 bytes; every row k_pad bytes.
            unsafe {
                let p = panel.add(g * 64);
                let w = [
                    _mm512_loadu_si512(p as *const _),
                    _mm512_loadu_si512(p.add(block) as *const _),
                    _mm512_loadu_si512(p.add(2 * block) as *const _),
                    _mm512_loadu_si512(p.add(3 * block) as *const _),
                ];
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_epi32((u.add(r * k_pad + g * 4) as *const i32).read_unaligned());
                    for b in 0..4 {
                        acc[b] = _mm512_dpbusd_epi32(acc[b], x, w[b]);
                    }
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (b, v) in acc.iter().enumerate() {
                // SAFETY: 16 i32 at lanes b·16.. of a 64-wide row.
                unsafe { _mm512_storeu_si512(tile[r][b * 16..].as_mut_ptr() as *mut _, *v) };
            }
        }
    }

    /// Three rows at a time × 16 outputs, 16-bit pairs multiplied and added (`vpmaddwd`):
    /// exact, as neither the 8-bit inputs nor their pair sums can overflow. Reads the
    /// activations widened to `i16` ([`QScratch`]'s `wide`, filled by `apply`), so each row's
    /// four inputs of a group are one broadcast load.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn product_avx2(mut a: Args<'_>, rows: usize) {
        let q = a.q;
        let w = &q.packed;
        assert!(a.s.wide.len() >= rows * q.k_pad, "activations not widened");
        let groups = q.k_pad / 4;
        let mut tile = [[0i32; PANEL]; AVX2_ROWS];
        for o0 in (0..q.o_pad).step_by(PANEL) {
            let mut r0 = 0;
            while r0 < rows {
                let n = AVX2_ROWS.min(rows - r0);
                for b in 0..PANEL / 16 {
                    let block = &w[((o0 / 16) + b) * groups * 64..][..groups * 64];
                    let x = &a.s.wide[r0 * q.k_pad..][..n * q.k_pad];
                    let tile = &mut tile[..n];
                    // SAFETY: AVX2 (this function's contract); the slices hold what is read.
                    unsafe {
                        match n {
                            1 => avx2_block::<1>(block, x, q.k_pad, groups, tile, b * 16),
                            2 => avx2_block::<2>(block, x, q.k_pad, groups, tile, b * 16),
                            _ => avx2_block::<AVX2_ROWS>(block, x, q.k_pad, groups, tile, b * 16),
                        }
                    }
                }
                a.finish(r0, o0, &tile[..n]);
                r0 += n;
            }
        }
    }

    /// Rows of one [`product_avx2`] pass: three keep 12 accumulators, the weight and the
    /// rows' broadcasts in the 16 AVX2 registers.
    const AVX2_ROWS: usize = 3;

    /// One 16-output block × `R` rows into `tile[..R][col..col + 16]`: per group of four
    /// inputs, each of the block's four weight vectors is loaded (and widened) once and
    /// multiplied with every row's broadcast inputs.
    ///
    /// # Safety
    /// The CPU must have AVX2; `block` holds `groups` × 64 weights, `x` holds `R` rows of
    /// `k_pad` ≥ 4 · `groups` inputs, `tile` holds `R` rows.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn avx2_block<const R: usize>(
        block: &[i8],
        x: &[i16],
        k_pad: usize,
        groups: usize,
        tile: &mut [[i32; PANEL]],
        col: usize,
    ) {
        debug_assert!(block.len() >= groups * 64 && x.len() >= R * k_pad && k_pad >= groups * 4 && tile.len() >= R);
        let (w, x) = (block.as_ptr(), x.as_ptr());
        let mut acc = [[_mm256_setzero_si256(); 4]; R];
        for g in 0..groups {
            // SAFETY: in bounds by this function's contract.
            unsafe {
                let mut xv = [_mm256_setzero_si256(); R];
                for (r, v) in xv.iter_mut().enumerate() {
                    *v = _mm256_set1_epi64x((x.add(r * k_pad + g * 4) as *const i64).read_unaligned());
                }
                for i in 0..4 {
                    // 16 weights widened to i16 here, so the panels stay 8-bit in memory
                    // (half the bytes to stream when the weights are not in cache).
                    let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(w.add(g * 64 + i * 16) as *const _));
                    for (a, x) in acc.iter_mut().zip(&xv) {
                        a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(*x, wv));
                    }
                }
            }
        }
        // Lanes 2m and 2m+1 of accumulator i hold output 4i + m's two halves.
        for (row, acc) in tile.iter_mut().zip(&acc) {
            for (i, sum) in acc.iter().enumerate() {
                let mut lanes = [0i32; 8];
                // SAFETY: 8 i32.
                unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut _, *sum) };
                for m in 0..4 {
                    row[col + i * 4 + m] = lanes[2 * m] + lanes[2 * m + 1];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernels() -> Vec<Kernel> {
        [Kernel::Portable, Kernel::Avx2, Kernel::Vnni512].into_iter().filter(|&k| k <= Kernel::best()).collect()
    }

    /// Odd shapes (inputs not a multiple of 4, outputs not of 64, rows not of 6) against the
    /// f32 product; every kernel the CPU has gives the same bits.
    #[test]
    fn kernels_agree_bit_for_bit_and_approximate_the_f32_product() {
        let shapes =
            [(1, 3, 1), (2, 5, 64), (3, 8, 65), (4, 12, 16), (5, 37, 70), (7, 37, 70), (13, 384, 130), (6, 1536, 384)];
        for &(rows, inputs, outputs) in &shapes {
            let w: Vec<f32> = (0..inputs * outputs).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.1).collect();
            let b: Vec<f32> = (0..outputs).map(|o| o as f32 * 0.01).collect();
            let x: Vec<f32> = (0..rows * inputs).map(|i| ((i as f32) * 0.37).sin() * 2.0 + 0.3).collect();
            let res: Vec<f32> = (0..rows * outputs).map(|i| (i % 5) as f32).collect();
            let mut outs = Vec::new();
            for k in kernels() {
                let q = QLinear::new(&w, &b, inputs, outputs, k);
                let mut out = Vec::new();
                q.apply(&x, rows, Some(&res), &mut out, &mut QScratch::default());
                outs.push((k, out));
            }
            let (_, first) = &outs[0];
            for (k, out) in &outs[1..] {
                assert_eq!(out, first, "{k:?} differs from the portable kernel at {rows}×{inputs}→{outputs}");
            }
            for r in 0..rows {
                for o in 0..outputs {
                    let exact = b[o]
                        + res[r * outputs + o]
                        + (0..inputs).map(|i| x[r * inputs + i] * w[o * inputs + i]).sum::<f32>();
                    // Quantisation noise grows as √inputs (about 0.0005·√inputs here).
                    let bound = 0.006 * (inputs as f32).sqrt();
                    let got = first[r * outputs + o];
                    assert!((got - exact).abs() < bound, "{rows}×{inputs}→{outputs} [{r}][{o}]: {got} vs {exact}");
                }
            }
        }
    }

    #[test]
    fn zero_rows_and_weights_are_exact() {
        let q = QLinear::new(&[0.0; 8], &[1.0, 2.0], 4, 2, Kernel::detect());
        let mut out = Vec::new();
        q.apply(&[0.0; 8], 2, None, &mut out, &mut QScratch::default());
        assert_eq!(out, vec![1.0, 2.0, 1.0, 2.0]);
    }
}
