//! The durable record of retryable writes: `config.transactions`, one document per logical
//! session, `{_id: {id: <lsid UUID>}, txnNum, lastWriteDate, reply?}`, as mongod keeps it (plus
//! the reply cairn gives a retry, which mongod rebuilds from its oplog instead).
//!
//! A retryable write's first data batch carries the session's record (`txnNum` set, no reply)
//! in the same atomic batch (`storage::write_across`), so no restart can keep the write and lose
//! the fact that it ran. When the command has finished, its reply is written into the record
//! before the reply goes out; it becomes durable with the log's next sync, which is not waited
//! for (a second sync per write would double the latency of every retryable write). After a restart the session table is loaded from the
//! collection: a retry gets the stored reply, and a retry of a write whose reply was never
//! recorded or not yet synced (the server died in between) gets IncompleteTransactionHistory
//! (217), never a second run. Records of sessions idle past `logicalSessionTimeoutMinutes` are removed by the
//! background sweep, as mongod's session reaper does.
//!
//! Invariant: a session's record is read and rewritten only while its session is checked out
//! (`sessions::run_once` holds it), so the two writes of one command never race another's.

use bson::{Bson, Document, RawDocumentBuf, doc};
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use storage::{Collection, Direction, StorageError, WriteOp};

pub const CONFIG_DB: &str = "config";
pub const TRANSACTIONS_COLLECTION: &str = "transactions";

/// One running retryable write: where its session's record goes and whether a batch carried it.
pub struct RetryRecord {
    coll: Arc<Collection>,
    key: Vec<u8>,
    txn_number: i64,
    wrote: AtomicBool,
    /// The reply is in the record (written by the command's own job, or after it).
    replied: AtomicBool,
    /// The record's RecordId once the first batch wrote it (0: not yet).
    rid: std::sync::atomic::AtomicU64,
}

/// Writes of `config.transactions` by retryable writes, one per write that committed a new
/// statement (`serverStatus.transactions.transactionsCollectionWriteCount`, as mongod counts).
pub static COLLECTION_WRITES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static CURRENT: RefCell<Option<Arc<RetryRecord>>> = const { RefCell::new(None) };
}

fn session_id(key: &[u8]) -> Document {
    let id = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: key.to_vec(),
    };
    doc! { "id": id }
}

fn encode(d: &Document) -> storage::Result<RawDocumentBuf> {
    RawDocumentBuf::try_from(d).map_err(|e| StorageError::InvalidDocument(e.to_string()))
}

/// `config.transactions`, created on first use.
pub fn collection(engine: &storage::Engine) -> storage::Result<Arc<Collection>> {
    if let Some(c) = engine.collection(CONFIG_DB, TRANSACTIONS_COLLECTION) {
        return Ok(c);
    }
    match engine.create_collection(CONFIG_DB, TRANSACTIONS_COLLECTION, Document::new()) {
        Ok(c) => Ok(c),
        Err(StorageError::NamespaceExists(_)) => engine
            .collection(CONFIG_DB, TRANSACTIONS_COLLECTION)
            .ok_or_else(|| StorageError::NamespaceNotFound(TRANSACTIONS_COLLECTION.into())),
        Err(e) => Err(e),
    }
}

impl RetryRecord {
    pub fn new(coll: Arc<Collection>, key: Vec<u8>, txn_number: i64) -> Arc<RetryRecord> {
        Arc::new(RetryRecord {
            coll,
            key,
            txn_number,
            wrote: AtomicBool::new(false),
            replied: AtomicBool::new(false),
            rid: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Makes this the thread's retryable write until the guard drops.
    pub fn install(self: &Arc<Self>) -> crate::scoped::Installed<Arc<RetryRecord>> {
        crate::scoped::install(&CURRENT, self.clone())
    }

    /// Whether a data batch of the command carried the record.
    pub fn wrote(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
    }

    /// Whether the command's reply is already in the record.
    pub fn replied(&self) -> bool {
        self.replied.load(Ordering::Acquire)
    }

    /// The op that sets the session's record to `txnNum` (with `reply`, once known).
    fn record_op(&self, reply: Option<Document>) -> storage::Result<WriteOp<'static>> {
        let id = session_id(&self.key);
        let mut d = doc! {
            "_id": id.clone(),
            "txnNum": self.txn_number,
            "lastWriteDate": bson::DateTime::now(),
        };
        if let Some(r) = reply {
            d.insert("reply", r);
        }
        let raw = encode(&d)?;
        let existing = match self.rid.load(Ordering::Acquire) {
            0 => {
                let key = encode(&doc! { "_id": id })?;
                match key.iter().next() {
                    Some(Ok((_, v))) => self.coll.find_by_id(v)?,
                    _ => None,
                }
            }
            rid => Some(rid),
        };
        Ok(match existing {
            Some(rid) => WriteOp::Replace(rid, raw),
            None => WriteOp::Insert(raw.into()),
        })
    }

    /// Writes the command's reply into the record. It is not waited for: it becomes durable
    /// with the log's next sync (a few milliseconds at most), so a retryable write costs one
    /// sync, not two. Should the server die in between, the record still says the write ran
    /// (that part went with the data), so a retry gets 217 rather than a second run.
    pub fn record_reply(&self, reply: Document) -> storage::Result<()> {
        let op = self.record_op(Some(reply))?;
        self.coll.write(vec![op])?;
        self.replied.store(true, Ordering::Release);
        Ok(())
    }
}

/// The op that records, in the commit batch of a transaction, that the session's transaction
/// `txn_number` committed (`state: "committed"`, as mongod's record says), so that a commit
/// retried after a restart gets its answer instead of NoSuchTransaction (whose
/// TransientTransactionError label would make the client run the transaction again).
pub fn committed_op(
    engine: &storage::Engine,
    key: &[u8],
    txn_number: i64,
) -> storage::Result<(Arc<Collection>, WriteOp<'static>)> {
    let coll = collection(engine)?;
    let id = session_id(key);
    let raw = encode(&doc! {
        "_id": id.clone(),
        "txnNum": txn_number,
        "lastWriteDate": bson::DateTime::now(),
        "state": "committed",
    })?;
    let probe = encode(&doc! { "_id": id })?;
    let existing = match probe.iter().next() {
        Some(Ok((_, v))) => coll.find_by_id(v)?,
        _ => None,
    };
    let op = match existing {
        Some(rid) => WriteOp::Replace(rid, raw),
        None => WriteOp::Insert(raw.into()),
    };
    Ok((coll, op))
}

/// A write outside a transaction: the thread's retryable write's first batch also sets its
/// session's record, atomically with the data.
pub fn write(coll: &Arc<Collection>, ops: Vec<WriteOp>) -> storage::Result<storage::Ticket> {
    let record = crate::scoped::current(&CURRENT);
    let Some(r) = record.filter(|r| !r.wrote() && !Arc::ptr_eq(&r.coll, coll)) else {
        return coll.write(ops);
    };
    let op = r.record_op(None)?;
    let mut t = storage::write_across(vec![(&**coll, ops), (&*r.coll, vec![op])])?;
    // The record's own RecordId comes last: callers see only their ops' ids.
    if let Some(rid) = t.record_ids.pop() {
        r.rid.store(rid, Ordering::Release);
    }
    r.wrote.store(true, Ordering::Release);
    COLLECTION_WRITES.fetch_add(1, Ordering::Relaxed);
    Ok(t)
}

/// Every document of `c`, page by page.
fn scan_all(c: &Collection) -> storage::Result<Vec<(storage::RecordId, RawDocumentBuf)>> {
    let mut out = Vec::new();
    loop {
        let after = out
            .last()
            .map(|(rid, _): &(storage::RecordId, RawDocumentBuf)| *rid);
        let page = c.scan(Direction::Forward, after, usize::MAX)?;
        if page.is_empty() {
            return Ok(out);
        }
        out.extend(page);
    }
}

/// One session's record as loaded: its key (the lsid UUID's bytes), `txnNum`, the kept reply,
/// and whether it records a committed transaction.
pub type Loaded = (Vec<u8>, i64, Option<Document>, bool);

/// Every record.
pub fn load(engine: &storage::Engine) -> storage::Result<Vec<Loaded>> {
    let Some(c) = engine.collection(CONFIG_DB, TRANSACTIONS_COLLECTION) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (_, raw) in scan_all(&c)? {
        let Ok(d) = Document::try_from(raw.as_ref()) else {
            continue;
        };
        let key = match d.get_document("_id").ok().and_then(|i| i.get("id")) {
            Some(Bson::Binary(b)) => b.bytes.clone(),
            _ => continue,
        };
        let Ok(n) = d.get_i64("txnNum") else { continue };
        let committed = d.get_str("state").ok() == Some("committed");
        out.push((key, n, d.get_document("reply").ok().cloned(), committed));
    }
    Ok(out)
}

/// Removes the records whose last write is older than `idle_ms`; how many.
pub fn expire(engine: &storage::Engine, idle_ms: i64) -> storage::Result<usize> {
    let Some(c) = engine.collection(CONFIG_DB, TRANSACTIONS_COLLECTION) else {
        return Ok(0);
    };
    let cutoff = bson::DateTime::now().timestamp_millis() - idle_ms;
    let old: Vec<WriteOp> = scan_all(&c)?
        .into_iter()
        .filter(|(_, raw)| {
            raw.get_datetime("lastWriteDate")
                .ok()
                .is_some_and(|t| t.timestamp_millis() < cutoff)
        })
        .map(|(rid, _)| WriteOp::Delete(rid))
        .collect();
    let n = old.len();
    if n > 0 {
        c.write(old)?;
    }
    Ok(n)
}
