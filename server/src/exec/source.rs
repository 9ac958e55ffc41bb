//! Where a cursor's documents come from, batch by batch: documents already computed (the output
//! of an aggregate that reads other collections), a sorted find result finished a batch at a
//! time (`super::sorted`), a resumable scan (`super::scan`) that filters, skips, limits and
//! projects as it goes, or a suspended pipeline (`super::stream`, blocking stages included), so
//! a large result is never held in memory as prepared results.

use super::scan::ScanState;
use super::sorted::SortedRows;
use super::stream::Streamed;
use crate::error::CommandResult;
use bson::RawDocumentBuf;
use std::collections::VecDeque;
use std::time::Instant;

/// Most bytes of documents in one batch (a reply stays under the 48 MB message limit).
pub const BATCH_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Where a cursor's documents come from.
pub enum DocSource {
    Buffered(VecDeque<RawDocumentBuf>),
    // Boxed: a scan carries its plan and buffers, a buffered source only a queue.
    Scan(Box<ScanState>),
    /// A sorted find result: its sort buffer, projected as batches take it.
    Sorted(Box<SortedRows>),
    /// An aggregate suspended between two results.
    Pipeline(Box<Streamed>),
}

impl DocSource {
    /// The next batch: at most `count` documents and about `BATCH_BYTES_MAX` bytes (always at
    /// least one document when any is left).
    pub fn next_batch(
        &mut self,
        count: usize,
        deadline: Option<Instant>,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        if let DocSource::Scan(s) = self {
            s.begin_batch(count);
        }
        while out.len() < count {
            let next = match self {
                DocSource::Buffered(q) => q.pop_front(),
                DocSource::Sorted(s) => s.next_doc()?,
                DocSource::Scan(s) => {
                    while s.pending.is_empty() && !s.done() {
                        s.fill(deadline)?;
                    }
                    s.pending.pop_front()
                }
                DocSource::Pipeline(p) => {
                    if p.pending.is_empty() {
                        p.fill(deadline)?;
                    }
                    p.pending.pop_front()
                }
            };
            let Some(doc) = next else { break };
            bytes += doc.as_bytes().len();
            if bytes > BATCH_BYTES_MAX && !out.is_empty() {
                self.push_front(doc);
                break;
            }
            out.push(doc);
        }
        // One result of lookahead makes `is_exhausted` exact, so a batch that ends the result
        // closes the cursor (as a buffered result does); an empty batch runs nothing.
        if let DocSource::Pipeline(p) = self
            && p.pending.is_empty()
            && !out.is_empty()
        {
            p.fill(deadline)?;
        }
        Ok(out)
    }

    /// Results computed and waiting to be handed out (a suspended pipeline keeps this within
    /// one batch; a buffered source holds its whole rest).
    pub fn prepared_count(&self) -> usize {
        match self {
            DocSource::Buffered(q) => q.len(),
            DocSource::Sorted(s) => s.pending.len(),
            DocSource::Scan(s) => s.pending.len(),
            DocSource::Pipeline(p) => p.prepared_count(),
        }
    }

    fn push_front(&mut self, doc: RawDocumentBuf) {
        match self {
            DocSource::Buffered(q) => q.push_front(doc),
            DocSource::Sorted(s) => s.pending.push_front(doc),
            DocSource::Scan(s) => s.pending.push_front(doc),
            DocSource::Pipeline(p) => p.pending.push_front(doc),
        }
    }

    /// The collections a suspended pipeline reads besides its input (see
    /// `super::stream::Streamed::foreign`); none for the other sources.
    pub fn foreign(&self) -> &[super::stream::ForeignNs] {
        match self {
            DocSource::Pipeline(p) => p.foreign(),
            _ => &[],
        }
    }

    pub fn is_exhausted(&self) -> bool {
        match self {
            DocSource::Buffered(q) => q.is_empty(),
            DocSource::Sorted(s) => s.done(),
            DocSource::Scan(s) => s.done(),
            DocSource::Pipeline(p) => p.done(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_respect_count() {
        let docs: VecDeque<RawDocumentBuf> = (0..5)
            .map(|i| RawDocumentBuf::try_from(&bson::doc! { "i": i }).unwrap())
            .collect();
        let mut s = DocSource::Buffered(docs);
        assert_eq!(s.next_batch(2, None).unwrap().len(), 2);
        assert_eq!(s.next_batch(10, None).unwrap().len(), 3);
        assert!(s.is_exhausted());
    }
}
