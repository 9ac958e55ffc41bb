//! Tables of the collection commands whose parsers mongod writes by hand or with custom IDL
//! types: `mapReduce` (`map_reduce.idl`, whose code, `out` and `scope` types answer BadValue),
//! `convertToCapped` and `cloneCollectionAsCapped` (hand-parsed `BasicCommand`s: unknown fields
//! ignored, `size` read with `safeNumberLong`, so any type passes the table and a size that is
//! not a positive number is the handler's InvalidOptions).

use super::{CommandSpec, Ty, opt, req};

/// `map_reduce.idl`: strict; `map`, `reduce` and `out` required.
pub static MAP_REDUCE: CommandSpec = CommandSpec {
    name: "mapReduce",
    strict: true,
    target: None,
    fields: &[
        req("map", Ty::JsCode),
        req("reduce", Ty::JsCode),
        req("out", Ty::MrOut),
        opt("query", Ty::Object),
        opt("sort", Ty::Object),
        opt("collation", Ty::Object),
        opt("limit", Ty::SafeInt64),
        // Null allowed (old Java drivers send it): optional fields pass null here anyway.
        opt("finalize", Ty::JsCode),
        opt("scope", Ty::MrScope),
        opt("verbose", Ty::Bool),
        opt("bypassDocumentValidation", Ty::Bool),
        opt("jsMode", Ty::Bool),
    ],
};

/// `convertToCapped: <coll>, size`; mongod reads `size` alone and ignores the rest.
pub static CONVERT_TO_CAPPED: CommandSpec = CommandSpec {
    name: "convertToCapped",
    strict: false,
    target: None,
    fields: &[opt("size", Ty::Any)],
};

/// `cloneCollectionAsCapped: <from>, toCollection, size, temp`: both names must be strings
/// (TypeMismatch; a missing `toCollection` is the handler's, with the same code).
pub static CLONE_COLLECTION_AS_CAPPED: CommandSpec = CommandSpec {
    name: "cloneCollectionAsCapped",
    strict: false,
    target: Some(Ty::String),
    fields: &[
        opt("toCollection", Ty::String),
        opt("size", Ty::Any),
        // Read for its truthiness.
        opt("temp", Ty::Any),
    ],
};

/// Every table of this file, for the derived tests and the generated document.
#[cfg(test)]
pub static ALL: &[&CommandSpec] = &[&MAP_REDUCE, &CONVERT_TO_CAPPED, &CLONE_COLLECTION_AS_CAPPED];
