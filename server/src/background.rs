//! Background tasks of a running server: the cursor reaper (idle cursors closed after
//! `cursorTimeoutMillis`) and, once TTL indexes exist, the TTL monitor. Each task wakes on its
//! own interval and stops at shutdown.

use crate::state::ServerState;
use std::sync::Arc;
use std::time::Duration;

/// How often idle cursors are looked for (mongod's `clientCursorMonitorFrequencySecs`, 4 s).
const CURSOR_REAP_INTERVAL_MS: u64 = 4_000;

pub fn spawn(state: Arc<ServerState>) {
    tokio::spawn(cursor_reaper(state.clone()));
    tokio::spawn(transaction_reaper(state.clone()));
    tokio::spawn(crate::ttl::monitor(state));
}

/// How often transactions past `transactionLifetimeLimitSeconds` are looked for.
const TRANSACTION_REAP_INTERVAL_MS: u64 = 1_000;

async fn transaction_reaper(state: Arc<ServerState>) {
    let mut shutdown = state.shutdown_requested();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(TRANSACTION_REAP_INTERVAL_MS)) => {}
            _ = shutdown.changed() => return,
        }
        let limit_s = state
            .params
            .get_i64("transactionLifetimeLimitSeconds")
            .max(1) as u64;
        let reaped = state.sessions.reap(Duration::from_secs(limit_s));
        if reaped > 0 {
            tracing::info!(
                count = reaped as u64,
                "aborted transactions past their lifetime"
            );
        }
    }
}

async fn cursor_reaper(state: Arc<ServerState>) {
    let mut shutdown = state.shutdown_requested();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(CURSOR_REAP_INTERVAL_MS)) => {}
            _ = shutdown.changed() => return,
        }
        let timeout_ms = state.params.get_i64("cursorTimeoutMillis").max(0) as u64;
        let reaped = state.cursors.reap_idle(Duration::from_millis(timeout_ms))
            + state.streams.reap_idle(Duration::from_millis(timeout_ms));
        if reaped > 0 {
            tracing::info!(count = reaped as u64, "closed idle cursors");
        }
    }
}
