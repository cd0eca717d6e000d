//! The encoder's element-wise kernels — layer norm, GELU, row softmax, `erf`, `exp` —
//! written once and compiled for AVX-512, AVX2 + FMA and the baseline target
//! ([`simd_dispatch`]), with the same bits on each.

/// A layer norm's learned gain and bias, one of each per hidden unit ([`layer_norm`]).
pub(crate) struct Norm {
    pub(crate) gain: Vec<f32>,
    pub(crate) bias: Vec<f32>,
}

/// Runs the generic kernel compiled for AVX-512 (16 lanes) or AVX2 and FMA (8 lanes) when
/// the CPU has them, else for the baseline target. The kernels fix their order of operations
/// (no fused multiply-adds are formed, reductions run over [`LANES`] partial sums), so every
/// build gives the same bits.
macro_rules! simd_dispatch {
    ($vis:vis $name:ident, $generic:ident, ($($arg:ident: $ty:ty),*)) => {
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
                unsafe fn wide($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn fast($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw") {
                    // SAFETY: the CPU has the features `wide` is compiled for.
                    return unsafe { wide($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU has the features `fast` is compiled for.
                    return unsafe { fast($($arg),*) };
                }
            }
            $generic($($arg),*)
        }
    };
}
pub(crate) use simd_dispatch;

simd_dispatch!(pub(crate) layer_norm, layer_norm_generic, (x: &mut [f32], n: &Norm, eps: f32));
simd_dispatch!(pub(crate) gelu, gelu_generic, (x: &mut [f32]));
simd_dispatch!(pub(crate) softmax_rows, softmax_rows_generic, (x: &mut [f32], width: usize));

/// Lanes of the reductions below: eight partial results let the compiler vectorise them
/// (a single running sum or max would fix the order of operations).
const LANES: usize = 8;

#[inline(always)]
fn lane_sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for j in 0..LANES {
            acc[j] += c[j];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline(always)]
fn lane_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for c in chunks {
        for j in 0..LANES {
            acc[j] = if c[j] > acc[j] { c[j] } else { acc[j] };
        }
    }
    acc.iter().copied().fold(tail, f32::max)
}

#[inline(always)]
fn layer_norm_generic(x: &mut [f32], n: &Norm, eps: f32) {
    let h = n.gain.len();
    for row in x.chunks_exact_mut(h) {
        let mean = lane_sum(row) / h as f32;
        for v in row.iter_mut() {
            *v -= mean;
        }
        let mut acc = [0.0f32; LANES];
        for c in row.chunks_exact(LANES) {
            for j in 0..LANES {
                acc[j] += c[j] * c[j];
            }
        }
        let tail: f32 = row.chunks_exact(LANES).remainder().iter().map(|v| v * v).sum();
        let var = (acc.iter().sum::<f32>() + tail) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&n.gain).zip(&n.bias) {
            *v = *v * inv * g + b;
        }
    }
}

/// `0.5 · x · (1 + erf(x / √2))`, BERT's exact GELU.
#[inline(always)]
fn gelu_generic(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

#[inline(always)]
fn softmax_rows_generic(x: &mut [f32], width: usize) {
    for row in x.chunks_exact_mut(width) {
        let max = lane_max(row);
        for v in row.iter_mut() {
            *v = exp(*v - max);
        }
        let inv = 1.0 / lane_sum(row);
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

/// erf by the rational approximation Eigen and TensorFlow use for `f32` (inputs clamped to
/// ±4, where erf is ±1 in `f32`). Branch-free, so loops over it vectorise.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_600_1e-3;
    p = x2 * p + -1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    x * p / q
}

/// e^x by range reduction to `[-ln2/2, ln2/2]` and Cephes' degree-6 polynomial; relative
/// error about 1e-7. Branch-free; inputs below -87 give (nearly) 0.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round to nearest by the 1.5·2²³ trick (no rounding instruction needed); the sum's low
    // mantissa bits are then n itself, read without a float-to-int conversion (whose
    // saturating `as` does not vectorise).
    let t = x * std::f32::consts::LOG2_E + 12_582_912.0;
    let n = t - 12_582_912.0;
    let n_int = t.to_bits() as i32 - 0x4B40_0000;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    y * f32::from_bits(((n_int + 127) << 23) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erf_reference(x: f64) -> f64 {
        // Abramowitz–Stegun 7.1.26 is too coarse; integrate instead (Simpson, fine grid).
        let steps = 20_000;
        let h = x / steps as f64;
        let f = |t: f64| (-t * t).exp();
        let mut s = f(0.0) + f(x);
        for i in 1..steps {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn erf_is_accurate_to_f32_precision() {
        let mut worst = 0.0f64;
        for i in -600..=600 {
            let x = i as f64 / 100.0;
            worst = worst.max((erf(x as f32) as f64 - erf_reference(x)).abs());
        }
        assert!(worst < 5e-7, "max |erf error| {worst} (a few f32 ulps)");
    }

    #[test]
    fn exp_is_accurate_to_f32_precision() {
        let mut worst = 0.0f64;
        for i in -8_700..=8_800 {
            let x = i as f32 / 100.0;
            let want = (x as f64).exp();
            worst = worst.max((exp(x) as f64 - want).abs() / want);
        }
        assert!(worst < 3e-7, "max relative exp error {worst}");
        assert!(exp(-1e9) < 1e-37);
    }
}
