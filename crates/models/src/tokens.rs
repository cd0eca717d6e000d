use ragctx_core::TokenCounter;
use tiktoken_rs::CoreBPE;

/// Counts tokens with tiktoken's `cl100k_base` (embedded in the binary; no download).
pub struct Cl100kCounter {
    bpe: CoreBPE,
}

impl Cl100kCounter {
    pub fn new() -> Self {
        Cl100kCounter { bpe: tiktoken_rs::cl100k_base().expect("cl100k_base ships inside tiktoken-rs") }
    }
}

impl Default for Cl100kCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenCounter for Cl100kCounter {
    fn name(&self) -> &str {
        "cl100k_base"
    }
    fn count(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }
}
