//! `setQuerySettings` and `removeQuerySettings` (mongod 8.0, admin only), and the
//! `$querySettings` stage: the commands' arguments checked as mongod checks them, settings
//! merged into an existing entry field by field, simplified (`reject: false` and index hints
//! without indexes dropped) and refused when nothing is left (7746604). The store and how
//! settings reach queries: `crate::query_settings`.

use super::{Reply, Request};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query_settings::Entry;
use crate::query_shape::Shape;
use crate::state::ServerState;
use bson::{Bson, Document, doc};

/// What the command's first field names: a representative query, or a hash.
enum Target {
    Query(Box<Shape>, Document),
    Hash(String),
}

fn target(req: &Request) -> CommandResult<Target> {
    let name = req.command;
    match req.body.get(name) {
        Some(Bson::Document(q)) => {
            let shape = Shape::of_representative(q)?;
            check_query(&shape, q)?;
            Ok(Target::Query(Box::new(shape), q.clone()))
        }
        Some(Bson::String(h)) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(Target::Hash(h.to_ascii_uppercase()))
        }
        Some(Bson::String(h)) => Err(err(
            ErrorCode::BadValue,
            format!("invalid query shape hash '{h}': expected 64 hexadecimal digits"),
        )),
        Some(v) => Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field '{name}.{name}' is the wrong type '{}', expected types '[string, object]'",
                super::args::type_name(v)
            ),
        )),
        None => Err(err(
            ErrorCode::Location40414,
            format!("BSON field '{name}.{name}' is missing but a required field"),
        )),
    }
}

/// mongod's refusals of a representative query: internal databases, system collections, an
/// `_id` point `find` (answered without planning, so settings could not apply).
fn check_query(shape: &Shape, q: &Document) -> CommandResult<()> {
    if matches!(shape.db.as_str(), "admin" | "config" | "local") {
        return Err(err(
            ErrorCode::Location8584900,
            "setQuerySettings command cannot be used on internal databases",
        ));
    }
    if shape.coll.starts_with("system.") {
        return Err(err(
            ErrorCode::Location8584901,
            "setQuerySettings command cannot be used on system collections",
        ));
    }
    let id_point = q.contains_key("find")
        && q.get_document("filter").is_ok_and(|f| {
            f.len() == 1
                && matches!(f.get("_id"), Some(v) if !matches!(v, Bson::Document(_) | Bson::Array(_) | Bson::RegularExpression(_)))
        });
    if id_point {
        return Err(err(
            ErrorCode::Location7746606,
            "setQuerySettings command cannot be used on find queries eligible for IDHACK",
        ));
    }
    Ok(())
}

/// The `settings` argument, checked and normalised (`indexHints` always an array of `{ns,
/// allowedIndexes}`); `ns` defaults to the representative query's namespace.
fn parse_settings(body: &Document, ns: Option<(&str, &str)>) -> CommandResult<Document> {
    let settings = match body.get("settings") {
        Some(Bson::Document(d)) => d,
        Some(v) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'setQuerySettings.settings' is the wrong type '{}', expected type 'object'",
                    super::args::type_name(v)
                ),
            ));
        }
        None => {
            return Err(err(
                ErrorCode::Location40414,
                "BSON field 'setQuerySettings.settings' is missing but a required field",
            ));
        }
    };
    if settings.is_empty() {
        return Err(err(
            ErrorCode::Location8727502,
            "settings field in setQuerySettings command cannot be empty",
        ));
    }
    let mut out = Document::new();
    for (k, v) in settings {
        match (k.as_str(), v) {
            ("indexHints", v) => {
                out.insert("indexHints", index_hints(v, ns)?);
            }
            ("queryFramework", Bson::String(s)) if s == "classic" || s == "sbe" => {
                out.insert(k, v.clone());
            }
            ("queryFramework", Bson::String(s)) => {
                return Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "Enumeration value '{s}' for field 'queryFramework' is not a valid value."
                    ),
                ));
            }
            ("reject", Bson::Boolean(_)) | ("comment", _) => {
                out.insert(k, v.clone());
            }
            ("queryFramework" | "reject", v) => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field 'QuerySettings.{k}' is the wrong type '{}'",
                        super::args::type_name(v)
                    ),
                ));
            }
            // `QuerySettings` is not strict in mongod: other fields are ignored.
            _ => {}
        }
    }
    Ok(out)
}

fn index_hints(v: &Bson, ns: Option<(&str, &str)>) -> CommandResult<Bson> {
    let items: Vec<&Bson> = match v {
        Bson::Array(a) => a.iter().collect(),
        Bson::Document(_) => vec![v],
        other => {
            return Err(err(
                ErrorCode::FailedToParse,
                format!(
                    "invalid indexHints specification: expected an object or an array, found {}",
                    super::args::type_name(other)
                ),
            ));
        }
    };
    let mut out = Vec::new();
    for item in items {
        let Bson::Document(h) = item else {
            return Err(err(
                ErrorCode::FailedToParse,
                "invalid indexHints specification: every element must be an object",
            ));
        };
        let spec_ns = match (h.get_document("ns"), ns) {
            (Ok(n), _) => match (n.get_str("db"), n.get_str("coll")) {
                (Ok(d), Ok(c)) => doc! { "db": d, "coll": c },
                _ => {
                    return Err(err(
                        ErrorCode::Location40414,
                        "BSON field 'IndexHintSpec.ns' needs 'db' and 'coll' strings",
                    ));
                }
            },
            (Err(_), Some((d, c))) => doc! { "db": d, "coll": c },
            (Err(_), None) => {
                return Err(err(
                    ErrorCode::Location40414,
                    "BSON field 'IndexHintSpec.ns' is missing but a required field",
                ));
            }
        };
        let allowed = match h.get("allowedIndexes") {
            Some(Bson::Array(a)) => a.clone(),
            Some(_) => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    "BSON field 'IndexHintSpec.allowedIndexes' is the wrong type, expected type 'array'",
                ));
            }
            None => {
                return Err(err(
                    ErrorCode::Location40414,
                    "BSON field 'IndexHintSpec.allowedIndexes' is missing but a required field",
                ));
            }
        };
        if let Some(bad) = allowed
            .iter()
            .find(|i| !matches!(i, Bson::String(_) | Bson::Document(_)))
        {
            return Err(err(
                ErrorCode::FailedToParse,
                format!(
                    "invalid index hint: expected an index name or key pattern, found {}",
                    super::args::type_name(bad)
                ),
            ));
        }
        out.push(Bson::Document(
            doc! { "ns": spec_ns, "allowedIndexes": allowed },
        ));
    }
    Ok(Bson::Array(out))
}

/// `lhs` with `rhs`'s fields over it, then simplified as mongod simplifies (`reject: false`
/// and hints without indexes dropped); an error when nothing is left.
fn merged(lhs: &Document, rhs: &Document) -> CommandResult<Document> {
    let mut out = lhs.clone();
    for (k, v) in rhs {
        out.insert(k.clone(), v.clone());
    }
    if out.get_bool("reject").ok() == Some(false) {
        out.remove("reject");
    }
    if let Ok(hints) = out.get_array("indexHints") {
        let kept: Vec<Bson> = hints
            .iter()
            .filter(|h| {
                h.as_document()
                    .and_then(|h| h.get_array("allowedIndexes").ok())
                    .is_some_and(|a| !a.is_empty())
            })
            .cloned()
            .collect();
        if kept.is_empty() {
            out.remove("indexHints");
        } else {
            out.insert("indexHints", kept);
        }
    }
    let meaningful = ["indexHints", "queryFramework", "reject"];
    if !meaningful.iter().any(|k| out.contains_key(*k)) {
        return Err(err(
            ErrorCode::Location7746604,
            "the resulting settings cannot be empty or contain only default values",
        ));
    }
    Ok(out)
}

/// `setQuerySettings`: runs on the storage pool (it persists the settings).
pub fn set(state: &ServerState, req: &Request) -> CommandResult<(Reply, storage::Ticket)> {
    let target = target(req)?;
    let (hash, representative, shape, ns) = match &target {
        Target::Query(s, q) => (
            s.hash_hex(),
            Some(q.clone()),
            Some(s.doc.clone()),
            Some((s.db.as_str(), s.coll.as_str())),
        ),
        Target::Hash(h) => (h.clone(), None, None, None),
    };
    let settings = parse_settings(&req.body, ns)?;
    let store = &state.query_settings;
    let _change = store.change.lock().unwrap_or_else(|p| p.into_inner());
    let mut all = store.snapshot();
    let previous = all.get(&hash);
    let settings = merged(
        previous.map(|e| &e.settings).unwrap_or(&Document::new()),
        &settings,
    )?;
    let entry = Entry {
        hash: hash.clone(),
        settings,
        representative: representative.or_else(|| previous.and_then(|e| e.representative.clone())),
        shape: shape.or_else(|| previous.and_then(|e| e.shape.clone())),
    };
    if previous.is_none() && all.len() >= crate::limits::QUERY_SETTINGS_MAX {
        return Err(err(
            ErrorCode::ExceededMemoryLimit,
            format!(
                "cannot set more than {} query settings",
                crate::limits::QUERY_SETTINGS_MAX
            ),
        ));
    }
    all.insert(hash.clone(), entry.clone());
    let ticket = store.replace_all(state.catalog.engine(), all)?;
    let mut reply = doc! { "queryShapeHash": hash, "settings": entry.settings };
    if let Some(r) = entry.representative {
        reply.insert("representativeQuery", r);
    }
    reply.insert("ok", 1.0);
    Ok((Reply::Doc(reply), ticket))
}

/// `removeQuerySettings`: removing settings that do not exist is not an error (mongod).
pub fn remove(
    state: &ServerState,
    req: &Request,
) -> CommandResult<(Reply, Option<storage::Ticket>)> {
    let hash = match target(req)? {
        Target::Query(s, _) => s.hash_hex(),
        Target::Hash(h) => h,
    };
    let store = &state.query_settings;
    let _change = store.change.lock().unwrap_or_else(|p| p.into_inner());
    let mut all = store.snapshot();
    if all.remove(&hash).is_none() {
        return Ok((Reply::ok(), None));
    }
    let ticket = store.replace_all(state.catalog.engine(), all)?;
    Ok((Reply::ok(), Some(ticket)))
}

/// The `$querySettings` stage (first, on `admin` with `{aggregate: 1}`).
pub fn stage(
    state: &ServerState,
    req: &Request,
    coll: Option<&str>,
    spec: &Bson,
) -> CommandResult<Vec<Document>> {
    let Bson::Document(spec) = spec else {
        return Err(err(
            ErrorCode::FailedToParse,
            format!(
                "$querySettings stage expects a document as argument, found: {}",
                super::args::type_name(spec)
            ),
        ));
    };
    let mut debug = false;
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("showDebugQueryShape", Bson::Boolean(b)) => debug = *b,
            ("showDebugQueryShape", v) => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field '$querySettings.showDebugQueryShape' is the wrong type '{}', expected type 'bool'",
                        super::args::type_name(v)
                    ),
                ));
            }
            _ => {
                return Err(err(
                    ErrorCode::Location40415,
                    format!("BSON field '$querySettings.{k}' is an unknown field."),
                ));
            }
        }
    }
    if req.db != "admin" || coll.is_some() {
        return Err(err(
            ErrorCode::InvalidNamespace,
            "$querySettings must be run against the 'admin' database with {aggregate: 1}",
        ));
    }
    Ok(state
        .query_settings
        .list()
        .into_iter()
        .map(|e| {
            let mut d = doc! { "queryShapeHash": e.hash, "settings": e.settings };
            if let Some(r) = e.representative {
                d.insert("representativeQuery", r);
            }
            if let (true, Some(s)) = (debug, e.shape) {
                d.insert("debugQueryShape", s);
            }
            d
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code<T>(r: CommandResult<T>) -> i32 {
        r.map(|_| 0).unwrap_or_else(|e| e.code.code())
    }

    #[test]
    fn settings_are_checked_and_normalised() {
        let p = |s: Bson| parse_settings(&doc! { "settings": s }, Some(("d", "c")));
        assert_eq!(code(parse_settings(&doc! {}, None)), 40414);
        assert_eq!(code(p(Bson::Int32(1))), 14);
        assert_eq!(code(p(Bson::Document(doc! {}))), 8727502);
        assert_eq!(code(p(Bson::Document(doc! { "reject": 1 }))), 14);
        assert_eq!(code(p(Bson::Document(doc! { "queryFramework": "x" }))), 2);
        assert_eq!(
            code(p(Bson::Document(
                doc! { "indexHints": { "allowedIndexes": [1] } }
            ))),
            9
        );
        let s = p(Bson::Document(
            doc! { "indexHints": { "allowedIndexes": ["a_1"] } },
        ))
        .unwrap();
        assert_eq!(
            s.get_array("indexHints").unwrap()[0],
            Bson::Document(doc! { "ns": { "db": "d", "coll": "c" }, "allowedIndexes": ["a_1"] })
        );
        let by_hash = parse_settings(
            &doc! { "settings": { "indexHints": { "allowedIndexes": ["a_1"] } } },
            None,
        );
        assert_eq!(code(by_hash), 40414);
    }

    #[test]
    fn merging_overrides_and_simplifies() {
        let m = merged(
            &doc! { "reject": true },
            &doc! { "queryFramework": "classic" },
        )
        .unwrap();
        assert_eq!(m, doc! { "reject": true, "queryFramework": "classic" });
        assert_eq!(
            code(merged(&doc! { "reject": true }, &doc! { "reject": false })),
            7746604
        );
        let m = merged(
            &doc! { "reject": true },
            &doc! { "reject": false, "queryFramework": "sbe" },
        )
        .unwrap();
        assert_eq!(m, doc! { "queryFramework": "sbe" });
        let empty_hints =
            doc! { "indexHints": [{ "ns": { "db": "d", "coll": "c" }, "allowedIndexes": [] }] };
        assert_eq!(code(merged(&doc! {}, &empty_hints)), 7746604);
    }

    #[test]
    fn representative_queries_mongod_refuses() {
        let shape = |q: Document| {
            let s = Shape::of_representative(&q).unwrap();
            code(check_query(&s, &q))
        };
        assert_eq!(
            shape(doc! { "find": "c", "filter": { "a": 1 }, "$db": "admin" }),
            8584900
        );
        assert_eq!(shape(doc! { "find": "system.js", "$db": "d" }), 8584901);
        assert_eq!(
            shape(doc! { "find": "c", "filter": { "_id": 1 }, "$db": "d" }),
            7746606
        );
        assert_eq!(
            shape(doc! { "find": "c", "filter": { "_id": { "$gt": 1 } }, "$db": "d" }),
            0
        );
    }
}
