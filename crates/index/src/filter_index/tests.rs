use super::*;

struct Docs(Vec<(String, Vec<u32>)>);
impl DocumentPositions for Docs {
    fn positions_of(&self, d: &str) -> &[u32] {
        self.0.iter().find(|x| x.0 == d).map_or(&[][..], |x| x.1.as_slice())
    }
}

/// Random metadata, random filters: the bits agree with [`Filter::matches`] everywhere.
#[test]
fn bits_agree_with_the_reference_evaluation() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let words = ["a", "b", "c", "q\"x", "ü"];
    let mut metas = Vec::new();
    let mut ix = MetadataIndex::default();
    let mut docs: Vec<(String, Vec<u32>)> = Vec::new();
    for pos in 0..300u32 {
        let mut m = Metadata::default();
        for key in ["s", "n", "b", "l"] {
            if next(4) == 0 {
                continue;
            }
            let v = match key {
                "s" => MetaValue::String(words[next(5) as usize].into()),
                "n" => MetaValue::Number(next(7) as f64 - 3.0),
                "b" => MetaValue::Bool(next(2) == 0),
                _ => MetaValue::List((0..next(3)).map(|_| words[next(5) as usize].to_string()).collect()),
            };
            m.insert(key, v).unwrap();
        }
        let doc = format!("d{}", next(20));
        match docs.iter_mut().find(|d| d.0 == doc) {
            Some(d) => d.1.push(pos),
            None => docs.push((doc.clone(), vec![pos])),
        }
        let tenant = if next(3) == 0 { "t2" } else { "default" };
        ix.push(pos, tenant, &m);
        metas.push((doc, tenant, m));
    }
    let docs = Docs(docs);
    let mut random_filter = |depth: u32| -> Filter {
        fn go(next: &mut dyn FnMut(u64) -> u64, depth: u32, words: &[&str]) -> Filter {
            let field = |next: &mut dyn FnMut(u64) -> u64| match next(6) {
                0 => Field::DocumentId,
                1 => Field::Meta("missing".into()),
                i => Field::Meta(["s", "n", "b", "l"][i as usize - 2].into()),
            };
            let scalar = |next: &mut dyn FnMut(u64) -> u64, f: &Field| match (f, next(3)) {
                (Field::DocumentId, _) => Scalar::String(format!("d{}", next(22))),
                (_, 0) => Scalar::String(words[next(5) as usize].into()),
                (_, 1) => Scalar::Number(next(7) as f64 - 3.0),
                _ => Scalar::Bool(next(2) == 0),
            };
            match if depth == 0 { next(4) } else { next(7) } {
                0 => {
                    let f = field(next);
                    let s = scalar(next, &f);
                    Filter::Eq(f, s)
                }
                1 => {
                    let f = field(next);
                    let list = (0..1 + next(3)).map(|_| scalar(next, &f)).collect();
                    Filter::In(f, list)
                }
                2 => {
                    let r = [Range::Gt, Range::Gte, Range::Lt, Range::Lte][next(4) as usize];
                    Filter::Range(Field::Meta("n".into()), r, next(7) as f64 - 3.5 + next(2) as f64 * 0.5)
                }
                3 => Filter::Exists(field(next)),
                4 => Filter::And((0..1 + next(3)).map(|_| go(next, depth - 1, words)).collect()),
                5 => Filter::Or((0..1 + next(3)).map(|_| go(next, depth - 1, words)).collect()),
                _ => Filter::Not(Box::new(go(next, depth - 1, words))),
            }
        }
        go(&mut next, depth, &words)
    };
    let mut checked = 0;
    for round in 0..400 {
        let filter = random_filter(3);
        let tenant = [None, Some("default"), Some("t2"), Some("none")][round % 4];
        let bits = ix.allowed(&filter, tenant, &docs);
        for (pos, (doc, t, m)) in metas.iter().enumerate() {
            let want = filter.matches(doc, m) && tenant.is_none_or(|x| x == *t);
            let got = bits.as_ref().is_none_or(|b| b.get(pos));
            assert_eq!(got, want, "{} tenant {tenant:?} at {pos}", filter.to_json_string());
            checked += 1;
        }
    }
    assert_eq!(checked, 400 * 300);
    // Written and read back, or renumbered, it answers the same.
    let mut buf = Vec::new();
    ix.encode(&mut buf);
    let (back, used) = MetadataIndex::decode(&buf).unwrap();
    assert_eq!(used, buf.len());
    let identity: Vec<Option<u32>> = (0..300).map(Some).collect();
    let renumbered = ix.remapped(&identity, 300);
    for _ in 0..50 {
        let filter = random_filter(3);
        let want = ix.allowed(&filter, Some("t2"), &docs);
        assert_eq!(back.allowed(&filter, Some("t2"), &docs), want);
        assert_eq!(renumbered.allowed(&filter, Some("t2"), &docs), want);
    }
}
