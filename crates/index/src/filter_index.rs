//! Metadata kept beside an index's positions (the vector index's nodes, BM25's entries), so
//! a [`Filter`] and a tenant resolve into one bit per position before a search starts: the
//! search tests a bit, and the planner knows exactly how many positions pass (the
//! selectivity) before it picks a walk or a scan. Per field: the positions holding it, an
//! inverted list per string value (list values: per element), the positions of each bool,
//! and the numbers sorted by value for ranges. Append-only: a position is never changed,
//! an index retires it and pushes a new one.

use ragctx_core::{FastMap, Field, Filter, MetaValue, Metadata, Range, Scalar};
use std::sync::OnceLock;

/// A set of positions, one bit each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PositionBits {
    words: Vec<u64>,
    len: usize,
}

impl PositionBits {
    /// `len` positions, all clear.
    pub fn empty(len: usize) -> Self {
        PositionBits { words: vec![0; len.div_ceil(64)], len }
    }
    /// `len` positions, all set.
    pub fn full(len: usize) -> Self {
        let mut b = PositionBits { words: vec![u64::MAX; len.div_ceil(64)], len };
        b.trim();
        b
    }
    fn trim(&mut self) {
        if !self.len.is_multiple_of(64) {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << (self.len % 64)) - 1;
            }
        }
    }
    /// Positions covered.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Covers no position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The words, 64 positions each, lowest first.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    /// Whether position `i` is set (false beyond the end).
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }
    /// Sets position `i` (< len).
    #[inline]
    pub fn set(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }
    /// Positions set.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
    fn and(&mut self, o: &PositionBits) {
        self.words.iter_mut().zip(&o.words).for_each(|(a, b)| *a &= b);
    }
    fn or(&mut self, o: &PositionBits) {
        self.words.iter_mut().zip(&o.words).for_each(|(a, b)| *a |= b);
    }
    fn not(&mut self) {
        self.words.iter_mut().for_each(|w| *w = !*w);
        self.trim();
    }
    fn of(len: usize, positions: &[u32]) -> Self {
        let mut b = PositionBits::empty(len);
        for &p in positions {
            b.set(p as usize);
        }
        b
    }
}

#[derive(Clone, Debug, Default)]
struct FieldPostings {
    /// Positions holding the field, ascending.
    present: Vec<u32>,
    strings: FastMap<String, Vec<u32>>,
    bools: [Vec<u32>; 2],
    numbers: Vec<(f64, u32)>,
    /// `numbers` sorted by value, made when a range first needs it after a push.
    sorted: OnceLock<Vec<(f64, u32)>>,
}

impl FieldPostings {
    fn sorted(&self) -> &[(f64, u32)] {
        self.sorted.get_or_init(|| {
            let mut v = self.numbers.clone();
            v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            v
        })
    }
    fn bytes(&self) -> usize {
        let lists: usize = self.strings.iter().map(|(k, v)| k.len() + 48 + v.capacity() * 4).sum();
        let sorted = self.sorted.get().map_or(0, |v| v.capacity() * 16);
        self.present.capacity() * 4
            + lists
            + (self.bools[0].capacity() + self.bools[1].capacity()) * 4
            + self.numbers.capacity() * 16
            + sorted
    }
}

/// Metadata and tenants by position; resolves filters into [`PositionBits`].
#[derive(Clone, Debug, Default)]
pub struct MetadataIndex {
    fields: FastMap<String, FieldPostings>,
    tenants: FastMap<String, Vec<u32>>,
    len: usize,
}

/// What a document-id condition needs from the index that owns the positions.
pub trait DocumentPositions {
    /// The positions of a document's chunks (retired ones may be among them).
    fn positions_of(&self, document_id: &str) -> &[u32];
}

impl MetadataIndex {
    /// Records position `pos` (the next one: positions are pushed in order) with its
    /// tenant and metadata.
    pub fn push(&mut self, pos: u32, tenant: &str, meta: &Metadata) {
        debug_assert_eq!(pos as usize, self.len, "positions are pushed in order");
        self.len = pos as usize + 1;
        match self.tenants.get_mut(tenant) {
            Some(list) => list.push(pos),
            None => {
                self.tenants.insert(tenant.to_owned(), vec![pos]);
            }
        }
        for (k, v) in meta.iter() {
            let f = match self.fields.get_mut(k) {
                Some(f) => f,
                None => self.fields.entry(k.to_owned()).or_default(),
            };
            f.present.push(pos);
            match v {
                MetaValue::String(s) => f.strings.entry(s.clone()).or_default().push(pos),
                MetaValue::List(l) => {
                    let mut seen: Vec<&String> = Vec::with_capacity(l.len());
                    for s in l {
                        if !seen.contains(&s) {
                            seen.push(s);
                            f.strings.entry(s.clone()).or_default().push(pos);
                        }
                    }
                }
                MetaValue::Bool(b) => f.bools[*b as usize].push(pos),
                MetaValue::Number(n) => {
                    f.numbers.push((*n, pos));
                    f.sorted = OnceLock::new();
                }
            }
        }
    }

    /// Positions recorded.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Nothing recorded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The positions of `tenant` (retired ones included).
    pub fn tenant_positions(&self, tenant: &str) -> &[u32] {
        self.tenants.get(tenant).map_or(&[][..], Vec::as_slice)
    }
    /// Every tenant with its positions (retired ones included), in no particular order.
    pub fn tenants(&self) -> impl Iterator<Item = (&str, &[u32])> {
        self.tenants.iter().map(|(t, v)| (t.as_str(), v.as_slice()))
    }
    /// Bytes held, about (the benchmark's memory figure).
    pub fn bytes(&self) -> usize {
        self.fields.iter().map(|(k, f)| k.len() + 64 + f.bytes()).sum::<usize>()
            + self.tenants.iter().map(|(k, v)| k.len() + 48 + v.capacity() * 4).sum::<usize>()
    }

    /// The index over the positions that `map` keeps, renumbered by it (`map[old]`, `None`
    /// for a dropped position); new positions are `0..len`.
    pub fn remapped(&self, map: &[Option<u32>], len: usize) -> MetadataIndex {
        let list = |v: &[u32]| -> Vec<u32> {
            let mut out: Vec<u32> = v.iter().filter_map(|&p| map.get(p as usize).copied().flatten()).collect();
            out.sort_unstable();
            out
        };
        let fields = self
            .fields
            .iter()
            .map(|(k, f)| {
                let numbers =
                    f.numbers.iter().filter_map(|&(x, p)| Some((x, map.get(p as usize).copied().flatten()?))).collect();
                let field = FieldPostings {
                    present: list(&f.present),
                    strings: f
                        .strings
                        .iter()
                        .map(|(s, v)| (s.clone(), list(v)))
                        .filter(|(_, v)| !v.is_empty())
                        .collect(),
                    bools: [list(&f.bools[0]), list(&f.bools[1])],
                    numbers,
                    sorted: OnceLock::new(),
                };
                (k.clone(), field)
            })
            .filter(|(_, f)| !f.present.is_empty())
            .collect();
        let tenants = self.tenants.iter().map(|(t, v)| (t.clone(), list(v))).filter(|(_, v)| !v.is_empty()).collect();
        MetadataIndex { fields, tenants, len }
    }

    /// Appends the index to `out` (little-endian; read back by [`MetadataIndex::decode`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        fn u32s(out: &mut Vec<u8>, v: &[u32]) {
            out.extend((v.len() as u32).to_le_bytes());
            v.iter().for_each(|x| out.extend(x.to_le_bytes()));
        }
        fn text(out: &mut Vec<u8>, s: &str) {
            out.extend((s.len() as u32).to_le_bytes());
            out.extend(s.as_bytes());
        }
        out.extend((self.len as u64).to_le_bytes());
        let mut tenants: Vec<_> = self.tenants.iter().collect();
        tenants.sort_by(|a, b| a.0.cmp(b.0));
        out.extend((tenants.len() as u32).to_le_bytes());
        for (t, v) in tenants {
            text(out, t);
            u32s(out, v);
        }
        let mut fields: Vec<_> = self.fields.iter().collect();
        fields.sort_by(|a, b| a.0.cmp(b.0));
        out.extend((fields.len() as u32).to_le_bytes());
        for (k, f) in fields {
            text(out, k);
            u32s(out, &f.present);
            let mut strings: Vec<_> = f.strings.iter().collect();
            strings.sort_by(|a, b| a.0.cmp(b.0));
            out.extend((strings.len() as u32).to_le_bytes());
            for (s, v) in strings {
                text(out, s);
                u32s(out, v);
            }
            u32s(out, &f.bools[0]);
            u32s(out, &f.bools[1]);
            out.extend((f.numbers.len() as u32).to_le_bytes());
            for &(x, p) in &f.numbers {
                out.extend(x.to_le_bytes());
                out.extend(p.to_le_bytes());
            }
        }
    }

    /// Reads what [`MetadataIndex::encode`] wrote at the start of `buf`; returns it with the
    /// bytes read. Every position is checked against the recorded length.
    pub fn decode(buf: &[u8]) -> std::result::Result<(MetadataIndex, usize), String> {
        struct R<'a>(&'a [u8], usize);
        impl R<'_> {
            fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
                let end = self.1.checked_add(n).filter(|&e| e <= self.0.len()).ok_or("metadata truncated")?;
                let s = &self.0[self.1..end];
                self.1 = end;
                Ok(s)
            }
            fn u32(&mut self) -> std::result::Result<u32, String> {
                Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
            }
            fn u64(&mut self) -> std::result::Result<u64, String> {
                Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
            }
            fn text(&mut self) -> std::result::Result<String, String> {
                let n = self.u32()? as usize;
                String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "metadata: invalid utf-8".to_string())
            }
            fn u32s(&mut self, len: usize) -> std::result::Result<Vec<u32>, String> {
                let n = self.u32()? as usize;
                let b = self.take(n.checked_mul(4).ok_or("size")?)?;
                let v: Vec<u32> = b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).collect();
                if v.iter().any(|&p| p as usize >= len) {
                    return Err("metadata position out of range".into());
                }
                Ok(v)
            }
        }
        let mut r = R(buf, 0);
        let len = r.u64()? as usize;
        let mut ix = MetadataIndex { len, ..Default::default() };
        for _ in 0..r.u32()? {
            let t = r.text()?;
            let v = r.u32s(len)?;
            ix.tenants.insert(t, v);
        }
        for _ in 0..r.u32()? {
            let k = r.text()?;
            let mut f = FieldPostings { present: r.u32s(len)?, ..Default::default() };
            for _ in 0..r.u32()? {
                let s = r.text()?;
                let v = r.u32s(len)?;
                f.strings.insert(s, v);
            }
            f.bools = [r.u32s(len)?, r.u32s(len)?];
            let n = r.u32()? as usize;
            let mut numbers = Vec::with_capacity(n.min(buf.len() / 12));
            for _ in 0..n {
                let x = f64::from_le_bytes(r.take(8)?.try_into().expect("8"));
                let p = r.u32()?;
                if p as usize >= len {
                    return Err("metadata position out of range".into());
                }
                numbers.push((x, p));
            }
            f.numbers = numbers;
            ix.fields.insert(k, f);
        }
        Ok((ix, r.1))
    }

    /// The positions that pass `filter` within `tenant` (`None`: every tenant), or `None`
    /// when nothing is restricted (no tenant, an empty filter).
    pub fn allowed(&self, filter: &Filter, tenant: Option<&str>, docs: &dyn DocumentPositions) -> Option<PositionBits> {
        // A tenant that holds every position (a single-tenant store) restricts nothing.
        let tenant = tenant.filter(|t| self.tenants.get(*t).is_none_or(|v| v.len() < self.len));
        let tenant_bits =
            tenant.map(|t| PositionBits::of(self.len, self.tenants.get(t).map_or(&[][..], Vec::as_slice)));
        if filter.is_all() {
            return tenant_bits;
        }
        let mut bits = self.eval(filter, docs);
        if let Some(t) = tenant_bits {
            bits.and(&t);
        }
        Some(bits)
    }

    fn eval(&self, filter: &Filter, docs: &dyn DocumentPositions) -> PositionBits {
        let n = self.len;
        match filter {
            Filter::All => PositionBits::full(n),
            Filter::Eq(f, s) => self.equal(f, s, docs),
            Filter::In(f, list) => {
                let mut out = PositionBits::empty(n);
                for s in list {
                    out.or(&self.equal(f, s, docs));
                }
                out
            }
            Filter::Range(f, r, bound) => {
                let mut out = PositionBits::empty(n);
                if let Field::Meta(k) = f {
                    if let Some(p) = self.fields.get(k) {
                        let sorted = p.sorted();
                        let lo = match r {
                            Range::Gt => sorted.partition_point(|x| x.0 <= *bound),
                            Range::Gte => sorted.partition_point(|x| x.0 < *bound),
                            _ => 0,
                        };
                        let hi = match r {
                            Range::Lt => sorted.partition_point(|x| x.0 < *bound),
                            Range::Lte => sorted.partition_point(|x| x.0 <= *bound),
                            _ => sorted.len(),
                        };
                        for &(_, pos) in &sorted[lo..hi.max(lo)] {
                            out.set(pos as usize);
                        }
                    }
                }
                out
            }
            Filter::Exists(Field::DocumentId) => PositionBits::full(n),
            Filter::Exists(Field::Meta(k)) => {
                PositionBits::of(n, self.fields.get(k).map_or(&[][..], |p| p.present.as_slice()))
            }
            Filter::And(parts) => {
                let mut out = PositionBits::full(n);
                for p in parts {
                    out.and(&self.eval(p, docs));
                }
                out
            }
            Filter::Or(parts) => {
                let mut out = PositionBits::empty(n);
                for p in parts {
                    out.or(&self.eval(p, docs));
                }
                out
            }
            Filter::Not(inner) => {
                let mut out = self.eval(inner, docs);
                out.not();
                out
            }
        }
    }

    fn equal(&self, f: &Field, s: &Scalar, docs: &dyn DocumentPositions) -> PositionBits {
        let n = self.len;
        let k = match f {
            Field::DocumentId => {
                return match s {
                    Scalar::String(d) => PositionBits::of(n, docs.positions_of(d)),
                    _ => PositionBits::empty(n),
                }
            }
            Field::Meta(k) => k,
        };
        let Some(p) = self.fields.get(k) else { return PositionBits::empty(n) };
        match s {
            Scalar::String(v) => PositionBits::of(n, p.strings.get(v).map_or(&[][..], Vec::as_slice)),
            Scalar::Bool(b) => PositionBits::of(n, &p.bools[*b as usize]),
            Scalar::Number(x) => {
                let sorted = p.sorted();
                let lo = sorted.partition_point(|e| e.0 < *x);
                let hi = sorted.partition_point(|e| e.0 <= *x);
                let mut out = PositionBits::empty(n);
                for &(_, pos) in &sorted[lo..hi] {
                    out.set(pos as usize);
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests;
