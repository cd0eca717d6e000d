//! Inner product of L2-normalised vectors (= cosine), vectorised where the CPU allows.

/// Dot product; uses AVX2+FMA when the running CPU has them.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            // SAFETY: the CPU supports avx2 and fma (checked above).
            return unsafe { dot_avx2(a, b) };
        }
    }
    dot_portable(a, b)
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2_fma() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// Four independent 8-wide FMA chains (an FMA's result is ready for the next add only
/// after four cycles: one chain would leave the units idle), summed as a tree at the end.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): `i + 32 <= n` / `i + 8 <= n` keep every 8-float load inside both
    // slices; unaligned loads need no alignment.
    unsafe {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (j, acc) in acc.iter_mut().enumerate() {
                let x = _mm256_loadu_ps(pa.add(i + 8 * j));
                let y = _mm256_loadu_ps(pb.add(i + 8 * j));
                *acc = _mm256_fmadd_ps(x, y, *acc);
            }
            i += 32;
        }
        while i + 8 <= n {
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc[0]);
            i += 8;
        }
        let mut s = hsum4(acc);
        while i < n {
            s += a[i] * b[i];
            i += 1;
        }
        s
    }
}

/// The sum of the 32 lanes of four 8-wide accumulators, as a tree (the kernels' last step).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn hsum4(acc: [std::arch::x86_64::__m256; 4]) -> f32 {
    use std::arch::x86_64::*;
    let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
    _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)))
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Query and stored-vector pairs for the compact copies' bound tests: 50 of each length
/// around the kernels' loop boundaries, components in [-1, 1) and [-0.2, 0.2).
#[cfg(test)]
pub(crate) fn random_pairs(seed: u64) -> Vec<(Vec<f32>, Vec<f32>)> {
    let mut seed = seed;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
    };
    let mut out = Vec::new();
    for len in [1, 8, 33, 384, 389] {
        for _ in 0..50 {
            let q: Vec<f32> = (0..len).map(|_| next()).collect();
            let y: Vec<f32> = (0..len).map(|_| next() * 0.2).collect();
            out.push((q, y));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn dot_matches_naive() {
        // Lengths around every loop boundary of the AVX2 kernel (32-, 8- and 1-float steps).
        for len in [0, 1, 7, 8, 9, 31, 32, 33, 40, 384, 389] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-3, "len {len}");
            assert!((dot_portable(&a, &b) - naive).abs() < 1e-3, "len {len}");
        }
    }
}
