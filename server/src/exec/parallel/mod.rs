//! Parallel collection scans: a collection scan whose consumer merges exactly (a count, a
//! `$group` whose accumulators merge, a top-k `$sort`) may split the RecordId range into parts,
//! scan each part on its own thread with its own partial state, and merge the states in part
//! order, so the result is the serial scan's, document for document and bit for bit.
//!
//! When: a forward collection scan (the planner's winner) of a collection of at least
//! `parallelScanMinDocuments` documents, `parallelScanThreads` not 1, more than one core, not
//! clustered (its natural order is `_id` order, not RecordId order), not in a transaction or a
//! snapshot read (their reads go through the `Txn` installed on the command's thread, and the
//! parts would have to share that one snapshot), no JavaScript in the query (its engine is
//! per thread). Otherwise, and whenever a part gives up (its state passes the memory bound, or
//! a partial sum could not be merged exactly), the caller scans serially, which then spills or
//! fails exactly as it always did.
//!
//! Consistency: each part reads its range in chunks, each chunk one consistent read of the
//! collection, as the serial scan does; neither is a snapshot of the whole collection, and a
//! document inserted during the scan is seen by the last part only (it has the open-ended
//! range), as the serial scan sees it only if it has not finished yet.
//!
//! Bounds: at most `limits::PARALLEL_SCAN_PARTS_MAX` parts and the machine's cores; the helper
//! threads of all scans together at most `limits::PARALLEL_SCAN_HELPERS_MAX` (a scan takes the
//! helpers that are free, or runs serially). The first part runs on the command's own pool
//! thread. Every part carries the operation's interrupt token and collator; the first part to
//! fail or give up stops the others at their next document.

pub mod stages;

use super::scan::SCAN_CHUNK_COUNT;
use crate::error::{CommandResult, ErrorCode, err};
use crate::limits::{PARALLEL_SCAN_HELPERS_MAX, PARALLEL_SCAN_PARTS_MAX};
use crate::planner::Plan;
use crate::query::matcher::Filter;
use bson::{Document, RawDocumentBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use storage::{Collection, Direction, RecordId};

/// How far the server lets a scan be split (from `parallelScanThreads` and
/// `parallelScanMinDocuments`).
#[derive(Debug, Clone, Copy)]
pub struct Parallelism {
    /// Parts one scan may be split into (1: never parallel).
    pub parts_max: usize,
    /// Smallest collection, in documents, worth splitting.
    pub docs_min: u64,
}

impl Parallelism {
    pub const SERIAL: Parallelism = Parallelism {
        parts_max: 1,
        docs_min: u64::MAX,
    };

    /// From the parameters: `threads` 0 means one part per core; never more parts than cores.
    pub fn new(threads: i64, docs_min: i64) -> Parallelism {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let want = match usize::try_from(threads) {
            Ok(0) | Err(_) => cores,
            Ok(n) => n,
        };
        Parallelism {
            parts_max: want.min(cores).clamp(1, PARALLEL_SCAN_PARTS_MAX),
            docs_min: u64::try_from(docs_min).unwrap_or(0),
        }
    }
}

/// One part: the RecordIds after `after` (from the start when `None`) up to and including
/// `through` (to the end when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub after: Option<RecordId>,
    pub through: Option<RecordId>,
}

/// A scan split into ranges, holding its helper threads until dropped.
pub struct Split {
    pub ranges: Vec<Range>,
    _helpers: Helpers,
}

/// Helper threads in use by all parallel scans.
static HELPERS_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Helper threads taken from [`HELPERS_IN_USE`]; given back on drop.
struct Helpers(usize);

impl Helpers {
    /// Up to `want` helpers, as many as are free.
    fn take(want: usize) -> Helpers {
        let mut now = HELPERS_IN_USE.load(Relaxed);
        loop {
            let granted = want.min(PARALLEL_SCAN_HELPERS_MAX.saturating_sub(now));
            if granted == 0 {
                return Helpers(0);
            }
            match HELPERS_IN_USE.compare_exchange_weak(now, now + granted, Relaxed, Relaxed) {
                Ok(_) => return Helpers(granted),
                Err(seen) => now = seen,
            }
        }
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        HELPERS_IN_USE.fetch_sub(self.0, Relaxed);
    }
}

/// Operators whose evaluation needs the command's own thread (JavaScript engines are per
/// thread) or a plan other than a collection scan.
const SERIAL_ONLY_OPERATORS: &[&str] = &[
    "$where",
    "$function",
    "$accumulator",
    "$text",
    "$near",
    "$nearSphere",
];

/// True when `d` (a filter or a stage) names an operator that keeps a scan serial. A string
/// value that merely contains such a name also does: that only costs the parallelism.
pub fn serial_only(d: &Document) -> bool {
    let text = d.to_string();
    SERIAL_ONLY_OPERATORS.iter().any(|op| text.contains(op))
}

/// How many parts a scan of `coll` by `plan` would have (`None`: it stays serial), without
/// taking threads; explain reports this.
pub fn parts_for(coll: &Collection, plan: &Plan, cfg: Parallelism) -> Option<usize> {
    let forward_scan = matches!(
        plan,
        Plan::CollScan {
            direction: Direction::Forward
        }
    );
    (forward_scan && worth_splitting(coll, cfg)).then_some(cfg.parts_max)
}

/// The conditions on the collection and the operation alone (cheap: checked before planning).
pub fn worth_splitting(coll: &Collection, cfg: Parallelism) -> bool {
    cfg.parts_max >= 2
        && !coll.is_clustered()
        && crate::txn::current().is_none()
        && coll.count() >= cfg.docs_min.max(2)
}

/// Splits a scan of `coll` by `plan` into RecordId ranges of about equal width, with the
/// helper threads for them; `None` when it stays serial (see [`parts_for`]).
pub fn split(coll: &Collection, plan: &Plan, cfg: Parallelism) -> CommandResult<Option<Split>> {
    let Some(parts) = parts_for(coll, plan, cfg) else {
        return Ok(None);
    };
    if storage::nowait::active() {
        // A scan worth splitting is no call for an async worker: run it on the pool.
        return Err(crate::error::storage_error(
            storage::StorageError::Io(storage::nowait::refuse()),
            "",
            "",
        ));
    }
    let serr = |e| crate::error::storage_error(e, "", "");
    let first = coll.scan(Direction::Forward, None, 1).map_err(serr)?;
    let last = coll.scan(Direction::Backward, None, 1).map_err(serr)?;
    let (Some((lo, _)), Some((hi, _))) = (first.first(), last.first()) else {
        return Ok(None);
    };
    let width = u128::from(hi.saturating_sub(*lo)) + 1;
    let parts = parts.min(usize::try_from(width).unwrap_or(usize::MAX));
    let helpers = Helpers::take(parts.saturating_sub(1));
    if helpers.0 == 0 {
        return Ok(None);
    }
    let parts = helpers.0 + 1;
    // Boundary i: the last RecordId of part i - 1.
    let bound = |i: usize| -> RecordId {
        let offset = width * i as u128 / parts as u128;
        lo.saturating_add(u64::try_from(offset).unwrap_or(u64::MAX))
            .saturating_sub(1)
    };
    let ranges = (0..parts)
        .map(|i| Range {
            after: (i > 0).then(|| bound(i)),
            through: (i + 1 < parts).then(|| bound(i + 1)),
        })
        .collect();
    Ok(Some(Split {
        ranges,
        _helpers: helpers,
    }))
}

/// What a part's consumer says after a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Go,
    /// The part cannot finish exactly (its state passed the memory bound): every part stops and
    /// the caller scans serially.
    GiveUp,
}

/// Runs `each` over the matching documents of every range of `split`, each range on its own
/// thread with its own state from `make`; the states in range order, or `None` when a part
/// gave up. A part's error stops the others; the operation's interruption (killOp, maxTimeMS,
/// a client gone) is returned as such, but any other error gives `None`: the serial scan then
/// meets the error the serial order meets first (a later part's error may have stopped the
/// part that holds the earlier one), with its exact message.
pub fn run_parts<T, M, E>(
    split: &Split,
    coll: &Arc<Collection>,
    filter: &Filter,
    make: M,
    each: E,
) -> CommandResult<Option<Vec<T>>>
where
    T: Send,
    M: Fn() -> T + Sync,
    E: Fn(&mut T, RawDocumentBuf) -> CommandResult<Step> + Sync,
{
    let stop = AtomicBool::new(false);
    let op = crate::interrupt::current();
    let collator = crate::query::collator::current();
    let part = |range: Range| -> CommandResult<Option<T>> {
        let _op = op.as_ref().map(crate::interrupt::Interrupt::install);
        let _collator = crate::query::collator::scope(collator.clone());
        let mut state = make();
        let done = scan_range(coll, filter, range, &stop, |doc| each(&mut state, doc));
        if !matches!(done, Ok(true)) {
            stop.store(true, Relaxed);
        }
        Ok(done?.then_some(state))
    };
    let results: Vec<CommandResult<Option<T>>> = std::thread::scope(|s| {
        let part = &part;
        let helpers: Vec<_> = split.ranges[1..]
            .iter()
            .map(|r| {
                let r = *r;
                std::thread::Builder::new()
                    .name("cairn-scan".into())
                    .spawn_scoped(s, move || part(r))
            })
            .collect();
        let mut out = vec![part(split.ranges[0])];
        for h in helpers {
            out.push(match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(err(ErrorCode::InternalError, "scan part panicked"))),
                Err(e) => {
                    stop.store(true, Relaxed);
                    Err(err(ErrorCode::InternalError, format!("scan thread: {e}")))
                }
            });
        }
        out
    });
    if results.iter().any(Result::is_err) {
        crate::interrupt::check()?;
        return Ok(None);
    }
    Ok(results.into_iter().flatten().collect())
}

/// Reads one range in chunks, handing each matching document to `each`. True when the range
/// was read to its end; false when `each` gave up or another part stopped the scan.
fn scan_range(
    coll: &Collection,
    filter: &Filter,
    range: Range,
    stop: &AtomicBool,
    mut each: impl FnMut(RawDocumentBuf) -> CommandResult<Step>,
) -> CommandResult<bool> {
    let serr = |e| crate::error::storage_error(e, "", "");
    let mut after = range.after;
    loop {
        if stop.load(Relaxed) {
            return Ok(false);
        }
        crate::interrupt::check()?;
        // RecordIds are distinct integers: a bounded range holds at most its width.
        let want = match range.through {
            Some(t) => {
                let left = t.saturating_sub(after.unwrap_or(0)) + u64::from(after.is_none());
                usize::try_from(left).map_or(SCAN_CHUNK_COUNT, |l| l.min(SCAN_CHUNK_COUNT))
            }
            None => SCAN_CHUNK_COUNT,
        };
        if want == 0 {
            return Ok(true);
        }
        let chunk = coll.scan(Direction::Forward, after, want).map_err(serr)?;
        let end_of_collection = chunk.len() < want;
        let mut examined = 0u64;
        for (rid, doc) in chunk {
            if range.through.is_some_and(|t| rid > t) {
                crate::interrupt::count_examined(0, examined);
                return Ok(true);
            }
            after = Some(rid);
            examined += 1;
            // A yield point per document, as the serial scan has.
            crate::interrupt::check()?;
            if filter.try_matches(&doc)?.is_none() {
                continue;
            }
            if each(doc)? == Step::GiveUp {
                crate::interrupt::count_examined(0, examined);
                return Ok(false);
            }
        }
        crate::interrupt::count_examined(0, examined);
        if end_of_collection {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests;
