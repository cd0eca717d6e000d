//! Stage 1: what the user wants from this turn, by rules for English and Chinese.
//!
//! A `reshow` asks for the earlier sources and names no new subject: every word of it belongs
//! to the closed classes of `intent/lexicon.rs` (verbs of showing, what was shown, back-references,
//! function words), so a subject of its own always makes it something else — the one error
//! that would hide evidence. A `follow_up` leans on what was just shown: a pronoun, a part of
//! the sources ("the second link"), an ellipsis ("and for children?", "那公司呢"), a question
//! without its subject ("有什么副作用"). Everything else is `new`. The rules were written on
//! `eval/intent.jsonl` and the train split of `eval/intent/`; `ragctx eval intent` also reports
//! the holdout split, which they never saw.
//!
//! ```
//! use ragctx_core::Intent;
//! use ragctx_engine::intent::classify;
//! assert_eq!(classify("show me the sources again", true), Intent::Reshow);
//! assert_eq!(classify("show me the sources on vitamin D", true), Intent::New);
//! assert_eq!(classify("刚才那个政策怎么申请?", true), Intent::FollowUp);
//! ```

mod lexicon;

use lexicon::*;
use ragctx_core::text::is_han;
use ragctx_core::Intent;
use std::sync::OnceLock;

/// Classifies a question. Without history every question is `new`.
pub fn classify(question: &str, has_history: bool) -> Intent {
    if !has_history {
        return Intent::New;
    }
    let q = question.trim().to_lowercase().replace(['’', '‘'], "'");
    let words = words_of(&q);
    let chinese = q.chars().any(is_han);
    if if chinese { asks_for_earlier_sources_zh(&q, &words) } else { asks_for_earlier_sources_en(&words) } {
        return Intent::Reshow;
    }
    if chinese && (chinese_again_about(&q, &words) || follows_up_zh(&q)) || follows_up_en(&words) {
        return Intent::FollowUp;
    }
    Intent::New
}

/// The words of a lower-cased message: letters, digits and inner apostrophes, with a
/// possessive or "is" `'s` taken off ("answer's", "what's").
fn words_of(q: &str) -> Vec<&str> {
    q.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\''))
        .map(|w| w.strip_suffix("'s").unwrap_or(w))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The role a word may play in a message that only asks for the earlier sources.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Show,
    Say,
    Neutral,
    Source,
    Back,
    Function,
}

fn role(w: &str) -> Option<Role> {
    let classes: [(&[&str], Role); 6] = [
        (SHOW_EN, Role::Show),
        (SOURCE_EN, Role::Source),
        (BACK_EN, Role::Back),
        (SAY_EN, Role::Say),
        (NEUTRAL_VERB_EN, Role::Neutral),
        (FUNCTION_EN, Role::Function),
    ];
    if let Some((_, r)) = classes.iter().find(|(words, _)| words.contains(&w)) {
        return Some(*r);
    }
    // A typing slip on a word of showing or of what was shown ("shw", "sorces", "agian").
    let slip = |words: &[&str]| words.iter().any(|d| is_slip_of(w, d));
    if slip(SHOW_EN) {
        Some(Role::Show)
    } else if slip(SOURCE_EN) {
        Some(Role::Source)
    } else if slip(SLIP_EN) {
        Some(if w.starts_with('a') { Role::Back } else { Role::Function })
    } else {
        None
    }
}

/// `typed` is `word` with one letter dropped (3+ letters typed) or two neighbours swapped
/// (5+ letters), keeping the first letter — slips that do not turn one common word into
/// another ("form" is not a slip of "from": "from" is not a word slips are checked against).
fn is_slip_of(typed: &str, word: &str) -> bool {
    let (t, w): (Vec<char>, Vec<char>) = (typed.chars().collect(), word.chars().collect());
    if t.len() < 3 || t.first() != w.first() {
        return false;
    }
    if w.len() == t.len() + 1 {
        return (1..w.len()).any(|i| w[..i] == t[..i] && w[i + 1..] == t[i..]);
    }
    if w.len() == t.len() && t.len() >= 5 {
        let diff: Vec<usize> = (0..t.len()).filter(|&i| t[i] != w[i]).collect();
        return diff.len() == 2 && diff[1] == diff[0] + 1 && t[diff[0]] == w[diff[1]] && t[diff[1]] == w[diff[0]];
    }
    false
}

/// "Show me that again", "links?", "where did you get that from": every word asks for the
/// earlier sources, and one of them says so.
fn asks_for_earlier_sources_en(words: &[&str]) -> bool {
    // "Is that the same document?" asks about a source, it does not ask to see it again.
    if words.is_empty() || YES_NO_EN.contains(&words[0]) {
        return false;
    }
    // "more" only in "once more" / "one more time": "show me more sources" asks for others.
    let again_more = |i: usize| words[i] == "more" && i > 0 && matches!(words[i - 1], "once" | "one");
    let mut roles = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        match role(w) {
            Some(r) => roles.push(r),
            None if again_more(i) => roles.push(Role::Back),
            None => return false,
        }
    }
    // "Can I send it?", "can we go back?": the user's own action, not a request to us.
    let own_action = words.windows(2).any(|w| matches!(w[0], "i" | "we") && !FIRST_PERSON_EN.contains(&w[1]));
    if own_action {
        return false;
    }
    let has = |r: Role| roles.contains(&r);
    // "Thanks again" closes the exchange; it asks for nothing.
    let thanks = words.iter().any(|w| matches!(*w, "thanks" | "thank" | "thx"));
    // "where did you get that from", "where is that from": where it came from is a source.
    let where_from = words.contains(&"where")
        && words.contains(&"from")
        && (words.contains(&"you") || !roles.iter().any(|r| matches!(r, Role::Show | Role::Say | Role::Neutral)));
    // "Which documents?", "what files?": which ones (of those it needs) is a question about
    // the subject; without a word of showing, saying or going back it asks to see nothing again.
    let which = matches!(words[0], "which" | "what") && !has(Role::Show) && !has(Role::Say) && !has(Role::Back);
    if which && !where_from {
        return false;
    }
    has(Role::Source) || has(Role::Show) || where_from || (has(Role::Back) && !has(Role::Neutral) && !thanks)
}

/// "再给我看看刚才那个", "来源呢": Chinese that is empty once the words asking for the earlier
/// sources are taken out, with a back-reference or a question about the source.
fn asks_for_earlier_sources_zh(q: &str, words: &[&str]) -> bool {
    let Some(rest) = chinese_rest(q) else { return false };
    // Latin words and numbers beside the Chinese ("再说说ESG", "再发一下2023的") are a
    // subject unless they too ask for the sources ("把source再发一次").
    rest.is_empty() && latin_runs(words).all(|w| role(&w).is_some())
}

/// "再说说ESG", "再发一下2023的": Chinese words that ask for the earlier sources again, with a
/// Latin word or a number that names what about — a follow-up on that subject.
fn chinese_again_about(q: &str, words: &[&str]) -> bool {
    chinese_rest(q).is_some_and(|rest| rest.is_empty()) && latin_runs(words).any(|w| role(&w).is_none())
}

/// The Chinese characters of `q` left once the words that ask for the earlier sources are
/// taken out; `None` when it has no Chinese, or neither a back-reference nor a question about
/// the source.
fn chinese_rest(q: &str) -> Option<String> {
    let mut cjk: String = q.chars().filter(|c| is_han(*c)).collect();
    if cjk.is_empty() || !BACK_ZH.iter().chain(SOURCE_QUESTION_ZH).any(|b| cjk.contains(b)) {
        return None;
    }
    // Ordinals of what was shown ("第二个", "第一篇") first, then the words, longest first.
    for d in ORDINAL_DIGITS_ZH.chars() {
        for u in ORDINAL_UNITS_ZH.chars() {
            cjk = cjk.replace(&format!("第{d}{u}"), "");
        }
    }
    static LONGEST_FIRST: OnceLock<Vec<&str>> = OnceLock::new();
    let lexicon = LONGEST_FIRST.get_or_init(|| {
        let mut words = RESHOW_ZH.to_vec();
        words.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
        words
    });
    Some(lexicon.iter().fold(cjk, |rest, w| rest.replace(w, "")))
}

/// The runs of non-Chinese letters and digits inside the words of a message.
fn latin_runs<'a>(words: &'a [&'a str]) -> impl Iterator<Item = String> + 'a {
    words.iter().flat_map(|w| w.split(is_han).filter(|r| !r.is_empty()).map(str::to_owned))
}

/// "刚才那个政策怎么申请?", "那公司需要做什么", "有什么副作用", "第二篇文章里讲的费用是多少".
fn follows_up_zh(q: &str) -> bool {
    let clauses: Vec<&str> = q
        .split(|c: char| "，,。.！!？?；;：:、 ".contains(c))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        // "那个，怎么注销账号": a hesitation, not a reference.
        .filter(|c| !matches!(*c, "那个" | "那" | "嗯" | "那么" | "呃"))
        .collect();
    let text: String = clauses.concat();
    let ordinal = text
        .chars()
        .collect::<Vec<_>>()
        .windows(3)
        .any(|w| w[0] == '第' && ORDINAL_DIGITS_ZH.contains(w[1]) && ORDINAL_UNITS_ZH.contains(w[2]));
    FOLLOW_UP_ZH.iter().any(|p| text.contains(p))
        // "还有吗" alone asks for more; after a subject ("补贴还有吗") it asks if that still exists.
        || text.starts_with("还有吗")
        || ordinal
        || text.ends_with('呢')
        || clauses.iter().any(|c| OPENER_ZH.iter().any(|o| c.starts_with(o)))
        || clauses.first().is_some_and(|c| NO_SUBJECT_ZH.iter().any(|o| c.starts_with(o)))
        || (text.contains('也') && text.ends_with('吗'))
}

/// "What do they eat?", "and for children?", "the second link mentions a grace period",
/// "what were the requirements again?", "why?".
fn follows_up_en(words: &[&str]) -> bool {
    if words.is_empty() {
        return false;
    }
    // An opener that leans on the previous turn: what follows decides, and a short rest
    // ("and the fees?") is an ellipsis; a full question ("and how do I renew a
    // passport online?") is a subject of its own.
    let lead = words.iter().take_while(|w| ELLIPTIC_EN.contains(w)).count();
    if lead > 0 {
        let rest = &words[lead..];
        return rest.len() <= 4 || refers_back_en(rest);
    }
    refers_back_en(words)
}

fn refers_back_en(words: &[&str]) -> bool {
    if words.is_empty() {
        return true;
    }
    let joined = format!(" {} ", words.join(" "));
    let phrase = |p: &str| joined.contains(&format!(" {p} "));
    if FOLLOW_UP_EN.iter().any(|p| phrase(p)) {
        return true;
    }
    // "What about the fees?" — unless what follows is a whole subject of its own.
    if let [first, "about", rest @ ..] = words {
        if matches!(*first, "what" | "how") && rest.len() <= 4 {
            return true;
        }
    }
    // "Why?", "how so?": a bare question word.
    if words.iter().all(|w| WH_EN.contains(w) || matches!(*w, "so" | "exactly" | "please" | "then")) {
        return true;
    }
    // "What's the penalty if I don't?": the verb is left out.
    if words.last().is_some_and(|w| ELIDED_EN.contains(w)) {
        return true;
    }
    // "Remind me what the fee was", "tell me again how often to water", "show me the
    // previous year's forms": earlier material asked for again, with a subject of its own.
    let showing = |w: &&str| SHOW_EN.contains(w) || SAY_EN.contains(w);
    if words[0] == "remind"
        || words.first().is_some_and(showing) && words.iter().any(|w| BACK_EN.contains(w) || *w == "part")
    {
        return true;
    }
    // "What were the requirements again?", "where did you get the 30 day figure from".
    if words[1..].contains(&"again")
        || words.contains(&"mentioned")
        || words.contains(&"above")
        || (words.contains(&"where") && words.contains(&"you") && words.last() == Some(&"from"))
    {
        return true;
    }
    (0..words.len()).any(|i| points_back_en(words, i))
}

/// Whether `words[i]` refers to what was just shown: a pronoun ("how do I apply for it") that
/// is not a time ("this year") or an empty "it" ("is it legal to…"), or a part of the
/// sources ("the table", "the second link").
fn points_back_en(words: &[&str], i: usize) -> bool {
    let w = words[i];
    let next = words.get(i + 1).copied();
    let prev = i.checked_sub(1).map(|j| words[j]);
    if ANAPHORA_EN.contains(&w) {
        if matches!(w, "this" | "that") && next.is_some_and(|n| DEICTIC_TIME_EN.contains(&n)) {
            return false;
        }
        let empty_it = w == "it"
            && (prev.is_some_and(|p| matches!(p, "is" | "was" | "isn't")) || i == 0)
            && words.get(i + 2) == Some(&"to");
        return !empty_it;
    }
    if PART_EN.contains(&w) {
        return prev.is_some_and(|p| ORDINAL_EN.contains(&p) || (p == "the" && !matches!(w, "source" | "sources")));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_for_english_and_chinese() {
        assert_eq!(classify("Show me that again", true), Intent::Reshow);
        assert_eq!(classify("could you repeat the last source?", true), Intent::Reshow);
        assert_eq!(classify("再给我看看刚才那个", true), Intent::Reshow);
        assert_eq!(classify("刚才那段再发一次", true), Intent::Reshow);
        assert_eq!(classify("What do they eat?", true), Intent::FollowUp);
        assert_eq!(classify("Tell me more about the fee waiver", true), Intent::FollowUp);
        assert_eq!(classify("能详细说说吗", true), Intent::FollowUp);
        assert_eq!(classify("How do I appeal a decision in California?", true), Intent::New);
        assert_eq!(classify("show me that again", false), Intent::New, "nothing to reshow yet");
    }

    #[test]
    fn a_new_subject_is_never_a_reshow() {
        // The misfires of the first rules (DESIGN §2): a back-reference with a subject.
        for q in [
            "刚才那个政策怎么申请?",
            "刚才那个植物怎么浇水?",
            "show me the previous year's forms",
            "tell me again how often to water",
        ] {
            assert_eq!(classify(q, true), Intent::FollowUp, "{q}");
        }
        for q in
            ["再生能源有哪些类型", "如何重新安装操作系统", "Repeat offenders: what are the sentencing rules in Texas?"]
        {
            assert_eq!(classify(q, true), Intent::New, "{q}");
        }
        // A Latin word or a number beside the Chinese is a subject; a yes/no question about a
        // source does not ask to see it; "more sources" are other sources.
        for q in [
            "再说说ESG",
            "刚才那个visa的呢?",
            "再发一下2023的",
            "Is that the same document?",
            "show me more sources from before",
        ] {
            assert_eq!(classify(q, true), Intent::FollowUp, "{q}");
        }
        // Ordinary new questions whose characters happen to contain 再发 / 再说 / 重发.
        for q in ["孩子严重发烧怎么办", "如何避免问题再发生", "老人突然不再说话是什么原因", "重发性流产需要做哪些检查"]
        {
            assert_eq!(classify(q, true), Intent::New, "{q}");
        }
        for q in ["repeat the sources once more", "show me that once more", "one more time please, show me the sources"]
        {
            assert_eq!(classify(q, true), Intent::Reshow, "{q}");
        }
        for q in ["repeat that", "bring back the last sources", "上次的出处再给我看一下", "把source再发一次"]
        {
            assert_eq!(classify(q, true), Intent::Reshow, "{q}");
        }
    }

    #[test]
    fn which_sources_is_a_question_not_a_reshow() {
        for q in ["Which documents?", "what files?", "which materials"] {
            assert_ne!(classify(q, true), Intent::Reshow, "{q}");
        }
        assert_eq!(classify("show me the documents again", true), Intent::Reshow);
    }

    #[test]
    fn the_users_own_action_is_not_a_reshow() {
        // Every word could ask for the sources, but "I" does the showing or sending.
        for q in ["can I send it again?", "can i post it", "can we go back", "can I bring them again"] {
            assert_ne!(classify(q, true), Intent::Reshow, "{q}");
        }
        for q in ["could I see those passages again", "I lost the references, can you post them again"] {
            assert_eq!(classify(q, true), Intent::Reshow, "{q}");
        }
    }

    #[test]
    fn slips_ellipses_and_parts_of_the_sources() {
        assert_eq!(classify("shw me the sorces agian", true), Intent::Reshow);
        // "form" is no slip of "from": the subject stays a subject.
        assert_eq!(classify("show me the form again", true), Intent::FollowUp);
        assert_eq!(classify("links?", true), Intent::Reshow);
        assert_eq!(classify("来源呢", true), Intent::Reshow);
        assert_eq!(classify("and for families with kids?", true), Intent::FollowUp);
        assert_eq!(classify("and how do I renew a passport online?", true), Intent::New);
        assert_eq!(classify("the second link mentions a grace period, how long is it", true), Intent::FollowUp);
        assert_eq!(classify("is it legal to record a phone call in florida", true), Intent::New);
        assert_eq!(classify("what's the maximum contribution to a 401k this year", true), Intent::New);
        assert_eq!(classify("那公司需要做什么", true), Intent::FollowUp);
        assert_eq!(classify("那个，怎么办理港澳通行证", true), Intent::New);
        assert_eq!(classify("第二篇文章里讲的费用是多少", true), Intent::FollowUp);
    }
}
