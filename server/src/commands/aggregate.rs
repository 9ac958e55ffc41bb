//! `aggregate`: parse the pipeline, feed it the collection (a leading `$match`/`$sort` goes
//! through the planner, so indexes serve it), run it on the storage pool, hand `$out`/`$merge`
//! output to `commands/output.rs`, and return the results through a cursor.

use super::args::{self, check_fields};
use super::crud_read::{cursor_reply, deadline};
use super::{Reply, Request};
use crate::cursors::{Cursor, DocSource, FIRST_BATCH_COUNT_DEFAULT, ScanState, check_deadline};
use crate::error::{CommandResult, ErrorCode, err};
use crate::planner;
use crate::query::matcher::Filter;
use crate::query::pipeline::{DocStream, OutputTarget, ParseContext, Pipeline, PipelineEnv};
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use storage::Collection;

const FIELDS: &[&str] = &[
    "pipeline",
    "cursor",
    "explain",
    "allowDiskUse",
    "bypassDocumentValidation",
    "collation",
    "hint",
    "let",
    "fromMongos",
    "needsMerge",
    "isMapReduceCommand",
];

/// Storage as the pipeline sees it ($lookup, $unionWith, $graphLookup).
struct Env<'a> {
    state: &'a ServerState,
    deadline: Option<Instant>,
}

impl PipelineEnv for Env<'_> {
    fn collection_docs(&self, db: &str, coll: &str) -> CommandResult<Vec<Document>> {
        let Some(c) = self.state.catalog.collection(db, coll) else {
            return Ok(vec![]);
        };
        let all = super::crud_read::collect_matches(
            &c,
            &Filter::parse(&Document::new())?,
            &Document::new(),
            self.deadline,
            None,
            None,
        )?;
        all.iter().map(|(_, raw, _)| to_doc(raw)).collect()
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
        let Some(c) = self.state.catalog.collection(db, coll) else {
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
        let found =
            super::crud_read::collect_matches(&c, &filter, &filter_doc, self.deadline, None, None)?;
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

pub(super) fn to_doc(raw: &RawDocumentBuf) -> CommandResult<Document> {
    Document::try_from(raw.as_ref()).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))
}

/// The filter the planner may apply to the stored documents: the leading `$match`, or the first
/// `$match` behind leading `$addFields`/`$set`/`$unset`/`$project` stages that leave every field
/// it reads as stored. The pipeline still runs its own `$match`, so this only narrows the input.
fn scan_filter(pipeline: &Pipeline) -> Document {
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

/// The input documents: the collection through the planner (leading `$match` and `$sort`).
fn input_docs(
    coll: &Arc<Collection>,
    pipeline: &Pipeline,
    deadline: Option<Instant>,
) -> CommandResult<DocStream<'static>> {
    let filter_doc = scan_filter(pipeline);
    // An unparsable $match has already failed in Pipeline::parse.
    let filter = Filter::parse(&filter_doc)?;
    let scan = planner::planned_scan(coll, filter, &filter_doc, pipeline.leading_sort());
    Ok(Box::new(ScanDocs { scan, deadline }))
}

/// The planner's scan as the pipeline's input stream: documents are decoded one at a time, so
/// a `$group` or `$count` over a large collection never holds the collection in memory.
struct ScanDocs {
    scan: ScanState,
    deadline: Option<Instant>,
}

impl Iterator for ScanDocs {
    type Item = CommandResult<Document>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.scan.next_match(self.deadline) {
            Ok(Some((_, raw, _))) => Some(to_doc(&raw)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// What the storage part of `aggregate` produced.
pub enum Ran {
    Reply(Reply),
    /// `$out`/`$merge`: the documents to write, then an empty cursor on `ns`.
    Output {
        target: OutputTarget,
        docs: Vec<Document>,
        ns: String,
    },
}

pub async fn aggregate(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    match super::off_thread(state, req, run_pipeline).await? {
        Ran::Reply(reply) => Ok(reply),
        Ran::Output { target, docs, ns } => {
            super::output::write_output(state, req, target, docs).await?;
            Ok(cursor_reply(0, &ns, true, vec![]))
        }
    }
}

/// Parse and run the pipeline over its input (on the blocking pool); with `explain: true`, the
/// explain reply.
pub fn run_pipeline(state: &ServerState, req: &Request) -> CommandResult<Ran> {
    check_fields(&req.body, "aggregate", FIELDS)?;
    args::check_collation(&req.body, "aggregate")?;
    let coll_name = match req.body.get("aggregate") {
        Some(Bson::String(s)) => Some(s.clone()),
        Some(v) if super::as_i64(v) == Some(1) => None,
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "Invalid command format: the 'aggregate' field must specify a collection name or 1",
            ));
        }
    };
    let stages: Vec<Document> = match req.body.get("pipeline") {
        Some(Bson::Array(items)) => items
            .iter()
            .map(|s| {
                s.as_document().cloned().ok_or_else(|| {
                    err(
                        ErrorCode::TypeMismatch,
                        "Each element of the 'pipeline' array must be an object",
                    )
                })
            })
            .collect::<CommandResult<_>>()?,
        _ => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "'pipeline' option must be specified as an array",
            ));
        }
    };
    let explain = args::opt_bool(&req.body, "aggregate", "explain")?.unwrap_or(false);
    let cursor_opts = args::opt_doc(&req.body, "aggregate", "cursor")?.cloned();
    if cursor_opts.is_none() && !explain {
        return Err(err(
            ErrorCode::FailedToParse,
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    }
    let batch_size = match cursor_opts.as_ref().and_then(|c| c.get("batchSize")) {
        None => FIRST_BATCH_COUNT_DEFAULT,
        Some(v) => usize::try_from(super::as_i64(v).unwrap_or(-1)).map_err(|_| {
            err(
                ErrorCode::Location51024,
                "BSON field 'batchSize' value must be >= 0",
            )
        })?,
    };
    let mut ctx = ParseContext::new(&req.db, coll_name.as_deref(), bson::DateTime::now());
    ctx.allow_disk_use = args::opt_bool(&req.body, "aggregate", "allowDiskUse")?.unwrap_or(false);
    ctx.memory_max_bytes = state
        .params
        .get_i64("internalQueryMaxBlockingSortMemoryUsageBytes")
        .max(0) as usize;
    if let Some(l) = args::opt_doc(&req.body, "aggregate", "let")? {
        ctx = ctx.with_let(l)?;
    }
    // Stages that read server state rather than documents produce the input here.
    let source = match stages.first() {
        Some(first) => source_stage(state, &req.db, coll_name.as_deref(), first)?,
        None => None,
    };
    let rest = if source.is_some() {
        &stages[1..]
    } else {
        &stages[..]
    };
    let pipeline = Pipeline::parse(rest, &ctx)?;
    let deadline = deadline(req);
    let coll = coll_name
        .as_ref()
        .and_then(|c| state.catalog.collection(&req.db, c));
    if explain {
        return Ok(Ran::Reply(explain_reply(
            &req.db,
            coll_name.as_deref(),
            &pipeline,
            coll.as_ref(),
        )));
    }
    if let (Some(c), Some(n)) = (&coll, count_shape(&stages)) {
        let docs = count_fast(c, &n, deadline)?;
        let ns = format!("{}.{}", req.db, coll_name.clone().unwrap_or_default());
        return Ok(Ran::Reply(cursor_reply(0, &ns, true, docs)));
    }
    let input: DocStream<'static> = match (source, &coll, pipeline.is_collectionless()) {
        (Some(docs), _, _) => Box::new(docs.into_iter().map(Ok)),
        (None, Some(c), false) => input_docs(c, &pipeline, deadline)?,
        _ => Box::new(std::iter::empty()),
    };
    let env = Env { state, deadline };
    let ns = format!(
        "{}.{}",
        req.db,
        coll_name.clone().unwrap_or_else(|| "$cmd.aggregate".into())
    );
    if let Some(target) = pipeline.output_target() {
        let docs = pipeline
            .run(input, &env)?
            .collect::<CommandResult<Vec<_>>>()?;
        let target = target.clone();
        return Ok(Ran::Output { target, docs, ns });
    }
    // Each result is encoded as it leaves the pipeline, so results are held once, as raw BSON.
    let mut docs = VecDeque::new();
    for d in pipeline.run(input, &env)? {
        docs.push_back(
            RawDocumentBuf::try_from(&d?)
                .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?,
        );
    }
    let mut source = DocSource::Buffered(docs);
    let batch = source.next_batch(batch_size, deadline)?;
    if source.is_exhausted() {
        return Ok(Ran::Reply(cursor_reply(0, &ns, true, batch)));
    }
    let cursor = Cursor {
        db: req.db.clone(),
        coll: coll_name.unwrap_or_else(|| "$cmd.aggregate".into()),
        uuid: coll.map(|c| c.uuid()),
        source,
        last_used: Instant::now(),
        no_timeout: false,
    };
    let id = state.cursors.insert(cursor)?;
    Ok(Ran::Reply(cursor_reply(id, &ns, true, batch)))
}

/// The drivers' `countDocuments` pipeline: `$match`, optional `$skip`/`$limit`, then a `$group`
/// with a constant `_id` and one `{$sum: 1}` field.
struct CountShape {
    filter: Document,
    skip: u64,
    limit: Option<u64>,
    id: Bson,
    field: String,
}

fn count_shape(stages: &[Document]) -> Option<CountShape> {
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
            "$skip" => shape.skip = super::as_i64(v).filter(|n| *n >= 0)? as u64,
            "$limit" => shape.limit = Some(super::as_i64(v).filter(|n| *n > 0)? as u64),
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
        .and_then(super::as_i64)
        == Some(1);
    one.then(|| {
        shape.id = id.clone();
        shape.field = field.clone();
        shape
    })
}

/// Count without decoding documents: O(1) for an empty filter, else through the planner.
fn count_fast(
    coll: &Arc<Collection>,
    shape: &CountShape,
    deadline: Option<Instant>,
) -> CommandResult<Vec<RawDocumentBuf>> {
    let filter = Filter::parse(&shape.filter)?;
    let total = if filter.is_empty() {
        coll.count()
    } else {
        let mut scan = planner::planned_scan(coll, filter, &shape.filter, None);
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

/// Leading stages answered by the command layer (they read server state, not documents).
pub const SOURCE_STAGES: &[&str] = &[
    "$collStats",
    "$indexStats",
    "$currentOp",
    "$listLocalSessions",
];

/// `$collStats`, `$indexStats`, `$currentOp` and `$listLocalSessions`: the documents they
/// produce from what cairn knows, or `None` when the first stage is an ordinary one.
fn source_stage(
    state: &ServerState,
    db: &str,
    coll: Option<&str>,
    stage: &Document,
) -> CommandResult<Option<Vec<Document>>> {
    let Some((name, spec)) = stage.iter().next() else {
        return Ok(None);
    };
    let host = format!("localhost:{}", state.config.port);
    let ns = format!("{db}.{}", coll.unwrap_or(""));
    let collection = || {
        coll.and_then(|c| state.catalog.collection(db, c))
            .ok_or_else(|| {
                err(
                    ErrorCode::NamespaceNotFound,
                    format!("Collection [{ns}] not found."),
                )
            })
    };
    match name.as_str() {
        "$collStats" => {
            let c = collection()?;
            let spec = spec.as_document().cloned().unwrap_or_default();
            let mut out =
                doc! { "ns": ns.clone(), "host": host, "localTime": bson::DateTime::now() };
            if spec.contains_key("storageStats") {
                let size = c.data_size_bytes() as i64;
                let indexes = c.indexes();
                let index_sizes: Document = indexes
                    .iter()
                    .map(|i| (i.spec.name.clone(), Bson::Int64(i.size_bytes as i64)))
                    .collect();
                let total: i64 = indexes.iter().map(|i| i.size_bytes as i64).sum();
                out.insert("storageStats", doc! {
                    "size": size, "count": c.count() as i64, "storageSize": size, "nindexes": indexes.len() as i32,
                    "totalIndexSize": total, "indexSizes": index_sizes,
                });
            }
            if spec.contains_key("count") {
                out.insert("count", doc! { "count": c.count() as i64 });
            }
            Ok(Some(vec![out]))
        }
        "$indexStats" => {
            let c = collection()?;
            // Accesses are not counted yet: every index reports zero since the server started.
            let since = bson::DateTime::from_millis(
                bson::DateTime::now().timestamp_millis()
                    - state.started.elapsed().as_millis() as i64,
            );
            let docs = c
                .indexes()
                .iter()
                .map(|i| doc! {
                    "name": i.spec.name.clone(), "key": i.spec.key.clone(), "host": host.clone(),
                    "accesses": { "ops": 0_i64, "since": since }, "spec": super::indexes::spec_document(&i.spec),
                })
                .collect();
            Ok(Some(docs))
        }
        "$currentOp" => {
            if db != "admin" || coll.is_some() {
                return Err(err(
                    ErrorCode::InvalidNamespace,
                    "$currentOp must be run against the 'admin' database with {aggregate: 1}",
                ));
            }
            Ok(Some(state.ops.in_progress()))
        }
        // Sessions are accepted but not tracked yet, so there is none to list.
        "$listLocalSessions" => Ok(Some(vec![])),
        _ => Ok(None),
    }
}

fn explain_reply(
    db: &str,
    coll: Option<&str>,
    pipeline: &Pipeline,
    c: Option<&Arc<Collection>>,
) -> Reply {
    let ns = format!("{db}.{}", coll.unwrap_or("$cmd.aggregate"));
    let filter_doc = scan_filter(pipeline);
    let winning = match (c, Filter::parse(&filter_doc)) {
        (Some(c), Ok(filter)) => {
            let choice = planner::choose(c, &filter, &filter_doc, pipeline.leading_sort(), None);
            let shape = planner::explain::Shape {
                filter: Some(filter_doc.clone()),
                sort: pipeline.leading_sort().cloned(),
                ..Default::default()
            };
            planner::explain::plan_tree(&choice.winner, &shape)
        }
        _ => doc! { "stage": "EOF" },
    };
    let mut stages = vec![Bson::Document(doc! {
        "$cursor": { "queryPlanner": { "namespace": ns.clone(), "parsedQuery": filter_doc, "winningPlan": winning, "rejectedPlans": [] } }
    })];
    for name in pipeline.stage_names() {
        stages.push(Bson::Document(doc! { name: {} }));
    }
    Reply::Doc(
        doc! { "explainVersion": "1", "stages": stages, "serverInfo": { "version": super::admin::COMPAT_VERSION }, "ok": 1.0 },
    )
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
