//! The values `$push` and `$addToSet` collect for one group, kept as the bytes of one BSON array
//! being built rather than as decoded values. A decoded document costs about ten small heap
//! allocations (its map, its keys, its strings); a `$push: "$$ROOT"` over a large collection
//! made millions of them, and the allocator keeps metadata for every page such a peak touched
//! long after the query ends. Here a group's values live in one growing buffer, counted in
//! the bytes it really holds. They are decoded only when the group's result is built.
//! Invariant: `bytes()` is the buffer's length, the figure the byte bound is checked against.

use super::variables::Value;
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, RawArrayBuf, RawBson};

/// One group's collected values, in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct RawItems {
    array: RawArrayBuf,
}

impl RawItems {
    /// Appends `v` (a missing value adds nothing); returns the bytes the buffer grew by.
    pub fn push(&mut self, v: Value<'_>) -> CommandResult<usize> {
        let before = self.bytes();
        match v {
            Value::Missing => return Ok(0),
            Value::Raw(r) => self.array.push(r),
            Value::Owned(b) => self.array.push(owned_to_raw(b)?),
        }
        Ok(self.bytes() - before)
    }

    /// The buffer's size in bytes.
    pub fn bytes(&self) -> usize {
        self.array.as_bytes().len()
    }

    /// The values, decoded (the group's result).
    pub fn to_bson(&self) -> Bson {
        let items = self
            .array
            .into_iter()
            .map(|item| item.map_or(Bson::Null, crate::query::types::to_owned))
            .collect();
        Bson::Array(items)
    }
}

/// An expression's computed value as raw BSON (only a value that cannot be encoded fails, such
/// as a document with a key holding a NUL byte).
pub fn owned_to_raw(v: Bson) -> CommandResult<RawBson> {
    RawBson::try_from(v)
        .map_err(|e| err(ErrorCode::BadValue, format!("value cannot be encoded: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawBsonRef, doc, rawdoc};

    #[test]
    fn raw_and_owned_values_come_back_in_order() {
        let mut items = RawItems::default();
        let d = rawdoc! {"a": 1, "s": "x"};
        let grown = items.push(Value::Raw(RawBsonRef::Document(&d))).unwrap();
        assert!(grown >= d.as_bytes().len());
        items.push(Value::Owned(Bson::Int64(7))).unwrap();
        assert_eq!(items.push(Value::Missing).unwrap(), 0);
        items
            .push(Value::Owned(Bson::Document(doc! {"b": [1, 2]})))
            .unwrap();
        assert_eq!(
            items.to_bson(),
            Bson::Array(vec![
                Bson::Document(doc! {"a": 1, "s": "x"}),
                Bson::Int64(7),
                Bson::Document(doc! {"b": [1, 2]}),
            ])
        );
    }

    #[test]
    fn bytes_count_the_whole_buffer() {
        let mut items = RawItems::default();
        let empty = items.bytes();
        let mut grown = 0;
        for i in 0..100 {
            grown += items
                .push(Value::Owned(Bson::String("x".repeat(i))))
                .unwrap();
        }
        assert_eq!(items.bytes(), empty + grown);
        // 100 strings of 0..99 bytes hold at least their text.
        assert!(grown > (0..100).sum::<usize>());
    }
}
