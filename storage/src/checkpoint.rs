//! Checkpoints: the cut, the blob, and the write. The cut runs under the catalog lock and every
//! collection's read lock (so no write batch is half applied) plus every running index build's
//! guard; it records what the blob needs (catalog, tree roots and counters, per-segment byte
//! counts, the pages of unfinished index builds) and the log position, and seals the pager's
//! fresh pages. Then, with no lock held, the log is made durable up to the cut, the sealed pages
//! and the blob are written, synced, and the meta slot flips (`Pager::write_cut`). A checkpoint
//! costs what changed since the previous one.
//!
//! Blob layout (a BSON document; the pager adds `free` and `pending`): `format`,
//! `nextCollectionId`, `segments` (`[id, used bytes]` each), `collections` (each: `entry` as
//! logged by `catalog`, `count`, `dataBytes`, `nextIndexIdent`, `segmentBytes` (`[segment,
//! bytes]` of its current records), `records` and per index `trees` with `{root, len, pages,
//! overflowKeys}`, `ident` and `multikey`), `orphans` (pages of index builds not yet committed,
//! freed by the next open).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};

use crate::btree::Tree;
use crate::catalog::CatalogEntry;
use crate::collection::{CollState, Collection};
use crate::commit::Ticket;
use crate::engine::Inner;
use crate::error::{Result, StorageError};
use crate::limits::{CHECKPOINT_LOG_WAIT_MS, LOG_RETRY_BACKOFF_MS_MIN};
use crate::pager::PageId;

pub const BLOB_FORMAT: i64 = 1;

/// Where log replay resumes after a checkpoint.
pub(crate) struct Start {
    pub segment: u64,
    pub offset: u64,
    pub next_sequence: u64,
    /// Used bytes of every segment as of the cut.
    pub segments: HashMap<u64, u64>,
}

fn tree_doc(t: &Tree) -> Document {
    doc! {
        "root": i64::from(t.root),
        "len": t.len as i64,
        "pages": t.pages as i64,
        "overflowKeys": t.overflow_keys as i64,
    }
}

fn bad(what: &str) -> StorageError {
    StorageError::corruption(
        crate::pager::PAGE_FILE_NAME,
        0,
        format!("checkpoint blob: {what}"),
    )
}

fn get_u64(d: &Document, key: &str) -> Result<u64> {
    d.get_i64(key)
        .ok()
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| bad(key))
}

pub(crate) fn tree_from(d: &Document) -> Result<Tree> {
    Ok(Tree {
        root: PageId::try_from(get_u64(d, "root")?).map_err(|_| bad("root"))?,
        len: get_u64(d, "len")?,
        pages: get_u64(d, "pages")?,
        overflow_keys: get_u64(d, "overflowKeys")?,
        tracker: None,
    })
}

/// One collection's blob entry.
fn collection_doc(c: &Collection, st: &CollState) -> Result<Document> {
    let meta = c
        .meta
        .read()
        .map_err(|_| StorageError::Poisoned("meta lock poisoned".into()))?
        .clone();
    let entry = CatalogEntry {
        id: c.id,
        db: meta.db,
        name: meta.name,
        uuid: c.uuid,
        options: meta.options,
        indexes: st
            .indexes
            .iter()
            .map(|i| (i.ident, i.spec.clone()))
            .collect(),
        next_record_id: st.next_record_id,
    };
    let trees: Vec<Bson> = st
        .indexes
        .iter()
        .map(|i| {
            let mut d = tree_doc(&i.tree);
            d.insert("ident", i64::from(i.ident));
            d.insert("multikey", i.multikey);
            Bson::Document(d)
        })
        .collect();
    let segment_bytes: Vec<Bson> = st
        .segment_bytes
        .iter()
        .map(|(s, b)| Bson::Array(vec![Bson::Int64(*s as i64), Bson::Int64(*b as i64)]))
        .collect();
    Ok(doc! {
        "entry": entry.to_document(),
        "segmentBytes": segment_bytes,
        "count": st.count as i64,
        "dataBytes": st.data_bytes as i64,
        "nextIndexIdent": i64::from(st.next_index_ident),
        "records": tree_doc(&st.records),
        "trees": trees,
    })
}

/// A collection as the blob holds it.
pub(crate) struct LoadedCollection {
    pub entry: CatalogEntry,
    pub count: u64,
    pub data_bytes: u64,
    pub next_index_ident: u32,
    pub segment_bytes: std::collections::BTreeMap<u64, u64>,
    pub records: Tree,
    /// ident -> (tree, multikey)
    pub trees: HashMap<u32, (Tree, bool)>,
}

/// What a checkpoint blob says.
pub(crate) struct Loaded {
    pub next_collection_id: u64,
    pub collections: Vec<LoadedCollection>,
    pub orphans: Vec<PageId>,
    pub segments: HashMap<u64, u64>,
}

/// `[[a, b], ...]` of non-negative int64 pairs.
fn pairs(d: &Document, key: &str) -> Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    for s in d.get_array(key).map_err(|_| bad(key))? {
        let Bson::Array(a) = s else {
            return Err(bad(key));
        };
        let n = |i: usize| match a.get(i) {
            Some(Bson::Int64(v)) => u64::try_from(*v).map_err(|_| bad(key)),
            _ => Err(bad(key)),
        };
        out.push((n(0)?, n(1)?));
    }
    Ok(out)
}

pub(crate) fn parse_blob(d: &Document) -> Result<Loaded> {
    if d.get_i64("format").ok() != Some(BLOB_FORMAT) {
        return Err(bad("unknown format"));
    }
    let segments = pairs(d, "segments")?.into_iter().collect();
    let mut collections = Vec::new();
    for c in d.get_array("collections").map_err(|_| bad("collections"))? {
        let Bson::Document(c) = c else {
            return Err(bad("collection"));
        };
        let entry =
            CatalogEntry::from_document(c.get_document("entry").map_err(|_| bad("entry"))?)?;
        let mut trees = HashMap::new();
        for t in c.get_array("trees").map_err(|_| bad("trees"))? {
            let Bson::Document(t) = t else {
                return Err(bad("tree"));
            };
            let ident = u32::try_from(get_u64(t, "ident")?).map_err(|_| bad("ident"))?;
            trees.insert(
                ident,
                (tree_from(t)?, t.get_bool("multikey").unwrap_or(false)),
            );
        }
        collections.push(LoadedCollection {
            entry,
            count: get_u64(c, "count")?,
            data_bytes: get_u64(c, "dataBytes")?,
            next_index_ident: u32::try_from(get_u64(c, "nextIndexIdent")?)
                .map_err(|_| bad("nextIndexIdent"))?,
            segment_bytes: pairs(c, "segmentBytes")?.into_iter().collect(),
            records: tree_from(c.get_document("records").map_err(|_| bad("records"))?)?,
            trees,
        });
    }
    let orphans = match d.get("orphans") {
        Some(Bson::Binary(b)) if b.bytes.len() % 4 == 0 => b
            .bytes
            .chunks_exact(4)
            .map(|c| PageId::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        _ => return Err(bad("orphans")),
    };
    Ok(Loaded {
        next_collection_id: get_u64(d, "nextCollectionId")?,
        collections,
        orphans,
        segments,
    })
}

/// Takes a checkpoint now; returns its number. The caller holds `maintenance`.
pub(crate) fn take(inner: &Inner) -> Result<u64> {
    // Nothing is cut while the log cannot be written (a cut may not outrun the durable log);
    // the next due checkpoint tries again.
    if let Some(e) = inner.shared.log.damaged() {
        return Err(e);
    }
    let started = Instant::now();
    inner.ckpt.running.store(true, Ordering::Release);
    let result = cut_and_write(inner);
    inner.ckpt.running.store(false, Ordering::Release);
    if let Err(e) = &result {
        // The page file's state after a failed write or sync is unknown: stop writes; a
        // restart opens from the last durable checkpoint and the log.
        tracing::error!("checkpoint failed: {e}");
        inner.shared.log.poison(format!("a checkpoint failed: {e}"));
    }
    let number = result?;
    let ms = started.elapsed().as_millis() as u64;
    inner.ckpt.count.fetch_add(1, Ordering::Relaxed);
    inner.ckpt.last_ms.store(ms, Ordering::Relaxed);
    tracing::debug!(checkpoint = number, ms, "checkpoint written");
    Ok(number)
}

fn cut_and_write(inner: &Inner) -> Result<u64> {
    let lock = || StorageError::Poisoned("lock poisoned".into());
    let cat = inner.catalog.read().map_err(|_| lock())?;
    let colls: Vec<Arc<Collection>> = cat.by_id.values().cloned().collect();
    let mut guards = Vec::with_capacity(colls.len());
    for c in &colls {
        guards.push(c.read()?);
    }
    let mut build_guards = Vec::new();
    let mut orphans = Vec::new();
    for st in &guards {
        for b in &st.builds {
            build_guards.push(b.guard.lock().map_err(|_| lock())?);
            orphans.extend(b.tracker.pages());
        }
    }
    // Every appended data record is applied while we hold all collection read locks.
    let (segment, offset, next_sequence) = inner.shared.log.position()?;
    let mut collections = Vec::with_capacity(colls.len());
    for (c, st) in colls.iter().zip(&guards) {
        collections.push(Bson::Document(collection_doc(c, st)?));
    }
    let segments: Vec<Bson> = inner
        .shared
        .log
        .segment_usage()
        .into_iter()
        .map(|(id, used, _)| Bson::Array(vec![Bson::Int64(id as i64), Bson::Int64(used as i64)]))
        .collect();
    let mut orphan_bytes = Vec::with_capacity(orphans.len() * 4);
    for id in &orphans {
        orphan_bytes.extend_from_slice(&id.to_le_bytes());
    }
    let blob = doc! {
        "format": BLOB_FORMAT,
        "nextCollectionId": cat.next_collection_id as i64,
        "segments": segments,
        "collections": collections,
        "orphans": Binary { subtype: BinarySubtype::Generic, bytes: orphan_bytes },
        "lastTimestamp": inner.shared.log.last_timestamp() as i64,
    };
    let cut = inner
        .shared
        .pager
        .cut(blob, (segment, offset, next_sequence))?;
    inner
        .ckpt
        .log_bytes_at_cut
        .store(inner.shared.log.appended_bytes(), Ordering::Release);
    drop(build_guards);
    drop(guards);
    drop(cat);
    // The checkpoint may not run ahead of the durable log. The cut is made (its pages are
    // sealed), so a log failure now is waited out for a while: the commit thread's retries
    // repair the log once the disk has room again.
    let ticket = Ticket::new(&inner.shared.commit, next_sequence - 1);
    let waited = Instant::now();
    loop {
        match ticket.wait_durable_blocking() {
            Ok(()) => break,
            Err(StorageError::LogUnavailable { .. })
                if waited.elapsed() < Duration::from_millis(CHECKPOINT_LOG_WAIT_MS) =>
            {
                std::thread::sleep(Duration::from_millis(LOG_RETRY_BACKOFF_MS_MIN));
            }
            Err(e) => return Err(e),
        }
    }
    inner.shared.pager.write_cut(&cut)?;
    let number = cut.meta.checkpoint;
    inner.shared.pager.finish_cut(cut)?;
    Ok(number)
}
