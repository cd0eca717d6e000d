use super::*;

fn meta(s: &str) -> Metadata {
    serde_json::from_str(s).unwrap()
}
fn f(s: &str) -> Filter {
    Filter::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}
fn err(s: &str) -> String {
    Filter::parse(s).unwrap_err().to_string()
}

#[test]
fn the_language_evaluates_as_documented() {
    let m = meta(r#"{"topic":"pests","year":2024,"draft":false,"tags":["fern","indoor"]}"#);
    let yes = |s: &str| assert!(f(s).matches("d1", &m), "{s} should match");
    let no = |s: &str| assert!(!f(s).matches("d1", &m), "{s} should not match");
    yes("{}");
    yes(r#"{"topic":"pests"}"#);
    no(r#"{"topic":"care"}"#);
    yes(r#"{"tags":"fern"}"#);
    no(r#"{"tags":"cactus"}"#);
    yes(r#"{"year":2024}"#);
    no(r#"{"year":"2024"}"#);
    yes(r#"{"draft":false}"#);
    yes(r#"{"topic":{"in":["care","pests"]}}"#);
    no(r#"{"topic":{"nin":["care","pests"]}}"#);
    yes(r#"{"missing":{"nin":["x"]}}"#);
    yes(r#"{"year":{"gte":2024,"lt":2025}}"#);
    no(r#"{"year":{"gt":2024}}"#);
    no(r#"{"topic":{"gt":1}}"#);
    yes(r#"{"year":{"exists":true}}"#);
    yes(r#"{"missing":{"exists":false}}"#);
    no(r#"{"missing":"x"}"#);
    yes(r#"{"document_id":"d1"}"#);
    yes(r#"{"document_id":{"in":["d0","d1"]}}"#);
    yes(r#"{"or":[{"topic":"care"},{"year":2024}]}"#);
    no(r#"{"and":[{"topic":"pests"},{"not":{"tags":"indoor"}}]}"#);
    yes(r#"{"topic":"pests","year":2024}"#);
}

#[test]
fn bad_filters_name_their_path() {
    assert!(err(r#"{"and":[{"a":1},{"b":{"gt":"x"}}]}"#).contains("filter.and[1].b.gt"));
    assert!(err(r#"{"a":{"near":1}}"#).contains("filter.a.near: unknown operator"));
    assert!(err(r#"{"a":[1,2]}"#).contains("filter.a: is an array"));
    assert!(err(r#"{"a b":1}"#).contains("filter.a b"));
    assert!(err(r#"{"or":[]}"#).contains("filter.or"));
    assert!(err(r#"{"document_id":{"gt":1}}"#).contains("document_id takes"));
    assert!(err(r#"[1]"#).contains("filter: is an array"));
    assert!(err(r#"{"a":"#).contains("not JSON"));
    assert!(err(r#"{"a":{"exists":1}}"#).contains("filter.a.exists"));
    let deep = format!("{}{{}}{}", r#"{"not":"#.repeat(20), "}".repeat(20));
    assert!(err(&deep).contains("nest at most"), "{}", err(&deep));
    let wide = format!(r#"{{"a":{{"in":[{}]}}}}"#, vec!["1"; 2000].join(","));
    assert!(err(&wide).contains("at most 1024"));
}

#[test]
fn a_filter_prints_back_to_itself() {
    for s in [
        r#"{"topic":"pests"}"#,
        r#"{"and":[{"a":{"in":["x","y\"z"]}},{"not":{"b":{"exists":true}}},{"c":{"lte":2.5}}]}"#,
        r#"{"or":[{"document_id":"d\\1"},{"n":-3}]}"#,
    ] {
        let parsed = f(s);
        assert_eq!(parsed.to_json_string(), s);
        let through_serde: Filter = serde_json::from_str(&serde_json::to_string(&parsed).unwrap()).unwrap();
        assert_eq!(through_serde, parsed);
    }
}
