//! `explain` for find, count, distinct, update, delete and findAndModify: the planner's choice in
//! mongod's `queryPlanner` shape, and with `executionStats` / `allPlansExecution` the winning
//! plan run to completion (writes are not performed) with its counters.

use super::args;
use super::{Reply, Request};
use crate::error::{CommandResult, ErrorCode, err};
use crate::exec::{self, ScanState};
use crate::planner::explain::{Shape, Stats, execution_stats, plan_tree};
use crate::planner::{self, Plan, keyscan};
use crate::query::matcher::Filter;
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::sync::Arc;
use std::time::Instant;

/// What an explained command asks of the planner.
struct Target {
    coll: String,
    filter: Document,
    shape: Shape,
    hint: Option<Bson>,
    /// For delete/update with `multi: false` and findAndModify: one document at most.
    single: bool,
    /// `find`'s `min` / `max` bounds of a hinted index scan.
    min: Option<Document>,
    max: Option<Document>,
    /// `distinct`'s key.
    key: Option<String>,
}

fn statement_filter(body: &Document, list: &str) -> CommandResult<(Document, bool)> {
    let first = match body.get(list) {
        Some(Bson::Array(items)) => items.first().and_then(Bson::as_document).cloned(),
        _ => None,
    }
    .ok_or_else(|| {
        err(
            ErrorCode::FailedToParse,
            format!("explain needs one statement in '{list}'"),
        )
    })?;
    let q = first.get_document("q").cloned().unwrap_or_default();
    let single = match list {
        "deletes" => first.get("limit").and_then(super::as_i64) == Some(1),
        _ => !first.get("multi").is_some_and(super::truthy),
    };
    Ok((q, single))
}

fn target(inner: &Document) -> CommandResult<(String, Target)> {
    let name = inner.keys().next().cloned().unwrap_or_default();
    let coll = args::collection_name(inner, &name)?;
    let doc_of = |k: &str| inner.get_document(k).ok().cloned();
    let t = match name.as_str() {
        "find" => Target {
            coll,
            filter: doc_of("filter").unwrap_or_default(),
            shape: Shape {
                filter: doc_of("filter"),
                sort: doc_of("sort").filter(|s| !s.is_empty()),
                skip: inner
                    .get("skip")
                    .and_then(super::as_i64)
                    .unwrap_or(0)
                    .max(0) as u64,
                limit: inner
                    .get("limit")
                    .and_then(super::as_i64)
                    .filter(|l| *l != 0)
                    .map(|l| l.unsigned_abs()),
                projection: doc_of("projection").filter(|p| !p.is_empty()),
                covered: false,
            },
            hint: inner.get("hint").cloned(),
            single: false,
            min: doc_of("min").filter(|d| !d.is_empty()),
            max: doc_of("max").filter(|d| !d.is_empty()),
            key: None,
        },
        "count" | "distinct" => Target {
            coll,
            filter: doc_of("query").unwrap_or_default(),
            shape: Shape {
                filter: doc_of("query"),
                ..Shape::default()
            },
            hint: inner.get("hint").cloned(),
            single: false,
            min: None,
            max: None,
            key: inner.get_str("key").ok().map(str::to_owned),
        },
        "delete" | "update" => {
            let (q, single) = statement_filter(
                inner,
                if name == "delete" {
                    "deletes"
                } else {
                    "updates"
                },
            )?;
            Target {
                coll,
                filter: q.clone(),
                shape: Shape {
                    filter: Some(q),
                    ..Shape::default()
                },
                hint: None,
                single,
                min: None,
                max: None,
                key: None,
            }
        }
        "findAndModify" | "findandmodify" => Target {
            coll,
            filter: doc_of("query").unwrap_or_default(),
            shape: Shape {
                filter: doc_of("query"),
                sort: doc_of("sort").filter(|s| !s.is_empty()),
                ..Shape::default()
            },
            hint: inner.get("hint").cloned(),
            single: true,
            min: None,
            max: None,
            key: None,
        },
        other => {
            return Err(err(
                ErrorCode::CommandNotSupported,
                format!("explain of '{other}' is not supported by cairn yet"),
            ));
        }
    };
    Ok((name, t))
}

/// A find, count or distinct on a view is explained as the aggregate it runs as: the filter
/// (and find's sort, skip, limit, projection) as stages after the view's pipeline, which
/// `aggregate` adds when it resolves the view.
fn view_read_as_aggregate(
    state: &ServerState,
    db: &str,
    inner: &Document,
) -> CommandResult<Option<Document>> {
    let name = inner.keys().next().cloned().unwrap_or_default();
    if !matches!(name.as_str(), "find" | "count" | "distinct") {
        return Ok(None);
    }
    let Ok(coll) = args::collection_name(inner, &name) else {
        return Ok(None);
    };
    if super::views::get(state, db, &coll)?.is_none() {
        return Ok(None);
    }
    let filter_key = if name == "find" { "filter" } else { "query" };
    let mut stages = Vec::new();
    if let Ok(f) = inner.get_document(filter_key) {
        stages.push(Bson::Document(doc! { "$match": f.clone() }));
    }
    if name == "find" {
        for (field, stage) in [
            ("sort", "$sort"),
            ("skip", "$skip"),
            ("limit", "$limit"),
            ("projection", "$project"),
        ] {
            match inner.get(field) {
                Some(Bson::Document(d)) if d.is_empty() => {}
                Some(v) => stages.push(Bson::Document(doc! { stage: v.clone() })),
                None => {}
            }
        }
    }
    if name == "count" {
        stages.push(Bson::Document(doc! { "$count": "count" }));
    }
    Ok(Some(doc! { "aggregate": coll, "pipeline": stages }))
}

fn verbosity(body: &Document) -> CommandResult<String> {
    Ok(match body.get("verbosity") {
        None => "allPlansExecution".to_string(),
        Some(Bson::String(v))
            if matches!(
                v.as_str(),
                "queryPlanner" | "executionStats" | "allPlansExecution"
            ) =>
        {
            v.clone()
        }
        Some(v) => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "verbosity string must be one of {{'queryPlanner', 'executionStats', 'allPlansExecution'}}, got {v}"
                ),
            ));
        }
    })
}

pub fn explain(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    super::argspec::check(&super::argspec::specs::EXPLAIN, &req.body)?;
    let inner = match req.body.get("explain") {
        Some(Bson::Document(d)) if !d.is_empty() => d.clone(),
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "explain command requires a nested object",
            ));
        }
    };
    let mut inner = inner;
    if let Some(agg) = view_read_as_aggregate(state, &req.db, &inner)? {
        inner = agg;
    }
    if inner.keys().next().is_some_and(|k| k == "aggregate") {
        // The aggregate command explains itself (the planner's part for its leading stages).
        let mut body = inner.clone();
        body.insert("explain", true);
        body.remove("cursor");
        let sub = Request {
            name: "aggregate".into(),
            command: "aggregate",
            db: req.db.clone(),
            body,
            raw_body: None,
            sequences: vec![],
            write_concern: None,
            max_time_ms: req.max_time_ms,
            received: req.received,
            op: req.op.clone(),
            txn: Default::default(),
            retry: Default::default(),
            lsid: req.lsid.clone(),
            user: req.user.clone(),
            client: Default::default(),
        };
        return match super::aggregate::run_pipeline(state, &sub)? {
            super::aggregate::Ran::Reply(reply) => Ok(reply),
            // `explain: true` never writes.
            super::aggregate::Ran::Output(_) => Err(err(
                ErrorCode::InternalError,
                "explain of an aggregation produced output",
            )),
        };
    }
    let verbosity = verbosity(&req.body)?;
    let (name, mut t) = target(&inner)?;
    let ns = format!("{}.{}", req.db, t.coll);
    let filter = Filter::parse(&t.filter)?;
    let coll = state.catalog.collection(&req.db, &t.coll);
    let _collation = args::collation_scope(&inner, &name, coll.as_deref())?;
    // The projection is part of an index filter's shape (planning and `indexFilterSet`).
    let _projection = planner::filters::projection_scope(t.shape.projection.as_ref());
    // Query settings' index hints apply to an explained find too; it is never rejected.
    let _settings = match name.as_str() {
        "find" => state
            .query_settings
            .for_query(|| crate::query_shape::Shape::find(&req.db, &t.coll, &inner))
            .unwrap_or(None),
        _ => None,
    };
    let mut hint_doc = Document::new();
    if let Some(h) = &t.hint {
        hint_doc.insert("hint", h.clone());
    }
    let hint = args::check_hint(&hint_doc, coll.as_deref())?;
    let (winner, rejected, stats, all_plans) = match &coll {
        None => (
            doc! { "stage": "EOF" },
            vec![],
            Stats {
                n_returned: 0,
                keys_examined: 0,
                docs_examined: 0,
                millis: 0,
            },
            vec![],
        ),
        Some(c) => {
            let started = Instant::now();
            let key_only = key_only_plan(c, &name, &t, &filter, hint.as_deref());
            let text = crate::query::text::text_of(&filter);
            let (winner, rejected, mut s, all) = match key_only {
                _ if name == "count" && t.filter.is_empty() => fast_count(c, &verbosity),
                _ if let Some(q) = &text => text_explained(c, &filter, q, &verbosity)?,
                Some(k) => (
                    k.tree(&t),
                    vec![],
                    k.run(c, &filter, &t, &verbosity)?,
                    vec![],
                ),
                None if name == "count" => {
                    let (tree, rejected, s, all) =
                        planned(c, &filter, &mut t, hint.as_deref(), &verbosity)?;
                    let tree = parallel_count_tree(state, c, &filter, &t.filter, tree);
                    (
                        doc! { "stage": "COUNT", "inputStage": tree },
                        rejected,
                        s,
                        all,
                    )
                }
                None => planned(c, &filter, &mut t, hint.as_deref(), &verbosity)?,
            };
            s.millis = started.elapsed().as_millis() as u64;
            (winner, rejected, s, all)
        }
    };
    // The shape's hashes, and whether the plan came from the plan cache (explain reads the
    // cache, never adds to it).
    let (query_hash, plan_cache_key, is_cached, index_filter_set) = match &coll {
        Some(c) => {
            let sort = t.shape.sort.as_ref();
            let key = planner::cache::Key::of(c, &t.filter, sort);
            let filtered = planner::filters::allowed(c, &t.filter, sort).is_some();
            let cached = hint.is_none() && !filtered && planner::cache::peek(&key, c);
            (key.query_hash(), key.plan_cache_key(), cached, filtered)
        }
        None => (String::new(), String::new(), false, false),
    };
    let mut winner = winner;
    if winner.get_str("stage").is_ok_and(|s| s != "EOF") {
        winner.insert("isCached", is_cached);
    }
    let mut reply = doc! {
        "explainVersion": "1",
        "queryPlanner": {
            "namespace": ns,
            "indexFilterSet": index_filter_set,
            "parsedQuery": t.filter.clone(),
            "queryHash": query_hash.clone(),
            "planCacheShapeHash": query_hash,
            "planCacheKey": plan_cache_key,
            "maxIndexedOrSolutionsReached": false,
            "maxIndexedAndSolutionsReached": false,
            "maxScansToExplodeReached": false,
            "winningPlan": winner.clone(),
            "rejectedPlans": rejected,
        },
    };
    // 8.0: the query shape's hash (cairn's shape, as `$queryStats` and query settings show it).
    if name == "find" {
        let shape = crate::query_shape::Shape::find(&req.db, &t.coll, &inner);
        reply.insert("queryShapeHash", shape.hash_hex());
    }
    if verbosity != "queryPlanner" {
        let mut es = execution_stats(&stats, &winner);
        if verbosity == "allPlansExecution" {
            es.insert("allPlansExecution", Bson::Array(all_plans));
        }
        reply.insert("executionStats", es);
    }
    reply.insert("command", inner.clone());
    reply.insert(
        "serverInfo",
        doc! { "host": "localhost", "port": state.config.port as i32, "version": super::admin::COMPAT_VERSION, "gitVersion": "unknown" },
    );
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// A count's scan tree under the `PARALLEL` stage when the count would split its scan.
fn parallel_count_tree(
    state: &ServerState,
    c: &Arc<storage::Collection>,
    filter: &Filter,
    filter_doc: &Document,
    tree: Document,
) -> Document {
    use crate::exec::parallel::stages as parallel;
    let cfg = super::aggregate::parallelism(state);
    let choice = planner::choose(c, filter, filter_doc, None, None);
    match parallel::count_parts(c, filter_doc, &choice.winner, cfg) {
        Some(parts) => parallel::explain_tree(parts, None, tree),
        None => tree,
    }
}

fn natural_hint(t: &Target) -> bool {
    matches!(&t.hint, Some(Bson::Document(h)) if h.contains_key("$natural"))
}

/// A `count` without a filter: the collection's document count, no scan.
fn fast_count(c: &storage::Collection, verbosity: &str) -> Planned {
    let n = if verbosity == "queryPlanner" {
        0
    } else {
        c.count()
    };
    let stats = Stats {
        n_returned: n,
        keys_examined: 0,
        docs_examined: 0,
        millis: 0,
    };
    (
        doc! { "stage": "RECORD_STORE_FAST_COUNT" },
        vec![],
        stats,
        vec![],
    )
}

/// A `count` or `distinct` answered from index keys alone.
enum KeyOnly {
    Count(planner::IndexPlan),
    Distinct(planner::IndexPlan, String),
}

fn key_only_plan(
    c: &storage::Collection,
    name: &str,
    t: &Target,
    filter: &Filter,
    hint: Option<&str>,
) -> Option<KeyOnly> {
    if natural_hint(t) {
        return None;
    }
    match (name, &t.key) {
        ("count", _) => {
            keyscan::count_plan(&planner::key_only_indexes(c), filter, hint).map(KeyOnly::Count)
        }
        ("distinct", Some(key)) => {
            keyscan::key_plan(&planner::key_only_indexes(c), key, filter, hint)
                .map(|p| KeyOnly::Distinct(p, key.clone()))
        }
        _ => None,
    }
}

impl KeyOnly {
    fn tree(&self, _t: &Target) -> Document {
        match self {
            KeyOnly::Count(p) => planner::explain::count_scan_tree(p),
            KeyOnly::Distinct(p, key) => planner::explain::distinct_scan_tree(p, key),
        }
    }

    fn run(
        &self,
        c: &storage::Collection,
        filter: &Filter,
        t: &Target,
        verbosity: &str,
    ) -> CommandResult<Stats> {
        let mut k = exec::keyscan::KeyStats::default();
        let n = match self {
            _ if verbosity == "queryPlanner" => 0,
            KeyOnly::Count(p) => {
                let n = exec::keyscan::count_keys(c, p, filter, &mut k)?;
                let skip = t.shape.skip;
                n.saturating_sub(skip)
            }
            KeyOnly::Distinct(p, key) => {
                exec::keyscan::distinct_keys(c, p, filter, key, &mut k)?.len() as u64
            }
        };
        Ok(Stats {
            n_returned: n,
            keys_examined: k.keys_examined,
            docs_examined: k.docs_examined,
            millis: 0,
        })
    }
}

/// Winning tree, rejected trees, the winner's run, and every candidate's trial
/// (`allPlansExecution`).
type Planned = (Document, Vec<Bson>, Stats, Vec<Bson>);

/// Matches a candidate may return during its `allPlansExecution` trial (mongod's
/// `internalQueryPlanEvaluationMaxResults`).
const TRIAL_RESULTS_MAX: u64 = 101;

/// The trial of every candidate when there were several: each plan runs until it returns
/// `TRIAL_RESULTS_MAX` matches or ends, with its own counters.
fn all_plans_trials(
    c: &Arc<storage::Collection>,
    filter: &Filter,
    choice: &planner::Choice,
    shape: &Shape,
) -> CommandResult<Vec<Bson>> {
    if choice.rejected.is_empty() {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    for (i, plan) in std::iter::once(&choice.winner)
        .chain(&choice.rejected)
        .enumerate()
    {
        let started = Instant::now();
        let mut scan = ScanState::new(c.clone(), Arc::new(filter.clone()), exec::scan_mode(plan));
        scan.remaining = Some(TRIAL_RESULTS_MAX);
        let mut n = 0i64;
        while scan.next_match(None)?.is_some() {
            n += 1;
        }
        let tree_shape = Shape {
            covered: shape.covered && i == 0,
            ..shape.clone()
        };
        let mut stages = plan_tree(plan, &tree_shape);
        stages.insert("nReturned", n);
        out.push(Bson::Document(doc! {
            "nReturned": n,
            "executionTimeMillisEstimate": started.elapsed().as_millis() as i64,
            "totalKeysExamined": scan.keys_examined as i64,
            "totalDocsExamined": scan.docs_examined as i64,
            "executionStages": stages,
        }));
    }
    Ok(out)
}

/// The planner's choice for a command, its explain trees and (unless `queryPlanner`) its run.
/// A `$text` query's explain: its TEXT_MATCH tree, run unless only the plan is asked for.
fn text_explained(
    c: &Arc<storage::Collection>,
    filter: &Filter,
    query: &crate::query::text::TextQuery,
    verbosity: &str,
) -> CommandResult<Planned> {
    planner::bind_text(c, filter);
    let Some(bound) = query.bound() else {
        return Err(crate::query::text::no_index_error());
    };
    exec::text::prefix_values(filter, &bound.spec)?;
    let mut stats = Stats {
        n_returned: 0,
        keys_examined: 0,
        docs_examined: 0,
        millis: 0,
    };
    if verbosity != "queryPlanner" {
        let run = exec::text::run(c, filter, query, None)?;
        stats.n_returned = run.hits.len() as u64;
        stats.keys_examined = run.keys_examined;
        stats.docs_examined = run.docs_examined;
    }
    Ok((
        exec::text::explain_tree(c, query, filter),
        vec![],
        stats,
        vec![],
    ))
}

fn planned(
    c: &Arc<storage::Collection>,
    filter: &Filter,
    t: &mut Target,
    hint: Option<&str>,
    verbosity: &str,
) -> CommandResult<Planned> {
    let choice = if t.min.is_some() || t.max.is_some() {
        planner::minmax::choose_bounded(
            c,
            hint,
            t.min.as_ref(),
            t.max.as_ref(),
            t.shape.sort.as_ref(),
        )?
    } else if natural_hint(t) {
        planner::Choice {
            winner: Plan::CollScan {
                direction: storage::Direction::Forward,
            },
            rejected: vec![],
        }
    } else {
        planner::choose_cached(c, filter, &t.filter, t.shape.sort.as_ref(), hint, false).0
    };
    let covered = planner::covered::covering(
        &choice.winner,
        t.shape.projection.as_ref(),
        filter,
        t.shape.sort.as_ref(),
    );
    t.shape.covered = covered.is_some();
    let stats = if verbosity == "queryPlanner" {
        Stats {
            n_returned: 0,
            keys_examined: 0,
            docs_examined: 0,
            millis: 0,
        }
    } else {
        run(c, filter, &choice.winner, t, covered)?
    };
    let rejected: Vec<Bson> = choice
        .rejected
        .iter()
        .map(|p| {
            Bson::Document(plan_tree(
                p,
                &Shape {
                    covered: false,
                    ..t.shape.clone()
                },
            ))
        })
        .collect();
    let all = if verbosity == "allPlansExecution" {
        all_plans_trials(c, filter, &choice, &t.shape)?
    } else {
        vec![]
    };
    Ok((plan_tree(&choice.winner, &t.shape), rejected, stats, all))
}

/// Run the winning plan without writing anything and count what it read and returned.
fn run(
    coll: &Arc<storage::Collection>,
    filter: &Filter,
    plan: &Plan,
    t: &Target,
    covered: Option<planner::covered::Covered>,
) -> CommandResult<Stats> {
    let mut scan = ScanState::new(
        coll.clone(),
        Arc::new(filter.clone()),
        exec::scan_mode(plan),
    );
    scan.covered = covered;
    let sorting = t.shape.sort.is_some() && !plan.provides_sort();
    if !sorting {
        scan.skip = t.shape.skip;
        scan.remaining = t.shape.limit;
        if t.single {
            scan.remaining = Some(1);
        }
    }
    let mut n = 0u64;
    while scan.next_match(None)?.is_some() {
        n += 1;
    }
    if sorting {
        n = n.saturating_sub(t.shape.skip);
        if let Some(l) = t.shape.limit {
            n = n.min(l);
        }
        if t.single {
            n = n.min(1);
        }
    }
    Ok(Stats {
        n_returned: n,
        keys_examined: scan.keys_examined,
        docs_examined: scan.docs_examined,
        millis: 0,
    })
}
