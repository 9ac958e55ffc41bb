//! Bounds of the query language, each named once with its unit last.

/// Compiled size a client regex may reach (bytes); larger patterns are refused.
pub const REGEX_COMPILED_SIZE_MAX: usize = 1 << 20;
/// Nesting a client regex may use.
pub const REGEX_NEST_MAX: u32 = 100;
/// Depth of nested `$and/$or/$not/$elemMatch` a filter may use (mongod allows 100).
pub const FILTER_DEPTH_MAX: usize = 100;
/// Depth of nested expressions an `$expr` or projection expression may use.
pub const EXPR_DEPTH_MAX: usize = 150;
/// Elements `$push`/`$addToSet` may add in one `$each`, and array index a path may create.
pub const ARRAY_INDEX_CREATE_MAX: usize = 1_500_000;
/// Bytes a string or array an expression builds (`$concat`, `$concatArrays`, `$regexFindAll`,
/// ...) may reach: a value past the BSON document limit can never be stored or returned, so
/// building it is refused as it grows rather than after memory is spent.
pub const BUILT_VALUE_BYTES_MAX: usize = crate::limits::BSON_OBJECT_SIZE_MAX;
/// Bytes of values one `$push` or `$addToSet` accumulator may hold (mongod's
/// `internalQueryMaxPushBytes` / `internalQueryMaxAddToSetBytes`, 100 MiB).
pub const ACCUMULATOR_BYTES_MAX: usize = 100 * 1024 * 1024;
