//! Time-series collections as mongod 7.0 keeps them: the measurements live in bucket documents
//! of `<db>.system.buckets.<name>` (whose collection options carry `timeseries` and
//! `expireAfterSeconds`), and `<db>.<name>` is a view on it whose pipeline is one
//! `$_internalUnpackBucket` stage, stored in `system.views` like any view. Reads therefore go
//! through the view machinery unchanged (with `query::timeseries::push_down` letting a time or
//! meta filter skip buckets); this module answers what differs: `create`, inserts (routed into
//! the open bucket of their meta value and time window), deletes (any filter, as 7.0: buckets
//! are unpacked, filtered and repacked), updates (refused with mongod's errors),
//! `listCollections`' entry, drop (both namespaces), index keys translated to bucket fields,
//! and TTL (whole buckets whose newest time is expired).

use super::crud_write::{WriteOutcome, prepare_for_storage};
use super::views::{self, View};
use super::{Reply, Request};
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::query::matcher::Filter;
use crate::query::timeseries::{BUCKETS_PREFIX, Bucket, Options};
use crate::state::ServerState;
use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, RawDocumentBuf, doc};
use std::collections::HashMap;
use std::sync::Arc;
use storage::{Collection, Direction, IndexSpec, RecordId, WriteOp};

/// A time-series namespace: its options and its buckets collection.
pub struct Namespace {
    pub opts: Options,
    pub expire_after_seconds: Option<i64>,
    pub buckets: Arc<Collection>,
    pub buckets_name: String,
}

/// `create` options refused with `timeseries` (the others are generic or stored unused).
const CREATE_REFUSED: &[&str] = &[
    "capped",
    "size",
    "max",
    "validator",
    "validationLevel",
    "validationAction",
    "clusteredIndex",
    "viewOn",
    "pipeline",
    "collation",
    "changeStreamPreAndPostImages",
    "encryptedFields",
    "idIndex",
    "autoIndexId",
];

/// `db.name` as a time-series collection, or `None` when it is not one.
pub fn lookup(state: &ServerState, db: &str, name: &str) -> Option<Namespace> {
    if name.starts_with("system.") {
        return None;
    }
    let buckets_name = format!("{BUCKETS_PREFIX}{name}");
    let buckets = state.catalog.collection(db, &buckets_name)?;
    let options = buckets.options();
    let opts = Options::from_document(options.get_document("timeseries").ok()?)?;
    Some(Namespace {
        opts,
        expire_after_seconds: expire_after(&options),
        buckets,
        buckets_name,
    })
}

fn expire_after(options: &Document) -> Option<i64> {
    match options.get("expireAfterSeconds")? {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(d) => Some(*d as i64),
        _ => None,
    }
}

fn parse_expire(v: &Bson) -> CommandResult<i64> {
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.is_finite() => *d as i64,
        v => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.expireAfterSeconds' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                    super::args::type_name(v)
                ),
            ));
        }
    };
    if n < 0 {
        return Err(err(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option cannot be less than 0",
        ));
    }
    Ok(n)
}

/// `create {create: name, timeseries: {...}, expireAfterSeconds?}`.
pub fn create(state: &ServerState, req: &Request, name: &str) -> CommandResult<Reply> {
    for k in req.body.keys().skip(1) {
        if CREATE_REFUSED.contains(&k.as_str()) {
            return Err(err(
                ErrorCode::InvalidOptions,
                format!("option '{k}' is not supported with time-series collections"),
            ));
        }
    }
    let Some(Bson::Document(spec)) = req.body.get("timeseries") else {
        return Err(err(
            ErrorCode::TypeMismatch,
            "BSON field 'create.timeseries' is the wrong type, expected type 'object'",
        ));
    };
    let opts = Options::parse(spec)?;
    let expire = req
        .body
        .get("expireAfterSeconds")
        .map(parse_expire)
        .transpose()?;
    if name.starts_with("system.") {
        return Err(err(
            ErrorCode::InvalidNamespace,
            format!("Invalid system namespace: {}.{name}", req.db),
        ));
    }
    let exists = || {
        err(
            ErrorCode::NamespaceExists,
            format!("Namespace {}.{name} already exists", req.db),
        )
    };
    if let Some(ns) = lookup(state, &req.db, name) {
        // mongod answers ok to a create repeating an existing collection's options.
        return if ns.opts == opts && ns.expire_after_seconds == expire {
            Ok(Reply::ok())
        } else {
            Err(exists())
        };
    }
    if state.catalog.collection(&req.db, name).is_some()
        || views::get(state, &req.db, name)?.is_some()
    {
        return Err(exists());
    }
    let mut options = doc! { "clusteredIndex": true, "timeseries": opts.to_document() };
    if let Some(e) = expire {
        options.insert("expireAfterSeconds", e);
    }
    let buckets_name = format!("{BUCKETS_PREFIX}{name}");
    let engine = state.catalog.engine();
    match engine.create_collection(&req.db, &buckets_name, options) {
        Ok(_) => {}
        Err(storage::StorageError::NamespaceExists(_)) => return Err(exists()),
        Err(e) => return Err(storage_error(e, &req.db, &buckets_name)),
    }
    // As mongod 6.3+, a collection with a metaField gets an index on meta and time.
    if let Some(m) = &opts.meta_field {
        let key = doc! { m: 1, &opts.time_field: 1 };
        let spec = IndexSpec {
            name: super::index_spec::default_name(&key),
            key: bucket_key(&opts, &key)?,
            ..IndexSpec::default()
        };
        let built = engine.create_index(&req.db, &buckets_name, spec, &|_, _| {});
        if let Err(e) = built {
            let _ = engine.drop_collection(&req.db, &buckets_name);
            return Err(storage_error(e, &req.db, &buckets_name));
        }
    }
    let view = View {
        name: name.to_string(),
        view_on: buckets_name.clone(),
        pipeline: vec![opts.unpack_stage()],
        collation: None,
    };
    if let Err(e) = views::store(state, &req.db, &view) {
        let _ = engine.drop_collection(&req.db, &buckets_name);
        return Err(e);
    }
    Ok(Reply::ok())
}

/// `listCollections`' full and name-only entries for view `v` when it is a time-series
/// collection.
pub fn list_entries(state: &ServerState, db: &str, v: &View) -> Option<(Document, Document)> {
    let ns = lookup(state, db, &v.name)?;
    let mut options = doc! { "timeseries": ns.opts.to_document() };
    if let Some(e) = ns.expire_after_seconds {
        options.insert("expireAfterSeconds", e);
    }
    let full = doc! {
        "name": &v.name,
        "type": "timeseries",
        "options": options,
        "info": { "readOnly": false },
    };
    Some((full, doc! { "name": &v.name, "type": "timeseries" }))
}

/// Drops the buckets collection of time-series `db.name` after its view was dropped.
pub fn drop_buckets(state: &ServerState, db: &str, name: &str) -> CommandResult<()> {
    if let Some(ns) = lookup(state, db, name) {
        state
            .catalog
            .engine()
            .drop_collection(db, &ns.buckets_name)
            .map_err(|e| storage_error(e, db, &ns.buckets_name))?;
        state.cursors.invalidate(db, Some(&ns.buckets_name));
    }
    Ok(())
}

/// The write lock of `req`'s namespace when it is a time-series collection (inserts into
/// buckets read, change and rewrite them, so they serialize as updates do).
pub async fn insert_guard(
    state: &ServerState,
    req: &Request,
) -> Option<tokio::sync::OwnedMutexGuard<()>> {
    let name = req.body.get_str("insert").ok()?;
    lookup(state, &req.db, name)?;
    Some(state.catalog.lock(&req.db, name).await)
}

/// Where one measurement goes: a bucket read from storage (its RecordId) or a new one.
struct Open {
    rid: Option<RecordId>,
    bucket: Bucket,
}

/// Inserts measurements, each into the open bucket of its meta value and time window.
/// Per-measurement errors go to `out` as write errors (ordered stops at the first).
pub(super) fn insert(
    ns: &Namespace,
    db: &str,
    docs: Vec<RawDocumentBuf>,
    ordered: bool,
    out: &mut WriteOutcome,
) -> CommandResult<()> {
    // Keyed by the bucket's sequence-0 `_id`: meta and window.
    let mut open: HashMap<ObjectId, Open> = HashMap::new();
    let mut closed: Vec<Open> = Vec::new();
    let mut n = 0;
    for (i, raw) in docs.into_iter().enumerate() {
        let m = prepare_for_storage(raw).and_then(|r| {
            let m = Document::try_from(r.as_ref())
                .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
            ns.opts.measurement_time(&m).map(|t| (m, t))
        });
        let (m, time) = match m {
            Ok(x) => x,
            Err(e) => {
                out.error(i, e);
                if ordered {
                    break;
                }
                continue;
            }
        };
        let meta = ns.opts.measurement_meta(&m).cloned();
        let key = ns.opts.bucket_id(meta.as_ref(), time, 0);
        let slot = match open.remove(&key) {
            Some(o) if !o.bucket.is_full() => o,
            Some(full) => {
                let next = seq_of(&full.bucket.id) + 1;
                closed.push(full);
                find_open(ns, db, meta, time, next)?
            }
            None => find_open(ns, db, meta, time, 0)?,
        };
        let mut slot = slot;
        slot.bucket.push(&ns.opts, &m);
        open.insert(key, slot);
        n += 1;
    }
    let mut ops = Vec::new();
    for o in closed.into_iter().chain(open.into_values()) {
        let raw = RawDocumentBuf::try_from(&o.bucket.to_document())
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        ops.push(match o.rid {
            Some(rid) => WriteOp::Replace(rid, raw),
            None => WriteOp::Insert(raw.into()),
        });
    }
    if !ops.is_empty() {
        let t = ns
            .buckets
            .write(ops)
            .map_err(|e| storage_error(e, db, &ns.buckets_name))?;
        out.keep_ticket(t);
    }
    out.n += n;
    Ok(())
}

fn seq_of(id: &ObjectId) -> u16 {
    let b = id.bytes();
    u16::from_be_bytes([b[10], b[11]])
}

/// The first bucket from sequence `seq` on for `meta` and `time`'s window that is stored with
/// room left, or a new one at the first free sequence.
fn find_open(
    ns: &Namespace,
    db: &str,
    meta: Option<Bson>,
    time: DateTime,
    seq: u16,
) -> CommandResult<Open> {
    let storage_err = |e| storage_error(e, db, &ns.buckets_name);
    for s in seq..=u16::MAX {
        let id = ns.opts.bucket_id(meta.as_ref(), time, s);
        let Some(rid) = ns
            .buckets
            .find_by_id(bson::RawBsonRef::ObjectId(id))
            .map_err(storage_err)?
        else {
            return Ok(Open {
                rid: None,
                bucket: Bucket::new(id, meta),
            });
        };
        let Some(raw) = ns.buckets.get(rid).map_err(storage_err)? else {
            continue;
        };
        let stored = Document::try_from(raw.as_ref())
            .ok()
            .and_then(|d| Bucket::from_document(&d));
        // A full bucket, or another meta value with the same hash: try the next sequence.
        if let Some(b) = stored.filter(|b| !b.is_full() && b.meta() == meta.as_ref()) {
            return Ok(Open {
                rid: Some(rid),
                bucket: b,
            });
        }
    }
    Err(err(
        ErrorCode::InternalError,
        "time-series bucket sequence exhausted for one meta value and time window",
    ))
}

/// Every stored bucket, decoded, with its RecordId.
fn all_buckets(ns: &Namespace, db: &str) -> CommandResult<Vec<(RecordId, Document)>> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let batch = ns
            .buckets
            .scan(Direction::Forward, after, 1000)
            .map_err(|e| storage_error(e, db, &ns.buckets_name))?;
        let Some((last, _)) = batch.last() else {
            return Ok(out);
        };
        after = Some(*last);
        for (rid, raw) in batch {
            if let Ok(d) = Document::try_from(raw.as_ref()) {
                out.push((rid, d));
            }
        }
    }
}

/// One delete statement `{q, limit}`: the measurements `q` matches (the first only with
/// limit 1) removed; a bucket left empty is deleted, another rewritten without them.
pub(super) fn delete(
    ns: &Namespace,
    db: &str,
    q: &Document,
    multi: bool,
    out: &mut WriteOutcome,
) -> CommandResult<()> {
    let filter = Filter::parse(q)?;
    let skip = crate::query::timeseries::bucket_filter(&ns.opts, q)
        .map(|f| Filter::parse(&f))
        .transpose()?;
    let meta_field = ns.opts.meta_field.as_deref();
    let mut ops = Vec::new();
    let mut n = 0;
    'buckets: for (rid, d) in all_buckets(ns, db)? {
        let raw = RawDocumentBuf::try_from(&d)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        if skip.as_ref().is_some_and(|f| !f.matches(&raw)) {
            continue;
        }
        let Ok(id) = d.get_object_id("_id") else {
            continue;
        };
        let mut kept = Bucket::new(id, d.get("meta").cloned());
        let mut removed = 0;
        for m in crate::query::timeseries::unpack(&ns.opts.time_field, meta_field, &d) {
            let mraw = RawDocumentBuf::try_from(&m)
                .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
            if (multi || n + removed == 0) && filter.matches(&mraw) {
                removed += 1;
            } else {
                kept.push(&ns.opts, &m);
            }
        }
        if removed == 0 {
            continue;
        }
        n += removed;
        ops.push(if kept.is_empty() {
            WriteOp::Delete(rid)
        } else {
            let raw = RawDocumentBuf::try_from(&kept.to_document())
                .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
            WriteOp::Replace(rid, raw)
        });
        if !multi {
            break 'buckets;
        }
    }
    if !ops.is_empty() {
        let t = ns
            .buckets
            .write(ops)
            .map_err(|e| storage_error(e, db, &ns.buckets_name))?;
        out.keep_ticket(t);
    }
    out.n += n as i64;
    Ok(())
}

/// Updates of measurements are refused as mongod 7.0 refuses what it cannot do; cairn does
/// not rewrite measurements in place yet, so every update statement gets 72.
pub fn update_refusal(multi: bool) -> crate::error::CommandError {
    if !multi {
        return err(
            ErrorCode::InvalidOptions,
            "Cannot perform a non-multi update on a time-series collection",
        );
    }
    err(
        ErrorCode::InvalidOptions,
        "Updates of time-series collections are not supported by cairn yet",
    )
}

/// The bucket-level key of an index the user asked for on the time-series collection:
/// the metaField (and its subfields) becomes `meta`, the timeField `control.min` and
/// `control.max` of it; measurement fields are refused.
pub fn bucket_key(opts: &Options, key: &Document) -> CommandResult<Document> {
    let mut out = Document::new();
    for (field, dir) in key {
        if *field == opts.time_field {
            let (first, second) = match dir.as_f64().or(dir.as_i32().map(f64::from)) {
                Some(d) if d < 0.0 => ("max", "min"),
                _ => ("min", "max"),
            };
            out.insert(format!("control.{first}.{field}"), dir.clone());
            out.insert(format!("control.{second}.{field}"), dir.clone());
            continue;
        }
        let rest = opts.meta_field.as_deref().and_then(|m| {
            if field == m {
                Some("")
            } else {
                field.strip_prefix(m).filter(|r| r.starts_with('.'))
            }
        });
        match rest {
            Some(rest) => {
                out.insert(format!("meta{rest}"), dir.clone());
            }
            None => {
                return Err(err(
                    ErrorCode::CannotCreateIndex,
                    format!(
                        "cairn indexes time-series collections on the metaField and the timeField only, not on '{field}'"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// The user's key of a bucket-level index (`None` for the buckets' own `_id` index).
pub fn user_key(opts: &Options, key: &Document) -> Option<Document> {
    let mut out = Document::new();
    let max_prefix = "control.max.";
    for (field, dir) in key {
        if let Some(t) = field.strip_prefix("control.min.") {
            out.insert(t, dir.clone());
        } else if field.starts_with(max_prefix) {
            continue;
        } else if let (Some(rest), Some(m)) = (field.strip_prefix("meta"), &opts.meta_field) {
            out.insert(format!("{m}{rest}"), dir.clone());
        } else {
            return None;
        }
    }
    Some(out)
}

/// `createIndexes` on a time-series collection: the specs with bucket-level keys, built on
/// the buckets collection (the names stay the user's).
pub fn index_target(
    state: &ServerState,
    db: &str,
    name: String,
    specs: Vec<IndexSpec>,
) -> CommandResult<(String, Vec<IndexSpec>)> {
    let Some(ns) = lookup(state, db, &name) else {
        return Ok((name, specs));
    };
    let specs = specs
        .into_iter()
        .map(|mut s| {
            s.key = bucket_key(&ns.opts, &s.key)?;
            Ok(s)
        })
        .collect::<CommandResult<Vec<_>>>()?;
    Ok((ns.buckets_name, specs))
}

/// `listIndexes` on a time-series collection: the buckets' indexes with the user's keys.
pub fn list_index_specs(state: &ServerState, db: &str, name: &str) -> Option<Vec<IndexSpec>> {
    let ns = lookup(state, db, name)?;
    Some(
        ns.buckets
            .indexes()
            .into_iter()
            .filter_map(|i| {
                let key = user_key(&ns.opts, &i.spec.key)?;
                Some(IndexSpec { key, ..i.spec })
            })
            .collect(),
    )
}

/// TTL: deletes the buckets of every time-series collection with `expireAfterSeconds` whose
/// newest measurement is older than that at `now`. Returns the buckets deleted.
/// The time-series collections with `expireAfterSeconds`: (db, name).
pub fn expiring(state: &ServerState) -> Vec<(String, String)> {
    let engine = state.catalog.engine();
    let mut out = Vec::new();
    for db in engine.databases() {
        for info in engine.collections(&db) {
            let Some(name) = info.name.strip_prefix(BUCKETS_PREFIX) else {
                continue;
            };
            if lookup(state, &db, name).is_some_and(|ns| ns.expire_after_seconds.is_some()) {
                out.push((db.clone(), name.to_string()));
            }
        }
    }
    out
}

/// Deletes the buckets of `db.name` whose newest measurement is past `expireAfterSeconds`.
/// The caller holds the collection's write lock (`insert_guard`'s), so no insert can add a
/// measurement to a bucket between this look at it and its delete.
pub fn expire(state: &ServerState, db: &str, name: &str, now: DateTime) -> u64 {
    let Some(ns) = lookup(state, db, name) else {
        return 0;
    };
    let Some(secs) = ns.expire_after_seconds else {
        return 0;
    };
    let cutoff = now
        .timestamp_millis()
        .saturating_sub(secs.saturating_mul(1000));
    let max_path = ["control", "max", ns.opts.time_field.as_str()];
    let Ok(buckets) = all_buckets(&ns, db) else {
        return 0;
    };
    let ops: Vec<WriteOp> = buckets
        .into_iter()
        .filter(|(_, d)| {
            d.get_document(max_path[0])
                .and_then(|c| c.get_document(max_path[1]))
                .and_then(|m| m.get_datetime(max_path[2]))
                .is_ok_and(|t| t.timestamp_millis() < cutoff)
        })
        .map(|(rid, _)| WriteOp::Delete(rid))
        .collect();
    let n = ops.len() as u64;
    if n > 0 && ns.buckets.write(ops).is_ok() {
        return n;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_translate_both_ways() {
        let o = Options::parse(&doc! { "timeField": "t", "metaField": "m" }).unwrap();
        let k = bucket_key(&o, &doc! { "m.site": 1, "t": -1 }).unwrap();
        assert_eq!(
            k,
            doc! { "meta.site": 1, "control.max.t": -1, "control.min.t": -1 }
        );
        assert_eq!(user_key(&o, &k), Some(doc! { "m.site": 1, "t": -1 }));
        assert_eq!(user_key(&o, &doc! { "_id": 1 }), None);
        let e = bucket_key(&o, &doc! { "v": 1 }).unwrap_err();
        assert_eq!(e.code.code(), ErrorCode::CannotCreateIndex.code());
    }
}
