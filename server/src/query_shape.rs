//! Query shapes: what `find` and `aggregate` commands have in common once their values are
//! taken out, so that query settings (`crate::query_settings`) and query statistics
//! (`crate::query_stats`) can key on it.
//!
//! A shape is a document `{cmdNs: {db, coll}, command, ...}`: for `find` the filter with every
//! value replaced by its type (`planner::cache::filter_shape`, the index filters' shape), the
//! sort and projection as given, the collation, and `"?number"` for a `skip`/`limit` that is
//! present; for `aggregate` each stage, its `$match` shaped as a filter and every other literal
//! replaced by its type (field paths, strings starting with `$`, kept). This follows mongod's
//! idea (values out, structure in) but not its exact serialization, so `queryShapeHash` (the
//! SHA-256 of the shape's BSON, upper-case hex as mongod prints it) differs from mongod's for
//! the same query. Equal shapes have equal hashes; that is what settings and statistics need.
//!
//! The hot path only needs a 64-bit fingerprint, computed straight from the command's fields
//! ([`find_fingerprint`], [`aggregate_fingerprint`], walking a filter as `filter_shape` does and
//! other stage values as `literals_out` does, so equal shapes give equal fingerprints) without
//! building the shape document, which is made only when a statistics entry is created; SHA-256
//! only when a hash is shown or a setting looked up. (Building the shape for every findOne cost
//! about 16,000 instructions, 17% of a findOne by `_id`; see `docs/BENCHMARKS.md`.)

use crate::error::{CommandResult, ErrorCode, err};
use crate::planner::cache::filter_shape;
use bson::{Bson, Document, doc};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};

/// A query's shape and its 64-bit fingerprint.
#[derive(Debug, Clone)]
pub struct Shape {
    pub doc: Document,
    pub fingerprint: u64,
    /// The namespace the query reads (db, collection; "" for `{aggregate: 1}`).
    pub db: String,
    pub coll: String,
}

impl Shape {
    fn new(doc: Document, db: &str, coll: &str) -> Shape {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes(&doc).hash(&mut h);
        Shape {
            fingerprint: h.finish(),
            doc,
            db: db.to_string(),
            coll: coll.to_string(),
        }
    }

    /// A `find` command's shape (`body` as sent).
    pub fn find(db: &str, coll: &str, body: &Document) -> Shape {
        let mut s = Shape::find_doc(db, coll, body);
        s.fingerprint = find_fingerprint(db, coll, body);
        s
    }

    fn find_doc(db: &str, coll: &str, body: &Document) -> Shape {
        let mut d = doc! { "cmdNs": { "db": db, "coll": coll }, "command": "find" };
        if let Ok(f) = body.get_document("filter") {
            d.insert("filter", filter_shape(f));
        }
        for k in ["sort", "projection", "collation"] {
            if let Some(v) = body.get_document(k).ok().filter(|v| !v.is_empty()) {
                d.insert(k, v.clone());
            }
        }
        for k in ["skip", "limit"] {
            if body.contains_key(k) {
                d.insert(k, "?number");
            }
        }
        Shape::new(d, db, coll)
    }

    /// An `aggregate` command's shape (`coll` None for `{aggregate: 1}`).
    pub fn aggregate(db: &str, coll: Option<&str>, pipeline: &[Document]) -> Shape {
        let mut s = Shape::aggregate_doc(db, coll, pipeline);
        s.fingerprint = aggregate_fingerprint(db, coll, pipeline);
        s
    }

    fn aggregate_doc(db: &str, coll: Option<&str>, pipeline: &[Document]) -> Shape {
        let stages: Vec<Bson> = pipeline
            .iter()
            .map(|s| {
                let shaped: Document = s
                    .iter()
                    .map(|(k, v)| match (k.as_str(), v) {
                        ("$match", Bson::Document(f)) => {
                            (k.clone(), Bson::Document(filter_shape(f)))
                        }
                        _ => (k.clone(), literals_out(v)),
                    })
                    .collect();
                Bson::Document(shaped)
            })
            .collect();
        let coll = coll.unwrap_or("");
        let d = doc! {
            "cmdNs": { "db": db, "coll": coll }, "command": "aggregate", "pipeline": stages,
        };
        Shape::new(d, db, coll)
    }

    /// The shape of a representative query as `setQuerySettings` takes it (`{find: ...,
    /// $db}` or `{aggregate: ..., pipeline, $db}`).
    pub fn of_representative(query: &Document) -> CommandResult<Shape> {
        let db = match query.get("$db") {
            Some(Bson::String(s)) => s.clone(),
            Some(_) => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    "BSON field '$db' is the wrong type, expected type 'string'",
                ));
            }
            None => {
                return Err(err(
                    ErrorCode::Location40414,
                    "BSON field '$db' is missing but a required field",
                ));
            }
        };
        match query.iter().next() {
            Some((k, Bson::String(coll))) if k == "find" => Ok(Shape::find(&db, coll, query)),
            Some((k, v)) if k == "aggregate" => {
                let coll = match v {
                    Bson::String(c) => Some(c.as_str()),
                    _ => None,
                };
                let pipeline: Vec<Document> = query
                    .get_array("pipeline")
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_document().cloned())
                    .collect();
                Ok(Shape::aggregate(&db, coll, &pipeline))
            }
            _ => Err(err(
                ErrorCode::InvalidOptions,
                "query settings are only supported for find and aggregate commands",
            )),
        }
    }

    /// mongod's `queryShapeHash` form: SHA-256 of the shape, upper-case hex.
    pub fn hash_hex(&self) -> String {
        let digest = Sha256::digest(bytes(&self.doc));
        digest.iter().map(|b| format!("{b:02X}")).collect()
    }
}

/// The fingerprint of `Shape::find(db, coll, body)`, without building it: the namespace, the
/// filter walked as `filter_shape` walks it (values by type), sort, projection and collation by
/// value, skip and limit by presence.
pub fn find_fingerprint(db: &str, coll: &str, body: &Document) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    "find".hash(&mut h);
    db.hash(&mut h);
    coll.hash(&mut h);
    if let Ok(f) = body.get_document("filter") {
        1u8.hash(&mut h);
        hash_filter(f, &mut h);
    }
    for (i, k) in ["sort", "projection", "collation"].iter().enumerate() {
        if let Some(v) = body.get_document(k).ok().filter(|v| !v.is_empty()) {
            (2 + i as u8).hash(&mut h);
            hash_doc(v, &mut h);
        }
    }
    for (i, k) in ["skip", "limit"].iter().enumerate() {
        if body.contains_key(k) {
            (8 + i as u8).hash(&mut h);
        }
    }
    h.finish()
}

/// The fingerprint of `Shape::aggregate(db, coll, pipeline)`, without building it: each stage's
/// name, a `$match` walked as a filter, any other stage value as `literals_out` leaves it.
pub fn aggregate_fingerprint<'a>(
    db: &str,
    coll: Option<&str>,
    pipeline: impl IntoIterator<Item = &'a Document>,
) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    "aggregate".hash(&mut h);
    db.hash(&mut h);
    coll.unwrap_or("").hash(&mut h);
    for stage in pipeline {
        b'S'.hash(&mut h);
        for (k, v) in stage {
            k.hash(&mut h);
            match (k.as_str(), v) {
                ("$match", Bson::Document(f)) => {
                    b'F'.hash(&mut h);
                    hash_filter(f, &mut h);
                }
                _ => hash_literals_out(v, &mut h),
            }
        }
        b'E'.hash(&mut h);
    }
    h.finish()
}

/// Hashes what [`literals_out`] makes of `v`: structure, `$` strings and literals' type words.
fn hash_literals_out(v: &Bson, h: &mut impl Hasher) {
    match v {
        Bson::Document(d) => {
            b'{'.hash(h);
            for (k, v) in d {
                k.hash(h);
                hash_literals_out(v, h);
            }
            b'}'.hash(h);
        }
        Bson::Array(items) => {
            b'['.hash(h);
            for i in items {
                hash_literals_out(i, h);
            }
            b']'.hash(h);
        }
        Bson::String(s) if s.starts_with('$') => {
            b'$'.hash(h);
            s.hash(h);
        }
        other => {
            b'?'.hash(h);
            type_word(other).hash(h);
        }
    }
}

fn hash_filter(f: &Document, h: &mut impl Hasher) {
    for (k, v) in f {
        if k == "$comment" {
            continue;
        }
        k.hash(h);
        match (k.as_str(), v) {
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                b'L'.hash(h);
                for i in items {
                    match i {
                        Bson::Document(d) => {
                            b'{'.hash(h);
                            hash_filter(d, h);
                            b'}'.hash(h);
                        }
                        other => type_tag(other).hash(h),
                    }
                }
            }
            (_, Bson::Document(d)) if d.keys().next().is_some_and(|f| f.starts_with('$')) => {
                b'O'.hash(h);
                hash_operators(d, h);
            }
            // `{a: v}` is `{a: {$eq: v}}` in the shape.
            (_, other) => {
                b'O'.hash(h);
                "$eq".hash(h);
                type_tag(other).hash(h);
                b';'.hash(h);
            }
        }
        b';'.hash(h);
    }
}

fn hash_operators(ops: &Document, h: &mut impl Hasher) {
    for (op, arg) in ops {
        op.hash(h);
        match (op.as_str(), arg) {
            ("$elemMatch", Bson::Document(d)) => {
                b'F'.hash(h);
                hash_filter(d, h);
            }
            ("$not", Bson::Document(d)) => {
                b'O'.hash(h);
                hash_operators(d, h);
            }
            (_, other) => type_tag(other).hash(h),
        }
        b';'.hash(h);
    }
}

/// What `filter_shape` keeps of a value: its type (an array: the set of its elements' types;
/// a document: whether it is empty).
fn type_tag(v: &Bson) -> u64 {
    match v {
        Bson::Array(items) => {
            let mut tags: Vec<u64> = items.iter().map(type_tag).collect();
            tags.sort_unstable();
            tags.dedup();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            b'A'.hash(&mut h);
            tags.hash(&mut h);
            h.finish()
        }
        Bson::Document(d) => 0x100 | u64::from(d.is_empty()),
        other => other.element_type() as u64,
    }
}

fn hash_doc(d: &Document, h: &mut impl Hasher) {
    for (k, v) in d {
        k.hash(h);
        hash_value(v, h);
    }
    b'}'.hash(h);
}

/// A value hashed whole (sort, projection and collation are part of the shape as given).
fn hash_value(v: &Bson, h: &mut impl Hasher) {
    (v.element_type() as u8).hash(h);
    match v {
        Bson::Document(d) => hash_doc(d, h),
        Bson::Array(items) => {
            for i in items {
                hash_value(i, h);
            }
            b']'.hash(h);
        }
        Bson::Int32(n) => n.hash(h),
        Bson::Int64(n) => n.hash(h),
        Bson::Double(f) => f.to_bits().hash(h),
        Bson::String(s) => s.hash(h),
        Bson::Boolean(b) => b.hash(h),
        Bson::Null => {}
        other => format!("{other:?}").hash(h),
    }
}

fn bytes(d: &Document) -> Vec<u8> {
    bson::RawDocumentBuf::try_from(d)
        .map(|r| r.into_bytes())
        .unwrap_or_default()
}

/// `v` with every literal replaced by `"?<type>"` (field paths and `$$variables` kept).
fn literals_out(v: &Bson) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(
            d.iter()
                .map(|(k, v)| (k.clone(), literals_out(v)))
                .collect(),
        ),
        Bson::Array(items) => Bson::Array(items.iter().map(literals_out).collect()),
        Bson::String(s) if s.starts_with('$') => v.clone(),
        other => Bson::String(format!("?{}", type_word(other))),
    }
}

fn type_word(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => "number",
        Bson::String(_) => "string",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        Bson::DateTime(_) => "date",
        Bson::ObjectId(_) => "objectId",
        Bson::Binary(_) => "binData",
        Bson::RegularExpression(_) => "regex",
        Bson::Timestamp(_) => "timestamp",
        _ => "value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_do_not_change_a_find_shape() {
        let a = Shape::find(
            "d",
            "c",
            &doc! { "find": "c", "filter": { "x": 1 }, "limit": 3 },
        );
        let b = Shape::find(
            "d",
            "c",
            &doc! { "find": "c", "filter": { "x": 9 }, "limit": 1 },
        );
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.hash_hex(), b.hash_hex());
        assert_eq!(a.hash_hex().len(), 64);
        let c = Shape::find("d", "c", &doc! { "find": "c", "filter": { "x": "s" } });
        assert_ne!(a.fingerprint, c.fingerprint);
        let other_ns = Shape::find(
            "d",
            "e",
            &doc! { "find": "e", "filter": { "x": 1 }, "limit": 3 },
        );
        assert_ne!(a.fingerprint, other_ns.fingerprint);
    }

    #[test]
    fn find_fingerprints_follow_the_shape_document() {
        let bodies = [
            doc! { "find": "c", "filter": { "a": 1, "b": { "$gt": 2 } } },
            doc! { "find": "c", "filter": { "a": { "$eq": 1 }, "b": { "$gt": 2 } } },
            doc! { "find": "c", "filter": { "a": 9, "b": { "$gt": 7 } } },
            doc! { "find": "c", "filter": { "a": "x", "b": { "$gt": 2 } } },
            doc! { "find": "c", "filter": { "a": [1, "x"] } },
            doc! { "find": "c", "filter": { "a": ["y", 2, 3] } },
            doc! { "find": "c", "filter": { "a": [1] } },
            doc! { "find": "c", "filter": { "$or": [{ "a": 1 }, { "b": 1 }] } },
            doc! { "find": "c", "filter": { "$or": [{ "a": 2 }, { "b": 3 }] }, "$comment": "x" },
            doc! { "find": "c", "filter": { "a": 1 }, "sort": { "a": 1 } },
            doc! { "find": "c", "filter": { "a": 1 }, "sort": { "a": -1 } },
            doc! { "find": "c", "filter": { "a": 1 }, "limit": 1 },
            doc! { "find": "c", "filter": { "a": 1 }, "projection": { "a": 1 } },
            doc! { "find": "c", "filter": { "a": { "$elemMatch": { "b": 1 } } } },
            doc! { "find": "c", "filter": { "a": { "$elemMatch": { "b": "s" } } } },
        ];
        for x in &bodies {
            for y in &bodies {
                let (sx, sy) = (Shape::find_doc("d", "c", x), Shape::find_doc("d", "c", y));
                let same_doc = sx.doc == sy.doc;
                let same_fp = find_fingerprint("d", "c", x) == find_fingerprint("d", "c", y);
                assert_eq!(same_doc, same_fp, "{x} vs {y}");
            }
        }
    }

    #[test]
    fn aggregate_shapes_keep_paths_and_drop_literals() {
        let p = |n: i32| {
            vec![
                doc! { "$match": { "a": n } },
                doc! { "$group": { "_id": "$b", "n": { "$sum": n } } },
            ]
        };
        let a = Shape::aggregate("d", Some("c"), &p(1));
        let b = Shape::aggregate("d", Some("c"), &p(2));
        assert_eq!(a.fingerprint, b.fingerprint);
        let stages = a.doc.get_array("pipeline").unwrap();
        let group = stages[1]
            .as_document()
            .unwrap()
            .get_document("$group")
            .unwrap();
        assert_eq!(group.get_str("_id").ok(), Some("$b"));
    }

    #[test]
    fn aggregate_fingerprints_follow_the_shape_document() {
        let pipelines = [
            vec![doc! { "$match": { "a": 1 } }],
            vec![doc! { "$match": { "a": 2 } }],
            vec![doc! { "$match": { "a": "x" } }],
            vec![doc! { "$match": { "a": { "$eq": 5 } } }],
            vec![doc! { "$match": { "a": 1 } }, doc! { "$limit": 3 }],
            vec![doc! { "$match": { "a": 1 } }, doc! { "$limit": 9 }],
            vec![doc! { "$match": { "a": 1 } }, doc! { "$skip": 3 }],
            vec![doc! { "$group": { "_id": "$b", "n": { "$sum": 1 } } }],
            vec![doc! { "$group": { "_id": "$b", "n": { "$sum": 7 } } }],
            vec![doc! { "$group": { "_id": "$c", "n": { "$sum": 1 } } }],
            vec![doc! { "$group": { "_id": "$b", "n": { "$sum": "$x" } } }],
            vec![doc! { "$project": { "a": 1, "s": "lit" } }],
            vec![doc! { "$project": { "a": 1, "s": "?string" } }],
            vec![doc! { "$project": { "a": true, "s": "lit" } }],
            vec![doc! { "$project": { "a": [1, "$b"] } }],
            vec![doc! { "$project": { "a": [2, "$b"] } }],
            vec![doc! { "$project": { "a": ["$b", 2] } }],
            vec![doc! { "$sort": { "a": 1 } }, doc! { "$sort": { "a": -1 } }],
            vec![doc! { "$sort": { "a": 1 } }],
            vec![doc! { "$match": "$x" }],
            vec![],
        ];
        for x in &pipelines {
            for y in &pipelines {
                let (sx, sy) = (
                    Shape::aggregate_doc("d", Some("c"), x),
                    Shape::aggregate_doc("d", Some("c"), y),
                );
                let same_doc = sx.doc == sy.doc;
                let same_fp = aggregate_fingerprint("d", Some("c"), x)
                    == aggregate_fingerprint("d", Some("c"), y);
                assert_eq!(same_doc, same_fp, "{x:?} vs {y:?}");
            }
        }
        let one = Shape::aggregate("d", None, &pipelines[0]);
        assert_ne!(
            one.fingerprint,
            aggregate_fingerprint("d", Some("c"), &pipelines[0])
        );
        assert_eq!(
            one.fingerprint,
            aggregate_fingerprint("d", None, &pipelines[0])
        );
    }

    #[test]
    fn representative_queries_are_checked() {
        let code = |q: Document| {
            Shape::of_representative(&q)
                .map(|_| 0)
                .unwrap_or_else(|e| e.code.code())
        };
        assert_eq!(code(doc! { "find": "c", "filter": {} }), 40414);
        assert_eq!(code(doc! { "find": "c", "$db": 1 }), 14);
        assert_eq!(code(doc! { "insert": "c", "$db": "d" }), 72);
        let s = Shape::of_representative(&doc! { "find": "c", "filter": { "x": 5 }, "$db": "d" })
            .unwrap();
        let direct = Shape::find("d", "c", &doc! { "find": "c", "filter": { "x": 1 } });
        assert_eq!(s.fingerprint, direct.fingerprint);
    }
}
