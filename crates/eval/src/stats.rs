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
