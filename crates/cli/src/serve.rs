//! `ragctx serve`: binds the HTTP API and shuts down gracefully, finishing turns in flight.

use anyhow::{bail, Result};
use ragctx_app::app::App;
use ragctx_core::Error;
use ragctx_server::{router, AppState, Keys};
use std::net::SocketAddr;
use std::sync::Arc;

pub fn run(app: App, addr: &str) -> Result<()> {
    // An IP and port, or a name and port (`localhost:8080`): the name's first address.
    let addr: SocketAddr = match addr.parse() {
        Ok(a) => a,
        Err(_) => std::net::ToSocketAddrs::to_socket_addrs(addr).ok().and_then(|mut a| a.next()).ok_or_else(|| {
            Error::InvalidInput(format!("--addr {addr:?} is not HOST:PORT (an IP address or a name that resolves)"))
        })?,
    };
    // The bare list (each `write` in tenant `default`) and the scoped keys file, read now: a
    // keys file that cannot be read or parsed at start is an error.
    let keys = Keys::new(app.settings.api_keys(), app.settings.keys_file())?;
    if !keys.configured() && !addr.ip().is_loopback() {
        bail!(Error::InvalidInput(format!("refusing to bind {addr} without API keys: every session would be open to the network; set RAGCTX_API_KEYS or RAGCTX_KEYS_FILE, or bind 127.0.0.1")));
    }
    let state = Arc::new(AppState::new(
        // Every tenant's stores: each request is scoped to its caller's tenant.
        app.unscoped.clone(),
        app.settings.tenant().clone(),
        app.settings.turn().clone(),
        keys,
        app.settings.turn_timeout(),
        Some(app.embedding_cache()),
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        // A taken or forbidden address is the deployment's problem, not bad input: exit 4.
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| Error::Unavailable {
            backend: format!("address {addr}"),
            message: format!("cannot bind it: {e}"),
        })?;
        let auth = if !state.keys.configured() {
            "no API keys: loopback only".to_string()
        } else {
            format!("{} API keys", state.keys.count())
        };
        // SIGHUP: re-read the keys file now (it is also re-read within a second of a change).
        #[cfg(unix)]
        if let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            let state = state.clone();
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    state.keys.reload();
                }
            });
        }
        eprintln!("ragctx serve: http://{} ({auth}); page at /, metrics at /metrics", listener.local_addr()?);
        axum::serve(listener, router(state)).with_graceful_shutdown(shutdown()).await?;
        eprintln!("ragctx serve: stopped");
        Ok(())
    })
}

/// `ragctx mcp`: the MCP tools over stdin and stdout until the host closes them (stdout is
/// the protocol's: logs go to stderr).
pub fn mcp_stdio(app: App) -> Result<()> {
    let scope = app.agent_scope();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(ragctx_mcp::serve_stdio(ragctx_mcp::Tools::new(scope)))?;
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
