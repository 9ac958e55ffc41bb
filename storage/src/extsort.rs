//! Bounded-memory helpers for index builds, over the `Backend` (temporary files named `tmp-*`,
//! removed when done and at every open): `Sorter`, an external sort of byte strings (sorted runs
//! spilled past a memory bound, merged with a heap), and `SpillLog`, an ordered queue of side
//! table entries that moves to a file past a memory bound. Both frame entries as
//! `varint(len) bytes` (`SpillLog` with an op byte first).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use crate::backend::{Backend, BackendFile};
use crate::btree::page::{read_varint, write_varint};
use crate::error::{Result, StorageError};
use crate::index_build::SideOp;
use crate::limits::{
    EXTSORT_READ_CHUNK_BYTES, INDEX_BUILD_MEMORY_BYTES, INDEX_BUILD_SIDE_MEMORY_BYTES,
};

/// Per-entry bookkeeping counted against the memory bound besides the bytes themselves.
const ENTRY_OVERHEAD_BYTES: usize = 32;

fn spill_err(name: &str, why: &str) -> StorageError {
    StorageError::corruption(name, 0, format!("temporary file: {why}"))
}

/// A temporary file read front to back in chunks.
struct Reader {
    name: String,
    file: Arc<dyn BackendFile>,
    len: u64,
    pos: u64,
    buf: Vec<u8>,
    at: usize,
}

impl Reader {
    fn new(name: String, file: Arc<dyn BackendFile>, len: u64, pos: u64) -> Reader {
        Reader {
            name,
            file,
            len,
            pos,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// Makes at least `n` unread bytes available if the file has them.
    fn fill(&mut self, n: usize) -> Result<bool> {
        if self.buf.len() - self.at >= n {
            return Ok(true);
        }
        self.buf.drain(..self.at);
        self.at = 0;
        let want = n.max(EXTSORT_READ_CHUNK_BYTES) - self.buf.len();
        let take = (self.len - self.pos).min(want as u64) as usize;
        if take > 0 {
            let start = self.buf.len();
            self.buf.resize(start + take, 0);
            self.file.read_at(self.pos, &mut self.buf[start..])?;
            self.pos += take as u64;
        }
        Ok(self.buf.len() >= n)
    }

    /// The next framed entry, or None at the end.
    fn next(&mut self, with_op: bool) -> Result<Option<(u8, Vec<u8>)>> {
        let head = if with_op { 11 } else { 10 };
        self.fill(head)?;
        if self.at == self.buf.len() {
            return Ok(None);
        }
        let mut at = self.at;
        let op = if with_op {
            at += 1;
            self.buf[self.at]
        } else {
            0
        };
        let (len, used) =
            read_varint(&self.buf[at..]).ok_or_else(|| spill_err(&self.name, "bad length"))?;
        at += used;
        let len = usize::try_from(len).map_err(|_| spill_err(&self.name, "bad length"))?;
        let header = at - self.at;
        if !self.fill(header + len)? {
            return Err(spill_err(&self.name, "truncated entry"));
        }
        let start = self.at + header;
        let bytes = self.buf[start..start + len].to_vec();
        self.at = start + len;
        Ok(Some((op, bytes)))
    }

    fn offset(&self) -> u64 {
        self.pos - (self.buf.len() - self.at) as u64
    }
}

/// An external sort of byte strings. Entries must be distinct.
pub(crate) struct Sorter {
    backend: Arc<dyn Backend>,
    prefix: String,
    buffer: Vec<Vec<u8>>,
    bytes: usize,
    budget_bytes: usize,
    runs: Vec<(String, Arc<dyn BackendFile>, u64)>,
}

impl Sorter {
    pub fn new(backend: Arc<dyn Backend>, prefix: &str) -> Sorter {
        Sorter::with_budget(backend, prefix, INDEX_BUILD_MEMORY_BYTES)
    }

    pub fn with_budget(backend: Arc<dyn Backend>, prefix: &str, budget_bytes: usize) -> Sorter {
        Sorter {
            backend,
            prefix: prefix.to_string(),
            buffer: Vec::new(),
            bytes: 0,
            budget_bytes,
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, entry: Vec<u8>) -> Result<()> {
        self.bytes += entry.len() + ENTRY_OVERHEAD_BYTES;
        self.buffer.push(entry);
        if self.bytes >= self.budget_bytes {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        self.buffer.sort_unstable();
        let name = format!("{}-run-{}", self.prefix, self.runs.len());
        let file = self.backend.create(&name)?;
        let mut out = Vec::with_capacity(EXTSORT_READ_CHUNK_BYTES + 64);
        let mut at = 0u64;
        for e in self.buffer.drain(..) {
            write_varint(&mut out, e.len() as u64);
            out.extend_from_slice(&e);
            if out.len() >= EXTSORT_READ_CHUNK_BYTES {
                file.write_at(at, &out)?;
                at += out.len() as u64;
                out.clear();
            }
        }
        file.write_at(at, &out)?;
        at += out.len() as u64;
        self.runs.push((name, file, at));
        self.bytes = 0;
        Ok(())
    }

    /// Every entry pushed, ascending.
    pub fn finish(mut self) -> Result<Merged> {
        if self.runs.is_empty() {
            let mut buffer = std::mem::take(&mut self.buffer);
            buffer.sort_unstable();
            return Ok(Merged {
                memory: buffer.into_iter(),
                readers: Vec::new(),
                heap: BinaryHeap::new(),
                names: Vec::new(),
                backend: self.backend.clone(),
            });
        }
        if !self.buffer.is_empty() {
            self.spill()?;
        }
        let runs = std::mem::take(&mut self.runs);
        let mut readers = Vec::new();
        let mut names = Vec::new();
        let mut heap = BinaryHeap::new();
        for (i, (name, file, len)) in runs.into_iter().enumerate() {
            names.push(name.clone());
            let mut r = Reader::new(name, file, len, 0);
            if let Some((_, e)) = r.next(false)? {
                heap.push(Reverse((e, i)));
            }
            readers.push(r);
        }
        Ok(Merged {
            memory: Vec::new().into_iter(),
            readers,
            heap,
            names,
            backend: self.backend.clone(),
        })
    }
}

impl Drop for Sorter {
    fn drop(&mut self) {
        for (name, _, _) in &self.runs {
            let _ = self.backend.remove(name);
        }
    }
}

/// The sorted output of a `Sorter`; removes its run files when dropped.
pub(crate) struct Merged {
    memory: std::vec::IntoIter<Vec<u8>>,
    readers: Vec<Reader>,
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
    names: Vec<String>,
    backend: Arc<dyn Backend>,
}

impl Iterator for Merged {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.readers.is_empty() {
            return self.memory.next().map(Ok);
        }
        let Reverse((entry, i)) = self.heap.pop()?;
        match self.readers[i].next(false) {
            Ok(Some((_, e))) => self.heap.push(Reverse((e, i))),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(entry))
    }
}

impl Drop for Merged {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.backend.remove(name);
        }
    }
}

const OP_INSERT: u8 = 1;
const OP_REMOVE: u8 = 2;

/// An ordered queue of side-table entries: memory first, a file past the bound. Entries in the
/// file are always older than those in memory.
pub(crate) struct SpillLog {
    backend: Arc<dyn Backend>,
    name: String,
    memory: VecDeque<SideOp>,
    bytes: usize,
    budget_bytes: usize,
    /// The file, its length and the read position.
    file: Option<(Arc<dyn BackendFile>, u64, u64)>,
}

impl SpillLog {
    pub fn new(backend: Arc<dyn Backend>, name: String) -> SpillLog {
        SpillLog::with_budget(backend, name, INDEX_BUILD_SIDE_MEMORY_BYTES)
    }

    pub fn with_budget(backend: Arc<dyn Backend>, name: String, budget_bytes: usize) -> SpillLog {
        SpillLog {
            backend,
            name,
            memory: VecDeque::new(),
            bytes: 0,
            budget_bytes,
            file: None,
        }
    }

    pub fn push(&mut self, ops: Vec<SideOp>) -> Result<()> {
        for op in ops {
            self.bytes += match &op {
                SideOp::Insert(e) | SideOp::Remove(e) => e.len() + ENTRY_OVERHEAD_BYTES,
            };
            self.memory.push_back(op);
        }
        if self.bytes >= self.budget_bytes {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        let (file, len, read) = match self.file.take() {
            Some(f) => f,
            None => (self.backend.create(&self.name)?, 0, 0),
        };
        let mut out = Vec::new();
        for op in self.memory.drain(..) {
            let (code, e) = match op {
                SideOp::Insert(e) => (OP_INSERT, e),
                SideOp::Remove(e) => (OP_REMOVE, e),
            };
            out.push(code);
            write_varint(&mut out, e.len() as u64);
            out.extend_from_slice(&e);
        }
        file.write_at(len, &out)?;
        self.file = Some((file, len + out.len() as u64, read));
        self.bytes = 0;
        Ok(())
    }

    /// Up to `max` of the oldest entries, removed from the queue.
    pub fn take(&mut self, max: usize) -> Result<Vec<SideOp>> {
        let mut out = Vec::new();
        if let Some((file, len, read)) = self.file.take() {
            let mut r = Reader::new(self.name.clone(), file.clone(), len, read);
            while out.len() < max {
                match r.next(true)? {
                    Some((OP_INSERT, e)) => out.push(SideOp::Insert(e)),
                    Some((OP_REMOVE, e)) => out.push(SideOp::Remove(e)),
                    Some(_) => return Err(spill_err(&self.name, "unknown op")),
                    None => break,
                }
            }
            let at = r.offset();
            if at < len {
                self.file = Some((file, len, at));
                return Ok(out);
            }
            // The file is used up; what follows is in memory.
            let _ = self.backend.remove(&self.name);
        }
        while out.len() < max {
            let Some(op) = self.memory.pop_front() else {
                break;
            };
            self.bytes = self.bytes.saturating_sub(match &op {
                SideOp::Insert(e) | SideOp::Remove(e) => e.len() + ENTRY_OVERHEAD_BYTES,
            });
            out.push(op);
        }
        Ok(out)
    }
}

impl Drop for SpillLog {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = self.backend.remove(&self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimBackend;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sorter_spills_and_merges_in_order() {
        let backend: Arc<dyn Backend> = Arc::new(SimBackend::new());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let budget = 256 << 10;
        let mut s = Sorter::with_budget(backend.clone(), "tmp-t", budget);
        let mut want = Vec::new();
        // Enough bytes for several runs.
        for i in 0..(5 * budget / 64) {
            let mut e = vec![0u8; rng.random_range(1..40)];
            rng.fill(&mut e[..]);
            e.extend_from_slice(&(i as u64).to_be_bytes());
            want.push(e.clone());
            s.push(e).expect("push");
        }
        want.sort();
        let got: Vec<Vec<u8>> = s
            .finish()
            .expect("finish")
            .map(|e| e.expect("entry"))
            .collect();
        assert_eq!(got, want);
        assert!(
            backend
                .list()
                .expect("list")
                .iter()
                .all(|n| !n.starts_with("tmp-")),
            "run files removed"
        );
    }

    #[test]
    fn spill_log_keeps_order_across_the_file() {
        let backend: Arc<dyn Backend> = Arc::new(SimBackend::new());
        let budget = 256 << 10;
        let mut log = SpillLog::with_budget(backend.clone(), "tmp-side".into(), budget);
        let mut want = VecDeque::new();
        let mut got = Vec::new();
        let big = vec![7u8; 1000];
        for i in 0..(budget / 100) as u32 {
            let mut e = big.clone();
            e.extend_from_slice(&i.to_be_bytes());
            let op = if i % 3 == 0 {
                SideOp::Remove(e)
            } else {
                SideOp::Insert(e)
            };
            want.push_back(op.clone());
            log.push(vec![op]).expect("push");
            if i % 500 == 0 {
                got.extend(log.take(1234).expect("take"));
            }
        }
        loop {
            let batch = log.take(777).expect("take");
            if batch.is_empty() {
                break;
            }
            got.extend(batch);
        }
        assert_eq!(got, Vec::from(want));
    }
}
