use super::*;

fn chunk(id: &str, doc: &str, title: &str, text: &str) -> Chunk {
    Chunk::new(id, doc, title, text)
}

fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    Analyzer::default().terms(text, &mut out);
    out
}

#[test]
fn english_words_are_stemmed_and_stop_words_dropped() {
    assert_eq!(
        terms("The Routers are rebooting, ERR_CONN_RESET 0x80070005!"),
        ["router", "reboot", "err", "conn", "reset", "0x80070005"]
    );
}

#[test]
fn chinese_becomes_bigrams_and_a_lone_character_a_unigram() {
    assert_eq!(terms("绿萝浇水 水"), ["绿萝", "萝浇", "浇水", "水"]);
    assert_eq!(terms("Wi-Fi密码"), ["wi", "fi", "密码"]);
}

#[test]
fn rare_exact_terms_rank_first_and_excluded_chunks_never_return() {
    let chunks = [
        chunk("a#0", "a", "Network errors", "The router shows a generic network error."),
        chunk("b#0", "b", "Update failures", "Error 0x80070005 means access is denied during the update."),
        chunk("c#0", "c", "Routers", "Rebooting the router fixes most network errors."),
    ];
    let ix = LexicalIndex::build(&chunks);
    let hits = ix.search("what does 0x80070005 mean", 3, None, &ExclusionSet::default());
    assert_eq!(ix.chunk_id(hits[0].0).as_str(), "b#0");
    let mut ex = ExclusionSet::default();
    ex.chunks.insert(ChunkId::from("b#0"));
    let hits = ix.search("what does 0x80070005 mean", 3, None, &ex);
    assert!(hits.iter().all(|&(e, _)| ix.chunk_id(e).as_str() != "b#0"));
    assert!(ix.search("entirely unrelated words", 3, None, &ExclusionSet::default()).is_empty());
}

/// More matches than the sorted head: the head widens until `limit` documents are in,
/// and a chosen document's further chunks below the head still fill its quota (never an
/// excluded one).
#[test]
fn grouping_beyond_the_sorted_head_keeps_quotas() {
    // "a": 10 strong chunks, then 50 weak ones that rank below all 200 chunks of "d".
    let mut chunks: Vec<Chunk> = (0..10).map(|i| chunk(&format!("a#s{i}"), "a", "", "reset reset")).collect();
    chunks.extend((0..200).map(|i| chunk(&format!("d#{i:03}"), "d", "", "router reset")));
    chunks.extend((0..50).map(|i| chunk(&format!("a#w{i:02}"), "a", "", "router and some more words here")));
    let ix = LexicalIndex::build(&chunks);
    let mut g = Grouping::new(3);
    g.quotas.insert("a".into(), 100);
    let mut ex = ExclusionSet::default();
    ex.chunks.insert(ChunkId::from("a#w07"));
    let hits = ix.search("router reset", 2, Some(&g), &ex);
    let count = |doc: &str| hits.iter().filter(|&&(e, _)| ix.entries[e].document.as_str() == doc).count();
    assert_eq!((count("a"), count("d"), hits.len()), (59, 3, 62), "a to its raised quota, d to 3");
    assert!(hits.iter().all(|&(e, _)| ix.chunk_id(e).as_str() != "a#w07"), "the excluded chunk stays out");
    assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
}

/// The issue-38 oracle: tenant zh holds two chunks that differ by one rare word each;
/// tenant en ingests chunks full of one of those words. zh's scores and ranking are those
/// of an index of zh's chunks alone, before and after (a store-wide df would swap them).
#[test]
fn a_tenants_scores_are_its_own_whatever_another_tenant_holds() {
    let t = |tenant: &str, id: &str| ragctx_core::Tenant::parse(tenant).unwrap().qualify_unchecked(id);
    let zh = |id: &str, text: &str| chunk(&t("zh", id), &t("zh", id), "", text);
    let own = [zh("w1", "quuxfrob leaves turn pale"), zh("w2", "blarnitz leaves turn pale")];
    let mut crowded = own.to_vec();
    crowded.extend((0..6).map(|i| {
        let id = t("en", &format!("e{i}"));
        chunk(&id, &id, "", "quuxfrob quuxfrob everywhere in a much longer English note than the others")
    }));
    let request = |tenant: Option<&str>| LexicalRequest {
        query: "quuxfrob blarnitz".into(),
        limit: 5,
        tenant: tenant.map(str::to_owned),
        ..LexicalRequest::default()
    };
    let ranked = |ix: &LexicalIndex, tenant: Option<&str>| -> Vec<(String, f32)> {
        ix.search_request(&request(tenant)).iter().map(|&(e, s)| (ix.chunk_id(e).to_string(), s)).collect()
    };
    let alone = ranked(&LexicalIndex::build(&own), None);
    let shared = LexicalIndex::build(&crowded);
    assert_eq!(alone.len(), 2);
    assert_eq!(ranked(&shared, Some("zh")), alone, "zh's scores, bit for bit, as if alone");
    // Unscoped (the admin's store-wide view), en's chunks lower quuxfrob's idf: the swap
    // the issue measured, which a narrowed search no longer shows.
    let store_wide: Vec<(String, f32)> =
        ranked(&shared, None).into_iter().filter(|(id, _)| ragctx_core::tenant_of(id) == "zh").collect();
    assert_eq!(store_wide[0].0, t("zh", "w2"), "{store_wide:?}");
    assert!(ranked(&shared, Some("nobody")).is_empty(), "a tenant with no chunk finds nothing");
}

#[test]
fn grouping_fills_documents_up_to_their_quota() {
    let mut chunks: Vec<Chunk> =
        (0..10).map(|i| chunk(&format!("big#{i}"), "big", "", "router router router reset")).collect();
    chunks.extend((0..4).map(|i| chunk(&format!("s{i}#0"), &format!("s{i}"), "", "router")));
    let ix = LexicalIndex::build(&chunks);
    let hits = ix.search("router reset", 3, Some(&Grouping::new(2)), &ExclusionSet::default());
    let docs: Vec<&str> = hits.iter().map(|&(e, _)| ix.entries[e].document.as_str()).collect();
    assert_eq!(docs, ["big", "big", "s0", "s1"], "2 chunks of big, then one each of 2 more documents");
}

/// An index that followed writes (appends, replacements, removals, in any order) searches
/// exactly as one built anew from the live chunks: the same chunks, ties and scores, store-wide
/// and narrowed to a tenant, with and without grouping and exclusion.
#[test]
fn an_index_brought_forward_searches_as_one_built_anew() {
    let t = |tenant: &str, id: &str| ragctx_core::Tenant::parse(tenant).unwrap().qualify_unchecked(id);
    let words = ["router", "reset", "error", "update", "kettle", "descale", "leaves", "water", "fee", "appeal"];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut live: std::collections::BTreeMap<String, Chunk> = Default::default();
    let mut followed = LexicalIndex::default();
    for round in 0..60 {
        let mut changes = Changes::default();
        for _ in 0..1 + next(6) {
            let tenant = ["acme", "zen"][next(2)];
            let doc = format!("d{}", next(12));
            let id = t(tenant, &format!("{doc}#{}", next(3)));
            if next(4) == 0 && live.contains_key(&id) {
                live.remove(&id);
                changes.chunks.retain(|x| x.id.as_str() != id);
                changes.removed.push(ChunkId::from(id.as_str()));
                continue;
            }
            let text: Vec<&str> = (0..1 + next(8)).map(|_| words[next(words.len())]).collect();
            let c = chunk(&id, &t(tenant, &doc), "", &text.join(" "));
            live.insert(id, c.clone());
            changes.chunks.retain(|x| x.id != c.id);
            changes.removed.retain(|x| *x != c.id);
            changes.chunks.push(c);
        }
        followed.apply(&changes);
        let anew = LexicalIndex::build(live.values());
        assert_eq!(followed.len(), anew.len(), "round {round}");
        let mut ex = ExclusionSet::default();
        ex.chunks.insert(ChunkId::from(t("acme", "d1#0").as_str()));
        for query in ["router reset", "kettle descale water", "fee appeal error update"] {
            for tenant in [None, Some("acme"), Some("zen")] {
                for grouping in [None, Some(Grouping::new(2))] {
                    let request = LexicalRequest {
                        query: query.into(),
                        limit: 5,
                        grouping: grouping.clone(),
                        exclusion: ex.clone(),
                        tenant: tenant.map(str::to_owned),
                        ..LexicalRequest::default()
                    };
                    let ranked = |ix: &LexicalIndex| -> Vec<(String, f32)> {
                        ix.search_request(&request).iter().map(|&(e, s)| (ix.chunk_id(e).to_string(), s)).collect()
                    };
                    assert_eq!(ranked(&followed), ranked(&anew), "round {round}: {query} {tenant:?}");
                }
            }
            if let Some(tenant) = ["acme", "zen"].get(round % 2) {
                assert_eq!(followed.tenant_len(tenant), anew.tenant_len(tenant));
            }
        }
    }
    assert!(followed.dead_share() > 0.0, "replacements and removals retired entries");
}
