//! One-file persistence: written to a temporary file, synced, then renamed over the old
//! one, so a reader sees the old index or the new one, never half of either. The layout:
//! a header padded to 64 bytes, the f32 vectors (node order, little-endian: a reader maps
//! them in place, `full.rs`), their compact copy (binary16, or int8 codes and a scale per
//! node), then weights, ids, links and the metadata index.

use crate::hnsw::Graph;
use crate::{IndexParams, VectorIndex};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Version 02 added the metadata index, 03 the aligned f32 section (mapped in place) and the
/// compact copy; an older file is rebuilt from the store.
const MAGIC: &[u8; 8] = b"RCXIDX03";

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index file {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("index file {path} is corrupt ({what}); delete it and it is rebuilt from the store")]
    Corrupt { path: String, what: String },
    #[error("index file {path} was written by an older ragctx (format {format})")]
    Older { path: String, format: String },
}

struct Writer<W: Write>(W);
impl<W: Write> Writer<W> {
    fn u8(&mut self, v: u8) -> std::io::Result<()> {
        self.0.write_all(&[v])
    }
    fn u32(&mut self, v: u32) -> std::io::Result<()> {
        self.0.write_all(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> std::io::Result<()> {
        self.0.write_all(&v.to_le_bytes())
    }
    fn f32s(&mut self, v: &[f32]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(v.len() * 4);
        for x in v {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        self.0.write_all(&buf)
    }
    fn u32s(&mut self, v: &[u32]) -> std::io::Result<()> {
        self.u32(v.len() as u32)?;
        let mut buf = Vec::with_capacity(v.len() * 4);
        for x in v {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        self.0.write_all(&buf)
    }
    fn str(&mut self, s: &str) -> std::io::Result<()> {
        self.u32(s.len() as u32)?;
        self.0.write_all(s.as_bytes())
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}
impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or("truncated")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn f32s(&mut self, n: usize) -> Result<Vec<f32>, String> {
        let b = self.take(n.checked_mul(4).ok_or("size")?)?;
        Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
    }
    fn u32s(&mut self) -> Result<Vec<u32>, String> {
        let n = self.u32()? as usize;
        let b = self.take(n.checked_mul(4).ok_or("size")?)?;
        Ok(b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect())
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "invalid utf-8 id".to_string())
    }
}

/// The f32 vectors start at a multiple of this (from the file's start), so they can be used
/// in place from a memory map.
const ALIGN: usize = 64;

impl VectorIndex {
    /// Writes the index with the store generation it reflects.
    pub fn save(&self, path: &Path, generation: u64) -> Result<(), IndexError> {
        let io = |source| IndexError::Io { path: path.display().to_string(), source };
        let tmp = path.with_extension("tmp");
        let file = File::create(&tmp).map_err(io)?;
        let mut w = Writer(BufWriter::with_capacity(1 << 20, file));
        (|| -> std::io::Result<()> {
            let mut head = Writer(Vec::new());
            head.0.extend_from_slice(MAGIC);
            head.u64(generation)?;
            head.u32(self.dim as u32)?;
            head.u32(self.nodes() as u32)?;
            let g = &self.graph;
            head.u32(g.m as u32)?;
            head.u32(g.ef_construction as u32)?;
            head.u32(self.params.ef_search as u32)?;
            head.u32(self.params.exact_below as u32)?;
            head.u32(g.entry)?;
            head.u8(g.max_level)?;
            head.u64(g.rng)?;
            head.0.extend_from_slice(&self.max_norm.to_le_bytes());
            let (kind, max_residual) = match &self.int8 {
                Some(c) => (COPY_INT8, c.max_residual),
                None => (self.half_ok as u8, 0.0),
            };
            head.u8(kind)?;
            head.0.extend_from_slice(&max_residual.to_le_bytes());
            head.0.resize(head.0.len().next_multiple_of(ALIGN), 0);
            w.0.write_all(&head.0)?;
            for node in 0..self.nodes() as u32 {
                w.f32s(self.vector(node))?;
            }
            match &self.int8 {
                Some(c) => {
                    for part in c.codes.chunks(1 << 20) {
                        w.0.write_all(&part.iter().map(|&x| x as u8).collect::<Vec<u8>>())?;
                    }
                    w.f32s(&c.scales)?;
                }
                None => {
                    let mut halves = Vec::with_capacity(self.halves.len() * 2);
                    for h in &self.halves {
                        halves.extend_from_slice(&h.to_le_bytes());
                    }
                    w.0.write_all(&halves)?;
                }
            }
            w.f32s(&self.weights)?;
            for n in 0..self.nodes() {
                w.u8(self.retired.get(n) as u8)?;
                w.u8(g.levels[n])?;
                w.u32(self.doc_of[n])?;
                w.str(&self.chunk_ids[n])?;
            }
            w.u32(self.docs.len() as u32)?;
            for d in &self.docs {
                w.str(d)?;
            }
            w.u32s(&g.layer0)?;
            let mut upper: Vec<_> = g.upper.iter().collect();
            upper.sort_by_key(|(k, _)| **k);
            w.u32(upper.len() as u32)?;
            for (node, list) in upper {
                w.u32(*node)?;
                w.u32s(list)?;
            }
            for &d in &self.meta_digest {
                w.u64(d)?;
            }
            let mut meta = Vec::new();
            self.meta.encode(&mut meta);
            w.0.write_all(&meta)?;
            let file = w.0.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()
        })()
        .map_err(io)?;
        crate::failpoint::pause("index.before-rename");
        fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent() {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// [`VectorIndex::save`], then the f32 vectors taken from the new file's map (those
    /// added since the last load leave memory). If the map cannot be made, the index keeps
    /// them as it holds them.
    pub fn save_and_map(&mut self, path: &Path, generation: u64) -> Result<(), IndexError> {
        self.save(path, generation)?;
        if let Ok(file) = File::open(path) {
            if let Some(full) = crate::full::Full::mapped(&file, vectors_offset(), self.nodes(), self.dim) {
                self.vectors = full;
            }
        }
        Ok(())
    }

    /// Reads an index written by [`VectorIndex::save`]; returns it with its generation. Its
    /// f32 vectors stay in the file's memory map; the rest is read into memory.
    pub fn load(path: &Path) -> Result<(VectorIndex, u64), IndexError> {
        let p = path.display().to_string();
        let io = |source| IndexError::Io { path: p.clone(), source };
        let corrupt = |what: String| IndexError::Corrupt { path: p.clone(), what };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len() as usize;
        let mut head = vec![0u8; vectors_offset().min(len)];
        file.read_exact(&mut head).map_err(io)?;
        let mut r = Reader { buf: &head, pos: 0 };
        if let Some(old) = head.get(..8).filter(|m| m.starts_with(b"RCXIDX") && *m != MAGIC) {
            let format = String::from_utf8_lossy(&old[6..]).into_owned();
            return Err(IndexError::Older { path: p.clone(), format });
        }
        let header = Header::read(&mut r).map_err(corrupt)?;
        let floats = header.nodes.checked_mul(header.dim).ok_or_else(|| corrupt("size".into()))?;
        // The compact copy: binary16 (2 bytes a component), or int8 codes and a scale a node.
        let copy_bytes = match header.kind {
            COPY_INT8 => floats.checked_add(header.nodes.checked_mul(4).ok_or_else(|| corrupt("size".into()))?),
            _ => floats.checked_mul(2),
        };
        let (rest_at, copy_end) = floats
            .checked_mul(4)
            .and_then(|b| b.checked_add(vectors_offset()))
            .and_then(|at| Some((at, at.checked_add(copy_bytes?)?)))
            .ok_or_else(|| corrupt("size".into()))?;
        if len < copy_end {
            return Err(corrupt("truncated".into()));
        }
        let full = match crate::full::Full::mapped(&file, vectors_offset(), header.nodes, header.dim) {
            Some(full) => full,
            // Not usable in place (a big-endian target): read into memory.
            None => {
                let mut bytes = vec![0u8; floats * 4];
                file.seek(SeekFrom::Start(vectors_offset() as u64)).map_err(io)?;
                file.read_exact(&mut bytes).map_err(io)?;
                let mut full = crate::full::Full::new(header.dim);
                for v in bytes.chunks_exact(header.dim * 4) {
                    full.push(
                        &v.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>(),
                    );
                }
                full
            }
        };
        file.seek(SeekFrom::Start(rest_at as u64)).map_err(io)?;
        let (mut halves, mut int8) = (Vec::new(), None);
        if header.kind == COPY_INT8 {
            let mut codes = vec![0u8; floats];
            file.read_exact(&mut codes).map_err(io)?;
            let mut scales = vec![0u8; header.nodes * 4];
            file.read_exact(&mut scales).map_err(io)?;
            int8 = Some(crate::Int8Copy {
                codes: codes.into_iter().map(|x| x as i8).collect(),
                scales: scales.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
                max_residual: header.max_residual,
            });
        } else {
            halves = vec![0u16; floats];
            let mut bytes = vec![0u8; (1 << 20).min(floats * 2).max(2)];
            let mut at = 0;
            while at < floats {
                let take = (floats - at).min(bytes.len() / 2);
                file.read_exact(&mut bytes[..take * 2]).map_err(io)?;
                for (h, c) in halves[at..at + take].iter_mut().zip(bytes.chunks_exact(2)) {
                    *h = u16::from_le_bytes([c[0], c[1]]);
                }
                at += take;
            }
        }
        let mut rest = Vec::with_capacity(len - copy_end);
        file.read_to_end(&mut rest).map_err(io)?;
        Self::decode(header, full, (halves, int8), &rest).map_err(corrupt)
    }

    fn decode(
        h: Header,
        vectors: crate::full::Full,
        (halves, int8): (Vec<u16>, Option<crate::Int8Copy>),
        buf: &[u8],
    ) -> Result<(VectorIndex, u64), String> {
        let mut r = Reader { buf, pos: 0 };
        let n = h.nodes;
        let params = IndexParams {
            m: h.m,
            ef_construction: h.ef_construction,
            ef_search: h.ef_search,
            exact_below: h.exact_below,
            ..IndexParams::default()
        };
        let mut graph = Graph::new(h.m, h.ef_construction);
        graph.entry = h.entry;
        graph.max_level = h.max_level;
        graph.rng = h.rng;
        let weights = r.f32s(n)?;
        let mut ix = VectorIndex::new(h.dim, params);
        ix.graph = graph;
        ix.vectors = vectors;
        ix.halves = halves;
        ix.int8 = int8;
        ix.max_norm = h.max_norm;
        ix.half_ok = h.kind == COPY_HALF;
        ix.weights = weights;
        let mut doc_of = Vec::with_capacity(n);
        for node in 0..n {
            ix.retired.push(r.u8()? != 0);
            ix.graph.levels.push(r.u8()?);
            doc_of.push(r.u32()?);
            ix.chunk_ids.push(r.string()?);
            if !ix.retired.get(node) {
                ix.by_chunk.insert(ix.chunk_ids[node].clone(), node as u32);
            }
        }
        let ndocs = r.u32()? as usize;
        for d in 0..ndocs {
            let name = r.string()?;
            ix.by_doc.insert(name.clone(), d as u32);
            ix.docs.push(name);
        }
        ix.doc_nodes = vec![Vec::new(); ndocs];
        for (node, &d) in doc_of.iter().enumerate() {
            if d as usize >= ndocs {
                return Err("document index out of range".into());
            }
            if !ix.retired.get(node) {
                ix.doc_nodes[d as usize].push(node as u32);
            }
        }
        ix.doc_of = doc_of;
        ix.graph.layer0 = r.u32s()?;
        if ix.graph.layer0.len() != n * 2 * h.m {
            return Err("layer 0 size".into());
        }
        if ix.graph.layer0.iter().any(|&x| x != crate::hnsw::EMPTY && x as usize >= n) {
            return Err("link out of range".into());
        }
        let nup = r.u32()? as usize;
        let mut upper = HashMap::with_capacity(nup);
        for _ in 0..nup {
            let node = r.u32()?;
            upper.insert(node, r.u32s()?);
        }
        ix.graph.upper = upper;
        ix.meta_digest = (0..n).map(|_| r.u64()).collect::<Result<_, _>>()?;
        let (meta, used) = crate::MetadataIndex::decode(&buf[r.pos..])?;
        if meta.len() != n {
            return Err("metadata index size".into());
        }
        ix.meta = meta;
        r.pos += used;
        if r.pos != buf.len() {
            return Err("trailing bytes".into());
        }
        if n > 0 && ix.graph.entry as usize >= n {
            return Err("entry point out of range".into());
        }
        Ok((ix, h.generation))
    }
}

/// Where the f32 vectors start: the header, padded to [`ALIGN`].
fn vectors_offset() -> usize {
    // MAGIC, generation, dim, nodes, m, ef_construction, ef_search, exact_below, entry,
    // max_level, rng, max_norm, the copy's kind, max_residual.
    (8 + 8 + 4 * 7 + 1 + 8 + 4 + 1 + 4usize).next_multiple_of(ALIGN)
}

/// The fixed fields before the vectors.
struct Header {
    generation: u64,
    dim: usize,
    nodes: usize,
    m: usize,
    ef_construction: usize,
    ef_search: usize,
    exact_below: usize,
    entry: u32,
    max_level: u8,
    rng: u64,
    max_norm: f32,
    /// The compact copy: [`COPY_F32`], [`COPY_HALF`] or [`COPY_INT8`].
    kind: u8,
    max_residual: f32,
}

/// No compact copy usable (a vector beyond binary16's range): searches read f32.
const COPY_F32: u8 = 0;
/// The binary16 copy.
const COPY_HALF: u8 = 1;
/// The int8 copy (`int8.rs`).
const COPY_INT8: u8 = 2;

impl Header {
    fn read(r: &mut Reader<'_>) -> Result<Header, String> {
        match r.take(8)? {
            m if m == MAGIC => {}
            _ => return Err("not a ragctx index".into()),
        }
        let generation = r.u64()?;
        let dim = r.u32()? as usize;
        let nodes = r.u32()? as usize;
        let m = r.u32()? as usize;
        let ef_construction = r.u32()? as usize;
        let ef_search = r.u32()? as usize;
        let exact_below = r.u32()? as usize;
        let entry = r.u32()?;
        let max_level = r.u8()?;
        let rng = r.u64()?;
        let max_norm = f32::from_le_bytes(r.take(4)?.try_into().unwrap());
        let kind = r.u8()?;
        let max_residual = f32::from_le_bytes(r.take(4)?.try_into().unwrap());
        if dim == 0 || m < 2 || ![COPY_F32, COPY_HALF, COPY_INT8].contains(&kind) {
            return Err("dimension, links or copy out of range".into());
        }
        // The error bounds read them: a NaN would make the exact path find nothing.
        if !(max_norm.is_finite() && max_norm >= 0.0 && max_residual.is_finite() && max_residual >= 0.0) {
            return Err("vector norms out of range".into());
        }
        Ok(Header {
            generation,
            dim,
            nodes,
            m,
            ef_construction,
            ef_search,
            exact_below,
            entry,
            max_level,
            rng,
            max_norm,
            kind,
            max_residual,
        })
    }
}
