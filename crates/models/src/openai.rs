//! The OpenAI-compatible generator: sends the cited prompt to any `/v1/chat/completions`
//! endpoint (OpenAI, vLLM, llama.cpp server, Ollama) with a time-out and bounded retries;
//! and the condenser, which asks such an endpoint to rewrite a follow-up into a standalone
//! search query (`condense openai`).

use crate::http::{self, Retry};
use ragctx_core::{CondenseRequest, Condenser, Error, GenerationRequest, Generator, Result};
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    /// e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Whole-request time-out.
    pub timeout: Duration,
    /// Retries after the first attempt, for connection errors, 429 and 5xx.
    pub retries: u32,
    /// The most tokens an answer may take (`max_tokens`); `None` leaves it to the server.
    pub max_tokens: Option<u32>,
}

pub struct OpenAiGenerator {
    config: OpenAiConfig,
    agent: ureq::Agent,
    /// What errors call it: `generator`, or `condenser` inside [`OpenAiCondenser`].
    role: &'static str,
}

impl OpenAiGenerator {
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        Self::as_role(config, "generator")
    }

    fn as_role(config: OpenAiConfig, role: &'static str) -> Result<Self> {
        http::check(role, &config.base_url, &config.model)?;
        let agent = http::agent(config.timeout);
        Ok(OpenAiGenerator { config, agent, role })
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'))
    }

    fn unavailable(&self, message: String) -> Error {
        Error::Unavailable { backend: format!("{} at {}", self.role, self.url()), message }
    }

    /// The request, sent: `Ok(Err(..))` is a failure worth retrying (no answer, 429, 5xx).
    fn send(&self, body: &Value) -> Result<std::result::Result<ureq::http::Response<ureq::Body>, Retry>> {
        let res = match http::post(&self.agent, &self.url(), self.config.api_key.as_deref()).send_json(body) {
            Ok(r) => r,
            Err(e) => return Ok(Err((e.to_string(), None))),
        };
        let status = res.status().as_u16();
        if status == 200 {
            return Ok(Ok(res));
        }
        let wait = http::retry_after(&res);
        let text = res.into_body().read_to_string().unwrap_or_default();
        if status == 429 || status >= 500 {
            return Ok(Err((format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()), wait)));
        }
        // The caller's configuration is wrong (key, model, URL): retrying will not help.
        Err(self.unavailable(format!("HTTP {status}: {}", text.chars().take(300).collect::<String>())))
    }

    /// `choices[0].message.content` of a whole (not streamed) completion.
    fn content(&self, text: &str) -> Result<String> {
        let v: Value = serde_json::from_str(text).map_err(|e| self.unavailable(format!("invalid JSON answer: {e}")))?;
        v["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| self.unavailable("answer has no choices[0].message.content".into()))
    }

    /// One attempt at a whole completion.
    fn attempt(&self, body: &Value) -> Result<std::result::Result<String, Retry>> {
        let res = match self.send(body)? {
            Ok(r) => r,
            Err(retry) => return Ok(Err(retry)),
        };
        match res.into_body().read_to_string() {
            Ok(text) => self.content(&text).map(Ok),
            Err(e) => Ok(Err((format!("reading the answer: {e}"), None))),
        }
    }
}

impl OpenAiGenerator {
    /// One streamed attempt: `Ok(Err(..))` is a failure worth retrying, which only happens
    /// before the first piece was handed on (a piece cannot be taken back).
    fn attempt_streaming(
        &self,
        body: &Value,
        on_delta: &(dyn Fn(&str) + Sync),
    ) -> Result<std::result::Result<String, Retry>> {
        let res = match self.send(body)? {
            Ok(r) => r,
            Err(retry) => return Ok(Err(retry)),
        };
        let event_stream = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !event_stream {
            // A server that ignores `stream` answers with one completion: hand it on whole.
            let text = match res.into_body().read_to_string() {
                Ok(t) => t,
                Err(e) => return Ok(Err((format!("reading the answer: {e}"), None))),
            };
            let answer = self.content(&text)?;
            on_delta(&answer);
            return Ok(Ok(answer));
        }
        let mut reader = std::io::BufReader::new(res.into_body().into_reader());
        // Server-sent events: `data: {chunk}` lines, a `finish_reason` and `data: [DONE]` at
        // the end. A stream that stops before either is a cut-off answer, not an answer.
        let mut answer = String::new();
        let mut line = String::new();
        let mut finished = false;
        loop {
            line.clear();
            match std::io::BufRead::read_line(&mut reader, &mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if answer.is_empty() => return Ok(Err((format!("reading the stream: {e}"), None))),
                Err(e) => return Err(self.unavailable(format!("the stream broke after {} bytes: {e}", answer.len()))),
            }
            let Some(data) = line.trim_end().strip_prefix("data:").map(str::trim) else { continue };
            if data == "[DONE]" {
                finished = true;
                break;
            }
            let chunk: Value =
                serde_json::from_str(data).map_err(|e| self.unavailable(format!("invalid stream event: {e}")))?;
            if let Some(error) = chunk.get("error") {
                return Err(self.unavailable(format!("the model failed mid-answer: {error}")));
            }
            if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str().filter(|p| !p.is_empty()) {
                on_delta(piece);
                answer.push_str(piece);
            }
            finished |= chunk["choices"][0]["finish_reason"].is_string();
        }
        if !finished {
            if answer.is_empty() {
                return Ok(Err(("the stream ended before any answer".into(), None)));
            }
            return Err(self.unavailable(format!(
                "the stream ended after {} bytes, before the answer was finished",
                answer.len()
            )));
        }
        Ok(Ok(answer))
    }
}

impl Generator for OpenAiGenerator {
    fn name(&self) -> &str {
        "openai"
    }

    /// Asks with `stream: true` and hands each piece on as it arrives. Retried (connection
    /// failures, 429, 5xx) only until the first piece arrived.
    fn generate_streaming(&self, request: &GenerationRequest<'_>, on_delta: &(dyn Fn(&str) + Sync)) -> Result<String> {
        let mut body = json!({
            "model": self.config.model,
            "temperature": 0,
            "stream": true,
            "messages": [{"role": "user", "content": request.prompt}],
        });
        if let Some(n) = self.config.max_tokens {
            body["max_tokens"] = n.into();
        }
        http::retrying(self.config.retries, || self.attempt_streaming(&body, on_delta))?
            .map_err(|m| self.unavailable(m))
    }

    fn generate(&self, request: &GenerationRequest<'_>) -> Result<String> {
        let mut body = json!({
            "model": self.config.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": request.prompt}],
        });
        if let Some(n) = self.config.max_tokens {
            body["max_tokens"] = n.into();
        }
        http::retrying(self.config.retries, || self.attempt(&body))?.map_err(|m| self.unavailable(m))
    }
}

/// The condenser's prompt, kept in the repository (`crates/models/prompts/condense.json`):
/// few-shot chat turns (a conversation, a follow-up, its standalone rewrite), then the turn to
/// rewrite, each user message made from the `user` template. Few-shot turns rather than an
/// instruction alone: small models (Gemma 3 270M, which `scripts/llm-up` serves, is a
/// pretrained model, not an instruction-tuned one) follow the pattern where they ignore the
/// instruction.
pub const CONDENSE_PROMPT: &str = include_str!("../prompts/condense.json");

/// Tokens the condenser may write: a query, not an answer.
const CONDENSE_MAX_TOKENS: u32 = 64;

/// Rewrites a follow-up into a standalone query through an OpenAI-compatible chat endpoint:
/// one attempt within the configured time-out (a late rewrite is worth less than the turn's
/// own query, which the engine falls back to), temperature 0, one line.
pub struct OpenAiCondenser {
    inner: OpenAiGenerator,
    /// The few-shot turns, as chat messages.
    shots: Vec<Value>,
    /// The user message's template.
    user: String,
}

impl OpenAiCondenser {
    /// `config.retries` is ignored: a condenser makes one attempt.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let prompt: Value =
            serde_json::from_str(CONDENSE_PROMPT).map_err(|e| Error::Model(format!("condense prompt: {e}")))?;
        let user = prompt["user"].as_str().unwrap_or("{conversation}\n{question}").to_owned();
        let mut shots = Vec::new();
        for e in prompt["examples"].as_array().into_iter().flatten() {
            let field = |k: &str| e[k].as_str().unwrap_or_default();
            shots.push(json!({"role": "user", "content": fill(&user, field("conversation"), field("question"))}));
            shots.push(json!({"role": "assistant", "content": field("answer")}));
        }
        let inner = OpenAiGenerator::as_role(OpenAiConfig { retries: 0, ..config }, "condenser")?;
        Ok(OpenAiCondenser { inner, shots, user })
    }

    /// The chat messages for `request`: the few-shot turns, then its own.
    pub fn messages(&self, request: &CondenseRequest<'_>) -> Vec<Value> {
        let mut m = self.shots.clone();
        m.push(json!({"role": "user", "content": fill(&self.user, request.conversation, request.question)}));
        m
    }
}

fn fill(template: &str, conversation: &str, question: &str) -> String {
    template.replace("{conversation}", conversation).replace("{question}", question)
}

impl Condenser for OpenAiCondenser {
    fn name(&self) -> &str {
        &self.inner.config.model
    }

    fn condense(&self, request: &CondenseRequest<'_>) -> Result<String> {
        let body = json!({
            "model": self.inner.config.model,
            "temperature": 0,
            "max_tokens": CONDENSE_MAX_TOKENS,
            "stop": ["\n"],
            "messages": self.messages(request),
        });
        self.inner.attempt(&body)?.map_err(|(message, _)| {
            // ureq says "timeout: global": say what the deadline was.
            let message = if message.contains("timeout") {
                format!("timed out after {} ms", self.inner.config.timeout.as_millis())
            } else {
                message
            };
            self.inner.unavailable(message)
        })
    }
}
