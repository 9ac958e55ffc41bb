//! `$out` and `$merge`: writing an aggregation's results. `$out` builds the new contents in a
//! temporary collection and renames it over the target once durable; `$merge` matches each
//! result on its `on` fields under the target's namespace lock. Writes run on the storage pool;
//! the durability waits stay async.

use super::crud_write::prepare_document;
use super::{Request, off_thread};
use crate::error::{CommandResult, storage_error};
use crate::exec::aggregate::to_doc;
use crate::query::matcher::Filter;
use crate::query::pipeline::output::merge_documents;
use crate::query::pipeline::{OutputMode, OutputTarget};
use crate::state::ServerState;
use bson::Document;
use std::sync::Arc;
use storage::{Ticket, WriteOp};

/// `$out` replaces the target atomically (built in a temporary collection, then renamed over
/// it); `$merge` inserts or updates document by document under the target's write lock. The
/// writes run on the blocking pool; the wait for durability does not.
pub async fn write_output(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
    target: OutputTarget,
    output: Vec<Document>,
) -> CommandResult<()> {
    crate::catalog::validate_collection_name(&target.db, &target.coll)?;
    crate::catalog::check_user_writable(&target.db, &target.coll)?;
    state.catalog.check_not_view(&target.db, &target.coll)?;
    match target.mode {
        OutputMode::Out => {
            let temp = format!("tmp.agg_out.{}", bson::oid::ObjectId::new());
            let (db, name, tmp) = (target.db.clone(), target.coll.clone(), temp.clone());
            let last = off_thread(state, req, move |state, _| {
                let last = write_temp(state, &db, &name, &tmp, output)?;
                if let Some(t) = &last {
                    state.catalog.sync_if_idle(t, &Default::default());
                }
                Ok(last)
            })
            .await?;
            // The target is replaced only after every chunk is durable in the temporary collection.
            if let Some(t) = last {
                state.catalog.finish_write(&t, &Default::default()).await?;
            }
            off_thread(state, req, move |state, _| {
                let (db, name) = (target.db.as_str(), target.coll.as_str());
                state
                    .catalog
                    .engine()
                    .rename_collection(db, &temp, db, name, true)
                    .map_err(|e| storage_error(e, db, name))?;
                state.cursors.invalidate(db, Some(name));
                Ok(())
            })
            .await
        }
        OutputMode::Merge { .. } => {
            let guard = state.catalog.lock(&target.db, &target.coll).await;
            let last = off_thread(state, req, move |state, _| {
                let last = merge_into(state, &target, output);
                drop(guard);
                let last = last?;
                if let Some(t) = &last {
                    state.catalog.sync_if_idle(t, &Default::default());
                }
                Ok(last)
            })
            .await?;
            if let Some(t) = last {
                state.catalog.finish_write(&t, &Default::default()).await?;
            }
            Ok(())
        }
    }
}

/// `$out`'s documents into the temporary collection, in storage-sized chunks.
fn write_temp(
    state: &ServerState,
    db: &str,
    name: &str,
    temp: &str,
    output: Vec<Document>,
) -> CommandResult<Option<Ticket>> {
    let coll = state.catalog.get_or_create(db, temp)?;
    let ops = output
        .into_iter()
        .map(|d| prepare_document(d).map(|d| WriteOp::Insert(d.into())))
        .collect::<CommandResult<Vec<_>>>()?;
    let mut last = None;
    for chunk in ops.chunks(10_000) {
        last = Some(
            coll.write(chunk.to_vec())
                .map_err(|e| storage_error(e, db, name))?,
        );
    }
    Ok(last)
}

/// `$merge`: each document matched on `on` and inserted, replaced or merged.
fn merge_into(
    state: &ServerState,
    target: &OutputTarget,
    output: Vec<Document>,
) -> CommandResult<Option<Ticket>> {
    let OutputMode::Merge {
        on,
        when_matched,
        when_not_matched,
    } = &target.mode
    else {
        return Ok(None);
    };
    let (db, name) = (target.db.as_str(), target.coll.as_str());
    let coll = state.catalog.get_or_create(db, name)?;
    let mut last = None;
    for new in output {
        let key: Document = on
            .iter()
            .filter_map(|f| new.get(f).map(|v| (f.clone(), v.clone())))
            .collect();
        let existing =
            crate::exec::collect_matches(&coll, &Filter::parse(&key)?, &key, None, None, Some(1))?;
        let existing_doc = existing
            .first()
            .map(|(_, raw, _)| to_doc(raw))
            .transpose()?;
        let Some(result) =
            merge_documents(existing_doc.as_ref(), &new, when_matched, *when_not_matched)?
        else {
            continue;
        };
        let raw = prepare_document(result)?;
        let op = match existing.first() {
            Some((rid, _, _)) => WriteOp::Replace(*rid, raw),
            None => WriteOp::Insert(raw.into()),
        };
        last = Some(
            coll.write(vec![op])
                .map_err(|e| storage_error(e, db, name))?,
        );
    }
    Ok(last)
}
