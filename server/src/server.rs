//! Start-up and shutdown: build the shared state, open the data directory, bind, serve until a
//! signal or the `shutdown` command, then stop accepting, let in-flight requests finish, flush
//! storage and return.

use crate::config::Config;
use crate::logging::LogRing;
use crate::state::ServerState;
use std::sync::Arc;

pub async fn run(config: Config, argv: Vec<String>, log_ring: Arc<LogRing>) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.dbpath)
        .map_err(|e| anyhow::anyhow!("cannot create --dbpath {}: {e}", config.dbpath.display()))?;
    let state = Arc::new(ServerState::new(config, argv, log_ring).map_err(|e| anyhow::anyhow!(e))?);
    let listeners = crate::listener::bind(&state).await?;
    let addrs: Vec<String> = listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .map(|a| a.to_string())
        .collect();
    let port = listeners
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(0, |a| a.port());
    tracing::info!(
        version = crate::VERSION,
        pid = std::process::id(),
        dbpath = %state.config.dbpath.display(),
        "cairn starting"
    );
    spawn_signal_handler(state.clone());
    crate::background::spawn(state.clone());
    tracing::info!(port = port as u64, addresses = %addrs.join(","), "Waiting for connections");
    crate::listener::serve(state.clone(), listeners).await;
    tracing::info!("shutting down: connections closed, flushing storage");
    crate::offload::run(&state, "shutdown", None, |st| {
        st.catalog
            .engine()
            .close()
            .map_err(|e| crate::error::storage_error(e, "", ""))
    })
    .await
    .map_err(|e| anyhow::anyhow!("cannot flush storage: {}", e.message))?;
    tracing::info!("cairn stopped cleanly");
    Ok(())
}

/// Installs the SIGTERM/SIGINT handlers before returning (a signal that arrives once the server
/// says it is waiting for connections must shut it down cleanly, not kill it), then waits for
/// one on a task.
fn spawn_signal_handler(state: Arc<ServerState>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot install signal handlers");
            return;
        };
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!(signal = "SIGTERM", "received signal"),
                _ = int.recv() => tracing::info!(signal = "SIGINT", "received signal"),
            }
            state.request_shutdown();
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        state.request_shutdown();
    });
}
