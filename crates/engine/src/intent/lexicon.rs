//! The closed word classes the intent rules read. A reshow is a message made only of these
//! (verbs of showing, nouns for what was shown, back-references, function words): any other
//! word is a subject of its own. The classes are closed on purpose — a word missing here
//! makes a reshow a follow-up (evidence is re-ranked, not hidden), never the other way round.

/// Verbs that ask to see what was shown again, alone enough to make a reshow ("repeat that").
pub(super) const SHOW_EN: &[&str] = &[
    "show",
    "showed",
    "shown",
    "showing",
    "reshow",
    "display",
    "displayed",
    "redisplay",
    "repeat",
    "repeated",
    "resend",
    "send",
    "sent",
    "repost",
    "paste",
    "quote",
    "quoted",
    "list",
    "pull",
    "bring",
    "remind",
];
/// Verbs of giving or saying: a reshow with a back-reference or a source ("say that again").
pub(super) const SAY_EN: &[&str] =
    &["give", "gave", "given", "post", "see", "say", "said", "tell", "share", "cite", "cited", "referenced", "present"];
/// Verbs that as often ask about the subject ("can I get it again?", "where do I put it"): a
/// reshow only beside a source or a verb of showing.
pub(super) const NEUTRAL_VERB_EN: &[&str] =
    &["get", "got", "use", "used", "put", "open", "reopen", "provide", "provided"];

/// What a turn showed: its sources and its answer.
pub(super) const SOURCE_EN: &[&str] = &[
    "source",
    "sources",
    "link",
    "links",
    "url",
    "urls",
    "reference",
    "references",
    "citation",
    "citations",
    "passage",
    "passages",
    "excerpt",
    "excerpts",
    "quotes",
    "document",
    "documents",
    "doc",
    "docs",
    "result",
    "results",
    "evidence",
    "material",
    "materials",
    "article",
    "articles",
    "file",
    "files",
    "snippet",
    "snippets",
    "answer",
    "response",
    "reply",
    "output",
    "context",
];

/// Words that point back at what was shown before.
pub(super) const BACK_EN: &[&str] =
    &["again", "previous", "last", "earlier", "before", "same", "back", "once", "just", "original", "prior", "ago"];

/// Everything else a message that only asks for the earlier sources may contain.
pub(super) const FUNCTION_EN: &[&str] = &[
    "me", "us", "u", "ur", "i", "i'd", "i'm", "we", "you", "it", "its", "that", "this", "those", "these", "them", "em",
    "the", "a", "an", "to", "from", "as", "of", "for", "with", "in", "at", "by", "what", "which", "where", "were",
    "was", "is", "are", "did", "do", "can", "could", "would", "will", "please", "pls", "plz", "let", "lemme", "my",
    "your", "our", "all", "now", "here", "over", "up", "go", "ok", "okay", "hey", "hi", "kindly", "thanks", "thank",
    "thx", "whole", "sorry", "mind", "like", "want", "and", "one", "time", "moment", "re", "called", "first", "second",
    "third", "fourth", "fifth", "1st", "2nd", "3rd", "two", "three", "both", "missed", "lost", "catch", "didn't",
    "didnt", "scroll", "set",
];

/// What may follow "I" or "we" in a reshow ("could I see", "I lost the references"); any
/// other verb is the user's own action ("can I bring it?", "can we go back?").
pub(super) const FIRST_PERSON_EN: &[&str] = &["see", "get", "got", "want", "like", "lost", "missed", "didn't", "didnt"];

/// Questions that open with these ask yes or no ("Is that the same document?").
pub(super) const YES_NO_EN: &[&str] = &["is", "are", "was", "were", "does", "did", "has", "have"];

/// Pronouns and determiners that refer back to what was just discussed.
pub(super) const ANAPHORA_EN: &[&str] =
    &["it", "its", "they", "them", "their", "theirs", "this", "that", "these", "those", "he", "she", "his", "her"];

/// After "this" / "that" these are a time, not a reference ("this year").
pub(super) const DEICTIC_TIME_EN: &[&str] =
    &["year", "month", "week", "weekend", "morning", "afternoon", "evening", "summer", "winter", "spring", "fall"];

/// Parts of what was shown, named after "the", an ordinal or "last" ("the second link").
pub(super) const PART_EN: &[&str] = &[
    "source",
    "sources",
    "link",
    "links",
    "document",
    "documents",
    "doc",
    "article",
    "articles",
    "study",
    "paper",
    "result",
    "results",
    "table",
    "paragraph",
    "section",
    "part",
    "page",
    "chart",
    "figure",
    "step",
    "steps",
    "option",
    "options",
    "point",
    "points",
    "author",
    "passage",
    "quote",
    "list",
];

pub(super) const ORDINAL_EN: &[&str] = &["first", "second", "third", "fourth", "fifth", "last", "1st", "2nd", "3rd"];

/// Phrases that continue the topic wherever they stand.
pub(super) const FOLLOW_UP_EN: &[&str] = &[
    "tell me more",
    "more about",
    "more on",
    "more details",
    "more detail",
    "go on",
    "keep going",
    "continue",
    "elaborate",
    "what else",
    "in more detail",
    "expand on",
    "you mentioned",
    "you said",
    "what you said",
    "you showed",
    "you quoted",
    "what if",
    "which one",
    "which of",
    "the two",
    "the same",
    "then what",
    "how come",
    "break that down",
    "simpler terms",
];
/// Words of showing or of what was shown that a typing slip may hit ("shw me the sorces").
pub(super) const SLIP_EN: &[&str] = &["again", "please", "previous", "earlier"];

/// A message that opens with one of these may lean on the previous turn ("And for children?").
pub(super) const ELLIPTIC_EN: &[&str] = &["and", "but", "also", "so", "then", "ok", "okay", "thanks", "thx", "wait"];

/// A bare question word ("why?", "how?") asks about what was just said.
pub(super) const WH_EN: &[&str] = &["why", "how", "when", "where", "who", "what"];

/// An ending auxiliary leaves its verb out ("what if I don't").
pub(super) const ELIDED_EN: &[&str] = &["don't", "dont", "can't", "cant", "won't", "isn't", "doesn't", "didn't", "not"];

// Chinese has no spaces: a reshow is a message that is empty once these are taken out
// (longest first, see `reshow_zh_words`).
pub(super) const RESHOW_ZH: &[&str] = &[
    "再给我看看",
    "给我看看",
    "再看看",
    "看一下",
    "看一眼",
    "一眼",
    "看看",
    "瞧瞧",
    "瞧",
    "看清",
    "没看清",
    "看",
    "刚才",
    "刚刚",
    "之前",
    "上次",
    "上一个",
    "上一条",
    "上一段",
    "上一轮",
    "上面",
    "那几个",
    "那几篇",
    "几个",
    "几篇",
    "那个",
    "那段",
    "那些",
    "这些",
    "这个",
    "那",
    "这",
    "的",
    "了",
    "来源",
    "资料",
    "内容",
    "文档",
    "文件",
    "文献",
    "段落",
    "出处",
    "引用",
    "原文",
    "链接",
    "参考",
    "结果",
    "搜索",
    "信息",
    "依据",
    "出自",
    "回答",
    "答案",
    "重新",
    "重复",
    "重发",
    "再发",
    "发",
    "贴",
    "打开",
    "调出来",
    "调出",
    "一次",
    "一遍",
    "一下",
    "一份",
    "遍",
    "下",
    "显示",
    "展示",
    "列出来",
    "列出",
    "列",
    "出来",
    "给过",
    "给",
    "我",
    "你",
    "把",
    "请",
    "麻烦",
    "谢谢",
    "能不能",
    "能",
    "可以",
    "想",
    "用",
    "是",
    "哪些",
    "哪篇",
    "哪个",
    "哪里",
    "从哪",
    "什么",
    "叫",
    "来着",
    "吗",
    "呢",
    "吧",
    "呗",
    "再说",
    "说",
    "再来",
    "来",
    "再",
    "段",
    "个",
    "条",
    "篇",
    "份",
    "还是",
];
/// Back-references in Chinese ("again", "just now", "the last one", "before").
pub(super) const BACK_ZH: &[&str] =
    &["再", "刚才", "刚刚", "上一个", "上一条", "上一轮", "上次", "之前", "上面", "重新", "重复", "重发", "一遍"];
/// Asking where an answer came from needs no back-reference ("来源呢", "依据是什么").
pub(super) const SOURCE_QUESTION_ZH: &[&str] = &["来源", "出处", "依据", "出自", "从哪"];
/// Ordinals of what was shown ("第二个来源").
pub(super) const ORDINAL_DIGITS_ZH: &str = "一二三四五六七八九十";
pub(super) const ORDINAL_UNITS_ZH: &str = "个篇条段份点项";

/// Characters or words that continue the topic wherever they stand.
pub(super) const FOLLOW_UP_ZH: &[&str] = &[
    "详细",
    "更多",
    "继续",
    "接着",
    "展开",
    "还有呢",
    "还有别的",
    "还有其他",
    "具体",
    "例子",
    "举例",
    "解释",
    "什么意思",
    "没懂",
    "不懂",
    "不明白",
    "简单一点",
    "一步一步",
    "然后呢",
    "那它",
    "它",
    "他们的",
    "这个",
    "这两",
    "那两",
    "那篇",
    "这篇",
    "文章",
    "哪个更",
    "上面",
    "上述",
    "你说的",
    "提到",
    "那个",
    "那些",
    "再看看",
    "再给我看看",
    "再讲讲",
    "再说说",
    "刚才",
    "刚刚",
    "上一个",
    "上一条",
    "上次",
    "之前",
];
/// A clause that opens with one of these leans on what was said ("那公司需要做什么").
pub(super) const OPENER_ZH: &[&str] = &["那", "所以", "然后", "那么"];
/// Openers that leave the subject out ("有什么副作用", "一天吃几次").
pub(super) const NO_SUBJECT_ZH: &[&str] = &["有什么", "有没有", "需要", "要多久", "多久", "只", "也"];
