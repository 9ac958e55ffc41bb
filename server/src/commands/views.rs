//! Views: read-only namespaces made of a source namespace (`viewOn`, a collection or another
//! view) and a pipeline. Definitions are kept as mongod keeps them, one document
//! `{_id: "<db>.<view>", viewOn, pipeline}` per view in `<db>.system.views`, written through
//! the ordinary storage path, so a definition is in the log and durable before `create`
//! answers. A read of a view (find, count, distinct, aggregate, explain) is an aggregate on the
//! view's ultimate collection with the chain's pipelines in front (`resolve`); writes to a view
//! are refused by `Catalog::check_not_view`. Nothing here caches: a database without views
//! costs one map look-up per read.

use super::args;
use super::argspec::specs::COLL_MOD;
use super::{Reply, Request};
use crate::catalog::VIEWS_COLLECTION;
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::query::pipeline::{ParseContext, Pipeline};
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;
use storage::{Collection, Direction, WriteOp};

/// Longest chain of views on views (mongod's limit).
pub const VIEW_DEPTH_MAX: usize = 20;
/// Most view definitions one database lists.
const VIEWS_LISTED_MAX: usize = 100_000;

/// One view definition.
#[derive(Debug, Clone)]
pub struct View {
    pub name: String,
    pub view_on: String,
    pub pipeline: Vec<Document>,
    /// The view's default collation, normalised (None: the simple collation). A view does not
    /// take its source's default: without one of its own it compares simply.
    pub collation: Option<Document>,
}

impl View {
    fn from_document(db: &str, d: &Document) -> Option<View> {
        let id = d.get_str("_id").ok()?;
        let name = id.strip_prefix(db)?.strip_prefix('.')?.to_string();
        let pipeline = d
            .get_array("pipeline")
            .ok()?
            .iter()
            .filter_map(|s| s.as_document().cloned())
            .collect();
        Some(View {
            name,
            view_on: d.get_str("viewOn").ok()?.to_string(),
            pipeline,
            collation: d.get_document("collation").ok().cloned(),
        })
    }

    fn to_document(&self, db: &str) -> Document {
        let mut d = doc! {
            "_id": format!("{db}.{}", self.name),
            "viewOn": &self.view_on,
            "pipeline": self.pipeline.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
        };
        if let Some(c) = &self.collation {
            d.insert("collation", c.clone());
        }
        d
    }

    /// `listCollections`' entry for the view.
    pub fn list_entry(&self, name_only: bool) -> Document {
        if name_only {
            return doc! { "name": &self.name, "type": "view" };
        }
        let mut options = doc! {
            "viewOn": &self.view_on,
            "pipeline": self.pipeline.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
        };
        if let Some(c) = &self.collation {
            options.insert("collation", c.clone());
        }
        doc! {
            "name": &self.name,
            "type": "view",
            "options": options,
            "info": { "readOnly": true },
        }
    }
}

/// A view read as what it is: an aggregate on `base` with `pipeline` in front.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub base: String,
    pub pipeline: Vec<Document>,
}

pub fn get(state: &ServerState, db: &str, name: &str) -> CommandResult<Option<View>> {
    Ok(state
        .catalog
        .view_definition(db, name)?
        .and_then(|(_, d)| View::from_document(db, &d)))
}

/// Every view of a database, in `_id` order of storage.
pub fn list(state: &ServerState, db: &str) -> CommandResult<Vec<View>> {
    let Some(c) = state.catalog.collection(db, VIEWS_COLLECTION) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let batch = c
            .scan(Direction::Forward, after, 1000)
            .map_err(|e| storage_error(e, db, VIEWS_COLLECTION))?;
        let Some((last, _)) = batch.last() else {
            return Ok(out);
        };
        after = Some(*last);
        for (_, raw) in batch {
            if let Some(v) = Document::try_from(raw.as_ref())
                .ok()
                .and_then(|d| View::from_document(db, &d))
            {
                out.push(v);
            }
            if out.len() >= VIEWS_LISTED_MAX {
                return Ok(out);
            }
        }
    }
}

/// Follow `name` down its chain of views: `None` when it is not a view.
pub fn resolve(state: &ServerState, db: &str, name: &str) -> CommandResult<Option<Resolved>> {
    let Some(first) = get(state, db, name)? else {
        return Ok(None);
    };
    let mut pipelines = vec![first.pipeline];
    let mut base = first.view_on;
    while let Some(v) = get(state, db, &base)? {
        if pipelines.len() >= VIEW_DEPTH_MAX {
            return Err(err(
                ErrorCode::ViewDepthLimitExceeded,
                format!(
                    "View depth too deep or view cycle detected; maximum depth is {VIEW_DEPTH_MAX}"
                ),
            ));
        }
        pipelines.push(v.pipeline);
        base = v.view_on;
    }
    // The innermost view's stages run first.
    let pipeline = pipelines.into_iter().rev().flatten().collect();
    Ok(Some(Resolved { base, pipeline }))
}

/// `create` options of collections only (mongod refuses them with `viewOn`); every other
/// field `create`'s table knows (`viewOn`, `pipeline`, `collation`) may come with it.
const COLLECTION_ONLY: &[&str] = &[
    "capped",
    "size",
    "max",
    "validator",
    "validationLevel",
    "validationAction",
    "timeseries",
    "clusteredIndex",
    "changeStreamPreAndPostImages",
    "expireAfterSeconds",
    "encryptedFields",
    "storageEngine",
    "indexOptionDefaults",
    "idIndex",
    "autoIndexId",
    "flags",
];

/// `create {create: name, viewOn, pipeline}`.
pub fn create(state: &ServerState, req: &Request, name: &str) -> CommandResult<Reply> {
    for (k, _) in req.body.iter().skip(1) {
        if COLLECTION_ONLY.contains(&k.as_str()) {
            return Err(err(
                ErrorCode::InvalidOptions,
                format!("option '{k}' is not supported when creating a view"),
            ));
        }
    }
    let mut view = parse_definition(&req.body, "create", name)?;
    view.collation = normalised(&req.body, "create")?;
    // Creating a view again with the very same definition succeeds (mongod 7.0+).
    if let Some(old) = get(state, &req.db, name)?
        && old.view_on == view.view_on
        && old.pipeline == view.pipeline
        && old.collation == view.collation
    {
        return Ok(Reply::ok());
    }
    if state.catalog.collection(&req.db, name).is_some() || get(state, &req.db, name)?.is_some() {
        return Err(err(
            ErrorCode::NamespaceExists,
            format!("Namespace {}.{name} already exists", req.db),
        ));
    }
    check_definition(state, &req.db, &view)?;
    store(state, &req.db, &view)?;
    Ok(Reply::ok())
}

/// Writes a new definition to `system.views` and waits until it is durable (48 when one of
/// that name is there already).
pub fn store(state: &ServerState, db: &str, view: &View) -> CommandResult<()> {
    let views = views_collection(state, db)?;
    let raw = raw(&view.to_document(db))?;
    let ticket = views
        .write(vec![WriteOp::Insert(raw.into())])
        .map_err(|e| match e {
            storage::StorageError::DuplicateKey { .. } => err(
                ErrorCode::NamespaceExists,
                format!("Namespace {db}.{} already exists", view.name),
            ),
            e => storage_error(e, db, VIEWS_COLLECTION),
        })?;
    ticket
        .wait_durable_blocking()
        .map_err(|e| storage_error(e, db, VIEWS_COLLECTION))
}

/// `collMod {collMod: view, viewOn, pipeline}`: both must be given, as mongod requires.
pub fn modify(state: &ServerState, req: &Request, name: &str) -> CommandResult<Reply> {
    // `collMod`'s table has typed the body; of its options only these three apply to a view.
    if let Some(k) = req.body.keys().skip(1).find(|k| {
        !matches!(k.as_str(), "viewOn" | "pipeline" | "dryRun")
            && COLL_MOD.fields.iter().any(|f| f.name == k.as_str())
    }) {
        return Err(err(
            ErrorCode::InvalidOptions,
            format!("option not supported on a view: {k}"),
        ));
    }
    let Some((rid, _)) = state.catalog.view_definition(&req.db, name)? else {
        return Err(err(
            ErrorCode::NamespaceNotFound,
            format!("ns does not exist: {}.{name}", req.db),
        ));
    };
    if !req.body.contains_key("viewOn") || !req.body.contains_key("pipeline") {
        return Err(err(
            ErrorCode::InvalidOptions,
            "Must specify both 'viewOn' and 'pipeline' when modifying a view",
        ));
    }
    let mut view = parse_definition(&req.body, "collMod", name)?;
    // collMod changes the source and the pipeline; the view keeps its collation.
    view.collation = get(state, &req.db, name)?.and_then(|v| v.collation);
    check_definition(state, &req.db, &view)?;
    let views = views_collection(state, &req.db)?;
    let ticket = views
        .write(vec![WriteOp::Replace(
            rid,
            raw(&view.to_document(&req.db))?,
        )])
        .map_err(|e| storage_error(e, &req.db, VIEWS_COLLECTION))?;
    ticket
        .wait_durable_blocking()
        .map_err(|e| storage_error(e, &req.db, VIEWS_COLLECTION))?;
    Ok(Reply::ok())
}

/// Drop view `name`; `false` when there is no such view.
pub fn drop(state: &ServerState, db: &str, name: &str) -> CommandResult<bool> {
    let Some((rid, _)) = state.catalog.view_definition(db, name)? else {
        return Ok(false);
    };
    let views = views_collection(state, db)?;
    let ticket = views
        .write(vec![WriteOp::Delete(rid)])
        .map_err(|e| storage_error(e, db, VIEWS_COLLECTION))?;
    ticket
        .wait_durable_blocking()
        .map_err(|e| storage_error(e, db, VIEWS_COLLECTION))?;
    Ok(true)
}

fn raw(d: &Document) -> CommandResult<RawDocumentBuf> {
    RawDocumentBuf::try_from(d).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
}

fn views_collection(state: &ServerState, db: &str) -> CommandResult<Arc<Collection>> {
    let engine = state.catalog.engine();
    if let Some(c) = engine.collection(db, VIEWS_COLLECTION) {
        return Ok(c);
    }
    match engine.create_collection(db, VIEWS_COLLECTION, Document::new()) {
        Ok(c) => Ok(c),
        Err(storage::StorageError::NamespaceExists(_)) => engine
            .collection(db, VIEWS_COLLECTION)
            .ok_or_else(|| err(ErrorCode::InternalError, "system.views vanished")),
        Err(e) => Err(storage_error(e, db, VIEWS_COLLECTION)),
    }
}

/// `viewOn` and `pipeline` of a `create` or `collMod` body, type-checked.
fn parse_definition(body: &Document, command: &str, name: &str) -> CommandResult<View> {
    let view_on = match body.get("viewOn") {
        Some(Bson::String(s)) if s.is_empty() => {
            return Err(err(ErrorCode::BadValue, "'viewOn' cannot be empty"));
        }
        Some(Bson::String(s)) => s.clone(),
        Some(v) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '{command}.viewOn' is the wrong type '{}', expected type 'string'",
                    args::type_name(v)
                ),
            ));
        }
        None => {
            return Err(err(
                ErrorCode::InvalidOptions,
                "'pipeline' requires 'viewOn' to also be specified",
            ));
        }
    };
    let pipeline = match body.get("pipeline") {
        None => Vec::new(),
        Some(Bson::Array(items)) => items
            .iter()
            .map(|s| {
                s.as_document().cloned().ok_or_else(|| {
                    err(
                        ErrorCode::TypeMismatch,
                        "'pipeline' must be an array of objects",
                    )
                })
            })
            .collect::<CommandResult<_>>()?,
        Some(v) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '{command}.pipeline' is the wrong type '{}', expected type 'array'",
                    args::type_name(v)
                ),
            ));
        }
    };
    Ok(View {
        name: name.to_string(),
        view_on,
        pipeline,
        collation: None,
    })
}

/// A command's `collation` in the form views keep and compare it (None: absent or simple).
fn normalised(body: &Document, command: &str) -> CommandResult<Option<Document>> {
    let Some(c) = args::opt_doc(body, command, "collation")? else {
        return Ok(None);
    };
    Ok(match crate::query::collation::Spec::parse(c)? {
        crate::query::collation::Spec::Simple => None,
        s => Some(s.to_document()),
    })
}

/// The collation a read of `name` runs under. On a view: the view's own (a different one
/// asked for is 167 OptionNotSupportedOnView, as mongod); elsewhere the command's, else the
/// collection's default.
pub fn collation_scope(
    state: &ServerState,
    body: &Document,
    command: &str,
    db: &str,
    name: &str,
) -> CommandResult<crate::query::collator::Scope> {
    let Some(view) = get(state, db, name)? else {
        let coll = state.catalog.collection(db, name);
        return args::collation_scope(body, command, coll.as_deref());
    };
    if body.contains_key("collation") && normalised(body, command)? != view.collation {
        return Err(err(
            ErrorCode::OptionNotSupportedOnView,
            "Cannot override a view's default collation",
        ));
    }
    let collator = match &view.collation {
        Some(c) => crate::query::collator::for_spec(&crate::query::collation::Spec::parse(c)?)?,
        None => None,
    };
    Ok(crate::query::collator::scope(collator))
}

/// What mongod checks when a definition is stored: the source is a valid name in the same
/// database, the pipeline parses and writes nowhere, the chain has no cycle and is not too deep.
fn check_definition(state: &ServerState, db: &str, view: &View) -> CommandResult<()> {
    crate::catalog::validate_collection_name(db, &view.view_on)?;
    for stage in &view.pipeline {
        if let Some(k) = stage
            .keys()
            .next()
            .filter(|k| *k == "$out" || *k == "$merge")
        {
            return Err(err(
                ErrorCode::OptionNotSupportedOnView,
                format!("{k} cannot be used in a view definition"),
            ));
        }
    }
    let ctx = ParseContext::new(db, Some(&view.view_on), bson::DateTime::now());
    Pipeline::parse(&view.pipeline, &ctx)?;
    let mut chain = vec![view.name.clone()];
    let mut next = view.view_on.clone();
    loop {
        if chain.contains(&next) {
            chain.push(next);
            let names: Vec<String> = chain.iter().map(|n| format!("{db}.{n}")).collect();
            return Err(err(
                ErrorCode::GraphContainsCycle,
                format!("View cycle detected: [ {} ]", names.join(" => ")),
            ));
        }
        let Some(v) = get(state, db, &next)? else {
            return Ok(());
        };
        // Every view of a chain compares the same way (mongod refuses a mix).
        if v.collation != view.collation {
            return Err(err(
                ErrorCode::OptionNotSupportedOnView,
                format!(
                    "View {db}.{} has a different default collation than the view {db}.{} it is defined on",
                    view.name, v.name
                ),
            ));
        }
        chain.push(next);
        if chain.len() > VIEW_DEPTH_MAX {
            return Err(err(
                ErrorCode::ViewDepthLimitExceeded,
                format!(
                    "View depth too deep or view cycle detected; maximum depth is {VIEW_DEPTH_MAX}"
                ),
            ));
        }
        next = v.view_on;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definition_round_trips_through_its_document() {
        let v = View {
            name: "v".into(),
            view_on: "c".into(),
            pipeline: vec![doc! { "$match": { "a": 1 } }],
            collation: Some(doc! { "locale": "fr" }),
        };
        let back = View::from_document("db", &v.to_document("db")).unwrap();
        assert_eq!(back.name, "v");
        assert_eq!(back.view_on, "c");
        assert_eq!(back.pipeline, v.pipeline);
        assert_eq!(back.collation, v.collation);
        assert!(View::from_document("other", &v.to_document("db")).is_none());
    }

    #[test]
    fn definitions_are_type_checked() {
        let e = parse_definition(&doc! { "create": "v", "viewOn": 1 }, "create", "v").unwrap_err();
        assert!(matches!(e.code, ErrorCode::TypeMismatch));
        let e = parse_definition(&doc! { "create": "v", "viewOn": "" }, "create", "v").unwrap_err();
        assert!(matches!(e.code, ErrorCode::BadValue));
        let e = parse_definition(
            &doc! { "create": "v", "viewOn": "c", "pipeline": [1] },
            "create",
            "v",
        )
        .unwrap_err();
        assert!(matches!(e.code, ErrorCode::TypeMismatch));
    }
}
