//! The OpenAI-compatible generator: sends the cited prompt to any `/v1/chat/completions`
//! endpoint (OpenAI, vLLM, llama.cpp server, Ollama) with a time-out and bounded retries.

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
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(Error::InvalidInput(format!(
                "generator base URL {:?} must start with http:// or https://",
                config.base_url
            )));
        }
        if config.model.trim().is_empty() {
            return Err(Error::InvalidInput("the openai generator needs a model name".into()));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(OpenAiGenerator { config, agent })
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'))
    }

    fn unavailable(&self, message: String) -> Error {
        Error::Unavailable { backend: format!("generator at {}", self.url()), message }
    }

    /// One attempt: `Ok(Err(..))` is a failure worth retrying.
    fn attempt(&self, body: &Value) -> Result<std::result::Result<String, String>> {
        let mut req = self.agent.post(&self.url()).header("Content-Type", "application/json");
        if let Some(k) = &self.config.api_key {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        let mut res = match req.send_json(body) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap_or_default();
        if status == 429 || status >= 500 {
            return Ok(Err(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>())));
        }
        if status != 200 {
            // The caller's configuration is wrong (key, model, URL): retrying will not help.
            return Err(self.unavailable(format!("HTTP {status}: {}", text.chars().take(300).collect::<String>())));
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| self.unavailable(format!("invalid JSON answer: {e}")))?;
        v["choices"][0]["message"]["content"]
            .as_str()
            .map(|s| Ok(s.to_owned()))
            .ok_or_else(|| self.unavailable("answer has no choices[0].message.content".into()))
    }
}

impl OpenAiGenerator {
    /// One streamed attempt: `Ok(Err(..))` is a failure worth retrying, which only happens
    /// before the first piece was handed on (a piece cannot be taken back).
    fn attempt_streaming(
        &self,
        body: &Value,
        on_delta: &(dyn Fn(&str) + Sync),
    ) -> Result<std::result::Result<String, String>> {
        let mut req = self.agent.post(&self.url()).header("Content-Type", "application/json");
        if let Some(k) = &self.config.api_key {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        let res = match req.send_json(body) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let status = res.status().as_u16();
        let event_stream = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut reader = std::io::BufReader::new(res.into_body().into_reader());
        if status != 200 || !event_stream {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut reader, &mut text);
            let snippet = |n: usize| text.chars().take(n).collect::<String>();
            if status == 429 || status >= 500 {
                return Ok(Err(format!("HTTP {status}: {}", snippet(200))));
            }
            if status != 200 {
                return Err(self.unavailable(format!("HTTP {status}: {}", snippet(300))));
            }
            // A server that ignores `stream` answers with one completion: hand it on whole.
            let v: Value =
                serde_json::from_str(&text).map_err(|e| self.unavailable(format!("invalid JSON answer: {e}")))?;
            let answer = v["choices"][0]["message"]["content"]
                .as_str()
                .ok_or_else(|| self.unavailable("answer has no choices[0].message.content".into()))?;
            on_delta(answer);
            return Ok(Ok(answer.to_owned()));
        }
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
                Err(e) if answer.is_empty() => return Ok(Err(format!("reading the stream: {e}"))),
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
                return Ok(Err("the stream ended before any answer".into()));
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
        let mut last = String::new();
        for attempt in 0..=self.config.retries {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200 << (attempt - 1).min(5)));
            }
            match self.attempt_streaming(&body, on_delta)? {
                Ok(answer) => return Ok(answer),
                Err(e) => last = e,
            }
        }
        Err(self.unavailable(format!("{} attempts failed; last: {last}", self.config.retries + 1)))
    }

    fn generate(&self, request: &GenerationRequest<'_>) -> Result<String> {
        let body = json!({
            "model": self.config.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": request.prompt}],
        });
        let mut last = String::new();
        for attempt in 0..=self.config.retries {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200 << (attempt - 1).min(5)));
            }
            match self.attempt(&body)? {
                Ok(answer) => return Ok(answer),
                Err(e) => last = e,
            }
        }
        Err(self.unavailable(format!("{} attempts failed; last: {last}", self.config.retries + 1)))
    }
}
