//! Declarative command arguments: one table per command (field, accepted BSON types, required,
//! lower bound) read by one checker, [`check`], that answers as mongod's IDL parsers do: an
//! unknown field 40415, a missing required field 40414, a wrong type 14 TypeMismatch (or the
//! field's own code where mongod's custom parser has one, e.g. `hint` 9), a value below its
//! bound 51024. Field lists and types follow mongod's `*.idl` command definitions.
//!
//! The checker only validates; handlers still read the values (through `args`). Null counts as
//! absent for optional fields, as the `args::opt_*` readers treat it. The first field (the
//! command name and its target) is the handler's: its type varies per command.

pub mod admin;
pub mod bulk;
pub mod collections;
#[cfg(test)]
pub mod doc;
pub mod server;
pub mod users;

use super::args::{GENERIC_FIELDS, type_name};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, Document};

/// An accepted set of BSON types, named as mongod's IDL names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `object`
    Object,
    /// `array`
    Array,
    /// `array<object>`: each element is checked too (TypeMismatch naming `field.<index>`).
    ObjectArray,
    /// `string`
    String,
    /// `bool` and `optionalBool`: a boolean only, numbers refused.
    Bool,
    /// `int`: int32 only.
    Int,
    /// `long`: a 64-bit integer field; the IDL's `long` takes only int64.
    Long,
    /// `safeInt64`: int, long or a finite double (truncated).
    SafeInt64,
    /// `safeBool`: bool or a number (its truthiness).
    SafeBool,
    /// `indexHint`: an index name or a key pattern.
    Hint,
    /// `variant: [string, array, object]` (dropIndexes' `index`).
    StringArrayOrObject,
    /// `double`: a double only (the IDL's `double` takes no other number).
    Double,
    /// Any number (int, long, double, decimal): fields mongod reads with `numberLong()` or a
    /// hand parser that only asks `isNumber()`.
    Number,
    /// `bindata` of any subtype (`uuid` fields included: the subtype is the handler's check).
    BinData,
    /// `variant: [string, array<string>]` (getClusterParameter's target); elements checked.
    StringOrStringArray,
    /// `array<string>`: each element is checked too.
    StringArray,
    /// Anything (`IDLAnyType`).
    Any,
    /// mapReduce's `mapReduceJavascriptCodeType`: a string or JavaScript code; its parser
    /// answers BadValue for anything else.
    JsCode,
    /// mapReduce's `out` (`MapReduceOutOptions`): a collection name or an options document;
    /// BadValue otherwise. The document's shape is the handler's.
    MrOut,
    /// mapReduce's `scope` (`MapReduceGlobalVariableScope`): a document; BadValue otherwise.
    MrScope,
    /// `SaslPayload`: a base64 string or binData; BadValue otherwise (the subtype and the
    /// base64 are the handler's).
    SaslPayload,
}

impl Ty {
    fn accepts(self, v: &Bson) -> bool {
        match self {
            Ty::Object => matches!(v, Bson::Document(_)),
            Ty::Array | Ty::ObjectArray => matches!(v, Bson::Array(_)),
            Ty::Bool => matches!(v, Bson::Boolean(_)),
            Ty::Int => matches!(v, Bson::Int32(_)),
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
            Ty::StringArrayOrObject => {
                matches!(v, Bson::String(_) | Bson::Array(_) | Bson::Document(_))
            }
            Ty::Double => matches!(v, Bson::Double(_)),
            Ty::Number => matches!(
                v,
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
            ),
            Ty::BinData => matches!(v, Bson::Binary(_)),
            Ty::StringOrStringArray => matches!(v, Bson::String(_) | Bson::Array(_)),
            Ty::StringArray => matches!(v, Bson::Array(_)),
            Ty::Any => true,
            Ty::JsCode => matches!(v, Bson::String(_) | Bson::JavaScriptCode(_)),
            Ty::MrOut => matches!(v, Bson::String(_) | Bson::Document(_)),
            Ty::MrScope => matches!(v, Bson::Document(_)),
            Ty::SaslPayload => matches!(v, Bson::String(_) | Bson::Binary(_)),
        }
    }

    /// The type the error message names.
    pub(crate) fn expected(self) -> &'static str {
        match self {
            Ty::Object => "object",
            Ty::Array | Ty::ObjectArray => "array",
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::String => "string",
            Ty::Long => "long",
            Ty::SafeInt64 => "[long, int, decimal, double]",
            Ty::SafeBool => "bool",
            Ty::Hint => "[string, object]",
            Ty::StringArrayOrObject => "[string, array, object]",
            Ty::Double => "double",
            Ty::Number => "[long, int, decimal, double]",
            Ty::BinData => "binData",
            Ty::StringOrStringArray => "[string, array]",
            Ty::StringArray => "array",
            Ty::Any => "any",
            Ty::JsCode => "[string, javascript]",
            Ty::MrOut => "[string, object]",
            Ty::MrScope => "object",
            Ty::SaslPayload => "[string, binData]",
        }
    }

    /// The code for a value of the wrong type: mongod's custom `indexHint` parser fails with
    /// FailedToParse, every generated one with TypeMismatch.
    fn wrong_type_code(self) -> ErrorCode {
        match self {
            Ty::Hint => ErrorCode::FailedToParse,
            Ty::JsCode | Ty::MrOut | Ty::MrScope | Ty::SaslPayload => ErrorCode::BadValue,
            _ => ErrorCode::TypeMismatch,
        }
    }

    /// The message of a hand-written parser that does not speak the IDL's "wrong type" phrase.
    fn own_message(self, field: &str, v: &Bson) -> Option<String> {
        match self {
            Ty::SaslPayload => Some(format!(
                "Invalid SASLPayload type. Expected Base64 or BinData, got: {}",
                type_name(v)
            )),
            Ty::JsCode => Some(format!("'{field}' must be of string or code type")),
            Ty::MrOut => Some("'out' must be either a string or an object".into()),
            Ty::MrScope => Some("'scope' must be an object".into()),
            _ => None,
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
    /// mongod's IDL `strict`: whether a field the table does not name is refused (40415). Many
    /// admin commands are not strict in mongod: their unknown fields are ignored, their known
    /// fields still type-checked.
    pub strict: bool,
    /// The type of the command's own value (IDL `namespace: type`), when mongod checks it;
    /// `None` where the first field is a collection name or ignored.
    pub target: Option<Ty>,
}

/// Check a command `body` against `spec`: unknown fields, types, required fields, bounds, in
/// that order per field as mongod's parser meets them. The first field (the command's target)
/// is the handler's; the generic fields every command takes pass.
pub fn check(spec: &CommandSpec, body: &Document) -> CommandResult<()> {
    check_fields(spec, body, 1, true)
}

/// Check one element of a command's statement array (`update.updates`, `delete.deletes`):
/// every field is the table's, none generic.
pub fn check_entry(spec: &CommandSpec, entry: &Document) -> CommandResult<()> {
    check_fields(spec, entry, 0, false)
}

fn check_fields(spec: &CommandSpec, d: &Document, skip: usize, generic: bool) -> CommandResult<()> {
    let command = spec.name;
    if let (Some(ty), true, Some((_, v))) = (spec.target, skip == 1, d.iter().next()) {
        check_target(command, ty, v)?;
    }
    for (key, v) in d.iter().skip(skip) {
        let Some(field) = spec.fields.iter().find(|f| f.name == key) else {
            if !spec.strict || (generic && GENERIC_FIELDS.contains(&key.as_str())) {
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
        if !d.contains_key(field.name) {
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

fn wrong_type(ty: Ty, path: std::fmt::Arguments<'_>, v: &Bson, expected: &str) -> CommandError {
    err(
        ty.wrong_type_code(),
        format!(
            "BSON field '{path}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

/// The command's own value (`{endSessions: [...]}`), named `command.command` as mongod does.
fn check_target(command: &'static str, ty: Ty, v: &Bson) -> CommandResult<()> {
    let field = Field {
        name: command,
        ty,
        required: true,
        min: None,
    };
    check_value(command, &field, v)
}

fn check_value(command: &str, field: &Field, v: &Bson) -> CommandResult<()> {
    if !field.ty.accepts(v) {
        if let Some(message) = field.ty.own_message(field.name, v) {
            return Err(err(field.ty.wrong_type_code(), message));
        }
        return Err(wrong_type(
            field.ty,
            format_args!("{command}.{}", field.name),
            v,
            field.ty.expected(),
        ));
    }
    let element = match field.ty {
        Ty::ObjectArray => Some(("object", Ty::Object)),
        Ty::StringOrStringArray | Ty::StringArray => Some(("string", Ty::String)),
        _ => None,
    };
    if let (Some((expected, each)), Bson::Array(items)) = (element, v)
        && let Some((i, item)) = items.iter().enumerate().find(|(_, i)| !each.accepts(i))
    {
        return Err(wrong_type(
            field.ty,
            format_args!("{command}.{}.{i}", field.name),
            item,
            expected,
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

pub mod specs;

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
            Bson::Array(vec![Bson::Document(doc! {})]),
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

    /// Whether `v` passes as a value of `ty` (an `array<object>` element by element).
    fn valid(ty: Ty, v: &Bson) -> bool {
        match (ty, v) {
            (Ty::ObjectArray, Bson::Array(items)) => {
                items.iter().all(|i| i.as_document().is_some())
            }
            (Ty::StringOrStringArray | Ty::StringArray, Bson::Array(items)) => {
                items.iter().all(|i| i.as_str().is_some())
            }
            _ => ty.accepts(v),
        }
    }

    /// The checks the tests run: each command table with a target first, each statement table.
    fn tables() -> Vec<(&'static CommandSpec, bool)> {
        let commands = specs::ALL
            .iter()
            .chain(admin::ALL)
            .chain(bulk::ALL)
            .chain(collections::ALL)
            .chain(server::ALL)
            .copied();
        let commands = commands.chain(users::TABLES).map(|s| (s, true));
        let entries = specs::ENTRIES
            .iter()
            .chain(admin::ENTRIES)
            .chain(bulk::ENTRIES);
        commands.chain(entries.map(|s| (*s, false))).collect()
    }

    /// The first value of [`every_type`] that `ty` accepts.
    fn valid_value(ty: Ty) -> Bson {
        every_type()
            .into_iter()
            .find(|v| valid(ty, v))
            .expect("an accepted value")
    }

    fn run(spec: &CommandSpec, command: bool, body: &Document) -> CommandResult<()> {
        if command {
            check(spec, body)
        } else {
            check_entry(spec, body)
        }
    }

    /// A body with the command field (for a command) and every required field at a valid value.
    fn base(spec: &CommandSpec, command: bool) -> Document {
        let mut body = match (command, spec.target) {
            (true, Some(ty)) => doc! { spec.name: valid_value(ty) },
            (true, None) => doc! { spec.name: "c" },
            (false, _) => Document::new(),
        };
        for f in spec.fields.iter().filter(|f| f.required) {
            body.insert(f.name, valid_value(f.ty));
        }
        body
    }

    fn code(r: CommandResult<()>) -> Option<i32> {
        r.err().map(|e| e.code.code())
    }

    #[test]
    fn every_field_times_every_type() {
        for (spec, command) in tables() {
            assert_eq!(
                code(run(spec, command, &base(spec, command))),
                None,
                "{}",
                spec.name
            );
            for field in spec.fields {
                for v in every_type() {
                    let mut body = base(spec, command);
                    body.insert(field.name, v.clone());
                    let got = code(run(spec, command, &body));
                    let want = (!valid(field.ty, &v)).then(|| field.ty.wrong_type_code().code());
                    assert_eq!(got, want, "{}.{} = {v:?}", spec.name, field.name);
                }
            }
        }
    }

    /// The command's own value, where mongod types it (`{endSessions: <array<object>>}`).
    #[test]
    fn target_times_every_type() {
        let all = specs::ALL
            .iter()
            .chain(admin::ALL)
            .chain(collections::ALL)
            .chain(server::ALL)
            .copied();
        for spec in all.chain(users::TABLES) {
            let Some(ty) = spec.target else { continue };
            for v in every_type() {
                let mut body = base(spec, true);
                body.insert(spec.name, v.clone());
                let want = (!valid(ty, &v)).then(|| ty.wrong_type_code().code());
                assert_eq!(code(check(spec, &body)), want, "{} = {v:?}", spec.name);
            }
        }
    }

    #[test]
    fn unknown_missing_and_bounds() {
        for (spec, command) in tables() {
            let mut body = base(spec, command);
            body.insert("noSuchField", 1);
            let want = spec.strict.then_some(40415);
            assert_eq!(code(run(spec, command, &body)), want, "{}", spec.name);
            // The generic fields pass on a command, and are unknown in a statement.
            let mut body = base(spec, command);
            body.insert("comment", 1);
            body.insert("maxTimeMS", 1);
            let want = (!command).then_some(40415);
            assert_eq!(code(run(spec, command, &body)), want, "{}", spec.name);
            for field in spec.fields {
                let mut body = base(spec, command);
                if field.required {
                    body.remove(field.name);
                    assert_eq!(code(run(spec, command, &body)), Some(40414));
                    body.insert(field.name, Bson::Null);
                    let want =
                        (!field.ty.accepts(&Bson::Null)).then(|| field.ty.wrong_type_code().code());
                    assert_eq!(code(run(spec, command, &body)), want);
                } else {
                    body.insert(field.name, Bson::Null);
                    assert_eq!(code(run(spec, command, &body)), None);
                }
                if let Some(min) = field.min {
                    body.insert(field.name, min - 1);
                    assert_eq!(code(run(spec, command, &body)), Some(51024));
                    body.insert(field.name, min);
                    assert_eq!(code(run(spec, command, &body)), None);
                }
            }
        }
    }

    #[test]
    fn object_array_names_the_bad_element() {
        let body = doc! { "insert": "c", "documents": [{ "a": 1 }, 7] };
        let e = check(&specs::INSERT, &body).unwrap_err();
        assert_eq!(e.code.code(), 14);
        assert!(e.message.contains("'insert.documents.1'"), "{}", e.message);
        let e = check_entry(&specs::UPDATE_ENTRY, &doc! { "q": {}, "u": {}, "multi": 1 });
        assert!(e.unwrap_err().message.contains("'update.updates.multi'"));
    }
}
