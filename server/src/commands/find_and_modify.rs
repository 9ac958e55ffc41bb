//! `findAndModify`: find one document (by `query` and `sort`), then remove it or update it (or
//! upsert), and return the document before or after, all under the namespace's write lock.

use super::args;
use super::argspec::{self, specs};
use super::crud_write::{UpdateStmt, prepare_document, stmt_from, updated_doc, upsert_document};
use super::{Reply, Request};
use crate::catalog::WriteConcern;
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::query::matcher::Filter;
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;
use crate::state::ServerState;
use bson::{Bson, Document, RawDocumentBuf, doc};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use storage::WriteOp;

struct Args {
    filter_doc: Document,
    filter: Filter,
    sort: Option<SortSpec>,
    stmt: Option<UpdateStmt>,
    return_new: bool,
    fields: Option<Projection>,
}

fn parse(body: &Document, db: &str, coll: &str) -> CommandResult<Args> {
    argspec::check(&specs::FIND_AND_MODIFY, body)?;
    // Validated here, before the lock; made current in `find_and_change`.
    args::collator(body, "findAndModify", None)?;
    let vars = args::let_variables(body, "findAndModify")?;
    let filter_doc = args::bind_let(
        &args::opt_doc(body, "findAndModify", "query")?
            .cloned()
            .unwrap_or_default(),
        vars.as_ref(),
    );
    let remove = args::opt_bool(body, "findAndModify", "remove")?.unwrap_or(false);
    let return_new = args::opt_bool(body, "findAndModify", "new")?.unwrap_or(false);
    let upsert = args::opt_bool(body, "findAndModify", "upsert")?.unwrap_or(false);
    let update = body.get("update").filter(|u| !matches!(u, Bson::Null));
    match (remove, update.is_some()) {
        (true, true) => {
            return Err(err(
                ErrorCode::FailedToParse,
                "Cannot specify both an update and remove=true",
            ));
        }
        (false, false) => {
            return Err(err(
                ErrorCode::FailedToParse,
                "Either an update or remove=true must be specified",
            ));
        }
        _ => {}
    }
    if remove && return_new {
        return Err(err(
            ErrorCode::FailedToParse,
            "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
        ));
    }
    if remove && upsert {
        return Err(err(
            ErrorCode::FailedToParse,
            "Cannot specify both upsert=true and remove=true",
        ));
    }
    let stmt = match update {
        Some(u) => Some(stmt_from(
            db,
            coll,
            filter_doc.clone(),
            u,
            upsert,
            body.get("arrayFilters"),
        )?),
        None => None,
    };
    let sort = match args::opt_doc(body, "findAndModify", "sort")? {
        Some(s) if !s.is_empty() => Some(SortSpec::parse(s)?),
        _ => None,
    };
    let fields = match args::opt_doc(body, "findAndModify", "fields")? {
        Some(f) if !f.is_empty() => Some(Projection::parse(f)?),
        _ => None,
    };
    Ok(Args {
        filter: Filter::parse(&filter_doc)?,
        filter_doc,
        sort,
        stmt,
        return_new,
        fields,
    })
}

fn project(fields: &Option<Projection>, doc: &RawDocumentBuf) -> CommandResult<Bson> {
    Ok(match fields {
        Some(p) => Bson::Document(p.apply(doc, None)?),
        None => Bson::Document(
            Document::try_from(doc.as_ref())
                .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?,
        ),
    })
}

pub async fn run(state: &Arc<ServerState>, req: &Arc<Request>) -> CommandResult<Reply> {
    let name = args::collection_name(&req.body, &req.name)?;
    let wc = WriteConcern::parse(req.write_concern.as_ref())?;
    let a = parse(&req.body, &req.db, &name)?;
    crate::catalog::check_user_writable(&req.db, &name)?;
    let a = Arc::new(a);
    // A target an open transaction holds: wait for it to end (holding nothing), then look for
    // the target again, as a plain update does (`crud_write::run_waiting`).
    let (value, last_error, ticket) = loop {
        let guard = state.catalog.lock(&req.db, &name).await;
        // Announced once the lock is held, as a plain update is (`crud_write::run_waiting`).
        let pending = state.catalog.pending_writer(&wc);
        let (name, a) = (name.clone(), a.clone());
        let step = super::off_thread(state, req, move |state, req| {
            let outcome = find_and_change(state, req, &name, &a);
            // The lock is released before the sync: other writers need not wait for it.
            drop(guard);
            let outcome = outcome?;
            if let Changed::Done(o) = &outcome
                && let Some(t) = &o.2
            {
                state.catalog.sync_if_idle_pending(t, pending);
            }
            Ok(outcome)
        })
        .await?;
        match step {
            Changed::Done(o) => break *o,
            Changed::Blocked(key) => state.txns.wait_released(key, &req.op).await?,
        }
    };
    if let Some(t) = &ticket {
        state.catalog.finish_write(t, &wc).await?;
    }
    let mut reply = doc! { "lastErrorObject": last_error, "value": value };
    if let Some(wce) = wc.error() {
        reply.insert("writeConcernError", wce);
    }
    reply.insert("ok", 1.0);
    Ok(Reply::Doc(reply))
}

/// The value to return, `lastErrorObject`, and the write's ticket.
type Outcome = (Bson, Document, Option<storage::Ticket>);

/// What one attempt did: the outcome, or nothing because an open transaction holds the target.
enum Changed {
    Done(Box<Outcome>),
    Blocked(crate::txn::DocKey),
}

/// The storage part, under the namespace lock: find the target, then remove, update or upsert.
fn find_and_change(
    state: &ServerState,
    req: &Request,
    name: &str,
    a: &Args,
) -> CommandResult<Changed> {
    state.catalog.check_not_view(&req.db, name)?;
    let _collation = args::collation_scope(
        &req.body,
        "findAndModify",
        state.catalog.collection(&req.db, name).as_deref(),
    )?;
    let coll = state.catalog.collection(&req.db, name);
    let bypass = args::opt_bool(&req.body, &req.name, "bypassDocumentValidation")?.unwrap_or(false);
    args::check_hint(&req.body, coll.as_deref())?;
    let target = match &coll {
        Some(c) => {
            let limit = if a.sort.is_some() { None } else { Some(1) };
            let deadline = super::crud_read::deadline(req);
            let mut matches =
                crate::exec::collect_matches(c, &a.filter, &a.filter_doc, deadline, None, limit)?;
            if let Some(sort) = &a.sort {
                matches.sort_by(|x, y| sort.compare(&x.1, &y.1));
            }
            matches.into_iter().next()
        }
        None => None,
    };
    if let (Some((rid, _, _)), Some(c)) = (&target, &coll)
        && req.txn.get().is_none()
        && let Some(key) = state.txns.first_held(c.uuid().bytes(), [*rid])
    {
        return Ok(Changed::Blocked(key));
    }
    let outcome = match (target, &a.stmt) {
        (Some((rid, doc, _)), None) => {
            state.opcounters.delete.fetch_add(1, Relaxed);
            let coll = coll
                .as_ref()
                .ok_or_else(|| err(ErrorCode::InternalError, "collection vanished"))?;
            let t = crate::txn::write(coll, vec![WriteOp::Delete(rid)])
                .map_err(|e| storage_error(e, &req.db, name))?;
            (project(&a.fields, &doc)?, doc! { "n": 1 }, t)
        }
        (Some((rid, doc, pos)), Some(stmt)) => {
            state.opcounters.update.fetch_add(1, Relaxed);
            let coll = coll
                .as_ref()
                .ok_or_else(|| err(ErrorCode::InternalError, "collection vanished"))?;
            let (after, ticket) = match updated_doc(stmt, &doc, pos)? {
                Some(next) => {
                    super::validation::Checker::new(Some(coll), bypass)?.update(&doc, &next)?;
                    let op = super::crud_write::update_op(stmt, rid, next.clone());
                    let t = crate::txn::write(coll, vec![op])
                        .map_err(|e| storage_error(e, &req.db, name))?;
                    (next, t)
                }
                None => (doc.clone(), None),
            };
            let shown = if a.return_new { &after } else { &doc };
            (
                project(&a.fields, shown)?,
                doc! { "n": 1, "updatedExisting": true },
                ticket,
            )
        }
        (None, Some(stmt)) if stmt.upsert => {
            state.opcounters.update.fetch_add(1, Relaxed);
            let new_doc = upsert_document(stmt)?;
            let id = new_doc.get("_id").cloned().unwrap_or(Bson::Null);
            let raw = prepare_document(new_doc)?;
            let coll = state.catalog.get_or_create(&req.db, name)?;
            super::validation::Checker::new(Some(&coll), bypass)?.insert(&raw)?;
            let t = crate::txn::write(&coll, vec![WriteOp::Insert(raw.clone().into())])
                .map_err(|e| storage_error(e, &req.db, name))?;
            let value = if a.return_new {
                project(&a.fields, &raw)?
            } else {
                Bson::Null
            };
            (
                value,
                doc! { "n": 1, "updatedExisting": false, "upserted": id },
                t,
            )
        }
        (None, Some(_)) => (Bson::Null, doc! { "n": 0, "updatedExisting": false }, None),
        (None, None) => (Bson::Null, doc! { "n": 0 }, None),
    };
    Ok(Changed::Done(Box::new(outcome)))
}
