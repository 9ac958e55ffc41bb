//! Diagnostic and maintenance commands that tools and ODMs call, answered with mongod's argument
//! checks and reply shapes from what cairn has: `dataSize`, `compact` (the engine's log
//! compaction, engine-wide: cairn keeps every collection in one log), `validateDBMetadata`,
//! `top`, `lockInfo`, `connPoolStats`, the plan-cache commands (over `planner::cache`; index
//! filters are kept and applied by `planner::filters`), the
//! cluster parameters (kept in memory, not persisted), the session-killing commands (argument
//! checks only: sessions are not tracked), and the read/write concern defaults, which mongod
//! refuses on a standalone.

use super::args::{self, type_name};
use super::argspec::{self, admin as specs};
use super::{Reply, Request};
use crate::error::{CommandError, CommandResult, ErrorCode, err, storage_error};
use crate::query::collation::Spec;
use crate::query::matcher::Filter;
use crate::query::sort::SortSpec;
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn wrong_type(path: &str, v: &Bson, expected: &str) -> CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{path}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

fn missing(path: &str) -> CommandError {
    err(
        ErrorCode::Location40414,
        format!("BSON field '{path}' is missing but a required field"),
    )
}

/// `dataSize: "db.coll"`: bytes and count of the whole collection, or of the documents whose
/// `keyPattern` fields lie in `[min, max)`.
pub fn data_size(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let started = Instant::now();
    argspec::check(&specs::DATA_SIZE, &req.body)?;
    let ns = match req.body.get("dataSize") {
        Some(Bson::String(s)) => s.clone(),
        Some(v) => return Err(wrong_type("dataSize.dataSize", v, "string")),
        None => return Err(missing("dataSize.dataSize")),
    };
    let (db, coll) = ns.split_once('.').unwrap_or((&ns, ""));
    let min = args::opt_doc(&req.body, "dataSize", "min")?.filter(|d| !d.is_empty());
    let max = args::opt_doc(&req.body, "dataSize", "max")?.filter(|d| !d.is_empty());
    let key = args::opt_doc(&req.body, "dataSize", "keyPattern")?.filter(|d| !d.is_empty());
    let estimate = req.body.get("estimate").is_some_and(super::truthy);
    let millis = || started.elapsed().as_millis() as i32;
    let c = state.catalog.collection(db, coll).filter(|c| c.count() > 0);
    let Some(c) = c else {
        return Ok(Reply::Doc(
            doc! { "size": 0, "numObjects": 0, "millis": millis(), "ok": 1.0 },
        ));
    };
    let (size, count) = match (min, max) {
        (None, None) => (c.data_size_bytes() as i64, c.count() as i64),
        (Some(min), Some(max)) => {
            let pattern = key.unwrap_or(min);
            // The range compares the key pattern's fields in ascending order, as an index does.
            let ascending: Document = pattern
                .keys()
                .map(|k| (k.clone(), Bson::Int32(1)))
                .collect();
            let order = SortSpec::parse(&ascending)?;
            let min_raw = raw(min)?;
            let max_raw = raw(max)?;
            let all = Document::new();
            // One pass over the collection, one document in memory at a time.
            let mut scan = crate::exec::planned_scan(&c, Filter::parse(&all)?, &all, None);
            let mut size = 0i64;
            let mut count = 0i64;
            while let Some((_, d, _)) = scan.next_match(None)? {
                let after_min = order.compare(&d, &min_raw) != std::cmp::Ordering::Less;
                let before_max = order.compare(&d, &max_raw) == std::cmp::Ordering::Less;
                if after_min && before_max {
                    size += d.as_bytes().len() as i64;
                    count += 1;
                }
            }
            (size, count)
        }
        _ => {
            return Err(err(ErrorCode::BadValue, "only one of min or max specified"));
        }
    };
    Ok(Reply::Doc(doc! {
        "estimate": estimate, "size": size, "numObjects": count, "millis": millis(), "ok": 1.0,
    }))
}

fn raw(d: &Document) -> CommandResult<bson::RawDocumentBuf> {
    bson::RawDocumentBuf::try_from(d).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))
}

/// `compact: coll`: run the engine's log compaction until it finds nothing more to reclaim,
/// then checkpoint twice (an emptied segment is deleted once no meta slot needs it) and report
/// the bytes the data files shrank by. The log is shared by every collection, so this compacts
/// them all; `dryRun` only estimates (the log's dead bytes).
pub async fn compact(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    let name = args::collection_name(&req.body, "compact")?;
    argspec::check(&specs::COMPACT, &req.body)?;
    let dry_run = req.body.get("dryRun").is_some_and(super::truthy);
    super::off_thread(state, req, move |state, req| {
        if super::views::get(state, &req.db, &name)?.is_some() {
            return Err(err(
                ErrorCode::CommandNotSupportedOnView,
                "can't compact a view",
            ));
        }
        if state.catalog.collection(&req.db, &name).is_none() {
            return Err(err(
                ErrorCode::NamespaceNotFound,
                format!("collection does not exist: {}.{name}", req.db),
            ));
        }
        let engine = state.catalog.engine();
        let before = engine.stats();
        if dry_run {
            let dead = before.log_bytes.saturating_sub(before.live_bytes) as i64;
            return Ok(Reply::Doc(doc! { "estimatedBytesFreed": dead, "ok": 1.0 }));
        }
        let freed = compact_all(engine).map_err(|e| storage_error(e, &req.db, &name))?;
        Ok(Reply::Doc(doc! { "bytesFreed": freed, "ok": 1.0 }))
    })
    .await
}

/// Compaction passes until nothing more is reclaimed, then two checkpoints (an emptied segment
/// is deleted once no meta slot needs it); the bytes the data files shrank by.
fn compact_all(engine: &storage::Engine) -> storage::Result<i64> {
    let before = engine.stats();
    // Each pass empties at most one segment; the segment count bounds the passes.
    for _ in 0..=before.segments {
        if !engine.compact()? {
            break;
        }
    }
    engine.checkpoint()?;
    engine.checkpoint()?;
    let after = engine.stats();
    Ok(before.file_bytes.saturating_sub(after.file_bytes) as i64)
}

/// `autoCompact` (8.0): turns the engine's background compaction on or off (on at start-up, as
/// cairn has always compacted in the background; not kept over a restart, as mongod's is not);
/// `runOnce: true` runs the passes `compact` runs, once, before answering (mongod answers first
/// and compacts after).
pub async fn auto_compact(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    argspec::check(&specs::AUTO_COMPACT, &req.body)?;
    let enable = req.body.get_bool("autoCompact").unwrap_or(false);
    state.catalog.engine().set_auto_compact(enable);
    if !(enable && req.body.get_bool("runOnce").unwrap_or(false)) {
        return Ok(Reply::ok());
    }
    super::off_thread(state, req, |state, _| {
        compact_all(state.catalog.engine())
            .map_err(|e| storage_error(e, "admin", "autoCompact"))?;
        Ok(Reply::ok())
    })
    .await
}

/// `validateDBMetadata`: which collections and indexes use features outside the API version
/// asked for. Everything cairn can create is in API version 1, so the list is empty.
pub fn validate_db_metadata(req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::VALIDATE_DB_METADATA, &req.body)?;
    let Ok(api) = req.body.get_document("apiParameters") else {
        return Err(missing("validateDBMetadata.apiParameters"));
    };
    argspec::check_entry(&specs::API_PARAMETERS, api)?;
    match api.get_str("version") {
        Ok("1") => {}
        Ok(v) => {
            return Err(err(
                ErrorCode::APIVersionError,
                format!("API version must be \"1\", not \"{v}\""),
            ));
        }
        Err(_) => return Err(missing("validateDBMetadata.apiParameters.version")),
    }
    Ok(Reply::Doc(doc! { "apiVersionErrors": [], "ok": 1.0 }))
}

/// The per-operation counters `top` reports for one namespace (cairn does not count per
/// namespace yet: all zero).
fn top_entry() -> Document {
    let zero = || doc! { "time": 0_i64, "count": 0_i64 };
    let mut d = Document::new();
    for k in [
        "total",
        "readLock",
        "writeLock",
        "queries",
        "getmore",
        "insert",
        "update",
        "remove",
        "commands",
    ] {
        d.insert(k, zero());
    }
    d
}

/// `top` (admin): usage per namespace, in mongod's shape.
pub fn top(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::TOP, &req.body)?;
    let mut totals = doc! { "note": "all times in microseconds" };
    let engine = state.catalog.engine();
    for db in engine.databases() {
        for c in engine.collections(&db) {
            totals.insert(format!("{db}.{}", c.name), top_entry());
        }
    }
    Ok(Reply::Doc(doc! { "totals": totals, "ok": 1.0 }))
}

/// `lockInfo` (admin): the locks held or waited for. cairn's per-namespace write locks are
/// short and internal; none is reported.
pub fn lock_info(req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::LOCK_INFO, &req.body)?;
    Ok(Reply::Doc(doc! { "lockInfo": [], "ok": 1.0 }))
}

/// `connPoolStats`: outgoing connection pools. A standalone cairn opens none.
pub fn conn_pool_stats() -> Reply {
    Reply::Doc(doc! {
        "numClientConnections": 0,
        "numAScopedConnections": 0,
        "totalInUse": 0,
        "totalAvailable": 0,
        "totalLeased": 0,
        "totalCreated": 0,
        "totalRefreshing": 0,
        "totalRefreshed": 0,
        "totalWasNeverUsed": 0,
        "totalWasUsedOnce": 0,
        "totalConnUsageTimeMillis": 0,
        "acquisitionWaitTimes": {},
        "replicaSetMatchingStrategy": "matchPrimaryNode",
        "pools": {},
        "hosts": {},
        "replicaSets": {},
        "ok": 1.0,
    })
}

/// The query shape a plan-cache command names: `query` (required where `required`), `sort`,
/// `projection`, `collation`, each an object (the collation not empty).
fn query_shape(body: &Document, required: bool) -> CommandResult<Document> {
    let mut shape = Document::new();
    for field in ["query", "sort", "projection", "collation"] {
        match body.get(field) {
            None if field == "query" && required => {
                return Err(err(ErrorCode::BadValue, "required field query missing"));
            }
            None => {}
            Some(Bson::Document(d)) => {
                shape.insert(field, d.clone());
            }
            Some(_) => {
                let kind = if field == "query" {
                    "required"
                } else {
                    "optional"
                };
                return Err(err(
                    ErrorCode::BadValue,
                    format!("{kind} field {field} must be an object"),
                ));
            }
        }
    }
    if shape.get_document("collation").is_ok_and(|c| c.is_empty()) {
        return Err(err(
            ErrorCode::BadValue,
            "optional field collation cannot be an empty object",
        ));
    }
    if let Some(Bson::Document(q)) = shape.get("query") {
        Filter::parse(q)?;
    }
    Ok(shape)
}

fn plan_cache_ns(req: &Request, command: &str) -> CommandResult<String> {
    Ok(format!(
        "{}.{}",
        req.db,
        args::collection_name(&req.body, command)?
    ))
}

/// `planCacheClear`: drop the collection's cached plans; `query` (and `sort`) narrows it to one
/// shape. A collection that does not exist has none.
pub fn plan_cache_clear(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let (name, shape) = plan_cache_clear_args(req)?;
    if let Some(c) = state.catalog.collection(&req.db, &name) {
        let query = shape.get_document("query").ok();
        let sort = shape.get_document("sort").ok();
        crate::planner::cache::clear(&c, query.map(|q| (q, sort)));
    }
    Ok(Reply::ok())
}

/// `planCacheClear`'s collection name and shape, checked.
fn plan_cache_clear_args(req: &Request) -> CommandResult<(String, Document)> {
    plan_cache_ns(req, "planCacheClear")?;
    argspec::check(&specs::PLAN_CACHE_CLEAR, &req.body)?;
    let shape = query_shape(&req.body, false)?;
    Ok((args::collection_name(&req.body, "planCacheClear")?, shape))
}

/// `planCacheSetFilter`: record that a query shape of an existing collection may only use
/// `indexes` (filters belong to a collection and go with it).
pub fn plan_cache_set_filter(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let name = args::collection_name(&req.body, "planCacheSetFilter")?;
    if state.catalog.collection(&req.db, &name).is_none() {
        return Err(err(ErrorCode::BadValue, "no such collection"));
    }
    set_filter(req)
}

/// [`plan_cache_set_filter`] once the collection is known to exist.
fn set_filter(req: &Request) -> CommandResult<Reply> {
    let ns = plan_cache_ns(req, "planCacheSetFilter")?;
    argspec::check(&specs::PLAN_CACHE_SET_FILTER, &req.body)?;
    let mut shape = query_shape(&req.body, true)?;
    let indexes = match req.body.get("indexes") {
        None => return Err(err(ErrorCode::BadValue, "required field indexes missing")),
        Some(Bson::Array(a)) if a.is_empty() => {
            return Err(err(ErrorCode::BadValue, "Must specify at least one index."));
        }
        Some(Bson::Array(a)) => a.clone(),
        Some(_) => {
            return Err(err(
                ErrorCode::BadValue,
                "required field indexes must be an array",
            ));
        }
    };
    if indexes
        .iter()
        .any(|i| !matches!(i, Bson::Document(_) | Bson::String(_)))
    {
        return Err(err(
            ErrorCode::BadValue,
            "Each index must be either an index key pattern or an index name",
        ));
    }
    let filter_shape = crate::planner::filters::Shape::of_command(&shape)?;
    // Listed as mongod lists it: sort and projection always, the collation normalised.
    for k in ["sort", "projection"] {
        if !shape.contains_key(k) {
            shape.insert(k, Document::new());
        }
    }
    match filter_shape.collation() {
        Some(spec @ Spec::Locale(_)) => {
            shape.insert("collation", spec.to_document());
        }
        _ => {
            shape.remove("collation");
        }
    }
    shape.insert("indexes", indexes);
    crate::planner::filters::set(&ns, filter_shape, shape);
    Ok(Reply::ok())
}

/// `planCacheClearFilters`: forget the index filters of one shape, or all of the collection's.
pub fn plan_cache_clear_filters(req: &Request) -> CommandResult<Reply> {
    let ns = plan_cache_ns(req, "planCacheClearFilters")?;
    argspec::check(&specs::PLAN_CACHE_CLEAR_FILTERS, &req.body)?;
    let shape = query_shape(&req.body, false)?;
    if !shape.contains_key("query") {
        // mongod refuses these rather than clear every filter when `query` was forgotten.
        if !shape.is_empty() {
            return Err(err(
                ErrorCode::BadValue,
                "sort, projection, or collation provided without query",
            ));
        }
        crate::planner::filters::clear(&ns, None);
        return Ok(Reply::ok());
    }
    let shape = crate::planner::filters::Shape::of_command(&shape)?;
    crate::planner::filters::clear(&ns, Some(&shape));
    Ok(Reply::ok())
}

/// `planCacheListFilters`: the index filters of a collection.
pub fn plan_cache_list_filters(req: &Request) -> CommandResult<Reply> {
    let ns = plan_cache_ns(req, "planCacheListFilters")?;
    argspec::check(&specs::PLAN_CACHE_LIST_FILTERS, &req.body)?;
    let list = crate::planner::filters::list(&ns);
    Ok(Reply::Doc(doc! { "filters": list, "ok": 1.0 }))
}

/// The cluster parameters a standalone knows, with their defaults.
fn cluster_parameter_default(name: &str) -> Option<Document> {
    Some(match name {
        "changeStreamOptions" => doc! { "preAndPostImages": { "expireAfterSeconds": "off" } },
        "defaultMaxTimeMS" => doc! { "readOperations": 0_i64 },
        "pauseMigrationsDuringMultiUpdates" => doc! { "enabled": false },
        _ => return None,
    })
}

const CLUSTER_PARAMETERS: &[&str] = &[
    "changeStreamOptions",
    "defaultMaxTimeMS",
    "pauseMigrationsDuringMultiUpdates",
];

/// `defaultMaxTimeMS.readOperations` (0: none), read by every find, aggregate, count and
/// distinct without a `maxTimeMS`: an atomic, so that read takes no lock.
static DEFAULT_READ_MAX_TIME_MS: std::sync::atomic::AtomicI64 =
    std::sync::atomic::AtomicI64::new(0);

/// The `maxTimeMS` a read without one gets (`defaultMaxTimeMS` cluster parameter; 0: none).
pub fn default_read_max_time_ms() -> i64 {
    DEFAULT_READ_MAX_TIME_MS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Values set with `setClusterParameter` (in memory: they do not survive a restart).
static CLUSTER_VALUES: Mutex<BTreeMap<String, Document>> = Mutex::new(BTreeMap::new());

fn cluster_value(name: &str) -> Option<Document> {
    let mut d =
        doc! { "_id": name, "clusterParameterTime": bson::Timestamp { time: 0, increment: 0 } };
    let set = CLUSTER_VALUES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(name)
        .cloned();
    d.extend(set.or_else(|| cluster_parameter_default(name))?);
    Some(d)
}

fn unknown_cluster_parameter(name: &str) -> CommandError {
    err(
        ErrorCode::NoSuchKey,
        format!("Unknown Cluster Parameter {name}"),
    )
}

/// `getClusterParameter` (admin): one name, a list of names, or `"*"`.
pub fn get_cluster_parameter(req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::GET_CLUSTER_PARAMETER, &req.body)?;
    let names: Vec<String> = match req.body.get("getClusterParameter") {
        Some(Bson::String(s)) if s == "*" => {
            CLUSTER_PARAMETERS.iter().map(|s| s.to_string()).collect()
        }
        Some(Bson::String(s)) => vec![s.clone()],
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| match v {
                Bson::String(s) => Ok(s.clone()),
                other => Err(wrong_type(
                    "getClusterParameter.getClusterParameter",
                    other,
                    "string",
                )),
            })
            .collect::<CommandResult<_>>()?,
        Some(v) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'getClusterParameter.getClusterParameter' is the wrong type '{}', expected types '[string, array]'",
                    type_name(v)
                ),
            ));
        }
        None => return Err(missing("getClusterParameter.getClusterParameter")),
    };
    let mut out = Vec::with_capacity(names.len());
    for n in &names {
        out.push(cluster_value(n).ok_or_else(|| unknown_cluster_parameter(n))?);
    }
    Ok(Reply::Doc(doc! { "clusterParameters": out, "ok": 1.0 }))
}

/// `setClusterParameter` (admin): `{name: {fields}}`, the fields checked against the default's.
pub fn set_cluster_parameter(req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::SET_CLUSTER_PARAMETER, &req.body)?;
    let spec = match req.body.get("setClusterParameter") {
        Some(Bson::Document(d)) => d,
        Some(v) => {
            return Err(wrong_type(
                "setClusterParameter.setClusterParameter",
                v,
                "object",
            ));
        }
        None => return Err(missing("setClusterParameter.setClusterParameter")),
    };
    let mut it = spec.iter();
    let (Some((name, value)), None) = (it.next(), it.next()) else {
        return Err(err(
            ErrorCode::IllegalOperation,
            "Cluster parameter value must be an object with exactly one field",
        ));
    };
    let default = cluster_parameter_default(name).ok_or_else(|| unknown_cluster_parameter(name))?;
    let Bson::Document(value) = value else {
        return Err(err(
            ErrorCode::BadValue,
            "Cluster parameter value must be an object",
        ));
    };
    for (k, v) in value {
        let Some(d) = default.get(k) else {
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field '{name}.{k}' is an unknown field."),
            ));
        };
        if std::mem::discriminant(d) != std::mem::discriminant(v)
            && !(v.as_document().is_some() && d.as_document().is_some())
        {
            return Err(wrong_type(&format!("{name}.{k}"), v, type_name(d)));
        }
    }
    let mut merged = default;
    merged.extend(value.clone());
    if name == "defaultMaxTimeMS" {
        let ms = merged.get_i64("readOperations").unwrap_or(0).max(0);
        DEFAULT_READ_MAX_TIME_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
    }
    CLUSTER_VALUES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name.clone(), merged);
    Ok(Reply::ok())
}

/// `getDefaultRWConcern` / `setDefaultRWConcern`: replica sets and mongos only.
pub fn default_rw_concern(req: &Request) -> CommandResult<Reply> {
    Err(err(
        ErrorCode::Location51300,
        format!("'{}' is not supported on standalone nodes.", req.command),
    ))
}

/// Check a session command: its table, then each element's (`LogicalSessionFromClient`, a
/// user, a pattern).
fn check_session_command(
    req: &Request,
    spec: &argspec::CommandSpec,
    entry: &argspec::CommandSpec,
) -> CommandResult<()> {
    argspec::check(spec, &req.body)?;
    let Ok(items) = req.body.get_array(spec.name) else {
        return Err(missing(&format!("{0}.{0}", spec.name)));
    };
    for item in items {
        if let Bson::Document(d) = item {
            argspec::check_entry(entry, d)?;
        }
    }
    Ok(())
}

/// `endSessions` and `refreshSessions`: an array of session ids.
pub fn check_sessions(req: &Request) -> CommandResult<()> {
    let spec = match req.command {
        "endSessions" => &specs::END_SESSIONS,
        _ => &specs::REFRESH_SESSIONS,
    };
    check_session_command(req, spec, &specs::SESSION_ENTRY)
}

/// `killSessions`, `killAllSessions`, `killAllSessionsByPattern`: checked, then nothing to kill
/// (sessions are not tracked yet).
pub fn kill_sessions(req: &Request) -> CommandResult<Reply> {
    match req.command {
        "killSessions" => {
            check_session_command(req, &specs::KILL_SESSIONS, &specs::SESSION_ENTRY)?;
        }
        "killAllSessions" => check_session_command(
            req,
            &specs::KILL_ALL_SESSIONS,
            &specs::KILL_ALL_SESSIONS_ENTRY,
        )?,
        _ => check_session_command(
            req,
            &specs::KILL_ALL_SESSIONS_BY_PATTERN,
            &specs::KILL_PATTERN_ENTRY,
        )?,
    }
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Document, db: &str) -> Request {
        let mut body = body;
        body.insert("$db", db);
        super::super::parse_request(body, vec![], true)
            .ok()
            .unwrap()
    }

    fn code(r: CommandResult<Reply>) -> i32 {
        match r {
            Ok(_) => 0,
            Err(e) => e.code.code(),
        }
    }

    #[test]
    fn session_kill_arguments() {
        let run = |b: Document| code(kill_sessions(&request(b, "admin")));
        let uuid = bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: vec![0; 16],
        };
        assert_eq!(run(doc! { "killSessions": [] }), 0);
        assert_eq!(run(doc! { "killSessions": [{ "id": uuid.clone() }] }), 0);
        assert_eq!(run(doc! { "killSessions": 1 }), 14);
        assert_eq!(run(doc! { "killSessions": [1] }), 14);
        assert_eq!(run(doc! { "killSessions": [{}] }), 40414);
        assert_eq!(run(doc! { "killSessions": [{ "id": 1 }] }), 14);
        assert_eq!(
            run(doc! { "killSessions": [{ "id": uuid, "x": 1 }] }),
            40415
        );
        assert_eq!(
            run(doc! { "killAllSessions": [{ "user": "u", "db": "d" }] }),
            0
        );
        assert_eq!(run(doc! { "killAllSessions": [{ "user": 1 }] }), 14);
        assert_eq!(
            run(doc! { "killAllSessionsByPattern": [{ "users": [] }] }),
            0
        );
        assert_eq!(
            run(doc! { "killAllSessionsByPattern": [{ "nope": 1 }] }),
            40415
        );
    }

    #[test]
    fn plan_cache_filters_are_listed_back() {
        let db = "plan_cache_unit";
        let set = |b: Document| code(set_filter(&request(b, db)));
        assert_eq!(
            set(doc! { "planCacheSetFilter": "c", "indexes": [{ "a": 1 }] }),
            2
        );
        assert_eq!(
            set(doc! { "planCacheSetFilter": "c", "query": { "a": 1 } }),
            2
        );
        assert_eq!(
            set(doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "indexes": [] }),
            2
        );
        assert_eq!(
            set(doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "indexes": [{ "a": 1 }] }),
            0
        );
        let list = |b: Document| match plan_cache_list_filters(&request(b, db)) {
            Ok(Reply::Doc(d)) => d.get_array("filters").unwrap().len(),
            _ => usize::MAX,
        };
        assert_eq!(list(doc! { "planCacheListFilters": "c" }), 1);
        assert_eq!(
            code(plan_cache_clear_filters(&request(
                doc! { "planCacheClearFilters": "c" },
                db
            ))),
            0
        );
        assert_eq!(list(doc! { "planCacheListFilters": "c" }), 0);
        assert_eq!(
            code(
                plan_cache_clear_args(&request(doc! { "planCacheClear": "c", "query": 1 }, db))
                    .map(|_| Reply::ok())
            ),
            2
        );
        assert_eq!(
            code(
                plan_cache_clear_args(&request(doc! { "planCacheClear": "c", "bogus": 1 }, db))
                    .map(|_| Reply::ok())
            ),
            40415
        );
    }

    #[test]
    fn cluster_parameters() {
        let get = |v: Bson| match get_cluster_parameter(&request(
            doc! { "getClusterParameter": v },
            "admin",
        )) {
            Ok(Reply::Doc(d)) => Ok(d.get_array("clusterParameters").unwrap().clone()),
            Err(e) => Err(e.code.code()),
            _ => Err(-1),
        };
        assert_eq!(
            get(Bson::String("*".into())).unwrap().len(),
            CLUSTER_PARAMETERS.len()
        );
        assert_eq!(get(Bson::String("nope".into())).unwrap_err(), 4);
        assert_eq!(get(Bson::Int32(1)).unwrap_err(), 14);
        let set = |v: Document| {
            code(set_cluster_parameter(&request(
                doc! { "setClusterParameter": v },
                "admin",
            )))
        };
        assert_eq!(
            set(doc! { "pauseMigrationsDuringMultiUpdates": { "enabled": "x" } }),
            14
        );
        assert_eq!(
            set(doc! { "pauseMigrationsDuringMultiUpdates": { "other": true } }),
            40415
        );
        assert_eq!(set(doc! { "nope": {} }), 4);
        assert_eq!(
            set(doc! { "pauseMigrationsDuringMultiUpdates": { "enabled": true } }),
            0
        );
        let got = get(Bson::String("pauseMigrationsDuringMultiUpdates".into())).unwrap();
        assert!(got[0].as_document().unwrap().get_bool("enabled").unwrap());
    }

    #[test]
    fn validate_db_metadata_arguments() {
        let run = |b: Document| code(validate_db_metadata(&request(b, "t")));
        assert_eq!(run(doc! { "validateDBMetadata": 1 }), 40414);
        assert_eq!(
            run(doc! { "validateDBMetadata": 1, "apiParameters": { "version": "1" } }),
            0
        );
        assert_eq!(
            run(doc! { "validateDBMetadata": 1, "apiParameters": { "version": 1 } }),
            14
        );
        assert_eq!(
            run(doc! { "validateDBMetadata": 1, "apiParameters": { "version": "1" }, "x": 1 }),
            40415
        );
    }
}
