//! The resumable scan: a collection or index read that filters, skips, limits and projects as it
//! goes, and stops at any document to be resumed by the next batch. It executes every plan the
//! planner returns: the collection in RecordId order, one index plan (IXSCAN + FETCH; `_id`
//! look-ups are index plans too), the branches of an index union one after the other (OR), or
//! those branches merged in sort order (SORT_MERGE); a union returns each RecordId once. With a
//! covering (`planner::covered`) an index entry becomes a document rebuilt from its key
//! (`super::covered`) instead of a fetch. In a transaction (or a snapshot read) an index scan
//! fetches each entry's document as the transaction sees it and then adds the documents changed
//! since its snapshot or written by it: the filter makes that exactly the snapshot's answer, in
//! no useful order (`planner::for_transaction` keeps plans from claiming the sort there).

use super::sorted::Finish;
use crate::error::{CommandResult, ErrorCode, err};
use crate::planner::covered::Covered;
use crate::planner::{self, IndexPlan, Plan};
use crate::query::matcher::Filter;
use crate::query::sort::SortSpec;
use bson::{Document, RawDocumentBuf};
use std::collections::{HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;
use storage::{Collection, Direction, RecordId};

/// Documents read from storage per step of a scan.
pub(super) const SCAN_CHUNK_COUNT: usize = 512;

/// Where a scan reads: the collection in RecordId order, or an index plan's intervals.
pub enum ScanMode {
    Collection {
        direction: Direction,
        after: Option<RecordId>,
    },
    /// One index plan, or the branches of an index union scanned one after the other.
    Index {
        plans: Vec<IndexPlan>,
        branch: usize,
        interval: usize,
        after: Option<(Vec<u8>, RecordId)>,
        seen: HashSet<RecordId>,
    },
    /// The branches of an index union merged in sort order; a RecordId is returned once
    /// (`seen`: queued or returned).
    Merge {
        branches: Vec<MergeBranch>,
        sort: SortSpec,
        seen: HashSet<RecordId>,
    },
}

/// One branch of a SORT_MERGE: an index plan read in the sort's order, its fetched documents
/// waiting to be merged.
pub struct MergeBranch {
    plan: IndexPlan,
    interval: usize,
    after: Option<(Vec<u8>, RecordId)>,
    buf: VecDeque<(RecordId, RawDocumentBuf)>,
    done: bool,
}

impl MergeBranch {
    pub fn new(plan: IndexPlan) -> MergeBranch {
        MergeBranch {
            plan,
            interval: 0,
            after: None,
            buf: VecDeque::new(),
            done: false,
        }
    }
}

/// A resumable, filtered scan (collection or index) that skips, limits and projects as it goes.
pub struct ScanState {
    pub coll: Arc<Collection>,
    pub filter: Arc<Filter>,
    /// Projection, `returnKey` (the plan's key pattern, empty for a collection scan) and
    /// `showRecordId`: what each match becomes.
    pub finish: Finish,
    pub mode: ScanMode,
    pub skip: u64,
    /// Documents still to return; `None` = no limit.
    pub remaining: Option<u64>,
    /// Reads from storage since the current batch began: with a limit or a batch size, chunks
    /// start near what is asked for and double, so a `limit: 5` query reads a handful of
    /// entries rather than a full chunk.
    reads: u32,
    /// Documents the current batch still asks for (`None`: as many as fit). A cursor left open
    /// after a small batch then holds a few read-ahead matches, not a full chunk of them.
    wanted: Option<u64>,
    pub exhausted: bool,
    /// Matching documents read ahead of the batch that asked for them.
    pub pending: VecDeque<RawDocumentBuf>,
    pub keys_examined: u64,
    pub docs_examined: u64,
    /// Set when the projection is answered from index keys (see `planner::covered`).
    pub covered: Option<Covered>,
    /// Matches read from storage but not yet handed out.
    matches: VecDeque<(RecordId, RawDocumentBuf, Option<usize>)>,
    /// A clustered collection read in `_id` order: its `_id` entries are its records, so they
    /// count as documents examined, not keys (as mongod's clustered scans count them).
    clustered: bool,
    /// An error the scan gives instead of its first match (the planner refused the filter).
    refusal: Option<crate::error::CommandError>,
}

/// An index key pattern as mongod's planSummary writes it: `{ a: 1, b: -1 }`.
fn pattern_text(p: &bson::Document) -> String {
    let fields: Vec<String> = p.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{ {} }}", fields.join(", "))
}

impl ScanState {
    /// mongod's `planSummary`: `COLLSCAN`, or `IXSCAN { a: 1 }` per index scanned.
    pub fn plan_summary(&self) -> String {
        match &self.mode {
            ScanMode::Collection { .. } => "COLLSCAN".into(),
            ScanMode::Index { plans, .. } if self.clustered => {
                let bounded = plans.iter().any(|p| !p.field_bounds.is_empty());
                if bounded {
                    "CLUSTERED_IXSCAN"
                } else {
                    "COLLSCAN"
                }
                .into()
            }
            ScanMode::Index { plans, .. } => plans
                .iter()
                .map(|p| format!("IXSCAN {}", pattern_text(&p.key_pattern)))
                .collect::<Vec<_>>()
                .join(", "),
            ScanMode::Merge { branches, .. } => format!("SORT_MERGE ({} branches)", branches.len()),
        }
    }

    /// A scan of `coll` in `mode`; on a clustered collection a collection scan from the start
    /// reads in `_id` order, through the `_id` index (outside a transaction, whose reads keep
    /// RecordId order: see `crate::txn`).
    pub fn new(coll: Arc<Collection>, filter: Arc<Filter>, mode: ScanMode) -> ScanState {
        let clustered = coll.is_clustered();
        let mode = match mode {
            ScanMode::Collection {
                direction,
                after: None,
            } if clustered && crate::txn::current().is_none() => ScanMode::Index {
                plans: vec![planner::clustered_order_plan(direction)],
                branch: 0,
                interval: 0,
                after: None,
                seen: HashSet::new(),
            },
            mode => mode,
        };
        let clustered = clustered
            && matches!(&mode, ScanMode::Index { plans, .. }
                if plans.iter().all(|p| p.index_name == storage::ID_INDEX_NAME));
        ScanState {
            clustered,
            coll,
            filter,
            finish: Finish::default(),
            mode,
            skip: 0,
            remaining: None,
            reads: 0,
            wanted: None,
            exhausted: false,
            pending: VecDeque::new(),
            keys_examined: 0,
            docs_examined: 0,
            covered: None,
            matches: VecDeque::new(),
            refusal: None,
        }
    }

    pub(super) fn done(&self) -> bool {
        // Matches read ahead past the limit are never handed out.
        self.pending.is_empty()
            && (self.remaining == Some(0) || (self.exhausted && self.matches.is_empty()))
    }

    /// Starts a batch that asks for `count` more documents: reads from storage size themselves
    /// to it again.
    pub fn begin_batch(&mut self, count: usize) {
        self.wanted = Some(count as u64);
        self.reads = 0;
    }

    /// How many entries the next read from storage asks for.
    fn chunk_count(&mut self) -> usize {
        let reads = self.reads.min(10);
        self.reads = self.reads.saturating_add(1);
        let asked = match (self.remaining, self.wanted) {
            (Some(r), Some(w)) => Some(r.min(w)),
            (r, w) => r.or(w),
        };
        match asked {
            Some(n) => (n
                .saturating_add(self.skip)
                .saturating_add(1)
                .clamp(8, SCAN_CHUNK_COUNT as u64) as usize)
                .saturating_mul(1 << reads)
                .min(SCAN_CHUNK_COUNT),
            None => SCAN_CHUNK_COUNT,
        }
    }

    /// The next chunk of candidate documents from storage (before the filter).
    fn next_candidates(&mut self) -> CommandResult<Vec<(RecordId, RawDocumentBuf)>> {
        let serr = |e| crate::error::storage_error(e, "", "");
        let want = self.chunk_count();
        match &mut self.mode {
            ScanMode::Collection { direction, after } => {
                let (chunk, next, done) = match crate::txn::current() {
                    Some(t) => {
                        let (chunk, next) =
                            t.scan(&self.coll, *direction, *after, want).map_err(serr)?;
                        (chunk, next, next.is_none())
                    }
                    None => {
                        let chunk = self.coll.scan(*direction, *after, want).map_err(serr)?;
                        let done = chunk.len() < want;
                        let last = chunk.last().map(|(rid, _)| *rid);
                        (chunk, last, done)
                    }
                };
                // A tailable cursor resumes after the last record read, even at the end.
                if let Some(rid) = next {
                    *after = Some(rid);
                }
                if done {
                    self.exhausted = true;
                }
                self.docs_examined += chunk.len() as u64;
                crate::interrupt::count_examined(0, chunk.len() as u64);
                Ok(chunk)
            }
            ScanMode::Index { .. } => self.next_index_candidates(want),
            ScanMode::Merge { .. } => self.next_merge_candidates(),
        }
    }

    /// Up to a chunk of merged documents: each live branch keeps at least one fetched document
    /// buffered, and the least of the branch heads (by the sort) goes out next.
    fn next_merge_candidates(&mut self) -> CommandResult<Vec<(RecordId, RawDocumentBuf)>> {
        let serr = |e| crate::error::storage_error(e, "", "");
        let ScanMode::Merge {
            branches,
            sort,
            seen,
        } = &mut self.mode
        else {
            return Ok(vec![]);
        };
        for b in branches.iter_mut() {
            while b.buf.is_empty() && !b.done {
                let Some(entries) = read_index_chunk(
                    &self.coll,
                    &b.plan,
                    &mut b.interval,
                    &mut b.after,
                    SCAN_CHUNK_COUNT,
                )?
                else {
                    b.done = true;
                    break;
                };
                self.keys_examined += entries.len() as u64;
                crate::interrupt::count_examined(entries.len() as u64, 0);
                for (_, rid) in entries {
                    crate::interrupt::tick()?;
                    // A RecordId is fetched and queued once, by the first branch that meets it;
                    // it leaves at the same sort position whichever branch holds it.
                    if !seen.insert(rid) {
                        continue;
                    }
                    if let Some(doc) = self.coll.get(rid).map_err(serr)? {
                        self.docs_examined += 1;
                        crate::interrupt::count_examined(0, 1);
                        b.buf.push_back((rid, doc));
                    }
                }
            }
        }
        let mut out = Vec::new();
        while out.len() < SCAN_CHUNK_COUNT && !branches.iter().any(|b| b.buf.is_empty() && !b.done)
        {
            crate::interrupt::tick()?;
            let least = branches
                .iter()
                .enumerate()
                .filter_map(|(i, b)| b.buf.front().map(|head| (i, head)))
                .min_by(|x, y| sort.compare(&x.1.1, &y.1.1))
                .map(|(i, _)| i);
            let Some((rid, doc)) = least.and_then(|i| branches[i].buf.pop_front()) else {
                self.exhausted = true;
                break;
            };
            out.push((rid, doc));
        }
        Ok(out)
    }

    /// The next chunk of an index scan (or of the current branch of an index union): each entry
    /// becomes a document rebuilt from its key (covered) or the fetched document.
    fn next_index_candidates(
        &mut self,
        want: usize,
    ) -> CommandResult<Vec<(RecordId, RawDocumentBuf)>> {
        let serr = |e| crate::error::storage_error(e, "", "");
        let txn = crate::txn::current();
        let ScanMode::Index {
            plans,
            branch,
            interval,
            after,
            seen,
        } = &mut self.mode
        else {
            return Ok(vec![]);
        };
        let Some(plan) = plans.get(*branch) else {
            self.exhausted = true;
            return Ok(vec![]);
        };
        let Some(entries) = read_index_chunk(&self.coll, plan, interval, after, want)? else {
            *branch += 1;
            *interval = 0;
            *after = None;
            if let Some(t) = txn.as_ref().filter(|_| *branch == plans.len()) {
                // The index shows what is stored now: a transaction also looks at what changed
                // since its snapshot and what it wrote; the filter decides.
                let mut out = Vec::new();
                for rid in t.changed_rids(&self.coll).map_err(serr)? {
                    if seen.insert(rid)
                        && let Some(doc) = t.get(&self.coll, rid).map_err(serr)?
                    {
                        out.push((rid, doc));
                    }
                }
                return Ok(out);
            }
            return Ok(vec![]);
        };
        if !self.clustered {
            self.keys_examined += entries.len() as u64;
            crate::interrupt::count_examined(entries.len() as u64, 0);
        }
        // A multikey index holds a document once per distinct key; a union may reach a
        // document through several branches.
        let dedup = plan.multikey || plans.len() > 1 || txn.is_some();
        // In index order: a document rebuilt from its key, or a RecordId still to fetch.
        let mut slots: Vec<(RecordId, Option<RawDocumentBuf>)> = Vec::with_capacity(entries.len());
        for (key, rid) in entries {
            crate::interrupt::tick()?;
            if dedup && !seen.insert(rid) {
                continue;
            }
            let covered = self.covered.as_ref().filter(|_| txn.is_none());
            slots.push((rid, covered.and_then(|c| c.rebuild(&key))));
        }
        let fetch: Vec<RecordId> = slots
            .iter()
            .filter(|(_, doc)| doc.is_none())
            .map(|(rid, _)| *rid)
            .collect();
        // Outside a transaction the chunk's documents are read together (one lock, reads in
        // file order); a transaction looks at each through its own writes and snapshot.
        let fetched = match &txn {
            Some(t) => fetch
                .iter()
                .map(|&rid| t.get(&self.coll, rid))
                .collect::<storage::Result<Vec<_>>>(),
            None => self.coll.get_many(&fetch),
        }
        .map_err(serr)?;
        let mut fetched = fetched.into_iter();
        let mut out = Vec::with_capacity(slots.len());
        for (rid, rebuilt) in slots {
            if let Some(doc) = rebuilt {
                out.push((rid, doc));
            } else if let Some(doc) = fetched.next().flatten() {
                self.docs_examined += 1;
                crate::interrupt::count_examined(0, 1);
                out.push((rid, doc));
            }
        }
        Ok(out)
    }

    /// The next matching document with its array position, after skip and within the limit.
    pub fn next_match(
        &mut self,
        deadline: Option<Instant>,
    ) -> CommandResult<Option<(RecordId, RawDocumentBuf, Option<usize>)>> {
        if let Some(e) = self.refusal.take() {
            return Err(e);
        }
        loop {
            if self.remaining == Some(0) {
                return Ok(None);
            }
            if let Some(m) = self.buffer_pop() {
                return Ok(Some(m));
            }
            if self.exhausted {
                return Ok(None);
            }
            check_deadline(deadline)?;
            for (rid, doc) in self.next_candidates()? {
                // A yield point per document: a wide filter or a large document is slow to match.
                crate::interrupt::check()?;
                let Some(details) = self.filter.try_matches(&doc)? else {
                    continue;
                };
                if self.skip > 0 {
                    self.skip -= 1;
                    continue;
                }
                self.matches.push_back((rid, doc, details.array_pos));
            }
        }
    }

    fn buffer_pop(&mut self) -> Option<(RecordId, RawDocumentBuf, Option<usize>)> {
        let m = self.matches.pop_front()?;
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
        }
        Some(m)
    }

    /// Read ahead into `pending`: projected result documents.
    pub(super) fn fill(&mut self, deadline: Option<Instant>) -> CommandResult<()> {
        let Some((rid, doc, pos)) = self.next_match(deadline)? else {
            self.exhausted = true;
            return Ok(());
        };
        let out = self.finish.apply(doc, rid, pos, None)?;
        self.pending.push_back(out);
        Ok(())
    }
}

/// A scan of `coll` through the plan the planner chooses for `filter` (and `sort`): the one way
/// code that only needs matching documents reads a collection.
pub fn planned_scan(
    coll: &std::sync::Arc<Collection>,
    filter: Filter,
    filter_doc: &Document,
    sort: Option<&Document>,
) -> ScanState {
    let choice = planner::choose(coll, &filter, filter_doc, sort, None);
    // mongod's planner refuses `$text` on a compound text index without its prefix equalities.
    let refusal = crate::query::text::text_of(&filter)
        .and_then(|q| Some(q.bound()?.spec.clone()))
        .and_then(|spec| super::text::prefix_values(&filter, &spec).err());
    let mut scan = ScanState::new(
        coll.clone(),
        std::sync::Arc::new(filter),
        scan_mode(&choice.winner),
    );
    scan.refusal = refusal;
    scan
}

/// The scan mode that executes a plan.
pub fn scan_mode(plan: &Plan) -> ScanMode {
    let index = |plans: Vec<IndexPlan>| ScanMode::Index {
        plans,
        branch: 0,
        interval: 0,
        after: None,
        seen: Default::default(),
    };
    match plan {
        Plan::CollScan { direction } => ScanMode::Collection {
            direction: *direction,
            after: None,
        },
        Plan::IdPoint(id) => index(vec![planner::id_index_plan(id)]),
        Plan::Index(p) | Plan::Clustered(p) => index(vec![p.clone()]),
        Plan::Or {
            branches,
            merge: None,
        } => index(branches.clone()),
        Plan::Or {
            branches,
            merge: Some((sort, _)),
        } => ScanMode::Merge {
            branches: branches
                .iter()
                .map(|p| MergeBranch::new(p.clone()))
                .collect(),
            sort: sort.clone(),
            seen: Default::default(),
        },
    }
}

/// Calls `each` with every matching document of `coll`, in the chosen plan's order, keeping none
/// of them (count and distinct over a filter no index answers).
pub fn for_each_match(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    deadline: Option<Instant>,
    mut each: impl FnMut(&RawDocumentBuf) -> CommandResult<()>,
) -> CommandResult<()> {
    let mut scan = planned_scan(coll, filter.clone(), filter_doc, None);
    while let Some((_, doc, _)) = scan.next_match(deadline)? {
        each(&doc)?;
    }
    Ok(())
}

/// Every matching document of `coll` (in the chosen plan's order) with the array position of
/// its match; `memory_bytes_max` bounds the bytes held, `limit` the count.
pub fn collect_matches(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    deadline: Option<Instant>,
    memory_bytes_max: Option<usize>,
    limit: Option<usize>,
) -> CommandResult<Vec<(u64, RawDocumentBuf, Option<usize>)>> {
    let mut scan = planned_scan(coll, filter.clone(), filter_doc, None);
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while limit.is_none_or(|l| out.len() < l) {
        let Some(m) = scan.next_match(deadline)? else {
            break;
        };
        bytes += m.1.as_bytes().len();
        if let Some(max) = memory_bytes_max
            && bytes > max
        {
            return Err(sort_memory_error(max));
        }
        out.push(m);
    }
    Ok(out)
}

pub fn sort_memory_error(limit: usize) -> crate::error::CommandError {
    err(
        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
        format!(
            "Executor error during find command :: caused by :: Sort exceeded memory limit of {limit} bytes, but did not opt in to external sorting."
        ),
    )
}

/// `returnKey`'s document: each key-pattern field (dotted name kept) with the document's value
/// there, null when missing. For a multikey index mongod shows the one key that matched; this
/// shows the whole value the path reaches.
pub fn index_key_of(
    doc: &RawDocumentBuf,
    pattern: &bson::Document,
) -> CommandResult<RawDocumentBuf> {
    let mut out = bson::Document::new();
    for field in pattern.keys() {
        let path: Vec<String> = field.split('.').map(str::to_string).collect();
        let v = crate::query::path::get_exact(doc, &path)
            .map_or(bson::Bson::Null, crate::query::types::to_owned);
        out.insert(field.clone(), v);
    }
    RawDocumentBuf::try_from(&out).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
}

/// Index entries as storage returns them: encoded key (without RecordId) and RecordId.
type IndexEntries = Vec<(Vec<u8>, RecordId)>;

/// The next chunk of a plan's index entries after `(interval, after)`, which it advances; None
/// once every interval is read.
fn read_index_chunk(
    coll: &Collection,
    plan: &IndexPlan,
    interval: &mut usize,
    after: &mut Option<(Vec<u8>, RecordId)>,
    chunk: usize,
) -> CommandResult<Option<IndexEntries>> {
    let n = plan.intervals.len();
    if *interval >= n {
        return Ok(None);
    }
    let idx = if plan.direction == Direction::Forward {
        *interval
    } else {
        n - 1 - *interval
    };
    let (lo, hi) = &plan.intervals[idx];
    let resume = after.as_ref().map(|(k, r)| (k.as_slice(), *r));
    let entries = coll
        .index_scan(
            &plan.index_name,
            Bound::Included(lo),
            Bound::Excluded(hi),
            plan.direction,
            resume,
            chunk,
        )
        .map_err(|e| crate::error::storage_error(e, "", ""))?;
    if entries.len() < chunk {
        *interval += 1;
        *after = None;
    } else if let Some((k, r)) = entries.last() {
        *after = Some((k.clone(), *r));
    }
    Ok(Some(entries))
}

/// A yield point: the thread's operation (`crate::interrupt`: killOp, client gone, shutdown,
/// its maxTimeMS) and `deadline` (the same maxTimeMS, passed explicitly by older call sites).
pub fn check_deadline(deadline: Option<Instant>) -> CommandResult<()> {
    crate::interrupt::check()?;
    match deadline {
        Some(d) if Instant::now() >= d => Err(crate::interrupt::time_limit_error()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod scan_tests {
    use super::*;
    use crate::exec::DocSource;

    #[test]
    fn a_clustered_collection_scans_in_id_order() {
        let dir = tempfile::tempdir().unwrap();
        let engine = storage::Engine::open(dir.path(), storage::EngineOptions::default()).unwrap();
        let spec = bson::doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_", "unique": true };
        let plain = engine
            .create_collection("t", "p", bson::Document::new())
            .unwrap();
        let clustered = engine
            .create_collection("t", "c", bson::doc! { "clusteredIndex": spec })
            .unwrap();
        let inserted = [5, 1, 4, 2, 3];
        for coll in [&plain, &clustered] {
            let ops = inserted
                .iter()
                .map(|i| {
                    storage::WriteOp::Insert(
                        RawDocumentBuf::try_from(&bson::doc! { "_id": i })
                            .unwrap()
                            .into(),
                    )
                })
                .collect();
            coll.write(ops).unwrap();
        }
        let read = |coll: &Arc<Collection>, direction| {
            let filter = Arc::new(Filter::parse(&bson::doc! {}).unwrap());
            let mode = ScanMode::Collection {
                direction,
                after: None,
            };
            let mut scan = ScanState::new(coll.clone(), filter, mode);
            let mut ids = Vec::new();
            while let Some((_, doc, _)) = scan.next_match(None).unwrap() {
                ids.push(doc.get_i32("_id").unwrap());
            }
            (
                ids,
                scan.plan_summary(),
                scan.keys_examined,
                scan.docs_examined,
            )
        };
        assert_eq!(
            read(&plain, Direction::Forward),
            (inserted.to_vec(), "COLLSCAN".to_string(), 0, 5)
        );
        assert_eq!(
            read(&clustered, Direction::Forward),
            (vec![1, 2, 3, 4, 5], "COLLSCAN".to_string(), 0, 5)
        );
        assert_eq!(read(&clustered, Direction::Backward).0, vec![5, 4, 3, 2, 1]);
    }

    /// A fresh collection of `{_id: 0}` .. `{_id: n - 1}` (the directory lives as long as the
    /// returned guard).
    fn ids_collection(n: i32) -> (tempfile::TempDir, Arc<Collection>) {
        let dir = tempfile::tempdir().unwrap();
        let engine = storage::Engine::open(dir.path(), storage::EngineOptions::default()).unwrap();
        let coll = engine
            .create_collection("t", "c", bson::Document::new())
            .unwrap();
        let ops: Vec<storage::WriteOp> = (0..n)
            .map(|i| {
                storage::WriteOp::Insert(
                    RawDocumentBuf::try_from(&bson::doc! { "_id": i })
                        .unwrap()
                        .into(),
                )
            })
            .collect();
        coll.write(ops).unwrap();
        (dir, coll)
    }

    /// A cursor left open after a small batch holds a few read-ahead matches, not a chunk of
    /// 512 (600 abandoned `batchSize: 2` cursors held 60 MB before); later batches read more.
    #[test]
    fn reads_from_storage_size_themselves_to_the_batch() {
        let (_dir, coll) = ids_collection(2000);
        let filter = Arc::new(Filter::parse(&bson::doc! {}).unwrap());
        let mode = ScanMode::Collection {
            direction: Direction::Forward,
            after: None,
        };
        let mut source = DocSource::Scan(Box::new(ScanState::new(coll, filter, mode)));
        let examined = |s: &DocSource| match s {
            DocSource::Scan(s) => s.docs_examined,
            _ => unreachable!(),
        };
        assert_eq!(source.next_batch(2, None).unwrap().len(), 2);
        assert_eq!(examined(&source), 8, "the first read is sized to the batch");
        assert_eq!(source.next_batch(101, None).unwrap().len(), 101);
        assert!(examined(&source) < 2 * 103 + 8, "{}", examined(&source));
        let rest = source.next_batch(usize::MAX, None).unwrap();
        assert_eq!(rest.len(), 2000 - 103);
        assert_eq!(examined(&source), 2000);
    }

    #[test]
    fn index_scans_terminate_both_ways() {
        let (_dir, coll) = ids_collection(1000);
        for direction in [Direction::Forward, Direction::Backward] {
            let plan = IndexPlan {
                index_name: "_id_".into(),
                key_pattern: bson::doc! { "_id": 1 },
                multikey: false,
                field_bounds: vec![],
                intervals: vec![(Vec::new(), vec![0xFF; 64])],
                direction,
                provides_sort: true,
                flags: Default::default(),
            };
            let filter = Arc::new(Filter::parse(&bson::doc! {}).unwrap());
            let mode = ScanMode::Index {
                plans: vec![plan],
                branch: 0,
                interval: 0,
                after: None,
                seen: HashSet::new(),
            };
            let mut scan = ScanState::new(coll.clone(), filter, mode);
            let mut ids = Vec::new();
            let mut limited = ScanState::new(
                coll.clone(),
                Arc::new(Filter::parse(&bson::doc! {}).unwrap()),
                ScanMode::Collection {
                    direction,
                    after: None,
                },
            );
            limited.remaining = Some(3);
            let mut source = DocSource::Scan(Box::new(limited));
            assert_eq!(source.next_batch(101, None).unwrap().len(), 3);
            assert!(source.is_exhausted(), "a limit reached ends the cursor");
            while let Some((_, doc, _)) = scan.next_match(None).unwrap() {
                ids.push(doc.get_i32("_id").unwrap());
                assert!(ids.len() <= 1000, "{direction:?} scan does not end");
            }
            assert_eq!(ids.len(), 1000);
            let mut sorted = ids.clone();
            sorted.sort();
            if direction == Direction::Backward {
                sorted.reverse();
            }
            assert_eq!(ids, sorted);
        }
    }
}
