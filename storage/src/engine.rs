//! `Engine`: opens a data directory (lock, page file, checkpoint, log replay), owns the catalog,
//! runs DDL through the log, and starts the commit, preallocation, compaction and checkpoint
//! threads. Lock order everywhere: catalog, then a collection, then an index build's guard, then
//! the pager and the log. DDL appends its catalog records under the catalog lock and waits for
//! durability after releasing it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bson::Document;

use crate::backend::{Backend, FileBackend};
use crate::catalog::{CatalogEntry, CatalogOp};
use crate::checkpoint::{self, Start};
use crate::collection::{CollState, Collection, Shared};
use crate::commit::{Commit, Ticket};
use crate::error::{Result, StorageError};
use crate::index::{
    CollationCompiler, FilterCompiler, ID_INDEX_NAME, Index, IndexCompilers, IndexSpec,
};
use crate::limits::{
    CACHE_SIZE_BYTES_DEFAULT, CHECKPOINT_INTERVAL_MS_DEFAULT, CHECKPOINT_LOG_BYTES_DEFAULT,
    CHECKPOINT_POLL_MS, COMPACTION_INTERVAL_MS, DATABASE_NAME_SIZE_MAX, NAMESPACE_SIZE_MAX,
    PREALLOCATE_INTERVAL_MS, SEGMENT_SIZE_BYTES_DEFAULT, SEGMENT_SIZE_BYTES_MIN,
};
use crate::log::{Log, OutRecord};
use crate::pager::{FRAME_OVERHEAD_BYTES, Pager};
use crate::record::Kind;
use crate::recovery;
use crate::replay::{Replay, ReplayColl};

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
    /// Compiles index collations; without it an index with a `collation` cannot be created
    /// or opened.
    pub collation_compiler: Option<CollationCompiler>,
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
    /// which bounds the log a restart after a crash replays. 0 turns this trigger off.
    pub checkpoint_log_bytes: u64,
    /// `Some(bytes)`: keep a write history (the server's oplog). Every data write is a batch
    /// led by a STAMP record (timestamp, op codes, deleted ids, update diffs), and compaction
    /// leaves the newest `bytes` of log alone so `Engine::history` can read them.
    pub history_bytes: Option<u64>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            journal_commit_interval_ms: None,
            segment_size_bytes: SEGMENT_SIZE_BYTES_DEFAULT,
            partial_filter_compiler: None,
            collation_compiler: None,
            background_compaction: true,
            preallocate_segments: true,
            cache_size_bytes: CACHE_SIZE_BYTES_DEFAULT,
            checkpoint_interval_ms: CHECKPOINT_INTERVAL_MS_DEFAULT,
            checkpoint_log_bytes: CHECKPOINT_LOG_BYTES_DEFAULT,
            history_bytes: None,
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
    /// Pages of the page file that are free for reuse.
    pub free_pages: u64,
    pub cache: CacheStats,
    /// Checkpoints completed since open.
    pub checkpoints: u64,
    /// Duration of the last checkpoint.
    pub checkpoint_last_ms: u64,
    /// Whether a checkpoint is being written now.
    pub checkpoint_running: bool,
    /// Segments compaction has emptied since open.
    pub segments_compacted: u64,
    /// Log records the open replayed (0 after a clean shutdown).
    pub open_replayed_records: u64,
    /// Milliseconds the open took (checkpoint load, replay, index rebuilds).
    pub open_ms: u64,
    /// Group commit: syncs and who ran them, fdatasync durations (µs), records and writers
    /// made durable per sync.
    pub group_commit: crate::commit::CommitStatsSnapshot,
}

/// The buffer pool's numbers (reported by `serverStatus.wiredTiger.cache`).
#[derive(Clone, Debug, Default)]
pub struct CacheStats {
    /// The configured maximum (the cache setting).
    pub bytes_max: u64,
    /// Bytes of the frames held now (pages and their bookkeeping).
    pub bytes_current: u64,
    /// Bytes of pages changed since they were last written.
    pub bytes_dirty: u64,
    pub pages_read: u64,
    pub pages_written: u64,
    /// Pages dropped from the pool (clean, or written first).
    pub pages_evicted: u64,
    /// Of those, the ones that had to be written first.
    pub pages_evicted_dirty: u64,
}

#[derive(Default)]
pub(crate) struct Catalog {
    pub by_name: BTreeMap<(String, String), Arc<Collection>>,
    pub by_id: BTreeMap<u64, Arc<Collection>>,
    pub next_collection_id: u64,
}

/// Checkpoint bookkeeping shared by the scheduler, compaction and stats.
pub(crate) struct CheckpointState {
    pub count: AtomicU64,
    pub last_ms: AtomicU64,
    pub running: AtomicBool,
    /// `Log::appended_bytes` at the last cut.
    pub log_bytes_at_cut: AtomicU64,
    pub last_at: Mutex<Instant>,
    /// Someone (an index build, compaction) wants a checkpoint soon.
    pub requested: AtomicBool,
    /// Segments emptied by compaction.
    pub compacted: AtomicU64,
}

pub(crate) struct Inner {
    pub shared: Arc<Shared>,
    pub catalog: RwLock<Catalog>,
    pub backend: Arc<dyn Backend>,
    pub segment_size_bytes: u64,
    /// The cache setting as given.
    pub cache_size_bytes: u64,
    pub checkpoint_interval_ms: u64,
    pub checkpoint_log_bytes: u64,
    /// `EngineOptions::history_bytes`.
    pub history_bytes: Option<u64>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub stop: AtomicBool,
    /// Whether the background thread compacts (`autoCompact`); `Engine::compact` always does.
    pub auto_compact: AtomicBool,
    /// Serializes compaction passes and checkpoints.
    pub maintenance: Mutex<()>,
    pub ckpt: CheckpointState,
    /// Segments compaction emptied, with the pager's cut number at that moment: deleted once
    /// both meta slots hold later checkpoints.
    pub emptied: Mutex<Vec<(u64, u64)>>,
    /// (log records replayed, milliseconds) of the open.
    pub opened: (u64, u64),
}

fn lock_err() -> StorageError {
    StorageError::Poisoned("catalog lock poisoned".into())
}

/// Removes leftovers of a process that died: temporary files of index builds.
fn remove_temporaries(backend: &dyn Backend) -> Result<()> {
    for name in backend.list()? {
        if name.starts_with("tmp-") {
            backend.remove(&name)?;
        }
        if name.starts_with("checkpoint-") && name.ends_with(".ckpt") {
            return Err(StorageError::corruption(
                &name,
                0,
                "this data directory was written by an older cairn (in-memory engine, log \
                 format 1); open it with that version and export the data",
            ));
        }
    }
    Ok(())
}

/// Builds the replay state from a checkpoint blob (or nothing).
fn replay_from<'a>(
    pager: &'a Pager,
    compiler: Option<&'a IndexCompilers>,
    blob: Option<&Document>,
) -> Result<(Replay<'a>, Option<Start>, Vec<crate::pager::PageId>)> {
    let mut replay = Replay {
        pager,
        compiler,
        colls: BTreeMap::new(),
        next_collection_id: 1,
        pending_bytes: 0,
    };
    let Some(blob) = blob else {
        return Ok((replay, None, Vec::new()));
    };
    let loaded = checkpoint::parse_blob(blob)?;
    replay.next_collection_id = loaded.next_collection_id.max(1);
    for lc in loaded.collections {
        let mut indexes = Vec::new();
        for (ident, spec) in &lc.entry.indexes {
            let (tree, multikey) =
                lc.trees.get(ident).cloned().ok_or_else(|| {
                    StorageError::InvalidIndex(format!("no tree for {}", spec.name))
                })?;
            let mut ix = Index::new(spec.clone(), *ident, compiler, tree)?;
            ix.multikey = multikey;
            indexes.push(ix);
        }
        let state = CollState {
            dropped: false,
            records: lc.records,
            count: lc.count,
            next_record_id: lc.entry.next_record_id,
            next_index_ident: lc.next_index_ident,
            indexes,
            data_bytes: lc.data_bytes,
            builds: Vec::new(),
            segment_bytes: lc.segment_bytes,
        };
        replay
            .colls
            .insert(lc.entry.id, ReplayColl::new(lc.entry, state));
    }
    let start = Start {
        segment: 0,
        offset: 0,
        next_sequence: 0,
        segments: loaded.segments,
    };
    Ok((replay, Some(start), loaded.orphans))
}

/// The storage engine of one data directory. Send + Sync; share it with an `Arc`.
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

impl Engine {
    /// Opens (creating if needed) the data directory `dir`.
    pub fn open(dir: &Path, opts: EngineOptions) -> Result<Engine> {
        Engine::open_with_backend(Arc::new(FileBackend::new(dir)?), opts)
    }

    /// Opens an engine over any backend (tests use `SimBackend`).
    pub fn open_with_backend(backend: Arc<dyn Backend>, opts: EngineOptions) -> Result<Engine> {
        backend.lock()?;
        remove_temporaries(backend.as_ref())?;
        let seg_size = opts.segment_size_bytes.max(SEGMENT_SIZE_BYTES_MIN);
        let frames = (opts.cache_size_bytes
            / (crate::btree::PAGE_SIZE_BYTES as u64 + FRAME_OVERHEAD_BYTES))
            as usize;
        let opened_at = Instant::now();
        let (pager, opened) = Pager::open(backend.as_ref(), frames)?;
        if let Some(why) = &opened.fallback_reason {
            tracing::warn!("page file: {why}; opened from the other meta slot");
        }
        let pager = Arc::new(pager);
        let compiler = Some(IndexCompilers {
            filter: opts.partial_filter_compiler.clone(),
            collation: opts.collation_compiler.clone(),
        });
        let pager_ms = opened_at.elapsed().as_millis() as u64;
        let replayed_records;
        // The clock resumes after the newest timestamp of the checkpoint or the replayed log.
        let mut last_timestamp = opened
            .checkpoint
            .as_ref()
            .and_then(|(_, b)| b.get_i64("lastTimestamp").ok())
            .unwrap_or(0) as u64;
        let (collections, next_collection_id, rec) = {
            let blob = opened.checkpoint.as_ref().map(|(_, b)| b);
            let (mut replay, start, orphans) = replay_from(&pager, compiler.as_ref(), blob)?;
            let start = match (start, &opened.checkpoint) {
                (Some(mut s), Some((meta, _))) => {
                    s.segment = meta.log_segment;
                    s.offset = meta.log_offset;
                    s.next_sequence = meta.next_sequence;
                    Some(s)
                }
                _ => None,
            };
            let mut replayed = 0u64;
            let rec = recovery::recover(backend.as_ref(), start.as_ref(), &mut |item| {
                if item.kind == Kind::Stamp
                    && let Ok(s) = crate::record::parse_stamp(item.payload)
                {
                    let n = (s.ops.len() as u64).max(1);
                    last_timestamp = last_timestamp.max(s.timestamp + n - 1);
                }
                if !matches!(
                    item.kind,
                    Kind::BatchBegin | Kind::BatchEnd | Kind::Stamp | Kind::PreImage
                ) {
                    replayed += 1;
                }
                replay.apply(item)
            })?;
            replayed_records = replayed;
            tracing::info!(
                replayed_records = replayed,
                pager_ms,
                replay_ms = opened_at.elapsed().as_millis() as u64 - pager_ms,
                "storage recovered"
            );
            for id in orphans {
                pager.free(id)?;
            }
            let next = replay.next_collection_id;
            (replay, next, rec)
        };
        let log = Arc::new(Log::open(
            backend.clone(),
            seg_size,
            rec.segments,
            rec.tail,
            last_timestamp,
        )?);
        let interval = opts.journal_commit_interval_ms.map(Duration::from_millis);
        let (commit, commit_thread) = Commit::start(log.clone(), interval, rec.last_sequence)?;
        let shared = Arc::new(Shared {
            log,
            commit,
            pager: pager.clone(),
            index_compilers: compiler.clone(),
            stamp: opts.history_bytes.is_some(),
            versions: Arc::new(crate::snapshot::Versions::new(
                crate::limits::SNAPSHOT_HISTORY_BYTES_MAX,
            )),
            applied: std::sync::atomic::AtomicU64::new(rec.last_sequence),
        });
        // Nothing before the open has before-images: older snapshots are refused.
        shared.versions.start(rec.last_sequence, last_timestamp)?;
        let colls = collections.finish(&shared, &backend)?;
        let mut catalog = Catalog {
            next_collection_id,
            ..Catalog::default()
        };
        let mut live: BTreeMap<u64, u64> = BTreeMap::new();
        for c in colls {
            for (seg, bytes) in &c.read()?.segment_bytes {
                *live.entry(*seg).or_default() += bytes;
            }
            let (db, name) = c.namespace();
            catalog.by_name.insert((db, name), c.clone());
            catalog.by_id.insert(c.id, c);
        }
        shared.log.set_live_bytes(&live);
        let inner = Arc::new(Inner {
            shared,
            catalog: RwLock::new(catalog),
            backend,
            segment_size_bytes: seg_size,
            cache_size_bytes: opts.cache_size_bytes,
            checkpoint_interval_ms: opts.checkpoint_interval_ms,
            checkpoint_log_bytes: opts.checkpoint_log_bytes,
            history_bytes: opts.history_bytes,
            threads: Mutex::new(vec![commit_thread]),
            stop: AtomicBool::new(false),
            auto_compact: AtomicBool::new(true),
            maintenance: Mutex::new(()),
            ckpt: CheckpointState {
                count: AtomicU64::new(0),
                last_ms: AtomicU64::new(0),
                running: AtomicBool::new(false),
                log_bytes_at_cut: AtomicU64::new(0),
                last_at: Mutex::new(Instant::now()),
                requested: AtomicBool::new(false),
                compacted: AtomicU64::new(0),
            },
            emptied: Mutex::new(Vec::new()),
            opened: (replayed_records, opened_at.elapsed().as_millis() as u64),
        });
        start_threads(&inner, &opts)?;
        Ok(Engine { inner })
    }

    fn catalog(&self) -> Result<RwLockReadGuard<'_, Catalog>> {
        crate::nowait::read_lock(&self.inner.catalog)
    }
    fn catalog_mut(&self) -> Result<RwLockWriteGuard<'_, Catalog>> {
        self.inner.catalog.write().map_err(|_| lock_err())
    }

    /// Appends catalog records as one batch; the ticket says when they are durable.
    pub(crate) fn log_catalog(&self, ops: &[CatalogOp]) -> Result<Ticket> {
        let recs: Vec<OutRecord> = ops
            .iter()
            .map(|op| OutRecord::whole(Kind::Catalog, op.to_bytes()))
            .collect();
        let (seq, _) = self.inner.shared.log.append(&recs, true)?;
        self.inner.shared.commit.note_written(seq);
        Ok(Ticket::new(&self.inner.shared.commit, seq))
    }

    /// `log_catalog`, stamped for the history when the engine keeps one: `notes[i]` describes
    /// op `i` (notes past the ops describe the batch as a whole).
    pub(crate) fn log_catalog_noted(
        &self,
        ops: &[CatalogOp],
        notes: &[Document],
    ) -> Result<Ticket> {
        if !self.inner.shared.stamp {
            return self.log_catalog(ops);
        }
        let recs: Vec<OutRecord> = ops
            .iter()
            .map(|op| OutRecord::whole(Kind::Catalog, op.to_bytes()))
            .collect();
        let mut details = Document::new();
        for (i, n) in notes.iter().enumerate() {
            details.insert(i.to_string(), n.clone());
        }
        let stamp = crate::log::StampOps {
            ops: vec![crate::record::OP_COMMAND; notes.len().max(ops.len())],
            details: details
                .to_vec()
                .map_err(|e| StorageError::InvalidDocument(format!("stamp details: {e}")))?,
        };
        let (seq, _, timestamp) =
            self.inner
                .shared
                .log
                .append_stamped(&recs, true, Some(&stamp))?;
        self.inner.shared.commit.note_written(seq);
        Ok(Ticket {
            timestamp,
            ..Ticket::new(&self.inner.shared.commit, seq)
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

    /// A handle that finds collections by name without keeping the engine open (see
    /// [`Collections`]).
    pub fn collections_handle(&self) -> Collections {
        Collections(Arc::downgrade(&self.inner))
    }

    /// A read view of every collection as of the last applied write (see `snapshot`).
    pub fn snapshot(&self) -> Result<crate::snapshot::Snapshot> {
        let shared = &self.inner.shared;
        shared
            .versions
            .open(|| shared.applied.load(std::sync::atomic::Ordering::Acquire))
    }

    /// A snapshot as of the last applied write and the newest timestamp it covers (what a
    /// snapshot read reports as its `atClusterTime`; 0 when the engine does not stamp writes).
    pub fn snapshot_now(&self) -> Result<(crate::snapshot::Snapshot, u64)> {
        let shared = &self.inner.shared;
        let mut ts = 0;
        let snap = shared.versions.open(|| {
            // Under the snapshot gate no write is between its append and its apply, so every
            // batch stamped up to here is applied.
            ts = shared.log.last_timestamp();
            shared.applied.load(std::sync::atomic::Ordering::Acquire)
        })?;
        Ok((snap, ts))
    }

    /// A snapshot as of timestamp `ts`: the batches stamped at or before it and none after.
    /// `SnapshotTooOld` when the history that would need is gone (older than the history
    /// window, dropped for memory, or from before the engine opened).
    pub fn snapshot_at(&self, ts: u64) -> Result<crate::snapshot::Snapshot> {
        let shared = &self.inner.shared;
        shared.versions.open_at(ts, || {
            shared.applied.load(std::sync::atomic::Ordering::Acquire)
        })
    }

    /// Keeps every write's before-images for `window`, so snapshots within it can be opened
    /// later (`snapshot_at`); zero keeps them only while a snapshot is open. They stay in
    /// memory, bounded by `limits::SNAPSHOT_HISTORY_BYTES_MAX`.
    pub fn set_history_window(&self, window: std::time::Duration) -> Result<()> {
        self.inner.shared.versions.set_window(window)
    }

    /// (open snapshots, bytes of before-images kept for them).
    pub fn snapshot_stats(&self) -> (usize, usize) {
        self.inner.shared.versions.stats()
    }

    /// Creates `db.name` with its `_id` index; waits until durable.
    pub fn create_collection(
        &self,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<Arc<Collection>> {
        check_namespace(db, name)?;
        if crate::nowait::active() {
            // Creating writes and syncs the catalog: never on a thread that must not block.
            return Err(crate::nowait::refused_error());
        }
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
            indexes: vec![(
                crate::catalog::ID_INDEX_IDENT,
                IndexSpec::id_index_for(&options),
            )],
            next_record_id: 1,
        };
        let shared = &self.inner.shared;
        let state = CollState::new(
            &shared.pager,
            shared.index_compilers.as_ref(),
            entry.indexes[0].1.clone(),
        )?;
        let mut note = ddl_note("create", id, db, name, entry.uuid);
        if !options.is_empty() {
            note.insert("options", options.clone());
        }
        let ticket = self.log_catalog_noted(&[CatalogOp::Create(entry.clone())], &[note])?;
        cat.next_collection_id = id + 1;
        let coll = Arc::new(Collection {
            id,
            uuid: entry.uuid,
            meta: RwLock::new(crate::collection::CollMeta {
                db: db.into(),
                name: name.into(),
                options,
            }),
            state: RwLock::new(state),
            shared: shared.clone(),
            write_ops: Default::default(),
        });
        cat.by_name.insert(key, coll.clone());
        cat.by_id.insert(id, coll.clone());
        drop(cat);
        ticket.wait_durable_blocking()?;
        Ok(coll)
    }

    /// Marks `coll` dropped and frees its pages (caller holds the catalog lock, so no
    /// checkpoint cut sees it half freed).
    fn forget(&self, cat: &mut Catalog, coll: &Arc<Collection>) -> Result<()> {
        let mut st = coll.write_state()?;
        st.dropped = true;
        for b in &st.builds {
            b.cancel();
        }
        let log = &self.inner.shared.log;
        for (seg, bytes) in std::mem::take(&mut st.segment_bytes) {
            log.release_bytes(seg, bytes);
        }
        crate::replay::free_state(&self.inner.shared.pager, &st)?;
        st.indexes.clear();
        st.count = 0;
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
        let mut note = ddl_note("drop", coll.id, db, name, coll.uuid);
        note.insert("count", coll.count() as i64);
        let ticket = self.log_catalog_noted(&[CatalogOp::Drop { id: coll.id }], &[note])?;
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
        let mut notes: Vec<Document> = colls
            .iter()
            .map(|c| {
                let (d, n) = c.namespace();
                let mut note = ddl_note("drop", c.id, &d, &n, c.uuid);
                note.insert("count", c.count() as i64);
                note
            })
            .collect();
        notes.push(bson::doc! { "op": "dropDatabase", "db": db });
        let ticket = self.log_catalog_noted(&ops, &notes)?;
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
        let mut notes = Vec::new();
        let mut rename = ddl_note("rename", src.id, from_db, from, src.uuid);
        rename.insert("toDb", to_db);
        rename.insert("to", to);
        if let Some(t) = &target {
            if !drop_target {
                return Err(StorageError::NamespaceExists(format!("{to_db}.{to}")));
            }
            ops.push(CatalogOp::Drop { id: t.id });
            // The rename's own entry names the target it replaced (as mongod's oplog does).
            let mut note = ddl_note("dropTarget", t.id, to_db, to, t.uuid);
            note.insert("count", t.count() as i64);
            notes.push(note);
            rename.insert("dropTarget", t.uuid);
        }
        ops.push(CatalogOp::Rename {
            id: src.id,
            db: to_db.into(),
            name: to.into(),
        });
        notes.push(rename);
        let ticket = self.log_catalog_noted(&ops, &notes)?;
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

    /// Drops the index `name` (never `_id_`); a build of that name in progress is stopped.
    pub fn drop_index(&self, db: &str, coll: &str, name: &str) -> Result<()> {
        if name == ID_INDEX_NAME {
            return Err(StorageError::InvalidIndex("cannot drop _id index".into()));
        }
        let cat = self.catalog()?;
        let c = cat
            .by_name
            .get(&(db.to_string(), coll.to_string()))
            .cloned()
            .ok_or_else(|| StorageError::NamespaceNotFound(format!("{db}.{coll}")))?;
        let mut st = c.write_state()?;
        let Some(pos) = st.indexes.iter().position(|i| i.spec.name == name) else {
            if let Some(b) = st.builds.iter().find(|b| b.maker.spec.name == name) {
                b.cancel();
                return Ok(());
            }
            return Err(StorageError::IndexNotFound(name.to_string()));
        };
        let mut note = ddl_note("dropIndexes", c.id, db, coll, c.uuid);
        note.insert("spec", st.indexes[pos].spec.to_document());
        let op = CatalogOp::DropIndex {
            id: c.id,
            name: name.into(),
        };
        let ticket = self.log_catalog_noted(&[op], &[note])?;
        let ix = st.indexes.remove(pos);
        crate::replay::free_tree(&self.inner.shared.pager, &ix.tree)?;
        drop(st);
        drop(cat);
        ticket.wait_durable_blocking()
    }

    /// Numbers for serverStatus/dbStats.
    pub fn stats(&self) -> EngineStats {
        let log = &self.inner.shared.log;
        let usage = log.segment_usage();
        let cur = log.current_segment();
        let p = self.inner.shared.pager.stats();
        let page = crate::btree::PAGE_SIZE_BYTES as u64;
        let ck = &self.inner.ckpt;
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
            page_file_bytes: p.page_count * page,
            free_pages: p.free_pages,
            cache: CacheStats {
                bytes_max: self.inner.cache_size_bytes,
                // A frame costs its page and its bookkeeping, as the setting is divided.
                bytes_current: p.frames as u64 * (page + FRAME_OVERHEAD_BYTES),
                bytes_dirty: p.frames_dirty as u64 * page,
                pages_read: p.pages_read,
                pages_written: p.pages_written,
                pages_evicted: p.pages_evicted,
                pages_evicted_dirty: p.pages_evicted_dirty,
            },
            checkpoints: ck.count.load(Ordering::Relaxed),
            checkpoint_last_ms: ck.last_ms.load(Ordering::Relaxed),
            checkpoint_running: ck.running.load(Ordering::Relaxed),
            segments_compacted: ck.compacted.load(Ordering::Relaxed),
            open_replayed_records: self.inner.opened.0,
            open_ms: self.inner.opened.1,
            group_commit: self.inner.shared.commit.stats(),
        }
    }

    /// A durable write on its way (`commit::PendingWriter`): take it when the write starts,
    /// end it with `PendingWriter::sync_if_idle` once written, so the next sync covers it.
    pub fn pending_writer(&self) -> crate::commit::PendingWriter {
        self.inner.shared.commit.pending_writer()
    }

    /// Blocks until everything written so far is durable.
    pub fn flush(&self) -> Result<()> {
        let seq = self.inner.shared.log.last_sequence();
        Ticket::new(&self.inner.shared.commit, seq).wait_durable_blocking()
    }

    /// Clean shutdown: a last checkpoint (the next open replays nothing), stops the threads,
    /// releases the directory lock. Later writes fail.
    pub fn close(&self) -> Result<()> {
        if self.inner.stop.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let mut threads = std::mem::take(&mut *self.inner.threads.lock().map_err(|_| lock_err())?);
        // Background threads stop first so that no compaction pass runs after the checkpoint;
        // the commit thread (first in the list) keeps running until `shutdown`.
        let commit = if threads.is_empty() {
            None
        } else {
            Some(threads.remove(0))
        };
        for t in threads {
            t.thread().unpark();
            let _ = t.join();
        }
        let mut flushed = self.flush();
        if flushed.is_ok() {
            flushed = self.checkpoint().map(|_| ());
        }
        self.inner.shared.log.poison("the engine is closed".into());
        self.inner.shared.commit.shutdown();
        if let Some(t) = commit {
            let _ = t.join();
        }
        self.inner.backend.unlock();
        flushed
    }

    /// Writes a checkpoint now; returns its number.
    pub fn checkpoint(&self) -> Result<u64> {
        let _m = self.inner.maintenance.lock().map_err(|_| lock_err())?;
        let n = checkpoint::take(&self.inner)?;
        after_checkpoint(&self.inner)?;
        Ok(n)
    }

    /// Runs one compaction pass now if the log holds enough dead space (normally the
    /// background thread does this); true if a segment was emptied.
    pub fn compact(&self) -> Result<bool> {
        crate::compact::compact_once(&self.inner, true)
    }

    /// Turns background compaction on or off (`autoCompact`); explicit `compact` calls run
    /// either way. Not kept over a restart, as mongod's is not.
    pub fn set_auto_compact(&self, on: bool) {
        self.inner.auto_compact.store(on, Ordering::Release);
    }

    pub fn auto_compact(&self) -> bool {
        self.inner.auto_compact.load(Ordering::Acquire)
    }

    /// What the background thread does on each wake-up, run now (tests): true if a segment
    /// was emptied.
    pub fn background_compaction_pass(&self) -> Result<bool> {
        background_pass(&self.inner)
    }
}

/// Finds collections by name, like [`Engine::collection`], for a reader that outlives one
/// request (a suspended cursor reading other collections between `getMore`s). It holds the
/// engine weakly: dropping the `Engine` still closes it, and a handle then finds nothing.
#[derive(Clone)]
pub struct Collections(Weak<Inner>);

impl Collections {
    pub fn get(&self, db: &str, name: &str) -> Option<Arc<Collection>> {
        let inner = self.0.upgrade()?;
        let catalog = inner.catalog.read().ok()?;
        catalog
            .by_name
            .get(&(db.to_string(), name.to_string()))
            .cloned()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// What follows a durable checkpoint: segments compaction emptied before both meta slots'
/// cuts are deleted.
pub(crate) fn after_checkpoint(inner: &Inner) -> Result<()> {
    if let Ok(mut at) = inner.ckpt.last_at.lock() {
        *at = Instant::now();
    }
    let oldest = inner.shared.pager.oldest_checkpoint();
    let ready: Vec<u64> = {
        let mut emptied = inner.emptied.lock().map_err(|_| lock_err())?;
        let (ready, wait): (Vec<_>, Vec<_>) = emptied.drain(..).partition(|(_, cut)| *cut < oldest);
        *emptied = wait;
        ready.into_iter().map(|(s, _)| s).collect()
    };
    for seg in ready {
        inner.shared.log.remove_segment(seg)?;
        tracing::debug!(segment = %crate::record::segment_file_name(seg), "compacted segment removed");
    }
    Ok(())
}

fn start_threads(inner: &Arc<Inner>, opts: &EngineOptions) -> Result<()> {
    let spawn = |name: &str, f: fn(Weak<Inner>)| -> Result<()> {
        let weak = Arc::downgrade(inner);
        let t = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(weak))?;
        inner.threads.lock().map_err(|_| lock_err())?.push(t);
        Ok(())
    };
    if opts.preallocate_segments {
        spawn("cairn-prealloc", preallocator)?;
    }
    if opts.background_compaction {
        spawn("cairn-compact", compactor)?;
    }
    spawn("cairn-checkpoint", checkpointer)
}

fn preallocator(inner: Weak<Inner>) {
    // Logged when it starts failing and when it works again, not on every retry.
    let mut failing = false;
    loop {
        crate::thread_idle::thread_idle();
        std::thread::park_timeout(Duration::from_millis(PREALLOCATE_INTERVAL_MS));
        let Some(inner) = inner.upgrade() else { return };
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        match inner.shared.log.prepare_spare() {
            Ok(_) if failing => {
                failing = false;
                tracing::info!("segment preallocation works again");
            }
            Ok(_) => {}
            Err(e) => {
                if !failing {
                    tracing::warn!("segment preallocation failed (retried quietly): {e}");
                }
                failing = true;
                std::thread::park_timeout(Duration::from_millis(COMPACTION_INTERVAL_MS));
            }
        }
    }
}

fn compactor(inner: Weak<Inner>) {
    loop {
        crate::thread_idle::thread_idle();
        std::thread::park_timeout(Duration::from_millis(COMPACTION_INTERVAL_MS));
        let Some(inner) = inner.upgrade() else { return };
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = background_pass(&inner) {
            tracing::warn!("compaction failed: {e}");
        }
    }
}

/// One pass of the background compactor: nothing while `autoCompact` is off.
fn background_pass(inner: &Inner) -> Result<bool> {
    if !inner.auto_compact.load(Ordering::Acquire) {
        return Ok(false);
    }
    crate::compact::compact_once(inner, false)
}

/// Whether a checkpoint is due: the timer, the log volume, or a request.
fn checkpoint_due(inner: &Inner) -> bool {
    let ck = &inner.ckpt;
    if ck.requested.load(Ordering::Acquire) {
        return true;
    }
    let since = ck.last_at.lock().map(|t| t.elapsed()).unwrap_or_default();
    if inner.checkpoint_interval_ms > 0
        && since >= Duration::from_millis(inner.checkpoint_interval_ms)
    {
        return true;
    }
    let logged = inner
        .shared
        .log
        .appended_bytes()
        .saturating_sub(ck.log_bytes_at_cut.load(Ordering::Acquire));
    inner.checkpoint_log_bytes > 0 && logged >= inner.checkpoint_log_bytes
}

fn checkpointer(inner: Weak<Inner>) {
    loop {
        crate::thread_idle::thread_idle();
        std::thread::park_timeout(Duration::from_millis(CHECKPOINT_POLL_MS));
        let Some(inner) = inner.upgrade() else { return };
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        if !checkpoint_due(&inner) {
            continue;
        }
        inner.ckpt.requested.store(false, Ordering::Release);
        let taken = inner
            .maintenance
            .lock()
            .map_err(|_| lock_err())
            .and_then(|_m| checkpoint::take(&inner).and_then(|_| after_checkpoint(&inner)));
        if let Err(e) = taken {
            tracing::warn!("scheduled checkpoint failed: {e}");
            std::thread::park_timeout(Duration::from_millis(COMPACTION_INTERVAL_MS));
        }
    }
}

/// mongod's namespace rules, the parts storage cares about.
/// What the write history says about a catalog change (`record::OP_COMMAND`).
pub(crate) fn ddl_note(op: &str, id: u64, db: &str, coll: &str, uuid: bson::Uuid) -> Document {
    bson::doc! { "op": op, "id": id as i64, "db": db, "coll": coll, "uuid": uuid }
}

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
