//! The conversation so far, as `engine` memory puts it in the prompt: earlier questions and
//! answers within a share of the budget, the oldest dropped first.

use ragctx_core::{TokenCounter, TurnRecord};

/// Share of the turn's budget the conversation may take; the rest is evidence.
pub const CONVERSATION_SHARE: f64 = 0.15;

/// Who said a line of the conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    /// The person asking: `User:` in the prompt.
    User,
    /// The earlier answers: `Assistant:` in the prompt.
    Assistant,
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Utterance {
    /// Who said it.
    pub speaker: Speaker,
    /// What was said; line breaks are flattened only when rendered.
    pub text: String,
}

impl Utterance {
    /// A question of the user.
    pub fn user(text: impl Into<String>) -> Self {
        Utterance { speaker: Speaker::User, text: text.into() }
    }
    /// An answer of the assistant.
    pub fn assistant(text: impl Into<String>) -> Self {
        Utterance { speaker: Speaker::Assistant, text: text.into() }
    }
    /// `User: …` or `Assistant: …`, one line (inner line breaks become spaces).
    pub fn render(&self) -> String {
        let who = match self.speaker {
            Speaker::User => "User",
            Speaker::Assistant => "Assistant",
        };
        let text: String = self.text.split_whitespace().collect::<Vec<_>>().join(" ");
        format!("{who}: {text}\n")
    }
}

/// The session's remembered turns as a conversation, oldest first.
pub fn from_turns(turns: &[TurnRecord]) -> Vec<Utterance> {
    turns
        .iter()
        // A `forget` step is bookkeeping, not something the user said.
        .filter(|t| t.forgotten.is_empty())
        .flat_map(|t| {
            let mut u = vec![Utterance::user(&t.question)];
            if !t.answer.trim().is_empty() {
                u.push(Utterance::assistant(&t.answer));
            }
            u
        })
        .collect()
}

/// The newest messages that fit in `max_tokens`, rendered oldest first, and their tokens.
/// A message that does not fit ends the conversation there: older ones are dropped too, so
/// the model never reads an answer without the question before it.
pub fn fit(utterances: &[Utterance], max_tokens: usize, counter: &dyn TokenCounter) -> (String, usize) {
    let mut lines: Vec<String> = Vec::new();
    let mut used = 0;
    for (k, u) in utterances.iter().enumerate().rev() {
        let mut line = u.render();
        let mut n = counter.count(&line);
        if used + n > max_tokens {
            // The newest message alone is longer than the share: its opening, rather than no
            // conversation at all. An answer leaves room for the question before it.
            if !lines.is_empty() {
                break;
            }
            let question = match (u.speaker, k.checked_sub(1).map(|j| &utterances[j])) {
                (Speaker::Assistant, Some(q)) if q.speaker == Speaker::User => counter.count(&q.render()),
                _ => 0,
            };
            let room = if question < max_tokens / 2 { max_tokens - question } else { max_tokens / 2 };
            match shortened(u, room, counter) {
                Some((l, c)) => (line, n) = (l, c),
                None => break,
            }
        }
        used += n;
        lines.push(line);
    }
    // An assistant line whose question was dropped would be read out of context.
    if lines.last().is_some_and(|l| l.starts_with("Assistant: ")) {
        used -= counter.count(&lines.pop().unwrap_or_default());
    }
    lines.reverse();
    let text = lines.concat();
    // Lines meet after a line break, a split point of cl100k_base: the sum is the count.
    (text, used)
}

/// `u` cut to its longest opening (by characters, so text without spaces shortens too, then
/// "…") that fits in `max_tokens`.
fn shortened(u: &Utterance, max_tokens: usize, counter: &dyn TokenCounter) -> Option<(String, usize)> {
    let chars: Vec<char> = u.text.chars().collect();
    let render = |k: usize| {
        let opening: String = chars[..k].iter().collect();
        Utterance { speaker: u.speaker, text: format!("{} …", opening.trim_end()) }.render()
    };
    // Binary search on the number of characters kept.
    let (mut lo, mut hi) = (0usize, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count(&render(mid)) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    (lo > 0).then(|| {
        let line = render(lo);
        let n = counter.count(&line);
        (line, n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_models::Cl100kCounter;

    #[test]
    fn newest_first_within_the_share_and_never_an_orphan_answer() {
        let counter = Cl100kCounter::new();
        let conv = vec![
            Utterance::user("How often should I water a cactus?"),
            Utterance::assistant("Rarely in winter [1]."),
            Utterance::user("And ferns?"),
            Utterance::assistant("Keep the soil moist [2]."),
        ];
        let (all, n) = fit(&conv, 1_000, &counter);
        assert_eq!(all.lines().count(), 4);
        assert_eq!(n, counter.count(&all));
        let last_pair = counter.count(&conv[2].render()) + counter.count(&conv[3].render());
        let (two, n) = fit(&conv, last_pair + 3, &counter);
        assert_eq!(two, "User: And ferns?\nAssistant: Keep the soil moist [2].\n");
        assert_eq!(n, last_pair);
        // Room for the last answer alone: it would be an orphan, so nothing is kept.
        let (none, n) = fit(&conv, counter.count(&conv[3].render()), &counter);
        assert_eq!((none.as_str(), n), ("", 0));
        // A newest question longer than the share keeps its opening words.
        let long = vec![Utterance::user("word ".repeat(500))];
        let (cut, n) = fit(&long, 40, &counter);
        assert!(cut.starts_with("User: word word") && cut.ends_with(" …\n"), "{cut}");
        assert!(n <= 40 && n > 30 && n == counter.count(&cut), "{n}");
        // Chinese has no spaces and is cut too; a long answer leaves room for its question.
        let zh = vec![Utterance::user("怎么浇水?"), Utterance::assistant("浇水".repeat(400))];
        let (cut, n) = fit(&zh, 60, &counter);
        assert!(cut.starts_with("User: 怎么浇水?\nAssistant: 浇水浇水") && cut.ends_with(" …\n"), "{cut}");
        assert!(n <= 60 && n == counter.count(&cut), "{n}");
    }
}
