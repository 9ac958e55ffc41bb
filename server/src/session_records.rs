//! `config.system.sessions`: the logical session records as mongod keeps them for the whole
//! deployment, `{_id: {id, uid}, lastUse, user?: {name}}` (see `crate::sessions::registry`).
//! `$listSessions` reads them here; `$listLocalSessions` reads the registry in memory.
//!
//! A refresh (every `logicalSessionRefreshMillis`, default 5 minutes, and on the test command
//! `refreshLogicalSessionCacheNow`) writes the record of every session used since the last
//! one, with `lastUse` set to the refresh's time (mongod's `$currentDate`), and removes the
//! records of the sessions `endSessions` named since. The collection's TTL index
//! `lsidTTLIndex` (`{lastUse: 1}`, `expireAfterSeconds` = the session timeout) lets the TTL
//! monitor remove the records of sessions nobody used for that long. Records outlive a restart;
//! a use between the last refresh and a crash is lost, as in mongod.
//!
//! Refresh writes go straight to storage in batches of at most `REFRESH_BATCH_COUNT`, are
//! durable when the refresh ends, and never happen while the server is fsync-locked.

use crate::error::{CommandResult, storage_error};
use crate::sessions::registry::{RefreshWork, SessionId, UserDigest};
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;
use std::time::Duration;
use storage::{Collection, Direction, IndexSpec, StorageError, WriteOp};

pub const CONFIG_DB: &str = "config";
pub const SESSIONS_COLLECTION: &str = "system.sessions";
pub const TTL_INDEX_NAME: &str = "lsidTTLIndex";
/// Most records one refresh batch writes.
const REFRESH_BATCH_COUNT: usize = 1_000;

fn encode(d: &Document) -> storage::Result<RawDocumentBuf> {
    RawDocumentBuf::try_from(d).map_err(|e| StorageError::InvalidDocument(e.to_string()))
}

/// The TTL index mongod gives the collection.
fn ttl_index() -> IndexSpec {
    IndexSpec {
        name: TTL_INDEX_NAME.into(),
        key: doc! { "lastUse": 1 },
        expire_after_seconds: Some(crate::limits::SESSION_TIMEOUT_MINUTES as i64 * 60),
        ..IndexSpec::default()
    }
}

/// `config.system.sessions` with its TTL index, made when missing.
pub fn collection(engine: &storage::Engine) -> storage::Result<Arc<Collection>> {
    let c = match engine.collection(CONFIG_DB, SESSIONS_COLLECTION) {
        Some(c) => c,
        None => match engine.create_collection(CONFIG_DB, SESSIONS_COLLECTION, Document::new()) {
            Ok(c) => c,
            Err(StorageError::NamespaceExists(_)) => engine
                .collection(CONFIG_DB, SESSIONS_COLLECTION)
                .ok_or_else(|| StorageError::NamespaceNotFound(SESSIONS_COLLECTION.into()))?,
            Err(e) => return Err(e),
        },
    };
    if !c.indexes().iter().any(|i| i.spec.name == TTL_INDEX_NAME) {
        engine.create_index(CONFIG_DB, SESSIONS_COLLECTION, ttl_index(), &|_, _| {})?;
    }
    Ok(c)
}

/// Every record of `c`, in RecordId order.
fn scan_all(c: &Collection) -> storage::Result<Vec<(storage::RecordId, RawDocumentBuf)>> {
    let mut out: Vec<(storage::RecordId, RawDocumentBuf)> = Vec::new();
    loop {
        let after = out.last().map(|(rid, _)| *rid);
        let page = c.scan(Direction::Forward, after, usize::MAX)?;
        if page.is_empty() {
            return Ok(out);
        }
        out.extend(page);
    }
}

/// The session id of a record (`_id.id`).
fn record_id(d: &bson::RawDocument) -> Option<SessionId> {
    let key = d.get_document("_id").ok()?;
    key.get_binary("id").ok()?.bytes.try_into().ok()
}

fn record_uid(d: &bson::RawDocument) -> Option<&[u8]> {
    let key = d.get_document("_id").ok()?;
    Some(key.get_binary("uid").ok()?.bytes)
}

/// Writes one refresh: the ended sessions' records removed, then the used sessions' records
/// written with `lastUse` = `now_ms`. Returns (written, removed).
pub fn write(
    engine: &storage::Engine,
    work: &RefreshWork,
    now_ms: i64,
) -> storage::Result<(usize, usize)> {
    let c = collection(engine)?;
    let mut removed = 0;
    let mut last = None;
    if !work.ended.is_empty() {
        // The uid of an ended session may not be known here (it ended after a restart):
        // its records are found by `_id.id`.
        let gone: Vec<WriteOp> = scan_all(&c)?
            .into_iter()
            .filter(|(_, d)| record_id(d).is_some_and(|id| work.ended.contains(&id)))
            .map(|(rid, _)| WriteOp::Delete(rid))
            .collect();
        removed = gone.len();
        for batch in chunks(gone) {
            last = Some(c.write(batch)?);
        }
    }
    let mut ops = Vec::with_capacity(work.used.len());
    for (id, s) in &work.used {
        let record = s.record(id, now_ms);
        let probe = encode(&doc! { "_id": record.get("_id").cloned().unwrap_or(Bson::Null) })?;
        let existing = match probe.iter().next() {
            Some(Ok((_, v))) => c.find_by_id(v)?,
            _ => None,
        };
        let raw = encode(&record)?;
        ops.push(match existing {
            Some(rid) => WriteOp::Replace(rid, raw),
            None => WriteOp::Insert(raw.into()),
        });
    }
    let written = ops.len();
    for batch in chunks(ops) {
        last = Some(c.write(batch)?);
    }
    // Durable before the refresh is done: a record `$listSessions` showed survives a crash.
    if let Some(t) = last {
        t.wait_durable_blocking()?;
    }
    Ok((written, removed))
}

fn chunks(mut ops: Vec<WriteOp<'static>>) -> Vec<Vec<WriteOp<'static>>> {
    let mut out = Vec::new();
    while ops.len() > REFRESH_BATCH_COUNT {
        let rest = ops.split_off(REFRESH_BATCH_COUNT);
        out.push(std::mem::replace(&mut ops, rest));
    }
    if !ops.is_empty() {
        out.push(ops);
    }
    out
}

/// One refresh of the collection from the registry. On failure the sessions taken are marked
/// unwritten and the ended ids queued again, for the next refresh.
pub async fn refresh(state: &Arc<ServerState>) -> CommandResult<()> {
    // Refresh writes are writes: none while the server is fsync-locked.
    let _gate = state.catalog.fsync.writer().await;
    let registry = state.sessions.registry();
    let work = registry.take_refresh();
    let (used, ended) = (work.used.clone(), work.ended.clone());
    let now_ms = bson::DateTime::now().timestamp_millis();
    let done = crate::offload::run(state, "refreshLogicalSessionCacheNow", None, move |s| {
        write(s.catalog.engine(), &work, now_ms)
            .map_err(|e| storage_error(e, CONFIG_DB, SESSIONS_COLLECTION))
    })
    .await;
    match done {
        Ok((written, removed)) => {
            if written + removed > 0 {
                tracing::debug!(
                    written = written as u64,
                    removed = removed as u64,
                    "refreshed config.system.sessions"
                );
            }
            Ok(())
        }
        Err(e) => {
            registry.unrefresh(&used);
            registry.requeue_ended(&ended);
            Err(e)
        }
    }
}

/// The periodic refresh (`logicalSessionRefreshMillis`), until shutdown.
pub async fn refresher(state: Arc<ServerState>) {
    let mut shutdown = state.shutdown_requested();
    loop {
        let every_ms = state.params.get_i64("logicalSessionRefreshMillis").max(1) as u64;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(every_ms)) => {}
            _ = shutdown.changed() => return,
        }
        if let Err(e) = refresh(&state).await {
            tracing::warn!(error = %e.message, "could not refresh config.system.sessions");
        }
    }
}

/// `$listSessions`: the collection's records owned by one of `owners` (every one for None),
/// in the collection's order.
pub fn list(state: &ServerState, owners: Option<&[UserDigest]>) -> CommandResult<Vec<Document>> {
    let Some(c) = state
        .catalog
        .engine()
        .collection(CONFIG_DB, SESSIONS_COLLECTION)
    else {
        return Ok(Vec::new());
    };
    let rows = scan_all(&c).map_err(|e| storage_error(e, CONFIG_DB, SESSIONS_COLLECTION))?;
    Ok(rows
        .iter()
        .filter(|(_, d)| {
            owners.is_none_or(|o| record_uid(d).is_some_and(|u| o.iter().any(|x| x == u)))
        })
        .filter_map(|(_, d)| Document::try_from(d.as_ref()).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::registry::Registry;

    fn engine() -> (tempfile::TempDir, storage::Engine) {
        let dir = tempfile::tempdir().unwrap();
        let e = storage::Engine::open(dir.path(), storage::EngineOptions::default()).unwrap();
        (dir, e)
    }

    fn ids(c: &Collection) -> Vec<(SessionId, i64)> {
        scan_all(c)
            .unwrap()
            .iter()
            .map(|(_, d)| {
                let last = d.get_datetime("lastUse").unwrap().timestamp_millis();
                (record_id(d).unwrap(), last)
            })
            .collect()
    }

    #[test]
    fn a_refresh_upserts_used_sessions_and_removes_ended_ones() {
        let (_dir, e) = engine();
        let r = Registry::default();
        let user = || Some(("ann".to_string(), "admin".to_string()));
        r.session([1; 16], user, 10, &|_| {});
        r.session([2; 16], || None, 10, &|_| {});
        assert_eq!(write(&e, &r.take_refresh(), 100).unwrap(), (2, 0));
        let c = e.collection(CONFIG_DB, SESSIONS_COLLECTION).unwrap();
        assert_eq!(ids(&c), [([1; 16], 100), ([2; 16], 100)]);
        let ttl = c
            .indexes()
            .into_iter()
            .find(|i| i.spec.name == TTL_INDEX_NAME);
        assert_eq!(ttl.and_then(|i| i.spec.expire_after_seconds), Some(1800));
        r.session([1; 16], || None, 20, &|_| {});
        r.end(&[[2; 16]]);
        assert_eq!(write(&e, &r.take_refresh(), 200).unwrap(), (1, 1));
        assert_eq!(
            ids(&c),
            [([1; 16], 200)],
            "the record was replaced, not added"
        );
        let first = &scan_all(&c).unwrap()[0].1;
        let name = first.get_document("user").unwrap().get_str("name").unwrap();
        assert_eq!(name, "ann@admin");
    }
}
