//! The OpenAI-compatible generator: sends the cited prompt to any `/v1/chat/completions`
//! endpoint (OpenAI, vLLM, llama.cpp server, Ollama) with a time-out and bounded retries.

use crate::http::{self, Retry};
use ragctx_core::{Error, GenerationRequest, Generator, Result};
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
}

pub struct OpenAiGenerator {
    config: OpenAiConfig,
    agent: ureq::Agent,
}

impl OpenAiGenerator {
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        http::check("generator", &config.base_url, &config.model)?;
        let agent = http::agent(config.timeout);
        Ok(OpenAiGenerator { config, agent })
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'))
    }

    fn unavailable(&self, message: String) -> Error {
        Error::Unavailable { backend: format!("generator at {}", self.url()), message }
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
        let body = json!({
            "model": self.config.model,
            "temperature": 0,
            "stream": true,
            "messages": [{"role": "user", "content": request.prompt}],
        });
        http::retrying(self.config.retries, || self.attempt_streaming(&body, on_delta))?
            .map_err(|m| self.unavailable(m))
    }

    fn generate(&self, request: &GenerationRequest<'_>) -> Result<String> {
        let body = json!({
            "model": self.config.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": request.prompt}],
        });
        http::retrying(self.config.retries, || self.attempt(&body))?.map_err(|m| self.unavailable(m))
    }
}
