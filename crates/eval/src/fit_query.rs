//! `ragctx eval fit-query`: the follow-up query learned from data (issue 26, item 3).
//!
//! A follow-up's search vector is the question's embedding plus the two user questions before
//! it and the centroid of the chunks the previous turn showed, each with a weight
//! ([`QueryWeights`]). This fits the three weights on MTRAG for recall: for every turn with
//! gold passages and an earlier question, the share of its gold passages among the top `k`
//! chunks of its domain (exact cosine search, no exclusion), over a grid of weights.
//! Conversations fall into [`FOLDS`] folds by a hash of their id; each fold is held out once,
//! the grid point best on the other folds is scored on it, beside the hand-set 1 : ¼ : ⅛ mix.
//! Only the held-out folds' figures are reported. The weights written are the grid point best
//! on every conversation (or on all but `--hold-out K`, so `eval mtrag --fold K` measures them
//! on conversations they never saw).
//!
//! The previous turn's shown chunks are approximated by the top 8 of the previous question
//! alone (what a plain turn would show): the fit needs no replay, and the engine's own turns
//! use what they really showed.

use crate::data::conversations;
use crate::error::{bail, write_file, Error, Result};
use crate::progress::Terminal;
use ragctx_app::config::Settings;
use ragctx_core::TokenCounter;
use ragctx_engine::ingest::embed_chunks;
use ragctx_engine::QueryWeights;
use ragctx_ingest::parse_jsonl;
use ragctx_models::Cl100kCounter;
use ragctx_store::DataDirCache;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

/// Folds of the cross-validation, by conversation.
pub const FOLDS: u64 = 5;

/// The fold of a conversation: a hash of its id (stable across runs and machines).
pub fn fold_of(conversation: &str) -> u64 {
    ragctx_core::fx_hash(conversation) % FOLDS
}

/// The grid: weights of the question before, the one before that, and the working set.
const EARLIER_1: [f32; 6] = [0.0, 0.125, 0.25, 0.5, 0.75, 1.0];
const EARLIER_2: [f32; 4] = [0.0, 0.125, 0.25, 0.5];
const WORKING_SET: [f32; 5] = [0.0, 0.125, 0.25, 0.5, 1.0];

/// Chunks the previous turn is taken to have shown (its question's plain top 8).
const SHOWN: usize = 8;

/// Options of `eval fit-query`.
pub struct FitOptions {
    /// Conversations file (turns.jsonl format).
    pub turns: PathBuf,
    /// Folder holding `corpus_DOMAIN.jsonl`.
    pub corpus_dir: PathBuf,
    /// Domains (all in the turns file when empty).
    pub domains: Vec<String>,
    /// Recall is counted in the top `k`.
    pub k: usize,
    /// Fit the written weights on every fold but this one.
    pub hold_out: Option<u64>,
    /// Where to write the weights file (`crates/engine/query-weights.json` ships).
    pub out: Option<PathBuf>,
    /// The command line, recorded in the file.
    pub command: String,
}

/// One turn to fit on: its fold and, per part of the query, its cosines to every chunk of the
/// domain (the search vector's scores are their weighted sum: a ranking does not change when
/// the vector is scaled, so normalising is not needed to rank).
struct Case {
    fold: u64,
    gold: Vec<usize>,
    question: Vec<f32>,
    earlier: Vec<Vec<f32>>,
    centroid: Vec<f32>,
}

fn dot_all(chunks: &[f32], dim: usize, v: &[f32]) -> Vec<f32> {
    chunks.chunks_exact(dim).map(|c| c.iter().zip(v).map(|(a, b)| a * b).sum()).collect()
}

/// Indices of the `k` largest scores.
fn top(scores: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    let k = k.min(idx.len());
    if k == 0 {
        return Vec::new();
    }
    idx.select_nth_unstable_by(k - 1, |&a, &b| scores[b].total_cmp(&scores[a]));
    idx.truncate(k);
    idx
}

fn grid() -> Vec<QueryWeights> {
    let mut out = Vec::new();
    for &a in &EARLIER_1 {
        for &b in &EARLIER_2 {
            for &c in &WORKING_SET {
                out.push(QueryWeights { earlier: [a, b], working_set: c });
            }
        }
    }
    out
}

/// Recall@k of every grid point on one case.
fn recalls(case: &Case, grid: &[QueryWeights], k: usize) -> Vec<f64> {
    let gold: HashSet<usize> = case.gold.iter().copied().collect();
    let mut scores = vec![0.0f32; case.question.len()];
    grid.iter()
        .map(|w| {
            for (i, s) in scores.iter_mut().enumerate() {
                *s = case.question[i]
                    + case.earlier.iter().zip(w.earlier).map(|(e, x)| x * e[i]).sum::<f32>()
                    + w.working_set * case.centroid[i];
            }
            top(&scores, k).iter().filter(|i| gold.contains(i)).count() as f64 / gold.len() as f64
        })
        .collect()
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// The grid point with the best mean recall over `cases` (ties: the earlier point, so the
/// smaller weights).
fn best(table: &[(u64, Vec<f64>)], keep: impl Fn(u64) -> bool, points: usize) -> (usize, f64) {
    (0..points)
        .map(|p| (p, mean(table.iter().filter(|(f, _)| keep(*f)).map(|(_, r)| r[p]))))
        .fold((0, f64::MIN), |a, b| if b.1 > a.1 + 1e-12 { b } else { a })
}

/// Fits, cross-validates, prints the folds and writes the weights file.
pub fn run(settings: &Settings, opts: &FitOptions) -> Result<()> {
    if opts.k == 0 {
        bail!("--k must be at least 1");
    }
    if let Some(h) = opts.hold_out.filter(|&h| h >= FOLDS) {
        bail!("--hold-out {h}: folds are 0..{}", FOLDS - 1);
    }
    let convs = conversations(&opts.turns, &opts.domains)?;
    if convs.is_empty() {
        bail!("no conversations for domains {:?} in {}", opts.domains, opts.turns.display());
    }
    let embedder = ragctx_app::app::embedder(settings)?;
    let counter = Cl100kCounter::new();
    let dim = embedder.dimension();
    let mut domains: Vec<&str> = convs.iter().map(|c| c.domain.as_str()).collect();
    domains.sort_unstable();
    domains.dedup();
    let mut cases: Vec<Case> = Vec::new();
    for domain in &domains {
        let path = opts.corpus_dir.join(format!("corpus_{domain}.jsonl"));
        let bytes = std::fs::read(&path).map_err(|source| Error::Read { path: path.clone(), source })?;
        let read = parse_jsonl(&path.display().to_string(), &bytes)?;
        eprintln!("{domain}: {} passages (embeddings cached in {})", read.len(), settings.data_dir().display());
        let cache = DataDirCache::At(settings.data_dir().to_owned());
        let embedded = embed_chunks(
            embedder.as_ref(),
            &counter as &dyn TokenCounter,
            Some(&cache),
            &Terminal::default(),
            read,
            false,
        )?;
        let index: HashMap<&str, usize> =
            embedded.chunks.iter().enumerate().map(|(i, c)| (c.chunk.id.as_str(), i)).collect();
        let matrix: Vec<f32> = embedded.chunks.iter().flat_map(|c| c.vector.iter().copied()).collect();
        for conv in convs.iter().filter(|c| c.domain == *domain) {
            let vectors = embedder.embed_queries(&conv.messages.iter().map(String::as_str).collect::<Vec<_>>())?;
            for (i, q) in vectors.iter().enumerate().skip(1) {
                let Some((gold, _)) = conv.gold.get(&(i + 1)) else { continue };
                let gold: Vec<usize> = gold.iter().filter_map(|g| index.get(g.as_str()).copied()).collect();
                if gold.is_empty() {
                    continue;
                }
                let earlier: Vec<&Vec<f32>> = vectors[..i].iter().rev().take(2).collect();
                let shown = top(&dot_all(&matrix, dim, earlier[0]), SHOWN);
                let mut centroid = vec![0.0f32; dim];
                for &s in &shown {
                    centroid.iter_mut().zip(&matrix[s * dim..(s + 1) * dim]).for_each(|(c, x)| *c += x);
                }
                let norm = centroid.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
                centroid.iter_mut().for_each(|x| *x /= norm);
                cases.push(Case {
                    fold: fold_of(&conv.id),
                    gold,
                    question: dot_all(&matrix, dim, q),
                    earlier: earlier.iter().map(|e| dot_all(&matrix, dim, e)).collect(),
                    centroid: dot_all(&matrix, dim, &centroid),
                });
            }
        }
    }
    if cases.is_empty() {
        bail!("no turn with gold passages and an earlier question");
    }
    let points = grid();
    let hand = points.iter().position(|w| *w == QueryWeights::HAND_SET).expect("the hand-set mix is on the grid");
    eprintln!("{} turns, {} grid points", cases.len(), points.len());
    let table: Vec<(u64, Vec<f64>)> = cases.iter().map(|c| (c.fold, recalls(c, &points, opts.k))).collect();
    let mut folds = Vec::new();
    for f in 0..FOLDS {
        let (chosen, train) = best(&table, |x| x != f, points.len());
        let held: Vec<&Vec<f64>> = table.iter().filter(|(x, _)| *x == f).map(|(_, r)| r).collect();
        let learned = mean(held.iter().map(|r| r[chosen]));
        let hand_set = mean(held.iter().map(|r| r[hand]));
        folds.push(serde_json::json!({
            "fold": f, "held_out_turns": held.len(), "chosen": points[chosen], "train_recall": train,
            "held_out_recall": learned, "hand_set_held_out_recall": hand_set, "gain": learned - hand_set,
        }));
    }
    let gains: Vec<f64> = folds.iter().map(|f| f["gain"].as_f64().unwrap_or(0.0)).collect();
    let gain_mean = mean(gains.iter().copied());
    let gain_sd = (mean(gains.iter().map(|g| (g - gain_mean).powi(2)))).sqrt();
    let (chosen, fit_recall) = best(&table, |x| opts.hold_out != Some(x), points.len());
    let weights = points[chosen];
    let conversations_per_domain: BTreeMap<&str, usize> =
        domains.iter().map(|d| (*d, convs.iter().filter(|c| c.domain == *d).count())).collect();
    let report = serde_json::json!({
        "version": 1,
        "weights": weights,
        "objective": format!("recall@{} of MTRAG gold passages: exact cosine search of the turn's domain, no exclusion; turns with gold passages and an earlier question", opts.k),
        "k": opts.k,
        "turns": cases.len(),
        "conversations_per_domain": conversations_per_domain,
        "grid": {"earlier_1": EARLIER_1, "earlier_2": EARLIER_2, "working_set": WORKING_SET},
        "hand_set": QueryWeights::HAND_SET,
        "hold_out_fold": opts.hold_out,
        "fit_recall": fit_recall,
        "hand_set_recall": mean(table.iter().filter(|(x, _)| opts.hold_out != Some(*x)).map(|(_, r)| r[hand])),
        "cross_validation": {
            "folds": folds,
            "held_out_gain_mean": gain_mean,
            "held_out_gain_sd": gain_sd,
            "held_out_gain_min": gains.iter().copied().fold(f64::MAX, f64::min),
            "held_out_gain_max": gains.iter().copied().fold(f64::MIN, f64::max),
        },
        "command": opts.command,
    });
    println!(
        "| fold | held-out turns | chosen (earlier 1, earlier 2, working set) | held-out recall@{k} | hand-set | gain |\n|---:|---:|---|---:|---:|---:|",
        k = opts.k
    );
    for f in report["cross_validation"]["folds"].as_array().into_iter().flatten() {
        let w = &f["chosen"];
        println!(
            "| {} | {} | {}, {}, {} | {:.3} | {:.3} | {:+.3} |",
            f["fold"],
            f["held_out_turns"],
            w["earlier"][0],
            w["earlier"][1],
            w["working_set"],
            f["held_out_recall"].as_f64().unwrap_or(0.0),
            f["hand_set_held_out_recall"].as_f64().unwrap_or(0.0),
            f["gain"].as_f64().unwrap_or(0.0)
        );
    }
    println!(
        "held-out gain over the hand-set mix: mean {gain_mean:+.3}, sd {gain_sd:.3}; weights written: earlier {:?}, working set {}",
        weights.earlier, weights.working_set
    );
    if let Some(out) = &opts.out {
        write_file(out, serde_json::to_string_pretty(&report)? + "\n")?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_and_folds() {
        assert_eq!(
            {
                let mut t = top(&[0.1, 0.9, 0.5, 0.7], 2);
                t.sort_unstable();
                t
            },
            [1, 3]
        );
        assert!(top(&[0.1], 0).is_empty());
        assert_eq!(fold_of("abc"), fold_of("abc"));
        assert!((0..200).map(|i| fold_of(&format!("conv-{i}"))).collect::<HashSet<_>>().len() == FOLDS as usize);
        assert!(grid().contains(&QueryWeights::HAND_SET), "the hand-set mix is a grid point");
    }

    #[test]
    fn the_best_point_is_chosen_on_the_kept_folds_only() {
        // Point 1 wins on fold 0, point 0 on fold 1.
        let table = vec![(0, vec![0.2, 0.9]), (1, vec![0.8, 0.1])];
        assert_eq!(best(&table, |f| f != 0, 2).0, 0);
        assert_eq!(best(&table, |f| f != 1, 2).0, 1);
    }
}
