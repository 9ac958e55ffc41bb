//! The options of one `createIndexes` index spec as a table: each option's accepted BSON types
//! and the index kinds that refuse it, read by [`check_fields`] and [`check_kind`] with mongod's
//! codes: an unknown option 197 InvalidIndexSpecificationOption, a wrongly typed one 14
//! TypeMismatch (checked in spec order, as mongod's `validateIndexSpec` walks the spec),
//! `unique` on a hashed key 16764, the options a wildcard index refuses 67, any option but the
//! key, name, version, namespace and collation on an `_id` key 197.
//!
//! Options whose value mongod checks with its own code or wording (`expireAfterSeconds`,
//! `storageEngine`) are `Any` here: `index_spec` keeps those checks. Facts from mongod's
//! `index_key_validate::validateIndexSpec` (types per field, `weights` only on text indexes).

use super::truthy;
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, Document};

/// An index's kind, from its key pattern (mongod's index "plugin").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Btree,
    Hashed,
    Text,
    Flat2d,
    Sphere,
    Wildcard,
}

impl Kind {
    /// The kind of `key`: a text field wins (`{"$**": "text"}` is a text index), then a
    /// wildcard term, then the geo and hashed types.
    pub fn of(key: &Document) -> Kind {
        let has = |t: &str| key.values().any(|v| v.as_str() == Some(t));
        if has(storage::text::TEXT) || key.contains_key(storage::text::FTS) {
            Kind::Text
        } else if key.keys().any(|k| storage::wildcard::is_wildcard_field(k)) {
            Kind::Wildcard
        } else if has("2dsphere") {
            Kind::Sphere
        } else if has("2d") {
            Kind::Flat2d
        } else if has("hashed") {
            Kind::Hashed
        } else {
            Kind::Btree
        }
    }
}

/// The BSON types an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionTy {
    /// A bool or a number, read for its truthiness (`unique`, `sparse`, `background`).
    Truthy,
    /// A bool only (`hidden`).
    Bool,
    /// Any number (`v`, `bits`, `min`, `max`, the index versions).
    Number,
    String,
    Object,
    /// An object or a string (`weights`: `"$**"` weighs every field).
    ObjectOrString,
    /// Checked by the handler.
    Any,
}

impl OptionTy {
    fn accepts(self, v: &Bson) -> bool {
        let number = crate::query::types::is_number(v);
        match self {
            OptionTy::Truthy => number || matches!(v, Bson::Boolean(_)),
            OptionTy::Bool => matches!(v, Bson::Boolean(_)),
            OptionTy::Number => number,
            OptionTy::String => matches!(v, Bson::String(_)),
            OptionTy::Object => matches!(v, Bson::Document(_)),
            OptionTy::ObjectOrString => matches!(v, Bson::Document(_) | Bson::String(_)),
            OptionTy::Any => true,
        }
    }

    fn wrong_type(self, name: &str, v: &Bson) -> CommandError {
        let got = super::args::type_name(v);
        let message = match self {
            OptionTy::Truthy => {
                format!("The field '{name}' has value {v}, which is not convertible to bool")
            }
            OptionTy::Bool => format!("The field '{name}' must be a bool, but got {got}"),
            OptionTy::Number => format!("The field '{name}' must be a number, but got {got}"),
            OptionTy::String => format!("The field '{name}' must be a string, but got {got}"),
            _ => format!("The field '{name}' must be an object, but got {got}"),
        };
        err(ErrorCode::TypeMismatch, message)
    }
}

/// One option of an index spec.
#[derive(Debug)]
pub struct IndexOption {
    pub name: &'static str,
    pub ty: OptionTy,
    /// The kinds that refuse the option when it is set.
    pub refused_on: &'static [Kind],
    /// Whether an `_id` key pattern takes it.
    pub on_id: bool,
}

const fn option(name: &'static str, ty: OptionTy) -> IndexOption {
    IndexOption {
        name,
        ty,
        refused_on: &[],
        on_id: false,
    }
}

const fn id_option(name: &'static str, ty: OptionTy) -> IndexOption {
    IndexOption {
        name,
        ty,
        refused_on: &[],
        on_id: true,
    }
}

const fn refused(name: &'static str, ty: OptionTy, kinds: &'static [Kind]) -> IndexOption {
    IndexOption {
        name,
        ty,
        refused_on: kinds,
        on_id: false,
    }
}

const NOT_TEXT: &[Kind] = &[
    Kind::Btree,
    Kind::Hashed,
    Kind::Flat2d,
    Kind::Sphere,
    Kind::Wildcard,
];

/// Every option mongod 7.0/8.0 takes in an index spec.
pub static OPTIONS: &[IndexOption] = &[
    id_option("key", OptionTy::Object),
    id_option("name", OptionTy::String),
    id_option("v", OptionTy::Number),
    id_option("ns", OptionTy::String),
    id_option("collation", OptionTy::Object),
    refused("unique", OptionTy::Truthy, &[Kind::Hashed, Kind::Wildcard]),
    refused("sparse", OptionTy::Truthy, &[Kind::Wildcard]),
    option("partialFilterExpression", OptionTy::Object),
    refused("expireAfterSeconds", OptionTy::Any, &[Kind::Wildcard]),
    option("hidden", OptionTy::Bool),
    option("background", OptionTy::Truthy),
    option("prepareUnique", OptionTy::Truthy),
    option("storageEngine", OptionTy::Any),
    refused("weights", OptionTy::ObjectOrString, NOT_TEXT),
    option("default_language", OptionTy::String),
    option("language_override", OptionTy::String),
    option("textIndexVersion", OptionTy::Number),
    option("2dsphereIndexVersion", OptionTy::Number),
    option("bits", OptionTy::Number),
    option("min", OptionTy::Number),
    option("max", OptionTy::Number),
    option("bucketSize", OptionTy::Number),
    // Typed after its index kind, as mongod does: `check_wildcard_projection`.
    option("wildcardProjection", OptionTy::Any),
];

fn find(name: &str) -> Option<&'static IndexOption> {
    OPTIONS.iter().find(|o| o.name == name)
}

/// Names and types, in spec order: the first unknown or wrongly typed option answers.
pub fn check_fields(d: &Document) -> CommandResult<()> {
    for (k, v) in d {
        let Some(o) = find(k) else {
            return Err(err(
                ErrorCode::InvalidIndexSpecificationOption,
                format!(
                    "The field '{k}' is not valid for an index specification. Specification: {d}"
                ),
            ));
        };
        if !o.ty.accepts(v) {
            return Err(o.ty.wrong_type(k, v));
        }
        // mongod refuses an empty collation here, before the collation parser sees it.
        if k == "collation" && v.as_document().is_some_and(Document::is_empty) {
            return Err(err(
                ErrorCode::BadValue,
                "The field 'collation' cannot be an empty object.",
            ));
        }
    }
    Ok(())
}

/// `wildcardProjection`, checked in mongod's order: on a key that is not a wildcard index's
/// BadValue (2, kept for compatibility by mongod), not an object 14, on a key without a
/// top-level `$**` term or empty 9 FailedToParse, inclusions mixed with exclusions 31253/31254
/// (`_id` may differ). The paths themselves are `storage::wildcard`'s to check.
pub fn check_wildcard_projection(d: &Document) -> CommandResult<()> {
    const NAME: &str = "wildcardProjection";
    let Some(v) = d.get(NAME) else {
        return Ok(());
    };
    let empty = Document::new();
    let key = d.get_document("key").unwrap_or(&empty);
    if Kind::of(key) != Kind::Wildcard {
        return Err(err(
            ErrorCode::BadValue,
            format!("The field '{NAME}' is only allowed in 'wildcard' indexes"),
        ));
    }
    let Bson::Document(projection) = v else {
        return Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "The field '{NAME}' must be a non-empty object, but got {}",
                super::args::type_name(v)
            ),
        ));
    };
    if !key.contains_key(storage::wildcard::WILDCARD) {
        return Err(err(
            ErrorCode::FailedToParse,
            format!("The field '{NAME}' is only allowed when 'key' is {{\"$**\": ±1}}"),
        ));
    }
    if projection.is_empty() {
        return Err(err(
            ErrorCode::FailedToParse,
            format!("The '{NAME}' field can't be an empty object"),
        ));
    }
    let mut mode = None;
    projection_mode(projection, "", &mut mode)
}

/// The first leaf (outside `_id`) sets inclusion or exclusion; a later leaf of the other kind
/// is mongod's projection parser error. Values that are not numbers or booleans are left to
/// the storage layer's parser.
fn projection_mode(p: &Document, prefix: &str, mode: &mut Option<bool>) -> CommandResult<()> {
    for (k, v) in p {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if let Bson::Document(sub) = v {
            projection_mode(sub, &path, mode)?;
            continue;
        }
        let included = match v {
            Bson::Boolean(b) => *b,
            _ => match crate::query::types::as_f64(v) {
                Some(f) => f != 0.0,
                None => continue,
            },
        };
        if path == "_id" {
            continue;
        }
        match *mode {
            Some(m) if m != included => {
                let (code, what, kind) = if included {
                    (ErrorCode::Location31253, "inclusion", "exclusion")
                } else {
                    (ErrorCode::Location31254, "exclusion", "inclusion")
                };
                return Err(err(
                    code,
                    format!(
                        "Failed to parse projection: wildcardProjection :: caused by :: Cannot do {what} on field {path} in {kind} projection"
                    ),
                ));
            }
            _ => *mode = Some(included),
        }
    }
    Ok(())
}

/// Whether `o` is set in `d`: a truthy flag, or any other option present.
fn is_set(o: &IndexOption, d: &Document) -> bool {
    match (o.ty, d.get(o.name)) {
        (_, None) => false,
        (OptionTy::Truthy | OptionTy::Bool, Some(v)) => truthy(v),
        _ => true,
    }
}

/// `v`: a number (typed by the table) that is a 32-bit integer (BadValue), and 1 or 2
/// (CannotCreateIndex).
pub fn check_version(d: &Document) -> CommandResult<()> {
    let Some(v) = d.get("v") else {
        return Ok(());
    };
    let n = crate::query::types::as_i64_exact(v).and_then(|n| i32::try_from(n).ok());
    match n {
        Some(1 | 2) => Ok(()),
        Some(_) => Err(err(
            ErrorCode::CannotCreateIndex,
            format!("Invalid index specification {d}; cannot create an index with v={v}"),
        )),
        None => Err(err(
            ErrorCode::BadValue,
            format!("Index version must be representable as a 32-bit integer, but got {v}"),
        )),
    }
}

/// The options `key`'s kind refuses, options that exclude each other, and the `_id` key's rule.
pub fn check_kind(d: &Document, key: &Document) -> CommandResult<()> {
    let set = |name: &str| d.get(name).is_some_and(truthy);
    if set("unique") && set("prepareUnique") {
        return Err(err(
            ErrorCode::CannotCreateIndex,
            format!(
                "Invalid index specification {d}; cannot create an index with the 'unique' option and the 'prepareUnique' option"
            ),
        ));
    }
    let kind = Kind::of(key);
    for o in OPTIONS.iter().filter(|o| o.refused_on.contains(&kind)) {
        if is_set(o, d) {
            return Err(refusal(d, o.name, kind));
        }
    }
    if key == &bson::doc! { "_id": 1 }
        && let Some(option) = d.keys().find(|k| find(k).is_none_or(|o| !o.on_id))
    {
        return Err(err(
            ErrorCode::InvalidIndexSpecificationOption,
            format!(
                "The field '{option}' is not valid for an _id index specification. Specification: {d}"
            ),
        ));
    }
    Ok(())
}

fn refusal(d: &Document, option: &str, kind: Kind) -> CommandError {
    let why = match (option, kind) {
        ("unique", Kind::Hashed) => {
            return err(
                ErrorCode::Location16764,
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            );
        }
        ("weights", _) => {
            return err(
                ErrorCode::CannotCreateIndex,
                format!(
                    "Invalid index specification {d}; the field 'weights' can only be specified with text indexes"
                ),
            );
        }
        (_, Kind::Wildcard) => {
            format!("Index type 'wildcard' does not support the '{option}' option")
        }
        _ => format!("The field '{option}' is only allowed in an 'wildcard' index"),
    };
    err(
        ErrorCode::CannotCreateIndex,
        format!("Error in specification {d} :: caused by :: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    /// One value per BSON type the options are tried with.
    fn values() -> Vec<Bson> {
        vec![
            Bson::Boolean(true),
            Bson::Int32(1),
            Bson::Double(2.0),
            Bson::String("s".into()),
            Bson::Document(doc! { "a": 1 }),
            Bson::Array(vec![]),
            Bson::Null,
        ]
    }

    #[test]
    fn every_option_times_every_type() {
        for o in OPTIONS {
            for v in values() {
                let mut d = doc! { o.name: v.clone() };
                let got = check_fields(&d).err().map(|e| e.code.code());
                let want = (!o.ty.accepts(&v)).then_some(14);
                assert_eq!(got, want, "{}: {v:?}", o.name);
                d.insert("bogus", 1);
                let code = check_fields(&d).unwrap_err().code.code();
                assert_eq!(code, want.unwrap_or(197), "{}", o.name);
            }
        }
    }

    #[test]
    fn wildcard_projection_codes() {
        let code = |d: Document| check_wildcard_projection(&d).err().map(|e| e.code.code());
        let cases = [
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": 1 } },
                None,
            ),
            (
                doc! { "key": { "$**": 1, "b": 1 }, "wildcardProjection": { "b": 0 } },
                None,
            ),
            (
                doc! { "key": { "a": 1 }, "wildcardProjection": { "a": 1 } },
                Some(2),
            ),
            (doc! { "key": { "a": 1 }, "wildcardProjection": 5 }, Some(2)),
            (
                doc! { "key": { "$**": "text" }, "wildcardProjection": { "a": 1 } },
                Some(2),
            ),
            (doc! { "wildcardProjection": { "a": 1 } }, Some(2)),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": 5 },
                Some(14),
            ),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": [] },
                Some(14),
            ),
            (
                doc! { "key": { "a.$**": 1 }, "wildcardProjection": { "a": 1 } },
                Some(9),
            ),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": {} },
                Some(9),
            ),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": 1, "b": 0 } },
                Some(31254),
            ),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": false, "b": true } },
                Some(31253),
            ),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": { "x": 1, "y": 0 } } },
                Some(31254),
            ),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": { "_id": 1, "a": 0 } },
                None,
            ),
            (
                doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": 0, "_id": 1 } },
                None,
            ),
        ];
        for (d, want) in cases {
            assert_eq!(code(d.clone()), want, "{d}");
        }
    }

    #[test]
    fn versions() {
        let code = |v: Bson| check_version(&doc! { "v": v }).err().map(|e| e.code.code());
        assert_eq!(code(Bson::Int32(2)), None);
        assert_eq!(code(Bson::Double(1.0)), None);
        assert_eq!(code(Bson::Int32(3)), Some(67));
        assert_eq!(code(Bson::Int32(0)), Some(67));
        assert_eq!(code(Bson::Double(1.5)), Some(2));
        assert_eq!(code(Bson::Int64(1 << 40)), Some(2));
    }

    #[test]
    fn kinds_refuse_their_options() {
        let code = |d: Document| {
            let key = d.get_document("key").unwrap().clone();
            check_kind(&d, &key).err().map(|e| e.code.code())
        };
        let cases = [
            (
                doc! { "key": { "a": "hashed" }, "unique": true },
                Some(16764),
            ),
            (doc! { "key": { "a": "hashed" }, "unique": false }, None),
            (doc! { "key": { "a": "hashed" }, "sparse": true }, None),
            (doc! { "key": { "$**": 1 }, "unique": 1 }, Some(67)),
            (doc! { "key": { "$**": 1 }, "sparse": true }, Some(67)),
            (
                doc! { "key": { "$**": 1 }, "expireAfterSeconds": 1 },
                Some(67),
            ),
            (doc! { "key": { "$**": "text" }, "unique": true }, None),
            (doc! { "key": { "a": 1 }, "weights": { "a": 1 } }, Some(67)),
            (
                doc! { "key": { "a": "hashed" }, "weights": { "a": 1 } },
                Some(67),
            ),
            (doc! { "key": { "a": "text" }, "weights": { "a": 1 } }, None),
            (
                doc! { "key": { "a": 1 }, "unique": true, "prepareUnique": true },
                Some(67),
            ),
            (doc! { "key": { "_id": 1 }, "hidden": true }, Some(197)),
            (
                doc! { "key": { "_id": 1 }, "expireAfterSeconds": 1 },
                Some(197),
            ),
            (
                doc! { "key": { "_id": 1 }, "name": "_id_", "v": 2, "ns": "d.c" },
                None,
            ),
        ];
        for (d, want) in cases {
            assert_eq!(code(d.clone()), want, "{d}");
        }
    }
}
