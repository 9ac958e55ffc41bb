//! The server's view of storage: namespace rules, implicit collection creation, the per-namespace
//! write lock that makes read-modify-write commands atomic, the namespace locks between
//! transactions and DDL (`crate::ns_locks`), and write concern. Commands never
//! call the engine for DDL or writes except through here. (`StorageError` becomes mongod's
//! error in `crate::error::storage_error`.)

use crate::error::{CommandResult, ErrorCode, err, storage_error};
use bson::{Bson, Document};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use storage::{Collection, Engine, PendingWriter, StorageError, Ticket};

// One limit per bound: the namespace lengths are the storage engine's.
use storage::limits::{DATABASE_NAME_SIZE_MAX, NAMESPACE_SIZE_MAX};

/// The write lock of one namespace.
type NamespaceLock = Arc<tokio::sync::Mutex<()>>;

pub struct Catalog {
    engine: Engine,
    /// One async mutex per namespace: held across the read and the write of an update or delete
    /// (never across the wait for durability, so concurrent writers share group commits).
    write_locks: Mutex<HashMap<(String, String), NamespaceLock>>,
    /// Periodic durability mode: acknowledge before the sync unless `j: true`.
    periodic: bool,
    /// `fsync {lock: true}`: while held, every write command waits.
    pub fsync: FsyncLock,
    /// What open transactions hold of namespaces and DDL waits for (`crate::ns_locks`).
    pub ns_locks: crate::ns_locks::NamespaceLocks,
}

/// The fsync lock (mongod's `fsyncLock`): write commands hold a shared guard of `gate` while they
/// run; `lock` takes it exclusively (waiting for the writes in flight) and keeps it until as many
/// `unlock`s as `lock`s came. Reads never touch it. tokio's RwLock is fair, so a waiting `lock`
/// is not starved by a stream of writers, and writers arriving after it queue behind it.
#[derive(Default)]
pub struct FsyncLock {
    gate: Arc<tokio::sync::RwLock<()>>,
    /// The lock count and, while it is above zero, the exclusive guard. A tokio mutex: `lock`
    /// holds it across the wait for writers in flight, so two `lock`s do not both wait.
    held: tokio::sync::Mutex<(i64, Option<tokio::sync::OwnedRwLockWriteGuard<()>>)>,
}

impl FsyncLock {
    /// What a write holds while it runs; waits while the server is fsync-locked.
    pub async fn writer(&self) -> tokio::sync::OwnedRwLockReadGuard<()> {
        self.gate.clone().read_owned().await
    }

    /// The writer's guard if the server is not locked (and no `lock` waits) right now.
    pub fn try_writer(&self) -> Option<tokio::sync::OwnedRwLockReadGuard<()>> {
        self.gate.clone().try_read_owned().ok()
    }

    /// Take the lock (once more); the new lock count.
    pub async fn lock(&self) -> i64 {
        let mut held = self.held.lock().await;
        if held.1.is_none() {
            held.1 = Some(self.gate.clone().write_owned().await);
        }
        held.0 += 1;
        held.0
    }

    /// Release one `lock`; the remaining count, or `None` when the server was not locked.
    pub async fn unlock(&self) -> Option<i64> {
        let mut held = self.held.lock().await;
        if held.0 == 0 {
            return None;
        }
        held.0 -= 1;
        if held.0 == 0 {
            held.1 = None;
        }
        Some(held.0)
    }

    /// Whether the server is locked now (for `currentOp`).
    pub fn is_locked(&self) -> bool {
        self.held.try_lock().map_or(true, |h| h.0 > 0)
    }
}

pub fn validate_db_name(db: &str) -> CommandResult<()> {
    let bad = db.is_empty()
        || db.len() > DATABASE_NAME_SIZE_MAX
        || db
            .chars()
            .any(|c| matches!(c, '/' | '\\' | '.' | ' ' | '"' | '$' | '\0'));
    if bad {
        return Err(err(
            ErrorCode::InvalidNamespace,
            format!("Invalid database name: '{db}'"),
        ));
    }
    Ok(())
}

pub fn validate_collection_name(db: &str, coll: &str) -> CommandResult<()> {
    validate_db_name(db)?;
    if coll.is_empty() || coll.contains('\0') || coll.starts_with('.') {
        return Err(err(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified '{db}.{coll}'"),
        ));
    }
    if coll.contains('$') {
        return Err(err(
            ErrorCode::InvalidNamespace,
            format!("Invalid collection name: {coll}"),
        ));
    }
    if db.len() + 1 + coll.len() > NAMESPACE_SIZE_MAX {
        return Err(err(
            ErrorCode::InvalidNamespace,
            format!(
                "Fully qualified namespace is too long. Namespace: {db}.{coll} Max: {NAMESPACE_SIZE_MAX}"
            ),
        ));
    }
    Ok(())
}

/// Writes to `system.*` collections are reserved, as in mongod.
pub fn check_user_writable(db: &str, coll: &str) -> CommandResult<()> {
    if coll.starts_with("system.") {
        return Err(err(
            ErrorCode::InvalidNamespace,
            format!("cannot write to '{db}.{coll}'"),
        ));
    }
    Ok(())
}

/// Where a database keeps its view definitions, one document per view (mongod's layout).
pub const VIEWS_COLLECTION: &str = "system.views";

impl Catalog {
    pub fn open(engine: Engine, periodic: bool) -> Catalog {
        Catalog {
            engine,
            write_locks: Mutex::new(HashMap::new()),
            periodic,
            fsync: FsyncLock::default(),
            ns_locks: Default::default(),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn collection(&self, db: &str, coll: &str) -> Option<Arc<Collection>> {
        self.engine.collection(db, coll)
    }

    /// The stored definition of view `db.name` (`{_id, viewOn, pipeline[, collation]}`) and
    /// its RecordId, or `None` when `name` is not a view. Costs one map look-up in a database
    /// without views.
    pub fn view_definition(
        &self,
        db: &str,
        name: &str,
    ) -> CommandResult<Option<(storage::RecordId, Document)>> {
        let Some(views) = self.engine.collection(db, VIEWS_COLLECTION) else {
            return Ok(None);
        };
        let id = format!("{db}.{name}");
        let storage_err = |e| storage_error(e, db, VIEWS_COLLECTION);
        let Some(rid) = views
            .find_by_id(bson::RawBsonRef::String(&id))
            .map_err(storage_err)?
        else {
            return Ok(None);
        };
        let Some(raw) = views.get(rid).map_err(storage_err)? else {
            return Ok(None);
        };
        Document::try_from(raw.as_ref())
            .map(|d| Some((rid, d)))
            .map_err(|e| {
                err(
                    ErrorCode::InternalError,
                    format!("{db}.{VIEWS_COLLECTION}: {e}"),
                )
            })
    }

    /// Writes (and index builds) on a view are refused: 166 CommandNotSupportedOnView.
    pub fn check_not_view(&self, db: &str, coll: &str) -> CommandResult<()> {
        if self.view_definition(db, coll)?.is_some() {
            return Err(err(
                ErrorCode::CommandNotSupportedOnView,
                format!("Namespace {db}.{coll} is a view, not a collection"),
            ));
        }
        Ok(())
    }

    /// The collection, created (with default options) when missing, as an insert or upsert does.
    pub fn get_or_create(&self, db: &str, coll: &str) -> CommandResult<Arc<Collection>> {
        if let Some(c) = self.engine.collection(db, coll) {
            return Ok(c);
        }
        validate_collection_name(db, coll)?;
        check_user_writable(db, coll)?;
        self.check_not_view(db, coll)?;
        match self.engine.create_collection(db, coll, Document::new()) {
            Ok(c) => {
                if let Some(t) = crate::txn::current() {
                    t.note_created(crate::txn::Created::Collection {
                        db: db.to_string(),
                        name: coll.to_string(),
                        uuid: c.uuid().bytes(),
                    });
                }
                Ok(c)
            }
            // Another connection created it between our look-up and our create.
            Err(StorageError::NamespaceExists(_)) => self
                .engine
                .collection(db, coll)
                .ok_or_else(|| err(ErrorCode::InternalError, "collection vanished")),
            Err(e) => Err(storage_error(e, db, coll)),
        }
    }

    /// The write lock of a namespace.
    pub async fn lock(&self, db: &str, coll: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let m = {
            let mut map = self.write_locks.lock().unwrap_or_else(|p| p.into_inner());
            map.entry((db.to_string(), coll.to_string()))
                .or_default()
                .clone()
        };
        m.lock_owned().await
    }

    /// Whether the reply to a write waits for it to be durable.
    fn waits(&self, wc: &WriteConcern) -> bool {
        !(wc.unacknowledged() || self.periodic) || wc.j
    }

    /// The end of a write job (on the storage pool): when the reply will wait for durability
    /// and no sync is in flight, sync here, one fdatasync on this thread, so that the async
    /// wait finds the write durable instead of waking the commit thread and being woken by it.
    pub fn sync_if_idle(&self, ticket: &Ticket, wc: &WriteConcern) {
        if self.waits(wc) {
            // A failed sync fails every waiter it concerns: `finish_write` reports it.
            let _ = ticket.sync_if_idle();
        }
    }

    /// A durable write on its way, when its reply will wait: the next sync waits for it too
    /// (see `storage::PendingWriter`). Hand it to `sync_if_idle_pending` at the job's end.
    pub fn pending_writer(&self, wc: &WriteConcern) -> Option<PendingWriter> {
        self.waits(wc).then(|| self.engine.pending_writer())
    }

    /// `sync_if_idle` for a write that announced itself with `pending_writer`.
    pub fn sync_if_idle_pending(&self, ticket: &Ticket, pending: Option<PendingWriter>) {
        if let Some(p) = pending {
            // A failed sync fails every waiter it concerns: `finish_write` reports it.
            let _ = p.sync_if_idle(ticket);
        }
    }

    /// Wait for durability as the write concern and the durability mode require.
    pub async fn finish_write(&self, ticket: &Ticket, wc: &WriteConcern) -> CommandResult<()> {
        if !self.waits(wc) {
            return Ok(());
        }
        if ticket.take_lead() && leads_in_place() {
            // A lone write done on the worker left its sync to this wait (`storage::Ticket::
            // take_lead`): lead it here, the worker's other tasks handed to another thread for
            // the fdatasync, rather than wake the commit thread and be woken by it. When a sync
            // is in flight by now, this only asks for the next. A failed sync fails the wait.
            let _ = tokio::task::block_in_place(|| ticket.sync_if_idle());
        }
        ticket
            .wait_durable()
            .await
            .map_err(|e| storage_error(e, "", ""))
    }
}

/// Whether this async context may block in place (a multi-threaded runtime's worker; a
/// single-threaded runtime, as in tests, cannot hand its tasks on).
fn leads_in_place() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// A parsed `writeConcern`.
#[derive(Debug, Clone, Default)]
pub struct WriteConcern {
    pub w: Option<Bson>,
    pub j: bool,
}

impl WriteConcern {
    pub fn parse(wc: Option<&Document>) -> CommandResult<WriteConcern> {
        let Some(wc) = wc else {
            return Ok(WriteConcern::default());
        };
        let mut out = WriteConcern::default();
        for (k, v) in wc {
            match k.as_str() {
                "w" => match v {
                    Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => {
                        let n = crate::query::types::as_i64(v).unwrap_or(-1);
                        if n < 0 {
                            return Err(err(
                                ErrorCode::FailedToParse,
                                "w has to be a non-negative number and not greater than 50; found: -1",
                            ));
                        }
                        if n > 1 {
                            return Err(err(
                                ErrorCode::BadValue,
                                "cannot use 'w' > 1 on a standalone (not replicated) server",
                            ));
                        }
                        out.w = Some(Bson::Int64(n));
                    }
                    Bson::String(_) => out.w = Some(v.clone()),
                    _ => {
                        return Err(err(
                            ErrorCode::FailedToParse,
                            "w has to be a number or a string",
                        ));
                    }
                },
                "j" | "fsync" => out.j |= crate::query::types::truthy(v),
                "wtimeout" | "wtimeoutMS" | "provenance" => {}
                other => {
                    return Err(err(
                        ErrorCode::FailedToParse,
                        format!("unrecognized write concern field: {other}"),
                    ));
                }
            }
        }
        Ok(out)
    }

    pub fn unacknowledged(&self) -> bool {
        matches!(self.w, Some(Bson::Int64(0)))
    }

    /// `writeConcernError` for a tag a standalone cannot satisfy (none for `majority`).
    pub fn error(&self) -> Option<Document> {
        match &self.w {
            Some(Bson::String(tag)) if tag != "majority" => Some(bson::doc! {
                "code": ErrorCode::UnknownReplWriteConcern.code(),
                "codeName": ErrorCode::UnknownReplWriteConcern.name(),
                "errmsg": format!("No write concern mode named '{tag}' found in replica set configuration"),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fsync_lock_blocks_writers_until_the_last_unlock() {
        let l = Arc::new(FsyncLock::default());
        assert_eq!(l.unlock().await, None, "unlock without lock");
        let w = l.writer().await;
        // A lock waits for the write in flight.
        let locker = {
            let l = l.clone();
            tokio::spawn(async move { l.lock().await })
        };
        tokio::task::yield_now().await;
        assert!(!locker.is_finished());
        drop(w);
        assert_eq!(locker.await.unwrap(), 1);
        assert_eq!(l.lock().await, 2);
        assert!(l.is_locked());
        let writer = {
            let l = l.clone();
            tokio::spawn(async move {
                drop(l.writer().await);
            })
        };
        assert_eq!(l.unlock().await, Some(1));
        tokio::task::yield_now().await;
        assert!(!writer.is_finished(), "still locked once");
        assert_eq!(l.unlock().await, Some(0));
        writer.await.unwrap();
        assert!(!l.is_locked());
    }

    #[test]
    fn names() {
        assert!(validate_db_name("test").is_ok());
        assert!(validate_db_name("a.b").is_err());
        assert!(validate_db_name("").is_err());
        assert!(validate_collection_name("t", "c.d").is_ok());
        assert!(validate_collection_name("t", "").is_err());
        assert!(validate_collection_name("t", "a$b").is_err());
        assert!(validate_collection_name("t", &"x".repeat(300)).is_err());
    }

    #[test]
    fn write_concern() {
        assert!(
            WriteConcern::parse(Some(&bson::doc! { "w": 0 }))
                .unwrap()
                .unacknowledged()
        );
        assert!(
            WriteConcern::parse(Some(&bson::doc! { "w": "majority", "j": true }))
                .unwrap()
                .j
        );
        assert!(WriteConcern::parse(Some(&bson::doc! { "w": 2 })).is_err());
        assert!(
            WriteConcern::parse(Some(&bson::doc! { "w": "dc1" }))
                .unwrap()
                .error()
                .is_some()
        );
        assert!(
            WriteConcern::parse(Some(&bson::doc! { "w": 1, "wtimeout": 100 }))
                .unwrap()
                .error()
                .is_none()
        );
    }
}
