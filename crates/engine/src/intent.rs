//! Stage 1: what the user wants from this turn, by rules for English and Chinese.

use ragctx_core::Intent;

// A reshow asks for the earlier sources and names no new subject: every word of the message
// is one of these (a subject word — "taxes", "forms", "浇水" — makes it a follow-up).
const RESHOW_WORDS_EN: &[&str] = &[
    // asking to see, send or say again
    "show",
    "showed",
    "shown",
    "display",
    "repeat",
    "resend",
    "send",
    "sent",
    "give",
    "gave",
    "bring",
    "see",
    "pull",
    "say",
    "said",
    "list",
    "go",
    "up",
    "back",
    // what was shown
    "source",
    "sources",
    "passage",
    "passages",
    "document",
    "documents",
    "doc",
    "docs",
    "reference",
    "references",
    "citation",
    "citations",
    "context",
    "answer",
    "result",
    "results",
    // back-references
    "again",
    "previous",
    "last",
    "earlier",
    "before",
    "same",
    "once",
    "one",
    "time",
    "just",
    // function words
    "me",
    "us",
    "i",
    "you",
    "it",
    "that",
    "this",
    "those",
    "these",
    "them",
    "the",
    "a",
    "an",
    "to",
    "from",
    "of",
    "what",
    "which",
    "were",
    "was",
    "is",
    "are",
    "did",
    "do",
    "can",
    "could",
    "would",
    "will",
    "please",
    "pls",
    "let",
    "my",
    "your",
    "all",
    "now",
    "here",
    "over",
    "ok",
    "okay",
    "hey",
    "kindly",
    "thanks",
    "whole",
];
/// Words that say "what you gave before" (with a verb of showing, a reshow).
const BACK_EN: &[&str] = &["again", "previous", "last", "earlier", "before", "same", "back", "once", "just"];
/// Verbs of showing, sending or saying.
const SHOW_EN: &[&str] =
    &["show", "showed", "display", "repeat", "resend", "send", "sent", "give", "bring", "see", "pull", "say", "tell"];
const SOURCE_EN: &[&str] =
    &["source", "sources", "passage", "passages", "document", "documents", "doc", "docs", "reference", "references"];

// Chinese has no spaces: a reshow is a message that is empty once these are taken out.
const RESHOW_ZH: &[&str] = &[
    "再给我看看",
    "给我看看",
    "再看看",
    "看一下",
    "看看",
    "看",
    "刚才",
    "刚刚",
    "之前",
    "上次",
    "上一个",
    "上一条",
    "上一段",
    "那几个",
    "几个",
    "那个",
    "那段",
    "那些",
    "这个",
    "那",
    "这",
    "的",
    "了",
    "来源",
    "资料",
    "内容",
    "文档",
    "段落",
    "出处",
    "引用",
    "回答",
    "答案",
    "重新",
    "重发",
    "再发",
    "发",
    "一次",
    "一遍",
    "一下",
    "遍",
    "显示",
    "展示",
    "列出来",
    "列出",
    "出来",
    "给过",
    "给",
    "我",
    "你",
    "把",
    "请",
    "能",
    "可以",
    "吗",
    "呢",
    "吧",
    "再说",
    "说",
    "再来",
    "来",
    "再",
    "段",
    "个",
    "条",
];
/// Back-references in Chinese ("again", "just now", "the last one", "before").
const BACK_ZH: &[&str] = &["再", "刚才", "刚刚", "上一个", "上一条", "上次", "之前", "重新", "重发", "一遍"];

const FOLLOW_UP_EN: &[&str] = &[
    "tell me more",
    "more about",
    "more on",
    "more details",
    "more detail",
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
/// A question that opens with one of these leans on the previous turn ("And for children?").
const ELLIPTIC_EN: &[&str] = &["and", "but", "also", "so", "then"];
const FOLLOW_UP_ZH: &[&str] = &[
    "详细",
    "更多",
    "继续",
    "展开",
    "还有呢",
    "那它",
    "它",
    "他们的",
    "这个",
    "那个",
    "这些",
    "那些",
    "刚才",
    "刚刚",
    "上一个",
    "上一条",
    "上次",
    "之前",
];
/// Pronouns that refer back to what was just discussed.
const ANAPHORA: &[&str] =
    &["it", "its", "they", "them", "their", "theirs", "this", "that", "these", "those", "he", "she", "his", "her"];

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF)
}

/// "Show me that again", "再给我看看刚才那个": asks for the earlier sources, no new subject.
fn asks_for_earlier_sources(q: &str, words: &[&str]) -> bool {
    if q.chars().any(is_cjk) {
        let Some(rest) = chinese_rest(q) else { return false };
        // Latin words and numbers beside the Chinese ("再说说ESG", "再发一下2023的") are a
        // subject unless they too ask for the sources ("把source再发一次").
        return rest.is_empty() && latin_runs(words).all(|w| RESHOW_WORDS_EN.contains(&w.as_str()));
    }
    // "Is that the same document?" asks about a source, it does not ask to see it again.
    if words.first().is_some_and(|w| YES_NO.contains(w)) {
        return false;
    }
    // "more" only in "once more" / "one more time": "show me more sources" asks for others.
    let again_more = |i: usize| words[i] == "more" && i > 0 && matches!(words[i - 1], "once" | "one");
    let back = words.iter().any(|w| BACK_EN.contains(w) || *w == "repeat" || *w == "resend")
        || (0..words.len()).any(again_more);
    let showing = words.iter().any(|w| SHOW_EN.contains(w) || SOURCE_EN.contains(w));
    back && showing && (0..words.len()).all(|i| RESHOW_WORDS_EN.contains(&words[i]) || again_more(i))
}

/// "再说说ESG", "再发一下2023的": Chinese words that ask for the earlier sources again, with a
/// Latin word or a number that names what about — a follow-up on that subject.
fn chinese_again_about(q: &str, words: &[&str]) -> bool {
    chinese_rest(q).is_some_and(|rest| rest.is_empty())
        && latin_runs(words).any(|w| !RESHOW_WORDS_EN.contains(&w.as_str()))
}

/// The Chinese characters of `q` left once the words that ask for the earlier sources are
/// taken out; `None` when it has Chinese but no back-reference (or no Chinese at all).
fn chinese_rest(q: &str) -> Option<String> {
    let cjk: String = q.chars().filter(|c| is_cjk(*c)).collect();
    if cjk.is_empty() || !BACK_ZH.iter().any(|b| cjk.contains(b)) {
        return None;
    }
    Some(RESHOW_ZH.iter().fold(cjk, |rest, w| rest.replace(w, "")))
}

/// Questions that open with these ask yes or no.
const YES_NO: &[&str] = &["is", "are", "was", "were", "does", "did", "has", "have"];

/// The runs of non-Chinese letters and digits inside the words of a message.
fn latin_runs<'a>(words: &'a [&'a str]) -> impl Iterator<Item = String> + 'a {
    words.iter().flat_map(|w| w.split(is_cjk).filter(|r| !r.is_empty()).map(str::to_owned))
}

/// Classifies a question. Without history every question is `new`.
pub fn classify(question: &str, has_history: bool) -> Intent {
    if !has_history {
        return Intent::New;
    }
    let q = question.trim().to_lowercase();
    let words: Vec<&str> = q.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).collect();
    if asks_for_earlier_sources(&q, &words) {
        return Intent::Reshow;
    }
    if chinese_again_about(&q, &words) {
        return Intent::FollowUp;
    }
    // A cue opens the question, or sits in a short one ("can you tell me more?").
    let short = words.len() <= 10;
    if FOLLOW_UP_EN.iter().any(|p| q.starts_with(p) || (short && q.contains(&format!(" {p}"))))
        || FOLLOW_UP_ZH.iter().any(|p| q.contains(p))
        || (q.chars().any(is_cjk) && q.trim_end_matches(['?', '？', '。', '!', '！']).ends_with('呢'))
    {
        return Intent::FollowUp;
    }
    // "Tell me again how…", "show me the previous year's forms", "repeat the part about…":
    // earlier material asked for again, with a subject of its own.
    let showing_again =
        words.first().is_some_and(|w| SHOW_EN.contains(w)) && words.iter().any(|w| BACK_EN.contains(w) || *w == "part");
    if showing_again || words.first().is_some_and(|w| ELLIPTIC_EN.contains(w)) {
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
}
