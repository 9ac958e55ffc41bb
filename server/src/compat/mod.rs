//! Generates `docs/COMPATIBILITY.md` from the code itself and fails when the file is stale. Each
//! state is asked of the component that implements it: a command is supported when the dispatch
//! table has it; a query, update, expression operator or pipeline stage is supported when its
//! parser does not reject the name as unknown (argument errors still mean "recognized").
//! Regenerate with `CAIRN_BLESS=1 cargo test -p cairn --lib compat`.

mod release80;

use crate::commands::lookup;
use crate::query::expr::Expr;
use crate::query::matcher::Filter;
use crate::query::update::Update;
use crate::query::vocabulary::{
    EXPRESSIONS, QUERY_OPERATORS, STAGES, TOP_LEVEL_QUERY, UPDATE_OPERATORS,
};
use bson::{Bson, doc};

/// mongod commands applications and tools commonly send (a superset of what cairn answers).
const COMMANDS: &[&str] = &[
    "hello",
    "isMaster",
    "ping",
    "buildInfo",
    "getParameter",
    "setParameter",
    "getCmdLineOpts",
    "hostInfo",
    "serverStatus",
    "whatsmyuri",
    "connectionStatus",
    "listCommands",
    "startSession",
    "endSessions",
    "refreshSessions",
    "killSessions",
    "getLog",
    "shutdown",
    "profile",
    "insert",
    "update",
    "delete",
    "findAndModify",
    "find",
    "getMore",
    "killCursors",
    "count",
    "distinct",
    "aggregate",
    "create",
    "drop",
    "dropDatabase",
    "listCollections",
    "listDatabases",
    "renameCollection",
    "convertToCapped",
    "cloneCollectionAsCapped",
    "collMod",
    "dbStats",
    "collStats",
    "validate",
    "createIndexes",
    "listIndexes",
    "dropIndexes",
    "currentOp",
    "killOp",
    "explain",
    "saslStart",
    "saslContinue",
    "createUser",
    "updateUser",
    "dropUser",
    "usersInfo",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "createRole",
    "updateRole",
    "dropRole",
    "rolesInfo",
    "grantPrivilegesToRole",
    "logout",
    "commitTransaction",
    "abortTransaction",
    "mapReduce",
    "compact",
    "fsync",
    "logRotate",
    "top",
    "getLastError",
    "replSetGetStatus",
    "replSetInitiate",
    "replSetGetConfig",
    "replSetReconfig",
    "setFeatureCompatibilityVersion",
    "bulkWrite",
    "fsyncUnlock",
    "killAllSessions",
    "killAllSessionsByPattern",
    "autoCompact",
    "dataSize",
    "validateDBMetadata",
    "lockInfo",
    "connPoolStats",
    "planCacheClear",
    "planCacheClearFilters",
    "planCacheListFilters",
    "planCacheSetFilter",
    "getClusterParameter",
    "setClusterParameter",
    "setQuerySettings",
    "removeQuerySettings",
    "getDefaultRWConcern",
    "setDefaultRWConcern",
    "authenticate",
    "dropAllUsersFromDatabase",
    "dropAllRolesFromDatabase",
    "revokePrivilegesFromRole",
    "grantRolesToRole",
    "revokeRolesFromRole",
    "getFreeMonitoringStatus",
];

/// Hand-written notes on behaviour the tables cannot show, rendered after them: (topic, text).
const NOTES: &[(&str, &str)] = &[
    (
        "Text search",
        "`$text` in find, count, update, delete and as the first stage of an aggregate (through \
     the text index; explain shows TEXT_MATCH/TEXT_OR). `{$meta: \"textScore\"}` in find's \
     projection and sort and, after a leading `$text` `$match`, in every later stage's \
     expressions and `$sort` (missing after `$group`); without `$text` it is 40218. Other \
     `$meta` kinds (`indexKey`, `recordId`, `sortKey`, `searchScore`, ...) read as missing. \
     Compound text indexes (`{a: 1, t: \"text\", b: 1}`): `$text` needs an equality on every \
     prefix field (291 otherwise, in find, aggregate, count, update and delete). Predicates \
     on top-level suffix fields (equality, ranges, `$in`, `$regex`) filter index entries \
     before the fetch; explain does not show that filter on TEXT_OR yet.",
    ),
    (
        "Transaction limits",
        "a transaction holds each namespace it touches until it ends; DDL on it (drop, \
     dropDatabase, renameCollection, createIndexes, collMod, dropIndexes) waits, bounded by its \
     maxTimeMS (50) and ended by killOp (11601); a transaction statement that cannot get a \
     namespace within `maxTransactionLockRequestTimeoutMillis` (default 5) fails with \
     LockTimeout (24, TransientTransactionError) and aborts the transaction. The write set is \
     bounded by cairn's `transactionMemoryLimitBytes` (default 256 MiB): past it \
     TransactionTooLargeForCache (388, unlabelled, as in mongod 7.0), counted in \
     `serverStatus.metrics.operation.transactionTooLargeForCacheErrors`. `currentOp` with \
     `$all` or `idleSessions` lists idle open transactions with mongod's `transaction` \
     sub-document; a commit waits while the server is fsync-locked. A statement on a view \
     holds the view and what it reads (its source, the collections its pipeline names, views \
     of views followed). A plain update, delete or findAndModify that meets a \
     document an open transaction wrote waits for the transaction to end (maxTimeMS, killOp \
     and a disconnect end the wait and fail the command), then applies on top of its outcome; \
     plain inserts and bulkWrite do not wait (the transaction conflicts at \
     commit instead). A commitTransaction that fails with MaxTimeMSExpired (e.g. waiting at an \
     fsyncLock, where every write now honours maxTimeMS) or whose durability fails after the \
     batch applied carries `UnknownTransactionCommitResult`.",
    ),
    (
        "Creating collections and indexes in a transaction",
        "as mongod 7.0: an insert or upsert into a missing collection creates it (any read \
     concern); `create` and `createIndexes` run in a transaction under readConcern local \
     (InvalidOptions 72 otherwise); createIndexes builds only on a collection the transaction \
     created and has not written into (263 on an existing or non-empty one; indexes that \
     already exist are a no-op); views, capped and time-series collections and system \
     collections are refused with 263, an existing name with 48; every refusal aborts the \
     transaction. Unlike mongod, what a transaction creates exists (empty) for others at once; \
     an abort (abortTransaction, a failed statement, killSessions/endSessions, the lifetime \
     limit) drops it again unless another client wrote into it meanwhile, and the oplog shows \
     the create and the drop.",
    ),
    (
        "Transaction and snapshot-read plans",
        "reads inside a transaction and `readConcern: snapshot` reads use the index plans \
     other reads get (single index, multikey, hashed, wildcard, `$or` unions), with the \
     snapshot's answer; in them a plan never provides the sort (a SORT stage follows the \
     IXSCAN), is never covered, and count/distinct never read keys only (no COUNT_SCAN or \
     DISTINCT_SCAN), since index entries show current data. mongod refuses aggregate's \
     `explain: true` in a transaction or with a snapshot read concern (InvalidOptions); cairn \
     answers it with that plan. `min`/`max` bounds in a transaction are not exact yet.",
    ),
    (
        "Query settings",
        "mongod 8.0's `setQuerySettings`/`removeQuerySettings` (admin) and `$querySettings` \
     (`showDebugQueryShape`), on a standalone too (as 8.0; later mongod versions refuse them \
     there). Settings are keyed by `queryShapeHash` and persisted in \
     `config.clusterParameters` (`_id: \"querySettings\"`, `settingsArray`), so they survive \
     a restart. `reject: true` fails `find` and `aggregate` of that shape with \
     QueryRejectedBySettings (411), explain excepted; `indexHints` limit the planner to the \
     listed indexes (over an index filter and `hint`); `queryFramework` is kept and shown \
     only. The shape is cairn's: the hash is SHA-256 of cairn's shape document (filter \
     values replaced by their types, sort/projection/collation as given, `skip`/`limit` by \
     presence; pipelines with literals replaced), not mongod's serialization, so the hash \
     differs from mongod's for the same query; equal shapes hash equal. Why it is not made \
     equal (checked against mongod's source, query_shape.cpp and find_cmd_shape.cpp): \
     mongod's input is not one fixed document. One version hashes the BSON of the \
     representative shape (`{cmdNs: {db, coll}, collation?, command: \"find\", filter, \
     projection?, max?, min?, sort?, limit: 1?, skip: 1?, singleBatch?, allowDiskUse?, \
     returnKey?, showRecordId?, tailable?, awaitData?, mirrored?, oplogReplay?}`, and `let` \
     when given); a later one hashes a packed buffer instead (\"find\", a 32-bit word \
     of which optional booleans were given and their values, the namespace's internal bytes \
     with its tenant flag and database-length byte, then min, max, sort, collation and let \
     BSON, then filter and projection BSON), and the source at hand does not say which of the \
     two an 8.0.x release runs. Both take the filter as `MatchExpression::serialize` writes it \
     with representative literals (each operator's own serializer, for `$eq`, `$in`, \
     `$regex`, `$type`, geo shapes and the rest, over the parsed tree), which cairn's matcher \
     has no equivalent of, and the projection and sort as their parsers rewrite \
     them. No mongod is available here to check a computed hash, so none is claimed. Only \
     `find` and \
     `aggregate` (not `distinct`) take settings; `maxTimeMS` and `queryKnobs` settings are \
     ignored.",
    ),
    (
        "Query statistics",
        "`$queryStats` (first stage, `admin`, `{aggregate: 1}`; `transformIdentifiers` with \
     `hmac-sha-256` and a key of at least 32 bytes) lists per query shape and client of `find` \
     and `aggregate`: `key` (`queryShape`, `client` -- the connection's handshake `client` \
     document, so one shape from two applications is two entries --, `collectionType`), \
     `keyHash`, `queryShapeHash` (cairn's shape, see Query settings), `metrics` (`execCount`, \
     `lastExecutionMicros`; `totalExecMicros`, `firstResponseExecMicros`, `docsReturned`, \
     `keysExamined`, `docsExamined` as int64 `{sum, max, min, sumOfSquares}`; `hasSortStage` \
     (a blocking sort ran), `usedDisk` (a sort or group spilled), `fromMultiPlanner`, \
     `fromPlanCache` as `{true, false}` counts; `firstSeenTimestamp`, `latestSeenTimestamp`) \
     and `asOf`. Counted per command: the first batch only, a cursor's later getMores are not \
     added (mongod adds them when the cursor closes). Not given: mongod 8.x's `bytesRead`, \
     `readTimeMicros`, `workingTimeMillis`, `cpuNanos` and the delinquency and interrupt-check \
     metrics; the key's `readConcern`, `hint`, `batchSize` and other per-command fields. At \
     most 10,000 entries (least recently seen evicted); `internalQueryStatsRateLimit: 0` stops \
     recording, any other value records every query.",
    ),
    (
        "compact and autoCompact",
        "`compact` answers mongod 8's `{bytesFreed, ok}` (`dryRun`: `{estimatedBytesFreed, ok}`) \
     with its argument checks (`force` bool, `freeSpaceTargetMB` >= 1: 51024, a view: 166, a \
     missing collection: 26), but compacts the whole engine: cairn keeps every collection in \
     one log, so one collection's records cannot be freed alone. `autoCompact: false` stops \
     background compaction until `autoCompact: true` (not kept over a restart); `runOnce` \
     compacts before answering.",
    ),
    (
        "Logical sessions",
        "One registry holds every session (an id seen in a command's `lsid` or made by \
     `startSession`) with its retryable-write and transaction state. `$listLocalSessions` lists \
     it (`{_id: {id, uid}, lastUse, user?}`; `uid` is SHA-256 of `db.user`, or of the empty \
     string without authentication); `endSessions` unlists at once. `$listSessions` reads \
     `config.system.sessions`, which a refresh writes every `logicalSessionRefreshMillis` \
     (5 minutes) and on the test command `refreshLogicalSessionCacheNow`: the sessions used \
     since (`lastUse` = the refresh's time), and the ended ones removed. Its TTL index \
     `lsidTTLIndex` (`expireAfterSeconds` 1800) expires records; records outlive a restart, \
     the registry does not.",
    ),
    (
        "Index filters",
        "`planCacheSetFilter` keys a filter on mongod's shape: the filter's structure, sort, \
     projection (by the fields it needs: an exclusion counts as none; computed fields count by \
     their names, where mongod counts the fields they read) and collation (none given: the \
     collection's default); `planCacheListFilters` shows the normalised collation, \
     `planCacheClearFilters` clears one shape. Filters are dropped with their collection or \
     database and follow a rename within the database. Only `find` and its explain plan with \
     their projection: aggregate, count and distinct match filters set without one.",
    ),
    (
        "$convert and binData",
        "strings to and from binData under a `format` (8.0), and numbers to and from binData \
     (8.1): int, long and double to binData (4, 8 and 8 bytes, any subtype), binData to int \
     (1, 2 or 4 bytes, signed), long (1, 2, 4 or 8) and double (4 bytes read as single \
     precision, or 8), in `byteOrder` `little` (the default) or `big`; `$toInt`, `$toLong` \
     and `$toDouble` read binData little-endian. A length the target cannot read is 241 \
     ConversionFailure (`onError` applies); a `byteOrder` that is not a string is 9130001, \
     one that is not `little` or `big` 9130002 (past `onError`). Not yet: 8.3's arrays of \
     numbers to binData and `base`.",
    ),
    (
        "bulkWrite",
        "mongod 8.0's command on `admin`: `nsInfo`, insert/update/delete ops (update with \
     `multi`, `upsert`, `arrayFilters`, `hint`, `collation`, `sort`, `constants`; delete with \
     `multi`, `hint`, `collation`), `ordered`, `bypassDocumentValidation`, `errorsOnly`, `let`, \
     `stmtId`/`stmtIds`, `cursor.batchSize` (results past it, or past what one reply holds, \
     wait in a cursor on `admin.$cmd.bulkWrite` for getMore), `writeConcernError`; the reply's `nErrors`, \
     `nInserted`, `nMatched`, `nModified`, `nUpserted`, `nDeleted` and per-op items \
     (`ok`, `idx`, `n`, `nModified`, `upserted`, and an error's `code`/`errmsg`). A retried \
     write (same `lsid` and `txnNumber`) answers the first reply with `retriedStmtIds`: every \
     statement the first run executed (cairn replays the whole reply, so a statement that \
     failed is not run again either, where mongod would retry it; with errors past the first \
     batch of results, those are not known to the retry).",
    ),
    (
        "Retried writes",
        "a retry of a retryable insert, update or delete carries `retriedStmtIds` (the `stmtIds`, \
     or `stmtId` counting up, of the statements the first run executed: none after an ordered \
     write's first error, none that failed); a retried findAndModify carries `retriedStmtId`.",
    ),
    (
        "Clustered collections",
        "`create` with `clusteredIndex: {key: {_id: 1}, unique: true}` (mongod 7.0's checks and codes), documents in `_id` order, CLUSTERED_IXSCAN with `minRecord`/`maxRecord` for `_id` equality and ranges, TTL by `_id` date through `expireAfterSeconds` (and `collMod`). createIndexes on the cluster key is a no-op. Not yet: capped clustered collections, the legacy `clusteredIndex: true` outside time-series buckets, implicit creation through createIndexes' `clustered` option.",
    ),
    (
        "Collated indexes",
        "createIndexes takes `collation` (normalised in listIndexes; `{locale: \"simple\"}` \
         means none; an index on a collection with a default collation inherits it, the `_id` \
         index too; text and `2d` indexes refuse one with 67). The same key pattern may exist \
         once per collation; the same name with another collation is 85. Keys hold strings as \
         the collation's sort keys, so a unique index at strength 2 refuses case variants \
         (11000; as mongod 7.0, the errmsg names the collation and `keyValue` strings are the \
         sort key's hex, with `hexEncoded` and `collation`). Queries of \
         the index's collation get bounds and sort from it (IXSCAN shows the `collation`); \
         others only bounds on non-string values. IDHACK when the query's collation is the \
         collection's. The collation is part of the plan cache's and index filters' query \
         shapes. `count` of one equality under the index's collation is a COUNT_SCAN. Not yet: \
         covered projections, other COUNT_SCANs and DISTINCT_SCAN over a collated index (it \
         fetches or scans documents instead), plans over a collated wildcard index; \
         sort keys are ICU4X's, so the hex differs from mongod's ICU 57 bytes.",
    ),
    (
        "Parallel collection scans",
        "cairn's own (mongod scans on one thread): a forward collection scan of at least \
         `parallelScanMinDocuments` (50,000) documents that feeds a count, a `$group` of \
         `$sum`/`$avg`/`$count`/`$min`/`$max`/`$first`/`$last` or a top-k `$sort`+`$limit` is \
         split into RecordId ranges scanned on up to one thread per core \
         (`parallelScanThreads`: 0 one per core, 1 never), outside transactions and snapshot \
         reads. Results, their order and numeric types equal the serial scan's; sums that \
         could round (any double, integer overflow) run serially. explain shows a `PARALLEL` \
         stage (`parts`, `partialStage`) inside `$cursor`, or under `COUNT`.",
    ),
];

fn yes_no(ok: bool) -> &'static str {
    if ok { "supported" } else { "not yet" }
}

fn query_operator_supported(op: &str) -> bool {
    let f = if TOP_LEVEL_QUERY.contains(&op) {
        doc! { op: [] }
    } else {
        doc! { "a": { op: 1 } }
    };
    match Filter::parse(&f) {
        Ok(_) => true,
        Err(e) => {
            !e.message.starts_with("unknown operator") && !e.message.contains("not supported")
        }
    }
}

fn update_operator_supported(op: &str) -> bool {
    match Update::parse(&doc! { op: { "a": 1 } }, None) {
        Ok(_) => true,
        Err(e) => {
            !e.message.starts_with("Unknown modifier") && !e.message.contains("not supported")
        }
    }
}

pub(crate) fn expression_supported(op: &str) -> bool {
    match Expr::parse(&Bson::Document(doc! { op: [] })) {
        Ok(_) => true,
        Err(e) => {
            !e.message.starts_with("Unrecognized expression")
                && !e.message.contains("not supported")
        }
    }
}

/// The whole document.
pub fn render(stage_supported: &dyn Fn(&str) -> bool) -> String {
    let mut out = format!(
        "# Compatibility\n\nGenerated from the code by `CAIRN_BLESS=1 cargo test -p cairn --lib compat` (a test fails when this file is stale).\nThe reference is mongod 8.0: cairn reports version {} and maxWireVersion {}.\nEach state is what the component itself answers: a command is in the dispatch table; an operator or stage is recognized by its parser. Behaviour is covered by the unit and end-to-end tests.\n\n",
        crate::commands::admin::COMPAT_VERSION,
        crate::limits::WIRE_VERSION_MAX,
    );
    let section = |out: &mut String, title: &str, names: &[&str], f: &dyn Fn(&str) -> bool| {
        out.push_str(&format!("## {title}\n\n| name | state |\n| --- | --- |\n"));
        for n in names {
            out.push_str(&format!("| `{n}` | {} |\n", yes_no(f(n))));
        }
        let done = names.iter().filter(|n| f(n)).count();
        out.push_str(&format!("\n{done} of {} supported.\n\n", names.len()));
    };
    section(&mut out, "Commands", COMMANDS, &|c| lookup(c).is_some());
    out.push_str(&crate::commands::snapshot_read::compat_note());
    let all_query: Vec<&str> = QUERY_OPERATORS
        .iter()
        .chain(TOP_LEVEL_QUERY)
        .copied()
        .collect();
    section(
        &mut out,
        "Query operators",
        &all_query,
        &query_operator_supported,
    );
    section(
        &mut out,
        "Update operators",
        UPDATE_OPERATORS,
        &update_operator_supported,
    );
    section(&mut out, "Aggregation stages", STAGES, stage_supported);
    section(
        &mut out,
        "Aggregation expressions",
        EXPRESSIONS,
        &expression_supported,
    );
    out.push_str(&crate::commands::argspec::doc::render());
    out.push_str(&release80::render(stage_supported));
    out.push_str("## Notes\n\n");
    for (topic, text) in NOTES {
        out.push_str(&format!("- **{topic}**: {text}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage_supported(stage: &str) -> bool {
        if crate::commands::aggregate::SOURCE_STAGES.contains(&stage)
            || stage == crate::commands::changes::STAGE
        {
            return true;
        }
        let ctx = crate::query::pipeline::ParseContext::new("db", Some("c"), bson::DateTime::now());
        match crate::query::pipeline::Pipeline::parse(&[doc! { stage: {} }], &ctx) {
            Ok(_) => true,
            Err(e) => e.code.code() != 40324 && !e.message.contains("not supported"),
        }
    }

    /// The table lists every command the dispatch table answers (test-only commands aside).
    #[test]
    fn every_answered_command_is_listed() {
        for c in crate::commands::COMMANDS.iter().filter(|c| !c.test_only) {
            assert!(
                COMMANDS.contains(&c.name),
                "{} missing from compat::COMMANDS",
                c.name
            );
        }
    }

    #[test]
    fn compatibility_doc_is_current() {
        let text = render(&stage_supported);
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/COMPATIBILITY.md");
        if std::env::var("CAIRN_BLESS").is_ok() {
            std::fs::write(path, &text).unwrap();
            return;
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == text,
            "docs/COMPATIBILITY.md is stale: run CAIRN_BLESS=1 cargo test -p cairn --lib compat"
        );
    }
}
