//! One-file persistence: written to a temporary file, synced, then renamed over the old
//! one, so a reader sees the old index or the new one, never half of either.

use crate::hnsw::Graph;
use crate::{IndexParams, VectorIndex};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::Path;

/// Version 02 added the metadata index; a version 01 file is rebuilt from the store.
const MAGIC: &[u8; 8] = b"RCXIDX02";

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index file {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("index file {path} is corrupt ({what}); delete it and it is rebuilt from the store")]
    Corrupt { path: String, what: String },
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

impl VectorIndex {
    /// Writes the index with the store generation it reflects.
    pub fn save(&self, path: &Path, generation: u64) -> Result<(), IndexError> {
        let io = |source| IndexError::Io { path: path.display().to_string(), source };
        let tmp = path.with_extension("tmp");
        let file = File::create(&tmp).map_err(io)?;
        let mut w = Writer(BufWriter::with_capacity(1 << 20, file));
        (|| -> std::io::Result<()> {
            w.0.write_all(MAGIC)?;
            w.u64(generation)?;
            w.u32(self.dim as u32)?;
            w.u32(self.nodes() as u32)?;
            let g = &self.graph;
            w.u32(g.m as u32)?;
            w.u32(g.ef_construction as u32)?;
            w.u32(self.params.ef_search as u32)?;
            w.u32(self.params.exact_below as u32)?;
            w.u32(g.entry)?;
            w.u8(g.max_level)?;
            w.u64(g.rng)?;
            w.f32s(&self.vectors)?;
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

    /// Reads an index written by [`VectorIndex::save`]; returns it with its generation.
    pub fn load(path: &Path) -> Result<(VectorIndex, u64), IndexError> {
        let p = path.display().to_string();
        let mut buf = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut buf))
            .map_err(|source| IndexError::Io { path: p.clone(), source })?;
        Self::decode(&buf).map_err(|what| IndexError::Corrupt { path: p, what })
    }

    fn decode(buf: &[u8]) -> Result<(VectorIndex, u64), String> {
        let mut r = Reader { buf, pos: 0 };
        match r.take(8)? {
            m if m == MAGIC => {}
            b"RCXIDX01" => return Err("written by an older ragctx, without the metadata index".into()),
            _ => return Err("not a ragctx index".into()),
        }
        let generation = r.u64()?;
        let dim = r.u32()? as usize;
        let n = r.u32()? as usize;
        let m = r.u32()? as usize;
        let ef_construction = r.u32()? as usize;
        let ef_search = r.u32()? as usize;
        let exact_below = r.u32()? as usize;
        let params = IndexParams { m, ef_construction, ef_search, exact_below, ..IndexParams::default() };
        let mut graph = Graph::new(m, ef_construction);
        graph.entry = r.u32()?;
        graph.max_level = r.u8()?;
        graph.rng = r.u64()?;
        let vectors = r.f32s(n * dim)?;
        let weights = r.f32s(n)?;
        let mut ix = VectorIndex::new(dim, params);
        ix.graph = graph;
        ix.vectors = vectors;
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
        for node in 0..n as u32 {
            ix.push_half(node);
        }
        ix.graph.layer0 = r.u32s()?;
        if ix.graph.layer0.len() != n * 2 * m {
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
        Ok((ix, generation))
    }
}
