//! `$near`/`$nearSphere` in `find` and the `$geoNear` stage: the matches of the filter (found
//! through the geo index's cell bounds, which the planner picks), ordered by their distance
//! from the center, nearest first (ties in RecordId order). A near query needs a geo index on
//! its path, as mongod's does (291 without one).

use super::scan::{ScanState, scan_mode};
use crate::error::{CommandResult, ErrorCode, err};
use crate::planner;
use crate::query::matcher::{Filter, NearMetric, NearSpec, Op};
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
/// nearest first; with `want` (skip + limit, when the caller keeps only the nearest few) and a
/// spherical distance over a `2dsphere` index, only as many of them as [`nearest`] must read.
#[allow(clippy::too_many_arguments)]
pub fn sorted_matches(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    path_name: &str,
    near: &NearSpec,
    hint: Option<&str>,
    want: Option<usize>,
    deadline: Option<Instant>,
) -> CommandResult<Vec<(u64, RawDocumentBuf, f64)>> {
    if !has_geo_index(coll, path_name) {
        return Err(no_index_error());
    }
    match want {
        Some(k) if k > 0 && hint.is_none() && near.metric != NearMetric::Flat => {
            nearest(coll, filter, filter_doc, path_name, near, k, deadline)
        }
        _ => {
            let choice = planner::choose(coll, filter, filter_doc, None, hint);
            all_matches(coll, filter, &choice, path_name, near, deadline)
        }
    }
}

/// The smallest cap (radians, about 0.6 m on the earth) the widening search starts from.
const FIRST_REACH_RAD: f64 = 1e-7;

/// The nearest `k` matches (or more) without reading the whole index: the matches within a cap
/// that doubles its radius until it holds `k` of them. Every match within the cap is found
/// (its cells cover the cap), and any match outside is farther than all `k`, so the first `k`
/// are those of the full evaluation, ties included (they sort by RecordId either way).
/// A cap reaching the predicate's own `$maxDistance` or half the sphere ends the search with
/// the plain evaluation. Each round re-reads the caps before it; the radii double, so all of
/// them together cost about a third of the last.
fn nearest(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    path_name: &str,
    near: &NearSpec,
    k: usize,
    deadline: Option<Instant>,
) -> CommandResult<Vec<(u64, RawDocumentBuf, f64)>> {
    let own_reach = near.reach().unwrap_or(f64::INFINITY);
    let min_reach = NearSpec {
        max: near.min,
        ..near.clone()
    }
    .reach()
    .unwrap_or(0.0);
    let mut reach = min_reach.max(FIRST_REACH_RAD);
    while reach < own_reach.min(std::f64::consts::PI) {
        let capped = near.within(reach);
        let capped_filter = with_near(filter, &capped);
        let choice = planner::choose(coll, &capped_filter, filter_doc, None, None);
        if !scans_sphere_index(&choice.winner, path_name) {
            break;
        }
        let in_cap = all_matches(coll, &capped_filter, &choice, path_name, &capped, deadline)?;
        if in_cap.len() >= k {
            return Ok(in_cap);
        }
        reach *= 2.0;
    }
    let choice = planner::choose(coll, filter, filter_doc, None, None);
    all_matches(coll, filter, &choice, path_name, near, deadline)
}

/// Whether `plan` reads a `2dsphere` index on `path` (so its bounds are the cap's cells); the
/// planner may prefer another index for the rest of the filter, which no cap narrows.
fn scans_sphere_index(plan: &planner::Plan, path: &str) -> bool {
    match plan {
        planner::Plan::Index(p) => p
            .key_pattern
            .iter()
            .any(|(f, kind)| f == path && planner::is_sphere(kind)),
        _ => false,
    }
}

/// `filter` with its top-level near predicate replaced by `near`.
fn with_near(filter: &Filter, near: &NearSpec) -> Filter {
    match filter {
        Filter::Path {
            path,
            components,
            op: Op::Near(_),
        } => Filter::Path {
            path: path.clone(),
            components: components.clone(),
            op: Op::Near(Box::new(near.clone())),
        },
        Filter::And(children) => Filter::And(children.iter().map(|c| with_near(c, near)).collect()),
        other => other.clone(),
    }
}

/// Every match of `filter` with its distance, nearest first (ties in RecordId order).
fn all_matches(
    coll: &Arc<Collection>,
    filter: &Filter,
    choice: &planner::Choice,
    path_name: &str,
    near: &NearSpec,
    deadline: Option<Instant>,
) -> CommandResult<Vec<(u64, RawDocumentBuf, f64)>> {
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
