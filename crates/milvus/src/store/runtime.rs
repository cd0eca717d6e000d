//! The bridge from the synchronous store to the async SDK: every call on the store's own
//! Tokio runtime under a deadline, failures told apart (refused vs unavailable), reads that
//! reload a collection a restarted server released.

use super::*;

pub(super) fn unavailable(config: &MilvusConfig, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Unavailable { backend: format!("Milvus at {}", config.uri), message: format!("{what}: {e}") }
}

impl MilvusVectorStore {
    /// Runs one SDK call on the store's runtime with the configured deadline.
    pub(super) fn call<T, F>(&self, what: &str, fut: F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = milvus::v2::error::Result<T>> + Send + 'static,
    {
        self.call_raw(fut).map_err(|e| self.error(what, e))
    }

    /// [`Self::call`] with the SDK's own error, for callers that tell its kinds apart.
    fn call_raw<T, F>(&self, fut: F) -> std::result::Result<T, CallError>
    where
        T: Send + 'static,
        F: Future<Output = milvus::v2::error::Result<T>> + Send + 'static,
    {
        run(&self.runtime, self.config.timeout * self.config.attempts.max(1), fut)
    }

    /// A read ([`Self::call`]) that reloads the collection and tries once more when the
    /// server says it is not loaded — as a restarted Milvus does until someone loads it.
    pub(super) fn read<T, F>(&self, what: &str, make: impl Fn() -> F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = milvus::v2::error::Result<T>> + Send + 'static,
    {
        match self.call_raw(make()) {
            Err(e) if needs_load(&e) => {
                self.load()?;
                // A load is asynchronous on the server: a read right after it can still find
                // the collection released. Wait a little, then call it what it is — a server
                // that is recovering (503), not a rejected request.
                for wait_ms in [0u64, 200, 400, 800] {
                    std::thread::sleep(Duration::from_millis(wait_ms));
                    match self.call_raw(make()) {
                        Err(e) if needs_load(&e) => continue,
                        r => return r.map_err(|e| self.error(what, e)),
                    }
                }
                Err(unavailable(&self.config, what, "the collection is still loading after a restart; try again"))
            }
            r => r.map_err(|e| self.error(what, e)),
        }
    }

    pub(super) fn load(&self) -> Result<()> {
        let (client, name) = (self.client.clone(), self.config.collection.clone());
        self.call("load_collection", async move {
            client.load_collection(LoadCollectionRequest::builder().collection_name(name).build()?).await
        })
    }

    pub(super) fn error(&self, what: &str, e: CallError) -> Error {
        match e {
            CallError::Sdk(e) if is_rejection(&e) => {
                Error::storage_in(format!("Milvus at {} rejected {what}", self.config.uri), *e)
            }
            e => unavailable(&self.config, what, e),
        }
    }
}

/// Whether the server refused because the collection is not loaded. Told by the server's
/// own status (the error code Milvus 2.3+ gives it, or its reason in the wordings of Milvus
/// 2.x and Lite), never by text ragctx made.
pub(super) fn needs_load(e: &CallError) -> bool {
    /// `ErrCollectionNotLoaded` in Milvus' `merr` codes.
    const COLLECTION_NOT_LOADED: i32 = 101;
    let CallError::Sdk(e) = e else { return false };
    let milvus::v2::error::Error::Server(s) = e.as_ref() else { return false };
    let m = s.reason().to_ascii_lowercase();
    s.code() == COLLECTION_NOT_LOADED
        || m.contains("call load()")
        || m.contains("not loaded")
        || m.contains("state 'released'")
}

/// Whether the server answered and refused (bad request, schema) rather than failed to answer.
pub(super) fn is_rejection(e: &milvus::v2::error::Error) -> bool {
    use milvus::v2::error::Error as E;
    matches!(e, E::Server(_) | E::Conversion(_) | E::Validation(_))
}

pub(super) enum CallError {
    Sdk(Box<milvus::v2::error::Error>),
    Timeout(Duration),
    Lost,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Sdk(e) => write!(f, "{e}"),
            CallError::Timeout(d) => write!(f, "no answer within {:.1} s", d.as_secs_f64()),
            CallError::Lost => write!(f, "the call was dropped"),
        }
    }
}

/// Runs `fut` on `runtime` from any thread (a Tokio worker's included: the future runs on
/// the store's own runtime and the caller waits on a channel, never nesting runtimes).
pub(super) fn run<T, F>(
    runtime: &tokio::runtime::Runtime,
    deadline: Duration,
    fut: F,
) -> std::result::Result<T, CallError>
where
    T: Send + 'static,
    F: Future<Output = milvus::v2::error::Result<T>> + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let out = match tokio::time::timeout(deadline, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(CallError::Sdk(Box::new(e))),
            Err(_) => Err(CallError::Timeout(deadline)),
        };
        let _ = tx.send(out);
    });
    rx.recv().unwrap_or(Err(CallError::Lost))
}
