//! `aggregate`: parse the pipeline, feed it the collection (a leading `$match`/`$sort` goes
//! through the planner, so indexes serve it), suspend it on the storage pool, and return its
//! first batch and a cursor that holds the rest suspended; `$out`/`$merge` pipelines go to
//! `commands/output.rs`, which pulls and writes them in chunks.

use super::args;
use super::argspec::{self, specs};
use super::crud_read::{cursor_reply, deadline};
use super::{Reply, Request};
use crate::cursors::{Cursor, FIRST_BATCH_COUNT_DEFAULT};
use crate::error::{CommandResult, ErrorCode, err};
use crate::exec::DocSource;
use crate::exec::aggregate::{self as driver, Env};
use crate::exec::parallel::stages as parallel;
use crate::planner;
use crate::query::matcher::Filter;
use crate::query::pipeline::{OutputTarget, ParseContext, Pipeline};
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::sync::Arc;
use std::time::Instant;
use storage::Collection;

/// What the storage part of `aggregate` produced.
pub enum Ran {
    Reply(Reply),
    /// `$out`/`$merge`: the suspended pipeline whose results to write (`commands::output`
    /// pulls them in bounded chunks), then an empty cursor on `ns`.
    Output(Box<Output>),
}

/// What `$out`/`$merge` write and how.
pub struct Output {
    pub target: OutputTarget,
    pub run: Box<crate::exec::stream::Streamed>,
    pub ns: String,
    /// The pipeline reads the target collection (as its input or a foreign one): `$merge`
    /// must then have every result before it writes the first, or it could read its own
    /// writes.
    pub reads_target: bool,
    /// The command's collator, current again while the results are pulled.
    pub collator: Option<Arc<crate::query::collator::Collator>>,
}

pub async fn aggregate(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    if super::changes::is_change_stream(req) {
        return super::off_thread(state, req, |s, r| {
            super::changes::change_stream(s, r)
                .unwrap_or_else(|| Err(err(ErrorCode::InternalError, "not a change stream")))
        })
        .await;
    }
    // Parsing and opening the pipeline reads only (`$out`/`$merge` write later, in
    // `write_output`), so it may be tried on the worker from cached pages.
    match super::off_thread_tried(state, req, crate::offload::Tried::Read, run_pipeline).await? {
        Ran::Reply(reply) => Ok(reply),
        Ran::Output(out) => {
            let ns = out.ns.clone();
            super::output::write_output(state, req, *out).await?;
            Ok(cursor_reply(0, &ns, true, vec![]))
        }
    }
}

/// The stages of the command's `pipeline` (the argument table checked it is an array of objects).
fn body_stages(req: &Request) -> impl Iterator<Item = &Document> {
    let items = match req.body.get("pipeline") {
        Some(Bson::Array(items)) => items.as_slice(),
        _ => &[],
    };
    items.iter().filter_map(Bson::as_document)
}

/// Parse and run the pipeline over its input (on the blocking pool); with `explain: true`, the
/// explain reply.
pub fn run_pipeline(state: &ServerState, req: &Request) -> CommandResult<Ran> {
    argspec::check(&specs::AGGREGATE, &req.body)?;
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
    let _collation = match coll_name.as_deref() {
        Some(n) => super::views::collation_scope(state, &req.body, "aggregate", &req.db, n)?,
        None => args::collation_scope(&req.body, "aggregate", None)?,
    };
    let stages: Vec<Document> = body_stages(req).cloned().collect();
    let writes_out = |s: &Document| s.contains_key("$out") || s.contains_key("$merge");
    if req.txn.get().is_some() && stages.iter().any(writes_out) {
        return Err(err(
            ErrorCode::OperationNotSupportedInTransaction,
            "$out and $merge cannot be used in a transaction",
        ));
    }
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
    // Query settings (8.0): explain is never rejected, and sees the hints.
    let shape = || crate::query_shape::Shape::aggregate(&req.db, coll_name.as_deref(), &stages);
    let _settings = match state.query_settings.for_query(shape) {
        Err(_) if explain => None,
        other => other?,
    };
    let started = Instant::now();
    // Statistics are for queries over documents, not for stages that read server state.
    let counted = !explain
        && super::crud_read::query_stats_on(state)
        && !stages
            .first()
            .and_then(|s| s.keys().next())
            .is_some_and(|n| SOURCE_STAGES.contains(&n.as_str()));
    // The fingerprint only: the shape document is built for a key `$queryStats` has not seen.
    let fingerprint = counted
        .then(|| crate::query_shape::aggregate_fingerprint(&req.db, coll_name.as_deref(), &stages));
    let spec = Spec {
        coll_name,
        stages,
        explain,
        batch_size,
        allow_disk_use: args::opt_bool(&req.body, "aggregate", "allowDiskUse")?.unwrap_or(false),
        let_vars: args::opt_doc(&req.body, "aggregate", "let")?.cloned(),
    };
    let ran = run_spec(state, req, spec)?;
    if let (Some(fingerprint), Ran::Reply(reply)) = (fingerprint, &ran) {
        // The stages were handed to the run; the shape is made again from the body's pipeline
        // (where they came from), only for a new entry.
        let shape = || {
            let stages: Vec<Document> = body_stages(req).cloned().collect();
            let coll = req.body.get_str("aggregate").ok();
            crate::query_shape::Shape::aggregate(&req.db, coll, &stages)
        };
        super::crud_read::note_query_stats(state, req, started, reply, || fingerprint, shape);
    }
    Ok(ran)
}

/// A parsed `aggregate` (or a read of a view turned into one).
pub struct Spec {
    /// The namespace aggregated (a collection or a view); `None` for `aggregate: 1`.
    pub coll_name: Option<String>,
    pub stages: Vec<Document>,
    pub explain: bool,
    pub batch_size: usize,
    pub allow_disk_use: bool,
    pub let_vars: Option<Document>,
}

/// Run a parsed aggregate. On a view, the view's pipeline goes in front and the input is its
/// collection; the reply and the cursor still name the view.
pub fn run_spec(state: &ServerState, req: &Request, spec: Spec) -> CommandResult<Ran> {
    let Spec {
        coll_name,
        mut stages,
        explain,
        batch_size,
        allow_disk_use,
        let_vars,
    } = spec;
    let shown = coll_name.clone();
    let mut is_view = false;
    let coll_name = match &coll_name {
        Some(c) => match super::views::resolve(state, &req.db, c)? {
            Some(r) => {
                is_view = true;
                stages = [r.pipeline, stages].concat();
                crate::query::timeseries::push_down(&mut stages);
                Some(r.base)
            }
            None => Some(c.clone()),
        },
        None => None,
    };
    let mut ctx = ParseContext::new(&req.db, coll_name.as_deref(), bson::DateTime::now());
    ctx.allow_disk_use = allow_disk_use;
    ctx.memory_max_bytes = state.params.blocking_stage_bytes_max();
    if let Some(l) = &let_vars {
        ctx = ctx.with_let(l)?;
    }
    // Stages that read server state rather than documents produce the input here.
    let source = match stages.first() {
        Some(first) => source_stage(state, req, coll_name.as_deref(), first)?,
        None => None,
    };
    let rest = if source.is_some() {
        &stages[1..]
    } else {
        &stages[..]
    };
    // The pipeline parser sees `rest` from position 0: a second source stage right after the
    // first is not first either.
    if let Some(name) = rest
        .first()
        .and_then(|s| s.keys().next())
        .filter(|n| source.is_some() && crate::query::pipeline::SOURCE_ONLY.contains(&n.as_str()))
    {
        return Err(err(
            ErrorCode::Location40602,
            format!("{name} is only valid as the first stage in a pipeline"),
        ));
    }
    let pipeline = Pipeline::parse(rest, &ctx)?;
    let deadline = deadline(req);
    let coll = coll_name
        .as_ref()
        .and_then(|c| state.catalog.collection(&req.db, c));
    if explain {
        return Ok(Ran::Reply(explain_reply(
            &req.db,
            shown.as_deref(),
            &pipeline,
            coll.as_ref(),
            parallelism(state),
        )?));
    }
    if let (Some(c), Some(n)) = (&coll, driver::count_shape(&stages)) {
        let docs = driver::count_fast(c, &n, deadline, parallelism(state))?;
        let ns = format!("{}.{}", req.db, shown.clone().unwrap_or_default());
        return Ok(Ran::Reply(cursor_reply(0, &ns, true, docs)));
    }
    let ns = format!(
        "{}.{}",
        req.db,
        shown.clone().unwrap_or_else(|| "$cmd.aggregate".into())
    );
    // The pipeline runs as far as each batch needs and waits in the cursor between batches
    // (its blocking stages holding what they must, its foreign reads done as results are
    // pulled); `$out`/`$merge` pull it in chunks as they write.
    let pipeline = Arc::new(pipeline);
    let colls = state.catalog.engine().collections_handle();
    let run = driver::suspended(
        source,
        coll.as_ref(),
        &pipeline,
        colls,
        deadline,
        parallelism(state),
    )?;
    if let Some(target) = pipeline.output_target() {
        let target = target.clone();
        let target_ns = (target.db.clone(), target.coll.clone());
        let reads_target = run
            .foreign()
            .iter()
            .any(|(d, c, _)| (d, c) == (&target_ns.0, &target_ns.1))
            || coll_name
                .as_ref()
                .is_some_and(|c| req.db == target_ns.0 && *c == target_ns.1);
        return Ok(Ran::Output(Box::new(Output {
            target,
            run: Box::new(run),
            ns,
            reads_target,
            collator: crate::query::collator::current(),
        })));
    }
    let mut source = DocSource::Pipeline(Box::new(run));
    let batch = source.next_batch(batch_size, deadline)?;
    if source.is_exhausted() {
        return Ok(Ran::Reply(cursor_reply(0, &ns, true, batch)));
    }
    let cursor = Cursor {
        db: req.db.clone(),
        coll: shown.unwrap_or_else(|| "$cmd.aggregate".into()),
        // A view's cursor names the view, which has no collection to check on getMore.
        uuid: coll.filter(|_| !is_view).map(|c| c.uuid()),
        source,
        last_used: Instant::now(),
        no_timeout: false,
        time_left: deadline.map(|d| d.saturating_duration_since(Instant::now())),
        tail: None,
        collator: crate::query::collator::current(),
        snapshot: crate::txn::current().filter(|t| t.snapshot_read_at().is_some()),
    };
    let id = state.cursors.insert(cursor)?;
    Ok(Ran::Reply(cursor_reply(id, &ns, true, batch)))
}

/// How far this server lets a collection scan be split (`parallelScanThreads`,
/// `parallelScanMinDocuments`; see `exec::parallel`).
pub fn parallelism(state: &ServerState) -> crate::exec::parallel::Parallelism {
    crate::exec::parallel::Parallelism::new(
        state.params.get_i64("parallelScanThreads"),
        state.params.get_i64("parallelScanMinDocuments"),
    )
}

/// Leading stages answered by the command layer (they read server state, not documents).
pub const SOURCE_STAGES: &[&str] = &[
    "$collStats",
    "$indexStats",
    "$currentOp",
    "$listLocalSessions",
    "$listSessions",
    "$planCacheStats",
    "$querySettings",
    "$queryStats",
];

/// `$collStats`, `$indexStats`, `$currentOp` and `$listLocalSessions`: the documents they
/// produce from what cairn knows, or `None` when the first stage is an ordinary one.
fn source_stage(
    state: &ServerState,
    req: &Request,
    coll: Option<&str>,
    stage: &Document,
) -> CommandResult<Option<Vec<Document>>> {
    let db = req.db.as_str();
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
                let mut stats =
                    doc! { "size": size, "count": c.count() as i64, "storageSize": size };
                super::capped::stats_fields(&c, &mut stats);
                stats.extend(doc! {
                    "nindexes": indexes.len() as i32, "totalIndexSize": total, "indexSizes": index_sizes,
                });
                out.insert("storageStats", stats);
            }
            if spec.contains_key("count") {
                out.insert("count", c.count() as i64);
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
            let Bson::Document(spec) = spec else {
                return Err(err(
                    ErrorCode::FailedToParse,
                    format!(
                        "$currentOp options must be specified in an object, but found: {}",
                        super::args::type_name(spec)
                    ),
                ));
            };
            if db != "admin" || coll.is_some() {
                return Err(err(
                    ErrorCode::InvalidNamespace,
                    "$currentOp must be run against the 'admin' database with {aggregate: 1}",
                ));
            }
            let mut ops = state.ops.in_progress();
            if current_op_options(spec)? {
                ops.extend(super::transactions::idle_transactions(state));
            }
            Ok(Some(ops))
        }
        "$querySettings" => Ok(Some(super::query_settings::stage(state, req, coll, spec)?)),
        "$queryStats" => Ok(Some(super::admin_stages::query_stats(
            state, req, coll, spec,
        )?)),
        "$listLocalSessions" | "$listSessions" => Ok(Some(super::admin_stages::list_sessions(
            state, req, coll, name, spec,
        )?)),
        // The collection's plan cache entries (`planner::cache`).
        "$planCacheStats" => {
            let spec = spec.as_document().ok_or_else(|| {
                err(
                    ErrorCode::FailedToParse,
                    "$planCacheStats value must be an object. Found: ".to_string()
                        + super::args::type_name(spec),
                )
            })?;
            super::args::check_fields_all(spec, "$planCacheStats", &["allHosts"])?;
            Ok(Some(
                coll.and_then(|c| state.catalog.collection(db, c))
                    .map(|c| crate::planner::cache::stats(&c))
                    .unwrap_or_default(),
            ))
        }
        _ => Ok(None),
    }
}

/// The `$currentOp` stage's options, checked as mongod's stage parser does (every one a bool,
/// FailedToParse otherwise, an unknown one FailedToParse). Returns whether idle sessions are
/// listed (`idleSessions`, default true). The others change nothing on a standalone cairn: it
/// has one user's view of operations, no idle connections or cursors listed, no truncation.
fn current_op_options(spec: &Document) -> CommandResult<bool> {
    const OPTIONS: &[&str] = &[
        "idleConnections",
        "idleSessions",
        "allUsers",
        "localOps",
        "truncateOps",
        "idleCursors",
        "backtrace",
    ];
    let mut idle_sessions = true;
    for (k, v) in spec {
        if !OPTIONS.contains(&k.as_str()) {
            return Err(err(
                ErrorCode::FailedToParse,
                format!("Unrecognized option '{k}' in $currentOp stage."),
            ));
        }
        let Bson::Boolean(b) = v else {
            return Err(err(
                ErrorCode::FailedToParse,
                format!(
                    "The '{k}' parameter of the $currentOp stage must be a boolean value, but found: {}",
                    super::args::type_name(v)
                ),
            ));
        };
        if k == "idleSessions" {
            idle_sessions = *b;
        }
    }
    Ok(idle_sessions)
}

fn explain_reply(
    db: &str,
    coll: Option<&str>,
    pipeline: &Pipeline,
    c: Option<&Arc<Collection>>,
    cfg: crate::exec::parallel::Parallelism,
) -> CommandResult<Reply> {
    let ns = format!("{db}.{}", coll.unwrap_or("$cmd.aggregate"));
    let filter_doc = driver::scan_filter(pipeline);
    // The scan performs a leading $match, and a leading $sort its plan's order gives: those
    // stages are part of `$cursor` and not listed after it (as in mongod).
    let (winning, done) = match (c, Filter::parse(&filter_doc)) {
        // A leading `$text` search runs through the text index (`exec::aggregate::text_input`).
        (Some(c), Ok(filter)) if pipeline.has_text_score() => {
            planner::bind_text(c, &filter);
            match crate::query::text::text_of(&filter) {
                Some(q) if q.bound().is_some() => {
                    (crate::exec::text::explain_tree(c, &q, &filter), 1)
                }
                _ => return Err(crate::query::text::no_index_error()),
            }
        }
        (Some(c), Ok(filter)) => {
            let choice = planner::choose(c, &filter, &filter_doc, pipeline.leading_sort(), None);
            let done = driver::stages_done(pipeline, &choice);
            let shape = planner::explain::Shape {
                filter: Some(filter_doc.clone()),
                sort: pipeline
                    .leading_sort()
                    .filter(|_| choice.winner.provides_sort())
                    .cloned(),
                ..Default::default()
            };
            let tree = planner::explain::plan_tree(&choice.winner, &shape);
            // A first stage that merges over a parallel scan runs inside `$cursor`.
            let parts = parallel::stage_parts(c, pipeline, done, &filter_doc, &choice.winner, cfg);
            match parts {
                Some(parts) => {
                    let per_part = pipeline.stage_documents().swap_remove(done);
                    (
                        parallel::explain_tree(parts, Some(per_part), tree),
                        done + 1,
                    )
                }
                None => (tree, done),
            }
        }
        _ => (doc! { "stage": "EOF" }, 0),
    };
    let mut stages = vec![Bson::Document(doc! {
        "$cursor": { "queryPlanner": { "namespace": ns.clone(), "parsedQuery": filter_doc, "winningPlan": winning, "rejectedPlans": [] } }
    })];
    for name in pipeline.stage_names().into_iter().skip(done) {
        stages.push(Bson::Document(doc! { name: {} }));
    }
    Ok(Reply::Doc(
        doc! { "explainVersion": "1", "stages": stages, "serverInfo": { "version": super::admin::COMPAT_VERSION }, "ok": 1.0 },
    ))
}

/// Every document a read of view `r` yields with `extra` stages after the view's own, run to
/// the end on this thread (for `count` and `distinct` on a view).
pub fn view_docs(
    state: &ServerState,
    req: &Request,
    r: super::views::Resolved,
    extra: Vec<Document>,
) -> CommandResult<std::collections::VecDeque<bson::RawDocumentBuf>> {
    let mut stages = [r.pipeline, extra].concat();
    crate::query::timeseries::push_down(&mut stages);
    let mut ctx = ParseContext::new(&req.db, Some(&r.base), bson::DateTime::now());
    ctx.memory_max_bytes = state.params.blocking_stage_bytes_max();
    let pipeline = Pipeline::parse(&stages, &ctx)?;
    let deadline = deadline(req);
    let coll = state.catalog.collection(&req.db, &r.base);
    let env = Env::new(&state.catalog, deadline);
    let input = driver::input(None, coll.as_ref(), &pipeline, deadline)?;
    driver::run_to_raw(&pipeline, input, &env)
}
