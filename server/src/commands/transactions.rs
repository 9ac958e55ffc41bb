//! Multi-document transactions at the command level (replica-set mode): a statement carrying
//! `autocommit: false` gets its session's transaction attached (`startTransaction` opens one on a
//! fresh storage snapshot), runs like any command with that transaction installed on its thread
//! (`crate::txn`), and a failure aborts the transaction as mongod does; `commitTransaction`
//! writes the buffered writes as one durable batch and `abortTransaction` drops them. The session
//! state machine is `crate::sessions`; `endSessions`/`killSessions` abort what they end.

use super::{Reply, Request};
use crate::catalog::WriteConcern;
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::sessions::TxnStatement;
use crate::state::ServerState;
use crate::txn::Txn;
use bson::{Bson, doc};
use std::sync::Arc;

/// Attaches the statement's transaction to the request (opening it for `startTransaction`).
pub async fn attach(
    state: &Arc<ServerState>,
    req: &Request,
    ts: &TxnStatement,
) -> CommandResult<()> {
    let txn = state
        .sessions
        .statement(ts, || {
            // The first statement's readConcern may name the snapshot's atClusterTime.
            let snap = super::snapshot_read::transaction_snapshot(state, &req.body)?;
            Ok(Txn::begin(&state.txns, snap))
        })
        .await?;
    // A request is dispatched once, so the cell is empty here.
    let _ = req.txn.set(txn);
    Ok(())
}

/// `commitTransaction` / `abortTransaction` of a transaction; None for any other command.
pub async fn end(
    state: &Arc<ServerState>,
    req: &Request,
    ts: &TxnStatement,
) -> Option<CommandResult<Reply>> {
    match req.command {
        "commitTransaction" => Some(commit(state, req, ts).await),
        "abortTransaction" => Some(state.sessions.abort(ts).await.map(|()| Reply::ok())),
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
    let reply = state
        .sessions
        .commit(ts, |txn| async move {
            let ticket =
                crate::offload::run(state, "commitTransaction", Some(&req.op), move |_| {
                    txn.commit(note).map_err(|e| storage_error(e, "", ""))
                })
                .await?;
            if let Some(t) = &ticket {
                state.catalog.finish_write(t, &wc).await?;
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
    state: &ServerState,
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
    match result {
        Err(e) if e.code == ErrorCode::WriteConflict => Err(e.transient()),
        Ok(Reply::Doc(d)) => {
            let conflict =
                d.get_array("writeErrors")
                    .ok()
                    .and_then(|errors| {
                        errors.iter().filter_map(Bson::as_document).find(|e| {
                            e.get_i32("code").ok() == Some(ErrorCode::WriteConflict.code())
                        })
                    })
                    .map(|e| e.get_str("errmsg").unwrap_or_default().to_string());
            match conflict {
                Some(m) => Err(err(ErrorCode::WriteConflict, m).transient()),
                None => Ok(Reply::Doc(d)),
            }
        }
        other => other,
    }
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
fn named_sessions(req: &Request) -> Vec<Vec<u8>> {
    let Ok(list) = req.body.get_array(req.command) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|v| crate::sessions::session_key(v).ok())
        .map(|(k, _)| k)
        .collect()
}

/// Aborts the open transactions of the sessions the command ends or kills.
pub fn end_sessions(state: &ServerState, req: &Request) {
    let aborted = match req.command {
        "endSessions" | "killSessions" => state.sessions.abort_sessions(Some(&named_sessions(req))),
        _ => state.sessions.abort_sessions(None),
    };
    if aborted > 0 {
        tracing::info!(
            count = aborted as u64,
            "aborted the transactions of ended sessions"
        );
    }
}
