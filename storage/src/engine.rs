//! `Engine`: opens a data directory (lock, recovery, index rebuild), owns the catalog, runs DDL
//! through the log, and starts the commit and compaction threads. Lock order everywhere:
//! catalog, then a collection, then the log. DDL appends its catalog records under the catalog
//! lock and waits for durability after releasing it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use bson::Document;

use crate::backend::{Backend, FileBackend};
use crate::btree::BTree;
use crate::catalog::{CatalogEntry, CatalogOp, Replay, ReplayColl};
use crate::checkpoint;
use crate::collection::{CollMeta, CollState, Collection, Shared, build_index, fix_up_index};
use crate::commit::{Commit, Ticket};
use crate::error::{Result, StorageError};
use crate::index::{FilterCompiler, ID_INDEX_NAME, Index, IndexSpec};
use crate::limits::{
    CACHE_SIZE_BYTES_DEFAULT, CHECKPOINT_INTERVAL_MS_DEFAULT, CHECKPOINT_INTERVAL_SEGMENTS,
    CHECKPOINT_LOG_BYTES_DEFAULT, COMPACTION_INTERVAL_MS, DATABASE_NAME_SIZE_MAX,
    INDEXES_PER_COLLECTION_MAX, NAMESPACE_SIZE_MAX, PREALLOCATE_INTERVAL_MS,
    SEGMENT_SIZE_BYTES_DEFAULT, SEGMENT_SIZE_BYTES_MIN,
};
use crate::log::{Loc, Log, OutRecord};
use crate::record::{self, Kind};
use crate::recovery::{self, Recovered};

/// How to open an engine.
#[derive(Clone)]
pub struct EngineOptions {
    /// `None`: every write is acknowledged only when durable (group commit syncs at once).
    /// `Some(ms)`: periodic mode; the log is synced every `ms` or when a ticket is waited on.
    pub journal_commit_interval_ms: Option<u64>,
    /// Preallocated size of each log segment.
    pub segment_size_bytes: u64,
    /// Compiles `partialFilterExpression`s; without it partial indexes index every document.
    pub partial_filter_compiler: Option<FilterCompiler>,
    /// Run compaction on a background thread (tests call `Engine::compact` instead).
    pub background_compaction: bool,
    /// Prepare the next log segment (zero-filled) on a background thread.
    pub preallocate_segments: bool,
    /// Bytes of B+tree pages the buffer pool may hold: the cache setting (mongod's
    /// `--wiredTigerCacheSizeGB`). The server applies mongod's default rule.
    pub cache_size_bytes: u64,
    /// Period of scheduled checkpoints (mongod's `--syncdelay`, 60 s); 0 turns the timer off.
    pub checkpoint_interval_ms: u64,
    /// A checkpoint also starts once this many bytes of log were written since the last one,
    /// which bounds the log a restart after a crash replays.
    pub checkpoint_log_bytes: u64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            journal_commit_interval_ms: None,
            segment_size_bytes: SEGMENT_SIZE_BYTES_DEFAULT,
            partial_filter_compiler: None,
            background_compaction: true,
            preallocate_segments: true,
            cache_size_bytes: CACHE_SIZE_BYTES_DEFAULT,
            checkpoint_interval_ms: CHECKPOINT_INTERVAL_MS_DEFAULT,
            checkpoint_log_bytes: CHECKPOINT_LOG_BYTES_DEFAULT,
        }
    }
}

/// A collection as listed by `Engine::collections`.
#[derive(Clone, Debug)]
pub struct CollectionInfo {
    pub name: String,
    pub uuid: bson::Uuid,
    pub options: Document,
    pub indexes: Vec<IndexSpec>,
}

/// Whole-engine numbers.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    pub segments: u64,
    /// Bytes of log records on disk (used part of every segment).
    pub log_bytes: u64,
    /// Bytes of the records that hold current documents.
    pub live_bytes: u64,
    /// Bytes of segment files including preallocated space.
    pub file_bytes: u64,
    pub last_sequence: u64,
    pub durable_sequence: u64,
    /// Bytes of the page file.
    pub page_file_bytes: u64,
    pub cache: CacheStats,
    /// Checkpoints completed since open.
    pub checkpoints: u64,
    /// Duration of the last checkpoint.
    pub checkpoint_last_ms: u64,
    /// Whether a checkpoint is being written now.
    pub checkpoint_running: bool,
}

/// The buffer pool's numbers (reported by `serverStatus.wiredTiger.cache`).
#[derive(Clone, Debug, Default)]
pub struct CacheStats {
    /// The configured maximum.
    pub bytes_max: u64,
    /// Bytes of pages held now.
    pub bytes_current: u64,
    /// Bytes of pages changed since they were last written.
    pub bytes_dirty: u64,
    pub pages_read: u64,
    pub pages_written: u64,
    pub pages_evicted: u64,
}

#[derive(Default)]
pub(crate) struct Catalog {
    pub by_name: BTreeMap<(String, String), Arc<Collection>>,
    pub by_id: BTreeMap<u64, Arc<Collection>>,
    pub next_collection_id: u64,
}

pub(crate) struct Inner {
    pub shared: Arc<Shared>,
    pub catalog: RwLock<Catalog>,
    pub backend: Arc<dyn Backend>,
    pub segment_size_bytes: u64,
    pub cache_size_bytes: u64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub stop: AtomicBool,
    /// Serializes compaction and checkpoints.
    pub maintenance: Mutex<()>,
    /// Log segment current at the last checkpoint.
    pub checkpoint_segment: AtomicU64,
}

/// Builds a recovered collection: indexes come from the checkpoint (fixed up for the replayed
/// tail) when their spec is unchanged, otherwise they are rebuilt from the documents.
fn load_collection(
    shared: &Arc<Shared>,
    id: u64,
    rc: ReplayColl,
    entry: &CatalogEntry,
    trees: &mut Trees,
    changed: Option<&HashMap<u64, Option<Loc>>>,
) -> Result<Arc<Collection>> {
    let mut st = CollState {
        dropped: false,
        records: rc.records,
        next_record_id: entry.next_record_id,
        indexes: Vec::new(),
        data_bytes: rc.data_bytes,
    };
    for spec in &entry.indexes {
        let compiler = shared.filter_compiler.as_ref();
        let ix = match trees.remove(&(id, spec.name.clone())) {
            Some((ck_spec, tree, multikey)) if ck_spec == *spec => {
                let mut ix = Index::from_tree(spec.clone(), compiler, tree, multikey)?;
                fix_up_index(&shared.log, &st, &mut ix, changed)?;
                ix
            }
            _ => {
                let mut ix = Index::new(spec.clone(), compiler)?;
                build_index(&shared.log, &st, &mut ix, &|_, _| {})?;
                ix
            }
        };
        st.indexes.push(ix);
    }
    Ok(Arc::new(Collection {
        id,
        uuid: entry.uuid,
        meta: RwLock::new(CollMeta {
            db: entry.db.clone(),
            name: entry.name.clone(),
            options: entry.options.clone(),
        }),
        state: RwLock::new(st),
        shared: shared.clone(),
    }))
}

fn start_threads(inner: &Arc<Inner>, opts: &EngineOptions) -> Result<()> {
    if opts.preallocate_segments {
        let weak = Arc::downgrade(inner);
        let t = std::thread::Builder::new()
            .name("cairn-prealloc".into())
            .spawn(move || preallocator(weak))?;
        inner.threads.lock().map_err(|_| lock_err())?.push(t);
    }
    if opts.background_compaction {
        let weak = Arc::downgrade(inner);
        let t = std::thread::Builder::new()
            .name("cairn-compact".into())
            .spawn(move || compactor(weak))?;
        inner.threads.lock().map_err(|_| lock_err())?.push(t);
    }
    Ok(())
}

/// Recovery from the newest checkpoint (when `use_checkpoint`) plus the log after it.
type Trees = HashMap<(u64, String), (IndexSpec, BTree, bool)>;

fn recover_state(
    backend: &dyn Backend,
    use_checkpoint: bool,
) -> Result<(Replay, Recovered, Trees)> {
    let loaded = if use_checkpoint {
        checkpoint::load_latest(backend)?
    } else {
        None
    };
    let (mut replay, start, trees) = match loaded {
        Some(l) => (l.replay, Some(l.start), l.trees),
        None => (Replay::default(), None, HashMap::new()),
    };
    let name = |id| record::segment_file_name(id);
    let rec = recovery::recover(backend, start.as_ref(), &mut |item| {
        replay.apply(item, &name)
    })?;
    replay.finish();
    Ok((replay, rec, trees))
}

/// The storage engine of one data directory. Send + Sync; share it with an `Arc`.
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

fn lock_err() -> StorageError {
    StorageError::Poisoned("catalog lock poisoned".into())
}

impl Engine {
    /// Opens (creating if needed) the data directory `dir`.
    pub fn open(dir: &Path, opts: EngineOptions) -> Result<Engine> {
        Engine::open_with_backend(Arc::new(FileBackend::new(dir)?), opts)
    }

    /// Opens an engine over any backend (tests use `SimBackend`).
    pub fn open_with_backend(backend: Arc<dyn Backend>, opts: EngineOptions) -> Result<Engine> {
        backend.lock()?;
        let seg_size = opts.segment_size_bytes.max(SEGMENT_SIZE_BYTES_MIN);
        let (mut replay, rec, mut trees) = match recover_state(backend.as_ref(), true) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("checkpoint unusable ({e}); replaying the whole log");
                recover_state(backend.as_ref(), false)?
            }
        };
        for (seg, live) in &replay.live_bytes {
            if let Some(s) = rec.segments.get(seg) {
                s.live_bytes.store(*live, Ordering::Release);
            }
        }
        let changed = replay.changed.take().unwrap_or_default();
        let log = Arc::new(Log::open(
            backend.clone(),
            seg_size,
            rec.segments,
            rec.tail,
        )?);
        let interval = opts.journal_commit_interval_ms.map(Duration::from_millis);
        let (commit, commit_thread) = Commit::start(log.clone(), interval, rec.last_sequence)?;
        let shared = Arc::new(Shared {
            log,
            commit,
            filter_compiler: opts.partial_filter_compiler.clone(),
        });
        let mut catalog = Catalog {
            next_collection_id: replay.next_collection_id.max(1),
            ..Catalog::default()
        };
        for (id, rc) in std::mem::take(&mut replay.colls) {
            let Some(entry) = rc.entry.clone() else {
                continue;
            };
            let coll = load_collection(&shared, id, rc, &entry, &mut trees, changed.get(&id))?;
            catalog.by_name.insert((entry.db, entry.name), coll.clone());
            catalog.by_id.insert(id, coll);
        }
        let inner = Arc::new(Inner {
            shared,
            catalog: RwLock::new(catalog),
            backend,
            segment_size_bytes: seg_size,
            cache_size_bytes: opts.cache_size_bytes,
            threads: Mutex::new(vec![commit_thread]),
            stop: AtomicBool::new(false),
            maintenance: Mutex::new(()),
            checkpoint_segment: AtomicU64::new(0),
        });
        start_threads(&inner, &opts)?;
        Ok(Engine { inner })
    }

    fn catalog(&self) -> Result<RwLockReadGuard<'_, Catalog>> {
        self.inner.catalog.read().map_err(|_| lock_err())
    }
    fn catalog_mut(&self) -> Result<RwLockWriteGuard<'_, Catalog>> {
        self.inner.catalog.write().map_err(|_| lock_err())
    }

    /// Appends catalog records as one batch; the ticket says when they are durable.
    pub(crate) fn log_catalog(&self, ops: &[CatalogOp]) -> Result<Ticket> {
        let recs: Vec<OutRecord> = ops
            .iter()
            .map(|op| OutRecord {
                kind: Kind::Catalog,
                payload: op.to_bytes(),
            })
            .collect();
        let (seq, _) = self.inner.shared.log.append(&recs, true)?;
        self.inner.shared.commit.note_written(seq);
        Ok(Ticket {
            sequence: seq,
            record_ids: Vec::new(),
            commit: self.inner.shared.commit.clone(),
        })
    }

    /// Names of databases holding at least one collection.
    pub fn databases(&self) -> Vec<String> {
        let Ok(cat) = self.catalog() else {
            return Vec::new();
        };
        let mut dbs: Vec<String> = cat.by_name.keys().map(|(db, _)| db.clone()).collect();
        dbs.dedup();
        dbs
    }

    /// The collections of `db`, by name.
    pub fn collections(&self, db: &str) -> Vec<CollectionInfo> {
        let Ok(cat) = self.catalog() else {
            return Vec::new();
        };
        cat.by_name
            .iter()
            .filter(|((d, _), _)| d == db)
            .map(|((_, name), c)| CollectionInfo {
                name: name.clone(),
                uuid: c.uuid,
                options: c.meta.read().map(|m| m.options.clone()).unwrap_or_default(),
                indexes: c.indexes().into_iter().map(|i| i.spec).collect(),
            })
            .collect()
    }

    /// The collection `db.name`, if it exists.
    pub fn collection(&self, db: &str, name: &str) -> Option<Arc<Collection>> {
        self.catalog()
            .ok()?
            .by_name
            .get(&(db.to_string(), name.to_string()))
            .cloned()
    }

    /// Creates `db.name` with its `_id` index; waits until durable.
    pub fn create_collection(
        &self,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<Arc<Collection>> {
        check_namespace(db, name)?;
        let mut cat = self.catalog_mut()?;
        let key = (db.to_string(), name.to_string());
        if cat.by_name.contains_key(&key) {
            return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
        }
        let id = cat.next_collection_id;
        let entry = CatalogEntry {
            id,
            db: db.into(),
            name: name.into(),
            uuid: bson::Uuid::new(),
            options: options.clone(),
            indexes: vec![IndexSpec::id_index()],
            next_record_id: 1,
        };
        let ticket = self.log_catalog(&[CatalogOp::Create(entry.clone())])?;
        cat.next_collection_id = id + 1;
        let shared = &self.inner.shared;
        let coll = Arc::new(Collection {
            id,
            uuid: entry.uuid,
            meta: RwLock::new(CollMeta {
                db: db.into(),
                name: name.into(),
                options,
            }),
            state: RwLock::new(CollState {
                dropped: false,
                records: BTreeMap::new(),
                next_record_id: 1,
                indexes: vec![Index::new(IndexSpec::id_index(), None)?],
                data_bytes: 0,
            }),
            shared: shared.clone(),
        });
        cat.by_name.insert(key, coll.clone());
        cat.by_id.insert(id, coll.clone());
        drop(cat);
        ticket.wait_durable_blocking()?;
        Ok(coll)
    }

    /// Marks `coll` dropped and forgets its records (caller holds the catalog lock).
    fn forget(&self, cat: &mut Catalog, coll: &Arc<Collection>) -> Result<()> {
        let mut st = coll.write_state()?;
        st.dropped = true;
        for loc in st.records.values() {
            self.inner.shared.log.release(*loc);
        }
        st.records.clear();
        st.indexes.clear();
        st.data_bytes = 0;
        drop(st);
        cat.by_id.remove(&coll.id);
        cat.by_name.retain(|_, c| c.id != coll.id);
        Ok(())
    }

    /// Drops `db.name`; false if it did not exist.
    pub fn drop_collection(&self, db: &str, name: &str) -> Result<bool> {
        let mut cat = self.catalog_mut()?;
        let Some(coll) = cat
            .by_name
            .get(&(db.to_string(), name.to_string()))
            .cloned()
        else {
            return Ok(false);
        };
        let ticket = self.log_catalog(&[CatalogOp::Drop { id: coll.id }])?;
        self.forget(&mut cat, &coll)?;
        drop(cat);
        ticket.wait_durable_blocking()?;
        Ok(true)
    }

    /// Drops every collection of `db` in one atomic batch.
    pub fn drop_database(&self, db: &str) -> Result<()> {
        let mut cat = self.catalog_mut()?;
        let colls: Vec<Arc<Collection>> = cat
            .by_name
            .iter()
            .filter(|((d, _), _)| d == db)
            .map(|(_, c)| c.clone())
            .collect();
        if colls.is_empty() {
            return Ok(());
        }
        let ops: Vec<CatalogOp> = colls.iter().map(|c| CatalogOp::Drop { id: c.id }).collect();
        let ticket = self.log_catalog(&ops)?;
        for c in &colls {
            self.forget(&mut cat, c)?;
        }
        drop(cat);
        ticket.wait_durable_blocking()
    }

    /// Renames `from_db.from` to `to_db.to`, dropping an existing target if `drop_target`.
    pub fn rename_collection(
        &self,
        from_db: &str,
        from: &str,
        to_db: &str,
        to: &str,
        drop_target: bool,
    ) -> Result<()> {
        check_namespace(to_db, to)?;
        let mut cat = self.catalog_mut()?;
        let src_key = (from_db.to_string(), from.to_string());
        let dst_key = (to_db.to_string(), to.to_string());
        let src = cat
            .by_name
            .get(&src_key)
            .cloned()
            .ok_or_else(|| StorageError::NamespaceNotFound(format!("{from_db}.{from}")))?;
        if src_key == dst_key {
            return Err(StorageError::NamespaceExists(format!("{to_db}.{to}")));
        }
        let target = cat.by_name.get(&dst_key).cloned();
        let mut ops = Vec::new();
        if let Some(t) = &target {
            if !drop_target {
                return Err(StorageError::NamespaceExists(format!("{to_db}.{to}")));
            }
            ops.push(CatalogOp::Drop { id: t.id });
        }
        ops.push(CatalogOp::Rename {
            id: src.id,
            db: to_db.into(),
            name: to.into(),
        });
        let ticket = self.log_catalog(&ops)?;
        if let Some(t) = &target {
            self.forget(&mut cat, t)?;
        }
        cat.by_name.remove(&src_key);
        if let Ok(mut m) = src.meta.write() {
            m.db = to_db.into();
            m.name = to.into();
        }
        cat.by_name.insert(dst_key, src);
        drop(cat);
        ticket.wait_durable_blocking()
    }

    pub(crate) fn existing(&self, db: &str, coll: &str) -> Result<Arc<Collection>> {
        self.collection(db, coll)
            .ok_or_else(|| StorageError::NamespaceNotFound(format!("{db}.{coll}")))
    }

    /// Builds an index over the existing documents (blocking the collection's writers), then
    /// logs it. An identical existing index is a no-op.
    pub fn create_index(
        &self,
        db: &str,
        coll: &str,
        spec: IndexSpec,
        progress: &dyn Fn(u64, u64),
    ) -> Result<()> {
        if spec.name.is_empty() || spec.key.is_empty() {
            return Err(StorageError::InvalidIndex(
                "index needs a name and a key pattern".into(),
            ));
        }
        let c = self.existing(db, coll)?;
        let mut st = c.write_state()?;
        if st.dropped {
            return Err(StorageError::NamespaceNotFound(format!("{db}.{coll}")));
        }
        if let Some(ix) = st.indexes.iter().find(|i| i.spec.name == spec.name) {
            return if ix.spec == spec {
                Ok(())
            } else {
                Err(StorageError::IndexExists(spec.name))
            };
        }
        if let Some(ix) = st.indexes.iter().find(|i| i.spec.key == spec.key) {
            return Err(StorageError::IndexKeyExists(ix.spec.name.clone()));
        }
        if st.indexes.len() >= INDEXES_PER_COLLECTION_MAX {
            return Err(StorageError::LimitExceeded(format!(
                "at most {INDEXES_PER_COLLECTION_MAX} indexes"
            )));
        }
        let mut ix = Index::new(spec.clone(), self.inner.shared.filter_compiler.as_ref())?;
        build_index(&self.inner.shared.log, &st, &mut ix, progress)?;
        let ticket = self.log_catalog(&[CatalogOp::CreateIndex { id: c.id, spec }])?;
        st.indexes.push(ix);
        drop(st);
        ticket.wait_durable_blocking()
    }

    /// Drops the index `name` (never `_id_`).
    pub fn drop_index(&self, db: &str, coll: &str, name: &str) -> Result<()> {
        if name == ID_INDEX_NAME {
            return Err(StorageError::InvalidIndex("cannot drop _id index".into()));
        }
        let c = self.existing(db, coll)?;
        let mut st = c.write_state()?;
        if !st.indexes.iter().any(|i| i.spec.name == name) {
            return Err(StorageError::IndexNotFound(name.to_string()));
        }
        let ticket = self.log_catalog(&[CatalogOp::DropIndex {
            id: c.id,
            name: name.into(),
        }])?;
        st.indexes.retain(|i| i.spec.name != name);
        drop(st);
        ticket.wait_durable_blocking()
    }

    /// Numbers for serverStatus/dbStats.
    pub fn stats(&self) -> EngineStats {
        let log = &self.inner.shared.log;
        let usage = log.segment_usage();
        let cur = log.current_segment();
        EngineStats {
            segments: usage.len() as u64,
            log_bytes: usage.iter().map(|u| u.1).sum(),
            live_bytes: usage.iter().map(|u| u.2).sum(),
            file_bytes: usage
                .iter()
                .map(|u| {
                    if u.0 == cur {
                        self.inner.segment_size_bytes.max(u.1)
                    } else {
                        u.1.max(self.inner.segment_size_bytes)
                    }
                })
                .sum(),
            last_sequence: log.last_sequence(),
            durable_sequence: self.inner.shared.commit.durable_sequence(),
            // The in-memory engine has no page file or pool yet (storage v2 brings them).
            cache: CacheStats {
                bytes_max: self.inner.cache_size_bytes,
                ..CacheStats::default()
            },
            ..EngineStats::default()
        }
    }

    /// Blocks until everything written so far is durable.
    pub fn flush(&self) -> Result<()> {
        let seq = self.inner.shared.log.last_sequence();
        Ticket {
            sequence: seq,
            record_ids: Vec::new(),
            commit: self.inner.shared.commit.clone(),
        }
        .wait_durable_blocking()
    }

    /// Clean shutdown: syncs everything, stops the threads, releases the directory lock.
    /// Later writes fail.
    pub fn close(&self) -> Result<()> {
        if self.inner.stop.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let mut flushed = self.flush();
        if flushed.is_ok() {
            // A checkpoint at shutdown makes the next open replay nothing.
            flushed = self.checkpoint().map(|_| ());
        }
        self.inner.shared.log.poison("the engine is closed".into());
        self.inner.shared.commit.shutdown();
        let threads = std::mem::take(&mut *self.inner.threads.lock().map_err(|_| lock_err())?);
        for t in threads {
            t.thread().unpark();
            let _ = t.join();
        }
        self.inner.backend.unlock();
        flushed
    }

    /// Writes a checkpoint now; returns the log sequence it covers.
    pub fn checkpoint(&self) -> Result<u64> {
        let _m = self.inner.maintenance.lock().map_err(|_| lock_err())?;
        let seq = crate::checkpoint::take(&self.inner)?;
        self.inner
            .checkpoint_segment
            .store(self.inner.shared.log.current_segment(), Ordering::Release);
        Ok(seq)
    }

    /// Runs one compaction pass now if the log holds enough dead space (normally the
    /// background thread does this); true if a segment was removed.
    pub fn compact(&self) -> Result<bool> {
        crate::compact::compact_once(&self.inner, true)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn preallocator(inner: Weak<Inner>) {
    loop {
        std::thread::park_timeout(Duration::from_millis(PREALLOCATE_INTERVAL_MS));
        let Some(inner) = inner.upgrade() else { return };
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = inner.shared.log.prepare_spare() {
            tracing::warn!("segment preallocation failed: {e}");
            std::thread::park_timeout(Duration::from_millis(COMPACTION_INTERVAL_MS));
        }
    }
}

fn compactor(inner: Weak<Inner>) {
    loop {
        std::thread::park_timeout(Duration::from_millis(COMPACTION_INTERVAL_MS));
        let Some(inner) = inner.upgrade() else { return };
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = crate::compact::compact_once(&inner, false) {
            tracing::warn!("compaction failed: {e}");
        }
        let due = inner.checkpoint_segment.load(Ordering::Acquire) + CHECKPOINT_INTERVAL_SEGMENTS;
        if inner.shared.log.current_segment() >= due {
            let taken = inner
                .maintenance
                .lock()
                .map_err(|_| lock_err())
                .and_then(|_m| crate::checkpoint::take(&inner));
            match taken {
                Ok(_) => inner
                    .checkpoint_segment
                    .store(inner.shared.log.current_segment(), Ordering::Release),
                Err(e) => tracing::warn!("checkpoint failed: {e}"),
            }
        }
    }
}

/// mongod's namespace rules, the parts storage cares about.
fn check_namespace(db: &str, name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(StorageError::InvalidNamespace(format!(
            "{db}.{name}: {why}"
        )))
    };
    if db.is_empty() || db.len() > DATABASE_NAME_SIZE_MAX {
        return bad("bad database name length");
    }
    if db.contains(['/', '\\', '.', ' ', '"', '$', '\0']) {
        return bad("invalid character in database name");
    }
    if name.is_empty() || name.contains('\0') || name.starts_with('.') {
        return bad("invalid collection name");
    }
    if db.len() + 1 + name.len() > NAMESPACE_SIZE_MAX {
        return bad("namespace too long");
    }
    Ok(())
}
