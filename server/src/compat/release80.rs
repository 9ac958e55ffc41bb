//! The MongoDB 8.0 release-notes pass for `docs/COMPATIBILITY.md`: every change a client can see
//! that 8.0 and the rapid releases folded into it (7.1, 7.2, 7.3) made to the server, with
//! cairn's state. Rows that name a command, stage, expression or parameter are asked of the
//! component (as the rest of the document is); the others carry the verdict of a check made
//! against the code or a running server, written next to it. Rendered by `compat::render`.

use crate::commands::lookup;

/// How a row's state is found.
pub enum Check {
    /// In when the dispatch table answers this command.
    Command(&'static str),
    /// In when the pipeline parser knows this stage.
    Stage(&'static str),
    /// In when the expression parser knows this operator.
    Expression(&'static str),
    /// In when `getParameter` knows this server parameter.
    Parameter(&'static str),
    /// Checked by hand: the state as written.
    Judged(State),
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum State {
    In,
    Partly,
    Out,
    /// Not a standalone's or a single replica set member's concern (sharding, Atlas, ...).
    NotApplicable,
}

impl State {
    fn text(self) -> &'static str {
        match self {
            State::In => "in",
            State::Partly => "partly",
            State::Out => "out",
            State::NotApplicable => "n/a",
        }
    }
}

/// (release, change, how its state is found, what cairn does).
pub const CHANGES: &[(&str, &str, Check, &str)] = &[
    (
        "7.1",
        "`$queryStats` stage",
        Check::Stage("$queryStats"),
        "see the Notes on query statistics",
    ),
    (
        "7.1",
        "`indexBuildMinAvailableDiskSpaceMB` parameter",
        Check::Parameter("indexBuildMinAvailableDiskSpaceMB"),
        "index builds do not check free disk space",
    ),
    (
        "7.1",
        "`auditConfig` cluster parameter",
        Check::Judged(State::Out),
        "no auditing; `getClusterParameter` answers NoSuchKey (4)",
    ),
    (
        "7.1",
        "`DDLDatabase`/`DDLCollection` lock types in `serverStatus.locks` and `currentOp`",
        Check::Judged(State::Out),
        "`serverStatus.locks` is empty",
    ),
    (
        "7.1",
        "`indexBuilds` section of `serverStatus` (build phases, failures)",
        Check::Judged(State::Out),
        "not reported",
    ),
    (
        "7.1",
        "sharding: `updateOne` upserts without the full shard key, exhaust cursors and `fsync` \
         through mongos, chunk migration statistics",
        Check::Judged(State::NotApplicable),
        "no sharding",
    ),
    (
        "7.2",
        "`serverStatus.metrics.query.planCache.totalQueryShapes` and `totalSizeEstimateBytes` \
         (renamed from `query.planCacheTotal*`)",
        Check::Judged(State::In),
        "the plan cache's entries over every collection and an estimate of their bytes (e2e \
         `admin80`)",
    ),
    (
        "7.2",
        "`create` refuses WiredTiger encryption options in `storageEngine`",
        Check::Judged(State::Out),
        "`storageEngine` options are accepted and ignored",
    ),
    (
        "7.2",
        "sharding: `explain` of an aggregate answers under `shards`; \
         `routingTableCacheChunkBucketSize` > 0",
        Check::Judged(State::NotApplicable),
        "no sharding",
    ),
    (
        "7.3",
        "`compact` `freeSpaceTargetMB` option",
        Check::Judged(State::In),
        "checked (>= 1: 51024); see the Notes on compact",
    ),
    (
        "7.3",
        "`find` on a view with `singleBatch: true` leaves no cursor open",
        Check::Judged(State::In),
        "the view's pipeline gets a `$limit` of the batch size (e2e `admin80`)",
    ),
    (
        "7.3",
        "`autoCompact` command",
        Check::Command("autoCompact"),
        "see the Notes on compact",
    ),
    (
        "8.0",
        "`bulkWrite` command (many namespaces in one command)",
        Check::Command("bulkWrite"),
        "ordered/unordered, `errorsOnly`, cursor of results, `nsInfo`",
    ),
    (
        "8.0",
        "`update` (`updateOne`, `replaceOne`) with `sort`",
        Check::Judged(State::In),
        "the first document in `sort` order is updated; `sort` with `multi: true` is refused",
    ),
    (
        "8.0",
        "query settings: `setQuerySettings`",
        Check::Command("setQuerySettings"),
        "index hints and `reject`, kept over a restart",
    ),
    (
        "8.0",
        "query settings: `removeQuerySettings`",
        Check::Command("removeQuerySettings"),
        "",
    ),
    (
        "8.0",
        "query settings: `$querySettings` stage",
        Check::Stage("$querySettings"),
        "",
    ),
    (
        "8.0",
        "index filters deprecated (in favour of query settings)",
        Check::Command("planCacheSetFilter"),
        "still answered, as in 8.0",
    ),
    (
        "8.0",
        "`defaultMaxTimeMS` cluster parameter (`readOperations`)",
        Check::Judged(State::In),
        "applied to find, aggregate (without `$out`/`$merge`), count and distinct that give \
         no `maxTimeMS`; kept in memory, not over a restart",
    ),
    (
        "8.0",
        "`queryHash` renamed `planCacheShapeHash`",
        Check::Judged(State::Partly),
        "explain shows both; the profiler and the slow-operation log show neither",
    ),
    (
        "8.0",
        "`queryShapeHash` in explain, the profiler and the slow-operation log",
        Check::Judged(State::Partly),
        "for find: explain, profiler entries and the slow-operation log show it (cairn's shape: \
         the hash `setQuerySettings` and `$queryStats` show, not mongod's); not for aggregate, \
         count or distinct",
    ),
    (
        "8.0",
        "`workingMillis` in the profiler and the slow-operation log; slowness judged on it",
        Check::Judged(State::In),
        "equal to `millis`/`durationMillis`: cairn does not queue operations (e2e `profiler`, \
         `ops`)",
    ),
    (
        "8.0",
        "`serverStatus.opWorkingTime`; `queues.execution.totalTimeQueuedMicros` in the slow log",
        Check::Judged(State::Out),
        "not reported",
    ),
    (
        "8.0",
        "`{field: null}` no longer matches `undefined` (`$eq`, `$in`, `$lookup`)",
        Check::Judged(State::In),
        "matcher (`$eq`, `$in`, and so `$ne`/`$nin`) and index bounds; `$lookup` keys never \
         equated them (e2e `admin80`)",
    ),
    (
        "8.0",
        "`$convert` to and from binData (`subtype`, `format`, `byteOrder`)",
        Check::Judged(State::In),
        "see the Notes on `$convert` and binData",
    ),
    (
        "8.0",
        "`$toUUID` expression",
        Check::Expression("$toUUID"),
        "",
    ),
    (
        "8.0",
        "`maxWireVersion` 25, version 8.0",
        Check::Judged(State::In),
        "`hello` and `buildInfo`",
    ),
    (
        "8.0",
        "session refresh parameters configurable (8.0.1): `logicalSessionRefreshMillis`",
        Check::Parameter("logicalSessionRefreshMillis"),
        "the refresh of `config.system.sessions`; see the Notes on logical sessions",
    ),
    (
        "8.0",
        "TCMalloc per-CPU caches, `tcmallocReleaseRate` parameter",
        Check::Parameter("tcmallocReleaseRate"),
        "cairn uses the system allocator, trimmed in the background",
    ),
    (
        "8.0",
        "Queryable Encryption range queries",
        Check::Judged(State::Out),
        "no Queryable Encryption",
    ),
    (
        "8.0",
        "deprecated: LDAP, hedged reads",
        Check::Judged(State::NotApplicable),
        "neither is offered",
    ),
    (
        "8.0",
        "majority writes acknowledged once the oplog entry is written on a majority",
        Check::Judged(State::NotApplicable),
        "one-member replica sets only",
    ),
    (
        "8.0",
        "sharding: `moveCollection`, `unshardCollection`, config shards, faster resharding",
        Check::Judged(State::NotApplicable),
        "no sharding",
    ),
];

/// The row's state.
pub fn state(check: &Check, stage_supported: &dyn Fn(&str) -> bool) -> State {
    let known = |yes: bool| if yes { State::In } else { State::Out };
    match check {
        Check::Command(c) => known(lookup(c).is_some()),
        Check::Stage(s) => known(stage_supported(s)),
        Check::Expression(e) => known(super::expression_supported(e)),
        Check::Parameter(p) => known(crate::parameters::Parameters::default().get(p).is_some()),
        Check::Judged(s) => *s,
    }
}

/// The section of the document.
pub fn render(stage_supported: &dyn Fn(&str) -> bool) -> String {
    let mut out = String::from(
        "## MongoDB 8.0 release notes (with 7.1, 7.2, 7.3)\n\n\
         Every server change of 8.0 and the rapid releases folded into it that a client can see. \
         A command, stage, expression or parameter is asked of the code; the other rows were \
         checked against the code or a running server.\n\n\
         | release | change | cairn | note |\n| --- | --- | --- | --- |\n",
    );
    let mut counts = [0usize; 4];
    for (release, change, check, note) in CHANGES {
        let s = state(check, stage_supported);
        counts[s as usize] += 1;
        out.push_str(&format!(
            "| {release} | {change} | {} | {note} |\n",
            s.text()
        ));
    }
    out.push_str(&format!(
        "\n{} in, {} partly, {} out, {} not applicable.\n\n",
        counts[0], counts[1], counts[2], counts[3]
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asked_rows_agree_with_the_code() {
        let no_stage = |_: &str| false;
        assert_eq!(state(&Check::Command("bulkWrite"), &no_stage), State::In);
        assert_eq!(
            state(&Check::Command("moveCollection"), &no_stage),
            State::Out
        );
        assert_eq!(state(&Check::Expression("$toUUID"), &no_stage), State::In);
        assert_eq!(
            state(&Check::Parameter("logicalSessionRefreshMillis"), &no_stage),
            State::In
        );
        assert_eq!(
            state(&Check::Parameter("tcmallocReleaseRate"), &no_stage),
            State::Out
        );
    }
}
