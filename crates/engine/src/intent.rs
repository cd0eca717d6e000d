//! Stage 1: what the user wants from this turn, by rules for English and Chinese.

use ragctx_core::Intent;

const RESHOW_EN: &[&str] = &[
    "show me that again",
    "show that again",
    "show it again",
    "show them again",
    "show me again",
    "repeat the last source",
    "repeat that source",
    "repeat the source",
    "repeat the sources",
    "repeat the last answer",
    "show the last source",
    "show me the last source",
    "show the previous source",
    "show me the previous",
    "the same sources again",
    "same sources again",
    "send that again",
    "send it again",
    "say that again",
    "what did you just show",
    "go back to the last source",
    "bring that back",
    "show me those again",
];
const RESHOW_ZH: &[&str] = &[
    "再给我看看",
    "再看看刚才",
    "刚才那个",
    "刚才那段",
    "刚才的",
    "再发一次",
    "再发一遍",
    "再显示",
    "重新显示",
    "再说一遍",
    "上一个来源",
    "上一条",
];
const FOLLOW_UP_EN: &[&str] = &[
    "tell me more",
    "more about",
    "more on",
    "more details",
    "go on",
    "continue",
    "elaborate",
    "what else",
    "and what about",
    "what about",
    "how about",
    "in more detail",
    "expand on",
];
const FOLLOW_UP_ZH: &[&str] = &["详细", "更多", "继续", "展开", "还有呢", "那它", "它的", "他们的", "这个", "那个"];
/// Pronouns that refer back to what was just discussed.
const ANAPHORA: &[&str] =
    &["it", "its", "they", "them", "their", "theirs", "this", "that", "these", "those", "he", "she", "his", "her"];

/// Classifies a question. Without history every question is `new`.
pub fn classify(question: &str, has_history: bool) -> Intent {
    if !has_history {
        return Intent::New;
    }
    let q = question.trim().to_lowercase();
    if RESHOW_EN.iter().any(|p| q.contains(p)) || RESHOW_ZH.iter().any(|p| q.contains(p)) {
        return Intent::Reshow;
    }
    let words: Vec<&str> = q.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).collect();
    // A cue opens the question, or sits in a short one ("can you tell me more?").
    let short = words.len() <= 10;
    if FOLLOW_UP_EN.iter().any(|p| q.starts_with(p) || (short && q.contains(&format!(" {p}"))))
        || FOLLOW_UP_ZH.iter().any(|p| q.contains(p))
    {
        return Intent::FollowUp;
    }
    // Short questions that lean on a pronoun ("What do they eat?") continue the topic.
    if words.len() <= 8 && words.iter().any(|w| ANAPHORA.contains(w)) {
        return Intent::FollowUp;
    }
    Intent::New
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
}
