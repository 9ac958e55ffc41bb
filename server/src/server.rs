//! Start-up and shutdown: build the shared state, open the data directory, bind, serve until a
//! signal or the `shutdown` command, then stop accepting, let in-flight requests finish, flush
//! storage and return.

use crate::config::Config;
use crate::logging::Logging;
use crate::state::ServerState;
use std::sync::Arc;

pub async fn run(config: Config, argv: Vec<String>, logging: Logging) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.dbpath)
        .map_err(|e| anyhow::anyhow!("cannot create --dbpath {}: {e}", config.dbpath.display()))?;
    let mut state = ServerState::new(config, argv, logging.ring).map_err(|e| anyhow::anyhow!(e))?;
    state.log_output = Some(logging.output);
    crate::commands::snapshot_read::apply_window(&state);
    let state = Arc::new(state);
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
    crate::offload::run(&state, "replSetStart", None, move |st| {
        crate::commands::replset::start(st, port)
    })
    .await
    .map_err(|e| anyhow::anyhow!("cannot start the replica set member: {}", e.message))?;
    spawn_signal_handler(state.clone());
    spawn_rotate_handler(state.clone());
    if let Some(p) = state.config.metrics_port {
        crate::metrics::start(&state, p).await?;
    }
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

/// SIGUSR1 rotates the log, as for mongod.
fn spawn_rotate_handler(state: Arc<ServerState>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
            tracing::warn!("cannot install the SIGUSR1 handler");
            return;
        };
        tokio::spawn(async move {
            while usr1.recv().await.is_some() {
                if let Err(e) = crate::commands::admin::rotate_log(&state) {
                    tracing::error!(error = %e, "log rotation failed");
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = state;
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
