//! A sorted `find` result kept as its sort buffer: the matching documents in their final order,
//! each projected (or turned into its index key, or given its `$recordId`) only when a batch
//! takes it. So a cursor holds at most one prepared result beyond the batch being built, while
//! the buffer itself (what mongod's SORT stage holds as well) keeps its charge on the query
//! memory budget until it is handed out, killed or reaped: the charge shrinks as rows leave.

use super::scan::index_key_of;
use crate::error::CommandResult;
use crate::query::budget::Held;
use crate::query::projection::Projection;
use bson::{Document, RawDocumentBuf, cstr};
use std::collections::VecDeque;
use std::sync::Arc;

/// What turns a stored document into the result a client sees; the resumable scan
/// (`super::scan::ScanState::finish`) finishes its matches the same way.
#[derive(Default)]
pub struct Finish {
    pub projection: Option<Arc<Projection>>,
    pub show_record_id: bool,
    /// `returnKey`: the key pattern of the plan's index.
    pub return_key: Option<Document>,
}

impl Finish {
    /// Projection (or `returnKey`) and `showRecordId` for one result document; `pos` is the
    /// matched array position (for `$` projections), `score` the text score.
    pub fn apply(
        &self,
        doc: RawDocumentBuf,
        rid: u64,
        pos: Option<usize>,
        score: Option<f64>,
    ) -> CommandResult<RawDocumentBuf> {
        let mut out = match (&self.return_key, &self.projection) {
            (Some(pattern), _) => index_key_of(&doc, pattern)?,
            (None, Some(p)) => match score {
                Some(s) => p.apply_scored(&doc, pos, s)?,
                // Kept fields are copied as their bytes (no decode and re-encode).
                None => p.apply_raw(&doc, pos)?,
            },
            (None, None) => doc,
        };
        if self.show_record_id {
            out.append(cstr!("$recordId"), rid as i64);
        }
        Ok(out)
    }
}

/// One sorted match: its RecordId, the stored document, the matched array position and the
/// text score.
pub struct Row {
    pub rid: u64,
    pub doc: RawDocumentBuf,
    pub pos: Option<usize>,
    pub score: Option<f64>,
}

/// The rest of a sorted result, finished one document at a time.
pub struct SortedRows {
    rows: VecDeque<Row>,
    finish: Finish,
    /// Finished but not yet handed out (a batch that ran over its byte bound puts one back).
    pub(super) pending: VecDeque<RawDocumentBuf>,
    /// The buffer's charge, when the sort was charged to the budget; it follows `bytes`.
    held: Option<Held>,
    bytes: usize,
}

impl SortedRows {
    /// `rows` in result order (skip and limit already applied); `held` carries the charge the
    /// sort took for them, if any, and is brought down to what `rows` hold.
    pub fn new(rows: Vec<Row>, finish: Finish, held: Option<Held>) -> SortedRows {
        let bytes = rows.iter().map(|r| r.doc.as_bytes().len()).sum();
        let mut s = SortedRows {
            rows: rows.into(),
            finish,
            pending: VecDeque::new(),
            held,
            bytes,
        };
        s.charge();
        s
    }

    fn charge(&mut self) {
        if let Some(h) = &mut self.held {
            // A fall is never refused.
            h.set(self.bytes);
        }
    }

    /// The next finished document, `None` at the end.
    pub fn next_doc(&mut self) -> CommandResult<Option<RawDocumentBuf>> {
        if let Some(doc) = self.pending.pop_front() {
            return Ok(Some(doc));
        }
        let Some(row) = self.rows.pop_front() else {
            return Ok(None);
        };
        self.bytes -= row.doc.as_bytes().len();
        self.charge();
        self.finish
            .apply(row.doc, row.rid, row.pos, row.score)
            .map(Some)
    }

    pub fn done(&self) -> bool {
        self.pending.is_empty() && self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::budget;
    use bson::doc;

    fn rows(n: i32) -> Vec<Row> {
        (0..n)
            .map(|i| Row {
                rid: i as u64 + 1,
                doc: RawDocumentBuf::try_from(&doc! { "_id": i, "a": i, "pad": "x".repeat(100) })
                    .expect("doc"),
                pos: None,
                score: None,
            })
            .collect()
    }

    #[test]
    fn rows_are_projected_only_as_they_are_taken_and_the_charge_follows() {
        static BUDGET: budget::Budget = budget::Budget::new(1 << 30);
        let budget = &BUDGET;
        let projection = Projection::parse(&doc! { "a": 1, "_id": 0 }).expect("projection");
        let finish = Finish {
            projection: Some(Arc::new(projection)),
            show_record_id: true,
            return_key: None,
        };
        let mut held = budget.hold();
        assert!(held.set(1 << 20));
        let mut s = SortedRows::new(rows(3), finish, Some(held));
        let full = budget.used();
        assert!(
            full > 0 && full < 1 << 20,
            "brought down to the rows: {full}"
        );
        let first = s.next_doc().expect("next").expect("a row");
        assert_eq!(
            bson::Document::try_from(first).expect("doc"),
            doc! { "a": 0, "$recordId": 1_i64 }
        );
        assert!(s.pending.is_empty(), "nothing finished ahead");
        assert!(budget.used() < full);
        assert!(s.next_doc().expect("next").is_some());
        assert!(s.next_doc().expect("next").is_some());
        assert!(s.next_doc().expect("next").is_none());
        assert!(s.done());
        assert_eq!(budget.used(), 0);
    }
}
