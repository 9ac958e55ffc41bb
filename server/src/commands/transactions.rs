//! Multi-document transactions at the command level (replica-set mode): a statement carrying
//! `autocommit: false` gets its session's transaction attached (`startTransaction` opens one on a
//! fresh storage snapshot), runs like any command with that transaction installed on its thread
//! (`crate::txn`), and a failure aborts the transaction as mongod does; `commitTransaction`
//! writes the buffered writes as one durable batch and `abortTransaction` drops them. The session
//! state machine is `crate::sessions`; `endSessions`/`killSessions` abort what they end.
//!
//! Limits: a statement holds the namespaces it touches shared (`crate::ns_locks`) until the
//! transaction ends, so DDL on them waits; one that cannot get them within
//! `maxTransactionLockRequestTimeoutMillis` fails with LockTimeout (labelled
//! TransientTransactionError) and aborts the transaction. The write set is bounded by
//! `transactionMemoryLimitBytes` (TransactionTooLargeForCache, unlabelled, as in mongod 7.0).

use super::{Reply, Request};
use crate::catalog::WriteConcern;
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::ns_locks::Target;
use crate::sessions::TxnStatement;
use crate::state::ServerState;
use crate::txn::{Active, Created, Options, Txn};
use bson::{Bson, Document, doc};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Attaches the statement's transaction to the request (opening it for `startTransaction`) and
/// takes the namespaces the statement touches; the guard marks the statement running.
pub async fn attach(
    state: &Arc<ServerState>,
    req: &Request,
    ts: &TxnStatement,
) -> CommandResult<Active> {
    let txn = state
        .sessions
        .statement(ts, || {
            // The first statement's readConcern may name the snapshot's atClusterTime.
            let snap = super::snapshot_read::transaction_snapshot(state, &req.body)?;
            Ok(Txn::begin_with(&state.txns, snap, options(state, req)))
        })
        .await?;
    let active = txn.activate();
    // A request is dispatched once, so the cell is empty here.
    let _ = req.txn.set(txn.clone());
    let locked = txn
        .lock_namespaces(
            &state.catalog.ns_locks,
            &with_view_sources(state, statement_targets(req)),
            lock_timeout(state),
        )
        .await;
    if let Err(e) = locked {
        state.sessions.abort_after_error(ts).await;
        return Err(e.transient());
    }
    Ok(active)
}

fn options(state: &ServerState, req: &Request) -> Options {
    let limit = state.params.get_i64("transactionMemoryLimitBytes").max(1);
    Options {
        memory_limit_bytes: usize::try_from(limit).unwrap_or(usize::MAX),
        read_concern: req
            .body
            .get_document("readConcern")
            .cloned()
            .unwrap_or_default(),
        read_timestamp: crate::clock::last_committed(state),
    }
}

/// The namespaces a DDL command takes exclusive (None: not one of them). Names it cannot
/// read are left to the handler's own checks.
fn ddl_targets(req: &Request) -> Option<Vec<Target>> {
    let split = |ns: &str| ns.split_once('.').map(|(d, c)| Target::collection(d, c));
    let targets = match req.command {
        "drop" | "createIndexes" | "collMod" | "dropIndexes" => {
            vec![Target::collection(
                &req.db,
                req.body.get_str(req.command).ok()?,
            )]
        }
        "dropDatabase" => vec![Target::database(&req.db)],
        "renameCollection" => ["renameCollection", "to"]
            .iter()
            .filter_map(|k| req.body.get_str(k).ok().and_then(split))
            .collect(),
        _ => return None,
    };
    Some(targets)
}

/// For a DDL command: its namespaces exclusive, once the transactions holding them end
/// (bounded by its maxTimeMS, ended by killOp), held until the command is done.
pub async fn ddl_lock(
    state: &ServerState,
    req: &Request,
) -> CommandResult<Option<crate::ns_locks::Exclusive>> {
    // createIndexes inside a transaction only builds on a collection the transaction made
    // (`explicit_ddl_check`), which no other transaction can be holding.
    if req.txn.get().is_some() || req.body.contains_key("autocommit") {
        return Ok(None);
    }
    let Some(targets) = ddl_targets(req).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let held = state.catalog.ns_locks.exclusive(&targets, &req.op).await?;
    // An index build waits for the transactions on its collection, then lets go: as mongod's
    // hybrid build holds X only to start, transactions go on while it scans (what it needs
    // excluded during its checks, the catalog's write lock excludes).
    if req.command == "createIndexes" {
        return Ok(None);
    }
    Ok(Some(held))
}

/// `create` and `createIndexes` inside a transaction: only under readConcern "local" (the
/// default), as mongod (InvalidOptions otherwise), and never on a system collection.
pub fn explicit_ddl_check(req: &Request, coll: &str) -> CommandResult<()> {
    let Some(txn) = req.txn.get() else {
        return Ok(());
    };
    let level = txn.options.read_concern.get_str("level").unwrap_or("local");
    if level != "local" {
        return Err(err(
            ErrorCode::InvalidOptions,
            format!(
                "{} in a multi-document transaction needs readConcern level 'local'; this \
                 transaction has '{level}'",
                req.command
            ),
        ));
    }
    if coll.starts_with("system.") {
        return Err(err(
            ErrorCode::OperationNotSupportedInTransaction,
            format!(
                "Cannot write to system collection {}.{coll} within a transaction.",
                req.db
            ),
        ));
    }
    Ok(())
}

/// `maxTransactionLockRequestTimeoutMillis`; negative: as long as a transaction may live.
fn lock_timeout(state: &ServerState) -> Duration {
    let ms = state
        .params
        .get_i64("maxTransactionLockRequestTimeoutMillis");
    match u64::try_from(ms) {
        Ok(ms) => Duration::from_millis(ms),
        Err(_) => {
            let s = state
                .params
                .get_i64("transactionLifetimeLimitSeconds")
                .max(1);
            Duration::from_secs(s as u64)
        }
    }
}

/// The namespaces a statement reads or writes: its collection (the database alone for
/// `aggregate: 1`), and for `aggregate` the collections its `$lookup`, `$graphLookup` and
/// `$unionWith` stages name, nested pipelines included.
pub fn statement_targets(req: &Request) -> Vec<Target> {
    let db = req.db.as_str();
    let mut out = Vec::new();
    let main = match req.command {
        "getMore" => req.body.get_str("collection").ok(),
        "killCursors" => return out,
        c => req.body.get_str(c).ok(),
    };
    match main {
        Some(c) => out.push(Target::collection(db, c)),
        None => out.push(Target::database(db)),
    }
    if req.command == "aggregate"
        && let Ok(p) = req.body.get_array("pipeline")
    {
        pipeline_targets(db, p, &mut out, 0);
    }
    out
}

/// `targets` plus, for each view among them, what it reads: its source and the collections its
/// pipeline names, views of views followed (up to `PIPELINE_DEPTH_MAX`), so DDL on a view's
/// source waits for a transaction reading through the view, as mongod's locks make it.
fn with_view_sources(state: &ServerState, targets: Vec<Target>) -> Vec<Target> {
    let mut out = targets.clone();
    let mut todo = targets;
    let mut depth = 0;
    while !todo.is_empty() && depth <= PIPELINE_DEPTH_MAX {
        let mut next = Vec::new();
        for t in todo {
            let Some(coll) = &t.coll else { continue };
            let Ok(Some(view)) = super::views::get(state, &t.db, coll) else {
                continue;
            };
            let mut found = vec![Target::collection(&t.db, &view.view_on)];
            let stages: Vec<Bson> = view.pipeline.into_iter().map(Bson::Document).collect();
            pipeline_targets(&t.db, &stages, &mut found, 0);
            for f in found {
                if !out.contains(&f) {
                    out.push(f.clone());
                    next.push(f);
                }
            }
        }
        todo = next;
        depth += 1;
    }
    out
}

/// How deep nested pipelines are followed for their namespaces (mongod's own nesting bound
/// stops a client long before this matters).
const PIPELINE_DEPTH_MAX: usize = 20;

fn pipeline_targets(db: &str, pipeline: &[Bson], out: &mut Vec<Target>, depth: usize) {
    if depth > PIPELINE_DEPTH_MAX {
        return;
    }
    for stage in pipeline.iter().filter_map(Bson::as_document) {
        for (name, spec) in stage {
            let (from, nested): (Option<&str>, Vec<&Vec<Bson>>) = match (name.as_str(), spec) {
                ("$lookup" | "$graphLookup", Bson::Document(d)) => (
                    d.get_str("from").ok(),
                    d.get_array("pipeline").ok().into_iter().collect(),
                ),
                ("$unionWith", Bson::String(c)) => (Some(c.as_str()), Vec::new()),
                ("$unionWith", Bson::Document(d)) => (
                    d.get_str("coll").ok(),
                    d.get_array("pipeline").ok().into_iter().collect(),
                ),
                ("$facet", Bson::Document(d)) => {
                    (None, d.values().filter_map(Bson::as_array).collect())
                }
                _ => (None, Vec::new()),
            };
            if let Some(c) = from {
                out.push(Target::collection(db, c));
            }
            for p in nested {
                pipeline_targets(db, p, out, depth + 1);
            }
        }
    }
}

/// `commitTransaction` / `abortTransaction` of a transaction; None for any other command.
pub async fn end(
    state: &Arc<ServerState>,
    req: &Request,
    ts: &TxnStatement,
) -> Option<CommandResult<Reply>> {
    match req.command {
        "commitTransaction" => Some(commit(state, req, ts).await),
        "abortTransaction" => {
            let result = state.sessions.abort(ts).await;
            undo_aborted_ddl(state).await;
            Some(result.map(|()| Reply::ok()))
        }
        _ => None,
    }
}

async fn commit(
    state: &Arc<ServerState>,
    req: &Request,
    ts: &TxnStatement,
) -> CommandResult<Reply> {
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    let note = ts.note();
    let (key, number) = (ts.key().to_vec(), ts.txn_number);
    let reply = state
        .sessions
        .commit(ts, |txn| async move {
            let _active = txn.activate();
            let ticket = crate::offload::run(state, "commitTransaction", Some(&req.op), move |s| {
                let record = crate::retry_record::committed_op(s.catalog.engine(), &key, number)
                    .map_err(|e| storage_error(e, "config", "transactions"))?;
                txn.commit(note, Some(record))
                    .map_err(|e| storage_error(e, "", ""))
            })
            .await
            .map_err(|e| match e.code {
                // mongod labels a commit that ran out of time: it may have committed.
                ErrorCode::MaxTimeMSExpired => e.unknown_commit_result(),
                _ => e,
            })?;
            if let Some(t) = &ticket {
                // The batch is applied; only its durability failed: the outcome is unknown.
                state
                    .catalog
                    .finish_write(t, &wc)
                    .await
                    .map_err(|e| e.unknown_commit_result())?;
            }
            let mut r = doc! {};
            if let Some(wce) = wc.error() {
                r.insert("writeConcernError", wce);
            }
            r.insert("ok", 1.0);
            Ok(r)
        })
        .await?;
    Ok(Reply::Doc(reply))
}

/// What a statement's outcome does to its transaction: any failure (a command error or a write
/// error) aborts it; a write conflict fails the command with `TransientTransactionError`, as
/// mongod's does, even where the handler reported it as a write error.
pub async fn after_statement(
    state: &Arc<ServerState>,
    ts: &TxnStatement,
    result: CommandResult<Reply>,
) -> CommandResult<Reply> {
    let failed = match &result {
        Err(_) => true,
        Ok(Reply::Doc(d)) => d.contains_key("writeErrors"),
        Ok(_) => false,
    };
    if !failed {
        return result;
    }
    state.sessions.abort_after_error(ts).await;
    undo_aborted_ddl(state).await;
    let result = match result {
        Err(e) if e.code == ErrorCode::WriteConflict => Err(e.transient()),
        Ok(Reply::Doc(d)) => match command_level_write_error(&d) {
            Some(e) => Err(e),
            None => Ok(Reply::Doc(d)),
        },
        other => other,
    };
    if let Err(e) = &result
        && e.code == ErrorCode::TransactionTooLargeForCache
    {
        state
            .txns
            .too_large_errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    result
}

/// How long undoing one aborted creation waits for its namespace before leaving it to the
/// next pass (the reaper's, every second): a transaction holding the collection shared may be
/// idle for its whole lifetime, and an abort must not wait for it.
const UNDO_LOCK_WAIT_MS: u64 = 50;

/// Undoes what aborted transactions created (`crate::txn::Created`): a collection goes if it
/// still has the UUID the transaction made and no document (nobody wrote into it since), an
/// index if its collection is still that one. Each runs under the namespace's DDL lock (so no
/// open transaction writes into it) and its write lock (so a plain insert either lands first
/// and the collection stays, or comes after and creates it anew); a namespace busy past
/// `UNDO_LOCK_WAIT_MS`, or an fsync-locked server, leaves the item for the next pass.
pub async fn undo_aborted_ddl(state: &Arc<ServerState>) {
    let items = state.txns.take_undo();
    for c in items.into_iter().rev() {
        let (db, coll) = match &c {
            Created::Collection { db, name, .. } => (db.clone(), name.clone()),
            Created::Index { db, coll, .. } => (db.clone(), coll.clone()),
        };
        let op = crate::interrupt::Interrupt::default();
        op.set_deadline(Some(
            Instant::now() + Duration::from_millis(UNDO_LOCK_WAIT_MS),
        ));
        let Ok(_ddl) = state
            .catalog
            .ns_locks
            .exclusive(&[Target::collection(&db, &coll)], &op)
            .await
        else {
            state.txns.requeue_undo(c);
            continue;
        };
        let Some(_gate) = state.catalog.fsync.try_writer() else {
            state.txns.requeue_undo(c);
            continue;
        };
        let _write = state.catalog.lock(&db, &coll).await;
        let item = c.clone();
        let undone =
            crate::offload::run(state, "abortTransaction", None, move |s| undo_one(s, &item)).await;
        match undone {
            Ok(true) => tracing::info!(?c, "undid what an aborted transaction created"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(?c, error = %e.message, "could not undo an aborted transaction's creation")
            }
        }
    }
}

/// One undo step; true when something was dropped.
fn undo_one(state: &ServerState, c: &Created) -> CommandResult<bool> {
    let engine = state.catalog.engine();
    match c {
        Created::Collection { db, name, uuid } => {
            let still = engine
                .collection(db, name)
                .is_some_and(|coll| coll.uuid().bytes() == *uuid && coll.count() == 0);
            if still {
                engine
                    .drop_collection(db, name)
                    .map_err(|e| storage_error(e, db, name))?;
            }
            Ok(still)
        }
        Created::Index {
            db,
            coll,
            uuid,
            index,
        } => {
            let still = engine.collection(db, coll).is_some_and(|c| {
                c.uuid().bytes() == *uuid && c.indexes().iter().any(|i| i.spec.name == *index)
            });
            if still {
                engine
                    .drop_index(db, coll, index)
                    .map_err(|e| storage_error(e, db, coll))?;
            }
            Ok(still)
        }
    }
}

/// The write errors a transaction's statement fails with as a whole, as mongod's do: a
/// write conflict (labelled TransientTransactionError) and a write set past its bound.
fn command_level_write_error(reply: &Document) -> Option<crate::error::CommandError> {
    let errors = reply.get_array("writeErrors").ok()?;
    let found = |code: ErrorCode| {
        errors
            .iter()
            .filter_map(Bson::as_document)
            .find(|e| e.get_i32("code").ok() == Some(code.code()))
            .map(|e| err(code, e.get_str("errmsg").unwrap_or_default()))
    };
    found(ErrorCode::WriteConflict)
        .map(|e| e.transient())
        .or_else(|| found(ErrorCode::TransactionTooLargeForCache))
}

/// commitTransaction/abortTransaction outside a transaction.
pub fn not_in_transaction(req: &Request) -> CommandResult<Reply> {
    Err(err(
        ErrorCode::InvalidOptions,
        format!("{} must be run within a transaction", req.command),
    ))
}

/// The session keys an `endSessions` / `killSessions` names (ids it cannot read are skipped:
/// the command's own checks report them).
fn named_sessions(req: &Request) -> Vec<crate::sessions::registry::SessionId> {
    let Ok(list) = req.body.get_array(req.command) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|v| crate::sessions::session_key(v).ok())
        .collect()
}

/// Ends or kills the sessions the command names (every session for killAll*): `endSessions`
/// unlists them (their records go at the next refresh); all abort their open transactions.
pub async fn end_sessions(state: &Arc<ServerState>, req: &Request) {
    let named = match req.command {
        "endSessions" | "killSessions" => Some(named_sessions(req)),
        _ => None,
    };
    if let Some(ids) = named.as_deref().filter(|_| req.command == "endSessions") {
        state.sessions.end(ids);
    }
    // killSessions (and killAll*) also end what the sessions are running, as mongod's do.
    if req.command != "endSessions" {
        let killed = state.ops.kill_sessions(named.as_deref(), &req.op);
        if killed > 0 {
            tracing::info!(
                count = killed as u64,
                "killed the running operations of sessions"
            );
        }
    }
    let aborted = state.sessions.abort_sessions(named.as_deref()).await;
    undo_aborted_ddl(state).await;
    if aborted > 0 {
        tracing::info!(
            count = aborted as u64,
            "aborted the transactions of ended sessions"
        );
    }
}

/// Who runs a statement, as an idle transaction's currentOp entry shows it afterwards.
pub fn statement_client(conn: &super::ConnectionInfo) -> crate::txn::StatementClient {
    use sha2::Digest;
    let name = conn
        .auth
        .user()
        .map(|u| format!("{}.{}", u.db, u.name))
        .unwrap_or_default();
    crate::txn::StatementClient {
        connection_id: conn.id,
        client: conn.peer.to_string(),
        client_metadata: conn.client_metadata.clone(),
        uid: sha2::Sha256::digest(name.as_bytes()).into(),
    }
}

/// A time as currentOp shows a transaction's start and expiry.
fn wall_text(t: bson::DateTime) -> String {
    t.try_to_rfc3339_string().unwrap_or_default()
}

/// The open transactions no statement runs on now, as mongod's `currentOp` shows idle
/// sessions that hold a transaction.
pub fn idle_transactions(state: &ServerState) -> Vec<Document> {
    let lifetime_ms = state
        .params
        .get_i64("transactionLifetimeLimitSeconds")
        .max(1)
        .saturating_mul(1000);
    let mut out = Vec::new();
    for (lsid, txn_number, txn) in state.sessions.open_transactions() {
        let (running, active) = txn.active_time();
        if running || txn.ended() {
            continue;
        }
        let open = txn.started.elapsed();
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        let expiry = bson::DateTime::from_millis(
            txn.started_wall
                .timestamp_millis()
                .saturating_add(lifetime_ms),
        );
        let client = txn.last_client().unwrap_or_default();
        let uid = bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: client.uid.to_vec(),
        };
        let mut entry = doc! {
            "type": "idleSession",
            "host": format!("{}:{}", crate::sysinfo::hostname(), state.config.port),
            "desc": "inactive transaction",
            "client": client.client,
            "connectionId": client.connection_id,
        };
        if let Some(m) = client.client_metadata {
            if let Ok(app) = m.get_document("application")
                && let Ok(name) = app.get_str("name")
            {
                entry.insert("appName", name);
            }
            entry.insert("clientMetadata", m);
        }
        entry.extend(doc! {
            "active": false,
            "lsid": { "id": lsid, "uid": uid },
            "transaction": {
                "parameters": {
                    "txnNumber": txn_number,
                    "autocommit": false,
                    "readConcern": txn.options.read_concern.clone(),
                },
                "readTimestamp": txn.options.read_timestamp,
                "startWallClockTime": wall_text(txn.started_wall),
                "timeOpenMicros": micros(open),
                "timeActiveMicros": micros(active),
                "timeInactiveMicros": micros(open.saturating_sub(active)),
                "expiryTime": wall_text(expiry),
            },
            "waitingForLock": false,
            "locks": {},
        });
        out.push(entry);
    }
    out
}
