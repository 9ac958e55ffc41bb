//! Snapshots: a read view of every collection as it was after one commit sequence, while writers
//! go on. Page roots only move at checkpoints, so a snapshot is not a set of roots; it is the
//! sequence `t` it was taken at plus the before-images that writes after `t` leave behind.
//!
//! Rules (the invariants the rest relies on):
//! - A snapshot is taken under the write side of `gate`; every `write_across` holds the read side
//!   from its planning to its last record-tree change. So at a snapshot's sequence `t` every batch
//!   numbered `<= t` is applied and none above it is.
//! - A batch numbered `s` keeps, for each RecordId it touches, the version before it (its body,
//!   or "absent" for an insert), but only while some snapshot is open (every open snapshot then
//!   has `t < s`). Images are recorded under the collection's write lock, and snapshot reads
//!   look at images and the current record under the read lock, so a reader never sees a new
//!   version without its image.
//! - The version of RecordId `r` at `t` is the earliest image of `r` newer than `t`, else the
//!   current record.
//! - Images no open snapshot can need (sequence `<=` the oldest open `t`) are dropped when that
//!   snapshot closes. Their bodies are kept in memory, so log compaction never frees one.
//! - Memory is bounded by `bytes_max`: past it the oldest images go, and a snapshot older than
//!   what is left fails its reads with `SnapshotTooOld` rather than read a wrong version.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use bson::RawDocumentBuf;

use crate::collection::{Collection, Direction, RecordId};
use crate::error::{Result, StorageError};
use crate::limits::SCAN_BATCH_COUNT_MAX;
use crate::log::Loc;

/// One version of a record: its body, or `None` when it did not exist.
pub(crate) type Body = Option<Arc<RawDocumentBuf>>;

/// Bytes an image counts for beyond its body (map entries, the sequence index).
const IMAGE_OVERHEAD_BYTES: usize = 64;

#[derive(Default)]
struct Inner {
    /// Open snapshots: sequence -> how many are open at it.
    open: BTreeMap<u64, usize>,
    /// Collection id -> RecordId -> images in increasing sequence order.
    images: HashMap<u64, BTreeMap<RecordId, Vec<(u64, Body)>>>,
    /// Sequence -> the (collection, RecordId) images it left (for pruning oldest first).
    by_seq: BTreeMap<u64, Vec<(u64, RecordId)>>,
    bytes: usize,
    /// Images of batches numbered `<=` this were dropped for memory.
    lost_through: u64,
}

/// The engine-wide registry of open snapshots and the before-images they need.
pub(crate) struct Versions {
    gate: RwLock<()>,
    inner: Mutex<Inner>,
    bytes_max: usize,
}

fn lock_err() -> StorageError {
    StorageError::Poisoned("snapshot registry lock poisoned".into())
}

fn image_bytes(body: &Body) -> usize {
    IMAGE_OVERHEAD_BYTES + body.as_ref().map_or(0, |b| b.as_bytes().len())
}

/// A read view at one commit sequence; dropping it lets the images it needed go.
pub struct Snapshot {
    seq: u64,
    versions: Arc<Versions>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.seq).finish()
    }
}

impl Snapshot {
    /// The commit sequence this snapshot sees up to (inclusive).
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    pub(crate) fn versions(&self) -> &Arc<Versions> {
        &self.versions
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.versions.close(self.seq);
    }
}

/// One step of a snapshot scan: documents with their RecordIds, and where to resume (None:
/// the scan is done).
pub type ScanStep = (Vec<(RecordId, RawDocumentBuf)>, Option<RecordId>);

/// How a snapshot sees one RecordId.
pub(crate) enum Seen {
    /// As it is now.
    Current,
    /// As this image (None: absent).
    Then(Body),
}

impl Versions {
    pub fn new(bytes_max: usize) -> Versions {
        Versions {
            gate: RwLock::new(()),
            inner: Mutex::new(Inner::default()),
            bytes_max,
        }
    }

    fn inner(&self) -> Result<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| lock_err())
    }

    /// Held by a write from planning to applying, so no snapshot falls inside it. Take it after
    /// the collection locks (a snapshot taker holds no collection lock, so no cycle).
    pub fn writing(&self) -> Result<RwLockReadGuard<'_, ()>> {
        self.gate.read().map_err(|_| lock_err())
    }

    /// Opens a snapshot at `applied`, the last sequence a write applied. Called by the engine,
    /// which reads `applied` under the gate.
    pub fn open(self: &Arc<Self>, applied: impl FnOnce() -> u64) -> Result<Snapshot> {
        let _gate = self.gate.write().map_err(|_| lock_err())?;
        let seq = applied();
        *self.inner()?.open.entry(seq).or_default() += 1;
        Ok(Snapshot {
            seq,
            versions: self.clone(),
        })
    }

    fn close(&self, seq: u64) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let Some(n) = inner.open.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                inner.open.remove(&seq);
            }
        }
        let keep_after = inner.open.keys().next().copied();
        inner.prune(keep_after);
    }

    /// Whether a write must keep before-images (some snapshot is open). Ask while `writing`.
    pub fn keeping(&self) -> Result<bool> {
        Ok(!self.inner()?.open.is_empty())
    }

    /// Open snapshots and the bytes of images kept for them.
    pub fn stats(&self) -> (usize, usize) {
        self.inner
            .lock()
            .map(|i| (i.open.values().sum(), i.bytes))
            .unwrap_or_default()
    }

    /// Records what batch `seq` replaced in collection `coll`: the first version of each
    /// RecordId it touched. Call under the collection's write lock, before it is applied.
    pub fn record(&self, coll: u64, seq: u64, befores: Vec<(RecordId, Body)>) -> Result<()> {
        if befores.is_empty() {
            return Ok(());
        }
        let mut inner = self.inner()?;
        let inner = &mut *inner;
        let rids = inner.by_seq.entry(seq).or_default();
        let per = inner.images.entry(coll).or_default();
        for (rid, body) in befores {
            inner.bytes += image_bytes(&body);
            per.entry(rid).or_default().push((seq, body));
            rids.push((coll, rid));
        }
        while inner.bytes > self.bytes_max {
            let Some((&oldest, _)) = inner.by_seq.iter().next() else {
                break;
            };
            inner.lost_through = inner.lost_through.max(oldest);
            inner.prune(Some(oldest));
        }
        Ok(())
    }

    fn check_age(inner: &Inner, at: u64) -> Result<()> {
        if at < inner.lost_through {
            return Err(StorageError::SnapshotTooOld(format!(
                "the snapshot at {at} needs history that was dropped to stay within memory"
            )));
        }
        Ok(())
    }

    /// How the snapshot at `at` sees `rid` of `coll`. Call under the collection's read lock.
    pub fn seen(&self, coll: u64, rid: RecordId, at: u64) -> Result<Seen> {
        let inner = self.inner()?;
        Self::check_age(&inner, at)?;
        let image = inner
            .images
            .get(&coll)
            .and_then(|m| m.get(&rid))
            .and_then(|v| v.iter().find(|(s, _)| *s > at));
        Ok(match image {
            Some((_, body)) => Seen::Then(body.clone()),
            None => Seen::Current,
        })
    }

    /// Whether a batch after `at` changed `rid` of `coll`.
    pub fn changed_after(&self, coll: u64, rid: RecordId, at: u64) -> Result<bool> {
        Ok(matches!(self.seen(coll, rid, at)?, Seen::Then(_)))
    }

    /// RecordIds of `coll` inside `(lo, hi)` that a batch after `at` changed, in order.
    pub fn changed_in(
        &self,
        coll: u64,
        at: u64,
        lo: Bound<RecordId>,
        hi: Bound<RecordId>,
    ) -> Result<Vec<RecordId>> {
        let inner = self.inner()?;
        Self::check_age(&inner, at)?;
        let Some(m) = inner.images.get(&coll) else {
            return Ok(Vec::new());
        };
        Ok(m.range((lo, hi))
            .filter(|(_, v)| v.last().is_some_and(|(s, _)| *s > at))
            .map(|(rid, _)| *rid)
            .collect())
    }
}

impl Inner {
    /// Drops every image numbered `<= through` (all of them when `None`: no snapshot is open).
    fn prune(&mut self, through: Option<u64>) {
        let Some(through) = through else {
            self.images.clear();
            self.by_seq.clear();
            self.bytes = 0;
            return;
        };
        while let Some(entry) = self.by_seq.first_entry() {
            if *entry.key() > through {
                break;
            }
            let (seq, rids) = entry.remove_entry();
            for (coll, rid) in rids {
                let Some(per) = self.images.get_mut(&coll) else {
                    continue;
                };
                if let Some(v) = per.get_mut(&rid) {
                    // Images are in sequence order, so this batch's is among the first.
                    if let Some(i) = v.iter().position(|(s, _)| *s == seq) {
                        let (_, body) = v.remove(i);
                        self.bytes = self.bytes.saturating_sub(image_bytes(&body));
                    }
                    if v.is_empty() {
                        per.remove(&rid);
                    }
                }
                if per.is_empty() {
                    self.images.remove(&coll);
                }
            }
        }
    }
}

impl Collection {
    fn check_engine(&self, snap: &Snapshot) -> Result<()> {
        if Arc::ptr_eq(&snap.versions, &self.shared.versions) {
            Ok(())
        } else {
            Err(StorageError::InvalidNamespace(
                "a snapshot of another engine".into(),
            ))
        }
    }

    /// The document `rid` as the snapshot sees it.
    pub fn get_at(&self, snap: &Snapshot, rid: RecordId) -> Result<Option<RawDocumentBuf>> {
        self.check_engine(snap)?;
        let st = self.read()?;
        if st.dropped {
            return Ok(None);
        }
        match snap.versions.seen(self.id, rid, snap.seq)? {
            Seen::Then(body) => Ok(body.map(|b| (*b).clone())),
            Seen::Current => match st.loc(&self.shared.pager, rid)? {
                Some(loc) => Ok(Some(self.shared.log.read_document(loc)?)),
                None => Ok(None),
            },
        }
    }

    /// Whether a write committed after the snapshot changed `rid` (a transaction writing it
    /// would lose that update).
    pub fn changed_after(&self, snap: &Snapshot, rid: RecordId) -> Result<bool> {
        self.check_engine(snap)?;
        let _st = self.read()?;
        snap.versions.changed_after(self.id, rid, snap.seq)
    }

    /// The RecordIds that writes committed after the snapshot changed (what an index scan in
    /// the snapshot must look at besides the entries it finds now), in order.
    pub fn changed_since(&self, snap: &Snapshot) -> Result<Vec<RecordId>> {
        self.check_engine(snap)?;
        let _st = self.read()?;
        snap.versions
            .changed_in(self.id, snap.seq, Bound::Unbounded, Bound::Unbounded)
    }

    /// One step of a scan in RecordId order as the snapshot sees the collection: the documents
    /// strictly after `after` among the next `limit` current records and the records changed
    /// since the snapshot in the same range, and where to resume (None: the scan is done). A
    /// step may return no document and still not be the last.
    pub fn scan_at(
        &self,
        snap: &Snapshot,
        direction: Direction,
        after: Option<RecordId>,
        limit: usize,
    ) -> Result<ScanStep> {
        self.check_engine(snap)?;
        let limit = limit.clamp(1, SCAN_BATCH_COUNT_MAX);
        let st = self.read()?;
        if st.dropped {
            return Ok((Vec::new(), None));
        }
        let locs = st.locs(&self.shared.pager, direction, after, limit)?;
        let edge = if locs.len() == limit {
            locs.last().map(|(rid, _)| *rid)
        } else {
            None
        };
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let end = edge.map_or(Bound::Unbounded, Bound::Included);
        let (lo, hi) = match direction {
            Direction::Forward => (start, end),
            Direction::Backward => (end, start),
        };
        let changed = snap.versions.changed_in(self.id, snap.seq, lo, hi)?;
        let current: HashMap<RecordId, Loc> = locs.into_iter().collect();
        let mut rids: Vec<RecordId> = current.keys().copied().chain(changed).collect();
        rids.sort_unstable();
        rids.dedup();
        if direction == Direction::Backward {
            rids.reverse();
        }
        let mut out = Vec::with_capacity(rids.len());
        for rid in rids {
            match snap.versions.seen(self.id, rid, snap.seq)? {
                Seen::Then(Some(body)) => out.push((rid, (*body).clone())),
                Seen::Then(None) => {}
                Seen::Current => {
                    if let Some(loc) = current.get(&rid) {
                        out.push((rid, self.shared.log.read_document(*loc)?));
                    }
                }
            }
        }
        Ok((out, edge))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: i32) -> Body {
        Some(Arc::new(
            RawDocumentBuf::try_from(&bson::doc! {"v": v}).expect("encodes"),
        ))
    }

    fn v_of(s: Seen) -> Option<i32> {
        match s {
            Seen::Current => Some(-1),
            Seen::Then(b) => b.map(|d| d.get_i32("v").expect("v")),
        }
    }

    #[test]
    fn earliest_newer_image_wins_and_closing_prunes() {
        let v = Arc::new(Versions::new(1 << 20));
        let s5 = v.open(|| 5).expect("open");
        v.record(1, 6, vec![(10, body(1))]).expect("record");
        let s6 = v.open(|| 6).expect("open");
        v.record(1, 7, vec![(10, body(2)), (11, None)])
            .expect("record");
        assert_eq!(v_of(v.seen(1, 10, 5).expect("seen")), Some(1));
        assert_eq!(v_of(v.seen(1, 10, 6).expect("seen")), Some(2));
        assert_eq!(v_of(v.seen(1, 11, 6).expect("seen")), None);
        assert_eq!(v_of(v.seen(1, 10, 7).expect("seen")), Some(-1));
        assert_eq!(
            v.changed_in(1, 5, Bound::Unbounded, Bound::Unbounded)
                .expect("changed"),
            vec![10, 11]
        );
        drop(s5);
        // The image of batch 6 is only for snapshots before 6.
        assert_eq!(v.inner().expect("inner").by_seq.len(), 1);
        assert_eq!(v_of(v.seen(1, 10, 6).expect("seen")), Some(2));
        drop(s6);
        assert_eq!(v.stats(), (0, 0));
        assert!(!v.keeping().expect("keeping"));
    }

    #[test]
    fn over_budget_the_oldest_go_and_old_snapshots_fail() {
        let one = image_bytes(&body(0));
        let v = Arc::new(Versions::new(one * 2));
        let s = v.open(|| 1).expect("open");
        for seq in 2..6 {
            v.record(1, seq, vec![(seq, body(0))]).expect("record");
        }
        assert!(v.stats().1 <= one * 2);
        assert!(matches!(
            v.seen(1, 5, s.sequence()),
            Err(StorageError::SnapshotTooOld(_))
        ));
        // A snapshot taken after the loss reads fine.
        let later = v.open(|| 5).expect("open");
        assert!(matches!(v.seen(1, 5, later.sequence()), Ok(Seen::Current)));
    }
}
