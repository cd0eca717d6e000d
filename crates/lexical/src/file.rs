//! `lexical.bin`: the index with the store generation it reflects, written to a temporary
//! file and renamed into place, with a checksum, so a reader sees a whole file of one
//! generation (and brings it forward with the store's changes since) or rebuilds.

use crate::{Entry, LexicalIndex};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Version 3 added the metadata index, 4 the retired entries; older files are rebuilt.
const MAGIC: &[u8; 8] = b"RGCTXLX4";

/// FNV-1a, 64 bits: enough to tell a torn or damaged file from a whole one.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u32).to_le_bytes());
    out.extend(s.as_bytes());
}

pub(crate) fn save(ix: &LexicalIndex, path: &Path, generation: u64) -> std::io::Result<()> {
    let mut body = Vec::new();
    body.extend((ix.entries.len() as u32).to_le_bytes());
    for e in &ix.entries {
        put_str(&mut body, e.chunk.as_str());
        put_str(&mut body, e.document.as_str());
        body.extend(e.weight.to_le_bytes());
        body.extend(e.length.to_le_bytes());
    }
    let dead: Vec<u32> = (0..ix.entries.len() as u32).filter(|&e| ix.dead[e as usize]).collect();
    body.extend((dead.len() as u32).to_le_bytes());
    for e in dead {
        body.extend(e.to_le_bytes());
    }
    let mut terms: Vec<(&String, &u32)> = ix.terms.iter().collect();
    terms.sort_by_key(|&(_, &id)| id);
    body.extend((terms.len() as u32).to_le_bytes());
    for (term, &id) in terms {
        put_str(&mut body, term);
        let list = &ix.postings[id as usize];
        body.extend((list.len() as u32).to_le_bytes());
        for &(e, tf) in list {
            body.extend(e.to_le_bytes());
            body.extend(tf.to_le_bytes());
        }
    }
    ix.meta.encode(&mut body);
    // One writer per data dir (the store's lock), so one temporary name is enough.
    let tmp = path.with_extension("bin.tmp");
    let written = write(&tmp, generation, &body).and_then(|_| {
        ragctx_index::failpoint::pause("lexical.before-rename");
        std::fs::rename(&tmp, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn write(tmp: &Path, generation: u64, body: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(tmp)?;
    // The generation first, so a stale file is told by its first 16 bytes; the checksum
    // covers the generation and the body.
    let generation = generation.to_le_bytes();
    f.write_all(MAGIC)?;
    f.write_all(&generation)?;
    f.write_all(&checksum(&[&generation[..], body].concat()).to_le_bytes())?;
    f.write_all(body)?;
    f.sync_all()
}

/// Reads bytes front to back; `None` once they run out.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        (self.0.len() >= n).then(|| {
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            a
        })
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }
    fn f32(&mut self) -> Option<f32> {
        self.take(4).map(|b| f32::from_le_bytes(b.try_into().unwrap()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }
    fn str(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

/// The generation a file at `path` says it reflects (its head only: the file may still
/// prove torn when read).
pub(crate) fn generation(path: &Path) -> Option<u64> {
    let mut head = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open(path).ok()?, &mut head).ok()?;
    (&head[..8] == MAGIC).then(|| u64::from_le_bytes(head[8..].try_into().unwrap()))
}

/// The index in `path` with its generation, if it is whole and of `at_most` or before.
pub(crate) fn load(path: &Path, at_most: u64) -> Option<(u64, LexicalIndex)> {
    let generation = generation(path).filter(|&g| g <= at_most)?;
    let bytes = std::fs::read(path).ok()?;
    let head = bytes.get(..16)?;
    if &head[..8] != MAGIC || head[8..] != generation.to_le_bytes() {
        return None;
    }
    let mut r = Reader(&bytes[16..]);
    let sum = r.u64()?;
    if checksum(&[&head[8..], r.0].concat()) != sum {
        return None;
    }
    let n = r.u32()? as usize;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let (chunk, document) = (r.str()?.into(), r.str()?.into());
        entries.push(Entry { chunk, document, weight: r.f32()?, length: r.u32()? });
    }
    let mut dead = vec![false; n];
    for _ in 0..r.u32()? {
        *dead.get_mut(r.u32()? as usize)? = true;
    }
    let t = r.u32()? as usize;
    let (mut terms, mut postings) = (HashMap::with_capacity(t), Vec::with_capacity(t));
    for id in 0..t as u32 {
        terms.insert(r.str()?.to_owned(), id);
        let len = r.u32()? as usize;
        let mut list = Vec::with_capacity(len);
        for _ in 0..len {
            let (e, tf) = (r.u32()?, r.u32()?);
            if e as usize >= n {
                return None;
            }
            list.push((e, tf));
        }
        postings.push(list);
    }
    let (meta, used) = ragctx_index::MetadataIndex::decode(r.0).ok()?;
    (used == r.0.len() && meta.len() == n)
        .then(|| (generation, LexicalIndex::assemble(terms, postings, entries, dead, meta)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::{Chunk, ExclusionSet};

    #[test]
    fn a_whole_file_of_the_generation_loads_anything_else_is_rebuilt() {
        let chunks: Vec<Chunk> = ["router reset", "error 0x80070005 access denied", "绿萝浇水"]
            .iter()
            .enumerate()
            .map(|(i, t)| Chunk::new(&format!("c{i}"), &format!("d{i}"), "", t))
            .collect();
        let ix = LexicalIndex::build(&chunks);
        let dir = std::env::temp_dir().join(format!("ragctx-lexical-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lexical.bin");
        save(&ix, &path, 7).unwrap();
        let (g, back) = load(&path, 7).expect("loads at its generation");
        assert_eq!(g, 7);
        for q in ["0x80070005", "router", "浇水"] {
            let none = ExclusionSet::default();
            assert_eq!(back.search(q, 3, None, &none), ix.search(q, 3, None, &none), "{q}");
        }
        assert!(load(&path, 6).is_none(), "a file of a later generation is not used");
        assert_eq!(load(&path, 8).map(|(g, _)| g), Some(7), "an older one is, to be brought forward");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
        assert!(load(&path, 7).is_none(), "a torn file is not used");
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert!(load(&path, 7).is_none(), "a damaged file is not used");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
