//! The logic of stages 1–5 of a turn (DESIGN §2), one function each over typed results —
//! [`intent_of`], [`working_set`], [`Engine::query`] and [`Engine::candidates`],
//! [`rank_working_set`], [`dedupe_stage`], [`build_prompt`] — each unit-tested on its own;
//! [`crate::pipeline::STAGES`] runs them over one [`crate::Turn`].

use super::*;
use ragctx_core::SearchReason;

/// Stage 2's result: what the session has consumed, as this turn sees it.
pub struct WorkingSet {
    /// The ids the search excludes (empty for a reshow or a strategy that does not exclude).
    pub exclusion: ExclusionSet,
    /// The chunks of the window and the turn that first showed each: what `engine` memory
    /// may carry and `client` memory points to.
    pub first_shown: HashMap<ChunkId, u64>,
}

/// Stage 3's query: the text searched and the vector searched with.
pub struct Query {
    /// The text embedded and searched (for a reshow, the earlier question it shows again).
    pub text: String,
    /// A reshow: the question it answers again (the last one that was not a reshow).
    pub reshown_question: Option<String>,
    /// The embedding of `text` alone, remembered with the turn.
    pub own_vector: Vec<f32>,
    /// The vector searched with: `own_vector` with earlier questions mixed in.
    pub vector: Vec<f32>,
    /// Earlier questions mixed into `vector` (0, 1 or 2).
    pub mixed: usize,
}

/// Stage 3's candidates, and what grouping and a reshow's order need of them.
pub struct Candidates {
    /// The hits of the search, all rounds (a reshow: the previous turn's chunks by id).
    pub hits: Vec<Hit>,
    /// How the store searched.
    pub path: SearchPath,
    /// Searches run, deeper ones included (0 for a reshow).
    pub rounds: u32,
    /// Why the store took its path, in words.
    pub reason: SearchReason,
    /// Lexical or hybrid retrieval: what each side found.
    pub sides: Option<ragctx_core::RetrievalTrace>,
    /// The documents of the previous turn (a reshow: in its prompt's order).
    pub previous: Vec<DocumentId>,
    /// Per-document quotas above `group_size` (a follow-up's documents; a reshow's).
    pub quotas: HashMap<DocumentId, usize>,
}

/// The evidence before dedupe: the new candidates with, in `engine` memory, the working
/// set's chunks that rank; in `client` memory those become pointers.
pub struct Ranked {
    /// What dedupe and the context are built from.
    pub hits: Vec<Hit>,
    /// `client` memory: one pointer per document of the working set that ranks.
    pub pointers: Vec<context::PointerCandidate>,
    /// `client` memory: the scores of the working set's chunks that rank (each chunk once).
    pub held_scores: Vec<f32>,
}

/// Stage 5's result: the prompt within the budget.
pub struct Built {
    /// The blocks and pointers within the budget, with the markers handed out.
    pub context: context::BuiltContext,
    /// `engine` memory: the earlier turns in the prompt, rendered.
    pub conversation: String,
    /// Tokens of `conversation`.
    pub conversation_tokens: usize,
    /// The whole prompt.
    pub prompt: String,
    /// Tokens of `prompt`.
    pub prompt_tokens: usize,
}

/// Stage 1: the intent the turn runs with — forced by `mode`, or classified.
pub fn intent_of(state: &SessionState, question: &str, settings: &TurnSettings) -> Intent {
    settings.mode.forced().unwrap_or_else(|| intent::classify(question, !state.turns.is_empty()))
}

/// Stage 2: the exclusion set (`given` replaces the one computed from the session, as a
/// replay does) and the working set.
pub fn working_set(
    state: &SessionState,
    intent: Intent,
    settings: &TurnSettings,
    given: Option<ExclusionSet>,
) -> WorkingSet {
    let exclusion = match given {
        Some(e) if settings.strategy.excludes() && intent != Intent::Reshow => e,
        Some(_) => ExclusionSet::default(),
        None => exclusion::exclusion_set(state, intent, settings),
    };
    WorkingSet { exclusion, first_shown: exclusion::first_shown(state, settings.window) }
}

/// Stage 3, within the window: the remembered embeddings of the (up to two) questions before
/// this one that the query mixes in, newest first — none for a reshow, or when
/// `conversation_query` says not to.
pub fn earlier_vectors(
    state: &SessionState,
    intent: Intent,
    settings: &TurnSettings,
    dimension: usize,
) -> Vec<Vec<f32>> {
    // A follow-up's words lean on the questions before it ("What do they eat?"): mix in
    // their remembered embeddings (no extra embedding work).
    if !mixes(intent, settings) {
        return Vec::new();
    }
    exclusion::window_turns(state, settings.window)
        .iter()
        .rev()
        .filter(|t| t.intent != Intent::Reshow)
        .filter_map(|t| t.query_vector.as_ref().map(|v| v.dequantize()))
        .filter(|v| v.len() == dimension)
        .take(MIX_WEIGHTS.len() - 1)
        .collect()
}

/// Whether the turn's query mixes in its context (`conversation_query`; never for a reshow).
fn mixes(intent: Intent, settings: &TurnSettings) -> bool {
    let mix = match settings.conversation_query {
        ConversationQuery::Off => false,
        ConversationQuery::FollowUp => intent == Intent::FollowUp,
        ConversationQuery::Always => true,
    };
    mix && intent != Intent::Reshow
}

/// Stage 3, within the window: the chunks the previous (non-reshow) turn showed, as the
/// normalised mean of their stored vectors — what the conversation is looking at — when the
/// query mixes and the working set has a weight.
pub fn working_centroid(
    state: &SessionState,
    intent: Intent,
    settings: &TurnSettings,
    weights: &QueryWeights,
    vectors: impl FnOnce(&[ChunkId]) -> Result<Vec<Option<Vec<f32>>>>,
    dimension: usize,
) -> Result<Option<Vec<f32>>> {
    if weights.working_set <= 0.0 || !mixes(intent, settings) {
        return Ok(None);
    }
    let Some(last) = exclusion::window_turns(state, settings.window)
        .iter()
        .rev()
        .find(|t| t.intent != Intent::Reshow && !t.is_forget())
    else {
        return Ok(None);
    };
    let mut sum = vec![0.0f32; dimension];
    let mut n = 0;
    for v in vectors(&last.shown_chunks)?.into_iter().flatten().filter(|v| v.len() == dimension) {
        sum.iter_mut().zip(&v).for_each(|(s, x)| *s += x);
        n += 1;
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n == 0 || norm <= f32::MIN_POSITIVE {
        return Ok(None);
    }
    sum.iter_mut().for_each(|x| *x /= norm);
    Ok(Some(sum))
}

/// Stage 3, with the working set: the chunks of the window that the search excluded, scored
/// here (`scored`: those that pass the filter, with their cosines to the query); a chunk ranks
/// when it scores at least as well as the weakest new candidate would. `engine` memory adds
/// them to the candidates, `client` memory turns them into pointers.
pub fn rank_working_set(
    intent: Intent,
    working: &WorkingSet,
    candidates: Vec<Hit>,
    scored: impl FnOnce(&[ChunkId]) -> Result<Vec<Hit>>,
    settings: &TurnSettings,
) -> Result<Ranked> {
    let mut ranking: Vec<Hit> = Vec::new();
    if intent != Intent::Reshow && !working.exclusion.is_empty() && !working.first_shown.is_empty() {
        let mut ids: Vec<ChunkId> = working.first_shown.keys().cloned().collect();
        ids.sort();
        // Over every candidate, the lexical side's too: flooring at the dense side's
        // weakest kept less evidence with hybrid retrieval on MTRAG (bench/README.md).
        let floor = candidates.iter().map(|h| h.score).fold(f32::INFINITY, f32::min);
        ranking = scored(&ids)?
            .into_iter()
            .filter(|h| working.exclusion.excludes(&h.chunk.id, &h.chunk.document_id))
            .filter(|h| h.score >= floor || candidates.is_empty())
            .collect();
        ranking.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.chunk.id.cmp(&b.chunk.id)));
        ranking.truncate(settings.limit * settings.group_size.max(1));
    }
    let mut hits = candidates;
    let (mut pointers, mut held_scores) = (Vec::new(), Vec::new());
    match settings.memory {
        Memory::Engine => hits.extend(ranking),
        Memory::Client => {
            held_scores = ranking.iter().map(|h| h.score).collect();
            pointers = pointer_candidates(ranking, &working.first_shown);
        }
    }
    Ok(Ranked { hits, pointers, held_scores })
}

/// Stage 3, last: a follow-up's new candidates from documents the window showed or cited —
/// their other passages — gain `engaged_prior` on their score (chunks shown before are the
/// working set's, scored as they are). Returns how many candidates gained it.
pub fn engaged_stage(
    state: &SessionState,
    intent: Intent,
    working: &WorkingSet,
    hits: &mut [Hit],
    settings: &TurnSettings,
) -> usize {
    if intent != Intent::FollowUp || settings.engaged_prior <= 0.0 {
        return 0;
    }
    let engaged: std::collections::HashSet<&DocumentId> = exclusion::window_turns(state, settings.window)
        .iter()
        .flat_map(|t| t.shown_documents.iter().chain(&t.cited_documents))
        .collect();
    let mut boosted = 0;
    for h in hits.iter_mut() {
        if engaged.contains(&h.chunk.document_id) && !working.first_shown.contains_key(&h.chunk.id) {
            h.score += settings.engaged_prior;
            boosted += 1;
        }
    }
    boosted
}

/// Stage 3, with `freed_slots keep` (`client` memory, a strategy that ranks chunks): the new
/// candidates and the held chunks that rank, together, cut to the top `limit`; the held ones
/// keep their slots as pointers (a pointer stays while its best chunk is within the cut). So
/// the turn returns only what ranks in the top `limit`. Nothing held ranks: nothing changes
/// (the deeper search's extra documents stay). Returns how many new candidates left.
pub fn keep_slots(
    hits: &mut Vec<Hit>,
    pointers: &mut Vec<context::PointerCandidate>,
    held_scores: &[f32],
    settings: &TurnSettings,
) -> usize {
    let mut all: Vec<f32> = hits.iter().map(|h| h.score).chain(held_scores.iter().copied()).collect();
    if held_scores.is_empty() || all.len() <= settings.limit {
        return 0;
    }
    all.sort_by(|a, b| b.total_cmp(a));
    let last = all[settings.limit - 1];
    // Ties at the last slot stay (never fewer than `limit` results).
    let before = hits.len();
    hits.retain(|h| h.score >= last);
    pointers.retain(|p| p.score >= last);
    before - hits.len()
}

/// Stage 4: dedupe by document — grouped (strategies that group, and reshows) or plain —
/// then carried blocks marked with the turn that first showed them (`engine` memory) and a
/// reshow's documents put back in their earlier order.
pub fn dedupe_stage(
    intent: Intent,
    hits: Vec<Hit>,
    (quotas, previous): (HashMap<DocumentId, usize>, &[DocumentId]),
    first_shown: &HashMap<ChunkId, u64>,
    settings: &TurnSettings,
) -> dedupe::Deduped {
    let grouping = Grouping { group_size: settings.group_size, quotas };
    let mut deduped = if settings.strategy.groups() || intent == Intent::Reshow {
        dedupe::dedupe_by_document(hits, &grouping, settings.group_margin)
    } else {
        // Plain top-k as peers do it for `none`; the seed's exclusion drops repeated text.
        dedupe::plain(hits, settings.strategy.excludes())
    };
    if settings.memory == Memory::Engine {
        // Marked so the model builds on it; in `client` memory the caller's history shows
        // it, and the seed's strategies stay as peers run them.
        for f in &mut deduped.fragments {
            f.carried_from = f.chunks.iter().filter_map(|c| first_shown.get(&c.id)).min().copied();
        }
    }
    if intent == Intent::Reshow {
        // The reshown documents in their earlier order.
        deduped.fragments.sort_by_key(|f| previous.iter().position(|d| *d == f.document_id).unwrap_or(usize::MAX));
    }
    deduped
}

/// Stage 4, last: the fragments below `relevance_floor` × the turn's best score leave, so the
/// budget is filled by rank only with evidence that stands near the best (a reshow keeps
/// what it reshows). The best counts `pointers` (the working set's chunks that rank, given
/// with `freed_slots keep`): the caller holds that evidence, and a new chunk far below it is
/// not worth its tokens. Returns the documents held back that have no fragment left, in rank order.
pub fn floor_stage(
    intent: Intent,
    fragments: &mut Vec<dedupe::Fragment>,
    pointers: &[context::PointerCandidate],
    settings: &TurnSettings,
) -> Vec<DocumentId> {
    let best =
        fragments.iter().map(|f| f.score).chain(pointers.iter().map(|p| p.score)).fold(f32::NEG_INFINITY, f32::max);
    if intent == Intent::Reshow || settings.relevance_floor <= 0.0 || best.is_nan() || best <= 0.0 {
        return Vec::new();
    }
    let floor = best * settings.relevance_floor;
    let mut held: Vec<DocumentId> = Vec::new();
    fragments.retain(|f| {
        let keep = f.score >= floor;
        if !keep && !held.contains(&f.document_id) {
            held.push(f.document_id.clone());
        }
        keep
    });
    held.retain(|d| !fragments.iter().any(|f| &f.document_id == d));
    held
}

/// Stage 5: the conversation (`engine` memory: `given`, or the window's turns, within its
/// share of the budget), then the blocks and pointers by rank within what is left, then the
/// prompt and its tokens.
pub fn build_prompt(
    state: &SessionState,
    asked: &str,
    fragments: &[dedupe::Fragment],
    pointers: &[context::PointerCandidate],
    given: Option<&[Utterance]>,
    settings: &TurnSettings,
    counter: &dyn TokenCounter,
) -> Built {
    let (conversation, conversation_tokens) = match settings.memory {
        Memory::Engine => {
            let remembered;
            let utterances = match given {
                Some(c) => c,
                None => {
                    remembered = conversation::from_turns(exclusion::window_turns(state, settings.window));
                    &remembered
                }
            };
            let share = (settings.budget as f64 * conversation::CONVERSATION_SHARE) as usize;
            conversation::fit(utterances, share, counter)
        }
        Memory::Client => (String::new(), 0),
    };
    let budget = settings.budget.saturating_sub(conversation_tokens);
    let context = context::build_context(fragments, pointers, &state.markers, budget, counter);
    let prompt = context::Prompt {
        question: asked,
        conversation: &conversation,
        pointers: &context.pointers,
        blocks: &context.blocks,
    };
    let (rendered, prompt_tokens) = (prompt.render(), prompt.tokens(counter));
    Built { context, conversation, conversation_tokens, prompt: rendered, prompt_tokens }
}

impl Engine {
    /// Stage 3's query: "show me that again" is about the previous question — its sources
    /// are scored against that question, not against the words "show me that again" — and a
    /// question mixes in the remembered embeddings of the ones before it.
    pub fn query(&self, state: &SessionState, intent: Intent, query: &str, settings: &TurnSettings) -> Result<Query> {
        let reshown_question = match intent {
            // A reshow of a reshow goes back to the question that was first answered.
            Intent::Reshow => state
                .turns
                .iter()
                .rev()
                .find(|t| t.intent != Intent::Reshow && !t.is_forget())
                .map(|t| t.question.clone()),
            _ => None,
        };
        let text = reshown_question.clone().unwrap_or_else(|| query.to_owned());
        let own_vector =
            self.embedder.embed_queries(&[&text])?.pop().ok_or_else(|| Error::Model("no embedding returned".into()))?;
        let earlier = earlier_vectors(state, intent, settings, own_vector.len());
        let centroid = working_centroid(
            state,
            intent,
            settings,
            &self.query_weights,
            |ids| self.vectors.vectors(ids),
            own_vector.len(),
        )?;
        let vector = compose_query(&own_vector, &earlier, centroid.as_deref(), &self.query_weights);
        Ok(Query { text, reshown_question, own_vector, vector, mixed: earlier.len() })
    }

    /// Stage 3's candidates: a reshow fetches the previous turn's chunks by id (what it
    /// showed and what it pointed to: the caller holds those) — or the chunks `reshow` names
    /// — with no search and no exclusion; any other turn searches with the exclusion,
    /// grouping and filter inside the search, a follow-up's documents allowed an extra chunk.
    pub fn candidates(
        &self,
        state: &SessionState,
        intent: Intent,
        query: &Query,
        working: &WorkingSet,
        reshow: Option<&[ChunkId]>,
        settings: &TurnSettings,
    ) -> Result<Candidates> {
        let previous = memory::last_documents(state);
        let mut quotas: HashMap<DocumentId, usize> = HashMap::new();
        if intent == Intent::Reshow {
            // The chunks `open` names, or what the previous turn showed and pointed to (the
            // caller holds those).
            let last = memory::last_turn(state);
            let (ids, pointed): (Vec<ChunkId>, Vec<ChunkId>) = match reshow {
                Some(ids) => (ids.to_vec(), Vec::new()),
                None => (
                    last.map(|t| t.pointed_chunks.iter().chain(&t.shown_chunks).cloned().collect()).unwrap_or_default(),
                    last.map(|t| t.pointed_chunks.clone()).unwrap_or_default(),
                ),
            };
            let hits = self.scored(&query.vector, &ids, &settings.filter)?;
            // The documents in the order asked, or in the earlier prompt's: the pointers (ranked
            // above the new sources), then the sources shown.
            let mut order: Vec<DocumentId> = Vec::new();
            for h in hits.iter().filter(|h| reshow.is_some() || pointed.contains(&h.chunk.id)) {
                if !order.contains(&h.chunk.document_id) {
                    order.push(h.chunk.document_id.clone());
                }
            }
            if reshow.is_none() {
                order.extend(previous.iter().filter(|d| !order.contains(d)).cloned().collect::<Vec<_>>());
            }
            for d in &order {
                quotas.insert(d.clone(), ids.len().max(1));
            }
            return Ok(Candidates {
                hits,
                path: SearchPath::Exact,
                rounds: 0,
                reason: SearchReason::Reshow { asked: reshow.is_some() },
                sides: None,
                previous: order,
                quotas,
            });
        }
        if intent == Intent::FollowUp {
            // More about what was just shown: those documents may take an extra slot.
            for d in &previous {
                quotas.insert(d.clone(), settings.group_size + 1);
            }
        }
        let r = retrieve::retrieve(
            self.vectors.as_ref(),
            query.vector.clone(),
            // The question alone: adding the earlier questions' words, as the dense
            // side mixes their embeddings, lost evidence on MTRAG (bench/README.md).
            &query.text,
            working.exclusion.clone(),
            quotas.clone(),
            settings,
        )?;
        Ok(Candidates {
            hits: r.outcome.hits,
            path: r.outcome.path,
            rounds: r.outcome.rounds + r.deeper,
            reason: r.outcome.reason,
            sides: r.sides,
            previous,
            quotas,
        })
    }

    /// The chunks of `ids` that pass the turn's filter, scored exactly against `query`:
    /// nothing that fails the current filter is carried or pointed to (unknown ids are
    /// skipped).
    pub(crate) fn scored(&self, query: &[f32], ids: &[ChunkId], filter: &Filter) -> Result<Vec<Hit>> {
        let hits = self
            .vectors
            .chunks(ids)?
            .into_iter()
            .filter(|c| filter.matches(c.document_id.as_str(), &c.metadata))
            .map(|chunk| Hit { chunk, score: 0.0 })
            .collect();
        retrieve::rescored(self.vectors.as_ref(), query, hits)
    }
}

/// One pointer per document among the ranking chunks of the working set, best first.
fn pointer_candidates(ranking: Vec<Hit>, first_shown: &HashMap<ChunkId, u64>) -> Vec<context::PointerCandidate> {
    let mut out: Vec<context::PointerCandidate> = Vec::new();
    for h in ranking {
        let turn = first_shown.get(&h.chunk.id).copied().unwrap_or(0);
        match out.iter_mut().find(|p| p.document_id == h.chunk.document_id) {
            Some(p) => {
                p.chunk_ids.push(h.chunk.id);
                p.shown_in_turn = p.shown_in_turn.min(turn);
            }
            None => out.push(context::PointerCandidate {
                document_id: h.chunk.document_id,
                title: h.chunk.title,
                metadata: h.chunk.metadata,
                chunk_ids: vec![h.chunk.id],
                shown_in_turn: turn,
                score: h.score,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests;
