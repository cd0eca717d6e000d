//! Statistics and reproducible randomness shared by the evaluations and benchmarks.

/// xorshift64: reproducible sampling without a dependency (the seed must not be 0).
pub struct Rng(pub u64);
impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// A number in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
    }
}

/// This process's resident memory now (`VmRSS`), in MB; `None` off Linux.
pub fn rss_mb() -> Option<f64> {
    status_kb("VmRSS:").map(|kb| kb / 1024.0)
}

/// This process's peak resident memory (`VmHWM`) since it started or since
/// [`reset_peak_rss`], in MB; `None` off Linux.
pub fn peak_rss_mb() -> Option<f64> {
    status_kb("VmHWM:").map(|kb| kb / 1024.0)
}

/// This process's resident memory now, split: anonymous (its own heap) and file-backed
/// (mapped files' pages it holds), in MB; `None` off Linux.
pub fn rss_split_mb() -> Option<(f64, f64)> {
    Some((status_kb("RssAnon:")? / 1024.0, status_kb("RssFile:")? / 1024.0))
}

/// Starts the peak over from the resident memory now (Linux's `clear_refs` 5); false when
/// it could not (the peak is then the process's own).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn status_kb(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// `v` scaled to unit length.
pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// `v` with uniform noise of ±`amount` per component, scaled to unit length.
pub fn noisy(v: &[f32], rng: &mut Rng, amount: f32) -> Vec<f32> {
    normalise(v.iter().map(|x| x + amount * rng.unit()).collect())
}

/// The `p` quantile (0–1) of `sorted` by nearest rank; 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The recall a query must reach to count as held: a path holds a row of `bench search`
/// when [`held`] is at least 0.95 (issue 41's bar: recall ≥ 0.95 for ≥ 95% of queries).
pub const HELD_AT: f64 = 0.95;

/// The share of `recalls` (one per query) at or above [`HELD_AT`]; 1 when empty.
pub fn held(recalls: &[f64]) -> f64 {
    if recalls.is_empty() {
        return 1.0;
    }
    recalls.iter().filter(|&&r| r >= HELD_AT - 1e-9).count() as f64 / recalls.len() as f64
}

/// The real vectors' distribution, fitted: their mean and covariance (every principal
/// component at its own variance), sampled as `mean + L z` (`L` the covariance's Cholesky
/// factor, `z` standard normal) and normalised. `bench search --scale N --generator fitted`
/// fills an index with it: points spread as the corpus spreads, without the tight clusters of
/// near-copies that jittered copies make.
pub struct Fitted {
    dim: usize,
    mean: Vec<f64>,
    /// Lower triangle, row-major.
    lower: Vec<f64>,
}

impl Fitted {
    /// Fits `vectors` (at least two, of one dimension). The covariance gets a ridge of
    /// 1e-6 × its mean variance on the diagonal, so a rank-deficient sample still factors.
    pub fn of<'a>(vectors: impl Iterator<Item = &'a [f32]> + Clone) -> Option<Fitted> {
        let dim = vectors.clone().next()?.len();
        let mut n = 0usize;
        let mut mean = vec![0f64; dim];
        for v in vectors.clone() {
            n += 1;
            mean.iter_mut().zip(v).for_each(|(m, &x)| *m += x as f64);
        }
        if n < 2 {
            return None;
        }
        mean.iter_mut().for_each(|m| *m /= n as f64);
        let mut cov = vec![0f64; dim * dim];
        let mut centred = vec![0f64; dim];
        for v in vectors {
            centred.iter_mut().zip(v.iter().zip(&mean)).for_each(|(c, (&x, m))| *c = x as f64 - m);
            for i in 0..dim {
                let ci = centred[i];
                let row = &mut cov[i * dim..i * dim + i + 1];
                row.iter_mut().zip(&centred[..=i]).for_each(|(r, &cj)| *r += ci * cj);
            }
        }
        cov.iter_mut().for_each(|c| *c /= (n - 1) as f64);
        let ridge = 1e-6 * (0..dim).map(|i| cov[i * dim + i]).sum::<f64>() / dim as f64;
        // Cholesky–Banachiewicz on the lower triangle.
        let mut lower = vec![0f64; dim * dim];
        for i in 0..dim {
            for j in 0..=i {
                let dot: f64 = (0..j).map(|k| lower[i * dim + k] * lower[j * dim + k]).sum();
                if i == j {
                    let d = cov[i * dim + i] + ridge - dot;
                    lower[i * dim + i] = d.max(ridge).sqrt();
                } else {
                    lower[i * dim + j] = (cov[i * dim + j] - dot) / lower[j * dim + j];
                }
            }
        }
        Some(Fitted { dim, mean, lower })
    }

    /// One sample, normalised.
    pub fn sample(&self, rng: &mut Rng) -> Vec<f32> {
        let z: Vec<f64> = (0..self.dim).map(|_| gaussian(rng)).collect();
        let v = (0..self.dim)
            .map(|i| {
                let row = &self.lower[i * self.dim..i * self.dim + i + 1];
                (self.mean[i] + row.iter().zip(&z).map(|(l, z)| l * z).sum::<f64>()) as f32
            })
            .collect();
        normalise(v)
    }
}

/// A standard normal number (Box–Muller).
fn gaussian(rng: &mut Rng) -> f64 {
    let u1 = ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod fitted_tests {
    use super::*;

    /// Samples of a fit have the fitted mean and covariance (before normalising; tested on
    /// vectors far from the origin's scale, so normalising changes little of the direction).
    #[test]
    fn samples_follow_the_fitted_mean_and_covariance() {
        let mut rng = Rng(11);
        // A correlated 3-d cloud: y = 2x + noise, z independent, around (5, 10, 0).
        let data: Vec<Vec<f32>> = (0..20_000)
            .map(|_| {
                let x = gaussian(&mut rng) as f32;
                vec![5.0 + x, 10.0 + 2.0 * x + 0.1 * gaussian(&mut rng) as f32, gaussian(&mut rng) as f32]
            })
            .collect();
        let fit = Fitted::of(data.iter().map(Vec::as_slice)).unwrap();
        assert!((fit.mean[0] - 5.0).abs() < 0.05 && (fit.mean[1] - 10.0).abs() < 0.1, "{:?}", fit.mean);
        // L Lᵀ is the covariance: var x ≈ 1, cov(x, y) ≈ 2, var z ≈ 1, cov(x, z) ≈ 0.
        let l = |i: usize, j: usize| fit.lower[i * 3 + j];
        let cov = |i: usize, j: usize| (0..3).map(|k| l(i, k) * l(j, k)).sum::<f64>();
        assert!((cov(0, 0) - 1.0).abs() < 0.05 && (cov(0, 1) - 2.0).abs() < 0.1 && cov(0, 2).abs() < 0.05);
        assert!((cov(2, 2) - 1.0).abs() < 0.05);
        // Samples point where the data points: the direction of (5, 10, 0), give or take.
        let s = fit.sample(&mut rng);
        let unit = normalise(vec![5.0, 10.0, 0.0]);
        assert!(s.iter().zip(&unit).map(|(a, b)| a * b).sum::<f32>() > 0.8, "{s:?}");
        assert!((s.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5, "normalised");
    }
}

#[cfg(test)]
mod held_tests {
    use super::*;

    /// A query holds at 0.95 and above (recall@10 comes in tenths: 0.9 does not hold); a row
    /// without queries has none that miss.
    #[test]
    fn the_held_share_counts_queries_at_or_above_the_bar() {
        assert_eq!(held(&[1.0, 0.9, 0.95, 0.8]), 0.5);
        assert_eq!(held(&[1.0; 19].iter().copied().chain([0.9]).collect::<Vec<_>>()), 0.95);
        assert_eq!(held(&[0.94999]), 0.0);
        assert_eq!(held(&[]), 1.0);
    }
}
