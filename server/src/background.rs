//! Background tasks of a running server: the cursor reaper (idle cursors closed after
//! `cursorTimeoutMillis`), the allocator trimmer (`alloc_trim`), the session refresh
//! (`config.system.sessions`, `session_records`) and, once TTL indexes exist, the TTL monitor. Each task wakes on its own interval and stops at shutdown.

use crate::state::ServerState;
use std::sync::Arc;
use std::time::Duration;

/// How often idle cursors are looked for (mongod's `clientCursorMonitorFrequencySecs`, 4 s).
const CURSOR_REAP_INTERVAL_MS: u64 = 4_000;

pub fn spawn(state: Arc<ServerState>) {
    tokio::spawn(cursor_reaper(state.clone()));
    tokio::spawn(transaction_reaper(state.clone()));
    crate::alloc_trim::spawn(state.clone());
    tokio::spawn(crate::session_records::refresher(state.clone()));
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
        crate::commands::transactions::undo_aborted_ddl(&state).await;
        expire_retry_records(&state).await;
        if reaped > 0 {
            tracing::info!(
                count = reaped as u64,
                "aborted transactions past their lifetime"
            );
        }
    }
}

/// How often `config.transactions` is swept for sessions idle past their timeout.
const RETRY_RECORD_SWEEP_INTERVAL_MS: u64 = 60_000;

/// Removes the retryable-write records of sessions idle past `logicalSessionTimeoutMinutes`
/// (at most once per `RETRY_RECORD_SWEEP_INTERVAL_MS`).
async fn expire_retry_records(state: &Arc<ServerState>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now = bson::DateTime::now().timestamp_millis().max(0) as u64;
    let last = LAST_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) < RETRY_RECORD_SWEEP_INTERVAL_MS
        || LAST_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let idle_ms = crate::limits::SESSION_TIMEOUT_MINUTES as i64 * 60_000;
    let done = crate::offload::run(state, "sessionSweep", None, move |s| {
        crate::retry_record::expire(s.catalog.engine(), idle_ms)
            .map_err(|e| crate::error::storage_error(e, "config", "transactions"))
    })
    .await;
    match done {
        Ok(n) if n > 0 => tracing::info!(count = n as u64, "expired retryable-write records"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e.message, "could not expire retryable-write records"),
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
