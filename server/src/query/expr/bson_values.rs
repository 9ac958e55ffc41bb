//! Operators that read a BSON value's own shape: `$bsonSize` (a document's encoded bytes),
//! `$binarySize` (a string's or binData's bytes), `$tsSecond` and `$tsIncrement` (a
//! timestamp's halves, as longs). null or missing gives null; another type fails with the
//! operator's mongod code.

use super::Operator;
use super::args::{Value, is_nullish, null, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use bson::Bson;

pub(super) fn apply(op: Operator, v: &Value) -> CommandResult<Value> {
    if is_nullish(v) {
        return null();
    }
    let found = type_name(v);
    let b = v.as_ref().unwrap_or(&Bson::Null);
    let out = match (op, b) {
        (Operator::BsonSize, Bson::Document(d)) => {
            let bytes = bson::RawDocumentBuf::try_from(d)
                .map_err(|e| err(ErrorCode::BadValue, format!("$bsonSize: {e}")))?;
            size(bytes.as_bytes().len())
        }
        (Operator::BsonSize, _) => {
            return Err(err(
                ErrorCode::Location31393,
                format!("$bsonSize requires a document input, found: {found}"),
            ));
        }
        (Operator::BinarySize, Bson::String(s)) => size(s.len()),
        (Operator::BinarySize, Bson::Binary(b)) => size(b.bytes.len()),
        (Operator::BinarySize, _) => {
            return Err(err(
                ErrorCode::Location51276,
                format!("$binarySize requires a string or BinData argument, found: {found}"),
            ));
        }
        (Operator::TsSecond, Bson::Timestamp(t)) => Bson::Int64(i64::from(t.time)),
        (Operator::TsIncrement, Bson::Timestamp(t)) => Bson::Int64(i64::from(t.increment)),
        (Operator::TsSecond | Operator::TsIncrement, _) => {
            let (code, name) = if op == Operator::TsSecond {
                (ErrorCode::Location5687301, "$tsSecond")
            } else {
                (ErrorCode::Location5687302, "$tsIncrement")
            };
            // The leading space is in mongod's message.
            return Err(err(
                code,
                format!(" Argument to {name} must be a timestamp, but is {found}"),
            ));
        }
        _ => unreachable!("bson_values::apply called for {op:?}"),
    };
    Ok(Some(out))
}

/// Sizes are int32 as mongod sends them (values never pass 2 GiB: the BSON limit is 16 MiB).
fn size(n: usize) -> Bson {
    Bson::Int32(i32::try_from(n).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::super::Expr;
    use bson::{Binary, Bson, Timestamp, doc, spec::BinarySubtype};

    fn eval(spec: bson::Document) -> Result<Bson, crate::error::CommandError> {
        let root = doc! {
            "d": { "a": 1 },
            "t": Timestamp { time: 1622731060, increment: 10 },
            "b": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
        };
        let raw = bson::RawDocumentBuf::try_from(&root).unwrap();
        Expr::parse(&Bson::Document(spec))?.evaluate(&raw)
    }

    #[test]
    fn values_and_nulls() {
        // {a: 1}: 4 (length) + 1 (type) + 2 ("a\0") + 4 (int32) + 1 (terminator).
        assert_eq!(eval(doc! { "$bsonSize": "$d" }).unwrap(), Bson::Int32(12));
        assert_eq!(
            eval(doc! { "$bsonSize": {"$literal": {}} }).unwrap(),
            Bson::Int32(5)
        );
        assert_eq!(eval(doc! { "$bsonSize": "$missing" }).unwrap(), Bson::Null);
        assert_eq!(
            eval(doc! { "$binarySize": "héllo" }).unwrap(),
            Bson::Int32(6)
        );
        assert_eq!(eval(doc! { "$binarySize": "$b" }).unwrap(), Bson::Int32(3));
        assert_eq!(eval(doc! { "$binarySize": null }).unwrap(), Bson::Null);
        assert_eq!(
            eval(doc! { "$tsSecond": "$t" }).unwrap(),
            Bson::Int64(1622731060)
        );
        assert_eq!(
            eval(doc! { "$tsIncrement": "$t" }).unwrap(),
            Bson::Int64(10)
        );
        assert_eq!(
            eval(doc! { "$tsIncrement": "$missing" }).unwrap(),
            Bson::Null
        );
    }

    #[test]
    fn wrong_types_fail_as_mongod() {
        let fail = |spec| {
            let e = eval(spec).unwrap_err();
            (e.code.code(), e.message)
        };
        assert_eq!(
            fail(doc! { "$bsonSize": 1 }),
            (
                31393,
                "$bsonSize requires a document input, found: int".into()
            )
        );
        assert_eq!(fail(doc! { "$bsonSize": [[1]] }).0, 31393);
        assert_eq!(
            fail(doc! { "$binarySize": 1 }),
            (
                51276,
                "$binarySize requires a string or BinData argument, found: int".into()
            )
        );
        assert_eq!(
            fail(doc! { "$tsSecond": 1 }),
            (
                5687301,
                " Argument to $tsSecond must be a timestamp, but is int".into()
            )
        );
        assert_eq!(fail(doc! { "$tsIncrement": "x" }).0, 5687302);
    }
}
