//! Parsing and validating one `createIndexes` index spec, alone: the option names, types and
//! per-kind refusals through the `index_options` table, key values and index types, TTL, partial and sparse rules, `_id` index rules, default names,
//! and the stored forms of text, wildcard, `2d` and `2dsphere` specs, all with mongod's codes and
//! wording. It never looks at a collection: comparing a spec with existing indexes, and building
//! it, belong to `indexes.rs`.

use super::truthy;
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, Document, doc};
use storage::{ID_INDEX_NAME, IndexSpec};

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
    // The options a wildcard index refuses are the `index_options` table's.
    let Some((field, direction)) = terms.first() else {
        return Ok(());
    };
    if !crate::query::types::as_f64(direction).is_some_and(|f| f > 0.0) {
        return Err(bad_spec(
            d,
            format!("cairn builds ascending wildcard indexes only, not {{ {field}: {direction} }}"),
        ));
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
    super::index_options::check_fields(d)?;
    super::index_options::check_wildcard_projection(d)?;
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
    // Checked before the key's values are, as mongod does.
    super::index_options::check_kind(d, &key)?;
    super::index_options::check_version(d)?;
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
        // mongod generates no name: drivers and shells send one (`default_name` is theirs).
        None => {
            return Err(err(
                ErrorCode::FailedToParse,
                format!(
                    "Error in specification {d} :: caused by :: The 'name' field is a required property of an index specification"
                ),
            ));
        }
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
            "storageEngine" | "weights" | "default_language" | "wildcardProjection" | "background"
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

/// [`parse_spec`] with the default name filled in where the spec has none, as a driver sends
/// it: for tests about everything but the name.
#[cfg(test)]
pub fn parse_named(d: &Document) -> CommandResult<IndexSpec> {
    let mut d = d.clone();
    if let (None, Ok(key)) = (d.get("name"), d.get_document("key")) {
        let name = default_name(key);
        d.insert("name", name);
    }
    parse_spec(&d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_spec(d: &Document) -> CommandResult<IndexSpec> {
        parse_named(d)
    }

    #[test]
    fn the_name_is_required() {
        let e = super::parse_spec(&doc! { "key": { "a": 1 } }).unwrap_err();
        assert_eq!(e.code.code(), 9);
        assert!(
            e.message
                .contains("The 'name' field is a required property")
        );
        // The key is checked first.
        assert_eq!(super::parse_spec(&doc! {}).unwrap_err().code.code(), 9);
        let e = super::parse_spec(&doc! { "key": { "a": 0 } }).unwrap_err();
        assert_eq!(e.code.code(), 67);
    }

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
            doc! { "key": { "$**": 1, "b": 1 } },
        ] {
            assert_eq!(code(bad.clone()), 67, "{bad}");
        }
        // wildcardProjection's own codes (index_options::check_wildcard_projection).
        for (bad, want) in [
            (
                doc! { "key": { "a": 1 }, "wildcardProjection": { "a": 1 } },
                2,
            ),
            (
                doc! { "key": { "a.$**": 1 }, "wildcardProjection": { "a": 1 } },
                9,
            ),
            (doc! { "key": { "$**": 1 }, "wildcardProjection": {} }, 9),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": 1, "b": 0 } },
                31254,
            ),
        ] {
            assert_eq!(code(bad.clone()), want, "{bad}");
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
        for option in ["unique", "sparse", "background"] {
            let spec = doc! { "key": { "_id": 1 }, "name": "_id_1", option: true };
            assert_eq!(code(spec), 197, "{option}");
        }
        let partial = doc! { "key": { "_id": 1 }, "partialFilterExpression": { "a": 1 } };
        assert_eq!(code(partial), 197);
        // Types come first, in spec order, as mongod's validateIndexSpec walks the spec.
        let cases = [
            (doc! { "key": 1 }, 14),
            (doc! { "key": { "a": 1 }, "name": 1 }, 14),
            (doc! { "key": { "a": 1 }, "hidden": 1 }, 14),
            (doc! { "key": { "a": 1 }, "unique": "yes" }, 14),
            (doc! { "key": { "a": 1 }, "partialFilterExpression": 1 }, 14),
            (doc! { "key": { "a": "2d" }, "bits": "x" }, 14),
            (doc! { "key": { "a": 1 }, "v": "2" }, 14),
            (doc! { "key": { "a": 1 }, "v": 3 }, 67),
            (doc! { "key": { "a": 1 }, "v": 1.5 }, 2),
            (doc! { "key": { "a": 1 }, "collation": {} }, 2),
            (doc! { "key": { "a": "text" }, "default_language": 1 }, 14),
            (doc! { "key": { "a": "text" }, "weights": 1 }, 14),
            (doc! { "key": { "a": 1 }, "weights": { "a": 2 } }, 67),
            (
                doc! { "key": { "a": 1 }, "unique": true, "prepareUnique": true },
                67,
            ),
            (doc! { "bogus": 1, "key": 1 }, 197),
            (doc! { "key": 1, "bogus": 1 }, 14),
            (doc! { "name": "x" }, 9),
        ];
        for (spec, want) in cases {
            assert_eq!(code(spec.clone()), want, "{spec}");
        }
        let plain = doc! { "key": { "_id": 1 }, "name": "_id_", "v": 2, "collation": { "locale": "simple" } };
        assert!(parse_spec(&plain).is_ok());
    }
}
