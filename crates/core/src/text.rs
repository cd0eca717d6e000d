//! Words and sentences of a text, one way for every part that reads text: the extractive
//! generator's terms and sentences, the condenser's check of a rewrite, and the near-duplicate
//! stage's sentences.

use std::collections::HashSet;

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "are", "was", "were", "what", "which", "who", "whom", "whose", "how", "why", "when", "where",
    "does", "did", "can", "could", "would", "should", "will", "with", "that", "this", "these", "those", "there",
    "their", "they", "them", "have", "has", "had", "you", "your", "from", "about", "into", "than", "then", "also",
    "more", "tell", "some", "any", "its", "it's", "our", "not", "but", "all", "been", "being", "such", "other",
];

/// Lower-cased word terms (3+ letters, no stopwords) and CJK character bigrams.
pub fn terms(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let lower = text.to_lowercase();
    for w in lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let cjk: Vec<char> = w.chars().filter(|c| is_cjk(*c)).collect();
        if cjk.len() >= 2 {
            for pair in cjk.windows(2) {
                out.insert(pair.iter().collect());
            }
        } else if cjk.len() == 1 {
            out.insert(cjk[0].to_string());
        }
        let latin: String = w.chars().filter(|c| !is_cjk(*c)).collect();
        if latin.chars().count() >= 3 && !STOPWORDS.contains(&latin.as_str()) {
            out.insert(latin);
        }
    }
    out
}

/// Whether `c` is written without spaces between words (Han, kana, Hangul): a word, or in
/// `terms` and BM25 a bigram's half, of its own. The one definition every stage uses.
pub fn is_cjk(c: char) -> bool {
    is_han(c) || matches!(c as u32, 0x3040..=0x30FF | 0xAC00..=0xD7AF)
}

/// Whether `c` is a Han ideograph (the unified blocks, extension A, the supplementary
/// ideographic planes and the compatibility ideographs): Chinese text, for the intent rules.
pub fn is_han(c: char) -> bool {
    matches!(c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

/// A Markdown code fence's opening line (three or more backticks or tildes, indented at most
/// three spaces): its character and length. The one definition the chunker and the extractive
/// answer read code blocks by.
pub fn code_fence(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

/// Whether `line` closes the code block `open` opened ([`code_fence`]): the same character,
/// at least as many, and nothing else on the line.
pub fn closes_fence(line: &str, open: (char, usize)) -> bool {
    code_fence(line).is_some_and(|(c, n)| c == open.0 && n >= open.1) && line.trim().chars().all(|x| x == open.0)
}

/// For each of `lines`, whether it belongs to a fenced code block (its fence lines included).
pub fn fenced_lines<S: AsRef<str>>(lines: &[S]) -> Vec<bool> {
    let mut open: Option<(char, usize)> = None;
    lines
        .iter()
        .map(|line| {
            let line = line.as_ref();
            match open {
                Some(f) => {
                    if closes_fence(line, f) {
                        open = None;
                    }
                    true
                }
                None => {
                    open = code_fence(line);
                    open.is_some()
                }
            }
        })
        .collect()
}

/// Splits text into sentences on `.`, `!`, `?` (followed by space), CJK stops and newlines;
/// every sentence that is not blank, trimmed.
pub fn sentences(text: &str) -> Vec<&str> {
    sentence_spans(text).into_iter().map(|(a, b)| &text[a..b]).collect()
}

/// [`sentences`] as byte spans of `text`.
pub fn sentence_spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut push = |a: usize, b: usize| {
        let s = &text[a..b];
        let trimmed = s.trim_start();
        let a = a + (s.len() - trimmed.len());
        let b = a + trimmed.trim_end().len();
        if b > a {
            out.push((a, b));
        }
    };
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        let next_is_space = chars.get(k + 1).is_none_or(|&(_, n)| n.is_whitespace());
        let end = match c {
            '\n' | '。' | '！' | '？' => true,
            '.' | '!' | '?' => next_is_space,
            _ => false,
        };
        if end {
            push(start, i + c.len_utf8());
            start = i + c.len_utf8();
        }
    }
    push(start, text.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_open_close_and_mark_their_lines() {
        assert_eq!(code_fence("```rust"), Some(('`', 3)));
        assert_eq!(code_fence("   ~~~~"), Some(('~', 4)));
        assert_eq!(code_fence("    ```"), None, "four spaces in is indented code, not a fence");
        assert_eq!(code_fence("``"), None);
        assert!(closes_fence("````", ('`', 3)));
        assert!(!closes_fence("```rust", ('`', 3)), "an info string opens, never closes");
        assert!(!closes_fence("~~~", ('`', 3)));
        let lines = ["prose", "```", "code", "~~~", "```", "after", "~~~", "unclosed"];
        assert_eq!(fenced_lines(&lines), vec![false, true, true, true, true, false, true, true]);
    }
}
