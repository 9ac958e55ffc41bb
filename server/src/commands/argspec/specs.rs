//! The commands clients use most, from mongod's `*.idl` definitions (`find_command.idl`,
//! `count_command.idl`, `distinct_command.idl`, `getmore_command.idl`, `kill_cursors.idl`,
//! `drop.idl`, `list_collections.idl`, `list_indexes.idl`, `write_ops.idl`,
//! `aggregate_command.idl`, `create_indexes.idl`, `create.idl`, `list_databases.idl`,
//! `rename_collection.idl`, `coll_mod.idl`, `drop_indexes.idl`, `explain.idl`). Internal-only
//! fields (sharding, encryption, resharding) are left out and so refused as unknown.

use super::{CommandSpec, Ty, non_negative, opt, req};

pub static FIND: CommandSpec = CommandSpec {
    name: "find",
    strict: true,
    target: None,
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
    strict: true,
    target: None,
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
    strict: true,
    target: None,
    fields: &[
        req("key", Ty::String),
        opt("query", Ty::Object),
        opt("collation", Ty::Object),
        opt("hint", Ty::Hint),
    ],
};

pub static GET_MORE: CommandSpec = CommandSpec {
    name: "getMore",
    strict: true,
    target: None,
    fields: &[
        req("collection", Ty::String),
        non_negative("batchSize"),
        opt("term", Ty::Long),
        opt("lastKnownCommittedOpTime", Ty::Object),
    ],
};

pub static KILL_CURSORS: CommandSpec = CommandSpec {
    name: "killCursors",
    strict: true,
    target: None,
    fields: &[req("cursors", Ty::Array)],
};

pub static DROP: CommandSpec = CommandSpec {
    name: "drop",
    strict: true,
    target: None,
    fields: &[],
};

pub static LIST_COLLECTIONS: CommandSpec = CommandSpec {
    name: "listCollections",
    strict: true,
    target: None,
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
    strict: true,
    target: None,
    fields: &[
        opt("cursor", Ty::Object),
        opt("includeBuildUUIDs", Ty::SafeBool),
        opt("includeIndexBuildInfo", Ty::SafeBool),
    ],
};

// mongod's `write_ops.idl`: the write commands share `WriteCommandRequestBase`
// (`ordered` bool, `bypassDocumentValidation` safeBool); their statements are strict.

pub static INSERT: CommandSpec = CommandSpec {
    name: "insert",
    strict: true,
    target: None,
    fields: &[
        // Required, but usually sent as a document sequence (checked with the statements).
        opt("documents", Ty::ObjectArray),
        opt("ordered", Ty::Bool),
        opt("bypassDocumentValidation", Ty::SafeBool),
    ],
};

pub static UPDATE: CommandSpec = CommandSpec {
    name: "update",
    strict: true,
    target: None,
    fields: &[
        opt("updates", Ty::ObjectArray),
        opt("ordered", Ty::Bool),
        opt("bypassDocumentValidation", Ty::SafeBool),
        opt("let", Ty::Object),
    ],
};

/// One element of `update.updates` (`UpdateOpEntry`; `sort` is mongod 8.0's).
pub static UPDATE_ENTRY: CommandSpec = CommandSpec {
    name: "update.updates",
    strict: true,
    target: None,
    fields: &[
        req("q", Ty::Object),
        // An object or a pipeline; the update parser refuses anything else.
        req("u", Ty::Any),
        opt("c", Ty::Object),
        opt("sort", Ty::Object),
        opt("arrayFilters", Ty::ObjectArray),
        opt("hint", Ty::Hint),
        opt("multi", Ty::Bool),
        opt("upsert", Ty::Bool),
        opt("collation", Ty::Object),
    ],
};

pub static DELETE: CommandSpec = CommandSpec {
    name: "delete",
    strict: true,
    target: None,
    fields: &[
        opt("deletes", Ty::ObjectArray),
        opt("ordered", Ty::Bool),
        opt("bypassDocumentValidation", Ty::SafeBool),
        opt("let", Ty::Object),
    ],
};

/// One element of `delete.deletes` (`DeleteOpEntry`).
pub static DELETE_ENTRY: CommandSpec = CommandSpec {
    name: "delete.deletes",
    strict: true,
    target: None,
    fields: &[
        req("q", Ty::Object),
        // 0 or 1, any numeric type: the handler's check (FailedToParse otherwise).
        req("limit", Ty::Any),
        opt("hint", Ty::Hint),
        opt("collation", Ty::Object),
    ],
};

pub static FIND_AND_MODIFY: CommandSpec = CommandSpec {
    name: "findAndModify",
    strict: true,
    target: None,
    fields: &[
        opt("query", Ty::Object),
        opt("fields", Ty::Object),
        opt("sort", Ty::Object),
        opt("hint", Ty::Hint),
        opt("collation", Ty::Object),
        opt("arrayFilters", Ty::ObjectArray),
        opt("remove", Ty::SafeBool),
        opt("update", Ty::Any),
        opt("upsert", Ty::SafeBool),
        opt("new", Ty::SafeBool),
        opt("bypassDocumentValidation", Ty::SafeBool),
        opt("let", Ty::Object),
    ],
};

/// `aggregate_command.idl`; the internal fields a router sends are accepted as mongod does.
pub static AGGREGATE: CommandSpec = CommandSpec {
    name: "aggregate",
    strict: true,
    target: None,
    fields: &[
        req("pipeline", Ty::ObjectArray),
        opt("explain", Ty::Bool),
        opt("allowDiskUse", Ty::Bool),
        opt("cursor", Ty::Object),
        opt("bypassDocumentValidation", Ty::SafeBool),
        opt("collation", Ty::Object),
        opt("hint", Ty::Hint),
        opt("let", Ty::Object),
        opt("needsMerge", Ty::Bool),
        opt("fromMongos", Ty::Bool),
        opt("isMapReduceCommand", Ty::Bool),
    ],
};

/// `create_indexes.idl`; each spec is then checked by `index_spec::parse_spec`.
pub static CREATE_INDEXES: CommandSpec = CommandSpec {
    name: "createIndexes",
    strict: true,
    target: None,
    fields: &[
        req("indexes", Ty::ObjectArray),
        opt("v", Ty::SafeInt64),
        opt("ignoreUnknownIndexOptions", Ty::SafeBool),
        // An int or a string (`CommitQuorum`); unused on a standalone.
        opt("commitQuorum", Ty::Any),
        opt("isTimeseriesNamespace", Ty::Bool),
    ],
};

/// `create.idl`. `capped`, `size` and `max` are read (and type-checked, decimals included)
/// by `commands::capped`; options cairn cannot honour are refused by the handler.
pub static CREATE: CommandSpec = CommandSpec {
    name: "create",
    strict: true,
    target: None,
    fields: &[
        opt("capped", Ty::Any),
        opt("size", Ty::Any),
        opt("max", Ty::Any),
        opt("autoIndexId", Ty::SafeBool),
        opt("idIndex", Ty::Object),
        opt("storageEngine", Ty::Object),
        opt("validator", Ty::Object),
        opt("validationLevel", Ty::String),
        opt("validationAction", Ty::String),
        opt("indexOptionDefaults", Ty::Object),
        opt("viewOn", Ty::String),
        opt("pipeline", Ty::ObjectArray),
        opt("collation", Ty::Object),
        opt("timeseries", Ty::Object),
        opt("clusteredIndex", Ty::Any),
        opt("changeStreamPreAndPostImages", Ty::Object),
        opt("expireAfterSeconds", Ty::SafeInt64),
        opt("encryptedFields", Ty::Object),
        opt("flags", Ty::SafeInt64),
    ],
};

pub static DROP_DATABASE: CommandSpec = CommandSpec {
    name: "dropDatabase",
    strict: true,
    target: None,
    fields: &[],
};

pub static LIST_DATABASES: CommandSpec = CommandSpec {
    name: "listDatabases",
    strict: true,
    target: None,
    fields: &[
        opt("filter", Ty::Object),
        opt("nameOnly", Ty::SafeBool),
        opt("authorizedDatabases", Ty::Bool),
    ],
};

pub static RENAME_COLLECTION: CommandSpec = CommandSpec {
    name: "renameCollection",
    strict: true,
    target: None,
    fields: &[
        req("to", Ty::String),
        opt("dropTarget", Ty::Bool),
        opt("stayTemp", Ty::Bool),
    ],
};

/// `coll_mod.idl`, the fields cairn reads or refuses by name.
pub static COLL_MOD: CommandSpec = CommandSpec {
    name: "collMod",
    strict: true,
    target: None,
    fields: &[
        opt("index", Ty::Object),
        opt("validator", Ty::Object),
        opt("validationLevel", Ty::String),
        opt("validationAction", Ty::String),
        opt("viewOn", Ty::String),
        opt("pipeline", Ty::ObjectArray),
        // A number or "off".
        opt("expireAfterSeconds", Ty::Any),
        opt("timeseries", Ty::Object),
        opt("changeStreamPreAndPostImages", Ty::Object),
        opt("cappedSize", Ty::SafeInt64),
        opt("cappedMax", Ty::SafeInt64),
        opt("dryRun", Ty::Bool),
    ],
};

pub static DROP_INDEXES: CommandSpec = CommandSpec {
    name: "dropIndexes",
    strict: true,
    target: None,
    fields: &[req("index", Ty::StringArrayOrObject)],
};

/// `explain.idl`: the explained command is the first field, then its verbosity.
pub static EXPLAIN: CommandSpec = CommandSpec {
    name: "explain",
    strict: true,
    target: None,
    fields: &[opt("verbosity", Ty::String)],
};

/// Every command table, for the derived tests.
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
    &INSERT,
    &UPDATE,
    &DELETE,
    &FIND_AND_MODIFY,
    &AGGREGATE,
    &CREATE_INDEXES,
    &CREATE,
    &DROP_DATABASE,
    &LIST_DATABASES,
    &RENAME_COLLECTION,
    &COLL_MOD,
    &DROP_INDEXES,
    &EXPLAIN,
];

/// Every statement table (checked with `check_entry`).
#[cfg(test)]
pub static ENTRIES: &[&CommandSpec] = &[&UPDATE_ENTRY, &DELETE_ENTRY];
