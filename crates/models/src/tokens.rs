use ragctx_core::TokenCounter;
use tiktoken_rs::CoreBPE;

/// Counts tokens with tiktoken's `cl100k_base` (embedded in the binary; no download).
pub struct Cl100kCounter {
    bpe: &'static CoreBPE,
}

impl Cl100kCounter {
    /// A counter over the process's one parsed `cl100k_base` table (tiktoken's singleton:
    /// parsed on first use, shared by every counter after).
    pub fn new() -> Self {
        Cl100kCounter { bpe: tiktoken_rs::cl100k_base_singleton() }
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
