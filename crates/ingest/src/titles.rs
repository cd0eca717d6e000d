//! Titles that name no document: what a template, a producer or a file system leaves where a
//! title should be. Each reader skips them for the next candidate (docs/documents.md).

/// A title that does not name its document: a template's or a producer's placeholder
/// (`Untitled`, `Document1`, `（填写标准名称）`), a source file's name (`Microsoft Word -
/// x.doc`, `report.docx`), or a fragment (tabs inside, under two letters or digits).
pub(crate) fn placeholder_title(title: &str) -> bool {
    let t = title.trim();
    let bare: String =
        t.trim_matches(|c: char| c.is_whitespace() || "()（）[]【】<>《》\"'“”‘’.:：_-".contains(c)).to_lowercase();
    let bare = bare.split_whitespace().collect::<Vec<_>>().join(" ");
    const PLACEHOLDERS: &[&str] = &[
        "untitled",
        "untitled document",
        "no title",
        "title",
        "document",
        "new document",
        "front cover",
        "cover",
        "cover page",
        "presentation",
        "powerpoint presentation",
        "slide 1",
        "insert title here",
        "title here",
        "your title here",
        "enter title",
        "template",
        "标准名称",
        "填写标准名称",
        "标题",
        "无标题",
        "文档",
        "無題",
        "タイトル",
        "제목 없음",
        "sans titre",
        "ohne titel",
        "sin título",
        "senza titolo",
    ];
    // A program's name for a new file, numbered (`Document1`, `新規文書2`, `新建文档 3`).
    let numbered_default =
        ["document", "doc", "untitled", "presentation", "book", "新規文書", "新建文档", "文档", "ドキュメント", "문서"]
            .iter()
            .any(|p| {
                bare.strip_prefix(p).is_some_and(|n| !n.is_empty() && n.trim().chars().all(|c| c.is_ascii_digit()))
            });
    // An identifier, not a name: no letter in eight characters or more (`1498388729087707280-05901666`).
    let identifier = t.chars().count() >= 8 && !t.chars().any(char::is_alphabetic);
    let lower = t.to_lowercase();
    let file_name = lower.starts_with("microsoft word - ")
        || lower.starts_with("microsoft powerpoint - ")
        || [
            ".doc", ".docx", ".odt", ".tex", ".dvi", ".html", ".htm", ".txt", ".md", ".pdf", ".rtf", ".indd", ".qxd",
            ".ppt", ".pptx",
        ]
        .iter()
        .any(|e| lower.ends_with(e));
    // A template's slot to fill: `[NAME OF COMPANY]`, `<Title>`, `{{title}}`.
    let slot = (t.starts_with('[') && t.ends_with(']'))
        || (t.starts_with('<') && t.ends_with('>'))
        || (t.starts_with("{{") && t.ends_with("}}"));
    // A table of contents' heading names no document.
    let contents = [
        "contents",
        "table of contents",
        "目次",
        "目录",
        "目 次",
        "目 录",
        "inhalt",
        "inhaltsverzeichnis",
        "sommaire",
        "índice",
        "목차",
        "차례",
    ]
    .contains(&bare.as_str());
    PLACEHOLDERS.contains(&bare.as_str())
        || slot
        || contents
        || numbered_default
        || identifier
        || file_name
        || t.contains('\t')
        || t.chars().filter(|c| c.is_alphanumeric()).count() < 2
}
