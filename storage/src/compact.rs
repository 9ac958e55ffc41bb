//! Compaction by dead bytes. When the log holds much more than its live data, the segment with
//! the most dead bytes (not the oldest) is read front to back; every PUT or MOVE that is still
//! a document's current version (its record tree points at it) is re-appended at the head of the
//! log as a MOVE, a chunk per hold of the collection's write lock, and the record tree is
//! repointed. Readers wait only for one chunk's append and tree updates, never for reads of the
//! old segment. An emptied segment is deleted once both meta slots hold checkpoints cut after
//! it was emptied (an earlier checkpoint's record trees still point into it); compaction asks
//! for checkpoints instead of taking one per segment, and the scheduled ones serve as well.
//! Records other than documents (deletes, catalog changes) are covered by every checkpoint cut
//! after them, so a segment before the older slot's log position needs nothing else kept.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::collection::Collection;
use crate::engine::Inner;
use crate::error::{Result, StorageError};
use crate::limits::{
    COMPACTION_CHUNK_BYTES, COMPACTION_LOG_BYTES_MIN, COMPACTION_SPACE_RATIO_PERCENT,
    RECOVERY_READ_CHUNK_BYTES,
};
use crate::log::{Loc, OutRecord};
use crate::record::{self, Decoded, Kind, RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE};

/// One pass; true if a segment was emptied. `any_size` skips the minimum log size (the space
/// ratio still decides, so repeated calls stop once the log is tight).
pub(crate) fn compact_once(inner: &Inner, any_size: bool) -> Result<bool> {
    let lock = || StorageError::Poisoned("maintenance lock poisoned".into());
    let _m = inner.maintenance.lock().map_err(|_| lock())?;
    let waiting: HashSet<u64> = inner
        .emptied
        .lock()
        .map_err(|_| lock())?
        .iter()
        .map(|(s, _)| *s)
        .collect();
    if !waiting.is_empty() {
        // Their deletion waits for checkpoints.
        inner.ckpt.requested.store(true, Ordering::Release);
    }
    let log = &inner.shared.log;
    let usage: Vec<(u64, u64, u64)> = log
        .segment_usage()
        .into_iter()
        .filter(|(id, _, _)| !waiting.contains(id))
        .collect();
    let current = log.current_segment();
    let total: u64 = usage.iter().map(|u| u.1).sum();
    let live: u64 = usage.iter().map(|u| u.2).sum();
    let big_enough = any_size || total >= COMPACTION_LOG_BYTES_MIN;
    if !big_enough || total * 100 <= live * COMPACTION_SPACE_RATIO_PERCENT {
        return Ok(false);
    }
    // With a history (the oplog), the newest `history_bytes` of log stay as they are.
    let protected_from = match inner.history_bytes {
        Some(keep) => {
            let mut sum = 0u64;
            let mut from = current;
            for (id, used, _) in usage.iter().rev() {
                if sum >= keep {
                    break;
                }
                sum += used;
                from = *id;
            }
            from
        }
        None => current,
    };
    let victim = usage
        .iter()
        .filter(|(id, used, live)| *id < protected_from && *id != current && used > live)
        .max_by_key(|(_, used, live)| used - live)
        .map(|u| u.0);
    let Some(victim) = victim else {
        return Ok(false);
    };
    relocate(inner, victim)?;
    let cut = inner.shared.pager.cuts();
    inner
        .emptied
        .lock()
        .map_err(|_| lock())?
        .push((victim, cut));
    inner.ckpt.requested.store(true, Ordering::Release);
    inner.ckpt.compacted.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(segment = %record::segment_file_name(victim), "segment emptied by compaction");
    Ok(true)
}

/// A document record found in the victim segment.
struct Found {
    rid: u64,
    loc: Loc,
    doc: Vec<u8>,
}

/// Moves every current document out of `segment`.
fn relocate(inner: &Inner, segment: u64) -> Result<()> {
    let (file, used) = inner.shared.log.segment_file(segment)?;
    let colls: BTreeMap<u64, Arc<Collection>> = inner
        .catalog
        .read()
        .map_err(|_| StorageError::Poisoned("catalog lock poisoned".into()))?
        .by_id
        .clone();
    let name = record::segment_file_name(segment);
    let mut pending: BTreeMap<u64, Vec<Found>> = BTreeMap::new();
    let mut pending_bytes = 0u64;
    let mut reader = Chunked {
        file,
        used,
        buf: Vec::new(),
        start: SEGMENT_HEADER_SIZE as u64,
    };
    let mut pos = SEGMENT_HEADER_SIZE as u64;
    while pos < used {
        let bytes = reader.record_at(pos, &name)?;
        let Decoded::Record(r) = record::decode(bytes) else {
            return Err(StorageError::corruption(
                &name,
                pos,
                "damaged record in a compacted segment",
            ));
        };
        let loc = Loc {
            segment,
            offset: pos,
            size: r.size as u32,
            doc_size: 0,
        };
        pos += r.size as u64;
        if !matches!(r.kind, Kind::Put | Kind::Move) {
            continue;
        }
        let data = record::parse_data(r.kind, r.payload)
            .map_err(|why| StorageError::corruption(&name, loc.offset, why))?;
        let Some(doc) = data.document else { continue };
        if !colls.contains_key(&data.collection_id) {
            continue;
        }
        let loc = Loc {
            doc_size: doc.len() as u32,
            ..loc
        };
        pending_bytes += u64::from(loc.size);
        pending.entry(data.collection_id).or_default().push(Found {
            rid: data.record_id,
            loc,
            doc: doc.to_vec(),
        });
        if pending_bytes >= COMPACTION_CHUNK_BYTES {
            move_found(inner, &colls, std::mem::take(&mut pending))?;
            pending_bytes = 0;
        }
    }
    move_found(inner, &colls, pending)
}

/// A segment read front to back in chunks; `buf` holds bytes from `start`.
pub(crate) struct Chunked {
    pub file: Arc<dyn crate::backend::BackendFile>,
    pub used: u64,
    pub buf: Vec<u8>,
    pub start: u64,
}

impl Chunked {
    /// The bytes of the whole record at `pos` (which is at or after `start`).
    pub fn record_at(&mut self, pos: u64, name: &str) -> Result<&[u8]> {
        self.ensure(pos, RECORD_HEADER_SIZE as u64, name)?;
        let at = (pos - self.start) as usize;
        let len = u32::from_le_bytes([
            self.buf[at],
            self.buf[at + 1],
            self.buf[at + 2],
            self.buf[at + 3],
        ]);
        let size = RECORD_HEADER_SIZE as u64 + u64::from(len);
        self.ensure(pos, size, name)?;
        let at = (pos - self.start) as usize;
        Ok(&self.buf[at..at + size as usize])
    }

    /// Makes `[pos, pos + n)` present in the buffer, dropping what lies before `pos`.
    fn ensure(&mut self, pos: u64, n: u64, name: &str) -> Result<()> {
        if pos + n > self.used {
            return Err(StorageError::corruption(
                name,
                pos,
                "record runs past the segment's end",
            ));
        }
        let have_end = self.start + self.buf.len() as u64;
        if pos + n <= have_end {
            return Ok(());
        }
        let skip = ((pos - self.start) as usize).min(self.buf.len());
        self.buf.drain(..skip);
        self.start = pos;
        let from = self.start + self.buf.len() as u64;
        let want = (pos + n - from)
            .max(RECOVERY_READ_CHUNK_BYTES as u64)
            .min(self.used - from);
        let old = self.buf.len();
        self.buf.resize(old + want as usize, 0);
        self.file.read_at(from, &mut self.buf[old..])?;
        Ok(())
    }
}

/// Re-appends the records still current, one collection write-lock hold per collection.
fn move_found(
    inner: &Inner,
    colls: &BTreeMap<u64, Arc<Collection>>,
    found: BTreeMap<u64, Vec<Found>>,
) -> Result<()> {
    let log = &inner.shared.log;
    let pager = &*inner.shared.pager;
    for (cid, records) in found {
        let Some(c) = colls.get(&cid) else { continue };
        // Sort out the stale records under the read lock (tree look-ups may read pages), so
        // the write lock, which readers wait for, covers only a re-check of hot pages.
        let records: Vec<Found> = {
            let st = c.read()?;
            if st.dropped {
                continue;
            }
            let mut keep = Vec::new();
            for f in records {
                if st.loc(pager, f.rid)? == Some(f.loc) {
                    keep.push(f);
                }
            }
            keep
        };
        if records.is_empty() {
            continue;
        }
        let mut st = c.write_state()?;
        if st.dropped {
            continue;
        }
        let mut moved = Vec::new();
        let mut out = Vec::new();
        for f in records {
            if st.loc(pager, f.rid)? != Some(f.loc) {
                continue; // replaced or deleted since
            }
            out.push(OutRecord::whole(
                Kind::Move,
                record::move_payload(cid, f.rid, &f.doc),
            ));
            moved.push(f);
        }
        if out.is_empty() {
            continue;
        }
        let (seq, locs) = log.append(&out, false)?;
        for (f, mut new) in moved.into_iter().zip(locs) {
            new.doc_size = f.loc.doc_size;
            if let Some(old) = st.put_loc(pager, f.rid, new)? {
                log.release(old);
            }
        }
        drop(st);
        inner.shared.commit.note_written(seq);
    }
    Ok(())
}
