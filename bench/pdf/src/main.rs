//! `ragctx-bench-pdf EXTRACTOR FILE.pdf [REPEAT]`: the text one extractor reads from a PDF, on
//! stdout (pages separated by form feeds), and its speed on stderr (`N pages in S s: P pages/s`,
//! the mean of REPEAT reads of the file already in memory).
//!
//! Extractors: `ragctx` (ragctx-ingest: pdf-extract's glyphs read as a reader sees them, then
//! chunked; the chunks' text), `pdf-extract` (its plain text by page), `lopdf` (its
//! `extract_text`), `pdf_oxide` (its `extract_text`, default features off).
//!
//! `ragctx-md` reads as `ragctx` does but prints each chunk under a line of its own,
//! `<<<chunk N | pages A-B | section: PATH>>>` (PATH: the chunk's heading path, its
//! `SECTION_KEY` metadata, empty when it sits under no heading; the first line of all is
//! `<<<title: TITLE>>>`), for `bench/pdf/headings` and `bench/pdf/doc-headings`.
//!
//! `ragctx` and `ragctx-md` read a file in the format its extension names
//! (`DocumentFormat::from_path`: `.docx`, `.html`, `.md`, `.txt`; PDF for any other), under its
//! own file name as the document id, as the CLI does; the other extractors read PDF only.
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (which, path) = (&args[1], &args[2]);
    let repeat: usize = args.get(3).map_or(1, |s| s.parse().expect("REPEAT is a number"));
    let bytes = std::fs::read(path).expect("the file");
    let format = ragctx_ingest::DocumentFormat::from_path(path).unwrap_or(ragctx_ingest::DocumentFormat::Pdf);
    let id = std::path::Path::new(path).file_name().map_or("bench.pdf".into(), |n| n.to_string_lossy().into_owned());
    let started = Instant::now();
    let mut pages: Vec<String> = Vec::new();
    let mut count = 0;
    for _ in 0..repeat {
        (pages, count) = match which.as_str() {
            "ragctx" => {
                let read = ragctx_ingest::read_document(&id, &bytes, format).unwrap();
                let pages = read.pages.unwrap_or(0) as usize;
                (read.chunks.into_iter().map(|c| c.chunk.text).collect(), pages)
            }
            "ragctx-md" => {
                let read = ragctx_ingest::read_document(&id, &bytes, format).unwrap();
                let pages = read.pages.unwrap_or(0) as usize;
                let text = |c: &ragctx_ingest::SourcedChunk, key: &str| match c.chunk.metadata.get(key) {
                    Some(ragctx_core::MetaValue::String(s)) => s.clone(),
                    Some(ragctx_core::MetaValue::Number(n)) => n.to_string(),
                    Some(other) => format!("{other:?}"),
                    None => String::new(),
                };
                let mut out =
                    vec![format!("<<<title: {}>>>", read.chunks.first().map_or("", |c| c.chunk.title.as_str()))];
                for (i, c) in read.chunks.iter().enumerate() {
                    out.push(format!(
                        "<<<chunk {i} | pages {}-{} | section: {}>>>\n{}",
                        text(c, ragctx_core::PAGE_START_KEY),
                        text(c, ragctx_core::PAGE_END_KEY),
                        text(c, ragctx_ingest::SECTION_KEY),
                        c.chunk.text
                    ));
                }
                (vec![out.join("\n")], pages)
            }
            "pdf-extract" => {
                let p = pdf_extract::extract_text_from_mem_by_pages(&bytes).unwrap();
                let n = p.len();
                (p, n)
            }
            "lopdf" => {
                let doc = lopdf::Document::load_mem(&bytes).unwrap();
                let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
                (numbers.iter().map(|p| doc.extract_text(&[*p]).unwrap_or_default()).collect(), numbers.len())
            }
            "pdf_oxide" => {
                let doc = pdf_oxide::PdfDocument::from_bytes(bytes.clone()).unwrap();
                let n = doc.page_count().unwrap();
                ((0..n).map(|p| doc.extract_text(p).unwrap()).collect(), n)
            }
            other => panic!("unknown extractor {other}"),
        };
    }
    let seconds = started.elapsed().as_secs_f64() / repeat as f64;
    eprintln!("{count} pages in {seconds:.4} s: {:.0} pages/s", count as f64 / seconds);
    print!("{}", pages.join("\n\x0c\n"));
}
