//! Comparison operators: `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte` and `$cmp`. They are not
//! type-bracketed: they use the one total order of `storage::order`, with missing just below
//! null.

use super::Operator;
use super::args::Value;
use crate::error::CommandResult;
use bson::Bson;
use std::cmp::Ordering;

/// Missing reads as undefined in comparisons, which orders it just below null.
pub(super) fn cmp_values(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    let undefined = Bson::Undefined;
    crate::query::collator::compare_bson(
        a.as_ref().unwrap_or(&undefined),
        b.as_ref().unwrap_or(&undefined),
    )
}

/// The comparison `op` of two evaluated arguments.
pub(super) fn compare(op: Operator, values: &[Value]) -> CommandResult<Value> {
    let boolean = |b: bool| Ok(Some(Bson::Boolean(b)));
    let cmp = |v: &[Option<Bson>]| cmp_values(&v[0], &v[1]);
    match op {
        Operator::Eq => boolean(cmp(values) == Ordering::Equal),
        Operator::Ne => boolean(cmp(values) != Ordering::Equal),
        Operator::Gt => boolean(cmp(values) == Ordering::Greater),
        Operator::Gte => boolean(cmp(values) != Ordering::Less),
        Operator::Lt => boolean(cmp(values) == Ordering::Less),
        Operator::Lte => boolean(cmp(values) != Ordering::Greater),
        _ => Ok(Some(Bson::Int32(match cmp(values) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }))),
    }
}
