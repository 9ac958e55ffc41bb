//! A multi-document transaction's data: the storage snapshot taken at its first statement and
//! the write set it buffers per collection, and the read/write calls that see both. A statement
//! of a transaction runs with its `Txn` installed on the thread (as `interrupt` installs the
//! operation), so the scan, fetch and write helpers below serve every read and write of the
//! command from the snapshot plus the transaction's own writes, and buffer its writes, without
//! every handler passing the transaction along. The session state machine that owns a `Txn`
//! is in `crate::sessions`; the commands in `commands::transactions`.
//!
//! Invariants: a transaction's reads never see a write committed after its snapshot nor
//! another transaction's pending write. A document it writes is locked for it in the
//! `Registry` (first writer wins: a second transaction's write gets WriteConflict at once), and
//! a write to a document changed after the snapshot conflicts at once too. A plain update or
//! delete or findAndModify (outside a transaction) that would touch a locked document waits for the transaction
//! to end, as mongod's does: its job stops before the statement writes anything, lets go of the
//! namespace lock and the pool thread, waits on `Registry::wait_released`, then runs the
//! statement again (`commands::crud_write`). Other plain writes (inserts, bulkWrite) are not
//! stopped; the transaction that holds the document then conflicts at
//! commit, where `storage::write_across_at` checks again under the collections' locks. Inserts get RecordIds from `INSERT_RID_BASE` up, above every stored one,
//! so a scan returns the snapshot's records, then the transaction's inserts.
//!
//! Limits and lifecycle: the write set is bounded in bytes (`Options::memory_limit_bytes`,
//! the server's `transactionMemoryLimitBytes`; past it a write fails with TransactionTooLarge
//! and nothing of it is buffered); the namespaces a statement touches are held shared in the
//! transaction's `ns_locks::SharedSet` until it ends. `release` ends the transaction's hold on
//! everything at once (document locks, namespace locks, the write set) when it commits or
//! aborts, whoever still has a reference to it; a statement still running on a released
//! transaction cannot buffer more.
//!
//! DDL inside a transaction: a collection or index a statement creates (an insert or upsert
//! into a missing collection, `create`, `createIndexes`) is created at once, visible (empty) to
//! others, and noted in the transaction; an abort queues the notes so that
//! `commands::transactions::undo_aborted_ddl` drops what is still as the transaction left it
//! (a collection nobody wrote into since, an index on it). mongod keeps them private until
//! commit; here others may see the empty collection and write into it, and then it stays.
//!
//! Unique indexes are checked at the statement against what is committed (`check_unique`; the
//! `_id` index by `check_new_id`), and again by the commit's batch, which also catches
//! duplicates among the transaction's own writes.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::CommandResult;
use crate::ns_locks::{NamespaceLocks, SharedSet, Target};

use bson::{RawDocumentBuf, doc};
use storage::{Collection, Direction, RecordId, Snapshot, StorageError, Ticket, WriteOp};

/// What a write set entry costs beside its document's bytes (map node, RecordId, flags).
const PENDING_OVERHEAD_BYTES: usize = 64;

/// RecordIds of a transaction's inserts start here (stored ones never get near it).
pub const INSERT_RID_BASE: RecordId = 1 << 62;
/// Where a forward scan resumes once it has read every stored record.
const STORED_END: RecordId = INSERT_RID_BASE - 1;

/// Engine-wide transaction bookkeeping: who holds which document, and the counters
/// `serverStatus.transactions` reports.
#[derive(Default)]
pub struct Registry {
    /// (collection UUID, RecordId) -> the id of the transaction that wrote it.
    locks: Mutex<HashMap<([u8; 16], RecordId), u64>>,
    next_id: AtomicU64,
    pub started: AtomicU64,
    pub committed: AtomicU64,
    pub aborted: AtomicU64,
    pub open: AtomicI64,
    /// Open transactions with a statement running now (serverStatus `currentActive`).
    pub active: AtomicI64,
    /// Statements failed with TransactionTooLargeForCache (serverStatus
    /// `metrics.operation.transactionTooLargeForCacheErrors`).
    pub too_large_errors: AtomicU64,
    /// What aborted transactions had created (collections, indexes) and is still to be undone
    /// (`commands::transactions::undo_aborted_ddl` drains it).
    undo: Mutex<Vec<Created>>,
    /// Woken whenever a transaction lets go of its document locks (a plain write waiting for
    /// one of them retries then).
    released: tokio::sync::Notify,
}

/// The connection a transaction's statement came from, as currentOp shows it.
#[derive(Clone, Debug, Default)]
pub struct StatementClient {
    pub connection_id: i64,
    pub client: String,
    pub client_metadata: Option<bson::Document>,
    /// The session's `uid`: SHA-256 of the user's "db.name" (of "" without authentication).
    pub uid: [u8; 32],
}

/// A document as the lock table names it: (collection UUID, RecordId).
pub type DocKey = ([u8; 16], RecordId);

/// How often a plain write waiting for a transaction looks at its interrupt token.
const WAIT_CHECK_MS: u64 = 10;

impl Registry {
    /// Takes what aborted transactions left to undo, oldest first.
    pub fn take_undo(&self) -> Vec<Created> {
        std::mem::take(&mut *lock(&self.undo))
    }

    /// The first of `rids` (documents of the collection `uuid`) an open transaction has
    /// written: a plain write that would touch it waits for that transaction to end
    /// (`wait_released`), as mongod's does.
    pub fn first_held(
        &self,
        uuid: [u8; 16],
        rids: impl IntoIterator<Item = RecordId>,
    ) -> Option<DocKey> {
        let locks = lock(&self.locks);
        if locks.is_empty() {
            return None;
        }
        rids.into_iter()
            .map(|r| (uuid, r))
            .find(|k| locks.contains_key(k))
    }

    /// Waits, holding nothing, until no open transaction holds `key` (it committed or
    /// aborted); the operation's killOp, disconnect or deadline (maxTimeMS) end the wait
    /// with their error.
    pub async fn wait_released(
        &self,
        key: DocKey,
        op: &crate::interrupt::Interrupt,
    ) -> CommandResult<()> {
        loop {
            let notified = self.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !lock(&self.locks).contains_key(&key) {
                return Ok(());
            }
            op.check()?;
            let mut wake = Instant::now() + Duration::from_millis(WAIT_CHECK_MS);
            if let Some(d) = op.deadline() {
                wake = wake.min(d);
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }

    /// Puts back what could not be undone yet (its namespace was busy).
    pub fn requeue_undo(&self, c: Created) {
        lock(&self.undo).push(c);
    }
}

/// A collection or an index a transaction created: it exists at once (others see it, empty),
/// and goes again if the transaction aborts (see `Txn::abort`).
#[derive(Clone, Debug, PartialEq)]
pub enum Created {
    Collection {
        db: String,
        name: String,
        uuid: [u8; 16],
    },
    Index {
        db: String,
        coll: String,
        uuid: [u8; 16],
        index: String,
    },
}

/// How a transaction was opened (currentOp shows these) and its bound.
#[derive(Clone)]
pub struct Options {
    pub memory_limit_bytes: usize,
    /// The `readConcern` of the statement that started it (`{}` when none).
    pub read_concern: bson::Document,
    pub read_timestamp: bson::Timestamp,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory_limit_bytes: usize::MAX,
            read_concern: bson::Document::new(),
            read_timestamp: bson::Timestamp {
                time: 0,
                increment: 0,
            },
        }
    }
}

/// Time spent running statements, for currentOp's `timeActiveMicros`.
#[derive(Default)]
struct Activity {
    running: u32,
    since: Option<Instant>,
    total: Duration,
}

/// A document's version in the write set (None: deleted).
struct Pending {
    doc: Option<RawDocumentBuf>,
    /// Made by update operators (the oplog records a diff) rather than a replacement.
    by_operators: bool,
}

/// One collection's part of the write set.
struct NsWrites {
    coll: Arc<Collection>,
    pending: BTreeMap<RecordId, Pending>,
    next_insert: RecordId,
}

/// An open transaction.
pub struct Txn {
    id: u64,
    registry: Arc<Registry>,
    snapshot: Snapshot,
    writes: Mutex<Vec<NsWrites>>,
    locked: Mutex<Vec<([u8; 16], RecordId)>>,
    /// Namespaces held shared until the transaction ends (`crate::ns_locks`).
    ns_held: Mutex<SharedSet>,
    /// Bytes of the write set (documents plus `PENDING_OVERHEAD_BYTES` each).
    pinned_bytes: AtomicUsize,
    /// Set once by `release`: committed or aborted, nothing held any more.
    ended: AtomicBool,
    activity: Mutex<Activity>,
    /// Collections and indexes its statements created, in order.
    created: Mutex<Vec<Created>>,
    /// Who ran its last statement, for currentOp's idle-session entry.
    last_client: Mutex<Option<StatementClient>>,
    pub options: Options,
    pub started: Instant,
    pub started_wall: bson::DateTime,
    /// A snapshot read outside a transaction (`crate::snapshot_read`): the cluster time it
    /// reads at. Such a `Txn` only reads; its write set stays empty.
    read_at: Option<bson::Timestamp>,
}

/// A statement running on a transaction; dropping it ends the statement's active time.
pub struct Active(Arc<Txn>);

impl Drop for Active {
    fn drop(&mut self) {
        let mut a = lock(&self.0.activity);
        a.running = a.running.saturating_sub(1);
        if a.running == 0 {
            if let Some(since) = a.since.take() {
                a.total += since.elapsed();
            }
            self.0.registry.active.fetch_sub(1, Relaxed);
        }
    }
}

fn entry_bytes(p: &Pending) -> usize {
    p.doc.as_ref().map_or(0, |d| d.as_bytes().len()) + PENDING_OVERHEAD_BYTES
}

fn conflict(what: &str) -> StorageError {
    StorageError::WriteConflict(format!(
        "{what}; this write conflicted with another and should be retried"
    ))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Txn {
    pub fn begin(registry: &Arc<Registry>, snapshot: Snapshot) -> Arc<Txn> {
        Self::begin_with(registry, snapshot, Options::default())
    }

    pub fn begin_with(registry: &Arc<Registry>, snapshot: Snapshot, options: Options) -> Arc<Txn> {
        registry.started.fetch_add(1, Relaxed);
        registry.open.fetch_add(1, Relaxed);
        let id = registry.next_id.fetch_add(1, Relaxed);
        Self::new(id, registry.clone(), snapshot, options, None)
    }

    fn new(
        id: u64,
        registry: Arc<Registry>,
        snapshot: Snapshot,
        options: Options,
        read_at: Option<bson::Timestamp>,
    ) -> Arc<Txn> {
        Arc::new(Txn {
            id,
            registry,
            snapshot,
            writes: Mutex::new(Vec::new()),
            locked: Mutex::new(Vec::new()),
            ns_held: Mutex::new(SharedSet::default()),
            pinned_bytes: AtomicUsize::new(0),
            ended: AtomicBool::new(false),
            activity: Mutex::new(Activity::default()),
            created: Mutex::new(Vec::new()),
            last_client: Mutex::new(None),
            options,
            started: Instant::now(),
            started_wall: bson::DateTime::now(),
            read_at,
        })
    }

    /// Marks a statement as running on the transaction until the guard drops.
    pub fn activate(self: &Arc<Self>) -> Active {
        let mut a = lock(&self.activity);
        if a.running == 0 {
            a.since = Some(Instant::now());
            self.registry.active.fetch_add(1, Relaxed);
        }
        a.running += 1;
        Active(self.clone())
    }

    /// Whether a statement runs on it now, and the time statements ran so far.
    pub fn active_time(&self) -> (bool, Duration) {
        let a = lock(&self.activity);
        let now = a.since.map_or(Duration::ZERO, |s| s.elapsed());
        (a.running > 0, a.total + now)
    }

    /// Bytes its write set pins.
    pub fn pinned_bytes(&self) -> usize {
        self.pinned_bytes.load(Relaxed)
    }

    /// Whether it has been committed or aborted (`release`d).
    pub fn ended(&self) -> bool {
        self.ended.load(Relaxed)
    }

    /// Holds `targets` shared until the transaction ends (LockTimeout past `timeout`; the
    /// caller then aborts the transaction). A released transaction takes nothing.
    pub async fn lock_namespaces(
        &self,
        locks: &NamespaceLocks,
        targets: &[Target],
        timeout: Duration,
    ) -> CommandResult<()> {
        if targets.iter().all(|t| lock(&self.ns_held).holds(t)) {
            return Ok(());
        }
        // Waited for outside the set's mutex: `release` must never block on a statement.
        let mut set = std::mem::take(&mut *lock(&self.ns_held));
        let result = locks.share(&mut set, targets, timeout).await;
        if !self.ended() {
            lock(&self.ns_held).absorb(set);
        }
        result
    }

    /// Namespaces held (for tests and currentOp).
    pub fn namespaces_held(&self) -> usize {
        lock(&self.ns_held).len()
    }

    /// Ends the transaction's hold on everything: document locks, namespace locks (a DDL
    /// waiting for them proceeds now) and the write set. Idempotent; `Drop` calls it too.
    pub fn release(&self) {
        if self.ended.swap(true, Relaxed) {
            return;
        }
        drop(std::mem::take(&mut *lock(&self.ns_held)));
        drop(std::mem::take(&mut *lock(&self.writes)));
        self.pinned_bytes.store(0, Relaxed);
        let keys = std::mem::take(&mut *lock(&self.locked));
        let any = !keys.is_empty();
        {
            let mut locks = lock(&self.registry.locks);
            for k in keys {
                if locks.get(&k) == Some(&self.id) {
                    locks.remove(&k);
                }
            }
        }
        if any {
            self.registry.released.notify_waiters();
        }
        self.registry.open.fetch_sub(1, Relaxed);
    }

    /// Notes who runs the current statement.
    pub fn note_client(&self, c: StatementClient) {
        *lock(&self.last_client) = Some(c);
    }

    /// Who ran the last statement.
    pub fn last_client(&self) -> Option<StatementClient> {
        lock(&self.last_client).clone()
    }

    /// Notes a collection or index a statement of this transaction created.
    pub fn note_created(&self, c: Created) {
        if self.read_at.is_none() {
            lock(&self.created).push(c);
        }
    }

    /// Whether this transaction created the collection with this UUID.
    pub fn created_collection(&self, uuid: [u8; 16]) -> bool {
        lock(&self.created)
            .iter()
            .any(|c| matches!(c, Created::Collection { uuid: u, .. } if *u == uuid))
    }

    /// Whether its write set holds a write to `coll`.
    pub fn wrote_to(&self, coll: &Arc<Collection>) -> bool {
        lock(&self.writes)
            .iter()
            .any(|w| Arc::ptr_eq(&w.coll, coll) && !w.pending.is_empty())
    }

    /// Ends the transaction as aborted: what it created is queued for undoing (the registry's
    /// `take_undo`), then everything it holds goes (`release`).
    pub fn abort(&self) {
        if self.ended.load(Relaxed) {
            return;
        }
        let created = std::mem::take(&mut *lock(&self.created));
        if !created.is_empty() {
            lock(&self.registry.undo).extend(created);
        }
        self.release();
    }

    /// A read-only view for a snapshot read outside a transaction at cluster time `at`: the
    /// scan and fetch helpers serve it from `snapshot` as they serve a transaction. It counts
    /// in a registry of its own, so `serverStatus.transactions` does not see it.
    pub fn snapshot_read(snapshot: Snapshot, at: bson::Timestamp) -> Arc<Txn> {
        let registry = Arc::new(Registry::default());
        Self::new(0, registry, snapshot, Options::default(), Some(at))
    }

    /// The cluster time of a snapshot read outside a transaction (None: a transaction).
    pub fn snapshot_read_at(&self) -> Option<bson::Timestamp> {
        self.read_at
    }

    /// Makes this the thread's transaction until the guard drops.
    pub fn install(self: &Arc<Self>) -> crate::scoped::Installed<Arc<Txn>> {
        crate::scoped::install(&CURRENT, self.clone())
    }

    /// The registry's counters (serverStatus.transactions).
    pub fn counters(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Documents in the write set.
    pub fn pending_count(&self) -> usize {
        lock(&self.writes).iter().map(|w| w.pending.len()).sum()
    }

    fn ns<'a>(writes: &'a mut Vec<NsWrites>, coll: &Arc<Collection>) -> &'a mut NsWrites {
        let i = match writes.iter().position(|w| Arc::ptr_eq(&w.coll, coll)) {
            Some(i) => i,
            None => {
                writes.push(NsWrites {
                    coll: coll.clone(),
                    pending: BTreeMap::new(),
                    next_insert: INSERT_RID_BASE,
                });
                writes.len() - 1
            }
        };
        &mut writes[i]
    }

    /// The document as this transaction sees it.
    pub fn get(
        &self,
        coll: &Arc<Collection>,
        rid: RecordId,
    ) -> storage::Result<Option<RawDocumentBuf>> {
        if let Some(w) = lock(&self.writes)
            .iter()
            .find(|w| Arc::ptr_eq(&w.coll, coll))
            && let Some(p) = w.pending.get(&rid)
        {
            return Ok(p.doc.clone());
        }
        if rid >= INSERT_RID_BASE {
            return Ok(None);
        }
        coll.get_at(&self.snapshot, rid)
    }

    /// RecordIds whose version for this transaction an index may not show: those changed by
    /// commits after its snapshot and those it wrote itself.
    pub fn changed_rids(&self, coll: &Arc<Collection>) -> storage::Result<Vec<RecordId>> {
        let mut rids = coll.changed_since(&self.snapshot)?;
        if let Some(w) = lock(&self.writes)
            .iter()
            .find(|w| Arc::ptr_eq(&w.coll, coll))
        {
            rids.extend(w.pending.keys());
        }
        rids.sort_unstable();
        rids.dedup();
        Ok(rids)
    }

    /// One step of a scan in RecordId order as the transaction sees the collection; the second
    /// value is where to resume (None: done).
    pub fn scan(
        &self,
        coll: &Arc<Collection>,
        direction: Direction,
        after: Option<RecordId>,
        limit: usize,
    ) -> storage::Result<storage::ScanStep> {
        let stored_phase = match direction {
            Direction::Forward => after.is_none_or(|a| a < STORED_END),
            Direction::Backward => after.is_some_and(|a| a <= INSERT_RID_BASE),
        };
        if stored_phase {
            let (docs, next) = coll.scan_at(&self.snapshot, direction, after, limit)?;
            let writes = lock(&self.writes);
            let ns = writes.iter().find(|w| Arc::ptr_eq(&w.coll, coll));
            let docs = docs
                .into_iter()
                .filter_map(|(rid, d)| match ns.and_then(|w| w.pending.get(&rid)) {
                    Some(p) => p.doc.clone().map(|d| (rid, d)),
                    None => Some((rid, d)),
                })
                .collect();
            let next = match (next, direction) {
                (None, Direction::Forward) => Some(STORED_END),
                (next, _) => next,
            };
            return Ok((docs, next));
        }
        let writes = lock(&self.writes);
        let inserts: Vec<(RecordId, RawDocumentBuf)> =
            match writes.iter().find(|w| Arc::ptr_eq(&w.coll, coll)) {
                None => Vec::new(),
                Some(w) => {
                    let range = w.pending.range(INSERT_RID_BASE..);
                    let live = |(rid, p): (&RecordId, &Pending)| p.doc.clone().map(|d| (*rid, d));
                    match direction {
                        Direction::Forward => range
                            .filter(|(rid, _)| after.is_none_or(|a| **rid > a))
                            .filter_map(live)
                            .take(limit + 1)
                            .collect(),
                        Direction::Backward => range
                            .rev()
                            .filter(|(rid, _)| after.is_none_or(|a| **rid < a))
                            .filter_map(live)
                            .take(limit + 1)
                            .collect(),
                    }
                }
            };
        let mut inserts = inserts;
        let more = inserts.len() > limit;
        inserts.truncate(limit);
        let next = match (more, direction) {
            (true, _) => inserts.last().map(|(rid, _)| *rid),
            (false, Direction::Forward) => None,
            (false, Direction::Backward) => Some(INSERT_RID_BASE),
        };
        Ok((inserts, next))
    }

    /// Secondary unique indexes at the statement, as mongod checks them: a new version whose
    /// key a committed document holds (one this transaction does not itself rewrite) is a
    /// duplicate key when that document is in the snapshot, a write conflict when it was
    /// committed after. Duplicates among the transaction's own writes are caught at commit.
    fn check_unique(
        &self,
        w: &NsWrites,
        staged: &[(RecordId, Option<Pending>)],
    ) -> storage::Result<()> {
        if !w
            .coll
            .indexes()
            .iter()
            .any(|i| i.spec.unique && i.spec.name != storage::ID_INDEX_NAME)
        {
            return Ok(());
        }
        let mine =
            |rid: RecordId| w.pending.contains_key(&rid) || staged.iter().any(|(r, _)| *r == rid);
        for (rid, p) in staged {
            let Some(doc) = p.as_ref().and_then(|p| p.doc.as_ref()) else {
                continue;
            };
            if let Some((holder, dup)) = w.coll.unique_conflict(doc, *rid, &mine)? {
                if w.coll.changed_after(&self.snapshot, holder)? {
                    return Err(conflict(
                        "a unique key this write needs was committed after the transaction began",
                    ));
                }
                return Err(dup);
            }
        }
        Ok(())
    }

    /// Claims a stored document for this transaction's write: WriteConflict when another open
    /// transaction holds it or a commit after the snapshot changed it.
    fn claim(&self, coll: &Collection, rid: RecordId) -> storage::Result<()> {
        let key = (coll.uuid().bytes(), rid);
        {
            let mut locks = lock(&self.registry.locks);
            match locks.get(&key) {
                Some(holder) if *holder != self.id => {
                    return Err(conflict("another transaction is writing this document"));
                }
                Some(_) => {}
                None => {
                    locks.insert(key, self.id);
                    lock(&self.locked).push(key);
                }
            }
        }
        if coll.changed_after(&self.snapshot, rid)? {
            return Err(conflict(
                "the document was changed after the transaction started",
            ));
        }
        Ok(())
    }

    /// DuplicateKey when the transaction already sees a document with this `_id`; WriteConflict
    /// when one was committed after its snapshot.
    fn check_new_id(
        &self,
        w: &NsWrites,
        staged: &[(RecordId, Option<Pending>)],
        d: &bson::RawDocument,
    ) -> storage::Result<()> {
        let Ok(Some(id)) = d.get("_id") else {
            return Ok(());
        };
        let dup = || {
            let key_value = bson::Bson::try_from(bson::RawBson::from(id))
                .map(|v| doc! {"_id": v})
                .unwrap_or_default();
            StorageError::DuplicateKey {
                index: storage::ID_INDEX_NAME.into(),
                key_pattern: Box::new(doc! {"_id": 1}),
                key_value: Box::new(key_value),
                collation: None,
            }
        };
        // Ids are the same when the `_id` index keys them alike (a collated `_id` index keys
        // case variants alike at strength 2).
        let key = w.coll.collated_id_key(id)?;
        let same_id = |doc: &RawDocumentBuf| match (doc.get("_id").ok().flatten(), &key) {
            (Some(other), _) if other == id => true,
            (Some(other), Some(key)) => {
                w.coll.collated_id_key(other).ok().flatten().as_ref() == Some(key)
            }
            _ => false,
        };
        let staged_docs = staged.iter().filter_map(|(_, p)| p.as_ref());
        if w.pending
            .values()
            .chain(staged_docs)
            .filter_map(|p| p.doc.as_ref())
            .any(same_id)
        {
            return Err(dup());
        }
        let Some(rid) = w.coll.find_by_id(id)? else {
            return Ok(());
        };
        match w.pending.get(&rid) {
            Some(p) if p.doc.is_none() => Ok(()),
            Some(_) => Err(dup()),
            None if w.coll.get_at(&self.snapshot, rid)?.is_some() => Err(dup()),
            None => Err(conflict(
                "a document with this _id was inserted after the transaction started",
            )),
        }
    }

    /// Buffers `ops` in the write set (all or none of them).
    pub fn buffer(&self, coll: &Arc<Collection>, ops: Vec<WriteOp>) -> storage::Result<()> {
        if self.read_at.is_some() {
            // The commands that write refuse readConcern snapshot before they run.
            return Err(StorageError::InvalidNamespace(
                "a snapshot read cannot write".into(),
            ));
        }
        let mut writes = lock(&self.writes);
        if self.ended() {
            return Err(conflict("the transaction ended while this statement ran"));
        }
        let w = Self::ns(&mut writes, coll);
        let mut staged: Vec<(RecordId, Option<Pending>)> = Vec::with_capacity(ops.len());
        let mut next_insert = w.next_insert;
        for op in ops {
            let (rid, pending) = match op {
                WriteOp::Insert(d) => {
                    self.check_new_id(w, &staged, &d)?;
                    next_insert += 1;
                    // Kept until the commit: owned (a borrowed document is copied here).
                    let p = Pending {
                        doc: Some(d.into_owned()),
                        by_operators: false,
                    };
                    (next_insert - 1, Some(p))
                }
                WriteOp::Replace(rid, d) | WriteOp::Update(rid, d) if rid >= INSERT_RID_BASE => {
                    let p = Pending {
                        doc: Some(d),
                        by_operators: false,
                    };
                    (rid, Some(p))
                }
                // An insert of this transaction deleted again leaves nothing to commit.
                WriteOp::Delete(rid) if rid >= INSERT_RID_BASE => (rid, None),
                op => {
                    let (rid, doc, by_operators) = match op {
                        WriteOp::Replace(rid, d) => (rid, Some(d), false),
                        WriteOp::Update(rid, d) => (rid, Some(d), true),
                        WriteOp::Delete(rid) => (rid, None, false),
                        WriteOp::Insert(_) => unreachable!("inserts handled above"),
                    };
                    self.claim(&w.coll, rid)?;
                    let by_operators =
                        by_operators && w.pending.get(&rid).is_none_or(|p| p.by_operators);
                    (rid, Some(Pending { doc, by_operators }))
                }
            };
            staged.push((rid, pending));
        }
        self.check_memory(w, &staged)?;
        self.check_unique(w, &staged)?;
        w.next_insert = next_insert;
        let mut pinned = self.pinned_bytes.load(Relaxed);
        for (rid, p) in staged {
            let old = match p {
                Some(p) => {
                    pinned += entry_bytes(&p);
                    w.pending.insert(rid, p)
                }
                None => w.pending.remove(&rid),
            };
            pinned = pinned.saturating_sub(old.as_ref().map_or(0, entry_bytes));
        }
        self.pinned_bytes.store(pinned, Relaxed);
        Ok(())
    }

    /// TransactionTooLarge when buffering `staged` would take the write set past its bound
    /// (counted before anything is applied, so a refused write leaves no trace).
    fn check_memory(
        &self,
        w: &NsWrites,
        staged: &[(RecordId, Option<Pending>)],
    ) -> storage::Result<()> {
        let pinned = self.pinned_bytes.load(Relaxed);
        let added: usize = staged
            .iter()
            .filter_map(|(_, p)| p.as_ref())
            .map(entry_bytes)
            .sum();
        let freed: usize = staged
            .iter()
            .filter_map(|(rid, _)| w.pending.get(rid))
            .map(entry_bytes)
            .sum();
        let after = (pinned + added).saturating_sub(freed);
        let limit = self.options.memory_limit_bytes;
        if after > limit && after > pinned {
            return Err(StorageError::TransactionTooLarge(format!(
                "Transaction is too large and will not fit in the storage engine cache: its \
                 writes would hold {after} bytes, more than transactionMemoryLimitBytes ({limit})"
            )));
        }
        Ok(())
    }

    /// Commits the write set as one atomic storage batch, checked against the snapshot, `note`
    /// (its session and number) in the batch's stamp. None when the transaction wrote nothing.
    /// `record`: the session record's op (`retry_record::committed_op`), written in the same
    /// batch when the transaction writes anything.
    pub fn commit(
        &self,
        note: bson::Document,
        record: Option<(Arc<Collection>, WriteOp<'static>)>,
    ) -> storage::Result<Option<Ticket>> {
        let writes = std::mem::take(&mut *lock(&self.writes));
        let parts: Vec<(Arc<Collection>, Vec<WriteOp>)> = writes
            .into_iter()
            .map(|w| {
                let ops = w
                    .pending
                    .into_iter()
                    .filter_map(|(rid, p)| match (rid >= INSERT_RID_BASE, p.doc) {
                        (true, Some(d)) => Some(WriteOp::Insert(d.into())),
                        (true, None) => None,
                        (false, None) => Some(WriteOp::Delete(rid)),
                        (false, Some(d)) if p.by_operators => Some(WriteOp::Update(rid, d)),
                        (false, Some(d)) => Some(WriteOp::Replace(rid, d)),
                    })
                    .collect::<Vec<_>>();
                (w.coll, ops)
            })
            .filter(|(_, ops)| !ops.is_empty())
            .collect();
        if parts.is_empty() {
            return Ok(None);
        }
        let mut parts = parts;
        if let Some((coll, op)) = record {
            parts.push((coll, vec![op]));
        }
        let borrowed = parts.iter().map(|(c, ops)| (&**c, ops.clone())).collect();
        storage::write_across_at(borrowed, Some(&self.snapshot), Some(note)).map(Some)
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        self.release();
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Txn>>> = const { RefCell::new(None) };
}

/// The thread's transaction, if its command runs in one.
pub fn current() -> Option<Arc<Txn>> {
    crate::scoped::current(&CURRENT)
}

/// Whether the thread's command runs in a transaction (its plans must not trust indexes).
pub fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// A document by RecordId, as the thread's transaction sees it (or as stored now).
pub fn get(coll: &Arc<Collection>, rid: RecordId) -> storage::Result<Option<RawDocumentBuf>> {
    match current() {
        Some(t) => t.get(coll, rid),
        None => coll.get(rid),
    }
}

/// A write: buffered in the thread's transaction (no ticket), or written now.
pub fn write(coll: &Arc<Collection>, ops: Vec<WriteOp>) -> storage::Result<Option<Ticket>> {
    match current() {
        Some(t) => t.buffer(coll, ops).map(|()| None),
        None => crate::retry_record::write(coll, ops).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).expect("encodes")
    }

    fn setup() -> (
        tempfile::TempDir,
        storage::Engine,
        Arc<Collection>,
        Vec<RecordId>,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine =
            storage::Engine::open(dir.path(), storage::EngineOptions::default()).expect("engine");
        let coll = engine.create_collection("t", "c", doc! {}).expect("create");
        let ops = (0..4)
            .map(|i| WriteOp::Insert(raw(doc! {"_id": i}).into()))
            .collect();
        let rids = coll.write(ops).expect("seed").record_ids;
        (dir, engine, coll, rids)
    }

    /// Every `_id` the transaction sees, scanned in steps of `step`.
    fn seen(t: &Txn, coll: &Arc<Collection>, direction: Direction, step: usize) -> Vec<i32> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let (docs, next) = t.scan(coll, direction, after, step).expect("scan");
            out.extend(docs.iter().map(|(_, d)| d.get_i32("_id").expect("_id")));
            match next {
                Some(n) => after = Some(n),
                None => return out,
            }
        }
    }

    #[test]
    fn scans_merge_the_snapshot_and_the_write_set_in_both_directions() {
        let (_dir, engine, coll, rids) = setup();
        let registry = Arc::new(Registry::default());
        let t = Txn::begin(&registry, engine.snapshot().expect("snapshot"));
        coll.write(vec![WriteOp::Insert(raw(doc! {"_id": 99}).into())])
            .expect("a later commit");
        t.buffer(
            &coll,
            vec![
                WriteOp::Delete(rids[1]),
                WriteOp::Replace(rids[2], raw(doc! {"_id": 20})),
                WriteOp::Insert(raw(doc! {"_id": 5}).into()),
                WriteOp::Insert(raw(doc! {"_id": 6}).into()),
            ],
        )
        .expect("buffer");
        for step in [1, 2, 10] {
            assert_eq!(
                seen(&t, &coll, Direction::Forward, step),
                vec![0, 20, 3, 5, 6]
            );
            assert_eq!(
                seen(&t, &coll, Direction::Backward, step),
                vec![6, 5, 3, 20, 0]
            );
        }
        assert_eq!(t.get(&coll, rids[1]).expect("get"), None, "its own delete");
        let e = t
            .buffer(&coll, vec![WriteOp::Insert(raw(doc! {"_id": 3}).into())])
            .expect_err("a duplicate _id");
        assert!(matches!(e, StorageError::DuplicateKey { .. }), "{e}");
        let e = t
            .buffer(&coll, vec![WriteOp::Insert(raw(doc! {"_id": 99}).into())])
            .expect_err("an _id committed after the snapshot");
        assert!(matches!(e, StorageError::WriteConflict(_)), "{e}");
    }

    #[test]
    fn a_document_is_written_by_one_open_transaction_at_a_time() {
        let (_dir, engine, coll, rids) = setup();
        let registry = Arc::new(Registry::default());
        let first = Txn::begin(&registry, engine.snapshot().expect("snapshot"));
        let second = Txn::begin(&registry, engine.snapshot().expect("snapshot"));
        first
            .buffer(&coll, vec![WriteOp::Delete(rids[0])])
            .expect("first writer");
        let e = second
            .buffer(&coll, vec![WriteOp::Delete(rids[0])])
            .expect_err("second writer");
        assert!(matches!(e, StorageError::WriteConflict(_)), "{e}");
        assert_eq!(registry.open.load(Relaxed), 2);
        drop(first);
        second
            .buffer(&coll, vec![WriteOp::Delete(rids[0])])
            .expect("free once the first is gone");
        let ticket = second
            .commit(doc! {}, None)
            .expect("commit")
            .expect("a ticket");
        assert_eq!(ticket.record_ids, vec![rids[0]]);
        assert!(!coll.contains(rids[0]).expect("contains"));
    }

    #[test]
    fn the_write_set_is_bounded_and_a_refused_write_leaves_nothing() {
        let (_dir, engine, coll, rids) = setup();
        let registry = Arc::new(Registry::default());
        let options = Options {
            memory_limit_bytes: 400,
            ..Options::default()
        };
        let t = Txn::begin_with(&registry, engine.snapshot().expect("snapshot"), options);
        let body = "x".repeat(100);
        t.buffer(
            &coll,
            vec![WriteOp::Insert(raw(doc! {"_id": 10, "s": &body}).into())],
        )
        .expect("under the bound");
        let one = t.pinned_bytes();
        assert!(one > 100 + PENDING_OVERHEAD_BYTES, "{one}");
        let e = t
            .buffer(
                &coll,
                vec![
                    WriteOp::Insert(raw(doc! {"_id": 11, "s": &body}).into()),
                    WriteOp::Insert(raw(doc! {"_id": 12, "s": &body}).into()),
                ],
            )
            .expect_err("past the bound");
        assert!(matches!(e, StorageError::TransactionTooLarge(_)), "{e}");
        assert_eq!(
            (t.pending_count(), t.pinned_bytes()),
            (1, one),
            "nothing of it"
        );
        // A delete costs its entry only; deleting its own insert frees that.
        t.buffer(&coll, vec![WriteOp::Delete(rids[0])])
            .expect("a delete");
        assert_eq!(t.pinned_bytes(), one + PENDING_OVERHEAD_BYTES);
        t.buffer(&coll, vec![WriteOp::Delete(INSERT_RID_BASE)])
            .expect("its own insert deleted");
        assert_eq!(t.pinned_bytes(), PENDING_OVERHEAD_BYTES);
        drop(t);
        assert_eq!(registry.open.load(Relaxed), 0);
    }

    #[tokio::test]
    async fn release_frees_namespace_and_document_locks_at_once() {
        let (_dir, engine, coll, rids) = setup();
        let registry = Arc::new(Registry::default());
        let locks = NamespaceLocks::default();
        let t = Txn::begin(&registry, engine.snapshot().expect("snapshot"));
        let ns = [Target::collection("t", "c")];
        t.lock_namespaces(&locks, &ns, Duration::from_millis(5))
            .await
            .expect("free");
        assert_eq!(t.namespaces_held(), 2, "the collection and its database");
        t.buffer(&coll, vec![WriteOp::Delete(rids[0])])
            .expect("claim");
        let active = t.activate();
        assert_eq!(registry.active.load(Relaxed), 1);
        let held = t.clone();
        t.release();
        assert_eq!((held.namespaces_held(), held.pending_count()), (0, 0));
        assert_eq!(registry.open.load(Relaxed), 0);
        let op = crate::interrupt::Interrupt::default();
        op.set_deadline(Some(Instant::now() + Duration::from_secs(5)));
        drop(
            locks
                .exclusive(&ns, &op)
                .await
                .expect("a DDL gets it at once"),
        );
        let e = held
            .buffer(&coll, vec![WriteOp::Delete(rids[1])])
            .expect_err("nothing more after the end");
        assert!(matches!(e, StorageError::WriteConflict(_)), "{e}");
        held.lock_namespaces(&locks, &ns, Duration::from_millis(5))
            .await
            .expect("taken and let go");
        assert_eq!(held.namespaces_held(), 0);
        let other = Txn::begin(&registry, engine.snapshot().expect("snapshot"));
        other
            .buffer(&coll, vec![WriteOp::Delete(rids[0])])
            .expect("the document lock went with the release");
        drop(active);
        assert_eq!(registry.active.load(Relaxed), 0);
        let (running, _) = held.active_time();
        assert!(!running);
    }
}
