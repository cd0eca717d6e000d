use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ragctx_core::Error;

/// Every error the API returns: `{"code","message"}` with a status from one mapping. An
/// internal failure (500) is answered without its text — which may name files, servers or
/// queries — but with a `request_id`; the server log has the cause under the same id.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let kind = e.kind();
        let status = StatusCode::from_u16(kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError::new(status, kind.code(), e.report().to_string())
    }
}

impl ApiError {
    /// What the client is told: `{"code","message"}`, or for an internal failure a message
    /// with a request id, the cause going to the server log under that id.
    pub fn public_body(&self) -> serde_json::Value {
        if self.code == "internal" {
            let id = REQUEST_ID.try_with(Clone::clone).unwrap_or_else(|_| request_id());
            tracing::error!(request_id = %id, cause = %self.message, "internal error");
            return serde_json::json!({
                "code": self.code,
                "message": format!("internal error; the server log has the cause under request {id}"),
                "request_id": id,
            });
        }
        serde_json::json!({"code": self.code, "message": self.message})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.public_body())).into_response()
    }
}

tokio::task_local! {
    /// The id of the request being answered (set by the router's middleware).
    pub(crate) static REQUEST_ID: String;
}

/// A process-unique id: the process start (ns since the epoch, hex) and a counter.
pub(crate) fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static START: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    format!("{:x}-{}", start & 0xffff_ffff_ffff, NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(e: ApiError) -> (StatusCode, serde_json::Value) {
        let r = e.into_response();
        let status = r.status();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn internal_errors_hide_their_text_and_carry_a_request_id() {
        let (status, b) = body(Error::inconsistent("redb: /srv/secret/ragctx.redb corrupted").into()).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(b["code"], "internal");
        let id = b["request_id"].as_str().expect("request_id");
        assert!(!b.to_string().contains("secret"), "{b}");
        assert!(b["message"].as_str().unwrap().contains(id));
        let (_, other) = body(Error::inconsistent("x").into()).await;
        assert_ne!(other["request_id"], b["request_id"], "ids differ per request");
        // Errors the caller can act on keep their message and have no id.
        let (status, b) = body(Error::InvalidInput("question is empty".into()).into()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(b["message"], "invalid input: question is empty");
        assert!(b.get("request_id").is_none());
    }
}
