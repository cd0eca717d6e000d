//! The rerank client against `RerankTestDouble`, a small local HTTP server in the testkit that
//! speaks the four wire shapes (TEI, Cohere, Jina, llama.cpp server): no cross-encoder's
//! weights are on the registries this project installs from.
#![cfg(feature = "openai")]

use ragctx_core::{ErrorKind, Reranker};
use ragctx_models::{RemoteReranker, RerankApi, RerankConfig};
use ragctx_testkit::{overlap, RerankTestDouble};
use std::time::Duration;

fn client(url: &str, model: Option<&str>, timeout_ms: u64) -> RemoteReranker {
    RemoteReranker::new(RerankConfig {
        url: url.to_owned(),
        model: model.map(str::to_owned),
        api_key: Some("rk-test".into()),
        timeout: Duration::from_millis(timeout_ms),
        api: RerankApi::parse("auto", url).unwrap(),
    })
    .unwrap()
}

const QUERY: &str = "how often to water a fern";
const TEXTS: [&str; 3] = ["cactus in the sun", "water a fern twice a week", "fern humidity"];

#[test]
fn every_wire_shape_scores_each_text_in_the_order_sent() {
    let double = RerankTestDouble::start();
    // The double answers sorted by score (as the servers do): the client matches by index.
    let expected: Vec<f32> = TEXTS.iter().map(|t| overlap(QUERY, t) as f32).collect();
    assert!(expected[1] > expected[2] && expected[2] > expected[0], "the texts' order is not the score order");
    for (path, model) in [
        ("/rerank", None),
        ("/v2/rerank", Some("rerank-v3.5")),
        ("/jina/v1/rerank", Some("jina-reranker-v2")),
        ("/v1/rerank", Some("bge-reranker")),
    ] {
        let r = client(&format!("{}{path}", double.base), model, 5_000);
        let got = r.rerank(QUERY, &TEXTS).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(got, expected, "{path}");
        let (seen_path, body) = double.seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(seen_path, path);
        match path {
            "/rerank" => assert_eq!(body["texts"].as_array().unwrap().len(), 3, "TEI gets texts"),
            _ => {
                assert_eq!(body["documents"].as_array().unwrap().len(), 3, "{path} gets documents");
                assert_eq!(body["top_n"], 3, "{path}: every text scored");
                assert_eq!(body["model"], model.unwrap(), "{path}: the model named");
            }
        }
    }
}

#[test]
fn a_late_a_failing_or_a_short_answer_is_an_error_that_names_the_cause() {
    let double = RerankTestDouble::start();
    let late = client(&format!("{}/slow/rerank", double.base), None, 200).rerank(QUERY, &TEXTS).unwrap_err();
    assert_eq!(late.kind(), ErrorKind::Unavailable);
    assert!(late.to_string().contains("timed out after 200 ms"), "{late}");
    let failed =
        client(&format!("{}/fail/v1/rerank", double.base), Some("m"), 5_000).rerank(QUERY, &TEXTS).unwrap_err();
    assert!(failed.to_string().contains("HTTP 500"), "{failed}");
    let short =
        client(&format!("{}/short/v1/rerank", double.base), Some("m"), 5_000).rerank(QUERY, &TEXTS).unwrap_err();
    assert!(short.to_string().contains("1 of the 3 texts sent came back without a score"), "{short}");
    let nothing = client("http://127.0.0.1:9/rerank", None, 2_000).rerank(QUERY, &TEXTS).unwrap_err();
    assert_eq!(nothing.kind(), ErrorKind::Unavailable, "{nothing}");
}

#[test]
fn a_url_that_is_not_http_is_refused_before_any_request() {
    let e = RemoteReranker::new(RerankConfig {
        url: "ftp://h/rerank".into(),
        model: None,
        api_key: None,
        timeout: Duration::from_secs(1),
        api: RerankApi::Tei,
    })
    .err()
    .unwrap();
    assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
}
