use super::*;

fn blocks(text: &str, markdown: bool) -> Vec<(Kind, String)> {
    let chars: Vec<char> = text.chars().collect();
    parse(&chars, markdown).blocks.into_iter().map(|b| (b.kind, b.text.string())).collect()
}

#[test]
fn hard_wrapped_paragraphs_and_items_are_joined_and_code_is_kept() {
    let md = "---\ntitle: \"The Guide\"\n---\n## Reading a File\n\nThe call is chained\nonto the result, and the\nfile is read.\n\n- first item\n  goes on\n- second\n\n```rust\nlet x = 1;\n\nlet y = 2;\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n    indented();\n    code();\n\nSetext\n------\n\n> quoted\n> text\n";
    let got = blocks(md, true);
    assert_eq!(
        got,
        vec![
            (Kind::Heading(2), "## Reading a File".into()),
            (Kind::Paragraph, "The call is chained onto the result, and the file is read.".into()),
            (Kind::Item, "- first item goes on".into()),
            (Kind::Item, "- second".into()),
            (Kind::Code, "```rust\nlet x = 1;\n\nlet y = 2;\n```".into()),
            (Kind::Row, "| a | b |".into()),
            (Kind::Row, "|---|---|".into()),
            (Kind::Row, "| 1 | 2 |".into()),
            (Kind::Code, "    indented();\n    code();".into()),
            (Kind::Heading(2), "## Setext".into()),
            (Kind::Paragraph, "> quoted text".into()),
        ]
    );
    let chars: Vec<char> = md.chars().collect();
    let parsed = parse(&chars, true);
    assert_eq!(parsed.front_title.as_deref(), Some("The Guide"));
    assert_eq!(parsed.blocks[0].heading, "Reading a File");
    // Every character keeps its source position: a joined line's words are where they were.
    for b in &parsed.blocks {
        for (c, &at) in b.text.chars.iter().zip(&b.text.at) {
            if !c.is_whitespace() && *c != '#' {
                assert_eq!(chars[at], *c, "{:?}", b.text.string());
            }
        }
        assert!(b.text.at.windows(2).all(|w| w[0] <= w[1]), "positions in order");
    }
}

#[test]
fn plain_text_has_no_headings_or_code_but_joins_its_lines() {
    let got = blocks("# not a heading\nsecond line\n\n    indented line\n\n1. one\n2. two\n", false);
    assert_eq!(
        got,
        vec![
            (Kind::Paragraph, "# not a heading second line".into()),
            (Kind::Paragraph, "indented line".into()),
            (Kind::Item, "1. one".into()),
            (Kind::Item, "2. two".into()),
        ]
    );
}

#[test]
fn html_becomes_markdown_with_headings_items_rows_and_code() {
    let html = "<html><head><title>T</title></head><body><h2>Care</h2><p>Water\nweekly.</p><ul><li>ferns</li><li>palms</li></ul><table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table><pre>x = 1\ny = 2</pre></body></html>";
    let (title, md) = html_to_markdown(html);
    assert_eq!(title.as_deref(), Some("T"));
    assert_eq!(
        blocks(&md, true),
        vec![
            (Kind::Heading(2), "## Care".into()),
            (Kind::Paragraph, "Water weekly.".into()),
            (Kind::Item, "- ferns".into()),
            (Kind::Item, "- palms".into()),
            (Kind::Row, "| a | b |".into()),
            (Kind::Row, "| --- | --- |".into()),
            (Kind::Row, "| 1 | 2 |".into()),
            (Kind::Code, "```\nx = 1\ny = 2\n```".into()),
        ]
    );
}

#[test]
fn comments_are_hidden_outside_code_and_positions_kept() {
    let md = "Recall from [the guide]<!--\nignore --> in Chapter 2  that\nit works.\n\n```html\n<!-- kept -->\n```\n";
    let mut chars: Vec<char> = md.chars().collect();
    hide_comments(&mut chars);
    assert_eq!(chars.len(), md.chars().count());
    let got = parse(&chars, true).blocks.into_iter().map(|b| (b.kind, b.text.string())).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (Kind::Paragraph, "Recall from [the guide] in Chapter 2 that it works.".into()),
            (Kind::Code, "```html\n<!-- kept -->\n```".into()),
        ]
    );
}

#[test]
fn link_definitions_and_lone_tags_are_not_text() {
    let md = "Text with a [link][l].\n\n[l]: https://example.com/a\n<Listing number=\"8-1\" caption=\"A list\">\n\n```rust\nlet v = 1;\n```\n\n</Listing>\n\n<b>Bold</b> stays.\n";
    let got = blocks(md, true);
    assert_eq!(
        got,
        vec![
            (Kind::Paragraph, "Text with a [link][l].".into()),
            (Kind::Code, "```rust\nlet v = 1;\n```".into()),
            (Kind::Paragraph, "<b>Bold</b> stays.".into()),
        ]
    );
}

/// Text that starts like Markdown structure stays text: `<p>```</p>` opens no code block that
/// would swallow the page, `# of users` is no heading, `1. ` no list; the escapes are dropped.
#[test]
fn html_text_that_looks_like_markdown_stays_text() {
    let html = "<p>```</p><p>After the fence.</p><p># of users</p><p>1. not a list</p><p>[x]: not a link</p>";
    let (_, md) = html_to_markdown(html);
    assert_eq!(
        blocks(&md, true),
        vec![
            (Kind::Paragraph, "```".into()),
            (Kind::Paragraph, "After the fence.".into()),
            (Kind::Paragraph, "# of users".into()),
            (Kind::Paragraph, "1. not a list".into()),
            (Kind::Paragraph, "[x]: not a link".into()),
        ]
    );
}
