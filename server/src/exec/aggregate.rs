//! The aggregation driver: the pipeline's input is the collection read through the planner (the
//! leading `$match`, or one behind stages that leave its fields as stored, and a leading `$sort`
//! choose the plan), storage as the pipeline's `PipelineEnv` (`$lookup`, `$unionWith`,
//! `$graphLookup`; an owned handle, so a suspended cursor reads them at each `getMore`), the
//! pipeline suspended over that input for a cursor (`suspended`), the drivers' `countDocuments`
//! pipeline answered by a count, and the run-to-the-end path `count`/`distinct` on views use.

use super::scan::{ScanState, check_deadline, collect_matches, planned_scan, scan_mode};
use super::stream::{ForeignNs, Reader, StreamInput, Streamed};
use crate::catalog::Catalog;
use crate::error::{CommandResult, ErrorCode, err};
use crate::planner;
use crate::query::matcher::Filter;
use crate::query::pipeline::{Flow, ForeignScan, Pipeline, PipelineEnv, RawScan};
use crate::query::types::as_i64;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use storage::Collection;

/// Storage as the pipeline sees it ($lookup, $unionWith, $graphLookup). It finds collections
/// through a handle that does not borrow the catalog, so a suspended cursor keeps one
/// ([`StoreReader`]) and makes an `Env` for every pull.
pub struct Env {
    pub colls: storage::Collections,
    pub deadline: Option<Instant>,
}

impl Env {
    pub fn new(catalog: &Catalog, deadline: Option<Instant>) -> Env {
        Env {
            colls: catalog.engine().collections_handle(),
            deadline,
        }
    }
}

/// The storage [`Reader`] of a suspended aggregate.
pub struct StoreReader(pub storage::Collections);

impl Reader for StoreReader {
    fn env(&self, deadline: Option<Instant>) -> Box<dyn PipelineEnv + '_> {
        Box::new(Env {
            colls: self.0.clone(),
            deadline,
        })
    }
}

/// A foreign collection scan a cursor keeps between batches (`$unionWith`'s other side). It
/// holds the collection as the cursor's own scan does; dropping or renaming the collection
/// kills the cursor (`crate::cursors`), which drops the scan.
/// `None`: the collection does not exist (it reads as empty).
struct StoreScan(Option<ScanState>);

impl ForeignScan for StoreScan {
    fn next(&mut self, env: &dyn PipelineEnv) -> CommandResult<Option<RawDocumentBuf>> {
        env.check_interrupt()?;
        let Some(scan) = &mut self.0 else {
            return Ok(None);
        };
        Ok(scan.next_match(None)?.map(|(_, raw, _)| raw))
    }
}

/// Every document of `c` in natural order.
fn whole_scan(c: Arc<Collection>) -> CommandResult<ScanState> {
    let mode = super::scan::ScanMode::Collection {
        direction: storage::Direction::Forward,
        after: None,
    };
    Ok(ScanState::new(
        c,
        Arc::new(Filter::parse(&Document::new())?),
        mode,
    ))
}

impl PipelineEnv for Env {
    fn collection_docs(&self, db: &str, coll: &str) -> CommandResult<Vec<Document>> {
        let Some(c) = self.colls.get(db, coll) else {
            return Ok(vec![]);
        };
        let all = collect_matches(
            &c,
            &Filter::parse(&Document::new())?,
            &Document::new(),
            self.deadline,
            None,
            None,
        )?;
        all.iter().map(|(_, raw, _)| to_doc(raw)).collect()
    }

    /// A collection scan pulled in chunks, so a foreign read holds one chunk at a time.
    fn scan_raw<'e>(&'e self, db: &str, coll: &str) -> CommandResult<RawScan<'e>> {
        let Some(c) = self.colls.get(db, coll) else {
            return Ok(Box::new(std::iter::empty()));
        };
        let mut scan = whole_scan(c)?;
        let deadline = self.deadline;
        Ok(Box::new(std::iter::from_fn(move || {
            match scan.next_match(deadline) {
                Ok(Some((rid, raw, _))) => Some(Ok((rid, raw))),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            }
        })))
    }

    fn open_scan(&self, db: &str, coll: &str) -> CommandResult<Box<dyn ForeignScan>> {
        let scan = self.colls.get(db, coll).map(whole_scan).transpose()?;
        Ok(Box::new(StoreScan(scan)))
    }

    fn fetch_raw(&self, db: &str, coll: &str, id: u64) -> CommandResult<Option<RawDocumentBuf>> {
        let Some(c) = self.colls.get(db, coll) else {
            return Ok(None);
        };
        crate::txn::get(&c, id).map_err(|e| crate::error::storage_error(e, db, coll))
    }

    /// An equality `$lookup` goes through the foreign collection's index on `field` when it has
    /// one (`None`: no such index, the stage scans).
    fn lookup_candidates(
        &self,
        db: &str,
        coll: &str,
        field: &str,
        values: &[Bson],
    ) -> CommandResult<Option<Vec<Document>>> {
        let Some(c) = self.colls.get(db, coll) else {
            return Ok(Some(vec![]));
        };
        let indexed = c
            .indexes()
            .iter()
            .any(|i| !i.spec.hidden && i.spec.key.keys().next().is_some_and(|k| k == field));
        if !indexed {
            return Ok(None);
        }
        let filter_doc = doc! { field: { "$in": values.to_vec() } };
        let filter = Filter::parse(&filter_doc)?;
        let found = collect_matches(&c, &filter, &filter_doc, self.deadline, None, None)?;
        found
            .iter()
            .map(|(_, raw, _)| to_doc(raw))
            .collect::<CommandResult<Vec<_>>>()
            .map(Some)
    }

    fn check_interrupt(&self) -> CommandResult<()> {
        check_deadline(self.deadline)
    }
}

pub fn to_doc(raw: &RawDocumentBuf) -> CommandResult<Document> {
    Document::try_from(raw.as_ref()).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))
}

/// The filter the planner may apply to the stored documents: the leading `$match`, or the first
/// `$match` behind leading `$addFields`/`$set`/`$unset`/`$project` stages that leave every field
/// it reads as stored. The pipeline still runs its own `$match`, so this only narrows the input.
pub fn scan_filter(pipeline: &Pipeline) -> Document {
    if let Some(m) = pipeline.leading_match() {
        return m.clone();
    }
    pushable_match(&pipeline.stage_documents()).unwrap_or_default()
}

/// Top-level fields a filter reads; `None` when it uses `$expr` or other whole-document operators.
fn filter_fields(filter: &Document, out: &mut Vec<String>) -> Option<()> {
    for (k, v) in filter {
        match k.as_str() {
            "$and" | "$or" | "$nor" => {
                for sub in v.as_array()? {
                    filter_fields(sub.as_document()?, out)?;
                }
            }
            "$comment" => {}
            k if k.starts_with('$') => return None,
            k => out.push(k.split('.').next().unwrap_or(k).to_string()),
        }
    }
    Some(())
}

fn pushable_match(stages: &[Document]) -> Option<Document> {
    let mut changed: Vec<String> = Vec::new();
    // After an inclusion $project only the included fields are still there.
    let mut kept: Option<Vec<String>> = None;
    let top = |path: &str| path.split('.').next().unwrap_or(path).to_string();
    for stage in stages {
        let (name, spec) = stage.iter().next()?;
        match (name.as_str(), spec) {
            ("$match", Bson::Document(m)) => {
                let mut fields = Vec::new();
                filter_fields(m, &mut fields)?;
                let untouched = fields
                    .iter()
                    .all(|f| !changed.contains(f) && kept.as_ref().is_none_or(|k| k.contains(f)));
                return untouched.then(|| m.clone());
            }
            ("$addFields" | "$set", Bson::Document(d)) => changed.extend(d.keys().map(|k| top(k))),
            ("$unset", Bson::String(f)) => changed.push(top(f)),
            ("$unset", Bson::Array(fs)) => {
                changed.extend(fs.iter().filter_map(Bson::as_str).map(top))
            }
            ("$project", Bson::Document(d)) => {
                let include = |v: &Bson| {
                    matches!(v, Bson::Boolean(true))
                        || matches!(v, Bson::Int32(1) | Bson::Int64(1))
                        || matches!(v, Bson::Double(f) if *f == 1.0)
                };
                let exclude = |v: &Bson| {
                    matches!(v, Bson::Boolean(false))
                        || matches!(v, Bson::Int32(0) | Bson::Int64(0))
                        || matches!(v, Bson::Double(f) if *f == 0.0)
                };
                let inclusion = d.iter().any(|(k, v)| k != "_id" && !exclude(v));
                for (k, v) in d {
                    if exclude(v) || !include(v) {
                        changed.push(top(k));
                    }
                }
                if inclusion {
                    let mut names: Vec<String> = d
                        .iter()
                        .filter(|(_, v)| include(v))
                        .map(|(k, _)| top(k))
                        .collect();
                    if !d.contains_key("_id") {
                        names.push("_id".into());
                    }
                    kept = Some(names);
                }
            }
            _ => return None,
        }
    }
    None
}

/// How many leading stages the scan of `choice` performs: a leading `$match` (its filter is the
/// scan's), then a leading `$sort` when the winning plan's order gives it. The pipeline runs
/// without them (`Pipeline::run_skipping`), and explain leaves them out of its stage list.
pub fn stages_done(pipeline: &Pipeline, choice: &planner::Choice) -> usize {
    let matched = usize::from(pipeline.leading_match().is_some());
    let sorted = usize::from(pipeline.leading_sort().is_some() && choice.winner.provides_sort());
    matched + sorted
}

/// The input documents: the collection through the planner (leading `$match` and `$sort`),
/// as raw documents, and how many leading stages that scan already performed.
pub fn input_docs(
    coll: &Arc<Collection>,
    pipeline: &Pipeline,
    deadline: Option<Instant>,
) -> CommandResult<(Flow<'static>, usize)> {
    if let Some(g) = pipeline.leading_geo_near() {
        let want = pipeline.geo_near_limit();
        return Ok((geo_near_input(coll, g, want, deadline)?, 1));
    }
    let filter_doc = scan_filter(pipeline);
    // An unparsable $match has already failed in Pipeline::parse.
    let filter = Filter::parse(&filter_doc)?;
    if pipeline.has_text_score() {
        return Ok((text_input(coll, &filter, deadline)?, 1));
    }
    let choice = planner::choose(coll, &filter, &filter_doc, pipeline.leading_sort(), None);
    let done = stages_done(pipeline, &choice);
    let scan = ScanState::new(coll.clone(), Arc::new(filter), scan_mode(&choice.winner));
    Ok((Flow::Raw(Box::new(ScanDocs { scan, deadline })), done))
}

/// A leading `$match` with `$text`, through the text index (`super::text`): the matches in
/// RecordId order, each carrying its score for `{$meta: "textScore"}` (`query::meta`).
fn text_input(
    coll: &Arc<Collection>,
    filter: &Filter,
    deadline: Option<Instant>,
) -> CommandResult<Flow<'static>> {
    let Some(query) = crate::query::text::text_of(filter) else {
        return Err(err(ErrorCode::InternalError, "$text lost from its $match"));
    };
    if super::near::near_of(filter).is_some() {
        return Err(err(
            ErrorCode::BadValue,
            "text and geoNear not allowed in same query",
        ));
    }
    let hits = super::text::run(coll, filter, &query, deadline)?.hits;
    let docs = hits
        .into_iter()
        .map(|(_, raw, score)| crate::query::meta::with_score(&raw, score));
    Ok(Flow::Raw(Box::new(docs)))
}

/// A leading `$geoNear`'s output: the matches of its query and near predicate, nearest first,
/// with the distance (times `distanceMultiplier`) and, with `includeLocs`, the location set.
fn geo_near_input(
    coll: &Arc<Collection>,
    g: &crate::query::pipeline::GeoNear,
    want: Option<usize>,
    deadline: Option<Instant>,
) -> CommandResult<Flow<'static>> {
    use crate::error::{ErrorCode, err};
    let key = match &g.key {
        Some(k) => k.clone(),
        None => {
            let mut paths: Vec<String> = coll
                .indexes()
                .iter()
                .flat_map(|ix| ix.spec.key.clone())
                .filter(|(_, kind)| planner::is_geo(kind))
                .map(|(f, _)| f)
                .collect();
            paths.dedup();
            match paths.len() {
                0 => {
                    return Err(err(
                        ErrorCode::IndexNotFound,
                        "$geoNear requires a 2d or 2dsphere index, but none were found",
                    ));
                }
                1 => paths.remove(0),
                _ => {
                    return Err(err(
                        ErrorCode::BadValue,
                        "There is more than one 2dsphere index; unsure which to use for $geoNear",
                    ));
                }
            }
        }
    };
    let filter_doc = bson::doc! { "$and": [g.query.clone(), { key.clone(): g.near_ops.clone() }] };
    let filter = Filter::parse(&filter_doc)?;
    let Some((path, near)) = super::near::near_of(&filter) else {
        return Err(err(
            ErrorCode::InternalError,
            "$geoNear lost its near predicate",
        ));
    };
    let matches = super::near::sorted_matches(
        coll,
        &filter,
        &filter_doc,
        &path,
        &near,
        None,
        want,
        deadline,
    )?;
    let distance_path = crate::query::path::split(&g.distance_field);
    let locs_path = g.include_locs.as_deref().map(crate::query::path::split);
    let key_path = crate::query::path::split(&path);
    let mut out = Vec::with_capacity(matches.len());
    for (_, raw, distance) in matches {
        let loc = crate::query::path::get_exact(&raw, &key_path).map(crate::query::types::to_owned);
        let mut d = to_doc(&raw)?;
        crate::query::path::set_path(
            &mut d,
            &distance_path,
            bson::Bson::Double(distance * g.distance_multiplier),
        );
        if let (Some(p), Some(loc)) = (&locs_path, loc) {
            crate::query::path::set_path(&mut d, p, loc);
        }
        out.push(
            RawDocumentBuf::try_from(&d).map_err(|e| err(ErrorCode::InternalError, e.to_string())),
        );
    }
    Ok(Flow::Raw(Box::new(out.into_iter())))
}

/// The aggregate suspended over its input, nothing run yet (a leading `$geoNear` or `$text`
/// excepted: their matches are found now, nearest or in RecordId order, and wait as the
/// input). A batch then runs the scan and the stages only as far as it needs: a blocking stage
/// consumes its input when first asked and hands out its output a document at a time; stages
/// that read other collections read them through `colls` at each pull. The input is the
/// documents of a source stage (`source`), the collection through the planner, or nothing
/// (`$documents`, a missing collection).
pub fn suspended(
    source: Option<Vec<Document>>,
    coll: Option<&Arc<Collection>>,
    pipeline: &Arc<Pipeline>,
    colls: storage::Collections,
    deadline: Option<Instant>,
    cfg: super::parallel::Parallelism,
) -> CommandResult<Streamed> {
    let (input, done) = suspended_input(source, coll, pipeline, deadline, cfg)?;
    let foreign: Vec<ForeignNs> = pipeline
        .foreign_namespaces()
        .into_iter()
        .map(|(db, name)| {
            let uuid = colls.get(&db, &name).map(|c| c.uuid());
            (db, name, uuid)
        })
        .collect();
    let reader = Arc::new(StoreReader(colls));
    Ok(Streamed::new(
        pipeline.clone(),
        done,
        input,
        reader,
        foreign,
    ))
}

/// [`suspended`] over `coll` for a pipeline that reads no other collection (tests).
#[cfg(test)]
pub fn streamed(
    coll: &Arc<Collection>,
    pipeline: &Arc<Pipeline>,
    cfg: super::parallel::Parallelism,
) -> CommandResult<Option<super::DocSource>> {
    let (input, done) = suspended_input(None, Some(coll), pipeline, None, cfg)?;
    let reader = Arc::new(super::stream::NoReader);
    let run = Streamed::new(pipeline.clone(), done, input, reader, Vec::new());
    Ok(Some(super::DocSource::Pipeline(Box::new(run))))
}

/// The input of [`suspended`] and how many leading stages it already did.
fn suspended_input(
    source: Option<Vec<Document>>,
    coll: Option<&Arc<Collection>>,
    pipeline: &Arc<Pipeline>,
    deadline: Option<Instant>,
    cfg: super::parallel::Parallelism,
) -> CommandResult<(StreamInput, usize)> {
    let raw_of = |flow: Flow<'static>| flow.into_raw().collect::<CommandResult<VecDeque<_>>>();
    let (input, done) = match (source, coll) {
        (Some(docs), _) => {
            let raw = docs.iter().map(crate::query::pipeline::values::to_raw);
            (StreamInput::Docs(raw.collect::<CommandResult<_>>()?), 0)
        }
        (None, Some(c)) if !pipeline.is_collectionless() => {
            if let Some(g) = pipeline.leading_geo_near() {
                let want = pipeline.geo_near_limit();
                let near = raw_of(geo_near_input(c, g, want, deadline)?)?;
                (StreamInput::charged(near, "$geoNear")?, 1)
            } else if pipeline.has_text_score() {
                let filter = Filter::parse(&scan_filter(pipeline))?;
                let hits = raw_of(text_input(c, &filter, deadline)?)?;
                (StreamInput::charged(hits, "$text")?, 1)
            } else {
                let filter_doc = scan_filter(pipeline);
                let filter = Filter::parse(&filter_doc)?;
                let choice =
                    planner::choose(c, &filter, &filter_doc, pipeline.leading_sort(), None);
                let done = stages_done(pipeline, &choice);
                // The first stage after the scan, run over a parallel scan when it merges
                // exactly; the rest of the pipeline then reads its output.
                let parallel = super::parallel::stages::run_stage(
                    c,
                    pipeline,
                    done,
                    &filter,
                    &filter_doc,
                    &choice.winner,
                    cfg,
                )?;
                match parallel {
                    Some(out) => (StreamInput::Docs(out.docs), done + 1),
                    None => {
                        let mode = scan_mode(&choice.winner);
                        let scan = ScanState::new(c.clone(), Arc::new(filter), mode);
                        (StreamInput::Scan(Box::new(scan)), done)
                    }
                }
            }
        }
        _ => (StreamInput::Docs(VecDeque::new()), 0),
    };
    Ok((input, done))
}

/// The planner's scan as the pipeline's input stream: the stored documents as raw BSON, one at
/// a time, so a `$group` or `$count` over a large collection never holds the collection in
/// memory, and a stage that reads raw documents (`$match`, `$group`, ...) never decodes them.
struct ScanDocs {
    scan: ScanState,
    deadline: Option<Instant>,
}

impl Iterator for ScanDocs {
    type Item = CommandResult<RawDocumentBuf>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.scan.next_match(self.deadline) {
            Ok(Some((_, raw, _))) => Some(Ok(raw)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// The drivers' `countDocuments` pipeline: `$match`, optional `$skip`/`$limit`, then a `$group`
/// with a constant `_id` and one `{$sum: 1}` field.
pub struct CountShape {
    filter: Document,
    skip: u64,
    limit: Option<u64>,
    id: Bson,
    field: String,
}

pub fn count_shape(stages: &[Document]) -> Option<CountShape> {
    let mut it = stages.iter().map(|s| s.iter().next()).peekable();
    let (name, m) = it.next()??;
    let filter = (name == "$match").then(|| m.as_document().cloned())??;
    let mut shape = CountShape {
        filter,
        skip: 0,
        limit: None,
        id: Bson::Null,
        field: String::new(),
    };
    while let Some(Some((name, v))) = it.peek() {
        match name.as_str() {
            "$skip" => shape.skip = as_i64(v).filter(|n| *n >= 0)? as u64,
            "$limit" => shape.limit = Some(as_i64(v).filter(|n| *n > 0)? as u64),
            _ => break,
        }
        it.next();
    }
    let (name, g) = it.next()??;
    let g = (name == "$group").then(|| g.as_document())??;
    if it.next().is_some() || g.len() != 2 {
        return None;
    }
    let id = g.get("_id")?;
    if matches!(id, Bson::String(s) if s.starts_with('$'))
        || matches!(id, Bson::Document(_) | Bson::Array(_))
    {
        return None;
    }
    let (field, acc) = g.iter().find(|(k, _)| k.as_str() != "_id")?;
    let one = acc
        .as_document()
        .filter(|a| a.len() == 1)?
        .get("$sum")
        .and_then(as_i64)
        == Some(1);
    one.then(|| {
        shape.id = id.clone();
        shape.field = field.clone();
        shape
    })
}

/// Count without decoding documents: O(1) for an empty filter, else through the planner.
pub fn count_fast(
    coll: &Arc<Collection>,
    shape: &CountShape,
    deadline: Option<Instant>,
    cfg: super::parallel::Parallelism,
) -> CommandResult<Vec<RawDocumentBuf>> {
    let filter = Filter::parse(&shape.filter)?;
    // A transaction counts what it sees, not what is stored.
    let total = if filter.is_empty() && !crate::txn::active() {
        coll.count()
    } else if let Some(n) = super::parallel::stages::count(coll, &filter, &shape.filter, cfg)? {
        n
    } else {
        let mut scan = planned_scan(coll, filter, &shape.filter, None);
        let mut n = 0u64;
        while scan.next_match(deadline)?.is_some() {
            n += 1;
        }
        n
    };
    let mut n = total.saturating_sub(shape.skip);
    if let Some(l) = shape.limit {
        n = n.min(l);
    }
    if n == 0 {
        return Ok(vec![]);
    }
    let n = i32::try_from(n)
        .map(Bson::Int32)
        .unwrap_or(Bson::Int64(n as i64));
    let d = doc! { "_id": shape.id.clone(), shape.field.clone(): n };
    Ok(vec![RawDocumentBuf::try_from(&d).map_err(|e| {
        err(ErrorCode::InternalError, e.to_string())
    })?])
}

/// The pipeline's input: documents a source stage produced, the collection through the planner,
/// or nothing (a collectionless pipeline, a missing collection); with the number of leading
/// stages the input already performed.
pub fn input(
    source: Option<Vec<Document>>,
    coll: Option<&Arc<Collection>>,
    pipeline: &Pipeline,
    deadline: Option<Instant>,
) -> CommandResult<(Flow<'static>, usize)> {
    Ok(match (source, coll, pipeline.is_collectionless()) {
        (Some(docs), _, _) => (Flow::Docs(Box::new(docs.into_iter().map(Ok))), 0),
        (None, Some(c), false) => input_docs(c, pipeline, deadline)?,
        _ => (Flow::Docs(Box::new(std::iter::empty())), 0),
    })
}

/// Run the pipeline, but its first `done` stages, to the end; a result still raw leaves as it
/// is, a decoded one is encoded as it leaves, so results are held once, as raw BSON.
pub fn run_to_raw(
    pipeline: &Pipeline,
    (input, done): (Flow<'static>, usize),
    env: &Env,
) -> CommandResult<VecDeque<RawDocumentBuf>> {
    let out = pipeline.run_flow(done, input, env)?.into_raw();
    if pipeline.has_text_score() {
        return out.map(|r| crate::query::meta::strip_raw(r?)).collect();
    }
    out.collect::<CommandResult<VecDeque<_>>>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_behind_untouching_stages_is_pushed() {
        let st = |v: Vec<Document>| pushable_match(&v);
        let m = doc! { "a": 5 };
        assert_eq!(
            st(vec![
                doc! { "$addFields": { "b": 1 } },
                doc! { "$match": m.clone() }
            ]),
            Some(m.clone())
        );
        assert_eq!(
            st(vec![
                doc! { "$addFields": { "a": 1 } },
                doc! { "$match": m.clone() }
            ]),
            None
        );
        assert_eq!(
            st(vec![
                doc! { "$project": { "a": 1 } },
                doc! { "$match": m.clone() }
            ]),
            Some(m.clone())
        );
        assert_eq!(
            st(vec![
                doc! { "$project": { "b": 1 } },
                doc! { "$match": m.clone() }
            ]),
            None
        );
        assert_eq!(
            st(vec![
                doc! { "$project": { "a": { "$add": ["$a", 1] } } },
                doc! { "$match": m.clone() }
            ]),
            None
        );
        assert_eq!(
            st(vec![doc! { "$unset": "a" }, doc! { "$match": m.clone() }]),
            None
        );
        let or_match = st(vec![
            doc! { "$set": { "b.c": 1 } },
            doc! { "$match": { "$or": [ { "a": 1 }, { "d": 2 } ] } },
        ]);
        assert!(or_match.is_some());
        assert_eq!(
            st(vec![
                doc! { "$set": { "b": 1 } },
                doc! { "$match": { "$expr": { "$eq": ["$a", 1] } } }
            ]),
            None
        );
        assert_eq!(
            st(vec![
                doc! { "$group": { "_id": "$a" } },
                doc! { "$match": m.clone() }
            ]),
            None
        );
    }

    #[test]
    fn recognizes_the_count_documents_pipeline() {
        let p = [
            doc! { "$match": { "a": 1 } },
            doc! { "$skip": 2 },
            doc! { "$group": { "_id": 1, "n": { "$sum": 1 } } },
        ];
        let s = count_shape(&p).unwrap();
        assert_eq!((s.skip, s.limit, s.field.as_str()), (2, None, "n"));
        assert!(
            count_shape(&[
                doc! { "$match": {} },
                doc! { "$group": { "_id": "$a", "n": { "$sum": 1 } } }
            ])
            .is_none()
        );
        assert!(
            count_shape(&[
                doc! { "$match": {} },
                doc! { "$group": { "_id": 1, "n": { "$sum": "$x" } } }
            ])
            .is_none()
        );
        assert!(count_shape(&[doc! { "$group": { "_id": 1, "n": { "$sum": 1 } } }]).is_none());
    }
}
