//! A client of rerank endpoints (`rerank remote`), in the two wire shapes users run:
//!
//! - `tei`: Hugging Face Text Embeddings Inference, `POST /rerank` with `query` and `texts`,
//!   answered by a bare array of `{index, score}`;
//! - `documents`: Cohere `/v2/rerank`, Jina `/v1/rerank` and llama.cpp server's
//!   `/v1/rerank`, with `model`, `query`, `documents` and `top_n`, answered by
//!   `{results: [{index, relevance_score}]}`.
//!
//! Results are always matched back to the texts by `index` (servers sort them by score);
//! an answer that does not score every text sent exactly once is an error. One attempt,
//! within the configured time-out: the turn falls back to the search's order when it fails.

use crate::http;
use ragctx_core::{Error, Reranker, Result};
use serde_json::{json, Value};
use std::time::Duration;

/// Which request and answer a rerank endpoint speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RerankApi {
    /// TEI: `texts` in, a bare array of `{index, score}` out.
    Tei,
    /// Cohere, Jina, llama.cpp server: `documents` in, `results[].relevance_score` out.
    Documents,
}

impl RerankApi {
    /// `tei`, `documents`, or `auto`: `tei` when the URL's path is TEI's `/rerank`, else
    /// `documents` (`/v1/rerank`, `/v2/rerank`).
    pub fn parse(name: &str, url: &str) -> Result<RerankApi> {
        match name {
            "tei" => Ok(RerankApi::Tei),
            "documents" => Ok(RerankApi::Documents),
            "auto" => {
                let path = url.split("://").nth(1).and_then(|rest| rest.find('/').map(|i| &rest[i..])).unwrap_or("");
                Ok(if path.trim_end_matches('/') == "/rerank" { RerankApi::Tei } else { RerankApi::Documents })
            }
            other => Err(Error::InvalidInput(format!("unknown rerank_api {other:?}: use auto, tei, documents"))),
        }
    }
}

/// A rerank endpoint.
#[derive(Clone, Debug)]
pub struct RerankConfig {
    /// The endpoint itself, e.g. `http://127.0.0.1:8080/rerank` (TEI),
    /// `https://api.cohere.com/v2/rerank`, `http://127.0.0.1:8081/v1/rerank` (llama.cpp).
    pub url: String,
    /// The model name sent (`documents` endpoints want one; TEI serves one model).
    pub model: Option<String>,
    /// Sent as a bearer token when set.
    pub api_key: Option<String>,
    /// Whole-request time-out.
    pub timeout: Duration,
    /// The wire shape.
    pub api: RerankApi,
}

/// The client of one rerank endpoint.
pub struct RemoteReranker {
    config: RerankConfig,
    agent: ureq::Agent,
    name: String,
}

impl RemoteReranker {
    /// Checks the URL (http or https) before any request.
    pub fn new(config: RerankConfig) -> Result<RemoteReranker> {
        http::check("reranker", &config.url, config.model.as_deref().unwrap_or("-"))?;
        let name = config.model.clone().unwrap_or_else(|| config.url.clone());
        let agent = http::agent(config.timeout);
        Ok(RemoteReranker { config, agent, name })
    }

    fn unavailable(&self, message: String) -> Error {
        Error::Unavailable { backend: format!("reranker at {}", self.config.url), message }
    }

    fn body(&self, query: &str, texts: &[&str]) -> Value {
        match self.config.api {
            RerankApi::Tei => json!({"query": query, "texts": texts, "truncate": true, "raw_scores": false}),
            RerankApi::Documents => {
                let mut b = json!({"query": query, "documents": texts, "top_n": texts.len()});
                if let Some(m) = &self.config.model {
                    b["model"] = json!(m);
                }
                b
            }
        }
    }
}

impl Reranker for RemoteReranker {
    fn name(&self) -> &str {
        &self.name
    }

    fn rerank(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        let res = http::post(&self.agent, &self.config.url, self.config.api_key.as_deref())
            .send_json(self.body(query, texts))
            .map_err(|e| {
                // ureq says "timeout: global": say what the deadline was.
                let m = e.to_string();
                let m = if m.contains("timeout") {
                    format!("timed out after {} ms", self.config.timeout.as_millis())
                } else {
                    m
                };
                self.unavailable(m)
            })?;
        let status = res.status().as_u16();
        let text =
            res.into_body().read_to_string().map_err(|e| self.unavailable(format!("reading the answer: {e}")))?;
        if status != 200 {
            return Err(self.unavailable(format!("HTTP {status}: {}", text.chars().take(300).collect::<String>())));
        }
        let answer: Value =
            serde_json::from_str(&text).map_err(|e| self.unavailable(format!("invalid JSON answer: {e}")))?;
        scores(&answer, texts.len()).map_err(|m| self.unavailable(m))
    }
}

/// One score per text sent, from either answer shape, matched by `index`.
pub fn scores(answer: &Value, n: usize) -> std::result::Result<Vec<f32>, String> {
    let results = match answer {
        Value::Array(a) => a,
        Value::Object(o) => match o.get("results") {
            Some(Value::Array(a)) => a,
            _ => return Err("the answer has no results array".into()),
        },
        _ => return Err("the answer is neither an array nor an object with results".into()),
    };
    let mut out: Vec<Option<f32>> = vec![None; n];
    for r in results {
        let index = r.get("index").and_then(Value::as_u64).ok_or("a result has no index")? as usize;
        let score = r
            .get("relevance_score")
            .or_else(|| r.get("score"))
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("result {index} has no relevance_score or score"))?;
        match out.get_mut(index) {
            Some(slot @ None) => *slot = Some(score as f32),
            Some(Some(_)) => return Err(format!("index {index} is scored twice")),
            None => return Err(format!("index {index} is not one of the {n} texts sent")),
        }
    }
    let missing = out.iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        return Err(format!("{missing} of the {n} texts sent came back without a score"));
    }
    Ok(out.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_answer_shapes_are_matched_back_by_index() {
        let tei = json!([{"index": 2, "score": 0.9}, {"index": 0, "score": 0.5}, {"index": 1, "score": 0.1}]);
        assert_eq!(scores(&tei, 3).unwrap(), [0.5, 0.1, 0.9]);
        let cohere =
            json!({"id": "x", "results": [{"index": 1, "relevance_score": 0.8}, {"index": 0, "relevance_score": 0.2}]});
        assert_eq!(scores(&cohere, 2).unwrap(), [0.2, 0.8]);
        assert!(scores(&json!([{"index": 0, "score": 1.0}]), 2).unwrap_err().contains("1 of the 2"));
        assert!(scores(&json!([{"index": 5, "score": 1.0}]), 2).unwrap_err().contains("index 5"));
        let twice = json!([{"index": 0, "score": 1.0}, {"index": 0, "score": 0.5}]);
        assert!(scores(&twice, 1).unwrap_err().contains("twice"));
        assert!(scores(&json!({"error": "busy"}), 1).is_err());
    }

    #[test]
    fn the_shape_is_told_by_the_path_unless_named() {
        assert_eq!(RerankApi::parse("auto", "http://127.0.0.1:8080/rerank").unwrap(), RerankApi::Tei);
        assert_eq!(RerankApi::parse("auto", "https://api.cohere.com/v2/rerank").unwrap(), RerankApi::Documents);
        assert_eq!(RerankApi::parse("auto", "http://h:1/v1/rerank").unwrap(), RerankApi::Documents);
        assert_eq!(RerankApi::parse("tei", "http://h:1/v1/rerank").unwrap(), RerankApi::Tei);
        assert!(RerankApi::parse("cohere", "http://h").is_err());
    }
}
