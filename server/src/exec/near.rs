//! `$near`/`$nearSphere` in `find` and the `$geoNear` stage: the matches of the filter (found
//! through the geo index's cell bounds, which the planner picks), ordered by their distance
//! from the center, nearest first (ties in RecordId order). A near query needs a geo index on
//! its path, as mongod's does (291 without one).

use super::scan::{ScanState, scan_mode};
use crate::error::{CommandResult, ErrorCode, err};
use crate::planner;
use crate::query::matcher::{Filter, NearSpec, Op};
use crate::query::path;
use bson::{Document, RawDocumentBuf};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;
use storage::Collection;

/// The `$near` leaf of a filter's top-level conjunction, with its path.
pub fn near_of(filter: &Filter) -> Option<(String, NearSpec)> {
    planner::bounds::conjunction(filter)
        .into_iter()
        .find_map(|(p, op)| match op {
            Op::Near(n) => Some((p.to_string(), (**n).clone())),
            _ => None,
        })
}

/// The error of a near query without a geo index on its path.
pub fn no_index_error() -> crate::error::CommandError {
    err(
        ErrorCode::NoQueryExecutionPlans,
        "error processing query: planner returned error :: caused by :: unable to find index for $geoNear query",
    )
}

/// Whether the collection has a visible geo index on `path`.
pub fn has_geo_index(coll: &Collection, path: &str) -> bool {
    coll.indexes().iter().any(|ix| {
        !ix.spec.hidden
            && ix
                .spec
                .key
                .iter()
                .any(|(f, kind)| f == path && planner::is_geo(kind))
    })
}

/// The distance of a document's nearest location on `path`.
pub fn distance_of(doc: &RawDocumentBuf, path_parts: &[String], near: &NearSpec) -> Option<f64> {
    let mut best: Option<f64> = None;
    let _ = path::walk::<()>(doc, path_parts, &mut |c| {
        if let Some(d) = c.value.and_then(|v| near.distance(v)) {
            best = Some(best.map_or(d, |b| b.min(d)));
        }
        ControlFlow::Continue(())
    });
    best
}

/// Every match of `filter` (which holds the near predicate on `path`) with its distance,
/// nearest first.
pub fn sorted_matches(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    path_name: &str,
    near: &NearSpec,
    hint: Option<&str>,
    deadline: Option<Instant>,
) -> CommandResult<Vec<(u64, RawDocumentBuf, f64)>> {
    if !has_geo_index(coll, path_name) {
        return Err(no_index_error());
    }
    let choice = planner::choose(coll, filter, filter_doc, None, hint);
    let mut scan = ScanState::new(
        coll.clone(),
        Arc::new(filter.clone()),
        scan_mode(&choice.winner),
    );
    let parts = path::split(path_name);
    let mut out = Vec::new();
    while let Some((rid, doc, _)) = scan.next_match(deadline)? {
        let d = distance_of(&doc, &parts, near).unwrap_or(f64::INFINITY);
        out.push((rid, doc, d));
    }
    out.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
    Ok(out)
}
