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
    // The scan's 16-bit query (`QueryI16`): each element off by at most half its scale (and
    // the division's rounding), against codes of norm ≤ ‖y‖ + ‖r‖.
    let query = (query_scale(q) / 2.0 * d.sqrt() * 1.01 + qn * u * 2.0) * (max_norm + max_residual);
    (qn * (max_residual + sums) + query) * 1.001 + f32::MIN_POSITIVE
}

/// The query in 16-bit fixed point, for the scan ([`QueryI16::dot`]): `q ≈ scale · codes`.
/// Its products with the int8 codes are summed exactly in integers, twice the codes per
/// instruction of the f32 path; what the rounding leaves out of `q` enters the bound
/// ([`error_bound`]'s query term).
pub(crate) struct QueryI16 {
    codes: Vec<i16>,
    pub scale: f32,
}

/// Above this dimension the scan keeps the f32 path ([`query_scale`] would leave a query
/// few bits each).
pub(crate) const I16_DIM_MAX: usize = 8192;

/// The scale of a query's 16-bit codes: its largest element at 32,767, or coarser when its
/// codes times 127 (the largest code) could sum past `i32::MAX` (long, flat queries): every
/// partial sum of [`QueryI16::dot`] then fits, since `Σ|codes| ≤ Σ|q| / scale + d / 2`.
pub(crate) fn query_scale(q: &[f32]) -> f32 {
    let max = q.iter().fold(0f32, |m, x| m.max(x.abs()));
    if !(max > 0.0 && max.is_finite()) {
        return 1.0;
    }
    let sum: f64 = q.iter().map(|x| x.abs() as f64).sum();
    let room = i32::MAX as f64 / 127.0 - q.len() as f64 / 2.0 - 1.0;
    let fits = if room > 0.0 { (sum / room * 1.001) as f32 } else { f32::INFINITY };
    (max / 32767.0).max(fits)
}

impl QueryI16 {
    pub fn of(q: &[f32]) -> QueryI16 {
        let scale = query_scale(q);
        let codes = q.iter().map(|&x| (x / scale).round().clamp(-32767.0, 32767.0) as i16).collect();
        QueryI16 { codes, scale }
    }

    /// `Σ codes_i · c_i`, exact (the caller multiplies by both scales).
    #[inline]
    pub fn dot(&self, c: &[i8]) -> i32 {
        debug_assert!(self.codes.len() <= I16_DIM_MAX && self.codes.len() == c.len());
        #[cfg(target_arch = "x86_64")]
        {
            if has_avx512bw() {
                // SAFETY: the CPU supports avx512f and avx512bw (checked above).
                return unsafe { dot_i16_avx512(&self.codes, c) };
            }
            if crate::distance::has_avx2_fma() {
                // SAFETY: the CPU supports avx2 (checked above).
                return unsafe { dot_i16_avx2(&self.codes, c) };
            }
        }
        dot_i16_scalar(&self.codes, c)
    }
}

fn dot_i16_scalar(q: &[i16], c: &[i8]) -> i32 {
    q.iter().zip(c).map(|(&a, &b)| a as i32 * b as i32).sum()
}

#[cfg(target_arch = "x86_64")]
fn has_avx512bw() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw"))
}

/// 32 codes widened to i16 and multiplied in pairs into 16 i32 lanes per step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn dot_i16_avx512(q: &[i16], c: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 32 <= n` keeps every load (32 i16, or 32 codes) inside both
    // slices; unaligned loads need no alignment.
    unsafe {
        let n = q.len().min(c.len());
        let (pq, pc) = (q.as_ptr(), c.as_ptr());
        let mut acc = [_mm512_setzero_si512(); 2];
        let mut i = 0;
        while i + 64 <= n {
            for (j, acc) in acc.iter_mut().enumerate() {
                let codes = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pc.add(i + 32 * j) as *const __m256i));
                let prod = _mm512_madd_epi16(_mm512_loadu_si512(pq.add(i + 32 * j) as *const _), codes);
                *acc = _mm512_add_epi32(*acc, prod);
            }
            i += 64;
        }
        while i + 32 <= n {
            let codes = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pc.add(i) as *const __m256i));
            acc[0] = _mm512_add_epi32(acc[0], _mm512_madd_epi16(_mm512_loadu_si512(pq.add(i) as *const _), codes));
            i += 32;
        }
        let mut s = _mm512_reduce_add_epi32(_mm512_add_epi32(acc[0], acc[1]));
        while i < n {
            s += q[i] as i32 * c[i] as i32;
            i += 1;
        }
        s
    }
}

/// The sum of an AVX2 register's eight i32 lanes (the 16-bit and the codes' kernels end here).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_lanes_avx2(v: std::arch::x86_64::__m256i) -> i32 {
    use std::arch::x86_64::*;
    let half = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let half = _mm_add_epi32(half, _mm_shuffle_epi32::<0b01_00_11_10>(half));
    let half = _mm_add_epi32(half, _mm_shuffle_epi32::<0b10_11_00_01>(half));
    _mm_cvtsi128_si32(half)
}

/// 16 codes widened to i16 and multiplied in pairs into 8 i32 lanes per step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i16_avx2(q: &[i16], c: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 16 <= n` keeps every load (16 i16, or 16 codes) inside both
    // slices; unaligned loads need no alignment.
    unsafe {
        let n = q.len().min(c.len());
        let (pq, pc) = (q.as_ptr(), c.as_ptr());
        let mut acc = [_mm256_setzero_si256(); 2];
        let mut i = 0;
        while i + 32 <= n {
            for (j, acc) in acc.iter_mut().enumerate() {
                let codes = _mm256_cvtepi8_epi16(_mm_loadu_si128(pc.add(i + 16 * j) as *const __m128i));
                let prod = _mm256_madd_epi16(_mm256_loadu_si256(pq.add(i + 16 * j) as *const __m256i), codes);
                *acc = _mm256_add_epi32(*acc, prod);
            }
            i += 32;
        }
        while i + 16 <= n {
            let codes = _mm256_cvtepi8_epi16(_mm_loadu_si128(pc.add(i) as *const __m128i));
            acc[0] =
                _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_loadu_si256(pq.add(i) as *const __m256i), codes));
            i += 16;
        }
        let sum = _mm256_add_epi32(acc[0], acc[1]);
        let mut s = sum_lanes_avx2(sum);
        while i < n {
            s += q[i] as i32 * c[i] as i32;
            i += 1;
        }
        s
    }
}

/// `Σ a_i · b_i` of two vectors' codes, exact for up to [`I16_DIM_MAX`] codes (each product
/// is at most 127², so sums stay far inside i32): the similarity neighbour selection ranks
/// stored nodes by, times both scales. The codes are widened to i16 and multiplied in pairs.
#[inline]
pub(crate) fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    debug_assert!(a.len() == b.len() && a.len() <= I16_DIM_MAX);
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512bw() {
            // SAFETY: the CPU supports avx512f and avx512bw (checked above).
            return unsafe { dot_codes_avx512(a, b) };
        }
        if crate::distance::has_avx2_fma() {
            // SAFETY: the CPU supports avx2 (checked above).
            return unsafe { dot_codes_avx2(a, b) };
        }
    }
    dot_codes_scalar(a, b)
}

fn dot_codes_scalar(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn dot_codes_avx512(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 32 <= n` keeps every load (32 codes) inside both slices;
    // unaligned loads need no alignment.
    unsafe {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let wide = |p: *const i8| _mm512_cvtepi8_epi16(_mm256_loadu_si256(p as *const __m256i));
        let mut acc = _mm512_setzero_si512();
        let mut i = 0;
        while i + 32 <= n {
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(wide(pa.add(i)), wide(pb.add(i))));
            i += 32;
        }
        let mut s = _mm512_reduce_add_epi32(acc);
        while i < n {
            s += a[i] as i32 * b[i] as i32;
            i += 1;
        }
        s
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_codes_avx2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 16 <= n` keeps every load (16 codes) inside both slices;
    // unaligned loads need no alignment.
    unsafe {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let wide = |p: *const i8| _mm256_cvtepi8_epi16(_mm_loadu_si128(p as *const __m128i));
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        while i + 16 <= n {
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(wide(pa.add(i)), wide(pb.add(i))));
            i += 16;
        }
        let mut s = sum_lanes_avx2(acc);
        while i < n {
            s += a[i] as i32 * b[i] as i32;
            i += 1;
        }
        s
    }
}

/// `q · c` (the caller multiplies by the scale); AVX2 + FMA where the running CPU has them.
#[inline]
pub(crate) fn dot_i8(q: &[f32], c: &[i8]) -> f32 {
    debug_assert_eq!(q.len(), c.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU supports avx512f (checked above).
            return unsafe { dot_i8_avx512(q, c) };
        }
        if crate::distance::has_avx2_fma() {
            // SAFETY: the CPU supports avx2 and fma (checked above).
            return unsafe { dot_i8_avx2(q, c) };
        }
    }
    dot_i8_scalar(q, c)
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx512f"))
}

/// As [`dot_i8_avx2`], 16 lanes wide: a scan of a million 384-d codes is bound by the
/// widening of codes to floats (two instructions per 8 codes with AVX2, per 16 here), not by
/// the memory it reads.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot_i8_avx512(q: &[f32], c: &[i8]) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 64 <= n` / `i + 16 <= n` keep every load (16 floats, or 16
    // codes = 16 bytes) inside both slices; unaligned loads need no alignment.
    unsafe {
        let n = q.len().min(c.len());
        let (pq, pc) = (q.as_ptr(), c.as_ptr());
        let codes = |at: usize| _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(pc.add(at) as *const __m128i)));
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut i = 0;
        while i + 64 <= n {
            for (j, acc) in acc.iter_mut().enumerate() {
                *acc = _mm512_fmadd_ps(_mm512_loadu_ps(pq.add(i + 16 * j)), codes(i + 16 * j), *acc);
            }
            i += 64;
        }
        while i + 16 <= n {
            acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(pq.add(i)), codes(i), acc[0]);
            i += 16;
        }
        let mut s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
        while i < n {
            s += q[i] * c[i] as f32;
            i += 1;
        }
        s
    }
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
        let mut pairs = crate::distance::random_pairs(23);
        // A length whose tail takes AVX2's 16-wide step, and long flat vectors whose 16-bit
        // sums would pass i32 at the finest scale (3,072 × 32,767 × 127).
        pairs.push((
            (0..48).map(|i| (i as f32 * 0.37).sin()).collect(),
            (0..48).map(|i| (i as f32 * 0.11).cos() * 0.2).collect(),
        ));
        for len in [1536, 3072] {
            pairs.push((vec![1.0; len], vec![0.5; len]));
            pairs.push((vec![-0.02; len], vec![-0.02; len]));
        }
        for (q, y) in pairs {
            let len = q.len();
            let mut codes = Vec::new();
            let (scale, residual) = quantize(&y, &mut codes);
            let exact: f64 = q.iter().zip(&y).map(|(a, b)| *a as f64 * *b as f64).sum();
            let norm = y.iter().map(|x| x * x).sum::<f32>().sqrt();
            let mut kernels = vec![dot_i8(&q, &codes), dot_i8_scalar(&q, &codes)];
            #[cfg(target_arch = "x86_64")]
            {
                if crate::distance::has_avx2_fma() {
                    // SAFETY: the CPU supports avx2 and fma (checked above).
                    kernels.push(unsafe { dot_i8_avx2(&q, &codes) });
                }
                if has_avx512() {
                    // SAFETY: the CPU supports avx512f (checked above).
                    kernels.push(unsafe { dot_i8_avx512(&q, &codes) });
                }
            }
            for got in kernels {
                let got = (scale * got) as f64;
                let bound = error_bound(&q, norm, residual) as f64;
                assert!((got - exact).abs() <= bound, "len {len}: {got} vs {exact} (bound {bound})");
            }
            let q16 = QueryI16::of(&q);
            let mut exact16 = vec![q16.dot(&codes), dot_i16_scalar(&q16.codes, &codes)];
            #[cfg(target_arch = "x86_64")]
            {
                if crate::distance::has_avx2_fma() {
                    // SAFETY: the CPU supports avx2 (checked above).
                    exact16.push(unsafe { dot_i16_avx2(&q16.codes, &codes) });
                }
                if has_avx512bw() {
                    // SAFETY: the CPU supports avx512f and avx512bw (checked above).
                    exact16.push(unsafe { dot_i16_avx512(&q16.codes, &codes) });
                }
            }
            let sum: i64 = q16.codes.iter().zip(&codes).map(|(&a, &b)| a as i64 * b as i64).sum();
            for got in exact16 {
                assert_eq!(got as i64, sum, "len {len}: the integer sum is exact");
                let got = (q16.scale * scale * got as f32) as f64;
                let bound = error_bound(&q, norm, residual) as f64;
                assert!((got - exact).abs() <= bound, "len {len}, 16-bit query: {got} vs {exact} (bound {bound})");
            }
            // The bound is a bound, not noise: about the codes' own error.
            assert!(residual <= scale * (len as f32).sqrt() / 2.0 * 1.0001);
        }
        let mut codes = Vec::new();
        assert_eq!(quantize(&[0.0, 0.0], &mut codes), (1.0, 0.0), "a zero vector");
        assert_eq!(codes, [0, 0]);
    }

    #[test]
    fn two_nodes_codes_sum_exactly_in_every_kernel() {
        // Lengths through every tail of the 32- and 16-wide steps, and the longest allowed,
        // at the extreme codes (±127, ±127 · −127 summed over 8,192) and mixed ones.
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % 255) as i32 - 127
        };
        let mut cases: Vec<(Vec<i8>, Vec<i8>)> = Vec::new();
        for len in (0..=70).chain([384, 385, 1536, I16_DIM_MAX]) {
            cases.push(((0..len).map(|_| next() as i8).collect(), (0..len).map(|_| next() as i8).collect()));
        }
        cases.push((vec![127; I16_DIM_MAX], vec![127; I16_DIM_MAX]));
        cases.push((vec![-127; I16_DIM_MAX], vec![127; I16_DIM_MAX]));
        for (a, b) in cases {
            let want: i64 = a.iter().zip(&b).map(|(&x, &y)| x as i64 * y as i64).sum();
            let mut got = vec![dot_codes(&a, &b), dot_codes_scalar(&a, &b)];
            #[cfg(target_arch = "x86_64")]
            {
                if crate::distance::has_avx2_fma() {
                    // SAFETY: the CPU supports avx2 (checked above).
                    got.push(unsafe { dot_codes_avx2(&a, &b) });
                }
                if has_avx512bw() {
                    // SAFETY: the CPU supports avx512f and avx512bw (checked above).
                    got.push(unsafe { dot_codes_avx512(&a, &b) });
                }
            }
            for g in got {
                assert_eq!(g as i64, want, "length {}", a.len());
            }
        }
    }
}
