//! What a PDF may ask of its reader. A crafted file can make a small stream inflate to
//! gigabytes (a Flate bomb), or a form draw itself (`Do` recursing until the stack
//! overflows), or forms draw each other a billion times; past these limits the file is left
//! out, named with the limit it passed, before pdf-extract sees it.
//!
//! Streams are inflated here, as lopdf loads them ([`load`]), with a cap on each and on all
//! together; images are dropped unread (their pixels hold no text). Forms are walked from
//! each page before its text is read ([`check_forms`]).

use pdf_extract::content::Content;
use pdf_extract::{Dictionary, Document, LoadOptions, Object, ObjectId, Stream};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read;

/// The most one stream may inflate to (DOCX's entries have the same cap).
pub(crate) const STREAM_BYTES: usize = 64 << 20;
/// The most all of a file's streams may inflate to together.
pub(crate) const FILE_BYTES: usize = 512 << 20;
/// The deepest forms may nest (a form drawing a form …).
pub(crate) const FORM_DEPTH: usize = 32;
/// The most forms one page may draw, counting each time a form is drawn.
pub(crate) const FORM_DRAWS: u64 = 100_000;

/// The key a stream over a limit is marked with as it loads (its content dropped), for
/// [`load`] to name it.
const OVER: &[u8] = b"RagctxOverLimit";

thread_local! {
    /// What the streams loaded on this thread so far inflated to ([`FILE_BYTES`]); lopdf
    /// loads a file on the calling thread (its `rayon` feature is off in ragctx's build).
    static INFLATED: Cell<usize> = const { Cell::new(0) };
}

/// Loads a PDF with every stream inflated under the caps, or says which limit it passed.
pub(crate) fn load(bytes: &[u8]) -> Result<Document, String> {
    INFLATED.with(|n| n.set(0));
    let options = LoadOptions { filter: Some(inflate_capped), ..LoadOptions::default() };
    let mut doc = match Document::load_mem_with_options(bytes, options.clone()) {
        Ok(doc) => doc,
        // A broken cross-reference table or trailer: rebuilt from the objects themselves, as
        // poppler and pypdf do, and read again.
        Err(e) => {
            let repaired = repair_xref(bytes).ok_or_else(|| format!("not a readable PDF ({e})"))?;
            INFLATED.with(|n| n.set(0));
            Document::load_mem_with_options(&repaired, options).map_err(|_| format!("not a readable PDF ({e})"))?
        }
    };
    if doc.is_encrypted() {
        // An encrypted file's streams are decrypted after loading (lopdf's filter does not
        // see them): inflated here, under the same caps.
        if doc.decrypt("").is_err() {
            return Err("encrypted (password-protected): ragctx cannot read it".into());
        }
        for object in doc.objects.values_mut() {
            if let Object::Stream(stream) = object {
                cap_stream(stream);
            }
        }
    }
    over_limit(&doc)?;
    break_parent_loops(&mut doc);
    Ok(doc)
}

/// A `/Parent` that leads back to where it started (a page its own parent) is taken out:
/// pdf-extract looks up what a page inherits (its media box, its resources) by following
/// parents until one has it, and around a loop it never stops (a fuzzed file hung there).
fn break_parent_loops(doc: &mut Document) {
    let parent = |doc: &Document, id: ObjectId| {
        doc.get_dictionary(id).ok().and_then(|d| d.get(b"Parent").ok()).and_then(|p| p.as_reference().ok())
    };
    let mut looping = Vec::new();
    for &start in doc.objects.keys() {
        let mut seen = std::collections::HashSet::from([start]);
        let mut at = start;
        while let Some(up) = parent(doc, at) {
            if !seen.insert(up) {
                looping.push(at);
                break;
            }
            at = up;
        }
    }
    for id in looping {
        if let Ok(d) = doc.get_dictionary_mut(id) {
            d.remove(b"Parent");
        }
    }
}

/// The file with a new cross-reference table and trailer appended, found by scanning for
/// its objects (`12 0 obj`; the last of a number wins, as an update's would) and its catalog;
/// `None` when it has no catalog to root it or an object number past a million.
fn repair_xref(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut at: std::collections::BTreeMap<u32, (u16, usize)> = std::collections::BTreeMap::new();
    let mut root = None;
    let digits = |b: &u8| b.is_ascii_digit();
    let mut i = 0;
    while let Some(k) = bytes[i..].windows(3).position(|w| w == b"obj").map(|k| i + k) {
        i = k + 3;
        // `N G obj` at a line's start (not `endobj`), the keyword ending there.
        if bytes.get(k + 3).is_some_and(|b| b.is_ascii_alphanumeric()) || (k > 0 && bytes[k - 1].is_ascii_alphabetic())
        {
            continue;
        }
        let mut j = k;
        let back = |j: &mut usize, pred: &dyn Fn(&u8) -> bool| {
            let end = *j;
            while *j > 0 && pred(&bytes[*j - 1]) {
                *j -= 1;
            }
            end - *j
        };
        let spaces = |b: &u8| b.is_ascii_whitespace();
        if back(&mut j, &spaces) == 0 {
            continue;
        }
        let generation_end = j;
        if back(&mut j, &digits) == 0 {
            continue;
        }
        let generation: u16 = std::str::from_utf8(&bytes[j..generation_end]).ok()?.parse().unwrap_or(0);
        if back(&mut j, &spaces) == 0 {
            continue;
        }
        let number_end = j;
        if back(&mut j, &digits) == 0 || (j > 0 && !bytes[j - 1].is_ascii_whitespace()) {
            continue;
        }
        let Ok(number) = std::str::from_utf8(&bytes[j..number_end]).unwrap_or("x").parse::<u32>() else { continue };
        if number > 1_000_000 {
            return None;
        }
        at.insert(number, (generation, j));
        let body_end = bytes[i..].windows(6).position(|w| w == b"endobj").map_or(bytes.len(), |e| i + e);
        if bytes[i..body_end].windows(8).any(|w| w == b"/Catalog") {
            root = Some((number, generation));
        }
    }
    let (root, root_gen) = root?;
    let size = at.keys().next_back().copied()? + 1;
    let mut out = bytes.to_vec();
    out.push(b'\n');
    let xref = out.len();
    out.extend(format!("xref\n0 {size}\n").bytes());
    for n in 0..size {
        match at.get(&n) {
            Some((g, offset)) => out.extend(format!("{offset:010} {g:05} n \n").bytes()),
            None => out.extend(b"0000000000 65535 f \n"),
        }
    }
    out.extend(format!("trailer\n<< /Size {size} /Root {root} {root_gen} R >>\nstartxref\n{xref}\n%%EOF\n").bytes());
    Some(out)
}

/// The first stream marked over a limit, named.
fn over_limit(doc: &Document) -> Result<(), String> {
    for (id, object) in &doc.objects {
        if let Object::Stream(s) = object {
            if let Ok(limit) = s.dict.get(OVER).and_then(Object::as_i64) {
                let what = if limit as usize == FILE_BYTES { "all its streams together" } else { "one stream" };
                return Err(format!(
                    "passed a limit: a stream (object {} {}) inflates past {} MiB, the most {what} may",
                    id.0,
                    id.1,
                    limit >> 20
                ));
            }
        }
    }
    Ok(())
}

/// lopdf's load filter: an image's data dropped; a stream of the filters text needs
/// (Flate, LZW, ASCII85, ASCIIHex) inflated under the caps and stored inflated, so that it
/// is not inflated again; a stream past a cap emptied and marked ([`OVER`]).
fn inflate_capped(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    if let Object::Stream(stream) = object {
        cap_stream(stream);
    }
    // lopdf keeps `object` as changed here, but for the objects inside an object stream
    // (never streams themselves) it keeps what is returned.
    match object {
        Object::Stream(_) => Some((id, Object::Null)),
        other => Some((id, other.clone())),
    }
}

/// One stream as [`inflate_capped`] leaves it.
fn cap_stream(stream: &mut Stream) {
    let image = stream.dict.get(b"Subtype").and_then(Object::as_name).is_ok_and(|n| n == b"Image");
    let filters: Vec<Vec<u8>> =
        stream.filters().map(|f| f.into_iter().map(<[u8]>::to_vec).collect()).unwrap_or_default();
    let pictures = filters.iter().any(|f| {
        matches!(f.as_slice(), b"DCTDecode" | b"DCT" | b"JPXDecode" | b"CCITTFaxDecode" | b"CCF" | b"JBIG2Decode")
    });
    if image || pictures {
        drop_content(stream);
    } else if !filters.is_empty() {
        let left = FILE_BYTES.saturating_sub(INFLATED.with(Cell::get));
        match decode(&stream.content, &filters, STREAM_BYTES.min(left)) {
            Decoded::Done(data) => {
                INFLATED.with(|n| n.set(n.get() + data.len()));
                // With a predictor (PNG rows, mostly images' and cross-reference
                // streams'), lopdf decodes it itself: it was only measured here.
                let predictor = stream
                    .dict
                    .get(b"DecodeParms")
                    .and_then(Object::as_dict)
                    .and_then(|p| p.get(b"Predictor"))
                    .and_then(Object::as_i64)
                    .is_ok_and(|p| p > 1);
                if !predictor {
                    stream.dict.remove(b"Filter");
                    stream.dict.remove(b"DecodeParms");
                    stream.set_content(data);
                }
            }
            Decoded::Over => {
                let limit = if left < STREAM_BYTES { FILE_BYTES } else { STREAM_BYTES };
                drop_content(stream);
                stream.dict.set(OVER, limit as i64);
            }
            // A filter not read here, or data it cannot decode: left to lopdf as it is.
            Decoded::Unknown => {}
        }
    }
}

fn drop_content(stream: &mut Stream) {
    stream.dict.remove(b"Filter");
    stream.dict.remove(b"DecodeParms");
    stream.set_content(Vec::new());
}

enum Decoded {
    Done(Vec<u8>),
    Over,
    Unknown,
}

/// A stream's data through its filters, each output at most `cap` bytes.
fn decode(raw: &[u8], filters: &[Vec<u8>], cap: usize) -> Decoded {
    let mut data = raw.to_vec();
    for f in filters {
        let next = match f.as_slice() {
            b"FlateDecode" | b"Fl" => inflate(&data, cap),
            b"LZWDecode" | b"LZW" => lzw(&data, cap),
            b"ASCIIHexDecode" | b"AHx" => Some(ascii_hex(&data)),
            // ASCII85 grows nothing (5 characters make 4 bytes): left to lopdf, last.
            _ => return Decoded::Unknown,
        };
        match next {
            Some(d) if d.len() > cap => return Decoded::Over,
            Some(d) => data = d,
            None => return Decoded::Unknown,
        }
    }
    Decoded::Done(data)
}

/// zlib data inflated, at most `cap + 1` bytes of it (more says the cap was passed); a
/// stream cut short keeps what inflated, as lopdf does; raw deflate is tried when the zlib
/// header is wrong.
fn inflate(data: &[u8], cap: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let zlib = flate2::read::ZlibDecoder::new(data).take(cap as u64 + 1).read_to_end(&mut out);
    if zlib.is_err() && out.is_empty() && data.len() > 2 {
        flate2::read::DeflateDecoder::new(&data[2..]).take(cap as u64 + 1).read_to_end(&mut out).ok();
    }
    Some(out)
}

/// LZW data decoded (PDF's early change), at most `cap + 1` bytes.
fn lzw(data: &[u8], cap: usize) -> Option<Vec<u8>> {
    let mut decoder = weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut input = data;
    loop {
        let r = decoder.decode_bytes(input, &mut buf);
        out.extend_from_slice(&buf[..r.consumed_out]);
        input = &input[r.consumed_in..];
        if out.len() > cap {
            return Some(out);
        }
        match r.status {
            Ok(weezl::LzwStatus::Ok) if r.consumed_in > 0 || r.consumed_out > 0 => {}
            Ok(_) | Err(_) => return Some(out),
        }
    }
}

fn ascii_hex(data: &[u8]) -> Vec<u8> {
    let digits: Vec<u8> =
        data.iter().take_while(|&&c| c != b'>').filter_map(|&c| (c as char).to_digit(16).map(|d| d as u8)).collect();
    digits.chunks(2).map(|p| p[0] << 4 | p.get(1).copied().unwrap_or(0)).collect()
}

/// Walks the forms each page draws, as pdf-extract will (a form without resources of its own
/// draws with those it was drawn with): a form that draws itself, forms nested past
/// [`FORM_DEPTH`] or drawn past [`FORM_DRAWS`] times on a page are named. A form met on
/// several pages is walked once (what it draws is kept).
pub(crate) fn check_forms<'a>(
    doc: &'a Document,
    pages: impl Iterator<Item = Option<&'a Dictionary>>,
) -> Result<(), String> {
    let mut walk = FormWalk { doc, draws: HashMap::new(), path: Vec::new() };
    for resources in pages {
        // The page's own content is read once: each form its resources name, drawn once.
        let mut total = 0u64;
        for form in forms_in(doc, resources) {
            total = total.saturating_add(walk.draws(form, resources)?);
            if total > FORM_DRAWS {
                return Err(format!("passed a limit: it draws forms more than {FORM_DRAWS} times"));
            }
        }
    }
    Ok(())
}

struct FormWalk<'a> {
    doc: &'a Document,
    /// Draws of a form and all it draws, by the form and the resources it was drawn with.
    draws: HashMap<(ObjectId, usize), u64>,
    path: Vec<ObjectId>,
}

impl<'a> FormWalk<'a> {
    fn draws(&mut self, form: ObjectId, inherited: Option<&'a Dictionary>) -> Result<u64, String> {
        let Ok(stream) = self.doc.get_object(form).and_then(Object::as_stream) else { return Ok(1) };
        let own = stream.dict.get(b"Resources").ok().and_then(|r| deref_dict(self.doc, r));
        let resources = own.or(inherited);
        let key = (form, resources.map_or(0, |r| r as *const Dictionary as usize));
        if let Some(n) = self.draws.get(&key) {
            return Ok(*n);
        }
        if self.path.contains(&form) {
            return Err(format!("passed a limit: a form (object {} {}) draws itself", form.0, form.1));
        }
        if self.path.len() >= FORM_DEPTH {
            return Err(format!("passed a limit: forms nest deeper than {FORM_DEPTH}"));
        }
        self.path.push(form);
        let mut n = 1u64;
        let named = xobjects(self.doc, resources);
        let ops = Content::decode(&stream.content).map(|c| c.operations).unwrap_or_default();
        for op in ops.iter().filter(|o| o.operator == "Do") {
            let Some(name) = op.operands.first().and_then(|o| o.as_name().ok()) else { continue };
            let Some(target) = named.get(name).copied() else { continue };
            n = n.saturating_add(self.draws(target, resources)?);
            if n > FORM_DRAWS {
                return Err(format!("passed a limit: it draws forms more than {FORM_DRAWS} times"));
            }
        }
        self.path.pop();
        self.draws.insert(key, n);
        Ok(n)
    }
}

/// The forms a resource dictionary names.
fn forms_in<'a>(doc: &'a Document, resources: Option<&'a Dictionary>) -> Vec<ObjectId> {
    xobjects(doc, resources).into_values().collect()
}

/// A resource dictionary's XObjects that can be drawn as forms, by name.
fn xobjects<'a>(doc: &'a Document, resources: Option<&'a Dictionary>) -> HashMap<&'a [u8], ObjectId> {
    let Some(x) = resources.and_then(|r| r.get(b"XObject").ok()).and_then(|x| deref_dict(doc, x)) else {
        return HashMap::new();
    };
    x.iter()
        .filter_map(|(name, o)| {
            let id = o.as_reference().ok()?;
            // Any stream: pdf-extract draws whatever `Do` names as a form, whatever its
            // subtype says (or lacks); an image's data was dropped, so it draws nothing.
            doc.get_object(id).and_then(Object::as_stream).is_ok().then_some((name.as_slice(), id))
        })
        .collect()
}

/// An object as a dictionary, through a reference if it is one.
fn deref_dict<'a>(doc: &'a Document, o: &'a Object) -> Option<&'a Dictionary> {
    match o {
        Object::Reference(id) => doc.get_dictionary(*id).ok(),
        Object::Dictionary(d) => Some(d),
        _ => None,
    }
}
