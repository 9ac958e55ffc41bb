//! mongod 8.0's `bulkWrite` (`bulk_write.idl`) as tables: the command, one `nsInfo` entry, the
//! three op shapes and `cursor`. The tables are named by the paths mongod's errors use
//! (`bulkWrite.ops.document`, `bulkWrite.nsInfo.x`: no index). An op's first field (its
//! `nsInfo` index) and `updateMods` (an object or a pipeline) keep the handler's checks.

use super::{CommandSpec, Ty, non_negative, opt, req};

pub static BULK_WRITE: CommandSpec = CommandSpec {
    name: "bulkWrite",
    fields: &[
        // Required, but usually sent as document sequences (checked with them).
        opt("ops", Ty::ObjectArray),
        opt("nsInfo", Ty::ObjectArray),
        opt("cursor", Ty::Object),
        opt("bypassDocumentValidation", Ty::SafeBool),
        opt("ordered", Ty::Bool),
        opt("errorsOnly", Ty::Bool),
        opt("let", Ty::Object),
        opt("stmtId", Ty::Int),
        opt("stmtIds", Ty::Array),
    ],
    strict: true,
    target: None,
};

/// `NamespaceInfoEntry`.
pub static NS_INFO: CommandSpec = CommandSpec {
    name: "bulkWrite.nsInfo",
    fields: &[
        req("ns", Ty::String),
        opt("collectionUUID", Ty::BinData),
        opt("encryptionInformation", Ty::Object),
        opt("isTimeseriesNamespace", Ty::Bool),
    ],
    strict: true,
    target: None,
};

pub static INSERT_OP: CommandSpec = CommandSpec {
    name: "bulkWrite.ops",
    fields: &[opt("insert", Ty::Any), req("document", Ty::Object)],
    strict: true,
    target: None,
};

pub static UPDATE_OP: CommandSpec = CommandSpec {
    name: "bulkWrite.ops",
    fields: &[
        opt("update", Ty::Any),
        req("filter", Ty::Object),
        req("updateMods", Ty::Any),
        opt("multi", Ty::Bool),
        opt("upsert", Ty::Bool),
        opt("arrayFilters", Ty::ObjectArray),
        opt("hint", Ty::Hint),
        opt("collation", Ty::Object),
        opt("sort", Ty::Object),
        opt("constants", Ty::Object),
    ],
    strict: true,
    target: None,
};

pub static DELETE_OP: CommandSpec = CommandSpec {
    name: "bulkWrite.ops",
    fields: &[
        opt("delete", Ty::Any),
        req("filter", Ty::Object),
        opt("multi", Ty::Bool),
        opt("hint", Ty::Hint),
        opt("collation", Ty::Object),
    ],
    strict: true,
    target: None,
};

/// `SimpleCursorOptions`.
pub static CURSOR: CommandSpec = CommandSpec {
    name: "bulkWrite.cursor",
    fields: &[non_negative("batchSize")],
    strict: true,
    target: None,
};

#[cfg(test)]
pub static ALL: &[&CommandSpec] = &[&BULK_WRITE];

#[cfg(test)]
pub static ENTRIES: &[&CommandSpec] = &[&NS_INFO, &INSERT_OP, &UPDATE_OP, &DELETE_OP, &CURSOR];
