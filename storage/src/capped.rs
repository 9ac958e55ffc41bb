//! Capped collections: a collection whose options say `capped: true` with a `size` in bytes (and
//! optionally a `max` document count) keeps its newest documents only. Each write batch that
//! inserts is extended, before it is planned, with deletes of the oldest documents (lowest
//! RecordIds) until the collection fits again; they go into the same logged batch, so a crash
//! never leaves the collection over its bounds nor loses a document without the insert that
//! pushed it out (recovery applies the batch whole or not at all).
//!
//! As mongod does, only inserts make room (an update that grows a document does not trim), and
//! the document an insert just added is never the one removed: a single document larger than
//! `size` is kept alone. Existing documents the same batch updates or deletes are not chosen.

use std::collections::{HashSet, VecDeque};

use bson::Document;

use crate::collection::{CollState, Direction, RecordId, WriteOp};
use crate::error::Result;
use crate::pager::Pager;

/// Oldest documents looked up per read of the record tree while trimming.
const TRIM_READ_COUNT: usize = 256;

/// The bounds of a capped collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CappedLimits {
    pub size_bytes: u64,
    /// `None`: no bound on the count.
    pub count_max: Option<u64>,
}

fn as_u64(v: &bson::Bson) -> Option<u64> {
    match v {
        bson::Bson::Int32(n) => u64::try_from(*n).ok(),
        bson::Bson::Int64(n) => u64::try_from(*n).ok(),
        bson::Bson::Double(f) if *f >= 0.0 && f.is_finite() => Some(*f as u64),
        _ => None,
    }
}

/// The limits an options document names (`capped: true`, `size`, `max`), if it is capped.
pub fn limits_of(options: &Document) -> Option<CappedLimits> {
    let capped = match options.get("capped") {
        Some(bson::Bson::Boolean(b)) => *b,
        Some(v) => as_u64(v).is_some_and(|n| n != 0),
        None => false,
    };
    if !capped {
        return None;
    }
    let size_bytes = options.get("size").and_then(as_u64).unwrap_or(u64::MAX);
    let count_max = options.get("max").and_then(as_u64).filter(|n| *n > 0);
    Some(CappedLimits {
        size_bytes,
        count_max,
    })
}

/// The oldest documents of the collection, read a few at a time, skipping `touched`.
struct Oldest<'a> {
    st: &'a CollState,
    pager: &'a Pager,
    after: Option<RecordId>,
    buf: VecDeque<(RecordId, u64)>,
    done: bool,
}

impl Oldest<'_> {
    fn next(&mut self, touched: &HashSet<RecordId>) -> Result<Option<(RecordId, u64)>> {
        loop {
            if let Some(x) = self.buf.pop_front() {
                if touched.contains(&x.0) {
                    continue;
                }
                return Ok(Some(x));
            }
            if self.done {
                return Ok(None);
            }
            let locs = self
                .st
                .locs(self.pager, Direction::Forward, self.after, TRIM_READ_COUNT)?;
            self.done = locs.len() < TRIM_READ_COUNT;
            self.after = locs.last().map(|(rid, _)| *rid).or(self.after);
            self.buf = locs
                .into_iter()
                .map(|(rid, loc)| (rid, u64::from(loc.doc_size)))
                .collect();
        }
    }
}

/// `ops` with the deletes that keep the collection inside `limits` added after the inserts
/// that need them; the flag says which ops are the caller's.
pub(crate) fn with_trims<'a>(
    st: &CollState,
    pager: &Pager,
    limits: CappedLimits,
    ops: Vec<WriteOp<'a>>,
) -> Result<Vec<(WriteOp<'a>, bool)>> {
    if !ops.iter().any(|o| matches!(o, WriteOp::Insert(_))) {
        return Ok(ops.into_iter().map(|o| (o, true)).collect());
    }
    let touched: HashSet<RecordId> = ops
        .iter()
        .filter_map(|o| match o {
            WriteOp::Replace(rid, _) | WriteOp::Update(rid, _) | WriteOp::Delete(rid) => Some(*rid),
            WriteOp::Insert(_) => None,
        })
        .collect();
    let mut oldest = Oldest {
        st,
        pager,
        after: None,
        buf: VecDeque::new(),
        done: false,
    };
    // Inserted earlier in this batch, oldest first: removable once the old ones are gone.
    let mut fresh: VecDeque<(RecordId, u64)> = VecDeque::new();
    let (mut bytes, mut count) = (st.data_bytes, st.count);
    let mut next_rid = st.next_record_id;
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let WriteOp::Insert(d) = &op else {
            out.push((op, true));
            continue;
        };
        let size = d.as_bytes().len() as u64;
        let rid = next_rid;
        next_rid += 1;
        out.push((op, true));
        bytes += size;
        count += 1;
        let over = |bytes: u64, count: u64| {
            bytes > limits.size_bytes || limits.count_max.is_some_and(|m| count > m)
        };
        while over(bytes, count) {
            let victim = match oldest.next(&touched)? {
                Some(v) => v,
                None => match fresh.pop_front() {
                    Some(v) => v,
                    // Only the document just inserted is left: it stays.
                    None => break,
                },
            };
            out.push((WriteOp::Delete(victim.0), false));
            bytes = bytes.saturating_sub(victim.1);
            count = count.saturating_sub(1);
        }
        fresh.push_back((rid, size));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::{Engine, EngineOptions, WriteOp};
    use bson::{RawDocumentBuf, doc};

    fn ins(i: i32) -> WriteOp<'static> {
        WriteOp::Insert(
            RawDocumentBuf::try_from(&doc! { "_id": i, "pad": "x".repeat(80) })
                .unwrap()
                .into(),
        )
    }

    fn ids(c: &crate::Collection) -> Vec<i32> {
        c.scan(crate::Direction::Forward, None, 1000)
            .unwrap()
            .into_iter()
            .map(|(_, d)| d.get_i32("_id").unwrap())
            .collect()
    }

    #[test]
    fn count_bound_keeps_the_newest_in_insert_order_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
            let c = e
                .create_collection(
                    "d",
                    "c",
                    doc! { "capped": true, "size": 100_000_i64, "max": 3_i64 },
                )
                .unwrap();
            for i in 0..5 {
                let t = c.write(vec![ins(i)]).unwrap();
                assert_eq!(t.record_ids.len(), 1);
                t.wait_durable_blocking().unwrap();
            }
            assert_eq!(ids(&c), vec![2, 3, 4]);
            // One batch larger than the bound keeps its own newest documents.
            let t = c.write((10..15).map(ins).collect()).unwrap();
            assert_eq!(t.record_ids.len(), 5);
            t.wait_durable_blocking().unwrap();
            assert_eq!(ids(&c), vec![12, 13, 14]);
            // No close: the reopen replays the log.
        }
        let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
        let c = e.collection("d", "c").unwrap();
        assert_eq!(ids(&c), vec![12, 13, 14]);
        assert_eq!(c.count(), 3);
        assert!(c.find_by_id(bson::RawBsonRef::Int32(11)).unwrap().is_none());
    }

    #[test]
    fn size_bound_and_an_oversized_document_stays_alone() {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
        let one = ins(0).clone();
        let WriteOp::Insert(d) = &one else { panic!() };
        let each = d.as_bytes().len() as i64;
        let c = e
            .create_collection("d", "c", doc! { "capped": true, "size": each * 4 })
            .unwrap();
        c.write((0..10).map(ins).collect())
            .unwrap()
            .wait_durable_blocking()
            .unwrap();
        assert_eq!(ids(&c), vec![6, 7, 8, 9]);
        assert!(c.data_size_bytes() <= (each * 4) as u64);
        let big = RawDocumentBuf::try_from(&doc! { "_id": 99, "pad": "y".repeat(2000) }).unwrap();
        c.write(vec![WriteOp::Insert(big.into())])
            .unwrap()
            .wait_durable_blocking()
            .unwrap();
        assert_eq!(ids(&c), vec![99]);
    }
}
