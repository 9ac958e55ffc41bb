//! Replica-set commands (`replSetInitiate`, `replSetReconfig`, `replSetGetStatus`,
//! `replSetGetConfig`), the member's start-up, hello's replica-set fields and the refusals of a
//! member not yet initiated. The state is `crate::repl::ReplState`.

use crate::commands::{Reply, Request};
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc, oid::ObjectId};
use storage::{Direction, WriteOp};

pub const LOCAL_DB: &str = "local";
pub const REPLSET_COLLECTION: &str = "system.replset";

/// The address this node is known by: the configured member's host when it names the port we
/// listen on (e.g. a container's host name), else the first bound address (or the host name
/// when listening on every address).
fn default_host(state: &ServerState, port: u16) -> String {
    let c = &state.config;
    match c.bind_ip.first() {
        Some(ip) if !c.bind_ip_all && !ip.is_unspecified() => match ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
            std::net::IpAddr::V4(v4) => format!("{v4}:{port}"),
        },
        _ => format!("{}:{port}", crate::sysinfo::hostname()),
    }
}

fn member_host(cfg: &Document) -> Option<String> {
    cfg.get_array("members")
        .ok()?
        .first()?
        .as_document()?
        .get_str("host")
        .ok()
        .map(str::to_string)
}

fn host_port(host: &str) -> Option<u16> {
    host.rsplit_once(':')?.1.parse().ok()
}

/// Start-up (after the listener is bound): load the stored configuration, take the next term,
/// store it, and become primary.
pub fn start(state: &ServerState, port: u16) -> CommandResult<()> {
    let Some(repl) = &state.repl else {
        return Ok(());
    };
    let stored = load(state)?;
    let me = match stored.as_ref().and_then(member_host) {
        Some(h) if host_port(&h) == Some(port) => h,
        _ => default_host(state, port),
    };
    let _ = repl.me.set(me);
    restore_sessions(state);
    if let Some(mut cfg) = stored {
        let term = cfg.get_i64("term").unwrap_or(0) + 1;
        cfg.insert("term", term);
        save(state, &cfg)?;
        repl.set_config(cfg);
        become_primary(state);
        tracing::info!(set = %repl.set_name, term, "replica set member is PRIMARY");
    } else {
        tracing::info!(set = %repl.set_name, "replica set not initiated; run replSetInitiate");
    }
    Ok(())
}

/// The retryable writes' records kept over the restart (`crate::retry_record`).
fn restore_sessions(state: &ServerState) {
    match crate::retry_record::load(state.catalog.engine()) {
        Ok(records) => {
            let n = records.len();
            for (key, txn_number, reply, committed) in records {
                state.sessions.restore(&key, txn_number, reply, committed);
            }
            if n > 0 {
                tracing::info!(sessions = n as u64, "retryable-write records restored");
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not read config.transactions"),
    }
}

fn become_primary(state: &ServerState) {
    if let Some(repl) = &state.repl {
        *repl.elected.write().unwrap_or_else(|p| p.into_inner()) =
            Some(crate::clock::last_committed(state));
    }
}

fn load(state: &ServerState) -> CommandResult<Option<Document>> {
    let Some(c) = state.catalog.collection(LOCAL_DB, REPLSET_COLLECTION) else {
        return Ok(None);
    };
    let rows = c
        .scan(Direction::Forward, None, 1)
        .map_err(|e| storage_error(e, LOCAL_DB, REPLSET_COLLECTION))?;
    match rows.into_iter().next() {
        Some((_, raw)) => Document::try_from(raw.as_ref())
            .map(Some)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string())),
        None => Ok(None),
    }
}

/// Replace the one configuration document, durably.
fn save(state: &ServerState, cfg: &Document) -> CommandResult<()> {
    let engine = state.catalog.engine();
    if engine.collection(LOCAL_DB, REPLSET_COLLECTION).is_none() {
        match engine.create_collection(LOCAL_DB, REPLSET_COLLECTION, Document::new()) {
            Ok(_) | Err(storage::StorageError::NamespaceExists(_)) => {}
            Err(e) => return Err(storage_error(e, LOCAL_DB, REPLSET_COLLECTION)),
        }
    }
    let c = state
        .catalog
        .collection(LOCAL_DB, REPLSET_COLLECTION)
        .ok_or_else(|| err(ErrorCode::InternalError, "local.system.replset vanished"))?;
    let raw =
        RawDocumentBuf::try_from(cfg).map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
    let existing = c
        .scan(Direction::Forward, None, 1)
        .map_err(|e| storage_error(e, LOCAL_DB, REPLSET_COLLECTION))?;
    let op = match existing.first() {
        Some((rid, _)) => WriteOp::Replace(*rid, raw),
        None => WriteOp::Insert(raw.into()),
    };
    let ticket = c
        .write(vec![op])
        .map_err(|e| storage_error(e, LOCAL_DB, REPLSET_COLLECTION))?;
    ticket
        .wait_durable_blocking()
        .map_err(|e| storage_error(e, LOCAL_DB, REPLSET_COLLECTION))
}

fn not_enabled() -> crate::error::CommandError {
    err(
        ErrorCode::NoReplicationEnabled,
        "This node was not started with replication enabled.",
    )
}

fn not_initiated() -> crate::error::CommandError {
    err(
        ErrorCode::NotYetInitialized,
        "no replset config has been received",
    )
}

/// Fill in mongod's defaults around a client's (or no) configuration and check it.
fn complete_config(
    state: &ServerState,
    given: Option<&Document>,
    version: i64,
    term: i64,
    replica_set_id: ObjectId,
) -> CommandResult<Document> {
    let Some(repl) = &state.repl else {
        return Err(not_enabled());
    };
    let given = given.cloned().unwrap_or_default();
    let id = match given.get("_id") {
        None => repl.set_name.clone(),
        Some(Bson::String(s)) => s.clone(),
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field '_id' is the wrong type, expected type 'string'",
            ));
        }
    };
    if id != repl.set_name {
        return Err(err(
            ErrorCode::InvalidReplicaSetConfig,
            format!(
                "Attempting to initiate a replica set with name {id}, but command line reports {}; rejecting",
                repl.set_name
            ),
        ));
    }
    let mut member = doc! { "_id": 0, "host": repl.me() };
    match given.get("members") {
        None => {}
        Some(Bson::Array(ms)) if ms.len() == 1 => {
            let Some(Bson::Document(m)) = ms.first() else {
                return Err(err(ErrorCode::TypeMismatch, "members must be documents"));
            };
            for (k, v) in m {
                member.insert(k.clone(), v.clone());
            }
        }
        Some(Bson::Array(ms)) => {
            return Err(err(
                ErrorCode::InvalidReplicaSetConfig,
                format!(
                    "cairn runs one-member replica sets; the configuration lists {} members",
                    ms.len()
                ),
            ));
        }
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'members' is the wrong type, expected type 'array'",
            ));
        }
    }
    for (k, v) in [
        ("arbiterOnly", Bson::Boolean(false)),
        ("buildIndexes", Bson::Boolean(true)),
        ("hidden", Bson::Boolean(false)),
        ("priority", Bson::Double(1.0)),
        ("tags", Bson::Document(Document::new())),
        ("secondaryDelaySecs", Bson::Int64(0)),
        ("votes", Bson::Int32(1)),
    ] {
        if !member.contains_key(k) {
            member.insert(k, v);
        }
    }
    let mut settings = doc! {
        "chainingAllowed": true,
        "heartbeatIntervalMillis": 2000,
        "heartbeatTimeoutSecs": 10,
        "electionTimeoutMillis": 10000,
        "catchUpTimeoutMillis": -1,
        "catchUpTakeoverDelayMillis": 30000,
        "getLastErrorModes": {},
        "getLastErrorDefaults": { "w": 1, "wtimeout": 0 },
    };
    if let Ok(s) = given.get_document("settings") {
        for (k, v) in s {
            settings.insert(k.clone(), v.clone());
        }
    }
    settings.insert("replicaSetId", replica_set_id);
    Ok(doc! {
        "_id": id,
        "version": version as i32,
        "term": term,
        "members": [member],
        "protocolVersion": 1_i64,
        "writeConcernMajorityJournalDefault": true,
        "settings": settings,
    })
}

/// `replSetInitiate` (with a configuration or without: mongod then makes one of this node).
pub fn initiate(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let Some(repl) = &state.repl else {
        return Err(not_enabled());
    };
    if repl.initiated() {
        return Err(err(ErrorCode::AlreadyInitialized, "already initialized"));
    }
    let given = match req.body.get("replSetInitiate") {
        Some(Bson::Document(d)) => Some(d),
        _ => None,
    };
    let version = given
        .and_then(|g| g.get("version"))
        .and_then(crate::query::types::as_i64)
        .unwrap_or(1);
    let cfg = complete_config(state, given, version, 1, ObjectId::new())?;
    save(state, &cfg)?;
    repl.set_config(cfg);
    become_primary(state);
    tracing::info!(set = %repl.set_name, "replica set initiated; this node is PRIMARY");
    Ok(Reply::Doc(doc! { "ok": 1.0 }))
}

/// `replSetReconfig`: a new configuration of the one member, with a higher version.
pub fn reconfig(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    let Some(repl) = &state.repl else {
        return Err(not_enabled());
    };
    let Some(current) = repl.config() else {
        return Err(not_initiated());
    };
    let Some(Bson::Document(given)) = req.body.get("replSetReconfig") else {
        return Err(err(
            ErrorCode::TypeMismatch,
            "BSON field 'replSetReconfig' is the wrong type, expected type 'object'",
        ));
    };
    let old_version = current.get_i32("version").unwrap_or(1) as i64;
    let force = req
        .body
        .get("force")
        .is_some_and(crate::query::types::truthy);
    let version = match given.get("version").and_then(crate::query::types::as_i64) {
        Some(v) => v,
        None if force => old_version + 1,
        None => {
            return Err(err(
                ErrorCode::NoSuchKey,
                "Missing expected field \"version\"",
            ));
        }
    };
    if version <= old_version && !force {
        return Err(err(
            ErrorCode::NewReplicaSetConfigurationIncompatible,
            format!(
                "New replica set configuration version must be greater than old, but {version} is not greater than {old_version} for replica set {}",
                repl.set_name
            ),
        ));
    }
    let rs_id = current
        .get_document("settings")
        .and_then(|s| s.get_object_id("replicaSetId"))
        .unwrap_or_else(|_| ObjectId::new());
    let cfg = complete_config(state, Some(given), version, repl.term(), rs_id)?;
    save(state, &cfg)?;
    repl.set_config(cfg);
    Ok(Reply::Doc(doc! { "ok": 1.0 }))
}

/// `replSetGetConfig`: the stored configuration (without our `term` bookkeeping, which mongod
/// reports as the config's `term` too).
pub fn get_config(state: &ServerState) -> CommandResult<Reply> {
    let Some(repl) = &state.repl else {
        return Err(not_enabled());
    };
    let Some(mut cfg) = repl.config() else {
        return Err(not_initiated());
    };
    set_member_host(&mut cfg, &repl.me());
    Ok(Reply::Doc(doc! { "config": cfg, "ok": 1.0 }))
}

fn set_member_host(cfg: &mut Document, me: &str) {
    if let Ok(ms) = cfg.get_array_mut("members")
        && let Some(Bson::Document(m)) = ms.first_mut()
    {
        m.insert("host", me);
    }
}

fn op_time(ts: bson::Timestamp, term: i64) -> Document {
    doc! { "ts": ts, "t": term }
}

fn wall_of(ts: bson::Timestamp) -> bson::DateTime {
    bson::DateTime::from_millis(i64::from(ts.time) * 1000)
}

/// `replSetGetStatus`: one healthy PRIMARY.
pub fn get_status(state: &ServerState) -> CommandResult<Reply> {
    let Some(repl) = &state.repl else {
        return Err(not_enabled());
    };
    let Some(cfg) = repl.config() else {
        return Err(not_initiated());
    };
    let ts = crate::clock::last_committed(state);
    let term = repl.term();
    let ot = op_time(ts, term);
    let wall = wall_of(ts);
    let elected = repl
        .elected
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or(ts);
    let member = doc! {
        "_id": 0,
        "name": repl.me(),
        "health": 1.0,
        "state": 1,
        "stateStr": "PRIMARY",
        "uptime": repl.started.elapsed().as_secs() as i64,
        "optime": ot.clone(),
        "optimeDate": wall,
        "lastAppliedWallTime": wall,
        "lastDurableWallTime": wall,
        "syncSourceHost": "",
        "syncSourceId": -1,
        "infoMessage": "",
        "electionTime": elected,
        "electionDate": wall_of(elected),
        "configVersion": cfg.get_i32("version").unwrap_or(1),
        "configTerm": term,
        "self": true,
        "lastHeartbeatMessage": "",
    };
    Ok(Reply::Doc(doc! {
        "set": &repl.set_name,
        "date": bson::DateTime::now(),
        "myState": 1,
        "term": term,
        "syncSourceHost": "",
        "syncSourceId": -1,
        "heartbeatIntervalMillis": 2000_i64,
        "majorityVoteCount": 1,
        "writeMajorityCount": 1,
        "votingMembersCount": 1,
        "writableVotingMembersCount": 1,
        "optimes": {
            "lastCommittedOpTime": ot.clone(),
            "lastCommittedWallTime": wall,
            "readConcernMajorityOpTime": ot.clone(),
            "appliedOpTime": ot.clone(),
            "durableOpTime": ot,
            "lastAppliedWallTime": wall,
            "lastDurableWallTime": wall,
        },
        "members": [member],
        "ok": 1.0,
    }))
}

/// The replica-set part of `hello` (kept here so the handshake file stays small).
pub fn hello_fields(state: &ServerState, reply: &mut Document, writable_key: &str) {
    let Some(repl) = &state.repl else {
        return;
    };
    let Some(cfg) = repl.config() else {
        reply.insert(writable_key, false);
        reply.insert("secondary", false);
        reply.insert("info", "Does not have a valid replica set config");
        reply.insert("isreplicaset", true);
        return;
    };
    let me = repl.me();
    let ts = crate::clock::last_committed(state);
    let wall = wall_of(ts);
    let ot = op_time(ts, repl.term());
    reply.insert(
        "topologyVersion",
        doc! { "processId": state.process_id, "counter": 0_i64 },
    );
    reply.insert("hosts", vec![Bson::String(me.clone())]);
    reply.insert("setName", &repl.set_name);
    reply.insert("setVersion", cfg.get_i32("version").unwrap_or(1));
    reply.insert(writable_key, true);
    reply.insert("secondary", false);
    reply.insert("primary", me.clone());
    reply.insert("me", me);
    reply.insert("electionId", repl.election_id());
    reply.insert(
        "lastWrite",
        doc! {
            "opTime": ot.clone(),
            "lastWriteDate": wall,
            "majorityOpTime": ot,
            "majorityWriteDate": wall,
        },
    );
}

/// Commands a node that is not primary (not yet initiated) refuses, and how.
pub fn check_primary(state: &ServerState, req: &Request) -> CommandResult<()> {
    let Some(repl) = &state.repl else {
        return Ok(());
    };
    if repl.initiated() {
        return Ok(());
    }
    const WRITES: &[&str] = &[
        "insert",
        "update",
        "delete",
        "findAndModify",
        "create",
        "drop",
        "dropDatabase",
        "createIndexes",
        "dropIndexes",
        "renameCollection",
        "convertToCapped",
        "cloneCollectionAsCapped",
        "collMod",
    ];
    const READS: &[&str] = &["find", "aggregate", "count", "distinct", "getMore"];
    if WRITES.contains(&req.command) {
        return Err(err(ErrorCode::NotWritablePrimary, "not primary"));
    }
    let secondary_ok = req
        .body
        .get_document("$readPreference")
        .ok()
        .and_then(|p| p.get_str("mode").ok())
        .is_some_and(|m| m != "primary");
    if READS.contains(&req.command) && !secondary_ok {
        return Err(err(
            ErrorCode::NotPrimaryNoSecondaryOk,
            "not primary and secondaryOk=false",
        ));
    }
    Ok(())
}
