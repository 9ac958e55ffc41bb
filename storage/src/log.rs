//! The log: an ordered list of preallocated segment files that records are appended to. Owns
//! sequence assignment, segment roll-over and the per-segment live-byte counts compaction uses.
//! Appends write into the page cache only; making them durable is `commit`'s job. A failed
//! write poisons the log: nothing more is appended until restart, because the file's tail is
//! then unknown.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bson::RawDocumentBuf;

use crate::backend::{Backend, BackendFile};
use crate::error::{Result, StorageError};
use crate::limits::{PREALLOCATE_CHUNK_BYTES, READ_RUN_BYTES_MAX, WRITE_BATCH_BYTES_MAX};
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

/// A record to append.
pub(crate) struct OutRecord {
    pub kind: Kind,
    pub payload: Vec<u8>,
}

struct Writer {
    segment_id: u64,
    file: Arc<dyn BackendFile>,
    offset: u64,
    capacity: u64,
    next_sequence: u64,
    poisoned: Option<String>,
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
            }),
            segments: RwLock::new(segments),
            spare: Mutex::new(None),
            appended_bytes: AtomicU64::new(0),
            unsynced: Mutex::new(Unsynced::default()),
        })
    }

    fn writer(&self) -> Result<MutexGuard<'_, Writer>> {
        self.writer.lock().map_err(|_| poisoned_lock())
    }

    /// Appends records (wrapped in BatchBegin/BatchEnd when `batch` and more than one), returns
    /// the last sequence written and the location of each input record.
    pub fn append(&self, recs: &[OutRecord], batch: bool) -> Result<(u64, Vec<Loc>)> {
        let wrap = batch && recs.len() > 1;
        let mut total = recs
            .iter()
            .map(|r| RECORD_HEADER_SIZE + r.payload.len())
            .sum::<usize>();
        if wrap {
            total += 2 * (RECORD_HEADER_SIZE + 4);
        }
        if total > WRITE_BATCH_BYTES_MAX {
            return Err(StorageError::LimitExceeded(format!(
                "write batch of {total} bytes exceeds {WRITE_BATCH_BYTES_MAX}"
            )));
        }
        let mut w = self.writer()?;
        if let Some(why) = &w.poisoned {
            return Err(StorageError::Poisoned(why.clone()));
        }
        if w.offset + total as u64 > w.capacity {
            self.roll(&mut w, total as u64)?;
        }
        let mut buf = Vec::with_capacity(total);
        let mut locs = Vec::with_capacity(recs.len());
        let mut seq = w.next_sequence;
        let count = (recs.len() as u32).to_le_bytes();
        if wrap {
            record::encode(&mut buf, Kind::BatchBegin, seq, &count);
            seq += 1;
        }
        for r in recs {
            let at = buf.len();
            record::encode(&mut buf, r.kind, seq, &r.payload);
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
        if let Err(e) = w.file.write_at(w.offset, &buf) {
            w.poisoned = Some(format!("log write failed: {e}"));
            return Err(e.into());
        }
        w.offset += buf.len() as u64;
        w.next_sequence = seq;
        self.appended_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
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
        Ok((seq - 1, locs))
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
        let file = match created {
            Ok(f) => f,
            Err(e) => {
                w.poisoned = Some(format!("segment creation failed: {e}"));
                return Err(e);
            }
        };
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
    pub fn sync_all(&self) -> Result<u64> {
        let (files, dir, current, seq) = {
            let w = self.writer()?;
            if let Some(why) = &w.poisoned {
                return Err(StorageError::Poisoned(why.clone()));
            }
            let mut u = self.unsynced()?;
            let files = std::mem::take(&mut u.files);
            let dir = std::mem::take(&mut u.dir);
            (files, dir, w.file.clone(), w.next_sequence - 1)
        };
        for f in &files {
            f.sync()?;
        }
        if dir {
            self.backend.sync_dir()?;
        }
        current.sync()?;
        Ok(seq)
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
        let zeros = vec![0u8; PREALLOCATE_CHUNK_BYTES];
        let mut at = 0u64;
        while at < self.segment_size_bytes {
            let n = (self.segment_size_bytes - at).min(zeros.len() as u64) as usize;
            file.write_at(at, &zeros[..n])?;
            at += n as u64;
        }
        file.write_at(0, &record::segment_header(id))?;
        file.sync()?;
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
        self.segments
            .read()
            .map_err(|_| poisoned_lock())?
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
