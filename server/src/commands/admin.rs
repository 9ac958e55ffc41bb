//! Administrative commands: build and host information, parameters, `serverStatus`, logs,
//! sessions, `shutdown`, `fsync` (with its lock) and `fsyncUnlock`, `currentOp`, and the test-only
//! fail point commands. These read `ServerState`
//! and the process; `fsync` is the one that calls into storage (a checkpoint, off-thread).
//! `serverStatus` reads `Engine::stats()`, which the engine keeps cheap (counters, no page
//! reads, no wait on the log), so monitoring is answered even when the storage pool is busy.

use super::{COMMANDS, ConnectionInfo, Reply, Request, argspec, truthy};
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::limits;
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// The mongod release whose behaviour cairn follows; drivers read it to pick features.
pub const COMPAT_VERSION: &str = "8.0.0";
const COMPAT_VERSION_ARRAY: [i32; 4] = [8, 0, 0, 0];

pub fn build_info() -> Reply {
    Reply::Doc(doc! {
        "version": COMPAT_VERSION,
        "gitVersion": option_env!("CAIRN_GIT_HASH").unwrap_or("unknown"),
        "cairnVersion": crate::VERSION,
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "versionArray": COMPAT_VERSION_ARRAY.to_vec(),
        "openssl": { "running": "disabled", "compiled": "disabled" },
        "buildEnvironment": {
            "target_arch": std::env::consts::ARCH,
            "target_os": std::env::consts::OS,
        },
        "bits": (std::mem::size_of::<usize>() * 8) as i32,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": limits::BSON_OBJECT_SIZE_MAX as i32,
        "storageEngines": ["cairn"],
        "ok": 1.0,
    })
}

/// A field every command may carry: never a parameter name to `getParameter`/`setParameter`,
/// whose other fields are parameters (no table can list them).
fn is_generic(name: &str) -> bool {
    name.starts_with('$') || super::args::GENERIC_FIELDS.contains(&name)
}

pub fn get_parameter(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::server::GET_PARAMETER, &req.body)?;
    let all = matches!(req.body.get("getParameter"), Some(Bson::String(s)) if s == "*")
        || matches!(req.body.get("getParameter"), Some(Bson::Document(d)) if d.get("allParameters").is_some_and(truthy));
    let mut reply = if all {
        state.params.all()
    } else {
        let mut out = Document::new();
        for (name, _) in req.body.iter().skip(1).filter(|(k, _)| !is_generic(k)) {
            if let Some(v) = state.params.get(name) {
                out.insert(name, v);
            }
        }
        if out.is_empty() {
            return Err(err(ErrorCode::InvalidOptions, "no option found to get"));
        }
        out
    };
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// `setParameter`: as mongod, every name is checked before any is set, then they are set in
/// name order and `was` is the first one's previous value.
pub fn set_parameter(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::server::SET_PARAMETER, &req.body)?;
    let mut named: Vec<(&String, &Bson)> = req
        .body
        .iter()
        .skip(1)
        .filter(|(k, _)| !is_generic(k))
        .collect();
    for (name, _) in &named {
        state.params.check_settable(name)?;
    }
    if named.is_empty() {
        return Err(err(
            ErrorCode::InvalidOptions,
            "no option found to set, use help:true to see options ",
        ));
    }
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut was = None;
    for (name, value) in named {
        let before = state.params.set(name, value)?;
        was.get_or_insert(before);
        if name == super::snapshot_read::WINDOW_PARAMETER {
            super::snapshot_read::apply_window(state);
        }
    }
    Ok(Reply::Doc(
        doc! { "was": was.unwrap_or(Bson::Null), "ok": 1.0 },
    ))
}

/// `logRotate: 1` (or `"server"`): rotate `--logpath` as `--logRotate` says; without a log
/// file there is nothing to rotate and the command succeeds, as mongod's does.
pub fn log_rotate(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    match req.body.get("logRotate") {
        Some(Bson::String(s)) if s == "server" => {}
        Some(Bson::String(s)) if s == "audit" => {
            return Err(err(
                ErrorCode::NoSuchKey,
                "Attempted to rotate audit log, but auditing is not enabled",
            ));
        }
        Some(Bson::String(s)) => {
            return Err(err(
                ErrorCode::NoSuchKey,
                format!("Unknown log type for rotate: {s}"),
            ));
        }
        _ => {}
    }
    rotate_log(state).map_err(|e| {
        err(
            ErrorCode::InternalError,
            format!("Failed to rotate log: {e}"),
        )
    })?;
    Ok(Reply::ok())
}

pub fn get_cmd_line_opts(state: &ServerState) -> Reply {
    Reply::Doc(
        doc! { "argv": state.argv.clone(), "parsed": state.config.parsed_document(), "ok": 1.0 },
    )
}

const MIB: u64 = 1024 * 1024;

use crate::sysinfo::hostname;

pub fn host_info() -> Reply {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    Reply::Doc(doc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": hostname(),
            "cpuAddrSize": (std::mem::size_of::<usize>() * 8) as i32,
            "memSizeMB": (crate::sysinfo::physical_memory_bytes() / MIB) as i64,
            "memLimitMB": (crate::sysinfo::memory_bytes() / MIB) as i64,
            "numCores": cores,
            "numPhysicalCores": cores,
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": false,
        },
        "os": { "type": std::env::consts::OS, "name": std::env::consts::OS, "version": kernel.trim() },
        "extra": {},
        "ok": 1.0,
    })
}

/// (resident, virtual) memory of this process in MiB, from /proc/self/status.
pub fn process_memory_mb() -> (i64, i64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
            .map_or(0, |kb| kb / 1024)
    };
    (field("VmRSS:"), field("VmSize:"))
}

/// `serverStatus.wiredTiger`: the engine's cache and checkpoint numbers under WiredTiger's
/// statistic names, which monitoring tools read. A dirty page is written before it is evicted
/// ("modified"); a clean one is just dropped ("unmodified").
pub fn wired_tiger_section(s: &storage::EngineStats) -> Document {
    let c = &s.cache;
    doc! {
        "cache": {
            "bytes currently in the cache": c.bytes_current as i64,
            "maximum bytes configured": c.bytes_max as i64,
            "tracked dirty bytes in the cache": c.bytes_dirty as i64,
            "pages read into cache": c.pages_read as i64,
            "pages written from cache": c.pages_written as i64,
            "unmodified pages evicted": c.pages_evicted.saturating_sub(c.pages_evicted_dirty) as i64,
            "modified pages evicted": c.pages_evicted_dirty as i64,
        },
        "log": log_section(&s.group_commit),
        "transaction": {
            "transaction checkpoints": s.checkpoints as i64,
            "transaction checkpoint most recent time (msecs)": s.checkpoint_last_ms as i64,
            "transaction checkpoint currently running": i64::from(s.checkpoint_running),
        },
    }
}

/// `serverStatus.wiredTiger.log`: group commit. The first two are WiredTiger's statistic
/// names; the rest are cairn's own, saying who ran the syncs and how many waiting writers
/// (durable writes whose replies waited) and log records each one covered, so a user sees
/// whether concurrent writers share fdatasyncs.
fn log_section(g: &storage::CommitStatsSnapshot) -> Document {
    let syncs_ok = g.batch_writers.count();
    let per_sync = |n: u64| {
        if syncs_ok == 0 {
            0.0
        } else {
            n as f64 / syncs_ok as f64
        }
    };
    let mut writers = Document::new();
    for (i, n) in g.batch_writers.counts.iter().enumerate() {
        let name = match g.batch_writers.bounds.get(i) {
            Some(b) => format!("le {b}"),
            None => "more".to_string(),
        };
        writers.insert(name, *n as i64);
    }
    doc! {
        "log sync operations": g.syncs() as i64,
        "log sync time duration (usecs)": g.sync_us.sum as i64,
        "group commit syncs led by a writer": g.syncs_by_writer as i64,
        "group commit syncs by the commit thread for waiters": g.syncs_requested as i64,
        "group commit syncs by the commit thread's timer": g.syncs_by_timer as i64,
        "group commit syncs failed": g.syncs_failed as i64,
        "group commit writers made durable": g.writers_covered as i64,
        "group commit writers per sync (mean)": per_sync(g.writers_covered),
        "group commit records per sync (mean)": per_sync(g.batch_records.sum),
        "group commit writers per sync": writers,
        "group commit waiter wake-ups before durable": g.waiter_wakeups_early as i64,
        "group commit holds for writers on their way that ran out": g.holds_expired as i64,
        "group commit writers waiting now": g.writers_waiting as i64,
    }
}

/// `serverStatus.metrics.storageJobs`: the blocking pool that runs storage calls.
fn storage_jobs_section(state: &ServerState) -> Document {
    let p = &state.pool;
    doc! {
        "threadsMax": limits::STORAGE_THREADS_MAX as i64,
        "running": p.running.load(Relaxed) as i64,
        "queued": p.queued.load(Relaxed) as i64,
        "skippedClientDisconnected": p.skipped_client_gone.load(Relaxed) as i64,
        "servedFromCache": p.served_cached.load(Relaxed) as i64,
        "movedToPool": p.moved_to_pool.load(Relaxed) as i64,
        "writesOnWorker": p.writes_on_worker.load(Relaxed) as i64,
        "writesMovedToPool": p.writes_moved_to_pool.load(Relaxed) as i64,
    }
}

/// `serverStatus.jemalloc` (cairn's own, as mongod's `tcmalloc` section is its allocator's):
/// bytes the program holds (`allocated`), in the pages those sit in (`active`), resident in
/// memory for the allocator including its metadata (`resident`), mapped, and kept mapped but
/// returned to the OS (`retained`), in threads' caches (`tcacheBytes`), and how many times an
/// idle thread handed its cache back (`threadCacheFlushes`, see `alloc_trim`). RSS well above
/// `resident` is not the heap's.
/// With `serverStatus: 1, jemalloc: 2` (as mongod's `tcmalloc: 2` adds its allocator's report)
/// the section also carries `formattedString`: jemalloc's own statistics per size class, which
/// tell slab fragmentation from thread caches and unpurged pages.
fn jemalloc_section(verbose: bool) -> Document {
    use tikv_jemalloc_ctl::{epoch, stats};
    // The counters are a snapshot refreshed by advancing the epoch.
    let _ = epoch::advance();
    let n = |r: tikv_jemalloc_ctl::Result<usize>| r.map_or(-1, |v| v as i64);
    let mut section = doc! {
        "allocated": n(stats::allocated::read()),
        "active": n(stats::active::read()),
        "resident": n(stats::resident::read()),
        "metadata": n(stats::metadata::read()),
        "mapped": n(stats::mapped::read()),
        "retained": n(stats::retained::read()),
        "tcacheBytes": crate::alloc_trim::thread_cache_bytes(),
        "threadCacheFlushes": crate::alloc_trim::flushes() as i64,
    };
    if verbose {
        let mut report = Vec::new();
        let mut options = tikv_jemalloc_ctl::stats_print::Options::default();
        options.skip_constants = true;
        options.skip_per_arena = true;
        options.skip_mutex_statistics = true;
        if tikv_jemalloc_ctl::stats_print::stats_print(&mut report, options).is_ok() {
            section.insert(
                "formattedString",
                String::from_utf8_lossy(&report).into_owned(),
            );
        }
    }
    section
}

/// The verbosity a section asks for (`serverStatus: 1, jemalloc: 2`): a number, else 1.
fn section_verbosity(req: &Request, section: &str) -> f64 {
    match req.body.get(section) {
        Some(Bson::Int32(v)) => f64::from(*v),
        Some(Bson::Int64(v)) => *v as f64,
        Some(Bson::Double(v)) => *v,
        _ => 1.0,
    }
}

pub fn server_status(state: &ServerState, req: &Request) -> Reply {
    let engine_stats = state.catalog.engine().stats();
    let uptime = state.started.elapsed();
    let (resident, virt) = process_memory_mb();
    let c = &state.connections;
    let o = &state.opcounters;
    let n = &state.network;
    Reply::Doc(doc! {
        "host": format!("{}:{}", hostname(), state.config.port),
        "version": COMPAT_VERSION,
        "cairnVersion": crate::VERSION,
        "process": "cairn",
        "pid": std::process::id() as i64,
        "uptime": uptime.as_secs_f64().floor(),
        "uptimeMillis": uptime.as_millis() as i64,
        "uptimeEstimate": uptime.as_secs() as i64,
        "localTime": bson::DateTime::now(),
        "connections": {
            "current": c.current.load(Relaxed) as i32,
            "available": state.connections_available() as i32,
            "totalCreated": c.total_created.load(Relaxed) as i64,
            "active": c.active.load(Relaxed) as i32,
        },
        "opcounters": {
            "insert": o.insert.load(Relaxed) as i64,
            "query": o.query.load(Relaxed) as i64,
            "update": o.update.load(Relaxed) as i64,
            "delete": o.delete.load(Relaxed) as i64,
            "getmore": o.getmore.load(Relaxed) as i64,
            "command": o.command.load(Relaxed) as i64,
        },
        "transactions": crate::sessions::server_status(&state.sessions, &state.txns),
        "mem": { "bits": 64, "resident": resident as i32, "virtual": virt as i32, "supported": true },
        "network": {
            "bytesIn": n.bytes_in.load(Relaxed) as i64,
            "bytesOut": n.bytes_out.load(Relaxed) as i64,
            "numRequests": n.num_requests.load(Relaxed) as i64,
        },
        "storageEngine": { "name": "cairn", "supportsCommittedReads": false, "persistent": true },
        "wiredTiger": wired_tiger_section(&engine_stats),
        "jemalloc": jemalloc_section(section_verbosity(req, "jemalloc") >= 2.0),
        "metrics": {
            "query": { "planCache": plan_cache_section() },
            "storageJobs": storage_jobs_section(state),
            "ttl": {
                "deletedDocuments": state.ttl.deleted_documents.load(Relaxed) as i64,
                "passes": state.ttl.passes.load(Relaxed) as i64,
            },
            "cursor": { "open": { "total": state.cursors.len() as i64 } },
            "operation": {
                "transactionTooLargeForCacheErrors":
                    state.txns.too_large_errors.load(Relaxed) as i64,
            },
            // cairn's own: what running queries' blocking stages hold of the shared budget.
            "queryMemory": {
                "usedBytes": crate::query::budget::GLOBAL.used() as i64,
                "budgetBytes": crate::query::budget::GLOBAL.max().min(i64::MAX as usize) as i64,
            },
        },
        "ok": 1.0,
    })
}

/// `metrics.query.planCache` as mongod 7.2+ reports it.
fn plan_cache_section() -> Document {
    let (shapes, bytes) = crate::planner::cache::totals();
    doc! { "totalQueryShapes": shapes as i64, "totalSizeEstimateBytes": bytes as i64 }
}

pub fn list_commands(state: &ServerState) -> Reply {
    let mut commands = Document::new();
    let tests = state.params.get_bool("enableTestCommands");
    let mut specs: Vec<_> = COMMANDS.iter().filter(|c| tests || !c.test_only).collect();
    specs.sort_by_key(|c| c.name);
    for c in specs {
        commands.insert(
            c.name,
            doc! {
                "help": c.help,
                "requiresAuth": super::authz::requires_auth(c.name),
                "secondaryOk": true,
                "adminOnly": c.admin_only,
                "apiVersions": [],
                "deprecatedApiVersions": [],
            },
        );
    }
    Reply::Doc(doc! { "commands": commands, "ok": 1.0 })
}

/// `startSession`: a new id, recorded in the logical session cache as its first use.
pub fn start_session(state: &ServerState, conn: &super::ConnectionInfo) -> Reply {
    let bytes = bson::uuid::Uuid::new().bytes();
    let user = || conn.auth.user().map(|n| (n.name.clone(), n.db.clone()));
    state.sessions.touch(bytes, user);
    let id = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: bytes.to_vec(),
    };
    Reply::Doc(
        doc! { "id": { "id": id }, "timeoutMinutes": limits::SESSION_TIMEOUT_MINUTES, "ok": 1.0 },
    )
}

pub fn get_log(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::admin::GET_LOG, &req.body)?;
    let Some(Bson::String(which)) = req.body.get("getLog") else {
        return Err(err(
            ErrorCode::TypeMismatch,
            "Argument to getLog must be of type String",
        ));
    };
    Ok(Reply::Doc(match which.as_str() {
        "*" => doc! { "names": ["global", "startupWarnings"], "ok": 1.0 },
        "global" => {
            let (total, lines) = state.log_ring.snapshot();
            doc! { "totalLinesWritten": total as i64, "log": lines, "ok": 1.0 }
        }
        "startupWarnings" => doc! { "totalLinesWritten": 0_i64, "log": [], "ok": 1.0 },
        other => {
            return Err(err(
                ErrorCode::OperationFailed,
                format!("No log named '{other}'"),
            ));
        }
    }))
}

pub fn shutdown(state: &ServerState, conn: &ConnectionInfo, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::admin::SHUTDOWN, &req.body)?;
    // Without authentication, mongod only takes `shutdown` from the local machine.
    if !conn.peer.ip().is_loopback() {
        return Err(err(
            ErrorCode::Unauthorized,
            "shutdown must run from localhost when running db without auth",
        ));
    }
    tracing::info!(connection_id = conn.id, "shutdown command received");
    state.request_shutdown();
    Ok(Reply::Close)
}

/// `killOp {op: opid}`: interrupts the operation `currentOp` lists under that opid; it stops at
/// its next yield point with Interrupted (11601). mongod answers the same whether or not the
/// operation still runs.
pub fn kill_op(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::admin::KILL_OP, &req.body)?;
    let opid = match req.body.get("op") {
        None => {
            return Err(err(
                ErrorCode::FailedToParse,
                "Did not provide \"op\" field",
            ));
        }
        Some(v) => match v {
            Bson::Double(f) if f.fract() == 0.0 => *f as i64,
            Bson::Int32(_) | Bson::Int64(_) => super::as_i64(v).unwrap_or(-1),
            other => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!(
                        "\"op\" field must be a number, found {}",
                        super::args::type_name(other)
                    ),
                ));
            }
        },
    };
    let found = u64::try_from(opid).is_ok_and(|id| state.ops.kill(id));
    tracing::info!(opid = opid, found = found, "going to kill op");
    Ok(Reply::Doc(
        doc! { "info": "attempting to kill op", "ok": 1.0 },
    ))
}

/// Where mongod's fsync replies point for more.
const FSYNC_SEE_ALSO: &str = "http://dochub.mongodb.org/core/fsynccommand";

/// `fsync`: a checkpoint now (on the blocking pool). With `lock: true` (fsyncLock) every write
/// command (and the TTL monitor) then waits in dispatch until as many `fsyncUnlock`s came;
/// reads go on. No write reaches the log while locked, and the checkpoint just taken leaves
/// no dirty page behind. Its fields are 8.0's `fsync.idl` (strict).
pub async fn fsync(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    argspec::check(&argspec::admin::FSYNC, &req.body)?;
    let lock = req.body.get("lock").is_some_and(truthy);
    let count = if lock {
        Some(state.catalog.fsync.lock().await)
    } else {
        None
    };
    let checkpoint = super::off_thread(state, req, |state, _| {
        state
            .catalog
            .engine()
            .checkpoint()
            .map_err(|e| storage_error(e, "", ""))
    })
    .await;
    if let Err(e) = checkpoint {
        if lock {
            state.catalog.fsync.unlock().await;
        }
        return Err(e);
    }
    Ok(Reply::Doc(match count {
        Some(n) => {
            tracing::info!(lock_count = n, "fsync: locked against writes");
            doc! {
                "info": "now locked against writes, use db.fsyncUnlock() to unlock",
                "lockCount": n,
                "seeAlso": FSYNC_SEE_ALSO,
                "ok": 1.0,
            }
        }
        None => doc! { "numFiles": 1, "ok": 1.0 },
    }))
}

/// `fsyncUnlock`: release one `fsync {lock: true}`.
pub async fn fsync_unlock(state: &ServerState) -> CommandResult<Reply> {
    let Some(n) = state.catalog.fsync.unlock().await else {
        return Err(err(
            ErrorCode::IllegalOperation,
            "fsyncUnlock called when not locked",
        ));
    };
    tracing::info!(lock_count = n, "fsyncUnlock completed");
    Ok(Reply::Doc(
        doc! { "info": "fsyncUnlock completed", "lockCount": n, "ok": 1.0 },
    ))
}

/// `currentOp`: the operations in flight, `fsyncLock` while the server is locked, and with
/// `$all` or `idleSessions` the open transactions no statement runs on (mongod's idle
/// sessions). Every other non-generic field is a filter on the listed operations, as mongod
/// turns them into a `$match` after `$currentOp`.
pub fn current_op(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let filter = current_op_filter(&req.body)?;
    let mut inprog = state.ops.in_progress();
    let idle = ["$all", "idleSessions"]
        .iter()
        .any(|k| req.body.get(*k).is_some_and(truthy));
    if idle {
        inprog.extend(super::transactions::idle_transactions(state));
    }
    if let Some(f) = filter {
        inprog.retain(|op| bson::RawDocumentBuf::try_from(op).is_ok_and(|raw| f.matches(&raw)));
    }
    let mut r = doc! { "inprog": inprog };
    if state.catalog.fsync.is_locked() {
        r.insert("fsyncLock", true);
        r.insert(
            "info",
            "use db.fsyncUnlock() to terminate the fsync write/snapshot lock",
        );
    }
    r.insert("ok", 1.0);
    Ok(Reply::Doc(r))
}

/// The filter part of a `currentOp` body: what is neither the command, its switches nor a
/// generic argument. `None` when there is none.
fn current_op_filter(body: &Document) -> CommandResult<Option<crate::query::matcher::Filter>> {
    let filter: Document = body
        .iter()
        .skip(1)
        .filter(|(k, _)| !matches!(k.as_str(), "$all" | "$ownOps" | "idleSessions"))
        .filter(|(k, _)| !super::args::GENERIC_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if filter.is_empty() {
        return Ok(None);
    }
    crate::query::matcher::Filter::parse(&filter).map(Some)
}

/// `configureFailPoint` (test commands only): the reply's `count` is how often the point was
/// entered before.
pub fn configure_fail_point(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    argspec::check(&argspec::server::CONFIGURE_FAIL_POINT, &req.body)?;
    // mongod reads the name as a string (anything else is "", a point that does not exist).
    let name = req.body.get_str("configureFailPoint").unwrap_or("");
    let count = state.failpoints.configure(name, &req.body)?;
    Ok(Reply::Doc(doc! { "count": count as i64, "ok": 1.0 }))
}

/// `waitForFailPoint` (test commands only): `{waitForFailPoint: name, timesEntered: n,
/// maxTimeMS: ms}` answers once the point was entered n times in all; async, holds no thread.
pub async fn wait_for_fail_point(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    super::args::check_fields(&req.body, "waitForFailPoint", &["timesEntered"])?;
    let name = req.body.get_str("waitForFailPoint").map_err(|_| {
        err(
            ErrorCode::TypeMismatch,
            "waitForFailPoint takes the fail point's name",
        )
    })?;
    let times = req
        .body
        .get("timesEntered")
        .and_then(super::as_i64)
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            err(
                ErrorCode::FailedToParse,
                "BSON field 'waitForFailPoint.timesEntered' is missing but a required field",
            )
        })?;
    let ms = req.max_time_ms.ok_or_else(|| {
        err(
            ErrorCode::FailedToParse,
            "waitForFailPoint requires maxTimeMS",
        )
    })?;
    state
        .failpoints
        .wait_entered(name, times as u64, Duration::from_millis(ms as u64))
        .await?;
    Ok(Reply::ok())
}

/// `logRotate` for the command and SIGUSR1: rotate `--logpath` as `--logRotate` says.
pub fn rotate_log(state: &ServerState) -> std::io::Result<()> {
    let Some(out) = &state.log_output else {
        return Ok(());
    };
    tracing::info!("Log rotation initiated");
    match out.rotate(state.config.log_rotate)? {
        Some(to) => tracing::info!(rotated = %to.display(), "Log rotated"),
        None if state.config.logpath.is_some() => tracing::info!("Log file reopened"),
        None => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wired_tiger_names() {
        let stats = storage::EngineStats {
            cache: storage::CacheStats {
                bytes_max: 64 << 20,
                bytes_current: 1000,
                bytes_dirty: 10,
                pages_read: 3,
                pages_written: 2,
                pages_evicted: 3,
                pages_evicted_dirty: 2,
            },
            checkpoints: 7,
            checkpoint_last_ms: 12,
            checkpoint_running: true,
            ..Default::default()
        };
        let wt = wired_tiger_section(&stats);
        let cache = wt.get_document("cache").unwrap();
        assert_eq!(cache.get_i64("maximum bytes configured").unwrap(), 64 << 20);
        assert_eq!(cache.get_i64("bytes currently in the cache").unwrap(), 1000);
        assert_eq!(
            cache.get_i64("tracked dirty bytes in the cache").unwrap(),
            10
        );
        assert_eq!(cache.get_i64("pages read into cache").unwrap(), 3);
        assert_eq!(cache.get_i64("pages written from cache").unwrap(), 2);
        assert_eq!(cache.get_i64("unmodified pages evicted").unwrap(), 1);
        assert_eq!(cache.get_i64("modified pages evicted").unwrap(), 2);
        let txn = wt.get_document("transaction").unwrap();
        assert_eq!(txn.get_i64("transaction checkpoints").unwrap(), 7);
        assert_eq!(
            txn.get_i64("transaction checkpoint most recent time (msecs)")
                .unwrap(),
            12
        );
        assert_eq!(
            txn.get_i64("transaction checkpoint currently running")
                .unwrap(),
            1
        );
    }
}
