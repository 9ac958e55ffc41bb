//! Sorted runs on disk for blocking stages that may use it (`allowDiskUse`).
//!
//! A run is an anonymous temporary file (in the system temp dir, unlinked so it disappears
//! when dropped) holding records in order. A record is the document's input sequence number
//! (8 bytes, little-endian) followed by the document's BSON bytes (rows are held raw, as
//! compact as BSON, and written as they are); BSON starts with its own length,
//! so records need no other framing. Reading a run back is lazy: one buffered reader per run.
//! [`Sorter`] is the external stable sort built on runs: a heap merges them by (key, input
//! position), so equal keys keep their input order.

use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{RawDocument, RawDocumentBuf};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

/// Runs open at once before they are merged into one (bounds open files per stage).
pub const OPEN_RUNS_MAX: usize = 64;
/// Bytes of read/write buffer per run.
const RUN_BUFFER_BYTES: usize = 64 * 1024;
/// Largest document a run can hold back (mongod's 16 MB plus room for nesting slack).
const RECORD_DOCUMENT_BYTES_MAX: usize = 64 * 1024 * 1024;

fn io_err(what: &str, e: std::io::Error) -> CommandError {
    err(
        ErrorCode::InternalError,
        format!("spilling to disk failed while {what}: {e}"),
    )
}

/// A finished run: records in the order they were written.
pub struct Run {
    file: File,
}

/// Writes records to a new run.
pub struct RunWriter {
    out: BufWriter<File>,
}

impl RunWriter {
    pub fn create() -> CommandResult<RunWriter> {
        if storage::nowait::active() {
            // Spilling writes to disk: not on an async worker (`crate::offload::run_tried`).
            return Err(io_err(
                "creating a temporary file",
                storage::nowait::refuse(),
            ));
        }
        let file = tempfile::tempfile().map_err(|e| io_err("creating a temporary file", e))?;
        Ok(RunWriter {
            out: BufWriter::with_capacity(RUN_BUFFER_BYTES, file),
        })
    }

    /// Appends one record.
    pub fn push(&mut self, seq: u64, doc: &RawDocument) -> CommandResult<()> {
        self.out
            .write_all(&seq.to_le_bytes())
            .and_then(|()| self.out.write_all(doc.as_bytes()))
            .map_err(|e| io_err("writing a run", e))
    }

    /// Flushes and rewinds the file so it can be read from the start.
    pub fn finish(self) -> CommandResult<Run> {
        let mut file = self
            .out
            .into_inner()
            .map_err(|e| io_err("flushing a run", e.into_error()))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| io_err("rewinding a run", e))?;
        Ok(Run { file })
    }
}

impl Run {
    /// Writes `records` (already in order) as one run.
    pub fn write<'d>(
        records: impl IntoIterator<Item = (u64, &'d RawDocument)>,
    ) -> CommandResult<Run> {
        let mut w = RunWriter::create()?;
        for (seq, doc) in records {
            w.push(seq, doc)?;
        }
        w.finish()
    }

    /// Reads the run back lazily.
    pub fn into_reader(self) -> RunReader {
        RunReader {
            input: BufReader::with_capacity(RUN_BUFFER_BYTES, self.file),
            done: false,
        }
    }
}

/// Yields a run's records in order; an I/O or decoding failure ends it with an error.
pub struct RunReader {
    input: BufReader<File>,
    done: bool,
}

impl RunReader {
    fn read_record(&mut self) -> CommandResult<Option<(u64, RawDocumentBuf)>> {
        let mut seq = [0u8; 8];
        // A clean end of file can only fall between records.
        match self.input.read(&mut seq[..1]) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) => return Err(io_err("reading a run", e)),
        }
        self.input
            .read_exact(&mut seq[1..])
            .map_err(|e| io_err("reading a run", e))?;
        let mut len = [0u8; 4];
        self.input
            .read_exact(&mut len)
            .map_err(|e| io_err("reading a run", e))?;
        let n = usize::try_from(i32::from_le_bytes(len)).unwrap_or(0);
        if !(5..=RECORD_DOCUMENT_BYTES_MAX).contains(&n) {
            return Err(err(
                ErrorCode::InternalError,
                format!("spilling to disk failed: a run holds a record of bad length {n}"),
            ));
        }
        let mut bytes = vec![0u8; n];
        bytes[..4].copy_from_slice(&len);
        self.input
            .read_exact(&mut bytes[4..])
            .map_err(|e| io_err("reading a run", e))?;
        let raw = RawDocumentBuf::from_bytes(bytes).map_err(|e| {
            err(
                ErrorCode::InternalError,
                format!("spilling to disk failed: a run holds a bad document: {e}"),
            )
        })?;
        Ok(Some((u64::from_le_bytes(seq), raw)))
    }
}

impl Iterator for RunReader {
    type Item = CommandResult<(u64, RawDocumentBuf)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A buffered document: its key, its input position (the tie-breaker that keeps the order
/// stable across runs) and the document.
pub type Row<K> = (K, u64, RawDocumentBuf);
/// Compares two keys. `Send`: a suspended pipeline keeps a merge in its cursor between batches.
pub type KeyOrder<'k, K> = Arc<dyn Fn(&K, &K) -> Ordering + Send + Sync + 'k>;
/// Rebuilds a key from a document read back from a run.
pub type KeyOf<'k, K> = Arc<dyn Fn(&RawDocument) -> CommandResult<K> + Send + Sync + 'k>;
/// Rows in order, read lazily.
pub type RowStream<'k, K> = Box<dyn Iterator<Item = CommandResult<Row<K>>> + Send + 'k>;

/// An external stable sort: rows are buffered, [`Sorter::spill`] writes the buffer as a sorted
/// run, and [`Sorter::finish`] merges the runs and the buffer by (key, input position).
pub struct Sorter<'k, K> {
    order: KeyOrder<'k, K>,
    key_of: KeyOf<'k, K>,
    rows: Vec<Row<K>>,
    runs: Vec<Run>,
}

impl<'k, K: Send + 'k> Sorter<'k, K> {
    pub fn new(order: KeyOrder<'k, K>, key_of: KeyOf<'k, K>) -> Sorter<'k, K> {
        Sorter {
            order,
            key_of,
            rows: Vec::new(),
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Row<K>) {
        self.rows.push(row);
    }

    /// Writes the buffer as a run; past [`OPEN_RUNS_MAX`] runs they are merged into one.
    pub fn spill(&mut self) -> CommandResult<()> {
        crate::interrupt::note_flags(crate::interrupt::plan_flags::USED_DISK);
        let order = &self.order;
        self.rows
            .sort_by(|a, b| order(&a.0, &b.0).then(a.1.cmp(&b.1)));
        self.runs.push(Run::write(
            self.rows.iter().map(|(_, s, d)| (*s, d.as_ref())),
        )?);
        self.rows.clear();
        if self.runs.len() > OPEN_RUNS_MAX {
            let runs = std::mem::take(&mut self.runs);
            let merged = Merge::new(self.order.clone(), self.key_of.clone(), runs, Vec::new())?;
            let mut w = RunWriter::create()?;
            for row in merged {
                let (_, seq, doc) = row?;
                w.push(seq, &doc)?;
            }
            self.runs.push(w.finish()?);
        }
        Ok(())
    }

    /// Every row in (key, input position) order.
    pub fn finish(mut self) -> CommandResult<RowStream<'k, K>> {
        let order = &self.order;
        self.rows
            .sort_by(|a, b| order(&a.0, &b.0).then(a.1.cmp(&b.1)));
        if self.runs.is_empty() {
            return Ok(Box::new(self.rows.into_iter().map(Ok)));
        }
        let merge = Merge::new(self.order, self.key_of, self.runs, self.rows)?;
        Ok(Box::new(merge))
    }
}

/// The current first row of one source, ordered so the heap's top is the smallest row.
struct Head<'k, K> {
    order: KeyOrder<'k, K>,
    row: Row<K>,
    source: usize,
}

impl<K> Head<'_, K> {
    fn order(&self, other: &Self) -> Ordering {
        (self.order)(&self.row.0, &other.row.0).then(self.row.1.cmp(&other.row.1))
    }
}

impl<K> PartialEq for Head<'_, K> {
    fn eq(&self, other: &Self) -> bool {
        self.order(other) == Ordering::Equal
    }
}
impl<K> Eq for Head<'_, K> {}
impl<K> PartialOrd for Head<'_, K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Head<'_, K> {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap; reversed, its top is the smallest (key, seq).
        self.order(other).reverse()
    }
}

/// A lazy k-way merge of sorted sources by (key, input position).
struct Merge<'k, K> {
    order: KeyOrder<'k, K>,
    heap: BinaryHeap<Head<'k, K>>,
    sources: Vec<RowStream<'k, K>>,
    failed: bool,
}

impl<'k, K: Send + 'k> Merge<'k, K> {
    fn new(
        order: KeyOrder<'k, K>,
        key_of: KeyOf<'k, K>,
        runs: Vec<Run>,
        rest: Vec<Row<K>>,
    ) -> CommandResult<Merge<'k, K>> {
        let mut sources: Vec<RowStream<'k, K>> = Vec::with_capacity(runs.len() + 1);
        for run in runs {
            let key_of = key_of.clone();
            sources.push(Box::new(run.into_reader().map(move |r| {
                let (seq, raw) = r?;
                let key = key_of(&raw)?;
                Ok((key, seq, raw))
            })));
        }
        sources.push(Box::new(rest.into_iter().map(Ok)));
        let mut merge = Merge {
            order,
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            failed: false,
        };
        for source in 0..merge.sources.len() {
            merge.refill(source)?;
        }
        Ok(merge)
    }

    /// Moves the next row of `source`, if any, into the heap.
    fn refill(&mut self, source: usize) -> CommandResult<()> {
        if let Some(next) = self.sources.get_mut(source).and_then(Iterator::next) {
            self.heap.push(Head {
                order: self.order.clone(),
                row: next?,
                source,
            });
        }
        Ok(())
    }
}

impl<'k, K: Send + 'k> Iterator for Merge<'k, K> {
    type Item = CommandResult<Row<K>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let head = self.heap.pop()?;
        if let Err(e) = self.refill(head.source) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok(head.row))
    }
}

#[cfg(test)]
mod tests {
    //! Proves a run gives back exactly what was written, in order.
    //! How: write a few documents with sequence numbers, read them back and compare.
    use super::*;
    use bson::doc;

    #[test]
    fn run_round_trips() {
        let docs: Vec<RawDocumentBuf> = (0..1000usize)
            .map(|i| RawDocumentBuf::try_from(&doc! {"i": i as i64, "s": "x".repeat(i % 17)}))
            .collect::<Result<_, _>>()
            .expect("encodes");
        let run = Run::write(
            docs.iter()
                .enumerate()
                .map(|(i, d)| (i as u64 * 3, d.as_ref())),
        )
        .expect("run");
        let back: Vec<(u64, RawDocumentBuf)> =
            run.into_reader().map(|r| r.expect("record")).collect();
        assert_eq!(back.len(), docs.len());
        for (i, (s, d)) in back.iter().enumerate() {
            assert_eq!(*s, i as u64 * 3);
            assert_eq!(d, &docs[i]);
        }
    }
}
