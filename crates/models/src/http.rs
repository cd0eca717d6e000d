//! What the clients of OpenAI-compatible servers share: the HTTP agent, the request with
//! its key, the configuration checks, and retries with back-off.

use ragctx_core::{Error, Result};
use std::time::Duration;

/// Why an attempt failed, and how long the server asked us to wait (`Retry-After`).
pub(crate) type Retry = (String, Option<Duration>);

/// An agent whose every request ends within `timeout` and whose error statuses are
/// answers to read, not errors.
pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder().timeout_global(Some(timeout)).http_status_as_error(false).build().into()
}

/// Refuses a base URL that is not http(s) and an empty model name before any request.
pub(crate) fn check(what: &str, base_url: &str, model: &str) -> Result<()> {
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(Error::InvalidInput(format!(
            "{what} URL {base_url:?} must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)"
        )));
    }
    if model.trim().is_empty() {
        return Err(Error::InvalidInput(format!("the openai {what} needs a model name")));
    }
    Ok(())
}

/// A JSON POST to `url`, with the bearer key when there is one.
pub(crate) fn post(
    agent: &ureq::Agent,
    url: &str,
    api_key: Option<&str>,
) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
    let req = agent.post(url).header("Content-Type", "application/json");
    match api_key {
        Some(k) => req.header("Authorization", &format!("Bearer {k}")),
        None => req,
    }
}

/// The `Retry-After` of an answer, in seconds.
pub(crate) fn retry_after<B>(res: &ureq::http::Response<B>) -> Option<Duration> {
    res.headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// Runs `attempt` up to `1 + retries` times: `Ok(Err(retry))` is a failure worth another
/// attempt after 0.25 s, 0.5 s, 1 s, … (at most 8 s), or what the server asked for (at most
/// 30 s); `Err` ends at once. After the last failure, `Ok(Err(message))` says what happened.
pub(crate) fn retrying<T>(
    retries: u32,
    mut attempt: impl FnMut() -> Result<std::result::Result<T, Retry>>,
) -> Result<std::result::Result<T, String>> {
    let mut last = String::new();
    for n in 0..=retries {
        match attempt()? {
            Ok(answer) => return Ok(Ok(answer)),
            Err((message, wait)) => {
                last = message;
                if n < retries {
                    let backoff = Duration::from_millis(250 << n.min(5));
                    std::thread::sleep(wait.unwrap_or(backoff).min(Duration::from_secs(30)));
                }
            }
        }
    }
    Ok(Err(format!("{} attempts failed; last: {last}", retries + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_until_an_answer_and_stops_at_a_final_error() {
        let mut calls = 0;
        let r = retrying(3, || {
            calls += 1;
            Ok(if calls < 3 { Err(("busy".into(), Some(Duration::ZERO))) } else { Ok(calls) })
        });
        assert_eq!(r.unwrap(), Ok(3));
        let mut calls = 0;
        let r: Result<std::result::Result<(), String>> = retrying(2, || {
            calls += 1;
            Ok(Err(("busy".into(), Some(Duration::ZERO))))
        });
        assert_eq!((r.unwrap(), calls), (Err("3 attempts failed; last: busy".into()), 3));
        let r: Result<std::result::Result<(), String>> = retrying(5, || Err(Error::InvalidInput("no".into())));
        assert!(r.is_err(), "a final error is not retried");
    }
}
