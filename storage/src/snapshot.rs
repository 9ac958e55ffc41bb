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
//! - With a history window (`set_window`, the server's `minSnapshotHistoryWindowInSeconds`)
//!   every batch keeps its images, open snapshot or not, until it is older than the window, so a
//!   snapshot can be opened at a past timestamp (`open_at`). Every data batch is either kept
//!   (its sequence and timestamp in `stamps`) or lost (`lost_through`, `lost_ts` cover it): a
//!   read at timestamp `T` is served iff `T >= lost_ts`, at the sequence just before the first
//!   kept batch stamped after `T`.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

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
    /// Images of batches numbered `<=` this are gone (dropped, or never kept).
    lost_through: u64,
    /// The newest timestamp among the batches whose images are gone (0: none).
    lost_ts: u64,
    /// Batches whose images are kept: sequence -> (timestamp, when it was applied).
    stamps: BTreeMap<u64, (u64, Instant)>,
    /// The same batches by timestamp (timestamps grow with sequences): timestamp -> sequence.
    by_ts: BTreeMap<u64, u64>,
    /// How long batches keep their images with no snapshot open (zero: only for open ones).
    window: Duration,
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
        crate::nowait::read_lock(&self.gate)
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
        inner.retain(Instant::now());
    }

    /// Whether a write must keep before-images (some snapshot is open). Ask while `writing`.
    pub fn keeping(&self) -> Result<bool> {
        let inner = self.inner()?;
        Ok(!inner.open.is_empty() || !inner.window.is_zero())
    }

    /// Where the engine's history starts when it opens: nothing before batch `seq` (stamped
    /// `ts`) has images.
    pub fn start(&self, seq: u64, ts: u64) -> Result<()> {
        self.inner()?.lose(seq, ts);
        Ok(())
    }

    /// Keeps every batch's images for `window` (zero: only while a snapshot needs them).
    pub fn set_window(&self, window: Duration) -> Result<()> {
        let mut inner = self.inner()?;
        inner.window = window;
        inner.retain(Instant::now());
        Ok(())
    }

    /// Notes batch `seq`, stamped `ts`; `kept` says whether it records its images (what
    /// `keeping` said under the same `writing` guard). Call before `record`.
    pub fn note_batch(&self, seq: u64, ts: u64, kept: bool) -> Result<()> {
        let mut inner = self.inner()?;
        let now = Instant::now();
        if kept {
            inner.stamps.insert(seq, (ts, now));
            inner.by_ts.insert(ts, seq);
        } else {
            inner.lose(seq, ts);
        }
        inner.retain(now);
        Ok(())
    }

    /// Opens a snapshot as of timestamp `ts`: every batch stamped at or before it, none after.
    /// `applied` is the last sequence a write applied (the answer when no kept batch is newer
    /// than `ts`). `SnapshotTooOld` when batches after `ts` no longer have their images.
    pub fn open_at(self: &Arc<Self>, ts: u64, applied: impl FnOnce() -> u64) -> Result<Snapshot> {
        let _gate = self.gate.write().map_err(|_| lock_err())?;
        let mut inner = self.inner()?;
        let too_old = || {
            StorageError::SnapshotTooOld(format!(
                "timestamp {ts} is older than the oldest kept history (timestamp {})",
                inner.lost_ts
            ))
        };
        if ts < inner.lost_ts {
            return Err(too_old());
        }
        let seq = match inner.by_ts.range(ts.saturating_add(1)..).next() {
            Some((_, seq)) => seq.saturating_sub(1),
            None => applied(),
        };
        if seq < inner.lost_through {
            return Err(too_old());
        }
        *inner.open.entry(seq).or_default() += 1;
        Ok(Snapshot {
            seq,
            versions: self.clone(),
        })
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
            inner.prune(oldest);
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
    /// Batch `seq` (stamped `ts`) and all before it have no images any more.
    fn lose(&mut self, seq: u64, ts: u64) {
        self.lost_through = self.lost_through.max(seq);
        self.lost_ts = self.lost_ts.max(ts);
    }

    /// Drops what neither an open snapshot nor the window needs: the images of batches up to
    /// the oldest open snapshot's sequence that are older than the window.
    fn retain(&mut self, now: Instant) {
        let newest = self
            .stamps
            .keys()
            .next_back()
            .copied()
            .max(self.by_seq.keys().next_back().copied());
        let aged = if self.window.is_zero() {
            newest
        } else {
            let window = self.window;
            self.stamps
                .iter()
                .take_while(|(_, (_, at))| now.saturating_duration_since(*at) > window)
                .last()
                .map(|(seq, _)| *seq)
        };
        let through = match (self.open.keys().next().copied(), aged) {
            (_, None) => return,
            (None, Some(a)) => a,
            (Some(o), Some(a)) => o.min(a),
        };
        self.prune(through);
    }

    /// Drops every image numbered `<= through` and notes them lost.
    fn prune(&mut self, through: u64) {
        while let Some(entry) = self.stamps.first_entry() {
            if *entry.key() > through {
                break;
            }
            let (seq, (ts, _)) = entry.remove_entry();
            self.by_ts.remove(&ts);
            self.lose(seq, ts);
        }
        while let Some(entry) = self.by_seq.first_entry() {
            if *entry.key() > through {
                break;
            }
            let (seq, rids) = entry.remove_entry();
            self.lost_through = self.lost_through.max(seq);
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

    #[test]
    fn a_window_keeps_images_without_snapshots_and_maps_timestamps_to_sequences() {
        let v = Arc::new(Versions::new(1 << 20));
        v.start(1, 100).expect("start");
        v.set_window(Duration::from_secs(60)).expect("window");
        assert!(v.keeping().expect("keeping"));
        // Batch 2 at timestamp 110 changed rid 10 from 1; batch 4 at 130 changed it from 2.
        v.note_batch(2, 110, true).expect("note");
        v.record(1, 2, vec![(10, body(1))]).expect("record");
        v.note_batch(4, 130, true).expect("note");
        v.record(1, 4, vec![(10, body(2))]).expect("record");
        let at = |ts: u64| v.open_at(ts, || 4).map(|s| s.sequence());
        assert_eq!(at(100).expect("at 100"), 1);
        assert_eq!(at(109).expect("at 109"), 1);
        assert_eq!(at(110).expect("at 110"), 3);
        assert_eq!(at(129).expect("at 129"), 3);
        assert_eq!(at(130).expect("at 130"), 4);
        assert_eq!(at(999).expect("later"), 4);
        assert!(matches!(at(99), Err(StorageError::SnapshotTooOld(_))));
        assert_eq!(v_of(v.seen(1, 10, 1).expect("seen")), Some(1));
        assert_eq!(v_of(v.seen(1, 10, 3).expect("seen")), Some(2));
        // Nothing is open (every snapshot above was dropped), yet the window keeps them.
        assert_eq!(v.stats().0, 0);
        assert_eq!(v.inner().expect("inner").stamps.len(), 2);
        // Past the window they go, and reads before them become too old.
        v.inner()
            .expect("inner")
            .retain(Instant::now() + Duration::from_secs(61));
        assert_eq!(v.stats(), (0, 0));
        assert!(matches!(at(120), Err(StorageError::SnapshotTooOld(_))));
        assert_eq!(at(130).expect("the newest still reads"), 4);
    }

    #[test]
    fn an_open_snapshot_outlives_the_window_and_batches_kept_for_nobody_are_lost() {
        let v = Arc::new(Versions::new(1 << 20));
        v.start(1, 100).expect("start");
        // No window, nothing open: batch 2 keeps nothing, so reads before it are too old.
        assert!(!v.keeping().expect("keeping"));
        v.note_batch(2, 110, false).expect("note");
        assert!(matches!(
            v.open_at(105, || 2),
            Err(StorageError::SnapshotTooOld(_))
        ));
        v.set_window(Duration::from_secs(1)).expect("window");
        let s = v.open_at(110, || 2).expect("open at the newest");
        v.note_batch(3, 120, true).expect("note");
        v.record(1, 3, vec![(10, body(7))]).expect("record");
        v.inner()
            .expect("inner")
            .retain(Instant::now() + Duration::from_secs(5));
        // The open snapshot still needs batch 3's image.
        assert_eq!(v_of(v.seen(1, 10, s.sequence()).expect("seen")), Some(7));
        drop(s);
        v.inner()
            .expect("inner")
            .retain(Instant::now() + Duration::from_secs(5));
        assert_eq!(v.stats(), (0, 0));
    }

    #[test]
    fn an_engine_reads_at_past_timestamps_after_updates_and_deletes() {
        use crate::{Engine, EngineOptions, WriteOp};
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = EngineOptions {
            history_bytes: Some(1 << 20),
            ..EngineOptions::default()
        };
        let e = Engine::open(dir.path(), opts).expect("open");
        e.set_history_window(Duration::from_secs(300))
            .expect("window");
        let c = e
            .create_collection("t", "c", bson::Document::new())
            .expect("create");
        // The _id index wants an _id; `v` is what the test reads back.
        let raw = |v: i32| {
            RawDocumentBuf::try_from(&bson::doc! {"_id": v % 10, "v": v}).expect("encodes")
        };
        let t1 = c
            .write(vec![
                WriteOp::Insert(raw(1).into()),
                WriteOp::Insert(raw(2).into()),
            ])
            .expect("insert");
        let (a, b) = (t1.record_ids[0], t1.record_ids[1]);
        let t2 = c.write(vec![WriteOp::Update(a, raw(10))]).expect("update");
        c.write(vec![WriteOp::Delete(b), WriteOp::Insert(raw(3).into())])
            .expect("delete and insert");
        let values = |snap: &Snapshot| -> Vec<i32> {
            let (docs, _) = c
                .scan_at(snap, Direction::Forward, None, 100)
                .expect("scan");
            docs.iter()
                .map(|(_, d)| d.get_i32("v").expect("v"))
                .collect()
        };
        assert_eq!(
            values(&e.snapshot_at(t1.timestamp).expect("t1")),
            vec![1, 2]
        );
        assert_eq!(
            values(&e.snapshot_at(t2.timestamp).expect("t2")),
            vec![10, 2]
        );
        assert_eq!(
            values(&e.snapshot_at(t1.timestamp - 1).expect("before")),
            Vec::<i32>::new()
        );
        let (now, ts) = e.snapshot_now().expect("now");
        assert_eq!(values(&now), vec![10, 3]);
        assert_eq!(ts, e.last_timestamp());
        // From before the engine opened nothing is kept.
        drop(now);
        e.close().expect("close");
        let e = Engine::open(
            dir.path(),
            EngineOptions {
                history_bytes: Some(1 << 20),
                ..EngineOptions::default()
            },
        )
        .expect("reopen");
        assert!(matches!(
            e.snapshot_at(t2.timestamp),
            Err(StorageError::SnapshotTooOld(_))
        ));
        assert!(e.snapshot_at(e.last_timestamp()).is_ok());
    }
}
