//! Index builds that don't stop the collection (mongod's hybrid build). A build registers with
//! the collection (a short write-lock hold), then scans the documents in chunks under the read
//! lock, sorting their keys externally (`extsort`), and bulk-builds a tree from the sorted run.
//! Meanwhile every write to the collection also computes the new index's key changes and appends
//! them, in log order, to the build's side table (memory, spilling to a file past a bound).
//! The builder drains the side table into its tree without the collection lock while it is
//! large, then takes the write lock for the final drain, the unique check and the commit (the
//! `CreateIndex` catalog record is appended under that lock, so every later write maintains the
//! index). Applying the side table in order to the scanned keys gives exactly the keys of the
//! current documents, whatever the scan saw of each document.
//!
//! A checkpoint cut during a build lists the build's pages as orphans (freed by the next open);
//! the builder changes its tree only under `guard`, which the cut also takes, so no page is
//! changed after it is sealed. Unique indexes: equal keys met in the scan or the side table are
//! candidates, re-checked at commit, so a duplicate deleted during the build doesn't fail it.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bson::RawDocument;

use crate::btree::{PageTracker, Tree};
use crate::catalog::CatalogOp;
use crate::collection::{CollState, Collection, Direction, Shared};
use crate::engine::Engine;
use crate::error::{Result, StorageError};
use crate::extsort::{Sorter, SpillLog};
use crate::index::{Index, IndexCompilers, IndexSpec, KeyMaker, entry_key};
use crate::keycode;
use crate::limits::{
    INDEX_BUILD_DRAIN_OPS, INDEX_BUILD_DUPLICATES_MAX, INDEX_BUILD_SCAN_DOCS,
    INDEXES_PER_COLLECTION_MAX,
};
use crate::pager::Pager;

/// One change to a building index: an entry (`key ++ RecordId`) to add or take away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SideOp {
    Insert(Vec<u8>),
    Remove(Vec<u8>),
}

/// An index build in progress.
pub(crate) struct Build {
    pub maker: KeyMaker,
    pub ident: u32,
    pub tracker: PageTracker,
    /// Held by the builder while it changes its tree; a checkpoint cut takes it too.
    pub guard: Mutex<()>,
    side: Mutex<SpillLog>,
    multikey: AtomicBool,
    cancelled: AtomicBool,
    /// A write met a document this index can't hold (e.g. parallel arrays): the build fails.
    failed: Mutex<Option<String>>,
    /// Set (and signalled) when the build has committed or given up.
    finished: (Mutex<bool>, std::sync::Condvar),
}

fn lock_err() -> StorageError {
    StorageError::Poisoned("index build lock poisoned".into())
}

impl Build {
    fn side(&self) -> Result<MutexGuard<'_, SpillLog>> {
        self.side.lock().map_err(|_| lock_err())
    }

    /// The side-table entries of one write (called by writers under the collection lock).
    pub fn side_ops(
        &self,
        rid: u64,
        old: Option<&RawDocument>,
        new: Option<&RawDocument>,
        out: &mut Vec<SideOp>,
    ) -> Result<()> {
        let keys = |d: Option<&RawDocument>| match d {
            Some(d) => self.maker.keys_of(d).map(Some),
            None => Ok(Some((Vec::new(), false))),
        };
        let (old_keys, new_keys) = match (keys(old), keys(new)) {
            (Ok(Some(o)), Ok(Some(n))) => (o.0, n),
            (Err(e), _) | (_, Err(e)) => {
                if let Ok(mut f) = self.failed.lock() {
                    f.get_or_insert(e.to_string());
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        if new_keys.1 {
            self.multikey.store(true, Ordering::Release);
        }
        for k in &old_keys {
            if new_keys.0.binary_search(k).is_err() {
                out.push(SideOp::Remove(entry_key(k, rid)));
            }
        }
        for k in &new_keys.0 {
            if old_keys.binary_search(k).is_err() {
                out.push(SideOp::Insert(entry_key(k, rid)));
            }
        }
        Ok(())
    }

    /// Appends one write's side-table entries.
    pub fn record(&self, ops: Vec<SideOp>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        self.side()?.push(ops)
    }

    fn check(&self) -> Result<()> {
        if self.cancelled.load(Ordering::Acquire) {
            return Err(StorageError::IndexBuildAborted(
                self.maker.spec.name.clone(),
            ));
        }
        if let Some(why) = self.failed.lock().map_err(|_| lock_err())?.clone() {
            return Err(StorageError::InvalidDocument(why));
        }
        Ok(())
    }

    /// Stops the build at its next step (the index or its collection was dropped).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    fn finish(&self) {
        let (done, cond) = &self.finished;
        if let Ok(mut d) = done.lock() {
            *d = true;
        }
        cond.notify_all();
    }

    /// Blocks until the build has committed or given up.
    fn wait_finished(&self) {
        let (done, cond) = &self.finished;
        let Ok(mut d) = done.lock() else { return };
        while !*d {
            d = match cond.wait(d) {
                Ok(g) => g,
                Err(_) => return,
            };
        }
    }
}

/// What `register_build` found.
enum Registered {
    /// The identical index exists: nothing to do.
    Exists,
    /// The identical index is being built by someone else.
    Wait(Arc<Build>),
    /// A new build, registered with the collection.
    Build(Arc<Build>),
}

/// Keys equal to another key seen, for the unique re-check at commit.
struct Duplicates {
    keys: HashSet<Vec<u8>>,
    unique: bool,
}

impl Duplicates {
    fn note(&mut self, maker: &KeyMaker, key: &[u8]) -> Result<()> {
        if self.unique
            && self.keys.insert(key.to_vec())
            && self.keys.len() > INDEX_BUILD_DUPLICATES_MAX
        {
            // Too many to re-check: this build can't end without a duplicate anyway.
            return Err(maker.duplicate(key));
        }
        Ok(())
    }
}

/// Scans `c` and bulk-builds a tree of `maker`'s keys; returns it and whether it is multikey.
#[allow(clippy::too_many_arguments)]
fn build_tree(
    shared: &Shared,
    backend: &Arc<dyn crate::backend::Backend>,
    name: &str,
    c: &Collection,
    maker: &KeyMaker,
    tracker: Option<PageTracker>,
    dups: &mut Duplicates,
    progress: &dyn Fn(u64, u64),
    check: &dyn Fn() -> Result<()>,
) -> Result<(Tree, bool)> {
    let pager = &*shared.pager;
    let mut sorter = Sorter::new(backend.clone(), name);
    let (mut after, mut done, mut multikey) = (None, 0u64, false);
    loop {
        check()?;
        let (chunk, total) = {
            let st = c.read()?;
            if st.dropped {
                return Err(StorageError::NamespaceNotFound(c.namespace().0));
            }
            let locs = st.locs(pager, Direction::Forward, after, INDEX_BUILD_SCAN_DOCS)?;
            let only: Vec<_> = locs.iter().map(|(_, l)| *l).collect();
            let docs = shared.log.read_documents(&only)?;
            let rids: Vec<u64> = locs.iter().map(|(r, _)| *r).collect();
            (rids.into_iter().zip(docs).collect::<Vec<_>>(), st.count)
        };
        let Some(last) = chunk.last() else { break };
        after = Some(last.0);
        for (rid, doc) in &chunk {
            let (keys, mk) = maker.keys_of(doc)?;
            multikey |= mk;
            for k in keys {
                sorter.push(entry_key(&k, *rid))?;
            }
        }
        done += chunk.len() as u64;
        progress(done, total.max(done));
    }
    // The scan is over: report it whole, whatever was deleted meanwhile.
    progress(done, done);
    let mut previous: Option<Vec<u8>> = None;
    let entries = sorter.finish()?.map(|e| {
        let e = e?;
        let key = keycode::split_record_id(&e).0.to_vec();
        if previous.as_ref() == Some(&key) {
            dups.note(maker, &key)?;
        }
        previous = Some(key);
        Ok((e, Vec::new()))
    });
    let tree = Tree::bulk_build(pager, entries, tracker)?;
    Ok((tree, multikey))
}

fn apply_side(
    pager: &Pager,
    tree: &mut Tree,
    ops: Vec<SideOp>,
    maker: &KeyMaker,
    dups: &mut Duplicates,
) -> Result<()> {
    for op in ops {
        match op {
            SideOp::Insert(e) => {
                tree.insert(pager, &e, &[])?;
                if dups.unique {
                    let key = keycode::split_record_id(&e).0;
                    if count_key(pager, tree, key, 2)? > 1 {
                        dups.note(maker, key)?;
                    }
                }
            }
            SideOp::Remove(e) => {
                tree.remove(pager, &e)?;
            }
        }
    }
    Ok(())
}

/// Entries with `key`, counting up to `max`.
fn count_key(pager: &Pager, tree: &Tree, key: &[u8], max: usize) -> Result<usize> {
    let (lo, hi) = (entry_key(key, 0), entry_key(key, u64::MAX));
    let mut n = 0;
    tree.scan(
        pager,
        Bound::Included(&lo),
        Bound::Included(&hi),
        false,
        &mut |_, _| {
            n += 1;
            Ok(n < max)
        },
    )?;
    Ok(n)
}

impl Engine {
    /// Builds an index over the existing documents while reads and writes go on, then commits
    /// and logs it. An identical existing index is a no-op.
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
        let build = loop {
            match self.register_build(&c, &spec)? {
                Registered::Exists => return Ok(()),
                // The same index is being built: its outcome is ours (mongod waits too).
                Registered::Wait(other) => other.wait_finished(),
                Registered::Build(b) => break b,
            }
        };
        let committed = self.run_build(&c, &build, progress);
        let outcome = match committed {
            Ok(ticket) => {
                self.inner.ckpt.requested.store(true, Ordering::Release);
                ticket.wait_durable_blocking()
            }
            Err(e) => {
                self.abandon_build(&c, &build);
                Err(e)
            }
        };
        build.finish();
        outcome
    }

    fn register_build(&self, c: &Collection, spec: &IndexSpec) -> Result<Registered> {
        let spec = spec.clone();
        let mut st = c.write_state()?;
        if st.dropped {
            return Err(StorageError::NamespaceNotFound(c.namespace().0));
        }
        if let Some(ix) = st.index(&spec.name) {
            return if ix.spec == spec {
                Ok(Registered::Exists)
            } else {
                Err(StorageError::IndexExists(spec.name))
            };
        }
        if let Some(b) = st.builds.iter().find(|b| b.maker.spec == spec) {
            return Ok(Registered::Wait(b.clone()));
        }
        if let Some(ix) = st.indexes.iter().find(|i| i.spec.same_key(&spec)) {
            return Err(StorageError::IndexKeyExists(ix.spec.name.clone()));
        }
        if st
            .builds
            .iter()
            .any(|b| b.maker.spec.name == spec.name || b.maker.spec.key == spec.key)
        {
            return Err(StorageError::IndexBuildInProgress(spec.name));
        }
        if st.indexes.len() + st.builds.len() >= INDEXES_PER_COLLECTION_MAX {
            return Err(StorageError::LimitExceeded(format!(
                "at most {INDEXES_PER_COLLECTION_MAX} indexes"
            )));
        }
        let ident = st.next_index_ident;
        st.next_index_ident += 1;
        let side_name = format!("tmp-side-{}-{ident}", c.id);
        let build = Arc::new(Build {
            maker: KeyMaker::new(spec, self.inner.shared.index_compilers.as_ref())?,
            ident,
            tracker: PageTracker::default(),
            guard: Mutex::new(()),
            side: Mutex::new(SpillLog::new(self.inner.backend.clone(), side_name)),
            multikey: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            failed: Mutex::new(None),
            finished: (Mutex::new(false), std::sync::Condvar::new()),
        });
        st.builds.push(build.clone());
        Ok(Registered::Build(build))
    }

    /// Scan, bulk build, drain, commit. Returns the ticket of the catalog record.
    fn run_build(
        &self,
        c: &Collection,
        b: &Build,
        progress: &dyn Fn(u64, u64),
    ) -> Result<crate::commit::Ticket> {
        let shared = &self.inner.shared;
        let pager = &*shared.pager;
        let mut dups = Duplicates {
            keys: HashSet::new(),
            unique: b.maker.spec.unique,
        };
        let (mut tree, multikey) = build_tree(
            shared,
            &self.inner.backend,
            &format!("tmp-build-{}-{}", c.id, b.ident),
            c,
            &b.maker,
            Some(b.tracker.clone()),
            &mut dups,
            progress,
            &|| b.check(),
        )?;
        // Catch up without the collection lock while writers keep the side table busy.
        loop {
            b.check()?;
            let ops = b.side()?.take(INDEX_BUILD_DRAIN_OPS)?;
            let n = ops.len();
            let _g = b.guard.lock().map_err(|_| lock_err())?;
            apply_side(pager, &mut tree, ops, &b.maker, &mut dups)?;
            if n < INDEX_BUILD_DRAIN_OPS {
                break;
            }
        }
        let mut st = c.write_state()?;
        if st.dropped {
            return Err(StorageError::NamespaceNotFound(c.namespace().0));
        }
        b.check()?;
        {
            let _g = b.guard.lock().map_err(|_| lock_err())?;
            loop {
                let ops = b.side()?.take(INDEX_BUILD_DRAIN_OPS)?;
                if ops.is_empty() {
                    break;
                }
                apply_side(pager, &mut tree, ops, &b.maker, &mut dups)?;
            }
        }
        for key in &dups.keys {
            if count_key(pager, &tree, key, 2)? > 1 {
                return Err(b.maker.duplicate(key));
            }
        }
        tree.tracker = None;
        let spec = b.maker.spec.clone();
        let mut ix = Index::new(spec.clone(), b.ident, shared.index_compilers.as_ref(), tree)?;
        ix.multikey = multikey || b.multikey.load(Ordering::Acquire);
        let (db, name) = c.namespace();
        let mut note = crate::engine::ddl_note("createIndexes", c.id, &db, &name, c.uuid);
        note.insert("spec", spec.to_document());
        let op = CatalogOp::CreateIndex {
            id: c.id,
            ident: b.ident,
            spec,
        };
        let ticket = self.log_catalog_noted(&[op], &[note])?;
        st.builds.retain(|x| !std::ptr::eq(&**x, b));
        st.indexes.push(ix);
        Ok(ticket)
    }

    /// Forgets a failed build and frees its pages.
    fn abandon_build(&self, c: &Collection, b: &Arc<Build>) {
        let Ok(mut st) = c.write_state() else { return };
        st.builds.retain(|x| !Arc::ptr_eq(x, b));
        let _g = b.guard.lock();
        for id in b.tracker.pages() {
            if let Err(e) = self.inner.shared.pager.free(id) {
                tracing::warn!("freeing an abandoned index build's page failed: {e}");
            }
        }
    }
}

/// After replay: builds the trees of indexes created in the replayed tail.
pub(crate) fn rebuild(
    c: &Collection,
    idents: &HashSet<u32>,
    backend: &Arc<dyn crate::backend::Backend>,
    compiler: Option<&IndexCompilers>,
) -> Result<()> {
    let shared = &c.shared;
    let specs: Vec<(u32, IndexSpec)> = c
        .read()?
        .indexes
        .iter()
        .filter(|i| idents.contains(&i.ident))
        .map(|i| (i.ident, i.spec.clone()))
        .collect();
    for (ident, spec) in specs {
        tracing::info!(index = %spec.name, "rebuilding an index created after the last checkpoint");
        let maker = KeyMaker::new(spec.clone(), compiler)?;
        let mut dups = Duplicates {
            keys: HashSet::new(),
            unique: false,
        };
        let name = format!("tmp-build-{}-{ident}", c.id);
        let (tree, multikey) = build_tree(
            shared,
            backend,
            &name,
            c,
            &maker,
            None,
            &mut dups,
            &|_, _| {},
            &|| Ok(()),
        )?;
        let mut st = c.write_state()?;
        replace_tree(&shared.pager, &mut st, ident, tree, multikey)?;
    }
    Ok(())
}

fn replace_tree(
    pager: &Pager,
    st: &mut CollState,
    ident: u32,
    tree: Tree,
    multikey: bool,
) -> Result<()> {
    if let Some(ix) = st.indexes.iter_mut().find(|i| i.ident == ident) {
        let old = std::mem::replace(&mut ix.tree, tree);
        ix.multikey = multikey;
        crate::replay::free_tree(pager, &old)?;
    }
    Ok(())
}
