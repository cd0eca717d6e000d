//! The OpenAI-compatible generator against `OpenAiTestDouble`: a small local HTTP server in
//! the testkit that speaks `/v1/chat/completions` (no real LLM runs on this machine).
#![cfg(feature = "openai")]

use ragctx_core::{Error, GenerationRequest, Generator};
use ragctx_models::{OpenAiConfig, OpenAiGenerator};
use ragctx_testkit::{completion, OpenAiTestDouble};
use std::time::Duration;

fn generator(url: &str, retries: u32, timeout_ms: u64) -> OpenAiGenerator {
    OpenAiGenerator::new(OpenAiConfig {
        base_url: url.to_owned(),
        model: "test-model".into(),
        api_key: Some("sk-test".into()),
        timeout: Duration::from_millis(timeout_ms),
        retries,
        max_tokens: None,
    })
    .unwrap()
}

fn request<'a>(prompt: &'a str) -> GenerationRequest<'a> {
    GenerationRequest { question: "q", blocks: &[], pointers: &[], prompt }
}

#[test]
fn sends_the_prompt_and_returns_the_answer_retrying_transient_errors() {
    let double = OpenAiTestDouble::start(vec![
        (503, "{\"error\":\"busy\"}".into(), 0),
        (200, completion("Appeals cost 775 dollars [1]."), 0),
    ]);
    let answer = generator(&double.url, 2, 5_000).generate(&request("PROMPT with [1] sources")).unwrap();
    assert_eq!(answer, "Appeals cost 775 dollars [1].");
    let seen = double.seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "one retry after the 503");
    assert_eq!(seen[1].0.to_ascii_lowercase(), "authorization: bearer sk-test");
    let body: serde_json::Value = serde_json::from_str(&seen[1].1).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["content"], "PROMPT with [1] sources");
}

#[test]
fn failures_are_clear_errors() {
    let double = OpenAiTestDouble::start(vec![(401, "{\"error\":\"bad key\"}".into(), 0)]);
    let err = generator(&double.url, 3, 5_000).generate(&request("p")).unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }));
    assert!(err.to_string().contains("HTTP 401"), "{err}");
    assert_eq!(double.seen.lock().unwrap().len(), 1, "a 401 is not retried");

    let slow = OpenAiTestDouble::start(vec![(200, completion("late"), 3_000), (200, completion("late"), 3_000)]);
    let started = std::time::Instant::now();
    let err = generator(&slow.url, 1, 300).generate(&request("p")).unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(2_500), "time-out bounds each attempt");
    assert!(err.to_string().contains("2 attempts failed"), "{err}");

    let err = generator("http://127.0.0.1:1/v1", 0, 1_000).generate(&request("p")).unwrap_err();
    assert!(err.to_string().contains("generator at http://127.0.0.1:1/v1/chat/completions"), "{err}");
    assert!(OpenAiGenerator::new(OpenAiConfig {
        base_url: "ftp://x".into(),
        model: "m".into(),
        api_key: None,
        timeout: Duration::from_secs(1),
        retries: 0,
        max_tokens: None,
    })
    .is_err());
}

#[test]
fn streams_pieces_as_they_come_and_takes_a_whole_answer_from_a_server_that_does_not_stream() {
    use std::sync::Mutex;
    let pieces: Vec<String> = ["Appeals ", "cost \"775\" ", "dollars [1]."].map(String::from).to_vec();
    let double = OpenAiTestDouble::streaming(pieces.clone(), 0, 1);
    let got = Mutex::new(Vec::new());
    let on_delta = |p: &str| got.lock().unwrap().push(p.to_owned());
    let answer = generator(&double.url, 0, 5_000).generate_streaming(&request("P"), &on_delta).unwrap();
    assert_eq!(answer, pieces.concat());
    assert_eq!(*got.lock().unwrap(), pieces);
    let body: serde_json::Value = serde_json::from_str(&double.seen.lock().unwrap()[0].1).unwrap();
    assert_eq!(body["stream"], true);
    // A 503 first (retried: nothing was handed on yet), then a server that ignores `stream`.
    let double = OpenAiTestDouble::start(vec![
        (503, "{\"error\":\"busy\"}".into(), 0),
        (200, completion("Appeals cost 775 dollars [1]."), 0),
    ]);
    got.lock().unwrap().clear();
    let answer = generator(&double.url, 1, 5_000).generate_streaming(&request("P"), &on_delta).unwrap();
    assert_eq!(answer, "Appeals cost 775 dollars [1].");
    assert_eq!(*got.lock().unwrap(), vec![answer]);
    // A stream that stops mid-answer is an error, not a shorter answer.
    let double = OpenAiTestDouble::cut_stream(vec!["Appeals ".into(), "cost".into()]);
    got.lock().unwrap().clear();
    let err = generator(&double.url, 0, 5_000).generate_streaming(&request("P"), &on_delta).unwrap_err();
    assert!(
        matches!(err, Error::Unavailable { .. }) && err.to_string().contains("before the answer was finished"),
        "{err}"
    );
}
