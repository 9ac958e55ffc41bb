//! A collection: its record tree (RecordId -> where the document's record lies in the log), its
//! indexes, and the write path. A write takes the collection's write lock, checks and applies
//! every index change (undoing all of them if one fails), appends the whole batch to the log,
//! updates the record tree, and returns a `Ticket`; it never waits for a sync while holding the
//! lock, so readers (who take the read lock) never wait for an fsync and always see a whole
//! batch or none of it. Each PUT or DELETE record carries the index keys the write removed, so
//! replay after a crash needs no read of a document's earlier version.
//!
//! Every structure that grows with the data is a paged tree: the count, the data size and the
//! index specs are all the collection keeps in memory.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bson::{Document, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::btree::Tree;
use crate::commit::{Commit, Ticket};
use crate::error::{Result, StorageError};
use crate::index::{ID_INDEX_NAME, Index, IndexCompilers, IndexSpec};
use crate::index_build::{Build, SideOp};
use crate::limits::SCAN_BATCH_COUNT_MAX;
use crate::log::{Loc, Log, OutRecord};
use crate::pager::Pager;
use crate::record::{self, Kind, RemovedKey};
pub(crate) use crate::write::{StampDraft, write_across};

/// A document's id inside its collection: increasing, never reused.
pub type RecordId = u64;

/// One operation of an atomic write. An inserted document may be borrowed (`'a`): a server
/// inserting straight from a request's bytes then copies it once, into the log.
#[derive(Clone, Debug)]
pub enum WriteOp<'a> {
    Insert(Cow<'a, RawDocument>),
    /// A new version of the whole document (the client replaced it).
    Replace(RecordId, RawDocumentBuf),
    /// A new version made by update operators: stored as `Replace`, but a stamped history
    /// records the diff from the old version.
    Update(RecordId, RawDocumentBuf),
    Delete(RecordId),
}

impl WriteOp<'_> {
    /// The document the op stores (none for a delete).
    pub fn document(&self) -> Option<&RawDocument> {
        match self {
            WriteOp::Insert(d) => Some(d),
            WriteOp::Replace(_, d) | WriteOp::Update(_, d) => Some(d),
            WriteOp::Delete(_) => None,
        }
    }
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
    pub pager: Arc<Pager>,
    pub index_compilers: Option<IndexCompilers>,
    /// Stamp every write batch (`EngineOptions::history_bytes`).
    pub stamp: bool,
    /// Open snapshots and the before-images they need (`snapshot`).
    pub versions: Arc<crate::snapshot::Versions>,
    /// The highest sequence a `write_across` has applied (a new snapshot's sequence).
    pub applied: std::sync::atomic::AtomicU64,
}

pub(crate) struct CollState {
    pub dropped: bool,
    /// RecordId (8 bytes, big-endian) -> `Loc::encode`.
    pub records: Tree,
    pub count: u64,
    pub next_record_id: RecordId,
    pub next_index_ident: u32,
    pub indexes: Vec<Index>,
    pub data_bytes: u64,
    /// Index builds running now; writers feed their side tables.
    pub builds: Vec<Arc<Build>>,
    /// Bytes of this collection's current document records per log segment (what a drop
    /// takes off the segments' live counts without reading the record tree).
    pub segment_bytes: BTreeMap<u64, u64>,
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
    /// Ops applied since the collection was opened (the server's plan cache ages by it).
    pub(crate) write_ops: std::sync::atomic::AtomicU64,
}

pub(crate) enum Undo {
    Inserted(usize, Vec<u8>, RecordId),
    Removed(usize, Vec<u8>, RecordId),
}

/// One op of a write, ready to log and apply; its record's document is borrowed from the op
/// (`'o`), so it is copied only into the log.
pub(crate) struct Planned<'o> {
    pub rid: RecordId,
    /// Bytes of the new document (None: delete).
    pub doc_size: Option<u32>,
    pub record: OutRecord<'o>,
    /// The document's version before this op, logged just before `record` when the
    /// collection keeps pre-images (`record::Kind::PreImage`).
    pub pre_image: Option<OutRecord<'static>>,
}

/// The record tree's key for a RecordId.
pub(crate) fn rid_key(rid: RecordId) -> [u8; 8] {
    rid.to_be_bytes()
}

fn rid_of(key: &[u8]) -> Result<RecordId> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| crate::btree::corrupt(0, "record tree key is not a RecordId"))?;
    Ok(RecordId::from_be_bytes(bytes))
}

fn loc_of(value: &[u8]) -> Result<Loc> {
    Loc::decode(value)
        .ok_or_else(|| crate::btree::corrupt(0, "record tree value is not a location"))
}

impl CollState {
    /// A new, empty collection state with its `_id` index (`id_spec`).
    pub fn new(
        pager: &Pager,
        compiler: Option<&IndexCompilers>,
        id_spec: IndexSpec,
    ) -> Result<CollState> {
        let id_index = Index::new(
            id_spec,
            crate::catalog::ID_INDEX_IDENT,
            compiler,
            Tree::create(pager)?,
        )?;
        Ok(CollState {
            dropped: false,
            records: Tree::create(pager)?,
            count: 0,
            next_record_id: 1,
            next_index_ident: crate::catalog::ID_INDEX_IDENT + 1,
            indexes: vec![id_index],
            data_bytes: 0,
            builds: Vec::new(),
            segment_bytes: BTreeMap::new(),
        })
    }

    pub fn loc(&self, pager: &Pager, rid: RecordId) -> Result<Option<Loc>> {
        self.records
            .get(pager, &rid_key(rid))?
            .map(|v| loc_of(&v))
            .transpose()
    }

    /// Points `rid` at `loc`, keeping count and size; returns the location it replaces.
    pub fn put_loc(&mut self, pager: &Pager, rid: RecordId, loc: Loc) -> Result<Option<Loc>> {
        let old = self
            .records
            .insert(pager, &rid_key(rid), &loc.encode())?
            .map(|v| loc_of(&v))
            .transpose()?;
        match old {
            Some(o) => self.forget_loc(&o),
            None => self.count += 1,
        }
        self.data_bytes += u64::from(loc.doc_size);
        *self.segment_bytes.entry(loc.segment).or_default() += u64::from(loc.size);
        self.next_record_id = self.next_record_id.max(rid + 1);
        Ok(old)
    }

    /// Forgets `rid`; returns where it was.
    pub fn remove_loc(&mut self, pager: &Pager, rid: RecordId) -> Result<Option<Loc>> {
        let old = self
            .records
            .remove(pager, &rid_key(rid))?
            .map(|v| loc_of(&v))
            .transpose()?;
        if let Some(o) = old {
            self.count = self.count.saturating_sub(1);
            self.forget_loc(&o);
        }
        Ok(old)
    }

    fn forget_loc(&mut self, old: &Loc) {
        self.data_bytes = self.data_bytes.saturating_sub(u64::from(old.doc_size));
        if let Some(b) = self.segment_bytes.get_mut(&old.segment) {
            *b = b.saturating_sub(u64::from(old.size));
            if *b == 0 {
                self.segment_bytes.remove(&old.segment);
            }
        }
    }

    /// Up to `limit` (RecordId, location) pairs in RecordId order after `after`.
    pub fn locs(
        &self,
        pager: &Pager,
        direction: Direction,
        after: Option<RecordId>,
        limit: usize,
    ) -> Result<Vec<(RecordId, Loc)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let key = after.map(rid_key);
        let bound = key
            .as_ref()
            .map_or(Bound::Unbounded, |k| Bound::Excluded(&k[..]));
        let (lo, hi, reverse) = match direction {
            Direction::Forward => (bound, Bound::Unbounded, false),
            Direction::Backward => (Bound::Unbounded, bound, true),
        };
        self.records.scan(pager, lo, hi, reverse, &mut |k, v| {
            out.push((rid_of(k)?, loc_of(v)?));
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    pub fn index(&self, name: &str) -> Option<&Index> {
        self.indexes.iter().find(|i| i.spec.name == name)
    }
}

/// Keys in `a` and not in `b`, both sorted.
fn minus(a: &[Vec<u8>], b: &[Vec<u8>]) -> Vec<Vec<u8>> {
    a.iter()
        .filter(|k| b.binary_search(k).is_err())
        .cloned()
        .collect()
}

impl Collection {
    pub(crate) fn read(&self) -> Result<RwLockReadGuard<'_, CollState>> {
        crate::nowait::read_lock(&self.state)
    }
    pub(crate) fn write_state(&self) -> Result<RwLockWriteGuard<'_, CollState>> {
        crate::nowait::write_lock(&self.state)
    }

    fn pager(&self) -> &Pager {
        &self.shared.pager
    }

    /// Write ops applied to this collection since it was opened (not persisted).
    pub fn write_ops(&self) -> u64 {
        self.write_ops.load(std::sync::atomic::Ordering::Relaxed)
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

    /// The collection's default collation (`create`'s `collation` option), `None` for the
    /// simple one: what the per-command collation choice and the `_id` look-up need, without
    /// copying the whole options document (a validator can be large) on every request.
    pub fn default_collation(&self) -> Option<Document> {
        let meta = self.meta.read().ok()?;
        meta.options
            .get_document(crate::index::COLLATION)
            .ok()
            .cloned()
    }

    /// Whether writes log the version they replace or delete, for change streams'
    /// `fullDocumentBeforeChange` (the `changeStreamPreAndPostImages: {enabled: true}` option).
    pub fn keeps_pre_images(&self) -> bool {
        self.meta.read().ok().is_some_and(|m| {
            m.options
                .get_document("changeStreamPreAndPostImages")
                .ok()
                .and_then(|d| d.get_bool("enabled").ok())
                == Some(true)
        })
    }

    /// Whether the collection is clustered (`clusteredIndex: {key: {_id: 1}, ...}` among its
    /// options): its natural order is its `_id` index's order. Records stay keyed by RecordId;
    /// the server reads such a collection through the `_id` index (docs/ARCHITECTURE.md). The
    /// legacy `clusteredIndex: true` of time-series buckets is not counted.
    pub fn is_clustered(&self) -> bool {
        self.meta.read().ok().is_some_and(|m| {
            matches!(
                m.options.get("clusteredIndex"),
                Some(bson::Bson::Document(_))
            )
        })
    }

    /// The bounds of a capped collection (None: not capped).
    pub fn capped_limits(&self) -> Option<crate::capped::CappedLimits> {
        self.meta
            .read()
            .ok()
            .and_then(|m| crate::capped::limits_of(&m.options))
    }

    /// Number of documents, exact, O(1).
    pub fn count(&self) -> u64 {
        self.read().map(|s| s.count).unwrap_or(0)
    }

    /// Total BSON bytes of the documents.
    pub fn data_size_bytes(&self) -> u64 {
        self.read().map(|s| s.data_bytes).unwrap_or(0)
    }

    /// The document with this RecordId.
    pub fn get(&self, rid: RecordId) -> Result<Option<RawDocumentBuf>> {
        let st = self.read()?;
        if st.dropped {
            // Its trees' pages were given back with the drop.
            return Ok(None);
        }
        match st.loc(self.pager(), rid)? {
            Some(loc) => Ok(Some(self.shared.log.read_document(loc)?)),
            None => Ok(None),
        }
    }

    /// The documents with these RecordIds, in the order asked (`None` where there is none), read
    /// under one lock: their locations first, then the log in file order, so records lying back
    /// to back (an index scan over keys inserted in order) share one pread instead of one each.
    pub fn get_many(&self, rids: &[RecordId]) -> Result<Vec<Option<RawDocumentBuf>>> {
        let st = self.read()?;
        let mut out: Vec<Option<RawDocumentBuf>> = vec![None; rids.len()];
        if st.dropped {
            return Ok(out);
        }
        let mut found: Vec<(usize, Loc)> = Vec::with_capacity(rids.len());
        for (i, &rid) in rids.iter().enumerate() {
            if let Some(loc) = st.loc(self.pager(), rid)? {
                found.push((i, loc));
            }
        }
        found.sort_by_key(|(_, loc)| (loc.segment, loc.offset));
        let locs: Vec<Loc> = found.iter().map(|(_, loc)| *loc).collect();
        let docs = self.shared.log.read_documents(&locs)?;
        for ((i, _), doc) in found.into_iter().zip(docs) {
            out[i] = Some(doc);
        }
        Ok(out)
    }

    /// Whether a document with this RecordId is there now (no read of the document).
    pub fn contains(&self, rid: RecordId) -> Result<bool> {
        let st = self.read()?;
        Ok(!st.dropped && st.loc(self.pager(), rid)?.is_some())
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
        let locs = st.locs(
            self.pager(),
            direction,
            after,
            limit.min(SCAN_BATCH_COUNT_MAX),
        )?;
        // Read in file order so neighbouring records share one pread, whatever the direction.
        let mut order: Vec<usize> = (0..locs.len()).collect();
        order.sort_by_key(|&i| (locs[i].1.segment, locs[i].1.offset));
        let sorted: Vec<Loc> = order.iter().map(|&i| locs[i].1).collect();
        let docs = self.shared.log.read_documents(&sorted)?;
        let mut out: Vec<Option<RawDocumentBuf>> = vec![None; locs.len()];
        for (i, d) in order.into_iter().zip(docs) {
            out[i] = Some(d);
        }
        Ok(locs
            .into_iter()
            .zip(out)
            .filter_map(|((rid, _), d)| d.map(|d| (rid, d)))
            .collect())
    }

    /// The `_id` index's key of `id` when that index has a collation (`None`: it has not, ids
    /// are the same exactly when equal): two ids are then the same document's exactly when
    /// their keys are equal.
    pub fn collated_id_key(&self, id: RawBsonRef<'_>) -> Result<Option<Vec<u8>>> {
        let st = self.read()?;
        Ok(st
            .index(ID_INDEX_NAME)
            .filter(|ix| ix.spec.collation().is_some())
            .map(|ix| ix.point_key(&[id])))
    }

    /// The RecordId of the document whose `_id` equals `id`.
    pub fn find_by_id(&self, id: RawBsonRef<'_>) -> Result<Option<RecordId>> {
        let st = self.read()?;
        let Some(ix) = st.index(ID_INDEX_NAME) else {
            return Ok(None);
        };
        let key = ix.point_key(&[id]);
        let hit = ix.scan(
            self.pager(),
            Bound::Included(&key),
            Bound::Included(&key),
            true,
            None,
            1,
        )?;
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
            .index(index_name)
            .ok_or_else(|| StorageError::IndexNotFound(index_name.to_string()))?;
        let limit = limit.min(SCAN_BATCH_COUNT_MAX);
        ix.scan(
            self.pager(),
            lower,
            upper,
            direction == Direction::Forward,
            after,
            limit,
        )
    }

    /// The first entry of a unique index other than `_id` that `doc` (to be stored as `rid`)
    /// would collide with, skipping entries of RecordIds `skip` says to: the holder's RecordId
    /// and the duplicate-key error a write would get. A transaction checks its statements with
    /// this against what is committed (the batch at commit checks again).
    pub fn unique_conflict(
        &self,
        doc: &RawDocument,
        rid: RecordId,
        skip: &dyn Fn(RecordId) -> bool,
    ) -> Result<Option<(RecordId, StorageError)>> {
        let st = self.read()?;
        let pager = self.pager();
        for ix in st.indexes.iter().filter(|i| i.spec.unique) {
            if ix.spec.name == crate::ID_INDEX_NAME {
                continue;
            }
            for k in ix.keys_of(doc)?.0 {
                if let Some(h) = ix.conflict_except(pager, &k, &|o| o == rid || skip(o))? {
                    return Ok(Some((h, ix.duplicate(&k))));
                }
            }
        }
        Ok(None)
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

    /// Bytes of the record tree's pages.
    pub fn record_tree_bytes(&self) -> u64 {
        self.read().map(|s| s.records.size_bytes()).unwrap_or(0)
    }

    /// Applies `ops` as one atomic batch: every index check passes and everything is applied
    /// and logged, or nothing is. The ticket holds one RecordId per op.
    pub fn write(&self, ops: Vec<WriteOp>) -> Result<Ticket> {
        write_across(vec![(self, ops)])
    }

    /// Index changes and log records for `ops`; index changes are recorded in `undo`, side
    /// table entries for running builds in `side`.
    pub(crate) fn plan<'o>(
        &self,
        st: &mut CollState,
        ops: &'o [WriteOp<'_>],
        undo: &mut Vec<Undo>,
        side: &mut [Vec<SideOp>],
        mut stamp: Option<&mut StampDraft>,
        mut befores: Option<&mut Vec<(RecordId, crate::snapshot::Body)>>,
    ) -> Result<Vec<Planned<'o>>> {
        let mut next_rid = st.next_record_id;
        // Documents changed earlier in this batch (None = deleted), so later ops see them.
        // Borrowed from `ops` (no copy of each new document); an old version read from the
        // log is owned.
        let mut in_batch: HashMap<RecordId, Option<&RawDocument>> = HashMap::new();
        let mut out = Vec::with_capacity(ops.len());
        // Pre-images only describe stamped batches (the history is what reads them).
        let pre_images = stamp.is_some() && self.keeps_pre_images();
        for op in ops {
            let rid = match op {
                WriteOp::Insert(_) => {
                    next_rid += 1;
                    next_rid - 1
                }
                WriteOp::Replace(rid, _) | WriteOp::Update(rid, _) | WriteOp::Delete(rid) => *rid,
            };
            let new = op.document();
            let first = !in_batch.contains_key(&rid);
            let old: Option<Cow<'_, RawDocument>> = match (in_batch.get(&rid), op) {
                (Some(d), _) => d.map(Cow::Borrowed),
                // A new RecordId has no earlier version: no tree lookup, except to read the
                // record tree's pages the apply step will change when this must not block
                // (see `update_indexes`).
                (None, WriteOp::Insert(_)) => {
                    if crate::nowait::active() {
                        st.loc(self.pager(), rid)?;
                    }
                    None
                }
                (None, _) => match st.loc(self.pager(), rid)? {
                    Some(loc) => Some(Cow::Owned(self.shared.log.read_document(loc)?)),
                    None => None,
                },
            };
            if old.is_none() && !matches!(op, WriteOp::Insert(_)) {
                return Err(StorageError::RecordNotFound(rid));
            }
            if let Some(b) = befores.as_deref_mut().filter(|_| first) {
                b.push((rid, old.as_ref().map(|o| Arc::new(o.as_ref().to_owned()))));
            }
            let old_ref = old.as_deref();
            let new_ref = new;
            if let Some(s) = stamp.as_deref_mut() {
                // Op indexes count across the whole batch (every collection of it).
                let index = s.ops.len().to_string();
                let details = &mut s.details;
                let code = match op {
                    WriteOp::Insert(_) => record::OP_INSERT,
                    WriteOp::Replace(..) => record::OP_REPLACE,
                    WriteOp::Update(_, d) => {
                        if let Some(o) = old_ref {
                            details.insert(index, crate::diff::diff(o, d));
                        }
                        record::OP_UPDATE
                    }
                    WriteOp::Delete(_) => {
                        let id = old_ref
                            .and_then(|o| o.get("_id").ok().flatten())
                            .and_then(|v| bson::Bson::try_from(bson::RawBson::from(v)).ok());
                        if let Some(id) = id {
                            details.insert(index, bson::doc! { "_id": id });
                        }
                        record::OP_DELETE
                    }
                };
                s.ops.push(code);
            }
            let removed = self.update_indexes(st, rid, old_ref, new_ref, undo)?;
            for (b, ops) in st.builds.iter().zip(side.iter_mut()) {
                b.side_ops(rid, old_ref, new_ref, ops)?;
            }
            let payload = record::data_payload_around(self.id, rid, &removed);
            let kind = if new.is_some() {
                Kind::Put
            } else {
                Kind::Delete
            };
            let pre_image = match old_ref {
                Some(o) if pre_images => Some(OutRecord::whole(
                    Kind::PreImage,
                    record::data_payload(self.id, rid, Some(o.as_bytes()), &[]),
                )),
                _ => None,
            };
            in_batch.insert(rid, new);
            out.push(Planned {
                rid,
                doc_size: new.map(|d| d.as_bytes().len() as u32),
                record: OutRecord {
                    kind,
                    payload,
                    document: new.map(|d| d.as_bytes()),
                },
                pre_image,
            });
        }
        Ok(out)
    }

    /// Moves `rid`'s index entries from `old`'s keys to `new`'s keys, checking unique indexes;
    /// returns the keys removed, by index ident.
    fn update_indexes(
        &self,
        st: &mut CollState,
        rid: RecordId,
        old: Option<&RawDocument>,
        new: Option<&RawDocument>,
        undo: &mut Vec<Undo>,
    ) -> Result<Vec<RemovedKey>> {
        let pager = &*self.shared.pager;
        let mut removed = Vec::new();
        let mut keys = Vec::with_capacity(st.indexes.len());
        for ix in &st.indexes {
            let old_keys = match old {
                Some(d) => ix.keys_of(d)?.0,
                None => Vec::new(),
            };
            let (new_keys, multikey) = match new {
                Some(d) => ix.keys_of(d)?,
                None => (Vec::new(), false),
            };
            keys.push((old_keys, new_keys, multikey));
        }
        if crate::nowait::active() {
            // Tried on a thread that must not block: every page the changes below start from
            // is read now, when a refusal leaves nothing to undo; the changes then find them
            // in the buffer pool (the paths they hold stay pinned) and may not be refused.
            for (ix, (old_keys, new_keys, _)) in st.indexes.iter().zip(&keys) {
                let (gone, added) = (minus(old_keys, new_keys), minus(new_keys, old_keys));
                for k in gone.iter().chain(&added) {
                    ix.warm(pager, k, rid)?;
                }
            }
        }
        let _may_block = crate::nowait::suspend();
        for ((i, ix), (old_keys, new_keys, multikey)) in st.indexes.iter_mut().enumerate().zip(keys)
        {
            for k in minus(&old_keys, &new_keys) {
                if ix.remove(pager, &k, rid)? {
                    undo.push(Undo::Removed(i, k.clone(), rid));
                }
                removed.push((ix.ident, k));
            }
            for k in minus(&new_keys, &old_keys) {
                if ix.spec.unique && ix.conflict(pager, &k, rid)?.is_some() {
                    return Err(ix.duplicate(&k));
                }
                if ix.insert(pager, &k, rid)? {
                    undo.push(Undo::Inserted(i, k, rid));
                }
            }
            ix.multikey |= multikey;
        }
        Ok(removed)
    }

    pub(crate) fn rollback(&self, st: &mut CollState, undo: Vec<Undo>) -> Result<()> {
        let pager = &*self.shared.pager;
        let mut result = Ok(());
        for u in undo.into_iter().rev() {
            let r = match u {
                Undo::Inserted(i, k, rid) => st.indexes[i].remove(pager, &k, rid),
                Undo::Removed(i, k, rid) => st.indexes[i].insert(pager, &k, rid),
            };
            if let Err(e) = r {
                result = Err(e);
            }
        }
        if let Err(e) = &result {
            // Memory no longer matches the log; a restart rebuilds it from checkpoint and log.
            self.shared
                .log
                .poison(format!("undoing a failed write failed: {e}"));
        }
        result
    }

    /// The record-tree side of a logged batch.
    pub(crate) fn apply(
        &self,
        st: &mut CollState,
        planned: &[Planned<'_>],
        locs: Vec<Loc>,
    ) -> Result<()> {
        let pager = &*self.shared.pager;
        for (p, mut loc) in planned.iter().zip(locs) {
            let old = match p.doc_size {
                Some(size) => {
                    loc.doc_size = size;
                    st.put_loc(pager, p.rid, loc)?
                }
                None => st.remove_loc(pager, p.rid)?,
            };
            if let Some(old) = old {
                self.shared.log.release(old);
            }
        }
        Ok(())
    }
}
