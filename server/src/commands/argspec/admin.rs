//! The admin and diagnostic commands' tables, from mongod's IDL definitions where it has them
//! (`compact.idl`, `fsync.idl`, `profile.idl`, `lock_info.idl`, `connection_status.idl`,
//! `sessions_commands.idl`, `kill_sessions.idl`, `cluster_server_parameter_cmds.idl`,
//! `validate_db_metadata.idl`, `shutdown.idl`, `plan_cache_clear.idl`) and from the hand parsers
//! of the commands it declares without one. A command mongod parses without `strict` (or by
//! hand, ignoring what it does not read) is `strict: false` here: unknown fields pass, known ones
//! are still type-checked.
//!
//! Fields whose type mongod checks with a command-specific code (the plan-cache shape,
//! `profile.filter`, `killOp.op`'s integrality) are `Ty::Any` or a wide type here and stay the
//! handler's.

use super::{CommandSpec, Field, Ty, opt, req};

/// An optional `safeInt64` field with a lower bound (IDL `validator: { gte: n }`).
const fn at_least(name: &'static str, min: i64) -> Field {
    Field {
        name,
        ty: Ty::SafeInt64,
        required: false,
        min: Some(min),
    }
}

/// A table with no fields: strict ones refuse every non-generic field.
const fn bare(name: &'static str, strict: bool) -> CommandSpec {
    CommandSpec {
        name,
        fields: &[],
        strict,
        target: None,
    }
}

pub static CONNECTION_STATUS: CommandSpec = CommandSpec {
    name: "connectionStatus",
    fields: &[opt("showPrivileges", Ty::SafeBool)],
    strict: true,
    target: None,
};

pub static LOCK_INFO: CommandSpec = CommandSpec {
    name: "lockInfo",
    fields: &[opt("includeStorageEngineDump", Ty::Bool)],
    strict: true,
    target: None,
};

/// 8.0's `compact`: `freeSpaceTargetMB` and `dryRun` joined `force`.
pub static COMPACT: CommandSpec = CommandSpec {
    name: "compact",
    fields: &[
        opt("force", Ty::Bool),
        at_least("freeSpaceTargetMB", 1),
        opt("dryRun", Ty::Bool),
    ],
    strict: true,
    target: None,
};

/// 8.0's `autoCompact`: `{autoCompact: <bool>, freeSpaceTargetMB, runOnce}`.
pub static AUTO_COMPACT: CommandSpec = CommandSpec {
    name: "autoCompact",
    fields: &[at_least("freeSpaceTargetMB", 1), opt("runOnce", Ty::Bool)],
    strict: true,
    target: Some(Ty::Bool),
};

/// 8.0's `fsync.idl` (7.0 parsed it by hand and ignored unknown fields).
pub static FSYNC: CommandSpec = CommandSpec {
    name: "fsync",
    fields: &[
        opt("lock", Ty::SafeBool),
        opt("fsyncLockAcquisitionTimeoutMillis", Ty::Int),
        opt("forBackup", Ty::SafeBool),
        opt("allowFsyncFailure", Ty::SafeBool),
    ],
    strict: true,
    target: None,
};

/// `profile: <level>`; not strict in mongod. The level's range and the filter's shape are the
/// handler's (BadValue).
pub static PROFILE: CommandSpec = CommandSpec {
    name: "profile",
    fields: &[
        opt("slowms", Ty::SafeInt64),
        opt("sampleRate", Ty::Double),
        opt("filter", Ty::Any),
    ],
    strict: false,
    target: Some(Ty::SafeInt64),
};

pub static GET_CLUSTER_PARAMETER: CommandSpec = CommandSpec {
    name: "getClusterParameter",
    fields: &[],
    strict: false,
    target: Some(Ty::StringOrStringArray),
};

pub static SET_CLUSTER_PARAMETER: CommandSpec = CommandSpec {
    name: "setClusterParameter",
    fields: &[],
    strict: false,
    target: Some(Ty::Object),
};

pub static END_SESSIONS: CommandSpec = CommandSpec {
    name: "endSessions",
    fields: &[],
    strict: true,
    target: Some(Ty::ObjectArray),
};

pub static REFRESH_SESSIONS: CommandSpec = CommandSpec {
    name: "refreshSessions",
    fields: &[],
    strict: true,
    target: Some(Ty::ObjectArray),
};

/// `LogicalSessionFromClient`, the element of `endSessions`, `refreshSessions` and
/// `killSessions`.
pub static SESSION_ENTRY: CommandSpec = CommandSpec {
    name: "LogicalSessionFromClient",
    fields: &[req("id", Ty::BinData), opt("uid", Ty::BinData)],
    strict: true,
    target: None,
};

/// `$listLocalSessions`' spec (`list_sessions.idl`'s `ListSessionsSpec`).
pub static LIST_SESSIONS_SPEC: CommandSpec = CommandSpec {
    name: "$listLocalSessions",
    fields: &[opt("allUsers", Ty::Bool), opt("users", Ty::ObjectArray)],
    strict: true,
    target: None,
};

/// `$listSessions`' spec: the same `ListSessionsSpec`, named after its stage in messages.
pub static LIST_ALL_SESSIONS_SPEC: CommandSpec = CommandSpec {
    name: "$listSessions",
    ..LIST_SESSIONS_SPEC
};

/// `$queryStats`' spec (`DocumentSourceQueryStatsSpec`, strict).
pub static QUERY_STATS_SPEC: CommandSpec = CommandSpec {
    name: "$queryStats",
    fields: &[opt("transformIdentifiers", Ty::Object)],
    strict: true,
    target: None,
};

/// Its `transformIdentifiers` (`TransformIdentifiersSpec`, strict).
pub static QUERY_STATS_TRANSFORM: CommandSpec = CommandSpec {
    name: "$queryStats.transformIdentifiers",
    fields: &[req("algorithm", Ty::String), opt("hmacKey", Ty::BinData)],
    strict: true,
    target: None,
};

/// One element of its `users` (`ListSessionsUser`).
pub static LIST_SESSIONS_USER: CommandSpec = CommandSpec {
    name: "ListSessionsUser",
    fields: &[req("user", Ty::String), req("db", Ty::String)],
    strict: true,
    target: None,
};

pub static KILL_SESSIONS: CommandSpec = CommandSpec {
    name: "killSessions",
    fields: &[],
    strict: true,
    target: Some(Ty::ObjectArray),
};

pub static KILL_ALL_SESSIONS: CommandSpec = CommandSpec {
    name: "killAllSessions",
    fields: &[],
    strict: true,
    target: Some(Ty::ObjectArray),
};

/// `KillAllSessionsUser`, the element of `killAllSessions` (and of a pattern's `users`).
pub static KILL_ALL_SESSIONS_ENTRY: CommandSpec = CommandSpec {
    name: "killAllSessions.killAllSessions",
    fields: &[opt("user", Ty::String), opt("db", Ty::String)],
    strict: true,
    target: None,
};

pub static KILL_ALL_SESSIONS_BY_PATTERN: CommandSpec = CommandSpec {
    name: "killAllSessionsByPattern",
    fields: &[],
    strict: true,
    target: Some(Ty::ObjectArray),
};

/// `KillAllSessionsByPattern`, one pattern.
pub static KILL_PATTERN_ENTRY: CommandSpec = CommandSpec {
    name: "killAllSessionsByPattern.killAllSessionsByPattern",
    fields: &[
        opt("lsid", Ty::Object),
        opt("uid", Ty::BinData),
        opt("users", Ty::ObjectArray),
        opt("roles", Ty::ObjectArray),
    ],
    strict: true,
    target: None,
};

/// `dataSize: "db.coll"`: parsed by hand in mongod; cairn refuses fields it does not know.
pub static DATA_SIZE: CommandSpec = CommandSpec {
    name: "dataSize",
    fields: &[
        opt("keyPattern", Ty::Object),
        opt("min", Ty::Object),
        opt("max", Ty::Object),
        // Read for its truthiness, whatever its type.
        opt("estimate", Ty::Any),
    ],
    strict: true,
    target: Some(Ty::String),
};

pub static VALIDATE_DB_METADATA: CommandSpec = CommandSpec {
    name: "validateDBMetadata",
    fields: &[
        opt("db", Ty::String),
        opt("collection", Ty::String),
        req("apiParameters", Ty::Object),
    ],
    strict: true,
    target: None,
};

/// `validateDBMetadata.apiParameters` (`APIParamsForCmd`).
pub static API_PARAMETERS: CommandSpec = CommandSpec {
    name: "validateDBMetadata.apiParameters",
    fields: &[
        req("version", Ty::String),
        opt("strict", Ty::Bool),
        opt("deprecationErrors", Ty::Bool),
    ],
    strict: true,
    target: None,
};

pub static DB_STATS: CommandSpec = CommandSpec {
    name: "dbStats",
    fields: &[
        opt("scale", Ty::SafeInt64),
        opt("freeStorage", Ty::SafeBool),
    ],
    strict: true,
    target: None,
};

pub static COLL_STATS: CommandSpec = CommandSpec {
    name: "collStats",
    fields: &[opt("scale", Ty::SafeInt64), opt("verbose", Ty::SafeBool)],
    strict: true,
    target: None,
};

/// `validate`: mongod reads each flag for its truthiness.
pub static VALIDATE: CommandSpec = CommandSpec {
    name: "validate",
    fields: &[
        opt("full", Ty::SafeBool),
        opt("repair", Ty::SafeBool),
        opt("metadata", Ty::SafeBool),
        opt("checkBSONConformance", Ty::SafeBool),
        opt("background", Ty::SafeBool),
        opt("scandata", Ty::SafeBool),
    ],
    strict: true,
    target: None,
};

/// `killOp {op}`: hand-parsed in mongod, unknown fields ignored; a missing `op` is
/// FailedToParse and a fractional one TypeMismatch, both the handler's.
pub static KILL_OP: CommandSpec = CommandSpec {
    name: "killOp",
    fields: &[opt("op", Ty::Number)],
    strict: false,
    target: None,
};

/// `getLog: <name>`; the handler answers for a name it does not know.
pub static GET_LOG: CommandSpec = CommandSpec {
    name: "getLog",
    fields: &[],
    strict: false,
    target: Some(Ty::String),
};

pub static SHUTDOWN: CommandSpec = CommandSpec {
    name: "shutdown",
    fields: &[opt("force", Ty::Bool), opt("timeoutSecs", Ty::SafeInt64)],
    strict: true,
    target: None,
};

/// The plan-cache commands' query shape: its types are checked by the handler with mongod's
/// BadValue, so only the field names are the table's.
const SHAPE: &[Field] = &[
    opt("query", Ty::Any),
    opt("sort", Ty::Any),
    opt("projection", Ty::Any),
    opt("collation", Ty::Any),
];

pub static PLAN_CACHE_CLEAR: CommandSpec = CommandSpec {
    name: "planCacheClear",
    fields: SHAPE,
    strict: true,
    target: None,
};

pub static PLAN_CACHE_CLEAR_FILTERS: CommandSpec = CommandSpec {
    name: "planCacheClearFilters",
    fields: SHAPE,
    strict: true,
    target: None,
};

pub static PLAN_CACHE_SET_FILTER: CommandSpec = CommandSpec {
    name: "planCacheSetFilter",
    fields: &[
        opt("query", Ty::Any),
        opt("sort", Ty::Any),
        opt("projection", Ty::Any),
        opt("collation", Ty::Any),
        opt("indexes", Ty::Any),
    ],
    strict: true,
    target: None,
};

pub static PLAN_CACHE_LIST_FILTERS: CommandSpec = bare("planCacheListFilters", true);
/// `ping` ignores what it is sent (tests pad it to size a request).
pub static PING: CommandSpec = bare("ping", false);
pub static TOP: CommandSpec = bare("top", true);

// Commands mongod parses by hand and whose extra fields it ignores (or reads as section
// switches, as `serverStatus` does): nothing to refuse, listed so every command has a table.
pub static SERVER_STATUS: CommandSpec = bare("serverStatus", false);
pub static HOST_INFO: CommandSpec = bare("hostInfo", false);
pub static BUILD_INFO: CommandSpec = bare("buildInfo", false);
pub static WHATSMYURI: CommandSpec = bare("whatsmyuri", false);
pub static GET_CMD_LINE_OPTS: CommandSpec = bare("getCmdLineOpts", false);
/// `currentOp`'s other fields are a filter on the operations (`admin::current_op`).
pub static CURRENT_OP: CommandSpec = bare("currentOp", false);
pub static FSYNC_UNLOCK: CommandSpec = bare("fsyncUnlock", false);
pub static LOG_ROTATE: CommandSpec = bare("logRotate", false);

/// Every admin table checked as a command.
#[cfg(test)]
pub static ALL: &[&CommandSpec] = &[
    &CONNECTION_STATUS,
    &LOCK_INFO,
    &COMPACT,
    &AUTO_COMPACT,
    &FSYNC,
    &PROFILE,
    &GET_CLUSTER_PARAMETER,
    &SET_CLUSTER_PARAMETER,
    &END_SESSIONS,
    &REFRESH_SESSIONS,
    &KILL_SESSIONS,
    &KILL_ALL_SESSIONS,
    &KILL_ALL_SESSIONS_BY_PATTERN,
    &DATA_SIZE,
    &VALIDATE_DB_METADATA,
    &DB_STATS,
    &COLL_STATS,
    &VALIDATE,
    &KILL_OP,
    &GET_LOG,
    &SHUTDOWN,
    &PLAN_CACHE_CLEAR,
    &PLAN_CACHE_CLEAR_FILTERS,
    &PLAN_CACHE_SET_FILTER,
    &PLAN_CACHE_LIST_FILTERS,
    &TOP,
    &PING,
    &SERVER_STATUS,
    &HOST_INFO,
    &BUILD_INFO,
    &WHATSMYURI,
    &GET_CMD_LINE_OPTS,
    &CURRENT_OP,
    &FSYNC_UNLOCK,
    &LOG_ROTATE,
];

/// Every admin element table (checked with `check_entry`).
#[cfg(test)]
pub static ENTRIES: &[&CommandSpec] = &[
    &SESSION_ENTRY,
    &KILL_ALL_SESSIONS_ENTRY,
    &KILL_PATTERN_ENTRY,
    &API_PARAMETERS,
    &LIST_SESSIONS_SPEC,
    &LIST_SESSIONS_USER,
];
