use super::*;
use crate::{read_document, DocumentFormat};
use ragctx_core::{MetaValue, PAGE_END_KEY, PAGE_START_KEY, SECTION_KEY};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../../tests/fixtures/documents/pdf/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pages_of(c: &crate::SourcedChunk) -> (Option<MetaValue>, Option<MetaValue>) {
    (c.chunk.metadata.get(PAGE_START_KEY).cloned(), c.chunk.metadata.get(PAGE_END_KEY).cloned())
}

/// The report of `tests/fixtures/documents/pdf` as three producers print it (Chromium,
/// LibreOffice from DOCX, pdfTeX), six pages, each stating a fact no other page does.
#[test]
fn three_producers_read_with_titles_sections_and_the_page_of_each_fact() {
    let facts = [
        (1, "welcomed 148,200 visits", "A year of the library"),
        (2, "hosted 412 story hours", "The ground floor and the children"),
        (3, "seats 84 people", "The reading room on the third floor"),
        (4, "booked for 640 hours", "The makerspace in the basement"),
        (5, "fixed 774 of the 1,020 objects", "Events and the repair café"),
        (6, "spent 1.92 million euros", "Money and the year ahead"),
    ];
    for producer in ["chromium", "libreoffice", "pdftex"] {
        let file = format!("report-{producer}.pdf");
        let read = read_document(&file, &fixture(&file), DocumentFormat::Pdf).unwrap();
        assert_eq!((read.pages, read.left_out.clone()), (Some(6), vec![]), "{producer}");
        for c in &read.chunks {
            assert_eq!(c.chunk.title, "Harbour Street Library: annual report 2025", "{producer}");
        }
        for (page, fact, section) in facts {
            let at: Vec<&crate::SourcedChunk> = read.chunks.iter().filter(|c| c.chunk.text.contains(fact)).collect();
            assert_eq!(at.len(), 1, "{producer}: {fact}");
            let page = Some(MetaValue::Number(f64::from(page)));
            assert_eq!(pages_of(at[0]), (page.clone(), page), "{producer}: {fact}");
            let shown = match at[0].chunk.metadata.get(SECTION_KEY) {
                Some(MetaValue::String(s)) => s.replace('’', "'"),
                other => panic!("{producer}: {fact}: section {other:?}"),
            };
            assert!(shown.starts_with(section), "{producer}: {fact}: {shown}");
        }
        let all: String = read.chunks.iter().map(|c| c.chunk.text.as_str()).collect::<Vec<_>>().join("\n");
        // No page number, no hyphen left from a broken line, the accent on its letter.
        assert!(!all.lines().any(page_number), "{producer}: {all}");
        assert!(all.contains("welcomed") && all.contains("machines") && all.contains("repair café"), "{producer}");
        assert!(all.contains("self-service"), "{producer}");
    }
    // LibreOffice's bullets are list items, its table's rows rows.
    let lo = read_document("r.pdf", &fixture("report-libreoffice.pdf"), DocumentFormat::Pdf).unwrap();
    let all: String = lo.chunks.iter().map(|c| c.chunk.text.as_str()).collect::<Vec<_>>().join("\n");
    assert!(all.contains("\n- The toy library lent 1,150 games"), "{all}");
    assert!(all.contains("| Item | 2024 | 2025 |\n| --- | --- | --- |\n| Visits | 131,700 | 148,200 |"), "{all}");
}

fn line(text: &str, x: f64, y: f64, size: f64) -> Line {
    Line { text: text.into(), x, y, end: x + 300.0, size, advance_known: true }
}

/// Pages of lines at 14 pt steps under a running header, with the page number at the foot;
/// a line starting `# ` is set in 16 pt, the others in 11 pt.
fn page(n: u32, body: &[&str]) -> (u32, Vec<Line>) {
    let mut lines = vec![line("Harbour Street Library — annual report", 72.0, 40.0, 9.0)];
    for (i, t) in body.iter().enumerate() {
        let size = if t.starts_with("# ") { 16.0 } else { 11.0 };
        lines.push(line(t.trim_start_matches("# "), 72.0, 80.0 + 14.0 * i as f64, size));
    }
    lines.push(line(&n.to_string(), 300.0, 760.0, 11.0));
    (n, lines)
}

fn read(mut pages: Vec<(u32, Vec<Line>)>, total: u32) -> (PdfText, crate::ReadDocument) {
    let only_running = drop_running_lines(&mut pages);
    let mut pdf = PdfText { pages: total, only_running, ..Default::default() };
    write_markdown(&pages, &mut pdf);
    let markdown = pdf.markdown.clone();
    let chunks = crate::chunker::chunk_pdf("hours.pdf", pdf).unwrap();
    (PdfText { markdown, ..Default::default() }, chunks)
}

fn n(p: u32) -> Option<MetaValue> {
    Some(MetaValue::Number(f64::from(p)))
}

/// A paragraph that runs on over a page break is one, and its chunk names both pages; a
/// running header and the page numbers are left out; a heading set
/// in larger type is a heading; a page with nothing but the running lines is named.
#[test]
fn a_paragraph_over_a_page_break_names_both_pages() {
    let pages = vec![
        page(
            1,
            &[
                "# Opening hours",
                "The library opens at nine on weekdays and stays open",
                "until eight in the evening, when the last",
            ],
        ),
        page(2, &["readers leave by the garden door. On Saturdays it closes at four."]),
        page(3, &["# Membership", "Members pay nothing and may borrow twenty items."]),
        page(4, &[]),
    ];
    let (pdf, read) = read(pages, 4);
    assert_eq!(
        pdf.markdown,
        "# Opening hours\n\nThe library opens at nine on weekdays and stays open until eight in the evening, when the last readers leave by the garden door. On Saturdays it closes at four.\n\n# Membership\n\nMembers pay nothing and may borrow twenty items.\n\n"
    );
    assert_eq!(
        read.left_out,
        vec!["page 4 with only a running header or page number (scanned? ragctx runs no OCR)".to_owned()]
    );
    assert_eq!(read.chunks.len(), 2);
    assert!(read.chunks[0].chunk.text.contains("garden door"));
    assert_eq!(pages_of(&read.chunks[0]), (n(1), n(2)));
    assert_eq!(pages_of(&read.chunks[1]), (n(3), n(3)));
}

/// A page's first line that goes on with the last page's paragraph starts the page where
/// its words start: a paragraph that opens page 1 and ends on page 2 names both, and a
/// paragraph too long for one chunk gives a first piece of page 1 alone.
#[test]
fn a_page_starts_where_its_words_do() {
    let (_, short) =
        read(vec![page(1, &["The doors open at nine and the", "last"]), page(2, &["readers leave at eight."])], 2);
    assert_eq!(short.chunks.len(), 1);
    assert_eq!(pages_of(&short.chunks[0]), (n(1), n(2)));
    // Where each page begins in the chunk's text: what the sentence index takes pages from.
    let text = &short.chunks[0].chunk.text;
    let second = text.find("readers").expect("page 2's words in the chunk");
    assert_eq!(short.chunks[0].page_starts, vec![(0, 1), (second, 2)], "{text:?}");
    let long_line = "Members borrow books, films and games for three weeks and may renew them twice online";
    let first: Vec<&str> = std::iter::repeat_n(long_line, 20).collect();
    let second: Vec<&str> =
        std::iter::repeat_n("and the desk renews them by telephone for members who ask", 8).collect();
    let (_, long) = read(vec![page(1, &first), page(2, &second)], 2);
    assert!(long.chunks.len() >= 2, "{}", long.chunks.len());
    assert_eq!(pages_of(&long.chunks[0]), (n(1), n(1)));
    assert_eq!(pages_of(long.chunks.last().unwrap()).1, n(2));
}

/// What is not a bullet, a page number or a running line: a dash inside a sentence, a
/// chapter's own heading on a few pages; a table's last row and the next page's first line
/// stay apart.
#[test]
fn dashes_chapters_and_tables_stay_what_they_are() {
    let (pdf, _) = read(
        vec![
            page(
                1,
                &[
                    "# Chapter 1",
                    "The repair café fixed lamps, toasters and the rest",
                    "– which were most of what came in.",
                ],
            ),
            page(2, &["The makerspace lends tools."]),
            page(3, &["# Chapter 2", "Events filled the year."]),
            page(4, &["Talks were full.", "Item\u{1F}2025", "Visits\u{1F}148,200"]),
            page(5, &["more visits came in December than in any month."]),
            page(6, &["The end."]),
            page(7, &["Really the end."]),
        ],
        7,
    );
    assert!(pdf.markdown.contains("the rest – which were most"), "{}", pdf.markdown);
    assert!(pdf.markdown.contains("# Chapter 1") && pdf.markdown.contains("# Chapter 2"), "{}", pdf.markdown);
    assert!(pdf.markdown.contains("| Visits | 148,200 |\n\nmore visits came"), "{}", pdf.markdown);
}

/// A glyph of 10 pt type on one baseline, starting its run of text.
fn glyph(text: &str, x: f64, advance: f64) -> Glyph {
    Glyph { text: text.into(), x, y: 100.0, advance, size: 10.0, word_start: true }
}

/// A TeX accent set over its letter is one letter, and a word that starts with one keeps its
/// space; an acute typed as an apostrophe stays.
#[test]
fn an_accent_over_its_letter_is_one_letter() {
    // TeX: `caf`, the accent (3 pt wide) at 14.5, the `e` kerned back under it at 14; then
    // ` un ´eté`, a word that starts with an accented letter.
    let tex = Lines {
        glyphs: vec![
            glyph("c", 0.0, 5.0),
            glyph("a", 5.0, 5.0),
            glyph("f", 10.0, 3.0),
            glyph("\u{B4}", 14.5, 3.0),
            glyph("e", 14.0, 5.0),
            glyph("u", 22.0, 5.0),
            glyph("n", 27.0, 5.0),
            glyph("\u{B4}", 35.5, 3.0),
            glyph("e", 35.0, 5.0),
            glyph("t", 40.0, 3.0),
            glyph("\u{B4}", 43.5, 3.0),
            glyph("e", 43.0, 5.0),
        ],
        ..Default::default()
    };
    assert_eq!(tex.lay_out()[0].text, "café un été");
    let typed = Lines {
        glyphs: vec![glyph("r", 0.0, 4.0), glyph("\u{B4}", 4.0, 3.0), glyph("s", 7.0, 4.0)],
        ..Default::default()
    };
    assert_eq!(typed.lay_out()[0].text, "r\u{B4}s");
}

#[test]
fn what_cannot_be_read_is_said() {
    let err = |bytes: &[u8]| read_document("x.pdf", bytes, DocumentFormat::Pdf).unwrap_err().to_string();
    assert_eq!(err(b"plain text"), "x.pdf: not a PDF file (no %PDF- header)");
    assert!(err(b"%PDF-1.7\n% nothing else").starts_with("x.pdf: not a readable PDF ("), "{}", err(b"%PDF-1.7\n"));
    // Every page without text: refused, with why.
    let pdf = PdfText { pages: 2, without_text: vec![1, 2], ..Default::default() };
    let e = crate::chunker::chunk_pdf("scan.pdf", pdf).unwrap_err().to_string();
    assert_eq!(
        e,
        "scan.pdf: no text to read in its 2 pages: pages 1–2 without a text layer (scanned? ragctx runs no OCR)"
    );
    // Pages that failed alike are named together.
    let unreadable =
        vec![(1, "bad font".to_owned()), (2, "bad font".to_owned()), (4, "bad font".to_owned()), (3, "x".to_owned())];
    let e = crate::chunker::chunk_pdf("f.pdf", PdfText { pages: 4, unreadable, ..Default::default() }).unwrap_err();
    assert_eq!(e.to_string(), "f.pdf: no text to read in its 4 pages: pages 1–2, 4 could not be read (bad font); page 3 could not be read (x)");
}

/// A gap after a glyph of known width is a space past a tenth of the type (TeX sets no space
/// glyphs); after one of unknown width only when wide; a page's own space glyphs count once.
#[test]
fn spaces_come_from_the_page_s_own_or_from_gaps() {
    // Widths read as zero: "ab cd" set with its space glyph, 5 pt a letter.
    let own = Lines {
        glyphs: vec![
            glyph("a", 0.0, 0.0),
            glyph("b", 5.0, 0.0),
            glyph(" ", 10.0, 0.0),
            glyph("c", 13.0, 0.0),
            glyph("d", 18.0, 0.0),
        ],
        ..Default::default()
    };
    assert_eq!(own.lay_out()[0].text, "ab cd");
    // TeX: no space glyphs, a word gap of 3 pt.
    let tex = Lines {
        glyphs: vec![glyph("a", 0.0, 5.0), glyph("b", 5.0, 5.0), glyph("c", 13.0, 5.0), glyph("d", 18.0, 5.0)],
        ..Default::default()
    };
    assert_eq!(tex.lay_out()[0].text, "ab cd");
    // A column's gap: a cell.
    let row = Lines { glyphs: vec![glyph("a", 0.0, 5.0), glyph("1", 60.0, 5.0)], ..Default::default() };
    assert_eq!(row.lay_out()[0].text, format!("a{CELL}1"));
}

/// A PDF of `objects` (bodies numbered from 1, the first the catalog), its xref right.
fn crafted(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.7\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n", i + 1).bytes());
        out.extend(body);
        out.extend(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).bytes());
    for o in offsets {
        out.extend(format!("{o:010} 00000 n \n").bytes());
    }
    out.extend(format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).bytes());
    out
}

fn stream(data: &[u8], dict: &str) -> Vec<u8> {
    let mut s = format!("<< /Length {}{dict} >>\nstream\n", data.len()).into_bytes();
    s.extend(data);
    s.extend(b"\nendstream");
    s
}

fn deflated(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(data).unwrap();
    z.finish().unwrap()
}

const CATALOG: &str = "<< /Type /Catalog /Pages 2 0 R >>";
const ONE_PAGE: &str = "<< /Type /Pages /Kids [3 0 R] /Count 1 >>";

/// A page drawing form `/X` (object 4) and content `content` (object 5): the form's own
/// content is `form`, its resources name `/X` as `names`.
fn with_form(form: &[u8], names: &str) -> Vec<u8> {
    crafted(&[
        CATALOG.into(),
        ONE_PAGE.into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X 4 0 R >> >> /Contents 5 0 R >>".into(),
        stream(form, &format!(" /Type /XObject /Subtype /Form /BBox [0 0 1 1] /Resources << /XObject << {names} >> >>")),
        stream(b"/X Do", ""),
    ])
}

/// A file past a limit is refused with the limit it passed, before pdf-extract reads it: a
/// form that draws itself (which overflowed the stack), a stream inflating past its cap
/// (which took gigabytes), forms drawing forms a billion times.
#[test]
fn a_crafted_pdf_is_refused_with_the_limit_it_passed() {
    let refused = |bytes: Vec<u8>| read_document("x.pdf", &bytes, DocumentFormat::Pdf).unwrap_err().message;
    let itself = refused(with_form(b"/X Do", "/X 4 0 R"));
    assert_eq!(itself, "passed a limit: a form (object 4 0) draws itself");
    // Without its subtype (pdf-extract draws it all the same: a fuzzed file overflowed here).
    let untyped = String::from_utf8_lossy(&with_form(b"/X Do", "/X 4 0 R")).replace("/Subtype /Form ", "");
    assert_eq!(refused(untyped.into_bytes()), "passed a limit: a form (object 4 0) draws itself");
    // A form without resources draws with its page's: the same loop.
    let inherited = crafted(&[
        CATALOG.into(),
        ONE_PAGE.into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X 4 0 R >> >> /Contents 5 0 R >>".into(),
        stream(b"/X Do", " /Type /XObject /Subtype /Form /BBox [0 0 1 1]"),
        stream(b"/X Do", ""),
    ]);
    assert_eq!(refused(inherited), "passed a limit: a form (object 4 0) draws itself");
    // 24 forms each drawing the next eight times: 8^24 draws from 24 small streams.
    let mut objects: Vec<Vec<u8>> = vec![
        CATALOG.into(),
        ONE_PAGE.into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /F 4 0 R >> >> /Contents 28 0 R >>".into(),
    ];
    for i in 0..24 {
        let resources =
            if i < 23 { format!(" /Resources << /XObject << /F {} 0 R >> >>", 5 + i) } else { String::new() };
        let body: &[u8] = if i < 23 { b"/F Do /F Do /F Do /F Do /F Do /F Do /F Do /F Do" } else { b"" };
        objects.push(stream(body, &format!(" /Type /XObject /Subtype /Form /BBox [0 0 1 1]{resources}")));
    }
    objects.push(stream(b"/F Do", ""));
    assert_eq!(refused(crafted(&objects)), "passed a limit: it draws forms more than 100000 times");
    // 65 MiB of spaces in 65 kB.
    let bomb = deflated(&vec![b' '; 65 << 20]);
    let page = crafted(&[
        CATALOG.into(),
        ONE_PAGE.into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>".into(),
        stream(&bomb, " /Filter /FlateDecode"),
    ]);
    assert_eq!(refused(page), "passed a limit: a stream (object 4 0) inflates past 64 MiB, the most one stream may");
    // Deflated twice: the inner stream is capped as it inflates, never held whole.
    let twice = crafted(&[
        CATALOG.into(),
        ONE_PAGE.into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>".into(),
        stream(&deflated(&bomb), " /Filter [/FlateDecode /FlateDecode]"),
    ]);
    assert_eq!(refused(twice), "passed a limit: a stream (object 4 0) inflates past 64 MiB, the most one stream may");
}

/// Forms that draw forms within the limits are read, and a form drawn twice is read twice;
/// a page of text in a deflated stream reads as it did before its stream was inflated here.
#[test]
fn forms_within_the_limits_are_read() {
    let font = "/Font << /F1 6 0 R >>";
    let doc = crafted(&[
        CATALOG.into(),
        ONE_PAGE.into(),
        format!("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X 4 0 R >> {font} >> /Contents 5 0 R >>").into_bytes(),
        stream(b"BT /F1 12 Tf 72 700 Td (Vents open at 27 degrees.) Tj ET", &format!(" /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << {font} >>")),
        stream(&deflated(b"BT /F1 12 Tf 72 720 Td (The greenhouse log.) Tj ET /X Do"), " /Filter /FlateDecode"),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ]);
    let read = read_document("g.pdf", &doc, DocumentFormat::Pdf).unwrap();
    let text: String = read.chunks.iter().map(|c| c.chunk.text.as_str()).collect();
    assert!(text.contains("The greenhouse log.") && text.contains("Vents open at 27 degrees."), "{text}");
}

/// A page that holds only a line that shares its words, not its numbers, with every other
/// page's keeps it: a register of 1,000 entries is not a running header (it was pages
/// 1,001–10,000 of a 10,000-page file); a line the same on every page still goes.
#[test]
fn lines_sharing_a_pattern_are_not_a_running_header() {
    let entry = |n: u32| (n, vec![line(&format!("Entry {n} of the register"), 72.0, 80.0, 11.0)]);
    let mut pages: Vec<(u32, Vec<Line>)> = (1..=1000).map(entry).collect();
    assert!(drop_running_lines(&mut pages).is_empty());
    assert_eq!(pages.len(), 1000);
    assert_eq!(pages[999].1[0].text, "Entry 1000 of the register");
    let stamp = |n: u32| (n, vec![line("CONFIDENTIAL", 72.0, 40.0, 9.0), line(&n.to_string(), 300.0, 760.0, 11.0)]);
    let mut stamped: Vec<(u32, Vec<Line>)> = (1..=5).map(stamp).collect();
    assert_eq!(drop_running_lines(&mut stamped), vec![1, 2, 3, 4, 5]);
}

/// A file whose cross-reference table and trailer are broken is read by its objects, as
/// poppler and pypdf read it.
#[test]
fn a_broken_cross_reference_table_is_rebuilt() {
    let font = "/Font << /F1 5 0 R >>";
    let good = crafted(&[
        CATALOG.into(),
        ONE_PAGE.into(),
        format!("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << {font} >> /Contents 4 0 R >>")
            .into_bytes(),
        stream(b"BT /F1 12 Tf 72 720 Td (The cellar floods in March.) Tj ET", ""),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ]);
    let cut = good.windows(4).position(|w| w == b"xref").unwrap();
    let mut broken = good[..cut].to_vec();
    broken.extend(b"xref\n0 6\ngarbage\ntrailer\n<< /Size 6 >>\nstartxref\n99999\n%%EOF\n");
    let read = read_document("cellar.pdf", &broken, DocumentFormat::Pdf).unwrap();
    assert!(read.chunks[0].chunk.text.contains("The cellar floods in March."), "{:?}", read.chunks);
    // Nothing to root it: refused, with lopdf's reason.
    let no_catalog = broken.to_vec();
    let no_catalog = String::from_utf8_lossy(&no_catalog).replace("/Catalog", "/Katalog");
    let refused = read_document("x.pdf", no_catalog.as_bytes(), DocumentFormat::Pdf).unwrap_err();
    assert!(refused.message.starts_with("not a readable PDF ("), "{refused}");
}

/// A page its own parent, with no media box of its own: pdf-extract's lookup of what a page
/// inherits went round the loop for ever (a fuzzed file). The loop is cut: pdf-extract fails
/// on the page (no media box) before it begins it, and the file's other page is still read.
#[test]
fn a_page_that_is_its_own_parent_does_not_hang() {
    let font = "/Font << /F1 6 0 R >>";
    let doc = crafted(&[
        CATALOG.into(),
        "<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>".into(),
        format!("<< /Type /Page /Parent 3 0 R /Resources << {font} >> /Contents 4 0 R >>").into_bytes(),
        stream(b"BT /F1 12 Tf 72 720 Td (Lost page.) Tj ET", ""),
        format!("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << {font} >> /Contents 7 0 R >>")
            .into_bytes(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
        stream(b"BT /F1 12 Tf 72 720 Td (The tide table is on page two.) Tj ET", ""),
    ]);
    let started = std::time::Instant::now();
    let read = read_document("loop.pdf", &doc, DocumentFormat::Pdf).unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let text: String = read.chunks.iter().map(|c| c.chunk.text.as_str()).collect();
    assert!(text.contains("The tide table is on page two."), "{text}");
    // Page 1, which pdf-extract cannot lay out, is read by lopdf's plainer reading, or named.
    let named = read.left_out.iter().any(|l| l.starts_with("page 1 "));
    assert!(text.contains("Lost page.") || named, "{text} {:?}", read.left_out);
}
