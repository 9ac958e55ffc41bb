//! Recovery: reads every segment in order, checks each record, hands complete records (and only
//! complete batches) to the replay callback, and applies the rule stated in `record`: a damaged
//! record is a torn tail (truncated, then synced) only if nothing valid follows it anywhere in the
//! log; otherwise opening fails with the segment file and offset.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::backend::{Backend, BackendFile};
use crate::checkpoint::Start;
use crate::error::{Result, StorageError};
use crate::limits::{RECORD_PAYLOAD_SIZE_MAX, RECOVERY_READ_CHUNK_BYTES};
use crate::log::{Loc, LogTail, Segment, new_segment};
use crate::record::{self, Decoded, Kind, RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE};

/// One record handed to replay.
pub(crate) struct Item<'a> {
    pub kind: Kind,
    pub payload: &'a [u8],
    pub loc: Loc,
}

pub(crate) struct Recovered {
    pub segments: BTreeMap<u64, Arc<Segment>>,
    pub tail: Option<LogTail>,
    pub last_sequence: u64,
}

struct Damage {
    segment: u64,
    offset: u64,
    reason: &'static str,
}

fn file_len(file: &dyn BackendFile) -> Result<usize> {
    usize::try_from(file.len()?).map_err(|e| StorageError::Io(std::io::Error::other(e)))
}

/// Bytes of a segment file from offset `base` on; `bytes[0]` is the file's byte `base`.
struct Window {
    base: usize,
    bytes: Vec<u8>,
}

impl Window {
    /// The bytes from file offset `pos` to the end of the window.
    fn at(&self, pos: usize) -> &[u8] {
        &self.bytes[pos - self.base..]
    }

    fn end(&self) -> usize {
        self.base + self.bytes.len()
    }

    /// Reads on, a chunk at a time, until the window reaches file offset `want` (or the file's
    /// end, `len`).
    fn grow(&mut self, file: &dyn BackendFile, len: usize, want: usize) -> Result<()> {
        while self.end() < want.min(len) {
            let at = self.end();
            let n = RECOVERY_READ_CHUNK_BYTES.min(len - at);
            let old = self.bytes.len();
            self.bytes.resize(old + n, 0);
            file.read_at(at as u64, &mut self.bytes[old..])?;
        }
        Ok(())
    }
}

/// The segment from `from` to the end of its written records: record lengths are followed,
/// reading chunk by chunk, up to the first all-zero header (or the first length no record can
/// have, or the file's end), so the zeroed, preallocated rest of a segment is never read and a
/// clean open costs what was written since the checkpoint, not the segment's size. Checksums are
/// checked by the scan that follows, on exactly the bytes it would have seen in the whole file.
fn read_written(file: &dyn BackendFile, from: usize) -> Result<Window> {
    let len = file_len(file)?;
    let mut w = Window {
        base: from.min(len),
        bytes: Vec::new(),
    };
    let mut pos = w.base;
    loop {
        w.grow(file, len, pos + RECORD_HEADER_SIZE)?;
        if w.end() < pos + RECORD_HEADER_SIZE {
            break;
        }
        let header = &w.at(pos)[..RECORD_HEADER_SIZE];
        if header.iter().all(|&x| x == 0) {
            break;
        }
        let payload = record::payload_len(header);
        if payload > RECORD_PAYLOAD_SIZE_MAX {
            break;
        }
        let next = pos + RECORD_HEADER_SIZE + payload;
        w.grow(file, len, next)?;
        if w.end() < next {
            break;
        }
        pos = next;
    }
    Ok(w)
}

/// The whole segment file, for the rare look past damage.
fn read_all(file: &dyn BackendFile) -> Result<Window> {
    let len = file_len(file)?;
    let mut w = Window {
        base: 0,
        bytes: Vec::new(),
    };
    w.grow(file, len, len)?;
    Ok(w)
}

/// Segment ids present, after deleting half-created (`.tmp`) and unused spare segments.
fn segment_ids(backend: &dyn Backend) -> Result<Vec<u64>> {
    let mut ids = Vec::new();
    for name in backend.list()? {
        if name.starts_with("log-") && (name.ends_with(".tmp") || name.ends_with(".spare")) {
            backend.remove(&name)?;
        } else if let Some(id) = record::parse_segment_file_name(&name) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Whether a valid record with a sequence above `after_seq` starts anywhere in `b[from..]`.
fn valid_record_after(b: &[u8], from: usize, after_seq: u64) -> bool {
    (from..b.len())
        .any(|p| matches!(record::decode(&b[p..]), Decoded::Record(r) if r.sequence > after_seq))
}

/// Runs recovery, calling `apply` for every record that counts.
/// With `start` (from a checkpoint), segments before `start.segment` are not read and replay
/// begins at `start.offset` with exactly `start.next_sequence`.
pub(crate) fn recover(
    backend: &dyn Backend,
    start: Option<&Start>,
    apply: &mut dyn FnMut(Item<'_>) -> Result<()>,
) -> Result<Recovered> {
    let mut segments = BTreeMap::new();
    let mut last_seq = start.map_or(0, |s| s.next_sequence - 1);
    let mut torn: Vec<Damage> = Vec::new();
    let mut tail = None;
    let ids = segment_ids(backend)?;
    if let Some(s) = start
        && !ids.contains(&s.segment)
    {
        let name = record::segment_file_name(s.segment);
        return Err(StorageError::corruption(
            &name,
            s.offset,
            "checkpoint names a missing segment",
        ));
    }
    for id in ids {
        let name = record::segment_file_name(id);
        let file = backend.open(&name)?;
        if let Some(s) = start
            && id < s.segment
        {
            segments.insert(id, Arc::new(skip_segment(file, id, s)?));
            continue;
        }
        let mut header = [0u8; SEGMENT_HEADER_SIZE];
        let len = file_len(file.as_ref())?;
        if len >= SEGMENT_HEADER_SIZE {
            file.read_at(0, &mut header)?;
        }
        record::check_segment_header(&header[..len.min(SEGMENT_HEADER_SIZE)], id)
            .map_err(|r| StorageError::corruption(&name, 0, r))?;
        let from = match start {
            Some(s) if s.segment == id => usize::try_from(s.offset).unwrap_or(usize::MAX),
            _ => SEGMENT_HEADER_SIZE,
        };
        if from > len {
            return Err(StorageError::corruption(
                &name,
                from as u64,
                "checkpoint offset past the segment end",
            ));
        }
        let strict = from != SEGMENT_HEADER_SIZE || start.is_some_and(|s| s.segment == id);
        let bytes = read_written(file.as_ref(), from)?;
        let (end, damage, any, seen_max) =
            scan_segment(id, &bytes, from, strict, &mut last_seq, apply)?;
        if any && let Some(t) = torn.first() {
            return Err(StorageError::corruption(
                &record::segment_file_name(t.segment),
                t.offset,
                t.reason,
            ));
        }
        if let Some(d) = damage {
            let whole = read_all(file.as_ref())?;
            if valid_record_after(&whole.bytes, d.offset as usize + 1, seen_max) {
                return Err(StorageError::corruption(&name, d.offset, d.reason));
            }
            torn.push(d);
        }
        let seg = new_segment(file);
        seg.used_bytes.store(end, Ordering::Release);
        segments.insert(id, Arc::new(seg));
        tail = Some(LogTail {
            segment_id: id,
            offset: end,
            next_sequence: 0,
        });
    }
    truncate_torn(&segments, &torn)?;
    if let Some(t) = &mut tail {
        t.next_sequence = last_seq + 1;
    }
    Ok(Recovered {
        segments,
        tail,
        last_sequence: last_seq,
    })
}

/// A segment read and checked before the checkpoint was taken: only its header is looked at.
fn skip_segment(file: Arc<dyn BackendFile>, id: u64, start: &Start) -> Result<Segment> {
    let mut h = [0u8; SEGMENT_HEADER_SIZE];
    file.read_at(0, &mut h)?;
    record::check_segment_header(&h, id)
        .map_err(|r| StorageError::corruption(&record::segment_file_name(id), 0, r))?;
    let used = start
        .segments
        .get(&id)
        .copied()
        .unwrap_or(SEGMENT_HEADER_SIZE as u64);
    let seg = new_segment(file);
    seg.used_bytes.store(used, Ordering::Release);
    Ok(seg)
}

/// Cuts each torn tail off (the space stays allocated, zeroed) and syncs.
fn truncate_torn(segments: &BTreeMap<u64, Arc<Segment>>, torn: &[Damage]) -> Result<()> {
    for t in torn {
        let Some(seg) = segments.get(&t.segment) else {
            continue;
        };
        tracing::warn!(
            segment = %record::segment_file_name(t.segment),
            offset = t.offset,
            reason = t.reason,
            "truncating torn log tail"
        );
        let cap = seg.file.len()?;
        seg.file.set_len(t.offset)?;
        seg.file.set_len(cap)?;
        seg.file.sync()?;
    }
    Ok(())
}

/// Scans one segment: (end offset of the last good record, damage if any, whether it keeps any
/// record, highest sequence read). Batches are buffered and applied only when their end record is read.
fn scan_segment<'w>(
    id: u64,
    b: &'w Window,
    from: usize,
    strict: bool,
    last_seq: &mut u64,
    apply: &mut dyn FnMut(Item<'_>) -> Result<()>,
) -> Result<(u64, Option<Damage>, bool, u64)> {
    let mut pos = from;
    // (begin offset, op count, items, last sequence before the batch)
    let mut batch: Option<(usize, u32, Vec<Item<'w>>, u64)> = None;
    let mut any = false;
    let mut first = !strict;
    let damage = loop {
        let r = match record::decode(b.at(pos)) {
            Decoded::End => break None,
            Decoded::Bad(reason) => break Some((pos, reason)),
            Decoded::Record(r) => r,
        };
        let seq_ok = if first {
            r.sequence > *last_seq
        } else {
            r.sequence == *last_seq + 1
        };
        if !seq_ok {
            break Some((pos, "sequence out of order"));
        }
        let item = Item {
            kind: r.kind,
            payload: r.payload,
            loc: Loc {
                segment: id,
                offset: pos as u64,
                size: r.size as u32,
                doc_size: 0,
            },
        };
        match (r.kind, &mut batch) {
            (Kind::BatchBegin, None) => {
                batch = Some((pos, count_of(r.payload), Vec::new(), *last_seq))
            }
            (Kind::BatchBegin, Some(_)) => break Some((pos, "batch begins inside a batch")),
            (Kind::BatchEnd, Some((_, n, items, _)))
                if *n == count_of(r.payload) && items.len() == *n as usize =>
            {
                for it in std::mem::take(items) {
                    apply(it)?;
                }
                batch = None;
            }
            (Kind::BatchEnd, _) => break Some((pos, "batch end does not match its begin")),
            (_, Some((_, _, items, _))) => items.push(item),
            (_, None) => apply(item)?,
        }
        any = true;
        first = false;
        *last_seq = r.sequence;
        pos += r.size;
    };
    let seen_max = *last_seq;
    // An unfinished batch is cut back to its begin record.
    let damage = match (batch, damage) {
        (Some((start, _, _, before)), d) => {
            *last_seq = before;
            let why = if d.is_some() {
                "batch cut short by a damaged record"
            } else {
                "batch without its end record"
            };
            Some((start, why))
        }
        (None, d) => d,
    };
    any &= damage.is_none_or(|(p, _)| p > from);
    let end = damage.map_or(pos, |(p, _)| p) as u64;
    let damage = damage.map(|(p, reason)| Damage {
        segment: id,
        offset: p as u64,
        reason,
    });
    Ok((end, damage, any, seen_max))
}

fn count_of(payload: &[u8]) -> u32 {
    payload
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(u32::MAX)
}
