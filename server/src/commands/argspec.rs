//! Declarative command arguments: one table per command (field, accepted BSON types, required,
//! lower bound) read by one checker, [`check`], that answers as mongod's IDL parsers do: an
//! unknown field 40415, a missing required field 40414, a wrong type 14 TypeMismatch (or the
//! field's own code where mongod's custom parser has one, e.g. `hint` 9), a value below its
//! bound 51024. Field lists and types follow mongod's `*.idl` command definitions.
//!
//! The checker only validates; handlers still read the values (through `args`). Null counts as
//! absent for optional fields, as the `args::opt_*` readers treat it. The first field (the
//! command name and its target) is the handler's: its type varies per command.

use super::args::{GENERIC_FIELDS, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document};

/// An accepted set of BSON types, named as mongod's IDL names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `object`
    Object,
    /// `array`
    Array,
    /// `string`
    String,
    /// `long`: a 64-bit integer field; the IDL's `long` takes only int64.
    Long,
    /// `safeInt64`: int, long or a finite double (truncated).
    SafeInt64,
    /// `safeBool`: bool or a number (its truthiness).
    SafeBool,
    /// `indexHint`: an index name or a key pattern.
    Hint,
    /// Anything (`IDLAnyType`).
    Any,
}

impl Ty {
    fn accepts(self, v: &Bson) -> bool {
        match self {
            Ty::Object => matches!(v, Bson::Document(_)),
            Ty::Array => matches!(v, Bson::Array(_)),
            Ty::String => matches!(v, Bson::String(_)),
            Ty::Long => matches!(v, Bson::Int64(_)),
            Ty::SafeInt64 => match v {
                Bson::Int32(_) | Bson::Int64(_) => true,
                Bson::Double(f) => f.is_finite(),
                _ => false,
            },
            Ty::SafeBool => matches!(
                v,
                Bson::Boolean(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)
            ),
            Ty::Hint => matches!(v, Bson::String(_) | Bson::Document(_)),
            Ty::Any => true,
        }
    }

    /// The type the error message names.
    fn expected(self) -> &'static str {
        match self {
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Long => "long",
            Ty::SafeInt64 => "[long, int, decimal, double]",
            Ty::SafeBool => "bool",
            Ty::Hint => "[string, object]",
            Ty::Any => "any",
        }
    }

    /// The code for a value of the wrong type: mongod's custom `indexHint` parser fails with
    /// FailedToParse, every generated one with TypeMismatch.
    fn wrong_type_code(self) -> ErrorCode {
        match self {
            Ty::Hint => ErrorCode::FailedToParse,
            _ => ErrorCode::TypeMismatch,
        }
    }
}

/// One field of a command.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
    /// For numeric fields: the smallest value accepted (mongod's `validator: { gte: n }`).
    pub min: Option<i64>,
}

/// An optional field of type `ty`.
pub const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
        min: None,
    }
}

/// A required field of type `ty`.
pub const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
        min: None,
    }
}

/// An optional `safeInt64` field that must be `>= 0`.
pub const fn non_negative(name: &'static str) -> Field {
    Field {
        name,
        ty: Ty::SafeInt64,
        required: false,
        min: Some(0),
    }
}

/// A command's description: its name and every field it takes besides the generic ones.
#[derive(Debug)]
pub struct CommandSpec {
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// Check `body` against `spec`: unknown fields, types, required fields, bounds, in that order
/// per field as mongod's parser meets them.
pub fn check(spec: &CommandSpec, body: &Document) -> CommandResult<()> {
    let command = spec.name;
    for (key, v) in body.iter().skip(1) {
        let Some(field) = spec.fields.iter().find(|f| f.name == key) else {
            if GENERIC_FIELDS.contains(&key.as_str()) {
                continue;
            }
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field '{command}.{key}' is an unknown field."),
            ));
        };
        if matches!(v, Bson::Null) && !field.required {
            continue;
        }
        check_value(command, field, v)?;
    }
    for field in spec.fields.iter().filter(|f| f.required) {
        if !body.contains_key(field.name) {
            return Err(err(
                ErrorCode::Location40414,
                format!(
                    "BSON field '{command}.{}' is missing but a required field",
                    field.name
                ),
            ));
        }
    }
    Ok(())
}

fn check_value(command: &str, field: &Field, v: &Bson) -> CommandResult<()> {
    if !field.ty.accepts(v) {
        return Err(err(
            field.ty.wrong_type_code(),
            format!(
                "BSON field '{command}.{}' is the wrong type '{}', expected type '{}'",
                field.name,
                type_name(v),
                field.ty.expected()
            ),
        ));
    }
    if let Some(min) = field.min {
        let n = match v {
            Bson::Int32(i) => i64::from(*i),
            Bson::Int64(i) => *i,
            Bson::Double(f) => f.trunc() as i64,
            _ => return Ok(()),
        };
        if n < min {
            return Err(err(
                ErrorCode::Location51024,
                format!(
                    "BSON field '{}' value must be >= {min}, actual value '{n}'",
                    field.name
                ),
            ));
        }
    }
    Ok(())
}

/// The commands clients use most (mongod's `find_command.idl`, `count_command.idl`,
/// `distinct_command.idl`, `getmore_command.idl`, `kill_cursors.idl`, `drop.idl`,
/// `list_collections.idl`, `list_indexes.idl`).
pub mod specs {
    use super::{CommandSpec, Ty, non_negative, opt, req};

    pub static FIND: CommandSpec = CommandSpec {
        name: "find",
        fields: &[
            opt("filter", Ty::Object),
            opt("projection", Ty::Object),
            opt("sort", Ty::Object),
            opt("hint", Ty::Hint),
            non_negative("skip"),
            // A negative limit is still read as the legacy "one batch of |n|".
            opt("limit", Ty::SafeInt64),
            non_negative("batchSize"),
            opt("singleBatch", Ty::SafeBool),
            opt("max", Ty::Object),
            opt("min", Ty::Object),
            opt("returnKey", Ty::SafeBool),
            opt("showRecordId", Ty::SafeBool),
            opt("let", Ty::Object),
            opt("allowDiskUse", Ty::SafeBool),
            opt("collation", Ty::Object),
            opt("tailable", Ty::SafeBool),
            opt("awaitData", Ty::SafeBool),
            opt("noCursorTimeout", Ty::SafeBool),
            opt("oplogReplay", Ty::SafeBool),
            opt("allowPartialResults", Ty::SafeBool),
            opt("readOnce", Ty::SafeBool),
            opt("term", Ty::Long),
            opt("ntoreturn", Ty::SafeInt64),
            opt("isSuffix", Ty::SafeBool),
        ],
    };

    pub static COUNT: CommandSpec = CommandSpec {
        name: "count",
        fields: &[
            opt("query", Ty::Object),
            opt("limit", Ty::SafeInt64),
            non_negative("skip"),
            opt("hint", Ty::Hint),
            opt("collation", Ty::Object),
            opt("fields", Ty::Object),
        ],
    };

    pub static DISTINCT: CommandSpec = CommandSpec {
        name: "distinct",
        fields: &[
            req("key", Ty::String),
            opt("query", Ty::Object),
            opt("collation", Ty::Object),
            opt("hint", Ty::Hint),
        ],
    };

    pub static GET_MORE: CommandSpec = CommandSpec {
        name: "getMore",
        fields: &[
            req("collection", Ty::String),
            non_negative("batchSize"),
            opt("term", Ty::Long),
            opt("lastKnownCommittedOpTime", Ty::Object),
        ],
    };

    pub static KILL_CURSORS: CommandSpec = CommandSpec {
        name: "killCursors",
        fields: &[req("cursors", Ty::Array)],
    };

    pub static DROP: CommandSpec = CommandSpec {
        name: "drop",
        fields: &[],
    };

    pub static LIST_COLLECTIONS: CommandSpec = CommandSpec {
        name: "listCollections",
        fields: &[
            opt("filter", Ty::Object),
            opt("nameOnly", Ty::SafeBool),
            opt("authorizedCollections", Ty::SafeBool),
            opt("cursor", Ty::Object),
            opt("includePendingDrops", Ty::SafeBool),
        ],
    };

    pub static LIST_INDEXES: CommandSpec = CommandSpec {
        name: "listIndexes",
        fields: &[
            opt("cursor", Ty::Object),
            opt("includeBuildUUIDs", Ty::SafeBool),
            opt("includeIndexBuildInfo", Ty::SafeBool),
        ],
    };

    /// Every table, for the derived tests.
    #[cfg(test)]
    pub static ALL: &[&CommandSpec] = &[
        &FIND,
        &COUNT,
        &DISTINCT,
        &GET_MORE,
        &KILL_CURSORS,
        &DROP,
        &LIST_COLLECTIONS,
        &LIST_INDEXES,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype};

    /// One value of every BSON type.
    fn every_type() -> Vec<Bson> {
        vec![
            Bson::Double(1.5),
            Bson::String("s".into()),
            Bson::Document(doc! { "a": 1 }),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Binary(bson::Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1],
            }),
            Bson::Undefined,
            Bson::ObjectId(ObjectId::from_bytes([7; 12])),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(5)),
            Bson::RegularExpression(bson::Regex {
                pattern: "a".try_into().expect("cstr"),
                options: "".try_into().expect("cstr"),
            }),
            Bson::JavaScriptCode("1".into()),
            Bson::Int32(3),
            Bson::Timestamp(bson::Timestamp {
                time: 1,
                increment: 1,
            }),
            Bson::Int64(4),
            Bson::Decimal128(bson::Decimal128::from_bytes([0; 16])),
            Bson::MinKey,
            Bson::MaxKey,
        ]
    }

    /// A body with the command field and every required field at an accepted value.
    fn base(spec: &CommandSpec) -> Document {
        let mut body = doc! { spec.name: "c" };
        for f in spec.fields.iter().filter(|f| f.required) {
            let v = every_type()
                .into_iter()
                .find(|v| f.ty.accepts(v))
                .expect("an accepted value");
            body.insert(f.name, v);
        }
        body
    }

    fn code(r: CommandResult<()>) -> Option<i32> {
        r.err().map(|e| e.code.code())
    }

    #[test]
    fn every_field_times_every_type() {
        for spec in specs::ALL {
            assert_eq!(code(check(spec, &base(spec))), None, "{}", spec.name);
            for field in spec.fields {
                for v in every_type() {
                    let mut body = base(spec);
                    body.insert(field.name, v.clone());
                    let got = code(check(spec, &body));
                    let want = if !field.ty.accepts(&v) {
                        Some(field.ty.wrong_type_code().code())
                    } else {
                        None
                    };
                    assert_eq!(got, want, "{}.{} = {v:?}", spec.name, field.name);
                }
            }
        }
    }

    #[test]
    fn unknown_missing_and_bounds() {
        for spec in specs::ALL {
            let mut body = base(spec);
            body.insert("noSuchField", 1);
            assert_eq!(code(check(spec, &body)), Some(40415), "{}", spec.name);
            let mut body = base(spec);
            body.insert("comment", 1);
            body.insert("maxTimeMS", 1);
            assert_eq!(code(check(spec, &body)), None, "{}", spec.name);
            for field in spec.fields {
                let mut body = base(spec);
                if field.required {
                    body.remove(field.name);
                    assert_eq!(code(check(spec, &body)), Some(40414));
                    body.insert(field.name, Bson::Null);
                    let want =
                        (!field.ty.accepts(&Bson::Null)).then(|| field.ty.wrong_type_code().code());
                    assert_eq!(code(check(spec, &body)), want);
                } else {
                    body.insert(field.name, Bson::Null);
                    assert_eq!(code(check(spec, &body)), None);
                }
                if let Some(min) = field.min {
                    body.insert(field.name, min - 1);
                    assert_eq!(code(check(spec, &body)), Some(51024));
                    body.insert(field.name, min);
                    assert_eq!(code(check(spec, &body)), None);
                }
            }
        }
    }
}
