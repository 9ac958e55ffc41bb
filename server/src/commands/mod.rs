//! Command dispatch: the first key of a request body names the command; one table lists every
//! command (name, aliases, help), one `match` calls its handler. Generic fields (`$db`, `lsid`,
//! `$readPreference`, `writeConcern`, ...) are peeled off here, once, into `Request`.
//! Handlers live one file per family and return `CommandResult<Reply>`.

pub mod admin;
pub mod admin_stages;
pub mod aggregate;
pub mod args;
pub mod argspec;
pub mod auth;
pub mod authz;
pub mod batch;
pub mod bulk_write;
pub mod capped;
pub mod change_ddl;
pub mod change_stages;
pub mod changes;
pub mod clustered;
pub mod crud_read;
pub mod crud_write;
pub mod ddl;
pub mod diagnostic;
pub mod explain;
pub mod find_and_modify;
pub mod handshake;
pub mod index_collation;
pub mod index_options;
pub mod index_spec;
pub mod indexes;
pub mod map_reduce;
pub mod output;
pub mod prepare;
pub mod profile;
pub mod query_settings;
pub mod replset;
pub mod roles;
pub mod snapshot_read;
pub mod tailable;
pub mod timeseries;
pub mod transactions;
pub mod users;
pub mod validation;
pub mod views;

use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::interrupt::Interrupt;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// What a connection knows about itself.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub id: i64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub client_metadata: Option<Document>,
    /// The same document, shared with the requests `$queryStats` keys by it.
    pub query_stats_client: Option<Arc<crate::query_stats::ClientMeta>>,
    /// Compressors agreed in the handshake, in the client's order of preference.
    pub compressors: Vec<String>,
    pub hello_seen: bool,
    /// Who this connection is authenticated as, and what that user may do.
    pub auth: crate::auth::Session,
}

/// A kind-1 document sequence as handed to handlers.
pub struct Sequence {
    pub identifier: String,
    /// Slices of the request's frame, as they arrived.
    pub documents: Vec<wire::SharedDocument>,
}

/// A parsed request: the command body plus the generic fields mongod accepts on every command.
pub struct Request {
    /// The command name as the client sent it (first key of the body).
    pub name: String,
    /// Its canonical name from the command table ("" for an unknown command).
    pub command: &'static str,
    pub db: String,
    pub body: Document,
    /// The body's bytes as they arrived (OP_MSG only): the write commands read their statements
    /// from here, because `body` keeps one value of a repeated field and loses the other.
    pub raw_body: Option<RawDocumentBuf>,
    pub sequences: Vec<Sequence>,
    pub write_concern: Option<Document>,
    pub max_time_ms: Option<i64>,
    /// When the request arrived: `maxTimeMS` counts from here, time spent queued included.
    pub received: Instant,
    /// The operation's interrupt token: the connection interrupts it when the client hangs up
    /// while the request is in flight, `killOp` and shutdown through the operation registry;
    /// it carries the `maxTimeMS` deadline.
    pub op: Interrupt,
    /// The multi-document transaction the command runs in (set by `dispatch`; see `crate::txn`).
    pub txn: std::sync::OnceLock<Arc<crate::txn::Txn>>,
    /// The retryable write the command is (set by `dispatch`; see `crate::retry_record`).
    pub retry: std::sync::OnceLock<Arc<crate::retry_record::RetryRecord>>,
    /// The request's `lsid`, parsed once here (None: it has none; an error: it is malformed,
    /// which the commands that need a session report).
    pub lsid: crate::sessions::ParsedLsid,
    /// The user the connection is authenticated as, (name, db) (set by `dispatch`; unset
    /// without authentication): `$listLocalSessions` lists this user's sessions by default.
    pub user: std::sync::OnceLock<(String, String)>,
    /// The connection's handshake `client` document (set by `dispatch` for `find` and
    /// `aggregate`, whose `$queryStats` entries are keyed by it).
    pub client: std::sync::OnceLock<Arc<crate::query_stats::ClientMeta>>,
}

/// What a handler produces.
pub enum Reply {
    Doc(Document),
    Raw(RawDocumentBuf),
    /// A cursor batch, written straight into the reply frame (see `batch`).
    Cursor(batch::CursorBatch),
    /// Send nothing and close the connection (the `shutdown` command).
    Close,
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Doc(bson::doc! { "ok": 1.0 })
    }
}

/// One row per command: canonical name, aliases, help, admin-only.
pub struct CommandSpec {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub help: &'static str,
    pub admin_only: bool,
    /// Answered only with `--setParameter enableTestCommands=1` (otherwise "no such command").
    pub test_only: bool,
}

macro_rules! commands {
    ($($name:literal $([$($alias:literal),*])? => $help:literal
        $(, admin $admin:literal)? $(, test $test:literal)?;)*) => {
        pub const COMMANDS: &[CommandSpec] = &[
            $(CommandSpec {
                name: $name,
                aliases: &[$($($alias),*)?],
                help: $help,
                admin_only: false $(|| $admin)?,
                test_only: false $(|| $test)?,
            }),*
        ];
    };
}

commands! {
    "hello" => "Check if this server is primary and report its limits and wire versions";
    "isMaster" ["ismaster"] => "Legacy name of hello";
    "ping" => "A no-op testing whether the server answers";
    "buildInfo" ["buildinfo"] => "Version and build details of this server";
    "getParameter" => "Get server parameters", admin true;
    "setParameter" => "Set server parameters at runtime", admin true;
    "getCmdLineOpts" => "The command line this server was started with", admin true;
    "hostInfo" => "Details of the host machine";
    "serverStatus" => "Counters and gauges of this server process";
    "whatsmyuri" => "The address this connection comes from";
    "connectionStatus" => "Authentication state of this connection";
    "listCommands" => "The commands this server answers";
    "startSession" => "Start a logical session";
    "endSessions" => "End logical sessions";
    "refreshSessions" => "Keep logical sessions alive";
    "killSessions" => "Kill logical sessions";
    "killAllSessions" => "Kill all logical sessions";
    "killAllSessionsByPattern" => "Kill the logical sessions matching patterns";
    "commitTransaction" => "Commit a session's multi-document transaction", admin true;
    "abortTransaction" => "Abort a session's multi-document transaction", admin true;
    "getLog" => "Recent log lines", admin true;
    "logRotate" => "Rotate the server's log file (--logpath)", admin true;
    "shutdown" => "Stop the server cleanly", admin true;
    "profile" => "Get or set the profiling level and slowms";
    "listDatabases" => "List the databases of this server", admin true;
    "insert" => "Insert documents";
    "update" => "Update documents";
    "delete" => "Delete documents";
    "bulkWrite" => "Insert, update and delete documents of many collections in one command (8.0)", admin true;
    "findAndModify" ["findandmodify"] => "Find one document and update or remove it";
    "find" => "Query documents";
    "getMore" => "Next batch of a cursor";
    "killCursors" => "Close cursors";
    "count" => "Count documents";
    "distinct" => "Distinct values of a field";
    "create" => "Create a collection";
    "drop" => "Drop a collection";
    "dropDatabase" => "Drop a database";
    "listCollections" => "List the collections of a database";
    "renameCollection" => "Rename a collection", admin true;
    "convertToCapped" => "Make a collection capped";
    "cloneCollectionAsCapped" => "Copy a collection into a new capped one";
    "collMod" => "Change a collection's or an index's options";
    "dbStats" => "Statistics of a database";
    "collStats" => "Statistics of a collection";
    "validate" => "Check a collection's documents and indexes";
    "createIndexes" => "Build indexes";
    "listIndexes" => "List a collection's indexes";
    "dropIndexes" ["deleteIndexes"] => "Drop indexes";
    "currentOp" => "Operations in progress", admin true;
    "killOp" => "Interrupt an operation by the opid currentOp shows", admin true;
    "aggregate" => "Run an aggregation pipeline";
    "mapReduce" ["mapreduce"] => "Map, reduce and finalize documents with JavaScript";
    "explain" => "How a command would run: the query plan and its execution statistics";
    "getFreeMonitoringStatus" => "Free monitoring is not offered; reports disabled", admin true;
    "logout" => "Ends the authentication of this connection on the database";
    "saslStart" => "Begin a SASL (SCRAM-SHA-256, SCRAM-SHA-1) authentication conversation";
    "saslContinue" => "Continue a SASL authentication conversation";
    "authenticate" => "Authenticate without a conversation (x.509 in mongod; not offered)";
    "createUser" => "Create a user";
    "updateUser" => "Change a user's password, roles or custom data";
    "dropUser" => "Remove a user";
    "dropAllUsersFromDatabase" => "Remove every user of a database";
    "usersInfo" => "Describe users";
    "grantRolesToUser" => "Give a user more roles";
    "revokeRolesFromUser" => "Take roles from a user";
    "createRole" => "Create a user-defined role";
    "updateRole" => "Replace a user-defined role's privileges or roles";
    "dropRole" => "Remove a user-defined role";
    "dropAllRolesFromDatabase" => "Remove every user-defined role of a database";
    "rolesInfo" => "Describe roles";
    "grantPrivilegesToRole" => "Add privileges to a user-defined role";
    "revokePrivilegesFromRole" => "Remove privileges from a user-defined role";
    "grantRolesToRole" => "Make a user-defined role inherit more roles";
    "revokeRolesFromRole" => "Make a user-defined role inherit fewer roles";
    "replSetInitiate" => "Make this node the PRIMARY of a new one-member replica set", admin true;
    "replSetGetStatus" => "The replica set's members and their state", admin true;
    "replSetGetConfig" => "The replica set's configuration", admin true;
    "replSetReconfig" => "Change the replica set's configuration (one member)", admin true;
    "fsync" => "Write a checkpoint now; with lock: true, hold every write until fsyncUnlock", admin true;
    "fsyncUnlock" => "Release one fsync lock", admin true;
    "dataSize" => "Bytes and count of a collection, or of a key range of it";
    "compact" => "Reclaim the log's dead space (engine-wide) and report the bytes freed";
    "autoCompact" => "Turn background compaction on or off; runOnce compacts now", admin true;
    "validateDBMetadata" => "Collections and indexes outside an API version (none in cairn)";
    "top" => "Usage per namespace", admin true;
    "lockInfo" => "Locks held and waited for", admin true;
    "connPoolStats" => "Outgoing connection pools (none on a standalone)";
    "planCacheClear" => "Drop cached query plans";
    "planCacheClearFilters" => "Forget index filters";
    "planCacheListFilters" => "List index filters";
    "planCacheSetFilter" => "Limit a query shape to some indexes (the planner honours it)";
    "getClusterParameter" => "Read cluster parameters (kept in memory)", admin true;
    "setQuerySettings" => "Set query settings (index hints, reject) for a query shape", admin true;
    "removeQuerySettings" => "Remove the query settings of a query shape", admin true;
    "setClusterParameter" => "Set a cluster parameter (in memory, not persisted)", admin true;
    "getDefaultRWConcern" => "Default read and write concern (replica sets only)", admin true;
    "setDefaultRWConcern" => "Set the default read and write concern (replica sets only)", admin true;
    "refreshLogicalSessionCacheNow" => "Write the session cache to config.system.sessions now", test true;
    "configureFailPoint" => "Switch a test fail point on or off", admin true, test true;
    "waitForFailPoint" => "Wait until a test fail point was entered n times", admin true, test true;
}

/// Commands that change data or the catalog: they wait while the server is fsync-locked.
const WRITE_COMMANDS: &[&str] = &[
    "insert",
    "update",
    "delete",
    "bulkWrite",
    "findAndModify",
    "create",
    "drop",
    "dropDatabase",
    "renameCollection",
    "convertToCapped",
    "cloneCollectionAsCapped",
    "collMod",
    "createIndexes",
    "dropIndexes",
    "compact",
    "autoCompact",
    "createUser",
    "updateUser",
    "dropUser",
    "dropAllUsersFromDatabase",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "createRole",
    "updateRole",
    "dropRole",
    "dropAllRolesFromDatabase",
    "grantPrivilegesToRole",
    "revokePrivilegesFromRole",
    "grantRolesToRole",
    "revokeRolesFromRole",
    // A commit writes the transaction's batch: it waits while the server is fsync-locked.
    // (An abort writes nothing and goes on, as in mongod.)
    "commitTransaction",
];

/// Find a command by the name a client used (mongod matches names exactly, with aliases for the
/// historical lower-case spellings).
pub fn lookup(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// The cursor id of a well-formed `getMore` (None otherwise), for the cursor registries that
/// look at a getMore before the generic one checks it.
pub(crate) fn get_more_id(req: &Request) -> Option<i64> {
    match req.body.get("getMore") {
        Some(Bson::Int64(i)) => Some(*i),
        _ => None,
    }
}

/// Peel the generic fields off a body and build the request.
pub fn parse_request(
    body: Document,
    sequences: Vec<Sequence>,
    require_db: bool,
) -> CommandResult<Request> {
    let name = body
        .keys()
        .next()
        .cloned()
        .ok_or_else(|| err(ErrorCode::InvalidNamespace, "Empty command object"))?;
    let db = match body.get("$db") {
        Some(Bson::String(s)) => s.clone(),
        Some(_) => return Err(err(ErrorCode::TypeMismatch, "$db is not a string")),
        None if require_db => {
            return Err(err(
                ErrorCode::Location40571,
                "OP_MSG requests require a $db argument",
            ));
        }
        None => "admin".to_string(),
    };
    let write_concern = match body.get("writeConcern") {
        Some(Bson::Document(d)) => Some(d.clone()),
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'writeConcern' is the wrong type, expected type 'object'",
            ));
        }
        None => None,
    };
    let max_time_ms = match body.get("maxTimeMS") {
        None | Some(Bson::Null) => None,
        Some(v) => Some(parse_max_time_ms(v)?),
    };
    let received = Instant::now();
    let op = Interrupt::default();
    // getMore's maxTimeMS is not a deadline (crud_read::get_more applies the cursor's own).
    if name != "getMore" {
        op.set_deadline(deadline_of(max_time_ms, received));
    }
    let lsid = crate::sessions::parse_lsid(&body);
    Ok(Request {
        command: lookup(&name).map_or("", |c| c.name),
        name,
        db,
        body,
        raw_body: None,
        sequences,
        write_concern,
        max_time_ms,
        received,
        op,
        txn: Default::default(),
        retry: Default::default(),
        lsid,
        user: Default::default(),
        client: Default::default(),
    })
}

/// When `maxTimeMS` (counted from `received`) runs out; 0 means no limit, as in mongod.
pub fn deadline_of(max_time_ms: Option<i64>, received: Instant) -> Option<Instant> {
    max_time_ms
        .filter(|ms| *ms > 0)
        .map(|ms| received + std::time::Duration::from_millis(ms as u64))
}

fn parse_max_time_ms(v: &Bson) -> CommandResult<i64> {
    let n = match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(f) if f.fract() == 0.0 => *f as i64,
        _ => return Err(err(ErrorCode::BadValue, "maxTimeMS must be a number")),
    };
    if !(0..=i32::MAX as i64).contains(&n) {
        return Err(err(
            ErrorCode::BadValue,
            format!("{n} value for maxTimeMS is out of range [0, 2147483647]"),
        ));
    }
    Ok(n)
}

/// The `defaultMaxTimeMS` cluster parameter (8.0): a read that gives no `maxTimeMS` (find,
/// count, distinct, an aggregate that does not write with `$out`/`$merge`) gets its
/// `readOperations` as a deadline, counted from the request's arrival.
fn apply_default_max_time(req: &Request) {
    if req.max_time_ms.is_some()
        || !matches!(req.command, "find" | "aggregate" | "count" | "distinct")
    {
        return;
    }
    let ms = diagnostic::default_read_max_time_ms();
    if ms == 0 {
        return;
    }
    let writes = |s: &Bson| {
        s.as_document()
            .is_some_and(|d| d.contains_key("$out") || d.contains_key("$merge"))
    };
    if req.command == "aggregate"
        && req
            .body
            .get_array("pipeline")
            .is_ok_and(|p| p.iter().any(writes))
    {
        return;
    }
    req.op.set_deadline(deadline_of(Some(ms), req.received));
}

/// Runs the storage part of a command on the blocking pool (`crate::offload`): the closure gets
/// the state and the request back, the async caller holds no worker while it runs.
pub async fn off_thread<T, F>(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    f: F,
) -> CommandResult<T>
where
    T: Send + 'static,
    F: FnOnce(&ServerState, &Request) -> CommandResult<T> + Send + 'static,
{
    let r = req.clone();
    crate::offload::run(state, req.command, Some(&req.op), move |s| {
        let _txn = r.txn.get().map(|t| t.install());
        let _retry = r.retry.get().map(|t| t.install());
        f(s, &r)
    })
    .await
}

/// [`off_thread`] for a read-only command without side effects (`Tried::Read`), or a write
/// (`Tried::Write`; `f` must leave nothing behind before its first storage write when the attempt
/// is refused): first tried on the async worker (`crate::offload::run_tried`), on the pool when
/// that would block. Inside a multi-document transaction it always runs on the pool.
pub async fn off_thread_tried<T, F>(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    tried: crate::offload::Tried,
    f: F,
) -> CommandResult<T>
where
    T: Send + 'static,
    F: Fn(&ServerState, &Request) -> CommandResult<T> + Send + 'static,
{
    if req.txn.get().is_some() {
        return off_thread(state, req, f).await;
    }
    let r = req.clone();
    crate::offload::run_tried(state, req.command, Some(&req.op), tried, move |s| {
        let _retry = r.retry.get().map(|t| t.install());
        f(s, &r)
    })
    .await
}

/// Run one command. Never panics on client input; every failure is a `CommandError`. Commands
/// that touch storage run (or run their storage part) through [`off_thread`]; the others only
/// read server state and answer on the async worker.
pub async fn dispatch(
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    req: &Arc<Request>,
) -> CommandResult<Reply> {
    let spec =
        lookup(&req.name).filter(|s| !s.test_only || state.params.get_bool("enableTestCommands"));
    let Some(spec) = spec else {
        return Err(err(
            ErrorCode::CommandNotFound,
            format!("no such command: '{}'", req.name),
        ));
    };
    // A standalone has no transactions or retryable writes; mongod refuses their fields rather
    // than running the write outside the transaction the client believes it is in. A replica
    // set member runs retryable writes at most once (`crate::sessions`) and transactions
    // (`transactions`).
    let repl = state.repl.is_some();
    let in_txn = ["startTransaction", "autocommit"]
        .iter()
        .any(|k| req.body.contains_key(*k));
    let txn_stmt = match repl && in_txn {
        true => crate::sessions::transaction_fields(&req.body, &req.lsid, spec.name)?,
        false => None,
    };
    let retryable = match txn_stmt {
        Some(_) => None,
        None => crate::sessions::retryable(&req.body, &req.lsid, spec.name, repl)?.map(|mut rw| {
            rw.statements = statement_count(req);
            rw.ids = crate::retried::StmtIds::of(spec.name, &req.body, rw.statements);
            rw
        }),
    };
    if in_txn && !repl {
        return Err(err(
            ErrorCode::IllegalOperation,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    if spec.admin_only && req.db != "admin" {
        return Err(err(
            ErrorCode::Unauthorized,
            format!("{} may only be run against the admin database.", spec.name),
        ));
    }
    authz::check(state, conn, spec, req).await?;
    apply_default_max_time(req);
    if let Some(Ok(id)) = &req.lsid {
        let user = || conn.auth.user().map(|n| (n.name.clone(), n.db.clone()));
        state.sessions.touch(*id, user);
    }
    if let Some(c) = conn
        .query_stats_client
        .as_ref()
        .filter(|_| matches!(req.command, "find" | "aggregate"))
    {
        let _ = req.client.set(c.clone());
    }
    if let Some(n) = conn.auth.user().filter(|_| req.command == "aggregate") {
        let _ = req.user.set((n.name.clone(), n.db.clone()));
    }
    replset::check_primary(state, req)?;
    if state.repl.is_some() {
        crate::clock::check_read_concern(state, &req.body)?;
    }
    let snapshot_at = snapshot_read::prepare(state, req, spec.name, txn_stmt.as_ref())?;
    // DDL waits here for the open transactions on its namespaces (`crate::ns_locks`), before the
    // fsync gate: holding the gate while waiting for a transaction whose commit waits for an
    // fsync lock queued behind the gate would be a cycle.
    let _ddl = transactions::ddl_lock(state, req).await?;
    // Writes wait here while the server is fsync-locked (and hold the lock off while they run).
    let _write_gate = if WRITE_COMMANDS.contains(&spec.name) {
        match state.catalog.fsync.try_writer() {
            Some(g) => Some(g),
            None => {
                state
                    .failpoints
                    .enter_if(crate::failpoints::FSYNC_LOCKED_WRITE, |_| true);
                // As mongod's, a write blocked by fsyncLock still ends at its maxTimeMS.
                let gate = crate::interrupt::wait_for(state.catalog.fsync.writer(), &req.op)
                    .await
                    .map_err(|e| match req.command {
                        // A commit that ran out of time: mongod labels its outcome unknown.
                        "commitTransaction" => e.unknown_commit_result(),
                        _ => e,
                    })?;
                Some(gate)
            }
        }
    } else {
        None
    };
    let mut _active = None;
    if let Some(ts) = &txn_stmt {
        if let Some(result) = transactions::end(state, req, ts).await {
            return authz::finish(state, conn, spec.name, req, result).await;
        }
        _active = Some(transactions::attach(state, req, ts).await?);
        if let Some(t) = req.txn.get() {
            t.note_client(transactions::statement_client(conn));
        }
    }
    if let Some(rw) = retryable {
        let existing = state.catalog.collection(
            crate::retry_record::CONFIG_DB,
            crate::retry_record::TRANSACTIONS_COLLECTION,
        );
        let record_coll = match existing {
            Some(c) => c,
            None => {
                crate::offload::run(state, req.command, Some(&req.op), |s| {
                    crate::retry_record::collection(s.catalog.engine()).map_err(|e| {
                        storage_error(e, crate::retry_record::CONFIG_DB, "transactions")
                    })
                })
                .await?
            }
        };
        let _ = req.retry.set(rw.record(record_coll));
        let (s, r) = (state.clone(), req.clone());
        let result = crate::sessions::run_once(state.sessions.clone(), rw, move || async move {
            // The fsync gate goes with the write: it must outlive a client that hangs up.
            let _gate = _write_gate;
            let result = retryable_write(&s, &r).await;
            record_reply(&s, &r, &result).await;
            result
        })
        .await;
        let lost = result.is_ok()
            && state
                .failpoints
                .enter_if(crate::failpoints::ON_PRIMARY_TRANSACTIONAL_WRITE, |_| true)
                .is_some_and(|d| d.get_bool("closeConnection").unwrap_or(true));
        if lost {
            return Ok(Reply::Close);
        }
        return authz::finish(state, conn, spec.name, req, result).await;
    }
    let result = match spec.name {
        "hello" => handshake::hello(state, conn, req, false),
        "isMaster" => handshake::hello(state, conn, req, true),
        "ping" => argspec::check(&argspec::admin::PING, &req.body).map(|_| Reply::ok()),
        "refreshSessions" => diagnostic::check_sessions(req).map(|_| Reply::ok()),
        "endSessions" => match diagnostic::check_sessions(req) {
            Ok(()) => {
                transactions::end_sessions(state, req).await;
                Ok(Reply::ok())
            }
            Err(e) => Err(e),
        },
        "killSessions" | "killAllSessions" | "killAllSessionsByPattern" => {
            let r = diagnostic::kill_sessions(req);
            if r.is_ok() {
                transactions::end_sessions(state, req).await;
            }
            r
        }
        "commitTransaction" | "abortTransaction" => transactions::not_in_transaction(req),
        "logout" => auth::logout(conn, req),
        "saslStart" => auth::sasl_start(state, conn, req).await,
        "saslContinue" => auth::sasl_continue(state, conn, req).await,
        "authenticate" => auth::authenticate(req),
        "createUser" => users::create_user(state, req).await,
        "updateUser" => users::update_user(state, req).await,
        "dropUser" => users::drop_user(state, req).await,
        "dropAllUsersFromDatabase" => users::drop_all_users(state, req).await,
        "usersInfo" => users::users_info(state, req).await,
        "grantRolesToUser" => users::change_user_roles(state, req, true).await,
        "revokeRolesFromUser" => users::change_user_roles(state, req, false).await,
        "createRole" => roles::create_role(state, req).await,
        "updateRole" => roles::update_role(state, req).await,
        "dropRole" => roles::drop_role(state, req).await,
        "dropAllRolesFromDatabase" => roles::drop_all_roles(state, req).await,
        "rolesInfo" => roles::roles_info(state, req).await,
        "grantPrivilegesToRole" => roles::change_role_privileges(state, req, true).await,
        "revokePrivilegesFromRole" => roles::change_role_privileges(state, req, false).await,
        "grantRolesToRole" => roles::change_role_roles(state, req, true).await,
        "revokeRolesFromRole" => roles::change_role_roles(state, req, false).await,
        "buildInfo" => Ok(admin::build_info()),
        "getParameter" => admin::get_parameter(state, req),
        "setParameter" => admin::set_parameter(state, req),
        "getCmdLineOpts" => Ok(admin::get_cmd_line_opts(state)),
        "hostInfo" => Ok(admin::host_info()),
        "serverStatus" => Ok(admin::server_status(state, req)),
        "whatsmyuri" => Ok(Reply::Doc(
            bson::doc! { "you": conn.peer.to_string(), "ok": 1.0 },
        )),
        "connectionStatus" => argspec::check(&argspec::admin::CONNECTION_STATUS, &req.body)
            .map(|_| auth::connection_status(conn, req)),
        "listCommands" => Ok(admin::list_commands(state)),
        "startSession" => Ok(admin::start_session(state, conn)),
        "getLog" => admin::get_log(state, req),
        "logRotate" => off_thread(state, req, admin::log_rotate).await,
        "shutdown" => admin::shutdown(state, conn, req),
        "profile" => profile::profile(state, req),
        "fsync" => admin::fsync(state, req).await,
        "replSetInitiate" => off_thread(state, req, replset::initiate).await,
        "replSetReconfig" => off_thread(state, req, replset::reconfig).await,
        "replSetGetStatus" => replset::get_status(state),
        "replSetGetConfig" => replset::get_config(state),
        "fsyncUnlock" => admin::fsync_unlock(state).await,
        "dataSize" => off_thread(state, req, diagnostic::data_size).await,
        "compact" => diagnostic::compact(state, req).await,
        "autoCompact" => diagnostic::auto_compact(state, req).await,
        "validateDBMetadata" => diagnostic::validate_db_metadata(req),
        "top" => diagnostic::top(state, req),
        "lockInfo" => diagnostic::lock_info(req),
        "connPoolStats" => Ok(diagnostic::conn_pool_stats()),
        "planCacheClear" => diagnostic::plan_cache_clear(state, req),
        "planCacheClearFilters" => diagnostic::plan_cache_clear_filters(req),
        "planCacheListFilters" => diagnostic::plan_cache_list_filters(req),
        "planCacheSetFilter" => diagnostic::plan_cache_set_filter(state, req),
        "getClusterParameter" => diagnostic::get_cluster_parameter(req),
        "setQuerySettings" => match off_thread(state, req, query_settings::set).await {
            Ok((reply, ticket)) => users::committed_plain(state, req, ticket)
                .await
                .map(|_| reply),
            Err(e) => Err(e),
        },
        "removeQuerySettings" => match off_thread(state, req, query_settings::remove).await {
            Ok((reply, Some(ticket))) => users::committed_plain(state, req, ticket)
                .await
                .map(|_| reply),
            Ok((reply, None)) => Ok(reply),
            Err(e) => Err(e),
        },
        "setClusterParameter" => diagnostic::set_cluster_parameter(req),
        "getDefaultRWConcern" | "setDefaultRWConcern" => diagnostic::default_rw_concern(req),
        "refreshLogicalSessionCacheNow" => crate::session_records::refresh(state)
            .await
            .map(|_| Reply::ok()),
        "configureFailPoint" => admin::configure_fail_point(state, req),
        "waitForFailPoint" => admin::wait_for_fail_point(state, req).await,
        "listDatabases" => off_thread(state, req, ddl::list_databases).await,
        "insert" => crud_write::insert(state, req).await,
        "update" => crud_write::update(state, req).await,
        "delete" => crud_write::delete(state, req).await,
        "bulkWrite" => bulk_write::bulk_write(state, req).await,
        "findAndModify" => find_and_modify::run(state, req).await,
        "find" if changes::is_oplog_find(req) => off_thread(state, req, changes::oplog_find).await,
        "find" => {
            // Counted here, once: the call may be tried on the worker and then run again.
            state
                .opcounters
                .query
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            off_thread_tried(state, req, crate::offload::Tried::Read, crud_read::find).await
        }
        "getMore" => match changes::get_more(state, req).await {
            Some(r) => r,
            None => match tailable::get_more(state, req).await {
                Some(r) => r,
                None => off_thread(state, req, crud_read::get_more).await,
            },
        },
        "killCursors" => crud_read::kill_cursors(state, req),
        "count" => {
            off_thread_tried(state, req, crate::offload::Tried::Read, crud_read::count).await
        }
        "distinct" => {
            off_thread_tried(state, req, crate::offload::Tried::Read, crud_read::distinct).await
        }
        "create" => off_thread(state, req, ddl::create).await,
        "drop" => ddl::drop(state, req).await,
        "dropDatabase" => off_thread(state, req, ddl::drop_database).await,
        "listCollections" => off_thread(state, req, ddl::list_collections).await,
        "renameCollection" => ddl::rename_collection(state, req).await,
        "convertToCapped" => capped::convert_to_capped(state, req).await,
        "cloneCollectionAsCapped" => capped::clone_collection_as_capped(state, req).await,
        "collMod" => ddl::coll_mod(state, req).await,
        "dbStats" => off_thread(state, req, ddl::db_stats).await,
        "collStats" => off_thread(state, req, ddl::coll_stats).await,
        "validate" => ddl::validate(state, req).await,
        "createIndexes" => indexes::create_indexes(state, req).await,
        "listIndexes" => off_thread(state, req, indexes::list_indexes).await,
        "dropIndexes" => indexes::drop_indexes(state, req).await,
        "explain" => off_thread(state, req, explain::explain).await,
        "aggregate" => aggregate::aggregate(state, req).await,
        "mapReduce" => map_reduce::map_reduce(state, req).await,
        "currentOp" => admin::current_op(state, req),
        "killOp" => admin::kill_op(state, req),
        "getFreeMonitoringStatus" => Ok(Reply::Doc(bson::doc! { "state": "disabled", "ok": 1.0 })),
        other => Err(err(
            ErrorCode::InternalError,
            format!("command {other} has no handler"),
        )),
    };
    let result = match &txn_stmt {
        Some(ts) => transactions::after_statement(state, ts, result).await,
        None => result,
    };
    let result = match snapshot_at {
        Some(at) => result.map(|r| snapshot_read::stamp(r, at)),
        None => result,
    };
    authz::finish(state, conn, spec.name, req, result).await
}

/// A retryable write's reply as the session table keeps it (raw replies decoded once, to keep).
impl crate::sessions::Storable for Reply {
    fn stored(&self) -> Option<Document> {
        match self {
            Reply::Doc(d) => Some(d.clone()),
            Reply::Raw(r) => Document::try_from(r.as_ref()).ok(),
            Reply::Cursor(c) => Document::try_from(c.to_raw().as_ref()).ok(),
            Reply::Close => None,
        }
    }

    fn from_stored(d: Document) -> Self {
        Reply::Doc(d)
    }
}

/// The handlers of the commands `crate::sessions::RETRYABLE_COMMANDS` names.
/// A retryable write that wrote data: its reply goes into the session's durable record before
/// the client sees it (`crate::retry_record`); insert, update and delete do it in their own job
/// (`WriteOutcome::record_reply`), findAndModify and bulkWrite here. A failure is logged; the in-memory record still
/// answers retries until a restart.
async fn record_reply(state: &Arc<ServerState>, req: &Arc<Request>, result: &CommandResult<Reply>) {
    use crate::sessions::Storable;
    let Some(record) = req
        .retry
        .get()
        .filter(|r| r.wrote() && !r.replied())
        .cloned()
    else {
        return;
    };
    let Some(reply) = result.as_ref().ok().and_then(Storable::stored) else {
        return;
    };
    if reply.get_f64("ok").ok() != Some(1.0) {
        return;
    }
    let ids = crate::retried::StmtIds::of(req.command, &req.body, statement_count(req));
    let reply = crate::sessions::retried_form(&reply, &ids);
    let done = crate::offload::run(state, req.command, None, move |_| {
        record
            .record_reply(reply)
            .map_err(|e| storage_error(e, crate::retry_record::CONFIG_DB, "transactions"))
    })
    .await;
    if let Err(e) = done {
        tracing::warn!(error = %e.message, "could not record a retryable write's reply");
    }
}

async fn retryable_write(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    match req.command {
        "insert" => crud_write::insert(state, req).await,
        "update" => crud_write::update(state, req).await,
        "delete" => crud_write::delete(state, req).await,
        "bulkWrite" => bulk_write::bulk_write(state, req).await,
        "findAndModify" => find_and_modify::run(state, req).await,
        other => Err(err(
            ErrorCode::InternalError,
            format!("command {other} is not a retryable write"),
        )),
    }
}

// Commands read their arguments with the query layer's value helpers.
pub use crate::query::types::{as_i64, truthy};

/// The statements of a write command, from its document sequence or its body's array
/// (`documents`, `updates`, `deletes`, bulkWrite's `ops`); 1 for findAndModify.
fn statement_count(req: &Request) -> u64 {
    const LISTS: [&str; 4] = ["documents", "updates", "deletes", "ops"];
    if let Some(s) = req
        .sequences
        .iter()
        .find(|s| LISTS.contains(&s.identifier.as_str()))
    {
        return s.documents.len().max(1) as u64;
    }
    LISTS
        .iter()
        .find_map(|k| req.body.get_array(*k).ok())
        .map_or(1, |a| a.len().max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_aliases() {
        assert_eq!(lookup("ismaster").map(|c| c.name), Some("isMaster"));
        assert_eq!(lookup("buildinfo").map(|c| c.name), Some("buildInfo"));
        assert!(lookup("ISMASTER").is_none());
        assert!(lookup("nope").is_none());
    }

    #[test]
    fn db_required_on_op_msg() {
        let e = parse_request(bson::doc! { "ping": 1 }, vec![], true)
            .err()
            .unwrap();
        assert_eq!(e.code.code(), 40571);
        let r = parse_request(bson::doc! { "ping": 1 }, vec![], false)
            .ok()
            .unwrap();
        assert_eq!(r.db, "admin");
    }

    #[test]
    fn max_time_ms_range() {
        assert!(
            parse_request(
                bson::doc! { "find": "c", "$db": "t", "maxTimeMS": -1 },
                vec![],
                true
            )
            .is_err()
        );
        let r = parse_request(
            bson::doc! { "find": "c", "$db": "t", "maxTimeMS": 5 },
            vec![],
            true,
        )
        .ok()
        .unwrap();
        assert_eq!(r.max_time_ms, Some(5));
    }
}
