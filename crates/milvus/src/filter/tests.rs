use super::*;
use ragctx_core::{ChunkId, DocumentId};

fn set(docs: &[&str], chunks: &[&str]) -> ExclusionSet {
    ExclusionSet {
        documents: docs.iter().map(|d| DocumentId::from(*d)).collect(),
        chunks: chunks.iter().map(|c| ChunkId::from(*c)).collect(),
    }
}

#[test]
fn empty_exclusion_sends_no_filter() {
    assert_eq!(exclusion(&ExclusionSet::default(), false), None);
    assert_eq!(exclusion(&ExclusionSet::default(), true), None);
}

#[test]
fn hostile_ids_parse_back_to_exactly_themselves() {
    let ids = ragctx_testkit::HOSTILE_IDS;
    let mut all: Vec<&str> = ids.to_vec();
    all.extend(["new\nline", "cr\r", "tab\t", "\\\"", "", "]", "' or '1'='1"]);
    let f = exclusion(&set(&all, &all[..3]), false).unwrap();
    assert!(f.params.is_empty());
    let clauses = parse_not_in(&f.expr).expect("the literal filter parses");
    assert_eq!(clauses.len(), 2, "{}", f.expr);
    let mut want: Vec<String> = all.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(clauses[0].0, DOCUMENT_ID);
    assert_eq!(clauses[0].1, want);
    assert_eq!(clauses[1].0, ID);
    assert_eq!(clauses[1].1.len(), 3);
}

fn parse(text: &str) -> MetaFilter {
    MetaFilter::parse(text).unwrap()
}

fn expr(p: Predicate) -> Filter {
    match p {
        Predicate::Where(f) => f,
        other => panic!("an expression, got {other:?}"),
    }
}

#[test]
fn metadata_conditions_are_guarded_by_type_and_negations_are_complements() {
    let none = ExclusionSet::default();
    let f = expr(predicate(&parse(r#"{"year": {"gte": 2020}}"#), &none, TenantScope::All, false, true).unwrap());
    assert_eq!(f.expr, r#"(metadata_types["year"] == "n") and (metadata["year"] >= 2020)"#);
    let f = expr(predicate(&parse(r#"{"tags": {"nin": ["a"]}}"#), &none, TenantScope::All, false, true).unwrap());
    assert!(f.expr.starts_with(r#"(not exists metadata["tags"]) or (not ("#), "{}", f.expr);
    assert_eq!(predicate(&parse(r#"{"not": {}}"#), &none, TenantScope::All, false, true).unwrap(), Predicate::Nothing);
    assert_eq!(
        predicate(&parse(r#"{"document_id": {"exists": true}}"#), &none, TenantScope::All, false, true).unwrap(),
        Predicate::Everything
    );
    let f = expr(predicate(&MetaFilter::All, &none, TenantScope::Field("acme"), false, true).unwrap());
    assert_eq!(f.expr, r#"tenant == "acme""#);
    let f = expr(predicate(&MetaFilter::All, &none, TenantScope::FieldUnpruned("acme"), false, true).unwrap());
    assert_eq!(f.expr, r#"tenant >= "acme" and tenant <= "acme""#);
    let f = expr(predicate(&MetaFilter::All, &none, TenantScope::IdPrefix("default"), false, false).unwrap());
    assert_eq!(f.expr, "not (id like \"%\u{1f}%\")");
    let others = ["acme".to_owned(), "b".to_owned()];
    let f = expr(predicate(&MetaFilter::All, &none, TenantScope::DefaultBesides(&others), false, false).unwrap());
    assert_eq!(f.expr, "(id < \"acme\u{1f}\" or id >= \"acme \") and (id < \"b\u{1f}\" or id >= \"b \")");
    assert_eq!(
        predicate(&MetaFilter::All, &none, TenantScope::DefaultBesides(&[]), false, false).unwrap(),
        Predicate::Everything
    );
}

#[test]
fn metadata_filters_on_a_collection_without_metadata_are_refused() {
    let none = ExclusionSet::default();
    let err = predicate(&parse(r#"{"topic": "x"}"#), &none, TenantScope::All, false, false).unwrap_err();
    assert!(err.to_string().contains("--collection"), "{err}");
    assert!(predicate(&parse(r#"{"document_id": "d"}"#), &none, TenantScope::All, false, false).is_ok());
}

/// Hostile values stay one string each: literal strings parse back to exactly them, and
/// the templated form holds none of them and reads like the literal one once filled in.
#[test]
fn hostile_values_never_change_the_expression() {
    let hostile = ["a\"b", "c\\d", "[x]", "ü", "e\u{1f}f", "\"] or id >= \"", "new\nline", "' or '1'='1"];
    for v in hostile {
        let filter = MetaFilter::Or(vec![
            MetaFilter::Eq(Field::Meta("k.x-y".into()), Scalar::String(v.into())),
            MetaFilter::In(Field::Meta("k".into()), vec![Scalar::String(v.into()), Scalar::String("w".into())]),
            MetaFilter::Eq(Field::DocumentId, Scalar::String(v.into())),
        ]);
        let ex = set(&[v], &[v]);
        let literal = expr(predicate(&filter, &ex, TenantScope::Field("t"), false, true).unwrap());
        assert!(literal.params.is_empty());
        let templated = expr(predicate(&filter, &ex, TenantScope::Field("t"), true, true).unwrap());
        assert!(!templated.expr.contains(v), "{}", templated.expr);
        // Every quoted string of the literal expression is a key, a type tag or a value.
        let mut p = Parser { s: literal.expr.as_bytes(), i: 0, text: &literal.expr };
        let mut strings = Vec::new();
        while p.i < p.s.len() {
            if p.s[p.i] == b'"' {
                strings.push(p.string().expect("every string ends where quote() ends it"));
            } else {
                p.i += 1;
            }
        }
        let allowed = [v, "w", "k", "k.x-y", "t", "s", "l", "n", "b"];
        assert!(strings.iter().all(|s| allowed.contains(&s.as_str())), "{strings:?} in {}", literal.expr);
        assert!(strings.iter().filter(|s| s.as_str() == v).count() >= 5, "{}", literal.expr);
        // The templated expression, each placeholder replaced by its quoted value, is the
        // literal one but for list spacing.
        let mut filled = templated.expr.clone();
        let mut names: Vec<&String> = templated.params.keys().collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        for name in names {
            let text = match &templated.params[name] {
                Template::String(s) => quote(s),
                Template::Strings(l) => literal_list(l.iter().map(String::as_str)),
            };
            filled = filled.replace(&format!("{{{name}}}"), &text);
        }
        assert_eq!(filled, literal.expr);
    }
}

#[test]
fn templated_filter_holds_no_id() {
    let f = exclusion(&set(&["zz\"] or id >= 0 or doc_id in [\"zz"], &["c"]), true).unwrap();
    assert_eq!(f.expr, "(document_id not in {docs}) and (id not in {chunks})");
    assert_eq!(f.params["docs"], Template::Strings(vec!["zz\"] or id >= 0 or doc_id in [\"zz".to_string()]));
    assert_eq!(f.params["chunks"], Template::Strings(vec!["c".to_string()]));
}
