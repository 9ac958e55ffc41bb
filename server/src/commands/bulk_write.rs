//! `bulkWrite` (mongod 8.0), run on `admin`: one list of insert, update and delete operations over
//! any number of namespaces (`nsInfo`, each op naming its namespace by index), answered with a
//! cursor of per-operation results and top-level counts. The command is parsed whole before
//! anything runs (a malformed op fails the command, as mongod's IDL parser does); each op then
//! runs through the same statement execution as `insert`/`update`/`delete` (`crud_write`), and
//! its failure becomes an `{ok: 0, idx, code, ...}` item, not a command error. Consecutive
//! inserts into one namespace are written as one storage batch. Every namespace an update or
//! delete touches is locked (in name order, so two bulk writes cannot deadlock) for the whole
//! command; the locks are released before the durability wait.

use super::args::{self, type_name};
use super::argspec::{self, bulk as specs};
use super::crud_write::{self, WriteOutcome};
use super::{Reply, Request};
use crate::catalog::WriteConcern;
use crate::error::{CommandError, CommandResult, ErrorCode, dup_key_text, err};
use crate::limits;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// The namespace mongod names the results cursor with, and its collection part (what a
/// `getMore` on `admin` names).
const CURSOR_NS: &str = "admin.$cmd.bulkWrite";
const CURSOR_COLL: &str = "$cmd.bulkWrite";

/// One namespace of `nsInfo`.
#[derive(Debug, Clone, PartialEq)]
struct Namespace {
    db: String,
    coll: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Insert,
    Update,
    Delete,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Insert => "insert",
            Kind::Update => "update",
            Kind::Delete => "delete",
        }
    }
}

/// One parsed op: its kind, the `nsInfo` index, and the op document as sent.
#[derive(Debug)]
struct Op {
    kind: Kind,
    ns: usize,
    body: Document,
}

/// The whole request, checked.
#[derive(Debug)]
struct BulkRequest {
    namespaces: Vec<Namespace>,
    ops: Vec<Op>,
    ordered: bool,
    /// `bypassDocumentValidation`.
    bypass_validation: bool,
    errors_only: bool,
    vars: Option<Document>,
    /// A retryable write (`txnNumber`): its `multi: true` ops fail, as in mongod.
    retryable: bool,
    /// `cursor.batchSize`: how many result items the first batch holds (all when absent); the
    /// rest wait in a cursor for `getMore`.
    batch_size: Option<usize>,
}

fn missing(field: &str) -> CommandError {
    err(
        ErrorCode::Location40414,
        format!("BSON field 'bulkWrite.{field}' is missing but a required field"),
    )
}

fn wrong_type(field: &str, v: &Bson, expected: &str) -> CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field 'bulkWrite.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

/// An array field of the body, from a kind-1 sequence and/or the body itself, as values (each
/// entry's type is checked by the caller, which names its index).
fn array_field(req: &Request, field: &str) -> CommandResult<Option<Vec<Bson>>> {
    let mut out: Option<Vec<Bson>> = None;
    for seq in req.sequences.iter().filter(|s| s.identifier == field) {
        let items = out.get_or_insert_with(Vec::new);
        for d in &seq.documents {
            let d = Document::try_from(d.as_ref())
                .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
            items.push(Bson::Document(d));
        }
    }
    match req.body.get(field) {
        None | Some(Bson::Null) => {}
        Some(Bson::Array(a)) => out.get_or_insert_with(Vec::new).extend(a.iter().cloned()),
        Some(v) => return Err(wrong_type(field, v, "array")),
    }
    Ok(out)
}

fn parse_namespaces(items: Vec<Bson>) -> CommandResult<Vec<Namespace>> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Bson::Document(d) = item else {
            return Err(wrong_type(&format!("nsInfo.{i}"), &item, "object"));
        };
        argspec::check_entry(&specs::NS_INFO, &d)?;
        let ns = d
            .get_str("ns")
            .map_err(|_| missing("nsInfo.ns"))?
            .to_string();
        let (db, coll) = ns.split_once('.').unwrap_or((&ns, ""));
        if db.is_empty() || coll.is_empty() {
            return Err(err(
                ErrorCode::InvalidNamespace,
                format!("Invalid namespace specified for bulkWrite: '{db}'"),
            ));
        }
        out.push(Namespace {
            db: db.to_string(),
            coll: coll.to_string(),
        });
    }
    Ok(out)
}

/// An op's namespace index: any number type holding a whole non-negative value.
fn ns_index(kind: Kind, v: &Bson) -> CommandResult<i64> {
    let n = match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(f) if f.is_finite() => f.trunc() as i64,
        Bson::Decimal128(d) => d
            .to_string()
            .parse::<f64>()
            .map_or(-1, |f| f.trunc() as i64),
        Bson::Double(_) => -1,
        other => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'bulkWrite.ops.{}' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                    kind.name(),
                    type_name(other)
                ),
            ));
        }
    };
    if n < 0 {
        return Err(err(
            ErrorCode::BadValue,
            format!(
                "BSON field '{}' value must be >= 0, actual value '{n}'",
                kind.name()
            ),
        ));
    }
    Ok(n)
}

fn parse_op(item: Bson, i: usize) -> CommandResult<(Op, i64)> {
    let Bson::Document(body) = item else {
        return Err(wrong_type(&format!("ops.{i}"), &item, "object"));
    };
    let first = body.iter().next().map(|(k, v)| (k.clone(), v.clone()));
    let (kind, spec, index) = match first {
        Some((k, v)) if k == "insert" => (Kind::Insert, &specs::INSERT_OP, v),
        Some((k, v)) if k == "update" => (Kind::Update, &specs::UPDATE_OP, v),
        Some((k, v)) if k == "delete" => (Kind::Delete, &specs::DELETE_OP, v),
        Some((k, _)) => {
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field 'bulkWrite.{k}' is an unknown field."),
            ));
        }
        None => {
            return Err(err(
                ErrorCode::FailedToParse,
                "BulkWrite CRUD op must contain exactly one of 'insert', 'update' or 'delete'",
            ));
        }
    };
    let n = ns_index(kind, &index)?;
    argspec::check_entry(spec, &body)?;
    if kind == Kind::Update {
        // An update document or a pipeline.
        match body.get("updateMods") {
            Some(Bson::Document(_) | Bson::Array(_)) | None => {}
            Some(v) => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field 'bulkWrite.ops.updateMods' is the wrong type '{}', expected types '[object, array]'",
                        type_name(v)
                    ),
                ));
            }
        }
        let raw = RawDocumentBuf::try_from(&body)
            .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
        crud_write::check_sort_single(&raw)?;
    }
    Ok((Op { kind, ns: 0, body }, n))
}

/// mongod prints an op in errors as the shell shows a document.
fn render_op(op: &Document) -> String {
    dup_key_text(op)
}

fn parse(req: &Request) -> CommandResult<BulkRequest> {
    argspec::check(&specs::BULK_WRITE, &req.body)?;
    let ns_items = array_field(req, "nsInfo")?.ok_or_else(|| missing("nsInfo"))?;
    let namespaces = parse_namespaces(ns_items)?;
    let op_items = array_field(req, "ops")?.ok_or_else(|| missing("ops"))?;
    let mut ops = Vec::with_capacity(op_items.len());
    let mut indexes = Vec::with_capacity(op_items.len());
    for (i, item) in op_items.into_iter().enumerate() {
        let (op, n) = parse_op(item, i)?;
        ops.push(op);
        indexes.push(n);
    }
    let ordered = args::opt_bool(&req.body, "bulkWrite", "ordered")?.unwrap_or(true);
    let errors_only = args::opt_bool(&req.body, "bulkWrite", "errorsOnly")?.unwrap_or(false);
    let bypass_validation =
        args::opt_bool(&req.body, "bulkWrite", "bypassDocumentValidation")?.unwrap_or(false);
    let mut batch_size = None;
    if let Some(c) = args::opt_doc(&req.body, "bulkWrite", "cursor")? {
        argspec::check_entry(&specs::CURSOR, c)?;
        batch_size = args::opt_non_negative(c, "bulkWrite.cursor", "batchSize")?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    }
    let vars = args::let_variables(&req.body, "bulkWrite")?;
    if ops.is_empty() || ops.len() > limits::WRITE_BATCH_COUNT_MAX {
        return Err(crud_write::batch_len_error(ops.len()));
    }
    for (op, n) in ops.iter_mut().zip(indexes) {
        if n as usize >= namespaces.len() {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "BulkWrite ops entry {} has an invalid nsInfo index.",
                    render_op(&op.body)
                ),
            ));
        }
        op.ns = n as usize;
    }
    // Only the namespaces an op writes to must be writable by users.
    let used: BTreeSet<usize> = ops.iter().map(|o| o.ns).collect();
    for i in used {
        let ns = &namespaces[i];
        crate::catalog::check_user_writable(&ns.db, &ns.coll)?;
    }
    Ok(BulkRequest {
        namespaces,
        ops,
        ordered,
        bypass_validation,
        errors_only,
        vars,
        retryable: req.body.contains_key("txnNumber"),
        batch_size,
    })
}

pub async fn bulk_write(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    let bulk = parse(req)?;
    // Lock every namespace an update or delete touches, in name order.
    let locked: BTreeSet<(String, String)> = bulk
        .ops
        .iter()
        .filter(|o| o.kind != Kind::Insert)
        .map(|o| {
            let ns = &bulk.namespaces[o.ns];
            (ns.db.clone(), ns.coll.clone())
        })
        .collect();
    let mut guards = Vec::with_capacity(locked.len());
    for (db, coll) in &locked {
        guards.push(state.catalog.lock(db, coll).await);
    }
    // Announced once the locks are held, as a plain write is (`crud_write::run_waiting`).
    let pending = state.catalog.pending_writer(&wc);
    let batch_size = bulk.batch_size;
    let (results, ticket) = super::off_thread(state, req, move |state, _| {
        let out = run(state, &bulk);
        drop(guards);
        let (results, ticket) = out;
        if let Some(t) = &ticket {
            state.catalog.sync_if_idle_pending(t, pending);
        }
        Ok((results, ticket))
    })
    .await?;
    if let Some(t) = &ticket {
        state.catalog.finish_write(t, &wc).await?;
    }
    let mut reply = results.into_reply(state, batch_size)?;
    if let Some(wce) = wc.error() {
        reply.insert("writeConcernError", wce);
    }
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// The per-op items and the counts, as the ops run.
#[derive(Default)]
struct Results {
    items: Vec<Document>,
    errors_only: bool,
    n_errors: i64,
    n_inserted: i64,
    n_matched: i64,
    n_modified: i64,
    n_upserted: i64,
    n_deleted: i64,
}

impl Results {
    fn ok(&mut self, item: Document) {
        if !self.errors_only {
            self.items.push(item);
        }
    }

    fn error(&mut self, idx: usize, e: &Document) {
        self.n_errors += 1;
        let code = e.get_i32("code").unwrap_or(1);
        let name = ErrorCode::from_code(code).map_or("UnknownError", |c| c.name());
        let mut item = doc! { "ok": 0.0, "idx": idx as i32, "code": code, "codeName": name };
        for (k, v) in e {
            if k != "index" && k != "code" {
                item.insert(k.clone(), v.clone());
            }
        }
        item.insert("n", 0);
        self.items.push(item);
    }

    fn error_from(&mut self, idx: usize, e: CommandError) {
        let mut d = doc! { "code": e.code.code(), "errmsg": e.message };
        if let Some(extra) = e.extra {
            d.extend(extra);
        }
        self.error(idx, &d);
    }

    /// The reply; items past `batch_size`, or past what one reply can hold, wait in a cursor on
    /// `admin.$cmd.bulkWrite` for getMore.
    fn into_reply(self, state: &ServerState, batch_size: Option<usize>) -> CommandResult<Document> {
        let mut rest = self
            .items
            .iter()
            .map(|d| {
                RawDocumentBuf::try_from(d).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))
            })
            .collect::<CommandResult<std::collections::VecDeque<_>>>()?;
        let first = first_batch(&mut rest, batch_size.unwrap_or(usize::MAX))?;
        let id = if rest.is_empty() {
            0
        } else {
            state.cursors.insert(crate::cursors::Cursor {
                db: "admin".into(),
                coll: CURSOR_COLL.into(),
                uuid: None,
                source: crate::exec::DocSource::Buffered(rest),
                last_used: std::time::Instant::now(),
                no_timeout: false,
                time_left: None,
                tail: None,
                collator: None,
                snapshot: None,
            })?
        };
        Ok(doc! {
            "cursor": { "id": id, "firstBatch": first, "ns": CURSOR_NS },
            "nErrors": self.n_errors as i32,
            "nInserted": self.n_inserted as i32,
            "nDeleted": self.n_deleted as i32,
            "nMatched": self.n_matched as i32,
            "nModified": self.n_modified as i32,
            "nUpserted": self.n_upserted as i32,
        })
    }
}

/// Room the reply keeps beside its first batch (counts, cursor fields, writeConcernError).
const REPLY_OVERHEAD_BYTES: usize = 64 * 1024;
/// What one array element costs beyond its document: type byte, index key and its NUL.
const ARRAY_ELEMENT_OVERHEAD_BYTES: usize = 8;

/// Take up to `count` items off the front of `rest`, as many as fit in one reply (always one
/// at least, when any is left, so a getMore-driven client makes progress).
fn first_batch(
    rest: &mut std::collections::VecDeque<RawDocumentBuf>,
    count: usize,
) -> CommandResult<Vec<Bson>> {
    let room = limits::BSON_OBJECT_SIZE_MAX - REPLY_OVERHEAD_BYTES;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while out.len() < count {
        let Some(item) = rest.front() else { break };
        bytes += item.as_bytes().len() + ARRAY_ELEMENT_OVERHEAD_BYTES;
        if bytes > room && !out.is_empty() {
            break;
        }
        let Some(item) = rest.pop_front() else { break };
        let d = Document::try_from(item.as_ref())
            .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
        out.push(Bson::Document(d));
    }
    Ok(out)
}

/// Run the ops in order; an ordered bulk write stops at its first failed op.
fn run(state: &ServerState, bulk: &BulkRequest) -> (Results, Option<storage::Ticket>) {
    let mut results = Results {
        errors_only: bulk.errors_only,
        ..Default::default()
    };
    let mut shared = WriteOutcome::default();
    let mut i = 0;
    while i < bulk.ops.len() {
        let op = &bulk.ops[i];
        let ns = &bulk.namespaces[op.ns];
        let failed = match op.kind {
            Kind::Insert => {
                let run_len = bulk.ops[i..]
                    .iter()
                    .take_while(|o| o.kind == Kind::Insert && o.ns == op.ns)
                    .count();
                let failed = insert_run(state, bulk, ns, i, run_len, &mut results, &mut shared);
                i += run_len;
                failed
            }
            Kind::Update => {
                let r = crud_write::check_retryable_multi(bulk.retryable, multi(op))
                    .and_then(|()| update_op(state, ns, op, i, bulk, &mut shared));
                i += 1;
                match r {
                    Ok(item) => {
                        results.n_matched += i64::from(item.get_i32("n").unwrap_or(0))
                            - i64::from(item.contains_key("upserted"));
                        results.n_modified += i64::from(item.get_i32("nModified").unwrap_or(0));
                        results.n_upserted += i64::from(item.contains_key("upserted"));
                        results.ok(item);
                        false
                    }
                    Err(e) => {
                        results.error_from(i - 1, e);
                        true
                    }
                }
            }
            Kind::Delete => {
                let r = crud_write::check_retryable_multi(bulk.retryable, multi(op))
                    .and_then(|()| delete_op(state, ns, op, bulk.vars.as_ref(), &mut shared));
                i += 1;
                match r {
                    Ok(n) => {
                        results.n_deleted += n;
                        results.ok(doc! { "ok": 1.0, "idx": (i - 1) as i32, "n": n as i32 });
                        false
                    }
                    Err(e) => {
                        results.error_from(i - 1, e);
                        true
                    }
                }
            }
        };
        if failed && bulk.ordered {
            break;
        }
    }
    (results, shared.ticket)
}

/// A run of inserts into one namespace: one storage batch when it succeeds (as `insert` does).
/// Returns whether any op of the run failed.
fn insert_run(
    state: &ServerState,
    bulk: &BulkRequest,
    ns: &Namespace,
    start: usize,
    len: usize,
    results: &mut Results,
    shared: &mut WriteOutcome,
) -> bool {
    let mut pending: Vec<(usize, std::borrow::Cow<'static, bson::RawDocument>)> =
        Vec::with_capacity(len);
    let mut refused: Vec<(usize, CommandError)> = Vec::new();
    let existing = state.catalog.collection(&ns.db, &ns.coll);
    let checker = match crate::commands::validation::Checker::new(
        existing.as_deref(),
        bulk.bypass_validation,
    ) {
        Ok(c) => c,
        Err(e) => {
            refused.push((start, e));
            crate::commands::validation::Checker::none()
        }
    };
    for idx in start..start + len {
        state.opcounters.insert.fetch_add(1, Relaxed);
        let raw = bulk.ops[idx]
            .body
            .get_document("document")
            .map_err(|e| err(ErrorCode::TypeMismatch, e.to_string()))
            .and_then(|d| {
                RawDocumentBuf::try_from(d).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))
            })
            .and_then(crud_write::prepare_for_storage)
            .and_then(|d| checker.insert(&d).map(|()| d));
        match raw {
            Ok(d) => pending.push((idx, d)),
            Err(e) => {
                refused.push((idx, e));
                if bulk.ordered {
                    break;
                }
            }
        }
    }
    // Documents after an ordered refusal are not attempted; the ones before it are.
    let mut out = WriteOutcome::default();
    let mut tried: Vec<usize> = pending.iter().map(|(i, _)| *i).collect();
    match state.catalog.get_or_create(&ns.db, &ns.coll) {
        Ok(coll) => {
            crud_write::insert_group(&coll, &ns.db, &ns.coll, pending, bulk.ordered, &mut out)
        }
        Err(e) => {
            if let Some(idx) = tried.first() {
                refused.push((*idx, e));
            }
            tried.clear();
        }
    }
    if let Some(t) = out.ticket.take() {
        shared.keep_ticket(t);
    }
    let failed_at: Vec<usize> = out
        .errors
        .iter()
        .filter_map(|e| e.get_i32("index").ok().map(|i| i as usize))
        .chain(refused.iter().map(|(i, _)| *i))
        .collect();
    let first_failure = failed_at.iter().min().copied();
    let mut by_index: Vec<(usize, Result<(), Document>)> = Vec::with_capacity(len);
    for idx in &tried {
        if let Some(e) = out
            .errors
            .iter()
            .find(|e| e.get_i32("index").ok() == Some(*idx as i32))
        {
            by_index.push((*idx, Err(e.clone())));
        } else if !bulk.ordered || first_failure.is_none_or(|f| *idx < f) {
            by_index.push((*idx, Ok(())));
        }
    }
    for (idx, e) in refused {
        let mut d = doc! { "code": e.code.code(), "errmsg": e.message };
        if let Some(extra) = e.extra {
            d.extend(extra);
        }
        by_index.push((idx, Err(d)));
    }
    by_index.sort_by_key(|(i, _)| *i);
    let mut failed = false;
    for (idx, r) in by_index {
        match r {
            Ok(()) => {
                results.n_inserted += 1;
                results.ok(doc! { "ok": 1.0, "idx": idx as i32, "n": 1 });
            }
            Err(e) => {
                failed = true;
                results.error(idx, &e);
                if bulk.ordered {
                    break;
                }
            }
        }
    }
    failed
}

/// An update op as an `update` statement (`q`, `u`, ...), run by `crud_write`; its result item.
fn update_op(
    state: &ServerState,
    ns: &Namespace,
    op: &Op,
    idx: usize,
    bulk: &BulkRequest,
    shared: &mut WriteOutcome,
) -> CommandResult<Document> {
    let (vars, bypass) = (bulk.vars.as_ref(), bulk.bypass_validation);
    state.opcounters.update.fetch_add(1, Relaxed);
    state.catalog.check_not_view(&ns.db, &ns.coll)?;
    let b = &op.body;
    let mut s = Document::new();
    for (from, to) in [
        ("filter", "q"),
        ("updateMods", "u"),
        ("upsert", "upsert"),
        ("multi", "multi"),
        ("arrayFilters", "arrayFilters"),
        ("hint", "hint"),
        ("collation", "collation"),
        ("sort", "sort"),
    ] {
        if let Some(v) = b.get(from) {
            s.insert(to, v.clone());
        }
    }
    // Per-op `constants` join (and override) the command's `let`.
    let mut merged;
    let vars = match b.get("constants") {
        Some(Bson::Document(c)) => {
            merged = vars.cloned().unwrap_or_default();
            merged.extend(c.clone());
            Some(&merged)
        }
        Some(v) => return Err(wrong_type("ops.constants", v, "object")),
        None => vars,
    };
    let raw =
        RawDocumentBuf::try_from(&s).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
    let mut stmt = crud_write::parse_update_stmt(&raw, &ns.db, &ns.coll, vars)?;
    stmt.bypass_validation = bypass;
    let mut out = WriteOutcome::default();
    crud_write::run_update(state, &ns.db, &ns.coll, &stmt, idx, &mut out)?;
    if let Some(t) = out.ticket.take() {
        shared.keep_ticket(t);
    }
    let mut item = doc! {
        "ok": 1.0,
        "idx": idx as i32,
        "n": out.n as i32,
        "nModified": out.n_modified as i32,
    };
    if let Some(u) = out.upserted.first() {
        item.insert(
            "upserted",
            doc! { "_id": u.get("_id").cloned().unwrap_or(Bson::Null) },
        );
    }
    Ok(item)
}

fn multi(op: &Op) -> bool {
    op.body.get("multi").is_some_and(super::truthy)
}

/// A delete op as a `delete` statement (`q`, `limit`), run by `crud_write`; documents deleted.
fn delete_op(
    state: &ServerState,
    ns: &Namespace,
    op: &Op,
    vars: Option<&Document>,
    shared: &mut WriteOutcome,
) -> CommandResult<i64> {
    state.opcounters.delete.fetch_add(1, Relaxed);
    state.catalog.check_not_view(&ns.db, &ns.coll)?;
    let b = &op.body;
    let multi = b.get_bool("multi").unwrap_or(false);
    let mut s = doc! { "q": b.get("filter").cloned().unwrap_or(Bson::Document(Document::new())), "limit": if multi { 0 } else { 1 } };
    for k in ["hint", "collation"] {
        if let Some(v) = b.get(k) {
            s.insert(k, v.clone());
        }
    }
    let raw =
        RawDocumentBuf::try_from(&s).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
    let coll = state.catalog.collection(&ns.db, &ns.coll);
    let mut out = WriteOutcome::default();
    crud_write::run_delete(coll.as_ref(), &ns.db, &ns.coll, &raw, vars, &mut out)?;
    if let Some(t) = out.ticket.take() {
        shared.keep_ticket(t);
    }
    Ok(out.n)
}

#[cfg(test)]
mod tests;
