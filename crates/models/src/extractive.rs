use ragctx_core::{citation_markers, ContextBlock, GenerationRequest, Generator, Result};

/// The offline default generator: the context sentences that share the most terms with the
/// question, each followed by its block's `[n]` marker. Deterministic; no model needed.
#[derive(Clone, Debug)]
pub struct ExtractiveGenerator {
    /// Sentences in the answer at most.
    pub max_sentences: usize,
    /// Sentences taken from one block at most.
    pub per_block: usize,
}

impl Default for ExtractiveGenerator {
    fn default() -> Self {
        ExtractiveGenerator { max_sentences: 3, per_block: 2 }
    }
}

/// The answer when the context is empty.
pub const NOTHING_FOUND: &str = "No new source in the corpus answers this; nothing to cite.";

use ragctx_core::text::fenced_lines;
pub use ragctx_core::text::{is_cjk, sentences, terms};

impl ExtractiveGenerator {
    fn pick<'b>(&self, question: &str, blocks: &'b [ContextBlock]) -> Vec<(u32, &'b str)> {
        let q = terms(question);
        let mut scored: Vec<(f64, usize, usize, u32, &str)> = Vec::new();
        let mut fallback = None;
        for (bi, block) in blocks.iter().enumerate() {
            // Headings and title lines repeat the title; they are not answers.
            let body = prose_sentences(&block.text)
                .filter(|s| s.chars().filter(|c| c.is_alphanumeric()).count() >= 3)
                .filter(|s| !s.starts_with('#') && (s.split_whitespace().count() >= 5 || s.chars().any(is_cjk)));
            for (si, s) in body.enumerate() {
                fallback = fallback.or(Some((block.marker, s)));
                let t = terms(s);
                let shared = q.intersection(&t).count() as f64;
                if shared == 0.0 {
                    continue;
                }
                // Shared terms dominate; the block's rank and the sentence's position break ties.
                let score = shared / (1.0 + (t.len() as f64).ln_1p()) - 0.01 * bi as f64 - 0.001 * si as f64;
                scored.push((score, bi, si, block.marker, s));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut per_block = vec![0usize; blocks.len()];
        let mut chosen = Vec::new();
        for (_, bi, _, marker, s) in scored {
            if chosen.len() >= self.max_sentences {
                break;
            }
            if per_block[bi] < self.per_block {
                per_block[bi] += 1;
                chosen.push((marker, s));
            }
        }
        if chosen.is_empty() {
            // Nothing shares a term with the question: the best block's opening sentence.
            chosen.extend(fallback);
        }
        chosen
    }
}

impl Generator for ExtractiveGenerator {
    fn name(&self) -> &str {
        "extractive"
    }
    fn generate(&self, request: &GenerationRequest<'_>) -> Result<String> {
        let picked = self.pick(request.question, request.blocks);
        // A source the reader already holds that ranks above every new one leads the answer
        // (the generator cannot quote it: only its pointer is in the prompt).
        let best_block = request.blocks.iter().map(|b| b.score).fold(f32::NEG_INFINITY, f32::max);
        let lead = request
            .pointers
            .iter()
            .filter(|p| p.score >= best_block)
            .max_by(|a, b| a.score.total_cmp(&b.score))
            .map(|p| {
                format!("As shown in turn {}, {} answers this [{}].", p.shown_in_turn, unbracket(&p.title), p.marker)
            });
        if picked.is_empty() && lead.is_none() {
            return Ok(NOTHING_FOUND.to_string());
        }
        let quoted = picked.iter().map(|(m, s)| format!("{} [{m}]", unbracket(s)));
        Ok(lead.into_iter().chain(quoted).collect::<Vec<_>>().join(" "))
    }
}

/// A Markdown table's delimiter row (`| --- | :-: |`).
fn delimiter_row(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.contains('-') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// The sentences of `text` outside its fenced code blocks and table headers: a code line, a
/// table's header row or its delimiter row is never an answer sentence (a row of data may
/// be). Sentences end at line ends, so this is [`sentences`] of each line kept.
fn prose_sentences(text: &str) -> impl Iterator<Item = &str> {
    let lines: Vec<&str> = text.split('\n').collect();
    let code = fenced_lines(&lines);
    let header = |k: usize| delimiter_row(lines[k]) || lines.get(k + 1).is_some_and(|n| delimiter_row(n));
    let kept: Vec<&str> = (0..lines.len()).filter(|&k| !code[k] && !header(k)).map(|k| lines[k]).collect();
    kept.into_iter().flat_map(sentences)
}

/// A quoted sentence's own bracketed numbers (footnotes such as "[3]") written as "(3)", so
/// that every citation marker in an answer is one the generator made.
fn unbracket(sentence: &str) -> String {
    let mut out = String::with_capacity(sentence.len());
    let mut from = 0;
    for (range, _) in citation_markers(sentence) {
        out.push_str(&sentence[from..range.start]);
        out.push('(');
        out.push_str(&sentence[range.start + 1..range.end - 1]);
        out.push(')');
        from = range.end;
    }
    out.push_str(&sentence[from..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(marker: u32, text: &str) -> ContextBlock {
        ContextBlock {
            marker,
            document_id: format!("d{marker}").into(),
            title: "t".into(),
            chunk_ids: vec![],
            tokens: 0,
            score: 0.5,
            carried_from: None,
            text: text.into(),
            metadata: Default::default(),
            continued: false,
        }
    }

    #[test]
    fn answers_with_the_matching_sentences_and_their_markers() {
        let blocks = [
            block(4, "Guinea pigs eat hay every single day. They sleep in burrows dug by other animals."),
            block(7, "Capybaras are large rodents. Guinea pigs need vitamin C in their diet."),
        ];
        let g = ExtractiveGenerator::default();
        let ask = |q: &str, blocks: &[ContextBlock]| {
            g.generate(&GenerationRequest { question: q, blocks, pointers: &[], prompt: "" }).unwrap()
        };
        assert_eq!(ask("Where do they sleep at night?", &blocks), "They sleep in burrows dug by other animals. [4]");
        let a = ask("Do guinea pigs need vitamin C?", &blocks);
        assert!(a.starts_with("Guinea pigs need vitamin C in their diet. [7]"), "{a}");
        assert!(a.contains("[4]"), "other sentences sharing terms follow: {a}");
        assert_eq!(
            ask("zebra?", &blocks),
            "Guinea pigs eat hay every single day. [4]",
            "no shared term: the best block's first sentence"
        );
        assert_eq!(ask("q", &[]), NOTHING_FOUND);
    }

    #[test]
    fn a_quoted_footnote_is_not_a_citation() {
        let blocks = [block(1, "Rates rose sharply in 2020 [7]. See [note] and [12a].")];
        let q = "rates rose 2020";
        let g = ExtractiveGenerator::default();
        let answer =
            g.generate(&GenerationRequest { question: q, blocks: &blocks, pointers: &[], prompt: "" }).unwrap();
        assert!(answer.contains("2020 (7). [1]"), "{answer}");
        assert_eq!(unbracket("[note] [12a] [3] x[45]"), "[note] [12a] (3) x(45)");
    }

    #[test]
    fn splits_chinese_and_english_sentences() {
        assert_eq!(
            sentences("第一句。第二句！Third one. 3.5 stays"),
            vec!["第一句。", "第二句！", "Third one.", "3.5 stays"]
        );
        assert!(terms("刚才那个").contains("刚才"));
    }

    #[test]
    fn code_lines_are_never_answer_sentences() {
        let text = "To open the file, call File open with the path of the file.\n\n```rust\nlet file = File::open(path_of_the_file)?; // open the file with the path\n```\n\nThe file is then read to a string.";
        let prose: Vec<&str> = prose_sentences(text).collect();
        assert_eq!(
            prose,
            vec!["To open the file, call File open with the path of the file.", "The file is then read to a string."]
        );
        let answer = ExtractiveGenerator::default()
            .generate(&GenerationRequest {
                question: "How do I open the file with its path?",
                blocks: &[block(1, text)],
                pointers: &[],
                prompt: "",
            })
            .unwrap();
        assert!(!answer.contains("File::open"), "{answer}");
        assert!(answer.starts_with("To open the file"), "{answer}");
    }

    #[test]
    fn table_headers_are_never_answer_sentences_but_rows_may_be() {
        let text = "| Plant | Water when | Winter |\n| --- | --- | --- |\n| Calathea | water when the top is dry | less often |";
        let prose: Vec<&str> = prose_sentences(text).collect();
        assert_eq!(prose, vec!["| Calathea | water when the top is dry | less often |"]);
    }
}
