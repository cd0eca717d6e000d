//! An int8 copy of the vectors for large indexes (scalar quantization, one scale per
//! vector): a quarter of the f32 bytes, half of binary16's, so a million 384-d vectors keep
//! 384 MB in memory for the walk and the scan instead of 768 MB. As with binary16, the
//! quantized scores only rank: the walk's and the scan's candidates are re-scored in f32
//! (`exact.rs`), and the exact path keeps every node the bound below does not rule out, so it
//! stays exact.
//!
//! A vector `y` becomes `s · c` with `s = max|y_i| / 127` and `c_i = round(y_i / s)`; the
//! query stays f32 (asymmetric: no rounding on its side). `q · y − s (q · c) = q · r` with
//! `r = y − s c`, so by Cauchy–Schwarz the conversion is off by at most `‖q‖ ‖r‖`; the index
//! keeps the largest `‖r‖`.

/// One vector's codes into `out`; returns its scale and the norm of what the codes leave out.
pub(crate) fn quantize(v: &[f32], out: &mut Vec<i8>) -> (f32, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 && max.is_finite() { max / 127.0 } else { 1.0 };
    let mut residual = 0f64;
    for &x in v {
        let c = (x / scale).round().clamp(-127.0, 127.0);
        out.push(c as i8);
        let r = (x - c * scale) as f64;
        residual += r * r;
    }
    (scale, residual.sqrt() as f32)
}

/// The bound on `|q·y − scale · dot_i8(q, codes)|` for every stored `y` whose residual is at
/// most `max_residual` and whose norm at most `max_norm`: the conversion (`‖q‖ ‖r‖`) and
/// both dot products' f32 sums (Higham's γ_d, as in `half.rs`).
pub(crate) fn error_bound(q: &[f32], max_norm: f32, max_residual: f32) -> f32 {
    let qn = q.iter().map(|x| x * x).sum::<f32>().sqrt();
    let d = q.len() as f32;
    let u = f32::EPSILON / 2.0;
    let gamma = d * u / (1.0 - d * u).max(f32::EPSILON);
    // The codes' products are exact in f32 (|c| ≤ 127, q in f32: one rounding each), the
    // sums round as in any f32 dot; `scale · c` has norm ≤ ‖y‖ + ‖r‖.
    let sums = gamma * (2.0 * max_norm + max_residual) * 1.01;
    qn * (max_residual + sums) * 1.001 + f32::MIN_POSITIVE
}

/// `q · c` (the caller multiplies by the scale); AVX2 + FMA where the running CPU has them.
#[inline]
pub(crate) fn dot_i8(q: &[f32], c: &[i8]) -> f32 {
    debug_assert_eq!(q.len(), c.len());
    #[cfg(target_arch = "x86_64")]
    {
        if crate::distance::has_avx2_fma() {
            // SAFETY: the CPU supports avx2 and fma (checked above).
            return unsafe { dot_i8_avx2(q, c) };
        }
    }
    dot_i8_scalar(q, c)
}

fn dot_i8_scalar(q: &[f32], c: &[i8]) -> f32 {
    q.iter().zip(c).map(|(a, &b)| a * b as f32).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_i8_avx2(q: &[f32], c: &[i8]) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 32 <= n` / `i + 8 <= n` keep every load (8 floats, or 8 codes
    // = 8 bytes) inside both slices; unaligned loads need no alignment.
    unsafe {
        let n = q.len().min(c.len());
        let (pq, pc) = (q.as_ptr(), c.as_ptr());
        let codes = |at: usize| _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(pc.add(at) as *const __m128i)));
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (j, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(_mm256_loadu_ps(pq.add(i + 8 * j)), codes(i + 8 * j), *acc);
            }
            i += 32;
        }
        while i + 8 <= n {
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(pq.add(i)), codes(i), acc[0]);
            i += 8;
        }
        let mut s = crate::distance::hsum4(acc);
        while i < n {
            s += q[i] * c[i] as f32;
            i += 1;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_products_stay_within_the_bound() {
        for (q, y) in crate::distance::random_pairs(23) {
            let len = q.len();
            let mut codes = Vec::new();
            let (scale, residual) = quantize(&y, &mut codes);
            let exact: f64 = q.iter().zip(&y).map(|(a, b)| *a as f64 * *b as f64).sum();
            let norm = y.iter().map(|x| x * x).sum::<f32>().sqrt();
            for got in [dot_i8(&q, &codes), dot_i8_scalar(&q, &codes)] {
                let got = (scale * got) as f64;
                let bound = error_bound(&q, norm, residual) as f64;
                assert!((got - exact).abs() <= bound, "len {len}: {got} vs {exact} (bound {bound})");
            }
            // The bound is a bound, not noise: about the codes' own error.
            assert!(residual <= scale * (len as f32).sqrt() / 2.0 * 1.0001);
        }
        let mut codes = Vec::new();
        assert_eq!(quantize(&[0.0, 0.0], &mut codes), (1.0, 0.0), "a zero vector");
        assert_eq!(codes, [0, 0]);
    }
}
