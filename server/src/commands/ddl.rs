//! Databases and collections: `create`, `drop`, `dropDatabase`, `listCollections`,
//! `listDatabases`, `renameCollection`, `collMod`, `dbStats`, `collStats`, `validate`.
//! Options cairn cannot honour yet are refused with a clear error, never silently ignored.

use super::args;
use super::argspec::{self, specs};
use super::crud_read::cursor_reply;
use super::{Reply, Request, off_thread};
use crate::catalog::{validate_collection_name, validate_db_name};
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::query::matcher::Filter;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;

/// `create` options that are accepted and stored (they change nothing cairn does yet).
const CREATE_STORED: &[&str] = &[
    "storageEngine",
    "indexOptionDefaults",
    "idIndex",
    "flags",
    "autoIndexId",
];

/// Check the validation options of a `create` or `collMod` body and merge them into `options`
/// (a validator given without level or action gets mongod's defaults, strict and error).
fn merge_validation(body: &Document, options: &mut Document) -> CommandResult<bool> {
    use crate::query::validation::{Action, Level, check_validator};
    let mut changed = false;
    if let Some(v) = body.get("validator") {
        let Bson::Document(d) = v else {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'validator' is the wrong type '{}', expected type 'object'",
                    args::type_name(v)
                ),
            ));
        };
        check_validator(d)?;
        Filter::parse(d)?;
        options.insert("validator", d.clone());
        for (k, default) in [("validationLevel", "strict"), ("validationAction", "error")] {
            if !options.contains_key(k) {
                options.insert(k, default);
            }
        }
        changed = true;
    }
    if let Some(v) = body.get("validationLevel") {
        Level::parse(v)?;
        options.insert("validationLevel", v.clone());
        changed = true;
    }
    if let Some(v) = body.get("validationAction") {
        Action::parse(v)?;
        options.insert("validationAction", v.clone());
        changed = true;
    }
    Ok(changed)
}

/// `create`'s `collation`: the collection's default collation, stored normalised (as
/// listCollections shows it); the simple collation is the absence of one.
fn default_collation(body: &Document, options: &mut Document) -> CommandResult<()> {
    let Some(c) = args::opt_doc(body, "create", "collation")? else {
        return Ok(());
    };
    let spec = crate::query::collation::Spec::parse(c)?;
    if crate::query::collator::for_spec(&spec)?.is_some() {
        options.insert("collation", spec.to_document());
    }
    Ok(())
}

/// `changeStreamPreAndPostImages: {enabled: <bool>}` as mongod's IDL has it.
const PRE_AND_POST_IMAGES: argspec::CommandSpec = argspec::CommandSpec {
    name: "changeStreamPreAndPostImages",
    strict: true,
    target: None,
    fields: &[argspec::req("enabled", argspec::Ty::Bool)],
};

/// Check a `create` or `collMod` body's `changeStreamPreAndPostImages` and set it in
/// `options` (kept only while enabled, so listCollections shows it as mongod does); whether
/// the body had it. The storage engine reads the option and logs pre-images while it is on.
fn merge_pre_and_post_images(body: &Document, options: &mut Document) -> CommandResult<bool> {
    let Some(v) = body.get("changeStreamPreAndPostImages") else {
        return Ok(false);
    };
    let Bson::Document(d) = v else {
        return Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field 'changeStreamPreAndPostImages' is the wrong type '{}', expected type 'object'",
                args::type_name(v)
            ),
        ));
    };
    argspec::check_entry(&PRE_AND_POST_IMAGES, d)?;
    if d.get_bool("enabled").unwrap_or(false) {
        options.insert("changeStreamPreAndPostImages", doc! { "enabled": true });
    } else {
        options.remove("changeStreamPreAndPostImages");
    }
    Ok(true)
}

/// `create` options that need features cairn does not have yet.
const CREATE_UNSUPPORTED: &[&str] = &["viewOn", "pipeline", "timeseries", "encryptedFields"];

/// `collMod` options cairn does not honour (besides those of `CREATE_UNSUPPORTED`).
const COLL_MOD_UNSUPPORTED: &[&str] = &["clusteredIndex"];

pub fn create(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::CREATE, &req.body)?;
    let name = args::collection_name(&req.body, "create")?;
    validate_collection_name(&req.db, &name)?;
    super::transactions::explicit_ddl_check(req, &name)?;
    if req.txn.get().is_some() {
        for (key, what) in [
            ("viewOn", "a view"),
            ("timeseries", "a time-series collection"),
            ("capped", "a capped collection"),
        ] {
            if req
                .body
                .get(key)
                .is_some_and(|v| v != &Bson::Boolean(false))
            {
                return Err(err(
                    ErrorCode::OperationNotSupportedInTransaction,
                    format!("Cannot create {what} in a multi-document transaction."),
                ));
            }
        }
    }
    let mut options = Document::new();
    if !req.body.contains_key("timeseries") {
        let tests = state.params.get_bool("enableTestCommands");
        super::clustered::create_options(&req.body, &mut options, tests)?;
    }
    if req.body.contains_key("viewOn") || req.body.contains_key("pipeline") {
        if name.starts_with("system.") {
            return Err(err(
                ErrorCode::InvalidNamespace,
                format!("Invalid system namespace: {}.{name}", req.db),
            ));
        }
        return super::views::create(state, req, &name);
    }
    if req.body.contains_key("timeseries") {
        return super::timeseries::create(state, req, &name);
    }
    for (k, v) in req.body.iter().skip(1) {
        if CREATE_UNSUPPORTED.contains(&k.as_str()) {
            return Err(err(
                ErrorCode::CommandNotSupported,
                format!("create: the '{k}' option is not supported by cairn yet"),
            ));
        }
        if CREATE_STORED.contains(&k.as_str()) {
            options.insert(k.clone(), v.clone());
        }
    }
    super::capped::create_options(&req.body, &mut options)?;
    merge_validation(&req.body, &mut options)?;
    default_collation(&req.body, &mut options)?;
    merge_pre_and_post_images(&req.body, &mut options)?;
    // `system.profile` may be created (with the size the client wants) while it does not
    // exist yet; once the profiler has made it, create answers 48 like any existing one.
    if name.starts_with("system.") && name != crate::profiler::PROFILE_COLLECTION {
        return Err(err(
            ErrorCode::InvalidNamespace,
            format!("Invalid system namespace: {}.{name}", req.db),
        ));
    }
    if super::views::get(state, &req.db, &name)?.is_some() {
        return Err(err(
            ErrorCode::NamespaceExists,
            format!("Namespace {}.{name} already exists", req.db),
        ));
    }
    match state
        .catalog
        .engine()
        .create_collection(&req.db, &name, options)
    {
        Ok(c) => {
            if let Some(t) = req.txn.get() {
                t.note_created(crate::txn::Created::Collection {
                    db: req.db.clone(),
                    name: name.clone(),
                    uuid: c.uuid().bytes(),
                });
            }
            Ok(Reply::ok())
        }
        Err(storage::StorageError::NamespaceExists(_)) => Err(err(
            ErrorCode::NamespaceExists,
            format!("Collection {}.{name} already exists.", req.db),
        )),
        Err(e) => Err(storage_error(e, &req.db, &name)),
    }
}

pub async fn drop(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    argspec::check(&specs::DROP, &req.body)?;
    let name = args::collection_name(&req.body, "drop")?;
    let guard = state.catalog.lock(&req.db, &name).await;
    off_thread(state, req, move |state, req| {
        let _guard = guard;
        drop_collection(state, req, &name)
    })
    .await
}

fn drop_collection(state: &ServerState, req: &Request, name: &str) -> CommandResult<Reply> {
    if name == crate::profiler::PROFILE_COLLECTION && state.profiler.level(&req.db) != 0 {
        return Err(err(
            ErrorCode::IllegalOperation,
            "turn off profiling before dropping system.profile collection",
        ));
    }
    // Dropping a view removes its definition only; its source stays.
    let buckets_too = super::timeseries::lookup(state, &req.db, name).is_some();
    if super::views::drop(state, &req.db, name)? {
        if buckets_too {
            super::timeseries::drop_buckets(state, &req.db, name)?;
        }
        state.cursors.invalidate(&req.db, Some(name));
        return Ok(Reply::ok());
    }
    let n_indexes = state
        .catalog
        .collection(&req.db, name)
        .map(|c| c.indexes().len() as i32);
    state
        .catalog
        .engine()
        .drop_collection(&req.db, name)
        .map_err(|e| storage_error(e, &req.db, name))?;
    state.cursors.invalidate(&req.db, Some(name));
    crate::planner::filters::forget(&format!("{}.{name}", req.db));
    // mongod 7.0 answers ok for a collection that does not exist.
    let mut reply = doc! {};
    if let Some(n) = n_indexes {
        reply.insert("nIndexesWas", n);
        reply.insert("ns", format!("{}.{name}", req.db));
    }
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

pub fn drop_database(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::DROP_DATABASE, &req.body)?;
    validate_db_name(&req.db)?;
    state
        .catalog
        .engine()
        .drop_database(&req.db)
        .map_err(|e| storage_error(e, &req.db, ""))?;
    state.cursors.invalidate(&req.db, None);
    crate::planner::filters::forget_db(&req.db);
    // mongod 8.0 answers `{ok: 1}` alone (earlier versions added `dropped`).
    Ok(Reply::ok())
}

fn collection_entry(info: &storage::CollectionInfo, name_only: bool) -> Document {
    if name_only {
        return doc! { "name": info.name.clone(), "type": "collection" };
    }
    let uuid = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: info.uuid.bytes().to_vec(),
    };
    let mut entry = doc! {
        "name": info.name.clone(),
        "type": "collection",
        "options": info.options.clone(),
        "info": { "readOnly": false, "uuid": uuid },
    };
    // A clustered collection has no separate `_id` index for mongod, so no `idIndex`.
    if super::clustered::spec_of(&info.options).is_none() {
        entry.insert(
            "idIndex",
            doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
        );
    }
    entry
}

pub fn list_collections(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::LIST_COLLECTIONS, &req.body)?;
    validate_db_name(&req.db)?;
    let name_only = args::opt_bool(&req.body, "listCollections", "nameOnly")?.unwrap_or(false);
    let filter = Filter::parse(
        &args::opt_doc(&req.body, "listCollections", "filter")?
            .cloned()
            .unwrap_or_default(),
    )?;
    let mut docs = Vec::new();
    for info in state.catalog.engine().collections(&req.db) {
        let full = RawDocumentBuf::try_from(&collection_entry(&info, false))
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        if filter.matches(&full) {
            let shown = if name_only {
                RawDocumentBuf::try_from(&collection_entry(&info, true))
                    .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?
            } else {
                full
            };
            docs.push(shown);
        }
    }
    for view in super::views::list(state, &req.db)? {
        let (full, short) = super::timeseries::list_entries(state, &req.db, &view)
            .unwrap_or_else(|| (view.list_entry(false), view.list_entry(true)));
        let full = RawDocumentBuf::try_from(&full)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        if filter.matches(&full) {
            docs.push(if name_only {
                RawDocumentBuf::try_from(&short)
                    .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?
            } else {
                full
            });
        }
    }
    Ok(cursor_reply(
        0,
        &format!("{}.$cmd.listCollections", req.db),
        true,
        docs,
    ))
}

pub fn list_databases(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&specs::LIST_DATABASES, &req.body)?;
    let name_only = args::opt_bool(&req.body, "listDatabases", "nameOnly")?.unwrap_or(false);
    let filter = Filter::parse(
        &args::opt_doc(&req.body, "listDatabases", "filter")?
            .cloned()
            .unwrap_or_default(),
    )?;
    let engine = state.catalog.engine();
    let mut out = Vec::new();
    let mut total = 0i64;
    for db in engine.databases() {
        let size: i64 = db_size(state, &db);
        let entry = if name_only {
            doc! { "name": db.clone() }
        } else {
            doc! { "name": db.clone(), "sizeOnDisk": size, "empty": size == 0 }
        };
        let raw = RawDocumentBuf::try_from(
            &doc! { "name": db.clone(), "sizeOnDisk": size, "empty": size == 0 },
        )
        .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        if filter.matches(&raw) {
            total += size;
            out.push(entry);
        }
    }
    let mut reply = doc! { "databases": out };
    if !name_only {
        reply.insert("totalSize", total);
        reply.insert("totalSizeMb", total / (1024 * 1024));
    }
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// Bytes of documents plus index bytes of one database.
fn db_size(state: &ServerState, db: &str) -> i64 {
    let engine = state.catalog.engine();
    engine
        .collections(db)
        .iter()
        .filter_map(|info| engine.collection(db, &info.name))
        .map(|c| {
            c.data_size_bytes() as i64
                + c.indexes().iter().map(|i| i.size_bytes as i64).sum::<i64>()
        })
        .sum()
}

fn split_ns(ns: &str) -> CommandResult<(String, String)> {
    ns.split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
        .map(|(d, c)| (d.to_string(), c.to_string()))
        .ok_or_else(|| {
            err(
                ErrorCode::InvalidNamespace,
                format!("Invalid namespace specified '{ns}'"),
            )
        })
}

pub async fn rename_collection(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
) -> CommandResult<Reply> {
    argspec::check(&specs::RENAME_COLLECTION, &req.body)?;
    let from = match req.body.get("renameCollection") {
        Some(Bson::String(s)) => s.clone(),
        _ => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "'renameCollection' must be of type String",
            ));
        }
    };
    let to = match req.body.get("to") {
        Some(Bson::String(s)) => s.clone(),
        _ => return Err(err(ErrorCode::TypeMismatch, "'to' must be of type String")),
    };
    let (from_db, from_coll) = split_ns(&from)?;
    let (to_db, to_coll) = split_ns(&to)?;
    validate_collection_name(&to_db, &to_coll)?;
    let drop_target = args::opt_bool(&req.body, "renameCollection", "dropTarget")?.unwrap_or(false);
    let guard = state.catalog.lock(&from_db, &from_coll).await;
    off_thread(state, req, move |state, _| {
        let _guard = guard;
        if super::views::get(state, &from_db, &from_coll)?.is_some() {
            return Err(err(
                ErrorCode::CommandNotSupportedOnView,
                format!("cannot rename view: {from}"),
            ));
        }
        state.catalog.check_not_view(&to_db, &to_coll)?;
        if state.catalog.collection(&from_db, &from_coll).is_none() {
            return Err(err(
                ErrorCode::NamespaceNotFound,
                format!("Source collection {from} does not exist"),
            ));
        }
        if from == to {
            return Err(err(
                ErrorCode::IllegalOperation,
                "Can't rename a collection to itself",
            ));
        }
        if state.catalog.collection(&to_db, &to_coll).is_some() && !drop_target {
            return Err(err(ErrorCode::NamespaceExists, "target namespace exists"));
        }
        state
            .catalog
            .engine()
            .rename_collection(&from_db, &from_coll, &to_db, &to_coll, drop_target)
            .map_err(|e| storage_error(e, &from_db, &from_coll))?;
        state.cursors.invalidate(&from_db, Some(&from_coll));
        state.cursors.invalidate(&to_db, Some(&to_coll));
        crate::planner::filters::rename(&from, &to);
        Ok(Reply::ok())
    })
    .await
}

pub fn db_stats(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::admin::DB_STATS, &req.body)?;
    validate_db_name(&req.db)?;
    let scale = args::opt_i64(&req.body, "dbStats", "scale")?
        .unwrap_or(1)
        .max(1);
    let engine = state.catalog.engine();
    let (mut objects, mut data, mut indexes, mut index_size) = (0i64, 0i64, 0i64, 0i64);
    let infos = engine.collections(&req.db);
    for info in &infos {
        if let Some(c) = engine.collection(&req.db, &info.name) {
            objects += c.count() as i64;
            data += c.data_size_bytes() as i64;
            let ix = c.indexes();
            indexes += ix.len() as i64;
            index_size += ix.iter().map(|i| i.size_bytes as i64).sum::<i64>();
        }
    }
    let avg = if objects > 0 {
        data as f64 / objects as f64
    } else {
        0.0
    };
    Ok(Reply::Doc(doc! {
        "db": req.db.clone(),
        "collections": infos.len() as i64,
        "views": 0_i64,
        "objects": objects,
        "avgObjSize": avg,
        "dataSize": (data / scale) as f64,
        "storageSize": (data / scale) as f64,
        "indexes": indexes,
        "indexSize": (index_size / scale) as f64,
        "totalSize": ((data + index_size) / scale) as f64,
        "scaleFactor": scale as f64,
        "fsUsedSize": 0.0,
        "fsTotalSize": 0.0,
        "ok": 1.0,
    }))
}

pub fn coll_stats(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::admin::COLL_STATS, &req.body)?;
    let name = args::collection_name(&req.body, "collStats")?;
    let scale = args::opt_i64(&req.body, "collStats", "scale")?
        .unwrap_or(1)
        .max(1);
    let ns = format!("{}.{name}", req.db);
    let Some(c) = state.catalog.collection(&req.db, &name) else {
        return Err(err(
            ErrorCode::NamespaceNotFound,
            format!("Collection [{ns}] not found."),
        ));
    };
    let count = c.count() as i64;
    let size = c.data_size_bytes() as i64;
    let mut index_sizes = Document::new();
    let mut total_index = 0i64;
    let ix = c.indexes();
    for i in &ix {
        index_sizes.insert(i.spec.name.clone(), i.size_bytes as i64 / scale);
        total_index += i.size_bytes as i64;
    }
    let mut out = doc! {
        "ns": ns,
        "size": size / scale,
        "count": count,
        "avgObjSize": if count > 0 { size / count } else { 0 },
        "storageSize": size / scale,
        "freeStorageSize": 0_i64,
    };
    super::capped::stats_fields(&c, &mut out);
    out.extend(doc! {
        "nindexes": ix.len() as i32,
        "indexDetails": {},
        "indexBuilds": [],
        "totalIndexSize": total_index / scale,
        "totalSize": (size + total_index) / scale,
        "indexSizes": index_sizes,
        "scaleFactor": scale as i32,
        "ok": 1.0,
    });
    Ok(Reply::Doc(out))
}

/// `validate`: read every document and check that each index holds exactly the entries the
/// documents imply (by count per index and `_id` look-up per document).
pub async fn validate(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    let name = args::collection_name(&req.body, "validate")?;
    let guard = state.catalog.lock(&req.db, &name).await;
    off_thread(state, req, move |state, req| {
        let _guard = guard;
        validate_collection(state, req, &name)
    })
    .await
}

fn validate_collection(state: &ServerState, req: &Request, name: &str) -> CommandResult<Reply> {
    argspec::check(&argspec::admin::VALIDATE, &req.body)?;
    let ns = format!("{}.{name}", req.db);
    let Some(c) = state.catalog.collection(&req.db, name) else {
        return Err(err(
            ErrorCode::NamespaceNotFound,
            format!("Collection '{ns}' does not exist to validate."),
        ));
    };
    // The engine checks every page of every tree and that each index holds exactly the keys
    // of the documents.
    let report = c.validate().map_err(|e| storage_error(e, &req.db, name))?;
    let errors = report.problems;
    let invalid = report.missing_id as i64;
    let n_records = report.records as i64;
    let mut keys_per_index = Document::new();
    for (index, entries) in report.index_entries {
        keys_per_index.insert(index, entries as i64);
    }
    Ok(Reply::Doc(doc! {
        "ns": ns,
        "nInvalidDocuments": invalid,
        "nNonCompliantDocuments": 0_i64,
        "nrecords": n_records,
        "nIndexes": keys_per_index.len() as i32,
        "keysPerIndex": keys_per_index,
        "valid": errors.is_empty(),
        "repaired": false,
        "warnings": [],
        "errors": errors,
        "corruptRecords": [],
        "ok": 1.0,
    }))
}

/// `collMod`: change an index's `expireAfterSeconds` or `hidden` (the options cairn honours);
/// other options are refused by name, never ignored.
pub async fn coll_mod(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    let name = args::collection_name(&req.body, "collMod")?;
    let guard = state.catalog.lock(&req.db, &name).await;
    off_thread(state, req, move |state, req| {
        let _guard = guard;
        modify_collection(state, req, &name)
    })
    .await
}

fn modify_collection(state: &ServerState, req: &Request, name: &str) -> CommandResult<Reply> {
    argspec::check(&specs::COLL_MOD, &req.body)?;
    let is_view = super::views::get(state, &req.db, name)?.is_some();
    if !is_view && state.catalog.collection(&req.db, name).is_some() {
        // mongod looks at `pipeline` before `viewOn`.
        if let Some(k) = ["pipeline", "viewOn"]
            .into_iter()
            .find(|k| req.body.contains_key(*k))
        {
            return Err(err(
                ErrorCode::InvalidOptions,
                format!("option only supported on a view: {k}"),
            ));
        }
    }
    if is_view || req.body.contains_key("viewOn") || req.body.contains_key("pipeline") {
        return super::views::modify(state, req, name);
    }
    for (k, _) in req.body.iter().skip(1) {
        if CREATE_UNSUPPORTED.contains(&k.as_str()) || COLL_MOD_UNSUPPORTED.contains(&k.as_str()) {
            return Err(err(
                ErrorCode::CommandNotSupported,
                format!("collMod: the '{k}' option is not supported by cairn yet"),
            ));
        }
    }
    let ns = format!("{}.{name}", req.db);
    let Some(coll) = state.catalog.collection(&req.db, name) else {
        return Err(err(
            ErrorCode::NamespaceNotFound,
            format!("ns does not exist: {ns}"),
        ));
    };
    let mut options = coll.options();
    let images = merge_pre_and_post_images(&req.body, &mut options)?;
    let bounds = super::capped::coll_mod_options(&req.body, &mut options)?;
    let ttl = super::clustered::coll_mod(&req.body, &mut options)?;
    if merge_validation(&req.body, &mut options)? || images || bounds || ttl {
        // An empty validator turns validation off (mongod keeps `validator: {}`).
        state
            .catalog
            .engine()
            .set_collection_options(&req.db, name, options)
            .map_err(|e| storage_error(e, &req.db, name))?;
    }
    let Some(index) = args::opt_doc(&req.body, "collMod", "index")? else {
        return Ok(Reply::ok());
    };
    let target = match (index.get("name"), index.get("keyPattern")) {
        (Some(Bson::String(n)), None) => coll.indexes().into_iter().find(|i| &i.spec.name == n),
        (None, Some(Bson::Document(k))) => coll.indexes().into_iter().find(|i| &i.spec.key == k),
        _ => {
            return Err(err(
                ErrorCode::InvalidOptions,
                "collMod: 'index' needs exactly one of 'name' or 'keyPattern'",
            ));
        }
    };
    let Some(target) = target else {
        return Err(err(
            ErrorCode::IndexNotFound,
            format!("cannot find index {index} for ns {ns}"),
        ));
    };
    let expire = match index.get("expireAfterSeconds") {
        None => None,
        Some(v) => {
            let secs = super::as_i64(v).filter(|s| (0..=i32::MAX as i64).contains(s));
            let secs = secs.ok_or_else(|| {
                err(
                    ErrorCode::BadValue,
                    "expireAfterSeconds must be a number between 0 and 2147483647",
                )
            })?;
            if target.spec.expire_after_seconds.is_none() {
                return Err(err(
                    ErrorCode::InvalidOptions,
                    "no expireAfterSeconds field to update",
                ));
            }
            Some(secs)
        }
    };
    let hidden = match index.get("hidden") {
        None => None,
        Some(Bson::Boolean(h)) => Some(*h),
        Some(_) => return Err(err(ErrorCode::TypeMismatch, "'hidden' must be a boolean")),
    };
    if hidden.is_some() && target.spec.name == storage::ID_INDEX_NAME {
        return Err(err(ErrorCode::BadValue, "can't hide _id index"));
    }
    if expire.is_none() && hidden.is_none() {
        return Err(err(
            ErrorCode::InvalidOptions,
            "no expireAfterSeconds or hidden field",
        ));
    }
    let change = |spec: &mut storage::IndexSpec| {
        if let Some(e) = expire {
            spec.expire_after_seconds = Some(e);
        }
        if let Some(h) = hidden {
            spec.hidden = h;
        }
    };
    let old = state
        .catalog
        .engine()
        .modify_index(&req.db, name, &target.spec.name, &change)
        .map_err(|e| storage_error(e, &req.db, name))?;
    let mut reply = doc! {};
    if let Some(e) = expire {
        reply.insert(
            "expireAfterSeconds_old",
            old.expire_after_seconds.unwrap_or(0),
        );
        reply.insert("expireAfterSeconds_new", e);
    }
    if let Some(h) = hidden {
        reply.insert("hidden_old", old.hidden);
        reply.insert("hidden_new", h);
    }
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}
