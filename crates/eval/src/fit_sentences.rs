//! `ragctx eval fit-sentences`: the sentence scorer of `compress learned` learned from MTRAG's
//! development split (DESIGN §11, issue 64).
//!
//! Every conversation is replayed as `eval mtrag`'s `engine` row replays it (the configured
//! defaults, engine memory, the question as asked; blocks kept whole, so the replay does not
//! depend on the scorer it replaces); each turn's candidate blocks are judged sentence by
//! sentence, and the engine logs every sentence with its features
//! ([`ragctx_engine::sentences::FEATURES`]). A sentence's label comes from the turn's gold
//! passages and reference answer only: it carries the turn when its chunk is a gold passage
//! and it holds at least [`MIN_SHARED`] of the reference answer's content terms (all of them
//! for an answer with fewer); every other sentence — of retrieved passages that are not gold,
//! and of gold passages that do not hold the answer — does not. Turns without gold passages
//! or a reference answer are not used.
//!
//! A logistic model (features standardised, L2-penalised, full-batch gradient descent from
//! zero: deterministic) is fitted with its threshold: the probability at which the training
//! turns keep [`RECALL`] of their answer-bearing sentences. Conversations fall into five folds
//! by a hash of their id ([`crate::fit_query::fold_of`]); each fold is held out once and the
//! model fitted on the others is scored on it (AUC, the share of answer-bearing sentences kept
//! at the threshold, the share of all sentences kept). The weights written are fitted on every
//! conversation, or on all but `--hold-out K` so that `eval mtrag --fold K --sentence-scorer
//! FILE` measures them on conversations they never saw.

use crate::data::conversations;
use crate::error::{bail, write_file, Result};
use crate::mtrag::domain_store;
use crate::mtrag_metrics::{bears_answer, content_terms};
use ragctx_app::config::Settings;
use ragctx_core::{Compress, Memory, SessionId, SessionStore};
use ragctx_engine::sentences::{Scorer, SentenceLog, FEATURES, N};
use ragctx_store::DataDir;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::mtrag_metrics::MIN_SHARED;

/// The share of the training turns' answer-bearing sentences the threshold keeps.
pub const RECALL: f64 = 0.9;

/// The L2 penalty on the (standardised) weights.
const L2: f64 = 1e-3;

/// Gradient steps.
const STEPS: usize = 400;

/// Options of `eval fit-sentences`.
pub struct FitSentencesOptions {
    /// Conversations file (turns.jsonl format).
    pub turns: PathBuf,
    /// Folder holding `corpus_DOMAIN.jsonl`.
    pub corpus_dir: PathBuf,
    /// Domains (all in the turns file when empty).
    pub domains: Vec<String>,
    /// Fit the written weights on every fold but this one.
    pub hold_out: Option<u64>,
    /// The share of answer-bearing sentences the threshold keeps.
    pub recall: f64,
    /// Label the answer's sentences in every candidate passage, not only in gold ones.
    pub any_passage: bool,
    /// Where to write the weights file (`crates/engine/sentence-scorer.json` ships).
    pub out: Option<PathBuf>,
    /// The command line, recorded in the file.
    pub command: String,
}

/// One labelled sentence.
struct Example {
    fold: u64,
    x: [f32; N],
    y: bool,
}

/// Replays the conversations, labels their sentences, cross-validates, prints the folds and
/// writes the weights file.
pub fn run(settings: &Settings, opts: &FitSentencesOptions) -> Result<()> {
    use crate::fit_query::{fold_of, FOLDS};
    if let Some(h) = opts.hold_out.filter(|&h| h >= FOLDS) {
        bail!("--hold-out {h}: folds are 0..{}", FOLDS - 1);
    }
    if !(0.5..1.0).contains(&opts.recall) {
        bail!("--recall {}: between 0.5 and 1", opts.recall);
    }
    let convs = conversations(&opts.turns, &opts.domains)?;
    if convs.is_empty() {
        bail!("no conversations for domains {:?} in {}", opts.domains, opts.turns.display());
    }
    let embedder = ragctx_app::app::embedder(settings)?;
    let mut base = crate::replay_settings(settings);
    base.memory = Memory::Engine;
    base.compress = Compress::Learned;
    let sessions_dir = std::env::temp_dir().join(format!("ragctx-fit-sentences-{}", std::process::id()));
    // Removed however the fit ends (declared before the store in it: dropped after it).
    let _removed = RemovedOnDrop(sessions_dir.clone());
    let sessions_data = DataDir::open(&sessions_dir, embedder.dimension())?;
    let sessions: Arc<dyn SessionStore> = Arc::new(sessions_data.session_store());
    let mut analyzer = ragctx_lexical::Analyzer::default();
    let mut domains: Vec<&str> = convs.iter().map(|c| c.domain.as_str()).collect();
    domains.sort_unstable();
    domains.dedup();
    let mut examples: Vec<Example> = Vec::new();
    let mut turns = 0usize;
    for domain in &domains {
        let (store, _) = domain_store(settings, &opts.corpus_dir, domain, embedder.as_ref(), true)?;
        let log: SentenceLog = Arc::new(Mutex::new(Vec::new()));
        let mut engine = ragctx_app::app::engine_over(Arc::new(store), sessions.clone(), embedder.clone());
        engine.sentence_log = Some(log.clone());
        // A scorer that keeps every sentence: the replay's contexts are `compress off`'s, so
        // the sentences judged do not depend on the scorer being replaced.
        engine.sentence_scorer = Arc::new(Scorer { threshold: 0.0, ..(*Scorer::shipped()).clone() });
        for conv in convs.iter().filter(|c| c.domain == *domain) {
            let session = SessionId::parse(&format!("fit-{}", conv.id))?;
            sessions.delete(&session)?;
            for i in 0..conv.messages.len() {
                log.lock().expect("log").clear();
                engine
                    .run(ragctx_engine::TurnInput::new(&session, &conv.messages[i], &base).query(&conv.messages[i]))?;
                let (Some((gold, _)), Some(answer)) = (conv.gold.get(&(i + 1)), conv.answers.get(&(i + 1))) else {
                    continue;
                };
                let answer = content_terms(&mut analyzer, &[answer.as_str()]);
                if answer.is_empty() {
                    continue;
                }
                let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
                turns += 1;
                for row in log.lock().expect("log").drain(..) {
                    let y = (opts.any_passage || gold.contains(row.chunk.as_str()))
                        && bears_answer(&mut analyzer, &row.text, &answer);
                    examples.push(Example { fold: fold_of(&conv.id), x: row.features, y });
                }
            }
        }
        eprintln!("{domain}: {} sentences judged so far", examples.len());
    }
    let positives = examples.iter().filter(|e| e.y).count();
    if positives == 0 {
        bail!("no answer-bearing sentence among {} judged: nothing to learn from", examples.len());
    }
    eprintln!("{turns} turns, {} sentences, {positives} answer-bearing", examples.len());
    let mut folds = Vec::new();
    for f in 0..FOLDS {
        let train: Vec<&Example> = examples.iter().filter(|e| e.fold != f).collect();
        let held: Vec<&Example> = examples.iter().filter(|e| e.fold == f).collect();
        let scorer = fit(&train, opts.recall);
        let m = measure(&scorer, &held);
        folds.push(serde_json::json!({
            "fold": f, "held_out_sentences": held.len(), "held_out_positives": held.iter().filter(|e| e.y).count(),
            "auc": m.auc, "recall_at_threshold": m.recall, "kept_share": m.kept, "precision": m.precision,
            "threshold": scorer.threshold,
        }));
    }
    let fold_mean = |k: &str| folds.iter().map(|f| f[k].as_f64().unwrap_or(0.0)).sum::<f64>() / folds.len() as f64;
    let (auc, recall, kept) = (fold_mean("auc"), fold_mean("recall_at_threshold"), fold_mean("kept_share"));
    let chosen: Vec<&Example> = examples.iter().filter(|e| opts.hold_out != Some(e.fold)).collect();
    let scorer = fit(&chosen, opts.recall);
    let conversations_per_domain: BTreeMap<&str, usize> =
        domains.iter().map(|d| (*d, convs.iter().filter(|c| c.domain == *d).count())).collect();
    let data_revision = {
        let text = crate::error::read_to_string(&opts.turns)?;
        format!("turns.jsonl: fx_hash {:016x}, {} bytes", ragctx_core::fx_hash(&text), text.len())
    };
    let report = serde_json::json!({
        "version": 1,
        "scorer": scorer,
        "label": format!("a sentence of {} holding at least {MIN_SHARED} of the reference answer's content terms (all of a shorter answer's); every other sentence of the turn's candidate blocks is not", if opts.any_passage { "any candidate passage" } else { "a gold passage" }),
        "threshold_rule": format!("the probability at which the training turns keep {} of their answer-bearing sentences", opts.recall),
        "turns": turns,
        "sentences": examples.len(),
        "answer_bearing": positives,
        "conversations_per_domain": conversations_per_domain,
        "hold_out_fold": opts.hold_out,
        "cross_validation": {"folds": folds, "auc_mean": auc, "recall_at_threshold_mean": recall, "kept_share_mean": kept},
        "data": data_revision,
        "command": opts.command,
    });
    println!("| fold | held-out sentences | answer-bearing | AUC | kept of answer-bearing | kept of all | precision |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for f in report["cross_validation"]["folds"].as_array().into_iter().flatten() {
        let g = |k: &str| f[k].as_f64().unwrap_or(0.0);
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            f["fold"],
            f["held_out_sentences"],
            f["held_out_positives"],
            g("auc"),
            g("recall_at_threshold"),
            g("kept_share"),
            g("precision")
        );
    }
    println!("held out (mean of folds): AUC {auc:.3}, answer-bearing kept {recall:.3}, all kept {kept:.3}");
    let weights: Vec<String> = FEATURES.iter().zip(&scorer.weights).map(|(f, w)| format!("{f} {w:+.2}")).collect();
    println!("weights (per standard deviation): {}; threshold {:.3}", weights.join(", "), scorer.threshold);
    if let Some(out) = &opts.out {
        let text = serde_json::to_string_pretty(&report).expect("a JSON value") + "\n";
        write_file(out, text.as_bytes())?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

/// A folder removed when this is dropped.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A logistic model fitted on `examples` with the threshold that keeps `recall` of their
/// positives.
fn fit(examples: &[&Example], recall: f64) -> Scorer {
    let n = examples.len().max(1) as f64;
    let mut mean = [0.0f64; N];
    let mut sd = [0.0f64; N];
    for e in examples {
        for (m, &x) in mean.iter_mut().zip(&e.x) {
            *m += x as f64 / n;
        }
    }
    for e in examples {
        for ((v, &x), m) in sd.iter_mut().zip(&e.x).zip(&mean) {
            *v += (x as f64 - m).powi(2) / n;
        }
    }
    let scale: Vec<f64> = sd.iter().map(|v| v.sqrt().max(1e-6)).collect();
    let z: Vec<[f64; N]> =
        examples.iter().map(|e| std::array::from_fn(|i| (e.x[i] as f64 - mean[i]) / scale[i])).collect();
    let mut w = [0.0f64; N];
    let mut b = 0.0f64;
    // Gradient descent with momentum on the mean log-loss: the standardised features make one
    // step size fit all.
    let (rate, momentum) = (0.5, 0.9);
    let (mut vw, mut vb) = ([0.0f64; N], 0.0f64);
    for _ in 0..STEPS {
        let mut gw = [0.0f64; N];
        let mut gb = 0.0;
        for (x, e) in z.iter().zip(examples) {
            let p = 1.0 / (1.0 + (-(dot(&w, x) + b)).exp());
            let err = p - e.y as u8 as f64;
            for i in 0..N {
                gw[i] += err * x[i] / n;
            }
            gb += err / n;
        }
        for i in 0..N {
            vw[i] = momentum * vw[i] - rate * (gw[i] + L2 * w[i]);
            w[i] += vw[i];
        }
        vb = momentum * vb - rate * gb;
        b += vb;
    }
    let mut scorer = Scorer {
        features: FEATURES.iter().map(|f| f.to_string()).collect(),
        mean: mean.iter().map(|&m| m as f32).collect(),
        scale: scale.iter().map(|&s| s as f32).collect(),
        weights: w.iter().map(|&x| x as f32).collect(),
        bias: b as f32,
        threshold: 0.5,
        neighbours: 1,
    };
    // The threshold: the positives' score at the (1 - recall) quantile.
    let mut pos: Vec<f32> = examples.iter().filter(|e| e.y).map(|e| scorer.score(&e.x)).collect();
    pos.sort_by(f32::total_cmp);
    scorer.threshold = pos.get(((1.0 - recall) * pos.len() as f64) as usize).copied().unwrap_or(0.5);
    scorer
}

fn dot(w: &[f64; N], x: &[f64; N]) -> f64 {
    w.iter().zip(x).map(|(a, b)| a * b).sum()
}

/// A scorer on held-out examples.
struct Measured {
    auc: f64,
    recall: f64,
    kept: f64,
    precision: f64,
}

fn measure(scorer: &Scorer, examples: &[&Example]) -> Measured {
    let scored: Vec<(f32, bool)> = examples.iter().map(|e| (scorer.score(&e.x), e.y)).collect();
    let pos = scored.iter().filter(|s| s.1).count().max(1) as f64;
    let neg = scored.iter().filter(|s| !s.1).count().max(1) as f64;
    // AUC by ranks (ties count half).
    let mut sorted = scored.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        let mid = (i + j + 1) as f64 / 2.0;
        rank_sum += sorted[i..j].iter().filter(|s| s.1).count() as f64 * mid;
        i = j;
    }
    let auc = (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg);
    let kept: Vec<&(f32, bool)> = scored.iter().filter(|s| s.0 >= scorer.threshold).collect();
    Measured {
        auc,
        recall: kept.iter().filter(|s| s.1).count() as f64 / pos,
        kept: kept.len() as f64 / scored.len().max(1) as f64,
        precision: kept.iter().filter(|s| s.1).count() as f64 / kept.len().max(1) as f64,
    }
}
