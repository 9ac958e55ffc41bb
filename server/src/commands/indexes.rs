//! Index commands: `createIndexes`, `listIndexes`, `dropIndexes`. Each spec is checked alone by
//! `index_spec::parse_spec` (key values, option names, TTL rules, default names), then compared
//! here with the existing indexes so that an equivalent spec is a no-op and a conflicting one gets
//! code 85 or 86.
//! Builds over existing data use the engine's bulk build and log their progress; the namespace
//! lock covers the checks only, never the build (see `create_indexes`).

use super::args;
use super::argspec::{self, specs};
use super::crud_read::cursor_reply;
use super::index_spec::parse_spec;
use super::{Reply, Request};
use crate::catalog::validate_collection_name;
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::failpoints;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;
use storage::{ID_INDEX_NAME, IndexSpec};

/// Options that make two specs with the same key different indexes.
fn same_options(a: &IndexSpec, b: &IndexSpec) -> bool {
    let unique = |s: &IndexSpec| s.unique || s.name == ID_INDEX_NAME;
    unique(a) == unique(b)
        && a.sparse == b.sparse
        && a.partial_filter == b.partial_filter
        && a.expire_after_seconds == b.expire_after_seconds
        && a.hidden == b.hidden
        && a.extra.get(storage::wildcard::PROJECTION) == b.extra.get(storage::wildcard::PROJECTION)
        && a.collation() == b.collation()
}

/// How a requested spec relates to the existing ones: `Ok(true)` exists already, `Ok(false)` new.
/// A collection has at most one text index: another one, or the same name with other options,
/// is 85.
fn compare_existing(requested: &IndexSpec, existing: &[IndexSpec]) -> CommandResult<bool> {
    if storage::text::is_text_key(&requested.key)
        && let Some(e) = existing.iter().find(|e| storage::text::is_text_key(&e.key))
    {
        // `background` is kept to be listed, never compared (mongod ignores it here too).
        let options = |s: &IndexSpec| {
            let mut extra = s.extra.clone();
            extra.remove("background");
            extra
        };
        if e.name == requested.name
            && options(e) == options(requested)
            && same_options(e, requested)
        {
            return Ok(true);
        }
        return Err(err(
            ErrorCode::IndexOptionsConflict,
            format!(
                "An equivalent index already exists with a different name and options. Requested index: {}, existing index: {}",
                spec_document(requested),
                spec_document(e)
            ),
        ));
    }
    if let Some(e) = existing.iter().find(|e| e.name == requested.name) {
        if e.key != requested.key {
            return Err(err(
                ErrorCode::IndexKeySpecsConflict,
                format!(
                    "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                    requested.to_document(),
                    e.to_document()
                ),
            ));
        }
        if let Some(message) = super::index_collation::conflict_message(requested, e) {
            return Err(err(ErrorCode::IndexOptionsConflict, message));
        }
        if !same_options(e, requested) {
            return Err(err(
                ErrorCode::IndexOptionsConflict,
                format!(
                    "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                    requested.to_document(),
                    e.to_document()
                ),
            ));
        }
        return Ok(true);
    }
    if let Some(e) = existing
        .iter()
        .find(|e| e.key == requested.key && same_options(e, requested))
    {
        return Err(err(
            ErrorCode::IndexOptionsConflict,
            format!("Index already exists with a different name: {}", e.name),
        ));
    }
    Ok(false)
}

pub async fn create_indexes(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    argspec::check(&specs::CREATE_INDEXES, &req.body)?;
    let name = args::collection_name(&req.body, "createIndexes")?;
    validate_collection_name(&req.db, &name)?;
    super::transactions::explicit_ddl_check(req, &name)?;
    // The table checked `indexes`: an array of objects.
    let target = state.catalog.collection(&req.db, &name);
    let specs = match req.body.get("indexes") {
        Some(Bson::Array(items)) if !items.is_empty() => {
            let mut specs = Vec::new();
            for d in items.iter().filter_map(Bson::as_document) {
                if super::clustered::keep_index_spec(target.as_deref(), d)? {
                    specs.push(parse_spec(d)?);
                }
            }
            if specs.is_empty() {
                // Only the clustered index was asked for: it exists.
                let n = target.map_or(0, |c| c.indexes().len() as i32);
                return Ok(Reply::Doc(doc! {
                    "numIndexesBefore": n,
                    "numIndexesAfter": n,
                    "createdCollectionAutomatically": false,
                    "note": "all indexes already exist",
                    "ok": 1.0,
                }));
            }
            specs
        }
        _ => {
            return Err(err(
                ErrorCode::BadValue,
                "Must specify at least one index to create",
            ));
        }
    };
    let (name, specs) = super::timeseries::index_target(state, &req.db, name, specs)?;
    // The namespace lock covers the checks (and the implicit create), not the build: writers
    // and readers of the collection go on while the engine builds.
    let guard = state.catalog.lock(&req.db, &name).await;
    let coll_name = name.clone();
    let plan = super::off_thread(state, req, move |state, req| {
        let _guard = guard;
        plan_builds(state, &req.db, &coll_name, specs)
    })
    .await?;
    let ns = format!("{}.{name}", req.db);
    for spec in &plan.to_build {
        let (spec, ns, coll) = (spec.clone(), ns.clone(), name.clone());
        super::off_thread(state, req, move |state, req| {
            build_one(state, &req.db, &coll, &ns, spec)
        })
        .await?;
    }
    let after = super::off_thread(state, req, move |state, req| {
        Ok(state
            .catalog
            .collection(&req.db, &name)
            .map_or(0, |c| c.indexes().len() as i32))
    })
    .await?;
    let mut reply = doc! {
        "numIndexesBefore": plan.before,
        "numIndexesAfter": after,
        "createdCollectionAutomatically": plan.created_collection,
    };
    if plan.to_build.is_empty() {
        reply.insert("note", "all indexes already exist");
    }
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// What `createIndexes` found under the namespace lock.
struct BuildPlan {
    before: i32,
    created_collection: bool,
    to_build: Vec<IndexSpec>,
}

/// The checks that need the namespace lock: create the collection if missing, compare the
/// requested specs with the existing indexes (equal: nothing to do, conflicting: 85/86).
fn plan_builds(
    state: &ServerState,
    db: &str,
    name: &str,
    specs: Vec<IndexSpec>,
) -> CommandResult<BuildPlan> {
    let created_collection = state.catalog.collection(db, name).is_none();
    let coll = state.catalog.get_or_create(db, name)?;
    let existing: Vec<IndexSpec> = coll.indexes().into_iter().map(|i| i.spec).collect();
    let default = coll
        .options()
        .get_document(storage::COLLATION)
        .ok()
        .cloned();
    let mut to_build = Vec::new();
    for mut spec in specs {
        super::index_collation::resolve(&mut spec, default.as_ref())?;
        if !compare_existing(&spec, &existing)?
            && !to_build.iter().any(|s: &IndexSpec| s.name == spec.name)
        {
            to_build.push(spec);
        }
    }
    // In a transaction (mongod's rule): new indexes only on a collection this transaction
    // created and has not written into yet.
    if let Some(t) = crate::txn::current().filter(|_| !to_build.is_empty()) {
        let refused = if !t.created_collection(coll.uuid().bytes()) {
            Some("existing")
        } else if t.wrote_to(&coll) {
            Some("non-empty")
        } else {
            None
        };
        if let Some(what) = refused {
            return Err(err(
                ErrorCode::OperationNotSupportedInTransaction,
                format!(
                    "Cannot create new indexes on {what} collection {db}.{name} in a \
                     multi-document transaction."
                ),
            ));
        }
    }
    Ok(BuildPlan {
        before: existing.len() as i32,
        created_collection,
        to_build,
    })
}

/// Build one index (on the blocking pool, without the namespace lock), logging its progress and
/// showing it in `currentOp`.
fn build_one(
    state: &ServerState,
    db: &str,
    coll: &str,
    ns: &str,
    spec: IndexSpec,
) -> CommandResult<()> {
    let index_name = spec.name.clone();
    let op = state.ops.begin_index_build(ns, &index_name);
    tracing::info!(ns = %ns, index = %index_name, "Index build: starting");
    let started = std::time::Instant::now();
    state
        .failpoints
        .hang_while_on_entered(failpoints::HANG_AFTER_STARTING_INDEX_BUILD);
    let scan_hang = std::sync::atomic::AtomicBool::new(false);
    let progress = |done: u64, total: u64| {
        state.ops.progress(op, done, total);
        if done > 0 && !scan_hang.swap(true, std::sync::atomic::Ordering::Relaxed) {
            state
                .failpoints
                .hang_while_on_entered(failpoints::HANG_INDEX_BUILD_DURING_SCAN);
        }
        if total >= 10 && done.is_multiple_of((total / 10).max(1)) {
            tracing::info!(ns = %ns, index = %index_name, done = done, total = total, "Index build: progress");
        }
    };
    let result = state
        .catalog
        .engine()
        .create_index(db, coll, spec, &progress);
    state.ops.end(op);
    match result {
        Ok(()) => {
            if let Some(t) = crate::txn::current()
                && let Some(c) = state.catalog.collection(db, coll)
            {
                t.note_created(crate::txn::Created::Index {
                    db: db.to_string(),
                    coll: coll.to_string(),
                    uuid: c.uuid().bytes(),
                    index: index_name.clone(),
                });
            }
            tracing::info!(ns = %ns, index = %index_name, duration_ms = started.elapsed().as_millis() as u64, "Index build: done");
            Ok(())
        }
        Err(e) => {
            tracing::info!(ns = %ns, index = %index_name, error = %e, "Index build: failed");
            Err(storage_error(e, db, coll))
        }
    }
}

/// The listIndexes form of a spec: `{v: 2, key, name, ...options}`.
pub fn spec_document(spec: &IndexSpec) -> Document {
    let mut d = doc! { "v": 2, "key": spec.key.clone(), "name": spec.name.clone() };
    // The `_id` index is unique by nature; mongod does not list the option on it.
    if spec.unique && spec.name != ID_INDEX_NAME {
        d.insert("unique", true);
    }
    if spec.sparse {
        d.insert("sparse", true);
    }
    if let Some(p) = &spec.partial_filter {
        d.insert("partialFilterExpression", p.clone());
    }
    if let Some(e) = spec.expire_after_seconds {
        d.insert("expireAfterSeconds", e as i32);
    }
    if spec.hidden {
        d.insert("hidden", true);
    }
    d.extend(spec.extra.clone());
    d
}

pub fn list_indexes(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::LIST_INDEXES, &req.body)?;
    let name = args::collection_name(&req.body, "listIndexes")?;
    let ns = format!("{}.{name}", req.db);
    let mut clustered = None;
    let specs = match super::timeseries::list_index_specs(state, &req.db, &name) {
        Some(specs) => specs,
        None => match state.catalog.collection(&req.db, &name) {
            Some(coll) => {
                clustered = super::clustered::list_entry(&coll.options());
                coll.indexes().into_iter().map(|i| i.spec).collect()
            }
            None => {
                return Err(err(
                    ErrorCode::NamespaceNotFound,
                    format!("ns does not exist: {ns}"),
                ));
            }
        },
    };
    // A clustered collection's `_id` index is listed as its clustered index (mongod's shape).
    let docs = specs
        .iter()
        .map(|spec| match &clustered {
            Some(c) if spec.name == ID_INDEX_NAME => c.clone(),
            _ => spec_document(spec),
        })
        .map(|d| {
            RawDocumentBuf::try_from(&d).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
        })
        .collect::<CommandResult<Vec<_>>>()?;
    Ok(cursor_reply(0, &ns, true, docs))
}

pub async fn drop_indexes(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    argspec::check(&specs::DROP_INDEXES, &req.body)?;
    let name = args::collection_name(&req.body, &req.name)?;
    let guard = state.catalog.lock(&req.db, &name).await;
    super::off_thread(state, req, move |state, req| {
        let _guard = guard;
        drop_named(state, req, &name)
    })
    .await
}

fn drop_named(state: &ServerState, req: &Request, name: &str) -> CommandResult<Reply> {
    let ns = format!("{}.{name}", req.db);
    let Some(coll) = state.catalog.collection(&req.db, name) else {
        return Err(err(
            ErrorCode::NamespaceNotFound,
            format!("ns not found {ns}"),
        ));
    };
    let indexes = coll.indexes();
    let was = indexes.len() as i32;
    let names: Vec<String> = match req.body.get("index") {
        Some(Bson::String(s)) if s == "*" => indexes
            .iter()
            .map(|i| i.spec.name.clone())
            .filter(|n| n != ID_INDEX_NAME)
            .collect(),
        Some(Bson::String(s)) => vec![s.clone()],
        Some(Bson::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| err(ErrorCode::TypeMismatch, "dropIndexes takes index names"))
            })
            .collect::<CommandResult<_>>()?,
        Some(Bson::Document(key)) => match indexes.iter().find(|i| &i.spec.key == key) {
            Some(i) => vec![i.spec.name.clone()],
            None => {
                return Err(err(
                    ErrorCode::IndexNotFound,
                    format!("can't find index with key: {key}"),
                ));
            }
        },
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "BSON field 'dropIndexes.index' is missing but a required field",
            ));
        }
    };
    for n in &names {
        super::clustered::check_drop(&coll, n)?;
        if n == ID_INDEX_NAME {
            return Err(err(ErrorCode::InvalidOptions, "cannot drop _id index"));
        }
        if !indexes.iter().any(|i| &i.spec.name == n) {
            return Err(err(
                ErrorCode::IndexNotFound,
                format!("index not found with name [{n}]"),
            ));
        }
    }
    for n in &names {
        state
            .catalog
            .engine()
            .drop_index(&req.db, name, n)
            .map_err(|e| storage_error(e, &req.db, name))?;
    }
    Ok(Reply::Doc(doc! { "nIndexesWas": was, "ok": 1.0 }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::index_spec::parse_named as parse_spec;

    #[test]
    fn text_specs_take_mongods_stored_form() {
        let spec = parse_spec(&doc! {
            "key": { "title": "text", "body": "text" },
            "weights": { "title": 10 },
            "default_language": "spanish",
        })
        .unwrap();
        assert_eq!(spec.name, "title_text_body_text");
        let listed = spec_document(&spec);
        assert_eq!(
            listed.get_document("key").unwrap(),
            &doc! { "_fts": "text", "_ftsx": 1 }
        );
        assert_eq!(
            listed.get_document("weights").unwrap(),
            &doc! { "body": 1, "title": 10 }
        );
        assert_eq!(listed.get_str("default_language").unwrap(), "spanish");
        assert_eq!(listed.get_str("language_override").unwrap(), "language");
        assert_eq!(listed.get_i32("textIndexVersion").unwrap(), 3);
        let code = |d: Document| parse_spec(&d).unwrap_err().code.code();
        assert_eq!(
            code(doc! { "key": { "a": "text", "b": 1, "c": "text" } }),
            67
        );
        assert_eq!(code(doc! { "key": { "a": "text", "b": "hashed" } }), 67);
        let compound = parse_spec(&doc! { "key": { "a": -1, "t": "text", "b": 1 } }).unwrap();
        assert_eq!(
            compound.key,
            doc! { "a": -1, "_fts": "text", "_ftsx": 1, "b": 1 }
        );
        assert_eq!(
            code(doc! { "key": { "a": "text" }, "weights": { "a": "x" } }),
            67
        );
        assert_eq!(
            code(doc! { "key": { "a": "text" }, "weights": { "a": 0 } }),
            67
        );
        assert_eq!(
            code(doc! { "key": { "a": "text" }, "default_language": "klingon" }),
            67
        );
        let other = parse_spec(&doc! { "key": { "c": "text" } }).unwrap();
        assert!(compare_existing(&spec, std::slice::from_ref(&spec)).unwrap());
        assert_eq!(
            compare_existing(&other, &[spec]).unwrap_err().code,
            ErrorCode::IndexOptionsConflict
        );
    }

    #[test]
    fn listed_with_background_as_created() {
        let spec = parse_spec(&doc! { "key": { "a": 1 }, "background": true }).unwrap();
        assert_eq!(spec_document(&spec).get_bool("background").ok(), Some(true));
        let plain = parse_spec(&doc! { "key": { "a": 1 } }).unwrap();
        assert!(!spec_document(&plain).contains_key("background"));
        // The same index asked again without it exists already.
        assert!(compare_existing(&plain, std::slice::from_ref(&spec)).unwrap());
        let text = parse_spec(&doc! { "key": { "t": "text" }, "background": 1 }).unwrap();
        let again = parse_spec(&doc! { "key": { "t": "text" } }).unwrap();
        assert!(compare_existing(&again, &[text]).unwrap());
    }

    #[test]
    fn id_index_listed_without_unique() {
        let id = parse_spec(&doc! { "key": { "_id": 1 }, "name": "_id_" }).unwrap();
        let mut id = id;
        id.unique = true;
        assert!(!spec_document(&id).contains_key("unique"));
        let a = parse_spec(&doc! { "key": { "a": 1 }, "unique": true }).unwrap();
        assert!(spec_document(&a).get_bool("unique").unwrap());
    }

    #[test]
    fn conflicts() {
        let a = parse_spec(&doc! { "key": { "a": 1 } }).unwrap();
        let existing = vec![a.clone()];
        assert!(compare_existing(&a, &existing).unwrap());
        let renamed = parse_spec(&doc! { "key": { "a": 1 }, "name": "other" }).unwrap();
        assert_eq!(
            compare_existing(&renamed, &existing).unwrap_err().code,
            ErrorCode::IndexOptionsConflict
        );
        let same_name = parse_spec(&doc! { "key": { "b": 1 }, "name": "a_1" }).unwrap();
        assert_eq!(
            compare_existing(&same_name, &existing).unwrap_err().code,
            ErrorCode::IndexKeySpecsConflict
        );
        let unique = parse_spec(&doc! { "key": { "a": 1 }, "unique": true }).unwrap();
        assert_eq!(
            compare_existing(&unique, &existing).unwrap_err().code,
            ErrorCode::IndexOptionsConflict
        );
    }
}
