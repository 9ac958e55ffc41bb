//! `find`'s execution: the plan (`min`/`max` bounds, a `$natural` scan or the planner's choice),
//! a covering when the projection allows one, then either a resumable scan that skips, limits
//! and projects, or, when the plan does not give the requested sort, the sorted result.

use super::scan::{ScanState, scan_mode, sort_memory_error};
use super::sorted::{Finish, Row, SortedRows};
use super::source::DocSource;
use crate::error::{CommandResult, ErrorCode, err};
use crate::planner;
use crate::query::budget::{self, Held};
use crate::query::matcher::Filter;
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;
use bson::Document;
use std::sync::Arc;
use std::time::Instant;
use storage::{Collection, Direction};

/// A parsed `find` (the command layer reads it from the request).
pub struct FindSpec {
    pub filter: Filter,
    pub filter_doc: Document,
    pub projection: Option<Arc<Projection>>,
    pub projection_doc: Option<Document>,
    pub sort: Option<(SortSpec, Document)>,
    pub natural: Option<Direction>,
    pub skip: u64,
    pub limit: Option<u64>,
    pub batch_size: Option<usize>,
    pub single_batch: bool,
    pub show_record_id: bool,
    pub return_key: bool,
    pub allow_disk_use: bool,
    pub no_timeout: bool,
    /// Bounds of a hinted index scan in index order: `[min, max)`.
    pub min: Option<Document>,
    pub max: Option<Document>,
}

/// The plan of a `find`: bounded by `min`/`max`, a `$natural` scan, or the planner's choice.
fn find_choice(
    coll: &Arc<Collection>,
    a: &FindSpec,
    hint: Option<&str>,
) -> CommandResult<planner::Choice> {
    let sort_doc = a.sort.as_ref().map(|(_, d)| d);
    Ok(match a.natural {
        _ if a.min.is_some() || a.max.is_some() => {
            planner::for_transaction(planner::for_collection(
                coll,
                planner::minmax::choose_bounded(
                    coll,
                    hint,
                    a.min.as_ref(),
                    a.max.as_ref(),
                    sort_doc,
                )?,
            ))
        }
        Some(direction) => planner::Choice {
            winner: planner::Plan::CollScan { direction },
            rejected: vec![],
        },
        None => {
            let _projection = planner::filters::projection_scope(a.projection_doc.as_ref());
            planner::choose(coll, &a.filter, &a.filter_doc, sort_doc, hint)
        }
    })
}

/// Run a `find`: an unsorted result (or one whose plan gives the sort) as a resumable scan, a
/// sorted one as the sorted documents (a top-k sort with a limit), within `sort_memory_max`
/// bytes unless `allowDiskUse`.
pub fn open(
    coll: &Arc<Collection>,
    a: &FindSpec,
    hint: Option<&str>,
    sort_memory_max: usize,
    deadline: Option<Instant>,
) -> CommandResult<DocSource> {
    let sort_doc = a.sort.as_ref().map(|(_, d)| d);
    if let Some(query) = crate::query::text::text_of(&a.filter) {
        if super::near::near_of(&a.filter).is_some() {
            return Err(err(
                ErrorCode::BadValue,
                "text and geoNear not allowed in same query",
            ));
        }
        return open_text(coll, a, &query, deadline);
    }
    if a.sort.as_ref().is_some_and(|(s, _)| s.has_text_score())
        || a.projection.as_ref().is_some_and(|p| p.wants_text_score())
    {
        return Err(err(
            ErrorCode::Location40218,
            "query requires text score metadata, but it is not available",
        ));
    }
    if let Some((path, near)) = super::near::near_of(&a.filter) {
        return open_near(coll, a, hint, &path, &near, deadline);
    }
    let choice = find_choice(coll, a, hint)?;
    let mut scan = ScanState::new(
        coll.clone(),
        Arc::new(a.filter.clone()),
        scan_mode(&choice.winner),
    );
    if !a.show_record_id && !a.return_key {
        scan.covered = planner::covered::covering(
            &choice.winner,
            a.projection_doc.as_ref(),
            &a.filter,
            sort_doc,
        );
    }
    let key_pattern = match &choice.winner {
        planner::Plan::Index(p) => p.key_pattern.clone(),
        planner::Plan::IdPoint(_) => bson::doc! { "_id": 1 },
        _ => Document::new(),
    };
    let return_key = a.return_key.then_some(key_pattern);
    let Some((sort, _)) = a.sort.as_ref().filter(|_| !choice.winner.provides_sort()) else {
        scan.finish = finish_of(a, return_key);
        scan.skip = a.skip;
        scan.remaining = a.limit;
        return Ok(DocSource::Scan(Box::new(scan)));
    };
    crate::interrupt::note_flags(crate::interrupt::plan_flags::HAS_SORT_STAGE);
    let memory_max = if a.allow_disk_use {
        None
    } else {
        Some(sort_memory_max)
    };
    let mut matches = Vec::new();
    let mut bytes = 0usize;
    let mut held = Held::global();
    // With a limit only the best skip+limit documents are kept (a top-k sort).
    let keep = a.limit.map(|l| (l + a.skip) as usize);
    while let Some(m) = scan.next_match(deadline)? {
        bytes += m.1.as_bytes().len();
        matches.push(m);
        if let Some(k) = keep
            && matches.len() >= 2 * k.max(64)
        {
            matches.sort_by(|x, y| sort.compare(&x.1, &y.1));
            matches.truncate(k);
            bytes = matches.iter().map(|m| m.1.as_bytes().len()).sum();
        }
        if let Some(max) = memory_max
            && bytes > max
        {
            return Err(sort_memory_error(max));
        }
        if !held.set(bytes) {
            return Err(budget::exhausted("Sort", bytes));
        }
    }
    // A stable sort keeps ties in scan (RecordId) order.
    matches.sort_by(|x, y| sort.compare(&x.1, &y.1));
    let rows = window(
        a,
        matches.into_iter().map(|(rid, doc, pos)| Row {
            rid,
            doc,
            pos,
            score: None,
        }),
    );
    Ok(sorted_source(rows, a, return_key, Some(held)))
}

/// The rows of a sorted result that `skip` and `limit` leave.
fn window(a: &FindSpec, rows: impl Iterator<Item = Row>) -> Vec<Row> {
    let take = a.limit.map_or(usize::MAX, |l| l as usize);
    rows.skip(a.skip as usize).take(take).collect()
}

/// A sorted result as a cursor holds it: the rows, finished a batch at a time.
fn sorted_source(
    rows: Vec<Row>,
    a: &FindSpec,
    return_key: Option<Document>,
    held: Option<Held>,
) -> DocSource {
    DocSource::Sorted(Box::new(SortedRows::new(
        rows,
        finish_of(a, return_key),
        held,
    )))
}

/// What each result of `a` becomes: its projection, `showRecordId`, and `returnKey`'s key
/// pattern when asked.
pub fn finish_of(a: &FindSpec, return_key: Option<Document>) -> Finish {
    Finish {
        projection: a.projection.clone(),
        show_record_id: a.show_record_id,
        return_key,
    }
}

/// A `find` with `$near`: the matches nearest first (or in the requested sort), then skip,
/// limit and projection.
fn open_near(
    coll: &Arc<Collection>,
    a: &FindSpec,
    hint: Option<&str>,
    path: &str,
    near: &crate::query::matcher::NearSpec,
    deadline: Option<Instant>,
) -> CommandResult<DocSource> {
    // Another sort reorders all the matches, so only the near order may stop early.
    let want = match &a.sort {
        None => a.limit.map(|l| l.saturating_add(a.skip) as usize),
        Some(_) => None,
    };
    let mut matches = super::near::sorted_matches(
        coll,
        &a.filter,
        &a.filter_doc,
        path,
        near,
        hint,
        want,
        deadline,
    )?;
    if let Some((sort, _)) = &a.sort {
        matches.sort_by(|x, y| sort.compare(&x.1, &y.1));
    }
    let rows = window(
        a,
        matches.into_iter().map(|(rid, doc, _)| Row {
            rid,
            doc,
            pos: None,
            score: None,
        }),
    );
    Ok(sorted_source(rows, a, None, None))
}

/// A `find` with `$text`: the matches with their scores (see `super::text`), sorted as asked
/// (`{$meta: "textScore"}` included), then skip, limit and projection.
fn open_text(
    coll: &Arc<Collection>,
    a: &FindSpec,
    query: &crate::query::text::TextQuery,
    deadline: Option<Instant>,
) -> CommandResult<DocSource> {
    let mut hits = super::text::run(coll, &a.filter, query, deadline)?.hits;
    if let Some((sort, _)) = &a.sort {
        hits.sort_by(|x, y| sort.compare_scored((&x.1, x.2), (&y.1, y.2)));
    }
    let rows = window(
        a,
        hits.into_iter().map(|(rid, doc, score)| Row {
            rid,
            doc,
            pos: None,
            score: Some(score),
        }),
    );
    Ok(sorted_source(rows, a, None, None))
}
