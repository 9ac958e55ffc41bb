//! Writes: `insert`, `update`, `delete`, `findAndModify`. Inserts go straight to storage (the
//! engine checks unique indexes atomically); updates and deletes hold the namespace's write lock
//! from reading the matches to writing the changes, then release it before waiting for
//! durability so concurrent writers share one group commit. Per-statement failures become
//! `writeErrors` inside an `ok: 1` reply, as in mongod.

use super::args;
use super::argspec::{self, specs};
use super::{Reply, Request};
use crate::catalog::WriteConcern;
use crate::error::{CommandError, CommandResult, ErrorCode, err, storage_error};
use crate::limits;
use crate::query::matcher::Filter;
use crate::query::sort::SortSpec;
use crate::query::update::Modification;
use crate::query::update::{ApplyContext, upsert_seed};
use crate::state::ServerState;
use bson::{Bson, Document, RawDocument, RawDocumentBuf, doc};
use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use storage::{Collection, Ticket, WriteOp};

/// Outcome of a write command before it becomes a reply.
#[derive(Default)]
pub(super) struct WriteOutcome {
    pub(super) n: i64,
    pub(super) n_modified: i64,
    pub(super) upserted: Vec<Document>,
    pub(super) errors: Vec<Document>,
    pub(super) ticket: Option<Ticket>,
    /// Set for plain updates and deletes: they wait for the open transactions that hold a
    /// document they would write (`crate::txn`); others (bulkWrite) write at once.
    pub(super) waits_for: Option<Arc<crate::txn::Registry>>,
    /// The document that stopped the statement at `resume_at` before it wrote anything.
    pub(super) blocked_on: Option<crate::txn::DocKey>,
    /// The statement the next job starts at.
    pub(super) resume_at: usize,
}

impl WriteOutcome {
    /// An outcome for a plain update or delete, which waits for transactions.
    fn waiting(state: &ServerState, req: &Request) -> WriteOutcome {
        WriteOutcome {
            waits_for: req.txn.get().is_none().then(|| state.txns.clone()),
            ..WriteOutcome::default()
        }
    }

    /// The first of `rids` an open transaction holds, when this write waits for transactions
    /// (noted in `blocked_on`: the statement then writes nothing and the handler waits).
    pub(super) fn held_by_transaction(
        &mut self,
        coll: &Collection,
        rids: impl IntoIterator<Item = u64>,
    ) -> bool {
        let Some(registry) = &self.waits_for else {
            return false;
        };
        self.blocked_on = registry.first_held(coll.uuid().bytes(), rids);
        self.blocked_on.is_some()
    }

    pub(super) fn error(&mut self, index: usize, e: CommandError) {
        let mut d = doc! { "index": index as i32, "code": e.code.code(), "errmsg": e.message };
        if let Some(extra) = e.extra {
            d.extend(extra);
        }
        self.errors.push(d);
    }

    /// At the end of the job, for a write that announced itself (`Catalog::pending_writer`):
    /// sync now when the reply will wait and no sync is in flight; without a ticket the
    /// pending writer just ends.
    pub(super) fn sync_if_idle_pending(
        self,
        state: &ServerState,
        pending: Option<storage::PendingWriter>,
    ) -> Self {
        if let Some(t) = &self.ticket {
            state.catalog.sync_if_idle_pending(t, pending);
        }
        self
    }

    /// `keep_ticket` for a write that may have been buffered in a transaction (no ticket).
    pub(super) fn keep(&mut self, t: Option<Ticket>) {
        if let Some(t) = t {
            self.keep_ticket(t);
        }
    }

    pub(super) fn keep_ticket(&mut self, t: Ticket) {
        if self
            .ticket
            .as_ref()
            .is_none_or(|old| old.sequence <= t.sequence)
        {
            self.ticket = Some(t);
        }
    }

    async fn reply(
        self,
        state: &ServerState,
        wc: &WriteConcern,
        update: bool,
    ) -> CommandResult<Reply> {
        if let Some(t) = &self.ticket {
            state.catalog.finish_write(t, wc).await?;
        }
        let mut r = self.body(update);
        if let Some(wce) = wc.error() {
            r.insert("writeConcernError", wce);
        }
        r.insert("ok", 1.0);
        Ok(Reply::Doc(r))
    }

    /// The reply's fields that say what the statements did.
    fn body(&self, update: bool) -> Document {
        let mut r = doc! { "n": self.n as i32 };
        if update {
            r.insert("nModified", self.n_modified as i32);
            if !self.upserted.is_empty() {
                r.insert("upserted", self.upserted.clone());
            }
        }
        if !self.errors.is_empty() {
            r.insert("writeErrors", self.errors.clone());
        }
        r
    }

    /// At the end of the job, before its sync: a retryable write's reply goes into its
    /// session's record here (the form a retry gets: no writeConcernError), so the one sync
    /// covers both and no second job is needed (`crate::retry_record`).
    pub(super) fn record_reply(self, state: &ServerState, req: &Request, update: bool) -> Self {
        if let Some(r) = req.retry.get().filter(|r| r.wrote()) {
            state
                .failpoints
                .hang_while_on_entered(crate::failpoints::HANG_BEFORE_RECORDING_RETRY_REPLY);
            let mut d = self.body(update);
            d.insert("ok", 1.0);
            if let Err(e) = r.record_reply(d) {
                tracing::warn!(error = %e, "could not record a retryable write's reply");
            }
        }
        self
    }
}

pub(super) fn batch_len_error(n: usize) -> CommandError {
    err(
        ErrorCode::InvalidLength,
        format!(
            "Write batch sizes must be between 1 and {}. Got {n} operations.",
            limits::WRITE_BATCH_COUNT_MAX
        ),
    )
}

/// The statements of a write command: from the body's array or from a kind-1 sequence.
/// Borrowed from the request where it holds them as sent (a sequence, the raw body), so an
/// insert copies each document only where it is stored.
fn statements<'r>(req: &'r Request, field: &str) -> CommandResult<Vec<Cow<'r, RawDocument>>> {
    let mut out = Vec::new();
    if let Some(seq) = req.sequences.iter().find(|s| s.identifier == field) {
        out.extend(seq.documents.iter().map(|d| Cow::Borrowed(d.as_ref())));
    }
    if let Some(raw) = &req.raw_body {
        raw_statements(raw, &req.name, field, &mut out)?;
    } else {
        doc_statements(req, field, &mut out)?;
    }
    if out.is_empty() || out.len() > limits::WRITE_BATCH_COUNT_MAX {
        return Err(batch_len_error(out.len()));
    }
    Ok(out)
}

/// Update and delete statements are parsed into owned values anyway.
fn owned(stmts: Vec<Cow<'_, RawDocument>>) -> Vec<RawDocumentBuf> {
    stmts.into_iter().map(Cow::into_owned).collect()
}

fn not_array_of_objects(command: &str, field: &str) -> CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!("BSON field '{command}.{field}' must be an array of objects"),
    )
}

fn not_array(command: &str, field: &str) -> CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!("BSON field '{command}.{field}' must be an array"),
    )
}

/// Statements from the body's bytes, each as sent (a repeated field inside a statement
/// survives, so `prepare_for_storage` can refuse it as mongod does).
fn raw_statements<'r>(
    raw: &'r RawDocumentBuf,
    command: &str,
    field: &str,
    out: &mut Vec<Cow<'r, RawDocument>>,
) -> CommandResult<()> {
    let bad = |e: bson::error::Error| err(ErrorCode::InvalidBSON, e.to_string());
    let Some(value) = raw.get(field).map_err(bad)? else {
        return Ok(());
    };
    let Some(items) = value.as_array() else {
        return Err(not_array(command, field));
    };
    for item in items {
        let item = item.map_err(bad)?;
        let Some(d) = item.as_document() else {
            return Err(not_array_of_objects(command, field));
        };
        out.push(Cow::Borrowed(d));
    }
    Ok(())
}

fn doc_statements(
    req: &Request,
    field: &str,
    out: &mut Vec<Cow<'_, RawDocument>>,
) -> CommandResult<()> {
    match req.body.get(field) {
        None => {}
        Some(Bson::Array(items)) => {
            for item in items {
                let Bson::Document(d) = item else {
                    return Err(not_array_of_objects(&req.name, field));
                };
                out.push(Cow::Owned(
                    RawDocumentBuf::try_from(d)
                        .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?,
                ));
            }
        }
        Some(_) => return Err(not_array(&req.name, field)),
    }
    Ok(())
}

pub use super::prepare::{prepare_document, prepare_for_storage};

pub async fn insert(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    // Announced before the hop to the pool, so a sync started meanwhile waits for it.
    let pending = Mutex::new(state.catalog.pending_writer(&wc));
    let ts_guard = super::timeseries::insert_guard(state, req).await;
    let out = super::off_thread_tried(
        state,
        req,
        crate::offload::Tried::Write,
        move |state, req| {
            let out = insert_documents(state, req)?;
            if storage::nowait::dropping() {
                // A refused attempt: the call runs again and takes the pending writer then.
                return Ok(out);
            }
            Ok(out
                .record_reply(state, req, false)
                .sync_if_idle_pending(state, take(&pending)))
        },
    )
    .await;
    drop(ts_guard);
    out?.reply(state, &wc, false).await
}

/// The storage part of `insert`: every valid run of documents written, the ticket kept.
fn insert_documents(state: &ServerState, req: &Request) -> CommandResult<WriteOutcome> {
    argspec::check(&specs::INSERT, &req.body)?;
    let coll_name = args::collection_name(&req.body, "insert")?;
    let ordered = args::opt_bool(&req.body, "insert", "ordered")?.unwrap_or(true);
    let docs = statements(req, "documents")?;
    crate::catalog::check_user_writable(&req.db, &coll_name)?;
    if let Some(ts) = super::timeseries::lookup(state, &req.db, &coll_name) {
        if storage::nowait::active() {
            // Bucket writes keep state outside storage: only on the pool.
            return Err(crate::offload::refuse());
        }
        let mut out = WriteOutcome::default();
        super::timeseries::insert(&ts, &req.db, owned(docs), ordered, &mut out)?;
        return Ok(out);
    }
    state.catalog.check_not_view(&req.db, &coll_name)?;
    let coll = state.catalog.get_or_create(&req.db, &coll_name)?;
    let bypass = args::opt_bool(&req.body, "insert", "bypassDocumentValidation")?.unwrap_or(false);
    let checker = super::validation::Checker::new(Some(&coll), bypass)?;
    let mut out = WriteOutcome::default();
    let mut pending: Vec<(usize, Cow<'_, RawDocument>)> = Vec::new();
    // Counted at the end, and not for an attempt that is dropped and runs again.
    let mut tried = 0;
    for (i, raw) in docs.into_iter().enumerate() {
        tried += 1;
        match prepare_for_storage(raw).and_then(|d| checker.insert(&d).map(|()| d)) {
            Ok(d) => pending.push((i, d)),
            Err(e) => {
                insert_group(
                    &coll,
                    &req.db,
                    &coll_name,
                    std::mem::take(&mut pending),
                    ordered,
                    &mut out,
                );
                if ordered && !out.errors.is_empty() {
                    break;
                }
                out.error(i, e);
                if ordered {
                    break;
                }
            }
        }
    }
    if !ordered || out.errors.is_empty() {
        insert_group(&coll, &req.db, &coll_name, pending, ordered, &mut out);
    }
    if !storage::nowait::dropping() {
        state.opcounters.insert.fetch_add(tried, Relaxed);
    }
    Ok(out)
}

/// Insert a run of valid documents: one atomic storage write when it succeeds; otherwise one
/// document at a time so that each failure is reported at its own index.
pub(super) fn insert_group(
    coll: &Arc<Collection>,
    db: &str,
    name: &str,
    docs: Vec<(usize, Cow<'_, RawDocument>)>,
    ordered: bool,
    out: &mut WriteOutcome,
) {
    if docs.is_empty() {
        return;
    }
    // Borrowed, not copied: the documents stay in `docs` for the one-at-a-time retry.
    let ops: Vec<WriteOp> = docs
        .iter()
        .map(|(_, d)| WriteOp::Insert(Cow::Borrowed(d.as_ref())))
        .collect();
    if let Ok(t) = crate::txn::write(coll, ops) {
        out.n += docs.len() as i64;
        out.keep(t);
        return;
    }
    insert_each(coll, db, name, docs, ordered, out);
}

/// Insert documents one write each, each failure reported at its own index.
fn insert_each(
    coll: &Arc<Collection>,
    db: &str,
    name: &str,
    docs: Vec<(usize, Cow<'_, RawDocument>)>,
    ordered: bool,
    out: &mut WriteOutcome,
) {
    for (i, d) in docs {
        match crate::txn::write(coll, vec![WriteOp::Insert(d)]) {
            Ok(t) => {
                out.n += 1;
                out.keep(t);
            }
            Err(e) => {
                out.error(i, storage_error(e, db, name));
                if ordered {
                    return;
                }
            }
        }
    }
}

/// One parsed update statement.
pub(super) struct UpdateStmt {
    filter: Filter,
    filter_doc: Document,
    update: Modification,
    pub(super) upsert: bool,
    multi: bool,
    /// `hint`, checked against the collection's indexes when the statement runs.
    hint: Document,
    /// `sort` (mongod 8.0, single-document updates only): which match is updated.
    sort: Option<SortSpec>,
    /// The command's `bypassDocumentValidation`.
    pub(super) bypass_validation: bool,
    /// The statement's `collation` (else the collection's default applies).
    collation: Option<crate::query::collation::Spec>,
}

pub(super) fn parse_update_stmt(
    raw: &RawDocumentBuf,
    db: &str,
    coll: &str,
    vars: Option<&Document>,
) -> CommandResult<UpdateStmt> {
    let s = to_document(raw)?;
    let collation = match args::opt_doc(&s, "update.updates", "collation")? {
        Some(c) => {
            let spec = crate::query::collation::Spec::parse(c)?;
            crate::query::collator::for_spec(&spec)?;
            Some(spec)
        }
        None => None,
    };
    let filter_doc = match s.get("q") {
        Some(Bson::Document(d)) => args::bind_let(d, vars),
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "BSON field 'update.updates.q' is missing but a required field",
            ));
        }
    };
    let array_filters: Option<Vec<Document>> = match s.get("arrayFilters") {
        None | Some(Bson::Null) => None,
        Some(Bson::Array(a)) => Some(a.iter().filter_map(|v| v.as_document().cloned()).collect()),
        Some(_) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "arrayFilters must be an array of objects",
            ));
        }
    };
    let update = match s.get("u") {
        Some(u) => Modification::parse(u, array_filters.as_deref(), db, coll)?,
        None => {
            return Err(err(
                ErrorCode::FailedToParse,
                "BSON field 'update.updates.u' is missing but a required field",
            ));
        }
    };
    let multi = s.get("multi").is_some_and(super::truthy);
    if multi && update.is_replacement() {
        return Err(err(
            ErrorCode::FailedToParse,
            "multi update is not supported for replacement-style update",
        ));
    }
    let sort = match s.get("sort") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(d)) if d.is_empty() => None,
        Some(Bson::Document(d)) => Some(SortSpec::parse(d)?),
        Some(v) => {
            return Err(err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'update.updates.sort' is the wrong type '{}', expected type 'object'",
                    args::type_name(v)
                ),
            ));
        }
    };
    if multi && s.contains_key("sort") {
        return Err(err(
            ErrorCode::FailedToParse,
            "Cannot specify sort with multi=true",
        ));
    }
    Ok(UpdateStmt {
        sort,
        filter: Filter::parse(&filter_doc)?,
        filter_doc,
        update,
        upsert: s.get("upsert").is_some_and(super::truthy),
        multi,
        hint: s
            .get("hint")
            .map(|h| doc! { "hint": h.clone() })
            .unwrap_or_default(),
        bypass_validation: false,
        collation,
    })
}

pub async fn update(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    argspec::check(&specs::UPDATE, &req.body)?;
    let coll_name = args::collection_name(&req.body, "update")?;
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    crate::catalog::check_user_writable(&req.db, &coll_name)?;
    let out = run_waiting(state, req, &coll_name, &wc, true, update_statements).await?;
    out.reply(state, &wc, true).await
}

type StatementsFn = fn(&ServerState, &Request, &str, WriteOutcome) -> CommandResult<WriteOutcome>;

/// Runs the statements of a plain update or delete in jobs under the namespace lock: when a
/// statement would touch a document an open transaction holds, its job ends before that
/// statement writes anything, and this waits (holding no lock and no pool thread) for the
/// transaction to end, then goes on from that statement. A wait ended by maxTimeMS, killOp or
/// a disconnect fails the command (the statements before it stand), as in mongod.
async fn run_waiting(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    coll_name: &str,
    wc: &WriteConcern,
    update: bool,
    statements: StatementsFn,
) -> CommandResult<WriteOutcome> {
    let mut out = WriteOutcome::waiting(state, req);
    // The first job of a statement that writes one document (updateOne, replaceOne, deleteOne)
    // is tried on the async worker first.
    let mut tried = one_document_statement(req, update).then_some(crate::offload::Tried::Write);
    loop {
        let guard = state.catalog.lock(&req.db, coll_name).await;
        // Announced once the lock is held, before the hop to the pool, so that a sync started
        // meanwhile waits for this write too (`storage::PendingWriter`). Announced before the
        // lock, writers queued on it held syncs back (F at 64 connections: 0.89x).
        let pending = Mutex::new(state.catalog.pending_writer(wc));
        let name = coll_name.to_string();
        // The lock travels with the job and is released once its statements ran, before any
        // sync or wait. An attempt on the worker that is dropped leaves the lock and the
        // announcement to the run on the pool, which starts again from a fresh outcome (only a
        // first job, whose outcome is fresh, is tried there).
        let (guard, start) = (Mutex::new(Some(guard)), Mutex::new(Some(out)));
        let job = move |state: &ServerState, req: &Request| {
            let from = take(&start).unwrap_or_else(|| WriteOutcome::waiting(state, req));
            let out = statements(state, req, &name, from);
            if storage::nowait::dropping() {
                return out;
            }
            drop(take(&guard));
            let out = out?;
            if out.blocked_on.is_some() {
                return Ok(out);
            }
            Ok(out
                .record_reply(state, req, update)
                .sync_if_idle_pending(state, take(&pending)))
        };
        let step = match tried.take() {
            Some(t) => super::off_thread_tried(state, req, t, job).await,
            None => super::off_thread(state, req, job).await,
        };
        let mut step = step?;
        let Some(key) = step.blocked_on.take() else {
            return Ok(step);
        };
        // An interruption fails the whole command, as mongod's write path rethrows them; the
        // statements before it stand.
        state.txns.wait_released(key, &req.op).await?;
        out = step;
    }
}

/// What a job's `Mutex<Option<T>>` still holds, taken (a job that may run twice keeps what it
/// hands on in one).
fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Whether a plain update or delete is one statement that writes at most one document: only
/// those are tried on the async worker (a second statement, or a second document's write,
/// would run after the first write settled the attempt, where nothing may be refused).
fn one_document_statement(req: &Request, update: bool) -> bool {
    let field = if update { "updates" } else { "deletes" };
    let Ok(stmts) = statements(req, field) else {
        return false;
    };
    let [stmt] = stmts.as_slice() else {
        return false;
    };
    if update {
        !is_multi(stmt)
    } else {
        matches!(stmt.get("limit"), Ok(Some(v)) if v.as_i32() == Some(1)
            || v.as_i64() == Some(1) || v.as_f64() == Some(1.0))
    }
}

/// An update statement's `multi`, read as mongod reads a boolean option.
fn is_multi(stmt: &bson::RawDocument) -> bool {
    matches!(stmt.get("multi"), Ok(Some(v)) if v.as_bool() == Some(true)
        || v.as_i32().is_some_and(|i| i != 0)
        || v.as_i64().is_some_and(|i| i != 0)
        || v.as_f64().is_some_and(|f| f != 0.0))
}

fn update_statements(
    state: &ServerState,
    req: &Request,
    coll: &str,
    mut out: WriteOutcome,
) -> CommandResult<WriteOutcome> {
    let ordered = args::opt_bool(&req.body, "update", "ordered")?.unwrap_or(true);
    let stmts = owned(statements(req, "updates")?);
    if super::timeseries::lookup(state, &req.db, coll).is_some() {
        let mut out = WriteOutcome::default();
        for (i, raw) in stmts.iter().enumerate() {
            let multi = matches!(raw.get("multi"), Ok(Some(bson::RawBsonRef::Boolean(true))));
            out.error(i, super::timeseries::update_refusal(multi));
            if ordered {
                break;
            }
        }
        return Ok(out);
    }
    state.catalog.check_not_view(&req.db, coll)?;
    let vars = args::let_variables(&req.body, "update")?;
    let bypass = args::opt_bool(&req.body, "update", "bypassDocumentValidation")?.unwrap_or(false);
    check_entries(&specs::UPDATE_ENTRY, &stmts)?;
    for raw in &stmts {
        check_sort_single(raw)?;
    }
    let retryable = is_retryable(req);
    for (i, raw) in stmts.iter().enumerate().skip(out.resume_at) {
        let result = match parse_update_stmt(raw, &req.db, coll, vars.as_ref()) {
            Ok(mut stmt) => {
                stmt.bypass_validation = bypass;
                check_retryable_multi(retryable, stmt.multi)
                    .and_then(|()| run_update(state, &req.db, coll, &stmt, i, &mut out))
            }
            Err(e) => Err(e),
        };
        if out.blocked_on.is_some() {
            out.resume_at = i;
            return Ok(out);
        }
        if !storage::nowait::dropping() {
            state.opcounters.update.fetch_add(1, Relaxed);
        }
        if let Err(e) = result {
            out.error(i, e);
            if ordered {
                break;
            }
        }
    }
    Ok(out)
}

/// A `txnNumber` outside a transaction makes a write retryable.
pub(super) fn is_retryable(req: &Request) -> bool {
    req.body.contains_key("txnNumber") && req.txn.get().is_none()
}

fn to_document(raw: &bson::RawDocument) -> CommandResult<Document> {
    Document::try_from(raw).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))
}

/// Check every statement of a write command against its table before any of them runs: a
/// malformed statement fails the whole command, as mongod's parser fails it.
fn check_entries(spec: &argspec::CommandSpec, stmts: &[RawDocumentBuf]) -> CommandResult<()> {
    for raw in stmts {
        argspec::check_entry(spec, &to_document(raw)?)?;
    }
    Ok(())
}

/// A retryable write (`txnNumber` outside a transaction) cannot hold a multi-document update or
/// delete: mongod fails that statement alone and runs the others.
pub(super) fn check_retryable_multi(retryable: bool, multi: bool) -> CommandResult<()> {
    if retryable && multi {
        return Err(err(
            ErrorCode::InvalidOptions,
            "Cannot use (or request) retryable writes with multi=true",
        ));
    }
    Ok(())
}

/// `sort` only chooses among the matches of a single-document update; with `multi: true` mongod
/// refuses the whole command while parsing it, before any statement runs.
pub(super) fn check_sort_single(stmt: &bson::RawDocument) -> CommandResult<()> {
    if is_multi(stmt) && matches!(stmt.get("sort"), Ok(Some(_))) {
        return Err(err(
            ErrorCode::FailedToParse,
            "Cannot specify sort with multi=true",
        ));
    }
    Ok(())
}

/// Apply `update` to a stored document; `None` when it changed nothing.
/// The storage op of an update's new version: a replacement, or an operator update (whose
/// diff the oplog records under `--replSet`).
pub(super) fn update_op(stmt: &UpdateStmt, rid: u64, next: RawDocumentBuf) -> WriteOp<'static> {
    if stmt.update.is_replacement() {
        WriteOp::Replace(rid, next)
    } else {
        WriteOp::Update(rid, next)
    }
}

pub(super) fn updated_doc(
    stmt: &UpdateStmt,
    raw: &RawDocumentBuf,
    pos: Option<usize>,
) -> CommandResult<Option<RawDocumentBuf>> {
    let mut doc =
        Document::try_from(raw.as_ref()).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
    let ctx = ApplyContext {
        is_insert: false,
        positional: pos,
        now: bson::DateTime::now(),
    };
    if !stmt.update.apply(&mut doc, &ctx)? {
        return Ok(None);
    }
    Ok(Some(prepare_document(doc)?))
}

/// Documents one storage write of a multi-document update or delete carries. A multi-write is
/// not atomic as a whole in mongod either; each chunk is.
const WRITE_CHUNK_COUNT: usize = 10_000;

pub(super) fn run_update(
    state: &ServerState,
    db: &str,
    name: &str,
    stmt: &UpdateStmt,
    index: usize,
    out: &mut WriteOutcome,
) -> CommandResult<()> {
    let coll = state.catalog.collection(db, name);
    let _collation =
        crate::query::collator::scope(args::collator_of(stmt.collation.as_ref(), coll.as_deref())?);
    let mut matched = 0i64;
    let mut modified = 0i64;
    let checker = super::validation::Checker::new(coll.as_deref(), stmt.bypass_validation)?;
    if let Some(coll) = &coll {
        args::check_hint(&stmt.hint, Some(coll))?;
        // RecordIds first (8 bytes a match, and an update never sees its own output), then the
        // documents chunk by chunk. A single-document statement outside a transaction keeps
        // the document its match read: the namespace lock keeps every other update and delete
        // of this collection out until it has written (in a transaction, the transaction's
        // own view is read again).
        let (targets, kept) = match &stmt.sort {
            Some(sort) => one_target(first_in_order(coll, &stmt.filter, &stmt.filter_doc, sort)?),
            None if !stmt.multi => one_target(first_match(coll, &stmt.filter, &stmt.filter_doc)?),
            None => (
                match_ids(coll, &stmt.filter, &stmt.filter_doc, false)?,
                None,
            ),
        };
        let mut kept = kept.filter(|_| crate::txn::current().is_none());
        if out.held_by_transaction(coll, targets.iter().map(|(rid, _)| *rid)) {
            return Ok(());
        }
        matched = targets.len() as i64;
        for chunk in targets.chunks(WRITE_CHUNK_COUNT) {
            let mut ops = Vec::with_capacity(chunk.len());
            for (rid, pos) in chunk {
                let raw = match kept.take() {
                    Some(doc) => doc,
                    None => {
                        match crate::txn::get(coll, *rid).map_err(|e| storage_error(e, db, name))? {
                            Some(doc) => doc,
                            None => continue,
                        }
                    }
                };
                if let Some(next) = updated_doc(stmt, &raw, *pos)? {
                    if let Err(e) = checker.update(&raw, &next) {
                        // The documents before the failing one stay updated, as in mongod.
                        if !ops.is_empty() {
                            modified += ops.len() as i64;
                            let t = crate::txn::write(coll, ops)
                                .map_err(|e| storage_error(e, db, name))?;
                            out.keep(t);
                        }
                        out.n += modified;
                        out.n_modified += modified;
                        return Err(e);
                    }
                    ops.push(update_op(stmt, *rid, next));
                }
            }
            if ops.is_empty() {
                continue;
            }
            let n = ops.len() as i64;
            let t = crate::txn::write(coll, ops).map_err(|e| storage_error(e, db, name))?;
            out.keep(t);
            modified += n;
        }
    }
    if matched == 0 && stmt.upsert {
        let doc = upsert_document(stmt)?;
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        let raw = prepare_document(doc)?;
        let coll = state.catalog.get_or_create(db, name)?;
        super::validation::Checker::new(Some(&coll), stmt.bypass_validation)?.insert(&raw)?;
        let t = crate::txn::write(&coll, vec![WriteOp::Insert(raw.into())])
            .map_err(|e| storage_error(e, db, name))?;
        out.keep(t);
        out.n += 1;
        out.upserted.push(doc! { "index": index as i32, "_id": id });
        return Ok(());
    }
    out.n += matched;
    out.n_modified += modified;
    Ok(())
}

/// The RecordIds (with the matched array position) of the documents a write statement targets.
fn match_ids(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    first_only: bool,
) -> CommandResult<Vec<(u64, Option<usize>)>> {
    if first_only {
        return Ok(one_target(first_match(coll, filter, filter_doc)?).0);
    }
    let mut scan = crate::exec::planned_scan(coll, filter.clone(), filter_doc, None);
    let mut out = Vec::new();
    while let Some((rid, _, pos)) = scan.next_match(None)? {
        out.push((rid, pos));
    }
    Ok(out)
}

/// A matched document: its RecordId, the document as the match read it, and the matched
/// array position.
type Matched = (u64, RawDocumentBuf, Option<usize>);

/// The first document a single-document statement targets.
fn first_match(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
) -> CommandResult<Option<Matched>> {
    let mut scan = crate::exec::planned_scan(coll, filter.clone(), filter_doc, None);
    scan.remaining = Some(1);
    scan.next_match(None)
}

/// A statement's one target (or none) as `match_ids` gives targets, and its document.
fn one_target(m: Option<Matched>) -> (Vec<(u64, Option<usize>)>, Option<RawDocumentBuf>) {
    match m {
        Some((rid, doc, pos)) => (vec![(rid, pos)], Some(doc)),
        None => (Vec::new(), None),
    }
}

/// The one match a sorted single-document update targets: the first in `sort` order (the
/// first scanned among equals), found in one pass that keeps only the best so far.
fn first_in_order(
    coll: &Arc<Collection>,
    filter: &Filter,
    filter_doc: &Document,
    sort: &SortSpec,
) -> CommandResult<Option<Matched>> {
    let mut scan = crate::exec::planned_scan(coll, filter.clone(), filter_doc, None);
    let mut best: Option<Matched> = None;
    while let Some((rid, doc, pos)) = scan.next_match(None)? {
        let better = best
            .as_ref()
            .is_none_or(|(_, b, _)| sort.compare(&doc, b) == std::cmp::Ordering::Less);
        if better {
            best = Some((rid, doc, pos));
        }
    }
    Ok(best)
}

/// The document an upsert inserts: the query's equality fields, then the update applied as an
/// insert (so `$setOnInsert` applies), or the replacement with the query's `_id`.
pub(super) fn upsert_document(stmt: &UpdateStmt) -> CommandResult<Document> {
    let seed = upsert_seed(&stmt.filter)?;
    let mut doc = if stmt.update.is_replacement() {
        // A replacement keeps only the query's `_id`.
        let mut d = Document::new();
        if let Some(id) = seed.get("_id") {
            d.insert("_id", id.clone());
        }
        d
    } else {
        seed
    };
    let ctx = ApplyContext {
        is_insert: true,
        positional: None,
        now: bson::DateTime::now(),
    };
    stmt.update.apply(&mut doc, &ctx)?;
    if !doc.contains_key("_id") {
        doc.insert("_id", bson::oid::ObjectId::new());
    }
    Ok(doc)
}

pub async fn delete(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    argspec::check(&specs::DELETE, &req.body)?;
    let coll_name = args::collection_name(&req.body, "delete")?;
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    let out = run_waiting(state, req, &coll_name, &wc, false, delete_statements).await?;
    out.reply(state, &wc, false).await
}

fn delete_statements(
    state: &ServerState,
    req: &Request,
    name: &str,
    mut out: WriteOutcome,
) -> CommandResult<WriteOutcome> {
    let ts = super::timeseries::lookup(state, &req.db, name);
    if ts.is_some() && storage::nowait::active() {
        // Bucket writes keep state outside storage: only on the pool.
        return Err(crate::offload::refuse());
    }
    if ts.is_none() {
        state.catalog.check_not_view(&req.db, name)?;
    }
    let ordered = args::opt_bool(&req.body, "delete", "ordered")?.unwrap_or(true);
    let stmts = owned(statements(req, "deletes")?);
    check_entries(&specs::DELETE_ENTRY, &stmts)?;
    let vars = args::let_variables(&req.body, "delete")?;
    let coll = state.catalog.collection(&req.db, name);
    let retryable = is_retryable(req);
    for (i, raw) in stmts.iter().enumerate().skip(out.resume_at) {
        let multi = matches!(raw.get("limit"), Ok(Some(v)) if v.as_i32() == Some(0)
            || v.as_i64() == Some(0) || v.as_f64() == Some(0.0));
        let result = check_retryable_multi(retryable, multi).and_then(|()| match &ts {
            Some(ts) => {
                let q = to_document(raw)?
                    .get_document("q")
                    .map(|q| args::bind_let(q, vars.as_ref()))
                    .unwrap_or_default();
                super::timeseries::delete(ts, &req.db, &q, multi, &mut out)
            }
            None => run_delete(coll.as_ref(), &req.db, name, raw, vars.as_ref(), &mut out),
        });
        if out.blocked_on.is_some() {
            out.resume_at = i;
            return Ok(out);
        }
        if !storage::nowait::dropping() {
            state.opcounters.delete.fetch_add(1, Relaxed);
        }
        if let Err(e) = result {
            out.error(i, e);
            if ordered {
                break;
            }
        }
    }
    Ok(out)
}

pub(super) fn run_delete(
    coll: Option<&Arc<Collection>>,
    db: &str,
    name: &str,
    raw: &RawDocumentBuf,
    vars: Option<&Document>,
    out: &mut WriteOutcome,
) -> CommandResult<()> {
    let s = to_document(raw)?;
    let _collation = args::collation_scope(&s, "delete.deletes", coll.map(|c| c.as_ref()))?;
    let filter_doc = match s.get("q") {
        Some(Bson::Document(d)) => args::bind_let(d, vars),
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "BSON field 'delete.deletes.q' is missing but a required field",
            ));
        }
    };
    let limit = match s.get("limit").and_then(super::as_i64) {
        Some(0) => false,
        Some(1) => true,
        _ => {
            return Err(err(
                ErrorCode::FailedToParse,
                "The limit field in delete objects must be 0 or 1. Got ",
            ));
        }
    };
    let filter = Filter::parse(&filter_doc)?;
    let Some(coll) = coll else { return Ok(()) };
    args::check_hint(&s, Some(coll))?;
    let targets = match_ids(coll, &filter, &filter_doc, limit)?;
    if out.held_by_transaction(coll, targets.iter().map(|(rid, _)| *rid)) {
        return Ok(());
    }
    let n = targets.len() as i64;
    for chunk in targets.chunks(WRITE_CHUNK_COUNT) {
        let ops = chunk.iter().map(|(rid, _)| WriteOp::Delete(*rid)).collect();
        let t = crate::txn::write(coll, ops).map_err(|e| storage_error(e, db, name))?;
        out.keep(t);
    }
    out.n += n;
    Ok(())
}

/// Parse an update statement given as parts (findAndModify's `update` + `arrayFilters`).
pub(super) fn stmt_from(
    db: &str,
    coll: &str,
    filter_doc: Document,
    update: &Bson,
    upsert: bool,
    array_filters: Option<&Bson>,
) -> CommandResult<UpdateStmt> {
    let mut s = doc! { "q": filter_doc, "u": update.clone(), "upsert": upsert };
    if let Some(af) = array_filters {
        s.insert("arrayFilters", af.clone());
    }
    let raw =
        RawDocumentBuf::try_from(&s).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
    parse_update_stmt(&raw, db, coll, None)
}
