//! The oplog (`local.oplog.rs`, read by `find`, tailable too) and change streams (`$changeStream`
//! as the first stage of `aggregate`), both derived from the write history the storage engine
//! keeps in its own log under `--replSet` (`storage::history`; the mapping is in
//! docs/FORMAT.md, "The oplog"). Their cursors live in `crate::streams`; a `getMore` on them
//! with `awaitData` waits on the engine's durable watch, so it is woken by the commit that makes
//! a write durable, never by polling.
//!
//! Resume tokens (`_id._data`) are hex: the op's timestamp, then the log position of its batch
//! and how many of the batch's ops precede the resume point. The timestamp leads so tokens sort
//! in commit order; the position lets a resume seek straight to its batch, after a restart too.

use super::change_ddl::Ddl;
use super::change_stages::Select;
use super::{Reply, Request};
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::limits::{CHANGE_AWAIT_MS_MAX, CHANGE_BATCH_COUNT_MAX};
use crate::query::matcher::Filter;
use crate::state::ServerState;
use crate::streams::{FullDocument, Image, Kind, Position, Scope, StreamCursor};
use bson::{Bson, Document, RawDocumentBuf, cstr, doc};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::{HistoryBatch, HistoryOp, HistoryPos, record};

/// The stage `aggregate` hands to this module (with `--replSet`).
pub const STAGE: &str = "$changeStream";
pub const OPLOG_DB: &str = "local";
pub const OPLOG_COLLECTION: &str = "oplog.rs";
/// History batches one fill reads at most before answering.
const FILL_BATCHES_MAX: usize = 1000;
/// Bytes of documents one fill reads at most (a reply stays under 16 MB).
const FILL_BYTES_MAX: usize = 8 << 20;
/// History batches one fill looks at most (then it answers with what it found).
const FILL_SCAN_BATCHES_MAX: usize = 100_000;
/// `maxAwaitTimeMS` of an awaitData getMore that gives none (mongod's 1 s).
const AWAIT_MS_DEFAULT: u64 = 1000;

pub(super) fn ts_of(t: u64) -> bson::Timestamp {
    crate::clock::unpack(t)
}

/// `_id` of an event, and `postBatchResumeToken`.
pub fn token(ts: u64, next: HistoryPos, skip: u32) -> Document {
    doc! { "_data": format!("82{ts:016X}{:016X}{:016X}{skip:08X}", next.segment, next.offset) }
}

/// The token of an invalidate event: its position, flagged (`startAfter` accepts it,
/// `resumeAfter` does not).
pub(super) fn invalidate_token(ts: u64, next: HistoryPos, skip: u32) -> Document {
    let mut t = token(ts, next, skip);
    if let Some(Bson::String(s)) = t.get_mut("_data") {
        s.push_str("01");
    }
    t
}

/// Whether a token is an invalidate event's.
fn is_invalidate_token(v: &Bson) -> bool {
    matches!(v, Bson::Document(d) if d.get_str("_data").is_ok_and(|s| s.len() == 60))
}

fn bad_token() -> crate::error::CommandError {
    err(ErrorCode::BadValue, "invalid resume token")
}

/// (timestamp, position, skip) of a token.
pub fn parse_token(v: &Bson) -> CommandResult<(u64, HistoryPos, u32)> {
    let Bson::Document(d) = v else {
        return Err(bad_token());
    };
    let data = d.get_str("_data").map_err(|_| bad_token())?;
    let hex = data.strip_prefix("82").ok_or_else(bad_token)?;
    let hex = match hex.len() {
        56 => hex,
        58 if hex.ends_with("01") => &hex[..56],
        _ => return Err(bad_token()),
    };
    let n = |a: usize, b: usize| u64::from_str_radix(&hex[a..b], 16).map_err(|_| bad_token());
    Ok((
        n(0, 16)?,
        HistoryPos {
            segment: n(16, 32)?,
            offset: n(32, 48)?,
        },
        n(48, 56)? as u32,
    ))
}

fn history_lost() -> crate::error::CommandError {
    err(
        ErrorCode::ChangeStreamHistoryLost,
        "Resume of change stream was not possible, as the resume point may no longer be in the oplog.",
    )
}

fn needs_repl(state: &ServerState) -> CommandResult<()> {
    match &state.repl {
        Some(r) if r.initiated() => Ok(()),
        Some(_) => Err(err(
            ErrorCode::NotYetInitialized,
            "no replset config has been received",
        )),
        None => Err(err(
            ErrorCode::Location40573,
            "The $changeStream stage is only supported on replica sets",
        )),
    }
}

/// The namespace and UUID of a collection id, remembered per cursor.
fn name_of(
    state: &ServerState,
    c: &mut StreamCursor,
    id: u64,
) -> Option<(String, String, bson::Uuid)> {
    c.names
        .entry(id)
        .or_insert_with(|| {
            let coll = state.catalog.engine().collection_by_id(id)?;
            let (db, name) = coll.namespace();
            Some((db, name, coll.uuid()))
        })
        .clone()
}

fn document_id(op: &HistoryOp) -> Bson {
    if let Some(d) = &op.document
        && let Ok(Some(id)) = d.get("_id")
    {
        return crate::query::types::to_owned(id);
    }
    op.details
        .as_ref()
        .and_then(|d| d.get("_id").cloned())
        .unwrap_or(Bson::Null)
}

fn owned(d: &RawDocumentBuf) -> Document {
    Document::try_from(d.as_ref()).unwrap_or_default()
}

/// An oplog entry in mongod 7's shape.
fn oplog_entry(
    ns: &str,
    uuid: bson::Uuid,
    op: &HistoryOp,
    ts: u64,
    wall_ms: i64,
    term: i64,
) -> Document {
    let id = document_id(op);
    let (code, o, o2) = match op.code {
        record::OP_INSERT => (
            "i",
            op.document.as_ref().map(owned),
            Some(doc! { "_id": id }),
        ),
        record::OP_UPDATE => (
            "u",
            Some(doc! { "$v": 2, "diff": op.details.clone().unwrap_or_default() }),
            Some(doc! { "_id": id }),
        ),
        record::OP_DELETE => ("d", Some(doc! { "_id": id }), None),
        _ => (
            "u",
            op.document.as_ref().map(owned),
            Some(doc! { "_id": id }),
        ),
    };
    let mut e = doc! { "op": code, "ns": ns, "ui": uuid, "o": o.unwrap_or_default() };
    if let Some(o2) = o2 {
        e.insert("o2", o2);
    }
    e.insert("ts", ts_of(ts));
    e.insert("t", term);
    e.insert("v", 2_i64);
    e.insert("wall", bson::DateTime::from_millis(wall_ms));
    e
}

/// The session of a retryable write's batch: the batch also writes the session's
/// `config.transactions` record (`{_id: {id}, txnNum}`), and mongod's entries of such a write
/// carry `lsid` and `txnNumber` instead of a record entry of their own.
fn retryable_session(
    state: &ServerState,
    c: &mut StreamCursor,
    b: &HistoryBatch,
) -> Option<Document> {
    if b.note.is_some() {
        return None;
    }
    for op in &b.ops {
        let Some(doc) = &op.document else { continue };
        let Some((db, coll, _)) = name_of(state, c, op.collection_id) else {
            continue;
        };
        if !(db == "config" && coll == crate::retry_record::TRANSACTIONS_COLLECTION) {
            continue;
        }
        let (Ok(id), Ok(n)) = (doc.get_document("_id"), doc.get_i64("txnNum")) else {
            continue;
        };
        let lsid = Document::try_from(id).ok()?;
        return Some(doc! { "lsid": lsid, "txnNumber": n });
    }
    None
}

/// An entry of a retryable write: its session, number and statement (the op's place in the
/// batch), as mongod writes them.
fn with_session(session: &Document, stmt: usize, entry: Document) -> Document {
    let mut e = session.clone();
    e.extend(entry);
    e.insert("stmtId", stmt as i32);
    e
}

/// A transaction's batch as mongod 7 logs it: one `applyOps` command entry holding every op,
/// with the transaction's `lsid` and `txnNumber`, at the batch's last timestamp.
fn applied_entry(
    state: &ServerState,
    c: &mut StreamCursor,
    b: &HistoryBatch,
    note: &Document,
    term: i64,
) -> (Document, u64) {
    let mut ops = Vec::with_capacity(b.ops.len());
    for (i, op) in b.ops.iter().enumerate() {
        let Some((db, coll, uuid)) = name_of(state, c, op.collection_id) else {
            continue;
        };
        if unlogged(&db, &coll) {
            continue;
        }
        let ts = b.timestamp + i as u64;
        let mut e = oplog_entry(&format!("{db}.{coll}"), uuid, op, ts, b.wall_ms, term);
        for k in ["ts", "t", "v", "wall"] {
            e.remove(k);
        }
        ops.push(e);
    }
    let last = b.timestamp + b.ops.len().saturating_sub(1) as u64;
    let mut e = note.clone();
    e.insert("op", "c");
    e.insert("ns", "admin.$cmd");
    e.insert("o", doc! { "applyOps": ops });
    e.insert("ts", ts_of(last));
    e.insert("t", term);
    e.insert("v", 2_i64);
    e.insert("wall", bson::DateTime::from_millis(b.wall_ms));
    e.insert(
        "prevOpTime",
        doc! { "ts": bson::Timestamp { time: 0, increment: 0 }, "t": -1_i64 },
    );
    (e, last)
}

/// `updateDescription` from a `$v: 2` diff.
fn update_description(diff: &Document, expanded: bool) -> Document {
    let mut updated = Document::new();
    let mut removed = Vec::new();
    let mut ambiguous = Document::new();
    flatten_diff(diff, &[], &mut updated, &mut removed, &mut ambiguous);
    let mut d = doc! { "updatedFields": updated, "removedFields": removed, "truncatedArrays": [] };
    if expanded {
        d.insert("disambiguatedPaths", ambiguous);
    }
    d
}

/// A dotted path names its field unambiguously unless a part has a dot of its own or looks
/// like an array index (cairn's diffs update arrays whole, so every part is a field name).
fn note_path(parts: &[&str], ambiguous: &mut Document) -> String {
    let path = parts.join(".");
    let unclear =
        |p: &&str| p.contains('.') || (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if parts.iter().any(unclear) {
        let list: Vec<Bson> = parts.iter().map(|p| Bson::String(p.to_string())).collect();
        ambiguous.insert(path.clone(), list);
    }
    path
}

fn flatten_diff(
    diff: &Document,
    prefix: &[&str],
    updated: &mut Document,
    removed: &mut Vec<Bson>,
    ambiguous: &mut Document,
) {
    for (k, v) in diff {
        match (k.as_str(), v) {
            ("u" | "i", Bson::Document(fields)) => {
                for (f, fv) in fields {
                    let path = note_path(&[prefix, &[f.as_str()]].concat(), ambiguous);
                    updated.insert(path, fv.clone());
                }
            }
            ("d", Bson::Document(fields)) => {
                for f in fields.keys() {
                    let path = note_path(&[prefix, &[f.as_str()]].concat(), ambiguous);
                    removed.push(Bson::String(path));
                }
            }
            (s, Bson::Document(sub)) if s.starts_with('s') && s.len() > 1 => {
                flatten_diff(
                    sub,
                    &[prefix, &[&s[1..]]].concat(),
                    updated,
                    removed,
                    ambiguous,
                );
            }
            _ => {}
        }
    }
}

/// Writes the oplog does not show: its own database's, and the session records of retryable
/// writes and transactions (`config.transactions`), which mongod keeps without oplog entries of
/// their own (the write's entry carries the session instead).
fn unlogged(db: &str, coll: &str) -> bool {
    db == OPLOG_DB || (db == "config" && coll == crate::retry_record::TRANSACTIONS_COLLECTION)
}

pub(super) fn in_scope(scope: &Scope, db: &str, coll: &str) -> bool {
    match scope {
        Scope::Collection { db: d, coll: c } => d == db && c == coll,
        Scope::Database { db: d } => d == db && !coll.starts_with("system."),
        Scope::Cluster => {
            !matches!(db, "admin" | "config" | "local") && !coll.starts_with("system.")
        }
    }
}

/// A change event in mongod 7's shape; `expanded` is the collection's uuid when the stream
/// shows expanded events.
#[allow(clippy::too_many_arguments)]
fn change_event(
    state: &ServerState,
    full: FullDocument,
    before_change: Image,
    expanded: Option<bson::Uuid>,
    db: &str,
    coll: &str,
    op: &HistoryOp,
    ts: u64,
    wall_ms: i64,
    id: Document,
) -> CommandResult<Document> {
    let key = doc! { "_id": document_id(op) };
    let kind = match op.code {
        record::OP_INSERT => "insert",
        record::OP_UPDATE => "update",
        record::OP_DELETE => "delete",
        _ => "replace",
    };
    let mut e = doc! {
        "_id": id,
        "operationType": kind,
        "clusterTime": ts_of(ts),
        "wallTime": bson::DateTime::from_millis(wall_ms),
    };
    if let Some(uuid) = expanded {
        e.insert("collectionUUID", uuid);
    }
    let post_image = |image: Image, e: &Document| -> CommandResult<Option<Document>> {
        match (&op.pre_image, image) {
            // The log's version after the op is the post-image; it counts as kept only when
            // the pre-image was (the collection's `changeStreamPreAndPostImages`).
            (Some(_), _) => Ok(op.document.as_ref().map(owned)),
            (None, Image::Required) => Err(image_not_found("post", e)),
            (None, _) => Ok(None),
        }
    };
    let full_doc = match (op.code, full) {
        (record::OP_INSERT, _) | (record::OP_REPLACE, _) => op.document.as_ref().map(owned),
        (record::OP_UPDATE, FullDocument::PostImage(image)) => post_image(image, &e)?,
        (record::OP_UPDATE, FullDocument::UpdateLookup) => {
            Some(lookup(state, db, coll, &key)?.unwrap_or_default()).filter(|d| !d.is_empty())
        }
        _ => None,
    };
    match (op.code, full_doc) {
        (_, Some(d)) => {
            e.insert("fullDocument", d);
        }
        (record::OP_UPDATE, None) if full != FullDocument::Default => {
            e.insert("fullDocument", Bson::Null);
        }
        _ => {}
    }
    e.insert("ns", doc! { "db": db, "coll": coll });
    e.insert("documentKey", key);
    if op.code == record::OP_UPDATE {
        e.insert(
            "updateDescription",
            update_description(
                op.details.as_ref().unwrap_or(&Document::new()),
                expanded.is_some(),
            ),
        );
    }
    if before_change != Image::Off && op.code != record::OP_INSERT {
        match &op.pre_image {
            Some(d) => {
                e.insert("fullDocumentBeforeChange", owned(d));
            }
            None if before_change == Image::Required => return Err(image_not_found("pre", &e)),
            None => {
                e.insert("fullDocumentBeforeChange", Bson::Null);
            }
        }
    }
    Ok(e)
}

/// A `required` image the write did not keep: mongod's error, naming the event.
fn image_not_found(which: &str, event: &Document) -> crate::error::CommandError {
    err(
        ErrorCode::NoMatchingDocument,
        format!(
            "Change stream was configured to require a {which}-image for all update, delete and replace events, but the {which}-image was not found for event: {event}"
        ),
    )
}

/// `fullDocument: updateLookup`: the document's current version.
fn lookup(
    state: &ServerState,
    db: &str,
    coll: &str,
    key: &Document,
) -> CommandResult<Option<Document>> {
    let Some(c) = state.catalog.collection(db, coll) else {
        return Ok(None);
    };
    let raw_key =
        RawDocumentBuf::try_from(key).map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
    let Some(Ok(Some(id))) = raw_key.iter().next().map(|r| r.map(|(_, v)| Some(v))) else {
        return Ok(None);
    };
    let rid = c.find_by_id(id).map_err(|e| storage_error(e, db, coll))?;
    let Some(rid) = rid else { return Ok(None) };
    Ok(c.get(rid)
        .map_err(|e| storage_error(e, db, coll))?
        .map(|d| owned(&d)))
}

/// Reads on from the cursor's position and returns up to `want` results (oplog entries or
/// events), moving the position past everything looked at, and whether it reached the end of
/// the durable history.
fn fill(
    state: &ServerState,
    c: &mut StreamCursor,
    want: usize,
) -> CommandResult<(Vec<RawDocumentBuf>, bool)> {
    let engine = state.catalog.engine();
    if !engine.history_holds(c.pos.next) {
        return Err(history_lost());
    }
    let term = state.repl.as_ref().map_or(0, |r| r.term());
    let select = match &c.kind {
        Kind::Oplog { filter, .. } => Select::Filters(vec![Filter::parse(filter)?]),
        Kind::Change { matches, .. } => {
            super::change_stages::compile(matches, c.ns.split('.').next().unwrap_or(""))?
        }
    };
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let mut scanned = 0usize;
    loop {
        let read = engine
            .history_read(c.pos.next, FILL_BATCHES_MAX, FILL_BYTES_MAX)
            .map_err(|e| storage_error(e, OPLOG_DB, OPLOG_COLLECTION))?;
        let at_end = read.batches.len() < FILL_BATCHES_MAX;
        scanned += read.batches.len();
        super::change_ddl::seed_names(c, &read.batches);
        let mut batches = read.batches.into_iter().peekable();
        while let Some(b) = batches.next() {
            let after = batches.peek().map_or(read.next, |n| n.pos);
            let skip = if b.pos == c.pos.next { c.pos.skip } else { 0 };
            if let Some(stopped) = fill_batch(
                state, c, &b, skip, term, &select, want, &mut out, &mut bytes,
            )? {
                c.pos.next = b.pos;
                c.pos.skip = stopped;
                return Ok((out, false));
            }
            c.pos.next = after;
            c.pos.skip = 0;
        }
        c.pos.next = read.next;
        if at_end {
            return Ok((out, true));
        }
        // A selective filter over a long history: answer now and then (the position moved on).
        if out.len() >= want || bytes >= FILL_BYTES_MAX || scanned >= FILL_SCAN_BATCHES_MAX {
            return Ok((out, false));
        }
    }
}

/// The ops of one batch from `skip` on; `Some(i)` when the reply filled up before op `i`.
#[allow(clippy::too_many_arguments)]
fn fill_batch(
    state: &ServerState,
    c: &mut StreamCursor,
    b: &HistoryBatch,
    skip: u32,
    term: i64,
    select: &Select,
    want: usize,
    out: &mut Vec<RawDocumentBuf>,
    bytes: &mut usize,
) -> CommandResult<Option<u32>> {
    if let (Some(note), Kind::Oplog { .. }) = (&b.note, &c.kind) {
        // The whole batch is one entry: it is returned whole or not yet.
        if skip > 0 {
            return Ok(None);
        }
        if out.len() >= want || *bytes >= FILL_BYTES_MAX {
            return Ok(Some(0));
        }
        let (doc, last) = applied_entry(state, c, b, note, term);
        c.pos.last_ts = last;
        if last >= c.pos.min_ts
            && let Some(raw) = select.apply(doc)?
        {
            *bytes += raw.as_bytes().len();
            out.push(raw);
        }
        return Ok(None);
    }
    let session = match c.kind {
        Kind::Oplog { .. } => retryable_session(state, c, b),
        Kind::Change { .. } => None,
    };
    for (i, op) in b.ops.iter().enumerate().skip(skip as usize) {
        if out.len() >= want || *bytes >= FILL_BYTES_MAX {
            return Ok(Some(i as u32));
        }
        let ts = b.timestamp + i as u64;
        c.pos.last_ts = ts;
        if op.code == record::OP_COMMAND {
            let at = Ddl { b, i, ts, term };
            let docs = super::change_ddl::entries(c, &at, op);
            let docs = if ts < c.pos.min_ts { Vec::new() } else { docs };
            for (doc, filtered) in docs {
                let raw = match filtered {
                    true => select.apply(doc)?,
                    false => Some(
                        RawDocumentBuf::try_from(&doc)
                            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?,
                    ),
                };
                if let Some(raw) = raw {
                    *bytes += raw.as_bytes().len();
                    out.push(raw);
                }
            }
            if c.invalidated {
                return Ok(Some(i as u32 + 1));
            }
            continue;
        }
        if ts < c.pos.min_ts {
            continue;
        }
        let Some((db, coll, uuid)) = name_of(state, c, op.collection_id) else {
            continue;
        };
        if unlogged(&db, &coll) {
            continue;
        }
        let doc = match &c.kind {
            Kind::Oplog { .. } => {
                let e = oplog_entry(&format!("{db}.{coll}"), uuid, op, ts, b.wall_ms, term);
                match &session {
                    Some(sess) => with_session(sess, i, e),
                    None => e,
                }
            }
            Kind::Change {
                scope,
                full_document,
                before_change,
                expanded,
                ..
            } => {
                if !in_scope(scope, &db, &coll) {
                    continue;
                }
                let id = token(ts, b.pos, i as u32 + 1);
                let mut e = change_event(
                    state,
                    *full_document,
                    *before_change,
                    expanded.then_some(uuid),
                    &db,
                    &coll,
                    op,
                    ts,
                    b.wall_ms,
                    id,
                )?;
                // A transaction's events carry its session and number, as mongod's do.
                if let Some(note) = &b.note {
                    e.extend(note.clone());
                }
                e
            }
        };
        if let Some(raw) = select.apply(doc)? {
            *bytes += raw.as_bytes().len();
            out.push(raw);
        }
    }
    Ok(None)
}

fn new_cursor_id(state: &ServerState) -> i64 {
    loop {
        let id: i64 = rand::random::<i64>() & i64::MAX;
        if id != 0 && !state.cursors.contains(id) && !state.streams.contains(id) {
            return id;
        }
    }
}

fn reply(
    id: i64,
    ns: &str,
    first: bool,
    docs: Vec<RawDocumentBuf>,
    pbrt: Option<Document>,
) -> CommandResult<Reply> {
    let mut batch = bson::RawArrayBuf::new();
    for d in docs {
        batch.push(d);
    }
    let mut cursor = RawDocumentBuf::new();
    cursor.append(
        if first {
            cstr!("firstBatch")
        } else {
            cstr!("nextBatch")
        },
        batch,
    );
    if let Some(t) = pbrt {
        let t = RawDocumentBuf::try_from(&t)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        cursor.append(cstr!("postBatchResumeToken"), t);
    }
    cursor.append(cstr!("id"), id);
    cursor.append(cstr!("ns"), ns);
    let mut r = RawDocumentBuf::new();
    r.append(cstr!("cursor"), cursor);
    r.append(cstr!("ok"), 1.0);
    Ok(Reply::Raw(r))
}

fn pbrt_of(c: &StreamCursor) -> Option<Document> {
    matches!(c.kind, Kind::Change { .. }).then(|| token(c.pos.last_ts, c.pos.next, c.pos.skip))
}

fn batch_size(v: Option<&Bson>) -> usize {
    v.and_then(crate::query::types::as_i64)
        .filter(|n| *n > 0)
        .map_or(CHANGE_BATCH_COUNT_MAX, |n| {
            (n as usize).min(CHANGE_BATCH_COUNT_MAX)
        })
}

/// Whether a find is on the oplog.
pub fn is_oplog_find(req: &Request) -> bool {
    req.db == OPLOG_DB && req.body.get_str("find").ok() == Some(OPLOG_COLLECTION)
}

/// `find` on `local.oplog.rs`: `filter`, `limit`, `batchSize`, `sort: {$natural: ±1}`,
/// `tailable` and `awaitData`.
pub fn oplog_find(state: &ServerState, req: &Request) -> CommandResult<Reply> {
    needs_repl(state)?;
    let body = &req.body;
    let filter = body.get_document("filter").cloned().unwrap_or_default();
    let limit = body
        .get("limit")
        .and_then(crate::query::types::as_i64)
        .filter(|n| *n > 0);
    let tailable = body.get_bool("tailable").unwrap_or(false);
    let backward = body
        .get_document("sort")
        .ok()
        .and_then(|s| s.get("$natural"))
        .and_then(crate::query::types::as_i64)
        == Some(-1);
    let ns = format!("{OPLOG_DB}.{OPLOG_COLLECTION}");
    let engine = state.catalog.engine();
    let mut c = StreamCursor {
        kind: Kind::Oplog { filter, tailable },
        pos: Position {
            next: engine.history_start(),
            skip: 0,
            last_ts: 0,
            min_ts: 0,
        },
        ns: ns.clone(),
        last_used: Instant::now(),
        names: Default::default(),
        invalidated: false,
    };
    if backward {
        if tailable {
            return Err(err(
                ErrorCode::BadValue,
                "tailable cursor requested on a backward $natural sort",
            ));
        }
        // Newest first: keep the last `limit` (bounded) while reading forward.
        let keep = limit.map_or(CHANGE_BATCH_COUNT_MAX, |l| {
            (l as usize).min(CHANGE_BATCH_COUNT_MAX)
        });
        let mut last = std::collections::VecDeque::with_capacity(keep);
        loop {
            let (got, done) = fill(state, &mut c, CHANGE_BATCH_COUNT_MAX)?;
            for d in got {
                if last.len() == keep {
                    last.pop_front();
                }
                last.push_back(d);
            }
            if done {
                break;
            }
        }
        return reply(0, &ns, true, last.into_iter().rev().collect(), None);
    }
    let mut want = batch_size(body.get("batchSize"));
    if let Some(l) = limit {
        want = want.min(l as usize);
    }
    let (docs, at_end) = fill(state, &mut c, want)?;
    if (at_end && !tailable) || limit.is_some_and(|l| docs.len() as i64 >= l) {
        return reply(0, &ns, true, docs, None);
    }
    let id = new_cursor_id(state);
    if !state.streams.insert(id, c) {
        return Err(err(ErrorCode::ExceededMemoryLimit, "too many open cursors"));
    }
    reply(id, &ns, true, docs, None)
}

/// Whether an `aggregate`'s first stage is `$changeStream`.
pub fn is_change_stream(req: &Request) -> bool {
    matches!(req.body.get("pipeline"), Some(Bson::Array(s))
        if s.first().and_then(Bson::as_document).is_some_and(|d| d.contains_key(STAGE)))
}

/// `aggregate` whose first stage is `$changeStream` (None: not a change stream).
pub fn change_stream(state: &ServerState, req: &Request) -> Option<CommandResult<Reply>> {
    let Some(Bson::Array(stages)) = req.body.get("pipeline") else {
        return None;
    };
    let first = stages.first()?.as_document()?;
    let spec = first.get("$changeStream")?;
    Some(open_stream(state, req, spec, &stages[1..]))
}

/// The `$changeStream` stage's fields and their types, as mongod's IDL checks them: an
/// unknown field is 40415, a wrongly typed one 14.
fn check_spec(spec: &Document) -> CommandResult<()> {
    const BOOLS: [&str; 5] = [
        "allChangesForCluster",
        "showExpandedEvents",
        "showMigrationEvents",
        "showSystemEvents",
        "allowToRunOnConfigDB",
    ];
    const STRINGS: [&str; 2] = ["fullDocument", "fullDocumentBeforeChange"];
    const OTHERS: [&str; 4] = [
        "resumeAfter",
        "startAfter",
        "startAtOperationTime",
        "allowToRunOnSystemNS",
    ];
    for (k, v) in spec {
        let want = if BOOLS.contains(&k.as_str()) {
            Some(("bool", matches!(v, Bson::Boolean(_))))
        } else if STRINGS.contains(&k.as_str()) {
            Some(("string", matches!(v, Bson::String(_))))
        } else if OTHERS.contains(&k.as_str()) {
            None
        } else {
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field '$changeStream.{k}' is an unknown field."),
            ));
        };
        if let Some((expected, false)) = want {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '$changeStream.{k}' is the wrong type '{}', expected type '{expected}'",
                    crate::query::pipeline::values::type_name(v)
                ),
            ));
        }
    }
    Ok(())
}

fn open_stream(
    state: &ServerState,
    req: &Request,
    spec: &Bson,
    rest: &[Bson],
) -> CommandResult<Reply> {
    needs_repl(state)?;
    let Bson::Document(spec) = spec else {
        return Err(err(
            ErrorCode::TypeMismatch,
            "the $changeStream stage specification must be an object",
        ));
    };
    check_spec(spec)?;
    let all = spec.get_bool("allChangesForCluster").unwrap_or(false);
    let expanded = spec.get_bool("showExpandedEvents").unwrap_or(false);
    let scope = match req.body.get("aggregate") {
        Some(Bson::String(coll)) => Scope::Collection {
            db: req.db.clone(),
            coll: coll.clone(),
        },
        _ if all && req.db == "admin" => Scope::Cluster,
        _ if all => {
            return Err(err(
                ErrorCode::InvalidOptions,
                "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database",
            ));
        }
        _ if req.db == "admin" => {
            return Err(err(
                ErrorCode::InvalidNamespace,
                "$changeStream may not be opened on the internal admin database",
            ));
        }
        _ => Scope::Database { db: req.db.clone() },
    };
    let full_document = match spec.get_str("fullDocument").unwrap_or("default") {
        "default" => FullDocument::Default,
        "updateLookup" => FullDocument::UpdateLookup,
        "whenAvailable" => FullDocument::PostImage(Image::WhenAvailable),
        "required" => FullDocument::PostImage(Image::Required),
        other => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "Enumeration value '{other}' for field 'fullDocument' is not a valid value."
                ),
            ));
        }
    };
    let before_change = match spec.get_str("fullDocumentBeforeChange").unwrap_or("off") {
        "off" => Image::Off,
        "whenAvailable" => Image::WhenAvailable,
        "required" => Image::Required,
        other => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "Enumeration value '{other}' for field 'fullDocumentBeforeChange' is not a valid value."
                ),
            ));
        }
    };
    let mut matches = Vec::new();
    for s in rest {
        let Some(d) = s.as_document() else {
            return Err(err(
                ErrorCode::TypeMismatch,
                "Each element of the 'pipeline' array must be an object",
            ));
        };
        matches.push(d.clone());
    }
    super::change_stages::check(&matches, &req.db)?;
    let engine = state.catalog.engine();
    if spec.get("resumeAfter").is_some_and(is_invalidate_token) {
        return Err(err(
            ErrorCode::InvalidResumeToken,
            "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.",
        ));
    }
    let resume = spec.get("resumeAfter").or_else(|| spec.get("startAfter"));
    let pos = match (resume, spec.get("startAtOperationTime")) {
        (Some(_), Some(_)) => {
            return Err(err(
                ErrorCode::Location40674,
                "Only one type of resume option is allowed, but multiple were found.",
            ));
        }
        (Some(t), None) => {
            let (ts, next, skip) = parse_token(t)?;
            if !engine.history_holds(next) {
                return Err(history_lost());
            }
            Position {
                next,
                skip,
                last_ts: ts,
                min_ts: 0,
            }
        }
        (None, Some(Bson::Timestamp(t))) => Position {
            next: engine.history_start(),
            skip: 0,
            last_ts: crate::clock::pack(*t).saturating_sub(1),
            min_ts: crate::clock::pack(*t),
        },
        (None, Some(_)) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "startAtOperationTime must be a timestamp",
            ));
        }
        (None, None) => Position {
            next: engine.history_end().map_err(|e| storage_error(e, "", ""))?,
            skip: 0,
            last_ts: engine.last_timestamp(),
            min_ts: 0,
        },
    };
    let ns = match &scope {
        Scope::Collection { db, coll } => format!("{db}.{coll}"),
        Scope::Database { db } => format!("{db}.$cmd.aggregate"),
        Scope::Cluster => "admin.$cmd.aggregate".to_string(),
    };
    let mut c = StreamCursor {
        kind: Kind::Change {
            scope,
            full_document,
            matches,
            before_change,
            expanded,
        },
        pos,
        ns: ns.clone(),
        last_used: Instant::now(),
        names: Default::default(),
        invalidated: false,
    };
    let want = batch_size(
        req.body
            .get_document("cursor")
            .ok()
            .and_then(|c| c.get("batchSize")),
    );
    let docs = if want == 0 {
        Vec::new()
    } else {
        fill(state, &mut c, want)?.0
    };
    let pbrt = pbrt_of(&c);
    if c.invalidated {
        return reply(0, &ns, true, docs, pbrt);
    }
    let id = new_cursor_id(state);
    if !state.streams.insert(id, c) {
        return Err(err(ErrorCode::ExceededMemoryLimit, "too many open cursors"));
    }
    reply(id, &ns, true, docs, pbrt)
}

/// `getMore` on a change stream or oplog cursor (None: not one of ours). An awaiting cursor
/// that finds nothing waits for the next durable commit or `maxAwaitTimeMS`.
pub async fn get_more(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
) -> Option<CommandResult<Reply>> {
    let id = super::get_more_id(req)?;
    let c = state.streams.take(id)?;
    Some(get_more_on(state, req, id, c).await)
}

async fn get_more_on(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    id: i64,
    c: StreamCursor,
) -> CommandResult<Reply> {
    state
        .opcounters
        .getmore
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let coll = req.body.get_str("collection").unwrap_or("");
    if format!("{}.{coll}", req.db) != c.ns && !c.ns.ends_with(".$cmd.aggregate") {
        let owner = c.ns.clone();
        state.streams.put_back(id, c);
        return Err(err(
            ErrorCode::Unauthorized,
            format!(
                "Requested getMore on namespace '{}.{coll}', but cursor belongs to a different namespace {owner}",
                req.db
            ),
        ));
    }
    let awaits = match &c.kind {
        Kind::Change { .. } => true,
        Kind::Oplog { tailable, .. } => *tailable,
    };
    // Drivers send an awaitData cursor's `maxAwaitTimeMS` as the getMore's `maxTimeMS`: there
    // it bounds the wait for new events, not the work, so it is not the operation's deadline.
    let wait_ms = req
        .body
        .get("maxAwaitTimeMS")
        .and_then(crate::query::types::as_i64)
        .or(req.max_time_ms)
        .map_or(AWAIT_MS_DEFAULT, |ms| ms.max(0) as u64)
        .min(CHANGE_AWAIT_MS_MAX);
    req.op.set_deadline(None);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let want = batch_size(req.body.get("batchSize"));
    // Subscribed before the first read: a commit after it wakes the wait below.
    let mut durable = state.catalog.engine().durable_watch();
    let mut shutdown = state.shutdown_requested();
    let mut cursor = c;
    loop {
        let (back, got) = crate::offload::run(state, "getMore", Some(&req.op), move |st| {
            let mut cursor = cursor;
            let got = fill(st, &mut cursor, want);
            Ok((cursor, got))
        })
        .await?;
        cursor = back;
        let (docs, at_end) = got?;
        if !docs.is_empty() || !at_end || !awaits || tokio::time::Instant::now() >= deadline {
            let pbrt = pbrt_of(&cursor);
            let ns = cursor.ns.clone();
            let tailable_oplog_done = matches!(
                cursor.kind,
                Kind::Oplog {
                    tailable: false,
                    ..
                }
            ) && at_end;
            if tailable_oplog_done || cursor.invalidated {
                return reply(0, &ns, false, docs, pbrt);
            }
            state.streams.put_back(id, cursor);
            return reply(id, &ns, false, docs, pbrt);
        }
        tokio::select! {
            alive = durable.changed() => if !alive { return Err(err(ErrorCode::InterruptedAtShutdown, "interrupted at shutdown")) },
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => return Err(err(ErrorCode::InterruptedAtShutdown, "interrupted at shutdown")),
        }
    }
}
