//! The values `distinct` answers, gathered as documents stream past: each value kept once (by
//! its index-key encoding, so `1` and `1.0` are one value, as mongod's comparison has it), the
//! kept values bounded by the BSON document limit as mongod bounds its reply (17217), sorted at
//! the end. Memory follows the number of distinct values, not of documents.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::path::values_at;
use crate::query::pipeline::run_context::value_size_bytes;
use crate::query::pipeline::values::value_key;
use bson::{Bson, Document};
use std::collections::HashSet;

#[derive(Default)]
pub struct DistinctValues {
    seen: HashSet<Vec<u8>>,
    values: Vec<Bson>,
    bytes: usize,
}

impl DistinctValues {
    /// Adds the values `doc` has at `path` (arrays unwound).
    pub fn add_from(&mut self, doc: &Document, path: &[&str]) -> CommandResult<()> {
        let mut found = Vec::new();
        values_at(&Bson::Document(doc.clone()), path, &mut found);
        for v in found {
            self.add(v)?;
        }
        Ok(())
    }

    pub fn add(&mut self, v: Bson) -> CommandResult<()> {
        if !self.seen.insert(value_key(&v)) {
            return Ok(());
        }
        self.bytes += value_size_bytes(&v);
        if self.bytes > crate::limits::BSON_OBJECT_SIZE_MAX {
            return Err(err(ErrorCode::Location17217, "distinct too big, 16mb cap"));
        }
        self.values.push(v);
        Ok(())
    }

    /// The values in BSON order.
    pub fn finish(mut self) -> Vec<Bson> {
        self.values.sort_by(crate::query::collator::compare_bson);
        self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn each_value_once_in_order_and_numbers_by_value() {
        let mut d = DistinctValues::default();
        for doc in [
            doc! { "a": 2 },
            doc! { "a": [1, 2.0, "x"] },
            doc! { "a": 1_i64 },
            doc! { "b": 1 },
            doc! { "a": { "c": 1 } },
        ] {
            d.add_from(&doc, &["a"]).unwrap();
        }
        let values = d.finish();
        assert_eq!(values.len(), 4, "{values:?}");
        assert_eq!(values[0], Bson::Int32(1));
        assert_eq!(values[1], Bson::Int32(2));
        assert_eq!(values[2], Bson::String("x".into()));
    }

    #[test]
    fn past_sixteen_mib_of_values_is_17217() {
        let mut d = DistinctValues::default();
        let big = "v".repeat(1 << 20);
        let e = (0..20)
            .try_for_each(|i| d.add(Bson::String(format!("{i}{big}"))))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Location17217);
    }
}
