//! Strict reading of command arguments, with mongod's error codes and messages: unknown fields
//! (40415), wrong types (TypeMismatch, "BSON field 'find.limit' is the wrong type ..."), and the
//! generic fields every command accepts.

use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document, RawDocument};

/// Fields any command may carry (drivers add them; dispatch reads the ones it needs).
pub(super) const GENERIC_FIELDS: &[&str] = &[
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "writeConcern",
    "readConcern",
    "comment",
    "maxTimeMS",
    "$audit",
    "$client",
    "mayBypassWriteBlocking",
    "$configServerState",
    "$gleStats",
    "databaseVersion",
    "shardVersion",
    "$queryOptions",
];

/// Reject fields other than `allowed` (and the generic ones), as mongod's IDL parsers do.
pub fn check_fields(body: &Document, command: &str, allowed: &[&str]) -> CommandResult<()> {
    for key in body.keys().skip(1) {
        if !allowed.contains(&key.as_str()) && !GENERIC_FIELDS.contains(&key.as_str()) {
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field '{command}.{key}' is an unknown field."),
            ));
        }
    }
    Ok(())
}

/// Reject fields of a nested document other than `allowed` (every key is checked).
pub fn check_fields_all(d: &Document, path: &str, allowed: &[&str]) -> CommandResult<()> {
    for key in d.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field '{path}.{key}' is an unknown field."),
            ));
        }
    }
    Ok(())
}

/// Bodies up to this many fields are checked for repeats pairwise (no allocation); larger ones
/// through a hash set, so a hostile body with 40,000 fields costs linear time.
const DUPLICATE_SCAN_PAIRWISE_MAX: usize = 16;

/// Reject a command body that names one field twice, as mongod's IDL parsers do (40413). A
/// `Document` keeps one of the values silently, so this runs on the raw bytes, before conversion.
pub fn check_duplicate_fields(body: &RawDocument) -> CommandResult<()> {
    let mut keys: Vec<&str> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for elem in body.iter() {
        let Ok((key, _)) = elem else {
            return Err(err(
                ErrorCode::InvalidBSON,
                "invalid BSON in the command body",
            ));
        };
        let key = key.as_str();
        let repeated = if keys.len() < DUPLICATE_SCAN_PAIRWISE_MAX {
            let r = keys.contains(&key);
            keys.push(key);
            r
        } else {
            if seen.is_empty() {
                seen.extend(keys.iter().copied());
            }
            !seen.insert(key)
        };
        if repeated {
            let command = keys.first().copied().unwrap_or(key);
            return Err(err(
                ErrorCode::Location40413,
                format!("BSON field '{command}.{key}' is a duplicate field"),
            ));
        }
    }
    Ok(())
}

fn wrong_type(command: &str, field: &str, v: &Bson, expected: &str) -> crate::error::CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{command}.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// The collection name a command names in its first field.
pub fn collection_name(body: &Document, command: &str) -> CommandResult<String> {
    match body.get(command) {
        Some(Bson::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Bson::String(_)) => Err(err(
            ErrorCode::InvalidNamespace,
            "Invalid namespace specified: empty collection name",
        )),
        Some(v) => Err(err(
            ErrorCode::InvalidNamespace,
            format!("collection name has invalid type {}", type_name(v)),
        )),
        None => Err(err(
            ErrorCode::FailedToParse,
            format!("missing '{command}' field"),
        )),
    }
}

pub fn opt_doc<'a>(
    body: &'a Document,
    command: &str,
    field: &str,
) -> CommandResult<Option<&'a Document>> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(v) => Err(wrong_type(command, field, v, "object")),
    }
}

pub fn opt_bool(body: &Document, command: &str, field: &str) -> CommandResult<Option<bool>> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))) => {
            Ok(Some(crate::query::types::truthy(v)))
        }
        Some(v) => Err(wrong_type(command, field, v, "bool")),
    }
}

pub fn opt_i64(body: &Document, command: &str, field: &str) -> CommandResult<Option<i64>> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Int32(i)) => Ok(Some(*i as i64)),
        Some(Bson::Int64(i)) => Ok(Some(*i)),
        Some(Bson::Double(f)) if f.is_finite() => Ok(Some(f.trunc() as i64)),
        Some(v) => Err(wrong_type(command, field, v, "long")),
    }
}

/// A non-negative integer argument (skip, batchSize).
pub fn opt_non_negative(body: &Document, command: &str, field: &str) -> CommandResult<Option<i64>> {
    let v = opt_i64(body, command, field)?;
    if let Some(n) = v
        && n < 0
    {
        return Err(err(
            ErrorCode::Location51024,
            format!("BSON field '{field}' value must be >= 0, actual value '{n}'"),
        ));
    }
    Ok(v)
}

/// The operation's collator (see `query::collator`): the command's `collation`, else the
/// collection's default, else the simple collation (`None`).
pub fn collator(
    body: &Document,
    command: &str,
    coll: Option<&storage::Collection>,
) -> CommandResult<Option<std::sync::Arc<crate::query::collator::Collator>>> {
    let spec = match opt_doc(body, command, "collation")? {
        Some(c) => Some(crate::query::collation::Spec::parse(c)?),
        None => None,
    };
    collator_of(spec.as_ref(), coll)
}

/// The collator of a statement's own collation spec, else the collection's default.
pub fn collator_of(
    spec: Option<&crate::query::collation::Spec>,
    coll: Option<&storage::Collection>,
) -> CommandResult<Option<std::sync::Arc<crate::query::collator::Collator>>> {
    match spec {
        Some(s) => crate::query::collator::for_spec(s),
        None => default_collator(coll),
    }
}

/// The collection's default collator (its `create` `collation` option), if it has one.
pub fn default_collator(
    coll: Option<&storage::Collection>,
) -> CommandResult<Option<std::sync::Arc<crate::query::collator::Collator>>> {
    match coll.and_then(storage::Collection::default_collation) {
        Some(c) => crate::query::collator::for_spec(&crate::query::collation::Spec::parse(&c)?),
        None => Ok(None),
    }
}

/// [`collator`] made the current one until the returned scope drops.
pub fn collation_scope(
    body: &Document,
    command: &str,
    coll: Option<&storage::Collection>,
) -> CommandResult<crate::query::collator::Scope> {
    Ok(crate::query::collator::scope(collator(
        body, command, coll,
    )?))
}

/// `hint`: an index name or key pattern that must name an existing index.
pub fn check_hint(
    body: &Document,
    coll: Option<&storage::Collection>,
) -> CommandResult<Option<String>> {
    let hint = match body.get("hint") {
        None | Some(Bson::Null) => return Ok(None),
        Some(Bson::Document(d)) if d.is_empty() => return Ok(None),
        Some(h @ (Bson::String(_) | Bson::Document(_))) => h,
        Some(_) => {
            return Err(err(
                ErrorCode::FailedToParse,
                "hint must be a string or an object",
            ));
        }
    };
    if let Bson::Document(d) = hint
        && d.keys().next().is_some_and(|k| k == "$natural")
    {
        return Ok(None);
    }
    let Some(coll) = coll else { return Ok(None) };
    // A clustered collection's `_id` index answers to the clustered index's name too.
    let clustered = super::clustered::index_name(coll);
    let found = coll.indexes().into_iter().find(|ix| match hint {
        Bson::String(name) => {
            &ix.spec.name == name
                || (ix.spec.name == storage::ID_INDEX_NAME && clustered.as_ref() == Some(name))
        }
        Bson::Document(key) => &ix.spec.key == key,
        _ => false,
    });
    match found {
        Some(ix) => Ok(Some(ix.spec.name)),
        None => Err(err(
            ErrorCode::BadValue,
            "hint provided does not correspond to an existing index",
        )),
    }
}

/// The command's `let` variables, evaluated once (they may be expressions of constants).
pub fn let_variables(body: &Document, command: &str) -> CommandResult<Option<Document>> {
    let Some(spec) = opt_doc(body, command, "let")? else {
        return Ok(None);
    };
    let empty = bson::RawDocumentBuf::new();
    let mut vars = Document::new();
    for (name, v) in spec {
        let value = crate::query::expr::Expr::parse(v)?.evaluate(&empty)?;
        vars.insert(name.clone(), value);
    }
    Ok(Some(vars))
}

/// Bind `let` variables in a filter: `$$name` means something only inside `$expr`, so only
/// `$expr` values (also under `$and`/`$or`/`$nor`) are rewritten, each use to a `$literal`.
pub fn bind_let(filter: &Document, vars: Option<&Document>) -> Document {
    let Some(vars) = vars else {
        return filter.clone();
    };
    let mut out = Document::new();
    for (k, v) in filter {
        let bound = match (k.as_str(), v) {
            ("$expr", v) => crate::query::pipeline::variables::substitute(v, vars),
            ("$and" | "$or" | "$nor", Bson::Array(items)) => Bson::Array(
                items
                    .iter()
                    .map(|i| match i {
                        Bson::Document(d) => Bson::Document(bind_let(d, Some(vars))),
                        other => other.clone(),
                    })
                    .collect(),
            ),
            _ => v.clone(),
        };
        out.insert(k.clone(), bound);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn let_binds_only_inside_expr() {
        let body = doc! { "find": "c", "let": { "x": { "$add": [1, 2] } } };
        let vars = let_variables(&body, "find").unwrap();
        let f = doc! { "a": "$$x", "$expr": { "$eq": ["$a", "$$x"] }, "$or": [ { "$expr": { "$gt": ["$b", "$$x"] } } ] };
        let bound = bind_let(&f, vars.as_ref());
        assert_eq!(bound.get_str("a").unwrap(), "$$x");
        assert_eq!(
            bound.get_document("$expr").unwrap(),
            &doc! { "$eq": ["$a", { "$literal": 3 }] }
        );
        let mut bound = bound;
        bound.remove("a");
        let filter = crate::query::matcher::Filter::parse(&bound).unwrap();
        let d = bson::RawDocumentBuf::try_from(&doc! { "a": 3, "b": 4 }).unwrap();
        assert!(filter.matches(&d));
    }
}
