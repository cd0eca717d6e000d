//! Stages 1–5 of a turn (intent, exclusion, search, dedupe, context), without generating
//! or remembering anything: [`Engine::assemble`], shared by turns and replays.

use super::*;

/// What a turn assembled before generation; shared by [`Engine::ask`] and replays.
pub struct Assembled {
    /// The intent the turn runs with (classified, or forced by `mode`).
    pub intent: Intent,
    /// The text searched with: the query given, or for a reshow the earlier question it shows
    /// again.
    pub query: String,
    /// The ids the search excluded (empty for a reshow or a strategy that does not exclude).
    pub exclusion: ExclusionSet,
    /// Hits the search returned, all rounds, before the working set's ranking chunks joined them.
    pub candidates: usize,
    /// Documents left after dedupe.
    pub unique_documents: usize,
    /// `(dropped, kept)`: documents whose text duplicated a better-scoring one's.
    pub aliases: Vec<(DocumentId, DocumentId)>,
    /// How the store searched (`exact` for a reshow, which fetches the earlier chunks by id).
    pub search_path: SearchPath,
    /// Searches run, deeper ones included (0 for a reshow).
    pub search_rounds: u32,
    /// Why the store took its path, in words.
    pub search_reason: String,
    /// Lexical or hybrid retrieval: what each side found, or why the lexical side did not run;
    /// `None` for dense retrieval and for a reshow.
    pub retrieval: Option<ragctx_core::RetrievalTrace>,
    /// The blocks and pointers within the budget, with the markers handed out.
    pub context: context::BuiltContext,
    /// `engine` memory: the earlier turns in the prompt, rendered, and their tokens.
    pub conversation: String,
    /// Tokens of `conversation` (0 in `client` memory).
    pub conversation_tokens: usize,
    /// The whole prompt, as the generator is given it.
    pub prompt: String,
    /// Tokens of `prompt`, counted piece by piece ([`crate::context::Prompt::tokens`]).
    pub prompt_tokens: usize,
    /// The question the answer addresses when it is not the one asked (a reshow answers
    /// the previous question again).
    pub answer_question: Option<String>,
    /// The embedding of `query` alone (before any mix), remembered with the turn.
    pub query_vector: Vec<f32>,
    /// Earlier questions mixed into the search vector (0, 1 or 2).
    pub mixed_questions: usize,
    /// Milliseconds per stage so far (`embed`, `search`, `dedupe`, `assemble`).
    pub timings: BTreeMap<String, f64>,
}

impl Engine {
    /// Stages 1–5 for a question against a session state, without generating or
    /// remembering anything. `query` is the text embedded (the question, or a rewrite).
    /// `conversation`, when given, replaces the session's remembered turns in an `engine`
    /// prompt. `exclusion`, when given, replaces the set computed from the session (replays).
    pub fn assemble(
        &self,
        state: &SessionState,
        question: &str,
        query: &str,
        conversation: Option<&[Utterance]>,
        settings: &TurnSettings,
        exclusion: Option<ExclusionSet>,
    ) -> Result<Assembled> {
        let mut timings = BTreeMap::new();
        let intent = settings.mode.forced().unwrap_or_else(|| intent::classify(question, !state.turns.is_empty()));
        let exclusion = match exclusion {
            Some(e) if settings.strategy.excludes() && intent != Intent::Reshow => e,
            Some(_) => ExclusionSet::default(),
            None => exclusion::exclusion_set(state, intent, settings),
        };
        // The chunks of the window and the turn that first showed each: what `engine`
        // memory may carry and `client` memory points to.
        let first_shown = exclusion::first_shown(state, settings.window);

        // "Show me that again" is about the previous question: its sources are scored and
        // answered against that question, not against the words "show me that again".
        let reshown_question = match intent {
            // A reshow of a reshow goes back to the question that was first answered.
            Intent::Reshow => state.turns.iter().rev().find(|t| t.intent != Intent::Reshow).map(|t| t.question.clone()),
            _ => None,
        };
        let query = reshown_question.as_deref().unwrap_or(query);
        let stage = Stage::start("embed");
        let query_vector =
            self.embedder.embed_queries(&[query])?.pop().ok_or_else(|| Error::Model("no embedding returned".into()))?;
        // A follow-up's words lean on the questions before it ("What do they eat?"): mix in
        // their remembered embeddings (no extra embedding work).
        let mix = match settings.conversation_query {
            ConversationQuery::Off => false,
            ConversationQuery::FollowUp => intent == Intent::FollowUp,
            ConversationQuery::Always => true,
        };
        let earlier: Vec<Vec<f32>> = if mix && intent != Intent::Reshow {
            exclusion::window_turns(state, settings.window)
                .iter()
                .rev()
                .filter(|t| t.intent != Intent::Reshow)
                .filter_map(|t| t.query_vector.as_ref().map(|v| v.dequantize()))
                .filter(|v| v.len() == query_vector.len())
                .take(MIX_WEIGHTS.len() - 1)
                .collect()
        } else {
            Vec::new()
        };
        let vector = mix_vectors(&query_vector, &earlier, &MIX_WEIGHTS);
        stage.end(&mut timings);

        let stage = Stage::start("search");
        let mut previous = memory::last_documents(state);
        let mut quotas: HashMap<DocumentId, usize> = HashMap::new();
        let mut sides = None;
        let (mut hits, path, rounds, reason) = if intent == Intent::Reshow {
            // "Show me that again": the last turn's chunks, fetched by id; no search, no exclusion.
            // What it showed, and what it pointed to (the caller holds those).
            let shown: Vec<ChunkId> = state
                .turns
                .last()
                .map(|t| t.pointed_chunks.iter().chain(&t.shown_chunks).cloned().collect())
                .unwrap_or_default();
            let hits = self.scored(&vector, &shown, &settings.filter)?;
            // In the earlier prompt's order: the pointers (ranked above the new sources), then
            // the sources shown.
            let pointed = state.turns.last().map(|t| t.pointed_chunks.clone()).unwrap_or_default();
            let mut order: Vec<DocumentId> = Vec::new();
            for h in hits.iter().filter(|h| pointed.contains(&h.chunk.id)) {
                if !order.contains(&h.chunk.document_id) {
                    order.push(h.chunk.document_id.clone());
                }
            }
            order.extend(previous.iter().filter(|d| !order.contains(d)).cloned().collect::<Vec<_>>());
            previous = order;
            for d in &previous {
                quotas.insert(d.clone(), shown.len().max(1));
            }
            (hits, SearchPath::Exact, 0, "reshow: the previous turn's chunks by id".to_string())
        } else {
            if intent == Intent::FollowUp {
                // More about what was just shown: those documents may take an extra slot.
                for d in &previous {
                    quotas.insert(d.clone(), settings.group_size + 1);
                }
            }
            let r = retrieve::retrieve(
                self.vectors.as_ref(),
                vector.clone(),
                // The question alone: adding the earlier questions' words, as the dense
                // side mixes their embeddings, lost evidence on MTRAG (bench/README.md).
                query,
                exclusion.clone(),
                quotas.clone(),
                settings,
            )?;
            sides = r.sides;
            (r.outcome.hits, r.outcome.path, r.outcome.rounds + r.deeper, r.outcome.reason)
        };
        let candidates = hits.len();
        // The working set: excluded from the search, scored exactly here. A chunk of it
        // ranks when it scores at least as well as the weakest new candidate would.
        let mut ranking: Vec<Hit> = Vec::new();
        if intent != Intent::Reshow && !exclusion.is_empty() && !first_shown.is_empty() {
            let mut ids: Vec<ChunkId> = first_shown.keys().cloned().collect();
            ids.sort();
            // Over every candidate, the lexical side's too: flooring at the dense side's
            // weakest kept less evidence with hybrid retrieval on MTRAG (bench/README.md).
            let floor = hits.iter().map(|h| h.score).fold(f32::INFINITY, f32::min);
            ranking = self
                .scored(&vector, &ids, &settings.filter)?
                .into_iter()
                .filter(|h| exclusion.excludes(&h.chunk.id, &h.chunk.document_id))
                .filter(|h| h.score >= floor || hits.is_empty())
                .collect();
            ranking.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.chunk.id.cmp(&b.chunk.id)));
            ranking.truncate(settings.limit * settings.group_size.max(1));
        }
        let mut pointers = Vec::new();
        match settings.memory {
            Memory::Engine => hits.extend(ranking),
            Memory::Client => pointers = pointer_candidates(ranking, &first_shown),
        }
        stage.end(&mut timings);

        let stage = Stage::start("dedupe");
        let grouping = Grouping { group_size: settings.group_size, quotas };
        let deduped = if settings.strategy.groups() || intent == Intent::Reshow {
            dedupe::dedupe_by_document(hits, &grouping, settings.group_margin)
        } else {
            // Plain top-k as peers do it for `none`; the seed's exclusion drops repeated text.
            dedupe::plain(hits, settings.strategy.excludes())
        };
        let mut fragments = deduped.fragments;
        if settings.memory == Memory::Engine {
            // Marked so the model builds on it; in `client` memory the caller's history shows
            // it, and the seed's strategies stay as peers run them.
            for f in &mut fragments {
                f.carried_from = f.chunks.iter().filter_map(|c| first_shown.get(&c.id)).min().copied();
            }
        }
        if intent == Intent::Reshow {
            // The reshown documents in their earlier order.
            fragments.sort_by_key(|f| previous.iter().position(|d| *d == f.document_id).unwrap_or(usize::MAX));
        }
        stage.end(&mut timings);

        let stage = Stage::start("assemble");
        let (conversation, conversation_tokens) = match settings.memory {
            Memory::Engine => {
                let remembered;
                let utterances = match conversation {
                    Some(c) => c,
                    None => {
                        remembered = conversation::from_turns(exclusion::window_turns(state, settings.window));
                        &remembered
                    }
                };
                let share = (settings.budget as f64 * conversation::CONVERSATION_SHARE) as usize;
                conversation::fit(utterances, share, self.counter.as_ref())
            }
            Memory::Client => (String::new(), 0),
        };
        let budget = settings.budget.saturating_sub(conversation_tokens);
        let built = context::build_context(&fragments, &pointers, &state.markers, budget, self.counter.as_ref());
        let asked = reshown_question.as_deref().unwrap_or(question);
        let prompt = context::Prompt {
            question: asked,
            conversation: &conversation,
            pointers: &built.pointers,
            blocks: &built.blocks,
        };
        let (rendered, prompt_tokens) = (prompt.render(), prompt.tokens(self.counter.as_ref()));
        stage.end(&mut timings);

        Ok(Assembled {
            intent,
            query: query.to_owned(),
            exclusion,
            candidates,
            unique_documents: deduped.unique_documents,
            aliases: deduped.aliases,
            search_path: path,
            search_rounds: rounds,
            search_reason: reason,
            retrieval: sides,
            context: built,
            conversation,
            conversation_tokens,
            prompt: rendered,
            prompt_tokens,
            answer_question: reshown_question,
            query_vector,
            mixed_questions: earlier.len(),
            timings,
        })
    }

    /// Chunks by id, scored exactly against the query (unknown ids are skipped).
    /// The chunks of `ids` that pass the turn's filter, scored exactly against `query`:
    /// nothing that fails the current filter is carried or pointed to.
    fn scored(&self, query: &[f32], ids: &[ChunkId], filter: &Filter) -> Result<Vec<Hit>> {
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
