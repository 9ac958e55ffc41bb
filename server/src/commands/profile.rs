//! The `profile` command and the profiler's entries. After a command ends,
//! `connection::run_command` calls [`record`]: when its database's level asks for it (2: every
//! operation; 1: slower than `slowms`, sampled by `sampleRate`, or selected by the filter) an
//! entry in mongod's shape (`op`, `ns`, `command`, `keysExamined`, `docsExamined`, `nreturned`,
//! `responseLength`, `millis`, `workingMillis`, `planSummary`, `ts`, `client`, `appName`, `user`, ...) is inserted
//! into `<db>.system.profile` before the reply goes out, so the client's next command sees it.
//! The first entry creates `system.profile` as mongod does, a capped collection of
//! `profiler::PROFILE_BYTES_MAX` (1 MB), which drops its oldest entries itself; one created by
//! the client without `capped` is trimmed here to the same bound. Secrets in the command
//! (`pwd`, SASL payloads) are shown as "xxx".

use super::{ConnectionInfo, Reply, Request};
use crate::error::{CommandError, CommandResult, ErrorCode, err, storage_error};
use crate::profiler::{PROFILE_BYTES_MAX, PROFILE_COLLECTION, Settings};
use crate::query::matcher::Filter;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use storage::{Direction, WriteOp};

/// Commands never profiled: the profiler's own switch and the connection handshake.
const NOT_PROFILED: &[&str] = &["profile", "hello", "isMaster", "ismaster"];
/// Command fields whose values are secrets.
const SECRET_FIELDS: &[&str] = &["pwd", "payload", "key", "nonce"];
/// Most bytes of a command's document sequences copied into its entry (a bigger one is
/// summarised, as mongod truncates big commands).
const SEQUENCE_BYTES_SHOWN_MAX: usize = 64 * 1024;
/// Oldest entries removed per trim step.
const TRIM_BATCH_COUNT: usize = 64;

/// `{profile: <level>, slowms?, sampleRate?, filter?}`: `was` is the level before; `-1` only
/// reads.
pub fn profile(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    super::argspec::check(&super::argspec::admin::PROFILE, &req.body)?;
    let level = match req.body.get("profile").and_then(super::as_i64) {
        Some(l @ -1..=2) => l as i32,
        _ => {
            return Err(err(
                ErrorCode::BadValue,
                "Invalid profiling level; must be one of -1, 0, 1, 2",
            ));
        }
    };
    let before = state.profiler.get(&req.db);
    let slowms_was = state.slowms.load(Relaxed);
    let rate_was = state.profiler.sample_rate();
    let mut next = before.clone();
    if let Some(v) = req.body.get("slowms") {
        let ms =
            super::as_i64(v).ok_or_else(|| err(ErrorCode::BadValue, "slowms must be a number"))?;
        state.slowms.store(ms, Relaxed);
    }
    if let Some(v) = req.body.get("sampleRate") {
        let rate = crate::query::types::as_f64(v)
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| {
                err(
                    ErrorCode::BadValue,
                    "'sampleRate' must be between 0.0 and 1.0 inclusive",
                )
            })?;
        state.profiler.set_sample_rate(rate);
    }
    match req.body.get("filter") {
        None => {}
        Some(Bson::String(s)) if s == "unset" => next.filter = None,
        Some(Bson::Document(f)) => {
            Filter::parse(f)?;
            next.filter = Some(f.clone());
        }
        Some(_) => {
            return Err(err(
                ErrorCode::BadValue,
                "Expected filter to be an object or the string 'unset'",
            ));
        }
    }
    if level >= 0 {
        next.level = level;
    }
    state.profiler.set(&req.db, next);
    let mut reply = doc! {
        "was": before.level,
        "slowms": slowms_was as i32,
        "sampleRate": rate_was,
    };
    if let Some(f) = before.filter {
        reply.insert("filter", f);
        reply.insert("note", "When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines.");
    }
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// Profile the command that just ended, if its database's settings ask for it.
pub async fn record(
    state: &Arc<ServerState>,
    info: &ConnectionInfo,
    req: &Arc<Request>,
    result: &Result<Reply, CommandError>,
    millis: i64,
) {
    if state.profiler.level(&req.db) == 0 || NOT_PROFILED.contains(&req.name.as_str()) {
        return;
    }
    let settings = state.profiler.get(&req.db);
    let entry = entry(info, req, result, millis);
    if !wanted(state, &settings, &entry, millis) {
        return;
    }
    let db = req.db.clone();
    // Failures to profile never fail the command; they are logged.
    let written =
        crate::offload::run(state, "profile", None, move |s| write_entry(s, &db, entry)).await;
    if let Err(e) = written {
        tracing::warn!(db = %req.db, error = %e.message, "could not write a profile entry");
    }
}

fn wanted(state: &ServerState, settings: &Settings, entry: &Document, millis: i64) -> bool {
    if let Some(f) = &settings.filter {
        let raw = RawDocumentBuf::try_from(entry);
        return Filter::parse(f)
            .ok()
            .zip(raw.ok())
            .is_some_and(|(f, raw)| f.matches(&raw));
    }
    match settings.level {
        2 => true,
        1 => {
            millis >= state.slowms.load(Relaxed)
                && rand::random::<f64>() < state.profiler.sample_rate()
        }
        _ => false,
    }
}

/// mongod's `op` for a command.
fn op_name(command: &str) -> &'static str {
    match command {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        _ => "command",
    }
}

fn redacted(body: &Document) -> Document {
    body.iter()
        .map(|(k, v)| {
            let v = if SECRET_FIELDS.contains(&k.as_str()) {
                Bson::String("xxx".into())
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// The command as the entry shows it: the body with its document sequences (an insert's
/// `documents`, ...) put back in, secrets redacted.
fn shown_command(req: &Request) -> Document {
    let mut body = redacted(&req.body);
    for seq in &req.sequences {
        let bytes: usize = seq.documents.iter().map(|d| d.as_bytes().len()).sum();
        if bytes > SEQUENCE_BYTES_SHOWN_MAX {
            body.insert(
                seq.identifier.clone(),
                doc! { "$truncated": format!("{} documents, {bytes} bytes", seq.documents.len()) },
            );
            continue;
        }
        let docs: Vec<Bson> = seq
            .documents
            .iter()
            .filter_map(|d| Document::try_from(d.as_ref()).ok())
            .map(Bson::Document)
            .collect();
        body.insert(seq.identifier.clone(), docs);
    }
    body
}

fn entry(
    info: &ConnectionInfo,
    req: &Request,
    result: &Result<Reply, CommandError>,
    millis: i64,
) -> Document {
    let coll = match (req.command, req.body.get(&req.name)) {
        ("getMore", _) => req.body.get_str("collection").ok().map(str::to_string),
        (_, Some(Bson::String(c))) => Some(c.clone()),
        _ => None,
    };
    let ns = format!("{}.{}", req.db, coll.as_deref().unwrap_or("$cmd"));
    let (keys, docs) = req.op.examined();
    let mut e = doc! {
        "op": op_name(req.command),
        "ns": ns,
        "command": shown_command(req),
        "keysExamined": keys as i64,
        "docsExamined": docs as i64,
    };
    let reply = reply_document(result);
    let mut response_length = 0i64;
    if let Some(r) = &reply {
        response_length = RawDocumentBuf::try_from(r).map_or(0, |v| v.as_bytes().len() as i64);
        reply_counts(req.command, r, &mut e);
    }
    if let Err(error) = result {
        response_length =
            RawDocumentBuf::try_from(&error.to_reply()).map_or(0, |v| v.as_bytes().len() as i64);
        e.insert("ok", 0.0);
        e.insert("errMsg", error.message.clone());
        e.insert("errName", error.code.name());
        e.insert("errCode", error.code.code());
    }
    e.insert("numYield", 0);
    // mongod's lock statistics; cairn's locks are per namespace and not counted per operation.
    e.insert("locks", Document::new());
    e.insert("responseLength", response_length);
    e.insert("protocol", "op_msg");
    e.insert("millis", millis);
    // 8.0: the time the operation worked, queueing excluded; cairn does not queue operations.
    e.insert("workingMillis", millis);
    if let Some(plan) = req.op.plan_summary() {
        e.insert("planSummary", plan);
    }
    if let Some(hash) = query_shape_hash(req) {
        e.insert("queryShapeHash", hash);
    }
    e.insert("ts", bson::DateTime::now());
    e.insert("client", info.peer.ip().to_string());
    if let Some(app) = info
        .client_metadata
        .as_ref()
        .and_then(|m| m.get_document("application").ok())
        .and_then(|a| a.get_str("name").ok())
    {
        e.insert("appName", app);
    }
    let user = info.auth.user();
    let all_users: Vec<Bson> = user
        .iter()
        .map(|u| Bson::Document(u.user_document()))
        .collect();
    e.insert("allUsers", all_users);
    e.insert("user", user.map(|u| u.display()).unwrap_or_default());
    e
}

/// A successful reply as a document (decoded when it is raw bytes): only slow or profiled
/// operations pay for this.
pub(crate) fn reply_document(result: &CommandResult<Reply>) -> Option<Document> {
    match result {
        Ok(Reply::Doc(d)) => Some(d.clone()),
        Ok(Reply::Raw(r)) => Document::try_from(r.as_ref()).ok(),
        Ok(Reply::Cursor(c)) => Document::try_from(c.to_raw().as_ref()).ok(),
        _ => None,
    }
}

/// The counters mongod takes from the reply: `nreturned` and `cursorid` for reads, `ninserted`,
/// `nMatched`/`nModified`, `ndeleted` for writes.
pub(crate) fn reply_counts(command: &str, r: &Document, e: &mut Document) {
    let n = r.get("n").and_then(super::as_i64);
    match command {
        "insert" => {
            e.insert("ninserted", n.unwrap_or(0));
        }
        "update" => {
            e.insert("nMatched", n.unwrap_or(0));
            e.insert(
                "nModified",
                r.get("nModified").and_then(super::as_i64).unwrap_or(0),
            );
        }
        "delete" => {
            e.insert("ndeleted", n.unwrap_or(0));
        }
        _ => {}
    }
    if let Ok(c) = r.get_document("cursor") {
        let batch = c
            .get_array("firstBatch")
            .or_else(|_| c.get_array("nextBatch"))
            .map_or(0, |b| b.len());
        e.insert("nreturned", batch as i64);
        if let Ok(id) = c.get_i64("id")
            && id != 0
        {
            e.insert("cursorid", id);
        }
    } else if command == "count" {
        e.insert("nreturned", 1_i64);
    }
}

/// The options of a `system.profile` the profiler creates: capped at 1 MB, as mongod's.
fn profile_options() -> Document {
    doc! { "capped": true, "size": PROFILE_BYTES_MAX as i64 }
}

/// Insert one entry, creating `system.profile` first if needed; trim an uncapped one.
fn write_entry(state: &ServerState, db: &str, entry: Document) -> CommandResult<()> {
    let engine = state.catalog.engine();
    let coll = match engine.collection(db, PROFILE_COLLECTION) {
        Some(c) => c,
        None => match engine.create_collection(db, PROFILE_COLLECTION, profile_options()) {
            Ok(c) => c,
            Err(storage::StorageError::NamespaceExists(_)) => engine
                .collection(db, PROFILE_COLLECTION)
                .ok_or_else(|| err(ErrorCode::InternalError, "system.profile vanished"))?,
            Err(e) => return Err(storage_error(e, db, PROFILE_COLLECTION)),
        },
    };
    let mut entry = entry;
    if !entry.contains_key("_id") {
        // Entries carry no _id in mongod (a capped collection's); ours needs one to be stored.
        entry.insert("_id", bson::oid::ObjectId::new());
    }
    let raw = RawDocumentBuf::try_from(&entry)
        .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
    let serr = |e| storage_error(e, db, PROFILE_COLLECTION);
    coll.write(vec![WriteOp::Insert(raw.into())])
        .map_err(serr)?;
    if coll.capped_limits().is_some() {
        return Ok(());
    }
    while coll.data_size_bytes() > PROFILE_BYTES_MAX && coll.count() > 1 {
        let oldest = coll
            .scan(Direction::Forward, None, TRIM_BATCH_COUNT)
            .map_err(serr)?;
        if oldest.is_empty() {
            break;
        }
        let ops = oldest
            .into_iter()
            .map(|(rid, _)| WriteOp::Delete(rid))
            .collect();
        coll.write(ops).map_err(serr)?;
    }
    Ok(())
}

/// 8.0: the query shape's hash of a find (cairn's shape, as query settings and `$queryStats`
/// key it), for the profiler and the slow-operation log; None for other commands.
pub fn query_shape_hash(req: &Request) -> Option<String> {
    let coll = req
        .body
        .get_str("find")
        .ok()
        .filter(|_| req.command == "find")?;
    Some(crate::query_shape::Shape::find(&req.db, coll, &req.body).hash_hex())
}
