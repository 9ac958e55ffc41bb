//! Reads: `find`, `getMore`, `killCursors`, `count`, `distinct`. Stored documents go into replies
//! as raw BSON bytes; a filter is evaluated on raw documents; results larger than one batch stay
//! behind a cursor as a resumable scan (unsorted) or a buffer (sorted).

use super::args;
use super::argspec;
use super::{Reply, Request};
use crate::cursors::{Cursor, FIRST_BATCH_COUNT_DEFAULT};
use crate::error::{CommandResult, ErrorCode, err};
use crate::exec;
use crate::exec::find::FindSpec;
use crate::planner;
use crate::query::distinct::DistinctValues;
use crate::query::matcher::Filter;
use crate::query::pipeline::values::to_doc;
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use storage::Direction;

/// `{cursor: {<batch>: [...], id, ns}, ok: 1}`, its documents written into the reply frame as
/// they are (`super::batch`).
pub fn cursor_reply(id: i64, ns: &str, first: bool, docs: Vec<RawDocumentBuf>) -> Reply {
    Reply::Cursor(super::batch::CursorBatch::new(id, ns, first, docs))
}

/// The request's `maxTimeMS` deadline (its interrupt token's).
pub fn deadline(req: &Request) -> Option<Instant> {
    req.op.deadline()
}

/// What is left of a cursor's `maxTimeMS` once this request's work is done: mongod counts the
/// time limit over the cursor's whole life (find and every getMore), idle time excluded.
pub(super) fn time_left(req: &Request) -> Option<Duration> {
    deadline(req).map(|d| d.saturating_duration_since(Instant::now()))
}

fn parse_find(body: &Document) -> CommandResult<FindSpec> {
    argspec::check(&argspec::specs::FIND, body)?;
    let vars = args::let_variables(body, "find")?;
    let filter_doc = args::bind_let(
        &args::opt_doc(body, "find", "filter")?
            .cloned()
            .unwrap_or_default(),
        vars.as_ref(),
    );
    let filter = Filter::parse(&filter_doc)?;
    let projection_doc = args::opt_doc(body, "find", "projection")?
        .filter(|p| !p.is_empty())
        .cloned();
    let projection = match &projection_doc {
        Some(p) => Some(Arc::new(Projection::parse(p)?)),
        None => None,
    };
    let (sort, natural) = match args::opt_doc(body, "find", "sort")? {
        Some(s) if s.is_empty() => (None, None),
        Some(s) if s.keys().next().is_some_and(|k| k == "$natural") => {
            let dir = s.get("$natural").and_then(super::as_i64).unwrap_or(1);
            (
                None,
                Some(if dir < 0 {
                    Direction::Backward
                } else {
                    Direction::Forward
                }),
            )
        }
        Some(s) => (Some((SortSpec::parse(s)?, s.clone())), None),
        None => (None, None),
    };
    let natural = natural.or_else(|| match body.get("hint") {
        Some(Bson::Document(h)) => h.get("$natural").and_then(super::as_i64).map(|d| {
            if d < 0 {
                Direction::Backward
            } else {
                Direction::Forward
            }
        }),
        _ => None,
    });
    let skip = args::opt_non_negative(body, "find", "skip")?.unwrap_or(0) as u64;
    let limit_raw = args::opt_i64(body, "find", "limit")?;
    let mut single_batch = args::opt_bool(body, "find", "singleBatch")?.unwrap_or(false);
    let limit = match limit_raw {
        Some(n) if n < 0 => {
            // A negative limit is the legacy "one batch of |n|".
            single_batch = true;
            Some(n.unsigned_abs())
        }
        Some(0) | None => None,
        Some(n) => Some(n as u64),
    };
    let batch_size = args::opt_non_negative(body, "find", "batchSize")?.map(|n| n as usize);
    super::tailable::check_find(body)?;
    Ok(FindSpec {
        min: args::opt_doc(body, "find", "min")?
            .filter(|d| !d.is_empty())
            .cloned(),
        max: args::opt_doc(body, "find", "max")?
            .filter(|d| !d.is_empty())
            .cloned(),
        filter,
        filter_doc,
        projection,
        projection_doc,
        sort,
        natural,
        skip,
        limit,
        batch_size,
        single_batch,
        show_record_id: args::opt_bool(body, "find", "showRecordId")?.unwrap_or(false),
        return_key: args::opt_bool(body, "find", "returnKey")?.unwrap_or(false),
        allow_disk_use: args::opt_bool(body, "find", "allowDiskUse")?.unwrap_or(false),
        no_timeout: args::opt_bool(body, "find", "noCursorTimeout")?.unwrap_or(false),
    })
}

pub fn find(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let started = Instant::now();
    let reply = find_run(state, req)?;
    if query_stats_on(state) {
        let coll = req.body.get_str("find").unwrap_or_default();
        note_query_stats(
            state,
            req,
            started,
            &reply,
            || crate::query_shape::find_fingerprint(&req.db, coll, &req.body),
            || crate::query_shape::Shape::find(&req.db, coll, &req.body),
        );
    }
    Ok(reply)
}

/// Whether `$queryStats` records queries (`internalQueryStatsRateLimit` is not 0).
pub(super) fn query_stats_on(state: &ServerState) -> bool {
    state.params.query_stats_on()
}

/// Adds a finished `find` or `aggregate` (its first batch) to `$queryStats`: its time, the
/// documents returned, the keys and documents its scans examined and its plan flags (both
/// counted on the request's token), keyed by shape and the connection's handshake `client`.
/// The caller has checked [`query_stats_on`].
pub(super) fn note_query_stats(
    state: &ServerState,
    req: &Request,
    started: Instant,
    reply: &Reply,
    fingerprint: impl FnOnce() -> u64,
    shape: impl FnOnce() -> crate::query_shape::Shape,
) {
    let Reply::Cursor(batch) = reply else {
        return;
    };
    // An attempt on an async worker that is dropped and run again is counted by the run that
    // answers (`crate::offload::run_tried`).
    if storage::nowait::dropping() {
        return;
    }
    let (keys, docs) = req.op.examined();
    let run = crate::query_stats::Run {
        micros: i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX),
        docs_returned: batch.docs.len() as i64,
        keys_examined: i64::try_from(keys).unwrap_or(i64::MAX),
        docs_examined: i64::try_from(docs).unwrap_or(i64::MAX),
        plan_flags: req.op.plan_flags(),
        now_ms: bson::DateTime::now().timestamp_millis(),
    };
    state
        .query_stats
        .record(fingerprint(), shape, req.client.get(), &run);
}

fn find_run(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let coll_name = args::collection_name(&req.body, "find")?;
    crate::catalog::validate_collection_name(&req.db, &coll_name)?;
    let ns = format!("{}.{}", req.db, coll_name);
    let a = parse_find(&req.body)?;
    // Query settings (8.0): a rejected shape fails here; index hints stay current for the
    // planner while this runs.
    let _settings = state
        .query_settings
        .for_query(|| crate::query_shape::Shape::find(&req.db, &coll_name, &req.body))?;
    let _collation = super::views::collation_scope(state, &req.body, "find", &req.db, &coll_name)?;
    if let Some(view) = super::views::get(state, &req.db, &coll_name)? {
        return find_on_view(state, req, &view.name, &a);
    }
    let deadline = deadline(req);
    let Some(coll) = state.catalog.collection(&req.db, &coll_name) else {
        return Ok(cursor_reply(0, &ns, true, vec![]));
    };
    if let Some(tail) = super::tailable::requested(&req.body)? {
        return super::tailable::find(state, req, coll, a, tail);
    }
    let hint = args::check_hint(&req.body, Some(&coll))?;
    let sort_memory_max = state.params.blocking_stage_bytes_max();
    let mut source = exec::find::open(&coll, &a, hint.as_deref(), sort_memory_max, deadline)?;
    let first_count = match (a.batch_size, a.limit) {
        (Some(b), Some(l)) => b.min(l as usize),
        (Some(b), None) => b,
        (None, Some(l)) if a.single_batch => l as usize,
        (None, _) => FIRST_BATCH_COUNT_DEFAULT,
    };
    let batch = source.next_batch(first_count, deadline)?;
    if a.single_batch || source.is_exhausted() {
        return Ok(cursor_reply(0, &ns, true, batch));
    }
    let cursor = Cursor {
        db: req.db.clone(),
        coll: coll_name,
        uuid: Some(coll.uuid()),
        source,
        last_used: Instant::now(),
        no_timeout: a.no_timeout,
        time_left: time_left(req),
        tail: None,
        collator: crate::query::collator::current(),
        snapshot: crate::txn::current().filter(|t| t.snapshot_read_at().is_some()),
    };
    let id = state.cursors.insert(cursor)?;
    Ok(cursor_reply(id, &ns, true, batch))
}

/// `find` on a view is an aggregate: the view's pipeline, then the find's filter, sort, skip,
/// limit and projection as stages, in that order (as mongod rewrites it).
fn find_on_view(
    state: &ServerState,
    req: &Request,
    view: &str,
    a: &FindSpec,
) -> CommandResult<Reply> {
    for option in ["min", "max", "returnKey", "showRecordId", "hint"] {
        if req.body.get(option).is_some_and(|v| match v {
            Bson::Boolean(b) => *b,
            Bson::Document(d) => !d.is_empty(),
            _ => true,
        }) {
            return Err(err(
                ErrorCode::OptionNotSupportedOnView,
                format!("{option} not supported on a view"),
            ));
        }
    }
    let mut stages = Vec::new();
    if !a.filter_doc.is_empty() {
        stages.push(doc! { "$match": a.filter_doc.clone() });
    }
    if let Some((_, sort)) = &a.sort {
        stages.push(doc! { "$sort": sort.clone() });
    }
    if a.skip > 0 {
        stages.push(doc! { "$skip": a.skip as i64 });
    }
    let batch_size = match (a.batch_size, a.limit) {
        (Some(b), Some(l)) => b.min(l as usize),
        (Some(b), None) => b,
        (None, Some(l)) if a.single_batch => l as usize,
        (None, _) => FIRST_BATCH_COUNT_DEFAULT,
    };
    // One batch only: the pipeline ends with it, so no cursor stays open (mongod 7.3+).
    let limit = match a.single_batch && batch_size > 0 {
        true => Some(
            a.limit
                .map_or(batch_size as u64, |l| l.min(batch_size as u64)),
        ),
        false => a.limit,
    };
    if let Some(l) = limit {
        stages.push(doc! { "$limit": l as i64 });
    }
    if let Some(p) = &a.projection_doc {
        stages.push(doc! { "$project": p.clone() });
    }
    let spec = super::aggregate::Spec {
        coll_name: Some(view.to_string()),
        stages,
        explain: false,
        batch_size,
        allow_disk_use: a.allow_disk_use,
        let_vars: args::opt_doc(&req.body, "find", "let")?.cloned(),
    };
    match super::aggregate::run_spec(state, req, spec)? {
        super::aggregate::Ran::Reply(r) => Ok(r),
        super::aggregate::Ran::Output(_) => Err(err(
            ErrorCode::InternalError,
            "a find on a view produced output",
        )),
    }
}

pub fn get_more(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    state.opcounters.getmore.fetch_add(1, Relaxed);
    argspec::check(&argspec::specs::GET_MORE, &req.body)?;
    let id = match req.body.get("getMore") {
        Some(Bson::Int64(i)) => *i,
        Some(v) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'getMore.getMore' is the wrong type '{}', expected type 'long'",
                    args::type_name(v)
                ),
            ));
        }
        None => return Err(err(ErrorCode::FailedToParse, "missing getMore cursor id")),
    };
    let coll_name = match req.body.get("collection") {
        Some(Bson::String(s)) => s.clone(),
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "BSON field 'getMore.collection' is missing but a required field",
            ));
        }
    };
    let batch_size = args::opt_non_negative(&req.body, "getMore", "batchSize")?
        .filter(|b| *b > 0)
        .map(|b| b as usize);
    if req.max_time_ms.is_some() {
        // Only tailable awaitData cursors (which cairn does not have) take a getMore maxTimeMS.
        return Err(err(
            ErrorCode::BadValue,
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    let Some(mut cursor) = state.cursors.take(id) else {
        return Err(err(
            ErrorCode::CursorNotFound,
            format!("cursor id {id} not found"),
        ));
    };
    let ns = format!("{}.{}", req.db, coll_name);
    if cursor.ns() != ns {
        let owner = cursor.ns();
        state.cursors.put_back(id, cursor);
        return Err(err(
            ErrorCode::Unauthorized,
            format!(
                "Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {owner}"
            ),
        ));
    }
    if let Some(uuid) = cursor.uuid {
        let same = state
            .catalog
            .collection(&cursor.db, &cursor.coll)
            .is_some_and(|c| c.uuid() == uuid);
        if !same {
            return Err(err(
                ErrorCode::QueryPlanKilled,
                format!("collection dropped: {ns}"),
            ));
        }
    }
    // A suspended pipeline that reads other collections dies with them too, as with its own.
    for (db, coll, uuid) in cursor.source.foreign() {
        let Some(uuid) = uuid else { continue };
        let same = state
            .catalog
            .collection(db, coll)
            .is_some_and(|c| c.uuid() == *uuid);
        if !same {
            return Err(err(
                ErrorCode::QueryPlanKilled,
                format!("collection dropped: {db}.{coll}"),
            ));
        }
    }
    if let Some(left) = cursor.time_left {
        req.op.set_deadline(Some(req.received + left));
    }
    let _collation = crate::query::collator::scope(cursor.collator.clone());
    // A snapshot read's cursor reads its snapshot again (a transaction's getMore has its own
    // transaction installed by dispatch).
    let snapshot = cursor.snapshot.clone();
    let _snapshot = snapshot.as_ref().map(|t| t.install());
    let at = snapshot.as_ref().and_then(|t| t.snapshot_read_at());
    let stamped = |reply: Reply| match at {
        Some(at) => super::snapshot_read::stamp(reply, at),
        None => reply,
    };
    // A failure (SnapshotTooOld among them: the history is gone for good) drops the cursor.
    let batch = cursor
        .source
        .next_batch(batch_size.unwrap_or(usize::MAX), deadline(req))?;
    cursor.time_left = cursor.time_left.and(time_left(req));
    if cursor.source.is_exhausted() {
        return Ok(stamped(cursor_reply(0, &ns, false, batch)));
    }
    state.cursors.put_back(id, cursor);
    Ok(stamped(cursor_reply(id, &ns, false, batch)))
}

pub fn kill_cursors(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::specs::KILL_CURSORS, &req.body)?;
    args::collection_name(&req.body, "killCursors")?;
    let Some(Bson::Array(ids)) = req.body.get("cursors") else {
        return Err(err(
            ErrorCode::InternalError,
            "checked: cursors is an array",
        ));
    };
    let (mut killed, mut not_found) = (Vec::new(), Vec::new());
    for id in ids {
        let Bson::Int64(id) = id else {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'killCursors.cursors' must be an array of longs",
            ));
        };
        if state.cursors.kill(*id) || state.streams.kill(*id) {
            killed.push(*id)
        } else {
            not_found.push(*id)
        }
    }
    Ok(Reply::Doc(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": not_found,
        "cursorsAlive": [],
        "cursorsUnknown": [],
        "ok": 1.0,
    }))
}

pub fn count(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::specs::COUNT, &req.body)?;
    let coll_name = args::collection_name(&req.body, "count")?;
    let _collation = super::views::collation_scope(state, &req.body, "count", &req.db, &coll_name)?;
    let query = args::opt_doc(&req.body, "count", "query")?
        .cloned()
        .unwrap_or_default();
    let filter = Filter::parse(&query)?;
    let skip = args::opt_i64(&req.body, "count", "skip")?.unwrap_or(0);
    if skip < 0 {
        return Err(err(
            ErrorCode::Location51024,
            format!("BSON field 'skip' value must be >= 0, actual value '{skip}'"),
        ));
    }
    let limit = args::opt_i64(&req.body, "count", "limit")?
        .unwrap_or(0)
        .unsigned_abs();
    if let Some(view) = super::views::resolve(state, &req.db, &coll_name)? {
        let mut stages = vec![doc! { "$match": query }];
        if skip > 0 {
            stages.push(doc! { "$skip": skip });
        }
        if limit > 0 {
            stages.push(doc! { "$limit": limit as i64 });
        }
        stages.push(doc! { "$count": "n" });
        let docs = super::aggregate::view_docs(state, req, view, stages)?;
        let n = docs
            .front()
            .and_then(|d| d.get("n").ok().flatten())
            .and_then(|v| Bson::try_from(v).ok())
            .unwrap_or(Bson::Int32(0));
        return Ok(Reply::Doc(doc! { "n": n, "ok": 1.0 }));
    }
    let coll = state.catalog.collection(&req.db, &coll_name);
    let hint = args::check_hint(&req.body, coll.as_deref())?;
    let Some(coll) = coll else {
        return Ok(Reply::Doc(doc! { "n": 0, "ok": 1.0 }));
    };
    let natural =
        matches!(req.body.get("hint"), Some(Bson::Document(h)) if h.contains_key("$natural"));
    let key_only =
        planner::keyscan::count_plan(&planner::key_only_indexes(&coll), &filter, hint.as_deref())
            .filter(|_| !natural);
    let total = if filter.is_empty() {
        coll.count() // O(1)
    } else if let Some(plan) = key_only {
        let mut stats = exec::keyscan::KeyStats::default();
        exec::keyscan::count_keys(&coll, &plan, &filter, &mut stats)?
    } else if let Some(n) =
        exec::parallel::stages::count(&coll, &filter, &query, super::aggregate::parallelism(state))?
    {
        n
    } else {
        let mut n = 0u64;
        exec::for_each_match(&coll, &filter, &query, deadline(req), |_| {
            n += 1;
            Ok(())
        })?;
        n
    };
    let mut n = total.saturating_sub(skip as u64);
    if limit > 0 {
        n = n.min(limit);
    }
    let n = i32::try_from(n)
        .map(Bson::Int32)
        .unwrap_or(Bson::Int64(n as i64));
    Ok(Reply::Doc(doc! { "n": n, "ok": 1.0 }))
}

pub fn distinct(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::specs::DISTINCT, &req.body)?;
    let coll_name = args::collection_name(&req.body, "distinct")?;
    let _collation =
        super::views::collation_scope(state, &req.body, "distinct", &req.db, &coll_name)?;
    let key = match req.body.get("key") {
        Some(Bson::String(k)) => k.clone(),
        Some(v) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'distinct.key' is the wrong type '{}', expected type 'string'",
                    args::type_name(v)
                ),
            ));
        }
        None => {
            return Err(err(
                ErrorCode::FailedToParse,
                "BSON field 'distinct.key' is missing but a required field",
            ));
        }
    };
    let query = args::opt_doc(&req.body, "distinct", "query")?
        .cloned()
        .unwrap_or_default();
    let filter = Filter::parse(&query)?;
    let path: Vec<&str> = key.split('.').collect();
    let mut found = DistinctValues::default();
    if let Some(view) = super::views::resolve(state, &req.db, &coll_name)? {
        for raw in super::aggregate::view_docs(state, req, view, vec![doc! { "$match": query }])? {
            found.add_from(&to_doc(&raw)?, &path)?;
        }
        return Ok(Reply::Doc(doc! { "values": found.finish(), "ok": 1.0 }));
    }
    let coll = state.catalog.collection(&req.db, &coll_name);
    let hint = args::check_hint(&req.body, coll.as_deref())?;
    let natural =
        matches!(req.body.get("hint"), Some(Bson::Document(h)) if h.contains_key("$natural"));
    let key_only = coll.as_ref().filter(|_| !natural).and_then(|c| {
        planner::keyscan::key_plan(
            &planner::key_only_indexes(c),
            &key,
            &filter,
            hint.as_deref(),
        )
    });
    if let (Some(coll), Some(plan)) = (&coll, key_only) {
        let mut stats = exec::keyscan::KeyStats::default();
        for v in exec::keyscan::distinct_keys(coll, &plan, &filter, &key, &mut stats)? {
            found.add(v)?;
        }
    } else if let Some(coll) = coll {
        exec::for_each_match(&coll, &filter, &query, deadline(req), |doc| {
            found.add_from(&to_doc(doc)?, &path)
        })?;
    }
    Ok(Reply::Doc(doc! { "values": found.finish(), "ok": 1.0 }))
}
