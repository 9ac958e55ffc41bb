//! Index commands: `createIndexes`, `listIndexes`, `dropIndexes`. Specs are checked as mongod
//! checks them (key values, option names, TTL rules, default names) and compared with existing
//! indexes so that an equivalent spec is a no-op and a conflicting one gets code 85 or 86.
//! Builds over existing data use the engine's bulk build and log their progress; the namespace
//! lock covers the checks only, never the build (see `create_indexes`).

use super::args;
use super::argspec::{self, specs};
use super::crud_read::cursor_reply;
use super::{Reply, Request, truthy};
use crate::catalog::validate_collection_name;
use crate::error::{CommandError, CommandResult, ErrorCode, err, storage_error};
use crate::failpoints;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;
use storage::{ID_INDEX_NAME, IndexSpec};

/// Options an index spec may carry; anything else is refused (197).
const SPEC_FIELDS: &[&str] = &[
    "key",
    "name",
    "unique",
    "sparse",
    "partialFilterExpression",
    "expireAfterSeconds",
    "hidden",
    "collation",
    "background",
    "v",
    "ns",
    "storageEngine",
    "weights",
    "default_language",
    "language_override",
    "textIndexVersion",
    "2dsphereIndexVersion",
    "bits",
    "min",
    "max",
    "bucketSize",
    "wildcardProjection",
    "prepareUnique",
];
/// Special index types cairn does not build yet.
const UNSUPPORTED_TYPES: &[&str] = &["geoHaystack"];

/// mongod's default index name: `a_1_b_-1`.
pub fn default_name(key: &Document) -> String {
    let parts: Vec<String> = key
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Bson::Int32(i) => i.to_string(),
                Bson::Int64(i) => i.to_string(),
                Bson::Double(f) if f.fract() == 0.0 => format!("{}", *f as i64),
                Bson::Double(f) => f.to_string(),
                Bson::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{k}_{v}")
        })
        .collect();
    parts.join("_")
}

fn bad_spec(spec: &Document, why: impl std::fmt::Display) -> CommandError {
    err(
        ErrorCode::CannotCreateIndex,
        format!("Error in specification {spec} :: caused by :: {why}"),
    )
}

/// A `2d` index's `bits` (1 to 32) and `min` < `max`, kept in `extra` as given.
fn flat_options(d: &Document, extra: &mut Document) -> CommandResult<()> {
    if let Some(b) = d.get("bits") {
        match super::as_i64(b) {
            Some(n @ 1..=32) => {
                extra.insert("bits", n as i32);
            }
            _ => {
                return Err(err(
                    ErrorCode::Location13028,
                    format!("bits for hash must be > 0 and <= 32, but {b} bits were specified"),
                ));
            }
        }
    }
    let (min_default, max_default) = storage::keys::FLAT_RANGE_DEFAULT;
    let read = |name: &str, default: f64| -> CommandResult<f64> {
        match d.get(name) {
            None => Ok(default),
            Some(v) => crate::query::types::as_f64(v)
                .ok_or_else(|| bad_spec(d, format!("{name} must be a number"))),
        }
    };
    let (min, max) = (read("min", min_default)?, read("max", max_default)?);
    if !min.is_finite() || !max.is_finite() || min >= max {
        return Err(err(
            ErrorCode::Location13067,
            format!(
                "region for hash must be valid and have positive area, but [{min}, {max}] was specified"
            ),
        ));
    }
    for name in ["min", "max"] {
        if let Some(v) = d.get(name) {
            extra.insert(name, v.clone());
        }
    }
    Ok(())
}

/// Whether a key pattern asks for a text index (`{a: "text"}` or the stored `_fts` form).
fn is_text(key: &Document) -> bool {
    key.values()
        .any(|v| v.as_str() == Some(storage::text::TEXT))
}

/// The stored key pattern of a text index and its text fields, with mongod's rules: the text
/// fields (or `_fts: "text", _ftsx: 1`) adjacent, every other field 1 or -1.
fn text_key(d: &Document, key: &Document) -> CommandResult<(Document, Vec<String>)> {
    use storage::text::{FTS, FTSX, TEXT};
    let names: Vec<&String> = key.keys().collect();
    if let Some(i) = names.iter().position(|n| *n == FTS)
        && names.get(i + 1).is_none_or(|n| *n != FTSX)
    {
        return Err(bad_spec(d, format!("expected {FTSX} after {FTS}")));
    }
    let mut stored = Document::new();
    let mut text_fields = Vec::new();
    // 0: before the text part, 1: in it, 2: after it.
    let mut part = 0;
    for (field, v) in key {
        let is_text = v.as_str() == Some(TEXT);
        if field == FTS || field == FTSX || is_text {
            if part == 2 {
                return Err(bad_spec(d, "'text' fields in index must all be adjacent"));
            }
            if part == 0 {
                stored.insert(FTS, TEXT);
                stored.insert(FTSX, 1);
            }
            part = 1;
            if field == FTS && !is_text || field == FTSX && super::as_i64(v) != Some(1) {
                return Err(bad_spec(d, format!("expecting {FTS}:\"{TEXT}\", {FTSX}:1")));
            }
            if field != FTS && field != FTSX {
                text_fields.push(field.clone());
            }
            continue;
        }
        if part == 1 {
            part = 2;
        }
        if !matches!(super::as_i64(v), Some(1 | -1)) || v.as_str().is_some() {
            return Err(bad_spec(
                d,
                "expected value 1 or -1 for non-text key in compound index",
            ));
        }
        stored.insert(field.clone(), v.clone());
    }
    Ok((stored, text_fields))
}

/// A text index in mongod's stored form: the key `{_fts: "text", _ftsx: 1}` and, as options,
/// the text fields in `weights` (1 unless given), `default_language`, `language_override` and
/// `textIndexVersion`. A compound text index keeps its other key fields around the text part:
/// `{a: 1, t: "text", b: 1}` is stored as `{a: 1, _fts: "text", _ftsx: 1, b: 1}`.
fn text_options(d: &Document, key: &Document) -> CommandResult<(Document, Document)> {
    use storage::text::{self, language};
    let (stored, text_fields) = text_key(d, key)?;
    let mut weights: std::collections::BTreeMap<String, Bson> = Default::default();
    for field in text_fields {
        weights.insert(field, Bson::Int32(1));
    }
    match d.get("weights") {
        None => {}
        Some(Bson::Document(w)) => {
            for (field, v) in w {
                if !crate::query::types::is_number(v) {
                    return Err(bad_spec(d, "weight for text index needs numeric type"));
                }
                weights.insert(field.clone(), v.clone());
            }
        }
        Some(Bson::String(s)) if s == text::WILDCARD => {
            weights.insert(s.clone(), Bson::Int32(1));
        }
        Some(_) => return Err(bad_spec(d, "text index option 'weights' must be an object")),
    }
    let string_option = |name: &str, default: &str| match d.get(name) {
        None => Ok(default.to_string()),
        Some(Bson::String(s)) => Ok(s.clone()),
        Some(_) => Err(bad_spec(
            d,
            format!("text index option '{name}' must be a string"),
        )),
    };
    let default_language = string_option("default_language", language::DEFAULT_LANGUAGE)?;
    let language_override = string_option("language_override", text::LANGUAGE_OVERRIDE_DEFAULT)?;
    if let Some(v) = d.get("textIndexVersion")
        && super::as_i64(v) != Some(i64::from(text::TEXT_INDEX_VERSION))
    {
        return Err(bad_spec(
            d,
            format!(
                "cairn builds textIndexVersion {} only, not {v}",
                text::TEXT_INDEX_VERSION
            ),
        ));
    }
    let options = doc! {
        "weights": weights.into_iter().collect::<Document>(),
        "default_language": default_language,
        "language_override": language_override,
        "textIndexVersion": text::TEXT_INDEX_VERSION,
    };
    text::TextSpec::from_index(&stored, &options).map_err(|e| bad_spec(d, e))?;
    Ok((stored, options))
}

/// mongod's rules for wildcard key patterns (`$**`, `a.$**`) and `wildcardProjection`; the
/// projection, and a compound index's other fields (one wildcard term, plain ascending or
/// descending fields that the wildcard term does not cover), are checked by `storage::wildcard`.
fn wildcard_rules(d: &Document, key: &Document) -> CommandResult<()> {
    use storage::wildcard::{PROJECTION, WildcardSpec, is_wildcard_field};
    // `{"$**": "text"}` is a text index over every string (`text_options`).
    if is_text(key) {
        return Ok(());
    }
    let terms: Vec<(&String, &Bson)> = key.iter().filter(|(k, _)| is_wildcard_field(k)).collect();
    let Some((field, direction)) = terms.first() else {
        if d.contains_key(PROJECTION) {
            return Err(bad_spec(
                d,
                "The field 'wildcardProjection' is only allowed in an 'wildcard' index",
            ));
        }
        return Ok(());
    };
    if !crate::query::types::as_f64(direction).is_some_and(|f| f > 0.0) {
        return Err(bad_spec(
            d,
            format!("cairn builds ascending wildcard indexes only, not {{ {field}: {direction} }}"),
        ));
    }
    for option in ["unique", "sparse", "expireAfterSeconds"] {
        let set = match option {
            "expireAfterSeconds" => d.contains_key(option),
            _ => d.get(option).is_some_and(truthy),
        };
        if set {
            return Err(bad_spec(
                d,
                format!("Index type 'wildcard' does not support the '{option}' option"),
            ));
        }
    }
    if field.as_str() != storage::wildcard::WILDCARD && d.contains_key(PROJECTION) {
        return Err(bad_spec(
            d,
            "The field 'wildcardProjection' is only allowed in an index with a key of { \"$**\": ... }",
        ));
    }
    WildcardSpec::from_index(key, d).map_err(|e| bad_spec(d, e))?;
    Ok(())
}

/// Turn one element of `indexes` into an `IndexSpec`, checking it as mongod does.
pub fn parse_spec(d: &Document) -> CommandResult<IndexSpec> {
    for k in d.keys() {
        if !SPEC_FIELDS.contains(&k.as_str()) {
            return Err(err(
                ErrorCode::InvalidIndexSpecificationOption,
                format!(
                    "The field '{k}' is not valid for an index specification. Specification: {d}"
                ),
            ));
        }
    }
    let key = match d.get("key") {
        Some(Bson::Document(k)) if !k.is_empty() => k.clone(),
        Some(Bson::Document(_)) => return Err(bad_spec(d, "Index keys cannot be an empty field.")),
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "The 'key' field is a required property of an index specification",
            ));
        }
    };
    // Checked before the index type is looked at, as mongod does.
    if d.get("unique").is_some_and(truthy) && key.values().any(|v| v.as_str() == Some("hashed")) {
        return Err(err(
            ErrorCode::Location16764,
            "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
        ));
    }
    // An `_id` key pattern takes only these fields (mongod: TTL, hidden, unique, sparse, ... 197).
    if key == doc! { "_id": 1 }
        && let Some(option) = d.keys().find(|k| {
            !matches!(
                k.as_str(),
                "key" | "name" | "v" | "ns" | "collation" | "_id"
            )
        })
    {
        return Err(err(
            ErrorCode::InvalidIndexSpecificationOption,
            format!(
                "The field '{option}' is not valid for an _id index specification. Specification: {d}"
            ),
        ));
    }
    let hashed = key
        .values()
        .filter(|v| v.as_str() == Some("hashed"))
        .count();
    if hashed > 1 {
        return Err(err(
            ErrorCode::Location31303,
            format!(
                "A maximum of one index field is allowed to be hashed but found {hashed} for 'key' {key}"
            ),
        ));
    }
    for (field, v) in &key {
        if field.is_empty() {
            return Err(bad_spec(d, "Index keys cannot be an empty field."));
        }
        match v {
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                if crate::query::types::as_f64(v).is_some_and(|f| f == 0.0 || f.is_nan()) {
                    return Err(bad_spec(
                        d,
                        format!("Values in the index key pattern can't be zero: {field}"),
                    ));
                }
            }
            Bson::String(t) if t == "hashed" || t == "2dsphere" || t == "2d" || t == "text" => {}
            Bson::String(t) if UNSUPPORTED_TYPES.contains(&t.as_str()) => {
                return Err(err(
                    ErrorCode::CannotCreateIndex,
                    format!("'{t}' indexes are not supported by cairn yet"),
                ));
            }
            _ => {
                return Err(bad_spec(
                    d,
                    format!("Unknown index plugin or bad key value for '{field}': {v}"),
                ));
            }
        }
    }
    wildcard_rules(d, &key)?;
    let name = match d.get("name") {
        Some(Bson::String(n)) if !n.is_empty() && n != "*" => n.clone(),
        Some(Bson::String(n)) if n == "*" => {
            return Err(bad_spec(d, "The index name '*' is not valid."));
        }
        Some(Bson::String(_)) => {
            return Err(err(
                ErrorCode::CannotCreateIndex,
                "The index name cannot be empty",
            ));
        }
        None => default_name(&key),
        _ => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "The field 'name' must be a non-empty string",
            ));
        }
    };
    let collation = super::index_collation::parse(d)?;
    let expire = match d.get("expireAfterSeconds") {
        None => None,
        Some(v) => {
            let secs = super::as_i64(v).ok_or_else(|| {
                bad_spec(d, "TTL index 'expireAfterSeconds' option must be numeric")
            })?;
            if !(0..=i32::MAX as i64).contains(&secs) {
                return Err(bad_spec(
                    d,
                    "TTL index 'expireAfterSeconds' option must be within an acceptable range",
                ));
            }
            if key.len() != 1 {
                return Err(bad_spec(
                    d,
                    "TTL indexes are single-field indexes, compound indexes do not support TTL.",
                ));
            }
            Some(secs)
        }
    };
    let partial = match d.get("partialFilterExpression") {
        None => None,
        Some(Bson::Document(p)) => {
            crate::query::matcher::Filter::parse(p)?;
            Some(p.clone())
        }
        Some(_) => {
            return Err(bad_spec(
                d,
                "The field 'partialFilterExpression' must be an object",
            ));
        }
    };
    let sparse = d.get("sparse").is_some_and(truthy);
    if sparse && partial.is_some() {
        return Err(bad_spec(
            d,
            "cannot mix \"partialFilterExpression\" and \"sparse\" options",
        ));
    }
    let unique = d.get("unique").is_some_and(truthy);
    let hidden = d.get("hidden").is_some_and(truthy);
    if name == ID_INDEX_NAME
        && (key != doc! { "_id": 1 } || unique || sparse || partial.is_some() || hidden)
    {
        return Err(bad_spec(
            d,
            "The _id index is always { _id: 1 }, unique, not sparse, not partial, not hidden",
        ));
    }
    let mut extra = Document::new();
    for (k, v) in d {
        if matches!(
            k.as_str(),
            "storageEngine" | "weights" | "default_language" | "wildcardProjection"
        ) {
            extra.insert(k.clone(), v.clone());
        }
    }
    // Normalised; `plan_builds` settles it against the collection's default.
    if let Some(c) = collation {
        extra.insert(storage::COLLATION, c);
    }
    if key.values().any(|v| v.as_str() == Some("2d")) {
        flat_options(d, &mut extra)?;
    }
    if key.values().any(|v| v.as_str() == Some("2dsphere")) {
        let version = match d.get("2dsphereIndexVersion") {
            None => 3,
            Some(v) => match super::as_i64(v) {
                Some(n @ 1..=3) => n as i32,
                _ => {
                    return Err(bad_spec(
                        d,
                        format!(
                            "unsupported geo index version {{ 2dsphereIndexVersion : {v} }}, only versions: [1,2,3] are supported"
                        ),
                    ));
                }
            },
        };
        extra.insert("2dsphereIndexVersion", version);
    }
    let unique = unique && name != ID_INDEX_NAME;
    let key = if is_text(&key) {
        let (stored, options) = text_options(d, &key)?;
        extra.remove("weights");
        extra.remove("default_language");
        extra.extend(options);
        stored
    } else {
        key
    };
    Ok(IndexSpec {
        name,
        key,
        unique,
        sparse,
        partial_filter: partial,
        expire_after_seconds: expire,
        hidden,
        extra,
    })
}

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
        if e.name == requested.name && e.extra == requested.extra && same_options(e, requested) {
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

    #[test]
    fn default_names() {
        assert_eq!(default_name(&doc! { "a": 1, "b.c": -1 }), "a_1_b.c_-1");
    }

    #[test]
    fn spec_checks() {
        assert!(parse_spec(&doc! { "key": { "a": 1 } }).is_ok());
        assert_eq!(
            parse_spec(&doc! { "key": { "a": 1 }, "bogus": 1 })
                .unwrap_err()
                .code,
            ErrorCode::InvalidIndexSpecificationOption
        );
        assert_eq!(
            parse_spec(&doc! { "key": { "a": 1, "b": 1 }, "expireAfterSeconds": 5 })
                .unwrap_err()
                .code,
            ErrorCode::CannotCreateIndex
        );
        assert_eq!(
            parse_spec(&doc! { "key": { "a": "geoHaystack" } })
                .unwrap_err()
                .code,
            ErrorCode::CannotCreateIndex
        );
        assert_eq!(
            parse_spec(&doc! { "key": {} }).unwrap_err().code,
            ErrorCode::CannotCreateIndex
        );
        let code = |d: Document| parse_spec(&d).unwrap_err().code.code();
        assert_eq!(code(doc! { "key": { "a": 1 }, "name": "" }), 67);
        assert_eq!(
            code(doc! { "key": { "a": "hashed" }, "unique": true }),
            16764
        );
        assert_eq!(
            code(doc! { "key": { "a": "hashed", "b": "hashed" } }),
            31303
        );
        let compound = parse_spec(&doc! { "key": { "a": 1, "b": "hashed" } }).unwrap();
        assert_eq!(compound.name, "a_1_b_hashed");
        assert!(parse_spec(&doc! { "key": { "$**": "text" } }).is_ok());
        // Wildcard specs: the options mongod refuses, each 67.
        for bad in [
            doc! { "key": { "$**": 1 }, "unique": true },
            doc! { "key": { "$**": 1 }, "sparse": true },
            doc! { "key": { "$**": 1 }, "expireAfterSeconds": 5 },
            doc! { "key": { "a": 1 }, "wildcardProjection": { "a": 1 } },
            doc! { "key": { "a.$**": 1 }, "wildcardProjection": { "a": 1 } },
            doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": 1, "b": 0 } },
            doc! { "key": { "$**": 1, "b": 1 } },
        ] {
            assert_eq!(code(bad.clone()), 67, "{bad}");
        }
        let wild = parse_spec(&doc! { "key": { "a.$**": 1 } }).unwrap();
        assert_eq!(wild.name, "a.$**_1");
        let projected =
            parse_spec(&doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": 0 } }).unwrap();
        assert_eq!(
            projected.extra.get_document("wildcardProjection").unwrap(),
            &doc! { "a": 0 }
        );
        assert_eq!(
            code(doc! { "key": { "_id": 1 }, "expireAfterSeconds": 5 }),
            197
        );
        assert_eq!(
            code(doc! { "key": { "_id": 1 }, "name": "_id_", "hidden": true }),
            197
        );
        for option in ["unique", "sparse", "background", "partialFilterExpression"] {
            let spec = doc! { "key": { "_id": 1 }, "name": "_id_1", option: true };
            assert_eq!(code(spec), 197, "{option}");
        }
        let plain = doc! { "key": { "_id": 1 }, "name": "_id_", "v": 2, "collation": { "locale": "simple" } };
        assert!(parse_spec(&plain).is_ok());
    }

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
