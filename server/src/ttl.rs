//! The TTL monitor: every `ttlMonitorSleepSecs` it deletes documents whose TTL-indexed date is
//! older than the index's `expireAfterSeconds`. It walks each TTL index from its lowest date key
//! up to the cutoff (never a collection scan): the walk stays inside the Date bracket of the key
//! order, so non-date values are never expired, and for an array the earliest date decides (its
//! entry is the first one the walk meets). Deletes go in bounded batches under the namespace's
//! write lock, so requests are never blocked for long; scans and deletes run on the storage pool.
//! A clustered collection's `expireAfterSeconds` walks its `_id` index the same way.

use crate::offload;
use crate::state::ServerState;
use bson::{Bson, DateTime};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use storage::{Direction, IndexSpec, WriteOp};

/// Most documents one batch deletes before the lock is released.
pub const TTL_DELETE_BATCH_COUNT: usize = 500;

pub async fn monitor(state: Arc<ServerState>) {
    let mut shutdown = state.shutdown_requested();
    loop {
        let sleep_secs = state.params.get_i64("ttlMonitorSleepSecs").max(1) as u64;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(sleep_secs)) => {}
            _ = shutdown.changed() => return,
        }
        if !state.params.get_bool("ttlMonitorEnabled") {
            continue;
        }
        let deleted = pass(&state, DateTime::now()).await;
        state.ttl.passes.fetch_add(1, Relaxed);
        if deleted > 0 {
            tracing::info!(deleted = deleted, "TTL monitor deleted expired documents");
        }
    }
}

/// The [lower, upper] key bounds of dates up to `cutoff` for a one-field TTL index.
fn date_bounds(spec: &IndexSpec, cutoff: DateTime) -> (Vec<u8>, Vec<u8>) {
    let lo = storage::encode_index_key(
        &spec.key,
        &[Bson::DateTime(DateTime::from_millis(i64::MIN))],
    );
    let hi = storage::encode_index_key(&spec.key, &[Bson::DateTime(cutoff)]);
    // A descending index inverts the byte order.
    if lo <= hi { (lo, hi) } else { (hi, lo) }
}

/// Every one-field TTL index: (database, collection, spec). A clustered collection's TTL is
/// its `_id` index with the collection's `expireAfterSeconds`: documents go by their `_id` date.
fn ttl_indexes(state: &ServerState) -> Vec<(String, String, IndexSpec)> {
    let engine = state.catalog.engine();
    let mut out = Vec::new();
    for db in engine.databases() {
        for info in engine.collections(&db) {
            if let Some(secs) = crate::commands::clustered::expire_after_seconds(&info.options) {
                let spec = IndexSpec {
                    expire_after_seconds: Some(secs),
                    ..IndexSpec::id_index()
                };
                out.push((db.clone(), info.name.clone(), spec));
            }
            for spec in info.indexes {
                if spec.expire_after_seconds.is_some() && spec.key.len() == 1 {
                    out.push((db.clone(), info.name.clone(), spec));
                }
            }
        }
    }
    out
}

/// One pass over every TTL index; returns how many documents it deleted. The catalog walk and
/// every batch run on the storage pool; only the namespace lock is awaited here.
pub async fn pass(state: &Arc<ServerState>, now: DateTime) -> u64 {
    // TTL deletes are writes: none while the server is fsync-locked.
    let _gate = state.catalog.fsync.writer().await;
    let indexes = match offload::run(state, JOB, None, |st| Ok(ttl_indexes(st))).await {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(error = %e.message, "TTL pass failed");
            return 0;
        }
    };
    let mut deleted = 0;
    for (db, name, spec) in indexes {
        let expire_ms = spec.expire_after_seconds.unwrap_or(0).saturating_mul(1000);
        let cutoff = DateTime::from_millis(now.timestamp_millis().saturating_sub(expire_ms));
        deleted += expire_index(state, Arc::new((db, name, spec)), cutoff).await;
    }
    // Time-series collections expire whole buckets (their measurements are not indexed), each
    // under the collection's write lock, which inserts into its buckets hold too.
    let expiring = offload::run(state, JOB, None, |st| {
        Ok(crate::commands::timeseries::expiring(st))
    })
    .await
    .unwrap_or_default();
    for (db, name) in expiring {
        let guard = state.catalog.lock(&db, &name).await;
        let buckets = offload::run(state, JOB, None, move |st| {
            let _guard = guard;
            Ok(crate::commands::timeseries::expire(st, &db, &name, now))
        })
        .await;
        deleted += buckets.unwrap_or(0);
    }
    state.ttl.deleted_documents.fetch_add(deleted, Relaxed);
    deleted
}

/// The TTL monitor's job name (the `blockStorageCall` fail point can match it).
const JOB: &str = "ttlMonitor";

/// Deletes the documents of one TTL index up to `cutoff`, a bounded batch per lock hold.
async fn expire_index(
    state: &Arc<ServerState>,
    target: Arc<(String, String, IndexSpec)>,
    cutoff: DateTime,
) -> u64 {
    let bounds = Arc::new(date_bounds(&target.2, cutoff));
    let mut deleted = 0;
    loop {
        let guard = state.catalog.lock(&target.0, &target.1).await;
        let (t, b) = (target.clone(), bounds.clone());
        let batch = offload::run(state, JOB, None, move |st| {
            let _guard = guard;
            Ok(delete_batch(st, &t.0, &t.1, &t.2, &b))
        })
        .await;
        match batch {
            Ok(Some((n, more))) => {
                deleted += n;
                if !more {
                    return deleted;
                }
            }
            Ok(None) => return deleted,
            Err(e) => {
                tracing::warn!(error = %e.message, "TTL batch failed");
                return deleted;
            }
        }
    }
}

/// One batch of at most `TTL_DELETE_BATCH_COUNT` expired documents: (deleted, maybe more), or
/// `None` when there is nothing (more) to do.
fn delete_batch(
    state: &ServerState,
    db: &str,
    name: &str,
    spec: &IndexSpec,
    (lo, hi): &(Vec<u8>, Vec<u8>),
) -> Option<(u64, bool)> {
    let coll = state.catalog.collection(db, name)?;
    let entries = match coll.index_scan(
        &spec.name,
        Bound::Included(lo),
        Bound::Included(hi),
        Direction::Forward,
        None,
        TTL_DELETE_BATCH_COUNT,
    ) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(ns = %format!("{db}.{name}"), index = %spec.name, error = %e, "TTL scan failed");
            return None;
        }
    };
    let mut rids: Vec<u64> = entries.iter().map(|(_, rid)| *rid).collect();
    rids.sort_unstable();
    rids.dedup();
    if rids.is_empty() {
        return None;
    }
    let n = rids.len() as u64;
    match coll.write(rids.into_iter().map(WriteOp::Delete).collect()) {
        Ok(_ticket) => Some((n, entries.len() >= TTL_DELETE_BATCH_COUNT)),
        Err(e) => {
            tracing::warn!(ns = %format!("{db}.{name}"), error = %e, "TTL delete failed");
            None
        }
    }
}
