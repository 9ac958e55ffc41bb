//! A collection: RecordId -> location of the document's PUT record, its indexes, and the write
//! path. A write takes the collection's write lock, checks and applies every index change (undoing
//! all of them if one fails), appends the whole batch to the log, updates the record map, and
//! returns a `Ticket`; it never waits for a sync while holding the lock, so readers (who take the
//! read lock) never wait for an fsync and always see a whole batch or none of it.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bson::{Document, RawBsonRef, RawDocumentBuf};

use crate::commit::{Commit, Ticket};
use crate::error::{Result, StorageError};
use crate::index::{FilterCompiler, ID_INDEX_NAME, Index, IndexSpec};
use crate::limits::{DOCUMENT_SIZE_MAX, SCAN_BATCH_COUNT_MAX, WRITE_BATCH_OPS_MAX};
use crate::log::{Loc, Log, OutRecord};
use crate::record::{self, Kind, RECORD_DOCUMENT_OFFSET};

/// A document's id inside its collection: increasing, never reused.
pub type RecordId = u64;

/// One operation of an atomic write.
#[derive(Clone, Debug)]
pub enum WriteOp {
    Insert(RawDocumentBuf),
    Replace(RecordId, RawDocumentBuf),
    Delete(RecordId),
}

/// Scan order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Backward,
}

/// What an index looks like now.
#[derive(Clone, Debug)]
pub struct IndexInfo {
    pub spec: IndexSpec,
    pub multikey: bool,
    pub entries: u64,
    pub size_bytes: u64,
}

/// The engine-wide pieces a collection needs.
pub(crate) struct Shared {
    pub log: Arc<Log>,
    pub commit: Arc<Commit>,
    pub filter_compiler: Option<FilterCompiler>,
}

pub(crate) struct CollState {
    pub dropped: bool,
    pub records: BTreeMap<RecordId, Loc>,
    pub next_record_id: RecordId,
    pub indexes: Vec<Index>,
    pub data_bytes: u64,
}

/// Catalog facts that DDL can change.
#[derive(Clone, Debug)]
pub(crate) struct CollMeta {
    pub db: String,
    pub name: String,
    pub options: Document,
}

pub struct Collection {
    pub(crate) id: u64,
    pub(crate) uuid: bson::Uuid,
    pub(crate) meta: RwLock<CollMeta>,
    pub(crate) state: RwLock<CollState>,
    pub(crate) shared: Arc<Shared>,
}

enum Undo {
    Inserted(usize, Vec<u8>, RecordId),
    Removed(usize, Vec<u8>, RecordId),
}

fn lock_err() -> StorageError {
    StorageError::Poisoned("collection lock poisoned".into())
}

pub(crate) fn doc_bytes(loc: &Loc) -> u64 {
    u64::from(loc.size).saturating_sub(RECORD_DOCUMENT_OFFSET as u64)
}

impl Collection {
    pub(crate) fn read(&self) -> Result<RwLockReadGuard<'_, CollState>> {
        self.state.read().map_err(|_| lock_err())
    }
    pub(crate) fn write_state(&self) -> Result<RwLockWriteGuard<'_, CollState>> {
        self.state.write().map_err(|_| lock_err())
    }

    /// The collection's UUID (stable across renames).
    pub fn uuid(&self) -> bson::Uuid {
        self.uuid
    }

    /// (database, collection name) right now.
    pub fn namespace(&self) -> (String, String) {
        self.meta
            .read()
            .map(|m| (m.db.clone(), m.name.clone()))
            .unwrap_or_default()
    }

    /// The options document given at creation.
    pub fn options(&self) -> Document {
        self.meta
            .read()
            .map(|m| m.options.clone())
            .unwrap_or_default()
    }

    /// Number of documents, exact, O(1).
    pub fn count(&self) -> u64 {
        self.read().map(|s| s.records.len() as u64).unwrap_or(0)
    }

    /// Total BSON bytes of the documents.
    pub fn data_size_bytes(&self) -> u64 {
        self.read().map(|s| s.data_bytes).unwrap_or(0)
    }

    /// The document with this RecordId.
    pub fn get(&self, rid: RecordId) -> Result<Option<RawDocumentBuf>> {
        let st = self.read()?;
        match st.records.get(&rid) {
            Some(loc) => Ok(Some(self.shared.log.read_document(*loc)?)),
            None => Ok(None),
        }
    }

    /// Up to `limit` documents in RecordId order, strictly after `after` when given.
    pub fn scan(
        &self,
        direction: Direction,
        after: Option<RecordId>,
        limit: usize,
    ) -> Result<Vec<(RecordId, RawDocumentBuf)>> {
        let st = self.read()?;
        if st.dropped {
            return Ok(Vec::new());
        }
        let limit = limit.min(SCAN_BATCH_COUNT_MAX);
        let locs: Vec<(RecordId, Loc)> = match (direction, after) {
            (Direction::Forward, a) => {
                let lo = a.map_or(Bound::Unbounded, Bound::Excluded);
                st.records
                    .range((lo, Bound::Unbounded))
                    .take(limit)
                    .map(|(r, l)| (*r, *l))
                    .collect()
            }
            (Direction::Backward, a) => {
                let hi = a.map_or(Bound::Unbounded, Bound::Excluded);
                st.records
                    .range((Bound::Unbounded, hi))
                    .rev()
                    .take(limit)
                    .map(|(r, l)| (*r, *l))
                    .collect()
            }
        };
        // Read in file order so neighbouring records share one pread, whatever the direction.
        let mut only_locs: Vec<Loc> = locs.iter().map(|(_, l)| *l).collect();
        let backward = direction == Direction::Backward;
        if backward {
            only_locs.reverse();
        }
        let mut docs = self.shared.log.read_documents(&only_locs)?;
        if backward {
            docs.reverse();
        }
        Ok(locs.into_iter().map(|(rid, _)| rid).zip(docs).collect())
    }

    /// The RecordId of the document whose `_id` equals `id`.
    pub fn find_by_id(&self, id: RawBsonRef<'_>) -> Result<Option<RecordId>> {
        let st = self.read()?;
        let Some(ix) = st.indexes.iter().find(|i| i.spec.name == ID_INDEX_NAME) else {
            return Ok(None);
        };
        let key = crate::keycode::encode_key(&[id], &[false]);
        let hit = ix.scan(Bound::Included(&key), Bound::Included(&key), true, None, 1);
        Ok(hit.first().map(|(_, rid)| *rid))
    }

    /// Index entries `(encoded key, RecordId)` with keys inside the bounds, strictly after
    /// `after` in scan order, at most `limit`. Bounds are encoded with `encode_index_key`.
    pub fn index_scan(
        &self,
        index_name: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        after: Option<(&[u8], RecordId)>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, RecordId)>> {
        let st = self.read()?;
        let ix = st
            .indexes
            .iter()
            .find(|i| i.spec.name == index_name)
            .ok_or_else(|| StorageError::IndexNotFound(index_name.to_string()))?;
        let limit = limit.min(SCAN_BATCH_COUNT_MAX);
        Ok(ix.scan(lower, upper, direction == Direction::Forward, after, limit))
    }

    /// Specs and state of every index.
    pub fn indexes(&self) -> Vec<IndexInfo> {
        let Ok(st) = self.read() else {
            return Vec::new();
        };
        st.indexes
            .iter()
            .map(|i| IndexInfo {
                spec: i.spec.clone(),
                multikey: i.multikey,
                entries: i.len(),
                size_bytes: i.size_bytes(),
            })
            .collect()
    }

    /// Applies `ops` as one atomic batch: every index check passes and everything is applied
    /// and logged, or nothing is. The ticket holds one RecordId per op.
    pub fn write(&self, ops: Vec<WriteOp>) -> Result<Ticket> {
        if ops.len() > WRITE_BATCH_OPS_MAX {
            return Err(StorageError::LimitExceeded(format!(
                "{} ops in one write, at most {WRITE_BATCH_OPS_MAX}",
                ops.len()
            )));
        }
        for op in &ops {
            if let WriteOp::Insert(d) | WriteOp::Replace(_, d) = op
                && d.as_bytes().len() > DOCUMENT_SIZE_MAX
            {
                return Err(StorageError::LimitExceeded("document too large".into()));
            }
        }
        let mut st = self.write_state()?;
        if st.dropped {
            return Err(StorageError::NamespaceNotFound(self.namespace().0));
        }
        let mut undo = Vec::new();
        let planned = self.plan(&mut st, &ops, &mut undo);
        let planned = match planned {
            Ok(p) => p,
            Err(e) => {
                rollback(&mut st, undo);
                return Err(e);
            }
        };
        let (records, rids): (Vec<OutRecord>, Vec<RecordId>) = planned.into_iter().unzip();
        let (seq, locs) = match self.shared.log.append(&records, true) {
            Ok(x) => x,
            Err(e) => {
                rollback(&mut st, undo);
                return Err(e);
            }
        };
        for ((rec, rid), loc) in records.iter().zip(&rids).zip(locs) {
            let old = if rec.kind == Kind::Put {
                st.data_bytes += doc_bytes(&loc);
                st.records.insert(*rid, loc)
            } else {
                st.records.remove(rid)
            };
            if let Some(old) = old {
                st.data_bytes = st.data_bytes.saturating_sub(doc_bytes(&old));
                self.shared.log.release(old);
            }
            st.next_record_id = st.next_record_id.max(rid + 1);
        }
        drop(st);
        self.shared.commit.note_written(seq);
        Ok(Ticket {
            sequence: seq,
            record_ids: rids,
            commit: self.shared.commit.clone(),
        })
    }

    /// Index changes and log records for `ops`; index changes are recorded in `undo`.
    fn plan(
        &self,
        st: &mut CollState,
        ops: &[WriteOp],
        undo: &mut Vec<Undo>,
    ) -> Result<Vec<(OutRecord, RecordId)>> {
        let mut next_rid = st.next_record_id;
        // Documents changed earlier in this batch (None = deleted), so later ops see them.
        let mut in_batch: HashMap<RecordId, Option<RawDocumentBuf>> = HashMap::new();
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            let (rid, new) = match op {
                WriteOp::Insert(d) => {
                    next_rid += 1;
                    (next_rid - 1, Some(d))
                }
                WriteOp::Replace(rid, d) => (*rid, Some(d)),
                WriteOp::Delete(rid) => (*rid, None),
            };
            let old = match in_batch.get(&rid) {
                Some(d) => d.clone(),
                None => match st.records.get(&rid) {
                    Some(loc) => Some(self.shared.log.read_document(*loc)?),
                    None => None,
                },
            };
            if old.is_none() && !matches!(op, WriteOp::Insert(_)) {
                return Err(StorageError::RecordNotFound(rid));
            }
            update_indexes(st, rid, old.as_deref(), new.map(|d| &**d), undo)?;
            let rec = match new {
                Some(d) => OutRecord {
                    kind: Kind::Put,
                    payload: record::data_payload(self.id, rid, d.as_bytes()),
                },
                None => OutRecord {
                    kind: Kind::Delete,
                    payload: record::data_payload(self.id, rid, &[]),
                },
            };
            in_batch.insert(rid, new.cloned());
            out.push((rec, rid));
        }
        Ok(out)
    }
}

/// Moves `rid`'s index entries from `old`'s keys to `new`'s keys, checking unique indexes.
fn update_indexes(
    st: &mut CollState,
    rid: RecordId,
    old: Option<&bson::RawDocument>,
    new: Option<&bson::RawDocument>,
    undo: &mut Vec<Undo>,
) -> Result<()> {
    for (i, ix) in st.indexes.iter_mut().enumerate() {
        if let Some(old) = old {
            for k in ix.keys_of(old)?.0 {
                if ix.remove(&k, rid) {
                    undo.push(Undo::Removed(i, k, rid));
                }
            }
        }
        if let Some(new) = new {
            let (keys, multikey) = ix.keys_of(new)?;
            for k in keys {
                if ix.spec.unique && ix.conflict(&k, rid).is_some() {
                    return Err(ix.duplicate(&k));
                }
                if ix.insert(&k, rid) {
                    undo.push(Undo::Inserted(i, k, rid));
                }
            }
            ix.multikey |= multikey;
        }
    }
    Ok(())
}

fn rollback(st: &mut CollState, undo: Vec<Undo>) {
    for u in undo.into_iter().rev() {
        match u {
            Undo::Inserted(i, k, rid) => {
                st.indexes[i].remove(&k, rid);
            }
            Undo::Removed(i, k, rid) => {
                st.indexes[i].insert(&k, rid);
            }
        }
    }
}

/// Builds a full index over the collection's documents (sorted bulk load), checking uniqueness.
pub(crate) fn build_index(
    log: &Log,
    st: &CollState,
    ix: &mut Index,
    progress: &dyn Fn(u64, u64),
) -> Result<()> {
    let total = st.records.len() as u64;
    let mut entries = Vec::new();
    let mut multikey = false;
    for (n, (rid, loc)) in st.records.iter().enumerate() {
        let doc = log.read_document(*loc)?;
        let (keys, mk) = ix.keys_of(&doc)?;
        multikey |= mk;
        entries.extend(keys.into_iter().map(|k| (k, *rid)));
        if n % 1024 == 0 {
            progress(n as u64, total);
        }
    }
    entries.sort_unstable();
    entries.dedup();
    if ix.spec.unique {
        for w in entries.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(ix.duplicate(&w[1].0));
            }
        }
    }
    ix.multikey = multikey;
    ix.load(entries)?;
    progress(total, total);
    Ok(())
}

/// Brings a checkpointed index up to date with the records replayed after the checkpoint:
/// `changed` maps each touched RecordId to its location as of the checkpoint.
pub(crate) fn fix_up_index(
    log: &Log,
    st: &CollState,
    ix: &mut Index,
    changed: Option<&HashMap<RecordId, Option<Loc>>>,
) -> Result<()> {
    let Some(changed) = changed else {
        return Ok(());
    };
    for (rid, old) in changed {
        if let Some(old) = old {
            let doc = log.read_document(*old)?;
            for k in ix.keys_of(&doc)?.0 {
                ix.remove(&k, *rid);
            }
        }
    }
    for rid in changed.keys() {
        if let Some(loc) = st.records.get(rid) {
            let doc = log.read_document(*loc)?;
            let (keys, multikey) = ix.keys_of(&doc)?;
            for k in keys {
                ix.insert(&k, *rid);
            }
            ix.multikey |= multikey;
        }
    }
    Ok(())
}
