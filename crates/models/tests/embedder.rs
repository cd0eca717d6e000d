//! The in-process MiniLM must reproduce sentence-transformers: vectors computed once by
//! `scripts/make-embedding-fixture.py` are the reference (cosine >= 0.9999 each).

use ragctx_core::{Embedder, Error, TokenCounter};
use ragctx_models::{Cl100kCounter, MiniLmEmbedder};
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    std::env::var_os("RAGCTX_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2"))
}

#[test]
fn matches_sentence_transformers_reference_vectors() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/minilm_reference.json")).expect("fixture parses");
    let embedder = MiniLmEmbedder::load(&model_dir()).expect("model installed by scripts/setup");
    assert_eq!(embedder.dimension(), 384);
    let cases = fixture["cases"].as_array().unwrap();
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    // Batched (mixed lengths, so padding is exercised) and one at a time must both match.
    let batched = embedder.embed(&texts).unwrap();
    let mut worst = 1.0f32;
    for (case, got) in cases.iter().zip(&batched) {
        let want: Vec<f32> = case["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let single = &embedder.embed(&[case["text"].as_str().unwrap()]).unwrap()[0];
        for v in [got, single] {
            let cos: f32 = v.iter().zip(&want).map(|(a, b)| a * b).sum();
            let norm: f32 = v.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "L2-normalised");
            assert!(cos >= 0.9999, "cosine {cos} for {:?}", case["text"]);
            worst = worst.min(cos);
        }
    }
    eprintln!("lowest cosine to sentence-transformers: {worst:.7}");
}

#[test]
fn missing_model_names_the_setup_command() {
    let err = MiniLmEmbedder::load("/nonexistent/model-dir".as_ref()).err().expect("fails");
    assert!(matches!(err, Error::ModelMissing { .. }));
    assert!(err.to_string().contains("scripts/setup"), "{err}");
}

#[test]
fn cl100k_counts_real_tokens() {
    let c = Cl100kCounter::new();
    assert_eq!(c.count("hello world"), 2);
    assert_eq!(c.count(""), 0);
    assert!(c.count("再给我看看刚才那个") > 5);
}
