//! The log: an ordered list of preallocated segment files that records are appended to. Owns
//! sequence assignment, segment roll-over and the per-segment live-byte counts compaction uses.
//! Appends write into the page cache only; making them durable is `commit`'s job.
//!
//! Failed I/O (a full disk, an I/O error) damages the log without stopping it for good. Every
//! byte appended stays in memory (`Writer::pending`) until a sync covering it succeeds, because
//! after a failed fsync the kernel may have dropped those pages while calling them clean, so a
//! later fsync that "succeeds" proves nothing about them ("fsyncgate"). While damaged, appends
//! are refused; the first append or sync after a backoff repairs: it writes every pending byte
//! again from memory at its place, zeroes what a failed append may have left past the tail,
//! syncs the touched files and the directory, and only then accepts appends again. The rule is
//! stated for operators in docs/FORMAT.md. Only a failure to apply a logged write to memory
//! poisons the log for good (memory and log disagree; a restart replays the log).

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};

use bson::RawDocumentBuf;

use crate::backend::{Backend, BackendFile};
use crate::error::{Result, StorageError};
use crate::limits::{
    LOG_RETRY_BACKOFF_MS_MAX, LOG_RETRY_BACKOFF_MS_MIN, PREALLOCATE_CHUNK_BYTES,
    READ_RUN_BYTES_MAX, WRITE_BATCH_BYTES_MAX,
};
pub(crate) use crate::record::OutRecord;
use crate::record::{self, Kind, RECORD_DOCUMENT_OFFSET, RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE};

/// Where a stored document's record lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Loc {
    pub segment: u64,
    pub offset: u64,
    /// Whole record size (header + payload).
    pub size: u32,
    /// Bytes of the document inside it.
    pub doc_size: u32,
}

impl Loc {
    /// The record-tree value: four varints.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        for n in [
            self.segment,
            self.offset,
            u64::from(self.size),
            u64::from(self.doc_size),
        ] {
            crate::btree::page::write_varint(&mut v, n);
        }
        v
    }

    pub fn decode(b: &[u8]) -> Option<Loc> {
        let mut at = 0;
        let mut next = || {
            let (n, used) = crate::btree::page::read_varint(b.get(at..)?)?;
            at += used;
            Some(n)
        };
        let loc = Loc {
            segment: next()?,
            offset: next()?,
            size: u32::try_from(next()?).ok()?,
            doc_size: u32::try_from(next()?).ok()?,
        };
        (at == b.len()).then_some(loc)
    }
}

/// One segment file with its accounting.
pub(crate) struct Segment {
    pub file: Arc<dyn BackendFile>,
    /// Bytes up to the end of the last record.
    pub used_bytes: AtomicU64,
    /// Bytes of PUT records that are still the current version of a document.
    pub live_bytes: AtomicI64,
}

/// What a stamped batch says about its data records (see `record::Kind::Stamp`); the log adds
/// the timestamp and wall clock when it appends.
pub(crate) struct StampOps {
    pub ops: Vec<u8>,
    pub details: Vec<u8>,
}

/// The next hybrid-logical-clock value after `last` (packed: seconds << 32 | increment): the
/// wall clock's second with increment 1 when the clock moved on, else `last + 1`.
pub(crate) fn next_timestamp(last: u64, now_secs: u64) -> u64 {
    if now_secs > last >> 32 {
        (now_secs << 32) | 1
    } else {
        last + 1
    }
}

fn now_wall() -> (u64, i64) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.as_millis() as i64)
}

struct Writer {
    segment_id: u64,
    file: Arc<dyn BackendFile>,
    offset: u64,
    capacity: u64,
    next_sequence: u64,
    poisoned: Option<String>,
    /// Appended bytes no successful sync has covered yet, oldest first.
    pending: Vec<Pending>,
    damage: Option<Damage>,
}

/// One append's bytes, kept until a sync covers them (see the module comment).
struct Pending {
    file: Arc<dyn BackendFile>,
    offset: u64,
    bytes: Vec<u8>,
    last_sequence: u64,
}

/// Why the log refuses appends now, and when it tries again.
struct Damage {
    reason: String,
    out_of_space: bool,
    /// End of the furthest bytes a failed append may have put in the current segment.
    dirty_end: u64,
    retry_at: Instant,
    backoff: Duration,
}

impl Damage {
    fn error(&self) -> StorageError {
        StorageError::LogUnavailable {
            reason: self.reason.clone(),
            out_of_space: self.out_of_space,
        }
    }
}

/// Whether an I/O error means the disk (or the quota) is full.
fn is_out_of_space(e: &io::Error) -> bool {
    // ENOSPC and EDQUOT on Linux.
    matches!(e.raw_os_error(), Some(28 | 122)) || e.kind() == io::ErrorKind::StorageFull
}

/// The error a failed log write or sync returns to the writers it concerns.
fn unavailable(what: &str, e: &StorageError) -> (String, bool) {
    let out_of_space = matches!(e, StorageError::Io(io) if is_out_of_space(io));
    (format!("{what}: {e}"), out_of_space)
}

/// Where recovery left the log.
pub(crate) struct LogTail {
    pub segment_id: u64,
    pub offset: u64,
    pub next_sequence: u64,
}

pub(crate) struct Log {
    backend: Arc<dyn Backend>,
    segment_size_bytes: u64,
    writer: Mutex<Writer>,
    segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    /// A zero-filled next segment under its spare name, ready for `roll`.
    spare: Mutex<Option<(u64, Arc<dyn BackendFile>)>>,
    /// Bytes appended since open (checkpoints are also triggered by log volume).
    appended_bytes: AtomicU64,
    /// What the commit thread must sync besides the current segment.
    unsynced: Mutex<Unsynced>,
    /// Told the last sequence made durable when an append's repair heals the log (the commit
    /// thread learns of the sync's own repairs from its result).
    on_repair: OnceLock<Box<dyn Fn(u64) + Send + Sync>>,
    /// The last timestamp a stamped batch got (changed under the writer lock).
    last_timestamp: AtomicU64,
}

/// Work `roll` leaves for the commit thread.
#[derive(Default)]
struct Unsynced {
    /// Segments rolled away from, possibly holding unsynced records.
    files: Vec<Arc<dyn BackendFile>>,
    /// A spare was renamed into place.
    dir: bool,
}

/// Name of the prepared, not yet used, segment `id`.
pub(crate) fn spare_file_name(id: u64) -> String {
    format!("{}.spare", record::segment_file_name(id))
}

fn file_len_or(file: &Arc<dyn BackendFile>, default: u64) -> u64 {
    file.len().unwrap_or(default)
}

fn poisoned_lock() -> StorageError {
    StorageError::Poisoned("internal lock poisoned".into())
}

impl Log {
    /// Opens the log after recovery; `segments` are the surviving segment files.
    pub fn open(
        backend: Arc<dyn Backend>,
        segment_size_bytes: u64,
        segments: BTreeMap<u64, Arc<Segment>>,
        tail: Option<LogTail>,
        last_timestamp: u64,
    ) -> Result<Log> {
        let mut segments = segments;
        let (segment_id, offset, next_sequence) = match tail {
            Some(t) => (t.segment_id, t.offset, t.next_sequence),
            None => {
                let file = create_segment(backend.as_ref(), 1, segment_size_bytes)?;
                segments.insert(1, Arc::new(new_segment(file)));
                (1, SEGMENT_HEADER_SIZE as u64, 1)
            }
        };
        let seg = segments
            .get(&segment_id)
            .ok_or_else(|| StorageError::Poisoned("log tail segment missing".into()))?;
        let file = seg.file.clone();
        let capacity = file.len()?;
        Ok(Log {
            backend,
            segment_size_bytes,
            writer: Mutex::new(Writer {
                segment_id,
                file,
                offset,
                capacity,
                next_sequence,
                poisoned: None,
                pending: Vec::new(),
                damage: None,
            }),
            segments: RwLock::new(segments),
            spare: Mutex::new(None),
            appended_bytes: AtomicU64::new(0),
            unsynced: Mutex::new(Unsynced::default()),
            on_repair: OnceLock::new(),
            last_timestamp: AtomicU64::new(last_timestamp),
        })
    }

    /// Sets the callback told when an append repairs the log (see `on_repair`).
    pub fn set_on_repair(&self, f: Box<dyn Fn(u64) + Send + Sync>) {
        let _ = self.on_repair.set(f);
    }

    /// Whether the log refuses appends now (a write or sync failed and no repair succeeded).
    pub fn damaged(&self) -> Option<StorageError> {
        self.writer.lock().ok()?.damage.as_ref().map(Damage::error)
    }

    /// Records a failed write or sync: logged once with the OS error, then appends are refused
    /// until a repair after the backoff succeeds.
    fn damage(&self, w: &mut Writer, what: &str, e: &StorageError, dirty_end: u64) -> StorageError {
        let (reason, out_of_space) = unavailable(what, e);
        match &mut w.damage {
            Some(d) => d.dirty_end = d.dirty_end.max(dirty_end),
            None => {
                tracing::error!(
                    error = %e,
                    out_of_space,
                    "{what}; the log refuses writes until it can write again (retried after a backoff)"
                );
                let backoff = Duration::from_millis(LOG_RETRY_BACKOFF_MS_MIN);
                w.damage = Some(Damage {
                    reason,
                    out_of_space,
                    dirty_end,
                    retry_at: Instant::now() + backoff,
                    backoff,
                });
            }
        }
        w.damage
            .as_ref()
            .map_or(StorageError::Closed, Damage::error)
    }

    /// Heals a damaged log if its backoff has passed: every pending byte written again at its
    /// place, the failed append's leftovers zeroed, the touched files and the directory synced.
    /// Returns the last sequence now durable; an error (the damage's) while still damaged.
    fn repair(&self, w: &mut Writer) -> Result<Option<u64>> {
        let Some(d) = &w.damage else {
            return Ok(None);
        };
        if Instant::now() < d.retry_at {
            return Err(d.error());
        }
        let dirty_end = d.dirty_end;
        match self.rewrite(w, dirty_end) {
            Ok(()) => {
                w.pending.clear();
                if let Ok(mut u) = self.unsynced() {
                    *u = Unsynced::default();
                }
                if let Some(d) = w.damage.take() {
                    tracing::warn!(after = %d.reason, "the log is writable again; writes resume");
                }
                Ok(Some(w.next_sequence - 1))
            }
            Err(e) => {
                let d = w.damage.as_mut().ok_or(StorageError::Closed)?;
                tracing::debug!(error = %e, "log repair failed; retrying later");
                d.backoff = (d.backoff * 2).min(Duration::from_millis(LOG_RETRY_BACKOFF_MS_MAX));
                d.retry_at = Instant::now() + d.backoff;
                Err(d.error())
            }
        }
    }

    fn rewrite(&self, w: &Writer, dirty_end: u64) -> Result<()> {
        let mut files: Vec<Arc<dyn BackendFile>> = Vec::new();
        for p in &w.pending {
            p.file.write_at(p.offset, &p.bytes)?;
            if !files.iter().any(|f| Arc::ptr_eq(f, &p.file)) {
                files.push(p.file.clone());
            }
        }
        let zeros = vec![0u8; PREALLOCATE_CHUNK_BYTES];
        let mut at = w.offset;
        while at < dirty_end {
            let n = (dirty_end - at).min(zeros.len() as u64) as usize;
            w.file.write_at(at, &zeros[..n])?;
            at += n as u64;
        }
        if !files.iter().any(|f| Arc::ptr_eq(f, &w.file)) {
            files.push(w.file.clone());
        }
        for f in &files {
            f.sync()?;
        }
        self.backend.sync_dir()?;
        Ok(())
    }

    fn writer(&self) -> Result<MutexGuard<'_, Writer>> {
        self.writer.lock().map_err(|_| poisoned_lock())
    }

    /// Appends records (wrapped in BatchBegin/BatchEnd when `batch` and more than one), returns
    /// the last sequence written and the location of each input record. A damaged log is
    /// repaired first when its backoff has passed, or the damage's error returned.
    pub fn append(&self, recs: &[OutRecord<'_>], batch: bool) -> Result<(u64, Vec<Loc>)> {
        self.append_stamped(recs, batch, None)
            .map(|(s, l, _)| (s, l))
    }

    /// `append`, with a STAMP record first when `stamp` is given (the batch is then always
    /// wrapped); also returns the batch's last timestamp (0 when unstamped).
    pub fn append_stamped(
        &self,
        recs: &[OutRecord<'_>],
        batch: bool,
        stamp: Option<&StampOps>,
    ) -> Result<(u64, Vec<Loc>, u64)> {
        let mut healed = None;
        let result = self.append_healing(recs, batch, stamp, &mut healed);
        if let (Some(seq), Some(f)) = (healed, self.on_repair.get()) {
            f(seq);
        }
        result
    }

    /// The last timestamp a stamped batch got (0: none yet).
    pub fn last_timestamp(&self) -> u64 {
        self.last_timestamp.load(Ordering::Acquire)
    }

    fn append_healing(
        &self,
        recs: &[OutRecord<'_>],
        batch: bool,
        stamp: Option<&StampOps>,
        healed: &mut Option<u64>,
    ) -> Result<(u64, Vec<Loc>, u64)> {
        let wrap = (batch && recs.len() > 1) || stamp.is_some();
        let mut total = recs
            .iter()
            .map(|r| RECORD_HEADER_SIZE + r.payload_len())
            .sum::<usize>();
        if let Some(s) = stamp {
            total += RECORD_HEADER_SIZE + record::STAMP_OPS_OFFSET + s.ops.len() + s.details.len();
        }
        if wrap {
            total += 2 * (RECORD_HEADER_SIZE + 4);
        }
        if total > WRITE_BATCH_BYTES_MAX {
            return Err(StorageError::LimitExceeded(format!(
                "write batch of {total} bytes exceeds {WRITE_BATCH_BYTES_MAX}"
            )));
        }
        let mut w = crate::nowait::mutex_lock(&self.writer)?;
        if let Some(why) = &w.poisoned {
            return Err(StorageError::Poisoned(why.clone()));
        }
        let rolls = w.offset + total as u64 > w.capacity;
        if crate::nowait::active() && (w.damage.is_some() || rolls) {
            // A repair or a new segment writes, syncs and opens files: not on this thread.
            return Err(crate::nowait::refused_error());
        }
        // Only a write's scope reaches its append, and not after a refusal.
        crate::nowait::write_allowed()?;
        *healed = self.repair(&mut w)?;
        if rolls && let Err(e) = self.roll(&mut w, total as u64) {
            let end = w.offset;
            return Err(self.damage(&mut w, "creating a log segment failed", &e, end));
        }
        let mut buf = Vec::with_capacity(total);
        let mut locs = Vec::with_capacity(recs.len());
        let mut seq = w.next_sequence;
        let count = ((recs.len() + usize::from(stamp.is_some())) as u32).to_le_bytes();
        if wrap {
            record::encode(&mut buf, Kind::BatchBegin, seq, &count);
            seq += 1;
        }
        // A batch of n ops takes n timestamps (one per op, as mongod gives each oplog entry
        // its own); the stamp holds the first, the ticket the last.
        let mut last_timestamp = 0;
        if let Some(s) = stamp {
            let (secs, wall_ms) = now_wall();
            let timestamp = next_timestamp(self.last_timestamp.load(Ordering::Acquire), secs);
            last_timestamp = timestamp + (s.ops.len() as u64).max(1) - 1;
            let payload = record::stamp_payload(timestamp, wall_ms, &s.ops, &s.details);
            record::encode(&mut buf, Kind::Stamp, seq, &payload);
            seq += 1;
        }
        for r in recs {
            let at = buf.len();
            record::encode_spliced(
                &mut buf,
                r.kind,
                seq,
                &r.payload,
                r.document.unwrap_or_default(),
            );
            seq += 1;
            locs.push(Loc {
                segment: w.segment_id,
                offset: w.offset + at as u64,
                size: (buf.len() - at) as u32,
                doc_size: 0,
            });
        }
        if wrap {
            record::encode(&mut buf, Kind::BatchEnd, seq, &count);
            seq += 1;
        }
        // The point of no return of a write tried in a no-wait scope (see `crate::nowait`).
        crate::nowait::settle();
        if let Err(e) = w.file.write_at(w.offset, &buf) {
            let end = w.offset + buf.len() as u64;
            return Err(self.damage(&mut w, "writing the log failed", &e.into(), end));
        }
        let appended = buf.len() as u64;
        let pending = Pending {
            file: w.file.clone(),
            offset: w.offset,
            bytes: buf,
            last_sequence: seq - 1,
        };
        w.pending.push(pending);
        w.offset += appended;
        w.next_sequence = seq;
        if last_timestamp != 0 {
            self.last_timestamp.store(last_timestamp, Ordering::Release);
        }
        self.appended_bytes.fetch_add(appended, Ordering::Relaxed);
        let segs = self.segments.read().map_err(|_| poisoned_lock())?;
        if let Some(s) = segs.get(&w.segment_id) {
            s.used_bytes.store(w.offset, Ordering::Release);
            let put_bytes: u64 = recs
                .iter()
                .zip(&locs)
                .filter(|(r, _)| matches!(r.kind, Kind::Put | Kind::Move))
                .map(|(_, l)| u64::from(l.size))
                .sum();
            s.live_bytes.fetch_add(put_bytes as i64, Ordering::AcqRel);
        }
        Ok((seq - 1, locs, last_timestamp))
    }

    /// Starts a new segment big enough for `need` bytes. The full one is not synced here (that
    /// would stall every writer behind the lock): the commit thread syncs it, and the directory
    /// entry of the new one, before it calls anything in them durable.
    fn roll(&self, w: &mut Writer, need: u64) -> Result<()> {
        self.unsynced()?.files.push(w.file.clone());
        let id = w.segment_id + 1;
        let size = self
            .segment_size_bytes
            .max(SEGMENT_HEADER_SIZE as u64 + need);
        let spare = self.take_spare(id, size);
        let created = match spare {
            Some(file) => self.install_spare(id, file),
            None => create_segment(self.backend.as_ref(), id, size),
        };
        let file = created?;
        let seg = Arc::new(new_segment(file.clone()));
        seg.used_bytes
            .store(SEGMENT_HEADER_SIZE as u64, Ordering::Release);
        self.segments
            .write()
            .map_err(|_| poisoned_lock())?
            .insert(id, seg);
        w.segment_id = id;
        w.file = file;
        w.offset = SEGMENT_HEADER_SIZE as u64;
        w.capacity = file_len_or(&w.file, size);
        Ok(())
    }

    /// The prepared spare for segment `id`, if there is one big enough.
    fn take_spare(&self, id: u64, size: u64) -> Option<Arc<dyn BackendFile>> {
        let mut spare = self.spare.lock().ok()?;
        match spare.take() {
            Some((sid, file)) if sid == id && file_len_or(&file, 0) >= size => Some(file),
            Some((sid, file)) if sid > id => {
                *spare = Some((sid, file));
                None
            }
            Some((sid, _)) => {
                // Stale (the log rolled past it without it): drop it.
                let _ = self.backend.remove(&spare_file_name(sid));
                None
            }
            None => None,
        }
    }

    fn install_spare(&self, id: u64, file: Arc<dyn BackendFile>) -> Result<Arc<dyn BackendFile>> {
        let name = record::segment_file_name(id);
        self.backend.rename(&spare_file_name(id), &name)?;
        // Until the directory is synced a crash may bring back the spare name; nothing in the
        // segment is acknowledged before the commit thread syncs it (`sync_all`).
        self.unsynced()?.dir = true;
        Ok(file)
    }

    fn unsynced(&self) -> Result<MutexGuard<'_, Unsynced>> {
        self.unsynced.lock().map_err(|_| poisoned_lock())
    }

    /// Makes everything appended so far durable: the segments rolled away from, the directory
    /// entry of a renamed spare, then the current segment. Returns the last sequence covered.
    /// Called by the commit thread only.
    /// A damaged log is repaired instead (when its backoff has passed), which syncs the same.
    pub fn sync_all(&self) -> Result<u64> {
        let (files, dir, current, seq) = {
            let mut w = self.writer()?;
            if let Some(why) = &w.poisoned {
                return Err(StorageError::Poisoned(why.clone()));
            }
            if let Some(seq) = self.repair(&mut w)? {
                return Ok(seq);
            }
            let mut u = self.unsynced()?;
            let files = std::mem::take(&mut u.files);
            let dir = std::mem::take(&mut u.dir);
            (files, dir, w.file.clone(), w.next_sequence - 1)
        };
        let synced = (|| -> Result<()> {
            for f in &files {
                f.sync()?;
            }
            if dir {
                self.backend.sync_dir()?;
            }
            current.sync()?;
            Ok(())
        })();
        let mut w = self.writer()?;
        match synced {
            Ok(()) => {
                w.pending.retain(|p| p.last_sequence > seq);
                Ok(seq)
            }
            Err(e) => {
                // Whatever the failed sync covered is rewritten from `pending` by the repair.
                let end = w.offset;
                Err(self.damage(&mut w, "syncing the log failed", &e, end))
            }
        }
    }

    /// Prepares the next segment ahead of time, zero-filled (a sync into written-out zeros is
    /// cheaper than one that allocates blocks of a sparse file or grows it). Runs on the
    /// preallocation thread; true if it made a spare.
    pub fn prepare_spare(&self) -> Result<bool> {
        let id = self.current_segment() + 1;
        if self.spare.lock().map_err(|_| poisoned_lock())?.is_some() {
            return Ok(false);
        }
        let name = spare_file_name(id);
        let file = self.backend.create(&name)?;
        if let Err(e) = self.fill_spare(file.as_ref(), id) {
            // A full disk: give back what the half-made spare took.
            let _ = self.backend.remove(&name);
            return Err(e);
        }
        // Lock order is writer, then spare (see `roll`): read the writer first.
        let still_next = self.current_segment() + 1 == id;
        let mut spare = self.spare.lock().map_err(|_| poisoned_lock())?;
        if still_next && spare.is_none() {
            *spare = Some((id, file));
            Ok(true)
        } else {
            drop(spare);
            self.backend.remove(&name)?;
            Ok(false)
        }
    }

    fn fill_spare(&self, file: &dyn BackendFile, id: u64) -> Result<()> {
        let zeros = vec![0u8; PREALLOCATE_CHUNK_BYTES];
        let mut at = 0u64;
        while at < self.segment_size_bytes {
            let n = (self.segment_size_bytes - at).min(zeros.len() as u64) as usize;
            file.write_at(at, &zeros[..n])?;
            at += n as u64;
        }
        file.write_at(0, &record::segment_header(id))?;
        file.sync()?;
        Ok(())
    }

    /// (segment id, offset, next sequence) where the next record will go.
    pub fn position(&self) -> Result<(u64, u64, u64)> {
        let w = self.writer()?;
        Ok((w.segment_id, w.offset, w.next_sequence))
    }

    /// Marks the log failed (a sync error: the page cache state is unknown).
    pub fn poison(&self, why: String) {
        if let Ok(mut w) = self.writer.lock() {
            w.poisoned.get_or_insert(why);
        }
    }

    /// The last sequence appended.
    pub fn last_sequence(&self) -> u64 {
        self.writer.lock().map(|w| w.next_sequence - 1).unwrap_or(0)
    }

    /// Bytes appended since open.
    pub fn appended_bytes(&self) -> u64 {
        self.appended_bytes.load(Ordering::Relaxed)
    }

    /// The id of the segment appends go to.
    pub fn current_segment(&self) -> u64 {
        self.writer.lock().map(|w| w.segment_id).unwrap_or(0)
    }

    /// Reads the document stored by the PUT or MOVE record at `loc`, checking its crc.
    pub fn read_document(&self, loc: Loc) -> Result<RawDocumentBuf> {
        let file = self.segment(loc.segment)?.file.clone();
        let mut buf = vec![0u8; loc.size as usize];
        file.read_at(loc.offset, &mut buf)?;
        document_of(&buf, loc)
    }

    /// Reads many documents; records lying back to back in one segment are read with one pread
    /// (up to `READ_RUN_BYTES_MAX`), which is what scans in RecordId order usually meet.
    pub fn read_documents(&self, locs: &[Loc]) -> Result<Vec<RawDocumentBuf>> {
        let mut out = Vec::with_capacity(locs.len());
        let mut i = 0;
        while i < locs.len() {
            let first = locs[i];
            let mut end = first.offset + u64::from(first.size);
            let mut j = i + 1;
            while j < locs.len()
                && locs[j].segment == first.segment
                && locs[j].offset == end
                && end - first.offset < READ_RUN_BYTES_MAX
            {
                end += u64::from(locs[j].size);
                j += 1;
            }
            if j == i + 1 {
                out.push(self.read_document(first)?);
            } else {
                let file = self.segment(first.segment)?.file.clone();
                let mut buf = vec![0u8; (end - first.offset) as usize];
                file.read_at(first.offset, &mut buf)?;
                for loc in &locs[i..j] {
                    let at = (loc.offset - first.offset) as usize;
                    out.push(document_of(&buf[at..at + loc.size as usize], *loc)?);
                }
            }
            i = j;
        }
        Ok(out)
    }

    fn segment(&self, id: u64) -> Result<Arc<Segment>> {
        crate::nowait::read_lock(&self.segments)?
            .get(&id)
            .cloned()
            .ok_or_else(|| {
                StorageError::Io(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("segment {id} is gone"),
                ))
            })
    }

    /// Sets every segment's live bytes (after replay).
    pub fn set_live_bytes(&self, live: &BTreeMap<u64, u64>) {
        if let Ok(segs) = self.segments.read() {
            for (id, s) in segs.iter() {
                let bytes = live.get(id).copied().unwrap_or(0);
                s.live_bytes.store(bytes as i64, Ordering::Release);
            }
        }
    }

    /// Takes `bytes` off a segment's live count (a dropped collection's records).
    pub fn release_bytes(&self, segment: u64, bytes: u64) {
        if let Ok(s) = self.segment(segment) {
            s.live_bytes.fetch_sub(bytes as i64, Ordering::AcqRel);
        }
    }

    /// The file of segment `id` and its used bytes (compaction reads it through).
    pub fn segment_file(&self, id: u64) -> Result<(Arc<dyn BackendFile>, u64)> {
        let s = self.segment(id)?;
        Ok((s.file.clone(), s.used_bytes.load(Ordering::Acquire)))
    }

    /// Accounts that the document at `loc` is no longer current.
    pub fn release(&self, loc: Loc) {
        if let Ok(s) = self.segment(loc.segment) {
            s.live_bytes
                .fetch_sub(i64::from(loc.size), Ordering::AcqRel);
        }
    }

    /// (id, used bytes, live bytes) of every segment, oldest first.
    pub fn segment_usage(&self) -> Vec<(u64, u64, u64)> {
        let Ok(segs) = self.segments.read() else {
            return Vec::new();
        };
        segs.iter()
            .map(|(id, s)| {
                (
                    *id,
                    s.used_bytes.load(Ordering::Acquire),
                    s.live_bytes.load(Ordering::Acquire).max(0) as u64,
                )
            })
            .collect()
    }

    /// Deletes a segment file that compaction has emptied.
    pub fn remove_segment(&self, id: u64) -> Result<()> {
        self.segments
            .write()
            .map_err(|_| poisoned_lock())?
            .remove(&id);
        self.backend.remove(&record::segment_file_name(id))?;
        self.backend.sync_dir()?;
        Ok(())
    }
}

pub(crate) fn new_segment(file: Arc<dyn BackendFile>) -> Segment {
    Segment {
        file,
        used_bytes: AtomicU64::new(SEGMENT_HEADER_SIZE as u64),
        live_bytes: AtomicI64::new(0),
    }
}

/// Creates segment `id` durably: written under a temporary name, synced, renamed, dir synced.
fn create_segment(backend: &dyn Backend, id: u64, size_bytes: u64) -> Result<Arc<dyn BackendFile>> {
    let name = record::segment_file_name(id);
    let tmp = format!("{name}.tmp");
    let file = backend.create(&tmp)?;
    file.set_len(size_bytes)?;
    file.write_at(0, &record::segment_header(id))?;
    file.sync()?;
    backend.rename(&tmp, &name)?;
    backend.sync_dir()?;
    Ok(file)
}

/// The document inside one PUT or MOVE record's bytes, after checking the record.
fn document_of(rec: &[u8], loc: Loc) -> Result<RawDocumentBuf> {
    let name = || record::segment_file_name(loc.segment);
    let bad = |why: &str| StorageError::corruption(&name(), loc.offset, why);
    match record::decode(rec) {
        record::Decoded::Record(r)
            if matches!(r.kind, Kind::Put | Kind::Move) && r.size == rec.len() => {}
        _ => return Err(bad("stored document record fails its checks")),
    }
    let doc = record::document_prefix(&rec[RECORD_DOCUMENT_OFFSET..])
        .ok_or_else(|| bad("stored document length out of range"))?;
    RawDocumentBuf::from_bytes(doc.to_vec()).map_err(|e| bad(&e.to_string()))
}
