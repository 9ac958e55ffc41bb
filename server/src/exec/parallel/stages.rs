//! What a parallel scan computes per part and how the parts merge: a count (the `count`
//! command, the drivers' `countDocuments` pipeline, `$count`), a `$group` whose accumulators
//! merge (`Group::merge_tables`), and a top-k `$sort` (`TopK::merge`). Each is the output of
//! the first pipeline stage the scan does not already do, handed to the rest of the pipeline as
//! its input; `None` everywhere means "scan serially".
//!
//! Memory: each part charges its state to the server's budget (`query::budget`) and all parts
//! together are held to the stage's bound (`internalQueryMaxBlockingSortMemoryUsageBytes`);
//! past either a part gives up and the serial scan runs, which spills (`allowDiskUse`) or
//! fails with the serial error. Spilling therefore never happens in parallel.

use super::{Parallelism, Split, Step, run_parts, serial_only, split};
use crate::error::CommandResult;
use crate::planner::{self, Plan};
use crate::query::budget::Held;
use crate::query::matcher::Filter;
use crate::query::pipeline::{Group, GroupTable, Mergeable, Pipeline, TopK};
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use storage::Collection;

/// The matching documents of `coll` counted in parallel, when its plan is a collection scan
/// worth splitting (`None`: count serially).
pub fn count(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    cfg: Parallelism,
) -> CommandResult<Option<u64>> {
    // Most counts are of small collections: no second planning for them.
    if !super::worth_splitting(coll, cfg) {
        return Ok(None);
    }
    let choice = planner::choose(coll, filter, filter_doc, None, None);
    if count_parts(coll, filter_doc, &choice.winner, cfg).is_none() {
        return Ok(None);
    }
    let Some(split) = split(coll, &choice.winner, cfg)? else {
        return Ok(None);
    };
    count_split(&split, coll, filter)
}

fn count_split(
    split: &Split,
    coll: &Arc<Collection>,
    filter: &Filter,
) -> CommandResult<Option<u64>> {
    let counts = run_parts(
        split,
        coll,
        filter,
        || 0u64,
        |n, _| {
            *n += 1;
            Ok(Step::Go)
        },
    )?;
    Ok(counts.map(|c| c.iter().sum()))
}

/// How many parts a parallel scan would run stage `at` of `pipeline` in (`None`: serial), as
/// explain shows it; a part may still give up at run time (see the module note).
pub fn stage_parts(
    coll: &Collection,
    pipeline: &Pipeline,
    at: usize,
    filter_doc: &Document,
    plan: &Plan,
    cfg: Parallelism,
) -> Option<usize> {
    pipeline.mergeable_at(at)?;
    let stage_doc = pipeline.stage_documents().swap_remove(at);
    if serial_only(filter_doc) || serial_only(&stage_doc) {
        return None;
    }
    super::parts_for(coll, plan, cfg)
}

/// How many parts a count of the matches of `filter_doc` by `plan` would run in.
pub fn count_parts(
    coll: &Collection,
    filter_doc: &Document,
    plan: &Plan,
    cfg: Parallelism,
) -> Option<usize> {
    if serial_only(filter_doc) {
        return None;
    }
    super::parts_for(coll, plan, cfg)
}

/// The explain tree of a parallel scan: a `PARALLEL` stage over the scan's tree, with the number
/// of parts and the stage each part runs (merged in part order).
pub fn explain_tree(parts: usize, per_part: Option<Document>, input: Document) -> Document {
    let mut d = doc! { "stage": "PARALLEL", "parts": i32::try_from(parts).unwrap_or(i32::MAX) };
    if let Some(stage) = per_part {
        d.insert("partialStage", stage);
    }
    d.insert("inputStage", input);
    d
}

/// What a parallel scan did for a pipeline: the output of stage `at` (the input of the stages
/// after it) and the number of parts.
pub struct StageOutput {
    pub docs: VecDeque<RawDocumentBuf>,
    pub parts: usize,
}

/// Runs stage `at` of `pipeline` (the first one the scan by `plan` does not do) over a parallel
/// scan of `coll` filtered by `filter`, when that stage merges and the scan is worth splitting.
pub fn run_stage(
    coll: &Arc<Collection>,
    pipeline: &Pipeline,
    at: usize,
    filter: &Filter,
    filter_doc: &Document,
    plan: &Plan,
    cfg: Parallelism,
) -> CommandResult<Option<StageOutput>> {
    let Some(stage) = pipeline.mergeable_at(at) else {
        return Ok(None);
    };
    if stage_parts(coll, pipeline, at, filter_doc, plan, cfg).is_none() {
        return Ok(None);
    }
    let Some(split) = split(coll, plan, cfg)? else {
        return Ok(None);
    };
    let bound = Bound::new(pipeline.memory_max_bytes());
    let docs = match stage {
        Mergeable::Count(field) => count_split(&split, coll, filter)?.map(|n| count_doc(field, n)),
        Mergeable::Group(g) => group(&split, coll, filter, g, &bound)?,
        Mergeable::TopK(keys, k) => {
            let parts = run_parts(
                &split,
                coll,
                filter,
                || (TopK::new(keys, k), Held::global(), 0usize),
                |(top, held, used), doc| {
                    let now = top.push(doc);
                    Ok(bound.charge(held, used, now))
                },
            )?;
            parts.map(|p| TopK::merge(p.into_iter().map(|(t, _, _)| t).collect()))
        }
    };
    Ok(docs.map(|docs| StageOutput {
        docs: docs.into(),
        parts: split.ranges.len(),
    }))
}

/// `$count`'s output: one document, none for no input (as the stage).
fn count_doc(field: &str, n: u64) -> Vec<RawDocumentBuf> {
    if n == 0 {
        return Vec::new();
    }
    let value = i32::try_from(n).map_or_else(
        |_| Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
        Bson::Int32,
    );
    RawDocumentBuf::try_from(&doc! { field: value })
        .map(|d| vec![d])
        .unwrap_or_default()
}

fn group(
    split: &Split,
    coll: &Arc<Collection>,
    filter: &Filter,
    g: &Group,
    bound: &Bound,
) -> CommandResult<Option<Vec<RawDocumentBuf>>> {
    let parts = run_parts(
        split,
        coll,
        filter,
        || (g.table(), Held::global(), 0usize),
        |(table, held, used), doc| match g.fold_part(table, &doc)? {
            Some(now) => Ok(bound.charge(held, used, now)),
            None => Ok(Step::GiveUp),
        },
    )?;
    let Some(parts) = parts else {
        return Ok(None);
    };
    // The parts' charges stay until the output is made (it is then handed on uncharged, as
    // small as the table it came from).
    let (tables, _held): (Vec<GroupTable>, Vec<Held>) =
        parts.into_iter().map(|(t, h, _)| (t, h)).unzip();
    match g.merge_tables(tables) {
        Some(t) => g.table_output(t).map(Some),
        None => Ok(None),
    }
}

/// The stage's memory bound shared by all parts: their states together may hold
/// `max_bytes`, and each part's state is charged to the server's budget.
struct Bound {
    max_bytes: usize,
    used_bytes: AtomicUsize,
}

impl Bound {
    fn new(max_bytes: usize) -> Bound {
        Bound {
            max_bytes,
            used_bytes: AtomicUsize::new(0),
        }
    }

    /// Records that a part's state went from `*used` to `now` bytes; gives up past the stage's
    /// bound or when the server's budget has no room.
    fn charge(&self, held: &mut Held, used: &mut usize, now: usize) -> Step {
        if now == *used {
            // Nothing changed (most documents of a top-k): no shared counter is touched.
            return Step::Go;
        }
        let total = if now >= *used {
            self.used_bytes.fetch_add(now - *used, Relaxed) + (now - *used)
        } else {
            self.used_bytes.fetch_sub(*used - now, Relaxed) - (*used - now)
        };
        *used = now;
        if total > self.max_bytes || !held.set(now) {
            return Step::GiveUp;
        }
        Step::Go
    }
}
