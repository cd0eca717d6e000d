//! Stage 3, optional (`condense openai`): a question with earlier turns is rewritten into a
//! standalone search query by an LLM ([`Condenser`]). What the model is shown is kept small
//! (the last exchanges, answers cut), what it writes is checked to be a query, and every
//! failure — an error, a time-out, an answer that is no query — falls back to the question
//! with its learned mix, said in the trace ([`Condensed`]).

use crate::conversation::{Speaker, Utterance};
use crate::stages::intent_of;
use crate::Engine;
use ragctx_core::{Condense, CondenseRequest, Condensed, Condenser, Error, Intent, Result, SessionState, TurnSettings};
use std::time::Instant;

/// Exchanges (a question and its answer) of the conversation the condenser reads, newest.
pub const CONDENSE_EXCHANGES: usize = 3;

/// Characters of an earlier answer the condenser reads (its opening: what a follow-up most
/// often refers to).
pub const ANSWER_CHARS: usize = 300;

/// The longest rewrite accepted, in characters: a query, not an answer.
pub const MAX_REWRITE_CHARS: usize = 400;

/// The conversation as the condenser reads it: the last [`CONDENSE_EXCHANGES`] exchanges,
/// oldest first, answers cut to [`ANSWER_CHARS`] characters, on one line
/// (`User: … Assistant: … User: …`).
pub fn conversation_text(utterances: &[Utterance]) -> String {
    let users = utterances.iter().filter(|u| u.speaker == Speaker::User).count();
    let mut skip_users = users.saturating_sub(CONDENSE_EXCHANGES);
    let mut out = String::new();
    for u in utterances {
        if u.speaker == Speaker::User && skip_users > 0 {
            skip_users -= 1;
            continue;
        }
        // The answers before the first kept question belong to dropped exchanges.
        if out.is_empty() && u.speaker == Speaker::Assistant {
            continue;
        }
        let text = match u.speaker {
            Speaker::User => u.text.clone(),
            Speaker::Assistant => cut(&u.text, ANSWER_CHARS),
        };
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(Utterance { speaker: u.speaker, text }.render().trim_end());
    }
    out
}

/// `text` flattened and cut to `max` characters at a word boundary, `…` marking the cut.
fn cut(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let head: String = flat.chars().take(max).collect();
    let head = head.rsplit_once(' ').map_or(head.as_str(), |(h, _)| h);
    format!("{head} …")
}

/// The model's answer as a query: its first non-empty line, without a label ("Query:",
/// "User:", "Standalone question:") or surrounding quotes. Refused (with the reason) when
/// nothing is left, when it is longer than [`MAX_REWRITE_CHARS`], or when it drops the
/// question's own words — fewer than half of its [`ragctx_core::text::terms`] (words of three
/// letters or more that are no stop word, CJK character pairs; a small model may answer with an
/// earlier question, or with its own): a rewrite adds what the conversation says, it does not
/// replace what was asked.
pub fn clean(answer: &str, question: &str) -> std::result::Result<String, String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    let mut q = line.trim_start_matches(['*', '#', '-', ' ']).trim();
    if let Some((label, rest)) = q.split_once(':') {
        let label = label.to_ascii_lowercase();
        let labels = ["query", "question", "standalone", "rewrite", "search", "user", "follow-up"];
        if labels.iter().any(|w| label.contains(w)) && label.len() < 40 {
            q = rest.trim();
        }
    }
    // One question: what follows its question mark is not part of it.
    let q = match q.find(['?', '？']) {
        Some(i) => &q[..i + q[i..].chars().next().map_or(1, char::len_utf8)],
        None => q,
    };
    let q = q.trim_matches(['"', '\'', '`', '“', '”', '*']).trim();
    if q.is_empty() {
        return Err("the model wrote no query".into());
    }
    let chars = q.chars().count();
    if chars > MAX_REWRITE_CHARS {
        return Err(format!("the model wrote {chars} characters, more than a query's {MAX_REWRITE_CHARS}"));
    }
    let own = ragctx_core::text::terms(question);
    if !own.is_empty() {
        let written = ragctx_core::text::terms(q);
        // "cost" and "costs", "water" and "watering": the first five letters decide.
        let stem = |w: &str| w.chars().take(5).collect::<String>();
        let kept = own.iter().filter(|w| written.iter().any(|x| stem(x) == stem(w))).count();
        if kept * 2 < own.len() {
            return Err(format!("the rewrite {q:?} drops the question's own words ({kept} of {} kept)", own.len()));
        }
    }
    Ok(q.to_owned())
}

/// What the condenser makes of `question` after `conversation`: the rewrite, or the reason
/// the turn falls back, with the time the model took.
pub fn condense(condenser: &dyn Condenser, conversation: &[Utterance], question: &str) -> Condensed {
    let text = conversation_text(conversation);
    let started = Instant::now();
    let answer = condenser.condense(&CondenseRequest { conversation: &text, question });
    let ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
    let (query, fallback) = match answer.map_err(|e| e.to_string()).and_then(|a| clean(&a, question)) {
        Ok(q) => (Some(q), None),
        Err(reason) => (None, Some(reason)),
    };
    Condensed { model: condenser.name().to_owned(), query, fallback, ms, cached: false }
}

impl Engine {
    /// Stage 3's rewrite, once per turn: `None` when `condense` is off, for a reshow (it
    /// searches with the earlier question) and for a question without earlier turns (nothing
    /// to lean on). `condense openai` without a condenser is a configuration error.
    pub(crate) fn condensed(
        &self,
        state: &SessionState,
        question: &str,
        given: Option<&[Utterance]>,
        settings: &TurnSettings,
    ) -> Result<Option<Condensed>> {
        if settings.condense == Condense::Off {
            return Ok(None);
        }
        let condenser = self.condenser.as_deref().ok_or_else(|| {
            Error::InvalidInput(
                "condense openai needs a condenser endpoint: set condense_url and condense_model (RAGCTX_CONDENSE_URL, RAGCTX_CONDENSE_MODEL), or generator openai to use its endpoint".into(),
            )
        })?;
        if intent_of(state, question, settings) == Intent::Reshow {
            return Ok(None);
        }
        let remembered;
        let conversation = match given {
            Some(c) => c,
            None => {
                remembered = crate::conversation::from_turns(crate::exclusion::window_turns(state, settings.window));
                &remembered
            }
        };
        if conversation.is_empty() {
            return Ok(None);
        }
        Ok(Some(condense(condenser, conversation, question)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_answer_becomes_a_query_or_a_reason() {
        let q = "and the fees for renewal?";
        assert_eq!(
            clean("What are the fees for a passport renewal?", q).unwrap(),
            "What are the fees for a passport renewal?"
        );
        assert_eq!(
            clean("\n  Standalone question: \"passport renewal fees\"\nBecause…", q).unwrap(),
            "passport renewal fees"
        );
        assert_eq!(clean("**Query:** renewal fee of a passport", q).unwrap(), "renewal fee of a passport");
        assert_eq!(clean("User: passport renewal fees", q).unwrap(), "passport renewal fees");
        assert_eq!(clean("What are passport renewal fees? anaknya", q).unwrap(), "What are passport renewal fees?");
        // A colon inside a query stays.
        let typing = "Python 3.12: what changed in typing?";
        assert_eq!(clean(typing, "what changed in typing?").unwrap(), typing);
        assert!(clean("  \n\n", q).unwrap_err().contains("no query"));
        assert!(clean(&"word ".repeat(200), q).unwrap_err().contains("more than a query's"));
        // An earlier question, or the model's own: what was asked is gone.
        let e = clean("What is the capital of Australia?", "How many people live there?").unwrap_err();
        assert!(e.contains("drops the question's own words (0 of 3 kept)"), "{e}");
        // Nothing to keep: any query is taken.
        assert_eq!(clean("Show the Roth IRA sources again", "and that?").unwrap(), "Show the Roth IRA sources again");
        // Chinese: characters count.
        assert!(clean("绿萝冬天多久浇一次水？", "冬天多久浇水？").is_ok());
        assert!(clean("多肉怎么繁殖？", "冬天多久浇水？").is_err());
    }

    #[test]
    fn the_condenser_reads_the_last_exchanges_with_answers_cut() {
        let mut c = Vec::new();
        for i in 1..=5 {
            c.push(Utterance::user(format!("question {i}")));
            c.push(Utterance::assistant(format!("answer {i} {}", "long ".repeat(100))));
        }
        let text = conversation_text(&c);
        assert!(
            !text.contains("question 2") && text.starts_with("User: question 3 Assistant: answer 3 long"),
            "{text}"
        );
        assert_eq!(text.matches("User: ").count(), 3);
        assert_eq!(text.lines().count(), 1);
        assert!(text.split("User: ").all(|l| l.chars().count() <= ANSWER_CHARS + 40), "{text}");
        assert!(text.contains("…"));
    }

    struct Fixed(std::result::Result<&'static str, &'static str>);
    impl Condenser for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        fn condense(&self, _: &CondenseRequest<'_>) -> Result<String> {
            self.0.map(str::to_owned).map_err(|m| Error::Unavailable { backend: "condenser".into(), message: m.into() })
        }
    }

    #[test]
    fn a_failing_or_rambling_model_is_a_fallback_with_its_reason() {
        let conv = [Utterance::user("How do I renew a passport?"), Utterance::assistant("Use form DS-82 [1].")];
        let ok = condense(&Fixed(Ok("passport renewal fees")), &conv, "and the fees?");
        assert_eq!(
            (ok.query.as_deref(), ok.fallback.as_deref(), ok.model.as_str()),
            (Some("passport renewal fees"), None, "fixed")
        );
        let late = condense(&Fixed(Err("timed out after 4 s")), &conv, "and the fees?");
        assert!(late.query.is_none() && late.fallback.as_deref().unwrap().contains("timed out"), "{late:?}");
        let empty = condense(&Fixed(Ok("")), &conv, "and the fees?");
        assert!(empty.query.is_none() && empty.fallback.is_some());
    }
}
