//! A half-precision (IEEE binary16) copy of the vectors for the exact path's first pass:
//! half the bytes of f32, so a scan of 37.5k MiniLM vectors reads 29 MB instead of 58 MB
//! (it fits a 32 MB L3 where the f32 copy does not). The pass only shortlists: every node
//! that could be among the true best is re-scored in f32 (see `exact.rs`), so the path stays
//! exact.
//!
//! Rounding to binary16 changes each component by at most 2^-11 of itself (normal range)
//! or 2^-25 absolute (subnormal range), so for a query `q` and a stored `y`
//! `|q·y − q·half(y)| <= 2^-11 Σ|q_i y_i| + 2^-25 Σ|q_i| <= ‖q‖ (2^-11 ‖y‖ + 2^-25 √d)`.

/// f32 → binary16 bits, round to nearest even; values beyond the half range become ±inf
/// (callers keep such vectors out of the half pass: [`representable`]).
pub(crate) fn to_half(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal half: shift the full mantissa (with its hidden bit) into place.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rest = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let round = (rest > mid || (rest == mid && half & 1 == 1)) as u32;
        return sign | (half + round) as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    let round = (rest > 0x1000 || (rest == 0x1000 && half & 1 == 1)) as u32;
    // A carry out of the mantissa correctly bumps the exponent (up to inf).
    sign | (half + round) as u16
}

/// binary16 bits → f32 (exact).
pub(crate) fn from_half(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: value = man × 2^-24.
            let v = man as f32 / 16_777_216.0;
            return if sign != 0 { -v } else { v };
        }
        0x1f => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Whether a vector keeps the error bound above in binary16 (no component beyond its range).
pub(crate) fn representable(v: &[f32]) -> bool {
    v.iter().all(|x| x.is_finite() && x.abs() < 65_000.0)
}

/// The bound on the difference between `q·half(y)` as [`dot_half`] computes it and `q·y` as
/// the f32 `dot` computes it, for every stored `y` with `‖y‖ <= max_norm`.
pub(crate) fn error_bound(q: &[f32], max_norm: f32) -> f32 {
    let qn = q.iter().map(|x| x * x).sum::<f32>().sqrt();
    let d = q.len() as f32;
    // The conversion: each component rounds by at most 2^-11 of itself (normal range) or
    // 2^-25 (subnormal), so |q·y − q·half(y)| ≤ ‖q‖(‖y‖·2^-11 + √d·2^-25) by Cauchy–Schwarz.
    let conversion = max_norm * (1.0 / 2048.0) + d.sqrt() * (1.0 / 33_554_432.0);
    // The sums: a dot product of d terms in f32 (any order, with or without FMA) is off by at
    // most γ_d·Σ|q_i y_i| ≤ γ_d·‖q‖‖y‖, γ_d = d·u / (1 − d·u), u = 2^-24 (Higham, §3.1); once
    // in the half dot (‖half(y)‖ ≤ ‖y‖(1 + 2^-11)) and once in the f32 dot.
    let u = f32::EPSILON / 2.0;
    let gamma = d * u / (1.0 - d * u).max(f32::EPSILON);
    let sums = gamma * max_norm * (2.0 + 1.0 / 2048.0);
    // 1.001 covers the rounding of this computation; the constant, products of zero.
    qn * (conversion + sums) * 1.001 + f32::MIN_POSITIVE
}

/// `q · y` with `y` in binary16; AVX2 + F16C where the running CPU has them.
#[inline]
pub(crate) fn dot_half(q: &[f32], y: &[u16]) -> f32 {
    debug_assert_eq!(q.len(), y.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_f16c() {
            // SAFETY: the CPU supports avx2, fma and f16c (checked above).
            return unsafe { dot_half_avx2(q, y) };
        }
    }
    dot_half_scalar(q, y)
}

fn dot_half_scalar(q: &[f32], y: &[u16]) -> f32 {
    q.iter().zip(y).map(|(a, &b)| a * from_half(b)).sum()
}

#[cfg(target_arch = "x86_64")]
fn has_f16c() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| crate::distance::has_avx2_fma() && is_x86_feature_detected!("f16c"))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_half_avx2(q: &[f32], y: &[u16]) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 32 <= n` / `i + 8 <= n` keep every load (8 floats, or 8 halves
    // = 16 bytes) inside both slices; unaligned loads need no alignment.
    unsafe {
        let n = q.len().min(y.len());
        let (pq, py) = (q.as_ptr(), y.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (j, acc) in acc.iter_mut().enumerate() {
                let h = _mm256_cvtph_ps(_mm_loadu_si128(py.add(i + 8 * j) as *const __m128i));
                *acc = _mm256_fmadd_ps(_mm256_loadu_ps(pq.add(i + 8 * j)), h, *acc);
            }
            i += 32;
        }
        while i + 8 <= n {
            let h = _mm256_cvtph_ps(_mm_loadu_si128(py.add(i) as *const __m128i));
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(pq.add(i)), h, acc[0]);
            i += 8;
        }
        let mut s = crate::distance::hsum4(acc);
        while i < n {
            s += q[i] * from_half(y[i]);
            i += 1;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips_and_rounds_to_nearest() {
        for x in [0.0f32, -0.0, 1.0, -2.5, 0.1, 65504.0, 6.1e-5, 3.0e-6, -1.0e-7, 1e-9] {
            let back = from_half(to_half(x));
            let tol = (x.abs() / 2048.0).max(1.0 / 33_554_432.0);
            assert!((back - x).abs() <= tol, "{x} -> {back}");
        }
        assert_eq!(to_half(1.0), 0x3c00);
        assert_eq!(to_half(-2.0), 0xc000);
        assert_eq!(to_half(65504.0), 0x7bff);
        assert_eq!(to_half(1e6), 0x7c00);
        assert_eq!(to_half(f32::NAN) & 0x7c00, 0x7c00);
        // Every half value converts back to itself.
        for h in (0u16..0x7c00).step_by(7) {
            assert_eq!(to_half(from_half(h)), h, "{h:#x}");
        }
    }

    #[test]
    fn half_products_stay_within_the_bound() {
        for (q, y) in crate::distance::random_pairs(17) {
            let len = q.len();
            let h: Vec<u16> = y.iter().map(|&x| to_half(x)).collect();
            let exact: f64 = q.iter().zip(&y).map(|(a, b)| *a as f64 * *b as f64).sum();
            let norm = y.iter().map(|x| x * x).sum::<f32>().sqrt();
            // Both kernels: the dispatching one (AVX2 + F16C here) and the scalar fallback.
            for got in [dot_half(&q, &h), dot_half_scalar(&q, &h)] {
                let got = got as f64;
                assert!((got - exact).abs() <= error_bound(&q, norm) as f64, "len {len}: {got} vs {exact}");
            }
        }
    }
}
