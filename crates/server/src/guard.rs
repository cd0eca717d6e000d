//! What every request passes before a handler reads it (docs/http-api.md, "Boundaries"):
//!
//! - **Without keys, browsers cannot reach the API.** A page on another site can make a
//!   browser send simple cross-site requests (form posts, `text/plain` bodies, no preflight),
//!   and after DNS rebinding its own name points at 127.0.0.1. So without keys: `Host` must be
//!   a loopback name or an IP literal, a request whose `Origin` is not loopback is refused, and
//!   a request with a body must say `Content-Type: application/json`.
//! - **`/mcp` checks `Origin` with keys too** (the MCP transport's rule): a browser page of a
//!   foreign origin is refused unless `RAGCTX_MCP_ORIGINS` lists it.
//! - **Authentication first.** A request to a protected route (`/v1/…`, `/metrics`, `/mcp`)
//!   without a known key gets 401 before its path or body is parsed.
//! - **Errors in one shape.** Every 4xx and 5xx is `{"code","message"}` JSON, the router's
//!   own answers (unknown route, wrong method, a path that does not parse) included.

use crate::{caller, ApiError, AppState};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// Routes that need a key (where keys are configured).
fn protected(path: &str) -> bool {
    path.starts_with("/v1/") || path == "/v1" || path == "/metrics" || path == "/mcp" || path.starts_with("/mcp/")
}

/// `host` (a `Host` header or an `Origin`'s authority, with or without a port) is a loopback
/// name, or — for `Host` — an IP literal (which DNS rebinding cannot forge).
fn host_ok(host: &str, any_ip: bool) -> bool {
    let name = match host.strip_prefix('[') {
        // [v6] or [v6]:port
        Some(rest) => match rest.split_once(']') {
            Some((v6, tail)) if tail.is_empty() || tail.starts_with(':') => v6,
            _ => return false,
        },
        None => host
            .rsplit_once(':')
            .map_or(host, |(h, port)| if port.bytes().all(|b| b.is_ascii_digit()) { h } else { host }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => any_ip || ip.is_loopback(),
        Err(_) => false,
    }
}

/// The authority of an `Origin` (`scheme://host[:port]`), if it has that shape.
fn origin_host(origin: &str) -> Option<&str> {
    let (_, rest) = origin.split_once("://")?;
    Some(rest.split('/').next().unwrap_or(rest))
}

fn has_body(headers: &HeaderMap) -> bool {
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    length.is_some_and(|n| n > 0)
        || headers.contains_key(header::TRANSFER_ENCODING)
        || headers.contains_key(header::CONTENT_TYPE)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The checks of the module's doc, before the handler; `Err` is the answer.
fn check(state: &AppState, method: &Method, path: &str, headers: &HeaderMap) -> Result<(), ApiError> {
    if !state.keys.configured() {
        let refused = |m: &str| ApiError::new(StatusCode::FORBIDDEN, "forbidden", m.to_owned());
        if let Some(host) = headers.get(header::HOST) {
            let host = host.to_str().unwrap_or("");
            if !host_ok(host, true) {
                return Err(refused(
                    "without API keys this server answers only requests for a loopback name or an IP address (Host)",
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let loopback = origin.to_str().ok().and_then(origin_host).is_some_and(|h| host_ok(h, false));
            if !loopback {
                return Err(refused("without API keys this server refuses requests from web pages of other origins"));
            }
        }
        if *method != Method::GET && *method != Method::HEAD && has_body(headers) && !is_json(headers) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as Content-Type: application/json",
            ));
        }
    }
    if state.keys.configured() && (path == "/mcp" || path.starts_with("/mcp/")) {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !mcp_origin_ok(origin) {
                let shown: String = origin.chars().take(80).collect();
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!("Origin {shown:?} may not use /mcp: only loopback origins, and those RAGCTX_MCP_ORIGINS lists (comma-separated, e.g. https://app.example.com)"),
                ));
            }
        }
    }
    if state.keys.configured() && protected(path) {
        caller(state, headers)?;
    }
    Ok(())
}

/// A browser's `Origin` that may call `/mcp` where keys are set: a loopback one, or one
/// `RAGCTX_MCP_ORIGINS` lists exactly.
fn mcp_origin_ok(origin: &str) -> bool {
    let listed = std::env::var("RAGCTX_MCP_ORIGINS").unwrap_or_default();
    listed.split(',').map(str::trim).any(|o| !o.is_empty() && o.eq_ignore_ascii_case(origin))
        || origin_host(origin).is_some_and(|h| host_ok(h, false))
}

/// The error code of a status the router answered by itself.
fn code_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::CONFLICT => "conflict",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    }
}

/// An error answer that is not JSON (the router's, an extractor's, a nested service's) as
/// `{"code","message"}`: its text, or the status's reason, as the message.
async fn as_json(res: Response) -> Response {
    let status = res.status();
    let json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10).await.map(|b| String::from_utf8_lossy(&b).trim().to_owned());
    let message = match text {
        Ok(t) if !t.is_empty() => t,
        _ => match status {
            StatusCode::NOT_FOUND => "no such route: see /openapi.json".to_owned(),
            StatusCode::METHOD_NOT_ALLOWED => "this route does not take that method: see /openapi.json".to_owned(),
            s => s.canonical_reason().unwrap_or("error").to_owned(),
        },
    };
    let body = serde_json::json!({"code": code_of(status), "message": message});
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    Response::from_parts(parts, axum::body::Body::from(body.to_string()))
}

/// The middleware: [`check`] before the handler, errors as JSON after it.
pub(crate) async fn guard(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Err(e) = check(&state, req.method(), req.uri().path(), req.headers()) {
        return e.into_response();
    }
    as_json(next.run(req).await).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins() {
        for ok in
            ["localhost", "localhost:8080", "127.0.0.1:80", "[::1]:8080", "[::1]", "app.localhost:3000", "LOCALHOST."]
        {
            assert!(host_ok(ok, false), "{ok}");
        }
        for ip in ["10.0.0.5:8080", "[2001:db8::1]:80", "192.168.1.2"] {
            assert!(host_ok(ip, true) && !host_ok(ip, false), "{ip}: an IP literal as Host, not as a loopback origin");
        }
        for bad in ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", "[::1", ""]
        {
            assert!(!host_ok(bad, true), "{bad}");
        }
        assert_eq!(origin_host("http://127.0.0.1:8080"), Some("127.0.0.1:8080"));
        assert_eq!(origin_host("null"), None, "an opaque origin (sandboxed frame, file://) is not loopback");
    }

    #[test]
    fn what_is_protected() {
        for p in ["/v1/documents", "/v1/sessions/s1/turns/abc", "/metrics", "/mcp", "/v1/nope"] {
            assert!(protected(p), "{p}");
        }
        for p in ["/", "/healthz", "/openapi.json", "/v1x", "/mcpx"] {
            assert!(!protected(p), "{p}");
        }
    }
}

#[cfg(test)]
mod mcp_origin_tests {
    #[test]
    fn loopback_origins_pass_and_foreign_ones_do_not() {
        for ok in ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443"] {
            assert!(super::mcp_origin_ok(ok), "{ok}");
        }
        for bad in ["https://evil.example", "null", "http://localhost.evil.example"] {
            assert!(!super::mcp_origin_ok(bad), "{bad}");
        }
    }
}
