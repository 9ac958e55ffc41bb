//! Administrative commands: build and host information, parameters, `serverStatus`, logs,
//! sessions, `shutdown`. These read `ServerState` and the process; none touches user data
//! except `listDatabases`.

use super::{COMMANDS, ConnectionInfo, Reply, Request, truthy};
use crate::error::{CommandResult, ErrorCode, err};
use crate::limits;
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::sync::atomic::Ordering::Relaxed;

/// The mongod release whose behaviour cairn follows; drivers read it to pick features.
pub const COMPAT_VERSION: &str = "7.0.0";
const COMPAT_VERSION_ARRAY: [i32; 4] = [7, 0, 0, 0];

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

pub fn get_parameter(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let all = matches!(req.body.get("getParameter"), Some(Bson::String(s)) if s == "*")
        || matches!(req.body.get("getParameter"), Some(Bson::Document(d)) if d.get("allParameters").is_some_and(truthy));
    let mut reply = if all {
        state.params.all()
    } else {
        let mut out = Document::new();
        for (name, _) in req
            .body
            .iter()
            .skip(1)
            .filter(|(k, _)| !k.starts_with('$') && *k != "lsid" && *k != "comment")
        {
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

pub fn set_parameter(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let mut was = None;
    for (name, value) in req.body.iter().skip(1) {
        if name.starts_with('$') || name == "lsid" || name == "comment" {
            continue;
        }
        if was.is_some() {
            return Err(err(
                ErrorCode::BadValue,
                "setParameter takes one parameter at a time",
            ));
        }
        was = Some(state.params.set(name, value)?);
    }
    let Some(was) = was else {
        return Err(err(
            ErrorCode::BadValue,
            "no option found to set, use help:true to see options ",
        ));
    };
    Ok(Reply::Doc(doc! { "was": was, "ok": 1.0 }))
}

pub fn get_cmd_line_opts(state: &ServerState) -> Reply {
    Reply::Doc(
        doc! { "argv": state.argv.clone(), "parsed": state.config.parsed_document(), "ok": 1.0 },
    )
}

/// Total memory in MiB, from /proc/meminfo (0 where it cannot be read).
fn mem_size_mb() -> i64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb / 1024)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "localhost".to_string())
}

pub fn host_info() -> Reply {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    Reply::Doc(doc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": hostname(),
            "cpuAddrSize": (std::mem::size_of::<usize>() * 8) as i32,
            "memSizeMB": mem_size_mb(),
            "memLimitMB": mem_size_mb(),
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

pub fn server_status(state: &ServerState) -> Reply {
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
        "mem": { "bits": 64, "resident": resident as i32, "virtual": virt as i32, "supported": true },
        "network": {
            "bytesIn": n.bytes_in.load(Relaxed) as i64,
            "bytesOut": n.bytes_out.load(Relaxed) as i64,
            "numRequests": n.num_requests.load(Relaxed) as i64,
        },
        "storageEngine": { "name": "cairn", "supportsCommittedReads": false, "persistent": true },
        "metrics": {
            "ttl": {
                "deletedDocuments": state.ttl.deleted_documents.load(Relaxed) as i64,
                "passes": state.ttl.passes.load(Relaxed) as i64,
            },
            "cursor": { "open": { "total": state.cursors.len() as i64 } },
        },
        "ok": 1.0,
    })
}

pub fn list_commands() -> Reply {
    let mut commands = Document::new();
    let mut specs: Vec<_> = COMMANDS.iter().collect();
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

pub fn start_session() -> Reply {
    let id = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: bson::uuid::Uuid::new().bytes().to_vec(),
    };
    Reply::Doc(
        doc! { "id": { "id": id }, "timeoutMinutes": limits::SESSION_TIMEOUT_MINUTES, "ok": 1.0 },
    )
}

pub fn get_log(state: &ServerState, req: &Request) -> CommandResult<Reply> {
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

pub fn shutdown(state: &ServerState, conn: &ConnectionInfo) -> CommandResult<Reply> {
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

pub fn profile(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let level = req.body.get("profile").and_then(super::as_i64);
    match level {
        Some(-1 | 0) => {}
        Some(1 | 2) => {
            return Err(err(
                ErrorCode::IllegalOperation,
                "the profiler (levels 1 and 2) is not available in cairn yet",
            ));
        }
        _ => return Err(err(ErrorCode::BadValue, "profile must be -1, 0, 1 or 2")),
    }
    let was = state.slowms.load(Relaxed);
    if let Some(v) = req.body.get("slowms") {
        let ms =
            super::as_i64(v).ok_or_else(|| err(ErrorCode::BadValue, "slowms must be a number"))?;
        state.slowms.store(ms, Relaxed);
    }
    Ok(Reply::Doc(
        doc! { "was": 0, "slowms": was as i32, "sampleRate": 1.0, "ok": 1.0 },
    ))
}
