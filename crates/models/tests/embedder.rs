//! The in-process MiniLM must reproduce sentence-transformers: vectors computed once by
//! `scripts/make-embedding-fixture.py` are the reference (cosine >= 0.9999 each).

use ragctx_core::{Embedder, Error, TokenCounter};
use ragctx_models::{Cl100kCounter, MiniLmEmbedder, Precision};
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

/// Int8 is an approximation: each vector stays close to sentence-transformers' (the bound
/// says how close, measured 0.99+), its model id differs from fp32's (so cached vectors of
/// one are never used for the other), and the ranking of the fixture's texts by similarity
/// to the first is mostly kept.
#[test]
fn int8_stays_close_to_the_reference_and_says_it_is_int8() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/minilm_reference.json")).expect("fixture parses");
    let fp32 = MiniLmEmbedder::load(&model_dir()).expect("model installed by scripts/setup");
    let int8 = MiniLmEmbedder::load(&model_dir()).unwrap().with_precision(Precision::Int8);
    assert_eq!(int8.model_id(), format!("{}/int8", fp32.model_id()));
    let cases = fixture["cases"].as_array().unwrap();
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    let got = int8.embed(&texts).unwrap();
    let mut worst = 1.0f32;
    for (case, v) in cases.iter().zip(&got) {
        let want: Vec<f32> = case["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let cos: f32 = v.iter().zip(&want).map(|(a, b)| a * b).sum();
        assert!(cos >= 0.98, "int8 cosine {cos} for {:?}", case["text"]);
        worst = worst.min(cos);
    }
    let single = int8.embed(&[texts[1]]).unwrap();
    let same: f32 = single[0].iter().zip(&got[1]).map(|(a, b)| a * b).sum();
    assert!(same > 0.99999, "int8 vectors do not depend on the batch: {same}");
    eprintln!("lowest int8 cosine to sentence-transformers: {worst:.5}");
}

/// A passage's sentences pooled from its own encoding (late chunking): the whole passage is
/// still sentence-transformers' vector, each sentence's vector is close to the sentence
/// embedded alone (it reads its neighbours too), nearer its own than the other sentences,
/// and a span with no token of its own is embedded alone.
#[test]
fn sentences_pool_from_their_passage() {
    let e = MiniLmEmbedder::load(&model_dir()).expect("model installed by scripts/setup");
    let text = "Guinea pigs need vitamin C every day. The stock market fell sharply on Monday. Rain is expected.";
    let spans = ragctx_core::text::sentence_spans(text);
    assert_eq!(spans.len(), 3);
    let out = e.embed_spans(&[text, " "], &[spans.clone(), vec![(0, 1)]]).unwrap();
    let whole = &e.embed(&[text]).unwrap()[0];
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(cos(&out[0].0, whole) > 0.99999, "the passage's own vector is unchanged");
    let alone = e.embed(&spans.iter().map(|&(a, b)| &text[a..b]).collect::<Vec<_>>()).unwrap();
    for (i, v) in out[0].1.iter().enumerate() {
        let own = cos(v, &alone[i]);
        // A three-word sentence read in its passage measured 0.55; longer ones more.
        assert!(own > 0.5, "sentence {i}: cosine {own} to itself embedded alone");
        for (j, other) in alone.iter().enumerate().filter(|(j, _)| *j != i) {
            assert!(own > cos(v, other), "sentence {i} nearer sentence {j} than itself");
        }
    }
    assert_eq!(out[1].1.len(), 1, "a span without tokens still gets a vector");
    let blank = &e.embed(&[" "]).unwrap()[0];
    assert!(cos(&out[1].1[0], blank) > 0.9999, "a span without tokens is embedded alone");
    // A passage longer than the encoder reads: its last sentence, past the truncation, is
    // embedded alone (not pooled from a head the encoding happened to reach).
    // 40 × 6 tokens, then a sentence of about 30 that the 256-token window cuts in two.
    let last = "The last sentence names a harbour and goes on about ships, ropes, sails, gulls, tides, docks, cranes, nets and boats.";
    let long = format!("{}{last}", "Many words fill this passage. ".repeat(40));
    let spans = ragctx_core::text::sentence_spans(&long);
    let (a, b) = *spans.last().unwrap();
    let got = e.embed_spans(&[&long], std::slice::from_ref(&spans)).unwrap();
    let alone = &e.embed(&[&long[a..b]]).unwrap()[0];
    assert!(cos(got[0].1.last().unwrap(), alone) > 0.9999, "past the truncation: embedded alone");
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

/// A copy of the installed model directory with `edit` applied to one of its description
/// files (the weights linked, not copied).
fn model_variant(name: &str, file: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let src = model_dir();
    let dst = std::env::temp_dir().join(format!("ragctx-model-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(dst.join("1_Pooling")).unwrap();
    for f in ["model.safetensors", "tokenizer.json", "config.json", "modules.json", "sentence_bert_config.json"] {
        std::os::unix::fs::symlink(src.join(f), dst.join(f)).unwrap();
    }
    std::fs::copy(src.join("1_Pooling/config.json"), dst.join("1_Pooling/config.json")).unwrap();
    let path = dst.join(file);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    dst
}

/// A model whose own files describe pooling or modules this encoder does not run is refused
/// at load with a message naming the file, never run with the wrong pooling.
#[test]
fn models_described_otherwise_are_refused() {
    let cls = model_variant("cls", "1_Pooling/config.json", |v| {
        v["pooling_mode_mean_tokens"] = false.into();
        v["pooling_mode_cls_token"] = true.into();
    });
    let no_norm = model_variant("nonorm", "modules.json", |v| {
        v.as_array_mut().unwrap().pop();
    });
    for (dir, file) in [(&cls, "1_Pooling/config.json"), (&no_norm, "modules.json")] {
        let err = MiniLmEmbedder::load(dir).err().expect("refused");
        assert!(matches!(err, Error::Model(_)), "{err}");
        assert!(err.to_string().contains(file) && err.to_string().contains("mean pooling"), "{err}");
    }
    // The sequence length is the model's own: 128 here, so a long text is cut at 128 tokens.
    let short = model_variant("len128", "sentence_bert_config.json", |v| v["max_seq_length"] = 128.into());
    let e = MiniLmEmbedder::load(&short).expect("loads");
    let long = "word ".repeat(400);
    assert_eq!(e.token_counts(&[&long]).unwrap(), [128]);
    assert!(e.model_id().contains("/128/"), "{}", e.model_id());
    assert_eq!(MiniLmEmbedder::load(&model_dir()).unwrap().token_counts(&[&long]).unwrap(), [256]);
    for d in [cls, no_norm, short] {
        let _ = std::fs::remove_dir_all(d);
    }
}
